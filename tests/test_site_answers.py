"""No page answers a graded task: the built site (both editions) never shows the answer key.

The pages show the code of ``solutions`` (the shown code is the tested code); the graded tasks
ask for the next step, whose references live in ``answers/`` (answers/__init__.py). Over
everything ``make book`` put in ``_build/html`` (the English edition and the Chinese one in
``zh/``: pages, page sources, downloadable notebooks, the assignment zips, search indexes,
static files):

- **three lines**: no 3 consecutive lines of a graded task's reference appear in any served
  file, zips and notebooks opened. A line is compared as code: comments, docstrings and blank
  lines dropped, lines under 20 characters dropped, and every identifier renamed by its first
  appearance in the 3-line window (``x = a + b`` and ``y = c + d`` are the same line), so a
  page that copies the reference with new names is still caught. The reference is the whole
  ``answers`` module of the chapter (its private helpers count), or, for a task whose
  reference is a ``solutions`` function, that function;
- **names**: a chapter's graded function names appear in no code cell, literal include or
  output of its chapter page or of its exercise page (HTML, page source, downloadable
  notebook), with one stated exception: chapter 6's page calls four of the library functions
  its assignment asks for (to draw its figures) without showing their bodies (the first
  check proves that), so their names may be called there.

A missing build is a failure, never a skip: ``make test`` builds the book first.
"""

from __future__ import annotations

import html
import inspect
import io
import json
import keyword
import re
import zipfile
from pathlib import Path

import pytest

from autograder.checking import checks
from autograder.course import release

REPO = Path(__file__).resolve().parents[1]
SITE = REPO / "_build" / "html"
EDITIONS = {"en": SITE, "zh_CN": SITE / "zh"}
WINDOW = 3
SHORTEST = 20  # characters: shorter lines (`return out`, `else:`) are too common to count
LONGEST = 1000  # a served line longer than this is minified data, never a line of code
#: names chapter 6's page calls from ``solutions.transformer`` to compute what it shows (the
#: bodies are not on the site: the three-line check covers them like every reference)
CALLED_NOT_SHOWN = {
    "ch6_transformer": {
        "cross_attention",
        "label_smoothed_cross_entropy",
        "noam_rate",
        "beam_search",
    }
}

TOKEN = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\S")
TAG = re.compile(r"<[^>]+>")


# ----------------------------------------------------------------------------------------
# lines compared as code


def code_line(line: str) -> list[str] | None:
    """The tokens of a line of code, or None where the line does not count (blank, a
    comment, under SHORTEST characters, over LONGEST)."""
    text = line.strip()
    if len(text) > LONGEST:
        return None
    text = re.sub(r"\s+#(?!\s*(?:type|noqa)\b).*$", "", text)  # a trailing comment
    if len(text) < SHORTEST or text.startswith("#"):
        return None
    return TOKEN.findall(text)


def canonical(window: list[list[str]]) -> str:
    """The window with every identifier renamed by its first appearance (attributes after a
    dot and keywords kept: they are the program's structure, not its names)."""
    names: dict[str, str] = {}
    out = []
    for tokens in window:
        previous = ""
        for token in tokens:
            if (token[0].isalpha() or token[0] == "_") and not keyword.iskeyword(token):
                if previous != ".":
                    token = names.setdefault(token, f"v{len(names)}")
            out.append(token)
            previous = token
        out.append("\n")
    return " ".join(out)


STRING_START = re.compile(r"""^[rbfRBF]{0,2}["']""")


def is_check(tokens: list[str], line: str) -> bool:
    """An argument check's line: a raise or an assert, or a message string alone on its line.
    Every function validates its arguments alike (``x = np.asarray(x)``, ``if not
    np.issubdtype(...)``, ``raise TypeError(...)``): that is not the answer to a task, and a
    page copying a body without its checks must still be caught."""
    return tokens[0] in ("raise", "assert") or bool(STRING_START.match(line.strip()))


def windows(lines) -> set[str]:
    """Every run of WINDOW consecutive counted lines, canonical (argument checks dropped:
    the check's lines and the ``if`` that leads to them)."""
    lines = list(lines)
    counted = [(t, line) for t, line in ((code_line(line), line) for line in lines) if t]
    kept = []
    for i, (tokens, line) in enumerate(counted):
        if is_check(tokens, line):
            continue
        following = counted[i + 1] if i + 1 < len(counted) else None
        if tokens[0] in ("if", "elif") and following and is_check(*following):
            continue
        kept.append(tokens)
    return {canonical(kept[i : i + WINDOW]) for i in range(len(kept) - WINDOW + 1)}


def without_docstrings(source: str) -> list[str]:
    """The source's lines with every docstring blanked (the interface a stub shows is public)."""
    import ast

    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                for i in range(body[0].lineno - 1, body[0].end_lineno):
                    lines[i] = ""
    return lines


def reference_sources() -> dict[str, str]:
    """label -> source of every graded task's reference: the chapter's whole ``answers``
    module, or the ``solutions`` function a kept task is graded against."""
    sources = {}
    for assignment in checks.ASSIGNMENTS:
        for check in checks.checks_for(assignment):
            fn = check.reference
            fn = fn.resolve() if isinstance(fn, checks.LazyFunction) else fn
            module = inspect.getmodule(fn)
            if module.__name__.split(".")[0] == "answers":
                sources[module.__name__] = inspect.getsource(module)
            else:
                sources[checks.reference_name(check.reference)] = inspect.getsource(fn)
    return sources


# ----------------------------------------------------------------------------------------
# what the site serves, as text


def notebook_texts(data: bytes) -> list[str]:
    """A notebook's code cells and outputs (JSON-escaped in the file: read as the reader sees
    them); prose cells too, where code may sit in a fenced block."""
    nb = json.loads(data)
    texts = []
    for cell in nb.get("cells", []):
        texts.append("".join(cell.get("source", [])))
        for output in cell.get("outputs", []):
            texts.append("".join(output.get("text", [])))
            for value in output.get("data", {}).values():
                if isinstance(value, (str, list)):
                    texts.append("".join(value))
    return texts


def texts_of(name: str, data: bytes) -> list[str]:
    if name.endswith(".zip"):
        out = []
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            for member in zf.namelist():
                out += texts_of(member, zf.read(member))
        return out
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return []  # images, fonts
    if name.endswith(".ipynb"):
        try:
            return notebook_texts(data)
        except ValueError:
            return [text]
    if name.endswith(".html"):
        return [text, html.unescape(TAG.sub("", text))]
    return [text]


def served_files(root: Path):
    return [p for p in sorted(root.rglob("*")) if p.is_file()]


def code_blocks_of(name: str, data: bytes) -> list[str]:
    """The code cells, literal includes and outputs of a page file, as text."""
    if name.endswith(".ipynb"):
        nb = json.loads(data)
        out = []
        for cell in nb.get("cells", []):
            if cell.get("cell_type") == "code":
                out += notebook_texts(json.dumps({"cells": [cell]}).encode())
            else:  # a literalinclude or a fenced block in a Markdown cell
                out += re.findall(r"```.*?```", "".join(cell.get("source", [])), re.DOTALL)
        return out
    text = data.decode("utf-8")
    if name.endswith(".html"):
        return [html.unescape(TAG.sub("", b)) for b in re.findall(r"<pre\b.*?</pre>", text, re.S)]
    return re.findall(r"```.*?```", text, re.DOTALL)  # a Markdown page source


def page_files(edition_root: Path, page: str) -> list[Path]:
    """A page's served files: its HTML and its source, which is also the notebook its
    download button gives (``_downloads/`` holds the released assignment, whose stubs name
    the graded functions by design: the three-line check covers it)."""
    stem = Path(page)
    found = [edition_root / stem.with_suffix(".html")]
    found += sorted((edition_root / "_sources" / stem.parent).glob(f"{stem.name}.*"))
    return [p for p in found if p.is_file()]


# ----------------------------------------------------------------------------------------
# the detector, shown to work


def test_the_detector_finds_a_reference_copied_with_new_names_and_ignores_comments():
    reference = (
        "def f(scores, mask):\n"
        '    """Docstring lines are the public interface."""\n'
        "    shifted = scores - scores.max(axis=-1, keepdims=True)  # max shift\n"
        "    weights = np.exp(shifted) * np.asarray(mask)\n"
        "    total = weights.sum(axis=-1, keepdims=True)\n"
        "    return weights / np.where(total > 0, total, 1)\n"
    )
    copied = (
        "<pre><span>z</span> = s - s.max(axis=-1, keepdims=True)\n"
        "# a comment in between does not hide it\n"
        "w = np.exp(z) * np.asarray(m)\n\n"
        "t = w.sum(axis=-1, keepdims=True)</pre>"
    )
    keys = windows(without_docstrings(reference))
    found = set()
    for text in texts_of("page.html", copied.encode()):
        found |= windows(text.splitlines()) & keys
    assert found
    # two of the three lines are not enough, and another computation is not the reference
    assert not windows(["z = s - s.max(axis=-1, keepdims=True)", "w = np.exp(z)"]) & keys
    other = ["a = b.min(axis=0, keepdims=False)", "c = np.log(a) + np.asarray(b)", "d = c.sum()"]
    assert not windows(other) & keys
    # the docstring of the reference is not a line of it
    assert not any("interface" in w for w in keys)


def test_every_answers_module_has_lines_to_look_for():
    """(A kept task's reference may be two lines long: nothing of three lines to copy.)"""
    sources = {k: v for k, v in reference_sources().items() if k.startswith("answers.")}
    assert sources
    for label, source in sources.items():
        assert len(windows(without_docstrings(source))) >= 10, label


# ----------------------------------------------------------------------------------------
# the built site


@pytest.fixture(scope="module")
def site():
    for edition, root in EDITIONS.items():
        if not (root / "index.html").is_file():
            pytest.fail(f"no built {edition} site at {root}: run `make book` first")
    return SITE


def test_no_served_file_holds_three_lines_of_a_reference(site):
    references = {
        label: windows(without_docstrings(source)) for label, source in reference_sources().items()
    }
    every = set().union(*references.values())
    leaks = []
    for path in served_files(site):
        for text in texts_of(path.name, path.read_bytes()):
            hits = windows(text.splitlines()) & every
            for label, keys in references.items():
                if hits & keys:
                    leaks.append(f"{path.relative_to(site)}: {label}: {sorted(hits & keys)[0]!r}")
    assert not leaks, f"{len(leaks)} served files show a reference:\n" + "\n".join(leaks[:20])


@pytest.mark.parametrize("edition", EDITIONS)
@pytest.mark.parametrize("assignment", checks.ASSIGNMENTS)
def test_no_chapter_or_exercise_page_shows_a_graded_name_in_code(site, edition, assignment):
    source = REPO / "autograder" / "source" / assignment / f"{assignment}.ipynb"
    names = {c.name for c in checks.checks_for(assignment)}
    names |= set(release.functions_to_write(json.loads(source.read_text(encoding="utf-8"))))
    names -= CALLED_NOT_SHOWN.get(assignment, set())
    root = EDITIONS[edition]
    pages = page_files(root, f"book/{assignment}") + page_files(
        root, f"book/exercises/{assignment}"
    )
    assert any(p.suffix == ".html" for p in pages), pages
    shown = []
    for path in pages:
        for block in code_blocks_of(path.name, path.read_bytes()):
            shown += [(path.relative_to(site), n) for n in names if re.search(rf"\b{n}\b", block)]
    assert not shown, sorted(set(shown))
