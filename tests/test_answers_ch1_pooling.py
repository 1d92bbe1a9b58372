"""The answer key of ch1_pooling (``answers/ch1_pooling.py``) and what its checks tell apart.

1. each reference against an independent oracle (PyTorch autograd, a loop over the formula,
   a closed form, the chapter's own scalar-bandwidth functions), in float64;
2. a corpus of plausible wrong implementations per task, written here independently of the
   plug-in's declared mistakes, each run through the real judge on the public and hidden
   cases: each loses points, and the ones the plug-in knows get their named hint;
3. each reference passes its own public and hidden cases.
"""

from __future__ import annotations

import judged
import numpy as np
import pytest
import torch

from answers import ch1_pooling as key
from autograder.checking import checks
from solutions import pooling

torch.set_default_dtype(torch.float64)

NAMES = (
    "epanechnikov_weights",
    "nadaraya_watson_query_grad",
    "nadaraya_watson_ard",
    "loo_loss_and_grad_ard",
)
HIDDEN_SEEDS = (0, 1, 2, 3, 4)


def _as2(x):
    x = np.asarray(x, dtype=float)
    return x[:, None] if x.ndim == 1 else x


# ----------------------------------------------------------------------------------------
# 1. the references against independent oracles


def test_epanechnikov_weights_closed_form_and_loops():
    # K(0) = 1, K(0.5) = 0.75, K(2) = 0: weights 4/7, 3/7, 0
    np.testing.assert_allclose(
        key.epanechnikov_weights(np.array([0.0]), np.array([0.0, 0.5, 2.0]), 1.0),
        [[4 / 7, 3 / 7, 0.0]],
        rtol=1e-15,
    )
    rng = np.random.default_rng(0)
    for xq, xk, h in (
        (rng.uniform(0, 5, 6), rng.uniform(0, 5, 9), 0.9),
        (rng.normal(size=(5, 3)), rng.normal(size=(4, 3)), 1.7),
        (np.array([50.0, 0.1]), rng.uniform(0, 1, 5), 0.4),
    ):
        got = key.epanechnikov_weights(xq, xk, h)
        q2, k2 = _as2(xq), _as2(xk)
        for i in range(len(q2)):
            kern = [
                max(0.0, 1.0 - float(np.sum((q2[i] - k2[j]) ** 2)) / h**2) for j in range(len(k2))
            ]
            total = sum(kern)
            want = [k / total if total > 0 else 0.0 for k in kern]
            np.testing.assert_allclose(got[i], want, rtol=1e-13, atol=1e-15)
        assert np.all(np.isfinite(got))
    # a query farther than h from every key: a row of zeros, no warning
    with np.errstate(all="raise"):
        far = key.epanechnikov_weights(np.array([40.0]), np.array([0.0, 1.0]), 0.5)
    assert np.array_equal(far, np.zeros((1, 2)))


def _torch_nw(xq, xk, y, h):
    """Gaussian Nadaraya-Watson in torch, per-dimension bandwidths h (d,)."""
    scores = -(((xq[:, None, :] - xk[None, :, :]) / h) ** 2).sum(-1) / 2
    return torch.softmax(scores, dim=-1) @ y


@pytest.mark.parametrize("dims", [(None, None), (None, 3), (2, None), (3, 2)])
def test_query_grad_is_torch_autograds_jacobian(dims):
    d, d_y = dims
    rng = np.random.default_rng(1)
    n_q, n_k, h = 4, 7, 0.8
    xq = rng.normal(size=(n_q,) if d is None else (n_q, d))
    xk = rng.normal(size=(n_k,) if d is None else (n_k, d))
    y = rng.normal(size=(n_k,) if d_y is None else (n_k, d_y))
    got = key.nadaraya_watson_query_grad(xq, xk, y, h)
    tk, ty = torch.tensor(_as2(xk)), torch.tensor(y)
    rows = []
    for i in range(n_q):
        xi = torch.tensor(_as2(xq)[i : i + 1])
        jac = torch.autograd.functional.jacobian(
            lambda x: _torch_nw(x, tk, ty, torch.tensor([h]))[0], xi
        )  # (d_y..., 1, d)
        rows.append(jac.reshape(jac.shape[:-2] + jac.shape[-1:]).numpy())
    want = np.stack(rows)  # (n_q, [d_y], d)
    if d is None:
        want = want[..., 0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-13)


def test_query_grad_far_query_and_one_key():
    rng = np.random.default_rng(2)
    far = key.nadaraya_watson_query_grad(
        np.array([-30.0]), rng.uniform(0, 1, 5), rng.normal(size=5), 0.05
    )
    assert np.all(np.isfinite(far)) and abs(far[0]) < 1e-6  # the nearest key's target, flat
    one = key.nadaraya_watson_query_grad(
        rng.normal(size=(3, 2)), rng.normal(size=(1, 2)), [2.0], 0.7
    )
    assert np.array_equal(one, np.zeros((3, 2)))  # f = y_1 whatever the query


def test_ard_is_torch_and_reduces_to_the_chapters_model():
    rng = np.random.default_rng(3)
    xq, xk = rng.normal(size=(5, 3)), rng.normal(size=(8, 3))
    y, h = rng.normal(size=(8, 2)), np.array([0.4, 1.1, 2.5])
    want = _torch_nw(torch.tensor(xq), torch.tensor(xk), torch.tensor(y), torch.tensor(h)).numpy()
    np.testing.assert_allclose(key.nadaraya_watson_ard(xq, xk, y, h), want, rtol=1e-12)
    # equal bandwidths: the chapter's Nadaraya-Watson
    np.testing.assert_allclose(
        key.nadaraya_watson_ard(xq, xk, y[:, 0], np.full(3, 0.9)),
        pooling.nadaraya_watson(xq, xk, y[:, 0], 0.9),
        rtol=1e-12,
    )
    # a huge bandwidth removes its dimension
    np.testing.assert_allclose(
        key.nadaraya_watson_ard(xq, xk, y, np.array([0.6, 1e9, 1e9])),
        pooling.nadaraya_watson(xq[:, 0], xk[:, 0], y, 0.6),
        rtol=1e-9,
    )


@pytest.mark.parametrize("vector", [False, True])
def test_loo_ard_is_torch_autograd_of_the_leave_one_out_loss(vector):
    rng = np.random.default_rng(4)
    n, d = 9, 3
    x = rng.uniform(0, 3, (n, d))
    y = rng.normal(size=(n, 2) if vector else n)
    h = np.array([0.5, 1.2, 2.0])
    loss, grad = key.loo_loss_and_grad_ard(x, y, h)
    th = torch.tensor(h, requires_grad=True)
    tx, ty = torch.tensor(x), torch.tensor(y)
    scores = -(((tx[:, None, :] - tx[None, :, :]) / th) ** 2).sum(-1) / 2
    scores = scores.masked_fill(torch.eye(n, dtype=torch.bool), -torch.inf)
    pred = torch.softmax(scores, -1) @ ty
    tloss = ((pred - ty) ** 2).mean()
    tloss.backward()
    assert isinstance(loss, float) and grad.shape == (d,)
    np.testing.assert_allclose(loss, tloss.item(), rtol=1e-13)
    np.testing.assert_allclose(grad, th.grad.numpy(), rtol=1e-10, atol=1e-14)


def test_loo_ard_with_one_dimension_is_the_chapters_gradient():
    rng = np.random.default_rng(5)
    x, y = np.sort(rng.uniform(0, 5, 11)), rng.normal(size=11)
    loss, grad = key.loo_loss_and_grad_ard(x[:, None], y, np.array([0.45]))
    want = pooling.loo_loss_and_grad(x, y, 0.45)
    np.testing.assert_allclose([loss, grad[0]], want, rtol=1e-12)


def test_loo_ard_central_difference():
    rng = np.random.default_rng(6)
    x, y, h = rng.normal(size=(8, 2)), rng.normal(size=8), np.array([0.7, 1.3])
    _, grad = key.loo_loss_and_grad_ard(x, y, h)
    for dim in range(2):
        e = np.zeros(2)
        e[dim] = 1e-6
        fd = (
            key.loo_loss_and_grad_ard(x, y, h + e)[0] - key.loo_loss_and_grad_ard(x, y, h - e)[0]
        ) / 2e-6
        np.testing.assert_allclose(grad[dim], fd, rtol=1e-6, atol=1e-9)


# ----------------------------------------------------------------------------------------
# 2. wrong implementations through the real judge


def _points(x):
    return _as2(x)


def _softmax(s, axis=-1):
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _dist2(xq, xk):
    return ((_points(xq)[:, None, :] - _points(xk)[None, :, :]) ** 2).sum(-1)


def _epa(kernel, axis=-1, guard=True):
    def weights(x_query, x_keys, bandwidth):
        k = kernel(_dist2(x_query, x_keys), bandwidth)
        t = k.sum(axis=axis, keepdims=True)
        return k / np.where(t != 0, t, 1.0) if guard else k / t

    return weights


def _epa_transposed(x_query, x_keys, bandwidth):
    return key.epanechnikov_weights(x_query, x_keys, bandwidth).T


def _gaussian_weights(x_query, x_keys, bandwidth):
    return _softmax(-_dist2(x_query, x_keys) / (2 * bandwidth**2))


EPANECHNIKOV_WRONG = {
    # name: (implementation, the named hint's distinctive words, or None)
    "u^2 without dividing by h": (
        _epa(lambda d2, h: np.maximum(0, 1 - d2)),
        "u is the distance divided by the bandwidth",
    ),
    "no clipping at 0": (_epa(lambda d2, h: 1 - d2 / h**2), "without the clipping at 0"),
    "|u| instead of u^2": (
        _epa(lambda d2, h: np.maximum(0, 1 - np.sqrt(d2) / h)),
        "uses u^2, not |u|",
    ),
    "normalised over the queries": (
        _epa(lambda d2, h: np.maximum(0, 1 - d2 / h**2), axis=0),
        "not each key's column",
    ),
    "0/0 for a far query": (
        _epa(lambda d2, h: np.maximum(0, 1 - d2 / h**2), guard=False),
        "not 0/0 = NaN",
    ),
    "the page's Gaussian kernel": (_gaussian_weights, None),
    "a box kernel (1 within h)": (_epa(lambda d2, h: (d2 < h**2).astype(float)), None),
    "weights transposed": (_epa_transposed, None),
}


def _jac_shape(jac, x_query, y_values):
    jac = jac[:, 0, :] if np.ndim(y_values) == 1 else jac
    return jac[..., 0] if np.ndim(x_query) == 1 else jac


def _query_grad(factor=1.0, normaliser=True, shift=True, sign=1.0, transpose=False):
    def grad(x_query, x_keys, y_values, bandwidth):
        xq, xk = _points(x_query), _points(x_keys)
        y = np.asarray(y_values, dtype=float)
        y2 = y[:, None] if y.ndim == 1 else y
        s = -_dist2(xq, xk) / (2 * bandwidth**2)
        if shift:
            a = _softmax(s)
        else:
            e = np.exp(s)
            a = e / e.sum(-1, keepdims=True)
        pred = a @ y2
        resid = (
            y2[None] - pred[:, None]
            if normaliser
            else np.broadcast_to(y2[None], a.shape + y2.shape[1:])
        )
        offset = sign * (xk[None] - xq[:, None])
        jac = np.einsum("qk,qky,qkd->qyd", a, resid, offset) * factor / bandwidth**2
        if transpose:
            return np.swapaxes(jac, -1, -2)
        return _jac_shape(jac, x_query, y_values)

    return grad


def _query_grad_finite_difference(x_query, x_keys, y_values, bandwidth):
    xq = _points(x_query)
    base = key.nadaraya_watson_ard  # any correct prediction: here with equal bandwidths
    h = np.full(xq.shape[1], float(bandwidth))
    y = np.asarray(y_values, dtype=float)
    cols = []
    for dim in range(xq.shape[1]):
        e = np.zeros_like(xq)
        e[:, dim] = 1e-6
        plus = base(xq + e, _points(x_keys), y, h)
        minus = base(xq - e, _points(x_keys), y, h)
        cols.append((plus - minus) / 2e-6)
    jac = np.stack(cols, axis=-1)  # (n_q, [d_y], d)
    return jac[..., 0] if np.ndim(x_query) == 1 else jac


QUERY_GRAD_WRONG = {
    "sign flipped": (_query_grad(sign=-1.0), "the sign is flipped"),
    "normaliser not differentiated": (_query_grad(normaliser=False), "the softmax's normaliser"),
    "kept the 2 of 2 h^2": (_query_grad(factor=0.5), "the 2 cancels"),
    "divided by h^3 (the bandwidth's g)": (
        lambda xq, xk, y, h: _query_grad()(xq, xk, y, h) / h,
        "not in the bandwidth",
    ),
    "no max shift": (_query_grad(shift=False), None),
    "a finite difference": (_query_grad_finite_difference, None),
    "Jacobian transposed (d before d_y)": (_query_grad(transpose=True), None),
}


def _ard(score, shift=True, axis=-1):
    def predict(x_query, x_keys, y_values, bandwidths):
        h = np.asarray(bandwidths, dtype=float)
        d2 = (_points(x_query)[:, None] - _points(x_keys)[None]) ** 2
        s = score(d2, h)
        if shift:
            a = _softmax(s, axis)
        else:
            e = np.exp(s)
            a = e / e.sum(axis, keepdims=True)
        return a @ np.asarray(y_values, dtype=float)

    return predict


ARD_WRONG = {
    "one common bandwidth (their mean)": (
        _ard(lambda d2, h: -d2.sum(-1) / (2 * np.mean(h) ** 2)),
        "not the distance by one common bandwidth",
    ),
    "divided by 2 h_l": (_ard(lambda d2, h: -(d2 / (2 * h)).sum(-1)), "the bandwidth is squared"),
    "divided by h_l^2": (_ard(lambda d2, h: -(d2 / h**2).sum(-1)), "twice the Gaussian's"),
    "no max shift": (_ard(lambda d2, h: -(d2 / (2 * h**2)).sum(-1), shift=False), None),
    "softmax over the queries": (_ard(lambda d2, h: -(d2 / (2 * h**2)).sum(-1), axis=0), None),
    "bandwidths multiply": (_ard(lambda d2, h: -(d2 * h**2 / 2).sum(-1)), None),
}


def _loo(keep_diagonal=False, power=3, whole_distance=False, mean_outputs=True, dpred_kind="full"):
    def loo(x, y, bandwidths):
        h = np.asarray(bandwidths, dtype=float)
        x2 = _points(x)
        y = np.asarray(y, dtype=float)
        y2 = y[:, None] if y.ndim == 1 else y
        n = len(x2)
        d2 = (x2[:, None] - x2[None]) ** 2
        s = -(d2 / (2 * h**2)).sum(-1)
        if not keep_diagonal:
            s = np.where(np.eye(n, dtype=bool), -np.inf, s)
        a = _softmax(s)
        pred = a @ y2
        err = pred - y2
        g = (d2.sum(-1, keepdims=True) if whole_distance else d2) / h**power
        ag = a[:, :, None] * g
        dpred = np.einsum("ijl,jk->ikl", ag, y2)
        if dpred_kind != "none":  # "none": the softmax normaliser's term forgotten
            dpred = dpred - ag.sum(1)[:, None, :] * pred[:, :, None]
        count = err.size if mean_outputs else n
        factor = 1.0 if dpred_kind == "half" else 2.0  # "half": d(e^2) = e de
        return float((err**2).sum() / count), factor * np.einsum("ik,ikl->l", err, dpred) / count

    return loo


def _loo_sign(x, y, h):
    loss, grad = key.loo_loss_and_grad_ard(x, y, h)
    return loss, -grad


def _loo_finite_difference(x, y, bandwidths):
    h = np.asarray(bandwidths, dtype=float)
    grad = []
    for dim in range(len(h)):
        e = np.zeros_like(h)
        e[dim] = 1e-5 * h[dim]
        grad.append(
            (key.loo_loss_and_grad_ard(x, y, h + e)[0] - key.loo_loss_and_grad_ard(x, y, h - e)[0])
            / (2 * e[dim])
        )
    return key.loo_loss_and_grad_ard(x, y, h)[0], np.array(grad)


LOO_WRONG = {
    "gradient sign flipped": (_loo_sign, "the wrong sign"),
    "diagonal not masked": (_loo(keep_diagonal=True), "mask the diagonal"),
    "every bandwidth sees the whole distance": (
        _loo(whole_distance=True),
        "each bandwidth sees only its own dimension",
    ),
    "g with h_l^2": (_loo(power=2), "one more power of h"),
    "sum over the outputs": (_loo(mean_outputs=False), "divide by n d_y"),
    "a finite difference": (_loo_finite_difference, None),
    "softmax normaliser not differentiated": (_loo(dpred_kind="none"), None),
    "the factor 2 of the square dropped": (_loo(dpred_kind="half"), None),
}

CORPUS = {
    "epanechnikov_weights": EPANECHNIKOV_WRONG,
    "nadaraya_watson_query_grad": QUERY_GRAD_WRONG,
    "nadaraya_watson_ard": ARD_WRONG,
    "loo_loss_and_grad_ard": LOO_WRONG,
}


def test_the_corpus_is_large_enough():
    for name, corpus in CORPUS.items():
        assert len(corpus) >= 5, name
        assert sum(hint is not None for _, hint in corpus.values()) >= 3, name
        assert len(checks.REGISTRY[name].mistakes) >= 3, name


@pytest.mark.parametrize(
    "name, wrong", [(name, wrong) for name, corpus in CORPUS.items() for wrong in corpus]
)
def test_every_wrong_implementation_loses_points_and_the_known_ones_are_named(name, wrong):
    fn, hint = CORPUS[name][wrong]
    verdicts = judged.verdicts(name, fn, HIDDEN_SEEDS)
    failed = [v for v in verdicts if not v.passed]
    public_failed = [v for v in failed if not v.hidden]
    hidden_failed = [v for v in failed if v.hidden]
    assert public_failed, f"{wrong}: passes every public case"
    assert hidden_failed, f"{wrong}: passes every hidden case"
    named = [v for v in failed if "known mistake" in v.message]
    if hint is None:  # unknown to the plug-in: not told by its own hints (a case where it
        # coincides with a known mistake, e.g. one-hot weights, may still name that one; a
        # systematic mistake derived from the reference may name it, autograder/checking/
        # diagnosis.py: "the factor 2 of the square dropped" is the gradient times 1/2)
        own = [m.hint for m in checks.REGISTRY[name].mistakes]
        by_hand = [v for v in named if any(h in v.message for h in own)]
        assert len(by_hand) < len(failed), f"{wrong}: always named: {by_hand[0].message}"
    else:
        assert named, f"{wrong}: never named; first message: {failed[0].message}"
        assert all(hint in v.message for v in named), named[0].message


# ----------------------------------------------------------------------------------------
# 3. the references pass their own cases


@pytest.mark.parametrize("name", NAMES)
def test_reference_passes_its_public_and_hidden_cases(name):
    assert checks.REGISTRY[name].assignment == "ch1_pooling"
    verdicts = judged.verdicts(name, checks.REGISTRY[name].reference, HIDDEN_SEEDS)
    assert all(v.passed for v in verdicts), [v.message for v in verdicts if not v.passed]


@pytest.mark.parametrize(
    "name, wrong, words",
    [
        ("epanechnikov_weights", "weights transposed", "queries are rows"),
        ("nadaraya_watson_query_grad", "Jacobian transposed (d before d_y)", "comes before"),
        ("nadaraya_watson_query_grad", "no max shift", "subtract the row maximum"),
        ("nadaraya_watson_ard", "no max shift", "subtract the row maximum"),
        ("loo_loss_and_grad_ard", "a finite difference", "not accurate enough to pass"),
        ("epanechnikov_weights", "the page's Gaussian kernel", "max(0, 1 - u^2)"),
    ],
)
def test_the_unnamed_ones_get_the_checks_generic_hint(name, wrong, words):
    fn, _hint = CORPUS[name][wrong]
    failed = judged.failing(name, fn, HIDDEN_SEEDS)
    assert any(words in v.message for v in failed), failed[0].message


def test_no_hint_of_the_chapter_prints_the_fix_as_code():
    """Issue 45, item 5: a hint names the cause and where to look, never the code to write
    (a call, an index expression, a line of the solution)."""
    code = ("np.where(", "np.repeat", "np.tile", "[:, None", "axis=-1)", " @ w_", "rowsum(", "`")
    code += ("dS = P", "dQ = dS", "dx_kv = ", "dW_o = M", "f = F *", "g_ijl = ", "_layer_norm(")
    for text in checks.hint_texts("ch1_pooling"):
        assert not any(c in text for c in code), text
