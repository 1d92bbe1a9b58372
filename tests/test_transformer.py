"""solutions.transformer against independent oracles: nn.Transformer and nn.MultiheadAttention
with the weights copied (float64, pre-LN and post-LN), F.cross_entropy's label smoothing,
exhaustive search for beam search, decoding without a cache; and a trained model."""

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from solutions import shipped
from solutions.multihead import MultiHeadAttention, TransformerEncoderBlock
from solutions.self_attention import causal_mask, padding_mask, sinusoidal_positions
from solutions.transformer import (
    EncoderDecoder,
    TransformerDecoderBlock,
    Translator,
    beam_search,
    beam_translate,
    cross_attention,
    decoder_block,
    decoder_mask,
    decoder_step,
    evaluate_translator,
    greedy_decode,
    greedy_decode_steps,
    greedy_decode_without_cache,
    head_ablation,
    joint_ablation,
    label_smoothed_cross_entropy,
    label_smoothed_loss,
    noam_rate,
    resolution_choices,
    resolution_margins,
    score_resolution,
    sequence_log_prob,
    shift_right,
    teacher_forced_loss,
    train_translator,
)
from solutions.zh_en import BOS, EOS, PAD, SOURCE_VOCAB, TARGET_VOCAB, encode_batch, make_pairs


def t(a):
    return torch.from_numpy(np.ascontiguousarray(a))


# ----------------------------------------------------------------------------------------
# cross-attention and the decoder mask


@pytest.mark.parametrize("num_heads", [1, 4])
def test_cross_attention_matches_torch_multihead_attention_with_queries_from_the_decoder(num_heads):
    torch.manual_seed(0)
    d, n_tgt, n_src = 8, 5, 7
    mha = nn.MultiheadAttention(d, num_heads, bias=False, batch_first=True, dtype=torch.float64)
    w_q, w_k, w_v, w_o = MultiHeadAttention.from_torch(mha).numpy_weights()
    rng = np.random.default_rng(1)
    y, memory = rng.standard_normal((2, n_tgt, d)), rng.standard_normal((2, n_src, d))
    src_mask = padding_mask(np.array([7, 3]), n_src)  # (2, 1, n_src)
    out, weights = cross_attention(y, memory, w_q, w_k, w_v, w_o, num_heads, src_mask)
    with torch.no_grad():
        ref, ref_w = mha(
            t(y),
            t(memory),
            t(memory),
            key_padding_mask=t(~src_mask[:, 0]),
            average_attn_weights=False,
        )
    assert out.shape == (2, n_tgt, d) and weights.shape == (2, num_heads, n_tgt, n_src)
    np.testing.assert_allclose(out, ref.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights, ref_w.numpy(), rtol=1e-10, atol=1e-12)
    assert (weights[1, ..., 3:] == 0).all()  # the padded source words get nothing
    # queries from the encoder instead: a different answer, of the wrong shape
    wrong, _ = cross_attention(memory, y, w_q, w_k, w_v, w_o, num_heads)
    assert wrong.shape == (2, n_src, d)


def test_decoder_mask_is_causal_and_hides_target_padding():
    lens = np.array([4, 2, 0])
    mask = decoder_mask(lens, 4)
    assert mask.shape == (3, 4, 4) and mask.dtype == bool
    for b, n in enumerate(lens):
        for i, j in itertools.product(range(4), range(4)):
            assert mask[b, i, j] == (j <= i and j < n)


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-LN", "post-LN"])
def test_encoder_decoder_matches_nn_transformer_with_copied_weights(norm_first):
    torch.manual_seed(0)
    d, h, layers = 16, 4, 2
    ref_model = nn.Transformer(
        d,
        h,
        layers,
        layers,
        32,
        dropout=0.0,
        batch_first=True,
        norm_first=norm_first,
        dtype=torch.float64,
    )
    for p in ref_model.parameters():  # make the layer-norm gains and all biases matter
        with torch.no_grad():
            p.add_(0.1 * torch.randn_like(p))
    ours = EncoderDecoder.from_torch(ref_model)
    src, tgt = torch.randn(3, 7, d, dtype=torch.float64), torch.randn(3, 5, d, dtype=torch.float64)
    src_lens, tgt_lens = np.array([7, 4, 2]), np.array([5, 3, 1])
    src_mask = padding_mask(src_lens, 7)  # (3, 1, 7), True = may attend
    ref_model.train()  # no dropout; keeps PyTorch off its nested-tensor fast path
    with torch.no_grad():
        ref = ref_model(
            src,
            tgt,
            tgt_mask=t(~causal_mask(5)),
            src_key_padding_mask=t(~src_mask[:, 0]),
            tgt_key_padding_mask=t(~padding_mask(tgt_lens, 5)[:, 0]),
            memory_key_padding_mask=t(~src_mask[:, 0]),
        )
        memory, _ = ours.encode(src, t(src_mask))
        out, _, _ = ours.decode(tgt, memory, t(decoder_mask(tgt_lens, 5)), t(src_mask))
    # every row, the padded target positions included: there the causal AND padding mask
    # leaves each query its real keys only, exactly PyTorch's tgt_key_padding_mask
    assert (tgt_lens < 5).any()
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------------------
# dropout: inactive in eval, PyTorch's random draws in a seeded training step, none at p = 0

TOLERANCES = {
    torch.float64: dict(rtol=1e-12, atol=1e-12),
    torch.float32: dict(rtol=1e-5, atol=1e-6),
}


def perturbed_transformer(norm_first, dropout, dtype, seed=0):
    """``nn.Transformer(16, 4, 2, 2, 32)`` with every parameter perturbed (layer-norm
    gains and biases included), so that all of them matter."""
    torch.manual_seed(seed)
    model = nn.Transformer(
        16, 4, 2, 2, 32, dropout=dropout, batch_first=True, norm_first=norm_first, dtype=dtype
    )
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model


def run_torch(model, src, tgt, src_lens, tgt_lens):
    """``nn.Transformer`` on src (B, n_src, d), tgt (B, n_tgt, d) under the causal mask and
    the padding masks of the valid lengths (PyTorch's polarity: True = may NOT attend)."""
    src_pad = t(~padding_mask(src_lens, src.shape[1])[:, 0])  # (B, n_src)
    return model(
        src,
        tgt,
        tgt_mask=t(~causal_mask(tgt.shape[1])),
        src_key_padding_mask=src_pad,
        tgt_key_padding_mask=t(~padding_mask(tgt_lens, tgt.shape[1])[:, 0]),
        memory_key_padding_mask=src_pad,
    )


def run_ours(model, src, tgt, src_lens, tgt_lens):
    """Our ``EncoderDecoder`` on the inputs and masks of ``run_torch`` (True = may attend)."""
    src_mask = t(padding_mask(src_lens, src.shape[1]))  # (B, 1, n_src)
    memory, _ = model.encode(src, src_mask)
    out, _, _ = model.decode(tgt, memory, t(decoder_mask(tgt_lens, tgt.shape[1])), src_mask)
    return out


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-LN", "post-LN"])
@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")  # pre-LN: a speed note
def test_encoder_decoder_with_dropout_equals_nn_transformer_in_eval_mode(norm_first, dtype):
    ref_model = perturbed_transformer(norm_first, 0.3, dtype).eval()
    ref_model.encoder.use_nested_tensor = False  # keep padded rows: compare every row
    ours = EncoderDecoder.from_torch(ref_model).eval()
    rates = {m.p for m in ours.modules() if isinstance(m, nn.Dropout)}
    assert rates == {0.3}  # every block's rate copied
    src, tgt = torch.randn(3, 7, 16, dtype=dtype), torch.randn(3, 5, 16, dtype=dtype)
    # grad enabled: PyTorch stays on its Python path (its fused inference kernels skip
    # dropout too, with other rounding)
    lens = np.array([7, 4, 2]), np.array([5, 3, 1])
    out, ref = run_ours(ours, src, tgt, *lens), run_torch(ref_model, src, tgt, *lens)
    torch.testing.assert_close(out, ref, **TOLERANCES[dtype])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-LN", "post-LN"])
@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")  # pre-LN: a speed note
def test_encoder_decoder_seeded_train_step_equals_nn_transformer(norm_first, dtype):
    """Training mode, p = 0.3, the same seed before each forward: ours and
    ``nn.Transformer`` give the same output and the same gradients, so all 20 dropout
    calls of two encoder and two decoder layers (attention weights, residual branches,
    feed-forward hidden layers) draw the same masks in the same order.

    One sentence pair (B = 1): at B > 1 exact equality is impossible, because
    ``nn.MultiheadAttention.forward`` returns its output as ``attn_output.transpose(1, 0)``,
    a view of (n, B, d) memory, and ``torch.nn.functional.dropout`` draws its mask in
    memory order, so PyTorch's residual dropout after each attention zeroes other entries
    than ours on a contiguous (B, n, d) output (see
    ``tests/test_multihead.py::test_encoder_block_seeded_train_step_equals_torch_layer``).
    Padding is still exercised: the source has 2 padded positions.
    """
    ref_model = perturbed_transformer(norm_first, 0.3, dtype).train()
    ours = EncoderDecoder.from_torch(ref_model).train()
    src, tgt = torch.randn(1, 7, 16, dtype=dtype), torch.randn(1, 5, 16, dtype=dtype)
    inputs = {name: (src.clone().requires_grad_(), tgt.clone().requires_grad_()) for name in "or"}
    lens = np.array([5]), np.array([5])
    torch.manual_seed(11)
    ref = run_torch(ref_model, *inputs["r"], *lens)
    torch.manual_seed(11)
    out = run_ours(ours, *inputs["o"], *lens)
    torch.manual_seed(12)
    other_seed = run_ours(ours, src, tgt, *lens)
    assert (out - other_seed).abs().max() > 0.1  # the output depends on the draw
    torch.testing.assert_close(out, ref, **TOLERANCES[dtype])
    weight = torch.randn_like(out)
    (out * weight).sum().backward()
    (ref * weight).sum().backward()
    tol = {**TOLERANCES[dtype], "atol": 10 * TOLERANCES[dtype]["atol"]}
    for mine, theirs in zip(inputs["o"], inputs["r"]):  # gradients of source and target
        torch.testing.assert_close(mine.grad, theirs.grad, **tol)
    first, theirs = ours.encoder[0], ref_model.encoder.layers[0]
    torch.testing.assert_close(first.ff[0].weight.grad, theirs.linear1.weight.grad, **tol)
    cross, theirs = ours.decoder[1].cross_attn, ref_model.decoder.layers[1].multihead_attn
    in_proj = torch.cat([p.weight.grad for p in (cross.q_proj, cross.k_proj, cross.v_proj)])
    torch.testing.assert_close(in_proj, theirs.in_proj_weight.grad, **tol)


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-LN", "post-LN"])
def test_decoder_block_seeded_train_step_equals_torch_layer(norm_first):
    """``nn.TransformerDecoderLayer`` in training mode, p = 0.3, float64, B = 1 (why one
    sequence: see the encoder-decoder test above): the six dropout calls (self-attention
    weights and output, cross-attention weights and output, feed-forward hidden layer and
    output) draw PyTorch's masks; in eval mode the same block equals the layer at B = 3."""
    torch.manual_seed(0)
    layer = nn.TransformerDecoderLayer(
        16, 4, 32, dropout=0.3, batch_first=True, norm_first=norm_first, dtype=torch.float64
    )
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(0.1 * torch.randn_like(p))
    block = TransformerDecoderBlock.from_torch(layer)
    assert {m.p for m in block.modules() if isinstance(m, nn.Dropout)} == {0.3}
    for batch in (1, 3):
        y = torch.randn(batch, 5, 16, dtype=torch.float64, requires_grad=True)
        memory = torch.randn(batch, 7, 16, dtype=torch.float64)
        src_mask = padding_mask(np.array([7, 4, 2][:batch]), 7)  # (B, 1, 7)
        self_mask = t(causal_mask(5))
        for train in ([True] if batch == 1 else []) + [False]:
            layer.train(train)
            block.train(train)
            torch.manual_seed(11)
            ref = layer(y, memory, tgt_mask=~self_mask, memory_key_padding_mask=t(~src_mask[:, 0]))
            torch.manual_seed(11)
            out, _, _ = block(y, memory, self_mask, t(src_mask))
            torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
            grads = [torch.autograd.grad((o**2).sum(), y)[0] for o in (out, ref)]
            torch.testing.assert_close(*grads, rtol=1e-12, atol=1e-11)


def test_translator_drops_the_sum_of_embeddings_and_positions_in_training_only():
    """Vaswani et al. 5.4: dropout on embedding + position, with the model's rate."""
    torch.manual_seed(0)
    model = Translator(11, 13, d_model=16, num_heads=2, num_layers=1, d_ff=32, dropout=0.3)
    tokens = torch.tensor([[4, 5, 6, 7]])
    clean = model.tgt_embed(tokens) * 4.0 + model.positions[:4]  # sqrt(16) = 4
    torch.manual_seed(3)
    dropped = model._embed(model.tgt_embed, tokens)
    torch.manual_seed(3)
    torch.testing.assert_close(dropped, F.dropout(clean, 0.3, training=True))
    assert (dropped == 0).any()
    model.eval()
    torch.testing.assert_close(model._embed(model.tgt_embed, tokens), clean)
    src = torch.randint(3, 11, (2, 6))
    first, _ = model(src, tokens.expand(2, -1))
    again, _ = model(src, tokens.expand(2, -1))
    assert torch.equal(first, again)  # eval: deterministic, no draw


def test_translator_at_dropout_zero_draws_no_random_numbers_in_training_mode():
    """p = 0, the default of ``Translator`` and ``train_translator``: a training-mode
    forward and backward leave torch's random state unchanged, so the seeded training of
    the chapter and of these tests is bit-identical to the code before dropout existed."""
    torch.manual_seed(0)
    model = Translator(11, 13, d_model=16, num_heads=2, num_layers=2, d_ff=32).train()
    src, tgt = torch.randint(3, 11, (2, 6)), torch.randint(3, 13, (2, 5))
    before = torch.random.get_rng_state()
    logits, _ = model(src, tgt)
    logits.sum().backward()
    assert torch.equal(torch.random.get_rng_state(), before)


@pytest.mark.parametrize("p", [-0.5, 1.0, float("inf"), "0.1"])
def test_dropout_rate_outside_zero_one_is_refused_by_every_constructor(p):
    for build in (
        lambda: TransformerDecoderBlock(8, 2, 16, dropout=p),
        lambda: EncoderDecoder(8, 2, 1, 16, dropout=p),
        lambda: Translator(5, 5, d_model=8, num_heads=2, num_layers=1, d_ff=16, dropout=p),
    ):
        with pytest.raises(ValueError, match=r"dropout rate p.*\[0, 1\)"):
            build()


def test_from_torch_refuses_other_modules():
    with pytest.raises(TypeError, match="nn.Transformer"):
        EncoderDecoder.from_torch(nn.Linear(2, 2))


@pytest.mark.parametrize(
    "ours, theirs",
    [
        (TransformerEncoderBlock, nn.TransformerEncoderLayer),
        (TransformerDecoderBlock, nn.TransformerDecoderLayer),
    ],
)
def test_block_from_torch_copies_a_relu_layer_and_refuses_gelu_or_another_layer(ours, theirs):
    torch.manual_seed(0)
    layer = theirs(8, 2, dim_feedforward=16, activation=nn.ReLU(), dropout=0.0, layer_norm_eps=1e-3)
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(0.1 * torch.randn_like(p))  # the layer-norm gains and biases too
    block = ours.from_torch(layer)
    norms = [name for name, child in layer.named_children() if isinstance(child, nn.LayerNorm)]
    assert len(norms) == (2 if theirs is nn.TransformerEncoderLayer else 3)
    for name in norms:
        assert torch.equal(getattr(block, name).weight, getattr(layer, name).weight)
        assert torch.equal(getattr(block, name).bias, getattr(layer, name).bias)
        assert getattr(block, name).eps == 1e-3
    assert torch.equal(block.ff[0].weight, layer.linear1.weight)
    assert torch.equal(block.ff[-1].bias, layer.linear2.bias)
    with pytest.raises(ValueError, match="activation='relu'"):
        ours.from_torch(theirs(8, 2, dim_feedforward=16, activation="gelu"))
    with pytest.raises(TypeError, match=f"nn.{theirs.__name__}, got Linear"):
        ours.from_torch(nn.Linear(2, 2))


# ----------------------------------------------------------------------------------------
# the embedding and the tied output layer


def test_output_layer_is_the_target_embedding_and_embeddings_are_scaled():
    model = Translator(11, 13, d_model=16, num_heads=2, num_layers=1, d_ff=32)
    assert not any(
        p.shape == (13, 16) and p is not model.tgt_embed.weight for p in model.parameters()
    )
    y = torch.randn(2, 3, 16)
    torch.testing.assert_close(model.logits(y), y @ model.tgt_embed.weight.T + model.out_bias)
    tokens = torch.tensor([[4, 5]])
    expected = model.tgt_embed(tokens) * 4.0 + model.positions[:2]  # sqrt(16) = 4
    torch.testing.assert_close(model._embed(model.tgt_embed, tokens), expected)


# ----------------------------------------------------------------------------------------
# label smoothing


def test_label_smoothed_loss_matches_torch_cross_entropy_with_ignore_index():
    torch.manual_seed(0)
    logits = torch.randn(4, 6, 9, dtype=torch.float64)
    targets = torch.randint(0, 9, (4, 6))
    targets[0, 3:] = -100
    for eps in (0.0, 0.1, 0.4):
        ours = label_smoothed_loss(logits, targets, eps, ignore_index=-100)
        ref = F.cross_entropy(
            logits.reshape(-1, 9), targets.reshape(-1), label_smoothing=eps, ignore_index=-100
        )
        torch.testing.assert_close(ours, ref, rtol=1e-12, atol=1e-12)


def test_label_smoothed_cross_entropy_is_kl_plus_entropy_with_no_mass_on_pad():
    rng = np.random.default_rng(0)
    vocab, pad, eps = 7, 0, 0.2
    logits = rng.standard_normal((3, 5, vocab)) * 3
    targets = rng.integers(1, vocab, (3, 5))
    targets[1, 2:] = pad
    q = np.full((3, 5, vocab), eps / (vocab - 1))
    q[..., pad] = 0
    np.put_along_axis(q, targets[..., None], (1 - eps) + eps / (vocab - 1), axis=-1)
    keep = targets != pad
    log_p = F.log_softmax(t(logits), -1)
    kl = F.kl_div(log_p[t(keep)], t(q[keep]), reduction="sum") / keep.sum()
    q_kept = q[keep]
    entropy = -(q_kept * np.log(np.where(q_kept > 0, q_kept, 1))).sum() / keep.sum()  # 0 log 0 = 0
    ours = label_smoothed_cross_entropy(logits, targets, eps, pad)
    assert ours == pytest.approx(kl.item() + entropy, rel=1e-12)
    # pad targets are skipped: the same value on the non-pad positions alone
    assert ours == pytest.approx(
        label_smoothed_cross_entropy(logits[keep], targets[keep], eps, pad), rel=1e-12
    )
    # and the pad class gets no target mass: smoothing over all V classes is a different number
    all_v = label_smoothed_loss(t(logits), t(targets), eps, ignore_index=pad).item()
    assert abs(all_v - ours) > 1e-3


def test_label_smoothed_cross_entropy_is_minimised_by_the_smoothed_target():
    vocab, pad, eps = 5, 0, 0.3
    q = np.array([0.0, 1 - eps + eps / 4, eps / 4, eps / 4, eps / 4])
    best = np.log(np.where(q > 0, q, 1e-300))  # logits whose softmax is q (pad prob ~ 0)
    best_loss = label_smoothed_cross_entropy(best[None], np.array([1]), eps, pad)
    assert best_loss == pytest.approx(-(q[1:] * np.log(q[1:])).sum(), rel=1e-9)  # H(q)
    rng = np.random.default_rng(1)
    for _ in range(20):
        other = best + rng.standard_normal(vocab)
        assert label_smoothed_cross_entropy(other[None], np.array([1]), eps, pad) > best_loss


def test_label_smoothed_cross_entropy_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match="logits"):
        label_smoothed_cross_entropy(np.zeros((2, 5)), np.zeros(3, dtype=int), 0.1, 0)


# ----------------------------------------------------------------------------------------
# the Noam schedule


def test_noam_rate_warms_up_linearly_peaks_at_warmup_and_decays_as_inverse_sqrt():
    d, w = 64, 100
    steps = np.arange(1, 1001)
    rate = noam_rate(steps, d, w)
    assert steps[rate.argmax()] == w
    assert rate.max() == pytest.approx(1 / np.sqrt(d * w))
    np.testing.assert_allclose(rate[:w], steps[:w] * rate[0])  # linear
    np.testing.assert_allclose(rate[w - 1 :] * np.sqrt(steps[w - 1 :]), rate[w - 1] * np.sqrt(w))
    assert noam_rate(50, d, w, factor=2.0) == pytest.approx(2 * noam_rate(50, d, w))


# ----------------------------------------------------------------------------------------
# beam search


def markov_step_fn(table):
    """log P(next | prefix) depends on the last token only: table (V, V) of log-probs."""
    return lambda prefixes: table[prefixes[:, -1]]


def random_table(rng, vocab):
    logits = rng.standard_normal((vocab, vocab)) * 2
    return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


def exhaustive_best(step_fn, bos, eos, vocab, max_len, alpha):
    """Score every sequence that ends at eos or at max_len; return the best (seq, score)."""
    best = (None, -np.inf)
    for length in range(1, max_len + 1):
        for seq in itertools.product(range(vocab), repeat=length):
            if eos in seq[:-1] or (length < max_len and seq[-1] != eos):
                continue
            prefix, logp = [bos], 0.0
            for token in seq:
                logp += step_fn(np.array([prefix]))[0, token]
                prefix.append(token)
            score = logp / length**alpha
            if score > best[1]:
                best = (list(seq), score)
    return best


def greedy(step_fn, bos, eos, max_len):
    prefix, logp = [bos], 0.0
    for _ in range(max_len):
        scores = step_fn(np.array([prefix]))[0]
        token = int(np.argmax(scores))
        logp += scores[token]
        prefix.append(token)
        if token == eos:
            break
    return prefix[1:], logp


@pytest.mark.parametrize("seed", range(10))
def test_beam_of_one_is_greedy(seed):
    rng = np.random.default_rng(seed)
    table = random_table(rng, 6)
    seqs, scores = beam_search(
        markov_step_fn(table), bos=5, eos=0, beam_size=1, max_len=8, alpha=0.7
    )
    seq, logp = greedy(markov_step_fn(table), 5, 0, 8)
    assert seqs == [seq] and scores[0] == pytest.approx(logp / len(seq) ** 0.7)


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_wide_beam_finds_the_exhaustive_optimum(seed, alpha):
    """Beam V on length-2 outputs and beam V^2 on length-3 outputs keep every prefix, so the
    best finished beam is the best of all sequences."""
    rng = np.random.default_rng(seed)
    vocab = 4
    table = random_table(rng, vocab)
    step = markov_step_fn(table)
    for max_len, beam in ((2, vocab), (3, vocab**2)):
        seqs, scores = beam_search(step, bos=3, eos=0, beam_size=beam, max_len=max_len, alpha=alpha)
        best_seq, best_score = exhaustive_best(step, 3, 0, vocab, max_len, alpha)
        assert seqs[0] == best_seq and scores[0] == pytest.approx(best_score)


def test_length_normalisation_prefers_a_longer_likely_sentence():
    """From BOS: EOS 0.4, a 0.6; after a: EOS 0.5. Total log P: [EOS] -0.92 beats [a, EOS]
    -1.20, so raw scores (alpha = 0) stop at once; per word (alpha = 1) [a, EOS] -0.60 wins."""
    eos, a, bos = 0, 1, 2
    table = np.log(np.array([[1.0, 1e-12, 1e-12], [0.5, 0.5, 1e-12], [0.4, 0.6, 1e-12]]))
    raw, _ = beam_search(markov_step_fn(table), bos, eos, beam_size=2, max_len=2, alpha=0.0)
    normalised, scores = beam_search(
        markov_step_fn(table), bos, eos, beam_size=2, max_len=2, alpha=1.0
    )
    assert raw[0] == [eos]
    assert normalised[0] == [a, eos]
    np.testing.assert_allclose(scores, [np.log(0.3) / 2, np.log(0.4)])


def test_finished_beams_stop_growing_and_ties_go_to_the_earlier_candidate():
    # uniform log-probs: every extension ties; the earliest (smallest token id) must win
    step = lambda prefixes: np.full((len(prefixes), 3), np.log(1 / 3))  # noqa: E731
    seqs, scores = beam_search(step, bos=2, eos=0, beam_size=3, max_len=4, alpha=1.0)
    assert seqs[0] == [0]  # EOS first: finished at length 1, never extended
    assert all(seq.count(0) <= 1 and (0 not in seq or seq[-1] == 0) for seq in seqs)
    # step 1 keeps [0] (finished), [1], [2]; step 2 has room for 2: [1, 0] (finished) and
    # [1, 1]; step 3 has room for 1: [1, 1, 0]. The beam shrinks as beams finish.
    assert seqs[1:] == [[1, 0], [1, 1, 0]]
    np.testing.assert_allclose(scores, np.log(1 / 3))  # per-word log-prob, whatever the length


def test_beam_search_checks_the_step_function_output():
    with pytest.raises(ValueError, match="step_fn"):
        beam_search(lambda p: np.zeros(4), bos=1, eos=0, beam_size=2, max_len=3)


# ----------------------------------------------------------------------------------------
# decoding a model: cache, beam 1


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-LN", "post-LN"])
def test_cached_decoding_gives_the_tokens_of_uncached_decoding(norm_first):
    torch.manual_seed(3)
    model = Translator(
        20, 20, d_model=16, num_heads=2, num_layers=2, d_ff=32, norm_first=norm_first
    )
    with torch.no_grad():  # a random model makes no EOS soon: long outputs, a stronger test
        model.out_bias[EOS] = -5.0
    src = torch.randint(3, 20, (5, 6))
    src[1, 4:] = PAD
    cached, cross = greedy_decode(model, src, max_len=12)
    uncached = greedy_decode_without_cache(model, src, max_len=12)
    assert torch.equal(cached, uncached)
    assert cross.shape == (2, 5, 2, 12, 6)
    assert (cross[:, 1, ..., 4:] == 0).all()  # padded source words get no cross-attention
    torch.testing.assert_close(cross.sum(-1), torch.ones_like(cross.sum(-1)))


def test_cached_decoding_projects_the_encoder_output_once_and_grows_self_attention_by_one_row():
    torch.manual_seed(5)
    model = Translator(20, 20, d_model=16, num_heads=2, num_layers=1, num_decoder_layers=2, d_ff=32)
    with torch.no_grad():
        model.out_bias[EOS] = -50.0  # never stop early: exactly 7 steps
    rows = {"cross": [], "self": []}
    for block in model.core.decoder:
        block.cross_attn.k_proj.register_forward_hook(
            lambda m, i, o: rows["cross"].append(i[0].shape[1])
        )
        block.self_attn.k_proj.register_forward_hook(
            lambda m, i, o: rows["self"].append(i[0].shape[1])
        )
    greedy_decode(model, torch.randint(3, 20, (2, 9)), max_len=7)
    assert (
        rows["cross"] == [9, 9] + [0, 0] * 6
    )  # both layers project the 9 source words at step 1 only
    assert rows["self"] == [1] * 14  # one new target row per layer and step


def test_beam_translate_with_beam_one_equals_greedy_decode():
    torch.manual_seed(4)
    model = Translator(20, 20, d_model=16, num_heads=2, num_layers=1, d_ff=32)
    src = torch.randint(3, 20, (3, 5))
    greedy_tokens, _ = greedy_decode(model, src, max_len=6)
    for b in range(3):
        seqs, _ = beam_translate(model, src[b], beam_size=1, max_len=6)
        expected = [tok for tok in greedy_tokens[b].tolist() if tok != PAD]
        assert seqs[0] == expected


def test_sequence_log_prob_is_the_score_beam_search_gives_a_finished_beam():
    """At alpha = 0 a finished beam's score is its total log P, summed step by step during
    the search: one teacher-forced pass must give the same number, with or without EOS."""
    torch.manual_seed(5)
    model = Translator(20, 20, d_model=16, num_heads=2, num_layers=1, d_ff=32)
    src = torch.randint(3, 20, (6,))
    seqs, scores = beam_translate(model, src, beam_size=4, max_len=5, alpha=0.0)
    assert len(seqs) == 4
    for seq, score in zip(seqs, scores):
        assert sequence_log_prob(model, src, seq) == pytest.approx(score, abs=1e-5)
    # a different sequence has a different log-probability
    assert sequence_log_prob(model, src, seqs[0]) != pytest.approx(
        sequence_log_prob(model, src, seqs[0][::-1] + [EOS]), abs=1e-3
    )


# ----------------------------------------------------------------------------------------
# a trained model: the chapter's configuration (book/ch6_transformer.ipynb, "Training on one
# CPU core"). Smaller ones stalled on the one-event pronoun grammar before the two-event one
# (not re-measured since): d = 32, batch 32, 500 steps resolved at
# chance (0.49-0.56) for 4 of 9 seeds, and 1000 steps left 它 or 他/她 at chance for the 3 of
# those seeds tried (0, 5, 6), so the test pays for the configuration that resolves reliably
# (about 50 s of one core).
EXACT_MATCH_MIN, RESOLUTION_MIN = 0.90, 0.90
TRAINED = dict(
    steps=1000,
    batch_size=64,
    d_model=64,
    num_heads=4,
    num_layers=2,
    num_decoder_layers=1,
    d_ff=128,
    warmup=200,
)


def test_training_is_seeded_and_records_one_loss_per_step():
    config = {**TRAINED, "steps": 5}
    _, first = train_translator(seed=3, **config)
    _, again = train_translator(seed=3, **config)
    _, other = train_translator(seed=4, **config)
    assert len(first["loss"]) == len(first["lr"]) == 5
    assert first["loss"] == again["loss"] and first["loss"] != other["loss"]
    np.testing.assert_allclose(first["lr"], noam_rate(np.arange(1, 6), 64, 200))


def test_constant_schedule_holds_the_noam_peak_from_the_first_step():
    """schedule="constant" (the warm-up experiment's control): every step at the Noam peak
    lr_factor / sqrt(d w), no ramp and no decay; any other schedule name is refused."""
    config = {**TRAINED, "steps": 4, "d_model": 32, "d_ff": 64, "warmup": 60}
    _, run = train_translator(seed=3, schedule="constant", lr_factor=2.0, **config)
    np.testing.assert_allclose(run["lr"], [2.0 / np.sqrt(32 * 60)] * 4, rtol=1e-12)
    assert run["lr"][0] == pytest.approx(noam_rate(60, 32, 60, factor=2.0))
    with pytest.raises(ValueError, match="schedule"):
        train_translator(seed=3, schedule="cosine", **config)


def test_peak_then_decay_schedule_is_noam_without_its_ramp():
    """schedule="peak_then_decay" (the warm-up experiment's arm that drops the ramp alone):
    the Noam rate at max(s, w), i.e. the peak for steps 1..w, the Noam rate from step w on;
    so it equals the constant arm up to step w and the Noam run from step w."""
    config = {**TRAINED, "steps": 7, "d_model": 16, "d_ff": 32, "warmup": 3}
    runs = {
        schedule: train_translator(seed=3, schedule=schedule, **config)[1]["lr"]
        for schedule in ("noam", "constant", "peak_then_decay")
    }
    steps = np.arange(1, 8)
    expected = noam_rate(np.maximum(steps, 3), 16, 3)
    np.testing.assert_allclose(runs["peak_then_decay"], expected, rtol=1e-12)
    np.testing.assert_allclose(runs["peak_then_decay"][:3], runs["constant"][:3], rtol=1e-12)
    np.testing.assert_allclose(runs["peak_then_decay"][2:], runs["noam"][2:], rtol=1e-12)
    assert runs["noam"][0] < runs["peak_then_decay"][0]  # the ramp is gone
    assert runs["constant"][-1] > runs["peak_then_decay"][-1]  # the decay is kept


def test_training_draws_from_the_split_it_is_given(monkeypatch):
    """holdout="voice" (the composition experiment) reaches every batch; the default is the
    split of held-out combinations."""
    import solutions.transformer as transformer

    seen = []

    def recording(*args, **kwargs):
        seen.append(kwargs["holdout"])
        return make_pairs(*args, **kwargs)

    monkeypatch.setattr(transformer, "make_pairs", recording)
    config = {**TRAINED, "steps": 2, "d_model": 16, "d_ff": 32}
    train_translator(seed=3, holdout="voice", **config)
    train_translator(seed=3, **config)
    assert seen == ["voice", "voice", "combinations", "combinations"]


def test_score_resolution_scores_resolution_per_sentence_and_exact_match():
    """What the chapter's control and composition models are scored with: one bool per
    pronoun sentence (in order, the sentences without a pronoun skipped), their mean, the
    candidate each names, and the exact match on other pairs (nan when none are given)."""
    config = {**TRAINED, "steps": 3, "d_model": 16, "d_ff": 32, "num_heads": 2}
    pairs = make_pairs(12, seed=18)
    exact_pairs = make_pairs(6, seed=19, kinds=("reorder",))
    model, _ = train_translator(seed=0, **config)
    out = score_resolution(model, pairs, exact_pairs)
    resolved = resolution_margins(model, pairs) > 0
    assert out["resolved"] == resolved.tolist() and len(resolved) < len(pairs)
    assert out["resolution"] == np.mean(resolved)
    assert out["named"] == resolution_choices(model, pairs).tolist()
    assert out["exact_match"] == evaluate_translator(model, exact_pairs)["exact_match"]
    assert np.isnan(score_resolution(model, pairs)["exact_match"])


def test_resolution_margins_compare_the_antecedent_with_the_best_other_candidate():
    """The margin is log p(antecedent's word) - max log p(other candidates' words) at the
    answer position of the teacher-forced reference, recomputed here one sentence at a
    time; sentences without a pronoun are skipped."""
    torch.manual_seed(6)
    model = Translator(len(SOURCE_VOCAB), len(TARGET_VOCAB), d_model=16, num_heads=2).eval()
    pairs = make_pairs(40, seed=16)
    margins = resolution_margins(model, pairs)
    with_pronoun = [p for p in pairs if p.pronoun >= 0]
    assert len(margins) == len(with_pronoun) < len(pairs)  # the reorder sentences have none
    assert {len(p.choices) for p in with_pronoun} == {2, 4}  # 他/她: two people; 它: four animals
    for p, margin in zip(with_pronoun, margins):
        src = torch.tensor([SOURCE_VOCAB.encode(p.source)])
        prefix = torch.tensor([[BOS] + TARGET_VOCAB.encode(p.target[: p.answer])])
        with torch.no_grad():
            logits, _ = model(src, prefix)
        log_p = torch.log_softmax(logits[0, -1].double(), -1)
        right, *wrong = (TARGET_VOCAB.stoi[w] for w in p.choices)
        assert margin == pytest.approx((log_p[right] - log_p[wrong].max()).item(), abs=1e-5)
    assert resolution_margins(model, make_pairs(5, seed=1, kinds=("reorder",))).shape == (0,)


def test_resolution_choices_name_the_candidate_whose_word_is_most_probable():
    """The named candidate (index in order of mention) is the one whose English word has
    the largest log-probability at the answer position, recomputed here from the words;
    it is the antecedent exactly when the margin is positive."""
    torch.manual_seed(6)
    model = Translator(len(SOURCE_VOCAB), len(TARGET_VOCAB), d_model=16, num_heads=2).eval()
    pairs = [p for p in make_pairs(60, seed=16) if p.pronoun >= 0]
    named = resolution_choices(model, pairs)
    margins = resolution_margins(model, pairs)
    np.testing.assert_array_equal(named == [p.antecedent for p in pairs], margins > 0)
    assert (margins > 0).any() and (margins < 0).any()  # both kinds of answer occur
    src, tgt = encode_batch(pairs)
    with torch.no_grad():
        logits, _ = model(src, tgt[:, :-1])
    for i, (p, c) in enumerate(zip(pairs, named)):
        # choices: the antecedent's word first, then the others' in order of mention
        others = iter(p.choices[1:])
        by_mention = [
            p.choices[0] if k == p.antecedent else next(others) for k in range(len(p.candidates))
        ]
        scores = [logits[i, p.answer, TARGET_VOCAB.stoi[w]].item() for w in by_mention]
        assert c == int(np.argmax(scores))


def test_without_source_positions_the_translator_reads_a_bag_of_words():
    """source_positions=False: permuting the source words changes no logit (the control of
    chapter 6); with positions it does."""
    torch.manual_seed(7)
    src = torch.tensor([SOURCE_VOCAB.encode(make_pairs(1, seed=3, kinds=("it",))[0].source)])
    shuffled = src[:, torch.randperm(src.shape[1], generator=torch.Generator().manual_seed(0))]
    tgt = torch.tensor([[BOS, 5, 6, 7]])
    for positions in (False, True):
        torch.manual_seed(7)
        model = Translator(
            len(SOURCE_VOCAB), len(TARGET_VOCAB), 16, 2, source_positions=positions
        ).eval()
        with torch.no_grad():
            a, _ = model(src, tgt)
            b, _ = model(shuffled, tgt)
        assert torch.allclose(a, b, atol=1e-5) == (not positions)


def test_head_ablation_zeroes_one_head_at_a_time_and_restores_the_weights():
    """A head whose output projection is already zero changes nothing when zeroed; every
    other head's zeroing is measured and the weights come back unchanged."""
    torch.manual_seed(8)
    model = Translator(len(SOURCE_VOCAB), len(TARGET_VOCAB), 16, 2, num_layers=1).eval()
    pairs = make_pairs(40, seed=17, kinds=("it",))
    with torch.no_grad():
        model.core.encoder[0].attn.out_proj.weight[:, :8] = 0.0  # encoder head 1: silent
    before = {k: v.clone() for k, v in model.state_dict().items()}
    table = head_ablation(model, pairs)
    assert table["encoder"].shape == table["cross"].shape == (1, 2)
    assert table["encoder"][0, 0] == table["none"] == np.mean(resolution_margins(model, pairs) > 0)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_joint_ablation_zeroes_every_head_of_one_layer_as_zeroing_by_hand_does():
    """joint_ablation zeroes the whole output projection of one attention layer at a time
    (its bias stays): the same fraction as a copy of the model with that weight set to zero
    by hand, not the fraction of any single head zeroed (the model is chosen so that they
    differ), and the weights come back unchanged."""
    torch.manual_seed(8)
    model = Translator(len(SOURCE_VOCAB), len(TARGET_VOCAB), 16, 2, num_layers=2).eval()
    pairs = make_pairs(200, seed=17, kinds=("it",))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    joint = joint_ablation(model, pairs)
    single = head_ablation(model, pairs)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert joint["none"] == np.mean(resolution_margins(model, pairs) > 0)
    differs = 0
    for part, names in (
        ("encoder", "core.encoder.{}.attn"),
        ("decoder_self", "core.decoder.{}.self_attn"),
        ("cross", "core.decoder.{}.cross_attn"),
    ):
        assert joint[part].shape == (2,)
        for layer in range(2):
            by_hand = Translator(len(SOURCE_VOCAB), len(TARGET_VOCAB), 16, 2, num_layers=2)
            by_hand.load_state_dict(before)
            by_hand.eval()
            with torch.no_grad():
                by_hand.get_submodule(names.format(layer)).out_proj.weight.zero_()
            assert joint[part][layer] == np.mean(resolution_margins(by_hand, pairs) > 0)
            differs += joint[part][layer] not in single[part][layer]
    assert differs >= 2  # measured 3 of the 6 layers: a one-head ablation would fail


@pytest.fixture(scope="module")
def trained():
    """The chapter's recipe (the model the page reads is its shipped run), retrained on
    the machine the tests run on: it must meet the quality the page states for a run of
    it, not equal the shipped weights."""
    return shipped.RECIPES["ch6_translator"].train()


@pytest.mark.slow
def test_trained_translator_translates_held_out_combinations_and_resolves_pronouns(trained):
    """Held-out combinations (test pairs, every pronoun with its bag and position twins, so
    rules on 1- and 2-grams, positions or length score at most 0.5) after the chapter's 1000
    steps. Measured with training seed 0 (one thread) on the two-event 它 grammar, 600 test
    pairs of seed 999: exact match 0.975, teacher-forced resolution 0.995 (它 0.992 of four
    animals). Thresholds 0.90 and 0.90."""
    model, _ = trained
    result = evaluate_translator(model, make_pairs(300, seed=2024, split="test"))
    assert result["exact_match"] >= EXACT_MATCH_MIN
    assert result["resolution"] >= RESOLUTION_MIN


def _composition_table(runs, pairs):
    named = np.array([run["named"] for run in runs])  # (seeds, sentences)
    resolved = np.array([run["resolved"] for run in runs])
    predicate = np.array([p.twin["predicate"] for p in pairs])
    per_pair = np.array(
        [
            [resolved[s, predicate == q].mean() for q in ("累了", "躲起来了")]
            for s in range(len(runs))
        ]
    )  # (seeds, 2)
    return named, per_pair


@pytest.mark.slow
def test_each_shipped_composition_model_answers_by_rules_of_its_own_not_a_coin():
    """The chapter's composition section reads eight shipped models (CHAPTER_MODEL, 4
    heads, trained without the held-out pairs of predicate and voice, training seeds
    0-7), scored on those pairs. Their fractions of 累了 then of 躲起来了 sentences
    resolved: seed 0 0.036 0.939; 1: 0.343 0.000; 2: 0.556 0.611; 3: 0.302 0.992; 4: 0.870
    0.588; 5: 0.710 0.046; 6: 0.130 0.183; 7: 0.485 0.878. The page reads them as rules, not
    a coin: every model names one of the two animals of the passive event in at least 9
    sentences of 10 (the least 0.920); each pair has a model that resolves at least 0.8 of
    it (0.870, 0.992) and one at most 0.1 (0.036, 0.000), where coins would all be near one
    half; seed 4 composes 累了 (0.870, bound 0.8); no model resolves both pairs in 4
    sentences of 5 (the best 0.611). Inference on another CPU moves these by float noise:
    the margins (0.02 and more) are far above it."""
    pairs = make_pairs(300, seed=999, split="test", kinds=("it",), holdout="voice")
    runs = [
        score_resolution(shipped.load(f"ch6_compose_seed{seed}")[0], pairs) for seed in range(8)
    ]
    named, per_pair = _composition_table(runs, pairs)
    assert np.isin(named, [2, 3]).mean(axis=1).min() >= 0.9, named  # the passive event
    assert (per_pair.max(axis=0) >= 0.8).all() and (per_pair.min(axis=0) <= 0.1).all()
    assert per_pair[4, 0] >= 0.8, per_pair
    assert per_pair.min(axis=1).max() < 0.8, per_pair


@pytest.mark.slow
def test_the_composition_recipe_retrained_here_names_the_passive_events_animals():
    """The composition recipe (shipped.RECIPES["ch6_compose_seed0"]), retrained on the
    machine the tests run on: the property the page states for every run of it holds for
    this one, that it answers with one of the two animals of the passive event, the last
    one (the eight shipped runs: 0.920-0.997 of the 300 sentences). Bound 0.85: 0.07 below
    the least shipped run, for a run on another CPU; which animal it names is the run's
    own and is not asserted."""
    pairs = make_pairs(300, seed=999, split="test", kinds=("it",), holdout="voice")
    model, _ = shipped.RECIPES["ch6_compose_seed0"].train()
    named, _ = _composition_table([score_resolution(model, pairs)], pairs)
    assert np.isin(named, [2, 3]).mean() >= 0.85, named


@pytest.mark.slow
def test_trained_translator_decodes_the_same_with_and_without_cache_and_beam_one(trained):
    model, _ = trained
    pairs = make_pairs(40, seed=11, split="test")
    src, _ = encode_batch(pairs)
    cached, _ = greedy_decode(model, src, max_len=20)
    assert torch.equal(cached, greedy_decode_without_cache(model, src, max_len=20))
    for b in range(5):
        seqs, _ = beam_translate(model, src[b][src[b] != PAD], beam_size=1, max_len=20)
        assert seqs[0] == [tok for tok in cached[b].tolist() if tok != PAD]


# ----------------------------------------------------------------------------------------
# the NumPy decoder layer, teacher forcing and cached greedy decoding (graded in ch6)


def torch_decoder_layer(d=16, h=4, d_ff=32, seed=0):
    """A post-LN ``nn.TransformerDecoderLayer`` (float64, no dropout) with zero attention
    biases (the NumPy layer has none) and its weights in the NumPy layout:
    ``(layer, (self_attn (4, d, d), cross_attn (4, d, d), w_1, b_1, w_2, b_2))``."""
    torch.manual_seed(seed)
    layer = nn.TransformerDecoderLayer(
        d, h, d_ff, dropout=0.0, batch_first=True, norm_first=False, dtype=torch.float64
    )
    layer.eval()

    def stacked(mha):
        with torch.no_grad():
            mha.in_proj_bias.zero_()
            mha.out_proj.bias.zero_()
        w_q, w_k, w_v = mha.in_proj_weight.detach().numpy().reshape(3, d, d)
        return np.stack([w_q.T, w_k.T, w_v.T, mha.out_proj.weight.detach().numpy().T])

    ffn = (
        layer.linear1.weight.detach().numpy().T,
        layer.linear1.bias.detach().numpy(),
        layer.linear2.weight.detach().numpy().T,
        layer.linear2.bias.detach().numpy(),
    )
    return layer, (stacked(layer.self_attn), stacked(layer.multihead_attn), *ffn)


def test_decoder_block_equals_torch_decoder_layer_with_copied_weights():
    layer, weights = torch_decoder_layer()
    rng = np.random.default_rng(0)
    y, memory = rng.standard_normal((3, 5, 16)), rng.standard_normal((3, 7, 16))
    src_mask = padding_mask(np.array([7, 4, 1]), 7)  # (B, 1, n_src)
    ours = decoder_block(y, memory, *weights, 4, src_mask)
    with torch.no_grad():
        theirs = layer(
            t(y), t(memory), tgt_mask=t(~causal_mask(5)), memory_key_padding_mask=t(~src_mask[:, 0])
        )  # PyTorch: True = hidden
    np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-10, atol=1e-12)


def test_decoder_block_row_t_ignores_later_target_rows_and_padded_source_words():
    _, weights = torch_decoder_layer(seed=1)
    rng = np.random.default_rng(1)
    y, memory = rng.standard_normal((2, 6, 16)), rng.standard_normal((2, 5, 16))
    src_mask = padding_mask(np.array([5, 3]), 5)
    base = decoder_block(y, memory, *weights, 4, src_mask)
    y2, memory2 = y.copy(), memory.copy()
    y2[:, 4:] += 10.0  # the future of rows 0..3
    memory2[1, 3:] += 10.0  # padding of sentence 2
    changed = decoder_block(y2, memory2, *weights, 4, src_mask)
    np.testing.assert_allclose(changed[:, :4], base[:, :4], rtol=1e-12, atol=1e-12)
    assert not np.allclose(changed[:, 4:], base[:, 4:])


def test_shift_right_puts_bos_first_and_drops_the_last_target():
    targets = np.array([[5, 6, 7, 2, 0], [8, 2, 0, 0, 0]])
    np.testing.assert_array_equal(shift_right(targets, 1), [[1, 5, 6, 7, 2], [1, 8, 2, 0, 0]])
    assert shift_right(np.array([4]), 1).tolist() == [1]


def test_teacher_forced_loss_and_gradient_match_torch_cross_entropy_with_ignore_index():
    rng = np.random.default_rng(2)
    logits = rng.standard_normal((3, 5, 7)) * 3
    targets = rng.integers(1, 7, (3, 5))
    targets[0, 3:] = 0
    targets[2, 1:] = 0
    loss, grad = teacher_forced_loss(logits, targets, 0)
    x = t(logits).requires_grad_()
    expected = F.cross_entropy(x.reshape(-1, 7), t(targets).reshape(-1), ignore_index=0)
    expected.backward()
    assert abs(loss - expected.item()) < 1e-12
    np.testing.assert_allclose(grad, x.grad.numpy(), rtol=1e-10, atol=1e-14)
    assert (grad[2, 1:] == 0).all()  # pad positions get no gradient


def test_teacher_forced_loss_of_only_pad_is_zero_with_zero_gradient():
    loss, grad = teacher_forced_loss(np.ones((2, 3, 4)), np.zeros((2, 3), int), 0)
    assert loss == 0.0 and (grad == 0).all()


def decoding_problem(seed=3, batch=3, d=16, vocab=11, n_src=6, max_len=8):
    """A random one-layer decoder (post-LN ``nn.TransformerDecoderLayer``), its NumPy weights,
    embeddings, positions, output layer, encoder output and source mask."""
    layer, weights = torch_decoder_layer(d=d, seed=seed)
    rng = np.random.default_rng(seed)
    embed = rng.standard_normal((vocab, d))
    positions = sinusoidal_positions(max_len, d)
    w_out = rng.standard_normal((d, vocab))
    memory = rng.standard_normal((batch, n_src, d))
    src_mask = padding_mask(np.array([n_src, 3, 1][:batch]), n_src)  # (B, 1, n_src)
    return layer, weights, embed, positions, w_out, memory, src_mask


def greedy_with_torch_layer(layer, embed, positions, w_out, memory, src_mask, bos, max_len):
    """The independent oracle: PyTorch's layer re-run on the whole prefix at every step."""
    tokens = np.full((memory.shape[0], 1), bos)
    for n in range(1, max_len + 1):
        x = embed[tokens] + positions[:n]  # (B, n, d)
        with torch.no_grad():
            y = layer(
                t(x),
                t(memory),
                tgt_mask=t(~causal_mask(n)),
                memory_key_padding_mask=t(~src_mask[:, 0]),
            )
        tokens = np.concatenate([tokens, (y[:, -1].numpy() @ w_out).argmax(-1)[:, None]], 1)
    return tokens[:, 1:]


def greedy_without_cache(weights, embed, positions, w_out, memory, src_mask, bos, max_len):
    """``decoder_block`` re-run on the whole prefix at every step."""
    tokens = np.full((memory.shape[0], 1), bos)
    for n in range(1, max_len + 1):
        y = decoder_block(embed[tokens] + positions[:n], memory, *weights, 4, src_mask)
        tokens = np.concatenate([tokens, (y[:, -1] @ w_out).argmax(-1)[:, None]], 1)
    return tokens[:, 1:]


def test_greedy_with_cache_equals_greedy_without_and_torch_layers_greedy():
    layer, weights, embed, positions, w_out, memory, src_mask = decoding_problem()
    tokens, cache_k, cache_v = greedy_decode_steps(
        memory, embed, positions, w_out, *weights, 4, 1, 8, src_mask
    )
    uncached = greedy_without_cache(weights, embed, positions, w_out, memory, src_mask, 1, 8)
    by_torch = greedy_with_torch_layer(layer, embed, positions, w_out, memory, src_mask, 1, 8)
    np.testing.assert_array_equal(tokens, uncached)
    np.testing.assert_array_equal(tokens, by_torch)
    assert len({tuple(row) for row in tokens}) > 1 and len(set(tokens.ravel())) > 3  # not constant
    # the cache holds the keys and values of the 8 inputs fed: BOS, then the first 7 choices
    inputs = embed[shift_right(tokens, 1)] + positions[:8]  # (B, 8, d)
    np.testing.assert_allclose(cache_k, inputs @ weights[0][1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(cache_v, inputs @ weights[0][2], rtol=1e-12, atol=1e-12)


def test_decoder_step_attends_over_what_the_cache_holds_and_appends_one_row():
    _, weights, embed, positions, _, memory, src_mask = decoding_problem(seed=4)
    rng = np.random.default_rng(4)
    prefix = rng.standard_normal((3, 4, 16))  # inputs of positions 0..3
    w_k, w_v = weights[0][1], weights[0][2]
    y_t, cache_k, cache_v = decoder_step(
        prefix[:, 3:], prefix[:, :3] @ w_k, prefix[:, :3] @ w_v, memory, *weights, 4, src_mask
    )
    np.testing.assert_allclose(
        y_t, decoder_block(prefix, memory, *weights, 4, src_mask)[:, 3:], rtol=1e-10, atol=1e-12
    )
    np.testing.assert_allclose(cache_k, prefix @ w_k, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(cache_v, prefix @ w_v, rtol=1e-12, atol=1e-12)
    # what the step reads of the past is the cache, not the inputs: another cache, another y_t
    other, _, _ = decoder_step(
        prefix[:, 3:], 2 * prefix[:, :3] @ w_k, prefix[:, :3] @ w_v, memory, *weights, 4, src_mask
    )
    assert not np.allclose(other, y_t)
