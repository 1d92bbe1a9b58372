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
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.locale import init as init_locale
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.i18n import docname_to_domain
from sphinx.util.nodes import extract_messages

logger = logging.getLogger(__name__)
STATIC = Path(__file__).resolve().parents[1] / "_static"

# language -> (folder of the edition below the site root, name of the link to it).
# The first is the default edition, built at the root.
EDITIONS = {"en": ("", "English"), "zh_CN": ("zh/", "中文")}

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

# What is not English prose in a message: display/inline math, code spans, MyST roles
# ({cite:t}`key`, {eq}`label`, {doc}`path`, {term}`text <target>`), link targets, URLs.
NOT_PROSE = re.compile(
    r"\$\$.*?\$\$|\$[^$]*\$|\{[a-z:]+\}`[^`]*`|``.*?``|`[^`]*`|\]\([^)]*\)|<[^>]*>|https?://\S+",
    re.DOTALL,
)
_ENGLISH_WORD = re.compile(r"[A-Za-z]{2,}")


def english_words(message: str) -> list[str]:
    """The English words of ``message`` outside math, code, roles, links and URLs."""
    return _ENGLISH_WORD.findall(NOT_PROSE.sub(" ", message))


# ----------------------------------------------------------------------------------------
# the terminology (locale/<language>/terminology.tsv): checked by tools/translations.py,
# and the Chinese search's user dictionary


@dataclass(frozen=True)
class Term:
    english: str
    chinese: str
    checked: bool
    also: tuple[str, ...] = ()  # accepted alternatives to ``chinese``
    avoid: tuple[
        str, ...
    ] = ()  # drifted renderings that must not appear (the ``not`` column)
    search: tuple[
        str, ...
    ] = ()  # other words a reader may search for it by (the ``search`` column)

    def renderings(self) -> tuple[str, ...]:
        """Every accepted Chinese rendering, the preferred one first."""
        return (self.chinese, *self.also)

    def pattern(self) -> re.Pattern[str]:
        words = r"[\s-]+".join(
            re.escape(word) for word in re.split(r"[\s-]+", self.english)
        )
        return re.compile(rf"(?<![A-Za-z]){words}(?:s|es)?(?![A-Za-z])", re.IGNORECASE)


def _alternatives(cell: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (cell or "").split("|") if part.strip())


def read_terminology(path: Path) -> list[Term]:
    """The terms of ``locale/<language>/terminology.tsv`` (docs/translating.md); a malformed
    row is an error naming its term."""
    lines = path.read_text(encoding="utf-8").splitlines()
    rows = [line for line in lines if line.strip() and not line.startswith("#")]
    reader = csv.DictReader(rows, delimiter="\t")
    terms = []
    for row in reader:
        if row.get("checked") not in ("yes", "no") or not row.get("chinese"):
            raise ValueError(
                f"{path.name}: the row {row.get('english')!r} needs a Chinese term and "
                f"checked = yes or no (got {row.get('checked')!r})"
            )
        terms.append(
            Term(
                row["english"],
                row["chinese"],
                row["checked"] == "yes",
                _alternatives(row.get("also")),
                _alternatives(row.get("not")),
                _alternatives(row.get("search")),
            )
        )
    return terms


_HAN = re.compile(r"[\u4e00-\u9fff]")


def search_dictionary_words(terms: list[Term]) -> list[str]:
    """The Chinese words of the terminology, for the search's segmenter (jieba): every
    accepted rendering, split at its spaces ("掩蔽 softmax" gives 掩蔽; jieba cuts at
    spaces and Latin letters anyway), each word once."""
    words: dict[str, None] = {}
    for term in terms:
        for rendering in term.renderings():
            words.update(
                (piece, None) for piece in rendering.split() if _HAN.search(piece)
            )
    return list(words)


def search_synonyms(terms: list[Term]) -> dict[str, str]:
    """What the Chinese search replaces a query word by: each accepted alternative (``also``)
    and each search-only synonym (``search``) of a term -> the term's Chinese. A synonym
    shared by two terms (or equal to a term's own Chinese) is left alone."""
    own = {
        piece for term in terms for piece in term.chinese.split() if _HAN.search(piece)
    }
    synonyms: dict[str, str] = {}
    ambiguous: set[str] = set()
    for term in terms:
        for word in (*term.also, *term.search):
            if word in own or word == term.chinese or not _HAN.search(word):
                continue
            if synonyms.get(word, term.chinese) != term.chinese:
                ambiguous.add(word)
            synonyms[word] = term.chinese
    return {word: target for word, target in synonyms.items() if word not in ambiguous}


def single_character_terms(terms: list[Term]) -> set[str]:
    """The terms that are one Chinese character (键, 值, 头, 核, 项): indexed and searched as
    words, where Sphinx's Chinese search drops every one-character word."""
    return {
        piece
        for term in terms
        for piece in term.renderings()
        if len(piece) == 1 and _HAN.search(piece)
    }


try:  # Sphinx's Chinese search (it imports jieba if it can)
    from sphinx.search.zh import SearchChinese as _SearchChinese
except ImportError:  # pragma: no cover - Sphinx always has it
    _SearchChinese = None

if _SearchChinese is not None:

    class SearchChineseWithTerms(_SearchChinese):
        """Sphinx's Chinese search, but a one-character term (键, 值, 头) is a word too,
        also inside a longer word: jieba cuts the heading 键值注意力 into 键值 and 注意力,
        and the page that introduces keys and values would not have 键 in a heading (jieba's
        search cut gives the shorter words inside a long one, 注意 in 注意力, the same way)."""

        single: frozenset[str] = frozenset()

        def split(self, input: str) -> list[str]:
            words = super().split(input)
            inside = [
                c for word in words if len(word) > 1 for c in word if c in self.single
            ]
            return words + inside

        def word_filter(self, stemmed_word: str) -> bool:
            return super().word_filter(stemmed_word) or stemmed_word in self.single


def chinese_search_dictionary(app: Sphinx, config) -> None:
    """Segment the Chinese edition's search index with the course's terms as whole words.

    Sphinx's Chinese search splits text with jieba when it is importable (else it indexes
    no Chinese word at all) and loads ``html_search_options["dict"]`` as jieba's user
    dictionary. The dictionary is written here from terminology.tsv, so a new term is
    searchable as one word (束搜索, 多头注意力) without a second list; its digest in the
    options makes Sphinx re-index every page when the terminology changes."""
    if not (config.language or "").startswith("zh"):
        return
    try:
        import jieba
    except ImportError:
        logger.warning(
            "jieba is not installed: the Chinese search index would hold no Chinese word "
            "(.venv/bin/pip install -r requirements.txt)",
            type="editions",
            subtype="search",
        )
        return
    import logging as _logging

    jieba.setLogLevel(
        _logging.WARNING
    )  # not its "Building prefix dict..." on every build
    table = Path(app.srcdir, config.locale_dirs[0], config.language, "terminology.tsv")
    text = "".join(
        f"{word}\n" for word in search_dictionary_words(read_terminology(table))
    )
    path = Path(app.doctreedir) / "search-dictionary.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    terms = read_terminology(table)
    SearchChineseWithTerms.single = frozenset(single_character_terms(terms))
    import sphinx.search

    sphinx.search.languages["zh"] = SearchChineseWithTerms
    app._zh_search = {
        "synonyms": search_synonyms(terms),
        "single": sorted(SearchChineseWithTerms.single),
        "words": search_dictionary_words(terms),
    }
    digest = hashlib.sha256(
        (text + json.dumps(app._zh_search, sort_keys=True)).encode()
    ).hexdigest()[:16]
    config.html_search_options = {
        **(config.html_search_options or {}),
        "dict": str(path),
        "terms": digest,
    }


# ----------------------------------------------------------------------------------------
# emphasis next to Chinese (CommonMark's flanking rules assume words separated by spaces)

_CJK = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u2ff0-\u303f\u3040-\u31ff\u3200-\u9fff"
    "\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"
    "\U00020000-\U0003ffff]"
)


def is_cjk(char: str) -> bool:
    """A Chinese, Japanese or Korean character, or CJK (full-width) punctuation."""
    return bool(_CJK.match(char))


def _cjk_friendly_scan_delims(self, start: int, canSplitWord: bool):
    """markdown-it's ``StateInline.scanDelims`` with the flanking rules of the
    markdown-cjk-friendly proposal: a run of ``*`` followed by punctuation still opens
    when a CJK character precedes it, and one preceded by punctuation still closes when a
    CJK character follows it (CommonMark asks for a space or punctuation on that side,
    which Chinese does not write). Nothing changes where no CJK character touches the run.
    """
    from markdown_it.common.utils import isMdAsciiPunct, isPunctChar, isWhiteSpace
    from markdown_it.rules_inline.state_inline import Scanned

    pos, maximum, marker = start, self.posMax, self.src[start]
    last = self.src[start - 1] if start > 0 else " "
    while pos < maximum and self.src[pos] == marker:
        pos += 1
    following = self.src[pos] if pos < maximum else " "
    last_punct = isMdAsciiPunct(ord(last)) or isPunctChar(last)
    next_punct = isMdAsciiPunct(ord(following)) or isPunctChar(following)
    last_space, next_space = isWhiteSpace(ord(last)), isWhiteSpace(ord(following))
    left_flanking = not next_space and (
        not next_punct or last_space or last_punct or is_cjk(last)
    )
    right_flanking = not last_space and (
        not last_punct or next_space or next_punct or is_cjk(following)
    )
    if canSplitWord:
        can_open, can_close = left_flanking, right_flanking
    else:
        can_open = left_flanking and (not right_flanking or last_punct)
        can_close = right_flanking and (not left_flanking or next_punct)
    return Scanned(can_open, can_close, pos - start)


def cjk_friendly_emphasis() -> None:
    """Make every markdown-it parser of this process pair ``**``/``*`` next to CJK text
    (MyST's and myst-nb's, hence the pages, the notebooks and the catalogs' messages)."""
    from markdown_it.rules_inline.state_inline import StateInline

    StateInline.scanDelims = _cjk_friendly_scan_delims


# The Chinese search page's query segmenter (book/_static/zh-search.js) and the data the
# build gives it (zh-search-data.js, written after the pages: it counts the index's words in
# each built page)
SEARCH_SCRIPT = "zh-search.js"
SEARCH_DATA = "zh-search-data.js"
_TAGS = re.compile(r"<script.*?</script>|<style.*?</style>|<[^>]+>", re.DOTALL)
# inline markup inside a sentence: removed without a gap, so that a word split by it
# (**非自主性**提示, a {term} link) is still one word; every other tag separates
_INLINE_TAG = re.compile(r"</?(?:a|strong|em|span|b|i|code)\b[^>]*>")
_HAN_RUN = re.compile(r"[\u4e00-\u9fff]+")
# what may stand between the two words of a compound on a page: 编码器-解码器
_JOINER = re.compile(r"[-\u2010-\u2014]?")


def chinese_search_page_scripts(
    app: Sphinx, pagename: str, templatename: str, context: dict, doctree
) -> None:
    """On the Chinese search page, load the query segmenter before Sphinx's searchtools.js,
    which keeps a ``splitQuery`` and a ``Scorer`` that a page defines first."""
    if pagename != "search" or not hasattr(app, "_zh_search"):
        return
    app.add_js_file(SEARCH_DATA, priority=400)
    app.add_js_file(SEARCH_SCRIPT, priority=401)


def page_text(html: str) -> str:
    """The text of a built page's article (its main content), tags removed."""
    start = html.find('<article class="bd-article"')
    end = html.find("</article>", start)
    if start >= 0 and end > start:
        html = html[start:end]
    return _TAGS.sub(" ", _INLINE_TAG.sub("", html))


def word_pairs(texts: list[str], words: set[str]) -> dict[str, dict[int, int]]:
    """How often each page writes two of ``words`` one right after the other (掩蔽 then
    自注意力, 编码器-解码器), keyed "first second": the search ranks a page that has the
    query's words as one phrase above a page that has them apart. The words are found
    longest first, as the query is cut."""
    if not words:
        return {}
    alternatives = "|".join(map(re.escape, sorted(words, key=lambda w: (-len(w), w))))
    pattern = re.compile(alternatives)
    pairs: dict[str, dict[int, int]] = {}
    for page, text in enumerate(texts):
        previous = None
        for match in pattern.finditer(text):
            if previous is not None and _JOINER.fullmatch(
                text, previous.end(), match.start()
            ):
                row = pairs.setdefault(f"{previous.group()} {match.group()}", {})
                row[page] = row.get(page, 0) + 1
            previous = match
    return pairs


_GLOSSARY_HEADWORD = re.compile(r'<dt id="(term-[^"]+)">([^<（]+)')
_TERM_LINK = re.compile(r'href="[^"]*glossary\.html#(term-[^"]+)"')


def glossary_links(app: Sphinx, docnames: list[str]) -> dict[str, list[int]]:
    """Each glossary headword's Chinese -> the page (index into ``docnames``, in a list)
    that introduces it: the first chapter that links it with ``{term}`` (every chapter
    links a term at its first use there), else the first other page that does. The search
    ranks that page higher."""
    glossary = Path(app.outdir, "book", "glossary.html")
    if not glossary.is_file():
        return {}
    headwords = dict(_GLOSSARY_HEADWORD.findall(glossary.read_text(encoding="utf-8")))
    pages: dict[str, list[int]] = {}
    chapters_first = sorted(
        range(len(docnames)),
        key=lambda i: (not docnames[i].startswith("book/ch"), docnames[i]),
    )
    for i in chapters_first:
        docname = docnames[i]
        page = Path(app.outdir, app.builder.get_target_uri(docname))
        if docname.endswith("glossary") or not page.is_file():
            continue
        for target in set(_TERM_LINK.findall(page.read_text(encoding="utf-8"))):
            word = headwords.get(target, "").strip()
            if word and word not in pages:
                pages[word] = [i]
    return pages


def write_chinese_search_data(app: Sphinx, exception) -> None:
    """Write ``_static/zh-search-data.js``: the terminology's words, its synonyms and
    one-character terms, and how often each Chinese word of the search index occurs on each
    page (the search ranks a page that uses a word more above one that mentions it)."""
    if exception or app.builder.format != "html" or not hasattr(app, "_zh_search"):
        return
    index_path = Path(app.outdir, "searchindex.js")
    if not index_path.is_file():
        return
    raw = index_path.read_text(encoding="utf-8")
    index = json.loads(raw[raw.index("(") + 1 : raw.rindex(")")])
    docnames = index["docnames"]
    texts = []
    for docname in docnames:
        page = Path(app.outdir, app.builder.get_target_uri(docname))
        texts.append(
            page_text(page.read_text(encoding="utf-8")) if page.is_file() else ""
        )
    words = {
        word
        for group in (index["terms"], index["titleterms"])
        for word in group
        if _HAN_RUN.fullmatch(word)
    }
    words.update(app._zh_search["words"])
    words.update(app._zh_search["synonyms"].values())
    counts = {}
    for word in sorted(words):
        row = {i: text.count(word) for i, text in enumerate(texts)}
        row = {i: n for i, n in row.items() if n}
        if row:
            counts[word] = row
    terms = {
        piece
        for word in (*app._zh_search["words"], *app._zh_search["synonyms"].values())
        for piece in _HAN_RUN.findall(word)
    }
    data = {
        **app._zh_search,
        "docnames": docnames,
        "counts": counts,
        "lengths": [len("".join(_HAN_RUN.findall(text))) for text in texts],
        "pairs": word_pairs(texts, terms),
        "introduced": glossary_links(app, docnames),
    }
    target = Path(app.outdir, "_static", SEARCH_DATA)
    target.write_text(
        "var ZH_SEARCH_DATA = "
        + json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        + ";\n",
        encoding="utf-8",
    )


def is_default(language: str | None) -> bool:
    return (language or "en") == next(iter(EDITIONS))


class MathIsNotAMessage(SphinxTransform):
    """Display math is the same in every edition: keep it out of the catalogs.

    Runs before Sphinx's ``Locale`` transform (priority 20), which skips a node whose
    ``translatable`` is False, as does the gettext builder's message extraction.
    """

    default_priority = 10

    def apply(self, **kwargs) -> None:
        for node in self.document.findall(nodes.math_block):
            node["translatable"] = False


FIGURE_DESCRIPTIONS = "figure_descriptions"  # the code cell's metadata key


class FigureDescriptions(SphinxTransform):
    """Give each figure a code cell shows its description as alt text.

    The descriptions are the cell's ``metadata["figure_descriptions"]``, one per figure
    (an output with an image; myst-nb keeps every rendering of one output in one
    ``mime_bundle``, the English PNG and the Chinese one alike). Runs before ``Locale``
    (20), so the alt text is a message of the page's catalog, and the Chinese edition
    replaces it by its translation.
    """

    default_priority = 15

    def apply(self, **kwargs) -> None:
        for cell in self.document.findall(nodes.container):
            if cell.get("nb_element") != "cell_code":
                continue
            figures: list[list[nodes.image]] = []
            for output in cell.findall(nodes.container):
                if output.get("nb_element") == "mime_bundle":
                    images = list(output.findall(nodes.image))
                    if images:
                        figures.append(images)
            lone = [
                image
                for image in cell.findall(nodes.image)
                if not any(image in figure for figure in figures)
            ]
            figures += [[image] for image in lone]
            descriptions = (cell.get("cell_metadata") or {}).get(
                FIGURE_DESCRIPTIONS, []
            )
            if len(descriptions) != len(figures):
                logger.warning(
                    "a code cell shows %d figure(s) and describes %d: give it one "
                    "description per figure in its metadata %r (the figures' alt text)",
                    len(figures),
                    len(descriptions),
                    FIGURE_DESCRIPTIONS,
                    location=cell,
                    type="editions",
                    subtype="figure_description",
                )
            for images, description in zip(figures, descriptions):
                for image in images:
                    image["alt"] = description
                    image["alt_source"] = description
            if self.app.builder.name == "gettext":
                # the message extraction sees the doctree after myst-nb kept one rendering
                # of each output, for this builder the text: the descriptions go in as
                # paragraphs of their own (this builder writes only the catalogs)
                for description in descriptions:
                    paragraph = nodes.paragraph(description, description)
                    paragraph.source = cell.source or self.document["source"]
                    paragraph.line = cell.line or 1
                    cell += paragraph


class UntranslatedMessages(SphinxTransform):
    """In a translated edition, warn about every message Sphinx left in English.

    Runs right after ``Locale`` (priority 20), which sets ``node["translated"]`` on every
    message it looked up: False when the catalog has no usable translation.
    """

    default_priority = 21

    def apply(self, **kwargs) -> None:
        if is_default(self.config.language):
            return
        for node, message in extract_messages(self.document):
            if isinstance(node, nodes.image):
                # Locale replaces an image's alt text without marking the node translated
                if node.get("alt") != node.get("alt_source") or not english_words(
                    message
                ):
                    continue
            elif node.get("translated") or not english_words(message):
                continue
            logger.warning(
                "untranslated message (add or update its msgstr in locale/%s/LC_MESSAGES/%s.po,"
                " see docs/translating.md): %r",
                self.config.language,
                self.env.docname,
                message[:120],
                location=node,
                type="editions",
                subtype="untranslated",
            )


RELEASED = re.compile(
    r"^(?P<head>.*autograder/release/)(?P<tail>ch\d+_\w+(?:\.zip|/ch\d+_\w+\.ipynb))$"
)


class AssignmentsInThisLanguage(SphinxTransform):
    """In a translated edition, a download of a released assignment is that language's.

    Runs after ``Locale`` (20) swapped in the translated text (the translation keeps the
    English target, which ``tools/translations.py check`` enforces) and before the
    environment collects the files to copy (on doctree-read, after every transform).
    """

    default_priority = 22

    def apply(self, **kwargs) -> None:
        if is_default(self.config.language):
            return
        for node in self.document.findall(addnodes.download_reference):
            match = RELEASED.match(node.get("reftarget", ""))
            if match:
                node["reftarget"] = (
                    f"{match['head']}{self.config.language}/{match['tail']}"
                )


def pinyin_key(text: str) -> tuple[str, str]:
    """The order of a Chinese headword: its pinyin without tones, syllable by syllable
    (Latin letters as they are, lower case), then the text itself."""
    from pypinyin import Style, lazy_pinyin, load_phrases_dict

    # readings pypinyin's phrase table gets wrong in the course's terms
    load_phrases_dict({"重参数化": [["chóng"], ["cān"], ["shù"], ["huà"]]})
    headword = text.split("（")[0]
    syllables = lazy_pinyin(
        headword, style=Style.NORMAL, errors=lambda chars: chars.lower()
    )
    return (" ".join(s.strip().lower() for s in syllables if s.strip()), text)


class GlossaryInChineseOrder(SphinxTransform):
    """In the Chinese edition, the glossary's entries in the order of their Chinese
    headwords' pinyin (a Chinese student scans it by the Chinese), not the English one.

    Runs after ``Locale`` (20) has replaced each headword by its translation,
    ``中文（English）``; an entry with several headwords goes under its first."""

    default_priority = 23

    def apply(self, **kwargs) -> None:
        if is_default(self.config.language):
            return
        for glossary in self.document.findall(addnodes.glossary):
            for listing in glossary.findall(nodes.definition_list):
                items = list(listing.children)
                items.sort(key=lambda item: pinyin_key(item[0].astext()))
                listing.children = []
                listing.extend(items)


class TranslatedTocCaptions(SphinxTransform):
    """Translate the captions of the table of contents ("Chapters", "Exercises", ...).

    sphinx-external-toc inserts the toctrees from _toc.yml into the root page at priority
    100, after Sphinx's ``Locale`` (20) has translated that page: the captions are in the
    page's catalog (the gettext builder sees the finished page) but were never looked up.
    """

    default_priority = 101  # right after sphinx_external_toc's InsertToctrees

    def apply(self, **kwargs) -> None:
        if is_default(self.config.language):
            return
        toctrees = [
            n for n in self.document.findall(addnodes.toctree) if n.get("caption")
        ]
        if not toctrees:
            return
        dirs = [str(Path(self.env.srcdir, d)) for d in self.config.locale_dirs]
        domain = docname_to_domain(self.env.docname, self.config.gettext_compact)
        catalog, found = init_locale(dirs, self.config.language, domain)
        for node in toctrees:
            caption = node["caption"]
            translated = catalog.gettext(caption) if found else caption
            if translated == caption and english_words(caption):
                logger.warning(
                    "untranslated table-of-contents caption %r (locale/%s/LC_MESSAGES/%s.po)",
                    caption,
                    self.config.language,
                    domain,
                    location=node,
                    type="editions",
                    subtype="untranslated",
                )
            node["caption"] = node["rawcaption"] = translated


class FiguresInThisLanguage(SphinxPostTransform):
    """In a translated edition, fail on a figure output that has no rendering in its language.

    myst-nb renders every representation of an output and then keeps one (its
    ``SelectMimeType``, priority 4): this looks just before, at each output that has a PNG,
    for the Chinese rendering ``solutions.plotting`` adds when tools/build_book.py runs the
    notebooks. An output cached by anything else (a bare ``jupyter-book build``) lacks it,
    and would put an English figure on a Chinese page.
    """

    default_priority = 3

    def run(self, **kwargs) -> None:
        if is_default(self.config.language):
            return
        from solutions.plotting import ZH_PNG_MIME

        for bundle in self.document.findall(nodes.container):
            if bundle.get("nb_element") != "mime_bundle":
                continue
            kinds = {child.get("mime_type") for child in bundle.children}
            if "image/png" in kinds and ZH_PNG_MIME not in kinds:
                logger.warning(
                    "a figure has no %s rendering: its output was cached by something other "
                    "than tools/build_book.py; run rm -r _build/.jupyter_cache, then make book",
                    self.config.language,
                    location=bundle,
                    type="editions",
                    subtype="figure_language",
                )


# ----------------------------------------------------------------------------------------
# the page's source in the edition's language (the "download source" button)

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,}|:{3,})\s*(.*)$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_ITEM = re.compile(r"^(\s*)([-*+]|\d+[.)])\s+(.*)$")
# directives whose body is prose (translated), the others (math, code, includes) are kept
PROSE_DIRECTIVES = {
    "admonition",
    "note",
    "tip",
    "hint",
    "important",
    "warning",
    "caution",
    "attention",
    "danger",
    "error",
    "seealso",
    "margin",
    "dropdown",
    "epigraph",
}


def translate_markdown(text: str, translate) -> str:
    """``text`` (MyST Markdown) with each message replaced by ``translate(message)``.

    A message is what Sphinx extracts into the catalogs: a paragraph (its lines joined by
    spaces), a heading, a list item's paragraph, a table cell, an admonition's title.
    Math, code, directives other than admonitions, labels and comments are kept as they
    are, and so is a message ``translate`` returns unchanged (it has no translation).
    """
    lines = text.split("\n")
    out: list[str] = []
    i = 0

    def is_block_start(line: str) -> bool:
        """A line that ends a paragraph: blank, a fence, math, a table, a quote, a
        comment, a label ``(name)=``, a heading or a list item."""
        stripped = line.strip()
        return (
            not stripped
            or stripped.startswith(("$$", "|", ">", "%", "+++"))
            or (stripped.startswith("(") and stripped.endswith(")="))
            or bool(_FENCE.match(line) or _HEADING.match(line) or _ITEM.match(line))
        )

    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        fence = _FENCE.match(line)
        if fence:
            indent, marks, info = fence.groups()
            closing = re.compile(rf"^\s*{re.escape(marks[0])}{{{len(marks)},}}\s*$")
            j = i + 1
            while j < len(lines) and not closing.match(lines[j]):
                j += 1
            body = lines[i + 1 : j]
            directive = re.match(r"\{([\w-]+)\}\s*(.*)", info)
            if directive and directive[1] in PROSE_DIRECTIVES:
                title = directive[2].strip()
                head = f"{indent}{marks}{{{directive[1]}}}"
                out.append(f"{head} {translate(title)}" if title else head)
                options = 0
                while options < len(body) and body[options].strip().startswith(":"):
                    options += 1
                out += body[:options]
                out += translate_markdown("\n".join(body[options:]), translate).split(
                    "\n"
                )
            else:
                out.append(line)
                out += body
            if j < len(lines):
                out.append(lines[j])
            i = j + 1
            continue
        if stripped.startswith(">"):  # a block quote: its content, quoted again
            j = i
            while j < len(lines) and lines[j].strip().startswith(">"):
                j += 1
            inner = "\n".join(re.sub(r"^\s*> ?", "", quoted) for quoted in lines[i:j])
            out += [
                "> " + quoted if quoted else ">"
                for quoted in translate_markdown(inner, translate).split("\n")
            ]
            i = j
            continue
        if stripped.startswith("$$"):
            j = i
            if stripped.count("$$") < 2:  # a block: up to the line that closes it
                j = i + 1
                while j < len(lines) and "$$" not in lines[j]:
                    j += 1
            out += lines[i : j + 1]
            i = j + 1
            continue
        heading = _HEADING.match(line)
        if heading:
            out.append(f"{heading[1]} {translate(heading[2])}")
            i += 1
            continue
        if stripped.startswith("|"):
            cells = stripped.strip("|").split("|")
            if all(re.fullmatch(r"\s*:?-+:?\s*", c) for c in cells):
                out.append(line)
            else:
                out.append(
                    "| " + " | ".join(translate(c.strip()) for c in cells) + " |"
                )
            i += 1
            continue
        item = _ITEM.match(line)
        if item:
            indent, marker, first = item.groups()
            body = [first]
            j = i + 1
            while (
                j < len(lines)
                and lines[j].strip()
                and len(lines[j]) - len(lines[j].lstrip()) > len(indent)
                and not _ITEM.match(lines[j])
                and not _FENCE.match(lines[j])
                and not lines[j].strip().startswith("$$")
            ):
                body.append(lines[j].strip())
                j += 1
            out.append(f"{indent}{marker} {translate(' '.join(body))}")
            i = j
            continue
        if not stripped or is_block_start(line):
            out.append(line)
            i += 1
            continue
        j = i
        while (
            j < len(lines)
            and lines[j].strip()
            and (j == i or not is_block_start(lines[j]))
        ):
            j += 1
        paragraph = lines[i:j]
        message = " ".join(part.strip() for part in paragraph)
        translated = translate(message)
        out += paragraph if translated == message else [translated]
        i = j
    return "\n".join(out)


def translated_notebook(source: str, lookup) -> str:
    """A notebook's JSON with its markdown cells and its figures' descriptions translated
    (``translate_markdown``, ``lookup(message, message)`` the translation); its code cells
    are the English notebook's."""
    import json

    def translate(message: str) -> str:
        return lookup(message, message)

    notebook = json.loads(source)
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            text = translate_markdown("".join(cell["source"]), translate)
            cell["source"] = text.splitlines(keepends=True)
        descriptions = cell.get("metadata", {}).get(FIGURE_DESCRIPTIONS)
        if descriptions:
            cell["metadata"][FIGURE_DESCRIPTIONS] = [translate(d) for d in descriptions]
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"


def sources_in_this_language(app: Sphinx, exception) -> None:
    """In a translated edition, the page sources the site offers ("download source",
    ``_sources/<page>.ipynb``) are the notebooks in the edition's language: every message
    of the markdown cells from the page's catalog, the code cells unchanged."""
    if exception is not None or is_default(app.config.language):
        return
    if app.builder.format != "html" or not app.config.html_copy_source:
        return
    from babel.messages.pofile import read_po

    catalogs = Path(
        app.srcdir, app.config.locale_dirs[0], app.config.language, "LC_MESSAGES"
    )
    for docname in sorted(app.env.found_docs):
        source = Path(app.env.doc2path(docname))
        if source.suffix != ".ipynb":
            continue
        target = Path(app.outdir, "_sources", docname + source.suffix)
        domain = docname_to_domain(docname, app.config.gettext_compact)
        path = catalogs / f"{domain}.po"
        if not target.is_file() or not path.is_file():
            continue
        with open(path, "rb") as handle:
            messages = {
                m.id: m.string
                for m in read_po(handle, locale=app.config.language)
                if m.id and m.string and not m.fuzzy
            }
        text = translated_notebook(source.read_text(encoding="utf-8"), messages.get)
        target.write_text(text, encoding="utf-8")


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
