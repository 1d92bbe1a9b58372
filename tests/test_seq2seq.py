"""Tests for ``solutions/seq2seq.py`` (chapter 3).

Oracles: hand-written Python loops (scalar math, no NumPy broadcasting), the torch modules
with the same weights copied in, autograd ``gradcheck`` in float64, and an independent
parser of the synthetic task. The trained-model tests retrain the recipes of the models the
chapter ships (``solutions/shipped.py``), seeded, and assert accuracy only.
"""

from __future__ import annotations

import inspect
import math
import time
import warnings
from dataclasses import replace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from solutions import shipped
from solutions.seq2seq import (
    DEFAULT_CONFIG,
    DIGIT_WORDS,
    SOURCE_VOCAB,
    TARGET_VOCAB,
    TINY_CONFIG,
    AdditiveAttention,
    Encoder,
    LuongAttention,
    Seq2Seq,
    Vocab,
    bahdanau_context,
    exact_match,
    exact_match_by_length,
    local_attention,
    location_attention,
    luong_context,
    make_batch,
    make_translation_data,
    quick_train,
    tokenize,
    train,
)
from solutions.training import seeded

KINDS = ("dot", "general", "concat")


@pytest.fixture(autouse=True)
def _seeded_single_thread():
    """Every test here runs inside ``seeded(0)``: torch seeded, one thread, deterministic
    algorithms (``docs/conventions.md``), so neither load nor core count changes a result."""
    with seeded(0):
        yield


# ----------------------------------------------------------------------------------------
# independent oracles: scalar loops


def _loop_softmax(scores, allowed):
    """Max-shifted softmax of a list over the allowed entries; nothing allowed -> zeros."""
    kept = [s for s, ok in zip(scores, allowed) if ok]
    if not kept:
        return [0.0] * len(scores)
    top = max(kept)
    exps = [math.exp(s - top) if ok else 0.0 for s, ok in zip(scores, allowed)]
    total = sum(exps)
    return [e / total for e in exps]


def _loop_context(weights, h_b):
    d = len(h_b[0])
    return [sum(weights[j] * h_b[j][i] for j in range(len(h_b))) for i in range(d)]


def loop_bahdanau(s_prev, h, w_s, w_h, v, mask):
    batch, n_in, d_enc = h.shape
    d_dec, d_att = w_s.shape
    contexts, all_weights = [], []
    for b in range(batch):
        scores = []
        for j in range(n_in):
            e = 0.0
            for k in range(d_att):
                pre = sum(s_prev[b, i] * w_s[i, k] for i in range(d_dec))
                pre += sum(h[b, j, i] * w_h[i, k] for i in range(d_enc))
                e += v[k] * math.tanh(pre)
            scores.append(e)
        allowed = [True] * n_in if mask is None else list(mask[b])
        weights = _loop_softmax(scores, allowed)
        contexts.append(_loop_context(weights, h[b].tolist()))
        all_weights.append(weights)
    return np.array(contexts), np.array(all_weights)


def loop_luong(h_t, h, w_a, w_c, kind, mask, v):
    batch, n_in, d = h.shape
    outputs, all_weights = [], []
    for b in range(batch):
        scores = []
        for j in range(n_in):
            if kind == "dot":
                e = sum(h_t[b, i] * h[b, j, i] for i in range(d))
            elif kind == "general":
                e = sum(h_t[b, i] * w_a[i, k] * h[b, j, k] for i in range(d) for k in range(d))
            else:
                pair = list(h_t[b]) + list(h[b, j])  # [h_t; h_j]
                e = sum(
                    v[k] * math.tanh(sum(pair[i] * w_a[i, k] for i in range(2 * d)))
                    for k in range(w_a.shape[1])
                )
            scores.append(e)
        allowed = [True] * n_in if mask is None else list(mask[b])
        weights = _loop_softmax(scores, allowed)
        both = _loop_context(weights, h[b].tolist()) + list(h_t[b])  # [c; h_t]
        outputs.append(
            [math.tanh(sum(both[i] * w_c[i, k] for i in range(2 * d))) for k in range(d)]
        )
        all_weights.append(weights)
    return np.array(outputs), np.array(all_weights)


def spoken_to_digits(words):
    """Independent reader of the task's source language."""
    value = {w: str(i) for i, w in enumerate(DIGIT_WORDS)} | {"oh": "0"}
    digits, repeat = [], 1
    for w in words:
        if w in ("double", "triple"):
            assert repeat == 1, f"two multipliers in a row in {words}"
            repeat = 2 if w == "double" else 3
        else:
            digits += [value[w]] * repeat
            repeat = 1
    assert repeat == 1, f"dangling multiplier in {words}"
    return digits


# ----------------------------------------------------------------------------------------
# random inputs (float64)


def _mask_with_empty_row(rng, batch, n_in):
    mask = rng.random((batch, n_in)) < 0.7
    mask[:, 0] = True  # every row but the last has at least one key
    mask[-1] = False  # a fully masked row
    return mask


def _bahdanau_inputs(rng, batch=3, n_in=5, d_dec=4, d_enc=6, d_att=3):
    return dict(
        s_prev=rng.normal(size=(batch, d_dec)),
        h=rng.normal(size=(batch, n_in, d_enc)),
        w_s=rng.normal(size=(d_dec, d_att)),
        w_h=rng.normal(size=(d_enc, d_att)),
        v=rng.normal(size=(d_att,)),
    )


def _luong_inputs(rng, kind, batch=3, n_in=5, d=4, d_att=3):
    w_a = {
        "dot": None,
        "general": rng.normal(size=(d, d)),
        "concat": rng.normal(size=(2 * d, d_att)),
    }[kind]
    return dict(
        h_t=rng.normal(size=(batch, d)),
        h=rng.normal(size=(batch, n_in, d)),
        w_a=w_a,
        w_c=rng.normal(size=(2 * d, d)) / math.sqrt(2 * d),
        kind=kind,
        v=rng.normal(size=(d_att,)) if kind == "concat" else None,
    )


def _t(x):
    return None if x is None else torch.from_numpy(np.asarray(x))


def _additive_module(w_s, w_h, v):
    d_dec, d_att = w_s.shape
    module = AdditiveAttention(d_dec, w_h.shape[0], d_att).double()
    with torch.no_grad():  # nn.Linear stores (out, in): the transpose of x @ w
        module.w_s.weight.copy_(_t(w_s).T)
        module.w_h.weight.copy_(_t(w_h).T)
        module.v.weight.copy_(_t(v)[None, :])
    return module


def _luong_module(kind, w_a, w_c, v):
    d = w_c.shape[1]
    module = LuongAttention(d, kind, None if v is None else v.shape[0]).double()
    with torch.no_grad():
        if kind != "dot":
            module.w_a.weight.copy_(_t(w_a).T)
        if kind == "concat":
            module.v.weight.copy_(_t(v)[None, :])
        module.w_c.weight.copy_(_t(w_c).T)
    return module


# ----------------------------------------------------------------------------------------
# the NumPy twins against the loops and the torch modules


@pytest.mark.parametrize("masked", [False, True])
def test_bahdanau_context_matches_hand_loop(masked):
    rng = np.random.default_rng(0)
    args = _bahdanau_inputs(rng)
    mask = _mask_with_empty_row(rng, 3, 5) if masked else None
    context, weights = bahdanau_context(**args, mask=mask)
    want_context, want_weights = loop_bahdanau(**args, mask=mask)
    assert context.shape == (3, 6) and weights.shape == (3, 5)
    np.testing.assert_allclose(weights, want_weights, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(context, want_context, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("masked", [False, True])
def test_bahdanau_context_matches_torch_module_with_copied_weights(masked):
    rng = np.random.default_rng(1)
    args = _bahdanau_inputs(rng, batch=4, n_in=7, d_dec=5, d_enc=8, d_att=6)
    mask = _mask_with_empty_row(rng, 4, 7) if masked else None
    context, weights = bahdanau_context(**args, mask=mask)
    module = _additive_module(args["w_s"], args["w_h"], args["v"])
    with torch.no_grad():
        t_context, t_weights = module(_t(args["s_prev"]), _t(args["h"]), _t(mask))
    assert t_weights.dtype == torch.float64
    np.testing.assert_allclose(weights, t_weights.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(context, t_context.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("masked", [False, True])
def test_luong_context_matches_hand_loop(kind, masked):
    rng = np.random.default_rng(2)
    args = _luong_inputs(rng, kind)
    mask = _mask_with_empty_row(rng, 3, 5) if masked else None
    h_tilde, weights = luong_context(**args, mask=mask)
    want_h_tilde, want_weights = loop_luong(**args, mask=mask)
    assert h_tilde.shape == (3, 4) and weights.shape == (3, 5)
    np.testing.assert_allclose(weights, want_weights, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(h_tilde, want_h_tilde, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("masked", [False, True])
def test_luong_context_matches_torch_module_with_copied_weights(kind, masked):
    rng = np.random.default_rng(3)
    args = _luong_inputs(rng, kind, batch=4, n_in=6, d=5, d_att=7)
    mask = _mask_with_empty_row(rng, 4, 6) if masked else None
    h_tilde, weights = luong_context(**args, mask=mask)
    module = _luong_module(kind, args["w_a"], args["w_c"], args["v"])
    with torch.no_grad():
        t_h_tilde, t_weights = module(_t(args["h_t"]), _t(args["h"]), _t(mask))
    np.testing.assert_allclose(weights, t_weights.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(h_tilde, t_h_tilde.numpy(), rtol=1e-12, atol=1e-14)


def test_fully_masked_row_gives_zero_weights_and_zero_context():
    rng = np.random.default_rng(4)
    args = _bahdanau_inputs(rng)
    mask = np.ones((3, 5), dtype=bool)
    mask[1] = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "invalid value" RuntimeWarning either
        context, weights = bahdanau_context(**args, mask=mask)
    assert np.all(weights[1] == 0.0) and np.all(context[1] == 0.0)
    assert np.all(np.isfinite(weights)) and np.all(np.isfinite(context))
    np.testing.assert_allclose(weights[[0, 2]].sum(axis=-1), 1.0, rtol=1e-14)

    for kind in KINDS:
        largs = _luong_inputs(rng, kind)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            h_tilde, lweights = luong_context(**largs, mask=mask)
        assert np.all(lweights[1] == 0.0)
        # c = 0, so h~ = tanh([0; h_t] W_c) = tanh(h_t W_c[d:])
        d = largs["h_t"].shape[1]
        np.testing.assert_allclose(
            h_tilde[1], np.tanh(largs["h_t"][1] @ largs["w_c"][d:]), rtol=1e-14
        )


def test_torch_modules_give_finite_gradients_on_fully_masked_rows():
    rng = np.random.default_rng(5)
    args = _bahdanau_inputs(rng)
    mask = _t(np.array([[True] * 5, [False] * 5, [True, False, True, False, False]]))
    modules = [(_additive_module(args["w_s"], args["w_h"], args["v"]), args["s_prev"], args["h"])]
    for kind in KINDS:
        largs = _luong_inputs(rng, kind)
        modules.append(
            (_luong_module(kind, largs["w_a"], largs["w_c"], largs["v"]), largs["h_t"], largs["h"])
        )
    for module, query, h in modules:
        query, h = _t(query).requires_grad_(), _t(h).requires_grad_()
        out, weights = module(query, h, mask)
        assert torch.all(weights[1] == 0) and torch.all(weights[2, ~mask[2]] == 0)
        (out.sum() + (weights * torch.arange(5.0, dtype=torch.float64)).sum()).backward()
        for grad in [query.grad, h.grad] + [p.grad for p in module.parameters()]:
            assert torch.all(torch.isfinite(grad))
        # masked encoder states cannot influence anything
        assert torch.all(h.grad[1] == 0) and torch.all(h.grad[2, ~mask[2]] == 0)


@settings(max_examples=40, deadline=None)
@given(
    batch=st.integers(1, 4),
    n_in=st.integers(1, 7),
    d=st.integers(1, 5),
    d_att=st.integers(1, 4),
    seed=st.integers(0, 2**31 - 1),
    kind=st.sampled_from(KINDS),
)
def test_weights_rows_sum_to_one_and_masked_keys_get_zero(batch, n_in, d, d_att, seed, kind):
    rng = np.random.default_rng(seed)
    mask = rng.random((batch, n_in)) < 0.6
    args = _bahdanau_inputs(rng, batch, n_in, d, d, d_att)
    args["s_prev"] *= 30.0  # large scores: the max shift must keep exp() finite
    _, weights = bahdanau_context(**args, mask=mask)
    _, lweights = luong_context(**_luong_inputs(rng, kind, batch, n_in, d, d_att), mask=mask)
    for w in (weights, lweights):
        assert np.all(np.isfinite(w)) and np.all(w >= 0)
        assert np.all(w[~mask] == 0.0)
        has_key = mask.any(axis=1)
        np.testing.assert_allclose(w[has_key].sum(axis=1), 1.0, rtol=1e-12)
        assert np.all(w[~has_key] == 0.0)


def test_twins_raise_value_errors_that_name_the_shapes():
    rng = np.random.default_rng(6)
    args = _bahdanau_inputs(rng)  # s_prev (3, 4), h (3, 5, 6), w_s (4, 3), w_h (6, 3)
    with pytest.raises(ValueError, match=r"w_s.*\(4, 3\).*\(3, 4\).*transpose"):
        bahdanau_context(**(args | {"w_s": args["w_s"].T}))
    with pytest.raises(ValueError, match=r"\(B, n_in, d_enc\).*B = 3.*\(2, 5, 6\)"):
        bahdanau_context(**(args | {"h": args["h"][:2]}))
    with pytest.raises(ValueError, match=r"mask of shape.*\(3, 5\).*\(3, 4\)"):
        bahdanau_context(**args, mask=np.ones((3, 4), dtype=bool))
    with pytest.raises(TypeError, match="boolean mask"):
        bahdanau_context(**args, mask=np.ones((3, 5)))

    largs = _luong_inputs(rng, "general")  # h_t (3, 4), h (3, 5, 4)
    with pytest.raises(ValueError, match=r"width d = 4.*\(3, 5, 6\)"):
        luong_context(**(largs | {"h": rng.normal(size=(3, 5, 6))}))
    with pytest.raises(ValueError, match=r"w_a of shape \(d, d\) = \(4, 4\).*\(8, 4\)"):
        luong_context(**(largs | {"w_a": rng.normal(size=(8, 4))}))
    with pytest.raises(ValueError, match=r"w_c of shape \(2d, d\) = \(8, 4\).*\(4, 8\)"):
        luong_context(**(largs | {"w_c": largs["w_c"].T}))
    with pytest.raises(ValueError, match="kind"):
        luong_context(**(largs | {"kind": "bilinear"}))
    with pytest.raises(ValueError, match="needs v"):
        luong_context(**(_luong_inputs(rng, "concat") | {"v": None}))
    with pytest.raises(ValueError, match="needs w_a of shape \\(d, d\\)"):
        luong_context(**(largs | {"w_a": None}))
    with pytest.raises(ValueError, match="only used by kind='concat'"):
        luong_context(**(largs | {"v": np.ones(3)}))


# ----------------------------------------------------------------------------------------
# gradients of the torch attention modules (float64 gradcheck on tiny cases)


def _gradcheck_module(module, query, h, mask):
    names = [name for name, _ in module.named_parameters()]
    params = [p.detach().clone().requires_grad_() for _, p in module.named_parameters()]

    def f(q, keys, *weights):
        out = torch.func.functional_call(module, dict(zip(names, weights)), (q, keys, mask))
        return out  # (output, weights): both are checked

    assert torch.autograd.gradcheck(f, (query, h, *params), eps=1e-6, atol=1e-8)


def test_additive_attention_gradients_pass_gradcheck():
    torch.manual_seed(0)
    module = AdditiveAttention(3, 4, 2).double()
    query = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    h = torch.randn(2, 4, 4, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[True, True, False, True], [True, False, False, False]])
    _gradcheck_module(module, query, h, mask)


@pytest.mark.parametrize("kind", KINDS)
def test_luong_attention_gradients_pass_gradcheck(kind):
    torch.manual_seed(1)
    module = LuongAttention(3, kind, attention_dim=2).double()
    h_t = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    h = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[True, False, True, True], [False, True, True, False]])
    _gradcheck_module(module, h_t, h, mask)


# ----------------------------------------------------------------------------------------
# the task, the vocabulary, the encoder and decoding mechanics


def test_translation_data_is_seeded_and_sources_spell_their_targets():
    data = make_translation_data(500, seed=7, min_digits=1, max_digits=12)
    assert data == make_translation_data(500, seed=7, min_digits=1, max_digits=12)
    assert data != make_translation_data(500, seed=8, min_digits=1, max_digits=12)
    lengths = {len(t) for _, t in data}
    assert lengths == set(range(1, 13))  # every length occurs, so accuracy-vs-length works
    words = {w for s, _ in data for w in s}
    assert {"double", "triple", "oh", "zero"} <= words
    for source, target in data:
        assert spoken_to_digits(source) == target
        assert all(t in "0123456789" for t in target)


def test_vocab_round_trip_and_unknown_token_error():
    source = tokenize("Four one, five DOUBLE seven oh")
    assert source == ["four", "one", "five", "double", "seven", "oh"]
    ids = SOURCE_VOCAB.encode(source)
    assert SOURCE_VOCAB.decode(ids + [SOURCE_VOCAB.eos_id, 5]) == source
    with pytest.raises(ValueError, match="'eleven'"):
        SOURCE_VOCAB.encode(["one", "eleven"])
    with pytest.raises(ValueError, match="duplicates"):
        Vocab(["a", "a"])
    batch = make_batch([(["one"], ["1"]), (["double", "two"], ["2", "2"])])
    assert batch.src.tolist() == [
        [SOURCE_VOCAB.stoi["one"], 0],
        [SOURCE_VOCAB.stoi["double"], SOURCE_VOCAB.stoi["two"]],
    ]
    assert batch.src_mask.tolist() == [[True, False], [True, True]]
    one, two = TARGET_VOCAB.stoi["1"], TARGET_VOCAB.stoi["2"]
    assert batch.tgt_in.tolist() == [[1, one, 0], [1, two, two]]  # <bos> + y
    assert batch.tgt_out.tolist() == [[one, 2, 0], [two, two, 2]]  # y + <eos>


def test_encoder_states_do_not_depend_on_padding():
    torch.manual_seed(2)
    encoder = Encoder(len(SOURCE_VOCAB), 5, 4).double()
    short, long = ["one", "two", "three"], ["nine"] * 6
    alone_ids, alone_mask = SOURCE_VOCAB.batch([short])
    ids, mask = SOURCE_VOCAB.batch([short, long])
    with torch.no_grad():
        h_alone, summary_alone = encoder(alone_ids, alone_mask)
        h, summary = encoder(ids, mask)
    assert h.shape == (2, 6, 8) and summary.shape == (2, 8)
    torch.testing.assert_close(h[0, :3], h_alone[0], rtol=1e-12, atol=1e-12)
    assert torch.all(h[0, 3:] == 0)
    torch.testing.assert_close(summary[0], summary_alone[0], rtol=1e-12, atol=1e-12)
    # summary = [forward state after the last token; backward state after the first]
    torch.testing.assert_close(summary[0, :4], h[0, 2, :4], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(summary[0, 4:], h[0, 0, 4:], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("attention", ["additive", "dot", "general", "concat", None])
def test_greedy_decoding_agrees_with_teacher_forcing_on_its_own_output(attention):
    torch.manual_seed(3)
    model = Seq2Seq(attention, embed_dim=6, hidden_dim=5, attention_dim=4).double().eval()
    sources = [d[0] for d in make_translation_data(6, seed=4, max_digits=6)]
    src, src_mask = SOURCE_VOCAB.batch(sources)
    ids, weights = model.decode_ids(src, src_mask, max_len=8)  # (B, T), (B, T, n_in)
    tgt_in = torch.cat([torch.full((6, 1), TARGET_VOCAB.bos_id), ids[:, :-1]], dim=1)
    with torch.no_grad():
        logits, forced_weights = model(src, src_mask, tgt_in)
    live = torch.ones_like(ids, dtype=torch.bool)  # steps up to and including <eos>
    for b in range(6):
        eos = (ids[b] == TARGET_VOCAB.eos_id).nonzero()
        if len(eos):
            live[b, eos[0, 0] + 1 :] = False
    assert torch.equal(logits.argmax(-1)[live], ids[live])
    if attention is None:
        assert weights is None and forced_weights is None
    else:
        torch.testing.assert_close(weights[live], forced_weights[live], rtol=1e-12, atol=1e-12)
        assert torch.all(weights[:, :, src_mask.shape[1] :] == 0)
        assert torch.all(forced_weights.masked_select(~src_mask[:, None, :]) == 0)


def test_luong_decoder_needs_matching_widths():
    from solutions.seq2seq import AttentionDecoder

    with pytest.raises(ValueError, match="hidden_dim == encoder output width, got 6 and 8"):
        AttentionDecoder(10, 4, 6, 8, LuongAttention(6, "dot"))
    with pytest.raises(ValueError, match="attention to be one of"):
        Seq2Seq("multiplicative")


def test_train_is_repeatable_and_restores_the_thread_count():
    before = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    config = replace(TINY_CONFIG, steps=15, n_train=200)
    _, history_a = train("general", config, seed=11)
    model_b, history_b = train("general", config, seed=11)
    _, history_c = train("general", config, seed=12)
    assert torch.get_num_threads() == before
    assert torch.are_deterministic_algorithms_enabled() == deterministic
    losses_a, losses_b, losses_c = history_a["loss"], history_b["loss"], history_c["loss"]
    assert len(losses_a) == 15 and losses_a == losses_b and losses_a != losses_c
    assert not model_b.training


# ----------------------------------------------------------------------------------------
# local attention (Luong et al., 2015): local-m and local-p


def _loop_local(h_t, h, w_a, window, p_t, mask):
    """Per-example oracle: general scores, softmax over the window, times the Gaussian."""
    batch, n_in, d = h.shape
    weights = np.zeros((batch, n_in))
    for b in range(batch):
        query = [sum(h_t[b, i] * w_a[i, j] for i in range(d)) for j in range(d)]  # h_t W_a
        scores = [sum(query[j] * h[b, s, j] for j in range(d)) for s in range(n_in)]
        allowed = [
            abs(s - p_t[b]) <= window and (mask is None or bool(mask[b, s])) for s in range(n_in)
        ]
        soft = _loop_softmax(scores, allowed)
        sigma = window / 2
        for s in range(n_in):
            if allowed[s]:
                gauss = 1.0 if sigma == 0 else math.exp(-((s - p_t[b]) ** 2) / (2 * sigma**2))
                weights[b, s] = soft[s] * gauss
    context = np.array(
        [
            [sum(weights[b, s] * h[b, s, j] for s in range(n_in)) for j in range(d)]
            for b in range(batch)
        ]
    )
    return context, weights


def _local_inputs(seed, batch=4, n_in=9, d=5, d_p=3):
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((batch, d)),
        rng.standard_normal((batch, n_in, d)),
        rng.standard_normal((d, d)),
        rng.standard_normal((d, d_p)),
        rng.standard_normal(d_p),
        rng.random((batch, n_in)) < 0.7,
    )


@pytest.mark.parametrize("window", [0, 1, 2, 3, 5])
@pytest.mark.parametrize("masked", [False, True])
def test_local_m_matches_per_example_loop(window, masked):
    h_t, h, w_a, _, _, mask = _local_inputs(window)
    mask = mask if masked else None
    position = np.array([0, 3, 8, 5])
    context, weights, p_t = local_attention(h_t, h, w_a, window, position=position, mask=mask)
    np.testing.assert_array_equal(p_t, position)
    want_context, want_weights = _loop_local(h_t, h, w_a, window, position, mask)
    np.testing.assert_allclose(weights, want_weights, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(context, want_context, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("window", [0, 1, 2, 4])
@pytest.mark.parametrize("masked", [False, True])
def test_local_p_matches_per_example_loop(window, masked):
    h_t, h, w_a, w_p, v_p, mask = _local_inputs(10 + window)
    mask = mask if masked else None
    context, weights, p_t = local_attention(h_t, h, w_a, window, w_p=w_p, v_p=v_p, mask=mask)
    n_in = h.shape[1]
    want_p = [
        n_in
        / (
            1
            + math.exp(
                -sum(
                    v_p[k] * math.tanh(sum(h_t[b, i] * w_p[i, k] for i in range(h.shape[2])))
                    for k in range(len(v_p))
                )
            )
        )
        for b in range(len(h_t))
    ]
    np.testing.assert_allclose(p_t, want_p, rtol=1e-12)
    assert np.any(p_t != np.round(p_t))  # real-valued positions: the Gaussian is off-centre
    want_context, want_weights = _loop_local(h_t, h, w_a, window, p_t, mask)
    np.testing.assert_allclose(weights, want_weights, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(context, want_context, rtol=1e-12, atol=1e-14)


def test_a_window_covering_the_source_is_global_attention_times_the_gaussian():
    h_t, h, w_a, _, _, mask = _local_inputs(20)
    n_in, window = h.shape[1], h.shape[1]  # D >= n_in: every position is inside the window
    w_c = np.random.default_rng(21).standard_normal((2 * h.shape[2], h.shape[2]))
    _, global_weights = luong_context(h_t, h, w_a, w_c, "general", mask)
    position = np.array([0, 4, 8, 2])
    _, weights, _ = local_attention(h_t, h, w_a, window, position=position, mask=mask)
    gauss = np.exp(-((np.arange(n_in)[None, :] - position[:, None]) ** 2) / (2 * (window / 2) ** 2))
    np.testing.assert_allclose(weights / gauss, global_weights, rtol=1e-12, atol=1e-15)
    assert np.all(weights.sum(axis=1) < 1)  # the Gaussian factor: rows do NOT sum to 1


def test_local_attention_empty_window_gives_zero_weights_and_zero_context():
    h_t, h, w_a, _, _, _ = _local_inputs(30)
    mask = np.ones(h.shape[:2], dtype=bool)
    mask[1] = False  # example 1: everything masked
    mask[2, 2:7] = False  # example 2: the window around 4 is masked
    position = np.array([40, 4, 4, -20])  # examples 0 and 3: the window is off the source
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        context, weights, _ = local_attention(h_t, h, w_a, 2, position=position, mask=mask)
    assert np.all(weights == 0) and np.all(context == 0)
    _, weights, _ = local_attention(h_t, h, w_a, 0, position=4)  # D = 0: only s = p_t
    assert np.all((weights > 0) == (np.arange(h.shape[1]) == 4)[None, :])


def test_local_attention_errors_name_the_arguments():
    h_t, h, w_a, w_p, v_p, _ = _local_inputs(40)
    with pytest.raises(ValueError, match="exactly one of position"):
        local_attention(h_t, h, w_a, 2)
    with pytest.raises(ValueError, match="exactly one of position"):
        local_attention(h_t, h, w_a, 2, position=1, w_p=w_p, v_p=v_p)
    with pytest.raises(ValueError, match="needs both w_p"):
        local_attention(h_t, h, w_a, 2, w_p=w_p)
    with pytest.raises(ValueError, match=r"position to be an int or \(B,\) = \(4,\) ints"):
        local_attention(h_t, h, w_a, 2, position=1.5)
    with pytest.raises(ValueError, match=r"window >= 0"):
        local_attention(h_t, h, w_a, -1, position=1)
    with pytest.raises(
        ValueError, match=r"w_p of shape \(d, d_p\) = \(5, 3\), got \(3, 5\).*transpose"
    ):
        local_attention(h_t, h, w_a, 2, w_p=w_p.T, v_p=v_p)


@pytest.mark.parametrize("masked", [False, True])
def test_location_attention_matches_per_example_loop(masked):
    rng = np.random.default_rng(50)
    batch, n_in, n_max, d_dec, d_enc = 3, 5, 8, 4, 6
    h_t, h = rng.standard_normal((batch, d_dec)), rng.standard_normal((batch, n_in, d_enc))
    w_a = rng.standard_normal((d_dec, n_max))
    mask = rng.random((batch, n_in)) < 0.7 if masked else None
    context, weights = location_attention(h_t, h, w_a, mask)
    for b in range(batch):
        # a_t(s) = softmax_s(sum_i h_t[i] W_a[i, s]) over s < n_in: no encoder state enters
        scores = [sum(h_t[b, i] * w_a[i, s] for i in range(d_dec)) for s in range(n_in)]
        allowed = [True] * n_in if mask is None else list(mask[b])
        want = _loop_softmax(scores, allowed)
        np.testing.assert_allclose(weights[b], want, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(context[b], _loop_context(want, h[b].tolist()), rtol=1e-12)


def test_location_weights_ignore_what_the_source_says():
    rng = np.random.default_rng(51)
    h_t, h = rng.standard_normal((2, 4)), rng.standard_normal((2, 6, 4))
    w_a = rng.standard_normal((4, 10))
    _, weights = location_attention(h_t, h, w_a)
    _, shuffled = location_attention(h_t, h[:, ::-1] * 3.0, w_a)  # other content, same length
    np.testing.assert_array_equal(weights, shuffled)
    # a content score on the same inputs does move: the contrast the chapter draws
    _, dot = luong_context(h_t, h, None, np.eye(8, 4), "dot")
    _, dot_shuffled = luong_context(h_t, h[:, ::-1] * 3.0, None, np.eye(8, 4), "dot")
    assert not np.allclose(dot, dot_shuffled)


def test_location_attention_masks_and_names_its_shapes():
    rng = np.random.default_rng(52)
    h_t, h, w_a = rng.standard_normal((2, 3)), rng.standard_normal((2, 5, 4)), np.ones((3, 5))
    mask = np.array([[True] * 5, [False] * 5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        context, weights = location_attention(h_t, h, w_a, mask)
    assert np.all(weights[1] == 0) and np.all(context[1] == 0)  # fully masked: zeros, no NaN
    np.testing.assert_allclose(weights[0], 0.2)  # equal scores: uniform
    with pytest.raises(ValueError, match=r"n_max >= n_in = 5.*got \(3, 4\)"):
        location_attention(h_t, h, np.ones((3, 4)))
    with pytest.raises(ValueError, match=r"\(d_dec, n_max\) = \(3, n_max\).*got \(5, 3\)"):
        location_attention(h_t, h, np.ones((5, 3)))


# ----------------------------------------------------------------------------------------
# trained models (seeded; CPU; each training is well under 60 s of one core)


def _held_out(data, train_data):
    seen = {tuple(s) for s, _ in train_data}
    return [(s, t) for s, t in data if tuple(s) not in seen]


@pytest.fixture(scope="module")
def default_training_data():
    return make_translation_data(
        DEFAULT_CONFIG.n_train, 0, DEFAULT_CONFIG.min_digits, DEFAULT_CONFIG.max_digits
    )


@pytest.fixture(scope="module")
def default_test_data(default_training_data):
    test = make_translation_data(2000, 12345, DEFAULT_CONFIG.min_digits, DEFAULT_CONFIG.max_digits)
    return _held_out(test, default_training_data)  # drops most 1-2 digit strings (all seen)


def _retrained(name):
    """The recipe of the shipped model ``name`` (``shipped.RECIPES``), retrained here: the
    chapter reads the shipped weights, and this checks that a run of the recipe on this
    machine meets the quality the page states. On another CPU the run follows another
    trajectory (vector kernels, rounding), so the thresholds sit below the worst of
    training seeds 0-19 (table below), not at the shipped model's numbers."""
    wall, cpu = time.perf_counter(), time.process_time()
    model, history = shipped.RECIPES[name].train()
    print(
        f"\nretrained {name}: {time.process_time() - cpu:.1f} s CPU, "
        f"{time.perf_counter() - wall:.1f} s wall"
    )
    return model, history["loss"]


def test_the_chapter_recipes_train_on_the_data_the_tests_hold_out_from():
    """The fixtures below retrain the recipes, which draw their own training data
    (``train(..., seed=0)``): the held-out set must be held out from exactly that data."""
    for name, attention in (("ch3_plain", None), ("ch3_bahdanau", "additive")):
        recipe = shipped.RECIPES[name]
        assert recipe.trainer == "solutions.seq2seq.train"
        assert recipe.arguments == {"attention": attention, "seed": 0}
    # no config among the arguments: the recipe trains with the default, DEFAULT_CONFIG
    assert inspect.signature(train).parameters["config"].default is DEFAULT_CONFIG


@pytest.fixture(scope="module")
def trained_additive():
    return _retrained("ch3_bahdanau")


@pytest.fixture(scope="module")
def trained_plain():
    return _retrained("ch3_plain")


# The recipe, DEFAULT_CONFIG, trained (train_loop: seeded, one thread, deterministic
# algorithms) with training seeds 0-19 on the same data (seed 0 is the recipe of the
# shipped models), held-out 1-12 digit strings (min / median / max):
#   attention exact match                      0.932 / 0.988 / 0.999  (seed 0: 0.996)
#   last-20 / first-20 training loss           0.0002 / 0.0027 / 0.0204
#   attention, 11-12 digits                    0.832 / 0.967 / 1.000  (seed 0: 0.986)
#   plain baseline, 11-12 digits               0.009 / 0.031 / 0.044
#   attention - plain, 11-12 digits            0.822 / 0.940 / 0.980
#   plain baseline, 3-4 digits                 0.975 / 0.990 / 0.997
#   the example sentence decoded right, peaks moving forward: 20 of 20 seeds
# The recipe (seed 0) retrained under each of the 6 CPU settings (ATEN_CPU_CAPABILITY avx512 /
# avx2 / default x MKL_CBWR unset / COMPATIBLE): attention exact match 0.977-0.996, loss ratio
# 0.0018-0.0088, attention 11-12 digits 0.952-0.986, plain 11-12 digits 0.021-0.042, plain 3-4
# digits 0.992-1.000, the example sentence right in all 6: each as far from its threshold
# below as the worst seed above, or farther.
# The tests retrain the recipe (seed 0) and set each threshold below the worst seed, margin
# stated there.


@pytest.mark.slow
def test_attention_seq2seq_reaches_high_exact_match_on_held_out_data(
    trained_additive, default_test_data
):
    """Thresholds (see the seed distribution above): exact match >= 0.88, margin 0.052 below
    the worst seed (0.932); loss ratio < 0.05, margin 0.030 above the worst (0.0204)."""
    model, losses = trained_additive
    assert len(default_test_data) > 1500
    assert len(losses) == DEFAULT_CONFIG.steps
    assert np.mean(losses[-20:]) < 0.05 * np.mean(losses[:20])
    accuracy = exact_match(model, default_test_data)
    print(f"attention exact match on held-out data: {accuracy:.4f}")
    assert accuracy >= 0.88


@pytest.mark.slow
def test_attention_beats_the_plain_baseline_on_the_longest_inputs(
    trained_additive, trained_plain, default_test_data
):
    """Thresholds (seed distribution above): attention on 11-12 digits >= 0.75, margin 0.082
    below the worst seed (0.832); attention - plain >= 0.3, margin 0.52 (worst 0.822); plain
    on 3-4 digits >= 0.9, margin 0.075 (worst 0.975)."""
    by_length_attention = exact_match_by_length(trained_additive[0], default_test_data)
    by_length_plain = exact_match_by_length(trained_plain[0], default_test_data)
    assert set(range(3, 13)) <= set(by_length_attention)
    print("attention:", {n: round(a, 3) for n, a in by_length_attention.items()})
    print("plain:    ", {n: round(a, 3) for n, a in by_length_plain.items()})
    longest = [n for n in by_length_attention if n >= 11]
    attention = np.mean([by_length_attention[n] for n in longest])
    plain = np.mean([by_length_plain[n] for n in longest])
    assert attention >= 0.75
    assert attention - plain >= 0.3  # the fixed context vector is the bottleneck
    # and the plain model is not simply broken: it does translate short inputs
    assert np.mean([by_length_plain[n] for n in (3, 4)]) >= 0.9


@pytest.mark.slow
def test_greedy_decode_returns_one_weight_row_per_output_token(trained_additive, default_test_data):
    """The example sentence is decoded right and its attention peaks move forward for every
    one of training seeds 0-19 (seed distribution above); the test retrains the recipe."""
    model, _ = trained_additive
    sources = [s for s, _ in default_test_data[:50]] + ["four one five double seven oh two"]
    outputs, weights = model.greedy_decode(sources)
    assert outputs[-1] == list("4157702")
    for source, out, w in zip(sources, outputs, weights):
        n_in = len(tokenize(source)) if isinstance(source, str) else len(source)
        assert w.shape == (len(out), n_in)
        np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=1e-5)
        assert np.all(w >= 0)
    # a trained model reads left to right: the attention peak moves forward
    peaks = weights[-1].argmax(axis=1)
    assert np.all(np.diff(peaks) >= 0)


@pytest.mark.slow
@pytest.mark.parametrize(("attention", "threshold"), [("additive", 0.85), ("general", 0.75)])
def test_tiny_config_trains_to_high_accuracy_on_short_inputs(attention, threshold):
    """Seed 0, deterministic (train_loop and this test run in ``seeded``: one thread,
    deterministic algorithms). Exact match on held-out 1-5 digit strings over training
    seeds 0-19 (min / median / max): additive 0.908 / 0.980 / 0.998, general
    0.817 / 0.963 / 0.986. Thresholds 0.85 and 0.75: margins 0.058 and 0.067 below the
    worst seed. (Before training ran deterministically, a loaded run of additive seed 0
    scored 0.890 against a threshold of 0.9.)"""
    cpu = time.process_time()
    model, history = quick_train(attention, seed=0)
    cpu = time.process_time() - cpu
    assert len(history["loss"]) == TINY_CONFIG.steps
    train_data = make_translation_data(TINY_CONFIG.n_train, 0, 1, TINY_CONFIG.max_digits)
    test = _held_out(make_translation_data(1000, 99, 1, TINY_CONFIG.max_digits), train_data)
    accuracy = exact_match(model, test)
    print(
        f"TINY_CONFIG {attention}: {accuracy:.4f} exact match on {len(test)} held-out, "
        f"trained in {cpu:.1f} s CPU"
    )
    assert accuracy >= threshold
