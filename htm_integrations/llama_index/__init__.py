"""LlamaIndex adapters for :class:`htm_core.HTM` (``pip install -e ".[llamaindex]"`` in a clone).

- :class:`HTMMemory`: a ``llama_index.core.memory.BaseMemory`` for chat engines and
  agents: the recent conversation plus recalled long-term memories, within a token limit.
- :class:`HTMMemoryBlock`: a ``BaseMemoryBlock`` for LlamaIndex's ``Memory`` class, so
  htm recall joins LlamaIndex's own short-term memory.
- :class:`HTMVectorStore`: a ``BasePydanticVectorStore`` for ``VectorStoreIndex``.
- :func:`htm_tools`: ``remember`` / ``recall`` / ``forget`` as ``FunctionTool``s, so an
  agent (``FunctionAgent``) manages its own memory.
- :class:`HTMEmbedding` (an htm embedder as a LlamaIndex ``BaseEmbedding``) and
  :class:`LlamaIndexEmbedder` (a LlamaIndex ``BaseEmbedding`` as the ``HTM`` embedder).

::

    from htm_core import HTM
    from htm_integrations.llama_index import HTMMemory
    from llama_index.core.chat_engine import SimpleChatEngine

    htm = HTM(robot="assistant")
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=HTMMemory.from_defaults(htm=htm))
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
