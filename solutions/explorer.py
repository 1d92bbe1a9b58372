"""The data of the attention explorer: a trained model's weights, ready for the page.

The explorer (book/_static/explorer.js) lets a reader pick a sentence, a view (which
attention of which model), a layer and a head, and point at a query to read its weights
over the keys. Everything it shows is computed here, when the book is built, from the
chapter's own trained model; the page only draws it. One module for three chapters:

- ``seq2seq_example``: chapter 3's GRU encoder-decoders (Bahdanau's and Luong's
  attention over the source), teacher-forced on each model's own greedy translation.
- ``decoder_only_example``: chapter 5's ``TinyTransformer``s (causal self-attention,
  every layer and head).
- ``translator_example``: chapter 6's ``Translator`` (encoder self-attention, masked
  decoder self-attention, cross-attention), teacher-forced on its greedy translation.
- Masks: each weight tensor is given for every combination of the chapter's masks
  (``padding`` hides the ``<pad>`` keys of a sentence padded to its batch, ``causal``
  hides the future), the model run with those masks only, whole (a mask left out
  changes every later layer too): the explorer's check boxes switch between them.
- ``explorer_html``: the container the page's script fills, the data as JSON inside a
  ``<script type="application/json">``; ``save_models``: the parameters and the
  sentences under ``_build/explorer/``, so a test can recompute every number shown
  (tests/test_explorer_browser.py).

Weights are nested lists ``[layer][head][query][key]`` rounded to 4 decimals.
"""

from __future__ import annotations

import html
import itertools
import json
from pathlib import Path

import numpy as np
import torch

from solutions import seq2seq as s2s
from solutions import zh_en
from solutions.multihead import TinyTransformer
from solutions.self_attention import padding_mask
from solutions.shipped import constructor_arguments, load_model
from solutions.transformer import Translator, decoder_mask, greedy_decode

DECIMALS = 4
SAVED = Path(__file__).resolve().parents[1] / "_build" / "explorer"
PAD_LABEL, BOS_LABEL, EOS_LABEL = "<pad>", "<bos>", "<eos>"


def variants(masks: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Every subset of ``masks`` (all on first), in the chapter's order."""
    return [
        tuple(m for m, on in zip(masks, flags) if on)
        for flags in itertools.product((True, False), repeat=len(masks))
    ]


def variant_key(active) -> str:
    """The JSON key of a set of active masks: their names joined by '+' in sorted
    order ('' = no mask), so the page builds the same key from its check boxes."""
    return "+".join(sorted(active))


def rounded(weights) -> list:
    """(layers, h, n_q, n_k) -> nested lists of floats with ``DECIMALS`` decimals."""
    return np.round(np.asarray(weights, dtype=np.float64), DECIMALS).tolist()


def view(
    name: str, queries, keys, weights_by_variant: dict, causal: bool = False
) -> dict:
    """One attention of one model on one sentence: its rows (queries), its columns
    (keys), whether the causal mask hides key j > i from query i, and its weights for
    each combination of masks."""
    return {
        "name": name,
        "queries": list(queries),
        "keys": list(keys),
        "causal": causal,
        "weights": {variant_key(v): rounded(w) for v, w in weights_by_variant.items()},
    }


def check_masks(examples: list[dict], masks) -> None:
    """What the chapters' paragraphs say of the explorer, checked on the examples the
    page shows: every row is a distribution (to the rounding); with every mask on, the
    ``<pad>`` keys and, under the causal mask, the later keys have weight 0; with a mask
    off, the keys it hid take weight (somewhere on the page: under Luong's dot score a
    ``<pad>`` state is a zero vector, and its weight can round to 0)."""
    masks = tuple(masks)
    seen = dict.fromkeys(masks, 0.0)  # weight on the hidden keys, each mask off
    for example in examples:
        for v in example["views"]:
            weights = {k: np.asarray(w) for k, w in v["weights"].items()}
            on = weights[variant_key(masks)]
            for key, w in weights.items():
                if not np.allclose(w.sum(-1), 1, atol=1e-3):
                    raise AssertionError(
                        f"{v['name']} ({key!r}): a row is no distribution"
                    )
            n_q, n_k = on.shape[-2:]
            hidden = {
                "padding": np.array([k == PAD_LABEL for k in v["keys"]])[None, :],
                "causal": np.triu(np.ones((n_q, n_k), bool), 1) & v["causal"],
            }
            for mask in masks:
                where = np.broadcast_to(hidden[mask], (n_q, n_k))
                if np.any(on[..., where] != 0):
                    raise AssertionError(
                        f"{v['name']} of {example['sentence']!r}: the {mask} mask "
                        "hides nothing"
                    )
                off = weights[variant_key(m for m in masks if m != mask)]
                seen[mask] += float(off[..., where].sum())
    unseen = [mask for mask, weight in seen.items() if not weight > 0]
    if unseen:
        raise AssertionError(f"without the {unseen} mask nothing more is seen")


# --------------------------------------------------------------------------------------
# chapter 3: a GRU decoder attending over the source


@torch.no_grad()
def seq2seq_weights(model: s2s.Seq2Seq, sources, padding: bool = True):
    """The attention weights of ``model`` teacher-forced on its own greedy output for
    each source, the sources padded to the longest (as ``greedy_decode`` batches them):
    the ids written (B, T), <eos> included, and the weights (B, T, n_src), one row per
    id written.

    ``padding=False`` drops the padding mask from the attention (the encoder still
    reads each source to its end, as packing does): the weight the decoder would give
    the ``<pad>`` positions' states if nothing hid them."""
    model.eval()
    sources = [s2s.tokenize(s) if isinstance(s, str) else list(s) for s in sources]
    src, src_mask = model.src_vocab.batch(sources)  # (B, n_src)
    written, _ = model.decode_ids(src, src_mask, 2 * src.shape[1] + 2)  # (B, T)
    bos = torch.full_like(written[:, :1], model.tgt_vocab.bos_id)
    tgt_in = torch.cat([bos, written[:, :-1]], dim=1)  # (B, T): what each step reads
    h, h_proj, state = model.encode(src, src_mask)
    rows = []
    for t in range(tgt_in.shape[1]):  # the loop of Seq2Seq.forward, mask chosen
        _, state, w = model.decoder.step(
            tgt_in[:, t], state, h, src_mask if padding else None, h_proj
        )
        rows.append(w)  # (B, n_src)
    return written, torch.stack(rows, dim=1).double().numpy()  # (B, T), (B, T, n_src)


def written_labels(vocab: s2s.Vocab, ids) -> list[str]:
    """The tokens written, up to and including the first <eos>."""
    labels = []
    for i in ids:
        labels.append(vocab.itos[int(i)])
        if int(i) == vocab.eos_id:
            break
    return labels


def seq2seq_example(models: dict, source: str, batch) -> dict:
    """One sentence of chapter 3 through each model (name -> ``Seq2Seq``): rows are the
    digits each writes (and <eos>), columns the source words padded to the longest of
    ``batch`` (which contains ``source``)."""
    sources = [s2s.tokenize(s) for s in batch]
    index = batch.index(source)
    width = max(len(s) for s in sources)
    keys = sources[index] + [PAD_LABEL] * (width - len(sources[index]))
    views = []
    for name, model in models.items():
        runs = {
            v: seq2seq_weights(model, sources, "padding" in v)
            for v in variants(("padding",))
        }
        written, _ = runs[("padding",)]
        queries = written_labels(model.tgt_vocab, written[index])
        by_variant = {  # (1 layer, 1 head, rows, n_src)
            v: w[index][None, None, : len(queries)] for v, (_, w) in runs.items()
        }
        views.append(view(name, queries, keys, by_variant))
    return {"sentence": source, "views": views}


# --------------------------------------------------------------------------------------
# chapter 5: a decoder-only Transformer


@torch.no_grad()
def decoder_only_weights(model: TinyTransformer, tokens, causal: bool = True):
    """Every layer's weights (layers, h, n, n) of one sequence, with or without the
    causal mask (``TinyTransformer.forward`` without its cache, the mask chosen)."""
    model.eval()
    tokens = torch.as_tensor(tokens)[None]  # (1, n)
    n = tokens.shape[-1]
    x = model.embed(tokens) + model.positions[:n]  # (1, n, d)
    mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    weights = []
    for block in model.blocks:
        x, w = block(x, mask=mask)  # (1, n, d), (1, h, n, n)
        weights.append(w[0])
    return torch.stack(weights).double().numpy()  # (layers, h, n, n)


def decoder_only_example(name: str, model: TinyTransformer, tokens, labels) -> dict:
    """One sequence of chapter 5 through ``model``: its tokens are queries and keys."""
    by_variant = {
        v: decoder_only_weights(model, tokens, "causal" in v)
        for v in variants(("causal",))
    }
    return {
        "sentence": " ".join(labels),
        "views": [view(name, labels, labels, by_variant, causal=True)],
    }


# --------------------------------------------------------------------------------------
# chapter 6: the encoder-decoder translator


@torch.no_grad()
def translator_weights(model: Translator, src, tgt_in, causal=True, padding=True):
    """``Translator.forward`` with the masks chosen: src (B, n_src) and tgt_in
    (B, n_tgt) ids -> the dict of per-layer weights ("encoder", "decoder_self",
    "cross"), NumPy (layers, B, h, n_q, n_k). ``padding=False`` lets every query see
    the source's ``<pad>`` keys; ``causal=False`` lets each target position see the
    later ones (but not the target's own padding, which no view shows)."""
    model.eval()
    src_mask = model.src_mask(src) if padding else None  # (B, 1, n_src)
    lens = (tgt_in != zh_en.PAD).sum(-1).numpy()
    # the target's own padding stays hidden: a view shows a sentence's real words only
    hide = decoder_mask if causal else padding_mask  # (B, n, n) or (B, 1, n)
    self_mask = torch.from_numpy(hide(lens, tgt_in.shape[-1]))
    x = model._embed(model.src_embed, src, positions=model.source_positions)
    memory, w_enc = model.core.encode(x, src_mask)
    _, w_self, w_cross = model.core.decode(
        model._embed(model.tgt_embed, tgt_in), memory, self_mask, src_mask
    )
    return {
        kind: torch.stack(w).double().numpy()
        for kind, w in (
            ("encoder", w_enc),
            ("decoder_self", w_self),
            ("cross", w_cross),
        )
    }


def translate(model: Translator, sentence: str) -> list[str]:
    """The greedy translation of a source sentence (words separated by spaces)."""
    src = torch.tensor([zh_en.SOURCE_VOCAB.encode(sentence.split())])
    tokens, _ = greedy_decode(model, src, max_len=32)
    return zh_en.TARGET_VOCAB.decode(tokens[0].tolist())


def translator_batch(model: Translator, batch):
    """The sources of ``batch`` padded to the longest, and <bos> + each one's greedy
    translation, padded: src (B, n_src), tgt_in (B, n_tgt), the translations."""
    outputs = [translate(model, s) for s in batch]
    n_src = max(len(s.split()) for s in batch)
    n_tgt = max(len(o) for o in outputs) + 1
    src_ids = torch.full((len(batch), n_src), zh_en.PAD)
    tgt_in = torch.full((len(batch), n_tgt), zh_en.PAD)
    for b, (sentence, out) in enumerate(zip(batch, outputs)):
        words = zh_en.SOURCE_VOCAB.encode(sentence.split())
        src_ids[b, : len(words)] = torch.tensor(words)
        tgt_in[b, : len(out) + 1] = torch.tensor(
            [zh_en.BOS, *zh_en.TARGET_VOCAB.encode(out)]
        )
    return src_ids, tgt_in, outputs


def translator_example(model: Translator, sentence: str, batch) -> dict:
    """One sentence of chapter 6 (in ``batch``, padded to its longest source): the
    encoder's self-attention (source words, ``<pad>`` keys), the decoder's (a row per
    word written, its keys <bos> and the words before) and the cross-attention."""
    src, tgt_in, outputs = translator_batch(model, batch)
    b = batch.index(sentence)
    words = outputs[b]
    n_src, n_tgt = len(sentence.split()), len(words) + 1
    source = sentence.split() + [PAD_LABEL] * (src.shape[1] - n_src)
    read, written = [BOS_LABEL, *words], [*words, EOS_LABEL]
    runs = {
        v: translator_weights(model, src, tgt_in, "causal" in v, "padding" in v)
        for v in variants(("causal", "padding"))
    }
    grids = (  # name, queries, keys, rows and columns kept
        ("encoder", sentence.split(), source, slice(0, n_src), slice(None)),
        ("decoder_self", written, read, slice(0, n_tgt), slice(0, n_tgt)),
        ("cross", written, source, slice(0, n_tgt), slice(None)),
    )
    views = [
        view(
            name,
            queries,
            keys,
            {v: run[name][:, b, :, rows, cols] for v, run in runs.items()},
            causal=name == "decoder_self",
        )
        for name, queries, keys, rows, cols in grids
    ]
    return {"sentence": sentence.replace(" ", ""), "views": views}


# --------------------------------------------------------------------------------------
# the page and the saved parameters


def explorer_html(chapter: str, masks, examples: list[dict]) -> str:
    """The explorer's container: book/_static/explorer.js finds it by its class and
    reads the JSON next to it. ``<`` is escaped in the JSON (a token like ``</script>``
    cannot end the script element), and the JSON is never executed."""
    data = {"chapter": chapter, "masks": list(masks), "examples": examples}
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return (
        f'<div class="attention-explorer" data-chapter="{html.escape(chapter)}">'
        '<script type="application/json" class="attention-explorer-data">'
        f"{text}</script></div>"
    )


def save_models(chapter: str, models: dict, sentences, directory: Path = SAVED) -> Path:
    """``<directory>/<chapter>.pt``: each model's constructor arguments and parameters
    (name -> model) and the sentences explored, so that a test can rebuild the models
    and recompute what the page shows. Not part of the site."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{chapter}.pt"
    torch.save(
        {
            "models": {
                name: {
                    "arguments": constructor_arguments(m),
                    "state_dict": m.state_dict(),
                }
                for name, m in models.items()
            },
            "sentences": sentences,
        },
        path,
    )
    return path


def load_saved(chapter: str, directory: Path = SAVED):
    """-> (name -> model, sentences) as ``save_models`` wrote them."""
    saved = torch.load(directory / f"{chapter}.pt", weights_only=True)
    models = {
        name: load_model(entry["arguments"], entry["state_dict"])
        for name, entry in saved["models"].items()
    }
    return models, saved["sentences"]


# --------------------------------------------------------------------------------------
# one call per chapter: save what a test needs, return the page's HTML


def token_labels(tokens) -> list[str]:
    """Chapter 5's tokens as its figures label them: digits, and "|" for the
    reversal task's separator (token 10)."""
    return [str(int(t)) if t < 10 else "|" for t in tokens]


def seq2seq_page(models: dict, sentences: list[str], directory: Path = SAVED) -> str:
    """Chapter 3: every sentence through every model (name -> ``Seq2Seq``), the
    sentences padded to the longest."""
    save_models("ch3_seq2seq", models, sentences, directory)
    examples = [seq2seq_example(models, s, sentences) for s in sentences]
    check_masks(examples, ["padding"])
    return explorer_html("ch3_seq2seq", ["padding"], examples)


def decoder_only_page(models: dict, sequences: dict, directory: Path = SAVED) -> str:
    """Chapter 5: each model (name -> ``TinyTransformer``) on its own sequences (name
    -> list of token sequences)."""
    sequences = {
        name: [[int(t) for t in s] for s in seqs] for name, seqs in sequences.items()
    }
    save_models("ch5_multihead", models, sequences, directory)
    examples = [
        decoder_only_example(name, models[name], s, token_labels(s))
        for name, seqs in sequences.items()
        for s in seqs
    ]
    check_masks(examples, ["causal"])
    return explorer_html("ch5_multihead", ["causal"], examples)


def translator_page(model: Translator, sentences: list[str], directory: Path = SAVED):
    """Chapter 6: each source sentence (words separated by spaces) through the
    translator, the sentences padded to the longest."""
    save_models("ch6_transformer", {"translator": model}, sentences, directory)
    examples = [translator_example(model, s, sentences) for s in sentences]
    check_masks(examples, ["causal", "padding"])
    return explorer_html("ch6_transformer", ["causal", "padding"], examples)
