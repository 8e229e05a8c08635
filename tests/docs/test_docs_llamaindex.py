"""Every Python example of docs/llamaindex.md runs, in order, as written.

The page's blocks run one after the other in one namespace (an example may use what an
earlier one made, as a reader would), with top-level ``await`` allowed, from a temporary
directory (so ``database_url="memories.db"`` is a fresh file) with the hashing embedder.
What the page leaves to the reader is provided and faked: ``llm`` is LlamaIndex's
``MockFunctionCallingLLM`` (a real function-calling LLM whose answers are scripted: it
echoes the last message), ``lc_llm`` LangChain's ``FakeListLLM``, ``li_llm`` LlamaIndex's
``MockLLM``. The checks after the run are on what the examples say they do.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_index.core")
pytest.importorskip("langchain_classic")

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "llamaindex.md"

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning",
                                        "ignore::PendingDeprecationWarning")


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)


async def test_every_python_example_runs_in_order(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_core.language_models.fake import FakeListLLM
    from llama_index.core.llms.mock import MockFunctionCallingLLM, MockLLM

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HTM_DATABASE_URL", str(tmp_path / "default.db"))
    monkeypatch.setenv("HTM_EMBEDDER", "hashing")
    blocks = _blocks()
    assert len(blocks) >= 6, "docs/llamaindex.md lost its examples"
    assert "FunctionAgent" in blocks[0] and "from_defaults" in blocks[0], \
        "the page must lead with the agent path"
    namespace: dict[str, Any] = {"llm": MockFunctionCallingLLM(),
                                 "lc_llm": FakeListLLM(responses=["Sure."] * 4),
                                 "li_llm": MockLLM(max_tokens=3)}
    opened = []
    for i, block in enumerate(blocks):
        code = compile(block, f"docs/llamaindex.md[{i}]", "exec",
                       flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(code, namespace)  # the page's own examples
        if inspect.iscoroutine(result):
            await result
        if namespace.get("htm") is not None and namespace["htm"] not in opened:
            opened.append(namespace["htm"])
        if i == 1:  # the restart example: the agent's turns came back from the file
            said = [m.content for m in namespace["memory"].get_all()]
            assert said[0] == "My cat is called Tiberius."
            assert "What is my cat called?" in said
    for htm in opened:
        htm.close()
