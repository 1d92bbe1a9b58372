"""The attention explorer in Chromium, offline, against weights recomputed here.

On chapters 3, 5 and 6, in both editions (``_build/html`` and ``_build/html/zh``), opened
from ``file://`` with every other URL aborted and recorded:

- pointing at a query highlights one row, and the weights in that row's cells and in the
  list below it are the model's (every cell writes its weight where the column has room for
  the numbers, none does where it has not): recomputed in this test from ``solutions`` with the
  parameters the build saved (``_build/explorer/<chapter>.pt``, solutions/explorer.py),
  never read back from the page's own JSON; to 1e-3;
- the keyboard reaches the grid with Tab, and the arrow keys, Home and End move the query
  with the same highlight (and ``aria-activedescendant``);
- unticking a mask shows the weights recomputed without it, which differ;
- the Chinese page's labels are Chinese, the English page's English; the explorer fits a
  1280-pixel and a 390-pixel (phone) window, its numbers in text of at least 12 px, its grid
  drawn at its own size (never scaled down: labels of 12 px), scrolling in its frame when it
  is wider than the column;
- a mask that changes no weight of the example and view shown is disabled with its reason
  written beside it (issue 45 §8: the padding mask on chapter 3's longest example, the
  causal mask of chapter 6's encoder); chapter 3's GRU models are not captioned with a layer
  and a head; the Chinese explorer is a 查看器, not a 浏览器 (a web browser).

The recomputation uses each model's own forward pass where every mask is on
(``Seq2Seq.decode_ids``, ``attention_maps``, ``Translator.forward``) and
``solutions.explorer`` (tested against the models in tests/test_explorer.py) where a
mask is off. A missing build is a failure, never a skip.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_site_browser import HTML, browser  # noqa: E402, F401 - the shared Chromium

from solutions import explorer  # noqa: E402
from solutions.multihead import attention_maps  # noqa: E402

pytestmark = pytest.mark.browser

CHAPTERS = ("ch3_seq2seq", "ch5_multihead", "ch6_transformer")
EDITIONS = {"en": "", "zh": "zh/"}
TOLERANCE = 1e-3  # the page writes 3 decimals in the cells, 4 in the list
SAVED = HTML.parent / "explorer"
HAN = re.compile(r"[\u4e00-\u9fff]")
ENGLISH_WORD = re.compile(r"[A-Za-z]{2,}")


# ----------------------------------------------------------------------------------------
# the weights, recomputed from the saved parameters


def _ch3(models, sentences):
    """example -> view -> variant key -> (layers, h, n_q, n_k)."""
    src, src_mask = next(iter(models.values())).src_vocab.batch([s.split() for s in sentences])
    out = []
    for b in range(len(sentences)):
        views = {}
        for name, model in models.items():
            with torch.no_grad():  # the model's own greedy decoding, weights included
                ids, own = model.decode_ids(src, src_mask, 2 * src.shape[1] + 2)
            n = len(explorer.written_labels(model.tgt_vocab, ids[b]))
            _, bare = explorer.seq2seq_weights(model, sentences, padding=False)
            views[name] = {
                "padding": own[b, :n].double().numpy()[None, None],
                "": bare[b, :n][None, None],
            }
        out.append(views)
    return out


def _ch5(models, sequences):
    return [
        {
            name: {
                "causal": attention_maps(models[name], torch.tensor(s)),
                "": explorer.decoder_only_weights(models[name], s, causal=False),
            }
        }
        for name, seqs in sequences.items()
        for s in seqs
    ]


def _ch6(models, sentences):
    model = models["translator"]
    src, tgt_in, outputs = explorer.translator_batch(model, sentences)
    with torch.no_grad():
        _, own = model(src, tgt_in)  # the model's own forward: both masks
    runs = {
        "causal+padding": {k: torch.stack(w).double().numpy() for k, w in own.items()},
        "causal": explorer.translator_weights(model, src, tgt_in, padding=False),
        "padding": explorer.translator_weights(model, src, tgt_in, causal=False),
        "": explorer.translator_weights(model, src, tgt_in, False, False),
    }
    out = []
    for b, sentence in enumerate(sentences):
        n_src, n_tgt = len(sentence.split()), len(outputs[b]) + 1
        shape = {
            "encoder": (slice(0, n_src), slice(None)),
            "decoder_self": (slice(0, n_tgt), slice(0, n_tgt)),
            "cross": (slice(0, n_tgt), slice(None)),
        }
        out.append(
            {
                name: {v: run[name][:, b, :, rows, cols] for v, run in runs.items()}
                for name, (rows, cols) in shape.items()
            }
        )
    return out


@pytest.fixture(scope="module")
def recomputed():
    """chapter -> [example][view name][variant key] -> (layers, h, n_q, n_k)."""
    missing = [c for c in CHAPTERS if not (SAVED / f"{c}.pt").is_file()]
    if missing:
        pytest.fail(
            f"no saved models {missing} in {SAVED}: build the book first "
            f"(tools/build_book.py writes them while the chapters run)",
            pytrace=False,
        )
    torch.set_num_threads(1)
    build = {"ch3_seq2seq": _ch3, "ch5_multihead": _ch5, "ch6_transformer": _ch6}
    return {c: build[c](*explorer.load_saved(c, SAVED)) for c in CHAPTERS}


# ----------------------------------------------------------------------------------------
# the page


class OfflinePage:
    """A page opened from file://; every other URL is aborted and recorded."""

    def __init__(self, chromium, width: int):
        self.context = chromium.new_context(viewport={"width": width, "height": 900})
        self.context.set_default_timeout(90_000)
        self.page = self.context.new_page()
        self.attempted: list[str] = []
        self.errors: list[str] = []
        self.page.route("**/*", self._route)
        self.page.on("pageerror", lambda err: self.errors.append(str(err)))

    def _route(self, route):
        url = route.request.url
        if urlsplit(url).scheme in ("file", "data", "blob"):
            route.continue_()
        else:
            self.attempted.append(url)
            route.abort("blockedbyclient")

    def open(self, edition: str, chapter: str):
        path = HTML / EDITIONS[edition] / "book" / f"{chapter}.html"
        if not path.is_file():
            pytest.fail(f"no built page {path}: build the book first", pytrace=False)
        self.page.goto(path.as_uri(), wait_until="load")
        self.page.wait_for_selector(".attention-explorer svg[role=listbox]")

    def close(self):
        self.context.close()


@pytest.fixture
def offline(browser):  # noqa: F811
    pages = []

    def make(width: int = 1280) -> OfflinePage:
        pages.append(OfflinePage(browser, width))
        return pages[-1]

    yield make
    for p in pages:
        assert not p.attempted, f"requests left the machine: {p.attempted}"
        assert not p.errors, f"uncaught errors on the page: {p.errors}"
        p.close()


SHOWN = """root => {
  const rows = [...root.querySelectorAll('.attention-explorer-row.attention-explorer-selected')];
  const svg = root.querySelector('svg[role=listbox]');
  const row = rows[0];
  return {
    selected: rows.length,
    query: row ? Number(row.dataset.query) : -1,
    active: svg.getAttribute('aria-activedescendant'),
    rowId: row ? row.id : null,
    ariaSelected: row ? row.getAttribute('aria-selected') : null,
    cells: row ? [...row.querySelectorAll('rect')].map(r => Number(r.dataset.weight)) : [],
    texts: row ? [...row.querySelectorAll('text.attention-explorer-value')]
      .map(t => Number(t.textContent)) : [],
    visible: row ? [...row.querySelectorAll('text.attention-explorer-value')]
      .every(t => getComputedStyle(t).visibility === 'visible') : false,
    // every cell of the grid writes its weight, or none does (the column too narrow)
    numbers: svg.classList.contains('attention-explorer-numbers'),
    shownValues: [...svg.querySelectorAll('text.attention-explorer-value')]
      .filter(t => getComputedStyle(t).visibility === 'visible').length,
    values: svg.querySelectorAll('text.attention-explorer-value').length,
    list: [...root.querySelectorAll('.attention-explorer-readout li .attention-explorer-readout-value')]
      .map(v => Number(v.textContent)),
    focused: document.activeElement === svg,
  };
}"""


def shown(root) -> dict:
    return root.evaluate(SHOWN)


def check_row(root, expected: np.ndarray, query: int, what: str):
    """The one highlighted row is ``query``, and its cells, their written numbers and the
    list below show ``expected[query]``."""
    state = shown(root)
    assert state["selected"] == 1 and state["query"] == query, (what, state)
    assert state["active"] == state["rowId"] and state["ariaSelected"] == "true", what
    if state["numbers"]:
        assert state["visible"], f"{what}: the selected row's numbers are hidden"
        assert state["shownValues"] == state["values"], f"{what}: some cells hide their weight"
    else:
        assert state["shownValues"] == 0, f"{what}: numbers in cells too narrow for them"
    for name in ("cells", "texts", "list"):
        np.testing.assert_allclose(
            state[name], expected[query], atol=TOLERANCE, err_msg=f"{what}: {name}"
        )


def choose(root, control: str, value: int):
    # by position: Playwright matches a string against labels too, and layer "1" is value 0
    box = root.locator(f"select[id$='-{control}']")
    box.select_option(index=value)
    assert box.input_value() == str(value)


def hover(root, query: int):
    root.locator(f".attention-explorer-row[data-query='{query}'] rect").first.hover()


VIEWS = {  # the order of the views on the page, as solutions/explorer.py writes them
    "ch3_seq2seq": ("bahdanau", "luong"),
    "ch5_multihead": None,  # one view per example: its model
    "ch6_transformer": ("encoder", "decoder_self", "cross"),
}
MASKS = {
    "ch3_seq2seq": ("padding",),
    "ch5_multihead": ("causal",),
    "ch6_transformer": ("causal", "padding"),
}


def key(active) -> str:
    return "+".join(sorted(active))


@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_hover_keys_and_masks_show_the_recomputed_weights(offline, recomputed, chapter, edition):
    page = offline()
    page.open(edition, chapter)
    root = page.page.locator(".attention-explorer").first
    examples = recomputed[chapter]
    assert root.locator("select[id$='-example'] option").count() == len(examples)
    masks = MASKS[chapter]
    checked = 0
    for e, views in enumerate(examples):
        choose(root, "example", e)
        for v, name in enumerate(views):
            if len(views) > 1:
                choose(root, "view", v)
            on = views[name][key(masks)]  # every mask on: the page's default
            layers, heads, n_q, _ = on.shape
            for layer, head in {(0, 0), (layers - 1, heads - 1)}:
                if layers > 1:
                    choose(root, "layer", layer)
                if heads > 1:
                    choose(root, "head", head)
                expected = on[layer, head]
                query = min(2, n_q - 1)
                hover(root, query)
                check_row(root, expected, query, f"{chapter} {e} {name} hover")
                checked += 1
        if len(views) > 1:
            choose(root, "view", 0)
    # the keyboard: Tab from the last control reaches the grid; arrows move the query
    choose(root, "example", 0)
    if len(examples[0]) > 1:
        choose(root, "view", 0)
    first = next(iter(examples[0].values()))[key(masks)]
    choose_first_layer_and_head(root, first)
    # the last control a reader can use (a mask that changes nothing here is disabled)
    root.locator("select:visible, input[data-mask]:enabled").last.focus()
    page.page.keyboard.press("Tab")
    assert shown(root)["focused"], "Tab from the last control did not reach the grid"
    expected = first[0, 0]
    n_q = expected.shape[0]
    hover(root, 0)
    for press, query in (
        ("ArrowDown", 1 % n_q),
        ("ArrowDown", 2 % n_q),
        ("ArrowUp", 1 % n_q),
        ("End", n_q - 1),
        ("ArrowDown", 0),
        ("Home", 0),
        ("ArrowRight", 1 % n_q),
    ):
        root.locator("svg[role=listbox]").press(press)
        check_row(root, expected, query, f"{chapter} key {press}")
    # each mask off, alone: the recomputed weights without it, which differ
    e = _example_with_padding(examples) if "padding" in masks else 0
    choose(root, "example", e)
    views = examples[e]
    for mask in masks:
        for v, name in enumerate(views):
            if len(views) > 1:
                choose(root, "view", v)
            choose_first_layer_and_head(root, views[name][key(masks)])
            box = root.locator(f"input[data-mask='{mask}']")
            rest = [m for m in masks if m != mask]
            on, off = views[name][key(masks)][0, 0], views[name][key(rest)][0, 0]
            query = int(np.abs(on - off).max(-1).argmax())  # where the mask matters
            if np.abs(on - off).max() <= 10 * TOLERANCE:
                continue  # this mask does not reach this view (the encoder, causal)
            hover(root, query)
            check_row(root, on, query, f"{chapter} {name} {mask} on")
            box.uncheck()
            check_row(root, off, query, f"{chapter} {name} {mask} off")
            box.check()
            check_row(root, on, query, f"{chapter} {name} {mask} on again")
            checked += 1
    assert checked >= len(examples) + len(masks)


def choose_first_layer_and_head(root, weights):
    if weights.shape[0] > 1:
        choose(root, "layer", 0)
    if weights.shape[1] > 1:
        choose(root, "head", 0)


def _example_with_padding(examples) -> int:
    """An example whose source was padded (its keys end with <pad>): there the padding
    mask matters."""
    for e, views in enumerate(examples):
        weights = next(iter(views.values()))
        on, off = weights[max(weights, key=len)], weights[""]
        if np.abs(on - off).max() > 10 * TOLERANCE:
            return e
    raise AssertionError("no explored sentence is padded")


LABELS = """root => [
  ...root.querySelectorAll('.attention-explorer-title, .attention-explorer-control > span,'
    + ' legend, .attention-explorer-mask, .attention-explorer-hint')
].map(el => el.textContent.trim())"""


@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_labels_are_in_the_pages_language_and_the_grid_is_described(offline, chapter, edition):
    page = offline()
    page.open(edition, chapter)
    root = page.page.locator(".attention-explorer").first
    labels = root.evaluate(LABELS)
    assert len(labels) >= 4
    for label in labels:
        if edition == "zh":
            assert HAN.search(label), f"an English label on the Chinese page: {label!r}"
            # only the key names Tab may stay Latin
            assert not [w for w in ENGLISH_WORD.findall(label) if w != "Tab"], label
        else:
            assert not HAN.search(label), f"a Chinese label on the English page: {label!r}"
    svg = root.locator("svg[role=listbox]")
    assert svg.get_attribute("tabindex") == "0"
    described = svg.get_attribute("aria-describedby")
    caption = page.page.locator(f"#{described}").text_content()
    assert len(caption) > 40 and (HAN.search(caption) if edition == "zh" else True)
    assert svg.get_attribute("aria-label")
    option = root.locator(".attention-explorer-row").first.get_attribute("aria-label")
    assert re.search(r"\d\.\d{4}", option), "a query's label reads out its weights"


GRID = """() => {
  const figure = document.querySelector('.attention-explorer-figure');
  const r = figure.getBoundingClientRect();
  const value = figure.querySelector('.attention-explorer-readout-value');
  const grid = figure.querySelector('.attention-explorer-grid');
  const svg = grid.querySelector('svg');
  const g = grid.getBoundingClientRect();
  // the size a label of the grid is drawn at: its font size times the SVG's scale
  const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  const labels = [...svg.querySelectorAll('.attention-explorer-key, .attention-explorer-query')]
    .map(el => parseFloat(getComputedStyle(el).fontSize) * scale);
  return {left: r.left, right: r.right, gridRight: g.right, width: innerWidth,
          font: parseFloat(getComputedStyle(value).fontSize),
          label: Math.min(...labels), scale,
          // a grid wider than its frame scrolls in it
          scrolls: grid.scrollWidth > grid.clientWidth + 1,
          scrollable: ['auto', 'scroll'].includes(getComputedStyle(grid).overflowX),
          numbers: svg.classList.contains('attention-explorer-numbers'),
          // the explorer's own overflow (the page may scroll for a wide equation)
          overflow: figure.scrollWidth > figure.clientWidth + 1,
          widest: Math.max(...[...figure.querySelectorAll('*')]
            .filter(el => !grid.contains(el) || el === grid)
            .map(el => el.getBoundingClientRect().right))};
}"""


@pytest.mark.parametrize("width", [1280, 390])
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_explorer_fits_the_window_and_its_numbers_are_readable(offline, chapter, width):
    page = offline(width)
    page.open("zh", chapter)
    root = page.page.locator(".attention-explorer").first
    n_examples = root.locator("select[id$='-example'] option").count()
    for e in range(n_examples):
        choose(root, "example", e)
        n_views = root.locator("select[id$='-view'] option").count()
        for v in range(n_views):
            if n_views > 1:
                choose(root, "view", v)
            box = page.page.evaluate(GRID)
            what = (chapter, width, e, v, box)
            assert box["left"] >= 0 and box["right"] <= box["width"] + 1, what
            assert box["gridRight"] <= box["right"] + 1, what
            assert box["font"] >= 12, what
            # drawn at its own size: every query's and key's label in 12-pixel text
            assert abs(box["scale"] - 1) < 0.01 and box["label"] >= 12 - 0.01, what
            assert not box["scrolls"] or box["scrollable"], what
            assert not box["overflow"] and box["widest"] <= box["right"] + 1, what
            if width == 1280 and chapter == "ch3_seq2seq":
                assert box["numbers"], f"every cell writes its weight where it fits: {what}"
        if n_views > 1:
            choose(root, "view", 0)


MASK_NOTES = """root => [...root.querySelectorAll('input[data-mask]')].map(box => {
  const note = root.querySelector(`.attention-explorer-mask-note[data-mask="${box.dataset.mask}"]`);
  return {mask: box.dataset.mask, disabled: box.disabled,
          note: note && !note.hidden && note.offsetParent !== null ? note.textContent.trim() : "",
          described: box.getAttribute('aria-describedby') === (note && note.id)};
})"""


@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("chapter", ["ch3_seq2seq", "ch6_transformer"])
def test_a_mask_that_changes_nothing_shown_is_disabled_and_says_why(
    offline, recomputed, chapter, edition
):
    # issue 45 §8: the padding mask on chapter 3's longest example, the causal mask of
    # chapter 6's encoder did nothing when unticked, silently
    page = offline()
    page.open(edition, chapter)
    root = page.page.locator(".attention-explorer").first
    masks = MASKS[chapter]
    disabled_seen = enabled_seen = 0
    for e, views in enumerate(recomputed[chapter]):
        choose(root, "example", e)
        for v, name in enumerate(views):
            if len(views) > 1:
                choose(root, "view", v)
            state = {s["mask"]: s for s in root.evaluate(MASK_NOTES)}
            for mask in masks:
                on = views[name][key(masks)]
                off = views[name][key(m for m in masks if m != mask)]
                change = np.abs(on - off).max()
                if 1e-6 < change < 1e-3:
                    continue  # within the page's rounding: either is right
                what = (chapter, edition, e, name, mask, state[mask])
                if change <= 1e-6:  # the mask changes nothing here
                    assert state[mask]["disabled"] and state[mask]["described"], what
                    note = state[mask]["note"]
                    assert note, what
                    if edition == "zh":
                        assert HAN.search(note), what
                    else:
                        assert not HAN.search(note) and ENGLISH_WORD.search(note), what
                    disabled_seen += 1
                else:
                    assert not state[mask]["disabled"] and not state[mask]["note"], what
                    enabled_seen += 1
        if len(views) > 1:
            choose(root, "view", 0)
    assert disabled_seen and enabled_seen, (disabled_seen, enabled_seen)
    if chapter == "ch6_transformer":  # the encoder has no causal mask, on every example
        choose(root, "example", 0)
        choose(root, "view", 0)
        state = {s["mask"]: s for s in root.evaluate(MASK_NOTES)}
        assert state["causal"]["disabled"], state


@pytest.mark.parametrize("edition", list(EDITIONS))
def test_the_rnn_models_are_captioned_for_what_they_are(offline, edition):
    # chapter 3's GRU encoder-decoders have no layers and no heads: "layer 1, head 1" was wrong
    page = offline()
    page.open(edition, "ch3_seq2seq")
    root = page.page.locator(".attention-explorer").first
    for v in range(2):
        choose(root, "view", v)
        caption = root.locator(".attention-explorer-caption").text_content()
        assert "GRU" in caption, caption
        if edition == "zh":
            assert not re.search(r"第 \d+ 层|第 \d+ 个头", caption), caption
        else:
            assert not re.search(r"layer \d|head \d", caption), caption
    # the Transformers keep their layer and head
    page.open(edition, "ch5_multihead")
    caption = root.locator(".attention-explorer-caption").text_content()
    pattern = r"第 1 层，第 1 个头" if edition == "zh" else r"layer 1, head 1"
    assert re.search(pattern, caption), caption


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_chinese_explorer_is_a_viewer_not_a_web_browser(offline, chapter):
    # 浏览器 reads as a web browser (issue 45 §8): the explorer and the page's prose say 查看器
    page = offline()
    page.open("zh", chapter)
    root = page.page.locator(".attention-explorer").first
    assert root.locator(".attention-explorer-title").text_content() == "注意力查看器"
    text = page.page.locator("article").inner_text()
    assert "浏览器" not in text and "查看器" in text.replace("注意力查看器", "", 1)
