"""One submission as a job: its student, its notebook's bytes (read once, under the cap) and
their SHA-256, or why the notebook was not read; and its own hidden cases, which the trusted
side made for this student (``check_data.hidden_case_set``) and attaches before the job goes
out (``with_hidden``).

A job pickles: its bytes travel to a Dask worker, which needs no course folder; the
autograded notebook is later written from these same bytes, never from the file read again.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from autograder.checking import intake
from autograder.checking import notebook as nbparse
from autograder.grading.check_data import CaseSet


@dataclass(frozen=True)
class GradeJob:
    """One submission: its bytes travel with the job. ``refused``: why its notebook was not
    read (over the size cap, not a regular file, missing); then ``notebook`` is empty.
    ``hidden``: this submission's hidden cases (None until attached)."""

    student: str
    notebook: bytes
    sha256: str
    refused: str = ""
    hidden: CaseSet | None = None

    def with_hidden(self, hidden: CaseSet) -> GradeJob:
        return dataclasses.replace(self, hidden=hidden)


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
