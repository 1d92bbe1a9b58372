"""The bibliography: every entry is cited by a page, and its label is author-year.

The text cites author-year ({cite:t} gives "Vaswani et al. (2017)", {cite:p} gives
"(Vaswani et al., 2017)"), so the list on the references page must be labelled the same
way, not [1], [2], ...: ``book/_ext/author_year_bibliography.py`` registers that label
style with pybtex.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from pybtex.database import parse_file
from pybtex.plugin import find_plugin

ROOT = Path(__file__).resolve().parents[1]
BIB = ROOT / "book" / "references.bib"
CITE = re.compile(r"\{cite(?::[a-z]+)?\}`([^`]+)`")


def _load_style():
    spec = importlib.util.spec_from_file_location(
        "author_year_bibliography", ROOT / "book" / "_ext" / "author_year_bibliography.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # registers the pybtex plugins
    return find_plugin("pybtex.style.formatting", "author_year")()


def _cited_keys() -> set[str]:
    pages = [*ROOT.glob("book/*.ipynb"), *ROOT.glob("book/*.md"), *ROOT.glob("book/exercises/*.md")]
    keys = set()
    for page in pages:
        for group in CITE.findall(page.read_text(encoding="utf-8")):
            keys.update(key.strip() for key in group.split(","))
    return keys


def test_every_bibliography_entry_is_cited_by_a_page():
    entries = set(parse_file(str(BIB)).entries.keys())
    cited = _cited_keys()
    assert not entries - cited, f"entries that no page cites: {sorted(entries - cited)}"
    assert not cited - entries, f"citations with no entry: {sorted(cited - entries)}"


def test_bibliography_labels_are_author_year_and_unique():
    style = _load_style()
    bibliography = parse_file(str(BIB))
    labels = {e.key: e.label for e in style.format_entries(bibliography.entries.values())}
    assert labels["vaswani2017"] == "Vaswani et al. 2017"
    assert labels["nadaraya1964"] == "Nadaraya 1964"
    assert labels["rabe2021"] == "Rabe and Staats 2021"
    for key, label in labels.items():
        year = bibliography.entries[key].fields["year"]
        assert re.fullmatch(r"[^\d\[\]]+ " + year, label), f"{key}: label {label!r}"
    assert len(set(labels.values())) == len(labels), "two entries share a label"
