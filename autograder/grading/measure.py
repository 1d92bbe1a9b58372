"""Measure a chapter's reference time T: ``python -m autograder.grading.measure [ID ...]``.

T, from which every budget derives (``autograder.sandbox.budgets``, ``derived``), is the wall time of
the instructor's solved source notebook (``solved_notebook``) graded as a submission by this
grader in a warm sandbox: the slowest of ``RUNS`` runs (``measure``), then recorded in the
chapter's plug-in (``Chapter.reference_seconds``). It grades, so it lives in the grading
package: ``autograder.sandbox.budgets`` only holds the formula and never imports the grader.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

from autograder.sandbox import Limits
from autograder.sandbox.budgets import RUNS, derived


def solved_notebook(course: Path, assignment: str) -> bytes:
    """The released notebook with every solution cell holding the instructor's solution (the
    source notebook's cell without its SOLUTION marker lines): what a perfect student hands in."""
    import nbformat

    released = course / "release" / assignment / f"{assignment}.ipynb"
    if not released.is_file():
        raise FileNotFoundError(
            f"{released} does not exist: run `python -m autograder.course.release --course {course}` first"
        )
    source = nbformat.read(course / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    answers = {
        cell.metadata["nbgrader"]["grade_id"]: "\n".join(
            line for line in cell.source.split("\n") if " SOLUTION" not in line
        )
        for cell in source.cells
        if cell.metadata.get("nbgrader", {}).get("solution")
    }
    notebook = nbformat.read(released, as_version=4)
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id]
    return nbformat.writes(notebook).encode()


def measure(course: Path, assignment: str, runs: int = RUNS) -> list[float]:
    """Grade the solved source notebook ``runs`` times in one warm sandbox, under the default
    (generous) limits: the wall seconds of each run. Raises if the reference loses a point."""
    from autograder import grading

    course = Path(course)
    solved = solved_notebook(course, assignment)
    work = grading.prepare(course, assignment, seed=1, limits=Limits())
    grading.POOL.warm(grading.sandbox_key(work), 1)
    job = grading.GradeJob("reference", solved, hashlib.sha256(solved).hexdigest())
    job = job.with_hidden(
        grading.hidden_case_set(work.spec, grading.REGISTRY, grading.hidden_seed(1, job.student))
    )
    seconds = []
    try:
        for _ in range(runs):
            started = time.monotonic()
            result = grading.grade_submission(job, work)
            seconds.append(time.monotonic() - started)
            if result.score != result.max_score or result.reasons:
                raise RuntimeError(
                    f"{assignment}: the solved source notebook scored {result.score:g} of "
                    f"{result.max_score:g} ({', '.join(result.reasons) or 'no reason'})"
                )
    finally:
        grading.POOL.close()
    return seconds


def main(argv=None) -> int:
    from autograder.checking import checks

    parser = argparse.ArgumentParser(
        prog="python -m autograder.grading.measure",
        description="measure each chapter's reference time T (the budgets derive from it)",
    )
    parser.add_argument("assignments", nargs="*", help="default: every chapter")
    parser.add_argument("--course", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--runs", type=int, default=RUNS)
    args = parser.parse_args(argv)
    for assignment in args.assignments or checks.ASSIGNMENTS:
        seconds = measure(Path(args.course), assignment, args.runs)
        worst = max(seconds)
        budgets = derived(worst)
        print(
            f"{assignment}: runs {', '.join(f'{s:.2f}' for s in seconds)} s; T = {worst:.2f} s "
            f"-> cell/task {budgets['cell_seconds']:.0f} s, submission "
            f"{budgets['submission_seconds']:.0f} s ({os.cpu_count()} CPUs, load average "
            f"{os.getloadavg()[0]:.1f})",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
