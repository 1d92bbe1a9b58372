"""Run with retries: drive the sandbox within the submission's wall-clock budget, in two runs.

A submission is run first on its public cases, then on its hidden cases in fresh processes
(each attempt is a fresh fork of the slot's zygote, with its own namespaces and /tmp): what
a student sees in full (cell outputs, the public cases' messages) comes only from the public
run, whose processes never held a hidden input; of the hidden run only pass/fail and the
fixed vocabulary of reasons leave (its cell outputs are dropped here). The public run ends,
retries included, before the hidden run starts, so no retry of the public run follows a
hidden one.

The budget is kept here, on the trusted side, one for both runs. A cell or task that times
out or crashes is skipped and the rest rerun while the budget lasts; a protocol violation or
an output flood ends the submission; a sandbox that breaks before the submission's first
event while budget is left is the grader's failure ("lost"): the attempt is rerun in full in
a fresh sandbox. An attempt that ends while the budget is spent is the submission's timeout
("budget"), whatever step it was in, its set-up included (``protocol.Run.expired``).

**What leaves the hidden run** (`_Phase.said`, where each attempt's end is turned into what
is recorded): which tasks passed and which failed (their cases judged into the hidden
vocabulary of ``judging``), and for a task or a cell it stopped, the reason, from a fixed
set (``END_REASONS``, "fork bomb"), with that reason's one fixed sentence
(``messages.STOPPED``). Nothing else an attempt of it reports is recorded: not its detail
(an exit status, a signal, which limit, how long it waited, a protocol violation's
wording), its cell outputs, the bytes it sent, how many processes it held or the kernel
killed, and a lost sandbox's wording. Every process of the hidden run held its hidden
inputs, or followed one that did (a retry), so any of those could be a value computed from
them. ``tests/test_hidden_run_vocabulary.py`` walks every field."""

from __future__ import annotations

import dataclasses
import secrets
import time
from dataclasses import dataclass, field
from typing import NamedTuple

from autograder.checking import messages
from autograder.checking.results import GRADER_ERROR
from autograder.grading.check_data import CaseSet
from autograder.sandbox import Limits, Sandbox, wire
from autograder.sandbox.protocol import Plan
from autograder.student import frames


class Failure(NamedTuple):
    """What is recorded of a step (a cell or a task) an attempt stopped: the reason (one of
    ``END_REASONS``' values) and the note the feedback may say (``_Phase.said``)."""

    reason: str
    note: str


@dataclass
class RunRecord:
    cells: dict = field(default_factory=dict)  # program cell -> cell header
    outcomes: dict = field(default_factory=dict)  # (task, case) -> contract.Outcome
    missing: dict = field(default_factory=dict)  # task -> "undefined" | "not_callable"
    failed_tasks: dict[int, Failure] = field(default_factory=dict)  # task ->
    failed_cells: dict[int, Failure] = field(default_factory=dict)  # program cell ->
    # task -> Failure: stopped in the public run while a callee of its was stopped or
    # missing there, so run on its hidden cases all the same (``rescued``)
    rescued: dict = field(default_factory=dict)
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


#: how the hidden run's notes begin: a stop's one fixed sentence follows
HIDDEN_RUN = "in the run on the hidden cases: "


def _end_reason(run, limits: Limits) -> str:
    if run.ended in ("timeout", "budget") and run.processes_at_kill >= max(
        4, limits.processes // 2
    ):
        return "fork bomb"
    return END_REASONS[run.ended]


def run_program(
    sandbox: Sandbox,
    request: dict,
    check_specs: dict,
    public: CaseSet,
    hidden: CaseSet,
) -> RunRecord:
    """Run the program on the public cases, then, in fresh processes, on the hidden ones
    (``check_data.CaseSet``), retrying around failed cells and tasks while the submission's
    budget lasts; ends early on anything that is not a timeout or a crash. Outcomes are keyed
    (task, case) with the hidden cases numbered after the public ones."""
    record = RunRecord()
    deadline = time.monotonic() + sandbox.limits.submission_seconds
    phase = _Phase(sandbox, request, check_specs, public, record, deadline)
    phase.run()
    if record.grader_error:
        return record
    hidden_phase = _Phase(sandbox, request, check_specs, hidden, record, phase.deadline)
    hidden_phase.offsets = public.counts()
    # a task the public run did not finish, found missing or stopped has lost its points
    # (a protocol violation or a flood there stopped every task it had not finished): only
    # the others run again
    for task in rescued(public, check_specs, record):
        record.rescued[task] = record.failed_tasks.pop(task)
    hidden_phase.skip = (
        (set(range(len(public.cases))) - phase.done - set(record.rescued))
        | set(record.missing)
        | set(record.failed_tasks)
    )
    hidden_phase.failed_cells = dict(record.failed_cells)  # failed there: not run again
    if not any(n for t, n in enumerate(hidden.counts()) if t not in hidden_phase.skip):
        return record
    if time.monotonic() >= phase.deadline:  # the budget is spent: nothing more runs
        note = HIDDEN_RUN + messages.say(messages.ENGLISH, messages.stopped("timeout"))
        for task in set(range(len(hidden.cases))) - hidden_phase.skip:
            record.failed_tasks[task] = Failure("timeout", note)
        return record
    hidden_phase.run()
    return record


def rescued(public: CaseSet, check_specs: dict, record: RunRecord) -> list[int]:
    """The tasks the public run stopped (a timeout, a crash) while one of the functions they
    call (``Check.calls``) was stopped or missing there too: a looping ``decoder_step`` stops
    ``greedy_decode_cached``, which calls it. Their hidden cases run all the same, with the
    callee answering the solution's calls (``grading.callees``), so one bug costs one task."""
    checks = [task["check"] for task in public.encoded]
    broken = {checks[t] for t in (set(record.failed_tasks) | set(record.missing))}
    return [t for t in record.failed_tasks if broken & set(check_specs[checks[t]].calls)]


class _Phase:
    """One run (public or hidden) of a submission, its attempts and retries. Its outcomes go
    into the submission's record; cell outputs only from the public run."""

    def __init__(self, sandbox, request, check_specs, cases: CaseSet, record, deadline):
        self.sandbox, self.request, self.cases, self.record = sandbox, request, cases, record
        self.deadline = deadline
        self.offsets = [0] * len(cases.cases)  # where this run's case numbers start, per task
        self.skip: set = set()  # tasks not run
        self.failed_cells: dict[int, Failure] = {}  # program cell ->, skipped on retries
        self.failed_tasks: dict = {}
        self.done: set = set()  # tasks all of whose events arrived
        self.received = 0
        self.comparators = [
            check_specs[task["check"]].comparator.get("kind", "allclose") for task in cases.encoded
        ]

    def accept(self, task: int, case: int, header: dict, data: bytes) -> dict:
        expected = self.cases.cases[task][case].expected
        return wire.read_outcome(header, data, expected, self.comparators[task])

    def run(self) -> None:
        """Attempts until every task ran or was stopped: the run ends early on a protocol
        violation, a flood, the budget (the tasks not finished get that reason) or a sandbox
        lost twice (the grader's error)."""
        limits, record, n_tasks = self.sandbox.limits, self.record, len(self.cases.cases)
        lost = 0
        while True:
            skip_tasks = sorted(self.skip | self.done | set(self.failed_tasks))
            plan = Plan(
                [i for i in range(len(self.request["cells"])) if i not in self.failed_cells],
                [(t, n) for t, n in enumerate(self.cases.counts()) if t not in skip_tasks],
            )
            attempt = dict(
                self.request,
                skip_cells=sorted(self.failed_cells),
                limits=limits.for_child(),
                workdir=f"/tmp/{secrets.token_hex(16)}",
            )  # unpredictable, made fresh
            frame = frames.encode_frame(
                {"tasks": list(self.cases.encoded), "skip_tasks": skip_tasks}, self.cases.blob
            )
            starts, attempt_started = self.sandbox.starts, time.monotonic()
            run = self.sandbox.run(attempt, frame, plan, self.deadline, self.accept, self.received)
            record.starts += self.sandbox.starts - starts
            record.attempts += 1
            failure = self.said(run, limits)
            note = failure.note
            if run.ended == "lost":  # no code of this submission ran: the grader's failure
                lost += 1
                record.lost += 1
                if lost > LOST_RERUNS:
                    record.grader_error = (
                        f"the sandbox broke before the submission started, {lost} times ({note})"
                    )
                    return
                self.deadline += time.monotonic() - attempt_started  # not the submission's
                continue  # the same attempt again, in a fresh sandbox (the lost one was killed)
            # how many processes the kernel killed for memory: only whether any did is said
            record.memory_kills += min(run.oom_kills, 1) if self.cases.hidden else run.oom_kills
            self.received += run.received
            self._keep(run)
            if run.ended == "done":
                return
            if run.ended == "grader":
                record.grader_error = note
                return
            stopped_a_step = run.ended in ("timeout", "crash", "memory") and run.where is not None
            retry = stopped_a_step and time.monotonic() < self.deadline
            if retry and run.where.step == "cell":
                self.failed_cells[run.where.index] = failure
                record.failed_cells.setdefault(run.where.index, failure)
                continue
            if retry and run.where.step == "task":
                self.failed_tasks[run.where.index] = failure
                record.failed_tasks[run.where.index] = failure
                continue
            if stopped_a_step:  # and the budget is spent: no retry is owed
                # the step it stopped keeps its reason; what was not judged yet is the
                # submission's timeout, whichever way the attempt ended (the crash of its last
                # cell or the budget's own kill, as close together as a loaded machine makes them)
                if run.where.step == "cell":
                    record.failed_cells.setdefault(run.where.index, failure)
                else:
                    record.failed_tasks[run.where.index] = failure
                spent = f"used up the submission's budget of {limits.submission_seconds:g} s"
                failure = self.said(dataclasses.replace(run, ended="budget", detail=spent), limits)
            for task in range(n_tasks):  # everything not judged yet gets this end's reason
                if task not in self.done and task not in self.skip:
                    record.failed_tasks.setdefault(task, failure)
            return

    def said(self, run, limits: Limits) -> Failure:
        """What is recorded of how an attempt ended (read where it did not
        end "done"). The public run's note is the attempt's own detail ("the process ended
        early (exited with status 1)"): its processes never held a hidden input.

        The rule of the hidden run: only pass/fail and the fixed vocabulary leave it. Its
        note is the reason's one fixed sentence (``messages.STOPPED``), whatever the attempt
        reported: its exit status, signal, the time it waited, the limit it met, the
        protocol violation it committed, a lost sandbox's wording (module docstring). The
        reason itself is one of the fixed set; which cell or task it stopped, and the tasks'
        pass/fail, are the rest of what leaves."""
        reason = _end_reason(run, limits) if run.ended != "done" else ""
        if not self.cases.hidden:
            return Failure(reason, run.detail)
        sentence = messages.say(messages.ENGLISH, messages.stopped(reason))
        return Failure(reason, HIDDEN_RUN + sentence)

    def _keep(self, run) -> None:
        """What an attempt returned, into the record: a task counts only once all its events
        arrived; cell outputs only from the public run (the hidden run's are dropped)."""
        record = self.record
        if not self.cases.hidden:
            record.cells.update(run.cells)
        for task in run.finished_tasks:
            self.done.add(task)
            if task in run.missing:
                record.missing[task] = run.missing[task]
            offset = self.offsets[task]
            record.outcomes.update(
                {(t, offset + c): v for (t, c), v in run.cases.items() if t == task}
            )
