"""solutions.multihead against torch.nn.MultiheadAttention, nn.TransformerEncoderLayer and
scaled_dot_product_attention (weights copied, float64), plus the properties chapter 5 uses:
head reshapes, parameter count, causality via gradients, KV-cache decoding, a trained toy model."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from solutions import shipped
from solutions.multihead import (
    KVCache,
    MultiHeadAttention,
    TinyTransformer,
    TransformerEncoderBlock,
    attention_maps,
    generate,
    generate_without_cache,
    make_toy_data,
    make_two_offset_data,
    merge_heads,
    multihead_attention,
    multihead_flops,
    multihead_param_count,
    offset_profile,
    sequence_accuracy,
    split_heads,
    train_two_offset_transformer,
    two_offset_accuracy,
)
from solutions.self_attention import causal_mask, padding_mask
from solutions.training import seeded


@pytest.fixture(autouse=True)
def _seeded_single_thread():
    """Every test here runs inside ``seeded(0)``: torch seeded, one thread, deterministic
    algorithms (``docs/conventions.md``), so neither load nor core count changes a result."""
    with seeded(0):
        yield


SETTINGS = settings(max_examples=30, deadline=None)


def t(a):
    return torch.from_numpy(np.ascontiguousarray(a))


def torch_mha(d_model, num_heads, bias, seed):
    torch.manual_seed(seed)
    mha = nn.MultiheadAttention(
        d_model, num_heads, bias=bias, batch_first=True, dtype=torch.float64
    )
    if bias:  # PyTorch initialises the biases to 0; make them matter
        with torch.no_grad():
            mha.in_proj_bias.normal_()
            mha.out_proj.bias.normal_()
    return mha.eval()


def numpy_weights_of(mha):
    """w_q, w_k, w_v, w_o for x @ w, read straight from PyTorch's parameters (x @ W^T)."""
    w = mha.in_proj_weight.detach().numpy()
    e = mha.embed_dim
    return w[:e].T, w[e : 2 * e].T, w[2 * e :].T, mha.out_proj.weight.detach().numpy().T


def random_mask(rng, shape):
    """Random True = may attend mask where every query row sees at least one key
    (PyTorch returns NaN for a row with nothing allowed)."""
    mask = rng.random(shape) < 0.5
    rows = mask.reshape(-1, shape[-1])
    rows[np.arange(rows.shape[0]), rng.integers(0, shape[-1], rows.shape[0])] = True
    return rows.reshape(shape)


# ----------------------------------------------------------------------------------------
# split_heads / merge_heads


@SETTINGS
@given(
    lead=st.lists(st.integers(1, 3), max_size=2),
    n=st.integers(1, 6),
    num_heads=st.integers(1, 4),
    d_head=st.integers(1, 4),
    seed=st.integers(0, 2**31),
)
def test_merge_heads_inverts_split_heads(lead, n, num_heads, d_head, seed):
    x = np.random.default_rng(seed).normal(size=tuple(lead) + (n, num_heads * d_head))
    heads = split_heads(x, num_heads)
    assert heads.shape == tuple(lead) + (num_heads, n, d_head)
    for i in range(num_heads):  # head i holds feature block i of every item
        np.testing.assert_array_equal(heads[..., i, :, :], x[..., i * d_head : (i + 1) * d_head])
    np.testing.assert_array_equal(merge_heads(heads), x)
    xt = t(x)
    assert torch.equal(merge_heads(split_heads(xt, num_heads)), xt)
    assert torch.equal(split_heads(xt, num_heads), t(heads))


def test_split_heads_rejects_width_not_divisible_by_heads():
    with pytest.raises(ValueError, match=r"\(2, 5, 6\).*num_heads = 4"):
        split_heads(np.zeros((2, 5, 6)), 4)


# ----------------------------------------------------------------------------------------
# multihead_attention vs PyTorch


@SETTINGS
@given(
    seed=st.integers(0, 2**31),
    batch=st.integers(1, 3),
    n_q=st.integers(1, 6),
    n_kv=st.integers(1, 7),
    heads_and_width=st.sampled_from([(1, 4), (2, 4), (4, 8), (3, 6), (8, 8)]),
    use_mask=st.booleans(),
)
def test_multihead_attention_matches_torch_multihead_attention(
    seed, batch, n_q, n_kv, heads_and_width, use_mask
):
    num_heads, d = heads_and_width
    rng = np.random.default_rng(seed)
    mha = torch_mha(d, num_heads, bias=False, seed=seed % 1000)
    x_q, x_kv = rng.normal(size=(batch, n_q, d)), rng.normal(size=(batch, n_kv, d))
    mask = random_mask(rng, (n_q, n_kv)) if use_mask else None
    out, weights = multihead_attention(x_q, x_kv, *numpy_weights_of(mha), num_heads, mask=mask)
    ref_out, ref_w = mha(
        t(x_q),
        t(x_kv),
        t(x_kv),
        attn_mask=None if mask is None else ~t(mask),  # PyTorch: True = may NOT attend
        need_weights=True,
        average_attn_weights=False,
    )
    assert weights.shape == (batch, num_heads, n_q, n_kv)
    np.testing.assert_allclose(out, ref_out.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights, ref_w.detach().numpy(), rtol=1e-10, atol=1e-14)


def test_multihead_attention_batch_mask_matches_torch_key_padding_mask():
    rng = np.random.default_rng(0)
    mha = torch_mha(8, 2, bias=False, seed=0)
    x = rng.normal(size=(3, 5, 8))
    lens = np.array([5, 2, 4])
    out, weights = multihead_attention(x, x, *numpy_weights_of(mha), 2, mask=padding_mask(lens, 5))
    key_padding = t(np.arange(5)[None, :] >= lens[:, None])  # True = padding = ignore
    ref_out, ref_w = mha(t(x), t(x), t(x), key_padding_mask=key_padding, average_attn_weights=False)
    np.testing.assert_allclose(out, ref_out.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights, ref_w.detach().numpy(), rtol=1e-10, atol=1e-14)
    assert np.all(weights[1, :, :, 2:] == 0.0)


@pytest.mark.parametrize("num_heads", [1, 2, 4])
def test_multihead_attention_matches_per_head_sdpa_with_causal_mask(num_heads):
    rng = np.random.default_rng(num_heads)
    b, n, d, d_out = 2, 7, 8, 5
    x = rng.normal(size=(b, n, d))
    w_q, w_k, w_v = (rng.normal(size=(d, d)) for _ in range(3))
    w_o = rng.normal(size=(d, d_out))
    out, _ = multihead_attention(x, x, w_q, w_k, w_v, w_o, num_heads, mask=causal_mask(n))

    def heads(w):  # (B, n, d) @ (d, d) -> (B, h, n, d/h) with torch reshapes
        return (t(x) @ t(w)).view(b, n, num_heads, d // num_heads).transpose(1, 2)

    o = F.scaled_dot_product_attention(
        heads(w_q), heads(w_k), heads(w_v), is_causal=True
    )  # (B, h, n, d_h)
    ref = o.transpose(1, 2).reshape(b, n, d) @ t(w_o)
    np.testing.assert_allclose(out, ref.numpy(), rtol=1e-10, atol=1e-12)


def test_multihead_weights_rows_sum_to_one_and_fully_masked_rows_are_zero():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 4, 6))
    ws = [rng.normal(size=(6, 6)) for _ in range(4)]
    mask = rng.random((2, 4, 4)) < 0.5
    mask[1, 3] = False
    out, weights = multihead_attention(x, x, *ws, 3, mask=mask)
    assert np.all(weights[np.broadcast_to(~mask[:, None], weights.shape)] == 0.0)
    rows = np.broadcast_to(mask.any(-1)[:, None], weights.shape[:-1])
    np.testing.assert_allclose(weights.sum(-1)[rows], 1.0, rtol=1e-12)
    assert np.all(out[1, 3] == 0.0) and np.all(np.isfinite(out))


def test_multihead_self_attention_is_permutation_equivariant():
    rng = np.random.default_rng(6)
    x = rng.normal(size=(5, 8))
    ws = [rng.normal(size=(8, 8)) for _ in range(4)]
    perm = rng.permutation(5)
    out, weights = multihead_attention(x, x, *ws, 4)
    out_p, weights_p = multihead_attention(x[perm], x[perm], *ws, 4)
    np.testing.assert_allclose(out_p, out[perm], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights_p, weights[:, perm][:, :, perm], rtol=1e-10, atol=1e-14)


def test_multihead_attention_errors_name_the_shapes():
    x = np.zeros((2, 5, 6))
    w = np.zeros((6, 6))
    with pytest.raises(ValueError, match=r"d_model = 6 is not divisible by num_heads = 4"):
        multihead_attention(x, x, w, w, w, w, 4)
    with pytest.raises(ValueError, match=r"w_k.*\(7, 6\)"):
        multihead_attention(x, x, w, np.zeros((7, 6)), w, w, 2)
    with pytest.raises(ValueError, match=r"w_o.*\(5, 6\)"):
        multihead_attention(x, x, w, w, w, np.zeros((5, 6)), 2)
    with pytest.raises(ValueError, match=r"\(2, 5, 5\).*\(4, 5\)"):
        multihead_attention(x, x, w, w, w, w, 2, mask=np.ones((4, 5), dtype=bool))


@pytest.mark.parametrize("d_model, num_heads", [(4, 1), (8, 2), (12, 3), (64, 8), (512, 8)])
@pytest.mark.parametrize("bias", [True, False])
def test_multihead_param_count_equals_torch(d_model, num_heads, bias):
    mha = nn.MultiheadAttention(d_model, num_heads, bias=bias)
    assert multihead_param_count(d_model, num_heads, bias=bias) == sum(
        p.numel() for p in mha.parameters()
    )
    assert multihead_param_count(d_model, num_heads, bias) == multihead_param_count(
        d_model, 1, bias
    )
    ours = MultiHeadAttention(d_model, num_heads, bias=bias)
    assert multihead_param_count(d_model, num_heads, bias) == sum(
        p.numel() for p in ours.parameters()
    )


@pytest.mark.parametrize(
    "n_q, n_kv, d_model, num_heads", [(5, 7, 16, 4), (1, 1, 8, 1), (9, 3, 12, 3)]
)
def test_multihead_flops_equal_torch_flop_counter_and_do_not_depend_on_heads(
    n_q, n_kv, d_model, num_heads
):
    from torch.utils.flop_counter import FlopCounterMode

    module = MultiHeadAttention(d_model, num_heads, bias=False)
    x_q, x_kv = torch.randn(2, n_q, d_model), torch.randn(2, n_kv, d_model)
    with FlopCounterMode(display=False) as counter:
        module(x_q, x_kv)
    assert counter.get_total_flops() == 2 * multihead_flops(
        n_q, n_kv, d_model, num_heads
    )  # batch of 2
    assert multihead_flops(n_q, n_kv, d_model, num_heads) == multihead_flops(n_q, n_kv, d_model, 1)


def test_module_accepts_numpy_masks():
    torch.manual_seed(1)
    module = MultiHeadAttention(8, 2).double()
    x = torch.randn(1, 4, 8, dtype=torch.float64)
    out_np, _ = module(x, mask=causal_mask(4))
    out_t, _ = module(x, mask=t(causal_mask(4)))
    assert torch.equal(out_np, out_t)


def test_multihead_param_count_rejects_indivisible_width():
    with pytest.raises(ValueError, match="divisible"):
        multihead_param_count(10, 3)


# ----------------------------------------------------------------------------------------
# torch modules


@pytest.mark.parametrize("bias", [True, False])
def test_module_from_torch_matches_torch_multihead_attention(bias):
    rng = np.random.default_rng(7)
    mha = torch_mha(12, 3, bias=bias, seed=1)
    ours = MultiHeadAttention.from_torch(mha)
    x_q, x_kv = t(rng.normal(size=(2, 4, 12))), t(rng.normal(size=(2, 6, 12)))
    mask = t(random_mask(rng, (4, 6)))
    out, weights = ours(x_q, x_kv, mask=mask)
    ref_out, ref_w = mha(x_q, x_kv, x_kv, attn_mask=~mask, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(weights, ref_w, rtol=1e-10, atol=1e-14)
    if not bias:
        np_out, np_w = multihead_attention(
            x_q.numpy(), x_kv.numpy(), *ours.numpy_weights(), 3, mask=mask.numpy()
        )
        np.testing.assert_allclose(np_out, out.detach().numpy(), rtol=1e-10, atol=1e-12)
    else:
        with pytest.raises(ValueError, match="bias=False"):
            ours.numpy_weights()


def test_module_fully_masked_row_is_zero_without_nan_in_gradients():
    torch.manual_seed(0)
    ours = MultiHeadAttention(8, 2).double()
    x = torch.randn(1, 3, 8, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[True, False, False], [False, False, False], [True, True, True]])
    out, weights = ours(x, mask=mask)
    assert torch.all(weights[:, :, 1] == 0)
    out.sum().backward()
    assert torch.isfinite(x.grad).all()


@pytest.mark.parametrize("norm_first", [True, False])
def test_block_from_torch_matches_transformer_encoder_layer(norm_first):
    torch.manual_seed(2)
    layer = nn.TransformerEncoderLayer(
        16,
        4,
        dim_feedforward=32,
        dropout=0.0,
        batch_first=True,
        norm_first=norm_first,
        dtype=torch.float64,
    ).eval()
    with torch.no_grad():
        layer.self_attn.in_proj_bias.normal_()
        layer.norm1.weight.normal_()
        layer.norm2.bias.normal_()
    block = TransformerEncoderBlock.from_torch(layer).eval()
    x = torch.randn(3, 5, 16, dtype=torch.float64)
    mask = t(causal_mask(5))
    out, _ = block(x, mask=mask)
    ref = layer(x, src_mask=~mask)  # PyTorch: True = may NOT attend
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)


# ----------------------------------------------------------------------------------------
# dropout: inactive in eval, PyTorch's random draws in a seeded training step, none at p = 0


def torch_encoder_layer(norm_first, dropout, dtype, seed=2):
    """``nn.TransformerEncoderLayer(16, 4, 32)`` with every parameter perturbed (the
    layer-norm gains and the zero-initialised biases too), so that all of them matter."""
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(
        16, 4, 32, dropout=dropout, batch_first=True, norm_first=norm_first, dtype=dtype
    )
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return layer


TOLERANCES = {
    torch.float64: dict(rtol=1e-12, atol=1e-12),
    torch.float32: dict(rtol=1e-5, atol=1e-6),
}


def in_proj_grad(mha: MultiHeadAttention):
    """Our q, k, v projections' weight gradients stacked as PyTorch's ``in_proj_weight``."""
    return torch.cat([p.weight.grad for p in (mha.q_proj, mha.k_proj, mha.v_proj)])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-LN", "post-LN"])
def test_encoder_block_with_dropout_equals_torch_layer_in_eval_mode(norm_first, dtype):
    layer = torch_encoder_layer(norm_first, 0.3, dtype).eval()
    block = TransformerEncoderBlock.from_torch(layer).eval()
    assert block.dropout.p == block.attn.dropout.p == block.ff[2].p == 0.3  # copied
    x = torch.randn(3, 5, 16, dtype=dtype)
    mask = t(causal_mask(5))
    # grad enabled: keeps PyTorch on its Python path (its fused inference kernel would
    # skip dropout just the same, with different rounding)
    ref = layer(x, src_mask=~mask)
    out, weights = block(x, mask=mask)
    torch.testing.assert_close(out, ref, **TOLERANCES[dtype])
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, 5, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-LN", "post-LN"])
def test_encoder_block_seeded_train_step_equals_torch_layer(norm_first, dtype):
    """Training mode, p = 0.3, the same seed before each forward: the same output and the
    same gradients as ``nn.TransformerEncoderLayer``, so every dropout (attention weights,
    the two residual branches, the feed-forward hidden layer) draws PyTorch's mask.

    One sequence (B = 1) on purpose: with B > 1 exact equality is impossible without
    copying a PyTorch memory layout. ``nn.MultiheadAttention.forward`` (batch_first=True)
    computes in (n, B, d) order and returns ``attn_output.transpose(1, 0)``, a view, and
    ``torch.nn.functional.dropout`` draws its Bernoulli mask in memory order
    (``at::dropout``: ``empty_like(input).bernoulli_``, strides preserved), so
    PyTorch's residual dropout on the attention output (``dropout1``) zeroes the entries
    of a (n, B, d) array while ours, on a contiguous (B, n, d) output, zeroes those of a
    (B, n, d) one. At B = 1 the two orders coincide. The parts that align at any B are
    tested in ``test_attention_dropout_draws_torch_mask_at_any_batch_size`` and
    ``test_feed_forward_dropout_draws_torch_mask_at_any_batch_size``.
    """
    layer = torch_encoder_layer(norm_first, 0.3, dtype).train()
    block = TransformerEncoderBlock.from_torch(layer).train()
    x = torch.randn(1, 6, 16, dtype=dtype)
    x_ours, x_ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    mask = t(causal_mask(6))
    torch.manual_seed(11)
    ref = layer(x_ref, src_mask=~mask)
    torch.manual_seed(11)
    out, _ = block(x_ours, mask=mask)
    eval_out, _ = block.eval()(x, mask=mask)
    assert (out - eval_out).abs().max() > 0.1  # dropout did act
    torch.testing.assert_close(out, ref, **TOLERANCES[dtype])
    weight = torch.randn_like(out)  # a loss whose gradient differs per entry
    (out * weight).sum().backward()
    (ref * weight).sum().backward()
    tol = {**TOLERANCES[dtype], "atol": 10 * TOLERANCES[dtype]["atol"]}
    torch.testing.assert_close(x_ours.grad, x_ref.grad, **tol)
    torch.testing.assert_close(in_proj_grad(block.attn), layer.self_attn.in_proj_weight.grad, **tol)
    torch.testing.assert_close(block.ff[0].weight.grad, layer.linear1.weight.grad, **tol)
    torch.testing.assert_close(block.norm1.weight.grad, layer.norm1.weight.grad, **tol)


@pytest.mark.parametrize("need_weights", [True, False])
def test_attention_dropout_draws_torch_mask_at_any_batch_size(need_weights):
    """Attention-weight dropout at B = 3, 3 heads, under a mask: the output and the input
    gradient of PyTorch's module, on both of its paths (need_weights=True drops the
    weights with ``F.dropout``, need_weights=False hands the rate to
    ``scaled_dot_product_attention``, whose CPU math kernel drops them the same way).
    PyTorch returns the weights after dropout; ours returns them before, and dropping them
    with the same seed gives PyTorch's."""
    rng = np.random.default_rng(3)
    torch.manual_seed(1)
    mha = nn.MultiheadAttention(12, 3, dropout=0.3, batch_first=True, dtype=torch.float64)
    ours = MultiHeadAttention.from_torch(mha).train()
    assert ours.dropout.p == 0.3
    x = t(rng.normal(size=(3, 5, 12)))
    mask = t(random_mask(rng, (5, 5)))
    x_ours, x_ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    torch.manual_seed(5)
    ref, ref_w = mha(
        x_ref, x_ref, x_ref, attn_mask=~mask, need_weights=need_weights, average_attn_weights=False
    )
    torch.manual_seed(5)
    out, weights = ours(x_ours, mask=mask)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    (out**2).sum().backward()
    (ref**2).sum().backward()
    torch.testing.assert_close(x_ours.grad, x_ref.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 3, 5, dtype=torch.float64))
    if need_weights:
        torch.manual_seed(5)
        dropped = F.dropout(weights, 0.3, training=True)
        assert (dropped == 0).any() and (ref_w == 0).any()
        torch.testing.assert_close(dropped, ref_w, rtol=1e-12, atol=1e-14)


def test_feed_forward_dropout_draws_torch_mask_at_any_batch_size():
    """The feed-forward sub-layer at B = 3: ours ``dropout(ff(x))`` (hidden and output
    dropout) against PyTorch's ``_ff_block`` (``dropout2(linear2(dropout(relu(linear1(x)))))``,
    a private method of ``nn.TransformerEncoderLayer``), contiguous (B, n, d) both."""
    layer = torch_encoder_layer(True, 0.3, torch.float64).train()
    block = TransformerEncoderBlock.from_torch(layer).train()
    x = torch.randn(3, 5, 16, dtype=torch.float64)
    torch.manual_seed(4)
    ref = layer._ff_block(x)
    torch.manual_seed(4)
    out = block.dropout(block.ff(x))
    assert (out == 0).float().mean() > 0.1  # the output dropout zeroed entries
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)


def test_dropout_zero_draws_no_random_numbers_in_training_mode():
    """p = 0 (the default everywhere): a training-mode forward and backward leave torch's
    random state as it was, so seeded results (the trained models of the book and of
    these tests) are bit-identical to those of the code before dropout was added."""
    model = TinyTransformer(11, d_model=16, num_heads=2, num_layers=2, d_ff=32).train()
    tokens = torch.randint(0, 11, (3, 9))
    before = torch.random.get_rng_state()
    logits, _ = model(tokens)
    logits.sum().backward()
    assert torch.equal(torch.random.get_rng_state(), before)
    block = TransformerEncoderBlock(16, 2, 32, dropout=0.1).train()
    block(torch.randn(2, 4, 16))
    assert not torch.equal(torch.random.get_rng_state(), before)  # p > 0 does draw


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5, float("nan"), True, "0.1", None])
def test_dropout_rate_outside_zero_one_is_refused(p):
    for build in (
        lambda: MultiHeadAttention(8, 2, dropout=p),
        lambda: TransformerEncoderBlock(8, 2, 16, dropout=p),
    ):
        with pytest.raises(ValueError, match=r"dropout rate p.*\[0, 1\)"):
            build()


def test_block_from_torch_refuses_a_layer_with_two_dropout_rates():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1)
    layer.dropout1.p = 0.2
    with pytest.raises(ValueError, match="one dropout rate"):
        TransformerEncoderBlock.from_torch(layer)


def test_causal_output_at_t_has_zero_gradient_wrt_later_inputs():
    torch.manual_seed(3)
    blocks = nn.ModuleList(TransformerEncoderBlock(8, 2, 16) for _ in range(2)).double()
    n = 6
    mask = t(causal_mask(n))
    for pos in range(n):
        x = torch.randn(2, n, 8, dtype=torch.float64, requires_grad=True)
        h = x
        for block in blocks:
            h, _ = block(h, mask=mask)
        h[:, pos].sum().backward()
        assert torch.all(x.grad[:, pos + 1 :] == 0)
        assert torch.all(x.grad[:, : pos + 1].abs().sum(-1) > 0)  # and it does use the past


def test_kv_cache_steps_equal_full_causal_attention():
    torch.manual_seed(4)
    mha = MultiHeadAttention(8, 4).double()
    x = torch.randn(2, 7, 8, dtype=torch.float64)
    full, full_w = mha(x, mask=t(causal_mask(7)))
    cache = KVCache()
    outs = []
    for pos in range(7):
        out, w = mha(x[:, pos : pos + 1], cache=cache)  # one new query sees all cached keys
        assert w.shape == (2, 4, 1, pos + 1) and len(cache) == pos + 1
        torch.testing.assert_close(w[:, :, 0], full_w[:, :, pos, : pos + 1], rtol=1e-12, atol=1e-14)
        outs.append(out)
    torch.testing.assert_close(torch.cat(outs, dim=1), full, rtol=1e-12, atol=1e-13)


def test_kv_cache_decoding_equals_recomputation():
    torch.manual_seed(5)
    model = TinyTransformer(11, d_model=16, num_heads=2, num_layers=2, d_ff=32, max_len=20).double()
    prompt = make_toy_data(4, length=5, seed=1)[:, :6]
    tokens, logits = generate(model, prompt, 9)
    tokens_ref, logits_ref = generate_without_cache(model, prompt, 9)
    assert tokens.shape == (4, 15) and torch.equal(tokens, tokens_ref)
    torch.testing.assert_close(logits, logits_ref, rtol=1e-10, atol=1e-12)


def test_tiny_transformer_rejects_sequences_longer_than_max_len():
    model = TinyTransformer(5, d_model=8, num_heads=2, num_layers=1, d_ff=8, max_len=4)
    with pytest.raises(ValueError, match="max_len = 4"):
        model(torch.zeros(1, 5, dtype=torch.long))


def test_make_toy_data_reverses_and_copies():
    rev = make_toy_data(10, length=4, seed=3)
    assert rev.shape == (10, 9) and torch.all(rev[:, 4] == 10)
    assert torch.equal(rev[:, 5:], rev[:, :4].flip(-1))
    copy = make_toy_data(10, length=4, seed=3, task="copy")
    assert torch.equal(copy[:, 5:], copy[:, :4])
    assert torch.equal(make_toy_data(10, length=4, seed=3), rev)  # seeded


# ----------------------------------------------------------------------------------------
# the chapter 5 demo: a trained toy transformer


@pytest.fixture(scope="module")
def reversal_model():
    """The recipe of the shipped model ``ch5_reverse`` (``train_toy_transformer(task=
    "reverse", length=8, seed=0)``), retrained on the machine the tests run on: it must
    meet what chapter 5 states for a run of it, not equal the shipped weights."""
    return shipped.RECIPES["ch5_reverse"].train()


@pytest.mark.slow
def test_toy_transformer_learns_to_reverse(reversal_model):
    """Measured under the 6 CPU settings (ATEN_CPU_CAPABILITY avx512 / avx2 / default x
    MKL_CBWR unset / COMPATIBLE): the recipe (seed 0) ends at last / first loss 0.00012 -
    0.00014, held-out exact match and token accuracy 1.000 in every setting; over training
    seeds 0-19 in all 6 settings (120 runs) the worst are 0.0020, exact match 0.982 and
    token accuracy 0.9975. Thresholds 0.1, 0.95 and 0.98: margins 0.098, 0.032 and 0.0175
    from the worst of the 120 runs."""
    model, history = reversal_model
    assert len(history["loss"]) == 400
    assert history["loss"][-1] < 0.1 * history["loss"][0]
    held_out = make_toy_data(500, length=8, seed=2024)
    token_acc, exact = sequence_accuracy(model, held_out, 8)
    assert exact >= 0.95 and token_acc >= 0.98


@pytest.mark.slow
def test_toy_transformer_attention_maps_are_causal_and_a_head_looks_at_the_mirror(reversal_model):
    """The strongest head's mean weight on the mirror position: measured 0.916 - 0.953 for
    the recipe (seed 0) under the 6 CPU settings, 0.908 - 0.989 over training seeds 0-19
    in all of them (120 runs). Threshold 0.5: margin 0.41 below the worst run."""
    model, _ = reversal_model
    L = 8
    seq = make_toy_data(1, length=L, seed=7)[0, :-1]  # (2L,)
    maps = attention_maps(model, seq)
    assert maps.shape == (2, 4, 2 * L, 2 * L)
    np.testing.assert_allclose(maps.sum(-1), 1.0, rtol=1e-5)
    assert np.all(maps[..., ~causal_mask(2 * L)] == 0.0)
    # the query predicting y_{i+1} = x_{L-i} sits at index L + i; its source is index L - 1 - i
    mirror = np.mean([maps[:, :, L + i, L - 1 - i] for i in range(L)], axis=0)  # (layers, heads)
    assert mirror.max() > 0.5


# ----------------------------------------------------------------------------------------
# the chapter 5 demo: two heads, two offsets, one head each


def test_make_two_offset_data_answers_the_ordered_pair_at_both_offsets():
    x, y = make_two_offset_data(20, length=9, offsets=(2, 5), num_symbols=7, seed=4)
    assert x.shape == y.shape == (20, 9) and x.dtype == y.dtype == torch.int64
    assert torch.all(y[:, :5] == -100)
    for t_ in range(5, 9):
        assert torch.equal(y[:, t_], 7 * x[:, t_ - 2] + x[:, t_ - 5])
    swapped = make_two_offset_data(20, length=9, offsets=(5, 2), num_symbols=7, seed=4)[1]
    assert not torch.equal(swapped, y)  # the order of the pair matters
    assert torch.equal(
        make_two_offset_data(20, length=9, offsets=(2, 5), num_symbols=7, seed=4)[0], x
    )


@pytest.mark.parametrize("offsets", [(2, 2), (0, 3), (2, 9), (1,)])
def test_make_two_offset_data_rejects_bad_offsets(offsets):
    with pytest.raises(ValueError, match="offsets"):
        make_two_offset_data(3, length=9, offsets=offsets)


def test_offset_profile_averages_the_weights_on_each_diagonal():
    torch.manual_seed(0)
    model = TinyTransformer(6, d_model=8, num_heads=2, num_layers=2, d_ff=8, max_len=7)
    tokens = torch.randint(0, 6, (3, 7))
    profile = offset_profile(model, tokens, max_offset=3)
    maps = np.stack([attention_maps(model, s) for s in tokens])  # (N, layers, h, n, n)
    expected = np.zeros((2, 2, 4))
    for k in range(4):
        expected[..., k] = np.mean([maps[:, :, :, q, q - k] for q in range(3, 7)], axis=(0, 1))
    assert profile.shape == (2, 2, 4)
    np.testing.assert_allclose(profile, expected, rtol=1e-6)


@pytest.mark.slow
def test_two_heads_specialise_one_per_offset_in_most_seeds():
    """Seeds 0-2 of the two-offset recipe (``train_two_offset_transformer``, 1500 steps),
    retrained on the machine the tests run on: at least 2 of the 3 learn the task with one
    head per offset. Measured under the 6 CPU settings (ATEN_CPU_CAPABILITY avx512 / avx2
    / default x MKL_CBWR unset / COMPATIBLE), seeds 0-19: 19 of 20 learn it in every
    setting (held-out accuracy 1.000, per-head peak weight 0.926 - 0.988); the run that
    does not stays at accuracy 0.128 - 0.130 with both heads on offset 2. Seeds 0-2 learn
    in all 6 settings: 3 of 3, so the bound 2 leaves one seed of margin (a failure rate
    of 1 in 20 fails this test with probability about 0.007); the per-run thresholds 0.99
    and 0.8 leave 0.01 and 0.126 below the worst run that learns."""
    offsets = (2, 5)
    tokens, targets = make_two_offset_data(500, length=12, offsets=offsets, seed=2024)
    runs = {}
    for seed in range(3):
        model, _ = train_two_offset_transformer(offsets=offsets, seed=seed)
        accuracy = two_offset_accuracy(model, tokens, targets)
        profile = offset_profile(model, tokens, max_offset=6)[0]  # (h, 7): the one layer
        runs[seed] = (accuracy, profile.argmax(-1).tolist(), profile.max(-1))
    learned = [
        seed
        for seed, (accuracy, dominant, peak) in runs.items()
        if accuracy >= 0.99
        and sorted(dominant) == sorted(offsets)  # two different heads, one per offset
        and np.all(peak >= 0.8)  # and each a sharp diagonal
    ]
    assert len(learned) >= 2, runs
