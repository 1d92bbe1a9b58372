"""Orchestrate: parse -> sandbox-run -> compare, per submission, over a pool or a Dask cluster.

- `GradeJob` is everything one submission's grading needs (paths, seed, limits); it pickles,
  so the same `grade_submission(job)` runs in a local thread pool or on a Dask worker.
- `make_request` turns the test cells of the *source* notebook into the request the
  sandbox gets: the program's cells and, per check, every public and hidden case encoded as
  JSON + an npz of arrays (no pickle).
- `run_program` drives the sandbox and survives the submission: a cell or a task that times
  out, crashes the worker or floods the output is skipped and the rest is re-run, so one
  infinite loop costs one task, not the submission.
- `judge` compares every returned array with the reference (`checks.expected` /
  `checks.compare`) on the trusted side; a test cell earns its points iff all its cases pass.
- `grade_assignment` lists submissions, skips what is already graded (unless force), takes a
  lock per submission, fans the jobs out and records each result as it arrives.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib
import io
import secrets
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from autograder import notebook as nbparse
from autograder.sandbox import Limits, Sandbox, require_sandbox

REGISTRY = "autograder.checks"
REASONS = ("invalid notebook", "tampered cell", "missing function", "timeout", "fork bomb",
           "memory", "output too large", "input() called", "crash")


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
    """[(case, hidden, expected)] for one check: public cases first, then hidden ones."""
    def make():
        public = [(case, False) for case in reg.public_cases(check)]
        hidden = [(case, True) for case in reg.hidden_cases(check, seed)]
        return [(case, is_hidden, reg.expected(check, case)) for case, is_hidden in public + hidden]
    return _cached((reg.__name__, check, seed), make)


def encode_value(value, arrays: dict, reg) -> dict:
    if isinstance(value, np.ndarray):
        key = f"a{len(arrays)}"
        arrays[key] = value
        return {"t": "array", "k": key}
    if isinstance(value, reg.Seeded):
        return {"t": "seeded", "v": int(value.seed)}
    if isinstance(value, (bool, np.bool_)):
        return {"t": "bool", "v": bool(value)}
    if isinstance(value, (int, np.integer)):
        return {"t": "int", "v": int(value)}
    if isinstance(value, (float, np.floating)):
        return {"t": "float", "v": repr(float(value))}
    if isinstance(value, str):
        return {"t": "str", "v": value}
    if value is None:
        return {"t": "none"}
    raise TypeError(f"a case argument of type {type(value).__name__} cannot be sent to the sandbox: "
                    "use arrays, numbers, strings, None or Seeded")


def _tasks(spec) -> list[tuple[str, str, str]]:
    """(test grade_id, check name, function name) for every check call of every test cell."""
    return [(test.grade_id, check, function) for test in spec.tests for check, function in test.checks]


def make_request(spec, program, reg, seed: int, release_dir: str | None) -> tuple[dict, dict, bytes, list]:
    """(phase one: the cells, phase two: the cases, the cases' npz, [(case, hidden, expected)] per task)."""
    arrays: dict = {}
    tasks, all_cases = [], []
    for _grade_id, check, function in _tasks(spec):
        cases = cases_for(reg, check, seed)
        all_cases.append(cases)
        encoded = [{"args": [encode_value(a, arrays, reg) for a in case.args],
                    "kwargs": {k: encode_value(v, arrays, reg) for k, v in case.kwargs.items()}}
                   for case, _hidden, _expected in cases]
        tasks.append({"check": check, "function": function, "cases": encoded})
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    request = {"cells": program.cells, "release_dir": release_dir}
    return request, {"tasks": tasks}, buffer.getvalue(), all_cases


# ---------------------------------------------------------------------------------------
# run: the sandbox, with skip-and-retry so one bad cell or task costs only itself


@dataclass
class RunRecord:
    cells: dict = field(default_factory=dict)       # program cell -> cell event
    cases: dict = field(default_factory=dict)       # (task, case) -> (header, blob)
    missing: dict = field(default_factory=dict)     # task -> event
    failed_tasks: dict = field(default_factory=dict)  # task -> (reason, note)
    failed_cells: dict = field(default_factory=dict)  # program cell -> (reason, note)
    starts: int = 0


def _kill_reason(run, limits: Limits) -> str:
    if run.ended == "timeout":
        return "fork bomb" if run.processes_at_kill >= max(4, limits.processes // 2) else "timeout"
    return {"output": "output too large"}.get(run.ended, "crash")


def run_program(sandbox: Sandbox, request: dict, cases: dict, blob: bytes, max_attempts: int = 6) -> RunRecord:
    record = RunRecord()
    done_tasks: set = set()
    for _attempt in range(max_attempts):
        starts_before = sandbox.starts
        run = sandbox.run(dict(request, skip_cells=sorted(record.failed_cells)),
                          dict(cases, skip_tasks=sorted(done_tasks | set(record.failed_tasks))), blob)
        record.starts += sandbox.starts - starts_before
        for header, data in run.events:
            event = header.get("ev")
            if event == "cell":
                record.cells[header["cell"]] = header
            elif event == "case":
                record.cases[(header["task"], header["case"])] = (header, data)
            elif event == "task_missing":
                record.missing[header["task"]] = header
            elif event == "task_end":
                done_tasks.add(header["task"])
        if run.ended == "done":
            return record
        reason = _kill_reason(run, sandbox.limits)
        if run.where and run.where[0] == "cell":
            record.failed_cells[run.where[1]] = (reason, run.detail)
        elif run.where and run.where[0] == "task":
            record.failed_tasks[run.where[1]] = (reason, run.detail)
        else:  # died before running anything: nothing more to learn by retrying
            for task in range(len(cases["tasks"])):
                if task not in done_tasks:
                    record.failed_tasks.setdefault(task, (reason, run.detail))
            return record
    for task in range(len(cases["tasks"])):
        if task not in done_tasks:
            record.failed_tasks.setdefault(task, ("crash", "gave up after repeated failures"))
    return record


# ---------------------------------------------------------------------------------------
# judge: trusted-side comparison


def _error_reason(error: dict | None) -> str | None:
    if not error:
        return None
    if error.get("type") == "MemoryError":
        return "memory"
    if error.get("errno") in (27, 28):  # EFBIG / ENOSPC: output or files over the limit
        return "output too large"
    if error.get("type") == "EOFError":
        return "input() called"
    return None


def judge_case(reg, check: str, case, hidden: bool, expected, header: dict, blob: bytes) -> tuple[bool, str]:
    """(passed, message) for one case; hidden messages carry no inputs, values or code."""
    if "error" in header:
        error = header["error"]
        if hidden:  # the student's own message could echo the hidden inputs
            return False, f"case '{case.name}': {check} raised {error.get('type', 'an error')}"
        text = error.get("message", "")
        return False, f"case '{case.name}': {check} raised {error.get('type')}" + (f": {text[:300]}" if text else "")
    if "bad_type" in header:
        if header["bad_type"] == "NoneType" and header.get("structure") is None:
            try:
                reg.normalise(None)
            except ValueError as err:
                return False, f"case '{case.name}': {err}"
        return False, (f"case '{case.name}': {check} returned a {header['bad_type']}, "
                       "not numbers: return NumPy arrays (or a tuple of them)")
    try:
        with np.load(io.BytesIO(blob), allow_pickle=False) as archive:
            arrays = [archive[f"r{i}"] for i in range(int(header.get("n", 0)))]
    except Exception:  # a corrupt archive is the submission's doing
        return False, f"case '{case.name}': the returned value could not be read back"
    value = tuple(arrays) if header.get("structure") == "tuple" else (arrays[0] if arrays else None)
    try:
        got = reg.normalise(value)
    except ValueError as err:
        return False, f"case '{case.name}': {err}"
    verdict = reg.compare(check, case, expected, got, hidden=hidden)
    return bool(verdict.passed), verdict.message


def judge(spec, reg, all_cases, record: RunRecord, result: SubmissionResult) -> None:
    tasks = _tasks(spec)
    per_test: dict = {t.grade_id: [] for t in spec.tests}
    for task_index, (grade_id, check, function) in enumerate(tasks):
        cases = all_cases[task_index]
        outcome = {"check": check, "function": function, "failures_public": [], "failures_hidden": [],
                   "n_public": sum(1 for _c, h, _e in cases if not h), "n_hidden": sum(1 for _c, h, _e in cases if h),
                   "cases": [], "fatal": None}
        if task_index in record.missing:
            found = record.missing[task_index].get("found")
            what = f"is a {found}, not a function" if found else "is not defined"
            outcome["fatal"] = (f"{check}: `{function}` {what} — did the cell that defines it raise an error, "
                                "or was it renamed?")
            result.add_reason("missing function", f"`{function}` {what}")
        elif task_index in record.failed_tasks:
            reason, note = record.failed_tasks[task_index]
            outcome["fatal"] = f"{check}: stopped by the grader ({reason}: {note})"
            result.add_reason(reason, f"{check}: {note}")
        for case_index, (case, hidden, expected) in enumerate(cases):
            entry = record.cases.get((task_index, case_index))
            if outcome["fatal"] or entry is None:
                passed, message = False, outcome["fatal"] or f"case '{case.name}': no result"
            else:
                header, blob = entry
                reason = _error_reason(header.get("error"))
                if reason:
                    result.add_reason(reason, f"{check}, case '{case.name}': {header['error']['type']}")
                passed, message = judge_case(reg, check, case, hidden, expected, header, blob)
            outcome["cases"].append([check, case.name, hidden, passed])
            if not passed:
                outcome["failures_hidden" if hidden else "failures_public"].append(message)
        per_test[grade_id].append(outcome)

    for test in spec.tests:
        outcomes = per_test[test.grade_id]
        passed = bool(outcomes) and all(not o["failures_public"] and not o["failures_hidden"] for o in outcomes)
        lines, wrong, cases = [], [], []
        for o in outcomes:
            cases += o["cases"]
            if o["fatal"]:
                lines.append(o["fatal"])
                wrong.append(o["fatal"])
                continue
            if o["failures_public"]:
                lines += [f"{o['check']}: {m}" for m in o["failures_public"][:3]]
                wrong += o["failures_public"]
            if o["failures_hidden"]:
                k, n = len(o["failures_hidden"]), o["n_hidden"]
                lines.append(f"{o['check']}: hidden check failed on {k} of {n} cases:")
                lines += ["  - " + m for m in o["failures_hidden"][:5]]
                wrong += o["failures_hidden"]
            if not o["failures_public"] and not o["failures_hidden"]:
                lines.append(f"{o['check']}: all {o['n_public']} public and {o['n_hidden']} hidden cases passed")
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
        if event and event.get("output"):
            outputs.append({"output_type": "stream", "name": "stdout", "text": event["output"]})
        if event and event.get("error"):
            error = event["error"]
            reason = _error_reason(error)
            if reason:
                result.add_reason(reason, f"cell {origin + 1}: {error['type']}")
            outputs.append({"output_type": "error", "ename": error["type"], "evalue": error["message"],
                            "traceback": error["text"].splitlines()})
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


def grade_submission(job: GradeJob) -> SubmissionResult:
    """Parse, sandbox-run and judge one submission (never raises for a bad submission)."""
    started = time.monotonic()
    course = Path(job.course)
    reg = registry(job.registry)
    spec = nbparse.load_assignment(course, job.assignment)
    result = SubmissionResult(job.student, job.assignment, job.seed, max_score=spec.max_score)
    path = submission_path(course, job.assignment, job.student)
    result.sha256 = file_sha256(path)
    try:
        submission = nbparse.read_submission(path)
    except nbparse.InvalidNotebook as err:
        result.add_reason("invalid notebook", str(err))
        for test in spec.tests:
            result.tasks.append(TaskResult(test.grade_id, 0.0, test.points, f"not graded: {err}",
                                           [[c, "all cases", False, False] for c, _f in test.checks], [str(err)],
                                           False))
        result.seconds = time.monotonic() - started
        return result
    program = nbparse.build_program(spec, submission)
    result.unanswered = nbparse.unanswered_manual_cells(spec, submission)
    for note in program.tampering:
        result.add_reason("tampered cell", note)
    release_root = course / "release"
    release_dir = None
    if (release_root / job.assignment).is_dir():
        release_dir = f"/release/{job.assignment}" if job.sandboxed else str(release_root / job.assignment)
    request, cases, blob, all_cases = make_request(spec, program, reg, job.seed, release_dir)
    sandbox = POOL.acquire(release_root, job.limits, job.sandboxed)
    try:
        record = run_program(sandbox, request, cases, blob)
    finally:
        POOL.give_back(sandbox)
    result.sandbox_starts = record.starts
    _cell_outputs(program, record, result)
    judge(spec, reg, all_cases, record, result)
    result.seconds = time.monotonic() - started
    return result


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
                    result = future.result()
                    recorder.record(result)
                    graded.append(result)
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
    return {"graded": graded, "skipped": skipped, "seed": seed}


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
