"""LlamaIndex adapters for :class:`htm_core.HTM` (``pip install -e ".[llamaindex]"`` in a clone).

:class:`HTMMemory` (a ``BaseMemory`` for chat engines and agents), :class:`HTMMemoryBlock`
(a block of LlamaIndex's ``Memory``), :class:`HTMVectorStore` (for ``VectorStoreIndex``),
:func:`htm_tools` (``remember`` / ``recall`` / ``forget`` for agents), and
:class:`HTMEmbedding` / :class:`LlamaIndexEmbedder` (one embedding model on both sides)::

    engine = SimpleChatEngine.from_defaults(llm=llm, memory=HTMMemory.from_defaults(htm=htm))

See docs/llamaindex.md.
"""

from htm_core.errors import missing_extra

try:
    import llama_index.core  # noqa: F401
except ImportError:
    raise missing_extra("llama-index-core", "llamaindex") from None

from .block import HTMMemoryBlock
from .embedding import HTMEmbedding, LlamaIndexEmbedder
from .memory import HTMMemory
from .tools import htm_tools
from .vector_store import HTMVectorStore, UnsupportedFilterError

__all__ = [
    "HTMEmbedding",
    "HTMMemory",
    "HTMMemoryBlock",
    "HTMVectorStore",
    "LlamaIndexEmbedder",
    "UnsupportedFilterError",
    "htm_tools",
]
