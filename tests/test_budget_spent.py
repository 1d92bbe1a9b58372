"""A submission that spends its own budget is never "lost" (issue 44, item 7).

A run that ends before its ``setup`` event used to end "lost" (the grader's failure, rerun in
a fresh sandbox) even when the submission's budget was spent: a submission whose cells each
sleep until the idle check leaves a fraction of a second, the next attempt's set-up on a
loaded machine takes longer than that, and the attempt was lost, its rerun lost the same way,
and the grader exited 4 without recording anything, on every ``--force`` rerun too. Now a run
that ends while the budget is spent ends "budget" whatever step it was in (``protocol.Run.
expired``, ``attempt.Attempt.end``): the submission's timeout, recorded, exit 0. Only a
set-up the sandbox failed to finish while budget was left is "lost".

No test here asserts a time: each asserts how a run ended and what was recorded.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import types
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import as_nobody, corpus  # noqa: E402
from test_grader_units import run_cells  # noqa: E402

from autograder import cli, grading, sandbox  # noqa: E402
from autograder.checking import checks  # noqa: E402
from autograder.checking.assignment_spec import load_assignment  # noqa: E402
from autograder.grading import check_data  # noqa: E402
from autograder.sandbox import protocol, worker  # noqa: E402
from autograder.sandbox.attempt import Attempt  # noqa: E402
from autograder.sandbox.protocol import Plan, Run  # noqa: E402

pytestmark = [pytest.mark.timeout(900)]

A = "ch1_pooling"
COURSE = Path(grading.__file__).resolve().parents[1]


def _run_in(phase: str, deadline_in: float, cell_seconds: float = 30.0) -> Run:
    """A run of two cells and one task of two cases, driven by its events into ``phase``."""
    run = Run(
        Plan([0, 1], [(0, 2)]),
        b"cases",
        lambda task, case, header, blob: ("outcome", task, case),
        cell_seconds=cell_seconds,
        task_seconds=cell_seconds,
        deadline=time.monotonic() + deadline_in,
    )
    events = {
        "setup": [],
        "cells": [{"ev": "setup"}],
        "tasks": [{"ev": "setup"}, *({"ev": "cell", "cell": i} for i in (0, 1))]
        + [{"ev": "cells_done"}],
        "finished": [{"ev": "setup"}, *({"ev": "cell", "cell": i} for i in (0, 1))]
        + [{"ev": "cells_done"}, {"ev": "task_missing", "task": 0, "code": "undefined"}]
        + [{"ev": "task_end", "task": 0}, {"ev": "done"}],
    }[phase]
    for event in events:
        run.on_event(event, b"")
    assert run.phase == phase
    return run


@pytest.mark.parametrize("phase", ["setup", "cells", "tasks"])
def test_a_run_whose_budget_is_spent_ends_budget_in_every_step(phase):
    run = _run_in(phase, deadline_in=5.0)
    assert run.expired(run.deadline - 0.01) is None
    assert run.expired(run.deadline) == ("budget", "")
    assert run.expired(run.deadline + 3600) == ("budget", "")
    # the step's own limit passed at the same moment: still the budget, the submission's
    both = _run_in(phase, deadline_in=1.0, cell_seconds=1.0)
    assert both.expired(both.deadline + 1) == ("budget", "")


def test_only_a_set_up_unfinished_with_budget_left_is_lost_and_a_finished_run_sweeps():
    """The set-up's own limit (a cell's) passes while budget is left: the grader's failure."""
    run = _run_in("setup", deadline_in=3600.0, cell_seconds=1.0)
    assert run.expired(run.started + 1.0) == ("lost", "the sandbox did not start the run")
    # after ``done`` the zygote sweeps: the budget no longer counts, only the sweep's limit
    done = _run_in("finished", deadline_in=1.0)
    assert done.expired(done.deadline + 1) is None
    assert done.expired(done.started + protocol.SWEEP_SECONDS)[0] == "timeout"


@pytest.mark.parametrize("spent", [True, False], ids=["budget-spent", "budget-left"])
def test_a_sandbox_that_breaks_before_setup_is_lost_only_while_budget_is_left(spent):
    """Every way an attempt ends "lost" goes through ``Attempt.end``: the zygote gone, a
    stream broken, no run taken, a message for another run."""
    run = _run_in("setup", deadline_in=-1.0 if spent else 3600.0)
    attempt = Attempt(
        run,
        types.SimpleNamespace(received=0),
        None,
        -1,
        bytearray(),
        "nonce",
        sandbox.Limits(submission_seconds=47),
        os.getpid(),
        None,
    )
    result = attempt.end("lost", "the sandbox died before the run")
    assert attempt.must_kill and result.where is None
    if spent:
        assert (result.ended, result.detail) == (
            "budget",
            "used up the submission's budget of 47 s",
        )
    else:
        assert (result.ended, result.detail) == ("lost", "the sandbox died before the run")


def test_a_stopped_zygote_with_the_budget_running_out_first_is_the_submissions_timeout(
    bubblewrap,
):
    """A zygote that never starts the run (stopped): with 1 s of budget and 3 s for the step,
    the budget runs out first, so the attempt is the submission's timeout, and run_program
    reruns nothing; with the step's limit first it is lost (tests/test_grader_units.py)."""
    limits = sandbox.Limits(cell_seconds=3, task_seconds=3, submission_seconds=1)
    box = sandbox.Sandbox(None, limits)
    try:
        assert run_cells(box, ["x = 1"]).ended == "done"
        os.kill(max(sandbox.descendants(box.process.pid)), signal.SIGSTOP)
        spent = run_cells(box, ["x = 1"], seconds=1.0)
        assert (spent.ended, spent.where, spent.cells) == ("budget", None, {})
        assert spent.detail == "used up the submission's budget of 1 s"
        box.start()
        os.kill(max(sandbox.descendants(box.process.pid)), signal.SIGSTOP)
        work = _ch1_work(seed=3)
        record = grading.run_program(box, *work)
        assert (record.lost, record.attempts, record.grader_error) == (0, 1, "")
        assert record.failed_tasks == {
            t: ("timeout", "used up the submission's budget of 1 s") for t in range(4)
        }
    finally:
        box.close()


def _ch1_work(seed: int):
    """(request, check specs, public cases, hidden cases) of ch1 for a program that sleeps."""
    spec = load_assignment(COURSE, A)
    tasks = check_data.tasks_of(spec)
    specs = {task.check: checks.spec(task.check) for task in tasks}
    request = {"cells": ["import numpy as np", corpus.SLEEP], "release_dir": None}
    return (
        request,
        specs,
        check_data.public_case_set(spec, checks),
        check_data.hidden_case_set(spec, checks, seed),
    )


def test_the_last_attempt_started_with_005_s_left_on_a_loaded_machine_is_a_timeout(bubblewrap):
    """The attempt starts with 0.05 s of the submission's budget, on a machine with more
    spinning processes than CPUs, and, as after any stopped cell, its sandbox must be
    started again first (an interpreter importing NumPy under bubblewrap): the budget is
    spent before the run's set-up is done, and the run ends as the submission's timeout,
    every task with it; nothing is lost, nothing rerun. Grader v5 lost it, lost the rerun
    the same way and gave up (``grader_error``)."""
    limits = sandbox.Limits(cell_seconds=20, task_seconds=20, submission_seconds=0.05)
    box = sandbox.Sandbox(None, limits)
    try:
        with corpus.busy_cpus(4):
            record = grading.run_program(box, *_ch1_work(seed=4))
        assert box.starts == 1
    finally:
        box.close()
    assert (record.lost, record.attempts, record.grader_error) == (0, 1, "")
    assert record.failed_tasks == {
        t: ("timeout", "used up the submission's budget of 0.05 s") for t in range(4)
    }
    assert record.outcomes == {} and record.missing == {}


class _CrashesPastTheBudget:
    """A sandbox whose one attempt ends with its cell's crash read after the budget's end (the
    budget's own kill and the crash of a cell arrive together on a loaded machine)."""

    limits = sandbox.Limits(cell_seconds=20, task_seconds=20, submission_seconds=0.05)
    starts = 0

    def __init__(self):
        self.attempts = 0

    def run(self, request, cases_frame, plan, deadline, accept, received_before=0):
        self.attempts += 1
        while time.monotonic() < deadline:
            time.sleep(deadline - time.monotonic())
        result = protocol.RunResult(ended="crash", detail="the process ended early (status 1)")
        result.where = protocol.Stop("cell", plan.cells[1])
        return result


def test_a_crash_read_after_the_budget_ran_out_leaves_the_rest_a_timeout():
    """The cell that crashed keeps "crash"; every task not judged yet is the submission's
    timeout (the budget is spent, so no retry is owed), not the crash's reason, in the public
    run and the hidden one, however the two events were ordered."""
    box = _CrashesPastTheBudget()
    record = grading.run_program(box, *_ch1_work(seed=4))
    assert box.attempts == 1 and record.grader_error == ""
    assert record.failed_cells == {1: ("crash", "the process ended early (status 1)")}
    assert record.failed_tasks == {
        t: ("timeout", "used up the submission's budget of 0.05 s") for t in range(4)
    }


def _squeezed(monkeypatch, marker: str, left: float = 0.05) -> list:
    """Every retry of a submission whose cells hold ``marker`` (an attempt after a stopped
    cell) starts with ``left`` seconds of its budget: as a loaded machine leaves it after
    cells that each slept until the idle check. Returns the budgets the retries got."""
    run, given = worker.Sandbox.run, []

    def squeezed(self, request, cases, plan, deadline, accept_case, received_before=0):
        if request.get("skip_cells") and any(marker in cell for cell in request["cells"]):
            deadline = min(deadline, time.monotonic() + left)
            given.append(deadline)
        return run(self, request, cases, plan, deadline, accept_case, received_before)

    monkeypatch.setattr(worker.Sandbox, "run", squeezed)
    return given


def _recorded(course: Path, student: str) -> tuple[float, list]:
    notebook = course / "autograded" / student / A / f"{A}.ipynb"
    record = json.loads(notebook.read_text())["metadata"]["autograder"]
    return record["score"], sorted(record["reasons"])


def test_a_submission_that_spends_its_budget_is_recorded_as_a_timeout_and_stays_one(
    tmp_path, bubblewrap, monkeypatch
):
    """Its first solution cell sleeps until the idle check; the retry starts with 0.05 s of
    its budget on a loaded machine, and the sandbox restarts first (the cell's kill ended
    the old one), so the budget is spent before the run's set-up is done. Grader v5 called
    that attempt lost, lost its rerun the same way and exited 4, on every ``--force`` rerun.
    Now: 0 of 12, "timeout", exit 0, the same on a ``--force`` rerun; the honest student
    graded after it on the same worker keeps 12/12."""
    course = corpus.released_course(tmp_path / "course")
    spender = corpus.sleep_in_every_solution_cell(corpus.solved(course, A))
    corpus.write_submission(course, A, "a-spender", spender)
    corpus.write_submission(course, A, "b-honest", corpus.solved(course, A))
    given = _squeezed(monkeypatch, corpus.SLEEP)
    command = ["--course", str(course), "grade", A, "--workers", "1", "--quiet"]
    for rerun in ([], ["--force"]):
        before = len(given)
        with corpus.busy_cpus(4):
            assert cli.main(command + rerun) == 0
        assert len(given) == before + 1  # one retry, squeezed; no rerun of it
        assert corpus.gradebook_scores(course) == {"a-spender": 0.0, "b-honest": 12.0}
        assert _recorded(course, "a-spender") == (0.0, ["timeout"])
        assert _recorded(course, "b-honest") == (12.0, [])


def test_rootless_a_submission_that_spends_its_budget_in_restarts_is_a_timeout(
    tmp_path, bubblewrap, public_tmp
):
    """As `nobody`: 150 cells that each end the process, so every attempt starts a fresh
    sandbox and ends at the next of them until the 20 s budget is spent; the last retry
    starts with less than a sandbox's start-up left (grader v5 lost it most of the time and
    exited 4). Every task is the submission's timeout, the cells it ended crashes, exit 0;
    the honest student after keeps 12/12."""
    course = corpus.released_course(tmp_path / "course")
    crasher = corpus.crash_in_many_cells(corpus.solved(course, A), 150)
    cases = {
        "a-crasher": (crasher, 0, ["crash", "timeout"]),
        "b-honest": (corpus.solved(course, A), 12, []),
    }
    with corpus.busy_cpus(2):
        _stderr, mine = as_nobody.grade(
            course, A, public_tmp, cases, workers=1, options=["--budget", "20"]
        )
    assert _recorded(mine, "a-crasher") == (0.0, ["crash", "timeout"])


@pytest.mark.slow
def test_on_a_dask_worker_a_submission_that_spends_its_budget_in_restarts_is_a_timeout(
    tmp_path, bubblewrap, public_tmp
):
    """The same 150 crashing cells on a Dask worker started by `nobody` (rootless sandboxes,
    one slot), on a 20 s budget: "crash" for the cells, "timeout" for the tasks, recorded;
    the honest student after keeps 12/12 (``as_nobody.grade_on_a_dask_worker`` asserts it)."""
    course = corpus.released_course(tmp_path / "course")
    crasher = corpus.crash_in_many_cells(corpus.solved(course, A), 150)
    cases = {
        "a-crasher": (crasher, 0, ["crash", "timeout"]),
        "b-honest": (corpus.solved(course, A), 12, []),
    }
    as_nobody.grade_on_a_dask_worker(
        course, A, public_tmp, cases, limits={"submission_seconds": 20.0}
    )
    assert _recorded(course, "a-crasher") == (0.0, ["crash", "timeout"])


public_tmp = as_nobody.public_tmp
