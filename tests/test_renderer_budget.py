"""A notebook cannot hang the instructor's renderers.

nbconvert highlights every code cell with the Pygments lexer the notebook's
``language_info`` names, read before any preprocessor runs, and the sanitiser kept that name:
AutoIt's lexer is quadratic on a run of spaces (one 200,000-space cell took ``python -m
autograder feedback`` past 120 s), and Python's own lexer is quadratic on lines of one space.
Now:

- the sanitiser keeps only the course's language (`sanitise.KERNELS`: Python, what every
  released notebook says) in ``language_info`` and ``kernelspec``, drops every cell field that
  picks a lexer or a renderer, and shows a fenced code block of a written answer as plain
  text;
- every page nbconvert makes for the course (the feedback, the formgrader's view) highlights
  with the course's lexer and within a CPU budget per notebook
  (`nbgrader_sanitise.CourseHighlight`), whatever the notebook names;
- ``python -m autograder feedback`` renders each student's page in a child process with a
  time and a memory budget: a page that overruns is that student's, with one fixed reason,
  and the others are written (exit status 1, documented in ``autograder/cli.py``).

The lexers' cost is shown by counting their work, never by timing it. Root only: no renderer
runs in the sandbox.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402

from autograder import cli, grading  # noqa: E402
from autograder.checking import sanitise  # noqa: E402
from autograder.course import nbgrader_sanitise  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
A = "ch1_pooling"
SPACES = " " * 200_000  # the cap on one cell's source, exactly
HOSTILE_METADATA = {
    "kernelspec": {"name": "autoit", "display_name": "<b>AutoIt</b>", "language": "autoit"},
    "language_info": {
        "name": "autoit",
        "pygments_lexer": "autoit",
        "codemirror_mode": {"name": "autoit"},
        "mimetype": "text/x-autoit",
    },
}


# ---------------------------------------------------------------------------------------
# the lexers: their work counted


def _counted(lexer):
    """``lexer`` with every rule's match counted: [(rule's pattern, position)]."""
    calls = []

    def wrap(rexmatch):
        def match(text, pos=0, *rest):
            calls.append((rexmatch.__self__.pattern, pos))
            return rexmatch(text, pos, *rest)

        return match

    lexer._tokens = {
        state: [(wrap(rexmatch), action, new) for rexmatch, action, new in rules]
        for state, rules in type(lexer)._tokens.items()
    }
    return calls


def _work(name: str, text: str) -> tuple[int, int]:
    """(tokens, characters the lexer's rules that open with ``\\s*`` must read): such a rule
    reads the whole run of white space ahead of it before it can fail."""
    from pygments.lexers import get_lexer_by_name

    lexer = get_lexer_by_name(name)
    calls = _counted(lexer)
    tokens = list(lexer.get_tokens_unprocessed(text))
    run = re.compile(r"\s*")
    read = sum(
        run.match(text, pos).end() - pos
        for pattern, pos in calls
        if re.match(r"(\(\?i\))?\^?\(\^?\\s\*\)", pattern)
    )
    return len(tokens), read


def test_the_autoit_lexer_reads_a_run_of_spaces_once_per_space():
    """AutoIt's lexer takes a run of n spaces one space a token, and at each one its
    keyword rule ``(\\s*)(keywords)\\b`` reads the rest of the run before it fails: n(n+1)/2
    characters, quadratic (200,000 spaces: 2 x 10^10). Python's reads it as one token."""
    for n in (1_000, 2_000):
        tokens, read = _work("autoit", " " * n)
        assert tokens == n
        assert read >= n * (n + 1) // 2
    tokens, read = _work("python", " " * 2_000)
    assert tokens <= 2 and read <= 2 * 2_000


def test_pythons_own_lexer_is_quadratic_on_lines_of_one_space():
    """Why the course's lexer alone is not enough: Python's docstring rule
    ``^(\\s*)...`` reads from every line's start to the end of the white space."""
    for n in (500, 1_000):
        _tokens, read = _work("python", " \n" * n)
        assert read >= n * n  # 2n characters of white space from each of n lines' starts


# ---------------------------------------------------------------------------------------
# the sanitiser


def _notebook(metadata: dict, *cells):
    notebook = nbformat.v4.new_notebook(cells=list(cells))
    notebook.metadata.update(json.loads(json.dumps(metadata)))
    return notebook


COURSE_METADATA = {
    "kernelspec": sanitise.KERNELS["python"],
    "language_info": {"name": "python"},
}


@pytest.mark.parametrize(
    "metadata",
    [
        HOSTILE_METADATA,
        {"language_info": {"name": "autoit"}},
        {"language_info": {"name": "python", "pygments_lexer": "autoit"}},
        {
            "kernelspec": {"name": "python3", "language": "autoit"},
            "language_info": {"name": "python"},
        },
        {"language_info": {"name": "ipython3"}},  # IPython's lexer hands %%magics to others
        {"language_info": {"name": "a" * 100}},
        {"language_info": "autoit", "kernelspec": ["autoit"]},
        {},  # no language: nbconvert would fall back to the IPython lexer
    ],
)
def test_the_sanitiser_keeps_only_the_course_language(metadata):
    clean = sanitise.clean_notebook(_notebook(metadata))
    assert clean.metadata == COURSE_METADATA


def test_the_course_languages_are_every_released_notebooks():
    """`sanitise.KERNELS` is the course's: each source notebook's kernel and language are a
    row of it, kept as they are."""
    for path in sorted((REPO / "autograder" / "source").glob("*/*.ipynb")):
        metadata = nbformat.read(path, as_version=4).metadata
        language = metadata["language_info"]["name"]
        assert sanitise.course_language(metadata) == language, path
        assert dict(metadata["kernelspec"]) == sanitise.KERNELS[language], path
        clean = sanitise.clean_notebook(_notebook(dict(metadata)))
        assert clean.metadata["language_info"] == {"name": language}


def test_no_cell_field_that_picks_a_lexer_or_a_renderer_is_kept():
    code = nbformat.v4.new_code_cell("%%bash\n" + " " * 1000)
    code.metadata.update(magics_language="autoit", tags=["x"], vscode={"languageId": "autoit"})
    code.metadata["nbgrader"] = {"grade_id": "x", "grade": False, "solution": True, "odd": 1}
    raw = nbformat.v4.new_raw_cell("<b>raw</b>")
    raw.metadata.update(raw_mimetype="text/x-autoit", format="text/latex")
    markdown = nbformat.v4.new_markdown_cell("ok")
    markdown.metadata["nbgrader"] = ["not", "a", "mapping"]
    clean = sanitise.clean_notebook(_notebook({}, code, raw, markdown))
    assert clean.cells[0].metadata == {
        "nbgrader": {"grade_id": "x", "grade": False, "solution": True}
    }
    assert clean.cells[1].metadata == {} and clean.cells[2].metadata == {}


def test_a_fenced_block_in_a_written_answer_is_never_lexed(monkeypatch):
    """nbconvert's markdown renderer would highlight ```` ```autoit ```` with AutoIt's lexer
    (inside the recording process, and inside the Jupyter server when a reader cleans a
    notebook written some other way): no lexer is asked for at all."""
    import pygments.lexers

    asked = []
    real = pygments.lexers.get_lexer_by_name
    monkeypatch.setattr(
        pygments.lexers, "get_lexer_by_name", lambda *a, **k: asked.append(a) or real(*a, **k)
    )
    for info in ("autoit", "python", "mermaid", "nosuchlanguage"):
        html = sanitise.markdown_html(f"```{info}\n{SPACES}<b>x</b>\n```\n")
        assert html == f"<pre><code>{SPACES}&lt;b&gt;x&lt;/b&gt;\n</code></pre>\n", info
    assert asked == []


# ---------------------------------------------------------------------------------------
# the course's highlighter: nbconvert's pages


def test_the_course_highlighter_is_nbconverts_python_for_honest_code():
    from nbconvert.filters.highlight import Highlight2HTML

    source = (REPO / "solutions" / "pooling.py").read_text()
    ours = nbgrader_sanitise.CourseHighlight()
    assert ours(source, language="autoit") == Highlight2HTML(pygments_lexer="python")(source)
    assert (ours.highlighted, ours.plain) == (1, 0)


def test_the_course_highlighter_spends_its_budget_once_per_notebook():
    """Thirty cells that Python's lexer takes seconds each to read (about 75 s in all here):
    the budget is spent on the first, the rest are plain text in the same markup, and every
    cell is there, escaped. A cell over the size cap is plain from the start."""
    highlight = nbgrader_sanitise.CourseHighlight()
    worst = " \n" * 9_000 + "<b>"
    pages = [highlight(worst) for _ in range(30)]
    assert highlight.plain >= 29 and highlight.highlighted + highlight.plain == 30
    for page in pages:
        assert page.startswith('<div class=" highlight hl-python"><pre>') and "&lt;b&gt;" in page
    fresh = nbgrader_sanitise.CourseHighlight()  # the next notebook: a budget of its own
    fresh(SPACES)
    assert (fresh.highlighted, fresh.plain) == (0, 1)
    assert fresh("x = 1").count("<span") > 1 and fresh.highlighted == 1


def formgrade_html(course: Path, path: Path) -> str:
    """The formgrader's manual-grading page of the notebook at ``path``, made as nbgrader's
    ``SubmissionHandler`` makes it: an ``HTMLExporter`` of the course's configuration (read
    from its ``nbgrader_config.py``) with the ``formgrade`` template."""
    from nbconvert.exporters import HTMLExporter
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    config.HTMLExporter.template_name = "formgrade"
    resources = {
        "assignment_id": A,
        "notebook_id": A,
        "submission_id": "x",
        "index": 0,
        "total": 1,
        "base_url": "",
        "student": "s",
        "last_name": "s",
        "first_name": "",
        "notebook_path": str(path),
    }
    html, _ = HTMLExporter(config=config).from_filename(str(path), resources=resources)
    return html


HIGHLIGHT = re.compile(r'<div class=" ?highlight (hl-[^"]*)"><pre>(.*?)</pre>', re.DOTALL)


def _highlights(html: str) -> list[str]:
    """The lexer's class of each highlighted block of a page (nbconvert's markup; the page's
    serialiser drops the class's leading space)."""
    return [lexer for lexer, _code in HIGHLIGHT.findall(html)]


def _plain(html: str) -> int:
    """How many of a page's highlighted blocks hold no token (plain text)."""
    return sum('<span class="' not in code for _lexer, code in HIGHLIGHT.findall(html))


# ---------------------------------------------------------------------------------------
# graded: the hostile notebook among honest ones, then the feedback and the formgrader


def hostile(course: Path) -> dict:
    """The honest solution with three 200,000-space code cells, a written-answer-like
    markdown cell whose fenced block names AutoIt, and a notebook that names AutoIt
    everywhere nbconvert looks."""
    notebook = json.loads(nbformat.writes(corpus.solved(course, A)))
    for _ in range(3):
        cell = {"cell_type": "code", "metadata": {}, "source": SPACES, "outputs": []}
        notebook["cells"].append(cell | {"execution_count": None})
    fence = "```autoit\n" + " " * 199_000 + "\n```"
    notebook["cells"].append({"cell_type": "markdown", "metadata": {}, "source": fence})
    notebook["metadata"].update(HOSTILE_METADATA)
    return notebook


@pytest.fixture(scope="module")
def graded(tmp_path_factory, bubblewrap):
    course = corpus.released_course(tmp_path_factory.mktemp("render") / "course")
    good = corpus.solved(course, A)
    for student in ("blocker", "honest-1", "honest-2"):
        corpus.write_submission(course, A, student, good)
    corpus.write_submission(course, A, "hostile", json.dumps(hostile(course)))
    outcome = grading.grade_assignment(course, A, workers=2)
    results = {r.student: (r.score, r.reasons) for r in outcome.graded}
    return {"course": course, "results": results, "rerun": outcome.rerun}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_hostile_notebook_is_graded_as_its_code_and_recorded_as_python(graded):
    assert graded["results"] == {
        "blocker": (12.0, []),
        "honest-1": (12.0, []),
        "honest-2": (12.0, []),
        "hostile": (12.0, []),  # its code is the solution; the spaces and the names cost nothing
    }
    assert graded["rerun"] == []
    path = graded["course"] / "autograded" / "hostile" / A / f"{A}.ipynb"
    recorded = nbformat.read(path, as_version=4)
    assert {k: v for k, v in recorded.metadata.items() if k != "autograder"} == COURSE_METADATA
    assert sum(cell.source == SPACES for cell in recorded.cells) == 3


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_feedback_writes_every_page_and_highlights_only_python(graded, capsys):
    course = graded["course"]
    assert cli.main(["--course", str(course), "feedback", A]) == 0
    assert "wrote 4 feedback page(s)" in capsys.readouterr().out
    for student in ("blocker", "honest-1", "honest-2", "hostile"):
        page = (course / "feedback" / student / A / f"{A}.html").read_text()
        assert set(_highlights(page)) == {"hl-python"}, student
    page = (course / "feedback" / "hostile" / A / f"{A}.html").read_text()
    assert "autoit" not in page.lower()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_formgrader_renders_the_graded_hostile_notebook_with_python(graded):
    course = graded["course"]
    html = formgrade_html(course, course / "autograded" / "hostile" / A / f"{A}.ipynb")
    shown = _highlights(html)
    assert shown and set(shown) == {"hl-python"}
    assert "autoit" not in html.lower()
    assert "Content-Security-Policy" in html  # the course's page, not nbconvert's default


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_formgrader_renders_the_worst_notebook_written_any_other_way(graded, tmp_path):
    """A notebook in ``autograded/`` that no sanitiser wrote (an older grader, a copy by hand)
    naming AutoIt, with 100 cells Python's lexer takes seconds each to read (2,000,000
    characters, the cap on a whole notebook; about 5 minutes of highlighting without the
    budget): the formgrader's page is made, every cell in Python's markup, most as plain
    text once the budget is spent."""
    worst = " \n" * 9_999 + "x"
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(worst) for _ in range(100)]
    )
    notebook.metadata.update(HOSTILE_METADATA)
    path = tmp_path / f"{A}.ipynb"
    nbformat.write(notebook, path)
    html = formgrade_html(graded["course"], path)
    shown = _highlights(html)
    assert shown == ["hl-python"] * 100
    assert _plain(html) >= 90, _plain(html)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_page_that_never_ends_is_that_students_and_the_others_are_written(graded, capsys):
    """The feedback process of one student blocks for ever (its autograded notebook is a
    FIFO nobody writes): it is ended at ``--seconds``, the student is named with the fixed
    reason, every other page is written, and the command exits 1."""
    course = graded["course"]
    blocker = course / "autograded" / "blocker" / A / f"{A}.ipynb"
    blocker.unlink()
    os.mkfifo(blocker)
    for page in (course / "feedback").glob(f"*/{A}/{A}.html"):
        page.unlink()
    try:
        status = cli.main(["--course", str(course), "feedback", A, "--seconds", "60"])
    finally:
        blocker.unlink()
    out, err = capsys.readouterr()
    assert status == 1
    assert (
        cli.NO_PAGE.format(
            student="blocker",
            why="rendering the feedback page took more than 60 s (the limit is feedback --seconds)",
        )
        in err.splitlines()
    )
    assert "wrote 3 feedback page(s)" in out and "1 could not be made: blocker" in out
    written = sorted(p.parts[-3] for p in (course / "feedback").glob(f"*/{A}/{A}.html"))
    assert written == ["honest-1", "honest-2", "hostile"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_live_formgrader_serves_both_pages_and_keeps_answering(graded, tmp_path):
    """nbgrader's formgrader (the Jupyter server extension, on 127.0.0.1 with a token) opens
    the graded hostile submission, then the worst notebook written any other way in another
    student's place: both pages come back in Python's markup, and the server still answers."""
    import urllib.request

    from formgrader_server import formgrader_server
    from nbgrader.api import Gradebook

    course = graded["course"]
    worst = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(" \n" * 9_999 + "x") for _ in range(100)]
    )
    worst.metadata.update(HOSTILE_METADATA)
    nbformat.write(worst, course / "autograded" / "honest-2" / A / f"{A}.ipynb")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        ids = {s: gb.find_submission_notebook(A, A, s).id for s in ("hostile", "honest-2")}
    with formgrader_server(course, tmp_path) as (base, token):
        for student, submission in ids.items():
            url = f"{base}/formgrader/submissions/{submission}/?token={token}"
            with urllib.request.urlopen(url, timeout=600) as response:
                page = response.read().decode()
            shown = _highlights(page)
            assert shown and set(shown) == {"hl-python"}, student
            assert "autoit" not in page.lower(), student
        with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=60) as status:
            assert status.status == 200
