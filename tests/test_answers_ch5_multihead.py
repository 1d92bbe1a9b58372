"""The answer key of ``ch5_multihead`` against independent oracles, and the checks against the
wrong answers students write.

1. Each reference against PyTorch: autograd for the gates' derivatives and the backward
   pass, a per-head PyTorch forward for the gated output (and ``solutions.multihead`` at
   xi = 1), the arrays a backward pass keeps, built and measured, for the byte count.
2. A corpus of plausible wrong implementations per task, each judged by the real judge
   (``checks.prepare`` + ``contract.run_case`` + ``contract.judge``, as the grader) on the
   public cases and the hidden cases of two seeds: every one loses points, and the ones the
   plug-in knows are named by their hint.
3. The reference passes its own public and hidden cases.
"""

from __future__ import annotations

import math

import judged
import numpy as np
import pytest
import torch

from answers import ch5_multihead as answers
from autograder.chapters import ch5_multihead as plugin
from autograder.checking import checks
from solutions.conventions import masked_softmax

torch.set_default_dtype(torch.float64)

NAMES = (
    "gated_multihead_attention",
    "head_importance",
    "multihead_backward",
    "attention_backward_bytes",
)
HIDDEN_SEEDS = (1, 2)


# ----------------------------------------------------------------------------------------
# a PyTorch forward pass, head by head (the oracle's own code: a loop over heads, no reshapes)


def _torch_forward(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, gates, mask=None):
    d_model = w_q.shape[1]
    d_h = d_model // num_heads
    out = 0.0
    for h in range(num_heads):
        cols = slice(h * d_h, (h + 1) * d_h)
        q, k, v = x_q @ w_q[:, cols], x_kv @ w_k[:, cols], x_kv @ w_v[:, cols]
        scores = q @ k.transpose(-1, -2) / math.sqrt(d_h)
        if mask is not None:
            scores = scores.masked_fill(~mask, -torch.inf)
        weights = torch.nan_to_num(torch.softmax(scores, dim=-1))  # empty rows: 0
        out = out + gates[..., h, None, None] * (weights @ v) @ w_o[cols]
    return out


def _problem(rng, batch=(2,), n_q=3, n_kv=5, d_q=4, d_kv=6, d_model=12, d_out=7, h=3):
    x_q = rng.standard_normal((*batch, n_q, d_q))
    x_kv = rng.standard_normal((*batch, n_kv, d_kv))
    ws = (
        rng.standard_normal((d_q, d_model)),
        rng.standard_normal((d_kv, d_model)),
        rng.standard_normal((d_kv, d_model)),
        rng.standard_normal((d_model, d_out)) / math.sqrt(d_model),
    )
    mask = rng.random((*batch, n_q, n_kv)) < 0.7
    mask[..., 0, :] = False  # a query with no key
    grad = rng.standard_normal((*batch, n_q, d_out))
    return x_q, x_kv, ws, mask, grad


@pytest.mark.parametrize("batch", [(), (2,), (2, 3)])
def test_gated_output_matches_a_torch_loop_over_heads(batch):
    rng = np.random.default_rng(0)
    x_q, x_kv, ws, mask, _ = _problem(rng, batch)
    gates = rng.uniform(-1, 2, (*batch, 3))
    got = answers.gated_multihead_attention(x_q, x_kv, *ws, 3, gates, mask)
    t = [torch.from_numpy(a) for a in (x_q, x_kv, *ws, gates)]
    want = _torch_forward(*t[:6], 3, t[6], torch.from_numpy(mask)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_gates_of_one_are_the_chapters_multihead_attention_and_broadcast_over_the_batch():
    from solutions.multihead import multihead_attention

    rng = np.random.default_rng(1)
    x_q, x_kv, ws, mask, _ = _problem(rng)
    plain, _weights = multihead_attention(x_q, x_kv, *ws, 3, mask)
    ones = answers.gated_multihead_attention(x_q, x_kv, *ws, 3, np.ones(3), mask)
    np.testing.assert_allclose(ones, plain, rtol=1e-13, atol=1e-13)
    gates = rng.uniform(-1, 2, (4, 1, 3))  # (4, 1, h) against a batch of 2: (4, 2, n_q, d_out)
    out = answers.gated_multihead_attention(x_q, x_kv, *ws, 3, gates, mask)
    assert out.shape == (4, 2, 3, 7)
    for i in range(4):
        one = answers.gated_multihead_attention(x_q, x_kv, *ws, 3, gates[i, 0], mask)
        np.testing.assert_allclose(out[i], one, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("batch", [(), (4,), (2, 3)])
def test_head_importance_is_the_mean_absolute_autograd_derivative_in_the_gates(batch):
    rng = np.random.default_rng(2)
    x_q, x_kv, ws, mask, grad = _problem(rng, batch)
    t = [torch.from_numpy(a) for a in (x_q, x_kv, *ws)]
    gates = torch.ones((*batch, 3), requires_grad=True)  # one gate per example and head
    out = _torch_forward(*t, 3, gates, torch.from_numpy(mask))
    (out * torch.from_numpy(grad)).sum().backward()
    want = gates.grad.abs().reshape(-1, 3).mean(0).numpy()
    got = answers.head_importance(x_q, x_kv, *ws, 3, grad, mask)
    assert got.shape == (3,)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("batch", "h"), [((), 1), ((2,), 3), ((2, 3), 4)])
def test_multihead_backward_matches_torch_autograd(batch, h):
    rng = np.random.default_rng(3)
    x_q, x_kv, ws, mask, grad = _problem(rng, batch, h=h)
    t = [torch.from_numpy(a).requires_grad_() for a in (x_q, x_kv, *ws)]
    out = _torch_forward(*t, h, torch.ones(h), torch.from_numpy(mask))
    (out * torch.from_numpy(grad)).sum().backward()
    got = answers.multihead_backward(x_q, x_kv, *ws, h, grad, mask)
    for g, tensor in zip(got, t):
        assert g.shape == tensor.shape
        np.testing.assert_allclose(g, tensor.grad.numpy(), rtol=1e-11, atol=1e-11)


def test_multihead_backward_matches_torch_multi_head_attention_forward_in_self_attention():
    """Self-attention through PyTorch's own layer: x_q is x_kv, so autograd's gradient in x
    is the sum of ours in x_q and in x_kv (both paths add)."""
    import torch.nn.functional as F

    rng = np.random.default_rng(4)
    n, e, h = 5, 8, 2
    x = rng.standard_normal((n, e))
    ws = [rng.standard_normal((e, e)) / math.sqrt(e) for _ in range(4)]
    grad = rng.standard_normal((n, e))
    causal = np.tril(np.ones((n, n), dtype=bool))
    tx = torch.from_numpy(x).requires_grad_()
    tw = [torch.from_numpy(w).requires_grad_() for w in ws]
    out, _ = F.multi_head_attention_forward(
        tx[:, None],
        tx[:, None],
        tx[:, None],
        e,
        h,
        in_proj_weight=torch.cat([w.T for w in tw[:3]]),
        in_proj_bias=None,
        bias_k=None,
        bias_v=None,
        add_zero_attn=False,
        dropout_p=0.0,
        out_proj_weight=tw[3].T,
        out_proj_bias=None,
        attn_mask=torch.from_numpy(~causal),  # PyTorch: True = may not attend
        need_weights=False,
    )
    (out[:, 0] * torch.from_numpy(grad)).sum().backward()
    dx_q, dx_kv, *dw = answers.multihead_backward(x, x, *ws, h, grad, causal)
    np.testing.assert_allclose(dx_q + dx_kv, tx.grad.numpy(), rtol=1e-11, atol=1e-12)
    for g, w in zip(dw, tw):
        np.testing.assert_allclose(g, w.grad.numpy(), rtol=1e-11, atol=1e-12)


def test_masked_keys_and_empty_rows_get_no_gradient():
    rng = np.random.default_rng(5)
    x_q, x_kv, ws, mask, grad = _problem(rng, (1,))
    mask[:] = True
    mask[..., 2] = False  # key 2 is masked for every query
    mask[..., 1, :] = False  # query 1 sees nothing
    dx_q, dx_kv, dw_q, dw_k, dw_v, _ = answers.multihead_backward(x_q, x_kv, *ws, 3, grad, mask)
    assert np.all(dx_kv[..., 2, :] == 0) and np.all(dx_q[..., 1, :] == 0)


@pytest.mark.parametrize("recompute", [False, True])
@pytest.mark.parametrize(
    ("batch", "h", "n", "d_model", "itemsize"), [(2, 4, 6, 8, 4), (1, 1, 3, 2, 8)]
)
def test_backward_bytes_are_the_bytes_of_the_arrays_a_backward_pass_keeps(
    batch, h, n, d_model, itemsize, recompute
):
    """Build the arrays: Q, K, V, O (B, h, n, d_h) and P (B, h, n, n) or the logsumexp
    (B, h, n), at the given itemsize, from an actual forward pass, and add their nbytes."""
    dtype = {2: np.float16, 4: np.float32, 8: np.float64}[itemsize]
    rng = np.random.default_rng(6)
    d_h = d_model // h
    q, k, v = (rng.standard_normal((batch, h, n, d_h)).astype(dtype) for _ in range(3))
    scores = (q @ np.swapaxes(k, -1, -2) / math.sqrt(d_h)).astype(np.float64)
    weights = masked_softmax(scores)
    out = (weights @ v).astype(dtype)
    stats = np.log(np.exp(scores).sum(-1)).astype(dtype)  # (B, h, n)
    kept = [q, k, v, out, stats if recompute else weights.astype(dtype)]
    want = sum(a.nbytes for a in kept)
    got = answers.attention_backward_bytes(batch, h, n, d_model, itemsize, recompute)
    assert isinstance(got, int) and got == want


# ----------------------------------------------------------------------------------------
# the judge, as the grader runs it


@pytest.mark.parametrize("name", NAMES)
def test_the_reference_passes_its_public_and_hidden_cases(name):
    reference = checks.REGISTRY[name].reference
    for verdict in judged.verdicts(name, reference, HIDDEN_SEEDS):
        assert verdict.passed, verdict.message


# ----------------------------------------------------------------------------------------
# the corpus of wrong answers: (check, what the student did, function, named hint or None)


def _hint(name, start):
    """The plug-in's hint of ``name`` that starts with ``start`` (exactly one)."""
    (hint,) = [m.hint for m in checks.REGISTRY[name].mistakes if m.hint.startswith(start)]
    return hint


def _heads(x_q, x_kv, w_q, w_k, w_v, h, mask, scale=True, polarity=True, key_gates=None):
    """A student's forward pass: q, k, v and the heads (..., h, n, d_h)."""
    q, k, v = (
        answers._to_heads(np.asarray(x, float) @ w, h)
        for x, w in ((x_q, w_q), (x_kv, w_k), (x_kv, w_v))
    )
    if key_gates is not None:
        k = np.asarray(key_gates)[..., None, None] * k  # gates on the keys
    scores = q @ np.swapaxes(k, -1, -2) / (math.sqrt(q.shape[-1]) if scale else 1.0)
    if mask is not None:
        mask = np.expand_dims(mask if polarity else ~np.asarray(mask), -3)
    weights = masked_softmax(scores, mask)
    return q, k, v, weights, weights @ v


def _gated(x_q, x_kv, w_q, w_k, w_v, w_o, h, gates, mask=None, **wrong):
    *_, heads = _heads(x_q, x_kv, w_q, w_k, w_v, h, mask, **wrong)
    return answers._from_heads(np.asarray(gates)[..., None, None] * heads) @ w_o


def _gates_on_keys(x_q, x_kv, w_q, w_k, w_v, w_o, h, gates, mask=None):
    *_, heads = _heads(x_q, x_kv, w_q, w_k, w_v, h, mask, key_gates=gates)
    return answers._from_heads(heads) @ w_o


def _importance_by_norm(x_q, x_kv, w_q, w_k, w_v, w_o, h, grad, mask=None):
    """A magnitude heuristic instead of the derivative: mean ||head_h W_o^h|| over the batch."""
    *_, heads = _heads(x_q, x_kv, w_q, w_k, w_v, h, mask)
    blocks = np.asarray(w_o).reshape(h, -1, np.shape(w_o)[1])  # (h, d_h, d_out)
    norms = np.sqrt(((heads @ blocks) ** 2).sum(axis=(-2, -1)))  # (..., h)
    return norms.reshape(-1, h).mean(axis=0)


def _importance_mask_ignored(x_q, x_kv, w_q, w_k, w_v, w_o, h, grad, mask=None):
    return answers.head_importance(x_q, x_kv, w_q, w_k, w_v, w_o, h, grad, None)


def _backward_unshifted(*args, mask=None):
    """The reference's backward with a softmax that forgets the max shift."""
    x_q, x_kv, w_q, w_k, w_v = args[:5]
    h = args[6]
    q = answers._to_heads(np.asarray(x_q, float) @ w_q, h)
    k = answers._to_heads(np.asarray(x_kv, float) @ w_k, h)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    e = np.exp(scores)
    if mask is not None:
        e = np.where(np.expand_dims(mask, -3), e, 0.0)
    if not np.all(np.isfinite(e)):
        return tuple(np.full(np.shape(a), np.nan) for a in answers.multihead_backward(*args, mask))
    return answers.multihead_backward(*args, mask=mask)


def _backward_polarity(x_q, x_kv, w_q, w_k, w_v, w_o, h, grad, mask=None):
    flipped = None if mask is None else ~np.asarray(mask)
    return answers.multihead_backward(x_q, x_kv, w_q, w_k, w_v, w_o, h, grad, flipped)


def _backward_dx_kv_as_total(x_q, x_kv, w_q, w_k, w_v, w_o, h, grad, mask=None):
    """dx_q added into dx_kv wherever the shapes allow (self-attention thinking)."""
    dx_q, dx_kv, *rest = answers.multihead_backward(x_q, x_kv, w_q, w_k, w_v, w_o, h, grad, mask)
    if dx_q.shape == dx_kv.shape:
        dx_kv = dx_kv + dx_q
    return (dx_q, dx_kv, *rest)


def _backward_batch_mean(x_q, x_kv, w_q, w_k, w_v, w_o, h, grad, mask=None):
    """Weight gradients averaged over the batch instead of summed."""
    dx_q, dx_kv, *dw = answers.multihead_backward(x_q, x_kv, w_q, w_k, w_v, w_o, h, grad, mask)
    count = int(np.prod(np.shape(x_q)[:-2]))
    return (dx_q, dx_kv, *(d / count for d in dw))


def _bytes_no_itemsize(batch, h, n, d_model, itemsize, recompute):
    return answers.attention_backward_bytes(batch, h, n, d_model, 1, recompute)


def _bytes_both(batch, h, n, d_model, itemsize, recompute):
    """P and the logsumexp both kept, whatever ``recompute`` says."""
    return answers.attention_backward_bytes(batch, h, n, d_model, itemsize, False) + itemsize * (
        batch * h * n
    )


GATED, IMPORTANCE, BACKWARD, BYTES = NAMES
CORPUS = [
    # task 1
    (GATED, "np.tile for the gates", plugin._gates_tiled, "the gate of feature j"),
    (GATED, "gates after W_o", plugin._gates_after_output, "gate each head's output before"),
    (GATED, "gates on the scores", plugin._gates_on_scores, "the gate multiplies"),
    (GATED, "gates on the keys", _gates_on_keys, "the gate multiplies"),
    (GATED, "gates ignored", plugin._gates_ignored, "your output does not depend"),
    (GATED, "no 1/sqrt(d_h)", lambda *a, **k: _gated(*a, **k, scale=False), None),
    (GATED, "mask polarity flipped", lambda *a, **k: _gated(*a, **k, polarity=False), None),
    # task 2
    (
        IMPORTANCE,
        "no absolute value",
        plugin._importance_signed,
        "take the absolute value of each example's derivative:",
    ),
    (
        IMPORTANCE,
        "|mean|",
        plugin._importance_abs_after_mean,
        "take the absolute value of each example's derivative before",
    ),
    (IMPORTANCE, "summed over the batch", plugin._importance_summed, "average over the batch"),
    (IMPORTANCE, "|every term|", plugin._importance_abs_terms, "dL/dxi_h is one number"),
    (IMPORTANCE, "terms averaged", plugin._importance_mean_terms, "dL/dxi_h sums the products"),
    (IMPORTANCE, "norm of the head's output", _importance_by_norm, None),
    (IMPORTANCE, "mask ignored", _importance_mask_ignored, None),
    # task 3
    (BACKWARD, "no 1/sqrt(d_h)", plugin._backward_with(scaled=False), "the scores are divided"),
    (
        BACKWARD,
        "softmax without its row term",
        plugin._backward_with(row_term=False),
        "you kept only the diagonal",
    ),
    (
        BACKWARD,
        "dx_kv without dV",
        plugin._backward_with(value_path=False),
        "x_kv feeds the values",
    ),
    (BACKWARD, "dx_kv without dK", plugin._backward_with(key_path=False), "x_kv feeds the keys"),
    (BACKWARD, "split without the swap", plugin._backward_with(swap=False), "split the merged"),
    (
        BACKWARD,
        "mask not in the backward",
        plugin._backward_with(mask_backward=False),
        "use the masked weights",
    ),
    (
        BACKWARD,
        "dW_o transposed",
        plugin._backward_with(transpose_dw_o=True),
        "dW_o has the orientation",
    ),
    (BACKWARD, "softmax without the max shift", _backward_unshifted, None),
    (BACKWARD, "mask polarity flipped", _backward_polarity, None),
    (BACKWARD, "dx_q added into dx_kv", _backward_dx_kv_as_total, None),
    (BACKWARD, "weight gradients averaged over the batch", _backward_batch_mean, None),
    # task 4
    (BYTES, "heads forgotten", plugin._bytes_without_heads, "every head has its own"),
    (BYTES, "n instead of n^2", plugin._bytes_weights_per_query, "the weights are n x n"),
    (BYTES, "d_model per head", plugin._bytes_full_width_heads, "a head is d_model / h wide"),
    (BYTES, "O forgotten", plugin._bytes_without_output, "the backward pass reads the output"),
    (BYTES, "numbers, not bytes", _bytes_no_itemsize, None),
    (BYTES, "P and the logsumexp both", _bytes_both, None),
]


def _transposed_dw_o_anywhere(*args, **kwargs):
    """dW_o transposed whatever its shape (the cases with d_out != d_model see the shape)."""
    out = list(answers.multihead_backward(*args, **kwargs))
    out[-1] = out[-1].T
    return tuple(out)


CORPUS.append(
    (
        BACKWARD,
        "dW_o transposed, every shape",
        _transposed_dw_o_anywhere,
        "dW_o has the orientation",
    )
)


@pytest.mark.parametrize(
    ("name", "what", "fn", "hint"), CORPUS, ids=[f"{c[0]}: {c[1]}" for c in CORPUS]
)
def test_a_wrong_implementation_loses_points_and_a_known_one_is_named(name, what, fn, hint):
    failed = judged.failing(name, fn, HIDDEN_SEEDS)
    assert failed, f"{name}: '{what}' passed every public and hidden case"
    named = [v.message for v in failed if "known mistake" in v.message]
    if hint is None:
        return
    assert any(_hint(name, hint) in message for message in named), (what, failed[0].message)


def test_every_task_has_five_wrong_answers_and_three_named_mistakes():
    for name in NAMES:
        entries = [c for c in CORPUS if c[0] == name]
        assert len(entries) >= 5, name
        assert len({c[3] for c in entries if c[3]}) >= 3, name
        assert len(checks.REGISTRY[name].mistakes) >= 3, name


def test_a_transposed_dw_o_of_another_shape_gets_the_transpose_hint():
    case = [c for c in checks.public_cases(BACKWARD) if "d_out != d_model" in c.name][0]
    got = checks.normalise(checks.call(_transposed_dw_o_anywhere, case))
    verdict = checks.compare(BACKWARD, case, checks.expected(BACKWARD, case), got)
    assert not verdict.passed and "dW_o has the shape and orientation of W_o" in verdict.message


def test_importance_built_on_a_wrong_gated_function_is_told_apart():
    """A student may compute dL/dxi_h by linearity, <G, gated output with xi = e_h>, from
    their own task 1: with a wrong gate (np.tile) the importance fails too, and task 1's own
    check names the tiling, so the two checks together say which function is wrong."""

    def by_linearity(gated):
        def importance(x_q, x_kv, w_q, w_k, w_v, w_o, h, grad, mask=None):
            scores = []
            for i in range(h):
                one_hot = np.eye(h)[i]
                out = gated(x_q, x_kv, w_q, w_k, w_v, w_o, h, one_hot, mask)
                scores.append(np.abs((out * grad).sum(axis=(-2, -1))).mean())
            return np.array(scores)

        return importance

    assert all(
        v.passed
        for v in judged.verdicts(
            IMPORTANCE, by_linearity(answers.gated_multihead_attention), HIDDEN_SEEDS
        )
    )
    assert not all(
        v.passed
        for v in judged.verdicts(IMPORTANCE, by_linearity(plugin._gates_tiled), HIDDEN_SEEDS)
    )
    tiled = judged.failing(GATED, plugin._gates_tiled, HIDDEN_SEEDS)
    assert any(_hint(GATED, "the gate of feature j") in v.message for v in tiled)


def test_gating_the_weights_or_the_values_is_the_same_answer_and_passes():
    """xi_h P_h V_h = (xi_h P_h) V_h = P_h (xi_h V_h): a gate on a head's weights, or on its
    value columns, is the same computation, not a mistake; both pass every case."""

    def on_weights(x_q, x_kv, w_q, w_k, w_v, w_o, h, gates, mask=None):
        _q, _k, v, weights, _heads_out = _heads(x_q, x_kv, w_q, w_k, w_v, h, mask)
        gated = np.asarray(gates)[..., None, None] * weights  # (..., h, n_q, n_kv)
        return answers._from_heads(gated @ v) @ w_o

    def on_values(x_q, x_kv, w_q, w_k, w_v, w_o, h, gates, mask=None):
        d_h = np.shape(w_v)[1] // h
        column_gates = np.repeat(np.asarray(gates), d_h, axis=-1)[..., None, :]  # (..., 1, d)
        _q, _k, _v, weights, _heads_out = _heads(x_q, x_kv, w_q, w_k, w_v, h, mask)
        v = answers._to_heads(column_gates * (np.asarray(x_kv, float) @ w_v), h)
        return answers._from_heads(weights @ v) @ w_o

    for fn in (on_weights, on_values):
        assert all(v.passed for v in judged.verdicts(GATED, fn, HIDDEN_SEEDS)), fn.__name__


def test_no_hint_of_the_chapter_prints_the_fix_as_code():
    """Issue 45, item 5: a hint names the cause and where to look, never the code to write
    (a call, an index expression, a line of the solution)."""
    code = ("np.where(", "np.repeat", "np.tile", "[:, None", "axis=-1)", " @ w_", "rowsum(", "`")
    code += ("dS = P", "dQ = dS", "dx_kv = ", "dW_o = M", "f = F *", "g_ijl = ", "_layer_norm(")
    for text in checks.hint_texts("ch5_multihead"):
        assert not any(c in text for c in code), text
