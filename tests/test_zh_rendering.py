"""What the reader of each edition sees, read from the built HTML (issue 37, §1).

- **Bold pairs next to Chinese.** CommonMark decides whether ``**`` opens or closes from
  the characters around it; next to Chinese text and a role (``一个**{term}`键 <key>`**（``)
  it did neither, and 14 paragraphs of the Chinese site showed asterisks or a whole
  sentence in bold. ``editions.emphasis.cjk_friendly_emphasis`` fixes the rule; here: no literal
  ``**`` on any page outside code, and each Chinese page has as many emphasised spans as
  its English page (bold and italic together: the Chinese edition writes an English
  *italic* as **bold**, CJK fonts having no italic, docs/translating.md), at least as many
  of them bold, and no bold span that the English does not have room for.
- **No English in an equation.** No display equation of either edition holds a raw label
  (``eq. (ch6-cross)``) or an English word in ``\\text{}``: the words belong to the prose
  around the equation, which is translated. ``SYMBOL_WORDS`` are names used as symbols.
- **Every image is described.** Each ``<img>`` of both editions has a description as its
  alt text (not its file path), in the edition's language.
- **The Chinese download is Chinese.** The page source a Chinese chapter offers
  (``zh/_sources/<page>.ipynb``, the "download source" button) is the Chinese notebook:
  the English notebook's code, its prose from the page's catalog.
- **et al. is 等** in the Chinese edition's citations.

Unit tests of the pieces (the emphasis rule, the catalog check, the notebook translation)
need no build. The page tests read ``_build/html`` (``ATTENTION_BOOK_HTML`` to test another
build) and fail, never skip, when it is missing.
"""

from __future__ import annotations

import html
import json
import os
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "book" / "_ext"))
sys.path.insert(0, str(REPO / "tools"))

import translations  # noqa: E402
from editions import languages, sources  # noqa: E402
from editions.emphasis import cjk_friendly_emphasis  # noqa: E402

HTML = Path(os.environ.get("ATTENTION_BOOK_HTML", REPO / "_build" / "html")).resolve()
CHAPTERS = [
    "ch1_pooling",
    "ch2_soft_hard",
    "ch3_seq2seq",
    "ch4_self_attention",
    "ch5_multihead",
    "ch6_transformer",
]
PAGES = [f"book/{chapter}" for chapter in CHAPTERS] + [
    "book/preface",
    "book/notation",
    "book/glossary",
    "book/references",
]
# words that stand for a symbol in a display equation: subscripts naming what a quantity
# belongs to (d_att, n_in, H_enc, W_dec, s_out, H_head, M_bytes_naive), score names as
# Luong wrote them (dot, general, concat), and quantities written by name in a count
# (#params, FLOPs, bytes), the learning rate lr(s) = factor · ..., score(y), and the two
# placements of the norm (pre-LN, post-LN), which the Chinese text keeps in Latin too
SYMBOL_WORDS = {
    "att", "in", "out", "enc", "dec", "head", "naive", "blocked",
    "dot", "general", "concat",
    "params", "FLOPs", "bytes", "lr", "factor", "score",
    "pre-LN:", "post-LN:",
}  # fmt: skip
HAN = re.compile(r"[\u4e00-\u9fff]")


def built(edition: str, page: str) -> str:
    path = HTML / edition / f"{page}.html"
    if not path.is_file():
        pytest.fail(f"no built page {path}: build the book first", pytrace=False)
    return path.read_text(encoding="utf-8")


def article(page_html: str) -> str:
    """The page's article (what the chapter says), without code, scripts and math."""
    match = re.search(r'<article class="bd-article"[^>]*>(.*)</article>', page_html, re.S)
    body = match.group(1) if match else page_html
    body = re.sub(r"<(pre|script|style|code)\b[^>]*>.*?</\1>", " ", body, flags=re.S)
    body = re.sub(r'<(span|div) class="math[^"]*"[^>]*>.*?</\1>', " ", body, flags=re.S)
    return body


def visible_text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def emphasis(page_html: str) -> dict[str, list[str]]:
    """The texts of the article's bold and italic spans (the "et al." of a citation, which
    the Chinese edition writes 等 without italics, left out)."""
    body = article(page_html)
    spans = {
        kind: [visible_text(m) for m in re.findall(rf"<{kind}>(.*?)</{kind}>", body, re.S)]
        for kind in ("strong", "em")
    }
    spans["em"] = [text for text in spans["em"] if text.strip() != "et al."]
    return spans


# ----------------------------------------------------------------------------------------
# the pieces, without a build


@pytest.mark.parametrize(
    "source, bold",
    [
        ("一个**{term}`键 <key>`**（它的", ["{term}键 <key>"]),
        ("**{term}`查询 <query>`**扮演", ["{term}查询 <query>"]),
        ("即**{term}`重参数化技巧 <reparameterisation trick>`**）。", ["{term}重参数化技巧 <reparameterisation trick>"]),
        ("**直通**（straight-through）变体", ["直通"]),
        ("an **English** word and a**b** c", ["English", "b"]),
    ],
)  # fmt: skip
def test_bold_pairs_next_to_chinese_characters_and_roles(source, bold):
    from markdown_it import MarkdownIt

    cjk_friendly_emphasis()
    tokens = MarkdownIt("commonmark").parseInline(source)[0].children
    texts, inside = [], None
    for token in tokens:
        if token.type == "strong_open":
            inside = []
        elif token.type == "strong_close":
            texts.append("".join(inside))
            inside = None
        elif inside is not None:
            inside.append(token.content)
    assert texts == bold
    assert not any("*" in t.content for t in tokens if t.type == "text")


def test_english_emphasis_next_to_punctuation_is_unchanged():
    """The rule changes nothing where no CJK character touches the delimiters."""
    from markdown_it import MarkdownIt

    cjk_friendly_emphasis()
    rendered = MarkdownIt("commonmark").render('a**"b"**c and *x*y and **(a)**b')
    assert rendered == "<p>a**&quot;b&quot;**c and <em>x</em>y and **(a)**b</p>\n"


def test_the_catalog_check_reports_an_unpaired_star_but_not_code_or_math():
    assert translations.emphasis("**粗体**与*斜体*")[0] == 2
    stray = translations.emphasis("一个 ** 孤立的星号")[1]
    assert stray == ["**"]
    assert translations.emphasis("`a**b` 和 $a * b * c$")[1] == []
    problems = translations.message_problems("a **b** c", "甲 ** 乙 丙", False, [])
    assert any("unpaired emphasis" in p for p in problems)


def test_a_notebook_is_translated_message_by_message_and_its_code_kept():
    notebook = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": [
                "# Title\n", "\n", "A paragraph\n", "on two lines:\n", "\n",
                "$$\n", "x = \\text{kept}\n", "$$ (label)\n", "\n",
                "- an item\n", "  that goes on\n", "- 42\n", "\n",
                "```{admonition} Note title\n", ":class: tip\n", "Inside.\n", "```\n", "\n",
                "> A quote.\n",
            ]},
            {"cell_type": "code", "metadata": {"figure_descriptions": ["A plot."]},
             "source": ["print('A paragraph')\n"], "outputs": [], "execution_count": None},
        ],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    }  # fmt: skip
    catalog = {
        "Title": "标题",
        "A paragraph on two lines:": "两行的一个段落：",
        "an item that goes on": "一项",
        "Note title": "提示标题",
        "Inside.": "里面。",
        "A quote.": "一句引文。",
        "A plot.": "一幅图。",
    }
    out = json.loads(sources.translated_notebook(json.dumps(notebook), catalog.get))
    assert "".join(out["cells"][0]["source"]) == (
        "# 标题\n\n两行的一个段落：\n\n$$\nx = \\text{kept}\n$$ (label)\n\n"
        "- 一项\n- 42\n\n```{admonition} 提示标题\n:class: tip\n里面。\n```\n\n> 一句引文。\n"
    )
    assert out["cells"][1]["source"] == notebook["cells"][1]["source"]
    assert out["cells"][1]["metadata"]["figure_descriptions"] == ["一幅图。"]


def test_figure_texts_left_in_latin_are_names_only():
    """ch2's panel titles (dot, scaled_dot, ...) and ch3's legend Luong (dot) are Chinese in
    the Chinese figures: the figure catalog keeps Latin only for names and code."""
    from babel.messages.pofile import read_po

    names = {  # names, code and symbols: the same in both languages
        "Nadaraya–Watson",
        "softmax",
        "local_mask(n={}, r={})",
        "local-m, p_t = t, D = {}",
        "post-LN, Noam, w = {}",
    }
    with open(translations.FIGURES, "rb") as handle:
        catalog = read_po(handle)
    latin = [
        m.id
        for m in catalog
        if m.id and not HAN.search(m.string) and languages.english_words(m.string)
    ]
    assert sorted(latin) == sorted(names)
    for msgid in ("dot", "scaled_dot", "cosine", "general", "additive", "Luong (dot)"):
        assert HAN.search(catalog[msgid].string), msgid


# ----------------------------------------------------------------------------------------
# the built site


@pytest.mark.parametrize("edition", ["", "zh"])
@pytest.mark.parametrize("page", PAGES)
def test_no_literal_bold_markers_outside_code(edition, page):
    text = visible_text(article(built(edition, page)))
    assert "**" not in text, re.findall(r".{0,30}\*\*.{0,30}", text)[:5]


@pytest.mark.parametrize("page", PAGES)
def test_each_chinese_page_has_the_emphasis_of_its_english_page(page):
    english, chinese = emphasis(built("", page)), emphasis(built("zh", page))
    assert len(chinese["strong"]) + len(chinese["em"]) == len(english["strong"]) + len(
        english["em"]
    )
    assert len(chinese["strong"]) >= len(english["strong"])
    # a bold span that runs past its term ("the whole sentence in bold") is longer than
    # any the English has
    longest = max(map(len, english["strong"]), default=0)
    assert all(len(text) <= max(40, longest) for text in chinese["strong"]), [
        text for text in chinese["strong"] if len(text) > max(40, longest)
    ]


@pytest.mark.parametrize("edition", ["", "zh"])
@pytest.mark.parametrize("page", PAGES)
def test_no_display_equation_holds_a_label_or_an_english_word(edition, page):
    page_html = built(edition, page)
    equations = [
        html.unescape(m)
        for m in re.findall(r'<div class="math[^"]*"[^>]*>(.*?)</div>', page_html, re.S)
    ]
    for equation in equations:
        assert not re.search(r"eq\.\s*\(|\(ch\d+-[\w-]+\)", equation), equation
        words = [
            word
            for text in re.findall(r"\\text\{([^}]*)\}", equation)
            for word in re.findall(r"[A-Za-z][A-Za-z:-]*", text)
            if word not in SYMBOL_WORDS
        ]
        assert not words, f"English in {equation.strip()[:120]!r}: {words}"


@pytest.mark.parametrize("edition", ["", "zh"])
@pytest.mark.parametrize("page", PAGES)
def test_every_image_is_described_in_the_editions_language(edition, page):
    images = re.findall(r"<img\b[^>]*>", built(edition, page))
    for image in images:
        alt = re.search(r'\balt="([^"]*)"', image)
        alt = html.unescape(alt.group(1)) if alt else ""
        assert alt and not re.search(r"\.(png|svg|jpe?g)\b|_images/", alt), image[:150]
        assert len(alt) >= 20, alt
        if edition == "zh":
            assert HAN.search(alt), alt
        else:
            assert languages.english_words(alt), alt


def test_the_chapters_figures_are_all_described():
    count = {
        edition: sum(len(re.findall(r"<img\b", built(edition, f"book/{c}"))) for c in CHAPTERS)
        for edition in ("", "zh")
    }
    assert count[""] == count["zh"] >= 46


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_chinese_download_is_the_chinese_notebook(chapter):
    english = json.loads((HTML / "_sources" / "book" / f"{chapter}.ipynb").read_text())
    chinese = json.loads((HTML / "zh" / "_sources" / "book" / f"{chapter}.ipynb").read_text())
    page = built("zh", f"book/{chapter}")
    assert f'href="../_sources/book/{chapter}.ipynb"' in page  # the button's target
    assert [c["source"] for c in chinese["cells"] if c["cell_type"] == "code"] == [
        c["source"] for c in english["cells"] if c["cell_type"] == "code"
    ]
    markdown = ["".join(c["source"]) for c in chinese["cells"] if c["cell_type"] == "markdown"]
    headings = [line for text in markdown for line in text.splitlines() if line.startswith("#")]
    assert headings and all(HAN.search(h) for h in headings), headings
    english_markdown = [
        "".join(c["source"]) for c in english["cells"] if c["cell_type"] == "markdown"
    ]
    # every paragraph with English words is translated (the same paragraph in both is
    # one with nothing to translate: math, code, a label; or English the Chinese page
    # shows too, the example story of a quote)
    page_text = " ".join(visible_text(page).split())
    kept = [
        paragraph
        for text in markdown
        for paragraph in text.split("\n\n")
        if paragraph in "\n\n".join(english_markdown)
        and languages.english_words(paragraph)
        and not paragraph.lstrip().startswith(("$$", "```", "(", ":::"))
        and " ".join(paragraph.lstrip("> ").split())[:40] not in page_text
    ]
    assert not kept, kept[:3]


@pytest.mark.parametrize("page", PAGES)
def test_chinese_citations_write_deng_not_et_al(page):
    assert "et al." not in visible_text(article(built("zh", page)))
