"""Feedback about hidden cases carries no number the submission chose.

A submission that holds its hidden inputs (here: the arguments its function is called with)
tries to write them into its feedback through every number the grader used to show: the
maximum error, the exit status or signal of a crash, the number of axes or of outputs it
returned, how many entries are wrong and where, how many are NaN. Each channel has two
attackers encoding different values (the first hidden input itself, and that plus 0.37):
their feedback must be byte-identical, and no encoded value appears in the autograded
notebook, the feedback page, the report or the CLI summary. An honest victim graded after
them on the same worker keeps 12/12.

Only ``nadaraya_watson_ard`` (test-nw, 2 of ch1's 12 points) attacks, and only on hidden
cases (it answers the public cases, which it knows from the release's ``public_cases.npz``,
honestly), so every attacker scores exactly 10. Each student has their own hidden cases
(``grading.hidden_seed``)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402

from autograder import cli, grading, sandbox  # noqa: E402
from autograder.checking import checks  # noqa: E402
from autograder.checking.results import SubmissionResult  # noqa: E402
from autograder.grading import verdict  # noqa: E402
from autograder.grading.run import Failure, RunRecord  # noqa: E402
from autograder.student import contract  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

A = "ch1_pooling"
#: a hidden case's message may say "most" or "some" of its entries (one bit, by design): on
#: this batch seed both attackers of the entry and NaN channels (each channel's student id has
#: its own hidden cases) fall on the same side of it, so their feedback must be byte-identical
#: (on batch seed 5 they fall on either side), and the max-error values they encode (3.64e+03,
#: 4.01e+03) are no number the page holds anyway (on batch seed 13, "279" is)
SEED = 10
LIMITS = sandbox.Limits(cell_seconds=15, task_seconds=15, submission_seconds=60)

#: wraps the honest function: public cases are answered honestly, every hidden one carries
#: ``v`` = the first hidden input (plus OFFSET) through its channel ENCODE
ATTACK = """
import os, signal
_honest_nw = nadaraya_watson_ard
with np.load("public_cases.npz") as _z:
    _PUBLIC_INPUTS = {{np.ascontiguousarray(_z[k]).tobytes() for k in _z.files}}


def nadaraya_watson_ard(x_query, x_keys, y_values, bandwidths):
    right = np.asarray(_honest_nw(x_query, x_keys, y_values, bandwidths), dtype=float)
    if np.ascontiguousarray(x_query).tobytes() in _PUBLIC_INPUTS:
        return right
    v = float(np.ravel(x_query)[0]) + float("{offset}")
    code = int(abs(v) * 1000)
{encode}
"""

#: channel -> the body that returns (or ends the process) with v encoded
CHANNELS = {
    "max-error": "    return right + (1000 * abs(v) + 7)",
    "exit-status": "    os._exit(code % 200 + 20)",
    # the run is pid 1 of its own pid namespace, which ignores a signal it sends itself: the
    # kernel's own signal for a fault (a read of address 0) ends it
    "signal": (
        "    os.kill(os.getpid(), (signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS)[code % 3])\n"
        "    import ctypes\n"
        "    ctypes.string_at(0)"
    ),
    "axis-count": "    return np.zeros((1,) * (code % 20 + 3))",
    "output-count": "    return tuple(right for _ in range(code % 14 + 2))",
    "entry-count": (
        "    flat = right.ravel().copy()\n"
        "    flat[code % flat.size :] += 1000.0  # how many and from where: both carry v\n"
        "    return flat.reshape(right.shape)"
    ),
    "nan-count": (
        "    flat = right.ravel().copy()\n"
        "    flat[code % flat.size :] = np.nan\n"
        "    return flat.reshape(right.shape)"
    ),
}
OFFSETS = ("+0.000", "+0.370")  # as written in the attackers' source


def _encoded(channel: str, offset: str) -> list[str]:
    """What the old messages would have shown of v on the first hidden case: the phrases
    searched for in every text the grading produced."""
    case = checks.hidden_cases("nadaraya_watson_ard", grading.hidden_seed(SEED, channel))[0]
    v = float(np.ravel(case.args[0])[0]) + float(offset)
    code = int(abs(v) * 1000)
    size = int(np.prod(checks.expected("nadaraya_watson_ard", case)[0].shape))
    return {
        "max-error": [f"{1000 * abs(v) + 7:.3g}"],
        "exit-status": [f"status {code % 200 + 20}"],
        "signal": [f"signal {(6, 11, 7)[code % 3]}"],
        "axis-count": [f"got {code % 20 + 3} axes", f"{code % 20 + 3} axes instead"],
        "output-count": [f"got {code % 14 + 2}."],
        "entry-count": [f"in {size - code % size} of {size}", f"index ({code % size},)"],
        "nan-count": [f"NaN in {size - code % size} of {size}", f"index ({code % size},)"],
    }[channel]


#: appended to the cell defining nadaraya_watson_ard: its line 2 of the appended text does not parse
SYNTAX_ERROR = """
def helper(x):
    return (x,
"""
MISSING_MODULE = "import pandas_is_not_installed_here\n"


def _student(channel: str, offset: str) -> str:
    """The key of one attacker in ``graded["results"]``; its student id is the channel's name,
    in the batch of its offset (``graded["paths"]``)."""
    return f"{channel}-{OFFSETS.index(offset)}"


@pytest.fixture(scope="module")
def graded(tmp_path_factory, bubblewrap):
    """Two batches with the same seed, one per offset: each channel's attacker has the same
    student id in both, so both get the same hidden cases (``grading.hidden_seed``) and may
    differ only in what they encode."""
    results, paths, reports, tables = {}, {}, [], []
    for index, offset in enumerate(OFFSETS):
        course = corpus.released_course(tmp_path_factory.mktemp(f"channels{index}") / "course")
        good = corpus.solved(course, A)
        for channel, encode in CHANNELS.items():
            attack = ATTACK.format(offset=offset, encode=encode)
            notebook = corpus.append_to_cell(good, "nw", attack)
            corpus.write_submission(course, A, channel, notebook)
        if index == 0:
            corpus.write_submission(
                course, A, "cell-syntax-error", corpus.append_to_cell(good, "nw", SYNTAX_ERROR)
            )
            corpus.write_submission(
                course, A, "cell-missing-module", corpus.prepend_to_cell(good, "nw", MISSING_MODULE)
            )
            corpus.write_submission(course, A, "zz-victim", good)  # last, on the same worker
            first = course
        outcome = grading.grade_assignment(course, A, workers=1, limits=LIMITS, seed=SEED)
        assert cli.main(["--course", str(course), "feedback", A]) == 0
        report = course / "report.html"
        assert cli.main(["--course", str(course), "report", A, "--out", str(report)]) == 0
        reports.append(report.read_text())
        tables.append(cli.summary_table(outcome.graded))
        for result in outcome.graded:
            key = _student(result.student, offset) if result.student in CHANNELS else result.student
            results[key] = result
            paths[key] = (course, result.student)
    return {
        "course": first,
        "results": results,
        "paths": paths,
        "table": "\n".join(tables),
        "report": "\n".join(reports),
    }


def _shown(graded, student: str, offset: str) -> str:
    """Everything of one submission a person reads, its id and the offset its source spells
    replaced by fixed words: the task messages and notes, the autograded notebook's outputs
    and record, its feedback page."""
    (course, student), result = graded["paths"][student], graded["results"][student]
    notebook = json.loads((course / "autograded" / student / A / f"{A}.ipynb").read_text())
    record = dict(notebook["metadata"]["autograder"])
    # no clock reading at all: when grading ends is the submission's choice
    assert not re.search(r"\d{4}-\d\d-\d\d|\d\d:\d\d", json.dumps(record)), record
    record.pop("sha256")  # of the submitted file, whose source differs by its offset
    feedback = next((course / "feedback" / student / A).glob("*.html")).read_text()
    texts = [
        json.dumps([t.message for t in result.tasks] + result.notes + result.reasons),
        json.dumps([c.get("outputs", []) for c in notebook["cells"]]),
        json.dumps(record, sort_keys=True),
        re.sub(r"\d{4}-\d\d-\d\d[ T][\d:.]+", "<time>", feedback),
    ]
    return "\n".join(texts).replace(student, "<student>").replace(offset, "<offset>")


@pytest.mark.parametrize("channel", sorted(CHANNELS))
def test_an_attacker_scores_exactly_ten_and_its_feedback_does_not_depend_on_what_it_encodes(
    graded, channel
):
    reasons = ["crash"] if channel in ("exit-status", "signal") else []
    shown = [_shown(graded, _student(channel, offset), offset) for offset in OFFSETS]
    for offset in OFFSETS:
        result = graded["results"][_student(channel, offset)]
        assert (result.score, result.reasons) == (10.0, reasons), result.notes
        nw = next(t for t in result.tasks if t.grade_id == "test-nw")
        assert nw.points == 0 and "hidden check failed" in nw.message or "stopped" in nw.message
    assert shown[0] == shown[1]


@pytest.mark.parametrize("channel", sorted(CHANNELS))
def test_no_encoded_value_reaches_the_feedback_the_report_or_the_cli(graded, channel):
    everywhere = graded["report"] + graded["table"]
    for offset in OFFSETS:
        text = _shown(graded, _student(channel, offset), offset) + everywhere
        for phrase in _encoded(channel, offset):
            assert phrase not in text, (channel, offset, phrase)


def test_a_crash_and_a_signal_read_the_same(graded):
    def nw_message(student):
        return next(t.message for t in graded["results"][student].tasks if t.grade_id == "test-nw")

    assert nw_message("exit-status-0") == nw_message("signal-0")
    assert "its process ended early" in nw_message("signal-0")


def test_the_honest_victim_graded_after_them_keeps_full_marks(graded):
    victim = graded["results"]["zz-victim"]
    assert (victim.score, victim.reasons) == (12.0, [])


def test_a_stopped_task_reads_the_same_whatever_the_run_reported():
    """The trusted side's own details of a stopped task (an exit status, a signal, the idle
    check or the wall clock) never reach the feedback or the instructor's notes: the task
    held its hidden inputs while it ran, so they were the submission's to choose."""
    spec = type("Spec", (), {})()
    spec.tests = [type("Test", (), {"grade_id": "t", "points": 2.0, "checks": [("c", "f")]})()]
    all_cases = [[checks.Case("a case", (), expected=(np.zeros(3),), hidden=True)]]
    specs = {"c": contract.Spec("c")}
    seen = set()
    for reason, detail in (
        ("crash", "the process ended early (exited with status 135)"),
        ("crash", "the process ended early (killed by signal 11)"),
        ("timeout", "waited 10 s without using the CPU (a sleep, ...)"),
        ("timeout", "ran longer than 15 s"),
    ):
        record = RunRecord(failed_tasks={0: Failure(reason, detail)})
        result = SubmissionResult("s", A, 0)
        verdict.judge(spec, specs, all_cases, record, result)
        text = json.dumps([t.message for t in result.tasks] + result.notes + result.reasons)
        assert "135" not in text and "11" not in text and "10 s" not in text and "15 s" not in text
        seen.add((reason, text))
    assert len(seen) == 2  # one text per reason


def test_a_feedback_page_loads_nothing_and_runs_only_the_courses_mathjax(graded):
    """nbgrader's feedback template calls nbconvert's ``mathjax()`` macro, which loads MathJax
    from a CDN; the course's macro (``autograder/course/nbgrader_templates/base/mathjax.html.j2``)
    writes its own MathJax into the page instead: two inline scripts (its configuration and
    MathJax), none with a source, and no ``src`` or ``href`` to another host, so a page
    requests nothing (tests/test_feedback_math_browser.py typesets one in Chromium)."""
    from html.parser import HTMLParser

    class Sources(HTMLParser):
        def __init__(self):
            super().__init__()
            self.scripts, self.urls = [], []

        def handle_starttag(self, tag, attrs):
            if tag == "script":
                self.scripts.append(dict(attrs))
            self.urls += [v for k, v in attrs if k in ("src", "href") and v and tag != "a"]

    courses = {course for course, _student in graded["paths"].values()}
    pages = sorted(page for course in courses for page in (course / "feedback").rglob("*.html"))
    assert len(pages) == len(graded["results"])
    for page in pages:
        text = page.read_text()
        parser = Sources()
        parser.feed(text)
        assert parser.scripts == [{}, {}], page  # the configuration, then MathJax, inline
        assert not [u for u in parser.urls if re.match(r"(https?:)?//", u)], (page, parser.urls)
        assert "cdnjs" not in text and "window.MathJax = {" in text
        assert r"\sum" in text or "$" in text  # the chapter's TeX, for MathJax to typeset


def _cell_and_task(graded, student: str) -> tuple[list, str, int]:
    """(the nw cell's outputs in the autograded notebook, test-nw's message, the nw cell's
    number in the notebook as the feedback counts it)."""
    path = graded["course"] / "autograded" / student / A / f"{A}.ipynb"
    cells = json.loads(path.read_text())["cells"]
    number = next(
        i + 1
        for i, c in enumerate(cells)
        if c["metadata"].get("nbgrader", {}).get("grade_id") == "nw"
    )
    task = next(t for t in graded["results"][student].tasks if t.grade_id == "test-nw")
    return cells[number - 1]["outputs"], task.message, number


def test_a_cell_with_a_syntax_error_says_so_with_its_line_and_the_function_says_why(graded):
    result = graded["results"]["cell-syntax-error"]
    assert (result.score, result.reasons) == (10.0, ["missing function"])
    outputs, message, number = _cell_and_task(graded, "cell-syntax-error")
    submitted = corpus.append_to_cell(corpus.solved(graded["course"], A), "nw", SYNTAX_ERROR)
    cell = next(
        c for c in submitted.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "nw"
    )
    line = cell.source.split("\n").index("    return (x,") + 1  # the bracket never closed
    errors = [o for o in outputs if o["output_type"] == "error"]
    assert [o["evalue"] for o in errors] == [f"the cell has a syntax error at line {line}"]
    assert (
        f"`nadaraya_watson_ard` is not defined: notebook cell {number}: the cell has a syntax "
        f"error at line {line}, so it stopped there"
    ) in message
    assert "raised Exception" not in message + json.dumps(outputs)


def test_a_cell_whose_import_fails_says_what_the_grader_offers(graded):
    result = graded["results"]["cell-missing-module"]
    assert (result.score, result.reasons) == (10.0, ["missing function"])
    outputs, message, number = _cell_and_task(graded, "cell-missing-module")
    # the module is not on the fixed list (zygote.KNOWN_MODULES): not named; its line is read
    # from the submitted cell on the trusted side
    text = (
        "the cell raised ModuleNotFoundError: a module not installed here (at line 1 of notebook "
        f"cell {number}: `import pandas_is_not_installed_here`): an import failed, and the "
        "grader offers only NumPy"
    )
    assert [o["evalue"] for o in outputs if o["output_type"] == "error"][0].startswith(text)
    assert f"notebook cell {number}: {text}" in message
