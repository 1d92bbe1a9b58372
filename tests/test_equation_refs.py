"""Equation references resolve, by label, to the chapter they name.

The book numbers its equations itself, so a number written by hand ("eq. (4.3)") drifts as
soon as an equation is added above it. Everything outside the book's own rendering refers
to an equation by its label instead, in MyST role syntax: {eq}`ch4-local`. These tests
read every place that cites equations (the reference package, the assignment sources,
the exercise pages and the book's own pages) and check that

- every {eq}`label` names a label that the book defines (a math ``:label:``, a
  ``$$ ... $$ (label)`` equation or a ``(label)=`` target);
- every label names its chapter (``ch<N>-...``, one prefix for every chapter) and is defined on
  that chapter's page, so {eq}`ch4-local` cannot point into chapter 5;
- no bare numeric reference such as "(4.3)", "eqs. (4.1)-(4.2)" or "eq. 4.3" is left.
"""

from __future__ import annotations

import io
import json
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"

# where labels are defined: the book's pages
LABEL_PATTERNS = (
    re.compile(r"^\s*:label:\s*(\S+)\s*$", re.M),  # ```{math} ... :label: name
    re.compile(r"^\s*\$\$\s*\(([^()\s]+)\)\s*$", re.M),  # $$ ... $$ (name)
    re.compile(r"^\s*\(([^()\s]+)\)=\s*$", re.M),  # (name)= target
)
REFERENCE = re.compile(r"\{eq\}`([^`<>]+?)`")
CHAPTER_OF_LABEL = re.compile(r"^ch(\d+)-[a-z0-9-]+$")
CHAPTER_OF_FILE = re.compile(r"^ch(\d+)_")
# "(4.3)", "(5.3')", "eq. (4.3)", "eqs. 4.1-4.2", "equation 4.3", "Eq 4.3"
NUMERIC_REFERENCE = re.compile(
    r"\(\s*[1-9]\.\d{1,2}'?\s*\)|\b(?:eqs?|equations?)\.?\s*\(?\s*[1-9]\.\d{1,2}\b",
    re.IGNORECASE,
)


def _notebook_cells(path: Path):
    """(cell_type, source) of every cell of a notebook."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    for cell in notebook["cells"]:
        source = cell["source"]
        yield cell["cell_type"], "".join(source) if isinstance(source, list) else source


def _prose_of_python(code: str) -> str:
    """The comments and string literals of Python code: where a citation can hide.

    Code itself is left out, so that a literal such as ``max(1.0, x)`` is not mistaken
    for an equation number. IPython magics (``%matplotlib``) are blanked first.
    """
    code = re.sub(r"^\s*[%!].*$", "", code, flags=re.M)
    parts = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type in (tokenize.COMMENT, tokenize.STRING):
                parts.append(token.string)
            elif token.type == getattr(tokenize, "FSTRING_MIDDLE", None):
                parts.append(token.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return code  # not tokenizable: check all of it rather than none of it
    return "\n".join(parts)


def _texts(path: Path):
    """(where, text) pieces of a file in which equation references are written."""
    if path.suffix == ".ipynb":
        for index, (cell_type, source) in enumerate(_notebook_cells(path)):
            prose = source if cell_type != "code" else _prose_of_python(source)
            yield f"{path.relative_to(ROOT)} cell {index}", prose
    elif path.suffix == ".py":
        yield str(path.relative_to(ROOT)), _prose_of_python(path.read_text(encoding="utf-8"))
    else:
        yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")


def _book_pages() -> list[Path]:
    return sorted([*BOOK.glob("*.ipynb"), *BOOK.glob("*.md"), *BOOK.glob("exercises/*.md")])


def _citing_files() -> list[Path]:
    return sorted(
        {
            *ROOT.glob("solutions/*.py"),
            *ROOT.glob("autograder/source/*/*.ipynb"),
            *_book_pages(),
        }
    )


def _defined_labels() -> dict[str, Path]:
    labels: dict[str, Path] = {}
    for page in _book_pages():
        for _, text in _texts(page):
            for pattern in LABEL_PATTERNS:
                for label in pattern.findall(text):
                    assert label not in labels or labels[label] == page, (
                        f"label {label!r} is defined twice: in {labels[label].name} "
                        f"and in {page.name}"
                    )
                    labels[label] = page
    return labels


def _references() -> list[tuple[str, str]]:
    return [
        (where, label)
        for path in _citing_files()
        for where, text in _texts(path)
        for label in REFERENCE.findall(text)
    ]


def test_the_book_defines_the_equation_labels_of_every_chapter():
    labels = _defined_labels()
    for number in range(1, 6):
        assert any(
            CHAPTER_OF_LABEL.match(name) and CHAPTER_OF_LABEL.match(name).group(1) == str(number)
            for name in labels
        ), f"no equation label of chapter {number}"


def test_every_label_names_the_chapter_that_defines_it():
    wrong = []
    for label, page in _defined_labels().items():
        page_chapter = CHAPTER_OF_FILE.match(page.name)
        if page_chapter is None or page.parent != BOOK:
            continue  # preface, notation, glossary, exercises: no chapter equations
        named = CHAPTER_OF_LABEL.match(label)
        if named is None or named.group(1) != page_chapter.group(1):
            wrong.append(f"{label!r} on {page.name}")
    assert not wrong, (
        "a label on a chapter page must start with that chapter, as ch4-local or "
        "ch1-nw-weights do: " + ", ".join(wrong)
    )


def test_citing_files_are_found():
    files = {path.relative_to(ROOT).parts[0] for path in _citing_files()}
    assert {"solutions", "book"} <= files
    assert any(path.suffix == ".ipynb" for path in ROOT.glob("autograder/source/*/*.ipynb"))
    assert len(_references()) >= 20  # the book alone cites dozens


@pytest.mark.parametrize("path", _citing_files(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_eq_reference_resolves_to_a_label_of_the_chapter_it_names(path):
    labels = _defined_labels()
    problems = []
    for where, text in _texts(path):
        for label in REFERENCE.findall(text):
            if label not in labels:
                problems.append(f"{where}: {{eq}}`{label}` is not defined in the book")
                continue
            named = CHAPTER_OF_LABEL.match(label)
            defining = CHAPTER_OF_FILE.match(labels[label].name)
            if named is None or defining is None or named.group(1) != defining.group(1):
                problems.append(
                    f"{where}: {{eq}}`{label}` is defined on {labels[label].name}, "
                    "not on the chapter its name gives"
                )
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", _citing_files(), ids=lambda path: str(path.relative_to(ROOT)))
def test_no_bare_equation_numbers(path):
    found = [
        f"{where}: {match.group(0)!r}"
        for where, text in _texts(path)
        for match in NUMERIC_REFERENCE.finditer(text)
    ]
    assert not found, (
        "cite equations by label, e.g. {eq}`ch4-local`, not by number (numbers drift "
        "when an equation is added):\n" + "\n".join(found)
    )


def test_the_checks_catch_what_they_are_for():
    # the patterns themselves: a numeric citation is caught, a label and a float are not
    assert NUMERIC_REFERENCE.search("masks, eqs. (4.3)-(4.4); True = may attend")
    assert NUMERIC_REFERENCE.search("see eq. 4.3 above") and NUMERIC_REFERENCE.search("(5.3')")
    assert not NUMERIC_REFERENCE.search("eq. {eq}`ch4-local`, lr = 1.5, (0.25)")
    assert "max(1.0" not in _prose_of_python("y = max(1.0, x)  # eq. {eq}`ch4-local`\n")
    assert REFERENCE.findall("a {eq}`ch4-local` b {eq}`ch1-nw-weights`") == [
        "ch4-local",
        "ch1-nw-weights",
    ]
    assert CHAPTER_OF_LABEL.match("ch1-nw-weights").group(1) == "1"
    # one prefix for every chapter: the old "eq-ch1-" spelling names no chapter
    assert CHAPTER_OF_LABEL.match("eq-ch1-nw-weights") is None
    assert CHAPTER_OF_LABEL.match("ch12-x").group(1) == "12"
