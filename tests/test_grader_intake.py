"""What a student hands in is read with a bound fixed before the first byte: a 600 MB
notebook, a FIFO, a symlink, a huge timestamp.txt get a reason for that submission alone,
the grader reads none of their bytes beyond the cap, and the honest submission graded
beside them keeps full marks."""

from __future__ import annotations

import dataclasses
import html
import json
import os
import sys
import time
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402

from autograder import cli, grading, sandbox  # noqa: E402
from autograder.checking import intake, notebook, sanitise  # noqa: E402
from autograder.checking.assignment_spec import load_assignment  # noqa: E402
from autograder.checking.notebook import InvalidNotebook  # noqa: E402
from autograder.checking.program import DROPPED  # noqa: E402
from autograder.course import rendering  # noqa: E402
from autograder.sandbox import budgets  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

A = "ch1_pooling"
LIMITS = {"cell_seconds": 15, "task_seconds": 15, "submission_seconds": 60}
BIG = 600 << 20


@pytest.fixture(scope="module")
def graded(tmp_path_factory, bubblewrap):
    course = corpus.released_course(tmp_path_factory.mktemp("intake") / "course")
    good = corpus.solved(course, A)
    corpus.write_submission(course, A, "honest", good)
    # a 600 MB file that starts like a notebook (sparse: instant to make, costs no disk)
    big = corpus.write_submission(course, A, "huge", good)
    with open(big, "r+b") as handle:
        handle.truncate(BIG)
    fifo = course / "submitted" / "fifo" / A / f"{A}.ipynb"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)  # a read of it would block the grader for ever
    link = course / "submitted" / "link" / A / f"{A}.ipynb"
    link.parent.mkdir(parents=True)
    link.symlink_to(corpus.write_submission(course, A, "honest", good))
    (course / "submitted" / "missing" / A).mkdir(parents=True)
    stamp = corpus.write_submission(course, A, "huge-stamp", good).parent / "timestamp.txt"
    with open(stamp, "wb") as handle:
        handle.truncate(1 << 30)

    read = []
    real_read = os.read

    def counting_read(fd, n):
        data = real_read(fd, n)
        read.append(len(data))
        return data

    intake.os.read = counting_read  # the module's only reader of student bytes
    try:
        outcome = grading.grade_assignment(course, A, workers=2, limits=LIMITS)
    finally:
        intake.os.read = real_read
    return {"results": {r.student: r for r in outcome.graded}, "read": read}


def test_the_honest_submissions_keep_full_marks(graded):
    for student in ("honest", "huge-stamp"):
        result = graded["results"][student]
        assert (result.score, result.reasons) == (12, []), result.notes


@pytest.mark.parametrize(
    "student, why",
    [
        ("huge", "the notebook is 600.0 MiB, over the 256.0 MiB the grader reads of a file"),
        ("fifo", "is not a regular file"),
        ("link", "is a symbolic link, not a file"),
        ("missing", "was not handed in"),
    ],
)
def test_a_refused_notebook_scores_zero_with_its_reason(graded, student, why):
    result = graded["results"][student]
    assert (result.score, result.reasons) == (0, ["invalid notebook"])
    assert any(why in note for note in result.notes), result.notes
    assert result.complete  # a verdict, not a grader error to retry


def test_the_grader_reads_no_byte_beyond_a_cap(graded):
    # the three honest notebooks (twice each: the already-graded check and the job), and the
    # timestamp files, 201 bytes at most each; the 600 MB file and the FIFO: nothing
    assert max(graded["read"]) <= 1 << 20
    assert sum(graded["read"]) < 3 * 2 * (8 << 20) + 3 * 201
    assert sum(graded["read"]) < BIG // 50


def test_a_huge_timestamp_is_ignored_with_a_note(graded):
    notes = graded["results"]["huge-stamp"].notes
    assert "timestamp.txt is not a date and was ignored" in notes


def test_a_file_that_grows_past_the_ceiling_while_read_is_refused():
    # /proc files report size 0 to fstat and then hold more: the ceiling is checked on the bytes
    with pytest.raises(InvalidNotebook, match="grew past the 0.0 MiB the grader reads"):
        intake.read_notebook(Path("/proc/self/maps"), 10, ceiling=10)
    with pytest.raises(InvalidNotebook, match="it is not JSON"):  # read whole: not a notebook
        intake.read_notebook(Path("/proc/self/maps"), 1 << 20)


def test_the_cap_is_an_instructor_limit_that_wins():
    args = cli.build_parser().parse_args(["grade", A, "--max-notebook-mb", "0.5"])
    assert cli.explicit_limits(args) == {"notebook_bytes": 1 << 19}
    assert budgets.resolve(None, cli.explicit_limits(args)).notebook_bytes == 1 << 19
    assert sandbox.Limits().notebook_bytes == 8 << 20
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["grade", A, "--max-notebook-mb", "0"])


# ---------------------------------------------------------------------------------------
# after the byte cap: what a notebook under 8 MiB may still cost the trusted side


@pytest.fixture(scope="module")
def budgeted(tmp_path_factory, bubblewrap):
    course = corpus.released_course(tmp_path_factory.mktemp("budgets") / "course")
    base = json.loads(nbformat.writes(corpus.solved(course, A)))
    corpus.write_submission(course, A, "honest", json.dumps(base))
    hostile = corpus.over_the_caps(base)
    for student, (text, _why) in {**hostile, **corpus.saved_beside_the_code(base)}.items():
        corpus.write_submission(course, A, student, text)
    outcome = grading.grade_assignment(course, A, workers=2, limits=LIMITS)
    return course, {r.student: r for r in outcome.graded}, hostile


def test_an_honest_submission_beside_notebooks_over_the_caps_keeps_full_marks(budgeted):
    _course, results, _hostile = budgeted
    assert (results["honest"].score, results["honest"].reasons) == (12, [])


@pytest.mark.parametrize("student", ["many-cells", "deep-raw", "deep-markdown", "deep-metadata"])
def test_a_notebook_over_a_cap_scores_zero_with_its_reason_and_a_small_record(budgeted, student):
    """The reason names the cap; the autograded notebook holds the released test cells only
    (4, not the submission's 60,000), so the recording wrote a bounded file."""
    course, results, hostile = budgeted
    result = results[student]
    assert (result.score, result.reasons, result.notes) == (
        0,
        ["invalid notebook"],
        [hostile[student][1]],
    )
    assert result.complete
    autograded = course / "autograded" / student / A / f"{A}.ipynb"
    tests = len(load_assignment(course, A).tests)
    assert len(nbformat.read(autograded, as_version=4).cells) == tests  # the released tests
    assert autograded.stat().st_size < 1 << 20


@pytest.mark.parametrize("student", ["huge-output", "huge-attachment", "many-attachments"])
def test_what_is_saved_beside_the_code_is_dropped_with_a_note_and_the_code_keeps_full_marks(
    budgeted, student
):
    """4.5 MB of saved output in one cell, a 5 MB attachment, 500 attachments: full marks (12
    of 12, the honest notebook's), the fixed note in the record and at the top of the
    feedback, and an autograded notebook that carries none of it."""
    course, results, _hostile = budgeted
    result = results[student]
    base = json.loads(nbformat.writes(corpus.solved(course, A)))
    _text, notes = corpus.saved_beside_the_code(base)[student]
    assert (result.score, result.reasons, result.notes) == (12, [DROPPED], notes)
    autograded = course / "autograded" / student / A / f"{A}.ipynb"
    assert autograded.stat().st_size < 200_000  # the honest notebook's is about 20 KB
    graded = nbformat.read(autograded, as_version=4)
    assert graded.cells[0].cell_type == "markdown" and "From the grader" in graded.cells[0].source
    assert notes[0] in graded.cells[0].source
    assert not any(cell.get("attachments") for cell in graded.cells)
    honest = nbformat.read(course / "autograded" / "honest" / A / f"{A}.ipynb", as_version=4)
    assert not any("From the grader" in cell.source for cell in honest.cells)  # saved nothing over


def test_code_over_a_cap_beside_a_huge_output_is_still_refused_in_fixed_words():
    base = json.loads(nbformat.writes(nbformat.v4.new_notebook()))
    big = {"output_type": "stream", "name": "stdout", "text": "y" * 5_000_000}
    cell = {"cell_type": "code", "metadata": {}, "source": "x = 1\n" * 40_000, "outputs": [big]}
    cell["execution_count"] = None
    base["cells"] = [cell]
    with pytest.raises(InvalidNotebook) as refused:
        notebook.read_submission(json.dumps(base).encode())
    assert str(refused.value) == (
        "cell 1 holds 240,000 characters; the limit for one cell is 200,000"
    )


def test_a_refusal_comes_before_validation_and_sanitising(tmp_path, monkeypatch):
    """Every cap is checked on the parsed JSON: nbformat never validates the notebook and
    the sanitiser never sees a byte of it (the autograded notebook is the released one)."""
    course = corpus.released_course(tmp_path / "course")
    base = json.loads(nbformat.writes(corpus.solved(course, A)))
    spec = load_assignment(course, A)
    validated, cleaned = [], []
    real_validate, real_clean = nbformat.validate, sanitise.nh3.clean
    monkeypatch.setattr(
        nbformat, "validate", lambda nb, *a, **k: validated.append(1) or real_validate(nb, *a, **k)
    )
    monkeypatch.setattr(
        sanitise.nh3, "clean", lambda text, **k: cleaned.append(len(text)) or real_clean(text, **k)
    )
    for student, (text, why) in corpus.over_the_caps(base).items():
        with pytest.raises(InvalidNotebook) as refused:
            notebook.read_submission(text.encode())
        assert (str(refused.value), validated) == (why, []), student
        rendering.render_autograded(spec, text.encode(), {}, {}, {}, notebook.DEFAULT_CAPS)
        assert max(cleaned, default=0) < 5000, student  # the released cells only
        validated.clear(), cleaned.clear()
    honest = json.dumps(base).encode()
    assert len(notebook.read_submission(honest).cells) == len(base["cells"]) and validated == [1]


def test_html_past_the_depth_is_shown_as_text_found_in_one_pass():
    assert sanitise.html_depth("<div>" * 230_000) == 101  # stopped at the cap
    assert sanitise.html_depth("<div><span></div>" * 1000) == 2  # an end tag closes the inner
    assert sanitise.html_depth("<p>a<br/><img src=x><hr></p>" * 10) == 1  # void elements
    assert sanitise.html_depth("<a" * 100_000) == 0  # no tag ever ends: nothing nested
    deep = "<div>" * 1000 + "<script>alert(1)</script>"
    assert sanitise.clean_html(deep) == html.escape(deep)
    assert sanitise.clean_html("<div>" * 3 + "x") == "<div><div><div>x</div></div></div>"


def test_a_recording_over_its_time_is_ended_with_its_reason_and_the_next_one_runs():
    renderer = rendering.Renderer()
    try:
        with pytest.raises(rendering.RenderFailed, match="took more than 2 s"):
            renderer.run(time.sleep, (600,), 2)
        assert renderer.run(len, ("abc",), 60) == 3
        assert renderer.started == 2  # the overrun's process was ended, a new one started
    finally:
        renderer.close()


def test_the_caps_are_instructor_limits_that_win_over_the_chapters():
    args = cli.build_parser().parse_args(["grade", A, "--max-cells", "50", "--record-seconds", "9"])
    given = cli.explicit_limits(args)
    assert given == {"cells": 50, "record_seconds": 9.0}
    caps = budgets.resolve_caps(None, given)
    assert (caps.cells, caps.record_seconds, caps.html_depth) == (50, 9.0, 100)
    assert budgets.resolve(None, given) == sandbox.Limits()
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["grade", A, "--max-html-depth", "0"])


def test_no_cap_shares_a_name_with_a_limit():
    """One dict of names sets both (`budgets.resolve`, `resolve_caps`): a shared name would be
    dropped from the limits (``cell_output_chars`` is the sandbox's captured stdout)."""
    caps = {f.name for f in dataclasses.fields(notebook.Caps)}
    assert not caps & {f.name for f in dataclasses.fields(sandbox.Limits)}
    given = {"cell_output_chars": 123, "stored_output_chars": 456}
    assert budgets.resolve(None, given).cell_output_chars == 123
    assert budgets.resolve_caps(None, given).stored_output_chars == 456


#: the peak memory of reading the costliest saved outputs (8 MiB of one-line output chunks:
#: 1.16 million JSON strings), over the file's size: they are skipped as they are read, so
#: what the parse builds is the code alone (measured 0.45-0.52, an upper bound: the high-water
#: mark also holds the imports' own peak; 13.9 when the parse held the outputs)
OUTPUT_MEMORY_RATIO = 2


def test_reading_saved_outputs_costs_memory_bounded_by_what_is_graded(tmp_path):
    """A 40 MB notebook of saved outputs is read (under the 256 MiB ceiling), its outputs
    skipped as they pass: what is graded is its code, with a note for the cells over the
    per-cell cap; the costliest one of many small strings is read in a small multiple of
    its size, and none of its outputs is held."""
    import subprocess

    def notebook_of(text) -> Path:
        out = [{"output_type": "stream", "name": "stdout", "text": text}]
        cell = {"cell_type": "code", "metadata": {}, "execution_count": None, "source": "x = 1"}
        notebook = {"nbformat": 4, "nbformat_minor": 4, "metadata": {}}
        path = tmp_path / f"{len(text)}.ipynb"
        path.write_text(json.dumps(notebook | {"cells": [cell | {"outputs": out}] * 4}))
        return path

    big = notebook_of("y" * 10_000_000)
    assert big.stat().st_size > 40_000_000
    read = intake.read_notebook(big, sandbox.Limits().notebook_bytes)
    assert read.size == big.stat().st_size and len(read.data) < 1000
    assert read.notes == (
        "saved outputs were dropped before grading (40,000,124 characters): they are not graded",
    )
    under = notebook_of(["a\n"] * 290_000)
    child = (
        "import sys\n"
        "from autograder.checking import intake, notebook\n"
        "notebook.read_graded(intake.read_notebook(sys.argv[2], 8 << 20).data)  # imports\n"
        "before = int(open('/proc/self/status').read().split('VmRSS:')[1].split()[0])\n"
        "read = intake.read_notebook(sys.argv[1], 8 << 20)\n"
        "parsed, dropped = notebook.read_graded(read.data)\n"
        "peak = int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0])\n"
        "print(read.size, (peak - before) * 1024, len(parsed.cells), dropped)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", child, str(under), str(notebook_of("small"))],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        check=True,
    )
    size, grown, cells, dropped = run.stdout.split(" ", 3)
    assert (int(cells), dropped.strip()) == (4, "[]")
    assert int(size) > 8_000_000
    assert int(grown) < OUTPUT_MEMORY_RATIO * int(size), int(grown) / int(size)
