"""What the online backward's statement requires is checked (issue 45, item 3).

- "Only a (..., n_q, block_size) block of weights may exist at a time": a hidden case whose
  whole score matrix is larger than the memory the trusted side gives the run (the chapter's
  sandbox limit, ``budgets.resolve``), so a method that forms it fails that case, in the
  sandbox, with a message that says why; the blocked reference passes it and stays far under
  the cap (measured with tracemalloc, which counts NumPy's arrays). Its keys take a few
  distinct random rows, so the trusted side answers it in closed form, never over n x n
  scores: the closed forms are the blocked reference and scale (to 1e-12), the case is each
  seed's own, and blocked implementations with a mistake still fail it.
- "mask boolean, broadcastable to (..., n_q, n_k)": the reference takes every broadcastable
  mask, whatever the block size (an (n_q, 1) mask raised ValueError when block_size < n_k).
"""

from __future__ import annotations

import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402

import autograder.chapters  # noqa: E402, F401 - registers the chapters
from answers import ch4_self_attention as answers  # noqa: E402
from autograder.chapters import ch4_self_attention as plugin  # noqa: E402
from autograder.checking import checks, judging  # noqa: E402
from autograder.sandbox import budgets  # noqa: E402

NAME = "online_softmax_backward"
MEMORY_CASE = "the whole score matrix would not fit the grader's memory"


def _memory_case(seed: int):
    found = [c for c in checks.hidden_cases(NAME, seed) if MEMORY_CASE in c.name]
    assert len(found) == 1, [c.name for c in checks.hidden_cases(NAME, seed)]
    return found[0]


def test_the_memory_case_is_hidden_and_larger_than_the_runs_memory():
    cap = budgets.resolve(checks.chapter("ch4_self_attention")).memory_bytes
    case = _memory_case(3)
    q, k = case.args[0], case.args[1]
    whole = q.shape[-2] * k.shape[-2] * 8  # the float64 (n_q, n_k) scores
    assert whole > cap, (whole, cap)
    assert case.args[6] < k.shape[-2]  # several blocks
    assert not any(MEMORY_CASE in c.name for c in checks.public_cases(NAME))


def test_the_blocked_reference_passes_the_memory_case_within_half_the_cap():
    cap = budgets.resolve(checks.chapter("ch4_self_attention")).memory_bytes
    prepared = checks.prepare(NAME, _memory_case(5), hidden=True)
    assert prepared.mistakes == ()  # judged against the reference alone (checks.Plain)
    args, kwargs = prepared.fresh()
    tracemalloc.start()
    try:
        got = answers.online_softmax_backward(*args, **kwargs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < cap / 2, (peak, cap)  # about 0.29 of it (2026-12-06)
    verdicts, _ = judging.run_cases(checks.spec(NAME), lambda *a, **k: got, [prepared])
    assert verdicts[0].passed, verdicts[0].message


def _inputs(rng, batch=(), n_q=5, n_k=7, d=3, d_v=2):
    q = rng.standard_normal((*batch, n_q, d))
    k = rng.standard_normal((*batch, n_k, d))
    v = rng.standard_normal((*batch, n_k, d_v))
    return q, k, v, rng.standard_normal((*batch, n_q, d_v))


@pytest.mark.parametrize(
    ("batch", "mask_shape"),
    [
        ((), (5, 1)),
        ((), (1, 7)),
        ((), (7,)),
        ((2, 3), (5, 1)),
        ((2, 3), (2, 1, 1, 7)),
        ((2, 3), (2, 3, 5, 1)),
    ],
)
@pytest.mark.parametrize("block_size", [1, 3, 7, 64])
def test_the_reference_takes_every_broadcastable_mask(batch, mask_shape, block_size):
    rng = np.random.default_rng(len(mask_shape) * 10 + block_size)
    q, k, v, d_out = _inputs(rng, batch)
    mask = rng.random(mask_shape) < 0.7
    mask.flat[0] = False  # a masked query row (or key) in every shape
    whole = np.broadcast_to(mask, (*batch, 5, 7)).copy()  # the same mask, written out
    out, lse = answers.attention_forward(q, k, v, whole)
    got = answers.online_softmax_backward(q, k, v, out, lse, d_out, block_size, mask)
    want = answers.online_softmax_backward(q, k, v, out, lse, d_out, 64, whole)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


FULL_MATRIX = """

def online_softmax_backward(q, k, v, out, logsumexp, grad_out, block_size=128, mask=None):
    # the whole (n_q, n_k) matrix at once: block_size ignored
    q, k, v, out, grad_out = (np.asarray(a, dtype=float) for a in (q, k, v, out, grad_out))
    c = 1.0 / np.sqrt(q.shape[-1])
    s = c * (q @ np.swapaxes(k, -1, -2))
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    lse = np.asarray(logsumexp, dtype=float)
    p = np.exp(s - np.where(np.isfinite(lse), lse, 0.0)[..., None])
    ds = p * (grad_out @ np.swapaxes(v, -1, -2) - np.sum(grad_out * out, -1, keepdims=True))
    return c * (ds @ k), c * (np.swapaxes(ds, -1, -2) @ q), np.swapaxes(p, -1, -2) @ grad_out
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_full_matrix_backward_loses_its_points_in_the_sandbox(tmp_path, bubblewrap):
    """Graded as the grader grades: the full-matrix method passes every public case (they
    are small) and fails the memory case, told why; the solution keeps every point."""
    from autograder import grading

    a = "ch4_self_attention"
    course = corpus.released_course(tmp_path / "course", (a,))
    good = corpus.solved(course, a)
    corpus.write_submission(course, a, "blocked", good)
    full = corpus.append_to_cell(good, "online-softmax-backward", FULL_MATRIX)
    corpus.write_submission(course, a, "full-matrix", full)
    out = grading.grade_assignment(course, a, workers=1)
    results = {r.student: r for r in out.graded}
    blocked = {t.grade_id: t for t in results["blocked"].tasks}
    assert blocked["test-online-softmax-backward"].passed
    tasks = {t.grade_id: t for t in results["full-matrix"].tasks}
    task = tasks["test-online-softmax-backward"]
    assert (task.points, task.passed) == (0.0, False)
    assert MEMORY_CASE in task.message, task.message
    assert "block_size at a time" in task.message or "memory" in task.message, task.message
    others = [t for g, t in tasks.items() if g != "test-online-softmax-backward"]
    assert all(t.passed for t in others), [(t.grade_id, t.message) for t in others]


def test_the_memory_case_is_named_for_its_cap():
    """The plug-in derives the case's size from the cap it declares (``MEMORY``)."""
    assert plugin.BIG_N**2 * 8 >= plugin.MEMORY_FACTOR * plugin.MEMORY > plugin.MEMORY


# --------------------------------------------------------------------------------------
# the memory case in closed form: its keys take plugin.MEMORY_GROUPS distinct rows, so the
# trusted side has its forward, answer and scale in O(n d^2) (hidden-case preparation of a
# ch4 student took about 3 s for this one case, blocked over the n x n scores)


def _grouped_inputs(rng, n, groups, d=2, d_v=2):
    rows = rng.standard_normal((groups, d))
    k = rows[rng.permutation(np.arange(n) % groups)]
    q, v = rng.standard_normal((n, d)), rng.standard_normal((n, d_v))
    return q, k, v, rng.standard_normal((n, d_v))


@pytest.mark.parametrize(
    ("n", "groups", "d", "d_v", "block"),
    [(300, 3, 2, 2, 64), (1000, 3, 2, 2, 256), (1000, 1, 4, 3, 128), (700, 3, 5, 3, 100)],
)
def test_the_closed_forms_are_the_blocked_reference_and_scale(n, groups, d, d_v, block):
    """``_grouped_forward`` is the forward pass, ``_grouped_backward`` the reference's answer
    (to 1e-12 of the scale, where dQ cancels to rounding, exactly 0 for one group) and
    ``_grouped_scale`` the blockwise ``_backward_scale``, the same sums (1e-12 relative: the
    tolerance of the memory case is neither looser nor stricter than the other cases')."""
    rng = np.random.default_rng(n + groups)
    q, k, v, d_out = _grouped_inputs(rng, n, groups, d, d_v)
    out, lse = plugin._grouped_forward(q, k, v)
    want_out, want_lse = answers.attention_forward(q, k, v)
    np.testing.assert_allclose(out, want_out, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-12)
    args = (q, k, v, out, lse, d_out, block)
    scale = plugin._backward_scale(*args)
    for got, want in zip(plugin._grouped_scale(*args), scale, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    reference = answers.online_softmax_backward(*args)
    for got, want, size in zip(plugin._grouped_backward(*args), reference, scale, strict=True):
        assert np.all(np.abs(got - want) <= 1e-12 * size), np.max(np.abs(got - want) / size)
        assert got.shape == want.shape


def test_preparing_the_memory_case_never_computes_its_n_by_n_scores(monkeypatch):
    """The trusted side answers the memory case in closed form: while it is prepared, the
    scores computed (``answers._scaled_scores``, which the reference and the blockwise scale
    compute block by block, n_q x n_k entries each) number a few per query, not n_k per query;
    its answer and scale are the closed forms'. A small case still goes through the
    reference."""
    formed = []
    scores = answers._scaled_scores

    def counted(q, k, mask):
        s = scores(q, k, mask)
        formed.append(s.size)
        return s

    case = _memory_case(11)
    n_q, n_k = case.args[0].shape[0], case.args[1].shape[0]
    monkeypatch.setattr(answers, "_scaled_scores", counted)
    prepared = checks.prepare(NAME, case, hidden=True)
    assert 0 < sum(formed) <= 4 * n_q * plugin.MEMORY_GROUPS, (sum(formed), n_q * n_k)
    args, kwargs = prepared.fresh()
    for got, want in zip(prepared.expected, plugin._grouped_backward(*args, **kwargs)):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(prepared.expected.scale, plugin._grouped_scale(*args, **kwargs)):
        np.testing.assert_array_equal(got, want)
    formed.clear()
    small = next(c for c in checks.hidden_cases(NAME, 11) if MEMORY_CASE not in c.name)
    checks.prepare(NAME, small, hidden=True)
    q, k = small.args[0], small.args[1]
    assert sum(formed) >= 2 * q.shape[-2] * k.shape[-2]  # the reference's and the scale's


def test_the_memory_case_is_each_students_own():
    """Its inputs come from the hidden seed (nothing of them is in the source): two seeds
    give different keys, queries, values and dO; its keys take MEMORY_GROUPS rows, each used,
    and its O and L are the closed-form forward pass of its inputs."""
    one, two = _memory_case(1), _memory_case(2)
    for a, b in zip(one.args[:6], two.args[:6]):
        assert not np.allclose(a, b)
    q, k, v, out, lse = one.args[:5]
    rows, counts = np.unique(k, axis=0, return_counts=True)
    assert len(rows) == plugin.MEMORY_GROUPS and counts.min() >= len(k) // len(rows)
    want_out, want_lse = plugin._grouped_forward(q, k, v)
    np.testing.assert_array_equal(out, want_out)
    np.testing.assert_array_equal(lse, want_lse)


def _blocked_wrong(kind):
    """A memory-efficient backward with one mistake (the known mistakes' recomputation forms
    the whole matrix; these take blocks, as a student's would)."""

    def backward(q, k, v, out, logsumexp, d_out, block_size=128, mask=None):
        c = 1.0 / np.sqrt(q.shape[-1])
        lse = logsumexp[:, None]
        delta = (d_out * out).sum(-1, keepdims=True)
        dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
        for start in range(0, k.shape[0], block_size):
            keys = slice(start, start + block_size)
            kb = k[: k[keys].shape[0]] if kind == "first block's keys" else k[keys]
            p = np.exp(c * q @ kb.T - lse)
            if kind == "block-local softmax":
                p = p / p.sum(-1, keepdims=True)
            dv[keys] = p.T @ d_out
            ds = p * (d_out @ v[keys].T - (0 if kind == "no D" else delta))
            dq += ds @ kb * (1 if kind == "no 1/sqrt(d)" else c)
            dk[keys] = ds.T @ q * (1 if kind == "no 1/sqrt(d)" else c)
        return (-dq if kind == "dq negated" else dq), dk, dv

    return backward


@pytest.mark.parametrize(
    "kind",
    ["first block's keys", "block-local softmax", "no D", "no 1/sqrt(d)", "dq negated", None],
)
def test_the_grouped_keys_still_tell_memory_efficient_mistakes_apart(kind):
    """On a case built as the memory case (grouped keys, a short last block) but small
    enough for the test, blocked implementations with a mistake fail against the closed
    form and the check's tolerance; the correct one (None) passes. (With one group, dQ = 0
    exactly, and a negated dq would pass.)"""
    rng = np.random.default_rng(4)
    q, k, v, d_out = _grouped_inputs(rng, 1000, plugin.MEMORY_GROUPS)
    out, lse = plugin._grouped_forward(q, k, v)
    case = checks.prepare(NAME, checks.Plain("grouped", (q, k, v, out, lse, d_out, 256, None)))
    spec = checks.spec(NAME)
    verdicts, _ = judging.run_cases(spec, _blocked_wrong(kind), [case])
    assert verdicts[0].passed is (kind is None), verdicts[0].message
