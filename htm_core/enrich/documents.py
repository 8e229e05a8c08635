"""Plan how a Markdown document is stored as chunk memories, and what changes on re-adding it.

:func:`plan_document` splits a document with :func:`~htm_core.enrich.chunking.chunk_markdown`
and gives each chunk a stable key derived from the document's ``source`` and the chunk's own
content (heading path + text), so the same chunk always gets the same key.
:func:`diff_document` compares that plan with the keys already stored for the source: only
chunks whose key is new are written, chunks no longer in the document are to be forgotten
(recoverably: never-forget applies), and unchanged chunks are left alone. Both are pure
functions; the facade does the writing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidKeyError
from ..validation import check_content
from .chunking import chunk_markdown

__all__ = ["ChunkRecord", "DocumentDiff", "DocumentPlan", "diff_document", "document_prefix",
           "embed_text", "plan_document"]


def _digest(text: str, n: int = 16) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:n]


def document_prefix(source: str) -> str:
    """The key prefix shared by every chunk of ``source``: ``doc:<hash of source>:``.

    >>> document_prefix("handbook.md")
    'doc:a0a1ca15ef93a328:'
    """
    if not isinstance(source, str) or not source.strip():
        raise InvalidKeyError(f"source must be a non-empty string naming the document, got {source!r}")
    return f"doc:{_digest(source)}:"


@dataclass(frozen=True, kw_only=True)
class ChunkRecord:
    """One chunk as it should be stored.

    ``content`` is the chunk's exact text (joining all ``content`` in order gives the
    document back); ``embed_text`` is what to embed: the heading path as a prefix, then the
    text, so a query about a section finds its chunks. ``metadata`` carries ``source``,
    ``heading_path``, ``heading``, ``chunk_index``, ``chunk_count``, ``start`` and
    ``content_hash``.
    """

    key: str
    content: str
    embed_text: str
    heading_path: tuple[str, ...]
    index: int
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class DocumentPlan:
    """The chunks of one version of a document, in order."""

    source: str
    prefix: str
    chunks: list[ChunkRecord]
    document_hash: str

    @property
    def keys(self) -> list[str]:
        """The chunk keys in document order."""
        return [chunk.key for chunk in self.chunks]

    def text(self) -> str:
        """The document reassembled from its chunks."""
        return "".join(chunk.content for chunk in self.chunks)


@dataclass(frozen=True, kw_only=True)
class DocumentDiff:
    """What re-adding a document changes.

    ``add``: chunks to write (new or changed). ``keep``: keys already stored and still in
    the document (untouched; their stored ``chunk_index`` may be stale, see ``moved``).
    ``forget``: stored keys no longer in the document. ``moved``: ``(key, new_index)`` for
    kept chunks whose position changed, for a metadata-only update if wanted.
    """

    add: list[ChunkRecord]
    keep: list[str]
    forget: list[str]
    moved: list[tuple[str, int]]

    @property
    def unchanged(self) -> bool:
        """True when nothing needs writing or forgetting."""
        return not (self.add or self.forget)


def embed_text(content: str, metadata: Mapping[str, Any] | None) -> str:
    """What is embedded for a stored memory: the one rule every embedding path follows.

    A document chunk (metadata with ``source``, ``chunk_index`` and a non-empty
    ``heading_path``, as :func:`plan_document` writes) is embedded as its heading path
    joined with `` > ``, a blank line, then its text, so a question about a section finds
    its chunks; any other memory is embedded as its content. Adding, background filling and
    re-embedding all use this, so a chunk gets the same vector in every mode.

    >>> embed_text("Run pip install.", {"source": "guide.md", "chunk_index": 0,
    ...                                 "heading_path": ["Setup", "Linux"]})
    'Setup > Linux\\n\\nRun pip install.'
    >>> embed_text("Run pip install.", {"heading_path": ["Setup"]})
    'Run pip install.'
    """
    if not metadata or "source" not in metadata or "chunk_index" not in metadata:
        return content
    path = metadata.get("heading_path")
    if not isinstance(path, (list, tuple)) or not path or not all(isinstance(p, str) for p in path):
        return content
    return f"{' > '.join(path)}\n\n{content}"


def plan_document(text: str, *, source: str, chunk_tokens: int = 400, overlap: int = 40,
                  count: Callable[[str], int] | None = None) -> DocumentPlan:
    """Split ``text`` into chunk records with stable keys.

    The key is ``doc:<hash of source>:<hash of heading path + text>``; a chunk that occurs
    twice in one document gets ``-2``, ``-3`` ... after the second and later copies.

    >>> plan = plan_document("# Setup\\n\\nRun pip install.\\n", source="guide.md")
    >>> plan.chunks[0].embed_text
    'Setup\\n\\n# Setup\\n\\nRun pip install.\\n'
    >>> plan.text() == "# Setup\\n\\nRun pip install.\\n"
    True
    """
    text = check_content(text)
    prefix = document_prefix(source)
    chunks = chunk_markdown(text, chunk_tokens=chunk_tokens, overlap=overlap, count=count)
    seen: dict[str, int] = {}
    records = []
    for chunk in chunks:
        content_hash = _digest("\x1f".join(chunk.heading_path) + "\x00" + chunk.text)
        seen[content_hash] = seen.get(content_hash, 0) + 1
        suffix = "" if seen[content_hash] == 1 else f"-{seen[content_hash]}"
        heading = chunk.heading
        metadata = {"source": source, "heading_path": list(chunk.heading_path), "heading": heading,
                    "chunk_index": chunk.index, "chunk_count": len(chunks), "start": chunk.start,
                    "content_hash": content_hash}
        records.append(ChunkRecord(
            key=f"{prefix}{content_hash}{suffix}",
            content=chunk.text,
            embed_text=embed_text(chunk.text, metadata),
            heading_path=chunk.heading_path,
            index=chunk.index,
            metadata=metadata,
        ))
    return DocumentPlan(source=source, prefix=prefix, chunks=records, document_hash=_digest(text, 32))


def diff_document(plan: DocumentPlan, stored: Iterable[str] | dict[str, int]) -> DocumentDiff:
    """Compare ``plan`` with what is stored for its source.

    ``stored`` is the keys of the source's live chunk memories (keys outside the plan's
    prefix are ignored), or a mapping key -> stored ``chunk_index`` to also report ``moved``.

    >>> old = plan_document("# A\\n\\none\\n\\n# B\\n\\ntwo\\n", source="d", chunk_tokens=3)
    >>> new = plan_document("# A\\n\\none\\n\\n# B\\n\\nTWO\\n", source="d", chunk_tokens=3)
    >>> diff = diff_document(new, old.keys)
    >>> len(diff.add), len(diff.keep), len(diff.forget)
    (1, 1, 1)
    """
    indexes = dict(stored) if isinstance(stored, dict) else dict.fromkeys(stored, -1)
    current = {key: index for key, index in indexes.items() if key.startswith(plan.prefix)}
    planned = set(plan.keys)
    add = [chunk for chunk in plan.chunks if chunk.key not in current]
    keep = [chunk.key for chunk in plan.chunks if chunk.key in current]
    forget = sorted(key for key in current if key not in planned)
    moved = [(chunk.key, chunk.index) for chunk in plan.chunks
             if chunk.key in current and current[chunk.key] not in (-1, chunk.index)]
    return DocumentDiff(add=add, keep=keep, forget=forget, moved=moved)
