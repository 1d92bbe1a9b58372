"""What a graded submission becomes: one typed result per test cell, per submission and per
grading call.

These are what the workers send back (they pickle), what the gradebook records, what the
CLI's summary table shows and what the report reads back. A case's outcome is a
``contract.Verdict`` (the one shape it has from the judge to the report); a test cell's points
are derived from its verdicts, and a submission's automatic score from its cells' points:
neither is ever set by hand. A result becomes JSON in one place, the autograded notebook's
metadata (``SubmissionResult.to_record``), and is read back from there
(``SubmissionResult.from_record``)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from autograder.student.contract import Verdict

#: the reason for a failure on the trusted side (not the submission's): never recorded
GRADER_ERROR = "grader error"


#: a case's fields in a grading record, named (``TaskResult.to_record``): records written before
#: grader v5 hold each case as a list of these four values in this order
CASE_FIELDS = ("check", "case", "hidden", "passed")


def recorded_case(entry) -> Verdict | None:
    """One case of a record's test cell, whichever grader wrote it: an object of its named
    fields now, the list [check, case, hidden, passed] before (an instructor's gradebook of an
    earlier term still makes its report); None for anything else (the record lives in a
    notebook an instructor may have edited). No message: a record holds none."""
    if isinstance(entry, list) and len(entry) == len(CASE_FIELDS):
        entry = dict(zip(CASE_FIELDS, entry))
    if not isinstance(entry, dict) or not all(name in entry for name in CASE_FIELDS):
        return None
    check, case, hidden, passed = (entry[name] for name in CASE_FIELDS)
    if not (isinstance(check, str) and isinstance(case, str)):
        return None
    return Verdict(check, case, bool(hidden), bool(passed), "")


def _number(value, default: float = 0.0) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(value) else default


def _texts(value) -> list[str]:
    return [str(x) for x in value] if isinstance(value, list) else []


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
        ``hidden`` and ``passed`` (``recorded_case`` reads them back; no message: a
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

    @classmethod
    def from_record(cls, record) -> TaskResult | None:
        """A test cell as ``to_record`` wrote it (None where it is not one); its points and
        pass derived again from its cases."""
        if not isinstance(record, dict) or not isinstance(record.get("grade_id"), str):
            return None
        cases = [v for v in map(recorded_case, record.get("cases") or []) if v is not None]
        message = record.get("message")
        return cls(
            record["grade_id"],
            _number(record.get("max_points")),
            message if isinstance(message, str) else "",
            cases,
            _texts(record.get("wrong")),
        )


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

    @classmethod
    def from_record(cls, record) -> SubmissionResult | None:
        """A submission's result as ``to_record`` wrote it into the autograded notebook, or
        None where that is not one (the record lives in a notebook an instructor may have
        edited): each field of its type, what is not dropped."""
        if not isinstance(record, dict) or not isinstance(record.get("student"), str):
            return None
        tasks = [t for t in map(TaskResult.from_record, record.get("tasks") or []) if t]
        seed, assignment = record.get("seed"), record.get("assignment")
        return cls(
            record["student"],
            assignment if isinstance(assignment, str) else "",
            seed if isinstance(seed, int) and not isinstance(seed, bool) else 0,
            _number(record.get("score")),
            _number(record.get("max_score")),
            _texts(record.get("reasons")),
            _texts(record.get("notes")),
            tasks,
            sha256=str(record.get("sha256") or ""),
            unanswered=_texts(record.get("unanswered")),
            complete=record.get("complete") is not False,
            cell_error=str(record.get("cell_error") or ""),
        )


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
