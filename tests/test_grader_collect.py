"""`python -m autograder collect` with a hostile LMS download.

One archive holds two honest submissions and one of each hostile member: a path that climbs
out (``../``), an absolute path, a symbolic link, a name of 300 bytes, a name with a control
character, a zip bomb (80 MiB of zeros in 80 KiB), a duplicated name, a nested archive, and
file names whose student id is ``..`` or HTML. Each hostile member is refused with a warning
that names it and says why; the honest ones (and the first of the duplicates) are collected;
nothing is written outside the course, and inside it only under ``submitted/`` (the
collected notebooks) and the staging folder ``downloaded/<id>/``.

Then one small archive per rule of `collect.choose` and the names: a student's several files
(the newest kept, the message naming each), a folder-shaped member before the real file, a
browser's ``name (1).ipynb``, a name that does not match, the name's timestamp.
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

from autograder import cli, collect  # noqa: E402

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
def collected(tmp_path_factory):
    root = tmp_path_factory.mktemp("collect")
    course = corpus.released_course(root / "course")
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
        f"folder/.._{NB}": "student id '..' is not a plain name",
        f"<img src=x onerror=alert(1)>_{NB}": "is not a plain name",
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
        if "not a plain name" not in reason:  # an id refusal names the file, not the member
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


def _collect_zip(tmp_path, members, regexp=None):
    course = tmp_path / "course"
    course.mkdir()
    students, messages = collect.collect(course, A, _zip(tmp_path / "lms.zip", members), regexp)
    return course, students, messages


OLD, NEW = (2026, 1, 29, 10, 0, 0), (2026, 1, 30, 15, 0, 0)


def test_a_resubmission_keeps_the_newest_file_and_says_which_was_dropped(tmp_path):
    """Two files of alice's without timestamps in their names (stock zip_collect stops every
    student on this): the newer member is kept, the message names both; bob is collected."""
    course, students, messages = _collect_zip(
        tmp_path,
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


def test_a_folder_shaped_member_never_blocks_the_students_own_file(tmp_path):
    course, students, messages = _collect_zip(
        tmp_path, [(f"alice_{NB}/notes.txt", b"notes", OLD), (f"alice_{NB}", b"mine", OLD)]
    )
    assert students == ["alice"]
    assert (course / "submitted" / "alice" / A / NB).read_bytes() == b"mine"
    assert messages == [f"skipped 'alice_{NB}/notes.txt' from lms.zip: not a notebook (.ipynb)"]


def test_a_browsers_numbered_copy_is_a_resubmission(tmp_path):
    course, students, messages = _collect_zip(
        tmp_path, [(f"bob_{A} (1).ipynb", b"again", NEW), (f"bob_{NB}", b"once", OLD)]
    )
    assert students == ["bob"]
    assert (course / "submitted" / "bob" / A / NB).read_bytes() == b"again"
    assert messages == [
        f"bob: 2 files; kept the newest, 'bob_{A} (1).ipynb' (2026-01-30 15:00:00), "
        f"dropped 'bob_{NB}' (2026-01-29 10:00:00)"
    ]


def test_a_name_that_does_not_match_is_skipped_with_the_names_expected(tmp_path):
    course, students, messages = _collect_zip(
        tmp_path, [(NB, b"whose?", OLD), (f"carol-{NB}", b"dash", OLD), (f"dan_{NB}", b"ok", OLD)]
    )
    assert students == ["dan"]
    expected = (
        f"its name does not match <student id>_{NB} or <student id>_<anything>_{NB} "
        "(the names collect expects; --regexp sets another pattern)"
    )
    assert messages == [f"skipped {NB!r}: {expected}", f"skipped 'carol-{NB}': {expected}"]


def test_the_names_timestamp_orders_resubmissions_and_a_bad_one_skips_that_file_only(tmp_path):
    """With a pattern that has a timestamp group, the name's date wins over the member's
    date, is written to timestamp.txt, and a file whose timestamp is not a date is skipped
    alone."""
    regexp = r".*/(?P<student_id>[^/_]+)_(?P<timestamp>[0-9-]+)_(?P<file_id>ch1_pooling)\.ipynb$"
    course, students, messages = _collect_zip(
        tmp_path,
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


def test_the_cli_reports_each_message_and_what_was_collected(tmp_path, capsys):
    course = tmp_path / "course"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate we mean to write
        archive = _zip(
            tmp_path / "lms.zip", [(f"alice_{NB}", b"a", OLD), (f"alice_{NB}", b"b", NEW)]
        )
    assert cli.main(["--course", str(course), "collect", A, str(archive)]) == 0
    out, err = capsys.readouterr()
    assert "another member has the same name (the first one was kept)" in err
    assert out.strip() == f"collected 1 submission(s) of {A} into {course / 'submitted'}: alice"
