"""Chapter plug-in: Soft and hard attention (assignment ``ch2_soft_hard``).

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
    Seeded,
    distinct_sizes,
    lazy_module,
    lengths_mask,
    normal,
    register,
    scaled_query,
)

# imported on first call: these reference modules import PyTorch (checks.LazyFunction)
soft_hard = lazy_module("solutions.soft_hard")


def _softmax_cases(rng):
    n_q, n_k = distinct_sizes(rng, 3, 7, 2)
    causal = np.arange(5)[None, :] <= np.arange(5)[:, None]
    rows = np.ones((4, n_k), dtype=bool)
    rows[1] = False
    rows[2, ::2] = False
    return [
        Case("no mask", (normal(rng, 2, n_q, n_k), None)),
        Case("padding mask", (normal(rng, 2, n_q, n_k), lengths_mask(rng, 2, n_k)[:, None, :])),
        Case("causal mask", (normal(rng, 5, 5), causal)),
        Case("fully-masked row", (normal(rng, 4, n_k), rows)),
        Case("large scores", (1000.0 * normal(rng, 3, n_k), None)),
        Case("single key (n_k=1)", (normal(rng, 3, 1), np.array([[True], [False], [True]]))),
    ]


def _score_zero_mask(scores, mask):
    from solutions.soft_hard import softmax

    if mask is None:
        return softmax(np.asarray(scores))
    full = np.broadcast_to(mask, np.shape(scores))
    return softmax(np.where(full, scores, 0.0)) * full


def _qk_cases(rng):
    n_q, n_k = distinct_sizes(rng, 2, 7, 2)
    return [
        Case("non-square (n_q != n_k)", (normal(rng, n_q, 4), normal(rng, n_k, 4))),
        Case("batch of 2", (normal(rng, 2, n_q, 8), normal(rng, 2, n_k, 8))),
        Case("one query, one key, d=1", (normal(rng, 1, 1), normal(rng, 1, 1))),
    ]


def _additive_cases(rng):
    n_q, n_k = distinct_sizes(rng, 2, 7, 2)
    d_q, d_k, d_att = 3, 5, 4
    w = lambda *s: normal(rng, *s) / 2  # noqa: E731 - moderate pre-activations
    return [
        Case(
            "non-square, d_q != d_k",
            (
                normal(rng, n_q, d_q),
                normal(rng, n_k, d_k),
                w(d_q, d_att),
                w(d_k, d_att),
                normal(rng, d_att),
            ),
        ),
        Case(
            "batch of 2",
            (
                normal(rng, 2, n_q, d_q),
                normal(rng, 2, n_k, d_k),
                w(d_q, 6),
                w(d_k, 6),
                normal(rng, 6),
            ),
        ),
        Case(
            "one query (n_q=1)",
            (normal(rng, 1, 2), normal(rng, 4, 2), w(2, 3), w(2, 3), normal(rng, 3)),
        ),
    ]


def _attention_cases(rng):
    n_q, n_k = distinct_sizes(rng, 2, 7, 2)
    rows = np.ones((n_q, n_k), dtype=bool)
    rows[0] = False
    causal = np.arange(4)[None, :] <= np.arange(4)[:, None]
    return [
        Case(
            "non-square, d_v != d_k",
            (normal(rng, n_q, 4), normal(rng, n_k, 4), normal(rng, n_k, 3), None),
        ),
        Case(
            "padding mask, batch of 2",
            (
                normal(rng, 2, n_q, 6),
                normal(rng, 2, n_k, 6),
                normal(rng, 2, n_k, 2),
                lengths_mask(rng, 2, n_k)[:, None, :],
            ),
        ),
        Case(
            "fully-masked row",
            (normal(rng, n_q, 3), normal(rng, n_k, 3), normal(rng, n_k, 5), rows),
        ),
        Case("causal mask", (normal(rng, 4, 8), normal(rng, 4, 8), normal(rng, 4, 8), causal)),
        # scores q.k / sqrt(d) of about +-10^4: exp overflows without the max shift
        Case(
            "large scores",
            (100 * normal(rng, n_q, 4), 100 * normal(rng, n_k, 4), normal(rng, n_k, 3), None),
        ),
    ]


def _hard_cases(rng):
    from solutions.soft_hard import masked_softmax

    n_q, n_k = distinct_sizes(rng, 3, 7, 2)
    w = masked_softmax(2 * normal(rng, n_q, n_k))
    # row 1 is empty and 12 rows follow it: a sampler that skips the empty row's draw reads
    # every later row's uniform one step early, and (almost surely) picks another key somewhere
    rows = np.ones((14, n_k), dtype=bool)
    rows[1] = False
    rows[2, 1::2] = False
    w_masked = masked_softmax(normal(rng, 14, n_k), rows)
    return [
        Case("argmax (rng=None)", (w, normal(rng, n_k, 4), None)),
        Case("sampled with rng", (w, normal(rng, n_k, 4), Seeded(int(rng.integers(2**31))))),
        Case(
            "sampled, batch of 2",
            (
                masked_softmax(normal(rng, 2, n_q, n_k)),
                normal(rng, 2, n_k, 3),
                Seeded(int(rng.integers(2**31))),
            ),
        ),
        Case("fully-masked row", (w_masked, normal(rng, n_k, 2), Seeded(int(rng.integers(2**31))))),
    ]


def _skip_empty_draws(weights, values, rng=None):
    """Inverse-CDF sampling that draws a uniform only for the rows that are not empty, so every
    row after an empty one gets the next row's uniform."""
    if rng is None:
        raise ValueError("the argmax draws nothing: this mistake is about the sampled cases")
    w = np.asarray(weights, dtype=float)
    total = w.sum(axis=-1)  # (..., n_q)
    full = total > 0
    u = np.zeros(total.shape)
    u[full] = rng.random(int(full.sum())) * total[full]  # in row order, the empty rows skipped
    index = np.minimum(np.sum(np.cumsum(w, axis=-1) <= u[..., None], axis=-1), w.shape[-1] - 1)
    index = np.where(full, index, -1)
    onehot = (np.arange(w.shape[-1]) == index[..., None]).astype(float)  # (..., n_q, n_k)
    return onehot @ np.asarray(values, dtype=float), index


def _reinforce_cases(rng):
    n = int(rng.integers(3, 7))
    return [
        Case("one choice, no baseline", (normal(rng, n), int(rng.integers(n)), 1.5, 0.0)),
        Case("one choice, baseline", (normal(rng, n), int(rng.integers(n)), -0.5, 0.3)),
        Case("batch of 3", (normal(rng, 3, n), rng.integers(0, n, 3), normal(rng, 3), 0.2)),
        Case("reward equals baseline", (normal(rng, 2, n), rng.integers(0, n, 2), 0.7, 0.7)),
    ]


CHAPTER = register(
    Chapter(
        "ch2_soft_hard",
        # measured 2026-12-03 (`python -m autograder.grading.measure`, then in budgets.py): the
        # solved notebook graded in a warm sandbox took 0.19, 0.16, 0.16 s (2 CPUs, load average
        # 4.0); T = the slowest
        reference_seconds=0.2,
        checks=(
            Check(
                "masked_softmax",
                soft_hard.masked_softmax,
                _softmax_cases,
                outputs=("weights",),
                hints={"nan": HINT_EMPTY + "; and " + HINT_MAX_SHIFT, "inf": HINT_MAX_SHIFT},
                mistakes=(
                    Mistake(
                        "masked keys must get weight exactly 0: give them a score of -inf (not 0) before the softmax",
                        _score_zero_mask,
                    ),
                ),
            ),
            Check(
                "scaled_dot_score",
                soft_hard.scaled_dot_score,
                _qk_cases,
                outputs=("scores",),
                hints={
                    "transposed": "did you transpose K? scores = Q K^T / sqrt(d): queries are rows, keys are columns"
                },
                mistakes=(
                    Mistake(
                        "you forgot to divide by sqrt(d)",
                        lambda q, k: soft_hard.dot_score(q, k),
                    ),
                    Mistake(
                        "divide by sqrt(d), not by d",
                        lambda q, k: soft_hard.scaled_dot_score(
                            np.asarray(q) / math.sqrt(np.shape(q)[-1]), k
                        ),
                    ),
                ),
            ),
            Check(
                "additive_score",
                soft_hard.additive_score,
                _additive_cases,
                outputs=("scores",),
                hints={
                    "transposed": "scores[..., i, j] scores query i against key j: shape (..., n_q, n_k)",
                    "values": "s_ij = v . tanh(q_i W_q + k_j W_k): broadcast (n_q, 1, d_att) + (1, n_k, d_att)",
                },
            ),
            Check(
                "attention",
                soft_hard.attention,
                _attention_cases,
                outputs=("output", "weights"),
                hints={
                    "arity": "return a pair (output, weights)",
                    "nan": HINT_EMPTY + "; and " + HINT_MAX_SHIFT,
                    "weights.transposed": "did you transpose K? weights are (..., n_q, n_k): one row per query",
                    "output.shape": "output = weights @ v has shape (..., n_q, d_v)",
                },
                mistakes=(
                    Mistake(
                        "you forgot to divide the scores by sqrt(d_k)",
                        scaled_query(soft_hard.attention, 0, lambda a: np.shape(a[0])[-1]),
                    ),
                ),
            ),
            Check(
                "hard_attention",
                soft_hard.hard_attention,
                _hard_cases,
                outputs=("output", "index"),
                atol=0.0,
                hints={
                    "arity": "return a pair (output, index)",
                    "index.values": "with rng=None take the argmax; with an rng draw u = rng.random(weights.shape[:-1]) "
                    "once and pick the first j whose cumulative weight exceeds u * (row sum); "
                    "a row of zeros gets index -1",
                    "output.values": "output[..., i, :] = values[..., index_i, :] (zeros where index is -1)",
                },
                mistakes=(
                    Mistake(
                        "draw one uniform for every query, the fully masked ones too: "
                        "u = rng.random(weights.shape[:-1]), so the samples are the ones the grader "
                        "reproduces from the same seed",
                        _skip_empty_draws,
                    ),
                ),
            ),
            Check(
                "reinforce_grad",
                soft_hard.reinforce_grad,
                _reinforce_cases,
                outputs=("grad",),
                mistakes=(
                    Mistake(
                        "subtract the baseline: the estimate is (R - b) (onehot(z) - softmax(s))",
                        lambda s, z, r, b=0.0: soft_hard.reinforce_grad(s, z, r, 0.0),
                    ),
                    Mistake(
                        "the sign is flipped: d log p_z / d s = onehot(z) - softmax(s)",
                        lambda s, z, r, b=0.0: -soft_hard.reinforce_grad(s, z, r, b),
                    ),
                ),
            ),
        ),
    )
)
