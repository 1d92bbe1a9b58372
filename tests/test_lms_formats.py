"""The LMS's own files in and out (`autograder.course.lms`), each read back by a port of the
LMS's own reader, cited where it is:

- Canvas's gradebook export and import: ``app/models/gradebook_importer.rb``
  (instructure/canvas-lms): ``header?`` (``row[0]`` holds "Student", ``row[1]`` "ID", then
  "SIS User ID" and "SIS Login ID", the last student column "Section"), the "Points
  Possible" row (``check_for_non_student_row``, ``process_pp``), a student matched by the
  Canvas user id in ``row[1]`` (``process_student``), an assignment column
  ``<title> (<id>)`` (``Assignment.title_and_id``), a blank grade no change (``no_score?``).
  The export writes the same header (``lib/gradebook_exporter.rb``).
- Canvas's "Re-upload submissions": ``Assignment#infer_comment_context_from_filename``
  (``app/models/assignment.rb``): the first two all-digit ``_`` parts of a file's name are
  the user id and the attachment id, which must be one of that user's submission's.
- Moodle's grading worksheet import: ``mod/assign/feedback/offline/importgradeslib.php``
  (moodle/moodle, ``init``: the columns "Identifier", "Grade", "Last modified (grade)"
  by name; ``next``: the id is the Identifier after "Participant "; ``strtotime`` of the
  date) and ``locallib.php`` ``process_import_grades`` (a blank grade, one over the
  maximum, or one changed in Moodle after "Last modified (grade)" is skipped).
- Moodle's "Upload multiple feedback files in a zip":
  ``mod/assign/feedback/file/importziplib.php`` ``is_valid_filename_for_import``.
- nbgrader's late-submission plug-ins: ``nbgrader/preprocessors/latesubmissions.py``
  (``AssignLatePenalties``) and ``nbgrader/docs/source/plugins/late-plugin.rst`` (the
  ``penalty_method = 'zero'`` setting and the ``late.SubMarks`` example).
"""

from __future__ import annotations

import contextlib
import csv
import datetime
import io
import json
import os
import re
import shutil
import sys
import warnings
import zipfile
from pathlib import Path

import pytest

from autograder import cli
from autograder.course import collect, lms

A = "ch2_soft_hard"
NB = f"{A}.ipynb"
DUE = "2026-03-01 23:59:00"


def _cli(course: Path, *argv: str) -> tuple[int, list[str]]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = cli.main(["--course", str(course), *argv])
    return code, err.getvalue().splitlines()


# --- the roster from the LMS's export

#: Canvas's "Export Entire Gradebook", as lib/gradebook_exporter.rb writes it: the student
#: columns, the assignments as "<title> (<id>)", the totals; a "Points Possible" row
CANVAS_EXPORT = (
    "\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,Soft and hard attention (88123),"
    "Current Score,Final Score\n"
    "    Points Possible,,,,,20.00,(read only),(read only)\n"
    '"Doe, Jane",1012,S1012,jdoe,Section A,,0.00,0.00\n'
    '"Smith, Al",1034,S1034,asmith,Section A,,0.00,0.00\n'
    '"Lee, Mallory",1099,,,Section B,,0.00,0.00\n'
    '"Zhou, Bo",1100,S-1100,bo zhou,Section B,,0.00,0.00\n'
)

#: Moodle's "Download grading worksheet" (mod/assign/gradingtable.php, downloading): the
#: Identifier, the identity fields shown, the status, the grade columns
MOODLE_WORKSHEET = (
    "Identifier,Full name,Email address,Status,Grade,Maximum Grade,Grade can be changed,"
    "Last modified (submission),Last modified (grade),Feedback comments\n"
    'Participant 4101,Li Wei,li.wei@example.edu,"Submitted for grading",,20.00,Yes,'
    '"Monday, 2 March 2026, 6:30 PM",-,\n'
    "Participant 4102,Ana Gomez,ana@example.edu,No submission,,20.00,Yes,-,-,\n"
    "Participant 4103,Zhang San,zhang.san@example.edu,No submission,,20.00,Yes,-,-,\n"
)


def _course(tmp_path: Path, empty: Path) -> Path:
    course = tmp_path / "course"
    course.mkdir()
    shutil.copyfile(empty, course / "gradebook.db")
    return course


def _students(course: Path) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {s.id: (s.first_name, s.last_name, s.email, s.lms_user_id) for s in gb.students}


def test_canvas_roster_from_its_gradebook_export(tmp_path, empty_gradebook):
    """One command: each student of Canvas's export in nbgrader's gradebook, the SIS login
    the nbgrader id, the Canvas user id its lms_user_id; a student whose SIS ids are not
    plain names gets the Canvas id, saying so; the Points Possible row is not a student."""
    course = _course(tmp_path, empty_gradebook)
    (tmp_path / "canvas.csv").write_text(CANVAS_EXPORT)
    code, err = _cli(course, "roster", str(tmp_path / "canvas.csv"), "--lms", "canvas")
    assert code == 0, err
    assert _students(course) == {
        "jdoe": ("Jane", "Doe", None, "1012"),
        "asmith": ("Al", "Smith", None, "1034"),
        "1099": ("Mallory", "Lee", None, "1099"),
        "S-1100": ("Bo", "Zhou", None, "1100"),
    }
    assert err == [
        "line 5 ('Lee, Mallory'): no SIS login or SIS user id that is a plain name; its "
        "nbgrader id is the Canvas id 1099",
        "4 student(s) on the roster: 4 new, 0 updated",
    ]
    # imported again: updated, not doubled
    code, err = _cli(course, "roster", str(tmp_path / "canvas.csv"), "--lms", "canvas")
    assert err[-1] == "4 student(s) on the roster: 0 new, 4 updated"


def test_moodle_roster_from_the_grading_worksheet_per_assignment(tmp_path, empty_gradebook):
    """Moodle's participant ids are per assignment: the worksheet of the assignment gives
    them (``--assignment``), kept for that assignment's collect; the email is the nbgrader
    id (no username column shown); a participants export, or no --assignment, is refused."""
    course = _course(tmp_path, empty_gradebook)
    (tmp_path / "ws.csv").write_text(MOODLE_WORKSHEET)
    code, err = _cli(course, "roster", str(tmp_path / "ws.csv"), "--lms", "moodle")
    assert code == 2
    assert err == [
        "error: Moodle's participant ids are per assignment: give the assignment whose grading "
        "worksheet this is (--assignment ID)"
    ]
    code, err = _cli(
        course, "roster", str(tmp_path / "ws.csv"), "--lms", "moodle", "--assignment", A
    )
    assert code == 0, err
    assert _students(course) == {
        "li.wei@example.edu": ("Li", "Wei", "li.wei@example.edu", "4101"),
        "ana@example.edu": ("Ana", "Gomez", "ana@example.edu", "4102"),
        "zhang.san@example.edu": ("Zhang", "San", "zhang.san@example.edu", "4103"),
    }
    assert json.loads(collect.participants_path(course, A).read_text()) == {
        "4101": "li.wei@example.edu",
        "4102": "ana@example.edu",
        "4103": "zhang.san@example.edu",
    }
    (tmp_path / "participants.csv").write_text(
        "First name,Last name,Email address,Roles,Groups,Last access to course\n"
        "Li,Wei,li.wei@example.edu,Student,No groups,Never\n"
    )
    code, err = _cli(
        course, "roster", str(tmp_path / "participants.csv"), "--lms", "moodle", "--assignment", A
    )
    assert code == 2
    assert err == [
        "error: participants.csv has no Identifier column: it is not Moodle's grading "
        "worksheet (the assignment's View all submissions, Grading action, Download grading "
        "worksheet); a participants export has no participant ids"
    ]


# --- grades out: a gradebook with a graded, a hand-graded, a pending and a late submission


def _graded_course(tmp_path: Path, empty: Path, roster_csv: str, lms_name: str) -> Path:
    """The roster imported from the LMS's file, then the assignment (12 automatic points and
    a 2-point written answer, due DUE) and four submissions: jdoe/li 12 + 2 by hand (on
    time), asmith/ana 7 with the written answer ungraded, mallory/zhang 10 + 1 by hand
    submitted 5 h 30 min late; the fourth student (Canvas: S-1100) submitted nothing."""
    from nbgrader.api import Gradebook

    course = _course(tmp_path, empty)
    (tmp_path / "roster.csv").write_text(roster_csv)
    extra = ["--assignment", A] if lms_name == "moodle" else []
    assert _cli(course, "roster", str(tmp_path / "roster.csv"), "--lms", lms_name, *extra)[0] == 0
    ids = sorted(_students(course), key=lambda s: _students(course)[s][3])
    on_time, pending, late = ids[0], ids[1], ids[2]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nbgrader's add_submission trips SQLAlchemy's autoflush
        gb.update_or_create_assignment(A, duedate=DUE)
        gb.add_notebook(A, A)
        gb.add_grade_cell("auto", A, A, max_score=12, cell_type="code")
        gb.add_grade_cell("written", A, A, max_score=2, cell_type="markdown")
        for student, stamp, auto, manual in (
            (on_time, "2026-03-01 20:00:00", 12, 2),
            (pending, "2026-03-01 21:00:00", 7, None),
            (late, "2026-03-02 05:29:00", 10, 1),
        ):
            gb.add_submission(A, student, timestamp=stamp)
            gb.find_grade("auto", A, A, student).auto_score = auto
            written = gb.find_grade("written", A, A, student)
            written.manual_score = manual
            written.needs_manual_grade = manual is None
        gb.db.commit()
    return course


def canvas_import(text: str) -> tuple[list[tuple[str, str | None]], dict, dict]:
    """A port of Canvas's GradebookImporter (app/models/gradebook_importer.rb) for what it
    needs of a file: ([(title, assignment id)], {user id: [grades]}, points possible)."""
    rows = list(csv.reader(io.StringIO(text)))
    header = rows[0]
    # row_has_student_headers?
    assert len(header) > 3 and "Student" in header[0] and "ID" in header[1]
    # update_column_count
    columns = 3
    if re.search(r"SIS\s+Login\s+ID", header[2]):
        columns += 1
    elif re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3]):
        integration = (
            1 if re.search(r"Integration\s+ID", header[4] if len(header) > 4 else "") else 0
        )
        columns += 2 + integration
    assert "Section" in header[columns - 1], "Invalid header row"
    assignments = []
    for title in header[columns:]:
        match = re.fullmatch(r"(.*)\s\((\d+)\)", title)  # Assignment.title_and_id
        assignments.append((match[1], match[2]) if match else (title, None))
    grades, points = {}, {}
    for row in rows[1:]:
        if "Points Possible" in row[0]:  # check_for_non_student_row -> process_pp
            points = dict(zip([t for t, _ in assignments], row[columns:]))
            continue
        grades[int(row[1])] = [g.strip() for g in row[columns:]]  # process_student: ID
    return assignments, grades, points


def test_canvas_grade_import_csv_as_canvas_reads_it(tmp_path, empty_gradebook):
    """Canvas's import reads the file: its header, the Points Possible row, one row per
    Canvas user id. Scores out of 14 (the late student's after the course's late policy:
    nbgrader's 'zero'); the pending one blank (Canvas leaves it unchanged), and said."""
    course = _graded_course(tmp_path, empty_gradebook, CANVAS_EXPORT, "canvas")
    (course / "nbgrader_config.py").write_text(
        "c = get_config()\nc.LateSubmissionPlugin.penalty_method = 'zero'\n"
    )
    out = tmp_path / "canvas_import.csv"
    code, err = _cli(
        course, "export", A, "--lms", "canvas", "--csv", str(out),
        "--column", "Soft and hard attention (88123)",
    )  # fmt: skip
    assert code == 0, err
    text = out.read_text()
    assert text.splitlines()[:2] == [
        "Student,ID,SIS User ID,SIS Login ID,Section,Soft and hard attention (88123)",
        "    Points Possible,,,,,14",
    ]
    assignments, grades, points = canvas_import(text)
    assert assignments == [("Soft and hard attention", "88123")]
    assert points == {"Soft and hard attention": "14"}
    assert grades == {1012: ["14"], 1034: [""], 1099: ["0"], 1100: [""]}
    assert err == [
        "1099: submitted 5 h 30 min late",
        "1 submission(s) wait for hand grading, left without a grade (blank: Canvas leaves it "
        "unchanged): asmith; grade them in the formgrader, then export again",
        "1 student(s) submitted nothing, left without a grade: S-1100",
        f"wrote {out}: 4 student(s), column 'Soft and hard attention (88123)', 14 points",
    ]
    # --points: Canvas's 20-point assignment; scores scaled; nbgrader's own CSV shows the penalty
    code, err = _cli(course, "export", A, "--lms", "canvas", "--csv", str(out), "--points", "20")
    assignments, grades, points = canvas_import(out.read_text())
    assert assignments == [(A, None)] and points == {A: "20"}
    assert grades[1012] == ["20"]
    assert err[-1].startswith(f"the column '{A}' is not one of Canvas's: its import offers")


def test_nbgrader_late_plugins_apply_as_configured(tmp_path, empty_gradebook):
    """No policy: no penalty. nbgrader's documented custom plug-in (``late.SubMarks``, 1 point
    per hour late, rounded, beside the configuration): 5.5 h late costs 6 of 11."""
    course = _graded_course(tmp_path, empty_gradebook, CANVAS_EXPORT, "canvas")
    out = tmp_path / "g.csv"
    assert _cli(course, "export", A, "--lms", "canvas", "--csv", str(out))[0] == 0
    assert canvas_import(out.read_text())[1][1099] == ["11"]
    (course / "late.py").write_text(
        "from nbgrader.plugins import BasePlugin\n\n\n"
        "class SubMarks(BasePlugin):\n"
        "    def late_submission_penalty(self, student_id, score, total_seconds_late):\n"
        "        return round(total_seconds_late / 3600, 0)\n"
    )
    (course / "nbgrader_config.py").write_text(
        "c = get_config()\nc.AssignLatePenalties.plugin_class = 'late.SubMarks'\n"
    )
    try:
        assert _cli(course, "export", A, "--lms", "canvas", "--csv", str(out))[0] == 0
    finally:
        sys.modules.pop("late", None)  # the course's module, not another test's
    assert canvas_import(out.read_text())[1][1099] == ["5"]


def moodle_import(text: str, maximum: float, now_grades: dict | None = None) -> dict:
    """A port of Moodle's offline-grading import (importgradeslib.php ``init``/``next``,
    locallib.php ``process_import_grades``): {participant id: grade} for the rows it would
    apply; a blank grade, one over the maximum, or one whose grade changed in Moodle after
    "Last modified (grade)" (``now_grades``: participant -> its time there) is skipped."""
    rows = list(csv.reader(io.StringIO(text)))
    header = rows[0]
    grade_i, id_i = header.index("Grade"), header.index("Identifier")
    modified_i = header.index("Last modified (grade)")
    applied = {}
    for row in rows[1:]:
        participant = int(row[id_i][len("Participant ") :])
        modified = datetime.datetime.fromisoformat(row[modified_i])  # strtotime reads ISO 8601
        grade = row[grade_i]
        stale = (now_grades or {}).get(participant)
        if grade == "" or float(grade) < 0 or float(grade) > maximum:
            continue
        if stale and stale > modified + datetime.timedelta(seconds=60):
            continue
        applied[participant] = float(grade)
    return applied


def test_moodle_grading_worksheet_as_moodle_reads_it(tmp_path, empty_gradebook):
    """Moodle's importer finds its columns, reads each Participant <id>, and applies each
    grade; the pending and the missing rows are blank, so skipped; "Last modified (grade)"
    is the export's time, so a grade changed in Moodle after it is not overwritten."""
    course = _graded_course(tmp_path, empty_gradebook, MOODLE_WORKSHEET, "moodle")
    out = tmp_path / "worksheet.csv"
    now = datetime.datetime(2026, 3, 9, 12, 0, tzinfo=datetime.UTC)
    messages = lms.moodle_worksheet(course, A, out, points=20.0, now=now)
    rows = list(csv.reader(io.StringIO(out.read_text())))
    assert rows[0] == list(lms.MOODLE_HEADER)
    assert rows[1:] == [
        ["Participant 4102", "Ana Gomez", "ana@example.edu", "Submitted for grading", "",
         "20.00", "Yes", "2026-03-01T21:00:00+00:00", "2026-03-09T12:00:00+00:00"],
        ["Participant 4101", "Li Wei", "li.wei@example.edu", "Submitted for grading", "20",
         "20.00", "Yes", "2026-03-01T20:00:00+00:00", "2026-03-09T12:00:00+00:00"],
        ["Participant 4103", "Zhang San", "zhang.san@example.edu", "Submitted for grading",
         "15.71", "20.00", "Yes", "2026-03-02T05:29:00+00:00", "2026-03-09T12:00:00+00:00"],
    ]  # fmt: skip
    assert moodle_import(out.read_text(), 20.0) == {4101: 20.0, 4103: 15.71}
    later = datetime.datetime(2026, 3, 9, 13, 0, tzinfo=datetime.UTC)
    assert moodle_import(out.read_text(), 20.0, {4103: later}) == {4101: 20.0}
    assert messages[0].startswith("1 submission(s) wait for hand grading")


# --- feedback back in bulk


def canvas_reupload(name: str) -> tuple[str, str]:
    """Assignment#infer_comment_context_from_filename: the first two all-digit parts."""
    parts = posixpath_basename(name).split("_")
    user, attachment = [p for p in parts if re.fullmatch(r"\d+", p)][:2]
    return user, attachment


def posixpath_basename(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def moodle_feedback_import(path: str) -> tuple[int, tuple[str, str], str] | None:
    """importziplib.php ``is_valid_filename_for_import``: (participant id, plugin, file)."""
    if posixpath_basename(path).startswith((".", "~")):
        return None
    parts = path.split("/")
    while parts:
        info = parts.pop(0).split("_", 4)  # explode('_', $pathpart, 5)
        if len(info) < 4 or not info[1].isdigit():
            continue
        plugin = (info[2], info[3])
        if plugin not in {("assignsubmission", "file"), ("assignfeedback", "file")}:
            continue
        return int(info[1]), plugin, "/".join([info[4] if len(info) == 5 else "", *parts])
    return None


def _feedback_pages(course: Path, students) -> None:
    for student in students:
        page = course / "feedback" / student / A / f"{A}.html"
        page.parent.mkdir(parents=True)
        page.write_text(f"<html>{student}</html>")


def test_canvas_feedback_zip_names_the_collected_user_and_attachment(tmp_path, empty_gradebook):
    """Collected from Canvas's download, each student's page is named with the user id and
    the attachment id of the collected file, which Canvas's re-upload reads back; the
    student waiting for hand grading is left out, saying so."""
    course = _graded_course(tmp_path, empty_gradebook, CANVAS_EXPORT, "canvas")
    download = tmp_path / "canvas.zip"
    with zipfile.ZipFile(download, "w") as zf:
        for name in ("doejane_1012_70001", "smithal_1034_70002", "leemallory_LATE_1099_70003"):
            zf.writestr(f"{name}_{NB}", b"{}")
    _, messages = collect.collect(course, A, download)
    _feedback_pages(course, ["jdoe", "asmith", "1099"])
    out = tmp_path / "feedback.zip"
    code, err = _cli(course, "feedback-archive", A, "--lms", "canvas", "--out", str(out))
    assert code == 0, err
    with zipfile.ZipFile(out) as zf:
        names = sorted(zf.namelist())
        assert zf.read(f"1012_70001_{A}_feedback.html") == b"<html>jdoe</html>"
    assert names == [f"1012_70001_{A}_feedback.html", f"1099_70003_{A}_feedback.html"]
    assert [canvas_reupload(n) for n in names] == [("1012", "70001"), ("1099", "70003")]
    assert err == [
        "asmith: waits for hand grading; no feedback put in the zip",
        f"wrote {out}: 2 feedback page(s) (Canvas: the assignment's page, Re-upload submissions)",
    ]


def test_moodle_feedback_zip_is_read_by_moodles_importer(tmp_path, empty_gradebook):
    """Collected from a Moodle >= 4.1 download, each page goes in the participant's folder
    as Moodle's importer reads it: the participant id after the first ``_``, whatever the
    full name held (an ``_`` made a space, as Moodle's download makes it)."""
    course = _graded_course(tmp_path, empty_gradebook, MOODLE_WORKSHEET, "moodle")
    download = tmp_path / "moodle.zip"
    with zipfile.ZipFile(download, "w") as zf:
        for folder in ("Li Wei_4101", "Ana Gomez_4102", "Zhang San_4103"):
            zf.writestr(f"{folder}_assignsubmission_file/{NB}", b"{}")
    students, messages = collect.collect(course, A, download)
    assert len(students) == 3, messages
    _feedback_pages(course, students)
    out = tmp_path / "feedback.zip"
    messages = lms.feedback_archive(course, A, "moodle", out)
    with zipfile.ZipFile(out) as zf:
        names = sorted(zf.namelist())
    assert names == [
        f"Li Wei_4101_assignsubmission_file/{A}_feedback.html",
        f"Zhang San_4103_assignsubmission_file/{A}_feedback.html",
    ]
    assert [moodle_feedback_import(n) for n in names] == [
        (4101, ("assignsubmission", "file"), f"/{A}_feedback.html"),
        (4103, ("assignsubmission", "file"), f"/{A}_feedback.html"),
    ]
    assert messages == [
        "ana@example.edu: waits for hand grading; no feedback put in the zip",
        f"wrote {out}: 2 feedback page(s) (Moodle: View all submissions, Grading action, "
        "Upload multiple feedback files in a zip)",
    ]


# --- rootless: the whole loop as `nobody`

sys.path.insert(0, str(Path(__file__).parent))
from hostile import as_nobody  # noqa: E402

public_tmp = as_nobody.public_tmp


@pytest.mark.skipif(os.geteuid() != 0, reason="starts the commands as `nobody`, which needs root")
def test_the_lms_loop_runs_as_an_ordinary_user(public_tmp, empty_gradebook):
    """roster, collect (a student's zip among the files), export --lms and feedback-archive
    as `nobody` on a course it owns: the same files as root makes."""
    import pwd
    import subprocess

    course = _graded_course(public_tmp, empty_gradebook, CANVAS_EXPORT, "canvas")
    download = public_tmp / "canvas.zip"
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as zf:
        zf.writestr(f"work/{NB}", b"{}")
    with zipfile.ZipFile(download, "w") as zf:
        zf.writestr(f"doejane_1012_70001_{NB}", b"{}")
        zf.writestr("leemallory_LATE_1099_70003_upload.zip", inner.getvalue())
    _feedback_pages(course, ["jdoe", "1099"])
    home = public_tmp / "home"
    home.mkdir()
    nobody = pwd.getpwnam("nobody")
    for path in [public_tmp, *public_tmp.rglob("*")]:
        os.chown(path, nobody.pw_uid, nobody.pw_gid)
    env = as_nobody.environment(home, public_tmp)

    def run(*argv: str) -> str:
        command = [sys.executable, "-m", "autograder", "--course", str(course), *argv]
        done = subprocess.run(
            as_nobody.nobody_command(command),
            capture_output=True,
            text=True,
            env=env,
            cwd=public_tmp,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stderr

    (public_tmp / "canvas.csv").write_text(CANVAS_EXPORT)
    assert run("roster", str(public_tmp / "canvas.csv"), "--lms", "canvas").endswith(
        "4 student(s) on the roster: 0 new, 4 updated\n"
    )
    run("collect", A, str(download))
    assert (course / "submitted" / "1099" / A / NB).read_bytes() == b"{}"
    run("export", A, "--lms", "canvas", "--csv", str(public_tmp / "grades.csv"))
    assert canvas_import((public_tmp / "grades.csv").read_text())[1] == {
        1012: ["14"],
        1034: [""],
        1099: ["11"],
        1100: [""],
    }
    run("feedback-archive", A, "--lms", "canvas", "--out", str(public_tmp / "feedback.zip"))
    with zipfile.ZipFile(public_tmp / "feedback.zip") as zf:
        assert sorted(zf.namelist()) == [
            f"1012_70001_{A}_feedback.html",
            f"1099_70003_{A}_feedback.html",
        ]
    assert (public_tmp / "grades.csv").stat().st_uid == nobody.pw_uid
