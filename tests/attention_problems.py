"""Random attention problems shared by the test files (``from attention_problems import ...``;
pytest puts tests/ on the import path, as it has no ``__init__.py``).

Each function returns ``(q, k, v, mask)`` in float64, drawn from ``np.random.default_rng(seed)``,
so that a test of the plain reference and a test of its fast twin can draw the same problems
from one place.
"""

from __future__ import annotations

import numpy as np


def online_problem(seed, batch=(2,), n_q=10, n_k=24, d=4, d_v=3, p_keep=0.5, q_scale=3.0):
    """Standard normal q, k, v of shapes batch + (n_q, d), (n_k, d), (n_k, d_v), with q times
    ``q_scale`` so that the scores spread and the online softmax's running max moves from
    block to block, and a random mask keeping each key with probability ``p_keep`` (at
    p_keep = 0 every row is fully masked)."""
    rng = np.random.default_rng(seed)
    q = rng.normal(size=batch + (n_q, d)) * q_scale
    k = rng.normal(size=batch + (n_k, d))
    v = rng.normal(size=batch + (n_k, d_v))
    mask = rng.random(batch + (n_q, n_k)) < p_keep
    return q, k, v, mask
