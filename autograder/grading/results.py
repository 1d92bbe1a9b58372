"""What a graded submission becomes: one typed result per test cell and per submission.

These are what the workers send back (they pickle), what the gradebook records and what the
CLI's summary table shows."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import NamedTuple

#: the reason for a failure on the trusted side (not the submission's): never recorded
GRADER_ERROR = "grader error"


class CaseVerdict(NamedTuple):
    """One case of one check call: recorded in the gradebook's record as the JSON list
    [check, case, hidden, passed] (the report reads it back in that order)."""

    check: str
    case: str
    hidden: bool
    passed: bool


@dataclass
class TaskResult:
    grade_id: str
    points: float
    max_points: float
    message: str
    cases: list[CaseVerdict] = field(default_factory=list)
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
    cell_error: str = ""  # the first submitted cell's error, as its feedback says it

    #: not recorded in the autograded notebook: numbers the submission sets as it likes (it
    #: may sleep or crash on purpose while it holds its hidden inputs), which its record
    #: could otherwise carry to whoever reads the notebook
    UNRECORDED = ("seconds", "sandbox_starts", "cell_outputs")

    def add_reason(self, reason: str, note: str) -> None:
        if reason not in self.reasons:
            self.reasons.append(reason)
        if note not in self.notes:
            self.notes.append(note)

    def to_record(self) -> dict:
        record = asdict(self)
        for name in self.UNRECORDED:
            record.pop(name)
        return record
