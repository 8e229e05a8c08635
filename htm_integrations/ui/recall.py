"""The recall debugger: a query's arms side by side with the fused list (read-only, through
:func:`htm_core.explain.explain_recall`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from htm_core.explain import explain_recall
from htm_core.recall import STRATEGIES

from .app import UI
from .memories import choice_arg, int_arg, text_arg

__all__ = ["debugger"]


def debugger(ui: UI, request: Request, form: dict[str, str]) -> Response:
    """``/recall?q=...``: each arm's ranked list, the fused list with every hit's rank per
    arm and fused score, the timeframe read, and what entering working memory would evict."""
    query = text_arg(request, "q")
    strategy = choice_arg(request, "strategy", STRATEGIES)
    timeframe = text_arg(request, "timeframe")
    tag = text_arg(request, "tag")
    robot = text_arg(request, "robot")
    limit = int_arg(request, "limit", 10, 1, 200)
    params = {"q": query or "", "strategy": strategy, "timeframe": timeframe or "",
              "tag": tag or "", "robot": robot or "", "limit": limit}
    if query is None:
        return ui.render(request, "recall.html", why=None, params=params, strategies=STRATEGIES,
                         arm_names=[], robots=ui.htm.robots())
    why = explain_recall(ui.htm, query, timeframe=timeframe, limit=limit, strategy=strategy,
                         tags=tag, robot=robot, arm_depth=max(2 * limit, 20))
    arm_names = list(why.arms)
    if any("neighbor" in h.ranks for h in why.fused):
        arm_names.append("neighbor")
    return ui.render(request, "recall.html", why=why, params=params, strategies=STRATEGIES,
                     arm_names=arm_names, robots=ui.htm.robots())
