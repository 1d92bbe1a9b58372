"""Issue 46, item 11: what an instructor met at the edges of the LMS loop, each run as met.

- The message for a student not on the roster gives a command that works as written where
  the instructor runs ``collect`` (it named ``nbgrader db student import``, which, run from
  the repository's root, fails and leaves a ``gradebook.db`` there): the command is taken
  from the message and run with ``bash``, then ``collect`` again collects the student.
- nbgrader's ``release_feedback`` on collected work (it stopped at the missing
  ``timestamp.txt``, then would at ``submission_secret.txt``): the feedback folder holds both,
  as nbgrader's own ``collect``/``autograde`` leave them, and nbgrader releases every page
  under the hash of the submission's secret.
- A notebook whose cells have no ids (nbformat 4.5 written by an editor that leaves them
  out): nbformat's ``MissingIDFieldWarning`` went to stderr through the progress bar; the
  grader's stderr now holds no warning.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402

from autograder import cli  # noqa: E402
from autograder.checking import notebook as nbparse  # noqa: E402

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _collect(course: str, archive: Path, assignment: str) -> tuple[int, list[str]]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = cli.main(["--course", course, "collect", assignment, str(archive)])
    return code, err.getvalue().splitlines()


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _students(course: Path) -> dict[str, str | None]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {s.id: s.lms_user_id for s in gb.students}


A = "ch6_transformer"
NB = f"{A}.ipynb"
#: each layout: the download with a stranger (and a student on the roster, so that the
#: layout names its users), the roster file the message asks for, the stranger's id then
CASES = {
    "canvas": (
        {f"zedz_1077_5007_{NB}": b"zed's"},
        "Student,ID,SIS User ID,SIS Login ID,Section\n    Points Possible,,,,\n"
        '"Zed, Zoe",1077,S1077,zed,Section 1\n',
        "zed",
    ),
    "moodle": (
        {f"Zoe Zed_4177_assignsubmission_file/{NB}": b"zed's"},
        "Identifier,Full name,Email address,Status,Grade,Maximum Grade,Grade can be changed,"
        "Last modified (submission),Last modified (grade)\n"
        "Participant 4177,Zoe Zed,zed@example.edu,Submitted for grading,,22.00,Yes,-,-\n",
        "zed@example.edu",
    ),
    "blackboard": (
        {
            f"Transformer_ab_12_attempt_2026-03-02-01-30-00_{NB}": b"ab_12's",
            f"Transformer_zed_attempt_2026-03-02-01-40-00_{NB}": b"zed's",
        },
        "id,first_name,last_name,email,lms_user_id\nzed,Zoe,Zed,zed@example.edu,\n",
        "zed",
    ),
    "plain": (
        {f"zed_{NB}": b"zed's"},
        "id,first_name,last_name,email,lms_user_id\nzed,Zoe,Zed,zed@example.edu,\n",
        "zed",
    ),
}


@pytest.mark.parametrize("layout", sorted(CASES))
def test_the_roster_command_in_the_message_works_where_it_is_given(
    layout, tmp_path, empty_gradebook, monkeypatch
):
    """At a checkout's root, ``collect --course autograder``: the refusal's command, run as
    written from there with bash and no venv on PATH, puts the student on the course's
    roster (no gradebook at the root), and the same download then collects the student."""
    root = tmp_path / "checkout"
    course = root / "autograder"
    course.mkdir(parents=True)
    shutil.copyfile(empty_gradebook, course / "gradebook.db")
    if layout == "blackboard":
        from nbgrader.api import Gradebook

        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
            gb.update_or_create_student("ab_12")
    members, roster, student = CASES[layout]
    archive = _zip(root / "downloads.zip", members)
    monkeypatch.chdir(root)
    code, err = _collect("autograder", archive, A)
    refusal = next(line for line in err if line.startswith("refused") and "roster" in line)
    commands = re.findall(r"`([^`]+)`", refusal)
    assert len(commands) == 1, refusal
    (root / "students.csv").write_text(roster)
    env = {"PATH": SYSTEM_PATH, "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    done = subprocess.run(
        ["bash", "-c", commands[0]], cwd=root, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, (commands[0], done.stdout[-2000:], done.stderr[-2000:])
    assert not (root / "gradebook.db").exists(), commands[0]
    assert student in _students(course), (commands[0], _students(course))
    code, err = _collect("autograder", archive, A)
    assert (course / "submitted" / student / A / NB).read_bytes() == b"zed's", err


def test_release_feedback_runs_on_collected_work(tmp_path, bubblewrap):
    """Canvas's download of alice (on time: no time recorded) and bob (LATE_: due + 1 s),
    collected, graded, their feedback made: nbgrader's ``release_feedback`` (0.9's, which
    reads ``timestamp.txt`` and ``submission_secret.txt`` beside each page) releases both
    pages, each under the hash of its submission's secret, as ``fetch_feedback`` looks for
    them."""
    from nbgrader.api import Gradebook

    a = "ch1_pooling"
    course = corpus.released_course(tmp_path / "course", (a,))
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:  # the release's
        gb.update_or_create_student("alice", lms_user_id="1001")
        gb.update_or_create_student("bob", lms_user_id="1002")
        gb.update_or_create_assignment(a, duedate="2026-03-01 23:59:00")
    solved = nbformat.writes(corpus.solved(course, a)).encode()
    archive = _zip(
        tmp_path / "d.zip",
        {f"smithalice_1001_5001_{a}.ipynb": solved, f"jonesbob_LATE_1002_5002_{a}.ipynb": solved},
    )
    code, err = _collect(str(course), archive, a)
    assert code == 0, err
    for command in (["grade", a], ["feedback", a]):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert cli.main(["--course", str(course), *command]) == 0, command
    for student, stamp in (("alice", ""), ("bob", "2026-03-01 23:59:01+00:00")):
        folder = course / "feedback" / student / a
        assert (folder / "timestamp.txt").read_text() == stamp
        secret = (course / "submitted" / student / a / "submission_secret.txt").read_text()
        assert re.fullmatch(r"[0-9a-f]{128}", secret)
        assert (folder / "submission_secret.txt").read_text() == secret
    nbgrader = Path(sys.executable).parent / "nbgrader"
    done = subprocess.run(
        [str(nbgrader), "release_feedback", a],
        cwd=course,
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{nbgrader.parent}{os.pathsep}{os.environ['PATH']}"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    released = sorted(p.name for p in (course / "exchange").rglob("feedback/*.html"))
    expected = sorted(
        hashlib.md5(
            (course / "submitted" / s / a / "submission_secret.txt").read_bytes() + a.encode()
        ).hexdigest()
        + ".html"
        for s in ("alice", "bob")
    )  # nbgrader.utils.notebook_hash(secret=..., notebook_id=...)
    assert released == expected


def _without_ids(notebook) -> str:
    """The notebook as 4.5 (which has cell ids) with none: what an editor that does not
    write ids leaves when it saves a 4.5 notebook."""
    raw = json.loads(nbformat.writes(notebook))
    raw["nbformat_minor"] = 5
    for cell in raw["cells"]:
        cell.pop("id", None)
    return json.dumps(raw)


def test_a_notebook_without_cell_ids_is_read_without_a_warning(tmp_path):
    """nbformat 4.5 with no cell ids: read (and validated) with every warning an error."""
    import warnings

    course = corpus.released_course(tmp_path / "course", ("ch1_pooling",))
    text = _without_ids(corpus.solved(course, "ch1_pooling"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        notebook, _ = nbparse.read_graded(text.encode())
    ids = [c["id"] for c in notebook.cells]
    assert len(set(ids)) == len(ids) and all(re.fullmatch(r"[\w-]{1,64}", i) for i in ids)


def test_grading_a_notebook_without_cell_ids_writes_no_warning_to_stderr(tmp_path, bubblewrap):
    """The grader's own stderr (the progress bar's) holds the bar, the table, no warning."""
    a = "ch1_pooling"
    course = corpus.released_course(tmp_path / "course", (a,))
    corpus.write_submission(course, a, "noids", _without_ids(corpus.solved(course, a)))
    done = subprocess.run(
        [sys.executable, "-m", "autograder", "--course", str(course), "grade", a],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    output = done.stdout + done.stderr
    assert "Warning" not in output and "missing an id" not in output, output[-3000:]
    row = next(line.split() for line in output.splitlines() if line.startswith("noids "))
    assert row[:3] == ["noids", "12", "14"], row
