"""The glossary, in the built site (both editions) and in its source.

- The Chinese edition's glossary is in the order of its Chinese headwords' pinyin
  (book/_ext/editions/pages.py ``GlossaryInChineseOrder``): a Chinese student scans it by the
  Chinese; the English edition keeps the English alphabetical order.
- Every entry is linked (``{term}``) from at least one page of the book other than the
  glossary itself, in both editions: an entry no page links is one no reader arrives at.
- The entries issue 37 §5 asked for exist, each with its terminology row (so the Chinese
  check and the search know it), and the introduction speaks to readers, not contributors.

Reads the built site (``_build/html``, or ``ATTENTION_BOOK_HTML``), like
tests/test_site_browser.py; a missing build is a failure, never a skip.
"""

from __future__ import annotations

import html
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "book" / "_ext"))
sys.path.insert(0, str(Path(__file__).parent))
from editions.pages import pinyin_key  # noqa: E402
from editions.search import read_terminology  # noqa: E402
from test_site_browser import HTML  # noqa: E402

pytestmark = pytest.mark.browser  # reads the built site, with the browser suite

EDITIONS = ("", "zh/")
_DL = re.compile(r'<dl class="[^"]*glossary[^"]*">(.*?)</dl>', re.DOTALL)
_DT = re.compile(r'<dt id="(term-[^"]+)">(.*?)<a class="headerlink"', re.DOTALL)
_LINK = re.compile(r'href="[^"]*glossary\.html#(term-[^"]+)"')

# issue 37 §5: terms the chapters use that had no entry (English headwords)
NEW_ENTRIES = [
    "compositional generalisation",
    "ablation",
    "search error",
    "model error",
    "post-LN",
    "pre-LN",
    "held-out",
    "Noam schedule",
    "logits",
    "weight tying",
    "Gumbel-max trick",
    "residual stream",
    "n-gram",
    "KL divergence",
    "knowledge distillation",
    "exact match",
    "GRU",
    "MLP",
]


def built(path: str) -> str:
    page = HTML / path
    if not page.is_file():
        pytest.fail(f"no built page {page}: run `make book` first", pytrace=False)
    return page.read_text(encoding="utf-8")


def glossary_entries(edition: str) -> list[list[tuple[str, str]]]:
    """The entries of the built glossary in page order: each a list of (id, headword)."""
    listing = _DL.search(built(f"{edition}book/glossary.html"))
    assert listing, "the glossary page has no glossary list"
    entries, current = [], []
    for part in re.split(r"(<dd>.*?</dd>)", listing.group(1), flags=re.DOTALL):
        if part.startswith("<dd>"):
            entries.append(current)
            current = []
            continue
        current += [
            (ident, html.unescape(re.sub(r"<[^>]+>", "", text)).strip())
            for ident, text in _DT.findall(part)
        ]
    return entries


def test_the_chinese_glossary_is_in_pinyin_order():
    entries = glossary_entries("zh/")
    keys = [pinyin_key(entry[0][1]) for entry in entries]
    out_of_order = [
        (a[1], b[1]) for a, b in zip(keys, keys[1:]) if a > b
    ]  # neighbours in the wrong order
    assert not out_of_order, out_of_order
    # the order is the Chinese one, not the English one kept
    assert entries[0][0][1].startswith(("阿", "a", "A", "b", "B")), entries[0]
    english = [entry[0][0] for entry in glossary_entries("")]
    assert [entry[0][0] for entry in entries] != english


def test_the_english_glossary_keeps_the_english_order():
    headwords = [entry[0][1].lower() for entry in glossary_entries("")]
    assert headwords == sorted(headwords)


@pytest.mark.parametrize("edition", EDITIONS, ids=["en", "zh"])
def test_every_glossary_entry_is_linked_from_a_page(edition):
    linked: set[str] = set()
    for page in (HTML / edition / "book").rglob("*.html"):
        if page.name != "glossary.html":
            linked |= set(_LINK.findall(page.read_text(encoding="utf-8")))
    entries = glossary_entries(edition)
    never = [
        [headword for _, headword in entry]
        for entry in entries
        if not {ident for ident, _ in entry} & linked
    ]
    assert not never, f"glossary entries no page links: {never}"


def test_the_entries_issue_37_asked_for_exist_with_their_terminology_rows():
    source = (REPO / "book" / "glossary.md").read_text(encoding="utf-8")
    headwords = set(re.findall(r"^(\S.*)$", source.split("```{glossary}", 1)[1], re.MULTILINE))
    terms = {term.english for term in read_terminology(REPO / "locale/zh_CN/terminology.tsv")}
    assert not [h for h in NEW_ENTRIES if h not in headwords]
    assert not [h for h in NEW_ENTRIES if h not in terms]
    ids = {ident for entry in glossary_entries("zh/") for ident, _ in entry}
    assert {"term-ablation", "term-KL-divergence", "term-post-LN"} <= ids


def test_the_introduction_speaks_to_readers():
    for edition in EDITIONS:
        page = built(f"{edition}book/glossary.html")
        intro = page[page.index("<h1") : page.index("<dl")]
        text = re.sub(r"<[^>]+>", "", intro)
        assert "{term}" not in text and "角色" not in text and " role" not in text, text
