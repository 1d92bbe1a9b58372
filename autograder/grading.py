"""Orchestrate: parse -> run -> judge -> record, isolated per submission, over a pool or Dask.

- `prepare` builds, once per assignment, everything a worker needs (`AssignmentWork`: the
  spec from the source notebook, the release's public files, the chapter's check data for
  the seed); a `GradeJob` carries one submission's bytes. Both pickle, so the same
  `grade_submission(job, work)` runs in a local thread pool or on a Dask worker that sees
  no course folder; only this process writes the gradebook.
- `make_cases_payload` encodes every public and hidden case of every check with the
  contract's one codec (sent to the sandbox only once the cells are done).
- `run_program` drives the sandbox within the submission's wall-clock budget (kept here, on
  the trusted side): a cell or task that times out or crashes is skipped and the rest rerun,
  while the budget lasts; a protocol violation or an output flood ends the submission.
- `judge` compares every returned array with the reference on the trusted side, with the
  contract's messages (fixed text and numbers computed here: no text from the submission).
- `grade_submission` never raises: anything that goes wrong on the trusted side becomes the
  reason "grader error" for that submission alone, which is then not marked complete.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib
import os
import secrets
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

from autograder import contract, wire
from autograder import notebook as nbparse
from autograder.protocol import Plan
from autograder.sandbox import (
    DEFAULT_LIMITS,
    FULL_PRELOAD,
    Limits,
    Sandbox,
    preload_for,
    require_sandbox,
)

REGISTRY = "autograder.checks"
GRADER_ERROR = "grader error"


@dataclass(frozen=True)
class AssignmentWork:
    """What every submission of one assignment needs, built once by the instructor's process
    and sent to the workers (a Dask worker needs no course folder and no shared disk): the
    spec from the source notebook, the release's public files, the chapter's check data for
    this run's seed (encoded cases, expected answers, known mistakes, check specs), limits."""

    assignment: str
    seed: int
    spec: nbparse.AssignmentSpec
    release_files: dict  # file name -> bytes (the public release folder, no notebook)
    tasks: list  # per task: {"check", "function", "cases": encoded}
    blob: bytes  # the cases' arrays (npz)
    all_cases: list  # per task: [(case, hidden, expected, mistakes)]
    check_specs: dict  # check name -> contract spec
    limits: Limits = DEFAULT_LIMITS
    sandboxed: bool = True
    preload: tuple = FULL_PRELOAD  # what the zygote imports before it forks

    def release_root(self) -> Path:
        return release_root(self.assignment, self.release_files)


def release_files(course: Path, assignment: str) -> dict:
    """The public release folder's files but the notebook: file name -> bytes."""
    folder = Path(course) / "release" / assignment
    if not folder.is_dir():
        return {}
    return {
        p.name: p.read_bytes()
        for p in sorted(folder.iterdir())
        if p.is_file() and p.suffix != ".ipynb"
    }


def release_root(assignment: str, files: dict) -> Path:
    """The release files, written once per process into a private folder (by content hash)."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name])
    root = (
        Path(tempfile.gettempdir()) / f"autograder-release-{os.getuid()}-{digest.hexdigest()[:16]}"
    )
    folder = root / assignment
    if not (root / "complete").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o755)
        for name, data in files.items():
            (folder / name).write_bytes(data)
        (root / "complete").write_text("ok")
    return root


@dataclass(frozen=True)
class GradeJob:
    """One submission: its bytes travel with the job."""

    student: str
    notebook: bytes
    sha256: str


def prepare(
    course: Path,
    assignment: str,
    seed: int,
    limits: Limits = DEFAULT_LIMITS,
    sandboxed: bool = True,
    registry_name: str = REGISTRY,
    spec: nbparse.AssignmentSpec | None = None,
) -> AssignmentWork:
    """Everything the workers need for this assignment and seed (the trusted side computes
    every expected answer here; workers never import the reference package)."""
    reg = registry(registry_name)
    spec = spec or nbparse.load_assignment(course, assignment)
    tasks, blob, all_cases = make_cases_payload(spec, reg, seed)
    specs = {check: reg.spec(check) for _g, check, _f in _tasks(spec)}
    return AssignmentWork(
        assignment,
        seed,
        spec,
        release_files(course, assignment),
        tasks,
        blob,
        all_cases,
        specs,
        effective_limits(limits, reg.chapter(assignment).limits),
        sandboxed,
        preload_for(spec.imports),
    )


class Preparing:
    """`prepare` in a forked child while this process gets on (it imports nbgrader and checks
    the gradebook): the reference package (PyTorch, about a second) is imported there, not
    here. The child sends the chapter's limits first, so sandboxes can start, then the work.
    Where the reference package is already imported (a test, a second call) or threads run,
    it runs here."""

    def __init__(self, *args, fork: bool | None = None):
        self._args, self._pipe, self._child, self._limits = args, None, None, None
        if fork is None:  # only a one-thread process forks: no lock can be held in the child
            fork = args[-2] not in sys.modules and threading.active_count() == 1  # registry_name
        if not fork:
            return
        import multiprocessing

        context = multiprocessing.get_context("fork")
        self._pipe, send = context.Pipe(duplex=False)
        self._child = context.Process(target=self._run_child, args=(send,), daemon=True)
        self._child.start()
        send.close()

    def _run_child(self, send) -> None:
        course, assignment, seed, limits, sandboxed, registry_name, spec = self._args
        try:
            chapter = registry(registry_name).chapter(assignment)
            send.send(("limits", effective_limits(limits, chapter.limits)))
            send.send(("work", prepare(*self._args)))
        except BaseException as err:  # noqa: BLE001 - raised again in the parent
            send.send(("error", err))

    def _receive(self, kind: str):
        try:
            got, value = self._pipe.recv()
        except EOFError:
            got, value = "error", RuntimeError("the process computing the check data died")
        if got == "error":
            self._child.join()
            raise value
        assert got == kind, (got, kind)
        return value

    def limits(self) -> Limits:
        if self._limits is None:
            if self._child is None:
                course, assignment, _seed, limits, _s, registry_name, _spec = self._args
                chapter = registry(registry_name).chapter(assignment)
                self._limits = effective_limits(limits, chapter.limits)
            else:
                self._limits = self._receive("limits")
        return self._limits

    def work(self) -> AssignmentWork:
        if self._child is None:
            return prepare(*self._args)
        self.limits()
        work = self._receive("work")
        self._child.join()
        return work


def make_job(course: Path, assignment: str, student: str) -> GradeJob:
    data = submission_path(course, assignment, student).read_bytes()
    return GradeJob(student, data, hashlib.sha256(data).hexdigest())


@dataclass
class TaskResult:
    grade_id: str
    points: float
    max_points: float
    message: str
    cases: list = field(default_factory=list)  # [check, case name, hidden, passed]
    wrong: list = field(default_factory=list)  # the failing cases' messages (safe to show)
    passed: bool = False


@dataclass
class SubmissionResult:
    student: str
    assignment: str
    seed: int
    score: float = 0.0
    max_score: float = 0.0
    reasons: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    tasks: list = field(default_factory=list)
    cell_outputs: dict = field(default_factory=dict)  # submission cell index -> [output dicts]
    sha256: str = ""
    seconds: float = 0.0
    sandbox_starts: int = 0
    unanswered: list = field(default_factory=list)  # manually graded cells left as released
    complete: bool = True  # False: a grader error; a rerun grades it again

    def add_reason(self, reason: str, note: str) -> None:
        if reason not in self.reasons:
            self.reasons.append(reason)
        if note not in self.notes:
            self.notes.append(note)

    def to_record(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------------------
# cases: the registry, cached per process (hidden cases and expected values per seed)

_cache: dict = {}
_cache_lock = threading.Lock()


def registry(name: str = REGISTRY):
    return importlib.import_module(name)


def _cached(key, make):
    with _cache_lock:
        if key in _cache:
            return _cache[key]
    value = make()
    with _cache_lock:
        _cache.setdefault(key, value)
        return _cache[key]


def cases_for(reg, check: str, seed: int) -> list:
    """[(case, hidden, expected, mistakes)] for one check: public cases first, then hidden."""

    def make():
        public = [(case, False) for case in reg.public_cases(check)]
        hidden = [(case, True) for case in reg.hidden_cases(check, seed)]
        return [
            (case, is_hidden, reg.expected(check, case), reg.mistake_outputs(check, case))
            for case, is_hidden in public + hidden
        ]

    return _cached((reg.__name__, check, seed), make)


def _tasks(spec) -> list[tuple[str, str, str]]:
    """(test grade_id, check name, function name) for every check call of every test cell."""
    return [
        (test.grade_id, check, function) for test in spec.tests for check, function in test.checks
    ]


def make_cases_payload(spec, reg, seed: int) -> tuple[list, bytes, list]:
    """(the tasks with their encoded cases, the cases' arrays as npz, [(case, hidden, expected,
    mistakes)] per task)."""
    arrays: dict = {}
    tasks, all_cases = [], []
    for _grade_id, check, function in _tasks(spec):
        cases = cases_for(reg, check, seed)
        all_cases.append(cases)
        encoded = [
            {
                "args": [contract.encode(a, arrays) for a in case.args],
                "kwargs": {k: contract.encode(v, arrays) for k, v in case.kwargs.items()},
            }
            for case, _hidden, _expected, _mistakes in cases
        ]
        tasks.append({"check": check, "function": function, "cases": encoded})
    return tasks, contract.pack(arrays), all_cases


# ---------------------------------------------------------------------------------------
# run: the sandbox, within the submission's budget; a bad cell or task costs only itself


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
        expected = all_cases[task][case][2]
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
        cases = contract.encode_frame({"tasks": tasks, "skip_tasks": skip_tasks}, blob)
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


# ---------------------------------------------------------------------------------------
# judge: trusted-side comparison, messages from the contract only

#: an error code that is also a failure reason of its own
ERROR_REASONS = {
    "MemoryError": "memory",
    contract.FILE_TOO_LARGE: "output too large",
    "EOFError": "input() called",
}
MISSING = {"undefined": "is not defined", "not_callable": "is not a function"}
SHOWN = 5  # failing cases listed per check


def judge(spec, check_specs: dict, all_cases, record: RunRecord, result: SubmissionResult) -> None:
    tasks = _tasks(spec)
    per_test: dict = {t.grade_id: [] for t in spec.tests}
    for task_index, (grade_id, check, function) in enumerate(tasks):
        cases = all_cases[task_index]
        check_spec = check_specs[check]
        outcome = {
            "check": check,
            "public": [],
            "hidden": [],
            "cases": [],
            "fatal": None,
            "n_public": sum(1 for c in cases if not c[1]),
            "n_hidden": sum(1 for c in cases if c[1]),
        }
        if task_index in record.missing:
            what = MISSING[record.missing[task_index]]
            outcome["fatal"] = (
                f"{check}: `{function}` {what}: did the cell that defines it raise an error, or was it renamed?"
            )
            result.add_reason("missing function", f"`{function}` {what}")
        elif task_index in record.failed_tasks:
            reason, note = record.failed_tasks[task_index]
            outcome["fatal"] = f"{check}: stopped by the grader ({reason}: {note})"
            result.add_reason(reason, f"{check}: {note}")
        for case_index, (case, hidden, expected, mistakes) in enumerate(cases):
            got = record.outcomes.get((task_index, case_index))
            if outcome["fatal"] or got is None:
                passed, message = False, outcome["fatal"] or f"case '{case.name}': no result"
            else:
                if got["kind"] == "error" and got["code"] in ERROR_REASONS:
                    result.add_reason(
                        ERROR_REASONS[got["code"]], f"{check}, case '{case.name}': {got['code']}"
                    )
                passed, message = contract.judge(check_spec, case.name, expected, got, mistakes)
            outcome["cases"].append([check, case.name, hidden, passed])
            if not passed:
                outcome["hidden" if hidden else "public"].append(message)
        per_test[grade_id].append(outcome)

    for test in spec.tests:
        outcomes = per_test[test.grade_id]
        passed = bool(outcomes) and all(not o["public"] and not o["hidden"] for o in outcomes)
        lines, wrong, cases = [], [], []
        for o in outcomes:
            cases += o["cases"]
            if o["fatal"]:
                lines.append(o["fatal"])
                wrong.append(o["fatal"])
                continue
            if not o["public"] and not o["hidden"]:
                lines.append(
                    f"{o['check']}: all {o['n_public']} public and {o['n_hidden']} hidden cases passed"
                )
            for hidden, n in ((False, o["n_public"]), (True, o["n_hidden"])):
                failures = o["hidden" if hidden else "public"]
                if failures:
                    lines.append(contract.summary(o["check"], failures, n, hidden, shown=SHOWN))
                wrong += failures
        if not outcomes:
            lines.append("this test cell calls no check")
        result.tasks.append(
            TaskResult(
                test.grade_id,
                test.points if passed else 0.0,
                test.points,
                "\n".join(lines),
                cases,
                wrong,
                passed,
            )
        )
    result.score = float(sum(t.points for t in result.tasks))


def _cell_outputs(program, record: RunRecord, result: SubmissionResult) -> None:
    for program_index, origin in enumerate(program.origin):
        if origin is None:  # a locked cell put back from the source: no output to show
            if program_index in record.failed_cells:
                reason, detail = record.failed_cells[program_index]
                result.add_reason(reason, f"a restored locked cell: {detail}")
            continue
        outputs = []
        event = record.cells.get(program_index)
        if event and event["output"]:  # the cell's own output: it ran before any case was sent
            outputs.append({"output_type": "stream", "name": "stdout", "text": event["output"]})
        if event and event["error"]:
            code = event["error"]
            if code in ERROR_REASONS:
                result.add_reason(ERROR_REASONS[code], f"cell {origin + 1}: {code}")
            outputs.append(
                {
                    "output_type": "error",
                    "ename": code,
                    "evalue": f"the cell raised {code}",
                    "traceback": [f"{code}: the cell raised {code}"],
                }
            )
        if program_index in record.failed_cells:
            reason, detail = record.failed_cells[program_index]
            note = f"notebook cell {origin + 1}: {detail}"
            result.add_reason(reason, note)
            outputs.append(
                {
                    "output_type": "error",
                    "ename": reason.replace(" ", "_"),
                    "evalue": f"stopped by the grader: {note}",
                    "traceback": [f"stopped by the grader: {note}"],
                }
            )
        result.cell_outputs[origin] = outputs


# ---------------------------------------------------------------------------------------
# one submission


def submission_path(course: Path, assignment: str, student: str) -> Path:
    return Path(course) / "submitted" / student / assignment / f"{assignment}.ipynb"


def file_sha256(path: Path) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


class SandboxPool:
    """Sandboxes shared by the jobs of one process (local threads or one Dask worker), by
    what they were started for: (release folder, limits, sandboxed, preloaded modules)."""

    def __init__(self):
        self._free: dict = {}
        self._lock = threading.Lock()

    def acquire(self, key: tuple) -> Sandbox:
        with self._lock:
            free = self._free.setdefault(key, [])
            if free:
                return free.pop()
        return Sandbox(*key)

    def warm(self, key: tuple, count: int) -> None:
        """Make sure `count` started sandboxes are waiting (started in parallel)."""
        with self._lock:
            missing = count - len(self._free.get(key, []))
        fresh = [Sandbox(*key) for _ in range(max(0, missing))]
        threads = [threading.Thread(target=box.start) for box in fresh]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for box in fresh:
            if box.process is not None:
                self.give_back(box)
            else:
                box.close()

    def give_back(self, sandbox: Sandbox) -> None:
        key = (sandbox.release_root, sandbox.limits, sandbox.sandboxed, sandbox.preload)
        with self._lock:
            self._free.setdefault(key, []).append(sandbox)

    def close(self) -> None:
        with self._lock:
            for sandboxes in self._free.values():
                for sandbox in sandboxes:
                    sandbox.close()
            self._free.clear()


def sandbox_key(work: AssignmentWork) -> tuple:
    """What the sandboxes of this work are started with (see SandboxPool)."""
    return (work.release_root(), work.limits, work.sandboxed, work.preload)


POOL = SandboxPool()
atexit.register(POOL.close)


def effective_limits(base: Limits, overrides: dict) -> Limits:
    """The chapter's limits, except where the instructor set a limit explicitly (``base``
    differs from the default there)."""
    default = Limits()
    return base.merged(
        {k: v for k, v in overrides.items() if getattr(base, k) == getattr(default, k)}
    )


def _not_graded(spec, result: SubmissionResult, reason: str, note: str) -> None:
    result.add_reason(reason, note)
    result.tasks = [
        TaskResult(
            test.grade_id,
            0.0,
            test.points,
            f"not graded: {note}",
            [[c, "all cases", False, False] for c, _f in test.checks],
            [note],
            False,
        )
        for test in spec.tests
    ]
    result.score = 0.0


def grade_submission(job: GradeJob, work: AssignmentWork) -> SubmissionResult:
    """Parse, run and judge one submission. Never raises: a failure on the trusted side is
    the reason "grader error" for this submission alone (not complete: a rerun retries it)."""
    started = time.monotonic()
    result = SubmissionResult(
        job.student, work.assignment, work.seed, max_score=work.spec.max_score, sha256=job.sha256
    )
    try:
        _grade(job, work, result)
    except Exception as err:  # noqa: BLE001 - contained: this submission only
        result.complete = False
        result.tasks, result.score = [], 0.0
        where = traceback.extract_tb(err.__traceback__)[-1]
        result.add_reason(
            GRADER_ERROR,
            f"{type(err).__name__} in the grader at "
            f"{Path(where.filename).name}:{where.lineno}; rerun to retry",
        )
    result.seconds = time.monotonic() - started
    return result


def _grade(job: GradeJob, work: AssignmentWork, result: SubmissionResult) -> None:
    spec = work.spec
    try:
        submission = nbparse.read_submission(job.notebook)
    except nbparse.InvalidNotebook as err:
        return _not_graded(spec, result, "invalid notebook", str(err))
    program = nbparse.build_program(spec, submission)
    result.unanswered = nbparse.unanswered_manual_cells(spec, submission)
    for note in program.tampering:
        result.add_reason("tampered cell", note)
    key = sandbox_key(work)
    release_dir = f"/release/{work.assignment}" if work.sandboxed else str(key[0] / work.assignment)
    request = {"cells": program.cells, "release_dir": release_dir if work.release_files else None}
    sandbox = POOL.acquire(key)
    try:
        record = run_program(
            sandbox, request, work.tasks, work.blob, work.all_cases, work.check_specs
        )
    finally:
        POOL.give_back(sandbox)
    result.sandbox_starts = record.starts
    if record.grader_error:
        raise RuntimeError(record.grader_error)
    if record.memory_kills:
        result.add_reason(
            "memory",
            "the kernel killed a process of the submission for going over the memory limit",
        )
    _cell_outputs(program, record, result)
    judge(spec, work.check_specs, work.all_cases, record, result)


# ---------------------------------------------------------------------------------------
# a whole assignment


def list_students(course: Path, assignment: str) -> list[str]:
    root = Path(course) / "submitted"
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / assignment).is_dir())


class Progress:
    """A one-line progress bar on stderr."""

    def __init__(self, total: int, enabled: bool = True):
        self.total, self.done, self.enabled, self.started = (
            total,
            0,
            enabled and total > 0,
            time.monotonic(),
        )

    def step(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        width = 30
        filled = int(width * self.done / self.total)
        rate = self.done / max(time.monotonic() - self.started, 1e-9)
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
            f"{rate:.1f}/s {label[:30]:<30}"
        )
        if self.done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def grade_assignment(
    course,
    assignment: str,
    *,
    workers: int = 2,
    students=None,
    force: bool = False,
    cluster: str | None = None,
    sandboxed: bool = True,
    limits: Limits = DEFAULT_LIMITS,
    seed: int | None = None,
    progress: bool = True,
    registry_name: str = REGISTRY,
    keep_sandboxes: bool = False,
) -> dict:
    """Grade every (or the given) submission; returns {"graded": [...], "skipped": [...], "seed": s}."""
    from autograder.gradebook import Recorder

    called = time.monotonic()
    course = Path(course).resolve()
    if sandboxed:
        require_sandbox()  # before any work: say what to install (or to run as root), never run unsandboxed
    spec = nbparse.load_assignment(course, assignment)
    seed = secrets.randbits(31) if seed is None else int(seed)
    wanted = list_students(course, assignment) if not students else list(students)
    preparing = Preparing(course, assignment, seed, limits, sandboxed, registry_name, spec)
    recorder = Recorder(course, spec)  # nbgrader's gradebook, while the check data is computed
    recorder.check_gradebook()
    warming = None
    if not cluster and wanted:  # the sandboxes start as soon as the chapter's limits are known
        key = (
            release_root(assignment, release_files(course, assignment)),
            preparing.limits(),
            sandboxed,
            preload_for(spec.imports),
        )
        warming = threading.Thread(target=POOL.warm, args=(key, max(1, workers)))
        warming.start()
    work = preparing.work()
    jobs, skipped = [], []
    for student in wanted:
        if not force and recorder.already_graded(
            student, file_sha256(submission_path(course, assignment, student))
        ):
            skipped.append((student, "already graded"))
        else:
            jobs.append(student)
    recorder.log_run(seed, jobs)
    if warming is not None:
        warming.join()
    startup = time.monotonic() - called  # the check data computed, the sandboxes started
    bar = Progress(len(jobs), progress)
    graded: list[SubmissionResult] = []

    client = executor = None
    if cluster:
        from distributed import Client

        client = Client(cluster)
        shared = client.scatter(work, broadcast=True)  # once per worker, not once per submission
        submit = lambda job: client.submit(grade_submission, job, shared, pure=False)  # noqa: E731
    else:
        executor = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="grader")
        submit = lambda job: executor.submit(grade_submission, job, work)  # noqa: E731
    in_flight: dict = {}
    limit = max(1, workers) * 2 if not cluster else 1_000_000
    queue = list(jobs)
    try:
        while queue or in_flight:
            while queue and len(in_flight) < limit:
                student = queue.pop(0)
                lock = recorder.try_lock(student)
                if lock is None:
                    skipped.append((student, "being graded by another grader"))
                    bar.step(student)
                    continue
                job = make_job(course, assignment, student)
                if not force and recorder.already_graded(student, job.sha256):
                    lock.release()
                    skipped.append((student, "already graded"))
                    bar.step(student)
                    continue
                in_flight[submit(job)] = (job, lock)
            if not in_flight:
                break
            done, _ = (
                wait(list(in_flight), return_when=FIRST_COMPLETED)
                if executor
                else _dask_wait(in_flight)
            )
            for future in done:
                job, lock = in_flight.pop(future)
                try:
                    graded.append(_collect(future, job, work, recorder))
                finally:
                    lock.release()
                bar.step(job.student)
    finally:
        if executor is not None:
            executor.shutdown(wait=True)
            if not keep_sandboxes:  # a caller grading several assignments may reuse them
                POOL.close()
        if client is not None:
            client.close()
    rerun = [r.student for r in graded if not r.complete]
    return {
        "graded": graded,
        "skipped": skipped,
        "seed": seed,
        "rerun": rerun,
        "startup_seconds": startup,
        "grading_seconds": time.monotonic() - called - startup,  # first job to last record
    }


def _collect(future, job: GradeJob, work: AssignmentWork, recorder) -> SubmissionResult:
    """The finished job's result, recorded; any failure here is that submission's grader error."""
    try:
        result = future.result()
    except Exception as err:  # noqa: BLE001 - e.g. a Dask worker died: this submission only
        result = SubmissionResult(job.student, work.assignment, work.seed, complete=False)
        result.add_reason(
            GRADER_ERROR, f"{type(err).__name__} while running the job; rerun to retry"
        )
    if not result.complete:
        return result  # nothing recorded: a rerun grades it again
    try:
        recorder.record(result)
    except Exception as err:  # noqa: BLE001
        result.complete = False
        result.add_reason(GRADER_ERROR, f"{type(err).__name__} while recording; rerun to retry")
    return result


def _dask_wait(in_flight):
    from distributed import wait as dask_wait

    done_and_pending = dask_wait(list(in_flight), return_when="FIRST_COMPLETED")
    return done_and_pending.done, done_and_pending.not_done


def summary_table(graded: list[SubmissionResult], skipped=()) -> str:
    rows = [("student", "score", "max", "reason")]
    for r in sorted(graded, key=lambda r: r.student):
        rows.append((r.student, f"{r.score:g}", f"{r.max_score:g}", ", ".join(r.reasons) or "-"))
    for student, why in skipped:
        rows.append((student, "", "", f"skipped: {why}"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
