"""The released notebooks' prose (autograder/checking/assignment_text.py): the book's roles written
as the site shows them, and the Chinese edition of every assignment.

- every ``{eq}`` label a source notebook cites gets the number the built site prints next
  to that equation, and every ``{ref}`` the title of its section;
- a role the release cannot resolve, or a paragraph without a translation, is an error
  naming what to do, never raw MyST or English in a Chinese notebook;
- the Chinese notebook is the English one cell for cell (ids, types, nbgrader metadata,
  code, answer cells), only its prose differs, so it is graded alike;
- the Chinese site's exercise pages download the Chinese release.
"""

from __future__ import annotations

import ast
import html
import re
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.checking import assignment_text, checks

REPO = Path(__file__).resolve().parents[1]
SITE = REPO / "_build" / "html"
SOURCE = REPO / "autograder" / "source"
EQUATION_NUMBER = re.compile(
    r'<span class="eqno">\(([\d.]+)\)<a class="headerlink" href="#equation-([\w-]+)"'
)
CJK = re.compile(r"[\u4e00-\u9fff]")


def _source(assignment: str):
    return nbformat.read(SOURCE / assignment / f"{assignment}.ipynb", as_version=4)


def _built(page: Path) -> str:
    assert page.is_file(), f"{page} is missing: `make test` builds the book first (make book)"
    return page.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def targets():
    return assignment_text.book_targets()


def test_equation_numbers_are_the_ones_the_site_prints(targets):
    seen = 0
    for page in sorted((SITE / "book").glob("ch*_*.html")):
        for number, label in EQUATION_NUMBER.findall(_built(page)):
            assert targets.equations.get(label) == number, (page.name, label)
            seen += 1
    assert seen == len(targets.equations) > 40


@pytest.mark.parametrize("assignment", checks.ASSIGNMENTS)
def test_every_role_of_a_source_notebook_resolves(targets, assignment):
    resolved = assignment_text.resolve_notebook(_source(assignment), targets)
    text = "\n".join(c.source for c in resolved.cells if c.cell_type == "markdown")
    assert assignment_text.ANY_ROLE.search(text) is None


def test_roles_become_numbers_and_titles(targets):
    text = "softmax ({eq}`ch2-softmax`) in {ref}`ch1-pooling`, see {eq}`ch2-softmax`"
    assert assignment_text.resolve_roles(text, targets) == (
        "softmax (2.1) in “Attention as pooling”, see (2.1)"
    )
    # inside parentheses the text opened (ASCII or full-width), the number alone
    text = "($[0, 1)$ eq. {eq}`ch2-softmax`, {eq}`ch2-softmax`)（{eq}`ch2-softmax`）\n\n)"
    assert assignment_text.resolve_roles(text, targets) == ("($[0, 1)$ eq. 2.1, 2.1)（2.1）\n\n)")
    assert targets.equations["ch2-softmax"] == "2.1"
    chinese = assignment_text.resolve_roles("{ref}`ch1-pooling`", targets, "zh_CN")
    assert CJK.search(chinese) and "Attention" not in chinese


@pytest.mark.parametrize("assignment", checks.ASSIGNMENTS)
def test_no_equation_number_is_parenthesised_twice_in_either_edition(targets, assignment):
    """A source's ``({eq}`label`)`` was released as ``((2.9))`` (issue 46, item 11): no
    ``((`` in the prose of any released notebook, English or Chinese."""
    source = _source(assignment)
    catalog = assignment_text.read_catalog(assignment_text.ASSIGNMENT_CATALOGS / f"{assignment}.po")
    editions = {
        "en": assignment_text.resolve_notebook(source, targets),
        "zh_CN": assignment_text.translate_notebook(source, catalog, targets),
    }
    cited = 0
    for language, notebook in editions.items():
        for cell in notebook.cells:
            if cell.cell_type == "markdown":
                prose = re.sub(r"\$\$.*?\$\$|```.*?```|`[^`]*`", "", cell.source, flags=re.S)
                prose = assignment_text.INLINE_MATH.sub("", prose)  # math and code apart
                assert not re.search(r"[(（]\s*[(（]", prose), (language, prose)
                cited += len(re.findall(r"\b\d\.\d+\b", prose))
    assert cited, assignment  # the numbers were written


@pytest.mark.parametrize(
    "text, named",
    [
        ("see {eq}`ch2-no-such-equation`", "ch2-no-such-equation"),
        ("see {ref}`no-such-section`", "no-such-section"),
        ("cite {cite:t}`vaswani2017`", "{cite:t}"),
    ],
)
def test_an_unresolvable_role_is_an_error_naming_it(targets, text, named):
    with pytest.raises(assignment_text.AssignmentTextError, match=re.escape(named)):
        assignment_text.resolve_roles(text, targets)


def test_paragraphs_keep_code_fences_whole():
    text = "One line\nand two.\n\n```python\nx = 1\n\ny = 2\n```\n\n\nLast."
    assert assignment_text.paragraphs(text) == [
        "One line\nand two.",
        "```python\nx = 1\n\ny = 2\n```",
        "Last.",
    ]
    assert not assignment_text.needs_translation("$$a = b$$")
    assert not assignment_text.needs_translation("```python\nx = np.ones(3)\n```")
    assert assignment_text.needs_translation("The mask is `m`.")


def test_answer_cells_are_not_messages():
    notebook = _source("ch1_pooling")
    answers = [
        c
        for c in notebook.cells
        if c.cell_type == "markdown" and not assignment_text.is_prose_cell(c)
    ]
    assert answers, "ch1 has a written answer cell"
    texts = set(assignment_text.messages(notebook))
    for cell in answers:
        assert not set(assignment_text.paragraphs(cell.source)) & texts


@pytest.mark.parametrize("assignment", checks.ASSIGNMENTS)
def test_chinese_notebook_differs_from_the_english_only_in_its_prose(targets, assignment):
    notebook = _source(assignment)
    catalog = assignment_text.read_catalog(assignment_text.ASSIGNMENT_CATALOGS / f"{assignment}.po")
    chinese = assignment_text.translate_notebook(notebook, catalog, targets)
    assert len(chinese.cells) == len(notebook.cells)
    for before, after in zip(notebook.cells, chinese.cells):
        assert (after.get("id"), after.cell_type) == (before.get("id"), before.cell_type)
        meta_before = dict(before.metadata.get("nbgrader", {}), checksum=None)
        meta_after = dict(after.metadata.get("nbgrader", {}), checksum=None)
        assert meta_after == meta_before
        if assignment_text.is_prose_cell(before):
            assert assignment_text.ANY_ROLE.search(after.source) is None
            if assignment_text.messages(nbformat.v4.new_notebook(cells=[before])):
                assert CJK.search(after.source), before.source[:80]
        elif assignment_text.is_stub_cell(before) or assignment_text.is_given_cell(before):
            # the student reads a stub's or a given cell's docstrings and comments in Chinese;
            # the code itself is the same, statement for statement
            assert _code_alone(after.source) == _code_alone(before.source), before.source[:80]
        else:
            assert after.source == before.source


def _code_alone(source: str) -> str:
    """A cell's code as Python sees it: comments gone (the parser drops them), each
    docstring emptied."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                body[0].value.value = ""
    return ast.dump(tree)


def test_a_paragraph_without_translation_is_an_error_that_says_what_to_run(targets):
    notebook = _source("ch1_pooling")
    notebook.cells.insert(1, nbformat.v4.new_markdown_cell("A sentence nobody translated."))
    catalog = assignment_text.read_catalog(assignment_text.ASSIGNMENT_CATALOGS / "ch1_pooling.po")
    with pytest.raises(assignment_text.AssignmentTextError, match="translations.py update"):
        assignment_text.translate_notebook(notebook, catalog, targets)


def test_templates_hold_every_paragraph_once(tmp_path):
    written = assignment_text.write_templates(tmp_path, SOURCE)
    assert sorted(p.stem for p in written) == sorted(checks.ASSIGNMENTS)
    from babel.messages.pofile import read_po

    with open(tmp_path / "ch2_soft_hard.pot", "rb") as handle:
        ids = [m.id for m in read_po(handle) if m.id]
    assert ids == assignment_text.messages(_source("ch2_soft_hard"))


@pytest.mark.parametrize("assignment", checks.ASSIGNMENTS)
def test_the_chinese_exercise_page_downloads_the_chinese_assignment(assignment):
    page = _built(SITE / "zh" / "book" / "exercises" / f"{assignment}.html")
    links = [html.unescape(h) for h in re.findall(r'href="([^"]*_downloads/[^"]+)"', page)]
    zips = [link for link in links if link.endswith(f"/{assignment}.zip")]
    assert len(zips) == 1, links
    with zipfile.ZipFile((SITE / "zh" / "book" / "exercises" / zips[0]).resolve()) as zf:
        notebook = nbformat.reads(zf.read(f"{assignment}/{assignment}.ipynb"), as_version=4)
    assert CJK.search(notebook.cells[0].source)
    english = _built(SITE / "book" / "exercises" / f"{assignment}.html")
    english_zip = re.search(rf'href="([^"]*_downloads/[^"]+/{assignment}\.zip)"', english)
    with zipfile.ZipFile((SITE / "book" / "exercises" / english_zip.group(1)).resolve()) as zf:
        notebook = nbformat.reads(zf.read(f"{assignment}/{assignment}.ipynb"), as_version=4)
    assert not CJK.search(notebook.cells[0].source)
