"""Chinese search finds Chinese words: the terminology (``locale/<language>/terminology.tsv``,
checked by ``tools/translations.py``) as jieba's user dictionary for the Chinese edition's
search index, and the data the search page's query segmenter reads
(``book/_static/zh-search.js``, ``zh-search-data.js`` written after the build). See the
package's docstring, "Chinese search finds Chinese words"."""

from __future__ import annotations

import csv
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

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


# The Chinese search page's query segmenter (book/_static/zh-search.js) and the data the
# build gives it (zh-search-data.js, written after the pages: it counts the index's words in
# each built page)
SEARCH_SCRIPT = "zh-search.js"
SEARCH_DATA = "zh-search-data.js"
# the English search page's ranking: the mean over a query's words, numbers matched in titles
ENGLISH_SEARCH_SCRIPT = "en-search.js"
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
    which keeps a ``splitQuery`` and a ``Scorer`` that a page defines first; on the English
    one, the English ranking (book/_static/en-search.js)."""
    if pagename != "search":
        return
    if not hasattr(app, "_zh_search"):
        if not (app.config.language or "en").startswith("zh"):
            app.add_js_file(ENGLISH_SEARCH_SCRIPT, priority=401)
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
