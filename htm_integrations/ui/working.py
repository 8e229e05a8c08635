"""The Working memory page: one robot's resident items in eviction order, its token gauge,
and the context ``create_context`` would build now for each strategy.

Each robot is read through an ``HTM`` acting as that robot on the same store, with this
app's eviction policy (``HTM_EVICTION``) and the budget the robot's own ``HTM`` recorded on
the store (``Robot.working_memory_tokens``, recorded when an application gives its ``HTM`` a
budget). The gauge measures against that budget, or this app's for the robot it acts as;
for a robot that recorded none it shows the tokens held and says the budget is unknown.
"""

from __future__ import annotations

from datetime import datetime, timezone

from starlette.requests import Request
from starlette.responses import Response

from htm_core.working.context import STRATEGIES as CONTEXT_STRATEGIES

from .app import UI
from .memories import text_arg

__all__ = ["EVICTION_SCAN", "overview"]

#: Log lines searched to count a robot's evictions (newest first).
EVICTION_SCAN = 10_000


def overview(ui: UI, request: Request, form: dict[str, str]) -> Response:
    """``/working[?robot=NAME]``."""
    robots = ui.htm.robots()
    name = text_arg(request, "robot") or ui.htm.robot
    htm = ui.robot_htm(name)
    stats = htm.stats()
    items = [{"key": i.key, "content": i.content, "tokens": i.token_count,
              "importance": i.importance, "access_count": i.access_count,
              "created_at": datetime.fromtimestamp(i.created_at, timezone.utc),
              "last_accessed": datetime.fromtimestamp(i.last_accessed, timezone.utc)}
             for i in htm.working_memory.items()]
    contexts = [htm.create_context(strategy=s) for s in CONTEXT_STRATEGIES]
    evictions = len(ui.htm.operations(limit=EVICTION_SCAN, op="evict", robot=name))
    return ui.render(request, "working.html", robots=robots, robot=name, stats=stats,
                     items=items, contexts=contexts, budget_known=ui.budget_known(name),
                     evictions=evictions, eviction_scan=EVICTION_SCAN)
