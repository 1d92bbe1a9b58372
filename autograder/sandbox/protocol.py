"""The event protocol of one run, in one place: which event may come next, and each step's budget.

A run is one attempt at a submission in a sandbox. The child the zygote forks for it sends
frames (``autograder.student.frames``, parsed by ``wire.FrameReader`` against ``wire.EVENTS``) on
the run's own event pipe, in this order only:

    {"ev": "setup"}                                     the working directory is ready; no
                                                        student code has run before it
    {"ev": "cell", "cell": i, "error": code|None, "output": text}   one per planned cell
    {"ev": "cells_done"}                                then, and only then, the cases are sent
    per planned task, either its cases in order
        {"ev": "case", "task": t, "case": c, "outcome": ..., "code": ..., "n": k} + .npz
    or {"ev": "task_missing", "task": t, "code": "undefined"|"not_callable"}, then
        {"ev": "task_end", "task": t}
    {"ev": "done"}

The zygote answers on its control socket (``wire.CONTROL``) with ``{"ev": "exit", "run":
nonce, ...}`` once the child and everything it started are gone; the nonce is the one the
trusted side sent with this run, so no other message can end it.

``Run`` is fed events and the trusted clock by ``Sandbox.run`` (which owns the descriptors) and
decides everything else: which step a timeout charges, when the cases go out, and how a run
ended. A run that ends before its ``setup`` event while the submission's budget is left ends
``lost``: no student code had run, so it is the grader's failure, never the submission's
(``grading.run_program`` reruns it in a fresh sandbox). A run that ends while the budget is
spent ends ``budget``, whatever step it was in: the submission's own timeout.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import NamedTuple

from autograder.sandbox import wire


@dataclass
class Plan:
    """What one attempt runs, in order: every event is checked against it."""

    cells: list  # program cell indices to run
    tasks: list  # (task index, number of cases) to run


class Stop(NamedTuple):
    """Where a run that did not end "done" stopped: a program cell or a task, by index."""

    step: str  # "cell" | "task"
    index: int


class Ending(NamedTuple):
    """How a step or the submission's budget ran out (``Run.expired``): one of
    ``RunResult.ended``'s words, and the detail a public run's note may say."""

    how: str
    detail: str


@dataclass
class RunResult:
    """What one attempt produced (every event already validated) and how it ended."""

    cells: dict = field(default_factory=dict)  # program cell -> cell header
    cases: dict = field(default_factory=dict)  # (task, case) -> contract.Outcome
    missing: dict = field(default_factory=dict)  # task -> "undefined" | "not_callable"
    finished_tasks: list = field(default_factory=list)
    #: done | timeout | budget | crash | memory | output | protocol | lost | grader
    ended: str = "done"
    where: Stop | None = None  # the cell or task, when it did not end "done"
    detail: str = ""
    processes_at_kill: int = 0
    received: int = 0
    oom_kills: int = 0  # processes the kernel killed for memory during this attempt


#: after ``done``, the zygote has this long to kill what is left and report the exit
SWEEP_SECONDS = 10.0

#: a cell or task during which the whole sandbox used no CPU time and sent no event for this
#: long is waiting for something nothing will ever send (a sleep, a read of a pipe no one
#: writes, a lock it holds itself: the sandbox has no network, no terminal and no other
#: party): it ends as a timeout then, not at its wall-clock budget. A running process, even
#: one starved by a loaded machine, always gets some CPU time within this long.
IDLE_SECONDS = 10.0


class Run:
    """One attempt's state machine. ``on_event`` raises ``wire.ProtocolViolation`` for any
    event out of order; it returns the cases frame exactly once, when the cells are done."""

    def __init__(
        self,
        plan: Plan,
        cases: bytes,
        accept_case,
        *,
        cell_seconds: float,
        task_seconds: float,
        deadline: float,
        now: float | None = None,
    ):
        self.plan, self.cases, self.accept_case = plan, cases, accept_case
        self.cell_seconds, self.task_seconds, self.deadline = cell_seconds, task_seconds, deadline
        self.result = RunResult()
        self.phase = "setup"  # setup -> cells -> tasks -> finished
        self.pos = self.task = self.case = 0
        self.started = time.monotonic() if now is None else now
        # the sandbox's CPU time as last sampled (None: not sampled, no idle check) and when
        # the step last showed activity (its start, an event, or a change of that CPU time)
        self.cpu_time, self.active = None, self.started

    # -- where the run is -------------------------------------------------------------------

    @property
    def started_submission(self) -> bool:
        """True once the ``setup`` event came: from then on, the submission's code may run."""
        return self.phase != "setup"

    def where(self) -> Stop | None:
        """The step a failure now is charged to: a cell, a task, or nothing (before ``setup``,
        or after the last task)."""
        if self.phase == "cells" and self.pos < len(self.plan.cells):
            return Stop("cell", self.plan.cells[self.pos])
        if self.phase == "tasks" and self.task < len(self.plan.tasks):
            return Stop("task", self.plan.tasks[self.task][0])
        return None

    def _watching_idle(self) -> bool:
        return self.cpu_time is not None and self.phase in ("cells", "tasks")

    def step_deadline(self) -> float:
        """When the current step runs out (trusted clock): its wall-clock budget, or earlier
        if the sandbox stays idle (``IDLE_SECONDS``); no event ever extends the budget."""
        if self.phase == "finished":  # the child is done; the zygote sweeps
            return self.started + SWEEP_SECONDS
        seconds = self.task_seconds if self.phase == "tasks" else self.cell_seconds
        end = min(self.deadline, self.started + seconds)
        return min(end, self.active + IDLE_SECONDS) if self._watching_idle() else end

    def on_cpu_time(self, now: float, cpu_time) -> None:
        """The sandbox's total CPU time at ``now`` (any comparable number; it only has to
        change when anything in the sandbox runs)."""
        if cpu_time != self.cpu_time:
            if self.cpu_time is not None:
                self.active = max(self.active, now)
            self.cpu_time = cpu_time

    def expired(self, now: float) -> Ending | None:
        """How the run ends if the current step or the submission's budget ran out at ``now``.

        The submission's budget comes first, whatever the step: a run still short of its
        ``setup`` event when the budget is spent ends "budget", the submission's timeout, not
        "lost". Time the submission spent is its own (a submission whose cells each sleep
        until the idle check leaves a fraction of a second, and on a loaded machine the next
        attempt's set-up takes longer than that); only a set-up the sandbox failed to finish
        while budget was left is the grader's failure."""
        if now < self.step_deadline():
            return None
        if now >= self.deadline and self.phase != "finished":
            return Ending("budget", "")
        if self.phase == "setup":
            return Ending("lost", "the sandbox did not start the run")
        seconds = self.task_seconds if self.phase == "tasks" else self.cell_seconds
        if now < self.started + seconds:  # so the idle check ended it
            return Ending(
                "timeout",
                f"waited {IDLE_SECONDS:g} s without using the CPU (a sleep, or a read or a lock "
                "that nothing will ever answer)",
            )
        return Ending("timeout", f"ran longer than {seconds:g} s")

    def _advance(self, phase: str | None = None) -> None:
        self.started = self.active = time.monotonic()
        if phase:
            self.phase = phase

    # -- events -----------------------------------------------------------------------------

    def on_event(self, header: dict, blob: bytes) -> bytes | None:
        event, result = header["ev"], self.result
        self.active = time.monotonic()  # the sandbox is doing something
        if self.phase == "setup" and event == "setup":
            self._advance("cells")
            return None
        if self.phase == "cells":
            cells = self.plan.cells
            if event == "cell" and self.pos < len(cells) and header["cell"] == cells[self.pos]:
                result.cells[header["cell"]] = header
                self.pos += 1
                self._advance()
                return None
            if event == "cells_done" and self.pos == len(cells):
                self._advance("tasks")
                return self.cases
        if self.phase == "tasks":
            if self.task == len(self.plan.tasks):
                if event == "done":
                    self._advance("finished")
                    return None
                raise wire.ProtocolViolation("event after the last task")
            task, n_cases = self.plan.tasks[self.task]
            missing = task in result.missing
            if (
                event == "case"
                and header["task"] == task
                and header["case"] == self.case
                and self.case < n_cases
                and not missing
            ):
                result.cases[(task, self.case)] = self.accept_case(task, self.case, header, blob)
                self.case += 1
                return None
            if (
                event == "task_missing"
                and header["task"] == task
                and self.case == 0
                and not missing
            ):
                result.missing[task] = header["code"]
                return None
            if event == "task_end" and header["task"] == task and (self.case == n_cases or missing):
                result.finished_tasks.append(task)
                self.task += 1
                self.case = 0
                self._advance()
                return None
        raise wire.ProtocolViolation(f"unexpected {event} event")

    def on_exit(self, header: dict, nonce: str) -> None:
        """The zygote's exit message for this run; any other control message is the grader's
        own failure (only the zygote writes there), never charged to the submission."""
        if header["ev"] != "exit" or header["run"] != nonce:
            raise LostSandbox("the sandbox answered for another run")


class LostSandbox(Exception):
    """The sandbox broke in a way no submission can cause: start a fresh one."""
