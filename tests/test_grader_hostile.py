"""The hostile corpus: every kind of attack or breakage gets its exact score and reason,
the batch completes, and the honest submissions graded beside them are unaffected."""

from __future__ import annotations

import json
import re
import socket
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402

from autograder import grading, sandbox  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

LIMITS = sandbox.Limits(cell_seconds=15, task_seconds=15, submission_seconds=60)


class ConnectionCounter:
    """A TCP server on localhost that counts who reached it (nobody should)."""

    def __init__(self):
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        self.port = self.server.getsockname()[1]
        self.count = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.count += 1
            connection.close()


@pytest.fixture(scope="module")
def graded(tmp_path_factory, bubblewrap):
    course = corpus.released_course(tmp_path_factory.mktemp("hostile") / "course")
    counter = ConnectionCounter()
    cases = corpus.ch1_corpus(course, counter.port)
    for student, (notebook, _score, _reasons) in cases.items():
        corpus.write_submission(course, "ch1_pooling", student, notebook)
    # a fixed batch seed: the hidden inputs searched for below are the same on every run
    outcome = grading.grade_assignment(course, "ch1_pooling", workers=2, limits=LIMITS, seed=11)
    return {
        "course": course,
        "cases": cases,
        "outcome": outcome,
        "results": {r.student: r for r in outcome.graded},
        "counter": counter,
    }


STUDENTS = [
    "honest-right",
    "carry-hidden-inputs",
    "honest-partial",
    "honest-blank",
    "patch-allclose",
    "patch-builtins",
    "steal-files",
    "network",
    "os-exit",
    "kill-parent",
    "infinite-loop-cell",
    "infinite-loop-function",
    "fork-bomb",
    "memory-bomb",
    "input",
    "print-gigabytes",
    "raises-with-secrets",
    "edited-test",
    "deleted-test",
    "duplicated-test",
    "edited-test-wrong",
    "invalid-json",
    "missing-function",
    "not-a-function",
    "returns-secret-type",
    "metadata-not-a-mapping",
    "points-not-a-number",
    "cell-without-type",
    "timestamp-not-a-date",
    "wire-index-list",
    "wire-error-text",
    "wire-deep-header",
    "wire-task-start",
    "wire-zip-bomb",
    "wire-too-many-axes",
    "wire-steal-hidden-cases",
    "pipe-never-read",
    "sleep-in-every-cell",
]


def test_corpus_lists_every_student_tested_here(graded):
    assert sorted(graded["cases"]) == sorted(STUDENTS)


@pytest.mark.parametrize("student", STUDENTS)
def test_submission_gets_its_exact_score_and_reason(graded, student):
    _notebook, score, reasons = graded["cases"][student]
    result = graded["results"][student]
    assert (result.score, sorted(result.reasons)) == (score, sorted(reasons)), result.notes


def test_the_whole_batch_completed_and_was_recorded(graded):
    from nbgrader.api import Gradebook

    assert sorted(graded["results"]) == sorted(STUDENTS)
    with Gradebook(f"sqlite:///{graded['course'] / 'gradebook.db'}") as gb:
        for student, (_nb, score, _reasons) in graded["cases"].items():
            submission = gb.find_submission("ch1_pooling", student)
            assert submission.score == pytest.approx(score), student


def test_nothing_reached_the_network(graded):
    assert graded["counter"].count == 0


def test_autograded_notebooks_carry_no_hidden_test_code(graded):
    notebooks = sorted((graded["course"] / "autograded").glob("*/ch1_pooling/ch1_pooling.ipynb"))
    assert len(notebooks) == len(STUDENTS)
    for path in notebooks:
        text = path.read_text()
        assert "HIDDEN TESTS" not in text and "run_hidden" not in text, path


def test_failed_test_cells_show_the_check_message(graded):
    path = graded["course"] / "autograded" / "honest-partial" / "ch1_pooling" / "ch1_pooling.ipynb"
    cells = json.loads(path.read_text())["cells"]
    pooling = next(
        c for c in cells if c["metadata"].get("nbgrader", {}).get("grade_id") == "test-pooling"
    )
    assert pooling["outputs"][0]["output_type"] == "error"
    assert "epanechnikov_weights" in "\n".join(pooling["outputs"][0]["traceback"])
    weights = next(
        c for c in cells if c["metadata"].get("nbgrader", {}).get("grade_id") == "test-nw-weights"
    )
    text = "".join(weights["outputs"][0]["text"])
    assert weights["outputs"][0]["output_type"] == "stream" and "hidden cases passed" in text


def test_failure_messages_never_echo_the_exception_text(graded):
    result = graded["results"]["raises-with-secrets"]
    test_nw = next(t for t in result.tasks if t.grade_id == "test-nw")
    case_lines = [m for m in test_nw.message.splitlines() if m.startswith("  - ")]
    # a failing case in full, or (hidden, after the first) only its name; past the public
    # cases the grader shows (verdict.SHOWN), how many more. A public case quotes the line
    # that raised, read from the submitted source on the trusted side: the exception's class
    # is named there as the student wrote it, its runtime text (the inputs) nowhere
    raised = "    raise Leak0x123456(repr(np.asarray(x_query).tolist()) + repr(np.asarray(y_values"
    public = re.escape("nadaraya_watson_ard raised Exception (at line ")
    public += r"\d+ of notebook cell \d+: `" + re.escape(raised.strip()) + ".*`\\)"
    assert case_lines and all(
        line.endswith(("nadaraya_watson_ard raised Exception", "failed too"))
        or re.fullmatch(r"  - \.\.\. and \d+ more", line)
        or re.search(public, line)
        for line in case_lines
    ), case_lines
    assert any(re.search(public, line) for line in case_lines)
    notebook = json.loads(
        (
            graded["course"]
            / "autograded"
            / "raises-with-secrets"
            / "ch1_pooling"
            / "ch1_pooling.ipynb"
        ).read_text()
    )
    shown = json.dumps([c.get("outputs", []) for c in notebook["cells"]]) + json.dumps(
        notebook["metadata"]
    )
    assert "raised Exception" in shown
    assert not re.search(r"Leak0x123456[^(]", shown)  # only as the source names it, never raised


def test_no_student_text_reaches_a_message(graded):
    """Type names and exception names the submission chose never appear in feedback."""
    for student in ("returns-secret-type", "not-a-function"):
        shown = json.dumps(
            [t.message for t in graded["results"][student].tasks] + graded["results"][student].notes
        )
        assert "SecretType0x77" not in shown and "a int" not in shown, shown
    message = next(
        t.message for t in graded["results"]["not-a-function"].tasks if t.grade_id == "test-nw"
    )
    assert "`nadaraya_watson_ard` is not a function" in message


def test_an_unreadable_timestamp_is_ignored_with_a_note_and_no_temporary_file_is_left(graded):
    result = graded["results"]["timestamp-not-a-date"]
    assert "timestamp.txt is not a date and was ignored" in result.notes
    assert list((graded["course"] / "autograded").rglob("*.tmp")) == []


def test_feedback_never_contains_a_hidden_input(graded):
    """Search every autograded notebook and every feedback page for every hidden input value
    of the run (the steal-hidden-cases submission read them all inside the sandbox)."""
    from autograder import cli
    from autograder.checking import checks

    assert cli.main(["--course", str(graded["course"]), "feedback", "ch1_pooling"]) == 0
    values = set()  # every student's own hidden inputs (grading.hidden_seed)
    for student in STUDENTS:
        seed = grading.hidden_seed(graded["outcome"].seed, student)
        for check in checks.checks_for("ch1_pooling"):
            for case in checks.hidden_cases(check.name, seed):
                for arg in case.args:
                    if isinstance(arg, np.ndarray) and arg.dtype.kind == "f":
                        values |= {f"{x:.5f}" for x in arg.ravel() if abs(x) > 0.01}
    files = sorted((graded["course"] / "autograded").rglob("*.ipynb")) + sorted(
        (graded["course"] / "feedback").rglob("*.html")
    )
    assert len(files) >= 2 * len(STUDENTS) - 8  # invalid notebooks may have no feedback page
    for path in files:
        # the grader's own wall time of the submission (trusted, 17 digits) once matched a
        # hidden value's 5 decimals by chance: it is not searched
        text = re.sub(r'"seconds": [0-9.e+-]+', '"seconds": null', path.read_text())
        # the page's own style sheet and scripts (MathJax, 2 MB, the same on every page) are
        # the grader's: a number there ("line-height:1.3333333") once matched a hidden value
        text = re.sub(r"<(style|script)\b.*?</\1>", "", text, flags=re.S)
        leaked = sorted(v for v in values if v in text)
        assert not leaked, (path, leaked[:5])


def test_a_hostile_submission_costs_at_most_its_budget(graded):
    """Sleeping in every cell (each retried after its timeout), claiming the cells are done
    and never reading the request pipe, looping in a cell or in every call, or forking without
    end: each ends within the submission's budget. The bound allows one sandbox restart on a
    loaded machine; without a budget these took 18 minutes, or forever. A sleeping cell ends
    at the idle limit, not its budget: every solution cell of the sleeper is tried, each
    ends idle, and its budget never runs out."""
    hangs = ("sleep-in-every-cell", "pipe-never-read", "infinite-loop-cell", "fork-bomb")
    for student in (*hangs, "infinite-loop-function"):
        result = graded["results"][student]
        assert result.seconds < LIMITS.submission_seconds + 90, (student, result.seconds)
    notebook = graded["cases"]["sleep-in-every-cell"][0]
    sleepers = sum(c.source.endswith(corpus.SLEEP) for c in notebook.cells)
    notes = graded["results"]["sleep-in-every-cell"].notes
    idle = [note for note in notes if "waited 10 s without using the CPU" in note]
    assert sleepers >= 4 and len(idle) == sleepers, notes
    assert not any("budget of" in note for note in notes), notes


def test_rerun_without_force_regrades_nothing(graded):
    again = grading.grade_assignment(graded["course"], "ch1_pooling", workers=2, limits=LIMITS)
    assert again.graded == []
    assert sorted(s for s, why in again.skipped) == sorted(STUDENTS)
    assert all(why == "already graded" for _s, why in again.skipped)


def test_no_sandboxed_process_outlives_the_batch(graded):
    assert sandbox.stray_processes() == []


def test_the_run_seed_is_recorded(graded):
    log = (graded["course"] / "autograded" / ".runs" / "ch1_pooling.jsonl").read_text().splitlines()
    assert json.loads(log[0])["seed"] == graded["outcome"].seed
    record = json.loads(
        (
            graded["course"] / "autograded" / "honest-right" / "ch1_pooling" / "ch1_pooling.ipynb"
        ).read_text()
    )["metadata"]["autograder"]
    assert record["seed"] == graded["outcome"].seed and record["complete"] is True


def test_grader_refuses_without_bwrap_unless_told(graded, monkeypatch, capsys):
    from autograder import cli

    monkeypatch.setattr(sandbox.host, "find_bwrap", lambda: None)
    code = cli.main(["--course", str(graded["course"]), "grade", "ch1_pooling", "--quiet"])
    assert code == 3
    assert "apt-get install bubblewrap" in capsys.readouterr().err


def test_without_root_and_without_user_namespaces_the_grader_refuses_and_says_how(
    graded, monkeypatch, capsys
):
    from autograder import cli

    monkeypatch.setattr(sandbox.host.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(sandbox.host, "_userns_works", lambda: False)
    code = cli.main(["--course", str(graded["course"]), "grade", "ch1_pooling", "--quiet"])
    assert code == 3
    err = capsys.readouterr().err
    assert "user namespace" in err and "--no-sandbox" in err and "sudo make grade" in err


def test_no_sandbox_mode_grades_honest_work_the_same(graded):
    out = grading.grade_assignment(
        graded["course"],
        "ch1_pooling",
        workers=1,
        students=["honest-right", "honest-partial"],
        force=True,
        sandboxed=False,
        limits=LIMITS,
    )
    assert {r.student: r.score for r in out.graded} == {
        "honest-right": 12.0,
        "honest-partial": 9.0,
    }
