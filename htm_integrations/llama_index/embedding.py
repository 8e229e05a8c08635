"""Embedding adapters in both directions, so htm and LlamaIndex use one model.

- :class:`HTMEmbedding` is a LlamaIndex ``BaseEmbedding`` that runs an htm embedder (or the
  one an ``HTM`` uses), so LlamaIndex computes the same vectors htm stores; it also satisfies
  htm's ``Embedder`` protocol under the wrapped embedder's name.
- :class:`LlamaIndexEmbedder` makes any LlamaIndex ``BaseEmbedding`` the ``HTM`` embedder.

``embed_model = HTMEmbedding(htm=htm)``; ``HTM(embedder=LlamaIndexEmbedder(embed_model))``.
See docs/llamaindex.md ("Embeddings: one model on both sides").
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr

from htm_core import HTM
from htm_core.embeddings import embedder_name, resolve_embedder
from htm_core.errors import EmbeddingError

from .._options import refuse_unknown

__all__ = ["HTMEmbedding", "LlamaIndexEmbedder"]


class HTMEmbedding(BaseEmbedding):
    """An htm embedder as a LlamaIndex ``BaseEmbedding``.

    Args:
        embedder: an htm embedder (anything with ``embed_documents``/``embed_query``) or
            an embedder spec such as ``"hashing"``; mutually exclusive with ``htm``.
        htm: use the embedder of this ``HTM`` instance.
        **kwargs: ``BaseEmbedding`` fields (``embed_batch_size``...); any other keyword
            raises :class:`~htm_core.errors.ValidationError`.

    >>> from htm_core import HashingEmbedder
    >>> model = HTMEmbedding(HashingEmbedder(dim=64))
    >>> len(model.get_query_embedding("hello")), model.model_name
    (64, 'hashing-v1-64')
    """

    model_name: str = Field(default="htm", description="The wrapped htm embedder's name.")
    _embedder: Any = PrivateAttr()

    def __init__(self, embedder: Any = None, *, htm: HTM | None = None, **kwargs: Any) -> None:
        refuse_unknown("HTMEmbedding", kwargs, ["embedder", "htm", *type(self).model_fields])
        if (embedder is None) == (htm is None):
            raise EmbeddingError("HTMEmbedding needs exactly one of embedder= or htm=")
        inner = htm.embedder if htm is not None else resolve_embedder(embedder)[0]
        kwargs.setdefault("model_name", embedder_name(inner))
        super().__init__(**kwargs)
        self._embedder = inner

    @classmethod
    def class_name(cls) -> str:
        return "HTMEmbedding"

    @property
    def embedder(self) -> Any:
        """The wrapped htm embedder."""
        return self._embedder

    @property
    def name(self) -> str:
        """The wrapped embedder's name: what htm records with the vectors."""
        return self.model_name

    # -- htm's Embedder protocol ---------------------------------------------------------

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for ``texts`` (htm's ``Embedder`` protocol)."""
        return [list(map(float, v)) for v in self._embedder.embed_documents(list(texts))]

    def embed_query(self, text: str) -> list[float]:
        """The vector for one query (htm's ``Embedder`` protocol)."""
        return list(map(float, self._embedder.embed_query(text)))

    # -- BaseEmbedding -------------------------------------------------------------------

    def _get_query_embedding(self, query: str) -> list[float]:
        return self.embed_query(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self.embed_query, query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return (await asyncio.to_thread(self.embed_documents, [text]))[0]

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self.embed_documents, texts)


class LlamaIndexEmbedder:
    """A LlamaIndex ``BaseEmbedding`` as the ``HTM`` embedder.

    ``name`` (recorded with every vector) is ``llama_index:<class>:<model_name>``, plus
    the dimension when the model declares one; an :class:`HTMEmbedding` is unwrapped to
    the htm embedder inside it, so both adapters name the same model the same way.

    >>> from llama_index.core.embeddings import MockEmbedding
    >>> LlamaIndexEmbedder(MockEmbedding(embed_dim=8)).name
    'llama_index:MockEmbedding:unknown:8'
    """

    def __init__(self, embed_model: BaseEmbedding) -> None:
        if not isinstance(embed_model, BaseEmbedding):
            raise EmbeddingError(
                f"LlamaIndexEmbedder needs a llama_index BaseEmbedding, got {type(embed_model).__name__}")
        self.embed_model = embed_model
        if isinstance(embed_model, HTMEmbedding):
            self.name = embed_model.name
        else:
            dim = getattr(embed_model, "embed_dim", None)
            suffix = f":{dim}" if isinstance(dim, int) else ""
            self.name = f"llama_index:{embed_model.class_name()}:{embed_model.model_name}{suffix}"

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for ``texts``, in batches of the model's ``embed_batch_size``."""
        if not texts:
            return []
        return [list(map(float, v)) for v in self.embed_model.get_text_embedding_batch(list(texts))]

    def embed_query(self, text: str) -> list[float]:
        """The query vector (the model's query embedding, which may differ from documents')."""
        return list(map(float, self.embed_model.get_query_embedding(text)))

    def __repr__(self) -> str:
        return f"LlamaIndexEmbedder({self.name})"
