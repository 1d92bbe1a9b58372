"""Chapter plug-in: Multi-head attention (assignment ``ch5_multihead``).

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
    normal,
    register,
)

# imported on first call: these reference modules import PyTorch (checks.LazyFunction)
multihead = lazy_module("solutions.multihead")


def _split_cases(rng):
    n = int(rng.integers(3, 6))
    return [
        Case("batch of 2, 3 heads", (normal(rng, 2, n, 12), 3)),
        Case("no batch axis, 2 heads", (normal(rng, n, 8), 2)),
        Case("head width 1", (normal(rng, 2, 3, n, 6), 6)),
        Case("one head", (normal(rng, n, 4), 1)),
    ]


def _merge_cases(rng):
    n = int(rng.integers(3, 6))
    return [
        Case("batch of 2, 3 heads", (normal(rng, 2, 3, n, 4),)),
        Case("no batch axis, 2 heads", (normal(rng, 2, n, 5),)),
        Case("one head", (normal(rng, 1, n, 3),)),
        Case("single item (n=1)", (normal(rng, 4, 1, 2),)),
    ]


def _mha_cases(rng):
    n_q, n_kv = distinct_sizes(rng, 2, 7, 2)
    d_model = 12
    w = lambda a, b: normal(rng, a, b) / math.sqrt(a)  # noqa: E731
    causal = np.arange(n_q)[None, :] <= np.arange(n_q)[:, None]
    rows = np.ones((n_q, n_kv), dtype=bool)
    rows[0] = False
    x = normal(rng, 2, n_q, 6)
    return [
        Case(
            "self-attention, causal, batch of 2",
            (x, x, w(6, d_model), w(6, d_model), w(6, d_model), w(d_model, 6), 3, causal),
        ),
        Case(
            "cross-attention, n_q != n_kv",
            (
                normal(rng, n_q, 5),
                normal(rng, n_kv, 7),
                w(5, d_model),
                w(7, d_model),
                w(7, d_model),
                w(d_model, 4),
                4,
                None,
            ),
        ),
        Case(
            "fully-masked row",
            (
                normal(rng, n_q, 6),
                normal(rng, n_kv, 6),
                w(6, 8),
                w(6, 8),
                w(6, 8),
                w(8, 6),
                2,
                rows,
            ),
        ),
        Case(
            "one head",
            (
                normal(rng, n_q, 4),
                normal(rng, n_kv, 4),
                w(4, 6),
                w(4, 6),
                w(4, 6),
                w(6, 4),
                1,
                None,
            ),
        ),
        # query and key projections 100 times larger: each head's scores are about +-10^4,
        # and exp overflows without the max shift
        Case(
            "large scores, 3 heads",
            (
                normal(rng, n_q, 6),
                normal(rng, n_kv, 6),
                100 * w(6, d_model),
                100 * w(6, d_model),
                w(6, d_model),
                w(d_model, 6),
                3,
                None,
            ),
        ),
    ]


def _mha_wrong_scale(*args, **kwargs):
    """Scores scaled by sqrt(d_model) instead of sqrt(d_head)."""
    args = list(args)
    d_model, h = np.shape(args[2])[1], args[6]
    args[2] = np.asarray(args[2]) * math.sqrt(d_model / h) / math.sqrt(d_model)
    return multihead.multihead_attention(*args, **kwargs)


def _split_no_swap(x, num_heads):
    x = np.asarray(x)
    n, d = x.shape[-2:]
    return x.reshape(x.shape[:-2] + (num_heads, n, d // num_heads))


def _merge_no_swap(x):
    x = np.asarray(x)
    h, n, d_h = x.shape[-3:]
    return x.reshape(x.shape[:-3] + (n, h * d_h))


def _param_cases(rng):
    return [
        Case("d_model=512, 8 heads", (512, 8, True)),
        Case("no biases", (64, 4, False)),
        Case("one head", (10, 1, True)),
        Case("random size", (int(rng.integers(2, 9)) * 6, 6, bool(rng.integers(2)))),
    ]


def _params_without_output(d_model, num_heads, bias=True):
    return 3 * d_model * d_model + (3 * d_model if bias else 0)


def _params_per_head_full(d_model, num_heads, bias=True):
    return (
        num_heads * (3 * d_model * d_model + (3 * d_model if bias else 0))
        + d_model * d_model
        + (d_model if bias else 0)
    )


CHAPTER = register(
    Chapter(
        "ch5_multihead",
        # measured 2026-12-03 (`python -m autograder.grading.measure`, then in budgets.py): the
        # solved notebook graded in a warm sandbox took 0.12, 0.12, 0.12 s (2 CPUs, load average
        # 4.7); T = the slowest
        reference_seconds=0.12,
        checks=(
            Check(
                "split_heads",
                multihead.split_heads,
                _split_cases,
                outputs=("heads",),
                hints={"shape": "(..., n, d) -> (..., h, n, d / h)"},
                mistakes=(
                    Mistake(
                        "a plain reshape to (..., h, n, d/h) mixes items across heads: reshape to "
                        "(..., n, h, d/h) first, then swap axes -3 and -2",
                        _split_no_swap,
                    ),
                ),
            ),
            Check(
                "merge_heads",
                multihead.merge_heads,
                _merge_cases,
                outputs=("merged",),
                hints={"shape": "(..., h, n, d_h) -> (..., n, h * d_h)"},
                mistakes=(
                    Mistake(
                        "a plain reshape mixes items across heads: swap axes -3 and -2 to (..., n, h, d_h) "
                        "first, then reshape",
                        _merge_no_swap,
                    ),
                ),
            ),
            Check(
                "multihead_attention",
                multihead.multihead_attention,
                _mha_cases,
                outputs=("output", "weights"),
                hints={
                    "arity": "return a pair (output, weights)",
                    "nan": HINT_EMPTY + "; and " + HINT_MAX_SHIFT,
                    "weights.shape": "weights are (..., h, n_q, n_kv): one (n_q, n_kv) matrix per head",
                    "weights.transposed": "did you transpose K, or forget to move the head axis before the sequence axis?",
                },
                mistakes=(
                    Mistake(
                        "scale each head's scores by sqrt(d_head) = sqrt(d_model / h), not sqrt(d_model)",
                        _mha_wrong_scale,
                    ),
                ),
            ),
            Check(
                "multihead_param_count",
                multihead.multihead_param_count,
                _param_cases,
                outputs=("count",),
                rtol=0.0,
                atol=0.0,
                mistakes=(
                    Mistake(
                        "count the output projection W_o (d_model x d_model, plus its bias) too",
                        _params_without_output,
                    ),
                    Mistake(
                        "each head projects to d_model / h features, not d_model: the h heads together "
                        "have the parameters of one full-width head",
                        _params_per_head_full,
                    ),
                ),
            ),
        ),
    )
)
