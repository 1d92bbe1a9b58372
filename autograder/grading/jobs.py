"""One submission as a job: its student, its notebook's bytes (read once, under the cap) and
their SHA-256, or why the notebook was not read.

A job pickles: its bytes travel to a Dask worker, which needs no course folder; the
autograded notebook is later written from these same bytes, never from the file read again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autograder import intake
from autograder import notebook as nbparse


@dataclass(frozen=True)
class GradeJob:
    """One submission: its bytes travel with the job. ``refused``: why its notebook was not
    read (over the size cap, not a regular file, missing); then ``notebook`` is empty."""

    student: str
    notebook: bytes
    sha256: str
    refused: str = ""


def make_job(course: Path, assignment: str, student: str, cap: int) -> GradeJob:
    """The submission as a job, its notebook read only if it is a regular file of at most
    ``cap`` bytes (``Limits.notebook_bytes``): a bigger one is never read whole."""
    path = submission_path(course, assignment, student)
    try:
        data, digest = intake.read_notebook(path, cap)
    except nbparse.InvalidNotebook as err:
        return GradeJob(student, b"", intake.refused_digest(path), refused=str(err))
    return GradeJob(student, data, digest)


def submission_path(course: Path, assignment: str, student: str) -> Path:
    return Path(course) / "submitted" / student / assignment / f"{assignment}.ipynb"
