"""The answer key of assignment 2 (``answers/ch2_soft_hard.py``) and its checks.

1. Each reference against an independent oracle, in float64: PyTorch autograd through a
   torch masked softmax and attention (softmax_backward, attention_backward), the simplex
   projection found by bisection on tau and its optimality conditions (sparsemax), autograd
   through a torch sparsemax and a central finite difference (sparsemax_backward).
2. A corpus of wrong implementations per task, written as students write them, each run
   through the real judge on the public and the hidden cases: every one loses the task's
   points, and the ones the plug-in knows get their named hint (every declared mistake is
   named by some member of the corpus).
3. The reference passes its own public and hidden cases.
"""

from __future__ import annotations

import math

import judged
import numpy as np
import pytest
import torch

from answers import ch2_soft_hard as answers
from autograder.checking import checks
from solutions.conventions import masked_softmax

A = "ch2_soft_hard"
SEEDS = (1, 2, 3, 4)


# ----------------------------------------------------------------------------------------
# 1. oracles


def _torch_masked_softmax(s, mask):
    """Softmax over the allowed keys; a row with none gets zeros (and passes no gradient)."""
    if mask is None:
        return torch.softmax(s, dim=-1)
    mask = torch.as_tensor(np.broadcast_to(mask, tuple(s.shape)).copy())
    any_allowed = mask.any(dim=-1, keepdim=True)
    s = torch.where(mask, s, torch.tensor(-math.inf, dtype=s.dtype))
    s = torch.where(any_allowed, s, torch.zeros((), dtype=s.dtype))
    return torch.softmax(s, dim=-1) * any_allowed


def _random_mask(rng, shape):
    mask = rng.random(shape) < 0.7
    mask[..., 0, :] = False  # a fully masked row
    return mask


@pytest.mark.parametrize("seed", range(6))
def test_softmax_backward_is_autograds_gradient_of_the_masked_softmax(seed):
    rng = np.random.default_rng(seed)
    shape = (2, 3, 4, 6)[seed % 2 :]
    scores = 3 * rng.standard_normal(shape)
    mask = _random_mask(rng, shape) if seed % 3 else None
    grad = rng.standard_normal(shape)
    s = torch.tensor(scores, requires_grad=True)
    p = _torch_masked_softmax(s, mask)
    p.backward(torch.tensor(grad))
    got = answers.softmax_backward(masked_softmax(scores, mask), grad)
    np.testing.assert_allclose(got, s.grad.numpy(), rtol=1e-12, atol=1e-14)
    if mask is not None:
        assert np.all(got[~np.broadcast_to(mask, shape)] == 0)  # masked keys: exactly 0


def _torch_attention_grads(q, k, v, grad_out, mask):
    tq, tk, tv = (torch.tensor(x, requires_grad=True) for x in (q, k, v))
    s = tq @ tk.transpose(-1, -2) / math.sqrt(q.shape[-1])
    out = _torch_masked_softmax(s, mask) @ tv
    out.backward(torch.tensor(grad_out))
    return tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy()


@pytest.mark.parametrize(
    "shapes",
    [
        ((3, 4), (5, 4), (5, 2)),  # n_q != n_k, d_v != d
        ((2, 3, 4), (2, 5, 4), (2, 5, 3)),
        ((2, 3, 4), (5, 4), (5, 2)),  # keys and values shared by the batch
        ((2, 1, 3, 4), (1, 2, 5, 4), (2, 2, 5, 3)),  # batch axes broadcast both ways
        ((1, 3), (1, 3), (1, 2)),
    ],
)
@pytest.mark.parametrize("masked", [False, True])
def test_attention_backward_is_autograds_gradient(shapes, masked):
    rng = np.random.default_rng(len(shapes[0]) + masked)
    q, k, v = (rng.standard_normal(s) for s in shapes)
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    grad_out = rng.standard_normal(batch + (q.shape[-2], v.shape[-1]))
    mask = _random_mask(rng, (q.shape[-2], k.shape[-2])) if masked else None
    want = _torch_attention_grads(q, k, v, grad_out, mask)
    got = answers.attention_backward(q, k, v, grad_out, mask)
    for g, w, x in zip(got, want, (q, k, v)):
        assert g.shape == x.shape
        np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-13)


def test_attention_backward_of_a_fully_masked_row_and_large_scores():
    rng = np.random.default_rng(7)
    q, k = 100 * rng.standard_normal((4, 3)), 100 * rng.standard_normal((5, 3))
    v, grad_out = rng.standard_normal((5, 2)), rng.standard_normal((4, 2))
    mask = np.ones((4, 5), bool)
    mask[2] = False
    dq, dk, dv = answers.attention_backward(q, k, v, grad_out, mask)
    assert all(np.all(np.isfinite(g)) for g in (dq, dk, dv))
    assert np.all(dq[2] == 0)  # the empty row passes nothing back
    want = _torch_attention_grads(q, k, v, grad_out, mask)
    for g, w in zip((dq, dk, dv), want):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-9)


def _projection_by_bisection(z):
    """The simplex projection of a vector of finite scores: tau by bisection on the
    decreasing function sum(max(z - tau, 0)) - 1, to the last bit."""
    lo, hi = z.max() - 1.0, z.max()  # f(lo) >= 0 >= f(hi)
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        if np.maximum(z - mid, 0).sum() >= 1:
            lo = mid
        else:
            hi = mid
    return np.maximum(z - (lo + hi) / 2, 0)


@pytest.mark.parametrize("seed", range(8))
def test_sparsemax_is_the_projection_onto_the_simplex(seed):
    rng = np.random.default_rng(seed)
    spread = [0.05, 0.5, 2.0, 20.0][seed % 4]
    z = spread * rng.standard_normal((6, 7))
    mask = _random_mask(rng, z.shape)
    p = answers.sparsemax(z, mask)
    assert np.all(p[0] == 0) and np.all(p[~mask] == 0)
    for row in range(1, 6):
        allowed = mask[row]
        if not allowed.any():
            assert np.all(p[row] == 0)
            continue
        zr, pr = z[row, allowed], p[row, allowed]
        np.testing.assert_allclose(pr, _projection_by_bisection(zr), rtol=0, atol=1e-13)
        # the optimality conditions: on the simplex, p_i = z_i - tau on the support and
        # z_i <= tau off it, with one tau for the row
        assert np.all(pr >= 0) and abs(pr.sum() - 1) < 1e-14
        tau = (zr - pr)[pr > 0]
        np.testing.assert_allclose(tau, tau.mean(), rtol=0, atol=1e-13)
        assert np.all(zr[pr == 0] <= tau.mean() + 1e-13)
        # and nearer to z than random points of the simplex
        others = rng.dirichlet(np.ones(allowed.sum()), size=200)
        assert np.all(np.linalg.norm(others - zr, axis=1) >= np.linalg.norm(pr - zr) - 1e-12)


def test_sparsemax_edge_cases():
    np.testing.assert_array_equal(answers.sparsemax(np.array([[3.0, 1.0, 0.5]])), [[1, 0, 0]])
    np.testing.assert_allclose(answers.sparsemax(np.ones((2, 4))), np.full((2, 4), 0.25))
    np.testing.assert_allclose(
        answers.sparsemax(np.array([[1e6, 1e6 + 0.5, 0.0]])), [[0.25, 0.75, 0.0]]
    )
    np.testing.assert_array_equal(answers.sparsemax(np.array([[2.0], [-5.0]])), [[1.0], [1.0]])
    # translation invariance, and the one-hot threshold of a gap of 1
    z = np.array([[0.3, -0.2, 1.0]])
    np.testing.assert_allclose(answers.sparsemax(z + 7.25), answers.sparsemax(z), atol=1e-15)
    assert answers.sparsemax(np.array([[1.0, 0.0]]))[0, 0] == 1.0
    assert answers.sparsemax(np.array([[1.0, 0.01]]))[0, 1] > 0


def _torch_sparsemax(z):
    zs, _ = torch.sort(z, dim=-1, descending=True)
    j = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
    cs = zs.cumsum(-1)
    k = (1 + j * zs > cs).sum(-1, keepdim=True)
    tau = (cs.gather(-1, k - 1) - 1) / k
    return torch.clamp(z - tau, min=0)


@pytest.mark.parametrize("seed", range(6))
def test_sparsemax_backward_is_autograds_and_a_finite_differences_gradient(seed):
    rng = np.random.default_rng(seed)
    z = [0.05, 1.0, 3.0][seed % 3] * rng.standard_normal((2, 4, 6))
    grad = rng.standard_normal(z.shape)
    p = answers.sparsemax(z)
    got = answers.sparsemax_backward(p, grad)
    tz = torch.tensor(z, requires_grad=True)
    _torch_sparsemax(tz).backward(torch.tensor(grad))
    np.testing.assert_allclose(got, tz.grad.numpy(), rtol=1e-12, atol=1e-14)
    # d <grad, sparsemax(z)> / dz by central differences (piecewise linear: exact up to
    # rounding while the support does not change)
    h, fd = 1e-7, np.zeros_like(z)
    for index in np.ndindex(z.shape):
        step = np.zeros_like(z)
        step[index] = h
        plus = np.sum(grad * answers.sparsemax(z + step))
        minus = np.sum(grad * answers.sparsemax(z - step))
        fd[index] = (plus - minus) / (2 * h)
    np.testing.assert_allclose(got, fd, rtol=0, atol=1e-6)


def test_sparsemax_backward_of_one_hot_and_empty_rows_is_zero():
    p = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    assert np.all(answers.sparsemax_backward(p, np.arange(6.0).reshape(2, 3)) == 0)


# ----------------------------------------------------------------------------------------
# 2. the corpus of wrong implementations, judged as the grader judges


def _p(x):
    return np.asarray(x, dtype=float)


# softmax_backward ------------------------------------------------------------------------
SOFTMAX_BACKWARD = {
    "P * dP": (lambda p, dp: _p(p) * _p(dp), "you kept only the diagonal"),
    "sum over the queries": (
        lambda p, dp: _p(p) * (_p(dp) - (_p(p) * _p(dp)).sum(axis=-2, keepdims=True)),
        "not over a column (over the queries)",
    ),
    "log-softmax's backward": (
        lambda p, dp: _p(dp) - _p(p) * _p(dp).sum(axis=-1, keepdims=True),
        "backward pass of log-softmax",
    ),
    "sign flipped": (
        lambda p, dp: _p(p) * ((_p(p) * _p(dp)).sum(-1)[..., None] - _p(dp)),
        "the sign is flipped",
    ),
    "unweighted sum": (
        lambda p, dp: _p(p) * _p(dp) - _p(p) * _p(dp).sum(-1, keepdims=True),
        "weighted by the weights",
    ),
    "mean instead of the weighted sum": (
        lambda p, dp: _p(p) * (_p(dp) - _p(dp).mean(-1, keepdims=True)),
        None,
    ),
    "float32": (
        lambda p, dp: answers.softmax_backward(np.float32(p), np.float32(dp)).astype(np.float32),
        None,
    ),
    "sum without keepdims": (
        lambda p, dp: _p(p) * (_p(dp) - (_p(p) * _p(dp)).sum(-1)),
        None,
    ),
}


def _reduce_to(grad, shape):
    while grad.ndim > len(shape):
        grad = grad.sum(axis=0)
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return grad.sum(axis=axes, keepdims=True)


def _student_attention_backward(
    softmax_bwd=answers.softmax_backward,
    factor=lambda d: 1 / math.sqrt(d),
    transpose_ds=True,
    reduce=True,
    use_mask=True,
    shift=True,
):
    """A student's attention_backward, with one of its steps done wrong."""

    def attention_backward(q, k, v, grad_out, mask=None):
        q, k, v, d_out = (np.asarray(x, dtype=float) for x in (q, k, v, grad_out))
        d = q.shape[-1]
        s = q @ np.swapaxes(k, -1, -2) / math.sqrt(d)
        if not use_mask:
            mask = None
        if shift:
            p = masked_softmax(s, mask)
        else:
            e = np.exp(s) if mask is None else np.where(mask, np.exp(s), 0.0)
            p = e / e.sum(-1, keepdims=True)
        dv = np.swapaxes(p, -1, -2) @ d_out
        ds = softmax_bwd(p, d_out @ np.swapaxes(v, -1, -2))
        dq = ds @ k * factor(d)
        dk = (np.swapaxes(ds, -1, -2) if transpose_ds else ds) @ q * factor(d)
        if not reduce:
            return dq, dk, dv
        return _reduce_to(dq, q.shape), _reduce_to(dk, k.shape), _reduce_to(dv, v.shape)

    return attention_backward


def _forward_unscaled(scale_gradients):
    """A student's attention_backward whose recomputed scores lack the 1/sqrt(d)."""

    def attention_backward(q, k, v, grad_out, mask=None):
        q, k, v, d_out = (np.asarray(x, dtype=float) for x in (q, k, v, grad_out))
        d = q.shape[-1]
        p = masked_softmax(q @ np.swapaxes(k, -1, -2), mask)
        ds = answers.softmax_backward(p, d_out @ np.swapaxes(v, -1, -2))
        c = 1 / math.sqrt(d) if scale_gradients else 1.0
        dq, dk = ds @ k * c, np.swapaxes(ds, -1, -2) @ q * c
        dv = np.swapaxes(p, -1, -2) @ d_out
        return _reduce_to(dq, q.shape), _reduce_to(dk, k.shape), _reduce_to(dv, v.shape)

    return attention_backward


ATTENTION_BACKWARD = {
    "no 1/sqrt(d) in dq, dk": (
        _student_attention_backward(factor=lambda d: 1.0),
        "carries that factor into both dQ and dK",
    ),
    "divided by d": (_student_attention_backward(factor=lambda d: 1.0 / d), "not by d"),
    "softmax backward skipped": (
        _student_attention_backward(softmax_bwd=lambda p, dp: dp),
        "dP went straight to the scores",
    ),
    "task 1 without its subtraction": (
        _student_attention_backward(softmax_bwd=SOFTMAX_BACKWARD["P * dP"][0]),
        "your dS keeps only the diagonal",
    ),
    "task 1 as log-softmax": (
        _student_attention_backward(softmax_bwd=SOFTMAX_BACKWARD["log-softmax's backward"][0]),
        "log-softmax's backward",
    ),
    "dK from dS, not dS^T": (
        _student_attention_backward(transpose_ds=False),
        "K enters the scores transposed",
    ),
    "scores unscaled in the forward pass": (
        _forward_unscaled(True),
        "your weights are those of unscaled scores",
    ),
    "no 1/sqrt(d) anywhere": (
        _forward_unscaled(False),
        "missing both from the recomputed weights",
    ),
    "no sum over broadcast batch axes": (_student_attention_backward(reduce=False), None),
    "mask forgotten in the backward pass": (_student_attention_backward(use_mask=False), None),
    "softmax without the max shift": (_student_attention_backward(shift=False), None),
    "only dq scaled": (
        lambda *a, **kw: (lambda g, u: (g[0], u[1], g[2]))(
            answers.attention_backward(*a, **kw),
            _student_attention_backward(factor=lambda d: 1.0)(*a, **kw),
        ),
        None,
    ),
}


def _student_sparsemax(start=1, divide=True, clip=True, descending=True, mask_with=-np.inf):
    """A student's sparsemax, with one step wrong (``mask_with``: the score given to masked
    keys; None: masked keys zeroed after the projection)."""

    def sparsemax(scores, mask=None):
        z = np.asarray(scores, dtype=float)
        allowed = np.ones(z.shape, bool) if mask is None else np.broadcast_to(mask, z.shape)
        if mask_with is not None:
            z = np.where(allowed, z, mask_with)
        zs = np.sort(z, axis=-1)
        if descending:
            zs = zs[..., ::-1]
        j = np.arange(start, start + z.shape[-1])
        cs = np.cumsum(zs, axis=-1)
        k = np.sum(1 + j * zs > cs, axis=-1, keepdims=True)
        top = np.take_along_axis(cs, np.maximum(k - 1, 0), axis=-1)
        tau = np.where(k > 0, top - 1, 0.0) / (np.maximum(k, 1) if divide else 1)
        p = np.maximum(z - tau, 0.0) if clip else z - tau
        return np.where(allowed, p, 0.0)

    return sparsemax


def _sparsemax_unguarded(scores, mask=None):
    """Right, except that a row with no allowed key divides by k = 0."""
    z = np.asarray(scores, dtype=float)
    allowed = np.ones(z.shape, bool) if mask is None else np.broadcast_to(mask, z.shape)
    z = np.where(allowed, z, -np.inf)
    zs = -np.sort(-z, axis=-1)
    cs = np.cumsum(zs, axis=-1)
    k = np.sum(1 + np.arange(1, z.shape[-1] + 1) * zs > cs, axis=-1, keepdims=True)
    tau = (np.take_along_axis(cs, np.maximum(k - 1, 0), axis=-1) - 1) / k
    return np.maximum(z - tau, 0.0)


def _sparsemax_one_too_many(scores, mask=None):
    """The support takes one key more than the condition allows (k + 1, at most n)."""
    z = np.asarray(scores, dtype=float)
    allowed = np.ones(z.shape, bool) if mask is None else np.broadcast_to(mask, z.shape)
    z = np.where(allowed, z, -np.inf)
    zs = -np.sort(-z, axis=-1)
    cs = np.cumsum(zs, axis=-1)
    k = np.sum(1 + np.arange(1, z.shape[-1] + 1) * zs > cs, axis=-1, keepdims=True)
    k = np.minimum(k + 1, allowed.sum(axis=-1, keepdims=True))
    tau = np.where(k > 0, np.take_along_axis(cs, np.maximum(k - 1, 0), axis=-1) - 1, 0) / (
        np.maximum(k, 1)
    )
    return np.where(allowed, np.maximum(z - tau, 0.0), 0.0)


SPARSEMAX = {
    "j counted from 0": (_student_sparsemax(start=0), "off by one in the support size"),
    "tau not divided by k": (_student_sparsemax(divide=False), "divide by the support size"),
    "no max(0, .)": (_student_sparsemax(clip=False), "max(z_i - tau, 0)"),
    "increasing sort": (_student_sparsemax(descending=False), "decreasing order"),
    "masked keys zeroed after": (_student_sparsemax(mask_with=None), "not zero weight after"),
    "masked scores set to 0": (_student_sparsemax(mask_with=0.0), "(not 0) before sorting"),
    "softmax instead": (masked_softmax, None),
    "k = 0 not guarded": (_sparsemax_unguarded, None),
    "one key too many in the support": (_sparsemax_one_too_many, None),
}


def _support(p):
    return (np.asarray(p) > 0).astype(float)


SPARSEMAX_BACKWARD = {
    "off the support too": (
        lambda p, dp: (
            _p(dp)
            - (_support(p) * _p(dp)).sum(-1, keepdims=True)
            / np.maximum(_support(p).sum(-1, keepdims=True), 1)
        ),
        "outside the support",
    ),
    "mean of all keys": (
        lambda p, dp: _support(p) * (_p(dp) - _p(dp).mean(-1, keepdims=True)),
        "not over all n_k keys",
    ),
    "softmax's backward": (lambda p, dp: answers.softmax_backward(p, dp), "softmax's backward"),
    "sum instead of mean": (
        lambda p, dp: _support(p) * (_p(dp) - (_support(p) * _p(dp)).sum(-1, keepdims=True)),
        "takes the whole sum",
    ),
    "weighted mean": (
        lambda p, dp: _support(p) * (_p(dp) - (_p(p) * _p(dp)).sum(-1, keepdims=True)),
        "unweighted",
    ),
    "support taken as P >= 0": (
        lambda p, dp: _p(dp) - _p(dp).mean(-1, keepdims=True),
        None,
    ),
    "0/0 on an empty row": (
        lambda p, dp: (
            _support(p)
            * (
                _p(dp)
                - (_support(p) * _p(dp)).sum(-1, keepdims=True) / _support(p).sum(-1, keepdims=True)
            )
        ),
        None,
    ),
    "dP returned unchanged": (lambda p, dp: _support(p) * _p(dp), None),
}

CORPUS = {
    "softmax_backward": SOFTMAX_BACKWARD,
    "attention_backward": ATTENTION_BACKWARD,
    "sparsemax": SPARSEMAX,
    "sparsemax_backward": SPARSEMAX_BACKWARD,
}


def test_the_corpus_covers_every_task_with_five_wrong_implementations_and_three_named():
    assert set(CORPUS) == {c.name for c in checks.checks_for(A)}
    for name, corpus in CORPUS.items():
        assert len(corpus) >= 5, name
        assert sum(hint is not None for _fn, hint in corpus.values()) >= 3, name
        assert len(checks.REGISTRY[name].mistakes) >= 3, name


@pytest.mark.parametrize(
    ("name", "wrong"), [(name, wrong) for name, corpus in CORPUS.items() for wrong in corpus]
)
def test_a_wrong_implementation_loses_the_task_and_a_known_one_is_named(name, wrong):
    fn, hint = CORPUS[name][wrong]
    verdicts = judged.verdicts(name, fn, SEEDS)
    failed = [v for v in verdicts if not v.passed]
    assert failed, f"{name}: {wrong!r} passes every public and hidden case"
    assert any(not v.hidden for v in failed), f"{name}: {wrong!r} passes the public cases"
    assert any(v.hidden for v in failed), f"{name}: {wrong!r} passes the hidden cases"
    named = [v.message for v in failed if "known mistake" in v.message]
    if hint is None:  # none of the chapter's own hints; a systematic mistake derived from the
        # reference may name it (autograder/checking/diagnosis.py: the mask dropped, dk
        # times sqrt(d))
        own = [m.hint for m in checks.REGISTRY[name].mistakes]
        by_hand = [m for m in named if any(h in m for h in own)]
        assert not by_hand, by_hand[0]
    else:
        # named on most of its failing cases (where two mistakes coincide, e.g. dS = P dP
        # and dS = dP on a row of one key, the first declared is the one named)
        mine = [v for v in failed if hint in v.message and "known mistake" in v.message]
        assert {v.hidden for v in mine} == {False, True}, (named or [failed[0].message])[0]
        assert 2 * len(mine) >= len(named), named


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_every_declared_mistake_is_named_for_some_wrong_implementation(name):
    hints = {m.hint for m in checks.REGISTRY[name].mistakes}
    seen = set()
    for fn, hint in CORPUS[name].values():
        if hint is None:
            continue
        for v in judged.verdicts(name, fn, SEEDS):
            seen |= {h for h in hints if h in v.message}
    assert seen == hints, hints - seen


def test_attention_backward_names_the_broadcast_batch_axes_and_the_nan_of_an_overflow():
    shape = [
        v.message
        for v in judged.failing(
            "attention_backward", ATTENTION_BACKWARD["no sum over broadcast batch axes"][0], SEEDS
        )
    ]
    assert all("shared by a batch" in m for m in shape)
    assert any("summed over the batch axes k was broadcast along" in m for m in shape), shape
    overflow = [
        v.message
        for v in judged.failing(
            "attention_backward", ATTENTION_BACKWARD["softmax without the max shift"][0], SEEDS
        )
    ]
    assert any("large scores" in m and "max-shifted softmax" in m for m in overflow), overflow


def test_sparsemax_without_a_guard_on_empty_rows_gets_the_empty_row_hint():
    messages = [v.message for v in judged.failing("sparsemax", _sparsemax_unguarded, SEEDS)]
    assert any("fully-masked row" in m for m in messages)
    assert all("NaN" in m and "no support (k = 0)" in m for m in messages), messages


# ----------------------------------------------------------------------------------------
# 3. the reference passes its own cases


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_the_reference_passes_its_public_and_hidden_cases(name):
    verdicts = judged.verdicts(name, checks.REGISTRY[name].reference, SEEDS)
    assert all(v.passed for v in verdicts), [v.message for v in verdicts if not v.passed]
    assert len(verdicts) == len(checks.public_cases(name)) * (1 + len(SEEDS))


# ----------------------------------------------------------------------------------------
# 4. issue 45's misleading hints, each with its exact message in both languages


MISSING_SCALE = {
    # the recomputed scores unscaled, dq and dk divided by sqrt(d)
    True: (
        "your weights are those of unscaled scores: the forward pass you recompute must divide "
        "the scores by sqrt(d) too (the scaled dot product in 'Five scoring functions'), and dV, "
        "dQ and dK all read those weights",
        "你的权重来自未缩放的评分：你重新计算的前向传播也必须把评分除以 sqrt(d)（见“五种评分函数”"
        "一节中的缩放点积），而 dV、dQ 和 dK 都要读这些权重",
    ),
    # no 1/sqrt(d) anywhere
    False: (
        "the 1/sqrt(d) of the scores is missing both from the recomputed weights and from dQ and "
        "dK: the scaled dot product ('Five scoring functions') divides the scores by sqrt(d), "
        "and the chain rule carries the factor into dQ and dK",
        "重新计算的权重和 dQ、dK 中都缺少评分的 1/sqrt(d)：缩放点积（“五种评分函数”一节）把评分除以 "
        "sqrt(d)，链式法则再把这个因子带进 dQ 和 dK",
    ),
}


@pytest.mark.parametrize("scale_gradients", [True, False])
def test_a_missing_scale_of_the_scores_is_named_for_dq_and_dk_in_both_languages(scale_gradients):
    """Issue 45: a 1/sqrt(d) missing from the forward pass got no hint, and the message named
    dq alone. Now every failing case, public and hidden, names the mistake, which says
    where the factor goes (dQ and dK), in English and in Chinese."""
    en, zh = MISSING_SCALE[scale_gradients]
    fn = _forward_unscaled(scale_gradients)
    failed = judged.failing("attention_backward", fn, SEEDS, "en")
    public = {c.name for c in checks.public_cases("attention_backward")}
    # the single key (weight 1 or 0), large scores (one-hot weights) and d = 1 (1/sqrt(1) = 1)
    # pass whatever the scale
    same = {"single key (n_k=1), one query masked", "large scores"} | {
        c.name for c in checks.public_cases("attention_backward") if c.args[0].shape[-1] == 1
    }
    assert {v.case for v in failed if not v.hidden} == public - same
    assert {v.case for v in failed if v.hidden} == public - same
    for v in failed:
        assert v.message == f"case '{v.case}': your result matches a known mistake: {en}"
    for v in judged.failing("attention_backward", fn, SEEDS, "zh_CN"):
        assert v.message == f"用例“{v.case}”：你的结果与一个已知错误一致：{zh}"


SM_VALUES = (
    "each weight of a row depends on every score of that row (through the normaliser), so the "
    "gradient of one score gathers dP over its whole row: start from the softmax's derivative "
    "in the chapter's 'Five scoring functions' and apply the chain rule along the row",
    "一行中的每个权重（通过归一化因子）依赖于这一行的每个评分，所以一个评分的梯度要汇集整行的 dP："
    "从本章“五种评分函数”一节中 softmax 的导数出发，沿着这一行应用链式法则",
)


def test_one_key_does_not_name_log_softmax_by_coincidence():
    """Issue 45: dS = dP - sum(P dP) (the factor P dropped) was told "that is the backward
    pass of log-softmax" on the single-key case alone, where a masked row makes both dP.
    The log-softmax mistake is named only where every failing case agrees: here none does,
    so every failing case gets the check's own hint, which names the cause, not the code."""

    def p_dropped(p, dp):
        return _p(dp) - (_p(p) * _p(dp)).sum(-1, keepdims=True)

    for language, hint, word in (
        ("en", SM_VALUES[0], " Hint: "),
        ("zh_CN", SM_VALUES[1], " 提示："),
    ):
        failed = judged.failing("softmax_backward", p_dropped, SEEDS, language)
        assert {v.case for v in failed} >= {
            checks.translated_hint("single key (n_k=1)", language, A)
        }
        assert all(v.message.endswith(word + hint) for v in failed), [v.message for v in failed]
        assert not any("known mistake" in v.message or "已知错误" in v.message for v in failed)


def test_no_hint_of_the_chapter_prints_the_fix_as_code():
    """Issue 45, item 5: a hint names the cause and where to look, never the code to write."""
    for text in checks.hint_texts(A):
        assert "dS = P" not in text and "sum(P * dP)" not in text and "np." not in text, text
        assert "dQ = dS K" not in text and "dK = dS^T Q" not in text and "dV = P^T" not in text
