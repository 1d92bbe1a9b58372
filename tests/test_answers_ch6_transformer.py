"""The answer key of ch6_transformer and its checks.

- ``packed_decoder_mask`` against a loop over (i, j) and against attention run on each packed
  sentence alone; ``greedy_decode_cached`` against greedy decoding that re-runs the whole
  decoder layer on the prefix (prompt tokens included) and against a PyTorch step over a
  given cache;
- a corpus of wrong packed masks, each judged on the public and hidden cases: each loses
  points, and the named ones get their hint;
- every named mistake of the chapter is recognised with its hint (the issue-35 list), a
  float ``shift_right`` fails with the integer hint, and a greedy decoder that does not read
  its cache fails;
- each reference passes its public and hidden cases.
"""

from __future__ import annotations

import math

import judged
import numpy as np
import pytest
import torch

from answers.ch6_transformer import greedy_decode_cached, packed_decoder_mask
from autograder.chapters import ch6_transformer as plugin
from autograder.checking import checks
from solutions import multihead, transformer

CHECKS = [c.name for c in checks.checks_for("ch6_transformer")]
SEEDS = (11, 12345, 777)


def _judge(name, fn, case, hidden=False):
    whole = checks.prepare(name, case, hidden=hidden)
    got = checks.normalise(checks.call(fn, whole))
    return checks.compare(name, whole, whole.expected, got)


def _all_cases(name):
    out = [(c, False) for c in checks.public_cases(name)]
    for seed in SEEDS:
        out += [(c, True) for c in checks.hidden_cases(name, seed)]
    return out


# ----------------------------------------------------------------------------------------
# oracles


def _packed_loop(segment_ids):
    seg = np.asarray(segment_ids)
    n = seg.shape[-1]
    out = np.zeros(seg.shape + (n,), dtype=bool)
    for index in np.ndindex(seg.shape[:-1]):
        row = seg[index]
        for i in range(n):
            for j in range(n):
                out[index + (i, j)] = j <= i and row[i] == row[j] and row[i] != 0
    return out


@pytest.mark.parametrize("seed", range(20))
def test_packed_mask_matches_a_loop_over_queries_and_keys(seed):
    rng = np.random.default_rng(seed)
    for case in plugin._packed_cases(rng):
        (seg,) = case.args
        got = packed_decoder_mask(seg)
        assert got.dtype == bool
        np.testing.assert_array_equal(got, _packed_loop(seg))


def test_packed_attention_equals_each_sentence_attended_alone():
    """Packed rows under the mask give, at every real position, what the sentence alone
    gives under the chapter's causal mask."""
    rng = np.random.default_rng(0)
    seg = np.array([[3, 3, 3, 7, 7, 1, 1, 1, 0, 0]])
    d, h = 8, 2
    x = rng.standard_normal((1, seg.shape[1], d))
    w = [rng.standard_normal((d, d)) / math.sqrt(d) for _ in range(4)]
    packed, _ = multihead.multihead_attention(x, x, *w, h, packed_decoder_mask(seg))
    for label in (3, 7, 1):
        where = np.flatnonzero(seg[0] == label)
        alone = x[:, where]
        n = len(where)
        causal = np.tril(np.ones((n, n), dtype=bool))
        expected, _ = multihead.multihead_attention(alone, alone, *w, h, causal)
        np.testing.assert_allclose(packed[:, where], expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(packed[0, 8:], 0.0)  # padding queries attend to nothing


def test_one_sentence_per_row_is_the_chapters_mask_on_its_real_queries():
    lens = np.array([6, 4, 1])
    seg = (np.arange(6)[None, :] < lens[:, None]).astype(int) * 5
    mask, chapter = packed_decoder_mask(seg), transformer.decoder_mask(lens, 6)
    real = np.arange(6)[None, :] < lens[:, None]  # (B, n): the chapter's pad rows differ
    np.testing.assert_array_equal(mask[real], chapter[real])
    assert not mask[~real].any()


def _layer(rng, d):
    return plugin._layer(rng, d, 2 * d)


def _uncached_greedy(memory, embed, positions, w_out, layer, heads, prompt, start_id, max_len):
    """Greedy decoding that re-runs decoder_block on the whole fed prefix each step."""
    d = embed.shape[1]
    fed = list(prompt) + [start_id]  # the tokens fed, one per position
    batch = memory.shape[0]
    fed = [np.full(batch, t) if np.ndim(t) == 0 else t for t in fed]
    chosen = []
    for _ in range(max_len):
        tokens = np.stack(fed, axis=1)  # (B, t)
        x = math.sqrt(d) * embed[tokens] + positions[: tokens.shape[1]]
        y = transformer.decoder_block(x, memory, *layer, heads)
        word = (y[:, -1] @ w_out).argmax(-1)
        chosen.append(word)
        fed.append(word)
    return np.stack(chosen, axis=1), np.stack(fed[:-1], axis=1)


@pytest.mark.parametrize("seed", range(6))
def test_greedy_from_a_prompt_cache_equals_rerunning_the_layer_on_the_whole_prefix(seed):
    rng = np.random.default_rng(seed)
    batch, d, heads, vocab, n_src = 2, 8, 2, 9, 5
    memory = rng.standard_normal((batch, n_src, d))
    embed = rng.standard_normal((vocab, d)) / math.sqrt(d)
    positions = rng.standard_normal((12, d))
    w_out = rng.standard_normal((d, vocab))
    layer = _layer(rng, d)
    prompt = [rng.integers(0, vocab, size=batch) for _ in range(3)]
    # the prompt's cache, built the long way: the keys and values of its inputs
    inputs = math.sqrt(d) * embed[np.stack(prompt, 1)] + positions[:3]  # (B, 3, d)
    w_k, w_v = layer[0][1], layer[0][2]
    tokens, cache_k, cache_v = greedy_decode_cached(
        memory, embed, positions, w_out, *layer, heads, 4, 5, inputs @ w_k, inputs @ w_v
    )
    expected, fed = _uncached_greedy(memory, embed, positions, w_out, layer, heads, prompt, 4, 5)
    np.testing.assert_array_equal(tokens, expected)
    x_fed = math.sqrt(d) * embed[fed] + positions[: fed.shape[1]]
    np.testing.assert_allclose(cache_k, x_fed @ w_k, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(cache_v, x_fed @ w_v, rtol=1e-12, atol=1e-12)


def test_greedy_first_step_over_a_random_cache_matches_torch_attention():
    """One step over a cache no token sequence gives: the self-attention row is PyTorch's
    scaled_dot_product_attention over [given keys; new key]."""
    rng = np.random.default_rng(3)
    batch, d, heads, vocab, t0 = 2, 8, 2, 7, 4
    memory = rng.standard_normal((batch, 5, d))
    embed = rng.standard_normal((vocab, d)) / math.sqrt(d)
    positions = rng.standard_normal((t0 + 1, d))
    w_out = rng.standard_normal((d, vocab))
    layer = _layer(rng, d)
    given_k, given_v = rng.standard_normal((2, batch, t0, d))
    tokens, cache_k, cache_v = greedy_decode_cached(
        memory, embed, positions, w_out, *layer, heads, 2, 1, given_k, given_v
    )
    w_q, w_k, w_v, w_o = layer[0]
    x = math.sqrt(d) * embed[[2, 2]] + positions[t0]  # (B, d)
    keys = np.concatenate([given_k, (x @ w_k)[:, None]], 1)
    values = np.concatenate([given_v, (x @ w_v)[:, None]], 1)

    def heads_of(z):  # (B, n, d) -> (B, h, n, d_h)
        return torch.from_numpy(z).reshape(batch, -1, heads, d // heads).transpose(1, 2)

    att = torch.nn.functional.scaled_dot_product_attention(
        heads_of((x @ w_q)[:, None]), heads_of(keys), heads_of(values)
    )  # (B, h, 1, d_h)
    a = transformer.layer_norm(x[:, None] + att.transpose(1, 2).reshape(batch, 1, d).numpy() @ w_o)
    y = transformer._cross_and_ffn(a, memory, *layer[1:], heads, None)
    np.testing.assert_array_equal(tokens[:, 0], (y[:, 0] @ w_out).argmax(-1))
    np.testing.assert_allclose(cache_k, keys, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(cache_v, values, rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------------------
# the wrong packed masks students write


def _wrong_packed():
    """name -> (implementation, the hint it must get, or None: it only has to fail)."""

    def tril(seg, k=0):
        n = np.shape(seg)[-1]
        return np.tril(np.ones((n, n), dtype=bool), k)

    def same(seg):
        seg = np.asarray(seg)
        return seg[..., :, None] == seg[..., None, :]

    def real_q(seg):
        return (np.asarray(seg) != 0)[..., :, None]

    def real_k(seg):
        return (np.asarray(seg) != 0)[..., None, :]

    return {
        "ignores the segments (causal AND padding)": (
            lambda s: tril(s) & real_q(s) & real_k(s),
            "a packed row holds several sentences",
        ),
        "no causal part (block diagonal)": (
            lambda s: same(s) & real_q(s),
            "the decoder's self-attention is causal",
        ),
        "j < i": (lambda s: tril(s, -1) & same(s) & real_q(s), "every position may attend"),
        "j <= i + 1": (lambda s: tril(s, 1) & same(s) & real_q(s), "one word of its future"),
        "padding is a segment": (lambda s: tril(s) & same(s), "segment 0 is padding"),
        "inverted": (lambda s: ~(tril(s) & same(s) & real_q(s)), "True means MAY attend"),
        "transposed": (
            lambda s: np.swapaxes(tril(s) & real_q(s) & real_k(s), -1, -2),
            "row i is the query",
        ),
        "ints instead of booleans": (
            lambda s: (tril(s) & same(s) & real_q(s)).astype(int),
            "build it with comparisons",
        ),
        "padding queries see the earlier real words, as in the chapter's mask": (
            lambda s: tril(s) & (same(s) & real_q(s) | ~real_q(s) & real_k(s)),
            None,
        ),
        "only the first row of the batch": (
            lambda s: np.broadcast_to(
                packed_decoder_mask(np.asarray(s).reshape(-1, np.shape(s)[-1])[0]),
                np.shape(s) + (np.shape(s)[-1],),
            ),
            None,
        ),
        "segments by boundaries, the first word of each sentence sees nothing": (
            lambda s: (
                tril(s, -1) & same(s) & real_q(s)
                | (np.eye(np.shape(s)[-1], dtype=bool) & real_q(s) & ~_first_word(s))
            ),
            None,
        ),
    }


def _first_word(seg):
    seg = np.asarray(seg)
    first = np.ones(seg.shape, dtype=bool)
    first[..., 1:] = seg[..., 1:] != seg[..., :-1]
    return first[..., :, None]


@pytest.mark.parametrize("wrong", sorted(_wrong_packed()))
def test_each_wrong_packed_mask_loses_points_public_and_hidden(wrong):
    fn, hint = _wrong_packed()[wrong]
    public = [
        _judge("packed_decoder_mask", fn, c) for c in checks.public_cases("packed_decoder_mask")
    ]
    assert not all(v.passed for v in public), wrong
    for seed in SEEDS:
        hidden = [
            _judge("packed_decoder_mask", fn, c, True)
            for c in checks.hidden_cases("packed_decoder_mask", seed)
        ]
        assert not all(v.passed for v in hidden), (wrong, seed)
    if hint is not None:
        assert any(hint in v.message for v in public if not v.passed), (wrong, public)


def test_the_corpus_has_five_wrong_masks_and_three_named():
    corpus = _wrong_packed()
    assert len(corpus) >= 5
    assert sum(hint is not None for _, hint in corpus.values()) >= 3


# ----------------------------------------------------------------------------------------
# every named mistake of the chapter is recognised with its hint


def _mistake_ids():
    return [(name, k) for name in CHECKS for k in range(len(checks.REGISTRY[name].mistakes))]


@pytest.mark.parametrize(("name", "k"), _mistake_ids())
def test_each_named_mistake_is_recognised_with_its_hint(name, k):
    """Run the mistake as a student: on some public case and on some hidden case it loses
    points with its own hint (two mistakes may share a case, not every case)."""
    mistake = checks.REGISTRY[name].mistakes[k]
    for hidden, cases in (
        (False, checks.public_cases(name)),
        (True, checks.hidden_cases(name, 11)),
    ):
        named = failed = 0
        for case in cases:
            try:
                verdict = _judge(name, mistake.outputs, case, hidden)
            except (ValueError, TypeError, IndexError):
                continue  # the mistake has no meaning for this case
            failed += not verdict.passed
            named += f"known mistake: {mistake.hint}" in verdict.message
        assert failed, (name, mistake.hint)
        assert named, (name, mistake.hint)


ISSUE_35 = {
    # the issue's list -> (check, a piece of the hint)
    "cross-attention queries from the memory": ("decoder_block", "queries come from A"),
    "/sqrt(d) instead of /sqrt(d_h)": ("decoder_step", "divide by sqrt(d) instead"),
    "scaling missing in one attention": ("decoder_block", "the cross-attention forgot"),
    "src_mask ignored": ("cross_attention", "apply src_mask"),
    "heads reshaped without a transpose": ("cross_attention", "a plain reshape"),
    "a missing residual": ("decoder_block", "has a residual connection too"),
    "a missing final norm": ("decoder_block", "the layer ends with a norm"),
    "a flipped gradient sign": ("teacher_forced_loss", "points uphill"),
    "a cache holding inputs": ("decoder_step", "not the inputs x_s"),
    "keys and values swapped": ("decoder_step", "keys and values are swapped"),
    "an off-by-one position in greedy decoding": ("greedy_decode_cached", "off by one"),
    "unscaled embeddings": ("greedy_decode_cached", "your embedding is not scaled"),
    "a callee's fault named": ("decoder_block", "fix cross_attention first"),
}


@pytest.mark.parametrize("item", sorted(ISSUE_35))
def test_the_issue_35_mistakes_are_named(item):
    name, piece = ISSUE_35[item]
    assert any(piece in m.hint for m in checks.REGISTRY[name].mistakes), item


def test_a_decoder_block_on_a_cross_attention_without_scaling_is_told_to_fix_it_first():
    def cross_unscaled(x, memory, w_q, w_k, w_v, w_o, num_heads=1, src_mask=None):
        w_q = np.asarray(w_q) * math.sqrt(np.shape(w_q)[1] // num_heads)
        return transformer.cross_attention(x, memory, w_q, w_k, w_v, w_o, num_heads, src_mask)

    def block(y, memory, self_attn, cross_attn, w_1, b_1, w_2, b_2, num_heads, src_mask=None):
        n = np.shape(y)[-2]
        causal = np.tril(np.ones((n, n), dtype=bool))
        norm = transformer.layer_norm
        a = norm(y + cross_unscaled(y, y, *self_attn, num_heads, causal)[0])
        b = norm(a + cross_unscaled(a, memory, *cross_attn, num_heads, src_mask)[0])
        return norm(b + transformer.position_wise_ffn(b, w_1, b_1, w_2, b_2))

    verdicts = [_judge("decoder_block", block, c) for c in checks.public_cases("decoder_block")]
    assert all(not v.passed and "fix cross_attention first" in v.message for v in verdicts)


def test_shift_right_returning_floats_fails_with_the_integer_hint_public_and_hidden():
    def floats(targets, bos_id):
        return transformer.shift_right(targets, bos_id).astype(float)

    for case, hidden in _all_cases("shift_right"):
        verdict = _judge("shift_right", floats, case, hidden)
        assert not verdict.passed
        assert "integer array" in verdict.message and "token ids are integers" in verdict.message
        assert ("another dtype" in verdict.message) == hidden


def test_greedy_that_recomputes_the_prefix_instead_of_reading_the_cache_fails():
    """A decoder that re-runs the layer on the tokens it has fed (no cache read): right on an
    empty cache, wrong on every prompt cache, public and hidden."""

    def recompute(
        memory,
        embed,
        positions,
        w_out,
        self_attn,
        cross_attn,
        w_1,
        b_1,
        w_2,
        b_2,
        num_heads,
        start_id,
        max_len,
        cache_k,
        cache_v,
        src_mask=None,
    ):
        embed, positions = np.asarray(embed), np.asarray(positions)
        batch, t0, d = np.shape(cache_k)
        fed, chosen = [np.full(batch, start_id)], []
        for t in range(max_len):
            tokens = np.stack(fed, axis=1)
            x = math.sqrt(d) * embed[tokens] + positions[t0 : t0 + t + 1]
            y = transformer.decoder_block(
                x, memory, self_attn, cross_attn, w_1, b_1, w_2, b_2, num_heads, src_mask
            )
            chosen.append((y[:, -1] @ w_out).argmax(-1))
            fed.append(chosen[-1])
        x = math.sqrt(d) * embed[np.stack(fed[:-1], 1)] + positions[t0 : t0 + max_len]
        k = np.concatenate([cache_k, x @ self_attn[1]], axis=-2)
        v = np.concatenate([cache_v, x @ self_attn[2]], axis=-2)
        return np.stack(chosen, axis=1), k, v

    name = "greedy_decode_cached"
    runs = [(False, checks.public_cases(name))]
    runs += [(True, checks.hidden_cases(name, seed)) for seed in range(20)]
    for hidden, cases in runs:
        prompt_failed = False
        for case in cases:
            verdict = _judge(name, recompute, case, hidden)
            if np.shape(case.args[13])[1] == 0:
                assert verdict.passed, verdict.message  # an empty cache: no prompt to read
            else:
                prompt_failed |= not verdict.passed
        assert prompt_failed  # the check as a whole never gives it full marks
    # and the first prompt case (3 sentences, 5 steps) is lost at every one of these seeds
    for seed in range(20):
        first = checks.hidden_cases(name, seed)[0]
        assert not _judge(name, recompute, first, True).passed


# ----------------------------------------------------------------------------------------
# mistakes as a student writes them: a forgotten shift, np.roll's wrap-around, and a decoder
# whose cross-attention takes its keys and values from the decoder


def _layer_norm(x, eps=1e-5):  # the notebook's given helper
    centred = x - x.mean(-1, keepdims=True)
    return centred / np.sqrt((centred**2).mean(-1, keepdims=True) + eps)


def _block_cross_from_decoder(
    y, memory, self_attn, cross_attn, w_1, b_1, w_2, b_2, num_heads, src_mask=None
):
    y = np.asarray(y, dtype=float)
    n = y.shape[-2]
    causal = np.arange(n)[None, :] <= np.arange(n)[:, None]
    a = _layer_norm(y + transformer.cross_attention(y, y, *self_attn, num_heads, causal)[0])
    b = _layer_norm(a + transformer.cross_attention(a, a, *cross_attn, num_heads)[0])
    return _layer_norm(b + np.maximum(0.0, b @ w_1 + b_1) @ w_2 + b_2)


def _step_cross_from_decoder(
    x_t,
    cache_k,
    cache_v,
    memory,
    self_attn,
    cross_attn,
    w_1,
    b_1,
    w_2,
    b_2,
    num_heads,
    src_mask=None,
):
    x_t = np.asarray(x_t, dtype=float)
    w_q, w_k, w_v, w_o = self_attn
    cache_k = np.concatenate([cache_k, x_t @ w_k], axis=-2)
    cache_v = np.concatenate([cache_v, x_t @ w_v], axis=-2)
    split = multihead.split_heads
    q, k, v = split(x_t @ w_q, num_heads), split(cache_k, num_heads), split(cache_v, num_heads)
    weights = transformer.softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]))
    a = _layer_norm(x_t + multihead.merge_heads(weights @ v) @ w_o)
    b = _layer_norm(a + transformer.cross_attention(a, a, *cross_attn, num_heads)[0])
    return _layer_norm(b + np.maximum(0.0, b @ w_1 + b_1) @ w_2 + b_2), cache_k, cache_v


STUDENT_MISTAKES = {
    # name -> (check, the student's function, the hints any of which its failures may name)
    "forgot to shift": (
        "shift_right",
        lambda targets, bos_id: np.asarray(targets),
        ("the targets were not shifted", "np.roll wraps around"),
    ),
    "np.roll, no BOS": (
        "shift_right",
        lambda targets, bos_id: np.roll(targets, 1, axis=-1),
        ("np.roll wraps around",),
    ),
    "np.roll without axis": (
        "shift_right",
        lambda targets, bos_id: np.roll(np.asarray(targets), 1),
        ("np.roll without axis=-1", "np.roll wraps around"),
    ),
    "decoder_block: keys and values from the decoder": (
        "decoder_block",
        _block_cross_from_decoder,
        ("your layer passes the decoder's states twice",),
    ),
    "decoder_step: keys and values from the decoder": (
        "decoder_step",
        _step_cross_from_decoder,
        ("your layer passes the decoder's states twice",),
    ),
}


@pytest.mark.parametrize("wrong", sorted(STUDENT_MISTAKES))
def test_a_students_mistake_fails_every_case_named_on_public_and_hidden(wrong):
    """Written as a student writes it: every public and hidden case (3 seeds) fails, each
    with one of the mistake's hints, and its own first hint is named on a public and on a
    hidden case."""
    name, fn, hints = STUDENT_MISTAKES[wrong]
    named = {False: 0, True: 0}
    for case, hidden in _all_cases(name):
        verdict = _judge(name, fn, case, hidden)
        assert not verdict.passed, (case.name, hidden)
        assert any(hint in verdict.message for hint in hints), verdict.message
        named[hidden] += hints[0] in verdict.message
    assert named[False] and named[True], named


# ----------------------------------------------------------------------------------------
# the references pass their own cases


@pytest.mark.parametrize("name", ["packed_decoder_mask", "greedy_decode_cached"])
def test_the_answer_keys_pass_their_public_and_hidden_cases(name):
    assert checks.REGISTRY[name].reference.module == "answers.ch6_transformer"
    for case, hidden in _all_cases(name):
        verdict = _judge(name, checks.REGISTRY[name].reference, case, hidden)
        assert verdict.passed, verdict.message


@pytest.mark.parametrize("name", CHECKS)
def test_a_hidden_case_still_has_at_most_64_messages_with_every_named_mistake(name):
    """The named mistakes add hidden messages: with every one of them, and hostile outputs,
    a hidden case of each ch6 check still says at most 64 things (6 bits)."""
    import dataclasses
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_checker_messages import _hostile_outcomes

    from autograder.checking import judging
    from autograder.student import contract

    rng = np.random.default_rng(0)
    spec = checks.spec(name)
    case = checks.prepare(name, checks.hidden_cases(name, 3)[0], hidden=True)
    messages = set()
    with np.errstate(all="ignore"):
        outcomes = list(_hostile_outcomes(case.expected, rng))
        outcomes += [contract.Outcome("value", outputs) for _, outputs in case.mistakes]
        for outcome in outcomes:
            verdict = judging.judge(spec, dataclasses.replace(case, hidden=True), outcome)
            if not verdict.passed:
                messages.add(verdict.message)
    assert len(messages) <= 64, len(messages)


# ----------------------------------------------------------------------------------------
# issue 45: a hint named on a coincidence of a degenerate case (a one-word target)


def test_a_one_word_target_does_not_name_np_roll_for_unshifted_targets():
    """A one-word target rolls onto itself: unshifted targets matched "np.roll wraps around"
    there alone. That mistake is named only where every failing case agrees; the other
    failing cases name the real cause, in both languages, with its exact words."""
    name = "shift_right"
    not_shifted = next(m.hint for m in plugin.SHIFT_RIGHT.mistakes if "not shifted" in m.hint)
    zh = checks.translated_hint(not_shifted, "zh_CN", "ch6_transformer")
    assert zh != not_shifted
    for language, hint, known in (
        ("en", not_shifted, "your result matches a known mistake: "),
        ("zh_CN", zh, "你的结果与一个已知错误一致："),
    ):
        failed = judged.failing(name, lambda targets, bos_id: np.asarray(targets), SEEDS, language)
        one_word = checks.translated_hint("a one-word target", language, "ch6_transformer")
        assert any(v.case == one_word for v in failed)
        for v in failed:
            assert "np.roll" not in v.message, v.message
            if v.case != one_word:
                assert v.message.endswith(known + hint), v.message


def test_no_hint_of_the_chapter_prints_the_fix_as_code():
    """Issue 45, item 5: a hint names the cause and where to look, never the code to write
    (a call, an index expression, a line of the solution)."""
    code = ("np.where(", "np.repeat", "np.tile", "[:, None", "axis=-1)", " @ w_", "rowsum(", "`")
    code += ("dS = P", "dQ = dS", "dx_kv = ", "dW_o = M", "f = F *", "g_ijl = ", "_layer_norm(")
    for text in checks.hint_texts("ch6_transformer"):
        assert not any(c in text for c in code), text
