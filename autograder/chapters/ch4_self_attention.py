"""Chapter plug-in: Self-attention (assignment ``ch4_self_attention``).

Its checks (inputs from a seed, reference, tolerance, hints, known mistakes), registered
with ``autograder.checks.register``; the grader core never names this module.
"""

from __future__ import annotations

import math

import numpy as np

from autograder.checks import (
    HINT_EMPTY,
    HINT_MAX_SHIFT,
    Case,
    Chapter,
    Check,
    Mistake,
    distinct_sizes,
    lazy_module,
    lengths_mask,
    normal,
    register,
    scaled_query,
)

# imported on first call: these reference modules import PyTorch (checks.LazyFunction)
self_attention = lazy_module("solutions.self_attention")


def _self_attention_cases(rng):
    n = int(rng.integers(4, 7))
    d_in, d_k, d_v = 5, 3, 4
    w = lambda a, b: normal(rng, a, b) / math.sqrt(a)  # noqa: E731
    causal = np.arange(n)[None, :] <= np.arange(n)[:, None]
    return [
        Case(
            "no mask, d_k != d_v",
            (normal(rng, n, d_in), w(d_in, d_k), w(d_in, d_k), w(d_in, d_v), None),
        ),
        Case(
            "causal mask, batch of 2",
            (normal(rng, 2, n, d_in), w(d_in, d_k), w(d_in, d_k), w(d_in, d_v), causal),
        ),
        Case(
            "padding mask with an empty sequence",
            (
                normal(rng, 3, n, d_in),
                w(d_in, 4),
                w(d_in, 4),
                w(d_in, 2),
                lengths_mask(rng, 3, n, empty=True)[:, None, :],
            ),
        ),
        Case(
            "single item (n=1)",
            (normal(rng, 1, d_in), w(d_in, d_k), w(d_in, d_k), w(d_in, d_v), None),
        ),
        # projections 100 times larger: scores of about +-10^4, exp overflows unshifted
        Case(
            "large scores",
            (
                normal(rng, n, d_in),
                100 * w(d_in, d_k),
                100 * w(d_in, d_k),
                w(d_in, d_v),
                causal,
            ),
        ),
    ]


def _causal_cases(rng):
    return [Case(f"n={n}", (n,)) for n in (1, 4, int(rng.integers(5, 9)))]


def _local_cases(rng):
    return [
        Case("n=6, window=1", (6, 1)),
        Case("window=0 (only itself)", (5, 0)),
        Case("window wider than n", (4, 10)),
        Case("random n and window", (int(rng.integers(5, 10)), int(rng.integers(2, 4)))),
        Case("n=1", (1, 2)),
    ]


def _positions_cases(rng):
    return [
        Case("n=4, d=6", (4, 6)),
        Case("n=50, d=16", (50, 16)),
        Case("odd width d=7", (int(rng.integers(3, 6)), 7)),
        Case("one position", (1, 4)),
    ]


def _online_cases(rng):
    n_q, n_k = distinct_sizes(rng, 3, 11, 2)
    rows = np.ones((n_q, n_k), dtype=bool)
    rows[1] = False
    rows[2, : n_k // 2] = False
    return [
        Case(
            "block size divides n_k",
            (normal(rng, n_q, 4), normal(rng, 12, 4), normal(rng, 12, 3), 4, None),
        ),
        Case(
            "block size does not divide n_k",
            (normal(rng, n_q, 4), normal(rng, n_k, 4), normal(rng, n_k, 2), 3, None),
        ),
        Case(
            "block larger than n_k",
            (normal(rng, 2, n_q, 5), normal(rng, 2, n_k, 5), normal(rng, 2, n_k, 5), 64, None),
        ),
        Case(
            "mask with a fully-masked row",
            (normal(rng, n_q, 4), normal(rng, n_k, 4), normal(rng, n_k, 3), 2, rows),
        ),
        # scores of about +-LARGE**2 = 1600: exp overflows unless every block is shifted by
        # the running max, so neither "no shift" nor "the first block's max" passes
        Case(
            "block size 1, large scores",
            (
                LARGE * normal(rng, n_q, 6),
                LARGE * normal(rng, n_k, 6),
                normal(rng, n_k, 2),
                1,
                None,
            ),
        ),
        # the method, not only the outcome: the full score matrix of this case (720 MB in
        # float64, 360 MB in float32) does not fit in the sandbox's MEMORY; its blocks do
        Case(
            f"{BIG_Q} queries x {BIG_K} keys (the full score matrix does not fit in memory)",
            (normal(rng, BIG_Q, 4), normal(rng, BIG_K, 4), normal(rng, BIG_K, 2), 1024, None),
        ),
    ]


#: the scale of q and k in the large-scores case: scores q.k / sqrt(d) of standard deviation
#: LARGE**2, far over the 709 where float64 exp overflows
LARGE = 40.0
#: the sandbox memory of this chapter, and the case whose (n_q, n_k) scores exceed it
MEMORY = 256 << 20
BIG_Q, BIG_K = 3000, 30000


def _transposed_self_attention(x, w_q, w_k, w_v, mask=None):
    """Output and weights computed with W^T instead of W (queries as columns)."""
    _, w = self_attention.self_attention(x, w_q, w_k, w_v, mask)
    wt = np.swapaxes(w, -1, -2)  # (..., n, n)
    return wt @ (np.asarray(x) @ np.asarray(w_v)), wt


def _swap_sin_cos(n, d):
    """Positions with sin and cos swapped (cos in even columns, sin in odd ones)."""
    w = 10000.0 ** (-np.arange(0, d, 2, dtype=np.float64) / d)  # (ceil(d/2),)
    angles = np.arange(n, dtype=np.float64)[:, None] * w[None, :]  # (n, ceil(d/2))
    pe = np.empty((n, d))
    pe[:, 0::2] = np.cos(angles)
    pe[:, 1::2] = np.sin(angles[:, : d // 2])
    return pe


CHAPTER = register(
    Chapter(
        "ch4_self_attention",
        # measured 2026-12-03 (`python -m autograder.grading.measure`, then in budgets.py): the
        # solved notebook graded in a warm sandbox took 3.38, 4.34, 5.06 s (2 CPUs, load average
        # 4.7); T = the slowest
        reference_seconds=5.1,
        limits={"memory_bytes": MEMORY},
        checks=(
            Check(
                "self_attention",
                self_attention.self_attention,
                _self_attention_cases,
                outputs=("output", "weights"),
                hints={
                    "arity": "return a pair (output, weights)",
                    "nan": HINT_EMPTY + "; and " + HINT_MAX_SHIFT,
                    "output.shape": "output = weights @ (x @ w_v) has shape (..., n, d_v)",
                },
                mistakes=(
                    Mistake(
                        "you forgot to divide the scores by sqrt(d_k)",
                        scaled_query(
                            self_attention.self_attention,
                            1,
                            lambda a: np.shape(a[1])[1],
                        ),
                    ),
                    Mistake(
                        "scale by sqrt(d_k), the width of the queries and keys, not sqrt(d_in)",
                        lambda x, wq, wk, wv, mask=None: self_attention.self_attention(
                            x,
                            np.asarray(wq) * math.sqrt(np.shape(wq)[1] / np.shape(wq)[0]),
                            wk,
                            wv,
                            mask,
                        ),
                    ),
                    Mistake(
                        "your weights are transposed: row i must hold query i's weights over the keys j",
                        _transposed_self_attention,
                    ),
                ),
            ),
            Check(
                "causal_mask",
                self_attention.causal_mask,
                _causal_cases,
                outputs=("mask",),
                hints={
                    "dtype": "build it with a comparison (e.g. j <= i), which gives a boolean array"
                },
                mistakes=(
                    Mistake(
                        "query i may attend to keys j <= i (the past), so the mask is lower-triangular, not upper",
                        lambda n: self_attention.causal_mask(n).T,
                    ),
                    Mistake(
                        "every position may attend to itself: the condition is j <= i, not j < i",
                        lambda n: np.tril(np.ones((n, n), dtype=bool), -1),
                    ),
                ),
            ),
            Check(
                "local_mask",
                self_attention.local_mask,
                _local_cases,
                outputs=("mask",),
                hints={
                    "dtype": "build it with a comparison (|i - j| <= window), which gives a boolean array"
                },
                mistakes=(
                    Mistake(
                        "the band includes |i - j| = window: use <=, not <",
                        lambda n, w: np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]) < w,
                    ),
                ),
            ),
            Check(
                "sinusoidal_positions",
                self_attention.sinusoidal_positions,
                _positions_cases,
                outputs=("positions",),
                hints={
                    "transposed": "rows are positions: the encoding has shape (n, d)",
                    "values": "PE[t, 2i] = sin(t w_i), PE[t, 2i+1] = cos(t w_i), w_i = 10000^(-2i/d); an odd d drops the last cosine",
                },
                mistakes=(
                    Mistake(
                        "sin goes in the even columns (2i) and cos in the odd ones (2i+1)",
                        _swap_sin_cos,
                    ),
                ),
            ),
            Check(
                "online_softmax_attention",
                self_attention.online_softmax_attention,
                _online_cases,
                outputs=("output",),
                rtol=1e-6,
                atol=1e-9,
                hints={
                    "MemoryError": "never build the (n_q, n_k) score matrix: take the keys block by block, "
                    "keeping only a running max, sum and output per query",
                    "nan": "a row whose keys are all masked so far has running max -inf: shift by 0 there "
                    "(never compute -inf - (-inf)), and give a fully masked row a zero output",
                    "values": "when a block raises the running max from m to m', rescale the running sum and "
                    "output by exp(m - m') before adding the block; divide by the sum once, at the end",
                },
                mistakes=(
                    Mistake(
                        "you forgot to divide the scores by sqrt(d_k)",
                        scaled_query(
                            self_attention.online_softmax_attention,
                            0,
                            lambda a: np.shape(a[0])[-1],
                        ),
                    ),
                ),
            ),
        ),
    )
)
