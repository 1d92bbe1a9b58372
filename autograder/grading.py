"""Orchestrate: parse -> run -> judge -> record, isolated per submission, over a pool or Dask.

- `GradeJob` is everything one submission's grading needs (paths, seed, limits); it pickles,
  so the same `grade_submission(job)` runs in a local thread pool or on a Dask worker.
- `make_request` turns the test cells of the *source* notebook into what the sandbox gets:
  the program's cells, and (sent only once the cells are done) every public and hidden case
  of every check, encoded with the contract's one codec.
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
import secrets
import sys
import threading
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

from autograder import contract, wire
from autograder import notebook as nbparse
from autograder.sandbox import Limits, Plan, Sandbox, require_sandbox

REGISTRY = "autograder.checks"
GRADER_ERROR = "grader error"


@dataclass(frozen=True)
class GradeJob:
    course: str
    assignment: str
    student: str
    seed: int
    limits: Limits = Limits()
    sandboxed: bool = True
    registry: str = REGISTRY


@dataclass
class TaskResult:
    grade_id: str
    points: float
    max_points: float
    message: str
    cases: list = field(default_factory=list)   # [check, case name, hidden, passed]
    wrong: list = field(default_factory=list)   # the failing cases' messages (safe to show)
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
        return [(case, is_hidden, reg.expected(check, case), reg.mistake_outputs(check, case))
                for case, is_hidden in public + hidden]
    return _cached((reg.__name__, check, seed), make)


def _tasks(spec) -> list[tuple[str, str, str]]:
    """(test grade_id, check name, function name) for every check call of every test cell."""
    return [(test.grade_id, check, function) for test in spec.tests for check, function in test.checks]


def make_request(spec, program, reg, seed: int, release_dir: str | None) -> tuple[dict, list, bytes, list]:
    """(the cells, the tasks, the cases' arrays as npz, [(case, hidden, expected, mistakes)] per task)."""
    arrays: dict = {}
    tasks, all_cases = [], []
    for _grade_id, check, function in _tasks(spec):
        cases = cases_for(reg, check, seed)
        all_cases.append(cases)
        encoded = [{"args": [contract.encode(a, arrays) for a in case.args],
                    "kwargs": {k: contract.encode(v, arrays) for k, v in case.kwargs.items()}}
                   for case, _hidden, _expected, _mistakes in cases]
        tasks.append({"check": check, "function": function, "cases": encoded})
    request = {"cells": program.cells, "release_dir": release_dir}
    return request, tasks, contract.pack(arrays), all_cases


# ---------------------------------------------------------------------------------------
# run: the sandbox, within the submission's budget; a bad cell or task costs only itself


@dataclass
class RunRecord:
    cells: dict = field(default_factory=dict)         # program cell -> cell header
    outcomes: dict = field(default_factory=dict)      # (task, case) -> contract outcome
    missing: dict = field(default_factory=dict)       # task -> "undefined" | "not_callable"
    failed_tasks: dict = field(default_factory=dict)  # task -> (reason, note)
    failed_cells: dict = field(default_factory=dict)  # program cell -> (reason, note)
    grader_error: str = ""
    starts: int = 0
    attempts: int = 0


#: how an attempt ended -> the reason a student and the instructor see
END_REASONS = {"timeout": "timeout", "budget": "timeout", "crash": "crash", "output": "output too large",
               "protocol": "protocol violation", "grader": GRADER_ERROR}


def _end_reason(run, limits: Limits) -> str:
    if run.ended in ("timeout", "budget") and run.processes_at_kill >= max(4, limits.processes // 2):
        return "fork bomb"
    return END_REASONS[run.ended]


def run_program(sandbox: Sandbox, request: dict, tasks: list, blob: bytes, all_cases: list, reg) -> RunRecord:
    """Run the program and every task, retrying around failed cells and tasks while the
    submission's budget lasts. Ends early on anything that is not a timeout or a crash."""
    limits = sandbox.limits
    record = RunRecord()
    deadline = time.monotonic() + limits.submission_seconds
    received = 0
    specs = [reg.spec(task["check"]) for task in tasks]

    def accept(task: int, case: int, header: dict, data: bytes) -> dict:
        expected = all_cases[task][case][2]
        return wire.read_outcome(header, data, expected, specs[task]["comparator"].get("kind", "allclose"))

    while True:
        finished = set(record.missing) | {t for t, _c in record.outcomes}
        skip_tasks = sorted(finished | set(record.failed_tasks))
        plan = Plan([i for i in range(len(request["cells"])) if i not in record.failed_cells],
                    [(t, len(all_cases[t])) for t in range(len(tasks)) if t not in skip_tasks])
        attempt = dict(request, skip_cells=sorted(record.failed_cells), limits=limits.for_child(),
                       workdir=f"/tmp/{secrets.token_hex(16)}")  # unpredictable, made fresh
        cases = contract.encode_frame({"tasks": tasks, "skip_tasks": skip_tasks}, blob)
        starts = sandbox.starts
        run = sandbox.run(attempt, cases, plan, deadline, accept, received)
        record.starts += sandbox.starts - starts
        record.attempts += 1
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
        retry = run.ended in ("timeout", "crash") and run.where is not None and time.monotonic() < deadline
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
ERROR_REASONS = {"MemoryError": "memory", contract.FILE_TOO_LARGE: "output too large", "EOFError": "input() called"}
MISSING = {"undefined": "is not defined", "not_callable": "is not a function"}
SHOWN = 5  # failing cases listed per check


def judge(spec, reg, all_cases, record: RunRecord, result: SubmissionResult) -> None:
    tasks = _tasks(spec)
    per_test: dict = {t.grade_id: [] for t in spec.tests}
    for task_index, (grade_id, check, function) in enumerate(tasks):
        cases = all_cases[task_index]
        check_spec = reg.spec(check)
        outcome = {"check": check, "public": [], "hidden": [], "cases": [], "fatal": None,
                   "n_public": sum(1 for c in cases if not c[1]), "n_hidden": sum(1 for c in cases if c[1])}
        if task_index in record.missing:
            what = MISSING[record.missing[task_index]]
            outcome["fatal"] = f"{check}: `{function}` {what}: did the cell that defines it raise an error, or was it renamed?"
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
                    result.add_reason(ERROR_REASONS[got["code"]], f"{check}, case '{case.name}': {got['code']}")
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
                lines.append(f"{o['check']}: all {o['n_public']} public and {o['n_hidden']} hidden cases passed")
            for hidden, n in ((False, o["n_public"]), (True, o["n_hidden"])):
                failures = o["hidden" if hidden else "public"]
                if failures:
                    lines.append(contract.summary(o["check"], failures, n, hidden, shown=SHOWN))
                wrong += failures
        if not outcomes:
            lines.append("this test cell calls no check")
        result.tasks.append(TaskResult(test.grade_id, test.points if passed else 0.0, test.points,
                                       "\n".join(lines), cases, wrong, passed))
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
            outputs.append({"output_type": "error", "ename": code, "evalue": f"the cell raised {code}",
                            "traceback": [f"{code}: the cell raised {code}"]})
        if program_index in record.failed_cells:
            reason, detail = record.failed_cells[program_index]
            note = f"notebook cell {origin + 1}: {detail}"
            result.add_reason(reason, note)
            outputs.append({"output_type": "error", "ename": reason.replace(" ", "_"),
                            "evalue": f"stopped by the grader: {note}", "traceback": [f"stopped by the grader: {note}"]})
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
    """Sandboxes shared by the jobs of one process (local threads or one Dask worker)."""

    def __init__(self):
        self._free: dict = {}
        self._lock = threading.Lock()

    def acquire(self, release_root: Path, limits: Limits, sandboxed: bool) -> Sandbox:
        key = (str(release_root), limits, sandboxed)
        with self._lock:
            free = self._free.setdefault(key, [])
            if free:
                return free.pop()
        return Sandbox(release_root, limits, sandboxed)

    def warm(self, release_root: Path, limits: Limits, sandboxed: bool, count: int) -> None:
        """Make sure `count` started sandboxes are waiting (started in parallel)."""
        key = (str(release_root), limits, sandboxed)
        with self._lock:
            missing = count - len(self._free.get(key, []))
        fresh = [Sandbox(release_root, limits, sandboxed) for _ in range(max(0, missing))]
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
        key = (str(sandbox.release_root), sandbox.limits, sandbox.sandboxed)
        with self._lock:
            self._free.setdefault(key, []).append(sandbox)

    def close(self) -> None:
        with self._lock:
            for sandboxes in self._free.values():
                for sandbox in sandboxes:
                    sandbox.close()
            self._free.clear()


POOL = SandboxPool()
atexit.register(POOL.close)


def effective_limits(base: Limits, overrides: dict) -> Limits:
    """The chapter's limits, except where the instructor set a limit explicitly (``base``
    differs from the default there)."""
    default = Limits()
    return base.merged({k: v for k, v in overrides.items() if getattr(base, k) == getattr(default, k)})


def _not_graded(spec, result: SubmissionResult, reason: str, note: str) -> None:
    result.add_reason(reason, note)
    result.tasks = [TaskResult(test.grade_id, 0.0, test.points, f"not graded: {note}",
                               [[c, "all cases", False, False] for c, _f in test.checks], [note], False)
                    for test in spec.tests]
    result.score = 0.0


def grade_submission(job: GradeJob) -> SubmissionResult:
    """Parse, run and judge one submission. Never raises: a failure on the trusted side is
    the reason "grader error" for this submission alone (not complete: a rerun retries it)."""
    started = time.monotonic()
    result = SubmissionResult(job.student, job.assignment, job.seed)
    try:
        _grade(job, result)
    except Exception as err:  # noqa: BLE001 - contained: this submission only
        result.complete = False
        result.tasks, result.score = [], 0.0
        where = traceback.extract_tb(err.__traceback__)[-1]
        result.add_reason(GRADER_ERROR, f"{type(err).__name__} in the grader at "
                                        f"{Path(where.filename).name}:{where.lineno}; rerun to retry")
    result.seconds = time.monotonic() - started
    return result


def _grade(job: GradeJob, result: SubmissionResult) -> None:
    course = Path(job.course)
    reg = registry(job.registry)
    spec = nbparse.load_assignment(course, job.assignment)
    result.max_score = spec.max_score
    path = submission_path(course, job.assignment, job.student)
    result.sha256 = file_sha256(path)
    try:
        submission = nbparse.read_submission(path)
    except nbparse.InvalidNotebook as err:
        return _not_graded(spec, result, "invalid notebook", str(err))
    program = nbparse.build_program(spec, submission)
    result.unanswered = nbparse.unanswered_manual_cells(spec, submission)
    for note in program.tampering:
        result.add_reason("tampered cell", note)
    release_root = course / "release"
    release_dir = None
    if (release_root / job.assignment).is_dir():
        release_dir = f"/release/{job.assignment}" if job.sandboxed else str(release_root / job.assignment)
    request, tasks, blob, all_cases = make_request(spec, program, reg, job.seed, release_dir)
    limits = effective_limits(job.limits, reg.chapter(job.assignment).limits)
    sandbox = POOL.acquire(release_root, limits, job.sandboxed)
    try:
        record = run_program(sandbox, request, tasks, blob, all_cases, reg)
    finally:
        POOL.give_back(sandbox)
    result.sandbox_starts = record.starts
    if record.grader_error:
        raise RuntimeError(record.grader_error)
    _cell_outputs(program, record, result)
    judge(spec, reg, all_cases, record, result)


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
        self.total, self.done, self.enabled, self.started = total, 0, enabled and total > 0, time.monotonic()

    def step(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        width = 30
        filled = int(width * self.done / self.total)
        rate = self.done / max(time.monotonic() - self.started, 1e-9)
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                         f"{rate:.1f}/s {label[:30]:<30}")
        if self.done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def grade_assignment(course, assignment: str, *, workers: int = 2, students=None, force: bool = False,
                     cluster: str | None = None, sandboxed: bool = True, limits: Limits = Limits(),
                     seed: int | None = None, progress: bool = True, registry_name: str = REGISTRY,
                     keep_sandboxes: bool = False) -> dict:
    """Grade every (or the given) submission; returns {"graded": [...], "skipped": [...], "seed": s}."""
    from autograder.gradebook import Recorder

    course = Path(course).resolve()
    if sandboxed:
        require_sandbox()  # before any work: say what to install (or to run as root), never run unsandboxed
    spec = nbparse.load_assignment(course, assignment)
    warming = None
    if not cluster and list_students(course, assignment):
        # start the sandboxes (Python, NumPy, PyTorch) while the gradebook is being checked
        warming = threading.Thread(target=POOL.warm, args=(course / "release", limits, sandboxed, max(1, workers)))
        warming.start()
    recorder = Recorder(course, spec)
    recorder.check_gradebook()
    seed = secrets.randbits(31) if seed is None else int(seed)
    wanted = list_students(course, assignment) if not students else list(students)
    jobs, skipped = [], []
    for student in wanted:
        if not force and recorder.already_graded(student, file_sha256(submission_path(course, assignment, student))):
            skipped.append((student, "already graded"))
        else:
            jobs.append(GradeJob(str(course), assignment, student, seed, limits, sandboxed, registry_name))
    recorder.log_run(seed, [job.student for job in jobs])
    if warming is not None:
        warming.join()
    bar = Progress(len(jobs), progress)
    graded: list[SubmissionResult] = []

    client = executor = None
    if cluster:
        from distributed import Client

        client = Client(cluster)
        submit = lambda job: client.submit(grade_submission, job, pure=False)  # noqa: E731
    else:
        executor = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="grader")
        submit = lambda job: executor.submit(grade_submission, job)  # noqa: E731
    in_flight: dict = {}
    limit = max(1, workers) * 2 if not cluster else 1_000_000
    queue = list(jobs)
    try:
        while queue or in_flight:
            while queue and len(in_flight) < limit:
                job = queue.pop(0)
                lock = recorder.try_lock(job.student)
                if lock is None:
                    skipped.append((job.student, "being graded by another grader"))
                    bar.step(job.student)
                    continue
                if not force and recorder.already_graded(job.student, file_sha256(
                        submission_path(course, assignment, job.student))):
                    lock.release()
                    skipped.append((job.student, "already graded"))
                    bar.step(job.student)
                    continue
                in_flight[submit(job)] = (job, lock)
            if not in_flight:
                break
            done, _ = wait(list(in_flight), return_when=FIRST_COMPLETED) if executor else _dask_wait(in_flight)
            for future in done:
                job, lock = in_flight.pop(future)
                try:
                    graded.append(_collect(future, job, recorder))
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
    return {"graded": graded, "skipped": skipped, "seed": seed, "rerun": rerun}


def _collect(future, job: GradeJob, recorder) -> SubmissionResult:
    """The finished job's result, recorded; any failure here is that submission's grader error."""
    try:
        result = future.result()
    except Exception as err:  # noqa: BLE001 - e.g. a Dask worker died: this submission only
        result = SubmissionResult(job.student, job.assignment, job.seed, complete=False)
        result.add_reason(GRADER_ERROR, f"{type(err).__name__} while running the job; rerun to retry")
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
