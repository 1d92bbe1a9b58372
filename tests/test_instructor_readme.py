"""The README's instructor commands, as written, in order, on a fresh clone.

The fenced shell blocks of README.md's "For instructors" section are read from the README
itself (so a changed command is the command tested) and run one by one with ``bash`` from
the root of a fresh copy of the repository: the files a clone holds (tracked and new, none
ignored: no release, no gradebook, no submissions), with ``.venv`` linked to the venv running
these tests (its requirements' dates set before its stamp, so ``make`` never reinstalls it).
Nothing is on ``PATH`` but the system's: every command must name the venv's programs itself.

Substituted only what the README tells the reader to substitute or do:

- the roster ``students.csv``, Canvas's gradebook export (the columns its exporter writes,
  a "Points Possible" row), and the LMS download ``downloads.zip``, made here as Canvas lays
  out "Download submissions" (``<name>_[LATE_]<user id>_<attachment id>_<file>``): alice's
  notebook, solved, and bob's, the released notebook untouched (late, and Canvas's ``-1``
  name);
- "hand-grade the written answers in the formgrader": alice's 2-point written answer gets
  2, written through nbgrader's gradebook API by the formgrader's own rule;
- the formgrader block: "as root, add --allow-root"; the server is asked for ``/formgrader``
  at the address it prints, with its token, then stopped.

Each command must exit 0, and what the README says it makes must be there: the released
zips of all six assignments (both editions), the roster in ``autograder/gradebook.db`` (and
no gradebook at the root), the collected notebooks, the summary table (alice "12 14 + 2 to
grade by hand" before hand grading), the option ``ARGS=--force`` the README gives, a
feedback page per student where the README says (alice's 14/14 once hand-graded), Canvas's
grade import (read as Canvas's importer reads it: alice 14 of 14 under her Canvas id, bob 0),
the feedback zip (each page named with the user and attachment id of the collected file, as
Canvas's re-upload reads them), the report, the formgrader's page. Then the README's Moodle
block, a Moodle >= 4.1 class of ch6_transformer (`_moodle_class`): the grading worksheet as
roster, a download where li's re-upload is the file picker's ``ch6_transformer (1).ipynb``
and ana's notebook came zipped, grading, the worksheet and the feedback zip read back as
Moodle's importers read them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

REPO = Path(__file__).resolve().parents[1]
VENV = Path(sys.prefix)  # the venv running these tests, already built
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
A = "ch1_pooling"
ASSIGNMENTS = (
    "ch1_pooling",
    "ch2_soft_hard",
    "ch3_seq2seq",
    "ch4_self_attention",
    "ch5_multihead",
    "ch6_transformer",
)
#: Canvas's "Export Entire Gradebook" (instructure/canvas-lms lib/gradebook_exporter.rb)
ROSTER = (
    "Student,ID,SIS User ID,SIS Login ID,Section,Pooling (5501),Current Score\n"
    "    Points Possible,,,,,14.00,(read only)\n"
    '"Smith, Alice",1001,S1001,alice,Section 1,,\n'
    '"Jones, Bob",1002,S1002,bob,Section 1,,\n'
)
#: Canvas's "Download submissions" (instructure/canvas-lms lib/content_zipper.rb):
#: <sortable name>_[LATE_]<user id>_<attachment id>_<file>
CANVAS = {
    "alice": f"smithalice_1001_5001_{A}.ipynb",
    "bob": f"jonesbob_LATE_1002_5002_{A}-1.ipynb",
}


def instructor_commands(readme: str) -> list[list[str]]:
    """The commands of each fenced shell block of the "For instructors" section, in order:
    one per line, comments (whole lines, or after a command) dropped."""
    section = readme.split("\n## For instructors\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(?:bash|sh|shell)\n(.*?)```", section, re.DOTALL)
    return [
        [code for line in block.splitlines() if (code := re.sub(r"(^|\s)#.*", "", line).strip())]
        for block in blocks
    ]


def option_command(readme: str) -> str:
    """The grade command with an option, as the README's comment gives it."""
    return re.search(r"\(options: (make grade A=\S+ ARGS=[^)\s]+)\)", readme).group(1)


def test_the_readme_parses_into_the_steps_this_test_knows():
    """What the test below relies on, read from the README (fails first when it changes)."""
    blocks = instructor_commands((REPO / "README.md").read_text())
    assert len(blocks) == 3, blocks  # the pipeline (Canvas), Moodle's, then the formgrader
    pipeline, moodle, formgrader = blocks
    assert [c.split()[3] for c in moodle if c.startswith(".venv/bin/python")] == [
        "roster",
        "collect",
        "export",
        "feedback",
        "feedback-archive",
    ]
    assert f"make grade A={M}" in moodle
    assert pipeline[0] == "make release"
    assert [c for c in pipeline if "students.csv" in c] == [pipeline[1]]
    assert any("downloads.zip" in c for c in pipeline)
    assert sum(c.startswith("make grade") for c in pipeline) == 1
    assert formgrader == ["cd autograder && ../.venv/bin/jupyter server"]
    assert option_command((REPO / "README.md").read_text()) == f"make grade A={A} ARGS=--force"


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """The repository's files as a clone has them, with ``.venv`` the tests' venv."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    root = tmp_path_factory.mktemp("instructor") / "attention-derived"
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file() and not source.is_symlink():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(source.read_bytes())
            (root / name).chmod(source.stat().st_mode & 0o777)
    (root / ".venv").symlink_to(VENV)
    stamp = (VENV / ".installed").stat().st_mtime
    for name in ("requirements.txt", "pyproject.toml"):  # older than the venv: no reinstall
        os.utime(root / name, (stamp - 60, stamp - 60))
    return root


def _env(home: Path) -> dict[str, str]:
    home.mkdir(exist_ok=True)
    return {"PATH": SYSTEM_PATH, "HOME": str(home), "LANG": "C.UTF-8"}


def run(command: str, cwd: Path, env: dict, timeout: float = 1200) -> str:
    """``command`` in bash, as a reader pastes it; its output, or a failure with it."""
    process = subprocess.Popen(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"`{command}` did not finish in {timeout} s:\n{output[-4000:]}")
    assert process.returncode == 0, f"`{command}` exited {process.returncode}:\n{output[-4000:]}"
    return output


def _table_row(output: str, student: str) -> list[str]:
    rows = [re.split(r"\s{2,}", line) for line in output.splitlines()]
    header = rows.index(["student", "score", "max", "by hand", "reason"])
    return next(row for row in rows[header + 2 :] if row[0] == student)


def _download(root: Path) -> None:
    """The LMS download: alice's solved notebook, bob's untouched release."""
    course = root / "autograder"
    notebooks = {"alice": corpus.solved(course, A), "bob": corpus.blank(course, A)}
    with zipfile.ZipFile(root / "downloads.zip", "w") as archive:
        for student, name in CANVAS.items():
            archive.writestr(name, nbformat.writes(notebooks[student]))


def _hand_grade(course: Path, student: str, grade_id: str, score: float, assignment=A) -> None:
    """The formgrader's ``GradeHandler.put`` for a typed score, through nbgrader's API."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        grade = gb.find_grade(grade_id, assignment, assignment, student)
        grade.manual_score = score
        grade.needs_manual_grade = grade.manual_score is None and grade.auto_score is None
        gb.db.commit()


def _check_release(root: Path, output: str) -> None:
    for folder in ("", "zh_CN/"):
        for assignment in ASSIGNMENTS:
            zip_path = root / "autograder" / "release" / f"{folder}{assignment}.zip"
            assert zipfile.is_zipfile(zip_path), f"{zip_path} missing: {output[-2000:]}"
    outbound = root / "autograder" / "exchange" / "attention-derived" / "outbound"
    assert sorted(p.name for p in outbound.iterdir()) == list(ASSIGNMENTS)


def _check_roster(root: Path) -> None:
    from nbgrader.api import Gradebook

    assert not (root / "gradebook.db").exists(), "the roster import left a gradebook at the root"
    with Gradebook(f"sqlite:///{root / 'autograder' / 'gradebook.db'}") as gb:
        students = {s.id: (s.last_name, s.lms_user_id) for s in gb.students}
    assert students == {"alice": ("Smith", "1001"), "bob": ("Jones", "1002")}


def _check_collected(root: Path) -> None:
    for student in ("alice", "bob"):
        path = root / "autograder" / "submitted" / student / A / f"{A}.ipynb"
        assert path.is_file(), path


def _check_graded(output: str) -> None:
    assert _table_row(output, "alice") == ["alice", "12", "14", "+ 2 to grade by hand", "-"]
    assert _table_row(output, "bob")[:4] == ["bob", "0", "14", "-"]
    assert "graded 2, skipped 0" in output
    assert "1 submission(s) wait for hand grading in the formgrader" in output


def _check_feedback(root: Path) -> None:
    """Where the README says: autograder/feedback/<student>/<id>/<id>.html, one file each."""
    for student, score in (("alice", "14.0"), ("bob", "0.0")):
        folder = root / "autograder" / "feedback" / student / A
        # the page, and what nbgrader's release_feedback reads beside it
        names = sorted(p.name for p in folder.iterdir())
        assert names == [f"{A}.html", "submission_secret.txt", "timestamp.txt"]
        page = (folder / f"{A}.html").read_text()
        assert f"{A} (Score: {score} / 14.0)" in page, student
        assert "window.MathJax = {" in page and "cdnjs" not in page  # math offline


def _check_export(root: Path) -> None:
    """Canvas's gradebook import, as tests/test_lms_formats.py's port of Canvas's importer
    reads it: the header, the Points Possible row, a grade per Canvas user id."""
    from test_lms_formats import canvas_import

    assignments, grades, points = canvas_import((root / "grades.csv").read_text())
    assert assignments == [(A, None)] and points == {A: "14"}
    assert grades == {1001: ["14"], 1002: ["0"]}  # alice graded by hand: nothing waits


def _check_feedback_archive(root: Path) -> None:
    """One page per student, named as Canvas's re-upload reads the user and attachment."""
    with zipfile.ZipFile(root / "feedback.zip") as archive:
        names = sorted(archive.namelist())
    assert names == [f"1001_5001_{A}_feedback.html", f"1002_5002_{A}_feedback.html"]


def _check_report(root: Path, output: str) -> None:
    report = root / "autograder" / "autograded" / f"report_{A}.html"
    assert f"wrote {report}" in output
    page = report.read_text()
    assert "2 graded submission(s); maximum score 14." in page


def _check_formgrader(command: str, root: Path, env: dict) -> None:
    """Start the server as the README says, open /formgrader at the address it printed."""
    if os.geteuid() == 0:
        command += " --allow-root"  # the README: "as root, add --allow-root"
    log_path = root.parent / "formgrader.log"
    with open(log_path, "w") as log:
        server = subprocess.Popen(
            ["bash", "-c", command],
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline, url = time.monotonic() + 180, None  # start-up on a loaded machine
        while url is None and time.monotonic() < deadline and server.poll() is None:
            found = re.search(r"(http://127\.0\.0\.1:\d+)/\S*\?token=(\w+)", log_path.read_text())
            url = found and found.groups()
            time.sleep(0.5)
        assert url, f"the server printed no address:\n{log_path.read_text()[-3000:]}"
        base, token = url
        with urllib.request.urlopen(f"{base}/formgrader?token={token}", timeout=60) as page:
            assert page.status == 200 and "formgrader" in page.read().decode().lower()
        api = f"{base}/formgrader/api/assignments?token={token}"
        with urllib.request.urlopen(api, timeout=60) as answer:
            listed = {a["name"]: a for a in json.load(answer)}
        assert listed[A]["status"] == "released" and listed[A]["num_submissions"] == 2
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


M = "ch6_transformer"
#: Moodle's "Download grading worksheet" of the assignment (mod/assign/gradingtable.php)
WORKSHEET = (
    "Identifier,Full name,Email address,Status,Grade,Maximum Grade,Grade can be changed,"
    "Last modified (submission),Last modified (grade),Feedback comments\n"
    "Participant 4101,Li Wei,li.wei@example.edu,Submitted for grading,,22.00,Yes,-,-,\n"
    "Participant 4102,Ana Gomez,ana@example.edu,Submitted for grading,,22.00,Yes,-,-,\n"
)
LI, ANA = "li.wei@example.edu", "ana@example.edu"


def _points(course: Path, assignment: str) -> tuple[float, float]:
    """(the automatic points, all points) of the assignment's source notebook."""
    source = nbformat.read(course / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    graded = [c for c in source.cells if c.metadata.get("nbgrader", {}).get("grade")]
    total = sum(float(c.metadata.nbgrader.points) for c in graded)
    auto = sum(float(c.metadata.nbgrader.points) for c in graded if c.cell_type == "code")
    return auto, total


def _moodle_download(root: Path) -> dict[str, bytes]:
    """Moodle >= 4.1's "Download all submissions" (moodle/moodle
    mod/assign/classes/downloader.php: ``<full name>_<participant id>_assignsubmission_file/``,
    every member dated when the zip is made): li uploaded the released notebook, then the
    solved one over it, which Moodle's file picker named ``ch6_transformer (1).ipynb``; ana's
    notebook (the released one) came as a zip. Returns what each should be graded on."""
    import io

    course = root / "autograder"
    blank, solved = (nbformat.writes(n(course, M)) for n in (corpus.blank, corpus.solved))
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as archive:
        archive.writestr(f"work/{M}.ipynb", blank)
    with zipfile.ZipFile(root / "downloads.zip", "w") as archive:
        archive.writestr(f"Li Wei_4101_assignsubmission_file/{M}.ipynb", blank)
        archive.writestr(f"Li Wei_4101_assignsubmission_file/{M} (1).ipynb", solved)
        archive.writestr("Ana Gomez_4102_assignsubmission_file/work.zip", inner.getvalue())
    return {LI: solved.encode(), ANA: blank.encode()}


def _moodle_class(root: Path, commands: list[str], env: dict) -> None:
    """The README's Moodle block, run as written after the Canvas class: each command exits
    0 and leaves what it says, read back as Moodle reads it (tests/test_lms_formats.py's
    ports of Moodle's worksheet and feedback-zip importers)."""
    from nbgrader.api import Gradebook
    from test_lms_formats import moodle_feedback_import, moodle_import

    course = root / "autograder"
    auto, total = _points(course, M)
    (root / "students.csv").write_text(WORKSHEET)
    expected = {}
    for command in commands:
        if "downloads.zip" in command:
            expected = _moodle_download(root)
        if " export " in command:  # hand-grade first, as the README says
            _hand_grade(course, LI, "written-heads", 2.0, M)
        output = run(command, root, env)
        if "students.csv" in command:
            with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
                ids = {s.id: s.lms_user_id for s in gb.students if "@" in s.id}
            assert ids == {LI: "4101", ANA: "4102"}
        elif " collect " in command:
            for student, data in expected.items():
                assert (course / "submitted" / student / M / f"{M}.ipynb").read_bytes() == data
            assert f"kept '{M} (1).ipynb' (the newest by the number Moodle's file picker" in output
        elif command.startswith("make grade"):
            assert _table_row(output, LI) == [
                LI, f"{auto:g}", f"{total:g}", f"+ {total - auto:g} to grade by hand", "-"
            ]  # fmt: skip
            assert _table_row(output, ANA)[:4] == [ANA, "0", f"{total:g}", "-"]
        elif " feedback " in command:
            page = (course / "feedback" / LI / M / f"{M}.html").read_text()
            assert f"{M} (Score: {total:.1f} / {total:.1f})" in page
            assert (course / "feedback" / ANA / M / f"{M}.html").is_file()
        elif " export " in command:
            assert moodle_import((root / "grades.csv").read_text(), total) == {
                4101: total,
                4102: 0.0,
            }
        elif " feedback-archive " in command:
            with zipfile.ZipFile(root / "feedback.zip") as archive:
                names = sorted(archive.namelist())
            assert [moodle_feedback_import(n) for n in names] == [
                (4102, ("assignsubmission", "file"), f"/{M}_feedback.html"),
                (4101, ("assignsubmission", "file"), f"/{M}_feedback.html"),
            ]
        else:
            raise AssertionError(f"a Moodle step this test does not check: {command}")


def test_the_instructors_commands_run_as_written_on_a_fresh_clone(clone, bubblewrap):
    readme = (clone / "README.md").read_text()
    pipeline, moodle, formgrader = instructor_commands(readme)
    env = _env(clone.parent / "home")
    plan = run("make -n release", clone, env)
    assert "pip install" not in plan, plan  # the linked venv is never reinstalled
    (clone / "students.csv").write_text(ROSTER)
    checked = []
    for command in pipeline:
        if "downloads.zip" in command:
            _download(clone)
        if " export " in command:  # the README: hand-grade first, then export and feedback
            _hand_grade(clone / "autograder", "alice", "written-bandwidth", 2.0)
        output = run(command, clone, env)
        if command == "make release":
            _check_release(clone, output)
        elif "students.csv" in command:
            _check_roster(clone)
        elif " collect " in command:
            _check_collected(clone)
        elif command.startswith("make grade"):
            _check_graded(output)
            _check_graded(run(option_command(readme), clone, env))  # regrades both
        elif " feedback " in command:
            _check_feedback(clone)
        elif " export " in command:
            _check_export(clone)
        elif " feedback-archive " in command:
            _check_feedback_archive(clone)
        elif " report " in command:
            _check_report(clone, output)
        else:
            continue
        checked.append(command)
    assert len(checked) == len(pipeline) == 8, (checked, pipeline)  # every step was checked
    assert all((clone / name).is_file() for name in ("grades.csv", "students.csv"))
    _moodle_class(clone, moodle, env)
    for command in formgrader:
        _check_formgrader(command, clone, env)
    data = ["students.csv", "downloads.zip", "grades.csv", "feedback.zip"]  # students' data
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", *data], cwd=REPO, capture_output=True, text=True
    ).stdout.split()
    assert ignored == data
