"""The LMS's own files, both ways: the roster in, the grades and the feedback out.

Each file is the one the LMS itself writes or reads, so nothing is reshaped by hand (the
LMS's source or documentation each format follows is cited in tests/test_lms_formats.py):

- `read_canvas_roster`: Canvas's gradebook export (Grades, Export, "Export Entire
  Gradebook"), ``Student, ID, SIS User ID, SIS Login ID, Section, ...``: one student per
  row; the Canvas user id (``ID``) is the ``lms_user_id`` that `collect` and the grade
  import match; the nbgrader id is the SIS login (else the SIS user id, else the Canvas id).
- `read_moodle_roster`: Moodle's grading worksheet of one assignment (View all submissions,
  "Download grading worksheet"), ``Identifier, Full name, Email address, ...``, whose
  ``Participant <id>`` is the participant id Moodle makes per assignment (its download's
  folders carry it); the nbgrader id is the username, else the ID number, else the email.
  A participants export has no participant id, so it is refused, saying which file to use.
- `import_roster`: the students into nbgrader's gradebook (``lms_user_id`` the LMS's id);
  Moodle's participant ids of the assignment are also kept per assignment
  (`collect.participants_path`), since the next assignment has others.
- `apply_late_penalties`: nbgrader's own ``AssignLatePenalties`` with the course's
  configuration (``c.AssignLatePenalties.plugin_class``, ``c.LateSubmissionPlugin.
  penalty_method``) on each submission, as ``nbgrader autograde`` runs it, from the
  submission's timestamp (`collect` writes ``timestamp.txt``) and the assignment's due date.
- `canvas_grades`: Canvas's gradebook import CSV (the export's own header, the "Points
  Possible" row, one row per student matched by Canvas user id); `moodle_worksheet`:
  Moodle's grading worksheet as its offline-grading importer reads it (``Identifier``,
  ``Grade``, ``Last modified (grade)``). A submission whose written answers wait for hand
  grading, or with no submission, gets no grade (both LMSs leave a blank cell unchanged),
  and says so.
- `feedback_archive`: a zip each LMS re-imports as it is: Canvas's "Re-upload submissions"
  zip (``<user id>_<attachment id>_...``: the two ids of the collected file, which `collect`
  keeps), Moodle's "Upload multiple feedback files in a zip" (a folder per participant,
  ``<full name>_<participant id>_assignsubmission_file/``).
"""

from __future__ import annotations

import csv
import datetime
import io
import os
import re
import sys
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from autograder.checking import nbgrader_api
from autograder.checking.gradebook_ids import PLAIN_NAME
from autograder.course import collect
from autograder.course.hand_grading import hand_grading

LMSS = ("canvas", "moodle")
#: Canvas's gradebook export starts so; its importer wants the same student columns
CANVAS_HEADER = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
#: Moodle's grading worksheet, as ``Download grading worksheet`` writes it; its importer
#: reads ``Identifier``, ``Grade`` and ``Last modified (grade)`` (and a feedback column by
#: its plug-in's name: "Feedback comments" is left out, since Moodle would overwrite the
#: comments a teacher typed with the column's text, blank included)
MOODLE_HEADER = (
    "Identifier",
    "Full name",
    "Email address",
    "Status",
    "Grade",
    "Maximum Grade",
    "Grade can be changed",
    "Last modified (submission)",
    "Last modified (grade)",
)
MOODLE_PARTICIPANT = re.compile(r"\D*?([0-9]+)\s*\Z")  # "Participant 12" (any language)
MAX_ROSTER_BYTES = 16 << 20


class Person(NamedTuple):
    """One row of an LMS's roster: the nbgrader id and what nbgrader's student table holds."""

    id: str
    first_name: str
    last_name: str
    email: str
    lms_id: str


class RosterError(Exception):
    """A roster file that is not the LMS export it should be (the whole message)."""


def _rows(path: Path) -> list[list[str]]:
    """The CSV rows of an LMS export (UTF-8, a byte-order mark allowed, as both write it)."""
    path = Path(path)
    if path.stat().st_size > MAX_ROSTER_BYTES:
        raise RosterError(f"{path.name} is over {MAX_ROSTER_BYTES >> 20} MiB: not a roster")
    text = path.read_bytes().decode("utf-8-sig", errors="replace")
    return [row for row in csv.reader(io.StringIO(text)) if any(cell.strip() for cell in row)]


def _column(header: list[str], name: str) -> int | None:
    return header.index(name) if name in header else None


def read_canvas_roster(path: Path) -> tuple[list[Person], list[str]]:
    """Canvas's gradebook export: (the students, one message per row left out)."""
    rows = _rows(path)
    if not rows or rows[0][:2] != ["Student", "ID"]:
        raise RosterError(
            f"{Path(path).name} is not Canvas's gradebook export (its header starts "
            f"{', '.join(CANVAS_HEADER)}: Grades, Export, Export Entire Gradebook)"
        )
    header = [cell.strip() for cell in rows[0]]
    sis_user, sis_login = _column(header, "SIS User ID"), _column(header, "SIS Login ID")
    people, messages = [], []
    for number, row in enumerate(rows[1:], 2):
        row = row + [""] * (len(header) - len(row))
        name, canvas_id = row[0].strip(), row[1].strip()
        if "Points Possible" in name or not canvas_id:
            continue  # the "Points Possible" row, Canvas's "Muted"/"Manual Posting" row
        if not canvas_id.isdigit():
            messages.append(f"line {number} ({name!r}): its ID {canvas_id!r} is not a Canvas id")
            continue
        choices = [row[i].strip() for i in (sis_login, sis_user) if i is not None]
        student = next((c for c in choices if PLAIN_NAME.match(c)), canvas_id)
        if choices and student == canvas_id:
            messages.append(
                f"line {number} ({name!r}): no SIS login or SIS user id that is a plain name; "
                f"its nbgrader id is the Canvas id {canvas_id}"
            )
        last, _, first = name.partition(", ")
        people.append(Person(student, first.strip(), last.strip(), "", canvas_id))
    return people, messages


def read_moodle_roster(path: Path) -> tuple[list[Person], list[str]]:
    """Moodle's grading worksheet of one assignment: (the students, one message per row
    left out). A participants export has no participant id: refused, saying so."""
    rows = _rows(path)
    header = [cell.strip() for cell in rows[0]] if rows else []
    if "Identifier" not in header:
        raise RosterError(
            f"{Path(path).name} has no Identifier column: it is not Moodle's grading "
            "worksheet (the assignment's View all submissions, Grading action, Download "
            "grading worksheet); a participants export has no participant ids"
        )
    ident, full = header.index("Identifier"), _column(header, "Full name")
    email = _column(header, "Email address")
    ids = [_column(header, name) for name in ("Username", "ID number", "Email address")]
    people, messages = [], []
    for number, row in enumerate(rows[1:], 2):
        row = row + [""] * (len(header) - len(row))
        match = MOODLE_PARTICIPANT.match(row[ident].strip())
        if not match:
            messages.append(f"line {number}: its Identifier {row[ident]!r} is not a participant")
            continue
        name = row[full].strip() if full is not None else ""
        choices = [row[i].strip() for i in ids if i is not None]
        student = next((c for c in choices if PLAIN_NAME.match(c)), None)
        if student is None:
            messages.append(
                f"line {number} ({name!r}): no username, ID number or email that is a plain "
                "name to be its nbgrader id; left out"
            )
            continue
        first, _, last = name.rpartition(" ")
        people.append(
            Person(
                student,
                first or last,
                last if first else "",
                row[email].strip() if email is not None else "",
                match[1],
            )
        )
    return people, messages


@contextmanager
def _gradebook(course: Path):
    """nbgrader's gradebook of the course (a new one runs nbgrader's ``alembic``, installed
    beside this Python)."""
    Gradebook = nbgrader_api.api().Gradebook
    saved = os.environ.get("PATH", "")
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{saved}"
    try:
        with Gradebook(f"sqlite:///{Path(course) / 'gradebook.db'}") as gb:
            yield gb
    finally:
        os.environ["PATH"] = saved


def import_roster(
    course: Path, people: list[Person], lms: str, assignment: str | None = None
) -> list[str]:
    """The students into nbgrader's gradebook (new ones created, others updated, the LMS's
    id as ``lms_user_id``); Moodle's participant ids also kept for ``assignment``. A second
    row for one nbgrader id or one LMS id is left out with a message."""
    messages, seen_ids, seen_lms, kept = [], set(), set(), []
    for person in people:
        if person.id in seen_ids or person.lms_id in seen_lms:
            twice = person.id if person.id in seen_ids else f"LMS id {person.lms_id}"
            messages.append(f"left out a second row for {twice} ({person.last_name})")
            continue
        seen_ids.add(person.id)
        seen_lms.add(person.lms_id)
        kept.append(person)
    created = updated = 0
    with _gradebook(course) as gb:
        existing = {s.id for s in gb.students}
        for person in kept:
            gb.update_or_create_student(
                person.id,
                first_name=person.first_name,
                last_name=person.last_name,
                email=person.email or None,
                lms_user_id=person.lms_id,
            )
            created += person.id not in existing
            updated += person.id in existing
    if lms == "moodle" and assignment:
        path = collect.participants_path(course, assignment)
        collect._write_json(path, {p.lms_id: p.id for p in kept})
    messages.append(f"{len(kept)} student(s) on the roster: {created} new, {updated} updated")
    return messages


# --- late submissions: nbgrader's own plug-ins


def _course_config(course: Path):
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    if not (Path(course) / "nbgrader_config.py").is_file():
        return Config()
    return PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()


def apply_late_penalties(course: Path, assignment: str) -> list[str]:
    """Run nbgrader's ``AssignLatePenalties`` (configured by the course's
    ``nbgrader_config.py``, as ``nbgrader autograde`` runs it) on every submission of the
    assignment: each late one (its timestamp after the due date) gets the penalty of the
    configured plug-in, the others none. One message per late submission."""
    import nbformat
    from nbgrader.preprocessors import AssignLatePenalties

    db = Path(course) / "gradebook.db"
    if not db.is_file():
        return []
    late = []
    with _gradebook(course) as gb:
        try:
            submissions = list(gb.assignment_submissions(assignment))
        except Exception:  # noqa: BLE001 - nbgrader's MissingEntry: no such assignment
            return []
        for submission in submissions:
            seconds = submission.total_seconds_late
            for notebook in submission.notebooks:
                late.append((submission.student.id, notebook.name, seconds))
    # a plug-in named in the configuration (``late.SubMarks``) lives beside it, as nbgrader's
    # documentation puts it, so the course directory is where it is imported from
    sys.path.insert(0, str(Path(course).resolve()))
    try:
        preprocessor = AssignLatePenalties(config=_course_config(course))
        preprocessor.plugin_class  # noqa: B018 - the configured class, imported now
    finally:
        sys.path.remove(str(Path(course).resolve()))
    messages = []
    for student, notebook, seconds in late:
        resources = {
            "nbgrader": {
                "notebook": notebook,
                "assignment": assignment,
                "student": student,
                "db_url": f"sqlite:///{db}",
            }
        }
        preprocessor.preprocess(nbformat.v4.new_notebook(), resources)
        if seconds > 0:
            messages.append(f"{student}: submitted {_duration(seconds)} late")
    return messages


def _duration(seconds: float) -> str:
    hours, rest = divmod(int(round(seconds)), 3600)
    return f"{hours} h {rest // 60:02d} min" if hours else f"{rest // 60} min {rest % 60} s"


# --- grades out


class Grade(NamedTuple):
    """One student's grade of an assignment, as the LMS gets it."""

    student: str
    first_name: str
    last_name: str
    email: str
    lms_id: str
    score: float | None  # None: no grade to give yet (waits for hand grading, or no submission)
    max_score: float
    penalty: float
    timestamp: datetime.datetime | None
    state: str  # "graded", "pending" (written answers to grade by hand), "missing"


def read_grades(course: Path, assignment: str) -> list[Grade]:
    """Every student's grade of the assignment from nbgrader's gradebook: the score after
    the late penalty (as nbgrader's export computes it), None while written answers wait
    for hand grading or when nothing was submitted."""
    from nbgrader.api import MissingEntry

    grades = []
    with _gradebook(course) as gb:
        maximum = float(gb.find_assignment(assignment).max_score)
        for student in sorted(gb.students, key=lambda s: s.id):
            try:
                submission = gb.find_submission(assignment, student.id)
            except MissingEntry:
                score, penalty, stamp, state = None, 0.0, None, "missing"
            else:
                penalty = float(submission.late_submission_penalty or 0.0)
                stamp, state = submission.timestamp, "graded"
                score = max(0.0, float(submission.score) - penalty)
                if hand_grading(submission).to_grade:
                    score, state = None, "pending"
            grades.append(
                Grade(
                    student.id,
                    student.first_name or "",
                    student.last_name or "",
                    student.email or "",
                    str(student.lms_user_id or ""),
                    score,
                    maximum,
                    penalty,
                    stamp,
                    state,
                )
            )
    return grades


def _points(score: float | None, maximum: float, points: float | None) -> str:
    if score is None:
        return ""
    if points is not None and maximum:
        score = score * points / maximum
    return f"{score:.2f}".rstrip("0").rstrip(".")


def _state_messages(grades: list[Grade], lms_name: str) -> list[str]:
    messages = []
    pending = [g.student for g in grades if g.state == "pending"]
    missing = [g.student for g in grades if g.state == "missing"]
    if pending:
        messages.append(
            f"{len(pending)} submission(s) wait for hand grading, left without a grade (blank: "
            f"{lms_name} leaves it unchanged): {', '.join(pending)}; grade them in the "
            "formgrader, then export again"
        )
    if missing:
        messages.append(
            f"{len(missing)} student(s) submitted nothing, left without a grade: "
            f"{', '.join(missing)}"
        )
    return messages


def canvas_grades(
    course: Path, assignment: str, out: Path, column: str | None = None, points: float | None = None
) -> list[str]:
    """Canvas's gradebook import CSV at ``out``: Canvas's export header (``Student, ID, SIS
    User ID, SIS Login ID, Section``, then the assignment's column: ``column``, Canvas's
    ``<name> (<assignment id>)`` from its export, else the nbgrader id, which Canvas offers
    to create as a new assignment), the "Points Possible" row (``points``, else nbgrader's
    maximum; scores are scaled to it), and one row per student with a Canvas user id."""
    grades = read_grades(course, assignment)
    column = column or assignment
    maximum = grades[0].max_score if grades else 0.0
    possible = points if points is not None else maximum
    rows = [[*CANVAS_HEADER, column], ["    Points Possible", "", "", "", "", f"{possible:g}"]]
    messages, written = [], 0
    for grade in grades:
        if not grade.lms_id.isdigit():
            messages.append(f"{grade.student}: no Canvas user id on the roster, left out")
            continue
        name = ", ".join(part for part in (grade.last_name, grade.first_name) if part)
        value = _points(grade.score, grade.max_score, points)
        rows.append([name or grade.student, grade.lms_id, "", grade.student, "", value])
        written += 1
    _write_csv(out, rows)
    messages.extend(_state_messages(grades, "Canvas"))
    messages.append(f"wrote {out}: {written} student(s), column {column!r}, {possible:g} points")
    if column == assignment:
        messages.append(
            f"the column {column!r} is not one of Canvas's: its import offers to create it; "
            "to fill an existing assignment, give --column as Canvas's export names it, "
            '"<name> (<assignment id>)"'
        )
    return messages


def moodle_worksheet(
    course: Path,
    assignment: str,
    out: Path,
    points: float | None = None,
    now: datetime.datetime | None = None,
) -> list[str]:
    """Moodle's grading worksheet at ``out``, as its offline-grading importer reads it: one
    row per participant of the assignment (``Participant <id>``: the ids `import_roster`
    kept for it, else ``lms_user_id``), the grade (scaled to ``points``, Moodle's maximum
    grade, when given), and ``Last modified (grade)`` the time of this export (Moodle skips
    a row whose grade was changed in Moodle after it, unless told to overwrite)."""
    grades = read_grades(course, assignment)
    participants = collect._participants(course, assignment)
    by_student = {students[0]: pid for pid, students in participants.items() if len(students) == 1}
    stamp = (now or datetime.datetime.now(datetime.UTC)).replace(microsecond=0).isoformat()
    rows, messages, written = [list(MOODLE_HEADER)], [], 0
    for grade in grades:
        participant = by_student.get(grade.student) or grade.lms_id
        if not participant.isdigit():
            messages.append(f"{grade.student}: no Moodle participant id on the roster, left out")
            continue
        maximum = points if points is not None else grade.max_score
        status = "No submission" if grade.state == "missing" else "Submitted for grading"
        submitted = (
            grade.timestamp.replace(tzinfo=datetime.UTC).isoformat() if grade.timestamp else "-"
        )
        rows.append(
            [
                f"Participant {participant}",
                " ".join(p for p in (grade.first_name, grade.last_name) if p) or grade.student,
                grade.email,
                status,
                _points(grade.score, grade.max_score, points),
                f"{maximum:.2f}",
                "Yes",
                submitted,
                stamp,
            ]
        )
        written += 1
    _write_csv(out, rows)
    messages.extend(_state_messages(grades, "Moodle"))
    maximum = points if points is not None else (grades[0].max_score if grades else 0.0)
    messages.append(
        f"wrote {out}: {written} participant(s), grades out of {maximum:g} (Moodle skips a "
        "grade over the assignment's maximum grade: set it to this, or give --points)"
    )
    return messages


def _write_csv(out: Path, rows: list[list[str]]) -> None:
    out = Path(out)
    temporary = out.with_name(f".{out.name}.writing")
    with open(temporary, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    os.replace(temporary, out)


# --- feedback out


def feedback_archive(course: Path, assignment: str, lms: str, out: Path) -> list[str]:
    """The feedback pages of the assignment (``feedback/<student>/<id>/<id>.html``) in one
    zip the LMS re-imports as it is: Canvas, ``<user id>_<attachment id>_<id>_feedback.html``
    (Canvas reads the first two all-digit parts of a name as the user and the attachment of
    the submission to comment on: the collected file's, which `collect` kept); Moodle,
    ``<full name>_<participant id>_assignsubmission_file/<id>_feedback.html`` (its importer
    reads the participant id after the first ``_`` of a folder). A student whose written
    answers wait for hand grading is left out, as is one with no page or no LMS ids."""
    course = Path(course)
    records = collect.read_lms_records(course, assignment)
    waiting = {}
    with _gradebook(course) as gb:
        for submission in gb.assignment_submissions(assignment):
            waiting[submission.student.id] = bool(hand_grading(submission).to_grade)
        names = {s.id: " ".join(p for p in (s.first_name, s.last_name) if p) for s in gb.students}
    messages, members = [], []
    for student in sorted(waiting):
        page = course / "feedback" / student / assignment / f"{assignment}.html"
        record = records.get(student, {})
        if waiting[student]:
            messages.append(f"{student}: waits for hand grading; no feedback put in the zip")
            continue
        if not page.is_file():
            messages.append(
                f"{student}: no feedback page ({page.relative_to(course)}); run feedback first"
            )
            continue
        if record.get("layout") != lms:
            messages.append(
                f"{student}: not collected from a {lms.capitalize()} download, so its "
                f"{lms.capitalize()} ids are unknown; left out"
            )
            continue
        if lms == "canvas":
            user, attachment = record.get("lms_id", ""), record.get("attachment")
            if not (str(user).isdigit() and isinstance(attachment, int)):
                messages.append(f"{student}: no Canvas user and attachment id kept; left out")
                continue
            name = f"{user}_{attachment}_{assignment}_feedback.html"
        else:
            participant = str(record.get("lms_id", ""))
            if not participant.isdigit():
                messages.append(f"{student}: no Moodle participant id kept; left out")
                continue
            full = (names.get(student) or student).replace("_", " ").replace("/", " ")
            name = f"{full}_{participant}_assignsubmission_file/{assignment}_feedback.html"
        members.append((name, page))
    out = Path(out)
    temporary = out.with_name(f".{out.name}.writing")
    with zipfile.ZipFile(temporary, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, page in members:
            archive.write(page, name)
    os.replace(temporary, out)
    how = {
        "canvas": "Canvas: the assignment's page, Re-upload submissions",
        "moodle": "Moodle: View all submissions, Grading action, Upload multiple feedback "
        "files in a zip",
    }[lms]
    messages.append(f"wrote {out}: {len(members)} feedback page(s) ({how})")
    return messages
