"""The answer key of ch4_self_attention against independent oracles, and its checks against
what students really get wrong.

1. Each reference of ``answers/ch4_self_attention.py`` against an oracle written apart from
   it: loops over (i, j) for the mask, the recursion of the ALiBi paper's code for the slopes,
   PyTorch for ALiBi attention and for T5's buckets (plus values worked out by hand), and
   PyTorch autograd of plain attention for the backward pass (float64).
2. A corpus of plausible wrong implementations per task, each judged by the real judge on the
   public and hidden cases: every one loses points, and the listed ones get their named hint.
3. Every reference passes its own public and hidden cases.
"""

from __future__ import annotations

import math

import judged
import numpy as np
import pytest
import torch

from answers import ch4_self_attention as ans
from autograder.chapters import ch4_self_attention as plugin
from autograder.checking import checks
from solutions.conventions import masked_softmax

NAMES = (
    "window_global_mask",
    "alibi_slopes",
    "alibi_attention",
    "relative_position_bucket",
    "online_softmax_backward",
)
SEEDS = (1, 2, 3, 17, 123)


# ----------------------------------------------------------------------------------------
# 1. oracles


def test_window_global_mask_against_a_loop():
    for n, w, g in [(8, 1, [0]), (10, 2, [7, 3]), (5, 0, []), (4, 9, [1]), (1, 0, [0])]:
        want = np.array([[abs(i - j) <= w or i in g or j in g for j in range(n)] for i in range(n)])
        got = ans.window_global_mask(n, w, np.array(g, dtype=int))
        assert got.dtype == bool and np.array_equal(got, want)


def _paper_slopes(n):
    """ALiBi's slopes as the paper's code computes them (get_slopes, Press et al. 2022)."""

    def power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + _paper_slopes(2 * closest)[0::2][: n - closest]


@pytest.mark.parametrize("heads", [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 24])
def test_alibi_slopes_against_the_papers_recursion(heads):
    np.testing.assert_allclose(ans.alibi_slopes(heads), _paper_slopes(heads), rtol=1e-14)


def test_alibi_slopes_by_hand():
    assert ans.alibi_slopes(8).tolist() == [2.0**-h for h in range(1, 9)]
    assert ans.alibi_slopes(3).tolist() == [2**-4, 2**-8, 2**-2]


def _torch_alibi(q, k, v, slopes, mask):
    q, k, v = (torch.tensor(a, dtype=torch.float64) for a in (q, k, v))
    n = q.shape[-2]
    pos = torch.arange(n, dtype=torch.float64)
    bias = -torch.tensor(slopes)[:, None, None] * (pos[:, None] - pos[None, :]).abs()
    s = torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(q.shape[-1]) + bias
    if mask is not None:
        allowed = torch.broadcast_to(torch.tensor(mask), s.shape)
        s = s.masked_fill(~allowed, -torch.inf)
        w = torch.nan_to_num(torch.softmax(s, -1), nan=0.0)  # an empty row: zeros
    else:
        w = torch.softmax(s, -1)
    return (w @ v).numpy(), w.numpy()


@pytest.mark.parametrize("seed", SEEDS)
def test_alibi_attention_against_torch(seed):
    for case in checks.hidden_cases("alibi_attention", seed):
        out, w = ans.alibi_attention(*case.args)
        want_out, want_w = _torch_alibi(*case.args)
        np.testing.assert_allclose(out, want_out, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(w, want_w, rtol=1e-10, atol=1e-12)


def test_alibi_with_zero_slopes_is_plain_attention_and_is_the_papers_causal_bias():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((3, 6, 4)) for _ in range(3))
    causal = plugin._causal(6)
    plain = masked_softmax(q @ np.swapaxes(k, -1, -2) / 2, causal) @ v
    np.testing.assert_allclose(ans.alibi_attention(q, k, v, np.zeros(3), causal)[0], plain)
    # under a causal mask the page's -m|i - j| is the paper's -m (i - j)
    i, j = np.arange(6)[:, None], np.arange(6)[None, :]
    m = ans.alibi_slopes(3)[:, None, None]
    paper = masked_softmax(q @ np.swapaxes(k, -1, -2) / 2 - m * (i - j), causal) @ v
    np.testing.assert_allclose(ans.alibi_attention(q, k, v, ans.alibi_slopes(3), causal)[0], paper)


def _torch_bucket(rel, bidirectional, num_buckets, max_distance):
    """T5's _relative_position_bucket, written from the paper's description with torch ops
    (float64, as the reference)."""
    rel = torch.tensor(rel, dtype=torch.long)
    buckets = torch.zeros_like(rel)
    if bidirectional:
        num_buckets //= 2
        buckets += (rel > 0).long() * num_buckets
        rel = rel.abs()
    else:
        rel = -torch.minimum(rel, torch.zeros_like(rel))
    max_exact = num_buckets // 2
    is_small = rel < max_exact
    large = (
        max_exact
        + (
            torch.log(rel.double() / max_exact)
            / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)
        ).long()
    )
    large = torch.minimum(large, torch.full_like(large, num_buckets - 1))
    return (buckets + torch.where(is_small, rel, large)).numpy()


@pytest.mark.parametrize("seed", SEEDS)
def test_relative_position_bucket_against_torch(seed):
    for case in [*checks.public_cases("relative_position_bucket")] + checks.hidden_cases(
        "relative_position_bucket", seed
    ):
        np.testing.assert_array_equal(
            ans.relative_position_bucket(*case.args), _torch_bucket(*case.args)
        )


def test_relative_position_bucket_by_hand():
    # T5's defaults: 32 buckets, max distance 128, bidirectional: B = 16, E = 8
    rel = np.array([0, -1, -7, -8, -10, -12, -127, -500, 1, 7, 8, 11, 500])
    # -10: 8 + floor(log(10/8) / log(16) * 8) = 8 + floor(0.64) = 8; -12: 8 + floor(1.17) = 9;
    # 11: 16 + 8 + floor(0.92) = 24
    want = [0, 1, 7, 8, 8, 9, 15, 15, 17, 23, 24, 24, 31]
    assert ans.relative_position_bucket(rel, True, 32, 128).tolist() == want
    # unidirectional, 16 buckets, max distance 64: E = 8; the future is bucket 0
    rel = np.array([3, 0, -3, -8, -11, -14, -63, -64, -1000])
    # -11: 8 + floor(log(11/8) / log(8) * 8) = 8 + floor(1.22) = 9
    assert ans.relative_position_bucket(rel, False, 16, 64).tolist() == [
        0,
        0,
        3,
        8,
        9,
        10,
        15,
        15,
        15,
    ]


def test_bucket_cases_stay_far_from_the_floors_boundaries():
    """No case puts a log bucket within 1e-6 of an integer: log, log2 or a ratio of logs
    then all floor alike (T5's own 32 buckets / 128 do not: r = 16 is exactly on one)."""
    assert plugin.boundary_distance(True, 32, 128, 200) < 1e-12
    for seed in range(40):
        for case in checks.hidden_cases("relative_position_bucket", seed):
            rel, bi, nb, md = case.args
            largest = int(np.abs(rel).max())
            assert plugin.boundary_distance(bi, nb, md, largest) > 1e-6


def _torch_backward(q, k, v, d_out, mask):
    q, k, v = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (q, k, v))
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~torch.broadcast_to(torch.tensor(mask), s.shape), -torch.inf)
    lse = torch.logsumexp(s, -1)
    w = torch.where(torch.isfinite(lse)[..., None], torch.softmax(s, -1), 0.0)
    out = w @ v
    (out * torch.tensor(d_out)).sum().backward()
    return (
        out.detach().numpy(),
        lse.detach().numpy(),
        q.grad.numpy(),
        k.grad.numpy(),
        v.grad.numpy(),
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_online_softmax_backward_against_torch_autograd(seed):
    for case in checks.hidden_cases("online_softmax_backward", seed):
        if isinstance(case, checks.Plain):  # its values: tests/test_online_backward_memory.py
            continue
        q, k, v, out, lse, d_out, block, mask = case.args
        t_out, t_lse, dq, dk, dv = _torch_backward(q, k, v, d_out, mask)
        np.testing.assert_allclose(out, t_out, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(lse, t_lse, rtol=1e-12)
        got = ans.online_softmax_backward(*case.args)
        for g, want in zip(got, (dq, dk, dv)):
            np.testing.assert_allclose(g, want, rtol=1e-8, atol=1e-10)


def test_online_softmax_backward_against_a_finite_difference():
    rng = np.random.default_rng(5)
    q, k, v = rng.standard_normal((4, 3)), rng.standard_normal((7, 3)), rng.standard_normal((7, 2))
    d_out = rng.standard_normal((4, 2))

    def loss(q, k, v):
        return float((ans.attention_forward(q, k, v)[0] * d_out).sum())

    out, lse = ans.attention_forward(q, k, v)
    grads = ans.online_softmax_backward(q, k, v, out, lse, d_out, block_size=3)
    for which, (arg, grad) in enumerate(zip((q, k, v), grads)):
        for idx in np.ndindex(arg.shape):
            args = [q, k, v]
            plus, minus = (a.copy() for a in (arg, arg))
            plus[idx] += 1e-6
            minus[idx] -= 1e-6
            args[which] = plus
            up = loss(*args)
            args[which] = minus
            assert abs((up - loss(*args)) / 2e-6 - grad[idx]) < 1e-7


def test_the_backward_of_a_fully_masked_query_is_zero_without_warnings():
    q, k, v = np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 2))
    mask = np.ones((3, 4), dtype=bool)
    mask[1] = False
    out, lse = ans.attention_forward(q, k, v, mask)
    assert lse[1] == -np.inf and np.all(out[1] == 0)
    with np.errstate(all="raise"):
        dq, _dk, _dv = ans.online_softmax_backward(q, k, v, out, lse, np.ones((3, 2)), 2, mask)
    assert np.all(dq[1] == 0)


# ----------------------------------------------------------------------------------------
# 2. what students get wrong


def _mistake(name, start):
    """The hint of the check's mistake whose text starts with ``start``."""
    (hint,) = [m.hint for m in checks.REGISTRY[name].mistakes if m.hint.startswith(start)]
    return hint


def _i_j(n):
    return np.arange(n)[:, None], np.arange(n)[None, :]


def _window(rows=True, cols=True, band="<="):
    def fn(n, window, global_positions):
        i, j = _i_j(n)
        is_global = np.isin(np.arange(n), global_positions)
        m = {
            "<=": abs(i - j) <= window,
            "<": abs(i - j) < window,
            "causal": (j <= i) & (i - j <= window),
            "+1": abs(i - j) <= window + 1,
        }[band]
        if rows:
            m = m | is_global[:, None]
        if cols:
            m = m | is_global[None, :]
        return m

    return fn


def _slopes_wrong(kind):
    def fn(h):
        if kind == "from zero":
            return 2.0 ** (-8.0 * np.arange(h) / h)
        if kind == "no interleave":
            return 2.0 ** (-8.0 * np.arange(1, h + 1) / h)
        if kind == "increasing":
            return 2.0 ** (-8.0 * np.arange(h, 0, -1) / h)
        if kind == "halving":
            return 2.0 ** -np.arange(1.0, h + 1)
        return 2.0 ** (-8.0 / h) * np.ones(h)  # one slope for all heads

    return fn


def _alibi_wrong(kind):
    def fn(q, k, v, slopes, mask=None):
        q, k, v = (np.asarray(a, float) for a in (q, k, v))
        n, d = q.shape[-2:]
        i, j = _i_j(n)
        m = np.asarray(slopes, float)[:, None, None]
        s = q @ np.swapaxes(k, -1, -2) / math.sqrt(d)
        bias = {
            "plus": m * abs(i - j),
            "signed": -m * (i - j),
            "keys axis": -np.asarray(slopes, float) * abs(i - j),
            "scaled bias": -m * abs(i - j) / math.sqrt(d),
            "squared": -m * (i - j) ** 2,
        }.get(kind, -m * abs(i - j))
        if kind == "after softmax":
            w = masked_softmax(s, mask) + bias
        elif kind == "unscaled":
            w = masked_softmax(s * math.sqrt(d) + bias, mask)
        elif kind == "unshifted":
            e = np.exp(s + bias) if mask is None else np.where(mask, np.exp(s + bias), 0.0)
            w = e / e.sum(-1, keepdims=True)
        else:
            w = masked_softmax(s + bias, mask)
        return w @ v, w

    return fn


def _bucket_wrong(kind):
    def fn(rel, bidirectional, num_buckets, max_distance):
        rel = np.asarray(rel)
        if kind == "query minus memory":
            rel = -rel
        b, base = num_buckets, np.zeros(rel.shape, int)
        if bidirectional:
            b = b if kind == "no halving" else b // 2
            if kind != "no offset":
                base = np.where(rel > 0, b, 0)
            r = np.abs(rel)
        else:
            r = np.abs(rel) if kind == "abs" else -np.minimum(rel, 0)
        e = b // 2
        with np.errstate(divide="ignore"):
            x = np.log(np.maximum(r, 1) / e) / math.log(max_distance / e) * (b - e)
        x = {"ceil": np.ceil(x), "round": np.round(x)}.get(kind, np.floor(x))
        large = e + x
        if kind != "no clip":
            large = np.minimum(large, b - 1)
        small = r <= e if kind == "small <=" else r < e
        if kind == "log2 of distance":
            large = np.minimum(e + np.floor(np.log2(np.maximum(r, 1) / e)), b - 1)
        return (base + np.where(small, r, large)).astype(int)

    return fn


def _backward_wrong(kind):
    def fn(q, k, v, out, lse, d_out, block_size=128, mask=None):
        q, k, v, out, d_out = (np.asarray(a, float) for a in (q, k, v, out, d_out))
        d = q.shape[-1]
        s = q @ np.swapaxes(k, -1, -2) / math.sqrt(d)
        if mask is not None:
            s = np.where(mask, s, -np.inf)
        if kind == "unnormalised":
            p = np.exp(s)
        elif kind == "naive lse":  # exp(s - L) with L = -inf: NaN in an empty row
            p = np.exp(s - np.asarray(lse)[..., None])
        elif kind == "softmax of the block":
            p = np.concatenate(
                [
                    masked_softmax(s[..., a : a + block_size])
                    for a in range(0, s.shape[-1], block_size)
                ],
                -1,
            )
        else:
            p = np.exp(s - np.where(np.isfinite(lse), lse, 0)[..., None])
        if kind == "drop the tail":
            p[..., s.shape[-1] - s.shape[-1] % block_size :] = 0
        dp = d_out @ np.swapaxes(v, -1, -2)
        D = {
            "D from dO": d_out.sum(-1, keepdims=True),
            "no D": 0.0,
            "D from P": (p * dp).sum(-1, keepdims=True) * 0.5,
        }.get(kind, (d_out * out).sum(-1, keepdims=True))
        ds = p * (dp - D)
        c = 1.0 if kind == "no scale" else 1 / math.sqrt(d)
        dq = ds @ k * c
        dk = np.swapaxes(ds, -1, -2) @ q * c
        if kind == "dk from P":
            dk = np.swapaxes(p, -1, -2) @ q * c
        return dq, dk, np.swapaxes(p, -1, -2) @ d_out

    return fn


# (check, wrong implementation, the start of the hint it must get, or None: loses points only)
CORPUS = [
    ("window_global_mask", _window(cols=False), "a global token attends"),
    ("window_global_mask", _window(rows=False), "every position attends"),
    ("window_global_mask", _window(band="<"), "the band includes"),
    ("window_global_mask", _window(band="causal"), "the window is symmetric"),
    ("window_global_mask", _window(band="+1"), None),
    ("window_global_mask", _window(rows=False, cols=False), None),
    ("window_global_mask", lambda n, w, g: _window()(n, w, g).astype(int), None),
    ("alibi_slopes", _slopes_wrong("from zero"), "the heads are numbered"),
    ("alibi_slopes", _slopes_wrong("no interleave"), "you used the power-of-two sequence"),
    ("alibi_slopes", _slopes_wrong("increasing"), "the slopes fall"),
    ("alibi_slopes", _slopes_wrong("halving"), None),
    ("alibi_slopes", _slopes_wrong("constant"), None),
    ("alibi_attention", _alibi_wrong("plus"), "ALiBi is a penalty"),
    (
        "alibi_attention",
        _alibi_wrong("signed"),
        "the penalty grows with the distance |i - j| on both sides of the query, not with the signed offset i - j",
    ),
    ("alibi_attention", _alibi_wrong("keys axis"), "one slope per head"),
    ("alibi_attention", _alibi_wrong("after softmax"), "add the bias to the scores before"),
    ("alibi_attention", _alibi_wrong("scaled bias"), "only q k^T is divided"),
    ("alibi_attention", _alibi_wrong("unscaled"), "you forgot to divide"),
    ("alibi_attention", _alibi_wrong("squared"), None),
    ("alibi_attention", _alibi_wrong("unshifted"), None),
    (
        "relative_position_bucket",
        _bucket_wrong("query minus memory"),
        "relative_position is memory minus query",
    ),
    ("relative_position_bucket", _bucket_wrong("no offset"), "bidirectional: keys after the query"),
    ("relative_position_bucket", _bucket_wrong("no halving"), "bidirectional: each half"),
    ("relative_position_bucket", _bucket_wrong("no clip"), "clip the logarithmic bucket"),
    ("relative_position_bucket", _bucket_wrong("ceil"), "round the logarithmic bucket down"),
    ("relative_position_bucket", _bucket_wrong("abs"), "unidirectional: a key after the query"),
    ("relative_position_bucket", _bucket_wrong("round"), None),
    ("relative_position_bucket", _bucket_wrong("log2 of distance"), None),
    ("online_softmax_backward", _backward_wrong("D from dO"), "D_i is not a function of dO alone"),
    ("online_softmax_backward", _backward_wrong("no D"), "you left out D"),
    ("online_softmax_backward", _backward_wrong("no scale"), "you forgot the 1/sqrt(d)"),
    ("online_softmax_backward", _backward_wrong("unnormalised"), "your weights are not normalised"),
    (
        "online_softmax_backward",
        _backward_wrong("softmax of the block"),
        "normalise P with the logsumexp",
    ),
    ("online_softmax_backward", _backward_wrong("drop the tail"), "the last block of keys"),
    ("online_softmax_backward", _backward_wrong("naive lse"), None),
    ("online_softmax_backward", _backward_wrong("D from P"), None),
    ("online_softmax_backward", _backward_wrong("dk from P"), None),
]


@pytest.mark.parametrize(
    ("name", "wrong", "hint"), CORPUS, ids=[f"{c[0]}-{i}" for i, c in enumerate(CORPUS)]
)
def test_a_wrong_implementation_loses_points_and_a_known_one_is_named(name, wrong, hint):
    failures = [v.message for v in judged.failing(name, wrong, SEEDS, plain=False)]
    assert failures, f"a wrong {name} passes every case"
    if hint is not None:
        named = "your result matches a known mistake: " + _mistake(name, hint)
        assert any(named in f for f in failures), failures[:3]


def test_the_corpus_has_five_wrong_implementations_and_three_named_mistakes_per_task():
    for name in NAMES:
        rows = [c for c in CORPUS if c[0] == name]
        assert len(rows) >= 5 and sum(c[2] is not None for c in rows) >= 3, name
        assert len(checks.REGISTRY[name].mistakes) >= 3


def test_the_empty_row_of_the_backward_gets_the_nan_hint():
    failures = [
        v.message
        for v in judged.failing(
            "online_softmax_backward", _backward_wrong("naive lse"), SEEDS, plain=False
        )
    ]
    assert any("contains NaN" in f and "logsumexp -inf" in f for f in failures)


# ----------------------------------------------------------------------------------------
# 3. the references pass their own cases


@pytest.mark.parametrize("name", NAMES)
def test_the_reference_passes_its_public_and_hidden_cases(name):
    assert judged.failing(name, checks.REGISTRY[name].reference, SEEDS, plain=False) == []


# ----------------------------------------------------------------------------------------
# 4. issue 45's misleading hints, each with its exact message in both languages

SLOPES_VALUES = (
    "the slopes form one geometric sequence only when H is a power of two; for any other H "
    "they are built from the sequences of two powers of two (the ALiBi task's statement): "
    "compare your slopes for the failing H with that construction",
    "只有当 H 是 2 的幂时，斜率才构成一个等比数列；其他 H 的斜率由两个 2 的幂的数列拼成（见 ALiBi "
    "任务的说明）：把你在出错的 H 上的斜率与这个构造对照",
)


def _slopes_first_of_the_next_power(h):
    """Right for a power of two; otherwise the first H slopes of 2P heads (P < H < 2P)."""
    if h & (h - 1) == 0:
        return ans._power_of_two_slopes(h)
    return ans._power_of_two_slopes(2 * (1 << (h.bit_length() - 1)))[:h]


def test_slopes_wrong_only_off_the_powers_of_two_are_not_shown_the_power_of_two_formula():
    """Issue 45: wrong slopes for H not a power of two were told the power-of-two formula,
    the case that passed. The values hint now names the cause for both kinds of H and prints
    no formula."""
    name = "alibi_slopes"
    for language, hint, word in (
        ("en", SLOPES_VALUES[0], " Hint: "),
        ("zh_CN", SLOPES_VALUES[1], " 提示："),
    ):
        failed = judged.failing(name, _slopes_first_of_the_next_power, SEEDS, language)
        names = {"H=6, not a power of two", "random H, not a power of two"}
        assert {v.case for v in failed} == {  # in the submission's language
            checks.translated_hint(n, language, "ch4_self_attention") for n in names
        }
        for v in failed:
            assert v.message.endswith(word + hint), v.message
            assert "2^(-8h/H)" not in v.message


def test_no_hint_of_the_chapter_prints_the_fix_as_code():
    """Issue 45, item 5: a hint names the cause and where to look, never the code to write."""
    for text in checks.hint_texts("ch4_self_attention"):
        for code in ("rowsum", "dS = P", "[:, None", "(H, 1, 1)", "2^(-8h/H)", "D_i = dO"):
            assert code not in text, text
