"""solutions/explorer.py: the explorer's weights are the models' own attention.

Each chapter's weights with every mask on are compared with the model's own forward pass
(``Seq2Seq.forward`` and ``greedy_decode``, ``attention_maps``, ``Translator.forward`` and
``greedy_decode``); with a mask off, with a computation written here from the model's
parameters, or with a property the mask's removal must have. Untrained seeded models: what
is tested is the bookkeeping (padding, teacher forcing, slicing, masks), which does not
depend on training. Then the page's data (escaped, rounded) and the saved parameters.
"""

from __future__ import annotations

import html.parser
import json
import math

import numpy as np
import pytest
import torch

from solutions import explorer, zh_en
from solutions import seq2seq as s2s
from solutions.multihead import TinyTransformer, attention_maps, make_toy_data
from solutions.transformer import Translator, greedy_decode

SENTENCES = ["four double seven oh two triple five one", "five oh one", "nine oh oh three"]
WORDS = [s.split() for s in SENTENCES]
ZH = ["我 昨天 在 公园 看见了 一只 蝴蝶", "我 看见了 一只 蝴蝶"]


def _above(n):
    """The entries above the diagonal of an (n, n) matrix: the keys after the query."""
    return np.triu(np.ones((n, n), dtype=bool), 1)


@pytest.fixture(scope="module")
def seq2seq_models():
    models = {}
    for seed, kind in enumerate(("additive", "dot")):
        torch.manual_seed(seed)
        models[kind] = s2s.Seq2Seq(kind, 16, 32, 32).eval()
    return models


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(3)
    return TinyTransformer(11, 32, 4, 2, 64, max_len=17).eval()


@pytest.fixture(scope="module")
def translator():
    torch.manual_seed(4)
    model = Translator(len(zh_en.SOURCE_VOCAB), len(zh_en.TARGET_VOCAB), 32, 4, 2, 64, False)
    model.core.decoder = model.core.decoder[:1]  # one decoder layer, as the chapter's
    with torch.no_grad():  # untrained, it writes <eos>, <pad>, <bos>: now 32 words
        model.out_bias[[zh_en.PAD, zh_en.BOS, zh_en.EOS]] = -100.0
    return model.eval()


def test_variants_are_every_subset_of_the_masks_all_on_first():
    assert explorer.variants(("causal", "padding")) == [
        ("causal", "padding"),
        ("causal",),
        ("padding",),
        (),
    ]
    keys = [explorer.variant_key(v) for v in explorer.variants(("padding", "causal"))]
    assert keys == ["causal+padding", "padding", "causal", ""]  # sorted: as the page's


# ----------------------------------------------------------------------------------------
# chapter 3


@pytest.mark.parametrize("kind", ["additive", "dot"])
def test_seq2seq_weights_with_the_mask_are_the_models_forward_and_greedy_weights(
    seq2seq_models, kind
):
    model = seq2seq_models[kind]
    written, weights = explorer.seq2seq_weights(model, SENTENCES)  # (B, T, n_src)
    src, src_mask = model.src_vocab.batch(WORDS)
    ids, greedy = model.decode_ids(src, src_mask, 2 * src.shape[1] + 2)
    assert torch.equal(written, ids)
    tgt_in = torch.cat([torch.full_like(ids[:, :1], model.tgt_vocab.bos_id), ids[:, :-1]], 1)
    with torch.no_grad():
        _, forward = model(src, src_mask, tgt_in)  # teacher forcing, the model's own
    np.testing.assert_allclose(weights, forward.double().numpy(), atol=1e-6)
    outputs, _ = model.greedy_decode(SENTENCES)
    for b, words in enumerate(WORDS):
        labels = explorer.written_labels(model.tgt_vocab, ids[b])
        n_src, rows = len(words), len(labels)
        # greedy decoding wrote these ids with these weights (up to its <eos>)
        np.testing.assert_allclose(weights[b, :rows], greedy[b, :rows].numpy(), atol=1e-6)
        assert [w for w in labels if w[0] != "<"] == outputs[b]
        assert np.all(weights[b, :rows, n_src:] == 0)  # <pad> keys hidden
        np.testing.assert_allclose(weights[b, :rows].sum(-1), 1, atol=1e-6)


@pytest.mark.parametrize("kind", ["additive", "dot"])
def test_seq2seq_weights_without_the_mask_spread_over_the_pad_keys(seq2seq_models, kind):
    model = seq2seq_models[kind]
    written, masked = explorer.seq2seq_weights(model, SENTENCES)
    same, unmasked = explorer.seq2seq_weights(model, SENTENCES, padding=False)
    assert torch.equal(written, same)  # the same words written, teacher-forced
    b, n_src = 1, 3  # "five oh one", padded to 8 words
    np.testing.assert_allclose(unmasked[b].sum(-1), 1, atol=1e-6)
    assert np.all(unmasked[b, :, n_src:] > 0)
    # the first step's state has read nothing yet: the mask only renormalises its row
    first = unmasked[b, 0, :n_src] / unmasked[b, 0, :n_src].sum()
    np.testing.assert_allclose(first, masked[b, 0, :n_src], atol=1e-6)
    if kind == "dot":  # the pad states are zero vectors: score 0, one weight for all
        h, _, _ = model.encode(*model.src_vocab.batch(WORDS))
        assert torch.all(h[b, n_src:] == 0)
        pads = unmasked[b, :, n_src:]  # (T, 5)
        np.testing.assert_allclose(pads, np.repeat(pads[:, :1], 5, axis=1))


def test_seq2seq_example_rows_are_the_digits_written_and_the_columns_the_padded_source(
    seq2seq_models,
):
    example = explorer.seq2seq_example(seq2seq_models, "five oh one", SENTENCES)
    assert example["sentence"] == "five oh one"
    for view, (name, model) in zip(example["views"], seq2seq_models.items()):
        written, full = explorer.seq2seq_weights(model, SENTENCES)
        queries = explorer.written_labels(model.tgt_vocab, written[1])
        assert view["name"] == name
        assert view["queries"] == queries and len(queries) >= 1
        assert view["keys"] == ["five", "oh", "one"] + ["<pad>"] * 5
        assert set(view["weights"]) == {"padding", ""}
        n = len(queries)
        np.testing.assert_allclose(view["weights"]["padding"][0][0], full[1, :n], atol=5e-5)
        _, bare = explorer.seq2seq_weights(model, SENTENCES, padding=False)
        np.testing.assert_allclose(view["weights"][""][0][0], bare[1, :n], atol=5e-5)


# ----------------------------------------------------------------------------------------
# chapter 5


def test_decoder_only_weights_with_the_causal_mask_are_attention_maps(tiny):
    tokens = make_toy_data(1, 8, seed=5)[0]
    weights = explorer.decoder_only_weights(tiny, tokens)
    np.testing.assert_allclose(weights, attention_maps(tiny, tokens), atol=1e-7)
    assert np.all(np.triu(weights, 1) == 0)


def test_decoder_only_weights_without_the_mask_are_softmax_of_every_score(tiny):
    tokens = make_toy_data(1, 8, seed=6)[0]
    weights = explorer.decoder_only_weights(tiny, tokens, causal=False)
    # layer 1 written out from the parameters: pre-LN, q = LN(x) W_q + b_q, ...
    with torch.no_grad():
        x = tiny.embed(tokens[None]) + tiny.positions[: len(tokens)]  # (1, n, d)
        block = tiny.blocks[0]
        z = block.norm1(x)[0].double().numpy()  # (n, d)
    attn = block.attn
    d_h = attn.d_head

    def project(linear):
        return z @ linear.weight.detach().double().numpy().T + linear.bias.detach().numpy()

    q, k = project(attn.q_proj), project(attn.k_proj)  # (n, d)
    for head in range(attn.num_heads):
        part = slice(head * d_h, (head + 1) * d_h)
        scores = q[:, part] @ k[:, part].T / math.sqrt(d_h)  # (n, n): nothing hidden
        expected = np.exp(scores - scores.max(-1, keepdims=True))
        expected /= expected.sum(-1, keepdims=True)
        np.testing.assert_allclose(weights[0, head], expected, atol=1e-5)
    assert np.all(weights[0][:, _above(len(tokens))] > 0)  # the future, visible now


def test_decoder_only_example_labels_the_separator(tiny):
    tokens = make_toy_data(1, 8, seed=7)[0]
    labels = explorer.token_labels(tokens)
    example = explorer.decoder_only_example("reverse", tiny, tokens, labels)
    (view,) = example["views"]
    assert labels[8] == "|" and view["queries"] == view["keys"] == labels
    assert set(view["weights"]) == {"causal", ""}
    assert np.array(view["weights"]["causal"]).shape == (2, 4, 17, 17)


# ----------------------------------------------------------------------------------------
# chapter 6


def _one_sentence(model, sentence):
    """src (1, n_src), tgt_in (1, n_tgt) = <bos> + the greedy translation."""
    words = explorer.translate(model, sentence)
    src = torch.tensor([zh_en.SOURCE_VOCAB.encode(sentence.split())])
    tgt_in = torch.tensor([[zh_en.BOS, *zh_en.TARGET_VOCAB.encode(words)]])
    return src, tgt_in, words


def test_translator_weights_with_every_mask_are_the_models_forward(translator):
    src, tgt_in, outputs = explorer.translator_batch(translator, ZH)
    padded = explorer.translator_weights(translator, src, tgt_in)
    for b, sentence in enumerate(ZH):
        one_src, one_tgt, words = _one_sentence(translator, sentence)
        assert words == outputs[b]
        with torch.no_grad():
            _, own = translator(one_src, one_tgt)  # the sentence alone, nothing padded
        n_src, n_tgt = one_src.shape[1], one_tgt.shape[1]
        for kind, n_q, n_k in (
            ("encoder", n_src, n_src),
            ("decoder_self", n_tgt, n_tgt),
            ("cross", n_tgt, n_src),
        ):
            mine = padded[kind][:, b, :, :n_q]  # (layers, h, n_q, n_k padded)
            theirs = torch.stack(own[kind])[:, 0].double().numpy()
            np.testing.assert_allclose(mine[..., :n_k], theirs, atol=1e-5)
            assert np.all(mine[..., n_k:] == 0)  # pad keys (source or target) hidden
        _, cross = greedy_decode(translator, one_src, max_len=32)  # (L, 1, h, t, n_src)
        steps = min(cross.shape[-2], n_tgt)
        np.testing.assert_allclose(
            padded["cross"][:, b, :, :steps, :n_src],
            cross[:, 0, :, :steps].double().numpy(),
            atol=1e-5,
        )


def test_translator_weights_without_a_mask(translator):
    src, tgt_in, outputs = explorer.translator_batch(translator, ZH)
    assert all(len(words) == 32 for words in outputs)  # no empty translation
    b = 1  # the shorter sentence: 3 <pad> keys
    n_src, n_tgt = 4, len(outputs[b]) + 1
    no_pad = explorer.translator_weights(translator, src, tgt_in, padding=False)
    assert np.all(no_pad["encoder"][:, b, :, :n_src, n_src:] > 0)
    assert np.all(no_pad["cross"][:, b, :, :n_tgt, n_src:] > 0)
    no_causal = explorer.translator_weights(translator, src, tgt_in, causal=False)
    # layer 1 of the decoder, post-LN: its self-attention reads the embedded target; with
    # no causal mask the model's own module, masking only the target's padding
    with torch.no_grad():
        y = translator._embed(translator.tgt_embed, tgt_in[b : b + 1, :n_tgt])
        _, expected = translator.core.decoder[0].self_attn(y)  # (1, h, n, n)
    np.testing.assert_allclose(
        no_causal["decoder_self"][0, b, :, :n_tgt, :n_tgt],
        expected[0].double().numpy(),
        atol=1e-5,
    )
    assert np.all(no_causal["decoder_self"][0, b, :, :n_tgt, :n_tgt][:, _above(n_tgt)] > 0)
    # the encoder does not depend on the causal mask
    np.testing.assert_allclose(
        no_causal["encoder"], explorer.translator_weights(translator, src, tgt_in)["encoder"]
    )


def test_translator_example_has_three_views_under_four_mask_settings(translator):
    example = explorer.translator_example(translator, ZH[1], ZH)
    assert example["sentence"] == "我看见了一只蝴蝶"
    words = explorer.translate(translator, ZH[1])
    by_name = {v["name"]: v for v in example["views"]}
    source = ZH[1].split() + ["<pad>"] * 3
    assert by_name["encoder"]["queries"] == ZH[1].split()
    assert by_name["encoder"]["keys"] == by_name["cross"]["keys"] == source
    assert by_name["decoder_self"]["keys"] == ["<bos>", *words]
    assert by_name["decoder_self"]["queries"] == by_name["cross"]["queries"] == [*words, "<eos>"]
    for view in by_name.values():
        assert set(view["weights"]) == {"causal+padding", "causal", "padding", ""}
        for weights in view["weights"].values():
            array = np.array(weights)
            assert array.shape[2:] == (len(view["queries"]), len(view["keys"]))
            np.testing.assert_allclose(array.sum(-1), 1, atol=5e-4)  # rounded rows


# ----------------------------------------------------------------------------------------
# the page's data and the saved parameters


class _Scripts(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.scripts, self.inside = [], False

    def handle_starttag(self, tag, attrs):
        self.inside = tag == "script"
        if self.inside:
            self.scripts.append("")

    def handle_endtag(self, tag):
        self.inside = False

    def handle_data(self, data):
        if self.inside:
            self.scripts[-1] += data


def test_the_page_data_cannot_end_its_script_and_reads_back_as_json():
    hostile = "</script><script>alert(1)</script> & <!--"
    example = {
        "sentence": hostile,
        "views": [explorer.view("cross", [hostile], ["a"], {(): [[[[1.0]]]]})],
    }
    page = explorer.explorer_html("ch9", ["padding"], [example])
    assert page.count("</script>") == 1 and "<!--" not in page
    parser = _Scripts()
    parser.feed(page)
    (script,) = parser.scripts
    data = json.loads(script)
    assert data["examples"][0]["sentence"] == hostile
    assert data["examples"][0]["views"][0]["weights"] == {"": [[[[1.0]]]]}
    assert data["masks"] == ["padding"] and data["chapter"] == "ch9"


def test_weights_are_rounded_to_four_decimals():
    assert explorer.rounded([[[[0.123456, 0.876544]]]]) == [[[[0.1235, 0.8765]]]]


def test_saved_models_rebuild_the_same_weights(tmp_path, seq2seq_models, tiny, translator):
    html_text = explorer.seq2seq_page(seq2seq_models, SENTENCES, tmp_path)
    assert 'class="attention-explorer"' in html_text
    loaded, sentences = explorer.load_saved("ch3_seq2seq", tmp_path)
    assert sentences == SENTENCES and list(loaded) == list(seq2seq_models)
    for name, model in seq2seq_models.items():
        written, weights = explorer.seq2seq_weights(loaded[name], SENTENCES)
        assert torch.equal(written, explorer.seq2seq_weights(model, SENTENCES)[0])
        np.testing.assert_array_equal(weights, explorer.seq2seq_weights(model, SENTENCES)[1])
    tokens = make_toy_data(2, 8, seed=8)
    explorer.decoder_only_page({"reverse": tiny}, {"reverse": tokens}, tmp_path)
    loaded, sequences = explorer.load_saved("ch5_multihead", tmp_path)
    assert sequences == {"reverse": tokens.tolist()}
    np.testing.assert_array_equal(
        explorer.decoder_only_weights(loaded["reverse"], tokens[0]),
        explorer.decoder_only_weights(tiny, tokens[0]),
    )
    explorer.translator_page(translator, ZH, tmp_path)
    loaded, sentences = explorer.load_saved("ch6_transformer", tmp_path)
    assert sentences == ZH
    src, tgt_in, _ = explorer.translator_batch(translator, ZH)
    mine = explorer.translator_weights(loaded["translator"], src, tgt_in)
    theirs = explorer.translator_weights(translator, src, tgt_in)
    for kind in theirs:
        np.testing.assert_array_equal(mine[kind], theirs[kind])


def test_an_unknown_model_is_refused():
    with pytest.raises(TypeError, match="no model of type Linear"):
        explorer.constructor_arguments(torch.nn.Linear(2, 2))


def test_the_build_checks_what_the_paragraphs_say_of_the_masks(translator):
    """check_masks: <pad> keys and later keys get 0 under their mask and some weight
    without it; a page whose mask hid nothing, or showed nothing more without it, or
    whose rows are no distributions, fails the build."""
    masks = ["causal", "padding"]
    examples = [explorer.translator_example(translator, s, ZH) for s in ZH]
    explorer.check_masks(examples, masks)  # the model's own: fine
    cross = next(v for v in examples[1]["views"] if v["name"] == "cross")
    cross["weights"]["causal+padding"] = cross["weights"]["causal"]  # padding "on"
    with pytest.raises(AssertionError, match="the padding mask hides nothing"):
        explorer.check_masks(examples, masks)
    examples = [explorer.translator_example(translator, s, ZH) for s in ZH]
    for example in examples:
        decoder = next(v for v in example["views"] if v["name"] == "decoder_self")
        decoder["weights"]["padding"] = decoder["weights"]["causal+padding"]  # "off"
    with pytest.raises(AssertionError, match=r"without the \['causal'\] mask"):
        explorer.check_masks(examples, masks)
    examples[0]["views"][0]["weights"]["causal"] = [[[[0.5, 0.4]]]]
    with pytest.raises(AssertionError, match="no distribution"):
        explorer.check_masks(examples, masks)
