"""`python -m autograder collect` with a hostile LMS download.

One archive holds two honest submissions and one of each hostile member: a path that climbs
out (``../``), an absolute path, a symbolic link, a name of 300 bytes, a name with a control
character, a zip bomb (80 MiB of zeros in 80 KiB), a duplicated name, a nested archive, and
file names whose student id is ``..`` or HTML. Each hostile member is refused with a warning
that names it and says why; the honest ones (and the first of the duplicates) are collected;
nothing is written outside the course, and inside it only under ``submitted/`` (the
collected notebooks) and the staging folder ``downloaded/<id>/``.

Then one small archive per rule of `collect.choose` and the plain layout's names (with a
roster): a student's several files (the newest kept, the message naming each), a
folder-shaped member before the real file, a browser's ``name (1).ipynb``, a name that fits
no roster id, the name's timestamp.

Then who a notebook belongs to: the roster and the LMS's own ids, never a name a student
chose. One test per bug seen when the name was the identity (``test_seen_*``, each failing
on the old collect): ids with ``_``, a file named for another student in one's Moodle
folder, a "resubmission" named for another student, Canvas's and Moodle's own names, and
``__MACOSX/._*``. One archive per LMS laid out as that LMS lays it out (Canvas, Moodle,
Blackboard), each with ids holding ``_``, an impersonating file name, a resubmission, a late
submission, ``__MACOSX/._`` members, a student not on the roster and two notebooks for one
student: exact placements and messages. The plain layout with and without a roster,
``--enroll-unknown``, ``--layout`` and a notebook replaced.
"""

from __future__ import annotations

import stat
import sys
import warnings
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hostile import corpus  # noqa: E402

from autograder import cli  # noqa: E402
from autograder.course import collect  # noqa: E402

A = "ch1_pooling"
NB = f"{A}.ipynb"


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def _symlink(name: str, target: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3  # Unix: the mode is in the high bits of external_attr
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


@pytest.fixture(scope="module")
def collected(tmp_path_factory, empty_gradebook):
    root = tmp_path_factory.mktemp("collect")
    course = corpus.released_course(root / "course")
    _roster(course, {"alice": None, "bob": None, "carol": None}, empty_gradebook)
    honest = (course / "release" / A / NB).read_bytes()
    outside = root / "outside"
    archive = root / "download.zip"
    hostile = {  # member name -> the phrase its refusal must contain
        f"../../escaped_{NB}": "climbs out of the archive",
        f"{outside}/absolute_{NB}": "absolute",
        f"link_{NB}": "symbolic link",
        "x" * 300 + f"_{NB}": "too long",
        f"bell\x07_{NB}": "control character",
        f"bomb_{NB}": "unpacks to 80 MiB, more than 64 MiB",
        f"carol_{NB}": "same name (the first one was kept)",
        "nested.zip": "archive inside the archive",
        f"folder/.._{NB}": "for a student id on the roster",
        f"<img src=x onerror=alert(1)>_{NB}": "for a student id on the roster",
    }
    with (
        zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf,
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate we mean to write
        zf.writestr(f"alice_attempt1_{NB}", honest)
        zf.writestr(f"bob_{NB}", honest)
        zf.writestr(f"carol_{NB}", honest)
        for name in hostile:
            if "link" in name:
                zf.writestr(_symlink(name, "/etc/passwd"), "/etc/passwd")
            elif "bomb" in name:
                zf.writestr(name, b"\0" * (80 << 20), compresslevel=9)
            elif "carol" in name:
                zf.writestr(name, b"the second carol")
            else:
                zf.writestr(name, honest)
    assert archive.stat().st_size < 1 << 20  # the bomb really is small packed
    before = _files(root)
    return course, root, before, hostile, honest


def test_each_hostile_member_is_refused_with_its_reason(collected, capfd):
    course, root, before, hostile, honest = collected
    assert cli.main(["--course", str(course), "collect", A, str(root / "download.zip")]) == 0
    err = capfd.readouterr().err
    refusals = [line for line in err.splitlines() if "refused" in line]
    for name, reason in hostile.items():
        shown = repr(name[:120] + ("..." if len(name) > 120 else ""))
        hits = [line for line in refusals if reason in line]
        assert hits, f"no refusal saying {reason!r} for {shown}:\n" + "\n".join(refusals)
        assert any(shown in line for line in hits), (shown, hits)

    submitted = course / "submitted"
    assert sorted(p.name for p in submitted.iterdir()) == ["alice", "bob", "carol"]
    for student in ("alice", "bob", "carol"):
        assert (submitted / student / A / NB).read_bytes() == honest
    # nothing outside the course; inside it, only submitted/ and nbgrader's staging folder
    new = _files(root) - before
    assert all(course in p.parents for p in new), [p for p in new if course not in p.parents]
    allowed = (submitted, course / "downloaded" / A)
    assert all(any(a in p.parents for a in allowed) for p in new), sorted(new)
    staged = _files(course / "downloaded" / A / "extracted")
    assert not [p for p in staged if p.is_symlink() or p.stat().st_size > collect.MAX_MEMBER_BYTES]
    assert not (root / "outside").exists() and not list(root.rglob("escaped_*"))


def test_a_member_whose_header_lies_about_its_size_is_refused_and_leaves_no_file(
    tmp_path, monkeypatch
):
    """A member whose header declares 10 bytes but whose data is 5000: it passes the header
    check, unpacking it fails (no more than the declared size is read, and its checksum is
    then wrong), and the partial file is removed; the honest member beside it is kept."""
    monkeypatch.setattr(collect, "MAX_MEMBER_BYTES", 1000)
    archive = tmp_path / "lying.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"small_{NB}", b"a" * 500)
        zf.writestr(f"big_{NB}", b"b" * 5000)
    # rewrite big's declared size (local header and central directory) to 10 bytes
    data = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as zf:
        big = zf.getinfo(f"big_{NB}")
    for offset in (big.header_offset + 22, data.rfind(b"PK\x01\x02") + 24):
        data[offset : offset + 4] = (10).to_bytes(4, "little")
    archive.write_bytes(bytes(data))
    written, refused = collect.extract_zip(archive, tmp_path / "out")
    assert [p.name for p in written] == [f"small_{NB}"]
    assert len(refused) == 1 and f"big_{NB}" in refused[0]
    assert not (tmp_path / "out" / f"big_{NB}").exists()


@pytest.mark.parametrize(
    "name, problem",
    [
        ("a/../../b.ipynb", "climbs out"),
        ("C:/Users/b.ipynb", "absolute"),
        ("a\\..\\b.ipynb", "backslash"),
        ("./", None),  # a folder entry: skipped, not refused
        ("./.", "no name"),
        ("new\nline.ipynb", "control character"),
        ("a/" + "y" * 256 + ".ipynb", "too long"),
        ("answers.tar.gz", "archive inside"),
        ("a/./b_ch1_pooling.ipynb", None),
    ],
)
def test_member_names_judged_from_the_header(name, problem):
    info = zipfile.ZipInfo(name)
    found = None if info.is_dir() else collect.member_problem(info)
    assert (found is None) if problem is None else (problem in found), (name, found)


def test_not_a_zip_is_an_error_that_says_so(tmp_path, capsys):
    bogus = tmp_path / "download.zip"
    bogus.write_text("not a zip")
    assert cli.main(["--course", str(tmp_path), "collect", A, str(bogus)]) == 2
    assert "is not a zip archive" in capsys.readouterr().err


def _zip(path: Path, members) -> Path:
    """A zip of (name, bytes, date) members, in that order."""
    with zipfile.ZipFile(path, "w") as zf:
        for name, data, date in members:
            zf.writestr(zipfile.ZipInfo(name, date_time=date), data)
    return path


def _collect_zip(tmp_path, empty, members, regexp=None):
    """`collect.collect` in the plain layout, with alice, bob, carol and dan on the roster."""
    course = _roster(tmp_path / "course", dict.fromkeys(["alice", "bob", "carol", "dan"]), empty)
    students, messages = collect.collect(
        course, A, _zip(tmp_path / "lms.zip", members), regexp, layout="plain"
    )
    return course, students, messages


OLD, NEW = (2026, 1, 29, 10, 0, 0), (2026, 1, 30, 15, 0, 0)


def test_a_resubmission_keeps_the_newest_file_and_says_which_was_dropped(tmp_path, empty_gradebook):
    """Two files of alice's without timestamps in their names (stock zip_collect stops every
    student on this): the newer member is kept, the message names both; bob is collected."""
    course, students, messages = _collect_zip(
        tmp_path,
        empty_gradebook,
        [
            (f"alice_attempt2_{NB}", b"second", NEW),
            (f"alice_attempt1_{NB}", b"first", OLD),
            (f"bob_{NB}", b"bob's", OLD),
        ],
    )
    assert students == ["alice", "bob"]
    assert (course / "submitted" / "alice" / A / NB).read_bytes() == b"second"
    assert (course / "submitted" / "bob" / A / NB).read_bytes() == b"bob's"
    assert messages == [
        f"alice: 2 files; kept the newest, 'alice_attempt2_{NB}' (2026-01-30 15:00:00), "
        f"dropped 'alice_attempt1_{NB}' (2026-01-29 10:00:00)"
    ]
    assert not (course / "submitted" / "alice" / A / "timestamp.txt").exists()


def test_a_folder_shaped_member_never_blocks_the_students_own_file(tmp_path, empty_gradebook):
    course, students, messages = _collect_zip(
        tmp_path,
        empty_gradebook,
        [(f"alice_{NB}/notes.txt", b"notes", OLD), (f"alice_{NB}", b"mine", OLD)],
    )
    assert students == ["alice"]
    assert (course / "submitted" / "alice" / A / NB).read_bytes() == b"mine"
    assert messages == [f"skipped 'alice_{NB}/notes.txt' from lms.zip: not a notebook (.ipynb)"]


def test_a_browsers_numbered_copy_is_a_resubmission(tmp_path, empty_gradebook):
    course, students, messages = _collect_zip(
        tmp_path,
        empty_gradebook,
        [(f"bob_{A} (1).ipynb", b"again", NEW), (f"bob_{NB}", b"once", OLD)],
    )
    assert students == ["bob"]
    assert (course / "submitted" / "bob" / A / NB).read_bytes() == b"again"
    assert messages == [
        f"bob: 2 files; kept the newest, 'bob_{A} (1).ipynb' (2026-01-30 15:00:00), "
        f"dropped 'bob_{NB}' (2026-01-29 10:00:00)"
    ]


def test_a_name_that_fits_no_roster_id_is_refused_with_the_names_expected(
    tmp_path, empty_gradebook
):
    course, students, messages = _collect_zip(
        tmp_path,
        empty_gradebook,
        [(NB, b"whose?", OLD), (f"carol-{NB}", b"dash", OLD), (f"dan_{NB}", b"ok", OLD)],
    )
    assert students == ["dan"]
    expected = (
        f"its name is not <student id>_{NB} or <student id>_<anything>_{NB} for a student id "
        "on the roster"
    )
    assert messages == [f"refused {NB!r}: {expected}", f"refused 'carol-{NB}': {expected}"]


def test_the_names_timestamp_orders_resubmissions_and_a_bad_one_skips_that_file_only(
    tmp_path, empty_gradebook
):
    """With a pattern that has a timestamp group, the name's date wins over the member's
    date, is written to timestamp.txt, and a file whose timestamp is not a date is skipped
    alone."""
    regexp = r".*/(?P<student_id>[^/_]+)_(?P<timestamp>[0-9-]+)_(?P<file_id>ch1_pooling)\.ipynb$"
    course, students, messages = _collect_zip(
        tmp_path,
        empty_gradebook,
        [
            (f"alice_2026-02-01-09-00-00_{NB}", b"latest by name", OLD),
            (f"alice_2026-01-31-09-00-00_{NB}", b"earlier by name", NEW),
            (f"alice_9999-99-99_{NB}", b"bad date", NEW),
        ],
        regexp,
    )
    assert students == ["alice"]
    folder = course / "submitted" / "alice" / A
    assert (folder / NB).read_bytes() == b"latest by name"
    assert (folder / "timestamp.txt").read_text() == "2026-02-01 09:00:00"
    assert messages == [
        f"skipped 'alice_9999-99-99_{NB}': its timestamp '9999-99-99' is not a date",
        f"alice: 2 files; kept the newest, 'alice_2026-02-01-09-00-00_{NB}' "
        f"(2026-02-01 09:00:00), dropped 'alice_2026-01-31-09-00-00_{NB}' (2026-01-31 09:00:00)",
    ]


def test_the_cli_reports_each_message_and_what_was_collected(tmp_path, capsys, empty_gradebook):
    course = _roster(tmp_path / "course", {"alice": None}, empty_gradebook)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate we mean to write
        archive = _zip(
            tmp_path / "lms.zip", [(f"alice_{NB}", b"a", OLD), (f"alice_{NB}", b"b", NEW)]
        )
    assert cli.main(["--course", str(course), "collect", A, str(archive)]) == 0
    out, err = capsys.readouterr()
    assert "another member has the same name (the first one was kept)" in err
    assert out.strip() == f"collected 1 submission(s) of {A} into {course / 'submitted'}: alice"


# --- who a notebook belongs to: the roster and the LMS's own ids, never a name a student chose


def _roster(course: Path, students: dict, empty: Path) -> Path:
    """nbgrader's student list, as `nbgrader db student import` leaves it: id -> lms_user_id."""
    import shutil

    from nbgrader.api import Gradebook

    course.mkdir(parents=True, exist_ok=True)
    if not (course / "gradebook.db").exists():
        shutil.copyfile(empty, course / "gradebook.db")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student, lms_id in students.items():
            gb.update_or_create_student(student, lms_user_id=lms_id)
    return course


def _cli_collect(course: Path, archive: Path, *options: str) -> tuple[int, str, str]:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["--course", str(course), "collect", A, str(archive), *options])
    return code, out.getvalue(), err.getvalue()


def _submitted(course: Path) -> dict[str, bytes]:
    """Each student's collected notebook."""
    root = course / "submitted"
    return {p.parent.parent.name: p.read_bytes() for p in sorted(root.glob(f"*/{A}/{NB}"))}


# The four bugs seen with names as identity (each test fails on the old collect)


def test_seen_ids_with_underscores_are_two_students(tmp_path, empty_gradebook):
    """``ab_12`` and ``ab_34`` were one student ``ab``, one notebook dropped as older."""
    course = _roster(tmp_path / "course", {"ab_12": None, "ab_34": None}, empty_gradebook)
    archive = _zip(tmp_path / "lms.zip", [(f"ab_12_{NB}", b"12", OLD), (f"ab_34_{NB}", b"34", NEW)])
    code, out, err = _cli_collect(course, archive)
    assert code == 0, err
    assert _submitted(course) == {"ab_12": b"12", "ab_34": b"34"}
    assert "dropped" not in err


def test_seen_a_file_named_after_another_student_in_ones_folder_stays_the_uploaders(
    tmp_path, empty_gradebook
):
    """Mallory uploads ``bob_ch1_pooling.ipynb`` in her Moodle folder: it was bob's (the newer
    of his two files), it is mallory's."""
    course = _roster(tmp_path / "course", {"bob": "41", "mallory": "99"}, empty_gradebook)
    archive = _zip(
        tmp_path / "moodle.zip",
        [
            (f"Bob B_41_assignsubmission_file_/{NB}", b"bob's own", OLD),
            (f"Mallory M_99_assignsubmission_file_/bob_{NB}", b"mallory's", NEW),
        ],
    )
    code, out, err = _cli_collect(course, archive)
    assert code == 0, err
    assert _submitted(course) == {"bob": b"bob's own", "mallory": b"mallory's"}


def test_seen_a_resubmission_named_for_another_student_is_the_uploaders(tmp_path, empty_gradebook):
    """``bob_resubmission_ch1_pooling.ipynb`` in mallory's Moodle folder was bob's newest
    submission; it is mallory's, bob keeps his own."""
    course = _roster(tmp_path / "course", {"bob": "41", "mallory": "99"}, empty_gradebook)
    archive = _zip(
        tmp_path / "moodle.zip",
        [
            (f"Bob B_41_assignsubmission_file_/{NB}", b"bob's own", OLD),
            (f"Mallory M_99_assignsubmission_file_/bob_resubmission_{NB}", b"forged", NEW),
        ],
    )
    code, out, err = _cli_collect(course, archive)
    assert code == 0, err
    assert _submitted(course) == {"bob": b"bob's own", "mallory": b"forged"}


def test_seen_canvas_and_moodle_names_are_collected(tmp_path, empty_gradebook):
    """Canvas's ``<login>_LATE_<user>_<submission>_<name>-1.ipynb`` and a Moodle folder's
    ``ch6_transformer.ipynb``-style name were skipped as not matching."""
    course = _roster(tmp_path / "course", {"ab_12": "1012", "ab_34": "34"}, empty_gradebook)
    canvas = _zip(tmp_path / "canvas.zip", [(f"ab12_LATE_1012_5001_{A}-1.ipynb", b"c", OLD)])
    code, out, err = _cli_collect(course, canvas)
    assert code == 0, err
    assert _submitted(course) == {"ab_12": b"c"}
    moodle = _zip(tmp_path / "moodle.zip", [(f"Ab T_34_assignsubmission_file_/{NB}", b"m", OLD)])
    code, out, err = _cli_collect(course, moodle)
    assert code == 0, err
    assert _submitted(course) == {"ab_12": b"c", "ab_34": b"m"}


def test_seen_macos_metadata_is_skipped_not_refused_as_a_student(tmp_path, empty_gradebook):
    course = _roster(tmp_path / "course", {"bob": None}, empty_gradebook)
    archive = _zip(
        tmp_path / "lms.zip", [(f"bob_{NB}", b"bob", OLD), (f"__MACOSX/._bob_{NB}", b"\0", OLD)]
    )
    code, out, err = _cli_collect(course, archive)
    assert code == 0, err
    assert _submitted(course) == {"bob": b"bob"}
    assert (
        f"skipped '__MACOSX/._bob_{NB}' from lms.zip: macOS metadata (__MACOSX/, ._*), "
        "not a submission"
    ) in err.splitlines()
    assert "refused" not in err


# One archive per LMS, laid out as that LMS lays out its download


def _lms_collect(tmp_path, empty, roster: dict, members, *options):
    course = _roster(tmp_path / "course", roster, empty)
    code, out, err = _cli_collect(course, _zip(tmp_path / "lms.zip", members), *options)
    return course, code, out, err.splitlines()


NOT_ON_ROSTER = "is not on the roster ({}; or collect with --enroll-unknown)"


def test_a_canvas_download(tmp_path, empty_gradebook):
    """Canvas's flat ``<sortable name>_[LATE_]<user id>_<attachment id>_<file name>``: each
    file is the Canvas user's whose roster entry has that lms_user_id, whatever the names."""
    roster = {
        "ab_12": "1012",
        "ab_34": "1034",
        "mallory": "1099",
        "dan": "1050",
        "erin": "1060",
        "oscar": "1088",
    }
    course, code, out, err = _lms_collect(
        tmp_path,
        empty_gradebook,
        roster,
        [
            (f"ab12_1012_5001_{NB}", b"ab_12's", OLD),
            (f"__MACOSX/._ab12_1012_5001_{NB}", b"\0", OLD),
            # late, and Canvas's name for a file submitted again: <name>-1
            (f"ab34_LATE_1034_5002_{A}-1.ipynb", b"ab_34's", NEW),
            # mallory names her file after ab_12: it is hers
            (f"mallorym_1099_5003_ab_12_{NB}", b"mallory's", NEW),
            # two notebooks: the one named ch1_pooling.ipynb is graded
            (f"dand_1050_5004_{NB}", b"dan's", OLD),
            ("dand_1050_5004_scratch.ipynb", b"dan's scratch", OLD),
            # two notebooks, neither named ch1_pooling.ipynb: refused
            ("erinx_1060_5006_draft.ipynb", b"erin's draft", OLD),
            ("erinx_1060_5006_final.ipynb", b"erin's final", OLD),
            (f"zedz_1077_5007_{NB}", b"not on the roster", OLD),
            # oscar (1088) set his name to "o 1012 7": his name now holds ab_12's user id
            (f"o_1012_7_1088_5008_{NB}", b"oscar's", OLD),
            # the same from a student not on the roster (1066)
            (f"z_1012_3_1066_5009_{NB}", b"a stranger's", OLD),
        ],
    )
    assert code == 0
    assert _submitted(course) == {
        "ab_12": b"ab_12's",
        "ab_34": b"ab_34's",
        "mallory": b"mallory's",
        "dan": b"dan's",
    }
    assert err == [
        "lms.zip: 10 of 11 members are named as Canvas names them",
        "lms.zip: read as a Canvas download",
        f"skipped '__MACOSX/._ab12_1012_5001_{NB}' from lms.zip: macOS metadata "
        "(__MACOSX/, ._*), not a submission",
        f"refused 'zedz_1077_5007_{NB}': Canvas user 1077 "
        + NOT_ON_ROSTER.format(collect.roster_import("canvas", course, A)),
        f"refused 'o_1012_7_1088_5008_{NB}': its name could belong to the Canvas users "
        "1012, 7, 1088 (the name before the ids and the file name after them are the "
        "student's); collect it by hand",
        f"refused 'z_1012_3_1066_5009_{NB}': its name could belong to the Canvas users "
        "1012, 3, 1066 (the name before the ids and the file name after them are the "
        "student's); collect it by hand",
        "ab_34 (Canvas user 1034): submitted late (Canvas's LATE mark)",
        f"dan (Canvas user 1050): 2 notebooks ('{NB}', 'scratch.ipynb'); kept '{NB}' "
        f"(named {NB}), dropped the others",
        "refused erin (Canvas user 1060): 2 notebooks ('draft.ipynb', 'final.ipynb'), the "
        f"archive does not say which is newest and none is named {NB}; nothing collected for "
        "this student (copy the right one by hand)",
        "ab_34 (Canvas user 1034): Canvas's LATE mark is not recorded: the assignment has no "
        "due date in the gradebook (set it, then collect again)",
    ]
    assert out.strip().endswith(": ab_12, ab_34, dan, mallory")


def test_a_moodle_download(tmp_path, empty_gradebook):
    """Moodle's ``<full name>_<participant id>_assignsubmission_file_/`` folders: each file
    is the participant's whose roster entry has that lms_user_id."""
    roster = {"ab_12": "12", "ab_34": "34", "mallory": "99", "dan": "50", "erin": "60"}
    roster["eve"] = "77"
    course, code, out, err = _lms_collect(
        tmp_path,
        empty_gradebook,
        roster,
        [
            (f"Ab Twelve_12_assignsubmission_file_/{NB}", b"ab_12's", OLD),
            (f"Ab Thirtyfour_34_assignsubmission_file_/{NB}", b"ab_34's, late", NEW),
            # mallory's resubmission named for ab_12: hers
            (f"Mallory M_99_assignsubmission_file_/ab_12_resubmission_{NB}", b"mallory's", NEW),
            (f"Dan D_50_assignsubmission_file_/{NB}", b"dan's", OLD),
            (f"Dan D_50_assignsubmission_file_/old/{A} (1).ipynb", b"dan's older", OLD),
            ("Dan D_50_assignsubmission_onlinetext_/onlinetext.html", b"<p>hi</p>", OLD),
            (f"__MACOSX/Dan D_50_assignsubmission_file_/._{NB}", b"\0", OLD),
            ("Erin E_60_assignsubmission_file_/a.ipynb", b"erin's a", OLD),
            ("Erin E_60_assignsubmission_file_/b.ipynb", b"erin's b", OLD),
            (f"Zed Z_88_assignsubmission_file_/{NB}", b"not on the roster", OLD),
            # a full name holding ab_12's id: the participant id is the one before the suffix
            (f"Eve_12_77_assignsubmission_file_/{NB}", b"eve's", OLD),
        ],
    )
    assert code == 0
    assert _submitted(course) == {
        "ab_12": b"ab_12's",
        "ab_34": b"ab_34's, late",
        "mallory": b"mallory's",
        "dan": b"dan's",
        "eve": b"eve's",
    }
    assert err == [
        "lms.zip: 10 of 11 members are named as Moodle names them",
        "lms.zip: read as a Moodle download",
        "skipped 'Dan D_50_assignsubmission_onlinetext_/onlinetext.html' from lms.zip: not a "
        "notebook (.ipynb)",
        f"skipped '__MACOSX/Dan D_50_assignsubmission_file_/._{NB}' from lms.zip: macOS "
        "metadata (__MACOSX/, ._*), not a submission",
        f"refused 'Zed Z_88_assignsubmission_file_/{NB}': Moodle participant 88 "
        + NOT_ON_ROSTER.format(collect.roster_import("moodle", course, A)),
        # the picker's "(1)" counts within one folder only: the archive does not say
        f"dan (Moodle participant 50): 2 notebooks ('{NB}', 'old/{A} (1).ipynb'), the archive "
        f"does not say which is newest; kept '{NB}' (named {NB}), dropped the others",
        "refused erin (Moodle participant 60): 2 notebooks ('a.ipynb', 'b.ipynb'), the archive "
        f"does not say which is newest and none is named {NB}; nothing collected for this "
        "student (copy the right one by hand)",
    ]


def test_a_blackboard_download(tmp_path, empty_gradebook):
    """Blackboard's ``<assignment>_<username>_attempt_<date>_<file name>`` beside each
    attempt's receipt: the username is the roster id, the newest attempt by Blackboard's
    date is kept (not the member's date in the zip)."""
    roster = {"ab_12": None, "ab_34": None, "mallory": None, "dan": None, "erin": None}
    bb = "Chapter 1_pooling"

    def attempt(user, date, original=None):
        tail = f"_{original}" if original else ".txt"
        return f"{bb}_{user}_attempt_{date}{tail}"

    d1, d2, d3 = "2026-01-29-10-00-00", "2026-01-30-09-00-00", "2026-02-03-00-00-00"
    members = [
        (attempt("ab_12", d1), b"receipt", NEW),
        (attempt("ab_12", d1, NB), b"ab_12's first", NEW),
        (attempt("ab_12", d2), b"receipt", OLD),
        (attempt("ab_12", d2, NB), b"ab_12's second", OLD),
        (attempt("ab_34", d3), b"receipt", OLD),  # late: after the deadline
        (attempt("ab_34", d3, NB), b"ab_34's", OLD),
        # mallory's file name imitates ab_34's later attempt: it is hers
        (attempt("mallory", d2), b"receipt", OLD),
        (attempt("mallory", d2, attempt("ab_34", "2026-02-09-00-00-00", NB)), b"hers", OLD),
        (attempt("dan", d1), b"receipt", OLD),
        (attempt("dan", d1, NB), b"dan's", OLD),
        (attempt("dan", d1, "scratch.ipynb"), b"dan's scratch", OLD),
        (attempt("erin", d1), b"receipt", OLD),
        (attempt("erin", d1, "x.ipynb"), b"erin's x", OLD),
        (attempt("erin", d1, "y.ipynb"), b"erin's y", OLD),
        (attempt("zed", d1), b"receipt", OLD),
        (attempt("zed", d1, NB), b"not on the roster", OLD),
        (f"__MACOSX/._{attempt('dan', d1, NB)}", b"\0", OLD),
    ]
    course, code, out, err = _lms_collect(tmp_path, empty_gradebook, roster, members)
    assert code == 0
    assert _submitted(course) == {
        "ab_12": b"ab_12's second",
        "ab_34": b"ab_34's",
        "mallory": b"hers",
        "dan": b"dan's",
    }
    receipts = [
        f"skipped {name!r} from lms.zip: not a notebook (.ipynb)"
        for name, _, _ in members
        if name.endswith(".txt")
    ]
    assert err == [
        "lms.zip: 16 of 17 members are named as Blackboard names them",
        "lms.zip: read as a Blackboard download",
        *receipts,
        f"skipped '__MACOSX/._{attempt('dan', d1, NB)}' from lms.zip: macOS metadata "
        "(__MACOSX/, ._*), not a submission",
        f"refused {attempt('zed', d1, NB)!r}: Blackboard user zed "
        + NOT_ON_ROSTER.format(collect.roster_import("blackboard", course, A)),
        f"ab_12 (Blackboard user ab_12): 2 attempts; kept the newest (2026-01-30 09:00:00: "
        f"'{NB}'), dropped '{NB}' (2026-01-29 10:00:00)",
        f"dan (Blackboard user dan): 2 notebooks ('{NB}', 'scratch.ipynb'); kept '{NB}' "
        f"(named {NB}), dropped the others",
        "refused erin (Blackboard user erin): 2 notebooks ('x.ipynb', 'y.ipynb'), the archive "
        f"does not say which is newest and none is named {NB}; nothing collected for this "
        "student (copy the right one by hand)",
    ]


def test_the_plain_layout_takes_the_longest_roster_id_and_refuses_the_rest(
    tmp_path, empty_gradebook
):
    """nbgrader's own ``<student id>_<id>.ipynb`` trusts the names, so it needs the roster:
    ``ab_12_ch1_pooling.ipynb`` is ab_12's even with ``ab`` on the roster (the longest id
    that leaves exactly ``_ch1_pooling.ipynb``); ``ab_12_try2_ch1_pooling.ipynb`` fits ab
    (``12_try2``) and ab_12 (``try2``) as ``<student id>_<anything>_<id>``, and is refused,
    as is a name that fits no roster id."""
    roster = {"ab": None, "ab_12": None, "ab_34": None}
    course, code, out, err = _lms_collect(
        tmp_path,
        empty_gradebook,
        roster,
        [
            (f"ab_12_{NB}", b"ab_12's", OLD),
            (f"ab_{NB}", b"ab's", OLD),
            (f"folder/ab_34_{NB}", b"ab_34's", OLD),
            (f"ab_12_try2_{NB}", b"ab's or ab_12's?", NEW),
            (f"zed_{NB}", b"not on the roster", OLD),
        ],
    )
    assert code == 0
    assert _submitted(course) == {"ab": b"ab's", "ab_12": b"ab_12's", "ab_34": b"ab_34's"}
    expected = f"<student id>_{NB} or <student id>_<anything>_{NB}"
    assert err == [
        "lms.zip: no member is named as Canvas, Moodle or Blackboard name them: the file "
        "names are trusted (the plain layout, for an archive you made)",
        "lms.zip: read as a plain (<student id>_<id>.ipynb) download",
        f"refused 'ab_12_try2_{NB}': its name fits the roster ids ab, ab_12 ({expected})",
        f"refused 'zed_{NB}': its name is not {expected} for a student id on the roster",
    ]


def test_the_plain_layout_without_a_roster_collects_nothing_and_exits_1(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    code, out, err = _cli_collect(course, _zip(tmp_path / "lms.zip", [(f"bob_{NB}", b"", OLD)]))
    assert code == 1
    assert (
        f"refused 'bob_{NB}': the plain layout (<student id>_{NB} or <student id>_<anything>_"
        f"{NB}) trusts names, so it needs the roster ({collect.roster_import('plain', course, A)})"
    ) in err.splitlines()
    assert out.strip().endswith(": none")
    assert not (course / "submitted").exists()


def test_enroll_unknown_adds_the_lms_id_as_a_student_unless_the_id_is_taken(
    tmp_path, empty_gradebook
):
    """``--enroll-unknown``: Canvas user 1077, not on the roster, becomes the student 1077
    (its lms_user_id 1077); Canvas user 1066 is refused, since the roster's student 1066 is
    someone else (Canvas user 5)."""
    from nbgrader.api import Gradebook

    course, code, out, err = _lms_collect(
        tmp_path,
        empty_gradebook,
        {"1066": "5"},
        [(f"zedz_1077_5007_{NB}", b"zed's", OLD), (f"yy_1066_5008_{NB}", b"yy's", OLD)],
        "--enroll-unknown",
    )
    assert code == 0
    assert _submitted(course) == {"1077": b"zed's"}
    assert err[2:] == [
        f"refused 'yy_1066_5008_{NB}': Canvas user 1066 is not on the roster, and the nbgrader "
        "id 1066 is another student's",
        "1077 (Canvas user 1077, enrolled): added to the gradebook as the student 1077 "
        "(--enroll-unknown)",
    ]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_student("1077").lms_user_id == "1077"
        assert gb.find_student("1066").lms_user_id == "5"


def test_the_layout_can_be_forced_and_a_recollection_says_what_it_replaced(
    tmp_path, empty_gradebook
):
    """``--layout canvas`` on an archive of one member; collecting again with another file
    names the replaced notebook."""
    course = _roster(tmp_path / "course", {"ab_12": "1012"}, empty_gradebook)
    first = _zip(tmp_path / "first.zip", [(f"ab12_1012_5001_{NB}", b"first", OLD)])
    assert _cli_collect(course, first, "--layout", "canvas")[0] == 0
    again = _zip(tmp_path / "again.zip", [(f"ab12_1012_5002_{NB}", b"again", NEW)])
    code, out, err = _cli_collect(course, again, "--layout", "canvas")
    assert code == 0
    assert err.splitlines() == [
        "again.zip: read as a Canvas download",
        f"ab_12 (Canvas user 1012): replaced the notebook collected before with "
        f"'ab12_1012_5002_{NB}'",
    ]
    assert _submitted(course) == {"ab_12": b"again"}


def test_a_file_name_imitating_another_lms_stops_the_guess_not_the_student(
    tmp_path, empty_gradebook
):
    """Mallory's Canvas file, named as Blackboard names ab_12's attempt, would be ab_12's if
    the archive were read as Blackboard's: an archive whose members look like two LMSs is
    not guessed at (exit 2, nothing written); with ``--layout canvas`` it is mallory's."""
    course = _roster(tmp_path / "course", {"ab_12": "1012", "mallory": "1099"}, empty_gradebook)
    forged = f"mallorym_1099_5003_Ch1_ab_12_attempt_2026-02-01-00-00-00_{NB}"
    archive = _zip(
        tmp_path / "lms.zip", [(f"ab12_1012_5001_{NB}", b"ab_12's", OLD), (forged, b"hers", NEW)]
    )
    code, out, err = _cli_collect(course, archive)
    assert code == 2 and out == ""
    assert err.splitlines() == [
        "lms.zip: its members are named as more than one LMS names them (Canvas 2, "
        f"Blackboard 1; {forged!r} as several): a student's file name may imitate another "
        "LMS; give the layout with --layout"
    ]
    assert not (course / "submitted").exists()
    code, out, err = _cli_collect(course, archive, "--layout", "canvas")
    assert code == 0, err
    assert _submitted(course) == {"ab_12": b"ab_12's", "mallory": b"hers"}
