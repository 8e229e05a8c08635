"""Markdown-aware document chunking that keeps each chunk's heading path.

Chunks are consecutive, non-overlapping slices of the original text at block
boundaries (blank lines, headings), so joining their ``text`` gives the document back
exactly; ``overlap`` is carried separately as ``context`` (the tail of the previous
chunk), for embedding and display, never duplicated into ``text``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Chunk", "chunk_markdown"]

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


@dataclass(frozen=True, kw_only=True)
class Chunk:
    """One piece of a document."""

    index: int
    text: str
    heading_path: tuple[str, ...]
    start: int
    context: str = ""

    @property
    def heading(self) -> str:
        """The heading path joined with `` > `` ("" at the top of the document)."""
        return " > ".join(self.heading_path)


def _blocks(text: str) -> list[tuple[int, str]]:
    """Split into blocks at blank lines and before headings; keep every character."""
    out: list[tuple[int, str]] = []
    pos = 0
    in_fence = False
    current_start = 0
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("```"):
            in_fence = not in_fence
        starts_heading = not in_fence and bool(_HEADING.match(line.rstrip("\n")))
        if starts_heading and pos > current_start:
            out.append((current_start, text[current_start:pos]))
            current_start = pos
        pos += len(line)
        if not in_fence and stripped == "" and pos > current_start:
            out.append((current_start, text[current_start:pos]))
            current_start = pos
    if pos > current_start:
        out.append((current_start, text[current_start:pos]))
    return out


def _pieces(block: str, start: int, limit: int, count: Callable[[str], int]) -> list[tuple[int, str]]:
    """Cut a block longer than ``limit`` tokens at line ends, else at whitespace; keep every character."""
    if count(block) <= limit:
        return [(start, block)]
    units = block.splitlines(keepends=True)
    if len(units) == 1:
        units = [u for u in re.split(r"(?<=\s)(?=\S)", block) if u]
        if len(units) == 1:
            return [(start, block)]
    out: list[tuple[int, str]] = []
    piece, piece_start, pos = "", start, start
    for unit in units:
        if piece and count(piece + unit) > limit:
            out.extend(_pieces(piece, piece_start, limit, count))
            piece, piece_start = "", pos
        piece += unit
        pos += len(unit)
    if piece:
        out.extend(_pieces(piece, piece_start, limit, count))
    return out


def chunk_markdown(text: str, *, chunk_tokens: int = 400, overlap: int = 40,
                   count: Callable[[str], int] | None = None) -> list[Chunk]:
    """Split Markdown ``text`` into chunks of about ``chunk_tokens`` tokens.

    A heading always starts a new chunk, and each chunk records the path of headings
    above it. A block (paragraph, list, code fence) longer than ``chunk_tokens`` is cut at
    line ends, or at whitespace when it is one long line, so no chunk outgrows the budget
    unless a single word does. ``count`` counts tokens (default: words). ``overlap`` tokens of the previous
    chunk's tail go into ``Chunk.context``.

    >>> doc = "# A\\n\\nalpha\\n\\n## B\\n\\nbeta\\n"
    >>> [(c.heading, c.text) for c in chunk_markdown(doc)]
    [('A', '# A\\n\\nalpha\\n\\n'), ('A > B', '## B\\n\\nbeta\\n')]
    >>> "".join(c.text for c in chunk_markdown(doc)) == doc
    True
    """
    if chunk_tokens <= 0 or overlap < 0:
        from ..errors import InvalidBudgetError

        raise InvalidBudgetError("chunk_tokens must be positive and overlap non-negative")
    count = count or (lambda s: len(s.split()))
    path: list[tuple[int, str]] = []
    chunks: list[Chunk] = []
    buf: list[str] = []
    buf_start = 0
    buf_tokens = 0
    buf_path: tuple[str, ...] = ()

    def flush() -> None:
        nonlocal buf, buf_tokens
        if buf:
            body = "".join(buf)
            previous = chunks[-1].text.split() if chunks else []
            context = " ".join(previous[-overlap:]) if overlap else ""
            chunks.append(Chunk(index=len(chunks), text=body, heading_path=buf_path,
                                start=buf_start, context=context))
        buf, buf_tokens = [], 0

    for block_start, whole in _blocks(text):
        first = whole.split("\n", 1)[0]
        heading = _HEADING.match(first.rstrip("\n"))
        if heading:
            flush()
            level = len(heading.group(1))
            path = [(lvl, name) for lvl, name in path if lvl < level] + [(level, heading.group(2))]
        for start, block in _pieces(whole, block_start, chunk_tokens, count):
            tokens = count(block)
            if buf and buf_tokens + tokens > chunk_tokens:
                flush()
            if not buf:
                buf_start = start
                buf_path = tuple(name for _, name in path)
            buf.append(block)
            buf_tokens += tokens
    flush()
    return chunks
