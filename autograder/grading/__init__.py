"""Grade an assignment: prepare -> run -> verdict -> record, isolated per submission.

One concern per module:

- `work`: `prepare` builds, once per assignment, everything a worker needs (`AssignmentWork`),
  from `public_files` (the release's public files), `limits` (the chapter's limits and intake
  caps, as `autograder.budgets` layers them) and `check_data` (the tasks, typed `Task`, and
  the public cases with their answers, one `contract.Case` each, encoded by
  `autograder.casefile`: a `CaseSet`); `preparing` runs it in a forked child, which then
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
- here: `grade_assignment`, the queue, the per-submission locks and the gradebook (only
  this process writes it, on one recording thread, so the thread that hands out jobs never
  waits for a recording; the autograded notebook is made in a separate process within the
  caps' ``record_seconds``: `autograder.gradebook.Renderer`).
"""

from __future__ import annotations

import queue
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from autograder import notebook as nbparse
from autograder.gradebook_ids import PLAIN_NAME
from autograder.grading.check_data import (
    CaseSet,
    Task,
    cases_for,
    hidden_case_set,
    hidden_seed,
    public_case_set,
)
from autograder.grading.jobs import GradeJob, make_job
from autograder.grading.limits import effective_limits
from autograder.grading.pool import POOL, SandboxPool, sandbox_key
from autograder.grading.preparing import Preparing
from autograder.grading.public_files import release_files, release_root
from autograder.grading.results import GRADER_ERROR, SubmissionResult, TaskResult
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
    "CaseSet",
    "GradeJob",
    "Preparing",
    "RunRecord",
    "SandboxPool",
    "SubmissionResult",
    "Task",
    "TaskResult",
    "cases_for",
    "effective_limits",
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
) -> dict:
    """Grade every (or the given) submission; returns {"graded": [...], "skipped": [...],
    "seed": s, "rerun": [students with a grader error], "startup_seconds", "grading_seconds"}.
    `progress` is called after each submission is graded or skipped (the CLI draws a bar).
    ``limits``: the instructor's explicit limits, each of which wins over the chapter's: a
    dict of ``Limits`` fields, or a whole ``Limits``; None: the chapter's own."""
    from autograder.gradebook import RENDERER, Recorder

    called = time.monotonic()
    course = Path(course).resolve()
    if sandboxed:
        require_sandbox()  # before any work: say what to install (or to run as root), never run unsandboxed
    spec = nbparse.load_assignment(course, assignment)
    seed = secrets.randbits(31) if seed is None else int(seed)
    wanted = list_students(course, assignment) if not students else list(students)
    preparing = Preparing(course, assignment, seed, limits, sandboxed, registry, spec)
    # nbgrader's gradebook, while the check data is computed
    recorder = Recorder(course, spec, not_graded)
    recorder.check_gradebook()
    recording = None
    if wanted:  # the recording process's imports (about a second) while the check data is computed
        recording = threading.Thread(target=RENDERER.start, name="recording")
        recording.start()
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
        if not PLAIN_NAME.match(student):  # a folder made by hand: never into the gradebook
            skipped.append((ascii(student)[:60], "not a plain student id (letters, digits, ._@+-)"))
        elif not force and recorder.already_graded(
            student, make_job(course, assignment, student, work.limits.notebook_bytes).sha256
        ):
            skipped.append((student, "already graded"))
        else:
            jobs.append(student)
    recorder.log_run(seed, jobs)
    preparing.plan(jobs)  # each job's hidden cases are made ahead, in this order
    if warming is not None:
        warming.join()
    if recording is not None:
        recording.join()
    startup = time.monotonic() - called  # the check data computed, the sandboxes started
    graded: list[SubmissionResult] = []
    done = 0
    counting = threading.Lock()

    def step(student: str) -> None:
        nonlocal done
        with counting:
            done += 1
            if progress:
                progress(student, done, len(jobs))

    # finished jobs are recorded on their own thread (the recording itself runs in a separate
    # process, `gradebook.Renderer`), so this one goes on handing out jobs meanwhile
    finished: queue.Queue = queue.Queue()

    def record_finished() -> None:
        while (item := finished.get()) is not None:
            future, job, lock = item
            try:
                graded.append(_collect(future, job, work, recorder))
            finally:
                lock.release()
            step(job.student)

    recorder_thread = threading.Thread(target=record_finished, name="recorder")
    recorder_thread.start()
    scheduler = Dask(work, cluster) if cluster else Local(work, workers, keep_sandboxes)
    in_flight: dict = {}
    waiting = list(jobs)
    try:
        while waiting or in_flight:
            while waiting and len(in_flight) < scheduler.in_flight:
                student = waiting.pop(0)
                lock = recorder.try_lock(student)
                if lock is None:
                    skipped.append((student, "being graded by another grader"))
                    step(student)
                    continue
                job = make_job(course, assignment, student, work.limits.notebook_bytes)
                if not force and recorder.already_graded(student, job.sha256):
                    lock.release()
                    skipped.append((student, "already graded"))
                    step(student)
                    continue
                job = _with_hidden(job, preparing)
                in_flight[scheduler.submit(job)] = (job, lock)
            if not in_flight:
                break
            for future in scheduler.wait(list(in_flight)):
                job, lock = in_flight.pop(future)
                finished.put((future, job, lock))
    finally:
        finished.put(None)
        recorder_thread.join()
        scheduler.close()
        RENDERER.close()
        preparing.close()
    recorder.log_timings({r.student: r.seconds for r in graded})
    rerun = [r.student for r in graded if not r.complete]
    return {
        "graded": graded,
        "skipped": skipped,
        "seed": seed,
        "rerun": rerun,
        "startup_seconds": startup,
        "grading_seconds": time.monotonic() - called - startup,  # first job to last record
    }


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
