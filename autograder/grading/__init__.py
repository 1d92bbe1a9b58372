"""Grade an assignment: prepare -> run -> verdict -> record, isolated per submission.

One concern per module:

- `work`: `prepare` builds, once per assignment, everything a worker needs (`AssignmentWork`),
  from `public_files` (the release's public files), `limits` (the chapter's limits and intake
  caps, as `autograder.sandbox.budgets` layers them) and `check_data` (the tasks, typed `Task`, and
  the public cases with their answers, one `contract.Case` each, encoded by
  `autograder.checking.casefile`: a `CaseSet`); `preparing` runs it in a forked child, which then
  makes each submission's own hidden cases (`check_data.hidden_seed`: the batch seed and the
  student id); `jobs`: a `GradeJob` carries one submission's bytes and its hidden cases.
  Work and jobs pickle.
- `measure`: a chapter's reference time T, which its budgets derive from (a command).
- `run`: `run_program` drives the sandbox within the submission's wall-clock budget, kept on
  the trusted side: the public cases first, then the hidden ones in fresh processes, whose
  cell outputs are dropped; a cell or task that times out or crashes is skipped and the rest
  rerun.
- `verdict`: `judge` compares every returned value with the reference on the trusted side,
  with the contract's messages only.
- `submission`: `grade_submission(job, work)` = parse, run, verdict; it never raises:
  anything that goes wrong on the trusted side is the reason "grader error" for that
  submission alone, which is then not recorded (a rerun retries it).
- `pool`: the started sandboxes of this process, reused across jobs.
- `schedule`: local threads or a Dask cluster behind one interface.
- `results`: the typed results (`TaskResult`, `SubmissionResult`).
- `overrides`: the limits an instructor gave for named students, recorded and applied again
  in every later run (a run groups its students by their limits: one batch per group).
- here: `grade_assignment`, in three steps: `_StartUp` (the check data, the recording
  process, the sandboxes and nbgrader's gradebook, each begun as soon as it can; the
  gradebook is checked while the first jobs run), `_Triage`
  (which submissions go out, each read once, under its lock as its job goes out) and
  `_Batch` (the queue of jobs, and the gradebook: only this process writes it, on one
  recording thread, so the thread that hands out jobs never waits for a recording; the
  autograded notebook is made in a separate process within the caps'
  ``record_seconds``: `autograder.course.rendering.Renderer`).
"""

from __future__ import annotations

import os
import queue
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from autograder.checking.assignment_spec import load_assignment
from autograder.checking.gradebook_ids import PLAIN_NAME
from autograder.checking.notebook import DEFAULT_CAPS
from autograder.checking.results import GRADER_ERROR, BatchResult, SubmissionResult, TaskResult
from autograder.grading import overrides
from autograder.grading.check_data import (
    CaseSet,
    Task,
    cases_for,
    hidden_case_set,
    hidden_seed,
    public_case_set,
)
from autograder.grading.jobs import GradeJob, make_job
from autograder.grading.pool import POOL, SandboxPool, sandbox_key
from autograder.grading.preparing import Preparing
from autograder.grading.public_files import release_files, release_root
from autograder.grading.run import END_REASONS, LOST_RERUNS, RunRecord, run_program
from autograder.grading.schedule import Dask, Local
from autograder.grading.submission import grade_submission
from autograder.grading.verdict import judge, not_graded
from autograder.grading.work import REGISTRY, AssignmentWork, prepare
from autograder.sandbox import Limits, preload_for, require_sandbox

__all__ = [
    "END_REASONS",
    "GRADER_ERROR",
    "LOST_RERUNS",
    "POOL",
    "REGISTRY",
    "AssignmentWork",
    "BatchResult",
    "CaseSet",
    "GradeJob",
    "Preparing",
    "RunRecord",
    "SandboxPool",
    "SubmissionResult",
    "Task",
    "TaskResult",
    "cases_for",
    "grade_assignment",
    "grade_submission",
    "judge",
    "hidden_case_set",
    "hidden_seed",
    "list_students",
    "make_job",
    "prepare",
    "public_case_set",
    "run_program",
    "sandbox_key",
]

#: called after each submission is graded or skipped: (student, done, total)
ProgressCallback = Callable[[str, int, int], None]

#: why a folder of submitted/ is not graded (made by hand: never into the gradebook)
NOT_PLAIN = "not a plain student id (letters, digits, ._@+-)"


def list_students(course: Path, assignment: str) -> list[str]:
    root = Path(course) / "submitted"
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / assignment).is_dir())


def grade_assignment(
    course,
    assignment: str,
    *,
    workers: int = 2,
    students=None,
    force: bool = False,
    cluster: str | None = None,
    sandboxed: bool = True,
    limits: Limits | dict | None = None,
    seed: int | None = None,
    progress: ProgressCallback | None = None,
    registry: ModuleType = REGISTRY,
    keep_sandboxes: bool = False,
) -> BatchResult:
    """Grade every (or the given) submission: what the batch came to (``BatchResult``).
    `progress` is called after each submission is graded or skipped (the CLI draws a bar).
    ``limits``: the instructor's explicit limits, each of which wins over the chapter's: a
    dict of ``Limits`` and ``Caps`` fields, or a whole ``Limits``; None: the chapter's own.
    A student with limits recorded for them (`overrides.remember`: the CLI records what is
    given with ``--student``) is graded with them, under a dict ``limits`` (which win): a
    later ``--force`` for the class keeps one student's ``--max-notebook-mb``."""
    called = time.monotonic()
    course = Path(course).resolve()
    if sandboxed:
        require_sandbox()  # before any work: say what to install (or to run as root), never run unsandboxed
    spec = load_assignment(course, assignment)
    seed = secrets.randbits(31) if seed is None else int(seed)
    wanted = list_students(course, assignment) if not students else list(students)
    if isinstance(limits, Limits):
        groups = [(limits, wanted)]
    else:
        groups = overrides.for_students(course, assignment, wanted, dict(limits or {}))
    outcomes, done = [], 0
    for number, (group_limits, group) in enumerate(groups):
        later = sum(len(g) for _l, g in groups[number + 1 :])
        outcome = _grade_group(
            course,
            spec,
            group,
            seed,
            group_limits,
            _offset(progress, done, later),
            workers=workers,
            force=force,
            cluster=cluster,
            sandboxed=sandboxed,
            registry=registry,
            keep_sandboxes=keep_sandboxes,
        )
        done += len(outcome.graded) + len(outcome.skipped)
        outcomes.append(outcome)
    if len(outcomes) == 1:
        return outcomes[0]
    startup = sum(o.startup_seconds for o in outcomes)
    return BatchResult(
        [r for o in outcomes for r in o.graded],
        [s for o in outcomes for s in o.skipped],
        seed,
        startup,
        time.monotonic() - called - startup,
    )


def _offset(progress: ProgressCallback | None, before: int, later: int):
    """A group's progress as part of the whole run's: ``before`` done, ``later`` to come."""
    if progress is None or (not before and not later):
        return progress
    return lambda student, done, total: progress(student, before + done, before + total + later)


def _grade_group(
    course: Path,
    spec,
    wanted: list[str],
    seed: int,
    limits,
    progress,
    *,
    workers: int,
    force: bool,
    cluster: str | None,
    sandboxed: bool,
    registry: ModuleType,
    keep_sandboxes: bool,
) -> BatchResult:
    """Grade ``wanted``, all with the same ``limits``: one batch."""
    called = time.monotonic()
    start = _StartUp(course, spec, seed, limits, sandboxed, registry)
    scheduler = None
    try:
        start.begin(max(1, workers) if wanted and not cluster else 0, recording=bool(wanted))
        recorder = start.recorder()
        triage = _Triage(recorder, start.preparing.limits(), force)
        jobs, skipped = triage.first_look(wanted)  # while the check data is computed
        work = start.preparing.work()
        triage.caps = work.caps  # what is dropped with a note, for the jobs that go out
        recorder.log_run(seed, jobs)  # a run whose check data could not be made logs nothing
        start.preparing.plan(jobs)  # each job's hidden cases are made ahead, in this order
        start.wait()
        startup = time.monotonic() - called  # the check data computed, the sandboxes started
        scheduler = Dask(work, cluster) if cluster else Local(work, workers, keep_sandboxes)
        batch = _Batch(work, triage, start.preparing, progress, skipped, len(jobs))
        batch.run(jobs, scheduler, start.gradebook_checked)
        start.gradebook_checked()  # also when nothing was recorded: a batch without jobs
    finally:
        start.close(sandboxes_too=scheduler is None and not keep_sandboxes)
    recorder.log_timings({r.student: r.seconds for r in batch.graded})
    # grading_seconds: first job to last record
    return BatchResult(
        batch.graded, batch.skipped, seed, startup, time.monotonic() - called - startup
    )


class _StartUp:
    """Everything a grading call needs before its first job, each begun as soon as it can:
    the check data in a forked child (`Preparing`: made first, as a process forks only while
    it has one thread), then on threads of their own the recording process's imports (about
    half a second) and this process's sandboxes (as soon as the chapter's limits are known).
    nbgrader's gradebook is checked on a thread too (nbgrader's API and SQLAlchemy take
    about 0.4 s of CPU to import, the longest of these): the first jobs do not wait for it,
    only the first recording does (`gradebook_checked`), so a gradebook that lacks the
    assignment still records nothing."""

    def __init__(self, course: Path, spec, seed: int, limits, sandboxed: bool, registry):
        self.course, self.spec, self.sandboxed = course, spec, sandboxed
        self.preparing = Preparing(course, spec.assignment, seed, limits, sandboxed, registry, spec)
        self._threads: list[threading.Thread] = []
        self._checking: threading.Thread | None = None
        self._gradebook_error: BaseException | None = None

    def begin(self, sandboxes: int, recording: bool) -> None:
        """Start the recording process (if anything may be recorded) and ``sandboxes``
        sandboxes (none: a Dask cluster starts its own), each on a thread."""
        from autograder.course.rendering import RENDERER

        if recording:
            self._spawn("recording", RENDERER.start)
        if sandboxes:
            self._spawn("warming", self._warm, sandboxes)

    def _spawn(self, name: str, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, name=name)
        thread.start()
        self._threads.append(thread)

    def _warm(self, count: int) -> None:
        try:
            limits = self.preparing.limits()
        except BaseException:  # noqa: BLE001 - the caller gets the same error from `work()`
            return
        files = release_files(self.course, self.spec.assignment)
        key = (
            release_root(self.spec.assignment, files),
            limits,
            self.sandboxed,
            preload_for(self.spec.imports),
        )
        POOL.warm(key, count)

    def recorder(self):
        """The assignment's `gradebook.Recorder`; its gradebook rows are checked on a thread
        (`gradebook_checked` waits for that)."""
        from autograder.course.gradebook import Recorder

        recorder = Recorder(self.course, self.spec, not_graded)
        self._checking = threading.Thread(target=self._check, args=(recorder,), name="gradebook")
        self._checking.start()
        return recorder

    def _check(self, recorder) -> None:
        try:
            recorder.check_gradebook()
        except BaseException as err:  # noqa: BLE001 - raised again by `gradebook_checked`
            self._gradebook_error = err

    def gradebook_checked(self) -> None:
        """Once the gradebook is checked; raises what the check raised (e.g. the assignment
        was never released), every time it is asked."""
        if self._checking is not None:
            self._checking.join()
        if self._gradebook_error is not None:
            raise self._gradebook_error

    def wait(self) -> None:
        """Until the recording process and the sandboxes are started."""
        for thread in self._threads:
            thread.join()

    def close(self, sandboxes_too: bool) -> None:
        """The recording process and the check data's child, ended; ``sandboxes_too``: the
        started sandboxes too (a start-up that failed; else the scheduler closes them)."""
        from autograder.course.rendering import RENDERER

        self.wait()
        if self._checking is not None:
            self._checking.join()
        RENDERER.close()
        self.preparing.close()
        if sandboxes_too:
            POOL.close()


class _Triage:
    """Which submissions go out, each notebook read once where it can be: a first look before
    the first job (what the run log, the hidden cases made ahead and the progress bar count),
    then, under the submission's lock as its job goes out, the job itself. Only a submission
    with an autograded notebook is read at the first look (to compare its bytes with the
    graded ones); what the first look saw is read again only if it changed since (another
    grader recorded it, or the student's file changed). Each read streams the file, at most
    ``limits.notebook_file_bytes``, skipping its saved outputs as they pass, and keeps at most
    ``limits.notebook_bytes`` of the rest (`intake.read_notebook`): the memory of triage does
    not grow with a notebook's outputs."""

    def __init__(self, recorder, limits: Limits, force: bool):
        self.recorder, self.limits, self.force = recorder, limits, force
        self.caps = DEFAULT_CAPS  # the chapter's, once its work is made (the first look needs none)
        self._looked: dict = {}  # student -> (SHA-256 read or None, its autograded file then)

    def first_look(self, wanted: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
        """(the students whose jobs go out, in order; (student, why) of those skipped)."""
        jobs, skipped = [], []
        for student in wanted:
            if not PLAIN_NAME.match(student):  # a folder made by hand: never into the gradebook
                skipped.append((ascii(student)[:60], NOT_PLAIN))
            elif not self.force and self._graded_at_first_look(student):
                skipped.append((student, "already graded"))
            else:
                jobs.append(student)
        return jobs, skipped

    def _graded_at_first_look(self, student: str) -> bool:
        autograded = _file_identity(self.recorder.autograded_path(student))
        if autograded is None:  # never recorded: its job reads the notebook, once
            self._looked[student] = (None, None)
            return False
        sha256 = self._job(student).sha256
        self._looked[student] = (sha256, autograded)
        return self.recorder.already_graded(student, sha256)

    def take(self, student: str):
        """(the student's job, its lock), or why it is skipped now."""
        lock = self.recorder.try_lock(student)
        if lock is None:
            return "being graded by another grader"
        job = self._job(student)
        if not self.force and self._graded_since(student, job.sha256):
            lock.release()
            return "already graded"
        return job, lock

    def _graded_since(self, student: str, sha256: str) -> bool:
        """Whether these bytes are graded now, under the lock: the first look's answer (not
        graded) while neither the bytes nor the autograded notebook changed since."""
        looked = self._looked.pop(student, None)
        if looked is not None and looked[0] in (None, sha256):
            if _file_identity(self.recorder.autograded_path(student)) == looked[1]:
                return False
        return self.recorder.already_graded(student, sha256)

    def _job(self, student: str) -> GradeJob:
        course, assignment = self.recorder.course, self.recorder.spec.assignment
        limits = self.limits
        return make_job(
            course,
            assignment,
            student,
            limits.notebook_bytes,
            limits.notebook_file_bytes,
            self.caps,
        )


def _file_identity(path: Path) -> tuple | None:
    """What changes whenever a file is replaced or written (None: no file)."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


class _Batch:
    """The jobs handed out, at most ``scheduler.in_flight`` at once, and each finished one
    recorded on a thread of its own (the recording itself runs in a separate process,
    `rendering.Renderer`), so the thread that hands out jobs never waits for a recording."""

    def __init__(self, work, triage: _Triage, preparing, progress, skipped: list, total: int):
        self.work, self.triage, self.preparing, self.progress = work, triage, preparing, progress
        self.graded: list[SubmissionResult] = []
        self.skipped = skipped
        self._total, self._done, self._counting = total, 0, threading.Lock()
        self._finished: queue.Queue = queue.Queue()
        self._unrecordable = threading.Event()  # the gradebook check failed: hand out no more

    def run(self, students: list[str], scheduler, gradebook_checked: Callable[[], None]) -> None:
        """Hand out the jobs and record each finished one; nothing is recorded before
        ``gradebook_checked()`` returns, and nothing at all if it raises (the caller raises
        it again: the jobs handed out by then are dropped, their locks released)."""
        recording = threading.Thread(
            target=self._record_finished, args=(gradebook_checked,), name="recorder"
        )
        recording.start()
        try:
            self._hand_out(students, scheduler)
        finally:
            self._finished.put(None)
            recording.join()
            scheduler.close()

    def _hand_out(self, students: list[str], scheduler) -> None:
        in_flight: dict = {}
        waiting = deque(students)
        while waiting or in_flight:
            while waiting and len(in_flight) < scheduler.in_flight:
                if self._unrecordable.is_set():
                    waiting.clear()
                    break
                student = waiting.popleft()
                taken = self.triage.take(student)
                if isinstance(taken, str):
                    self.skipped.append((student, taken))
                    self._step(student)
                    continue
                job, lock = taken
                job = _with_hidden(job, self.preparing)
                in_flight[scheduler.submit(job)] = (job, lock)
            if not in_flight:
                break
            for future in scheduler.wait(list(in_flight)):
                self._finished.put((future, *in_flight.pop(future)))

    def _record_finished(self, gradebook_checked: Callable[[], None]) -> None:
        recorder, checked = self.triage.recorder, False
        while (item := self._finished.get()) is not None:
            future, job, lock = item
            try:
                if not checked:
                    try:
                        gradebook_checked()
                        checked = True
                    except BaseException:  # noqa: BLE001 - the caller raises it
                        self._unrecordable.set()
                if checked:
                    self.graded.append(_collect(future, job, self.work, recorder))
            finally:
                lock.release()
            self._step(job.student)
        recorder.close()

    def _step(self, student: str) -> None:
        with self._counting:
            self._done += 1
            if self.progress:
                self.progress(student, self._done, self._total)


def _with_hidden(job: GradeJob, preparing: Preparing) -> GradeJob:
    """The job with its own hidden cases; without them if they could not be made (the job
    then ends as a grader error, for this submission alone)."""
    if job.refused:
        return job
    try:
        return job.with_hidden(preparing.hidden_for(job.student))
    except Exception:  # noqa: BLE001 - grade_submission says "grader error" for it
        return job


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
        recorder.record(result, job.notebook, work.caps)
    except Exception as err:  # noqa: BLE001
        result.complete = False
        result.add_reason(GRADER_ERROR, f"{type(err).__name__} while recording; rerun to retry")
    return result
