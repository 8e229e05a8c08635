"""Centering: the query less the store's mean direction (what every memory has in common),
and less a share of it more (the typicality penalty); see :mod:`htm_core.recall.pipeline`."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["center", "centered_query"]


def centered_query(vector: Sequence[float], centroid: Sequence[float] | None,
                  penalty: float = 0.0) -> list[float]:
    """``vector`` without its component along ``centroid`` (unit length), renormalised;
    with a ``penalty``, less ``penalty × centroid`` as well (renormalised), so a memory's
    similarity drops by ``penalty × (its similarity to the centroid)``: see
    :data:`RetrievalConfig.typical_penalty`."""
    out = center(np.asarray(vector, dtype=np.float64), centroid, penalty)
    return out.tolist() if out is not None else list(vector)


def center(q: np.ndarray, centroid: Sequence[float] | np.ndarray | None,
             penalty: float = 0.0) -> np.ndarray | None:
    """:func:`centered_query` of a float64 vector, as an array (None: left as it is)."""
    if centroid is None:
        return None
    # sqrt(q·q) is what np.linalg.norm works out for a flat float64 vector (the same
    # float), without its dispatch.
    norm = math.sqrt(q.dot(q))
    if norm == 0.0:
        return None
    q = q / norm
    mu = np.asarray(centroid, dtype=np.float64)
    if mu.shape != q.shape:
        return None
    q -= float(q @ mu) * mu
    rest = math.sqrt(q.dot(q))
    if rest <= 1e-6:
        return None
    q /= rest
    if penalty:  # q ⟂ μ: the norm of q - penalty·μ is sqrt(1 + penalty²)
        q = (q - penalty * mu) / math.sqrt(1.0 + penalty * penalty)
    return q
