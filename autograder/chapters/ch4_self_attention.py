"""Chapter plug-in: Self-attention (assignment ``ch4_self_attention``).

Its checks (inputs from a seed, reference, tolerance, hints, known mistakes), registered
with ``autograder.checking.checks.register``; the grader core never names this module. The page
shows self-attention, its masks, positions and the online-softmax forward pass, so the
tasks are the next steps (``answers/ch4_self_attention.py``): Longformer's window with
global tokens, ALiBi, T5's relative position buckets and the online-softmax backward pass.
"""

from __future__ import annotations

import math

import numpy as np

from answers import ch4_self_attention as answers
from autograder.checking.checks import (
    HINT_MAX_SHIFT,
    Case,
    Chapter,
    Check,
    Mistake,
    Plain,
    call,
    distinct_sizes,
    lengths_mask,
    normal,
    register,
)
from solutions.conventions import masked_softmax

# --------------------------------------------------------------------------------------
# task 1: window_global_mask


def _globals(rng, n, count):
    """(count,) distinct global positions in [0, n), in a random order."""
    return rng.choice(n, size=count, replace=False).astype(np.int64)


def _window_cases(rng):
    n = int(rng.integers(9, 14))
    return [
        Case("n=8, window=1, the first token global", (8, 1, np.array([0]))),
        Case(
            "random n, window 2, two global tokens in any order",
            (n, 2, _globals(rng, n, 2)),
        ),
        Case("no global token (the band alone)", (int(rng.integers(5, 9)), 1, np.zeros(0, int))),
        Case("window=0 with a global token", (7, 0, _globals(rng, 7, 1))),
        Case("window wider than n", (5, 9, _globals(rng, 5, 1))),
        Case("n=1, its token global", (1, 2, np.array([0]))),
    ]


def _band(n, window, strict=False):
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return np.abs(i - j) < window if strict else np.abs(i - j) <= window


def _global_rows(n, window, g, rows=True, cols=True, band=None):
    is_global = np.zeros(n, dtype=bool)
    is_global[np.asarray(g, dtype=int)] = True
    out = _band(n, window) if band is None else band
    if rows:
        out = out | is_global[:, None]
    if cols:
        out = out | is_global[None, :]
    return out


def _causal_window(n, window, g):
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return _global_rows(n, window, g, band=(j <= i) & (i - j <= window))


# --------------------------------------------------------------------------------------
# task 2: alibi_slopes and alibi_attention


def _slopes_cases(rng):
    return [
        Case("H=8 (the paper's)", (8,)),
        Case("H=1", (1,)),
        Case("H=2", (2,)),
        Case("H=16", (16,)),
        Case("H=6, not a power of two", (6,)),
        Case("random H, not a power of two", (int(rng.choice([3, 5, 7, 10, 12])),)),
    ]


def _slopes_from_zero(h):
    return 2.0 ** (-8.0 * np.arange(h) / h)


def _slopes_no_interleave(h):
    return 2.0 ** (-8.0 * np.arange(1, h + 1) / h)


#: the slopes' hints name the cause, never the formula: a values hint cannot know which H
#: failed, so it speaks of both kinds of H (issue 45: the power-of-two formula was shown to a
#: student whose power-of-two cases passed)
HINT_SLOPES_VALUES = (
    "the slopes form one geometric sequence only when H is a power of two; for any other H "
    "they are built from the sequences of two powers of two (the ALiBi task's statement): "
    "compare your slopes for the failing H with that construction"
)
HINT_SLOPES_NOT_POWER = (
    "you used the power-of-two sequence for an H that is not a power of two: there the slopes "
    "come from the powers of two on either side of H (the ALiBi task's statement)"
)


def _causal(n):
    return np.arange(n)[None, :] <= np.arange(n)[:, None]


def _alibi_cases(rng):
    h, n = 4, int(rng.integers(5, 8))
    slopes = answers.alibi_slopes(h)

    def qkv(*batch, d=3, d_v=2, n=n):
        return (
            normal(rng, *batch, h, n, d),
            normal(rng, *batch, h, n, d),
            normal(rng, *batch, h, n, d_v),
        )

    q, k, v = qkv()
    cases = [Case("4 heads, no mask (keys on both sides)", (q, k, v, slopes, None))]
    q, k, v = qkv(2)
    cases.append(Case("batch of 2, causal mask", (q, k, v, slopes, _causal(n))))
    q, k, v = qkv(3)
    pad = lengths_mask(rng, 3, n, empty=True)[:, None, None, :]  # (B, 1, 1, n)
    cases.append(
        Case(
            "padding mask with an empty sequence, random slopes",
            (q, k, v, rng.uniform(0.1, 2, h), pad),
        )
    )
    # H = n: slopes broadcast on the key axis instead of the heads' still has a shape
    q, k, v = qkv(n=h, d=5)
    cases.append(Case("as many heads as positions (H = n)", (q, k, v, slopes, None)))
    q, k, v = qkv(n=1)
    cases.append(Case("one position (n=1)", (q, k, v, slopes, None)))
    # scores of about +-10^4: exp overflows unless shifted
    q, k, v = qkv(d=4)
    cases.append(Case("large scores", (100 * q, 100 * k, v, slopes, _causal(n))))
    q, k, v = normal(rng, 1, n, 1), normal(rng, 1, n, 1), normal(rng, 1, n, 1)
    one = answers.alibi_slopes(1)
    cases.append(Case("one head (H = 1), d = d_v = 1, causal", (q, k, v, one, _causal(n))))
    return cases


def _alibi_with_bias(bias_of):
    """ALiBi whose bias is ``bias_of(slopes, i, j)`` (broadcast to (H, n, n))."""

    def outputs(q, k, v, slopes, mask=None):
        n = np.shape(q)[-2]
        i, j = np.arange(n)[:, None], np.arange(n)[None, :]
        s = q @ np.swapaxes(k, -1, -2) / math.sqrt(np.shape(q)[-1]) + bias_of(
            np.asarray(slopes, float), i, j
        )
        w = masked_softmax(s, mask)
        return w @ v, w

    return outputs


def _alibi_bias_after_softmax(q, k, v, slopes, mask=None):
    n = np.shape(q)[-2]
    distance = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(np.shape(q)[-1])
    w = masked_softmax(s, mask) - np.asarray(slopes)[:, None, None] * distance
    return w @ v, w


def _alibi_bias_scaled(q, k, v, slopes, mask=None):
    return answers.alibi_attention(q, k, v, np.asarray(slopes) / math.sqrt(np.shape(q)[-1]), mask)


def _alibi_unscaled(q, k, v, slopes, mask=None):
    return answers.alibi_attention(np.asarray(q) * math.sqrt(np.shape(q)[-1]), k, v, slopes, mask)


# --------------------------------------------------------------------------------------
# task 3: relative_position_bucket


def boundary_distance(bidirectional, num_buckets, max_distance, largest):
    """How close log(r / E) / log(max_distance / E) * (B - E) comes to an integer for
    E <= r < max_distance, r <= largest: a case is safe when far from 0 (every honest
    float64 formula then floors alike). Exactly 0 at r = E, which every formula gets right."""
    b = num_buckets // 2 if bidirectional else num_buckets
    e = b // 2
    r = np.arange(e + 1, min(max_distance, largest + 1), dtype=np.float64)
    if r.size == 0:
        return 1.0
    x = np.log(r / e) / math.log(max_distance / e) * (b - e)
    return float(np.min(np.abs(x - np.round(x))))


def _bucket_parameters(rng, bidirectional, largest):
    """(num_buckets, max_distance) whose boundaries all lie far from the integers."""
    while True:
        num_buckets = int(
            rng.choice([8, 12, 16, 20, 24, 32] if bidirectional else [6, 8, 10, 12, 16])
        )
        b = num_buckets // 2 if bidirectional else num_buckets
        max_distance = int(rng.integers(3 * (b // 2) + 2, 100))
        if boundary_distance(bidirectional, num_buckets, max_distance, largest) > 1e-6:
            return num_buckets, max_distance


def _offsets(n):
    """(n, n) memory minus query positions, j - i."""
    return np.arange(n)[None, :] - np.arange(n)[:, None]


def _bucket_cases(rng):
    cases = []
    nb, md = _bucket_parameters(rng, True, 150)
    cases.append(Case("bidirectional, every offset of 40 positions", (_offsets(40), True, nb, md)))
    nb, md = _bucket_parameters(rng, False, 150)
    cases.append(Case("unidirectional (causal), 40 positions", (_offsets(40), False, nb, md)))
    nb, md = _bucket_parameters(rng, True, 400)
    far = rng.integers(-400, 401, size=(3, 25))
    cases.append(Case("offsets far beyond max_distance", (far, True, nb, md)))
    nb, md = _bucket_parameters(rng, False, 400)
    cases.append(
        Case("unidirectional, far offsets", (rng.integers(-400, 401, size=30), False, nb, md))
    )
    cases.append(Case("offset 0 alone", (np.zeros(1, np.int64), True, 16, 40)))
    return cases


def _bucket_sign_flipped(rel, bidirectional, num_buckets, max_distance):
    return answers.relative_position_bucket(
        -np.asarray(rel), bidirectional, num_buckets, max_distance
    )


def _bucket_variant(
    rel,
    bidirectional,
    num_buckets,
    max_distance,
    *,
    offset=True,
    halve=True,
    clip=True,
    rounding=np.floor,
    causal_abs=False,
):
    """T5's bucket with one step changed (the known mistakes)."""
    rel = np.asarray(rel, dtype=np.int64)
    base = np.zeros(rel.shape, dtype=np.int64)
    b = num_buckets
    if bidirectional:
        b = b // 2 if halve else b
        base = np.where(rel > 0, b, 0) if offset else base
        r = np.abs(rel)
    else:
        r = np.abs(rel) if causal_abs else -np.minimum(rel, 0)
    e = b // 2
    with np.errstate(divide="ignore"):
        large = e + rounding(np.log(r / e) / math.log(max_distance / e) * (b - e))
    if clip:
        large = np.minimum(large, b - 1)
    return base + np.where(r < e, r, np.where(r < e, 0, large)).astype(np.int64)


# --------------------------------------------------------------------------------------
# task 4: online_softmax_backward


def _backward_case(name, q, k, v, block, mask, rng):
    out, lse = answers.attention_forward(q, k, v, mask)
    return Case(name, (q, k, v, out, lse, normal(rng, *out.shape), block, mask))


def _key_groups(k, mask=None):
    """(rows (r, d), group (n_k,)) where the keys of a 2-D case without a mask take at most
    MEMORY_GROUPS distinct rows (``k[j] == rows[group[j]]``) and span more than one block of
    the scale (``SCALE_BLOCK``), else None: where the memory case's closed forms apply."""
    k = np.asarray(k, dtype=np.float64)
    if mask is not None or k.ndim != 2 or k.shape[0] <= SCALE_BLOCK:
        return None
    rows, group = np.unique(k, axis=0, return_inverse=True)
    return (rows, group.reshape(-1)) if len(rows) <= MEMORY_GROUPS else None


def _group_sums(group, r, x):
    """(r, ...) the sum of the rows of ``x`` in each group."""
    sums = np.zeros((r,) + x.shape[1:])
    np.add.at(sums, group, x)
    return sums


def _grouped_forward(q, k, v):
    """(out, logsumexp) of unmasked attention whose keys take a few distinct rows
    (``_key_groups``), in O(n r d): every key of group g has the score S_ig = q_i . kappa_g /
    sqrt(d), so L_i = log sum_g m_g exp(S_ig) (m_g keys in group g) and O_i = sum_g
    exp(S_ig - L_i) V_g, V_g the sum of group g's values. The memory case's forward pass,
    whose whole score matrix the trusted side never forms."""
    rows, group = _key_groups(k)
    r = len(rows)
    scores = answers._scaled_scores(q, rows, None)  # (n_q, r)
    s = scores + np.log(np.bincount(group, minlength=r))
    top = s.max(axis=-1, keepdims=True)
    lse = np.log(np.exp(s - top).sum(axis=-1)) + top[..., 0]
    p = np.exp(scores - lse[..., None])
    return p @ _group_sums(group, r, np.asarray(v, float)), lse


def _memory_case(rng):
    """The case whose whole (n_q, n_k) float64 score matrix is MEMORY_FACTOR times this
    chapter's sandbox memory (``MEMORY``, the cap the trusted side sets for the run): a
    method that forms it, ignoring ``block_size``, raises MemoryError (or is killed), while
    blocks of (n_q, BIG_BLOCK) weights take a few tens of MiB. Hidden only, and judged
    against the reference alone (``checks.Plain``). Its keys take MEMORY_GROUPS distinct
    random rows in a random order (q, v, dO random, all from the student's hidden seed), so
    the trusted side has its forward pass, answer and scale in closed form, O(n r d d_v)
    each (``_grouped_forward``, ``_grouped_backward``, ``_grouped_scale``), not the n^2 of
    the blocked reference, which cost each ch4 student's hidden-case preparation about 3 s.

    What the grouped keys no longer tell apart on this case (the other cases still do): a
    wrong key used where it lies in the same group as the right one (two thirds of the keys
    misplaced by a wrong block offset still change the answer), and a method that merges
    equal keys before forming its (n_q, r) scores, full-matrix or not. With a single group dQ
    would be exactly 0 and a dq of any sign or scale would pass: hence three."""
    n = BIG_N
    rows = normal(rng, MEMORY_GROUPS, 2)
    k = rows[rng.permutation(np.arange(n) % MEMORY_GROUPS)]  # every group present
    q, v = normal(rng, n, 2), normal(rng, n, 2)
    out, lse = _grouped_forward(q, k, v)
    return Plain(
        "n_q = n_k in the thousands: the whole score matrix would not fit the grader's memory",
        (q, k, v, out, lse, normal(rng, n, 2), BIG_BLOCK, None),
    )


def _backward_cases(rng):
    n_q, n_k = distinct_sizes(rng, 3, 11, 2)
    rows = np.ones((n_q, n_k), dtype=bool)
    rows[1] = False  # a query with no allowed key
    rows[2, : n_k // 2] = False
    return [
        _backward_case(
            "block size divides n_k",
            normal(rng, n_q, 4),
            normal(rng, 12, 4),
            normal(rng, 12, 3),
            4,
            None,
            rng,
        ),
        _backward_case(
            "block size does not divide n_k",
            normal(rng, n_q, 4),
            normal(rng, n_k, 4),
            normal(rng, n_k, 2),
            3,
            None,
            rng,
        ),
        _backward_case(
            "batch and heads, one (n_q, n_k) mask for all, block larger than n_k",
            normal(rng, 2, 3, n_q, 5),
            normal(rng, 2, 3, n_k, 5),
            normal(rng, 2, 3, n_k, 4),
            64,
            rng.random((n_q, n_k)) < 0.7,
            rng,
        ),
        _backward_case(
            "mask with a fully-masked row",
            normal(rng, n_q, 4),
            normal(rng, n_k, 4),
            normal(rng, n_k, 3),
            2,
            rows,
            rng,
        ),
        # scores of about +-LARGE**2 = 1600: exp(s) overflows, exp(s - L) does not
        _backward_case(
            "block size 1, large scores",
            LARGE * normal(rng, n_q, 6),
            LARGE * normal(rng, n_k, 6),
            normal(rng, n_k, 2),
            1,
            None,
            rng,
        ),
        _backward_case(
            "causal, 48 positions, blocks of 16",
            normal(rng, 48, 8),
            normal(rng, 48, 8),
            normal(rng, 48, 8),
            16,
            _causal(48),
            rng,
        ),
        _backward_case(
            "one query, one key",
            normal(rng, 1, 3),
            normal(rng, 1, 3),
            normal(rng, 1, 2),
            4,
            None,
            rng,
        ),
        # a mask of one flag per query broadcasts over the keys: each block takes its slice
        # of the broadcast mask, not of the (n_q, 1) array
        _backward_case(
            "(n_q, 1) mask, blocks smaller than n_k, d = d_v = 1",
            normal(rng, n_q, 1),
            normal(rng, n_k, 1),
            normal(rng, n_k, 1),
            2,
            rows[:, :1],
            rng,
        ),
        _backward_case(
            "(1, n_k) padding mask over a batch of 2",
            normal(rng, 2, n_q, 3),
            normal(rng, 2, n_k, 3),
            normal(rng, 2, n_k, 2),
            3,
            np.arange(n_k)[None, :] < n_k - 2,
            rng,
        ),
        _memory_case(rng),
    ]


#: the sandbox memory of this chapter: a quarter of a GiB, ample for any honest method (the
#: cases are small, n <= 48, but for the memory case, whose blocks of weights take tens of MiB)
MEMORY = 256 << 20
#: the memory case's whole score matrix is at least this many times MEMORY (more than the
#: run may allocate, so a method that forms it fails however it forms it)...
MEMORY_FACTOR = 1.15
#: ...with n_q = n_k = BIG_N (float64: 8 bytes an entry), taken BIG_BLOCK keys at a time
BIG_N = math.ceil(math.sqrt(MEMORY_FACTOR * MEMORY / 8))
BIG_BLOCK = 256
#: ...and keys that take this many distinct rows (the closed forms' r)
MEMORY_GROUPS = 3
#: the scale of q and k in the large-scores case: scores q.k / sqrt(d) of standard deviation
#: LARGE**2, far over the 709 where float64 exp overflows
LARGE = 40.0


def _backward_scale(q, k, v, out, lse, d_out, block_size=128, mask=None):
    """Per output, the size of the terms it sums: |P| (1 + |S| + |L|) weighted by the
    absolute values of every factor (dS = P (dP - D) cancels; P = exp(S - L) of large S and
    L carries their rounding). Computed SCALE_BLOCK keys at a time, as the backward itself:
    the memory case's whole score matrix is not formed here either."""
    q, k, v, out, d_out = (np.asarray(a, float) for a in (q, k, v, out, d_out))
    lse = np.asarray(lse, float)
    n_q, n_k = q.shape[-2], k.shape[-2]
    if mask is not None:
        whole = np.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (n_q, n_k)
        mask = np.broadcast_to(np.asarray(mask, dtype=bool), whole)
    c = 1.0 / math.sqrt(q.shape[-1])
    finite = np.where(np.isfinite(lse), lse, 0.0)[..., None]
    aq, ad, av = np.abs(q), np.abs(d_out), np.abs(v)
    rows = (ad * np.abs(out)).sum(-1, keepdims=True)  # (..., n_q, 1), |D|
    dq, dk, dv = 0.0, [], []
    for start in range(0, n_k, SCALE_BLOCK):
        keys = slice(start, start + SCALE_BLOCK)
        ak = np.abs(k[..., keys, :])
        block_mask = None if mask is None else mask[..., keys]
        e = np.exp(answers._scaled_scores(q, k[..., keys, :], block_mask) - finite)  # P
        e *= aq @ np.swapaxes(ak, -1, -2) * c + (1.0 + np.abs(finite))  # P (1 + |S| + |L|)
        dv.append(np.swapaxes(e, -1, -2) @ ad)
        e *= ad @ np.swapaxes(av[..., keys, :], -1, -2) + rows  # times |dP| + |D|
        dq = dq + e @ ak * c
        dk.append(np.swapaxes(e, -1, -2) @ aq * c)
    return (
        dq + SUBNORMAL_FLOOR,
        np.concatenate(dk, axis=-2) + SUBNORMAL_FLOOR,
        np.concatenate(dv, axis=-2) + SUBNORMAL_FLOOR,
    )


#: keys per block of the backward's scale
SCALE_BLOCK = 256


#: a floor under every scale of the backward: in the large-scores case some weights
#: exp(S - L) fall below the smallest normal float64 (2.2e-308), where every order of the
#: operations rounds differently (a reordered correct backward differs by 1e-322 there, far
#: beyond atol times their own size); atol times this floor is 1e-294
SUBNORMAL_FLOOR = 1e-280


def _grouped_backward(q, k, v, out, logsumexp, d_out, block_size=128, mask=None):
    """The reference's (dq, dk, dv) where the keys take a few distinct rows kappa_g
    (``_key_groups``: the memory case), in O(n r d d_v), from the same given O and L. A key
    j of group g has P_ij = p_ig = exp(S_ig - L_i) and dS_ij = p_ig (dO_i . v_j - D_i),
    D_i = dO_i . O_i, so with m_g keys and value sum V_g in group g:
    dV_j = sum_i p_ig dO_i; dQ_i = c sum_g p_ig (dO_i . V_g - m_g D_i) kappa_g;
    dK_j = c (M_g v_j - u_g), M_g = sum_i p_ig q_i dO_i^T, u_g = sum_i p_ig D_i q_i
    (c = 1/sqrt(d))."""
    rows, group = _key_groups(k, mask)
    r = len(rows)
    q, v, out, d_out = (np.asarray(a, float) for a in (q, v, out, d_out))
    c = 1.0 / math.sqrt(q.shape[-1])
    lse = np.asarray(logsumexp, float)[:, None]  # finite: no mask
    p = np.exp(answers._scaled_scores(q, rows, None) - lse)
    delta = (d_out * out).sum(axis=-1, keepdims=True)  # (n_q, 1)
    counts = np.bincount(group, minlength=r)
    dq = c * ((p * (d_out @ _group_sums(group, r, v).T - delta * counts)) @ rows)
    m = np.einsum("ig,id,ie->gde", p, q, d_out)  # (r, d, d_v)
    u = p.T @ (delta * q)  # (r, d)
    dk = c * (np.einsum("jde,je->jd", m[group], v) - u[group])
    return dq, dk, (p.T @ d_out)[group]


def _grouped_scale(q, k, v, out, logsumexp, d_out, block_size=128, mask=None):
    """``_backward_scale`` where the keys take a few distinct rows (the memory case): the
    same sums in closed form, O(n r d d_v). With a_ig = p_ig (1 + c |q_i| . |kappa_g| + |L_i|)
    and R_i = |dO_i| . |O_i|, each term is a_ig (|dO_i| . |v_j| + R_i), so
    dv_j = sum_i a_ig |dO_i|; dq_i = c sum_g a_ig (|dO_i| . A_g + m_g R_i) |kappa_g| (A_g:
    the sum of |v_j| in group g); dk_j = c (sum_i a_ig |q_i| |dO_i|^T) |v_j| +
    c sum_i a_ig R_i |q_i|."""
    rows, group = _key_groups(k, mask)
    r = len(rows)
    q, v, out, d_out = (np.asarray(a, float) for a in (q, v, out, d_out))
    c = 1.0 / math.sqrt(q.shape[-1])
    lse = np.asarray(logsumexp, float)[:, None]  # finite: no mask
    aq, ad, av, ak = np.abs(q), np.abs(d_out), np.abs(v), np.abs(rows)
    a = np.exp(answers._scaled_scores(q, rows, None) - lse)
    a *= aq @ ak.T * c + (1.0 + np.abs(lse))  # (n_q, r)
    rows_d = (ad * np.abs(out)).sum(-1, keepdims=True)  # (n_q, 1)
    counts = np.bincount(group, minlength=r)
    dq = c * ((a * (ad @ _group_sums(group, r, av).T + rows_d * counts)) @ ak)
    m = np.einsum("ig,id,ie->gde", a, aq, ad)
    dk = c * (np.einsum("jde,je->jd", m[group], av) + (a.T @ (rows_d * aq))[group])
    return (
        dq + SUBNORMAL_FLOOR,
        dk + SUBNORMAL_FLOOR,
        (a.T @ ad)[group] + SUBNORMAL_FLOOR,
    )


def _backward_answer(case):
    """The check's answer: in closed form for the memory case (``_key_groups``), whose n x n
    computation the trusted side would otherwise repeat for every student; the reference's
    elsewhere."""
    return call(_backward_of, case)


def _backward_of(q, k, v, out, logsumexp, d_out, block_size=128, mask=None):
    grouped = _key_groups(k, mask) is not None
    fn = _grouped_backward if grouped else answers.online_softmax_backward
    return fn(q, k, v, out, logsumexp, d_out, block_size, mask)


def _backward_scale_of(q, k, v, out, logsumexp, d_out, block_size=128, mask=None):
    """The check's scale: ``_grouped_scale`` for the memory case, ``_backward_scale`` else."""
    fn = _grouped_scale if _key_groups(k, mask) is not None else _backward_scale
    return fn(q, k, v, out, logsumexp, d_out, block_size, mask)


def _backward_with(*, delta="out", lse=True, scale=True, tail=True, local=False):
    """The recomputation with one step changed (the known mistakes)."""

    def outputs(q, k, v, out, logsumexp, d_out, block_size=128, mask=None):
        q, k, v, out, d_out = (np.asarray(a, float) for a in (q, k, v, out, d_out))
        s = answers._scaled_scores(q, k, mask)
        L = np.where(np.isfinite(logsumexp), logsumexp, 0.0)[..., None]
        n_k = k.shape[-2]
        stop = n_k if tail else n_k - n_k % block_size
        keep = np.arange(n_k) < stop
        if local:  # each block normalised on its own
            p = np.zeros_like(s)
            for start in range(0, n_k, block_size):
                blk = s[..., start : start + block_size]
                top = blk.max(-1, keepdims=True)
                ex = np.exp(blk - np.where(np.isfinite(top), top, 0))
                tot = ex.sum(-1, keepdims=True)
                p[..., start : start + block_size] = ex / np.where(tot > 0, tot, 1)
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                p = np.exp(s - L) if lse else np.exp(s)
        with np.errstate(all="ignore"):  # exp(S) overflows in the large case
            p = np.where(keep, p, 0.0)
            dv = np.swapaxes(p, -1, -2) @ d_out
            dp = d_out @ np.swapaxes(v, -1, -2)
            D = {
                "out": (d_out * out).sum(-1, keepdims=True),
                "dO": d_out.sum(-1, keepdims=True),
                "none": 0.0,
            }[delta]
            ds = p * (dp - D)
            c = 1.0 / math.sqrt(q.shape[-1]) if scale else 1.0
            return ds @ k * c, np.swapaxes(ds, -1, -2) @ q * c, dv

    return outputs


CHAPTER = register(
    Chapter(
        "ch4_self_attention",
        # measured 2026-12-05 (`python -m autograder.grading.measure`, then in budgets.py): the
        # solved notebook graded in a warm sandbox took 3.75, 0.43, 0.40 s (2 CPUs, load
        # average 24.2); T = the slowest
        reference_seconds=3.8,
        limits={"memory_bytes": MEMORY},
        checks=(
            Check(
                "window_global_mask",
                answers.window_global_mask,
                _window_cases,
                outputs=("mask",),
                hints={
                    "dtype": "build it with comparisons and | (or), which give a boolean array",
                    "values": "True where |i - j| <= window, or where row i or column j is a global position",
                },
                mistakes=(
                    Mistake(
                        "a global token attends to every position (its row) AND every position attends "
                        "to it (its column): set both",
                        lambda n, w, g: _global_rows(n, w, g, cols=False),
                    ),
                    Mistake(
                        "every position attends to a global token (its column) AND a global token "
                        "attends to every position (its row): set both",
                        lambda n, w, g: _global_rows(n, w, g, rows=False),
                    ),
                    Mistake(
                        "the band includes |i - j| = window (as the page's local mask): use <=, not <",
                        lambda n, w, g: _global_rows(n, w, g, band=_band(n, w, strict=True)),
                    ),
                    Mistake(
                        "the window is symmetric: keys on both sides of the query, |i - j| <= window, "
                        "not only the past",
                        _causal_window,
                    ),
                ),
            ),
            Check(
                "alibi_slopes",
                answers.alibi_slopes,
                _slopes_cases,
                outputs=("slopes",),
                rtol=1e-12,
                atol=0.0,
                hints={
                    "shape": "one slope per head: shape (num_heads,)",
                    "values": HINT_SLOPES_VALUES,
                },
                mistakes=(
                    Mistake("the heads are numbered h = 1..H, not 0..H-1", _slopes_from_zero),
                    Mistake(HINT_SLOPES_NOT_POWER, _slopes_no_interleave),
                    Mistake(
                        "the slopes fall from head to head: the first head has the largest "
                        "slope, so your order is reversed",
                        lambda h: answers.alibi_slopes(h)[::-1],
                    ),
                ),
            ),
            Check(
                "alibi_attention",
                answers.alibi_attention,
                _alibi_cases,
                outputs=("output", "weights"),
                hints={
                    "arity": "return a pair (output, weights)",
                    "values": "each head's scaled scores get a penalty that grows with the distance "
                    "|i - j| at that head's own slope, before the masked softmax (the ALiBi task's "
                    "statement)",
                    "nan": "a row with nothing allowed gets zero weights, not 0/0; and "
                    + HINT_MAX_SHIFT,
                    "shape": "output (..., H, n, d_v), weights (..., H, n, n): each head's slope must "
                    "line up with the heads axis, not with the keys",
                    "ValueError": "the slopes are one per head: they must broadcast over the heads "
                    "axis, not over the keys",
                },
                mistakes=(
                    Mistake(
                        "ALiBi is a penalty: a distant key must get a lower score, not a higher "
                        "one; your bias has the wrong sign",
                        _alibi_with_bias(lambda m, i, j: m[:, None, None] * np.abs(i - j)),
                    ),
                    Mistake(
                        "the penalty grows with the distance |i - j| on both sides of the query, not "
                        "with the signed offset i - j",
                        _alibi_with_bias(lambda m, i, j: -m[:, None, None] * (i - j)),
                    ),
                    Mistake(
                        "one slope per head: the slopes broadcast over the heads axis, not over the "
                        "keys",
                        _alibi_with_bias(lambda m, i, j: -m[None, :] * np.abs(i - j)),
                    ),
                    Mistake(
                        "add the bias to the scores before the softmax, not to the weights after it",
                        _alibi_bias_after_softmax,
                    ),
                    Mistake(
                        "only q k^T is divided by sqrt(d): the distance penalty is added after "
                        "the scaling, not scaled with it",
                        _alibi_bias_scaled,
                    ),
                    Mistake("you forgot to divide the scores by sqrt(d)", _alibi_unscaled),
                ),
            ),
            Check(
                "relative_position_bucket",
                answers.relative_position_bucket,
                _bucket_cases,
                outputs=("buckets",),
                rtol=0.0,
                atol=0.0,
                comparator={"kind": "allclose", "integer": True},  # an int array, as integers
                hints={
                    "dtype": "a bucket is an index (into a table of learned biases): after the "
                    "floor, return integers, e.g. .astype(np.int64), not floats",
                    "values": "small distances get a bucket each; for a larger distance, invert the "
                    "notebook's bucket boundaries (they grow geometrically up to "
                    "max_distance) and round down, as the relative-buckets task's statement "
                    "says; bidirectional: each half has num_buckets // 2 buckets and keys "
                    "after the query use the second half",
                },
                mistakes=(
                    Mistake(
                        "relative_position is memory minus query (j - i): a key after the query has a "
                        "positive offset; do not negate it",
                        _bucket_sign_flipped,
                    ),
                    Mistake(
                        "bidirectional: keys after the query (relative_position > 0) use the second "
                        "half of the buckets, offset by num_buckets // 2",
                        lambda r, bi, nb, md: _bucket_variant(r, bi, nb, md, offset=False),
                    ),
                    Mistake(
                        "bidirectional: each half has num_buckets // 2 buckets, so halve num_buckets "
                        "before computing E and the logarithmic buckets",
                        lambda r, bi, nb, md: _bucket_variant(r, bi, nb, md, halve=False),
                    ),
                    Mistake(
                        "clip the logarithmic bucket at B - 1: every distance beyond max_distance shares "
                        "the last bucket",
                        lambda r, bi, nb, md: _bucket_variant(r, bi, nb, md, clip=False),
                    ),
                    Mistake(
                        "round the logarithmic bucket down (floor, as int() does for positive numbers), "
                        "not up or to the nearest integer",
                        lambda r, bi, nb, md: _bucket_variant(r, bi, nb, md, rounding=np.ceil),
                    ),
                    Mistake(
                        "unidirectional: a key after the query (relative_position > 0) has "
                        "distance 0 (only keys before the query are told apart by distance), not"
                        " |relative_position|",
                        lambda r, bi, nb, md: _bucket_variant(r, bi, nb, md, causal_abs=True),
                    ),
                ),
            ),
            Check(
                "online_softmax_backward",
                answers.online_softmax_backward,
                _backward_cases,
                outputs=("dq", "dk", "dv"),
                rtol=1e-9,
                atol=1e-14,
                answer=_backward_answer,
                scale=_backward_scale_of,
                hints={
                    "arity": "return a triple (dq, dk, dv)",
                    "values": "recompute each block's weights from the forward pass's logsumexp, "
                    "then follow the chain rule of the task's statement through O = PV, the softmax "
                    "and the scaled scores; D is one number per query, read from the output (the "
                    "chapter's 'The online softmax')",
                    "nan": "a query with no allowed key has logsumexp -inf and weights 0: shift by 0 "
                    "there (never compute -inf - (-inf))",
                    "inf": "recompute the weights as exp(S - L) with the given logsumexp L: exp(S) "
                    "alone overflows",
                    "dq.shape": "dq has the shape of q (..., n_q, d)",
                    "dk.shape": "dk has the shape of k (..., n_k, d)",
                    "dv.shape": "dv has the shape of v (..., n_k, d_v)",
                    "MemoryError": "only a (..., n_q, block_size) block of weights may exist at a "
                    "time: take the keys block_size at a time, never the whole (n_q, n_k) matrix",
                },
                mistakes=(
                    Mistake(
                        "D_i is not a function of dO alone: it is the softmax's row term of your"
                        " derivation, and the blocked method reads it from the output O (the "
                        "task's statement: one number per query, computed without any weight)",
                        _backward_with(delta="dO"),
                    ),
                    Mistake(
                        "you left out D, the softmax's normaliser term: each weight depends on every "
                        "score of its row (the softmax's Jacobian in the task's statement)",
                        _backward_with(delta="none"),
                    ),
                    Mistake(
                        "you forgot the 1/sqrt(d): the scores are scaled, and the chain rule carries "
                        "that factor into both dQ and dK",
                        _backward_with(scale=False),
                    ),
                    Mistake(
                        "your weights are not normalised: exp(S) alone lacks the softmax's "
                        "denominator, which the forward pass's logsumexp L holds",
                        _backward_with(lse=False),
                    ),
                    Mistake(
                        "normalise P with the logsumexp L of the whole row, not with each block's own "
                        "sum",
                        _backward_with(local=True),
                    ),
                    Mistake(
                        "the last block of keys may be shorter than block_size: do not drop it",
                        _backward_with(tail=False),
                    ),
                ),
            ),
        ),
    )
)
