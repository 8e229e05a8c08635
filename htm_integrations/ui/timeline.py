"""The Timeline page: the operations log over time as a stacked bar chart (inline SVG,
drawn on the server), and each robot's evictions on one strip.

Recalls are reads and write no log line (see docs/ui.md); the chart counts what the log
holds: adds, touches, evictions, forgets, restores, purges, tag and importance changes, updates.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from htm_core.models import Operation

from .app import UI
from .memories import int_arg, text_arg

__all__ = ["COLOURS", "Bar", "bars", "overview"]

COLOURS = {"add": "#3a9a5b", "touch": "#8fc1e3", "evict": "#e8923a", "forget": "#c94040",
           "restore": "#3f6fc4", "purge": "#6b1010", "tag": "#a070c0", "importance": "#c9b23a",
           "update": "#2a9d9d", "clear_working": "#888888"}
OTHER = "#bbbbbb"
#: Bucket sizes in seconds, smallest first: the chart takes the first giving at most 48 bars.
BUCKETS = (60, 300, 900, 3600, 6 * 3600, 86_400, 7 * 86_400, 30 * 86_400, 365 * 86_400)
WIDTH, HEIGHT = 720, 200


@dataclass(frozen=True)
class Bar:
    """One rectangle of the chart (SVG user units) and its tooltip."""

    x: float
    y: float
    width: float
    height: float
    colour: str
    title: str


def bars(ops: list[Operation]) -> tuple[list[Bar], int, str]:
    """The stacked bars of ``ops`` by time bucket; also the tallest count and the bucket
    size's name.

    >>> from datetime import datetime, timezone
    >>> at = datetime(2024, 5, 15, 12, 0, tzinfo=timezone.utc)
    >>> ops = [Operation(id=i, at=at, op=op, robot="r", key="k") for i, op in
    ...        enumerate(["add", "add", "evict"])]
    >>> drawn, tallest, size = bars(ops)
    >>> [(b.colour, round(b.height)) for b in drawn], tallest, size
    ([('#3a9a5b', 133), ('#e8923a', 67)], 3, '1 min')
    """
    if not ops:
        return [], 0, "-"
    times = [o.at.timestamp() for o in ops]
    first, last = min(times), max(times)
    size = next((s for s in BUCKETS if (last - first) / s < 48), BUCKETS[-1])
    start = first // size * size
    count = int((last - start) // size) + 1
    per: list[Counter[str]] = [Counter() for _ in range(count)]
    for o, t in zip(ops, times, strict=True):
        per[int((t - start) // size)][o.op] += 1
    tallest = max(sum(c.values()) for c in per)
    slot = WIDTH / count
    drawn: list[Bar] = []
    for n, counts in enumerate(per):
        y = float(HEIGHT)
        when = datetime.fromtimestamp(start + n * size, timezone.utc).strftime("%Y-%m-%d %H:%M")
        for op in sorted(counts, key=lambda o: (o not in COLOURS, o)):
            h = HEIGHT * counts[op] / tallest
            y -= h
            drawn.append(Bar(n * slot + 1, y, max(slot - 2, 1), h, COLOURS.get(op, OTHER),
                             f"{when} UTC: {counts[op]} {op}"))
    return drawn, tallest, _size_name(size)


def _size_name(size: int) -> str:
    for unit, seconds in (("day", 86_400), ("h", 3600), ("min", 60)):
        if size >= seconds and size % seconds == 0:
            return f"{size // seconds} {unit}"
    return f"{size} s"


def _strips(ops: list[Operation]) -> list[dict[str, Any]]:
    """Each robot's evictions as ticks on one strip (x from 0 to ``WIDTH``)."""
    evictions = [o for o in ops if o.op == "evict"]
    if not evictions:
        return []
    first = min(o.at for o in evictions).timestamp()
    span = max(max(o.at for o in evictions).timestamp() - first, 1.0)
    strips: dict[str, list[dict[str, Any]]] = {}
    for o in sorted(evictions, key=lambda o: o.at):
        strips.setdefault(o.robot or "-", []).append(
            {"x": (o.at.timestamp() - first) / span * (WIDTH - 4) + 2, "key": o.key or "-",
             "at": o.at})
    return [{"robot": r, "ticks": ticks} for r, ticks in sorted(strips.items())]


def overview(ui: UI, request: Request, form: dict[str, str]) -> Response:
    """``/timeline[?robot=&op=&limit=]``."""
    robot = text_arg(request, "robot")
    op = text_arg(request, "op")
    limit = int_arg(request, "limit", 2_000, 1, 10_000)
    ops = ui.htm.operations(limit=limit, robot=robot, op=op)
    drawn, tallest, size = bars(ops)
    legend = sorted({o.op for o in ops})
    return ui.render(request, "timeline.html", bars=drawn, tallest=tallest, bucket=size,
                     legend=[(name, COLOURS.get(name, OTHER)) for name in legend],
                     strips=_strips(ops), recent=ops[:50], count=len(ops),
                     params={"robot": robot or "", "op": op or "", "limit": limit},
                     robots=ui.htm.robots(), width=WIDTH, height=HEIGHT)
