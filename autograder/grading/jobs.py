"""One submission as a job: its student, its notebook as it is graded (read once, as a
stream: its saved outputs dropped as they pass, the cap applied to what is left), the
SHA-256 of the file handed in and what was dropped, or why the notebook was not read; and its own hidden cases, which the trusted
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
    """One submission: its graded bytes travel with the job (the notebook without its saved
    outputs); ``sha256``: of the file as handed in. ``refused``: why its notebook was not read
    (over the ceiling or the cap, not JSON, not a regular file, missing); then ``notebook``
    is empty. ``dropped``: the fixed sentences saying what was dropped before grading (when
    over a cap). ``hidden``: this submission's hidden cases (None until attached)."""

    student: str
    notebook: bytes
    sha256: str
    refused: str = ""
    hidden: CaseSet | None = None
    dropped: tuple[str, ...] = ()

    def with_hidden(self, hidden: CaseSet) -> GradeJob:
        return dataclasses.replace(self, hidden=hidden)


def make_job(
    course: Path,
    assignment: str,
    student: str,
    cap: int,
    ceiling: int = intake.NOTEBOOK_CEILING,
    caps: nbparse.Caps = nbparse.DEFAULT_CAPS,
) -> GradeJob:
    """The submission as a job: its notebook streamed once, at most ``ceiling`` bytes
    (``Limits.notebook_file_bytes``), its saved outputs skipped as they pass, and at most
    ``cap`` bytes of what is left kept (``Limits.notebook_bytes``): what is graded."""
    path = submission_path(course, assignment, student)
    try:
        read = intake.read_notebook(path, cap, ceiling=ceiling, caps=caps)
    except nbparse.InvalidNotebook as err:
        return GradeJob(student, b"", intake.refused_digest(path), refused=str(err))
    return GradeJob(student, read.data, read.sha256, dropped=read.notes)


def submission_path(course: Path, assignment: str, student: str) -> Path:
    return Path(course) / "submitted" / student / assignment / f"{assignment}.ipynb"
