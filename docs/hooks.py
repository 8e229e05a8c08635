"""MkDocs hooks for the htm site.

Docstrings in htm carry doctest examples (``>>> ...``) in their prose. Markdown would read
those lines as nested block quotes and their output (``[1, 3, 2]``) as link references, so
this hook adds a small Markdown extension that fences every doctest block as ``pycon``
code, for the pages and for the API reference that mkdocstrings renders.
"""

from __future__ import annotations

import re
from typing import Any

from markdown import Extension, Markdown
from markdown.preprocessors import Preprocessor
from mkdocs.plugins import event_priority

_PROMPT = re.compile(r"^(\s*)>>> ")


class _DoctestFence(Preprocessor):
    """Wrap runs of ``>>>`` lines and their output in a fenced ``pycon`` block."""

    def run(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        fence: str | None = None
        i = 0
        while i < len(lines):
            line = lines[i]
            stripped = line.lstrip()
            if stripped.startswith(("```", "~~~")):
                fence = None if fence else stripped[:3]
                out.append(line)
                i += 1
                continue
            match = _PROMPT.match(line) if fence is None else None
            if match is None:
                out.append(line)
                i += 1
                continue
            indent = match.group(1)
            block = []
            while i < len(lines) and lines[i].strip() and lines[i].startswith(indent):
                block.append(lines[i][len(indent):])
                i += 1
            if out and out[-1].strip():
                out.append("")
            out += [f"{indent}```pycon", *(f"{indent}{b}" for b in block), f"{indent}```", ""]
        return out


class DoctestFenceExtension(Extension):
    """Registers :class:`_DoctestFence` before every other preprocessor."""

    def extendMarkdown(self, md: Markdown) -> None:
        md.preprocessors.register(_DoctestFence(md), "htm_doctest_fence", 100)


@event_priority(100)
def on_config(config: Any) -> Any:
    """Add the doctest fence before mkdocstrings copies the Markdown extensions."""
    config.markdown_extensions.append(DoctestFenceExtension())
    return config
