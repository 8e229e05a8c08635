"""The working memory: token-budgeted, evicting by policy, assembling prompt context."""

from .context import STRATEGIES
from .eviction import POLICIES, EvictionPolicy, WorkingItem, get_policy
from .memory import DEFAULT_SAFETY_MARGIN, WorkingMemory

__all__ = [
    "DEFAULT_SAFETY_MARGIN",
    "POLICIES",
    "STRATEGIES",
    "EvictionPolicy",
    "WorkingItem",
    "WorkingMemory",
    "get_policy",
]
