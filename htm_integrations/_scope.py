"""Whose memory an adapter works in: the conversation scope every htm adapter shares.

The scope lives in the core (:mod:`htm_core.scope`), so that the ``htm`` command's
``--user`` and the adapters work in the same scopes with the same keys and tags; the names
are re-exported here for the adapters.
"""

from __future__ import annotations

from htm_core.scope import (
    HASHED,
    ROOT,
    ChatScope,
    check_topic_tags,
    id_slug,
    narrow,
)

__all__ = ["HASHED", "ROOT", "ChatScope", "check_topic_tags", "id_slug", "narrow"]
