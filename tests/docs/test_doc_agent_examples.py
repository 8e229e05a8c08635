"""docs/langchain.md's agent sections run as written (``exec``), on a stand-in model.

The page's ``model`` is :class:`tests.fake_chat.RecordingChatModel` (no provider runs
offline); ``HTM()`` is configured by environment variables the way a user's would be: a
SQLite file in a temporary directory and the hashing embedder.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from tests.fake_chat import RecordingChatModel

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "langchain.md"


def _python_blocks(heading: str) -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    found = re.search(rf"^{re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert found, f"docs/langchain.md lost its {heading!r} section"
    return re.findall(r"```python\n(.*?)```", found.group(1), re.S)


@pytest.fixture
def user_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in ("HTM_DATABASE_URL", "HTM_ROBOT", "HTM_EMBEDDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTM_DATABASE_URL", str(tmp_path / "docs.db"))
    monkeypatch.setenv("HTM_EMBEDDER", "hashing")
    return tmp_path


def _run(code: str, **names: Any) -> dict[str, Any]:
    namespace: dict[str, Any] = dict(names)
    try:
        exec(compile(code, "docs/langchain.md", "exec"), namespace)
    finally:
        if "htm" in namespace:
            namespace["htm"].close()
    return namespace


def test_agent_section_remembers_across_threads(user_env: Path) -> None:
    (code,) = _python_blocks("## Agents: `HTMMiddleware`")
    model = RecordingChatModel(default="Noted.")
    _run(code, model=model)
    assert len(model.calls) == 2
    assert "I moved to Lisbon last month." in model.system_texts()[1]
    assert "Lisbon" not in model.system_texts()[0]


def test_tools_section_recalls_what_it_remembered(user_env: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    (code,) = _python_blocks("## Agent tools: `htm_tools`")
    _run(code)
    assert "Ada's train leaves at 7:40" in capsys.readouterr().out
