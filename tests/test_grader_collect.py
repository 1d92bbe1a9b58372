"""`python -m autograder collect` with a hostile LMS download.

One archive holds two honest submissions and one of each hostile member: a path that climbs
out (``../``), an absolute path, a symbolic link, a name of 300 bytes, a name with a control
character, a zip bomb (80 MiB of zeros in 80 KiB), a duplicated name, a nested archive, and
file names whose student id is ``..`` or HTML. Each hostile member is refused with a warning
that names it and says why; the honest ones (and the first of the duplicates) are collected;
nothing is written outside the course, and inside it only under ``submitted/`` (the
collected notebooks) and nbgrader's staging folder ``downloaded/<id>/``.
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
