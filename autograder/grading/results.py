"""What a graded submission becomes: one typed result per test cell and per submission.

These are what the workers send back (they pickle), what the gradebook records and what the
CLI's summary table shows. A case's outcome is a ``contract.Verdict`` (the one shape it has
from the judge to the report); a test cell's points are derived from its verdicts, and a
submission's automatic score from its cells' points: neither is ever set by hand."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from autograder.course.gradebook import CASE_FIELDS
from autograder.student.contract import Verdict

#: the reason for a failure on the trusted side (not the submission's): never recorded
GRADER_ERROR = "grader error"


@dataclass
class TaskResult:
    """One test cell: its checks' verdicts, one per case (or one per check call that was not
    graded), the feedback ``message`` and the failing cases' messages that are safe to show
    (``wrong``). It earns its points when it has verdicts and every one passed."""

    grade_id: str
    max_points: float
    message: str
    cases: list[Verdict] = field(default_factory=list)
    wrong: list = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.cases) and all(v.passed for v in self.cases)

    @property
    def points(self) -> float:
        return self.max_points if self.passed else 0.0

    def to_record(self) -> dict:
        """As the gradebook's record holds it: a case as its named fields ``check``, ``case``,
        ``hidden`` and ``passed`` (``gradebook.recorded_case`` reads them back; no message: a
        hidden case's full message is shown only as ``judging.hidden_shown`` allows, in
        ``wrong``)."""
        return {
            "grade_id": self.grade_id,
            "points": self.points,
            "max_points": self.max_points,
            "message": self.message,
            "cases": [{name: getattr(v, name) for name in CASE_FIELDS} for v in self.cases],
            "wrong": list(self.wrong),
            "passed": self.passed,
        }


@dataclass
class SubmissionResult:
    student: str
    assignment: str
    seed: int
    score: float = 0.0  # ``points`` once graded; nbgrader's total once recorded (read_totals)
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

    @property
    def points(self) -> float:
        """The automatic score: the sum of the test cells' points."""
        return float(sum(t.points for t in self.tasks))

    def to_record(self) -> dict:
        """As the gradebook records it, in the autograded notebook's metadata (the one place a
        submission's result becomes JSON)."""
        record = asdict(self)
        for name in self.UNRECORDED:
            record.pop(name)
        record["tasks"] = [t.to_record() for t in self.tasks]
        return record


@dataclass
class BatchResult:
    """What one grading call came to (``grade_assignment``): each submission graded (its
    ``SubmissionResult``, recorded unless incomplete), each one skipped with why, the batch's
    hidden seed and its two durations (the check data and sandboxes ready; first job to last
    record)."""

    graded: list[SubmissionResult]
    skipped: list[tuple[str, str]]
    seed: int
    startup_seconds: float
    grading_seconds: float

    @property
    def rerun(self) -> list[str]:
        """The students whose grading met a grader error: a rerun grades them again."""
        return [r.student for r in self.graded if not r.complete]
