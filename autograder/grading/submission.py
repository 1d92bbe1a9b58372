"""One submission: parse, run with retries (the public cases, then its own hidden cases in
fresh processes: ``grading.run``), verdict. `grade_submission` is what a local thread or a
Dask worker runs; it never raises."""

from __future__ import annotations

import time
import traceback
from pathlib import Path

from autograder.checking import messages
from autograder.checking import notebook as nbparse
from autograder.checking.program import DROPPED, build_program
from autograder.checking.results import GRADER_ERROR, SubmissionResult
from autograder.grading.jobs import GradeJob
from autograder.grading.pool import POOL, sandbox_key
from autograder.grading.run import run_program
from autograder.grading.verdict import cell_outputs, judge, not_graded
from autograder.grading.work import AssignmentWork


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
        result.tasks = []
        where = traceback.extract_tb(err.__traceback__)[-1]
        result.add_reason(
            GRADER_ERROR,
            f"{type(err).__name__} in the grader at "
            f"{Path(where.filename).name}:{where.lineno}; rerun to retry",
        )
    result.score = result.points  # derived here only (the gradebook's total replaces it)
    result.seconds = time.monotonic() - started
    return result


def _grade(job: GradeJob, work: AssignmentWork, result: SubmissionResult) -> None:
    spec = work.spec
    if job.refused:
        return not_graded(spec, result, "invalid notebook", job.refused)
    try:
        submission, dropped = nbparse.read_graded(job.notebook, work.caps)
    except nbparse.InvalidNotebook as err:
        return not_graded(spec, result, "invalid notebook", str(err))
    for note in (*job.dropped, *dropped):  # dropped as it was read, then on the parse
        result.add_reason(DROPPED, note)
    program = build_program(spec, submission)
    result.unanswered = nbparse.unanswered_manual_cells(spec, submission)
    for note in program.tampering:
        result.add_reason("tampered cell", note)
    key = sandbox_key(work)
    release_dir = f"/release/{work.assignment}" if work.sandboxed else str(key[0] / work.assignment)
    request = {"cells": program.cells, "release_dir": release_dir if work.release_files else None}
    if job.hidden is None:
        raise RuntimeError("the job came without its hidden cases")
    sandbox = POOL.acquire(key)
    try:
        record = run_program(sandbox, request, work.check_specs, work.public, job.hidden)
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
    language = messages.language_of(submission.metadata)  # the feedback's; hostile: checked
    cell_outputs(program, record, result, work.limits.cell_output_chars, language)
    all_cases = [p + h for p, h in zip(work.public.cases, job.hidden.cases, strict=True)]
    judge(spec, work.check_specs, all_cases, record, result, language, program)
