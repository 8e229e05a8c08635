"""The README's example runs as written (on a temporary database, hashing embedder)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_example_runs(tmp_path, monkeypatch, capsys):
    code = re.search(r"## Example\n\n```python\n(.*?)```", README.read_text(), re.S)
    assert code, "README lost its Example section"
    monkeypatch.setenv("HTM_DATABASE_URL", str(tmp_path / "readme.db"))
    monkeypatch.setenv("HTM_EMBEDDER", "hashing")
    exec(compile(code.group(1), "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "User prefers Vim keybindings" in printed  # the recall found it
    assert "long-term       2 memories" in printed
