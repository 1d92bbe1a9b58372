"""Two editions of the book, English and Chinese, from one set of sources.

The Chinese edition is the same Sphinx project built with ``language = "zh_CN"``: Sphinx
replaces every translatable message of a page by its translation from the gettext
catalogs in ``locale/zh_CN/LC_MESSAGES/`` (one ``.po`` per page, ``gettext_compact =
False``), see docs/translating.md. This extension adds what that mechanism lacks:

- **Math is not a message.** A display-math block is the same formula in both editions,
  so it is marked untranslatable: it never reaches a catalog, and a translator cannot
  break it. (Inline math stays inside its sentence; ``tools/translations.py`` checks that
  every translation keeps the ``$...$`` segments, roles and code spans of its source.)
- **An untranslated message fails the build.** Sphinx silently keeps the English text
  of a message whose translation is missing, empty, fuzzy or outdated (a changed English
  sentence no longer matches its ``msgid``). In a non-English build every such message
  is a warning naming the page and line, which ``--warningiserror`` turns into a failure.
  A message that needs no translation (a name, a number, only math or code) is exempt:
  one with no English word outside its math, code, roles and links.
- **Each edition's assignments.** A ``{download}`` of a released assignment
  (``autograder/release/<id>.zip`` or ``<id>/<id>.ipynb``) gets, in a translated edition,
  that language's release (``autograder/release/zh_CN/...``, same file names), which
  ``python -m autograder.course.release`` makes from the same source notebook.
- **The theme speaks the edition's language.** sphinx-book-theme's own catalog
  (``booktheme``) is replaced by the course's (``theme_strings_in_this_language``), so its
  tooltips and footer are mainland Chinese, not the theme's Taiwan usage or English.
- **Chinese search finds Chinese words.** The Chinese edition's search index is segmented
  by jieba with the terminology's Chinese terms as its user dictionary
  (``chinese_search_dictionary``), so 暂退法 or 束搜索 finds the pages that use it; a
  one-character term (键, 值, 头) is indexed too, also inside a longer word (键 in the
  heading 键值注意力). The search page segments the query the same way in the browser
  (book/_static/zh-search.js, by maximum matching over the index's own words and the
  terminology), replaces a synonym (the terminology's ``also`` and ``search`` columns:
  层归一化 -> 层规范化) by the term, and ranks a page by how often it uses the query's
  words for its length, whether it links their glossary entry, whether its title is about
  the word and whether it writes the query's words as one phrase
  (``_static/zh-search-data.js``, written after the build).
- **The glossary in Chinese order.** The Chinese edition's glossary is sorted by the pinyin
  of its Chinese headwords (``GlossaryInChineseOrder``, with pypinyin).
- **Bold and italics pair next to Chinese.** CommonMark decides whether a ``**`` opens or
  closes from the characters around it, and assumes words are separated by spaces: in
  ``一个**{term}`键 <key>`**（它的`` neither ``**`` qualifies (punctuation on one side, a
  Chinese character on the other), so the reader saw the asterisks. The parser treats a
  CJK character beside a delimiter run as it treats a space there
  (``cjk_friendly_emphasis``, the rule of the markdown-cjk-friendly proposal), in both
  editions; ``tools/translations.py check`` parses every message with the same rule and
  reports a ``*`` left unpaired.
- **Every figure has a description.** A code cell's figures get their alt text from
  the cell's metadata, ``"figure_descriptions"``: one English description per figure it
  shows, in order (``FigureDescriptions``). Sphinx extracts an image's alt text as a
  message of the page's catalog, so the Chinese edition describes its figures in
  Chinese; a figure without a description fails the build (a screen reader would read
  the image's file name).
- **The page's source in its language.** The page's "download source" button offers
  ``_sources/<page>.ipynb``; in a translated edition that notebook's markdown cells are
  translated from the page's catalog (``sources_in_this_language``), its code the same.
- **A language switch on every page**, in the article header next to the download
  button, that leads to the same page in the other edition. The English edition is the
  site's root; the Chinese one is its ``zh/`` folder (``EDITIONS``).

The parts: ``languages`` (the editions, English words), ``pages`` (the doctree transforms),
``sources`` (the translated source notebooks), ``search`` (the terminology and the Chinese
search), ``emphasis`` (bold and italics next to Chinese); this module sets them up, with the
language switch, the configuration's texts and the theme's catalog.
"""

from __future__ import annotations

import io
from pathlib import Path

from sphinx.application import Sphinx

from editions.emphasis import cjk_friendly_emphasis
from editions.languages import EDITIONS, is_default
from editions.pages import (
    AssignmentsInThisLanguage,
    FigureDescriptions,
    FiguresInThisLanguage,
    GlossaryInChineseOrder,
    MathIsNotAMessage,
    TranslatedTocCaptions,
    UntranslatedMessages,
)
from editions.search import (
    chinese_search_dictionary,
    chinese_search_page_scripts,
    write_chinese_search_data,
)
from editions.sources import sources_in_this_language

STATIC = Path(__file__).resolve().parents[2] / "_static"

# The few texts that come from the configuration (_config.yml), not from a page, and so from
# no catalog: the site title, the footer's author, the search box's placeholder, the footer.
CONFIG_TEXTS = {
    "zh_CN": {
        "html_title": "推导注意力",
        "author": "《推导注意力》课程组",
        "search_bar_text": "搜索本书……",
        "extra_footer": "本站的每一幅图都是在构建本书时，由图上方所示的代码计算生成的。",
    },
}


def edition_links(
    app: Sphinx, pagename: str, templatename: str, context: dict, doctree
) -> None:
    """Put the link to this page in the other edition(s) into the template context."""
    if app.builder.format != "html":
        return
    language = app.config.language or "en"
    folder = EDITIONS.get(language, EDITIONS["en"])[0]
    # from this page up to the root of its edition, then up to the site root
    target = app.builder.get_target_uri(pagename)
    to_edition_root = "../" * target.count("/")
    to_site_root = to_edition_root + "../" * folder.count("/")
    context["edition_links"] = [
        {
            "href": f"{to_site_root}{other_folder}{target}",
            "label": label,
            "hreflang": other.replace("_", "-"),
        }
        for other, (other_folder, label) in EDITIONS.items()
        if other != language
    ]


def translate_config(app: Sphinx, config) -> None:
    """Put this edition's title, search placeholder and footer into the configuration."""
    texts = CONFIG_TEXTS.get(config.language or "en")
    if not texts:
        return
    config.html_title = texts["html_title"]
    config.author = texts["author"]  # the footer's "By ..." (sphinx-book-theme)
    options = dict(config.html_theme_options)
    options["search_bar_text"] = texts["search_bar_text"]
    options["extra_footer"] = texts["extra_footer"]
    config.html_theme_options = options


# gettext domains of the theme whose course-local catalog (locale/<language>/LC_MESSAGES/
# <domain>.po) goes in front of the theme's own: sphinx-book-theme's zh_CN catalog has Taiwan
# usage (列印成 PDF). The "sphinx" domain (pydata-sphinx-theme's navigation, tooltips and
# footer) needs nothing here: Sphinx itself reads a sphinx.po in locale_dirs first.
THEME_DOMAINS = ("booktheme",)


def theme_strings_in_this_language(app: Sphinx, config) -> None:
    """Translate the theme's own texts (tooltips, footer) with the course's catalog first.

    The theme registered its catalog in its setup (before config-inited); Sphinx merges a
    second catalog for a domain only as a fallback, so this compiles ours (in memory) and
    makes it the domain's translator, with the theme's behind it."""
    if is_default(config.language):
        return
    import gettext

    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po
    from sphinx import locale

    sources = Path(app.srcdir, config.locale_dirs[0], config.language, "LC_MESSAGES")
    for domain in THEME_DOMAINS:
        source = sources / f"{domain}.po"
        if not source.is_file():
            continue
        with open(source, "rb") as handle:
            catalog = read_po(handle, locale=config.language)
        compiled = io.BytesIO()
        write_mo(compiled, catalog)
        compiled.seek(0)
        ours = gettext.GNUTranslations(compiled)
        theirs = locale.translators.get(("general", domain))
        if theirs is not None and type(theirs) is not gettext.NullTranslations:
            ours.add_fallback(theirs)
        locale.translators["general", domain] = ours


def setup(app: Sphinx) -> dict:
    cjk_friendly_emphasis()
    app.connect("config-inited", translate_config)
    app.connect("config-inited", chinese_search_dictionary)
    app.connect("config-inited", theme_strings_in_this_language)
    # the switch's style and the Chinese edition's font fallbacks (book/_static/editions.css)
    app.connect(
        "config-inited",
        lambda app, config: config.html_static_path.append(str(STATIC)),
    )
    app.add_css_file("editions.css")
    app.add_transform(MathIsNotAMessage)
    app.add_transform(FigureDescriptions)
    app.add_transform(UntranslatedMessages)
    app.add_transform(TranslatedTocCaptions)
    app.add_transform(GlossaryInChineseOrder)
    app.add_transform(AssignmentsInThisLanguage)
    app.add_post_transform(FiguresInThisLanguage)
    app.connect("html-page-context", edition_links)
    app.connect("build-finished", sources_in_this_language)
    app.connect("html-page-context", chinese_search_page_scripts)
    app.connect("build-finished", write_chinese_search_data)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
