"""Ollama embeddings through ``langchain-ollama`` (extra ``ollama``).

:class:`OllamaEmbedder` wraps :class:`langchain_ollama.OllamaEmbeddings` so htm gets a
stable name (``ollama:<model>``), the vectors' dimension, a request timeout, and errors that
say what to do. ``langchain-ollama`` is imported only when an ``OllamaEmbedder`` is made.
Where the server is (``base_url``, ``HTM_OLLAMA_URL``, ``OLLAMA_HOST``, else
``http://127.0.0.1:11434``) and the timeout: docs/embeddings.md ("Ollama").
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from typing import Any

from .config import env_float
from .errors import EmbeddingError, InvalidBudgetError, missing_extra

__all__ = ["DEFAULT_MODEL", "DEFAULT_URL", "OllamaEmbedder", "ollama_url"]

DEFAULT_MODEL = "nomic-embed-text"
DEFAULT_URL = "http://127.0.0.1:11434"
DEFAULT_TIMEOUT = 60.0


def ollama_url(base_url: str | None = None) -> str:
    """The Ollama base URL: ``base_url``, ``HTM_OLLAMA_URL``, ``OLLAMA_HOST``, the default.

    A bare ``host:port`` (as ``OLLAMA_HOST`` often is) gets ``http://`` in front.

    >>> ollama_url("localhost:11434")
    'http://localhost:11434'
    """
    url = (base_url or os.environ.get("HTM_OLLAMA_URL") or os.environ.get("OLLAMA_HOST")
           or DEFAULT_URL).strip()
    if "://" not in url:
        url = f"http://{url}"
    return url.rstrip("/")


class OllamaEmbedder:
    """Embeddings from an Ollama server, through ``langchain_ollama.OllamaEmbeddings``.

    Args:
        model: the Ollama model (default ``nomic-embed-text``; ``ollama pull`` it first).
        base_url: the server; see docs/embeddings.md ("Ollama") for the fallbacks.
        timeout: seconds to wait for each request before giving up with
            :class:`~htm_core.errors.EmbeddingError`.
        keep_alive: how long Ollama keeps the model loaded after a request (Ollama's
            ``keep_alive``, in seconds); default the server's.

    ``name`` is ``"ollama:<model>"``; ``dim`` is None until the first vector arrives.

    >>> e = OllamaEmbedder("nomic-embed-text", base_url="http://127.0.0.1:11434")
    >>> e.name
    'ollama:nomic-embed-text'
    """

    def __init__(self, model: str | None = None, base_url: str | None = None, *,
                 timeout: float | None = None, keep_alive: int | None = None) -> None:
        try:
            from langchain_ollama import OllamaEmbeddings
        except ImportError:
            raise missing_extra("langchain-ollama", "ollama") from None
        self.model = (model or DEFAULT_MODEL).strip()
        if not self.model:
            raise EmbeddingError("the Ollama model name is empty; pass e.g. 'nomic-embed-text'")
        self.base_url = ollama_url(base_url)
        self.timeout = float(timeout) if timeout is not None else env_float(
            "HTM_OLLAMA_TIMEOUT", DEFAULT_TIMEOUT)
        if not math.isfinite(self.timeout) or self.timeout <= 0:
            raise InvalidBudgetError(
                f"Ollama timeout must be a positive number of seconds, got {self.timeout!r}")
        self.name = f"ollama:{self.model}"
        self.dim: int | None = None
        self._client: Any = OllamaEmbeddings(
            model=self.model, base_url=self.base_url, keep_alive=keep_alive,
            client_kwargs={"timeout": self.timeout},
        )

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for ``texts`` in one ``/api/embed`` request, in order."""
        texts = list(texts)
        if not texts:
            return []
        return self._checked(self._request(texts), len(texts))

    def embed_query(self, text: str) -> list[float]:
        """The vector for one query."""
        return self.embed_documents([text])[0]

    def _request(self, texts: list[str]) -> Any:
        import httpx
        from ollama import ResponseError

        where = f"Ollama at {self.base_url}"
        try:
            return self._client.embed_documents(texts)
        except ConnectionError as exc:
            raise EmbeddingError(
                f"cannot connect to {where}: is it running? Start it with `ollama serve`, or "
                "point HTM_OLLAMA_URL (or OLLAMA_HOST) at your server") from exc
        except httpx.TimeoutException as exc:
            raise EmbeddingError(
                f"{where} did not answer within {self.timeout:g} s; it may still be loading "
                f"{self.model!r}. Retry, or raise the timeout (OllamaEmbedder(timeout=...) or "
                "HTM_OLLAMA_TIMEOUT)") from exc
        except ResponseError as exc:
            if exc.status_code == 404:
                raise EmbeddingError(
                    f"{where} has no model {self.model!r} ({exc.error}); run "
                    f"`ollama pull {self.model}` on the server") from exc
            raise EmbeddingError(
                f"{where} answered HTTP {exc.status_code}: {exc.error}; check the server's "
                f"log and that {self.model!r} is an embedding model") from exc
        except (json.JSONDecodeError, ValueError, TypeError, KeyError) as exc:
            raise EmbeddingError(
                f"{where} sent a response that is not Ollama embedding JSON ({exc}); check "
                "that HTM_OLLAMA_URL points at an Ollama server") from exc
        except httpx.HTTPError as exc:
            raise EmbeddingError(
                f"request to {where} failed: {exc}; check the URL and the network") from exc

    def _checked(self, vectors: Any, count: int) -> list[list[float]]:
        where = f"Ollama at {self.base_url}"
        if not isinstance(vectors, list) or len(vectors) != count:
            got = len(vectors) if isinstance(vectors, list) else type(vectors).__name__
            raise EmbeddingError(
                f"{where} returned {got} embeddings for {count} texts; check that "
                f"{self.model!r} is an embedding model")
        out: list[list[float]] = []
        for vector in vectors:
            try:
                values = [float(x) for x in vector]
            except (TypeError, ValueError) as exc:
                raise EmbeddingError(f"{where} returned a malformed embedding: {exc}") from exc
            if not values or not all(math.isfinite(x) for x in values):
                raise EmbeddingError(f"{where} returned an empty embedding or one with NaN/inf")
            out.append(values)
        dims = {len(v) for v in out}
        if len(dims) != 1:
            raise EmbeddingError(f"{where} returned embeddings of different lengths {sorted(dims)}")
        dim = dims.pop()
        if self.dim is None:
            self.dim = dim
        elif dim != self.dim:
            raise EmbeddingError(
                f"{where} returned {dim}-dimensional vectors after {self.dim}-dimensional ones; "
                f"was the model {self.model!r} replaced on the server?")
        return out

    def __repr__(self) -> str:
        return f"OllamaEmbedder(model={self.model!r}, base_url={self.base_url!r})"
