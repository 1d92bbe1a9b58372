"""A class of 40 through the README's instructor commands, per LMS (issue 46, "Done when").

tests/test_instructor_readme.py runs the README's commands on a fresh clone with two or three
students; this runs the same commands (read from the README, on a clone made by that test's
``clone`` fixture, with its ``run`` and its formgrader stand-in ``_hand_grade``) on a class
of 40 per LMS, every variant a real class has:

- a Canvas class of ``ch2_soft_hard``: the README's Canvas block with its assignment id
  replaced, the due date set by the README's own ``nbgrader db assignment add`` line;
  Canvas's gradebook export as roster and "Download submissions" as the download, laid out
  as tests/test_lms_formats.py and tests/test_lms_layouts.py cite Canvas's source;
- a Moodle >= 4.1 class of ``ch6_transformer``: the README's Moodle block as written; the
  grading worksheet as roster and "Download all submissions" in folders (Moodle 4.1 dates
  nothing, so no student of it is late).

Each class holds, beside students who solved everything: a partial notebook (the last task
left as released), one bug (one function wrong: that task's points lost, no other), the
released notebook untouched, a 0-byte file, a late one (Canvas's ``LATE_``), one big because
of its outputs (11.6 MiB, over the 8 MiB file cap), one uploaded as a zip, a resubmission
(Canvas: ``-1`` and a later attachment id; Moodle: the file picker's ``(1)``), the Chinese
edition, two logins sharing the part before ``_``, and a student the roster does not have.

Asserted: every rostered student is graded exactly once, under the identity the roster and
the LMS's ids give, with the score its notebook earns (the automatic points from the source
notebook's metadata, minus the task it lost, plus the written answer once hand-graded as
the README says); the stranger is named by collect and graded nowhere; the LMS's grade
import (read by the ports of Canvas's and Moodle's importers in tests/test_lms_formats.py)
holds one row per student with that score; the bulk feedback zip holds one page per graded
student, named as the LMS's re-import reads it. The figures (students, graded, scores,
seconds) are printed for the closing note.
"""

from __future__ import annotations

import collections
import io
import re
import sys
import time
import zipfile
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402
from test_instructor_readme import (  # noqa: E402, F401 - clone: the fixture, reused
    _env,
    _hand_grade,
    _table_row,
    clone,
    instructor_commands,
    run,
)
from test_lms_formats import (  # noqa: E402
    canvas_import,
    canvas_reupload,
    moodle_feedback_import,
    moodle_import,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

CLASS_SIZE = 40
#: the variants of a class, each given to one student; every other student solved it all
VARIANTS = (
    "partial",
    "one bug",
    "blank",
    "empty",
    "late",
    "oversized",
    "zipped",
    "resubmitted",
    "Chinese",
    "prefix 1",
    "prefix 2",
)
#: the oversized notebook: 11.6 MiB of saved outputs around small code. The grader drops
#: outputs before the 8 MiB cap counts (``autograder/checking/notebook_stream.py``), so it
#: scores as the full one
OUTPUT_BYTES = int(11.6 * (1 << 20))


def _cell(notebook, grade_id: str):
    return next(c for c in notebook.cells if corpus._meta(c).get("grade_id") == grade_id)


def _points_of(course: Path, assignment: str) -> dict[str, float]:
    """Each graded cell's points, from the instructor's source notebook."""
    source = nbformat.read(course / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    return {
        corpus._meta(c)["grade_id"]: float(corpus._meta(c)["points"])
        for c in source.cells
        if corpus._meta(c).get("grade")
    }


class Chapter:
    """What one class's notebooks are made from, and what each variant scores."""

    def __init__(self, course: Path, assignment: str, last: tuple, bug: tuple, written: str):
        self.course, self.assignment = course, assignment
        points = _points_of(course, assignment)
        self.written = points.pop(written)
        self.auto = sum(points.values())
        (self.last_cell, last_test), (bug_cell, bug_test, wrong, right) = last, bug
        self.lost = {"partial": points[last_test], "one bug": points[bug_test]}
        solved, released = corpus.solved(course, assignment), corpus.blank(course, assignment)
        bug_source = _cell(solved, bug_cell).source
        assert wrong in bug_source, bug_cell
        self.notebooks = {
            "full": solved,
            "partial": corpus.set_cell(solved, last[0], _cell(released, last[0]).source),
            "one bug": corpus.set_cell(solved, bug_cell, bug_source.replace(wrong, right)),
            "blank": released,
            "Chinese": corpus.solved(course, assignment, "zh_CN"),
        }
        big = corpus.set_cell(solved, "setup", _cell(solved, "setup").source)
        _cell(big, "setup").outputs = [
            nbformat.v4.new_output("stream", name="stdout", text="0123456789abcdef\n" * n)
            for n in (OUTPUT_BYTES // 17 // 4,) * 4
        ]
        _cell(big, "setup").execution_count = 1
        self.notebooks["oversized"] = big

    def data(self, variant: str) -> bytes:
        if variant == "empty":
            return b""
        notebook = self.notebooks.get(variant, self.notebooks["full"])
        data = nbformat.writes(notebook).encode()
        if variant == "oversized":
            assert len(data) > OUTPUT_BYTES > 8 << 20
        return data

    def refused(self, variant: str) -> bool:
        return variant == "empty"

    def expected_auto(self, variant: str) -> float:
        """The automatic points: all, but the task the variant lost."""
        if variant == "blank" or self.refused(variant):
            return 0.0
        return self.auto - self.lost.get(variant, 0.0)

    def expected_written(self, variant: str) -> float:
        """What the hand grader gives the written answer: its points where the graded
        notebook holds the answer, 0 where it holds the released text (a refused notebook's
        autograded copy is the released one)."""
        return 0.0 if variant == "blank" or self.refused(variant) else self.written

    def expected(self, variant: str) -> float:
        return self.expected_auto(variant) + self.expected_written(variant)


def _zip_of(name: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(name, data)
    return buffer.getvalue()


def _variant(index: int) -> str:
    return VARIANTS[index] if index < len(VARIANTS) else "full"


def _graded_table(output: str, students) -> dict[str, list[str]]:
    """The summary table's row of each student; each must appear exactly once."""
    rows = collections.Counter(
        line.split()[0] for line in output.splitlines() if line.split() and line.split()[0]
    )
    table = {}
    for student in students:
        assert rows[student] == 1, (student, rows[student], output[-3000:])
        table[student] = _table_row(output, student)
    return table


def _hand_grade_all(course: Path, assignment: str, grade_id: str, scores: dict) -> int:
    """The README's "hand-grade the written answers in the formgrader": every submission
    that waits gets the score ``scores`` gives its student."""
    from autograder.course.hand_grading import hand_grading_of

    waiting = [s for s, h in hand_grading_of(course, assignment).items() if h.to_grade]
    for student in waiting:
        _hand_grade(course, student, grade_id, scores[student], assignment)
    return len(waiting)


def _figures(name: str, scores: dict[str, float], graded: int, seconds: float) -> str:
    histogram = collections.Counter(f"{s:g}" for s in scores.values())
    shown = ", ".join(f"{k}: {v}" for k, v in sorted(histogram.items(), key=lambda i: -float(i[0])))
    return (
        f"{name}: {len(scores)} students on the roster and 1 not, {graded} graded (each once), "
        f"scores {{{shown}}}, {seconds:.0f} s from roster to feedback zip"
    )


# --- Canvas: ch2_soft_hard


A = "ch2_soft_hard"
DUE = "2026-03-01 23:59:00"


def _canvas_people() -> list[dict]:
    people = []
    for i in range(CLASS_SIZE):
        variant = _variant(i)
        login = {"prefix 1": "ab_12", "prefix 2": "ab_34"}.get(variant, f"s{i + 1:02d}")
        people.append(
            {
                "login": login,
                "uid": 2001 + i,
                "name": f"Student{i + 1:02d}, Pat",
                "variant": variant,
            }
        )
    return people


def _canvas_roster(people) -> str:
    """Canvas's "Export Entire Gradebook" (lib/gradebook_exporter.rb)."""
    lines = [
        "Student,ID,SIS User ID,SIS Login ID,Section,Soft and hard (6601),Current Score",
        "    Points Possible,,,,,17.00,(read only)",
    ]
    lines += [f'"{p["name"]}",{p["uid"]},S{p["uid"]},{p["login"]},Section 1,,' for p in people]
    return "\n".join(lines) + "\n"


def _canvas_download(root: Path, chapter: Chapter, people) -> dict[str, tuple[int, int]]:
    """Canvas's "Download submissions" (lib/content_zipper.rb): ``<sortable name>_[LATE_]
    <user id>_<attachment id>_<file>``, the sortable name lowercased without non-word
    characters. Returns each student's (user id, attachment id) of the file to grade."""
    kept = {}
    with zipfile.ZipFile(root / "downloads.zip", "w") as archive:
        for number, person in enumerate(people):
            variant, uid = person["variant"], person["uid"]
            stem = re.sub(r"\W", "", person["name"]).lower()
            late = "LATE_" if variant == "late" else ""
            attachment = 70000 + 10 * number
            if variant == "zipped":
                name = f"{stem}_{uid}_{attachment}_work.zip"
                archive.writestr(name, _zip_of(f"work/{A}.ipynb", chapter.data("full")))
            elif variant == "resubmitted":
                archive.writestr(f"{stem}_{uid}_{attachment}_{A}.ipynb", chapter.data("blank"))
                attachment += 5
                archive.writestr(f"{stem}_{uid}_{attachment}_{A}-1.ipynb", chapter.data("full"))
            else:
                name = f"{stem}_{late}{uid}_{attachment}_{A}.ipynb"
                archive.writestr(name, chapter.data(variant))
            kept[person["login"]] = (uid, attachment)
        archive.writestr(f"strangerkim_2999_79999_{A}.ipynb", chapter.data("full"))
    return kept


def _canvas_class(root: Path, readme: str, env: dict) -> str:
    course = root / "autograder"
    pipeline = [c.replace("ch1_pooling", A) for c in instructor_commands(readme)[0]]
    due_line = re.search(r"^\(cd autograder && .*db assignment add ch1_pooling.*$", readme, re.M)
    people = _canvas_people()
    (root / "students.csv").write_text(_canvas_roster(people))
    chapter = kept = None
    started = time.monotonic()
    for command in pipeline:
        if command.startswith(".venv/bin/python -m autograder roster"):
            run(command, root, env)
            run(
                due_line[0].replace("ch1_pooling", A).replace("2026-03-01 23:59:00", DUE), root, env
            )
            chapter = Chapter(
                course,
                A,
                ("sparsemax-backward", "test-sparsemax-backward"),
                (
                    "softmax-backward",
                    "test-softmax-backward",
                    "- p * (p * dp).sum(",
                    "- (p * dp).sum(",
                ),
                "written-sparsemax",
            )
            continue
        if " collect " in command:
            kept = _canvas_download(root, chapter, people)
        if " export " in command:
            written = {p["login"]: chapter.expected_written(p["variant"]) for p in people}
            _hand_grade_all(course, A, "written-sparsemax", written)
        output = run(command, root, env)
        if command == "make release":
            started = time.monotonic()
        elif " collect " in command:
            assert (
                "refused 'strangerkim_2999_79999_ch2_soft_hard.ipynb': Canvas user 2999 is "
                "not on the roster" in output
            ), output[-3000:]
            late = next(p["login"] for p in people if p["variant"] == "late")
            stamp = course / "submitted" / late / A / "timestamp.txt"
            assert stamp.read_text() == "2026-03-01 23:59:01+00:00"  # due + 1 s
            collected = sorted(p.name for p in (course / "submitted").iterdir())
            assert collected == sorted(p["login"] for p in people)  # the stranger: nowhere
        elif command.startswith("make grade"):
            table = _graded_table(output, [p["login"] for p in people])
            assert f"graded {CLASS_SIZE}, skipped 0" in output
            assert "stranger" not in output and "2999" not in output
            for person in people:
                row = table[person["login"]]
                assert float(row[1]) == chapter.expected_auto(person["variant"]), (person, row)
        elif " export " in command:
            _, grades, _ = canvas_import((root / "grades.csv").read_text())
            expected = {p["uid"]: [f"{chapter.expected(p['variant']):g}"] for p in people}
            assert grades == expected
        elif " feedback-archive " in command:
            with zipfile.ZipFile(root / "feedback.zip") as archive:
                names = archive.namelist()
            pairs = sorted(tuple(map(int, canvas_reupload(n))) for n in names)
            assert pairs == sorted(kept.values())  # one page per graded student, its file
    seconds = time.monotonic() - started
    scores = {p["login"]: chapter.expected(p["variant"]) for p in people}
    return _figures(f"Canvas class ({A})", scores, CLASS_SIZE, seconds)


# --- Moodle >= 4.1: ch6_transformer


M = "ch6_transformer"


def _moodle_people() -> list[dict]:
    people = []
    for i in range(CLASS_SIZE):
        variant = _variant(i)
        if variant == "late":  # Moodle 4.1 dates nothing: a late file is not told apart
            variant = "full"
        email = {"prefix 1": "wang_li", "prefix 2": "wang_lei"}.get(variant, f"m{i + 1:02d}")
        people.append(
            {
                "email": f"{email}@example.edu",
                "pid": 5101 + i,
                "name": f"Learner {i + 1:02d}",
                "variant": variant,
            }
        )
    return people


def _moodle_worksheet(people, maximum: float) -> str:
    """Moodle's "Download grading worksheet" (mod/assign/gradingtable.php)."""
    lines = [
        "Identifier,Full name,Email address,Status,Grade,Maximum Grade,Grade can be changed,"
        "Last modified (submission),Last modified (grade),Feedback comments"
    ]
    lines += [
        f"Participant {p['pid']},{p['name']},{p['email']},Submitted for grading,,"
        f"{maximum:.2f},Yes,-,-,"
        for p in people
    ]
    return "\n".join(lines) + "\n"


def _moodle_download(root: Path, chapter: Chapter, people) -> None:
    """Moodle >= 4.1's "Download all submissions" in folders (mod/assign/classes/
    downloader.php): ``<full name>_<participant id>_assignsubmission_file/<file>``."""
    with zipfile.ZipFile(root / "downloads.zip", "w") as archive:
        for person in people:
            folder = f"{person['name']}_{person['pid']}_assignsubmission_file"
            variant = person["variant"]
            if variant == "zipped":
                archive.writestr(f"{folder}/work.zip", _zip_of(f"{M}.ipynb", chapter.data("full")))
            elif variant == "resubmitted":
                archive.writestr(f"{folder}/{M}.ipynb", chapter.data("blank"))
                archive.writestr(f"{folder}/{M} (1).ipynb", chapter.data("full"))
            else:
                archive.writestr(f"{folder}/{M}.ipynb", chapter.data(variant))
        stranger = f"Kim Stranger_5999_assignsubmission_file/{M}.ipynb"
        archive.writestr(stranger, chapter.data("full"))


def _moodle_class(root: Path, readme: str, env: dict) -> str:
    course = root / "autograder"
    commands = instructor_commands(readme)[1]
    people = _moodle_people()
    chapter = Chapter(
        course,
        M,
        ("greedy-decode-cached", "test-cache"),
        ("noam", "test-noam-rate", "step * warmup**-1.5", "step * warmup**-0.5"),
        "written-heads",
    )
    (root / "students.csv").write_text(_moodle_worksheet(people, chapter.auto + chapter.written))
    by_email = {p["email"]: p for p in people}
    started = time.monotonic()
    for command in commands:
        if " collect " in command:
            _moodle_download(root, chapter, people)
        if " export " in command:
            written = {e: chapter.expected_written(p["variant"]) for e, p in by_email.items()}
            _hand_grade_all(course, M, "written-heads", written)
        output = run(command, root, env)
        if " collect " in command:
            assert (
                f"refused 'Kim Stranger_5999_assignsubmission_file/{M}.ipynb': Moodle "
                "participant 5999 is not on the roster"
            ) in output, output[-3000:]
            collected = {p.name for p in (course / "submitted").iterdir() if (p / M).is_dir()}
            assert collected == set(by_email)
        elif command.startswith("make grade"):
            table = _graded_table(output, list(by_email))
            assert f"graded {CLASS_SIZE}, skipped 0" in output
            for email, person in by_email.items():
                row = table[email]
                assert float(row[1]) == chapter.expected_auto(person["variant"]), (person, row)
        elif " export " in command:
            maximum = chapter.auto + chapter.written
            applied = moodle_import((root / "grades.csv").read_text(), maximum)
            assert applied == {p["pid"]: chapter.expected(p["variant"]) for p in people}
        elif " feedback-archive " in command:
            with zipfile.ZipFile(root / "feedback.zip") as archive:
                read = [moodle_feedback_import(n) for n in archive.namelist()]
            assert sorted(r[0] for r in read) == sorted(p["pid"] for p in people)
            assert {r[2] for r in read} == {f"/{M}_feedback.html"}
    seconds = time.monotonic() - started
    scores = {email: chapter.expected(p["variant"]) for email, p in by_email.items()}
    return _figures(f"Moodle 4.1 class ({M})", scores, CLASS_SIZE, seconds)


def test_a_class_of_40_per_lms_through_the_readme(clone, bubblewrap, capsys):  # noqa: F811
    readme = (clone / "README.md").read_text()
    env = _env(clone.parent / "home")
    figures = [_canvas_class(clone, readme, env), _moodle_class(clone, readme, env)]
    with capsys.disabled():
        print("\n" + "\n".join(figures))
