"""Before and after: run benchmark commands against two revisions of htm, alternating.

Each revision is checked out into its own temporary worktree; each run puts that tree's
``htm_core`` and ``htm_integrations`` first on ``PYTHONPATH`` beside *this* checkout's
``benchmarks`` (so both sides run the same scripts; ``--own-scripts``: each side its own,
for a script that reads a lower layer that changed), with its own ``HTM_BENCH_CACHE``
and ``HTM_BENCH_RESULTS``. Runs go in pairs whose order alternates (before/after, then
after/before, ...), so a load that rises through the session favours neither side. Every
number in the scripts' result files is then compared: the median of each side and the
median of the pair ratios (after / before).

Run: ``python -m benchmarks.alternate --before 06a75c8 --after HEAD --runs 5 --
"python -m benchmarks.store_ops --sizes 1000" "python -m benchmarks.working_memory"``
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("htm_core", "htm_integrations")


def numbers(value: Any, path: str = "") -> Iterator[tuple[str, float]]:
    """Every number in a result file, by a path that names list items by their ``size``,
    ``resident``, ``name`` or ``label`` when they have one (``rows[size=1000].htm_hybrid``)."""
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, (int, float)):
        yield path, float(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in ("machine", "when"):
                yield from numbers(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            label = next((f"{k}={item[k]}" for k in ("size", "resident", "name", "label")
                          if isinstance(item, dict) and k in item), str(i))
            yield from numbers(item, f"{path}[{label}]")


def side_root(tmp: Path, name: str, revision: str, own_scripts: bool = False) -> Path:
    """A folder holding ``revision``'s packages and this checkout's benchmarks (or the
    revision's own)."""
    tree = tmp / f"{name}-tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), revision],
                   check=True, capture_output=True)
    root = tmp / name
    root.mkdir()
    for package in PACKAGES:
        (root / package).symlink_to(tree / package)
    (root / "benchmarks").symlink_to((tree if own_scripts else ROOT) / "benchmarks")
    return root


def run_side(root: Path, commands: Sequence[str], results: Path, cache: Path) -> None:
    """Run every command once with ``root`` first on the import path."""
    results.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(root), "HTM_BENCH_RESULTS": str(results),
           "HTM_BENCH_CACHE": str(cache)}
    for command in commands:
        subprocess.run(shlex.split(command), cwd=root, env=env, check=True,
                       stdout=subprocess.DEVNULL)


def collect(results: Path) -> dict[str, float]:
    """Every number of every result file of one run, by file and path."""
    out: dict[str, float] = {}
    for file in sorted(results.glob("*.json")):
        for path, value in numbers(json.loads(file.read_text())):
            out[f"{file.stem}:{path}"] = value
    return out


def compare(before: list[dict[str, float]], after: list[dict[str, float]]) -> list[list[str]]:
    """Per figure: both sides' medians and the median of the pair ratios."""
    rows = []
    for key in sorted(set().union(*before) & set().union(*after)):
        pairs = [(b[key], a[key]) for b, a in zip(before, after, strict=True)
                 if key in b and key in a]
        ratios = [a / b for b, a in pairs if b]
        if not ratios:
            continue
        rows.append([key, f"{statistics.median(b for b, _ in pairs):.6g}",
                     f"{statistics.median(a for _, a in pairs):.6g}",
                     f"{statistics.median(ratios):.3f}",
                     f"{min(ratios):.2f}-{max(ratios):.2f}"])
    return rows


def main(argv: Sequence[str] | None = None) -> list[list[str]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the revision to compare against")
    parser.add_argument("--after", default="HEAD", help="the revision measured (default HEAD)")
    parser.add_argument("--runs", type=int, default=5, help="pairs of runs (default 5)")
    parser.add_argument("--own-scripts", action="store_true",
                        help="each side runs its own benchmarks/ (default: this checkout's)")
    parser.add_argument("commands", nargs="+", help="benchmark commands, each one string")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="htm-alternate-") as name:
        tmp = Path(name)
        roots = {side: side_root(tmp, side, revision, args.own_scripts)
                 for side, revision in (("before", args.before), ("after", args.after))}
        got: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
        try:
            for i in range(args.runs):
                for side in ("before", "after") if i % 2 == 0 else ("after", "before"):
                    print(f"pair {i + 1}/{args.runs}: {side}", flush=True)
                    results = tmp / "results" / side / str(i)
                    run_side(roots[side], args.commands, results, tmp / "cache" / side)
                    got[side].append(collect(results))
        finally:
            for side in roots:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                str(tmp / f"{side}-tree")], capture_output=True)
    rows = compare(got["before"], got["after"])
    print(f"\n{args.before} -> {args.after}, {args.runs} alternating pairs\n")
    print("| figure | before (median) | after (median) | after / before (median of pairs) "
          "| pair ratios |")
    print("| --- | ---: | ---: | ---: | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return rows


if __name__ == "__main__":
    main()
