"""Chapter plug-in: Soft and hard attention (assignment ``ch2_soft_hard``).

Its checks (inputs from a seed, reference, tolerance, hints, known mistakes), registered
with ``autograder.checking.checks.register``; the grader core never names this module. The page shows
the softmax, attention and hard attention forward; the tasks are the next steps: the
softmax's backward pass, attention's backward pass, sparsemax and sparsemax's backward pass
(references in ``answers/ch2_soft_hard.py``).
"""

from __future__ import annotations

import math

import numpy as np

from answers import ch2_soft_hard as answers
from autograder.checking.checks import (
    HINT_EMPTY,
    HINT_MAX_SHIFT,
    Case,
    Chapter,
    Check,
    Mistake,
    distinct_sizes,
    lengths_mask,
    normal,
    register,
    told_apart,
)
from solutions.conventions import masked_softmax

# ----------------------------------------------------------------------------------------
# softmax_backward


def _empty_row_mask(rng, n_q, n_k):
    """(n_q, n_k): row 0 fully masked, row 1 every other key, the others random lengths."""
    rows = np.ones((n_q, n_k), dtype=bool)
    rows[1:] = lengths_mask(rng, n_q - 1, n_k)
    rows[0] = False
    rows[1, ::2] = False
    return rows


def _softmax_backward_cases(rng):
    n_q, n_k = distinct_sizes(rng, 3, 7, 2)
    causal = np.arange(5)[None, :] <= np.arange(5)[:, None]
    single = np.array([[True], [False], [True]])

    def weights(scores, mask=None):
        return masked_softmax(scores, mask)

    return [
        Case(
            "no mask, batch of 2 (n_q != n_k)",
            (weights(normal(rng, 2, n_q, n_k)), normal(rng, 2, n_q, n_k)),
        ),
        Case(
            "fully-masked row",
            (weights(normal(rng, n_q, n_k), _empty_row_mask(rng, n_q, n_k)), normal(rng, n_q, n_k)),
        ),
        Case("causal mask", (weights(normal(rng, 5, 5), causal), normal(rng, 5, 5))),
        # dP + c (one constant per row) has the same dS: the subtraction must cancel it
        Case(
            "a constant added to each row of dP",
            (
                weights(normal(rng, n_q, n_k)),
                normal(rng, n_q, n_k) + 1000.0 * normal(rng, n_q, 1),
            ),
        ),
        Case(
            "nearly one-hot rows (large scores)",
            (weights(30.0 * normal(rng, n_q, n_k)), normal(rng, n_q, n_k)),
        ),
        Case("single key (n_k=1)", (weights(normal(rng, 3, 1), single), normal(rng, 3, 1))),
        Case(
            "batch axes (2, 3)",
            (weights(normal(rng, 2, 3, n_q, n_k)), normal(rng, 2, 3, n_q, n_k)),
        ),
        Case(
            "one query (n_q = 1), batch of 2",
            (weights(normal(rng, 2, 1, n_k)), normal(rng, 2, 1, n_k)),
        ),
    ]


def _softmax_backward_scale(weights, grad_weights):
    """The size of the terms of dS = P dP - P sum(P dP) (|P| exact: the weights are given)."""
    p, dp = np.abs(weights), np.abs(grad_weights)
    return (p * (dp + np.sum(p * dp, axis=-1, keepdims=True)),)


def _sm_no_subtraction(p, dp):
    return np.asarray(p) * np.asarray(dp)


def _sm_wrong_axis(p, dp):
    p, dp = np.asarray(p, float), np.asarray(dp, float)
    return p * (dp - np.sum(p * dp, axis=-2, keepdims=True))


def _sm_log_softmax(p, dp):
    p, dp = np.asarray(p, float), np.asarray(dp, float)
    return dp - p * np.sum(dp, axis=-1, keepdims=True)


def _sm_sign(p, dp):
    return -answers.softmax_backward(p, dp)


def _sm_unweighted(p, dp):
    p, dp = np.asarray(p, float), np.asarray(dp, float)
    return p * (dp - np.sum(dp, axis=-1, keepdims=True))


# The hints name the cause and where the chapter derives what is missing, never the fix as
# code (issue 45: a hint that prints dS = P * (dP - sum(P * dP)) turns the task into copying).
HINT_SM_VALUES = (
    "each weight of a row depends on every score of that row (through the normaliser), so the "
    "gradient of one score gathers dP over its whole row: start from the softmax's derivative "
    "in the chapter's 'Five scoring functions' and apply the chain rule along the row"
)
HINT_SM_SHAPE = (
    "dS has the shape of the weights (..., n_q, n_k): a sum over a row must stay "
    "broadcastable against that row"
)
HINT_NO_SUBTRACTION = (
    "you kept only the diagonal of the softmax's Jacobian: a weight also depends on the other "
    "scores of its row, through the normaliser (the softmax's derivative in 'Five scoring "
    "functions')"
)
HINT_WRONG_AXIS = (
    "the chain rule sums over the weights of one query's row (over the keys), not over a "
    "column (over the queries): a softmax normalises each row on its own"
)
HINT_LOG_SOFTMAX = (
    "that is the backward pass of log-softmax, the score function d log p_i / d s_j of "
    "REINFORCE alone: the weights are p_i, not log p_i, and d p_i = p_i d log p_i"
)
HINT_SIGN = (
    "the sign is flipped: raising a score raises its own weight and lowers the others' (the "
    "softmax's derivative in 'Five scoring functions')"
)
HINT_UNWEIGHTED = (
    "the term you subtract comes from the normaliser's derivative, which carries each weight: "
    "an average of dP over the row weighted by the weights, not a plain sum"
)

# ----------------------------------------------------------------------------------------
# attention_backward


def _attention_backward_cases(rng):
    n_q, n_k = distinct_sizes(rng, 2, 7, 2)
    causal = np.arange(4)[None, :] <= np.arange(4)[:, None]
    return [
        Case(
            "non-square, d_v != d",
            (normal(rng, n_q, 4), normal(rng, n_k, 4), normal(rng, n_k, 3), normal(rng, n_q, 3)),
        ),
        Case(
            "padding mask, batch axes (2, 2)",
            (
                normal(rng, 2, 2, n_q, 6),
                normal(rng, 2, 2, n_k, 6),
                normal(rng, 2, 2, n_k, 2),
                normal(rng, 2, 2, n_q, 2),
                lengths_mask(rng, 2, n_k)[:, None, None, :],
            ),
        ),
        Case(
            "fully-masked row",
            (
                normal(rng, n_q, 3),
                normal(rng, n_k, 3),
                normal(rng, n_k, 5),
                normal(rng, n_q, 5),
                _empty_row_mask(rng, n_q, n_k),
            ),
        ),
        Case(
            "causal mask",
            (normal(rng, 4, 8), normal(rng, 4, 8), normal(rng, 4, 8), normal(rng, 4, 8), causal),
        ),
        Case(
            "keys and values shared by a batch of 3 queries",
            (
                normal(rng, 3, n_q, 4),
                normal(rng, n_k, 4),
                normal(rng, n_k, 2),
                normal(rng, 3, n_q, 2),
            ),
        ),
        # scores q.k / sqrt(d) of about +-10^4: exp overflows without the max shift
        Case(
            "large scores",
            (
                100 * normal(rng, n_q, 4),
                100 * normal(rng, n_k, 4),
                normal(rng, n_k, 3),
                normal(rng, n_q, 3),
            ),
        ),
        # the one key gets weight 1 (no gradient reaches the scores) or, masked, 0
        Case(
            "single key (n_k=1), one query masked",
            (
                normal(rng, 2, 3),
                normal(rng, 1, 3),
                normal(rng, 1, 2),
                normal(rng, 2, 2),
                np.array([[True], [False]]),
            ),
        ),
        Case(
            "one query (n_q = 1), d = d_v = 1, a mask of the keys (n_k,)",
            (
                normal(rng, 1, 1),
                normal(rng, n_k, 1),
                normal(rng, n_k, 1),
                normal(rng, 1, 1),
                np.arange(n_k) != 0,
            ),
        ),
    ]


def _attention_backward_scale(q, k, v, grad_out, mask=None):
    """The size of the terms each gradient sums: |P| widened by 1 + |S| + |max S| (P is exp
    of S - max S: an ulp of either is an error of that size in the exponent), the terms of
    dS = P dP - P sum(P dP), then the products with |K|, |Q|, |dO|."""
    q, k, v, d_out = (np.asarray(x, dtype=float) for x in (q, k, v, grad_out))
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = q @ np.swapaxes(k, -1, -2) * scale  # (..., n_q, n_k)
    allowed = np.ones(s.shape, bool) if mask is None else np.broadcast_to(mask, s.shape)
    top = np.max(np.where(allowed, s, -np.inf), axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    p = masked_softmax(s, mask)
    with np.errstate(invalid="ignore"):
        # + 1e-300: a weight that underflows to a subnormal (exp of about -745) has no
        # relative precision; two honest orders of operations differ there by a few 1e-324
        e = np.where(allowed, p * (1.0 + np.abs(s) + np.abs(top)) + 1e-300, 0.0)
    a = np.abs(d_out) @ np.abs(np.swapaxes(v, -1, -2))  # (..., n_q, n_k): terms of dP
    t = e * (a + np.sum(e * a, axis=-1, keepdims=True))  # (..., n_q, n_k): terms of dS
    dq = t @ np.abs(k) * scale  # (..., n_q, d)
    dk = np.swapaxes(t, -1, -2) @ np.abs(q) * scale  # (..., n_k, d)
    dv = np.swapaxes(e, -1, -2) @ np.abs(d_out)  # (..., n_k, d_v)
    return (
        answers._sum_to(dq, q.shape),
        answers._sum_to(dk, k.shape),
        answers._sum_to(dv, v.shape),
    )


def _attention_backward_with(ds_of=None, qk_scale=None, transpose_ds=True):
    """attention_backward with one piece replaced: ``ds_of(P, dP)`` for the softmax backward,
    ``qk_scale(d)`` for the factor of dQ and dK, dK from dS instead of dS^T."""

    def wrong(q, k, v, grad_out, mask=None):
        q, k, v, d_out = (np.asarray(x, dtype=float) for x in (q, k, v, grad_out))
        d = q.shape[-1]
        s = q @ np.swapaxes(k, -1, -2) / math.sqrt(d)
        if not transpose_ds and s.shape[-1] != s.shape[-2]:
            raise ValueError("dS without its transpose has another shape here")
        p = masked_softmax(s, mask)
        dv = np.swapaxes(p, -1, -2) @ d_out
        dp = d_out @ np.swapaxes(v, -1, -2)
        ds = (ds_of or answers.softmax_backward)(p, dp)
        factor = qk_scale(d) if qk_scale else 1.0 / math.sqrt(d)
        dq = ds @ k * factor
        dk = (np.swapaxes(ds, -1, -2) if transpose_ds else ds) @ q * factor
        return (
            answers._sum_to(dq, q.shape),
            answers._sum_to(dk, k.shape),
            answers._sum_to(dv, v.shape),
        )

    return wrong


HINT_ATT_UNSCALED = (
    "the scores are divided by sqrt(d), so the chain rule carries that factor into both dQ and "
    "dK (the scaled dot product in the chapter's 'Five scoring functions'); dV does not see it"
)
HINT_ATT_BY_D = (
    "dQ and dK carry the factor of the scores once: the scores are divided by sqrt(d), not by d"
)
HINT_ATT_NO_SOFTMAX = (
    "dP went straight to the scores: between dP and dS the gradient passes through the "
    "softmax's backward pass (your task 1)"
)
HINT_ATT_NO_SUBTRACTION = (
    "your dS keeps only the diagonal of the softmax's Jacobian: check task 1 first (its own "
    "check names this)"
)
HINT_ATT_LOG_SOFTMAX = (
    "your dS is log-softmax's backward pass, not the softmax's: check task 1 first (its own "
    "check names this)"
)
HINT_ATT_DS_NOT_TRANSPOSED = (
    "key j collects the gradient of column j of dS (from every query that scored it), not of "
    "row j: K enters the scores transposed"
)
HINT_ATT_FORWARD_UNSCALED = (
    "your weights are those of unscaled scores: the forward pass you recompute must divide the "
    "scores by sqrt(d) too (the scaled dot product in 'Five scoring functions'), and dV, dQ "
    "and dK all read those weights"
)
HINT_ATT_NOWHERE_SCALED = (
    "the 1/sqrt(d) of the scores is missing both from the recomputed weights and from dQ and "
    "dK: the scaled dot product ('Five scoring functions') divides the scores by sqrt(d), and "
    "the chain rule carries the factor into dQ and dK"
)
HINT_ATT_VALUES = (
    "dq and dk both come from dS and the 1/sqrt(d) of the scores, dv from the weights alone: "
    "if dv is right, look at dS and that factor; if it is wrong too, at the weights (the mask, "
    "the scale of the scores)"
)


def _attention_backward_unscaled_forward(scale_gradients):
    """attention_backward whose recomputed weights come from unscaled scores Q K^T, with dQ
    and dK divided by sqrt(d) (``scale_gradients``) or not."""

    def wrong(q, k, v, grad_out, mask=None):
        d = np.shape(q)[-1]
        dq, dk, dv = answers.attention_backward(np.asarray(q) * math.sqrt(d), k, v, grad_out, mask)
        # the reference on sqrt(d) q: weights of Q K^T, dq = dS K / sqrt(d), dk = dS^T q
        return (dq, dk / math.sqrt(d), dv) if scale_gradients else (dq * math.sqrt(d), dk, dv)

    return wrong


# ----------------------------------------------------------------------------------------
# sparsemax


def _sparsemax_cases(rng):
    n_q, n_k = distinct_sizes(rng, 3, 7, 2)
    causal = np.arange(5)[None, :] <= np.arange(5)[:, None]
    keys = np.ones(n_k, dtype=bool)
    keys[rng.permutation(n_k)[: n_k // 2]] = False
    return [
        Case("no mask, batch of 2", (2.0 * normal(rng, 2, n_q, n_k), None)),
        Case("fully-masked row", (2.0 * normal(rng, n_q, n_k), _empty_row_mask(rng, n_q, n_k))),
        Case("causal mask", (normal(rng, 5, 5), causal)),
        Case("one key mask shared by every query (n_k,)", (normal(rng, n_q, n_k), keys)),
        # multiples of 1/2: equal scores, and a support edge exactly on tau
        Case("ties", (0.5 * rng.integers(-2, 3, (4, n_k)).astype(float), None)),
        Case("every key in the support (small spread)", (0.05 * normal(rng, n_q, n_k), None)),
        Case("large scores", (1000.0 * normal(rng, n_q, n_k), None)),
        Case("a large offset (1e6 + small scores)", (1e6 + 0.3 * normal(rng, n_q, n_k), None)),
        Case("single key (n_k=1)", (normal(rng, 3, 1), np.array([[True], [False], [True]]))),
        Case("one query (n_q = 1)", (2.0 * normal(rng, 1, n_k), None)),
    ]


def _sparsemax_scale(scores, mask=None):
    """tau is a mean of the support's scores: an entry is computed from terms of the size of
    the largest allowed |z| of its row (and 1, the simplex's sum)."""
    z = np.asarray(scores, dtype=float)
    allowed = np.ones(z.shape, bool) if mask is None else np.broadcast_to(mask, z.shape)
    top = np.max(np.where(allowed, np.abs(z), 0.0), axis=-1, keepdims=True)
    return (np.broadcast_to(1.0 + top, z.shape),)


def _sparsemax_with(start=1, divide=True, clip=True, sort_descending=True):
    """sparsemax with one step wrong: the support index j counted from ``start``, tau not
    divided by k, no max(0, .), the scores sorted in increasing order."""

    def wrong(scores, mask=None):
        z = np.asarray(scores, dtype=float)
        allowed = np.ones(z.shape, bool) if mask is None else np.broadcast_to(mask, z.shape)
        z = np.where(allowed, z, -np.inf)
        zs = -np.sort(-z, axis=-1) if sort_descending else np.sort(z, axis=-1)
        j = np.arange(start, start + z.shape[-1])
        with np.errstate(all="ignore"):
            cs = np.cumsum(zs, axis=-1)
            k = np.sum(1 + j * zs > cs, axis=-1, keepdims=True)
            top = np.take_along_axis(cs, np.maximum(k - 1, 0), axis=-1)
            tau = np.where(k > 0, top - 1, 0.0) / (np.maximum(k, 1) if divide else 1)
            p = z - tau
        return np.where(allowed, np.maximum(p, 0.0) if clip else p, 0.0)

    return wrong


def _sparsemax_masked_after(scores, mask=None):
    z = np.asarray(scores, dtype=float)
    out = answers.sparsemax(z)
    return out if mask is None else np.where(mask, out, 0.0)


def _sparsemax_masked_zero(scores, mask=None):
    z = np.asarray(scores, dtype=float)
    if mask is None:
        return answers.sparsemax(z)
    allowed = np.broadcast_to(mask, z.shape)
    return answers.sparsemax(np.where(allowed, z, 0.0)) * allowed


HINT_SPARSEMAX_VALUES = (
    "p_i = max(z_i - tau, 0): sort the row in decreasing order, k is the largest j (counted "
    "from 1) with 1 + j z_(j) > z_(1) + ... + z_(j), and tau = (z_(1) + ... + z_(k) - 1) / k"
)
HINT_SPARSEMAX_EMPTY = (
    "a row with no allowed key has no support (k = 0): give it all zeros instead of dividing by k"
)

# ----------------------------------------------------------------------------------------
# sparsemax_backward


def _sparsemax_backward_cases(rng):
    n_q, n_k = distinct_sizes(rng, 3, 7, 2)
    return [
        Case(
            "batch of 2 (n_q != n_k)",
            (answers.sparsemax(normal(rng, 2, n_q, n_k)), normal(rng, 2, n_q, n_k)),
        ),
        Case(
            "fully-masked row",
            (
                answers.sparsemax(normal(rng, n_q, n_k), _empty_row_mask(rng, n_q, n_k)),
                normal(rng, n_q, n_k),
            ),
        ),
        Case(
            "one-hot rows (support of size 1)",
            (answers.sparsemax(20.0 * normal(rng, n_q, n_k)), normal(rng, n_q, n_k)),
        ),
        Case(
            "every key in the support",
            (answers.sparsemax(0.05 * normal(rng, n_q, n_k)), normal(rng, n_q, n_k)),
        ),
        Case(
            "a constant added to each row of dP",
            (
                answers.sparsemax(normal(rng, n_q, n_k)),
                normal(rng, n_q, n_k) + 1000.0 * normal(rng, n_q, 1),
            ),
        ),
        Case(
            "batch axes (2, 3)",
            (answers.sparsemax(normal(rng, 2, 3, n_q, n_k)), normal(rng, 2, 3, n_q, n_k)),
        ),
        Case(
            "single key (n_k=1)",
            (np.array([[1.0], [0.0], [1.0]]), normal(rng, 3, 1)),
        ),
        Case(
            "one query (n_q = 1)",
            (answers.sparsemax(normal(rng, 1, n_k)), normal(rng, 1, n_k)),
        ),
    ]


def _sparsemax_backward_scale(weights, grad_weights):
    """The terms of dS_i = dP_i - mean_S dP: |dP_i| and the mean of |dP| over the support."""
    support = np.asarray(weights) > 0
    dp = np.abs(np.asarray(grad_weights, dtype=float))
    size = np.maximum(support.sum(axis=-1, keepdims=True), 1)
    return (dp + np.sum(np.where(support, dp, 0.0), axis=-1, keepdims=True) / size,)


def _spb_everywhere(p, dp):
    support = np.asarray(p) > 0
    dp = np.asarray(dp, dtype=float)
    size = np.maximum(support.sum(axis=-1, keepdims=True), 1)
    return dp - np.sum(np.where(support, dp, 0.0), axis=-1, keepdims=True) / size


def _spb_mean_of_all(p, dp):
    support = np.asarray(p) > 0
    dp = np.asarray(dp, dtype=float)
    return np.where(support, dp - dp.mean(axis=-1, keepdims=True), 0.0)


def _spb_sum(p, dp):
    support = np.asarray(p) > 0
    dp = np.asarray(dp, dtype=float)
    return np.where(support, dp - np.sum(np.where(support, dp, 0.0), -1, keepdims=True), 0.0)


def _spb_weighted(p, dp):
    p, dp = np.asarray(p, dtype=float), np.asarray(dp, dtype=float)
    return np.where(p > 0, dp - np.sum(p * dp, axis=-1, keepdims=True), 0.0)


HINT_SPB_OFF_SUPPORT = (
    "a key outside the support (weight 0) gets gradient 0: sparsemax is flat there"
)
HINT_SPB_MEAN_ALL = "the mean runs over the support S = {j : P_j > 0} only, not over all n_k keys"
HINT_SPB_SOFTMAX = (
    "that is the softmax's backward pass: sparsemax's weights move only on the support, where "
    "they follow the scores one for one except for the share the threshold tau takes"
)
HINT_SPB_SUM = (
    "your threshold takes the whole sum of the changes on the support: tau is an average over "
    "the support (task 3), so its share is divided by |S|"
)
HINT_SPB_WEIGHTED = (
    "the subtracted mean is unweighted: (1/|S|) sum_{j in S} dP_j, not sum_j P_j dP_j"
)


CHAPTER = register(
    Chapter(
        "ch2_soft_hard",
        # measured 2026-12-05 (`python -m autograder.grading.measure`, then in budgets.py) for
        # the backward-pass and sparsemax notebook: 3.95, 0.42, 0.41 s and 3.20, 0.46, 0.34 s on
        # 2 CPUs at a load average of 13 (six helpers' scans beside it; the old notebook took
        # 0.19, 0.16, 0.16 s at 4.0). T = the slowest warm run, rounded up: the cold first run
        # is the loaded machine's, and 4 T + 15 s covers it
        reference_seconds=0.5,
        checks=(
            Check(
                "softmax_backward",
                answers.softmax_backward,
                _softmax_backward_cases,
                outputs=("grad_scores",),
                rtol=1e-12,
                atol=1e-14,
                scale=_softmax_backward_scale,
                hints={"shape": HINT_SM_SHAPE, "values": HINT_SM_VALUES},
                mistakes=(
                    Mistake(HINT_NO_SUBTRACTION, _sm_no_subtraction),
                    Mistake(HINT_WRONG_AXIS, _sm_wrong_axis),
                    # on a row of one key P dP and log-softmax's dP - P sum(dP) coincide with
                    # other wrong backward passes (a masked row: dP itself): named only where
                    # every failing case agrees
                    Mistake(HINT_LOG_SOFTMAX, _sm_log_softmax, everywhere=True),
                    Mistake(HINT_SIGN, _sm_sign),
                    Mistake(HINT_UNWEIGHTED, _sm_unweighted),
                ),
            ),
            Check(
                "attention_backward",
                answers.attention_backward,
                _attention_backward_cases,
                outputs=("dq", "dk", "dv"),
                rtol=1e-12,
                atol=1e-14,
                scale=_attention_backward_scale,
                hints={
                    "arity": "return three gradients (dq, dk, dv)",
                    "nan": HINT_EMPTY + "; and " + HINT_MAX_SHIFT,
                    "dq.shape": "dq has the shape of q (..., n_q, d)",
                    "dk.shape": "dk has the shape of k (..., n_k, d), summed over the batch axes "
                    "k was broadcast along",
                    "dv.shape": "dv has the shape of v (..., n_k, d_v), summed over the batch "
                    "axes v was broadcast along",
                    "values": HINT_ATT_VALUES,
                },
                mistakes=(
                    Mistake(HINT_ATT_UNSCALED, _attention_backward_with(qk_scale=lambda d: 1.0)),
                    Mistake(HINT_ATT_BY_D, _attention_backward_with(qk_scale=lambda d: 1.0 / d)),
                    Mistake(HINT_ATT_NO_SOFTMAX, _attention_backward_with(ds_of=lambda p, dp: dp)),
                    Mistake(HINT_ATT_NO_SUBTRACTION, _attention_backward_with(_sm_no_subtraction)),
                    Mistake(HINT_ATT_LOG_SOFTMAX, _attention_backward_with(_sm_log_softmax)),
                    Mistake(
                        HINT_ATT_DS_NOT_TRANSPOSED, _attention_backward_with(transpose_ds=False)
                    ),
                    Mistake(HINT_ATT_FORWARD_UNSCALED, _attention_backward_unscaled_forward(True)),
                    Mistake(HINT_ATT_NOWHERE_SCALED, _attention_backward_unscaled_forward(False)),
                ),
                calls=("softmax_backward",),
            ),
            Check(
                "sparsemax",
                answers.sparsemax,
                _sparsemax_cases,
                outputs=("weights",),
                rtol=1e-12,
                atol=1e-14,
                scale=_sparsemax_scale,
                hints={"nan": HINT_SPARSEMAX_EMPTY, "values": HINT_SPARSEMAX_VALUES},
                mistakes=told_apart(
                    Mistake(
                        "off by one in the support size: count j from 1 "
                        "(1 + j z_(j) > z_(1) + ... + z_(j) with j = 1, ..., n_k)",
                        _sparsemax_with(start=0),
                    ),
                    Mistake(
                        "tau = (z_(1) + ... + z_(k) - 1) / k: divide by the support size k",
                        _sparsemax_with(divide=False),
                    ),
                    Mistake(
                        "keys below the threshold get 0: p_i = max(z_i - tau, 0)",
                        _sparsemax_with(clip=False),
                    ),
                    Mistake(
                        "sort each row in decreasing order: z_(1) is the largest score",
                        _sparsemax_with(sort_descending=False),
                    ),
                    Mistake(
                        "masked keys must not enter the sort or the threshold: give them a "
                        "score of -inf before sparsemax, not zero weight after it",
                        _sparsemax_masked_after,
                    ),
                    Mistake(
                        "masked keys must not enter the support: give them a score of -inf "
                        "(not 0) before sorting",
                        _sparsemax_masked_zero,
                    ),
                ),
            ),
            Check(
                "sparsemax_backward",
                answers.sparsemax_backward,
                _sparsemax_backward_cases,
                outputs=("grad_scores",),
                rtol=1e-12,
                atol=1e-14,
                scale=_sparsemax_backward_scale,
                hints={
                    "values": "differentiate task 3's weights near a fixed support: the threshold tau "
                    "moves with the scores so that the weights keep summing to one, and a "
                    "key off the support does not move at all",
                },
                mistakes=(
                    Mistake(HINT_SPB_OFF_SUPPORT, _spb_everywhere),
                    Mistake(HINT_SPB_MEAN_ALL, _spb_mean_of_all),
                    Mistake(HINT_SPB_SOFTMAX, lambda p, dp: answers.softmax_backward(p, dp)),
                    Mistake(HINT_SPB_SUM, _spb_sum),
                    Mistake(HINT_SPB_WEIGHTED, _spb_weighted),
                ),
            ),
        ),
    )
)
