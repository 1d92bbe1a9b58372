"""Sanitise every notebook nbgrader writes or shows to the instructor, not only ours.

`autograder.checking.sanitise.clean_notebook` makes a notebook safe to render (nothing a student wrote
runs, loads or navigates in the browser). Our grader calls it as it writes ``autograded/``;
this module is the same function as an nbconvert preprocessor, so that nbgrader's own paths
use it too. ``nbgrader_config.py`` registers it

- last in ``Autograde.autograde_preprocessors``: ``nbgrader autograde`` and the formgrader's
  Autograde button (which runs the same app) write ``autograded/`` sanitised. It comes after
  ``SaveAutoGrades``, which must still see the student's own answer (an unchanged written
  answer scores 0 by its checksum) and the outputs the notebook produced;
- last in ``GenerateFeedback.preprocessors`` and in ``HTMLExporter.preprocessors`` (the
  formgrader's manual-grading view): the readers clean again what they render, so an
  ``autograded/`` notebook written by anything else (an older grader, a hand copy, an
  autograde killed between its two passes) is still shown inert.

`KeepOnlyCourseFiles` runs after it in autograde: nbgrader copies every other file of a
submission into ``autograded/<student>/<id>/``, and the formgrader serves that folder's files
from its own origin (``/formgrader/submissions/<id>/<file>``), where a student's HTML page
would run with the instructor's Jupyter session. Once the notebook has run, the folder keeps
only the notebooks, ``timestamp.txt`` and the files of the instructor's ``source/<id>/``.

`NameStudent` (not a sanitiser, but of the same kind: nbgrader's own autograde made to do
what our grader does) gives a student nbgrader creates the name our grader gives
(`autograder.course.gradebook.name_student`), so the formgrader never lists "None, None".

`CourseHighlight` is the ``highlight_code`` filter of every page nbconvert makes for the course
(nbgrader's feedback, the formgrader's manual-grading view): the course's lexer whatever the
notebook's metadata names, and a budget of CPU time per notebook, past which code is shown
as plain text. nbconvert reads the lexer's name from the notebook before any preprocessor
runs, and Pygments' lexers are not linear: AutoIt's is quadratic on a run of spaces, and
Python's own on lines of one space (``" \\n" * 20_000``: 3 s; 200,000 characters: about
5 minutes), inside the Jupyter server, whose one thread then answers nobody.

`ChapterTimeout` is nbgrader's ``Execute`` with a cell's timeout derived from the chapter's
budget (`stock_cell_seconds`), not one number for every course: the formgrader's Autograde
button runs autograde inside the Jupyter server, which a looping cell held for the whole
timeout (300 s). `ScrubPaths` removes the instructor's paths (the course folder, the
checkout, the Python environment, the home folder) from every traceback, error and stderr
output nbgrader records: the interrupted cell's ``KeyboardInterrupt`` traceback named them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from nbconvert.preprocessors import Preprocessor
from nbgrader.preprocessors import Execute
from traitlets import Bool

from autograder.checking import sanitise


class SanitiseForInstructor(Preprocessor):
    """The whole notebook through `autograder.checking.sanitise.clean_notebook`: a grader's
    record, and a cell's score and comment, in what nbgrader reads are the student's."""

    enabled = Bool(True)  # nbconvert preprocessors are off unless enabled
    #: nbgrader's ``GetGrades`` ran just before (the feedback page): its scores and comments
    #: are the gradebook's, kept
    graded = False

    def preprocess(self, nb, resources):
        return sanitise.clean_notebook(nb, keep_record=False, graded=self.graded), resources


class SanitiseFeedback(SanitiseForInstructor):
    """``SanitiseForInstructor`` after ``GetGrades``, in ``generate_feedback``."""

    graded = True


#: CPU seconds of highlighting per notebook, and the longest cell highlighted: past either,
#: code is shown as plain text, escaped, in the same markup. Measured: the six assignments'
#: honest autograded notebooks (9 to 24 code cells, the longest 4,452 characters, ch3's)
#: take 0.007-0.025 s each; Python's lexer on 20,000 characters of one-space lines, 3 s
HIGHLIGHT_SECONDS = 2.0
HIGHLIGHT_CELL_CHARS = 20_000


class _OverBudget(Exception):
    pass


class CourseHighlight:
    """``highlight_code`` for nbconvert's HTML pages (registered as a class in
    ``nbgrader_config.py``: nbconvert makes one per notebook it renders, so the budget is per
    notebook). Every cell is highlighted with the course's lexer
    (`autograder.checking.sanitise.DEFAULT_LANGUAGE`), never the one the notebook names, until
    ``HIGHLIGHT_SECONDS`` of this thread's CPU time are spent; a cell over
    ``HIGHLIGHT_CELL_CHARS``, and every cell after the budget, is plain text. The budget is
    checked between tokens, and each token is one regular-expression match over at most one
    cell, so one notebook costs the budget and a linear pass, whatever it holds."""

    def __init__(self):
        self.spent = 0.0
        self.plain = 0  # cells shown as plain text (a test reads it)
        self.highlighted = 0

    def __call__(self, source, language=None, metadata=None) -> str:
        import time

        from pygments.formatters import HtmlFormatter
        from pygments.lexers import get_lexer_by_name
        from pygments.token import Text

        source = str(source) or " "
        name = sanitise.DEFAULT_LANGUAGE
        formatter = HtmlFormatter(cssclass=f" highlight hl-{name}")
        started = time.thread_time()
        if len(source) <= HIGHLIGHT_CELL_CHARS and self.spent < HIGHLIGHT_SECONDS:
            deadline = started + HIGHLIGHT_SECONDS - self.spent

            def tokens():
                for token in get_lexer_by_name(name).get_tokens(source):
                    if time.thread_time() > deadline:
                        raise _OverBudget
                    yield token

            try:
                html = _format(formatter, tokens())
                self.highlighted += 1
                return html
            except _OverBudget:
                pass
            finally:
                self.spent += time.thread_time() - started
        self.plain += 1
        return _format(formatter, [(Text, source)])


def _format(formatter, tokens) -> str:
    """What ``pygments.highlight`` returns, from tokens already made."""
    import io

    out = io.StringIO()
    formatter.format(tokens, out)
    return out.getvalue()


class KeepOnlyCourseFiles(Preprocessor):
    """Remove from the autograded folder every file a student added beside the notebook."""

    enabled = Bool(True)

    def preprocess(self, nb, resources):
        autograded = Path(resources["metadata"]["path"])  # the folder autograde writes
        coursedir = self.parent.parent.coursedir  # preprocessor -> exporter -> Autograde app
        source = Path(
            coursedir.format_path(
                coursedir.source_directory, ".", resources["nbgrader"]["assignment"]
            )
        )
        for path in sorted(autograded.rglob("*"), reverse=True):  # files before their folders
            relative = path.relative_to(autograded)
            if path.is_dir() and not path.is_symlink():
                if not any(path.iterdir()):
                    path.rmdir()
            elif not (
                path.suffix == ".ipynb"
                or relative == Path("timestamp.txt")
                or (source / relative).is_file()
            ):
                os.unlink(path)
        return nb, resources


class NameStudent(Preprocessor):
    """The submission's student gets the id as name if nobody gave one."""

    enabled = Bool(True)

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook

        from autograder.course.gradebook import name_student

        with Gradebook(resources["nbgrader"]["db_url"]) as gb:
            name_student(gb, resources["nbgrader"]["student"])
        return nb, resources


#: what stock nbgrader's kernel does that the sandbox's run does not: import the reference
#: package (PyTorch in chapters 3 to 6) for ``run_hidden`` and compute the hidden cases'
#: answers there, on a machine whose Jupyter server shares the CPU
STOCK_SECONDS = 30.0


def stock_cell_seconds(assignment: str) -> int:
    """The seconds one cell of ``assignment`` gets in stock nbgrader: the chapter's cell
    budget (`autograder.sandbox.budgets.resolve`, 4 T + 15 s from its reference's time T) plus
    ``STOCK_SECONDS``; an assignment without a plug-in gets the default ``Limits``'."""
    from autograder import chapters  # noqa: F401 - every chapter registered
    from autograder.checking import checks
    from autograder.sandbox import budgets

    chapter = checks.CHAPTERS.get(assignment)
    return int(budgets.resolve(chapter).cell_seconds + STOCK_SECONDS + 0.999)


class ChapterTimeout(Execute):
    """nbgrader's Execute, its per-cell ``timeout`` that of the assignment it runs."""

    def preprocess(self, nb, resources=None, km=None):
        # not a trait: ExecutePreprocessor.preprocess re-runs the client's __init__, which
        # resets every trait (``timeout`` too) to its configured value
        self.chapter_seconds = stock_cell_seconds(resources["nbgrader"]["assignment"])
        return super().preprocess(nb, resources, km=km)

    def preprocess_cell(self, cell, resources, index):
        self.timeout = self.chapter_seconds
        return super().preprocess_cell(cell, resources, index)


def instructor_paths(*more: str) -> list[tuple[str, str]]:
    """(path, what stands for it) of every folder of the instructor's a traceback may name,
    longest first, so that a folder inside another is replaced before it."""
    checkout = str(Path(__file__).resolve().parents[2])
    named = [
        *((path, "<course>") for path in more),
        (checkout, "<checkout>"),
        (sys.prefix, "<python>"),
        (sys.base_prefix, "<python>"),
        (os.path.realpath(sys.prefix), "<python>"),
        (os.path.expanduser("~"), "~"),
    ]
    kept = {path.rstrip("/"): mark for path, mark in reversed(named) if len(path.rstrip("/")) > 1}
    return sorted(kept.items(), key=lambda item: -len(item[0]))


def scrub_paths(text: str, paths: list[tuple[str, str]]) -> str:
    """``text`` with each of ``paths`` replaced where it is a whole folder (``/root`` in
    ``/root/x``, not in ``/rootfs``)."""
    import re

    for path, mark in paths:
        text = re.sub(re.escape(path) + r"(?![\w.-])", lambda _m, mark=mark: mark, text)
    return text


class ScrubPaths(Preprocessor):
    """Every error output's name, value and traceback, and every stderr stream, with the
    instructor's paths (`instructor_paths`, the course folder included) replaced."""

    enabled = Bool(True)

    def preprocess(self, nb, resources):
        course = resources.get("nbgrader", {}).get("course_root") or _course_root(self)
        paths = instructor_paths(*([os.path.realpath(course), course] if course else []))
        for cell in nb.cells:
            for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
                if output.get("output_type") == "error":
                    output["ename"] = scrub_paths(str(output.get("ename", "")), paths)
                    output["evalue"] = scrub_paths(str(output.get("evalue", "")), paths)
                    output["traceback"] = [
                        scrub_paths(str(line), paths) for line in output.get("traceback", [])
                    ]
                elif output.get("output_type") == "stream" and output.get("name") == "stderr":
                    text = output.get("text", "")
                    text = "".join(text) if isinstance(text, list) else str(text)
                    output["text"] = scrub_paths(text, paths)
        return nb, resources


def _course_root(preprocessor) -> str | None:
    """The course folder of the nbgrader app running ``preprocessor`` (exporter -> app)."""
    app = getattr(getattr(preprocessor, "parent", None), "parent", None)
    coursedir = getattr(app, "coursedir", None)
    return getattr(coursedir, "root", None)
