"""Only pass/fail and the fixed vocabulary leave the hidden run, cell stops included (issue 44,
item 2).

Every process of the hidden run holds its hidden inputs, or follows one that did (a retry
after a crash): a cell the hidden run stopped used to be reported with its detail ("the
process ended early (exited with status 106)"), so its exit status, a signal, the time it
waited or a protocol violation's wording could be a value computed from a hidden input, and
reached the autograded notebook, the feedback, the gradebook's comments and the report. The
rule is written where a hidden attempt's end becomes what is recorded
(``grading.run._Phase.said``).

Two tests, one per way of proving it:

- The walk: a scripted sandbox ends the hidden run every way a run can end (each ``ended``,
  at a cell, at a task, after the last task; lost once, lost twice; a fork bomb; memory kills
  in a run that finished) and sets **every field** of the run's result
  (``protocol.RunResult``) from a secret. Graded with two secrets through the real trusted
  side (``run_program``, ``grade_submission``: the verdict, the cell outputs, the record),
  the run's record and everything the submission's result holds are byte-identical but for
  ``seconds`` (the wall time, which only the instructor's run log holds: the submission's
  own time is its own to choose whatever the rule, and no student page shows it).
- The attack: a real submission whose cell, in the hidden run only, ends its process with a
  value of its hidden input (an exit status of it, or a signal chosen by it), graded for
  two students whose values differ, as root and as `nobody`: the exact score and reasons,
  nothing recorded tells the two apart, and an honest student after keeps 12/12.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import as_nobody, corpus  # noqa: E402

from autograder import grading, sandbox  # noqa: E402
from autograder.checking import checks  # noqa: E402
from autograder.grading import submission  # noqa: E402
from autograder.grading.jobs import GradeJob  # noqa: E402
from autograder.grading.run import RunRecord  # noqa: E402
from autograder.sandbox.protocol import RunResult, Stop  # noqa: E402
from autograder.student import frames  # noqa: E402

A = "ch1_pooling"
COURSE = Path(grading.__file__).resolve().parents[1]
LIMITS = sandbox.Limits(cell_seconds=20, task_seconds=20, submission_seconds=90)

# ---- the walk: a scripted sandbox ---------------------------------------------------------

#: the fields of a run's result that say which run it was, in the vocabulary: how it ended,
#: where, and which tasks finished with which cases (judged into pass/fail)
VOCABULARY_FIELDS = {"ended", "where", "finished_tasks", "cases", "missing"}
#: the fields the scripted sandbox sets from the secret, in every attempt of the hidden run
SECRET_FIELDS = {"cells", "detail", "processes_at_kill", "received", "oom_kills"}

#: how each ending is reported with a secret in it, as the sandbox's own details would
DETAILS = {
    "crash": "the process ended early (exited with status {s})",
    "signal": "the process ended early (killed by signal {s})",
    "timeout": "ran longer than {s} s",
    "idle": "waited {s} s without using the CPU (a sleep, or a read or a lock that nothing "
    "will ever answer)",
    "memory": "went over the memory limit ({s} MiB)",
    "budget": "used up the submission's budget of {s} s",
    "output": "sent back more data than allowed ({s} bytes)",
    "protocol": "broke the result protocol (unexpected {s!r} event)",
    "lost": "before its start: unexpected {s} event",
    "grader": "the sandbox answered for run {s}",
    "fork bomb": "ran longer than {s} s",
    "done": "",
    "honest": "",
}

#: (name, the hidden run's first attempts as (kind, where)); ``where`` "cell": the fourth
#: cell the plan runs, "task": the task after one finished, None: after the last task (or,
#: lost, before the first event). Every later attempt finishes honestly.
SCENARIOS = [
    *(
        (f"{kind}-at-{place}", [(kind, place)])
        for kind in ("crash", "signal", "timeout", "idle", "memory", "budget", "output")
        + ("protocol", "fork bomb")
        for place in ("cell", "task")
    ),
    ("crash-after-the-last-task", [("crash", None)]),
    ("protocol-after-the-last-task", [("protocol", None)]),
    ("lost-once", [("lost", None)]),
    ("lost-twice", [("lost", None), ("lost", None)]),
    ("grader", [("grader", None)]),
    ("memory-kills-in-a-finished-run", [("done", None)]),
    ("cell-crash-then-task-timeout", [("crash", "cell"), ("idle", "task")]),
]

#: how each kind of ending is ``RunResult.ended``
ENDED = {"signal": "crash", "idle": "timeout", "fork bomb": "timeout", "honest": "done"}


def _case_event(task: int, case: int, values) -> tuple[dict, bytes]:
    header = {"ev": "case", "task": task, "case": case, "outcome": "value", "code": None}
    header.update(n=len(values), at_cell=-1, at_line=0, module=None)
    return header, frames.pack({f"r{i}": np.asarray(v) for i, v in enumerate(values)})


class Scripted:
    """A sandbox whose public run finishes every task right in one attempt, and whose hidden
    run ends its first attempts as ``script`` says, every field of each result set from
    ``secret``; its later attempts finish honestly (their cell outputs, the bytes they sent
    and how many processes were left carry the secret too)."""

    def __init__(self, script: list, secret: int):
        self.limits, self.script, self.secret = LIMITS, list(script), secret
        self.starts = 0

    def run(self, request, cases_frame, plan, deadline, accept, received_before=0):
        phase = accept.__self__  # the run (public or hidden) this attempt belongs to
        hidden, s = phase.cases.hidden, self.secret
        kind, where = self.script.pop(0) if hidden and self.script else ("honest", None)
        result = RunResult(ended=ENDED.get(kind, kind))
        result.detail = DETAILS[kind].format(s=s)
        cells = list(plan.cells)
        stop_cell = cells[min(3, len(cells) - 1)] if where == "cell" else None
        stop_task = plan.tasks[min(1, len(plan.tasks) - 1)][0] if where == "task" else None
        said = f"hidden cell output {s}" if hidden else "a public cell's output"
        ran = cells[: cells.index(stop_cell)] if stop_cell is not None else cells
        for cell in ran if kind != "lost" else []:  # lost: before the first event
            event = {"ev": "cell", "cell": cell, "error": None, "output": said}
            result.cells[cell] = dict(event, at_cell=-1, at_line=0, module=None)
        if kind != "lost" and stop_cell is None:
            for task, n_cases in plan.tasks:
                cases = phase.cases.cases[task]
                for case in range(n_cases if task != stop_task else 1):
                    # a task it stops sends one case first, its values the secret
                    values = cases[case].expected if task != stop_task else [np.full(3, s)]
                    outcome = accept(task, case, *_case_event(task, case, values))
                    result.cases[(task, case)] = outcome
                if task == stop_task:
                    break
                result.finished_tasks.append(task)
        result.where = (
            Stop("cell", stop_cell)
            if stop_cell is not None
            else Stop("task", stop_task)
            if where
            else None
        )
        if hidden:  # every other field, from the secret
            secret_fields = {
                "cells": result.cells,  # the outputs above
                "detail": result.detail,  # DETAILS
                "processes_at_kill": (24 if kind == "fork bomb" else 0) + s % 5,
                "received": 1000 + s,
                "oom_kills": 1 + s % 3 if kind in ("memory", "done") else 0,
            }
            assert set(secret_fields) == SECRET_FIELDS
            for name, value in secret_fields.items():
                setattr(result, name, value)
        if result.ended != "done":
            self.starts += 1  # killed: the next attempt starts a fresh sandbox
        return result


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    course = corpus.released_course(tmp_path_factory.mktemp("vocabulary") / "course")
    notebook = nbformat.writes(corpus.solved(course, A)).encode()
    return grading.prepare(course, A, 11, LIMITS), notebook


def _grade(work, script: list, secret: int, monkeypatch) -> tuple[RunRecord, object, Scripted]:
    """The run's record (``run_program``) and the submission's result (``grade_submission``,
    the whole trusted side: verdict, cell outputs) of one scripted hidden run."""
    work, notebook = work
    hidden = grading.hidden_case_set(work.spec, grading.REGISTRY, grading.hidden_seed(11, "s"))
    box = Scripted(script, secret)
    program = {"cells": ["x = 1"] * 8, "release_dir": None}
    record = grading.run_program(box, program, work.check_specs, work.public, hidden)
    box = Scripted(script, secret)
    pool = type("Pool", (), {"acquire": lambda _s, _k: box, "give_back": lambda _s, _b: None})
    monkeypatch.setattr(submission, "POOL", pool())
    job = GradeJob("s", notebook, "digest", hidden=hidden)
    return record, submission.grade_submission(job, work), box


def _leaving(result) -> bytes:
    """Everything the submission's result holds but its wall time."""
    return pickle.dumps(
        {f.name: getattr(result, f.name) for f in dataclasses.fields(result) if f.name != "seconds"}
    )


def test_the_walk_covers_every_field_of_a_runs_result():
    """A field added to ``RunResult`` fails here until the scripted sandbox gives it a value
    from the secret (``SECRET_FIELDS``), or it is shown to be vocabulary."""
    assert {f.name for f in dataclasses.fields(RunResult)} == VOCABULARY_FIELDS | SECRET_FIELDS
    assert not VOCABULARY_FIELDS & SECRET_FIELDS
    assert {ENDED.get(kind, kind) for _n, script in SCENARIOS for kind, _w in script} == {
        "done",
        "timeout",
        "budget",
        "crash",
        "memory",
        "output",
        "protocol",
        "lost",
        "grader",
    }  # every way a run ends (``RunResult.ended``)


@pytest.mark.parametrize("script", [s for _n, s in SCENARIOS], ids=[n for n, _s in SCENARIOS])
def test_what_leaves_the_hidden_run_is_the_same_whatever_the_run_reported(
    work, script, monkeypatch
):
    seen = []
    for secret in (106, 107):
        record, result, _box = _grade(work, script, secret, monkeypatch)
        text = json.dumps(dataclasses.asdict(result), default=repr)
        for kind in DETAILS:  # no detail of the sandbox's, no hidden cell's output
            if DETAILS[kind]:
                assert DETAILS[kind].format(s=secret) not in text, kind
        assert f"hidden cell output {secret}" not in text
        assert str(secret) not in json.dumps([result.reasons, result.notes, result.cell_outputs])
        seen.append((pickle.dumps(record), _leaving(result), record, result))
    (record_a, leaving_a, record, result), (record_b, leaving_b, *_rest) = seen
    assert record_a == record_b
    assert leaving_a == leaving_b
    # and what each end reads is a fixed sentence of the catalog (``messages.STOPPED``)
    hidden_notes = [n for n in result.notes if "hidden cases" in n]
    for note in hidden_notes:
        assert note.split("in the run on the hidden cases: ", 1)[1] in {
            "it ran out of time",
            "its process ended early",
            "it went over the memory limit",
            "it sent back more data than allowed",
            "it broke the result protocol",
            "it started too many processes",
        }, note
    if script[0][0] == "lost" and len(script) == 2:
        assert not result.complete and result.reasons == ["grader error"]
    elif script[0][0] == "grader":
        assert not result.complete
    else:
        assert result.complete


def test_a_hidden_cell_stop_is_recorded_with_its_reason_and_one_fixed_sentence(work, monkeypatch):
    """What the autograded notebook shows of a cell the hidden run stopped."""
    record, result, _box = _grade(work, [("crash", "cell")], 106, monkeypatch)
    stopped = {c: n for c, n in record.failed_cells.items()}
    assert stopped == {3: ("crash", "in the run on the hidden cases: its process ended early")}
    shown = [o for outputs in result.cell_outputs.values() for o in outputs]
    errors = [o["evalue"] for o in shown if o["output_type"] == "error"]
    assert len(errors) == 1
    assert errors[0].startswith("stopped by the grader: notebook cell ")
    assert errors[0].endswith(": in the run on the hidden cases: its process ended early")
    assert result.reasons == ["crash"]


# ---- the attack: a cell of the hidden run ends its process with a value of its hidden input

SEED = 5  # the batch seed: each student's hidden inputs follow from it and the student id

#: a cell that knows when it runs in the hidden run: its first attempt is the second run of
#: the zygote that ran the public run's last (a zygote is started again after any stopped
#: cell, and ``CRASH_ONCE`` stops one in the public run's first attempt); the zygote's frame
#: holds the previous run's exit status from then on. It then ends its process with the
#: value: the test plays the carrier that brings a value of the student's hidden input into
#: the hidden run's cells (grader v5's red team used the kernel's counter of pipe inodes,
#: issue 44 item 3), writing the value the carrier would bring into the cell
RAN_BEFORE = """
import os, sys


def _second_run_of_this_zygote():
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == "zygote":
            return "status" in frame.f_locals
        frame = frame.f_back
    return False


if _second_run_of_this_zygote():  # the hidden run's first attempt
"""
CRASH_ONCE = "import os\nos._exit(1)  # the public run's first attempt: then skipped"
ENDINGS = {
    "exit": "    os._exit({status})",
    "signal": (
        "    import ctypes, mmap\n"
        "    if {bus}:  # SIGBUS: a mapped page past the end of its file\n"
        "        with open('/tmp/bus', 'w+b') as fh:\n"
        "            fh.truncate(4096); m = mmap.mmap(fh.fileno(), 4096); fh.truncate(0); m[0]\n"
        "    ctypes.string_at(0)  # SIGSEGV\n"
    ),
}
ATTACKERS = {"a-exit": "exit", "b-exit": "exit", "c-signal": "signal", "d-signal": "signal"}


def _value(student: str) -> int:
    """What the carrier brings: a number from the student's first hidden input."""
    seed = grading.hidden_seed(SEED, student)
    first = checks.hidden_cases("nadaraya_watson_ard", seed)[0].args[0]
    return int(abs(float(np.ravel(first)[0])) * 1000)


def _carried(student: str) -> dict:
    """How the value leaves the process: {"status": an exit status} or {"signal": number}."""
    code = _value(student)
    if ATTACKERS[student] == "exit":
        return {"status": 100 + code % 100}
    return {"signal": (11, 7)[code % 2]}  # SIGSEGV, SIGBUS


def _attack(course: Path, student: str):
    carried = _carried(student)
    ending = ENDINGS[ATTACKERS[student]].format(
        status=carried.get("status"), bus=carried.get("signal") == 7
    )
    notebook = corpus.add_cell_after(corpus.solved(course, A), "nw", RAN_BEFORE + ending)
    return corpus.add_cell_after(notebook, "nw", CRASH_ONCE)


def _cases(course: Path) -> dict:
    """student -> (notebook, score, reasons): each attacker's cells and functions are honest
    but for its two cells (each skipped once stopped), so 12/12 and "crash"."""
    cases = {s: (_attack(course, s), 12, ["crash"]) for s in ATTACKERS}
    cases["e-victim"] = (corpus.solved(course, A), 12, [])
    return cases


def _graders_words(course: Path, student: str) -> dict:
    """What the grader wrote about one submission: every cell's outputs in the autograded
    notebook and its record there (but the student's id and the notebook's hash)."""
    notebook = json.loads((course / "autograded" / student / A / f"{A}.ipynb").read_text())
    record = dict(notebook["metadata"]["autograder"])
    for own in ("student", "sha256"):
        record.pop(own)
    return {"outputs": [c.get("outputs", []) for c in notebook["cells"]], "record": record}


def _assert_nothing_carried(course: Path, report: str) -> None:
    from autograder import cli

    assert cli.main(["--course", str(course), "feedback", A]) == 0
    words = {s: _graders_words(course, s) for s in ATTACKERS}
    # the two students of each ending carried different values and read the same
    assert _carried("a-exit") != _carried("b-exit") and words["a-exit"] == words["b-exit"]
    assert _carried("c-signal") != _carried("d-signal")
    assert words["c-signal"] == words["d-signal"]
    for student in ATTACKERS:
        pages = (course / "feedback" / student / A).glob("*.html")
        text = json.dumps(words[student]) + report + "".join(p.read_text() for p in pages)
        for name, value in _carried(student).items():
            assert f"{name} {value}" not in text, (student, name, value)
        # the hidden run stopped the cell, and said so with its one fixed sentence
        stopped = [
            o["evalue"]
            for outputs in words[student]["outputs"]
            for o in outputs
            if o["output_type"] == "error"
        ]
        assert len(stopped) == 2, stopped
        assert stopped[0].endswith(": the process ended early (exited with status 1)")
        assert stopped[1].endswith(": in the run on the hidden cases: its process ended early")


@pytest.fixture(scope="module")
def course(tmp_path_factory, bubblewrap):
    return corpus.released_course(tmp_path_factory.mktemp("carried") / "course")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_value_a_hidden_cell_ends_with_never_leaves_as_root(course):
    from autograder import cli

    cases = _cases(course)
    for student, (notebook, _score, _reasons) in cases.items():
        corpus.write_submission(course, A, student, notebook)
    outcome = grading.grade_assignment(course, A, workers=1, limits=LIMITS, seed=SEED)
    got = {r.student: (r.score, sorted(r.reasons)) for r in outcome.graded}
    assert got == {s: (float(c[1]), sorted(c[2])) for s, c in cases.items()}
    report = course / "report.html"
    assert cli.main(["--course", str(course), "report", A, "--out", str(report)]) == 0
    _assert_nothing_carried(course, report.read_text())


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_value_a_hidden_cell_ends_with_never_leaves_rootless(course, public_tmp):
    _stderr, mine = as_nobody.grade(
        course, A, public_tmp, _cases(course), workers=1, options=["--seed", str(SEED)]
    )
    _assert_nothing_carried(mine, "")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_value_a_hidden_cell_ends_with_never_leaves_on_a_dask_worker(course, public_tmp):
    """A Dask worker started by ``nobody`` (rootless sandboxes), one submission at a time:
    the same scores, and the records and pages of each pair of attackers the same."""
    as_nobody.grade_on_a_dask_worker(course, A, public_tmp, _cases(course), seed=SEED)
    _assert_nothing_carried(course, "")


public_tmp = as_nobody.public_tmp
