"""The Chinese edition's catalogs and machinery (docs/translating.md).

- Every message of every page has a current translation: 0 untranslated, 0 fuzzy, and the
  catalogs hold every message the sources have today (a changed English sentence fails
  here and in the build until its translation is updated).
- The catalog check catches what a translation must not lose (inline math, code, role
  targets, URLs) and terminology not followed; it accepts a faithful translation.
- The language switch points at the same page in the other edition, from any depth.
- Figures: each text translated through figures.po with its numbers carried over, tick
  labels left alone, a missing translation an error naming the msgid to add, the figure
  itself unchanged after its Chinese rendering, and the myst-nb renderer for it.
"""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from babel.messages.pofile import read_po

from solutions import plotting

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "book" / "_ext")]
import editions  # noqa: E402
from editions import languages, pages, search  # noqa: E402

from tools import translations  # noqa: E402

# ----------------------------------------------------------------------------------------
# the catalogs in the repository


def test_every_catalog_is_complete_and_keeps_what_it_must():
    problems = translations.check()
    assert problems == [], f"{len(problems)} catalog problems, e.g.:\n" + "\n".join(problems[:20])
    stats = translations.statistics()
    # 17 pages plus the figures: a catalog that went missing would shrink this
    assert stats.get("untranslated", 0) == 0 and stats.get("fuzzy", 0) == 0
    assert stats["messages"] == stats["translated"] >= 900, stats


def test_catalogs_hold_every_message_the_sources_have():
    """Extract the messages afresh (Sphinx's gettext builder, reading the outputs cached by
    `make book`, which precedes the tests; without that cache it executes the notebooks) and look
    each one up: a sentence changed since the catalogs were updated has no entry."""
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "build_book.py"), "--builder", "gettext"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    templates = sorted((REPO / "_build" / "gettext").rglob("*.pot"))
    assert len(templates) >= 17, templates
    missing = []
    for template in templates:
        page = template.relative_to(REPO / "_build" / "gettext").with_suffix(".po")
        catalog_path = translations.CATALOGS / page
        assert catalog_path.is_file(), f"no catalog for {page}: run tools/translations.py update"
        catalog = translations.read_catalog(catalog_path)
        with open(template, "rb") as handle:
            for message in read_po(handle):
                entry = catalog.get(message.id)
                if message.id and (entry is None or not entry.string or entry.fuzzy):
                    missing.append(f"{page}: {message.id[:80]!r}")
    assert not missing, (
        f"{len(missing)} messages without a current translation (run tools/translations.py "
        f"update, then translate):\n" + "\n".join(missing[:20])
    )


def test_an_extraction_that_warns_fails_and_nothing_is_merged(monkeypatch):
    """A notebook that failed to execute (for want of the CJK font, say) leaves its
    captions out of the templates; merging those would mark their translations obsolete.
    The extraction reads afresh and fails on any warning, and `update` then stops."""
    import jupyter_book.sphinx

    from tools import build_book

    calls = []

    def warned(*args, **kwargs):
        calls.append(kwargs)
        return 1  # what Sphinx returns when a warning was turned into an error

    monkeypatch.setattr(jupyter_book.sphinx, "build_sphinx", warned)
    assert build_book.build("en", "gettext") == 1
    assert calls[0]["builder"] == "gettext"
    assert calls[0]["freshenv"] and calls[0]["warningiserror"]

    commands = []
    monkeypatch.setattr(translations.subprocess, "call", lambda cmd: commands.append(cmd) or 1)
    assert translations.update() == 1
    assert len(commands) == 1 and commands[0][-2:] == ["--builder", "gettext"]


def test_terminology_is_read_and_covers_the_core_terms():
    terms = {t.english: t for t in translations.read_terminology()}
    for english, chinese in [
        ("attention pooling", "注意力汇聚"),
        ("multi-head attention", "多头注意力"),
        ("positional encoding", "位置编码"),
        ("beam search", "束搜索"),
        ("label smoothing", "标签平滑"),
        ("masked softmax", "掩蔽 softmax"),
    ]:
        assert terms[english].chinese == chinese and terms[english].checked


def glossary_entries() -> list[list[str]]:
    """The terms of each entry of book/glossary.md (an entry may have several)."""
    text = (REPO / "book" / "glossary.md").read_text(encoding="utf-8")
    body = text.split("```{glossary}\n", 1)[1].rsplit("```", 1)[0]
    return [
        [line for line in block.splitlines() if line and not line.startswith("  ")]
        for block in body.strip().split("\n\n")
    ]


def test_every_term_of_the_terminology_has_a_glossary_entry():
    glossary = {term.lower() for entry in glossary_entries() for term in entry}
    missing = [
        t.english for t in translations.read_terminology() if t.english.lower() not in glossary
    ]
    assert not missing, f"terminology.tsv terms without a glossary entry: {missing}"


def test_the_chinese_glossary_heads_each_entry_chinese_then_english():
    """Each glossary term is translated 中文（English）, so the Chinese glossary is also the
    bilingual one (a name that is the same in both, BLEU or RoPE, stays as it is)."""
    catalog = translations.read_catalog(translations.CATALOGS / "book" / "glossary.po")
    wrong = []
    for entry in glossary_entries():
        for term in entry:
            translated = catalog.get(term).string
            if translated != term and not (
                translated.endswith(f"（{term}）") and translations.HAN.search(translated)
            ):
                wrong.append((term, translated))
    assert not wrong, wrong


@pytest.mark.parametrize(
    "english, chinese, drifted",
    [
        ("glimpse", "一瞥", "瞥视"),
        ("inverted dropout", "倒置暂退法", "反向暂退法"),
        ("one-hot", "独热", "one-hot"),
        ("item", "项", "项目"),
        ("max-shifted softmax", "减去最大值的 softmax", "最大值平移"),
        ("notebook", "笔记本", "notebook"),
        ("graded exercise", "计分练习", "评分练习"),
    ],
)
def test_terminology_names_the_renderings_that_drifted(english, chinese, drifted):
    terms = {t.english: t for t in translations.read_terminology()}
    assert terms[english].chinese == chinese and drifted in terms[english].avoid


def test_terminology_accepts_the_lecture_notes_pooling_and_leaves_vocabulary_unchecked():
    terms = {t.english: t for t in translations.read_terminology()}
    assert "池化" in terms["pooling"].also and "最大池化" in terms["max pooling"].also
    assert not terms["vocabulary"].checked  # 词表 vs. 词汇: everyday English, not checked


def test_a_malformed_terminology_row_names_the_term(tmp_path):
    table = tmp_path / "terminology.tsv"
    table.write_text("english\tchinese\tchecked\talso\tnot\nglimpse\t一瞥\tsometimes\t\t\n")
    with pytest.raises(ValueError, match="'glimpse'.*checked = yes or no"):
        translations.read_terminology(table)


# ----------------------------------------------------------------------------------------
# the catalog check itself

TERMS = [translations.Term("self-attention", "自注意力", True)]
SOURCE = (
    "The {term}`self-attention` of {cite:t}`vaswani2017` computes $QK^\\top$ "
    "with `np.matmul`, see {eq}`ch4-scores` and [the docs](https://numpy.org)."
)
GOOD = (
    "{cite:t}`vaswani2017` 的{term}`自注意力 <self-attention>`用 `np.matmul` 计算 $QK^\\top$，"
    "见 {eq}`ch4-scores` 和[文档](https://numpy.org)。"
)


def test_a_faithful_translation_has_no_problem():
    assert translations.message_problems(SOURCE, GOOD, False, TERMS) == []


@pytest.mark.parametrize(
    "broken, problem",
    [
        ("", "untranslated"),
        (GOOD.replace("$QK^\\top$", "$QK^T$"), "inline math not kept"),
        (GOOD.replace("`np.matmul`", "np.matmul"), "code span not kept"),
        (GOOD.replace("{eq}`ch4-scores`", "{eq}`ch4-score`"), "role not kept"),
        (GOOD.replace("<self-attention>", "<attention>"), "role not kept"),
        (GOOD.replace("https://numpy.org", "https://numpy.org/doc"), "link not kept"),
        (GOOD.replace("自注意力 <", "注意力 <"), "terminology"),
    ],
)
def test_the_check_names_what_a_translation_lost(broken, problem):
    problems = translations.message_problems(SOURCE, broken, False, TERMS)
    assert any(p.startswith(problem) for p in problems), problems


def test_a_fuzzy_entry_is_not_finished():
    assert any(
        p.startswith("fuzzy") for p in translations.message_problems(SOURCE, GOOD, True, TERMS)
    )


POOLING = translations.Term("max pooling", "最大汇聚", True, also=("最大池化",))
GLIMPSE = translations.Term("glimpse", "一瞥", False, avoid=("瞥视",))


def test_an_accepted_alternative_satisfies_a_checked_term():
    source = "Max pooling overfits."
    assert translations.message_problems(source, "最大池化容易过拟合。", False, [POOLING]) == []
    assert translations.message_problems(source, "最大汇聚会过拟合。", False, [POOLING]) == []
    assert translations.message_problems(source, "最大值会过拟合。", False, [POOLING])


def test_a_drifted_rendering_fails_even_for_an_unchecked_term():
    source = "The model learns where to put its next glimpse."
    assert (
        translations.message_problems(source, "模型学习下一次一瞥看向哪里。", False, [GLIMPSE])
        == []
    )
    (problem,) = translations.message_problems(
        source, "模型学习下一次瞥视看向哪里。", False, [GLIMPSE]
    )
    assert problem.startswith("terminology") and "瞥视" in problem


def test_a_drifted_rendering_counts_in_prose_only_and_emphasis_hides_no_term():
    notebook = translations.Term("notebook", "笔记本", True, avoid=("notebook",))
    assert (
        translations.message_problems(
            "Open the notebook `notebook.ipynb`.",
            "打开笔记本 `notebook.ipynb`。",
            False,
            [notebook],
        )
        == []
    )
    assert translations.message_problems(
        "Submit the notebook.", "提交 notebook。", False, [notebook]
    )
    # the original given in brackets after its Chinese is not a drift
    assert not translations.message_problems("notebook", "笔记本（notebook）", False, [notebook])
    dropout = translations.Term("inverted dropout", "倒置暂退法", True, avoid=("反向暂退法",))
    assert (
        translations.message_problems("*inverted* dropout", "**倒置**暂退法", False, [dropout])
        == []
    )
    assert translations.message_problems("*inverted* dropout", "**反向**暂退法", False, [dropout])


def test_chinese_in_italics_is_a_problem_but_bold_latin_italics_and_math_are_not():
    source = "The *query* is what we look for; *I saw a butterfly*; $a*b*c$."
    good = "**查询**就是我们要找的东西；*I saw a butterfly*；$a*b*c$。"
    assert translations.message_problems(source, good, False, []) == []
    (problem,) = translations.message_problems(
        source, good.replace("**查询**", "*查询*"), False, []
    )
    assert problem.startswith("italic Chinese") and "*查询*" in problem


def test_straight_quotes_in_chinese_prose_are_a_problem_but_not_in_code_or_english():
    """Sphinx's smart quotes turn （"it"） into （”it”）: the Chinese edition writes “…”."""
    source = 'A pronoun, 它 ("it"), and `s = "it"` in code.'
    good = '一个代词，它（“it”），以及代码里的 `s = "it"`。'
    assert translations.message_problems(source, good, False, []) == []
    (problem,) = translations.message_problems(source, good.replace("“it”", '"it"'), False, [])
    assert problem.startswith("straight quotes") and '"it"' in problem
    assert translations.straight_quotes('He said "it".') == []  # no Chinese: not ours


def test_the_search_dictionary_has_every_chinese_term_as_one_word():
    terms = translations.read_terminology()
    words = search.search_dictionary_words(terms)
    for word in ("暂退法", "束搜索", "多头注意力", "标签平滑", "词元", "池化", "掩蔽"):
        assert word in words
    assert not any(" " in w or not translations.HAN.search(w) for w in words)
    assert len(words) == len(set(words))


def test_terms_match_plurals_and_hyphenation_but_not_inside_code_or_math():
    term = translations.Term("positional encoding", "位置编码", True)
    assert translations.message_problems("Two positional encodings.", "两种编码。", False, [term])
    assert translations.message_problems("Positional-encoding tables", "表", False, [term])
    assert not translations.message_problems(
        "`positional_encoding` returns", "`positional_encoding` 返回", False, [term]
    )


# ----------------------------------------------------------------------------------------
# the build extension


def test_english_words_ignore_math_code_roles_and_links():
    assert languages.english_words("$\\mathrm{softmax}(x)$ `np.exp` {eq}`ch1-x` 3.5") == []
    assert languages.english_words("Nadaraya–Watson 核回归") == ["Nadaraya", "Watson"]
    assert languages.english_words("[链接](https://example.org/page) 和 $a$") == []


@pytest.mark.parametrize(
    "language, page, expected",
    [
        ("en", "book/ch1_pooling", "../zh/book/ch1_pooling.html"),
        ("en", "book/exercises/ch1_pooling", "../../zh/book/exercises/ch1_pooling.html"),
        ("en", "index", "zh/index.html"),
        ("zh_CN", "book/ch1_pooling", "../../book/ch1_pooling.html"),
        ("zh_CN", "book/exercises/ch1_pooling", "../../../book/exercises/ch1_pooling.html"),
        ("zh_CN", "index", "../index.html"),
    ],
)
def test_the_switch_leads_to_the_same_page_in_the_other_edition(language, page, expected):
    app = SimpleNamespace(
        config=SimpleNamespace(language=language),
        builder=SimpleNamespace(format="html", get_target_uri=lambda name: f"{name}.html"),
    )
    context = {}
    editions.edition_links(app, page, "page.html", context, None)
    (link,) = context["edition_links"]
    assert link["href"] == expected
    assert link["hreflang"] == ("zh-CN" if language == "en" else "en")


# ----------------------------------------------------------------------------------------
# figures in two languages

CATALOG = {
    "head {}": "头 {}",
    "queries": "查询",
    "keys": "键",
    "attention weight": "注意力权重",
    "layer {}": "第 {} 层",
    "$\\sigma$ = {}": "$\\sigma$ = {}",
}


def test_figure_texts_are_translated_line_by_line_with_their_numbers():
    assert plotting.translate_figure_text("layer 2\nqueries", CATALOG) == "第 2 层\n查询"
    assert plotting.translate_figure_text("$\\sigma$ = 0.25", CATALOG) == "$\\sigma$ = 0.25"
    assert plotting.translate_figure_text("0.5", CATALOG) == "0.5"  # no word: unchanged
    assert plotting.translate_figure_text("它", CATALOG) == "它"


def test_a_missing_figure_text_names_the_msgid_to_add():
    with pytest.raises(plotting.UntranslatedFigureText, match=r"msgid 'head \{\} of \{\}'"):
        plotting.translate_figure_text("head 3 of 8", CATALOG)
    with pytest.raises(plotting.UntranslatedFigureText, match="must keep its 1"):
        plotting.translate_figure_text("head 3", {"head {}": "头"})


def _heatmap():
    weights = np.full((2, 3, 3), 1 / 3)
    return plotting.show_heatmaps(
        weights, titles=["head 1", "head 2"], x_ticklabels=["a", "bb", "c"]
    )


def test_the_chinese_rendering_translates_labels_but_not_tokens_and_restores_the_figure(
    monkeypatch,
):
    monkeypatch.setattr(plotting, "_figure_catalog", lambda: CATALOG)
    fig = _heatmap()
    texts = {t.get_text() for t in plotting.figure_texts(fig)}
    assert {"head 1", "head 2", "keys", "queries", "attention weight"} <= texts
    assert "bb" not in texts  # a tick label: data, not translated
    plotting.render_png(fig)  # the first draw settles the constrained layout
    english = plotting.render_png(fig)
    chinese = plotting.render_png(fig, "zh_CN")
    assert chinese[:8] == b"\x89PNG\r\n\x1a\n" and chinese != english
    assert {t.get_text() for t in plotting.figure_texts(fig)} == texts  # put back
    assert plotting.render_png(fig) == english


def test_an_untranslated_label_fails_the_chinese_rendering(monkeypatch):
    monkeypatch.setattr(plotting, "_figure_catalog", lambda: {"keys": "键"})
    with pytest.raises(plotting.UntranslatedFigureText):
        plotting.render_png(_heatmap(), "zh_CN")


def test_every_figure_text_of_the_repository_catalog_is_translated():
    catalog = plotting._figure_catalog()
    assert len(catalog) >= 50 and all(catalog.values())
    for msgid, msgstr in catalog.items():
        assert msgstr.count("{}") == msgid.count("{}"), msgid


def test_the_myst_nb_renderer_turns_the_chinese_png_into_an_image():
    calls = []
    renderer = SimpleNamespace(
        render_image=lambda data: calls.append(("block", data.mime_type)) or ["image"],
        render_image_inline=lambda data: calls.append(("inline", data.mime_type)) or ["inline"],
    )
    from myst_nb.core.render import MimeData

    png = base64.b64encode(b"\x89PNG").decode()
    data = MimeData(plotting.ZH_PNG_MIME, png)
    assert plotting.ZhFigureRenderer.handle_mime(renderer, data, False) == ["image"]
    assert plotting.ZhFigureRenderer.handle_mime(renderer, data, True) == ["inline"]
    assert calls == [("block", "image/png"), ("inline", "image/png")]
    other = MimeData("image/png", png)
    assert plotting.ZhFigureRenderer.handle_mime(renderer, other, False) is None
    from importlib.metadata import entry_points

    plugins = [ep.load() for ep in entry_points(group="myst_nb.mime_renderers")]
    assert plotting.ZhFigureRenderer in plugins, "pyproject.toml's entry point is not installed"


def test_a_translated_label_with_math_draws_its_chinese_in_the_cjk_font(monkeypatch):
    """mathtext draws the plain part of "$...$" text with one font and no fallback: the
    Chinese rendering puts the CJK font first there (else every character is a box)."""
    from matplotlib.figure import Figure

    monkeypatch.setattr(
        plotting, "_figure_catalog", lambda: {"loss $L(\\sigma)$": "损失 $L(\\sigma)$"}
    )
    fig = Figure()
    ax = fig.subplots()
    ax.plot([0, 1])
    ax.set_title("loss $L(\\sigma)$")
    family = ax.title.get_fontfamily()
    assert plotting.render_png(fig, "zh_CN")[:4] == b"\x89PNG"
    assert ax.title.get_text() == "loss $L(\\sigma)$" and ax.title.get_fontfamily() == family


def test_a_box_in_mathtext_is_an_error_not_a_log_line():
    from matplotlib.figure import Figure

    fig = Figure()
    fig.subplots().set_title("损失 $L$")  # Chinese in mathtext, the Latin font first
    with pytest.raises(plotting.MissingGlyph, match="dummy symbol"):
        plotting.render_png(fig)


def test_a_figure_without_its_chinese_rendering_fails_the_chinese_build(monkeypatch):
    """myst-nb renders every representation of an output, then keeps one: the check looks
    at the bundle before that, so an output cached without ZH_PNG_MIME is caught."""
    from docutils import nodes
    from docutils.frontend import get_default_settings
    from docutils.parsers.rst import Parser
    from docutils.utils import new_document

    def bundle(*kinds):
        node = nodes.container(nb_element="mime_bundle")
        node.extend(nodes.container(mime_type=kind) for kind in kinds)
        return node

    warned = []
    monkeypatch.setattr(
        pages, "logger", SimpleNamespace(warning=lambda *args, **kw: warned.append(args))
    )
    for language, expected in (("en", 0), ("zh_CN", 1)):
        warned.clear()
        document = new_document("page", get_default_settings(Parser))
        document.settings.env = SimpleNamespace(config=SimpleNamespace(language=language))
        document += bundle("image/png", plotting.ZH_PNG_MIME, "text/plain")  # complete
        document += bundle("image/png", "text/plain")  # cached without its Chinese figure
        document += bundle("text/plain")  # not a figure
        transform = pages.FiguresInThisLanguage(document)
        transform.run()
        assert len(warned) == expected, (language, warned)


def test_a_variant_that_drifted_in_is_flagged_whatever_the_english():
    """One Chinese word per meaning (``translations.VARIANTS``): 几何数列, 正向, 评分 for
    grading (评分 is the glossary's "score"), 分数 for a task's points, the course's English
    title are each reported with the edition's word; math and code are not prose."""
    assert translations.variant_problems("它们是等比数列，前向传播，计分程序，人工批改。") == []
    for wrong, right in (
        ("几何数列", "等比数列"),
        ("正向运行了软注意力", "前向计算"),
        ("课程的评分程序", "计分程序"),
        ("（2 分，人工评分）", "人工批改"),
        ("| 题号 | 函数 | 分数 |", "| 分值 |"),
        ("这是课程 *Attention, derived* 的作业", "推导注意力"),
    ):
        (problem,) = translations.variant_problems(wrong)
        assert right in problem, problem
    assert translations.variant_problems("`正向传播` 与 $\\text{几何数列}$") == []
    # the catalogs hold none (also part of test_every_catalog_is_complete_and_keeps_what_it_must)
    for path in sorted(translations.CATALOGS.rglob("*.po")):
        for message in translations.read_catalog(path):
            if message.id and message.string:
                assert translations.variant_problems(message.string) == [], (path, message.id)
