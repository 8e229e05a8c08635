"""The scripts in ``examples/`` run as a user runs them, on their offline stand-in models.

Each is a subprocess (``python examples/<name>.py``) with no model configured
(``HTM_EXAMPLE_MODEL`` unset), the hashing embedder and no network; it must exit 0 and
answer the second conversation's question from what htm kept of the first.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


def test_there_are_two_examples() -> None:
    assert [p.name for p in EXAMPLES] == ["langchain_agent.py", "llamaindex_chat.py"]


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs_and_answers_from_memory(path: Path, tmp_path: Path) -> None:
    pytest.importorskip("langchain" if "langchain" in path.name else "llama_index.core")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HTM_")}
    env.update(HTM_EMBEDDER="hashing", HF_HUB_OFFLINE="1", TMPDIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    answer = next(line for line in lines if line.startswith("[friday] ") and "ada:" not in line)
    assert "From memory:" in answer and "Vim keybindings" in answer, done.stdout
    assert not [line for line in lines if line.startswith("[monday] ") and "From memory" in line]
