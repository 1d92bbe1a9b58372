"""The answer key of ch3_seq2seq (answers/ch3_seq2seq.py) and the checks that grade it.

1. each reference against an independent oracle in float64: the coverage loss by explicit
   loops over steps and positions, the attention steps with PyTorch (``torch.softmax``, and
   ``torch.nn.functional.conv1d`` for the location features);
2. a corpus of wrong implementations per task, written as students write them, run through
   the real judge on the public and hidden cases: each loses points, and the ones the
   chapter knows get their named hint;
3. the references pass their own public and hidden cases.
"""

from __future__ import annotations

import judged
import numpy as np
import pytest
import torch

from answers import ch3_seq2seq as answers
from autograder.checking import checks, judging
from autograder.student import contract
from solutions.conventions import masked_softmax

RNG = np.random.default_rng(3)


def _rows(*shape):
    e = np.exp(2.0 * RNG.standard_normal(shape))
    return e / e.sum(-1, keepdims=True)


def _mask(b, n, empty=False):
    lengths = RNG.integers(1, n + 1, size=b)
    lengths[-1] = n
    if empty:
        lengths[0] = 0
    return np.arange(n)[None] < lengths[:, None]


# ----------------------------------------------------------------------------------------
# 1. the references against independent oracles


def _loss_by_loops(weights, mask=None):
    weights = np.asarray(weights, dtype=np.float64)
    if mask is not None:
        mask = np.broadcast_to(mask, weights.shape)
    b, t, n = weights.shape
    out = np.zeros(b)
    for bb in range(b):
        for step in range(t):
            for i in range(n):
                if mask is not None and not mask[bb, step, i]:
                    continue
                coverage = sum(
                    weights[bb, before, i]
                    for before in range(step)
                    if mask is None or mask[bb, before, i]
                )
                out[bb] += min(weights[bb, step, i], coverage)
    return out


@pytest.mark.parametrize(
    "mask_kind", [None, "steps", "words", "full", "empty"], ids=lambda m: str(m)
)
def test_coverage_loss_equals_the_loops(mask_kind):
    b, t, n = 3, 5, 4
    weights = _rows(b, t, n)
    mask = {
        None: None,
        "steps": _mask(b, t)[:, :, None],
        "words": _mask(b, n)[:, None, :],
        "full": RNG.random((b, t, n)) < 0.7,
        "empty": np.zeros((b, t, n), dtype=bool),
    }[mask_kind]
    got = answers.coverage_loss(weights, mask)
    assert got.shape == (b,)
    np.testing.assert_allclose(got, _loss_by_loops(weights, mask), rtol=1e-13, atol=1e-15)


def test_coverage_loss_closed_forms():
    # one step: no coverage; one-hot rows on the same word: T - 1 repeats cost 1 each
    assert np.all(answers.coverage_loss(_rows(2, 1, 5)) == 0)
    same = np.zeros((1, 4, 3))
    same[0, :, 1] = 1.0
    np.testing.assert_allclose(answers.coverage_loss(same), [3.0])
    # a permutation (every word once) costs nothing
    np.testing.assert_allclose(answers.coverage_loss(np.eye(4)[None]), [0.0])


def _torch_attend(scores, h, mask):
    if mask is not None:
        scores = scores.masked_fill(~torch.as_tensor(mask), float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)  # empty rows: 0
    return (weights[..., None] * h).sum(-2), weights


def _torch_coverage_context(s_prev, h, coverage, w_s, w_h, w_c, v, mask=None):
    s_prev, h, coverage, w_s, w_h, w_c, v = (
        torch.as_tensor(np.asarray(x, dtype=np.float64))
        for x in (s_prev, h, coverage, w_s, w_h, w_c, v)
    )
    hidden = torch.tanh(
        torch.einsum("bd,da->ba", s_prev, w_s)[:, None]
        + torch.einsum("bnd,da->bna", h, w_h)
        + coverage[..., None] * w_c
    )
    return _torch_attend(torch.einsum("bna,a->bn", hidden, v), h, mask)


def _coverage_args(b, n, mask=None, earlier=3):
    d_dec, d_enc, d_att = 4, 6, 5
    return (
        RNG.standard_normal((b, d_dec)),
        RNG.standard_normal((b, n, d_enc)),
        sum(_rows(b, n) for _ in range(earlier)) * (1 if mask is None else mask),
        RNG.standard_normal((d_dec, d_att)),
        RNG.standard_normal((d_enc, d_att)),
        RNG.standard_normal(d_att),
        RNG.standard_normal(d_att),
        mask,
    )


@pytest.mark.parametrize("masked", [False, True, "empty"])
def test_coverage_context_equals_torch(masked):
    b, n = 3, 6
    mask = None if masked is False else _mask(b, n, empty=masked == "empty")
    args = _coverage_args(b, n, mask)
    context, weights = answers.coverage_context(*args)
    context_t, weights_t = _torch_coverage_context(*args)
    np.testing.assert_allclose(weights, weights_t.numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(context, context_t.numpy(), rtol=1e-12, atol=1e-14)
    if masked == "empty":
        assert np.all(weights[0] == 0) and np.all(context[0] == 0)


def test_coverage_context_with_zero_coverage_is_bahdanau():
    from solutions import seq2seq

    s_prev, h, coverage, w_s, w_h, w_c, v, mask = _coverage_args(2, 5, earlier=0)
    got = answers.coverage_context(s_prev, h, coverage, w_s, w_h, w_c, v, mask)
    want = seq2seq.bahdanau_context(s_prev, h, w_s, w_h, v, mask)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-15)


def _torch_location_context(s_prev, h, prev, w_s, w_h, filters, w_f, v, mask=None):
    prev, filters = (torch.as_tensor(np.asarray(x, dtype=np.float64)) for x in (prev, filters))
    r = filters.shape[1]
    # conv1d is a correlation: a convolution is conv1d with the filter flipped
    features = torch.nn.functional.conv1d(
        prev[:, None, :], filters.flip(-1)[:, None, :], padding=(r - 1) // 2
    ).transpose(1, 2)  # (B, n, k)
    s_prev, h, w_s, w_h, w_f, v = (
        torch.as_tensor(np.asarray(x, dtype=np.float64)) for x in (s_prev, h, w_s, w_h, w_f, v)
    )
    hidden = torch.tanh((s_prev @ w_s)[:, None] + h @ w_h + features @ w_f)
    return _torch_attend(hidden @ v, h, mask), features


def _location_args(b, n, k, r, mask=None):
    d_dec, d_enc, d_att = 4, 5, 6
    prev = _rows(b, n) if mask is None else masked_softmax(RNG.standard_normal((b, n)), mask)
    return (
        RNG.standard_normal((b, d_dec)),
        RNG.standard_normal((b, n, d_enc)),
        prev,
        RNG.standard_normal((d_dec, d_att)),
        RNG.standard_normal((d_enc, d_att)),
        RNG.standard_normal((k, r)),
        RNG.standard_normal((k, d_att)),
        RNG.standard_normal(d_att),
        mask,
    )


@pytest.mark.parametrize(
    "n, k, r, masked",
    [(6, 3, 5, False), (7, 2, 3, True), (5, 2, 3, "empty"), (2, 3, 5, False), (1, 2, 3, False)],
)
def test_location_aware_context_equals_torch_conv1d(n, k, r, masked):
    b = 3
    mask = None if masked is False else _mask(b, n, empty=masked == "empty")
    args = _location_args(b, n, k, r, mask)
    (context_t, weights_t), features_t = _torch_location_context(*args)
    np.testing.assert_allclose(
        answers.location_features(args[2], args[5]), features_t.numpy(), rtol=1e-13, atol=1e-15
    )
    context, weights = answers.location_aware_context(*args)
    np.testing.assert_allclose(weights, weights_t.numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(context, context_t.numpy(), rtol=1e-12, atol=1e-14)


def test_location_features_of_a_one_hot_are_the_flipped_filter_shifted():
    n, r = 9, 5
    filters = RNG.standard_normal((2, r))
    prev = np.zeros((1, n))
    prev[0, 4] = 1.0
    f = answers.location_features(prev, filters)  # (1, n, 2)
    # f_i = F_(i + p - 4): the filter read forwards along the source, centred on word 4
    np.testing.assert_array_equal(f[0, 2:7], filters.T)


def test_coverage_attention_steps_equals_a_torch_loop():
    b, t, n = 3, 6, 5
    mask = _mask(b, n, empty=True)
    s = RNG.standard_normal((b, t, 4))
    _, h, _, w_s, w_h, w_c, v, _ = _coverage_args(b, n)
    coverage, rows = np.zeros((b, n)), []
    for step in range(t):
        _, a = _torch_coverage_context(s[:, step], h, coverage, w_s, w_h, 3 * w_c, v, mask)
        rows.append(a.numpy())
        coverage = coverage + a.numpy()
    weights, loss = answers.coverage_attention_steps(s, h, w_s, w_h, 3 * w_c, v, mask)
    np.testing.assert_allclose(weights, np.stack(rows, 1), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(loss, _loss_by_loops(np.stack(rows, 1)), rtol=1e-12, atol=1e-14)


# ----------------------------------------------------------------------------------------
# 2. wrong implementations, as students write them, through the real judge


def _verdicts(name, fn, hidden_seed=None):
    cases = (
        checks.public_cases(name) if hidden_seed is None else checks.hidden_cases(name, hidden_seed)
    )
    spec, out = checks.spec(name), []
    for case in cases:
        case = checks.prepare(name, case, hidden=hidden_seed is not None)
        with np.errstate(all="ignore"):
            outcome = contract.run_case(fn, *case.fresh())
        out.append(judging.judge(spec, case, outcome))
    return out


def _softmax_rows(scores, mask):
    return masked_softmax(scores, mask)


# -- task 1


def loss_inclusive(weights, mask=None):
    w = np.where(mask, weights, 0.0) if mask is not None else np.asarray(weights)
    return np.minimum(w, np.cumsum(w, axis=1)).sum(axis=(1, 2))


def loss_max(weights, mask=None):
    w = np.where(mask, weights, 0.0) if mask is not None else np.asarray(weights)
    c = np.cumsum(w, axis=1) - w
    return np.maximum(w, c).sum(axis=(1, 2))


def loss_mean(weights, mask=None):
    w = np.where(mask, weights, 0.0) if mask is not None else np.asarray(weights)
    c = np.cumsum(w, axis=1) - w
    return np.minimum(w, c).sum(axis=2).mean(axis=1)


def loss_no_mask(weights, mask=None):
    w = np.asarray(weights)
    total, out = np.zeros(w[:, 0].shape), np.zeros(w.shape[0])
    for t in range(w.shape[1]):
        out += np.minimum(w[:, t], total).sum(-1)
        total += w[:, t]
    return out


def loss_mask_late(weights, mask=None):
    w = np.asarray(weights)
    c = np.cumsum(w, axis=1) - w
    terms = np.minimum(w, c)
    return (terms if mask is None else terms * mask).sum(axis=(1, 2))


def loss_future(weights, mask=None):  # the coverage of the steps after t
    w = np.where(mask, weights, 0.0) if mask is not None else np.asarray(weights)
    after = np.cumsum(w[:, ::-1], axis=1)[:, ::-1] - w
    return np.minimum(w, after).sum(axis=(1, 2))


def loss_per_step(weights, mask=None):
    w = np.where(mask, weights, 0.0) if mask is not None else np.asarray(weights)
    return np.minimum(w, np.cumsum(w, axis=1) - w).sum(axis=2)  # (B, T)


# -- task 2


def _hidden(s_prev, h, w_s, w_h, extra=0.0):
    return np.tanh((np.asarray(s_prev) @ w_s)[:, None] + np.asarray(h) @ w_h + extra)


def _context(weights, h):
    return np.einsum("bn,bnd->bd", weights, h), weights


def context_no_coverage(s_prev, h, coverage, w_s, w_h, w_c, v, mask=None):
    return _context(_softmax_rows(_hidden(s_prev, h, w_s, w_h) @ v, mask), h)


def context_after_tanh(s_prev, h, coverage, w_s, w_h, w_c, v, mask=None):
    hidden = _hidden(s_prev, h, w_s, w_h) + np.asarray(coverage)[..., None] * w_c
    return _context(_softmax_rows(hidden @ v, mask), h)


def context_no_w_c(s_prev, h, coverage, w_s, w_h, w_c, v, mask=None):
    hidden = _hidden(s_prev, h, w_s, w_h, np.asarray(coverage)[..., None])
    return _context(_softmax_rows(hidden @ v, mask), h)


def context_batch_axis(s_prev, h, coverage, w_s, w_h, w_c, v, mask=None):
    scores = _hidden(s_prev, h, w_s, w_h, np.asarray(coverage)[..., None] * w_c) @ v
    e = np.exp(scores - scores.max(axis=0))
    if mask is not None:
        e = e * mask
    total = e.sum(axis=0, keepdims=True)
    return _context(e / np.where(total > 0, total, 1.0), h)


def context_no_mask(s_prev, h, coverage, w_s, w_h, w_c, v, mask=None):
    scores = _hidden(s_prev, h, w_s, w_h, np.asarray(coverage)[..., None] * w_c) @ v
    return _context(_softmax_rows(scores, None), h)


def context_unshifted(s_prev, h, coverage, w_s, w_h, w_c, v, mask=None):
    scores = _hidden(s_prev, h, w_s, w_h, np.asarray(coverage)[..., None] * w_c) @ v
    e = np.exp(scores) * (1 if mask is None else mask)
    total = e.sum(-1, keepdims=True)
    return _context(e / np.where(total > 0, total, 1.0), h)


def context_minus_coverage(s_prev, h, coverage, w_s, w_h, w_c, v, mask=None):
    hidden = _hidden(s_prev, h, w_s, w_h, -np.asarray(coverage)[..., None] * w_c)
    return _context(_softmax_rows(hidden @ v, mask), h)


# -- task 3


def _location(s_prev, h, features, w_s, w_h, w_f, v, mask):
    hidden = _hidden(s_prev, h, w_s, w_h, features @ w_f)
    return _context(_softmax_rows(hidden @ v, mask), h)


def _correlate_rows(prev, filters, flip):
    prev, filters = np.asarray(prev), np.asarray(filters)
    p = (filters.shape[1] - 1) // 2
    padded = np.pad(prev, ((0, 0), (p, p)))
    n = prev.shape[1]
    taps = filters[:, ::-1] if flip else filters
    return np.stack(
        [np.stack([padded[:, i : i + filters.shape[1]] @ f for f in taps], -1) for i in range(n)],
        1,
    )  # (B, n, k)


def location_correlation(s_prev, h, prev, w_s, w_h, filters, w_f, v, mask=None):
    return _location(s_prev, h, _correlate_rows(prev, filters, False), w_s, w_h, w_f, v, mask)


def location_full_truncated(s_prev, h, prev, w_s, w_h, filters, w_f, v, mask=None):
    n = np.shape(prev)[1]
    features = np.stack(
        [
            np.stack([np.convolve(row, f, mode="full")[:n] for f in filters], -1)
            for row in np.asarray(prev)
        ]
    )
    return _location(s_prev, h, features, w_s, w_h, w_f, v, mask)


def location_roll(s_prev, h, prev, w_s, w_h, filters, w_f, v, mask=None):
    p = (np.shape(filters)[1] - 1) // 2
    features = sum(
        np.roll(prev, p - m, axis=1)[..., None] * np.asarray(filters)[:, m]
        for m in range(np.shape(filters)[1])
    )
    return _location(s_prev, h, features, w_s, w_h, w_f, v, mask)


def location_after_tanh(s_prev, h, prev, w_s, w_h, filters, w_f, v, mask=None):
    features = _correlate_rows(prev, filters, True)
    scores = _hidden(s_prev, h, w_s, w_h) @ v + features @ w_f @ v
    return _context(_softmax_rows(scores, mask), h)


def location_no_mask(s_prev, h, prev, w_s, w_h, filters, w_f, v, mask=None):
    features = _correlate_rows(prev, filters, True)
    return _location(s_prev, h, features, w_s, w_h, w_f, v, None)


def location_convolve_same(s_prev, h, prev, w_s, w_h, filters, w_f, v, mask=None):
    features = np.stack(
        [
            np.stack([np.convolve(row, f, mode="same") for f in filters], -1)
            for row in np.asarray(prev)
        ]
    )  # (B, max(n, r), k): wrong length when n < r
    return _location(s_prev, h, features, w_s, w_h, w_f, v, mask)


def location_no_features(s_prev, h, prev, w_s, w_h, filters, w_f, v, mask=None):
    return _context(_softmax_rows(_hidden(s_prev, h, w_s, w_h) @ v, mask), h)


# -- task 4: loops written with correct callees (the references) or wrong ones


def _loop(context=answers.coverage_context, loss=answers.coverage_loss, update="add", axis=1):
    def steps(s, h, w_s, w_h, w_c, v, mask=None):
        coverage, rows, in_loop = np.zeros(np.shape(h)[:2]), [], np.zeros(np.shape(h)[0])
        for t in range(np.shape(s)[1]):
            _, a = context(np.asarray(s)[:, t], h, coverage, w_s, w_h, w_c, v, mask)
            rows.append(a)
            if update == "add":
                coverage = coverage + a
            elif update == "replace":
                coverage = a
            elif update == "loss-after":
                coverage = coverage + a
                in_loop += np.minimum(a, coverage).sum(-1)
            elif update == "start-at-one":
                coverage = (coverage if t else np.ones_like(coverage)) + a
        weights = np.stack(rows, axis=axis)
        return weights, in_loop if update == "loss-after" else loss(weights)

    return steps


WRONG = {
    "coverage_loss": {
        "includes step t": (loss_inclusive, True),
        "max for min": (loss_max, True),
        "mean over steps": (loss_mean, True),
        "mask ignored": (loss_no_mask, True),
        "mask only on the loss terms": (loss_mask_late, True),
        "coverage of the later steps": (loss_future, False),
        "one loss per step": (loss_per_step, False),
    },
    "coverage_context": {
        "coverage left out": (context_no_coverage, True),
        "coverage after tanh": (context_after_tanh, True),
        "w_c left out": (context_no_w_c, True),
        "softmax over the batch": (context_batch_axis, True),
        "mask ignored": (context_no_mask, True),
        "softmax without the max shift": (context_unshifted, False),
        # no hint of the chapter's: named by the diagnosis (`coverage` negated, a sign)
        "coverage subtracted": (context_minus_coverage, True),
    },
    "location_aware_context": {
        "correlation (filter not flipped)": (location_correlation, True),
        "np.convolve full, first n": (location_full_truncated, True),
        "np.roll (wraps around)": (location_roll, True),
        "location term after tanh": (location_after_tanh, True),
        "mask ignored": (location_no_mask, True),
        "location features left out": (location_no_features, True),
        "np.convolve same (n < r)": (location_convolve_same, False),
    },
    "coverage_attention_steps": {
        "coverage never added": (_loop(update="none"), True),
        "coverage replaced": (_loop(update="replace"), True),
        "loss taken after the update": (_loop(update="loss-after"), True),
        "callee: coverage after tanh": (_loop(context=context_after_tanh), True),
        "callee: softmax over the batch": (_loop(context=context_batch_axis), True),
        "callee: loss with max": (_loop(loss=loss_max), True),
        "callee: mean loss": (_loop(loss=loss_mean), True),
        "steps stacked on axis 0": (_loop(axis=0), False),
        "coverage starts at one": (_loop(update="start-at-one"), False),
    },
}
CORPUS = [(name, label) for name, wrong in WRONG.items() for label in wrong]


@pytest.mark.parametrize("name, label", CORPUS, ids=[f"{n}: {w}" for n, w in CORPUS])
def test_a_wrong_implementation_loses_points_on_public_and_hidden_cases(name, label):
    fn, named = WRONG[name][label]
    for seed in (None, 2, 99):
        verdicts = _verdicts(name, fn, seed)
        failed = [v for v in verdicts if not v.passed]
        assert failed, (name, label, seed)
        hinted = [v for v in failed if "known mistake" in v.message]
        assert bool(hinted) == named, (label, seed, [v.message for v in failed])


def test_every_task_names_at_least_three_of_its_wrong_implementations():
    for name, wrong in WRONG.items():
        assert len(wrong) >= 5
        assert sum(named for _, named in wrong.values()) >= 3
        assert len(checks.REGISTRY[name].mistakes) >= 3


def test_a_faulty_callee_is_named_by_the_steps_check():
    """Task 4 is judged on its own work: a loop around a faulty task 2 or task 1 is told
    which one to look at (fix it first if its own check fails), a faulty loop is told about
    the loop."""
    for fn, task in (
        (_loop(context=context_after_tanh), "if coverage_context's own check (task 2) fails"),
        (_loop(context=context_no_mask), "it does not reach coverage_context"),
        (_loop(loss=loss_max), "if coverage_loss's own check (task 1) fails"),
        (_loop(update="replace"), "accumulate"),
    ):
        messages = [v.message for v in _verdicts("coverage_attention_steps", fn) if not v.passed]
        # with one step, max(a, 0) = a = min(a, a): two mistakes agree and the first is named
        named = [m for m in messages if "known mistake" in m and "(T = 1)" not in m]
        assert len(named) >= 2 and all(task in m for m in named), messages


def test_the_named_hints_teach_the_fix():
    messages = {
        label: next(v.message for v in _verdicts(name, fn) if not v.passed)
        for name, wrong in WRONG.items()
        for label, (fn, named) in wrong.items()
        if named
    }
    assert "t' < t" in messages["includes step t"]
    assert "flips the filter" in messages["correlation (filter not flipped)"]
    assert "'same' convolution" in messages["np.convolve full, first n"]
    assert "inside the tanh" in messages["coverage after tanh"]
    same = [v.message for v in _verdicts("location_aware_context", location_convolve_same)]
    assert any("outside the source read zeros" in m and "raised ValueError" in m for m in same)


# ----------------------------------------------------------------------------------------
# 3. the references pass their own cases


@pytest.mark.parametrize("name", list(WRONG))
def test_the_reference_passes_its_public_and_hidden_cases(name):
    reference = checks.REGISTRY[name].reference
    for seed in (None, 0, 1, 12345):
        assert all(v.passed for v in _verdicts(name, reference, seed)), name


# ----------------------------------------------------------------------------------------
# 4. issue 45's misleading hints, each with its exact message in both languages


STEPS_MASK = (
    "your weights ignore the mask: it does not reach coverage_context at some step (if "
    "coverage_context's own check, task 2, fails, fix that first)",
    "你的权重忽略了掩码：在某一步掩码没有传到 coverage_context（如果 coverage_context 自己的检查，"
    "即任务 2，没有通过，先修正它）",
)


def _loop_dropping_the_mask(s, h, w_s, w_h, w_c, v, mask=None):
    """A right coverage_context (task 2 passes), called without the mask."""
    coverage, rows = np.zeros(np.shape(h)[:2]), []
    for t in range(np.shape(s)[1]):
        _, a = answers.coverage_context(np.asarray(s)[:, t], h, coverage, w_s, w_h, w_c, v)
        rows.append(a)
        coverage = coverage + a
    weights = np.stack(rows, axis=1)
    return weights, answers.coverage_loss(weights)


def test_a_loop_that_drops_the_mask_is_not_told_to_fix_task_2():
    """Issue 45: a loop that does not pass the mask on was told "fix task 2 first" though
    task 2 passes. The hint now names the loop's cause, and says to fix coverage_context
    first only if its own check fails (the grader says so only where it does)."""
    assert all(
        v.passed
        for v in judging.run_cases(
            checks.spec("coverage_context"),
            answers.coverage_context,
            [
                checks.prepare("coverage_context", c)
                for c in checks.public_cases("coverage_context")
            ],
        )[0]
    )
    for language, hint, template in (
        ("en", STEPS_MASK[0], "case '{}': your result matches a known mistake: {}"),
        ("zh_CN", STEPS_MASK[1], "用例“{}”：你的结果与一个已知错误一致：{}"),
    ):
        failed = judged.failing(
            "coverage_attention_steps", _loop_dropping_the_mask, (0, 1), language
        )
        names = {"padding mask", "fully-masked row"}  # in the submission's language
        assert {v.case for v in failed if not v.hidden} == {
            checks.translated_hint(n, language, "ch3_seq2seq") for n in names
        }
        for v in failed:
            assert v.message == template.format(v.case, hint)


LOSS_VALUES = (
    "c_t = a_1 + ... + a_(t-1) (zero at the first step), then the sum of min(a_ti, c_ti) over "
    "t and i; a masked entry counts as weight 0",
    "c_t = a_1 + ... + a_(t-1)（第一步为零），然后对 t 和 i 求 min(a_ti, c_ti) 之和；被掩码遮住的项"
    "按权重 0 计",
)


def test_one_step_does_not_name_the_own_step_mistake_by_coincidence():
    """Issue 45: with one step (T = 1) max(a, 0) = a = min(a, a), so a loss taking the
    maximum was told "c_t sums the steps before t" there. That mistake is named only where
    every failing case agrees: the one-step case gets the check's own hint instead, and every
    other failing case names the maximum."""
    max_hint = (
        "the loss takes the minimum, min(a_ti, c_ti): it is large only where both the weight "
        "and the coverage are",
        "损失取最小值 min(a_ti, c_ti)：只有权重和覆盖都大的地方它才大",
    )
    zh_values = LOSS_VALUES[1]
    for language, values, mistake, hint_word, known in (
        ("en", LOSS_VALUES[0], max_hint[0], " Hint: ", "your result matches a known mistake: "),
        ("zh_CN", zh_values, max_hint[1], " 提示：", "你的结果与一个已知错误一致："),
    ):
        one_step = {
            checks.translated_hint(c.name, language, "ch3_seq2seq")
            for c in checks.public_cases("coverage_loss")
            if c.name.startswith("one step (T = 1)")
        }
        assert one_step
        for v in judged.failing("coverage_loss", loss_max, (0, 1), language):
            if v.case in one_step:
                assert v.message.endswith(hint_word + values), v.message
            else:
                assert v.message.endswith(known + mistake), v.message


def test_no_hint_of_the_chapter_prints_the_fix_as_code():
    """Issue 45, item 5: a hint names the cause and where to look, never the code to write
    (a call, an index expression, a line of the solution)."""
    code = ("np.where(", "np.repeat", "np.tile", "[:, None", "axis=-1)", " @ w_", "rowsum(", "`")
    code += ("dS = P", "dQ = dS", "dx_kv = ", "dW_o = M", "f = F *", "g_ijl = ", "_layer_norm(")
    for text in checks.hint_texts("ch3_seq2seq"):
        assert not any(c in text for c in code), text
