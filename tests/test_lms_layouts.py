"""`collect` with each LMS's download laid out exactly as the LMS's own source lays it out.

Each archive below is built by the rule of the LMS's code, cited where it is built:

- Moodle 4.1 and later, ``mod/assign/classes/downloader.php`` (moodle/moodle,
  ``get_student_prefix`` and ``load_submissionplugin_filelist``): the prefix is
  ``clean_filename(str_replace('_', ' ', fullname) . '_' . uniqueid)``; "in folders" (the
  default, ``assign_downloadasfolders``) a file is ``<prefix>_<subtype>_<type>`` +
  ``filepath`` + its name, with NO trailing ``_``; not in folders it is
  ``clean_filename(<prefix>_<subtype>_<type>_<file name>)``; its ``download_zip`` adds each
  stored file with ``add_file_from_stored_file($pathinzip, $file)`` and no time, so every
  member is dated when the zip is made (``lib/classes/local/archive_writer/zip_writer.php``).
- Moodle 3.1 to 4.0, ``mod/assign/locallib.php`` ``download_submissions``: the same prefix,
  folders ``<prefix>_<subtype>_<type>_`` (a trailing ``_``), not in folders the same flat
  name; packed by ``zip_packer`` (``lib/filestorage/zip_archive.php``
  ``add_file_from_pathname``: ``ZipArchive::addFile`` of the file's copy in Moodle's file
  store, whose date is when that content was uploaded).
- Moodle's file picker, ``lib/filestorage/file_storage.php`` ``get_unused_filename``: a file
  uploaded over one of the same name becomes ``file (1).txt``, then ``file (2).txt``.
- Moodle's own feedback importer reads these folders back,
  ``mod/assign/feedback/file/importziplib.php`` ``is_valid_filename_for_import``:
  ``explode('_', $pathpart, 5)``, the participant id ``$info[1]``, "fullname_userid_
  plugintype_pluginname (as created by zip export in Moodle >= 4.1) resp. ..._ (as created
  by earlier versions)".
- Canvas, ``lib/content_zipper.rb`` (instructure/canvas-lms, ``get_filename``,
  ``add_upload_submission``, ``sanitize_user_name``): ``[sortable name, ("LATE"), user id]
  .join("_")`` with every non-word character removed, the name lowercased and its
  ``_<digits>_`` joined, then ``_<attachment id>_<display name>``; anonymous grading writes
  ``anon_<anonymous id>`` for the name and the user id; rubyzip dates each member when the
  zip is made (``get_output_stream`` without a time).
- Blackboard Learn, Original Course View, Grade Center, "Assignment File Download"
  (help.blackboard.com/Learn/Instructor/Assignments/Download_Assignments: "usernames are
  automatically included in the file names"; with an attachment, the zip holds two files per
  student, the file and a .txt the Grade Center makes with the submission's information and
  comments, "the student's username is included in both file names"):
  ``<assignment>_<username>_attempt_<YYYY-MM-DD-HH-MM-SS>_<file name>`` and one receipt
  ``..._attempt_<date>.txt`` per attempt. The help states the username and the receipt,
  not the ``_attempt_<date>`` part, which is as such downloads name files, not checked
  against a document of Blackboard's. Its help for the Ultra Course View says how to
  download, not how the files are named, so no Ultra layout is asserted beyond this one.
"""

from __future__ import annotations

import datetime
import json
import stat
import zipfile
from pathlib import Path

import pytest

from autograder import cli
from autograder.course import collect

A = "ch6_transformer"
NB = f"{A}.ipynb"
D1, D2, DOWNLOAD = (2026, 3, 1, 10, 0, 0), (2026, 3, 2, 18, 30, 0), (2026, 3, 9, 8, 0, 0)


def _course(tmp_path: Path, empty: Path, roster: dict, duedate: str | None = None) -> Path:
    import shutil

    from nbgrader.api import Gradebook

    course = tmp_path / "course"
    course.mkdir()
    shutil.copyfile(empty, course / "gradebook.db")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student, lms_id in roster.items():
            gb.update_or_create_student(student, lms_user_id=lms_id)
        if duedate:
            gb.update_or_create_assignment(A, duedate=duedate)
    return course


def _zip(path: Path, members) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data, date in members:
            if isinstance(data, zipfile.ZipInfo):  # a prepared header (a link)
                zf.writestr(data, b"/etc/passwd")
            else:
                zf.writestr(zipfile.ZipInfo(name, date_time=date), data)
    return path


def _run(course: Path, archive: Path, *options: str) -> tuple[int, str, list[str]]:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["--course", str(course), "collect", A, str(archive), *options])
    return code, out.getvalue(), err.getvalue().splitlines()


def _submitted(course: Path) -> dict[str, bytes]:
    root = course / "submitted"
    return {p.parent.parent.name: p.read_bytes() for p in sorted(root.glob(f"*/{A}/{NB}"))}


def _stamps(course: Path) -> dict[str, str]:
    root = course / "submitted"
    return {p.parent.parent.name: p.read_text() for p in sorted(root.glob(f"*/{A}/timestamp.txt"))}


def _moodle_prefix(full_name: str, participant: int) -> str:
    """downloader.php's ``get_student_prefix``: the full name's ``_`` as spaces, then
    ``_<uniqueid>`` (clean_filename removes only characters a file name cannot hold)."""
    return f"{full_name.replace('_', ' ')}_{participant}"


def _moodle41(full_name: str, participant: int, name: str, plugin: str = "file") -> str:
    """Moodle >= 4.1, in folders: ``<prefix>_<subtype>_<type>`` + filepath ("/") + name."""
    return f"{_moodle_prefix(full_name, participant)}_assignsubmission_{plugin}/{name}"


def _moodle3(full_name: str, participant: int, name: str) -> str:
    """Moodle 3.1-4.0, in folders: ``<prefix>_<subtype>_<type>_`` + filepath + name."""
    return f"{_moodle_prefix(full_name, participant)}_assignsubmission_file_/{name}"


def _moodle_flat(full_name: str, participant: int, name: str) -> str:
    """Moodle, not in folders (3.x and 4.x): ``<prefix>_<subtype>_<type>_<file name>``."""
    return f"{_moodle_prefix(full_name, participant)}_assignsubmission_file_{name}"


MOODLE_ROSTER = {"li_wei": "4101", "ana_g": "4102", "mallory": "4199", "zhang_san": "4103"}


def _moodle_members(path_of) -> list:
    """One Moodle class: a resubmission the file picker renamed, a file named for another
    student, an online text, a student whose name holds ``_``."""
    return [
        (path_of("Li Wei", 4101, NB), b"li's first upload", DOWNLOAD),
        (path_of("Li Wei", 4101, f"{A} (1).ipynb"), b"li's re-upload", DOWNLOAD),
        (path_of("Ana Gomez", 4102, NB), b"ana's", DOWNLOAD),
        (path_of("Mallory M", 4199, f"li_wei_{NB}"), b"mallory's", DOWNLOAD),
        (path_of("Zhang_San", 4103, NB), b"zhang's", DOWNLOAD),
    ]


@pytest.mark.parametrize("forced", [False, True])
def test_moodle_41_in_folders_collects_every_participant(tmp_path, empty_gradebook, forced):
    """Seen: a Moodle >= 4.1 download (no trailing ``_``) collected nothing, read as plain,
    and ``--layout moodle`` gave 0 too. Now each participant's notebook is collected; the
    picker's ``ch6_transformer (1).ipynb`` is the newest (the members' dates are all the
    download's, so only the picker's number tells)."""
    course = _course(tmp_path, empty_gradebook, MOODLE_ROSTER)
    members = _moodle_members(_moodle41) + [
        (_moodle41("Ana Gomez", 4102, "onlinetext.html", "onlinetext"), b"<p>hi</p>", DOWNLOAD)
    ]
    archive = _zip(tmp_path / "CS101-Transformer-42.zip", members)
    code, out, err = _run(course, archive, *(["--layout", "moodle"] if forced else []))
    assert code == 0, err
    assert _submitted(course) == {
        "li_wei": b"li's re-upload",
        "ana_g": b"ana's",
        "mallory": b"mallory's",
        "zhang_san": b"zhang's",
    }
    head = ["CS101-Transformer-42.zip: read as a Moodle download"]
    if not forced:
        head.insert(0, "CS101-Transformer-42.zip: 6 of 6 members are named as Moodle names them")
    assert err[: len(head)] == head
    assert (
        f"li_wei (Moodle participant 4101): 2 notebooks; kept 'ch6_transformer (1).ipynb' (the "
        f"newest by the number Moodle's file picker gave it), dropped '{NB}'"
    ) in err
    assert (
        "skipped 'Ana Gomez_4102_assignsubmission_onlinetext/onlinetext.html' from "
        "CS101-Transformer-42.zip: not a notebook (.ipynb)"
    ) in err
    assert err[-1] == (
        "CS101-Transformer-42.zip: Moodle 4.1 and later date each file of the download when "
        "the zip is made, so it gives no submission time: none was recorded"
    )
    assert _stamps(course) == {}
    records = json.loads((course / "downloaded" / A / "lms.json").read_text())
    assert records["li_wei"]["folder"] == "Li Wei_4101"
    assert records["zhang_san"]["folder"] == "Zhang San_4103"
    assert {s: r["lms_id"] for s, r in records.items()} == {
        "li_wei": "4101",
        "ana_g": "4102",
        "mallory": "4199",
        "zhang_san": "4103",
    }
    assert out.strip().endswith(": ana_g, li_wei, mallory, zhang_san")


def test_moodle_not_in_folders_collects_every_participant(tmp_path, empty_gradebook):
    """Moodle's "download submissions in folders" off: one flat name per file, the same in
    3.x and 4.x; the file name after Moodle's prefix is the student's, so a name holding
    another participant's ``_<id>_assignsubmission_file_`` changes nothing."""
    course = _course(tmp_path, empty_gradebook, MOODLE_ROSTER)
    members = _moodle_members(_moodle_flat) + [
        # mallory's file name imitates li's prefix: the first prefix is Moodle's
        (_moodle_flat("Mallory M", 4199, f"Li Wei_4101_assignsubmission_file_{NB}"), b"m2", D1)
    ]
    archive = _zip(tmp_path / "flat.zip", members)
    code, out, err = _run(course, archive)
    assert code == 0, err
    assert _submitted(course) == {
        "li_wei": b"li's re-upload",
        "ana_g": b"ana's",
        "mallory": b"mallory's",  # her two files: the one named for ch6_transformer is kept
        "zhang_san": b"zhang's",
    }
    assert err[:2] == [
        "flat.zip: 6 of 6 members are named as Moodle names them",
        "flat.zip: read as a Moodle download",
    ]
    assert err[-1] == (
        "flat.zip: a Moodle download not in folders does not say which Moodle made it (4.1 and "
        "later date each file when the zip is made), so no submission time was recorded"
    )
    assert _stamps(course) == {}
    assert (
        "mallory (Moodle participant 4199): 2 notebooks; kept 'li_wei_ch6_transformer.ipynb' "
        "(the newest by its date in the archive), dropped "
        f"'Li Wei_4101_assignsubmission_file_{NB}'"
    ) in err


def test_moodle_3_folders_keep_the_stored_files_dates_as_the_submission_time(
    tmp_path, empty_gradebook
):
    """Moodle 3.1-4.0 (a trailing ``_``): zip_packer dates each file as its copy in Moodle's
    file store, when it was uploaded, in the server's zone (``--lms-timezone``):
    timestamp.txt, in UTC. Of a
    student's two differently named notebooks the newer by that date is kept."""
    course = _course(tmp_path, empty_gradebook, MOODLE_ROSTER)
    archive = _zip(
        tmp_path / "moodle3.zip",
        [
            (_moodle3("Li Wei", 4101, "draft.ipynb"), b"li's draft", D1),
            (_moodle3("Li Wei", 4101, "final.ipynb"), b"li's final", D2),
            (_moodle3("Ana Gomez", 4102, NB), b"ana's", D1),
        ],
    )
    code, out, err = _run(course, archive, "--lms-timezone", "Asia/Shanghai")
    assert code == 0, err
    assert _submitted(course) == {"li_wei": b"li's final", "ana_g": b"ana's"}
    assert _stamps(course) == {  # 18:30 and 10:00 in Shanghai are 10:30 and 02:00 UTC
        "li_wei": "2026-03-02 10:30:00+00:00",
        "ana_g": "2026-03-01 02:00:00+00:00",
    }
    assert (
        "li_wei (Moodle participant 4101): 2 notebooks; kept 'final.ipynb' (the newest by its "
        "date in the archive), dropped 'draft.ipynb'"
    ) in err
    assert not any("gives no submission time" in line for line in err)


def test_a_moodle_roster_of_the_assignment_beats_lms_user_id(tmp_path, empty_gradebook):
    """Moodle's participant ids are per assignment: the ones `roster --assignment` kept for
    this assignment are used, not the roster's lms_user_id (another assignment's)."""
    course = _course(tmp_path, empty_gradebook, {"li_wei": "9001", "ana_g": "9002"})
    path = collect.participants_path(course, A)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"4101": "li_wei", "4102": "ana_g"}))
    archive = _zip(
        tmp_path / "m.zip",
        [(_moodle41("Li Wei", 4101, NB), b"li", D1), (_moodle41("Ana Gomez", 9001, NB), b"x", D1)],
    )
    code, out, err = _run(course, archive)
    assert _submitted(course) == {"li_wei": b"li"}
    assert (
        f"refused 'Ana Gomez_9001_assignsubmission_file/{NB}': Moodle participant 9001 is not "
        f"on the roster ({collect.roster_import('moodle', course, A)}; or collect with "
        "--enroll-unknown)"
    ) in err


CANVAS_ROSTER = {"jdoe": "1012", "asmith": "1034", "mallory": "1099"}


def _canvas(sortable: str, user: int, attachment: int, display: str, late=False) -> str:
    """content_zipper.rb: ``[users_name, ("LATE"), user_id].join("_")`` with non-word
    characters removed (the name lowercased, its ``_<digits>_`` joined), then
    ``_<attachment id>_<display name>``."""
    import re

    name = re.sub(r"_(\d+)_", r"\1", sortable).lower()
    head = re.sub(r"[^\w]", "", "_".join([name, *(["LATE"] if late else []), str(user)]))
    return f"{head}_{attachment}_{display}"


def test_canvas_keeps_the_newest_file_by_attachment_id_and_records_late(tmp_path, empty_gradebook):
    """Canvas numbers attachments as they are uploaded: of jdoe's ``ch6_transformer.ipynb``
    and ``ch6_transformer-1.ipynb`` (Canvas's name for the second upload of one name) the
    higher attachment id is the newer. The LATE mark becomes a timestamp 1 s after the due
    date (Canvas's zip carries no time), so nbgrader counts the submission late; the user
    and attachment ids are kept for the feedback zip."""
    course = _course(tmp_path, empty_gradebook, CANVAS_ROSTER, duedate="2026-03-01 23:59:00")
    archive = _zip(
        tmp_path / "course-ch6 submissions.zip",
        [
            (_canvas("Doe, Jane", 1012, 70001, f"{A}-1.ipynb"), b"jane's second", DOWNLOAD),
            (_canvas("Doe, Jane", 1012, 69990, NB), b"jane's first", DOWNLOAD),
            (_canvas("Smith, Al", 1034, 70020, NB, late=True), b"al's, late", DOWNLOAD),
            (_canvas("M, Mallory", 1099, 70030, f"jdoe_{NB}"), b"mallory's", DOWNLOAD),
        ],
    )
    code, out, err = _run(course, archive)
    assert code == 0, err
    assert _submitted(course) == {
        "jdoe": b"jane's second",
        "asmith": b"al's, late",
        "mallory": b"mallory's",
    }
    assert err == [
        "course-ch6 submissions.zip: 4 of 4 members are named as Canvas names them",
        "course-ch6 submissions.zip: read as a Canvas download",
        f"jdoe (Canvas user 1012): 2 notebooks; kept '{A}-1.ipynb' (the newest by Canvas's "
        f"attachment id), dropped '{NB}'",
        "asmith (Canvas user 1034): submitted late (Canvas's LATE mark)",
        "asmith (Canvas user 1034): Canvas's download gives no time, only the LATE mark: "
        "recorded as submitted 1 second after the due date",
    ]
    assert _stamps(course) == {"asmith": "2026-03-01 23:59:01+00:00"}
    from nbgrader.utils import parse_utc  # what the grader and nbgrader read it with

    assert parse_utc(_stamps(course)["asmith"]) == datetime.datetime(2026, 3, 1, 23, 59, 1)
    records = json.loads((course / "downloaded" / A / "lms.json").read_text())
    assert {s: (r["lms_id"], r["attachment"], r["late"]) for s, r in records.items()} == {
        "jdoe": ("1012", 70001, False),
        "asmith": ("1034", 70020, True),
        "mallory": ("1099", 70030, False),
    }


def test_canvas_anonymous_names_are_refused_not_read_as_user_ids(tmp_path, empty_gradebook):
    """With anonymous grading Canvas writes ``anon_<anonymous id>`` for the name and the
    user id; an anonymous id of digits must not be read as a user's id."""
    course = _course(tmp_path, empty_gradebook, {"jdoe": "12345"})
    archive = _zip(tmp_path / "anon.zip", [(f"anon_12345_70001_{NB}", b"who?", D1)])
    code, out, err = _run(course, archive, "--layout", "canvas")
    assert code == 1
    assert _submitted(course) == {}
    assert err[-1] == (
        f"refused 'anon_12345_70001_{NB}': Canvas names no user in an anonymously graded "
        "download (anon_<anonymous id>); download it once the assignment's anonymity is lifted"
    )


def test_blackboard_attempt_date_is_the_timestamp(tmp_path, empty_gradebook):
    """Blackboard's attempt date (in the server's zone) is the submission's time."""
    course = _course(tmp_path, empty_gradebook, {"ab_12": None})
    stem = "Transformer_ab_12_attempt_2026-03-02-01-30-00"
    archive = _zip(
        tmp_path / "bb.zip", [(f"{stem}.txt", b"receipt", D1), (f"{stem}_{NB}", b"a", D1)]
    )
    code, out, err = _run(course, archive, "--lms-timezone", "America/New_York")
    assert code == 0, err
    assert _stamps(course) == {"ab_12": "2026-03-02 06:30:00+00:00"}


# --- a student's own zip: unpacked once, under the identity of the file it came from


def _inner_zip(members) -> bytes:
    import io

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            if isinstance(data, zipfile.ZipInfo):
                zf.writestr(data, b"/etc/passwd")
            else:
                info = zipfile.ZipInfo(name, date_time=(2031, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED  # a bomb is small packed
                zf.writestr(info, data)
    return buffer.getvalue()


def _link(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


def test_a_students_zip_is_unpacked_under_its_folder_and_its_hostile_members_refused(
    tmp_path, empty_gradebook
):
    """Seen: a notebook uploaded as a ``.zip`` was refused. Now li's zip (Moodle 4.1 folder)
    and jane's (Canvas) are unpacked once, by the outer archive's rules: its link, its
    ``../``, its zip inside, its bomb and its macOS metadata are refused or skipped with
    the reason, the notebook is collected as li's and jane's whatever its name inside
    (``ana_g_ch6...``: li's); an archive in the plain layout is still refused."""
    course = _course(tmp_path, empty_gradebook, {**MOODLE_ROSTER, "jdoe": "1012"})
    li = _inner_zip(
        [
            (f"work/ana_g_{NB}", b"li's, zipped"),
            (f"__MACOSX/work/._ana_g_{NB}", b"\0"),
            ("link.ipynb", _link("link.ipynb")),
            (f"../../{NB}", b"escape"),
            ("more.zip", b"PK"),
            ("notes.txt", b"hi"),
        ]
    )
    bomb = _inner_zip([("bomb.ipynb", b"\0" * (70 << 20))])
    assert len(bomb) < 1 << 20
    members = [
        (_moodle41("Li Wei", 4101, "submission.zip"), li, D2),
        (_moodle41("Ana Gomez", 4102, "bomb.zip"), bomb, D1),
    ]
    code, out, err = _run(course, _zip(tmp_path / "m.zip", members))
    assert code == 0, err
    assert _submitted(course) == {"li_wei": b"li's, zipped"}
    inside = "from m.zip (in the student's zip 'Li Wei_4101_assignsubmission_file/submission.zip')"
    assert err[2:8] == [
        f"skipped '__MACOSX/work/._ana_g_{NB}' {inside}: macOS metadata, not a submission",
        f"refused 'link.ipynb' {inside}: it is a symbolic link",
        f"refused '../../{NB}' {inside}: its path climbs out of the archive (..)",
        f"refused 'more.zip' {inside}: it is an archive inside the student's zip (only one "
        "level is unpacked)",
        f"skipped 'notes.txt' {inside}: not a notebook (.ipynb)",
        "refused 'bomb.ipynb' from m.zip (in the student's zip 'Ana Gomez_4102_assignsubmission_"
        "file/bomb.zip'): it unpacks to 70 MiB, more than 64 MiB",
    ]
    assert len(err) == 9  # nothing else refused or skipped, then Moodle 4.1's dates:
    assert err[8].startswith("m.zip: Moodle 4.1 and later date each file of the download")
    records = json.loads((course / "downloaded" / A / "lms.json").read_text())
    assert records["li_wei"]["member"] == (
        f"Li Wei_4101_assignsubmission_file/submission.zip/work/ana_g_{NB}"
    )
    assert not [p for p in (course / "downloaded").rglob("*.zip") if p.is_file()]  # not kept
    # Canvas: the zip's name is Canvas's, the notebook's inside the student's
    canvas = _zip(
        tmp_path / "c.zip",
        [(_canvas("Doe, Jane", 1012, 7001, "hw.zip"), _inner_zip([(NB, b"j")]), D1)],
    )
    code, out, err = _run(course, canvas)
    assert code == 0, err
    assert _submitted(course)["jdoe"] == b"j"
    # plain: a file's name is who it is, so a zip stays refused
    code, out, err = _run(course, _zip(tmp_path / "p.zip", [(f"jdoe_{A}.zip", b"PK", D1)]))
    assert code == 1
    assert err[-1].startswith(
        f"refused 'jdoe_{A}.zip' from p.zip: it is an archive inside the archive (the plain "
        "layout names a student by the file's name"
    )


def test_a_students_zip_that_is_broken_or_a_crowd_is_refused_whole(tmp_path, empty_gradebook):
    """A ``.zip`` that is no zip, and one of 1,001 members (a directory bomb), are refused
    with the reason; the other student's notebook is collected."""
    course = _course(tmp_path, empty_gradebook, MOODLE_ROSTER)
    crowd = _inner_zip([(f"f{i}.txt", b"") for i in range(1001)])
    members = [
        (_moodle41("Li Wei", 4101, "broken.zip"), b"PK\x03\x04 not a zip", D1),
        (_moodle41("Ana Gomez", 4102, "crowd.zip"), crowd, D1),
        (_moodle41("Zhang_San", 4103, NB), b"zhang's", D1),
    ]
    code, out, err = _run(course, _zip(tmp_path / "m.zip", members))
    assert code == 0, err
    assert _submitted(course) == {"zhang_san": b"zhang's"}
    assert err[2:4] == [
        "refused 'Li Wei_4101_assignsubmission_file/broken.zip' from m.zip: it is not a "
        "readable zip (File is not a zip file)",
        "refused 'Ana Gomez_4102_assignsubmission_file/crowd.zip' from m.zip: the student's "
        "zip holds more than 1000 members",
    ]
    assert not [p for p in (course / "downloaded").rglob("*.zip") if p.is_file()]
