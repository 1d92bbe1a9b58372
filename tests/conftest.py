"""Fixtures shared by several test files."""

from __future__ import annotations

import math

import numpy as np
import pytest

import autograder.chapters  # noqa: F401 - the registry the tests read: every chapter registered


@pytest.fixture
def bounded_scores():
    """Make ``(q, k, v, mask)`` whose scaled dot scores ``q.k / sqrt(d)`` are bounded, by
    Cauchy-Schwarz, by exactly ``bound``: unit queries, key 0 of norm ``bound * sqrt(d)``,
    and key ``n_k - 2`` parallel to query 2 so that one score equals the bound (in the last
    key block of a small block size). Batch 2, d = 8, float64; query 3 of batch item 1 may
    attend to nothing."""

    def make(bound: float, n_q: int, n_k: int, seed: int):
        rng = np.random.default_rng(seed)
        d = 8
        q = rng.normal(size=(2, n_q, d))
        k = rng.normal(size=(2, n_k, d))
        v = rng.normal(size=(2, n_k, 3))
        q /= np.linalg.norm(q, axis=-1, keepdims=True)  # |q_i| = 1
        k /= np.linalg.norm(k, axis=-1, keepdims=True)
        k[:, 0] *= bound * math.sqrt(d)  # the largest key: the bound is exactly `bound`
        k[:, n_k - 2] = q[:, 2] * bound * math.sqrt(d)  # q_2 . k / sqrt(d) = bound
        mask = rng.random((2, n_q, n_k)) < 0.7
        mask[1, 3] = False  # a fully masked row
        return q, k, v, mask

    return make


@pytest.fixture(scope="session")
def bubblewrap():
    """The grader's sandbox: a test that runs it fails, never skips, where bubblewrap is
    missing (`make test` installs it; CI must not pass for lack of a tool)."""
    from autograder import sandbox

    if sandbox.find_bwrap() is None:
        pytest.fail("bubblewrap is required: apt-get install bubblewrap (make test does)")


@pytest.fixture(scope="module")
def empty_gradebook(tmp_path_factory):
    """A new nbgrader gradebook, made once per test file (nbgrader runs `alembic` to make one,
    from the virtual environment's bin folder)."""
    import os
    import sys
    from pathlib import Path

    from nbgrader.api import Gradebook

    path = tmp_path_factory.mktemp("gradebook") / "gradebook.db"
    saved = os.environ["PATH"]
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{saved}"
    try:
        Gradebook(f"sqlite:///{path}").close()
    finally:
        os.environ["PATH"] = saved
    return path
