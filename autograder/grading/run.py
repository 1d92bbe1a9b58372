"""Run with retries: drive the sandbox within the submission's wall-clock budget.

The budget is kept here, on the trusted side. A cell or task that times out or crashes is
skipped and the rest rerun while the budget lasts; a protocol violation or an output flood
ends the submission; a sandbox that breaks before the submission's first event is the
grader's failure ("lost"): the attempt is rerun in full in a fresh sandbox."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field

from autograder import frames, wire
from autograder.grading.results import GRADER_ERROR
from autograder.protocol import Plan
from autograder.sandbox import Limits, Sandbox


@dataclass
class RunRecord:
    cells: dict = field(default_factory=dict)  # program cell -> cell header
    outcomes: dict = field(default_factory=dict)  # (task, case) -> contract outcome
    missing: dict = field(default_factory=dict)  # task -> "undefined" | "not_callable"
    failed_tasks: dict = field(default_factory=dict)  # task -> (reason, note)
    failed_cells: dict = field(default_factory=dict)  # program cell -> (reason, note)
    grader_error: str = ""
    starts: int = 0
    attempts: int = 0
    memory_kills: int = 0  # processes the kernel killed for memory (cgroup), all attempts
    lost: int = 0  # attempts the sandbox broke before the submission's first event


#: a sandbox that breaks before a submission's first event is replaced and the attempt rerun
#: in full this many times; then it is a grader error (not recorded: a rerun retries it)
LOST_RERUNS = 1


#: how an attempt ended -> the reason a student and the instructor see
END_REASONS = {
    "timeout": "timeout",
    "budget": "timeout",
    "crash": "crash",
    "memory": "memory",
    "output": "output too large",
    "protocol": "protocol violation",
    "lost": GRADER_ERROR,
    "grader": GRADER_ERROR,
}


def _end_reason(run, limits: Limits) -> str:
    if run.ended in ("timeout", "budget") and run.processes_at_kill >= max(
        4, limits.processes // 2
    ):
        return "fork bomb"
    return END_REASONS[run.ended]


def run_program(
    sandbox: Sandbox, request: dict, tasks: list, blob: bytes, all_cases: list, check_specs: dict
) -> RunRecord:
    """Run the program and every task, retrying around failed cells and tasks while the
    submission's budget lasts. Ends early on anything that is not a timeout or a crash."""
    limits = sandbox.limits
    record = RunRecord()
    deadline = time.monotonic() + limits.submission_seconds
    received = 0
    specs = [check_specs[task["check"]] for task in tasks]

    def accept(task: int, case: int, header: dict, data: bytes) -> dict:
        expected = all_cases[task][case].expected
        return wire.read_outcome(
            header, data, expected, specs[task]["comparator"].get("kind", "allclose")
        )

    while True:
        finished = set(record.missing) | {t for t, _c in record.outcomes}
        skip_tasks = sorted(finished | set(record.failed_tasks))
        plan = Plan(
            [i for i in range(len(request["cells"])) if i not in record.failed_cells],
            [(t, len(all_cases[t])) for t in range(len(tasks)) if t not in skip_tasks],
        )
        attempt = dict(
            request,
            skip_cells=sorted(record.failed_cells),
            limits=limits.for_child(),
            workdir=f"/tmp/{secrets.token_hex(16)}",
        )  # unpredictable, made fresh
        cases = frames.encode_frame({"tasks": tasks, "skip_tasks": skip_tasks}, blob)
        starts, attempt_started = sandbox.starts, time.monotonic()
        run = sandbox.run(attempt, cases, plan, deadline, accept, received)
        record.starts += sandbox.starts - starts
        record.attempts += 1
        if run.ended == "lost":  # no code of this submission ran: the grader's failure
            record.lost += 1
            if record.lost > LOST_RERUNS:
                record.grader_error = (
                    f"the sandbox broke before the submission started, {record.lost} times "
                    f"({run.detail})"
                )
                return record
            deadline += time.monotonic() - attempt_started  # that time was not the submission's
            continue  # the same attempt again, in a fresh sandbox (the lost one was killed)
        record.memory_kills += run.oom_kills
        received += run.received
        record.cells.update(run.cells)
        for task in run.finished_tasks:  # a task counts only once all its events arrived
            if task in run.missing:
                record.missing[task] = run.missing[task]
            record.outcomes.update({k: v for k, v in run.cases.items() if k[0] == task})
        if run.ended == "done":
            return record
        reason = _end_reason(run, limits)
        if run.ended == "grader":
            record.grader_error = run.detail
            return record
        retry = (
            run.ended in ("timeout", "crash", "memory")
            and run.where is not None
            and time.monotonic() < deadline
        )
        if retry and run.where[0] == "cell":
            record.failed_cells[run.where[1]] = (reason, run.detail)
            continue
        if retry and run.where[0] == "task":
            record.failed_tasks[run.where[1]] = (reason, run.detail)
            continue
        done = {t for t, _c in record.outcomes} | set(record.missing)
        for task in range(len(tasks)):  # everything not judged yet gets this end's reason
            if task not in done:
                record.failed_tasks.setdefault(task, (reason, run.detail))
        return record
