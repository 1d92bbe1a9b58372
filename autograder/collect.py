"""Collect: an LMS download into ``submitted/``, member by member; what is hostile is refused.

``python -m autograder collect <id> FILE.zip`` (`collect`) decides every student on its own,
so no member, and no student, can stop the others (nbgrader's ``zip_collect`` stops the
whole collection on a student's second file without timestamps, and its extractor let a
member named like a folder block a real file):

- `extract_zip` unpacks the notebooks of the zip into ``downloaded/<id>/extracted/<archive
  name>/``, each to a numbered file of its own. A member is refused, with a message that
  names it and says why, when it is a symbolic link or anything but a regular file; its
  name is absolute, climbs out with ``..``, holds a backslash or a control character, or is
  absurdly long; it is encrypted; it repeats a name already unpacked (the first is kept); it
  is an archive itself; or it unpacks to more than `MAX_MEMBER_BYTES` (the declared size is
  checked first and the bytes are counted while unpacking, so a header that lies changes
  nothing), or the archive to more than `MAX_TOTAL_BYTES`. A file that is not a notebook is
  skipped, with a message.
- each notebook's name in the archive is matched with ``DEFAULT_REGEXP`` (``--regexp``:
  another, with the named groups ``student_id``, ``file_id`` and optionally ``timestamp``,
  matched against ``/`` + the member's path): a name that does not match is skipped with a
  message saying the names expected (`expected_name`); a student id that is not a plain
  name (``..``, ``<script>``, a slash, spaces...) is refused, since it would become
  ``submitted/<student id>/``; a timestamp that is not a date skips that file only.
- `choose`: a student with several files (resubmissions, ``<id> (1).ipynb``) keeps the
  newest, by the name's timestamp or else the member's date in the archive, and a message
  names the file kept and each one dropped.
- the kept file becomes ``submitted/<student>/<id>/<id>.ipynb``, with ``timestamp.txt``
  when its name gave a timestamp (what nbgrader's ``zip_collect`` writes).
"""

from __future__ import annotations

import datetime
import os
import posixpath
import re
import shutil
import stat
import zipfile
from pathlib import Path
from typing import NamedTuple

from autograder.gradebook_ids import PLAIN_NAME

#: a notebook with its figures is a few MiB; more than this is not a submission
MAX_MEMBER_BYTES = 64 << 20
#: what one archive may unpack to in all
MAX_TOTAL_BYTES = 2 << 30
MAX_NAME_BYTES = 1024  # a whole member name
MAX_PART_BYTES = 255  # one path component (the Linux limit)
ARCHIVE_SUFFIXES = (".zip", ".gz", ".tgz", ".tar", ".bz2", ".xz", ".7z", ".rar")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
CHUNK = 1 << 20


class Refused(Exception):
    """One member of an archive that is not unpacked, and why."""


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.0f} MiB"


def member_problem(info: zipfile.ZipInfo) -> str | None:
    """Why a member must not be unpacked, from its header alone (None: nothing wrong yet)."""
    name = info.filename
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        return "it is a symbolic link"
    if stat.S_IFMT(mode) and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        return "it is not a regular file"
    if not name.strip("/."):
        return "it has no name"
    if CONTROL.search(name):
        return "its name holds a control character"
    if "\\" in name:
        return "its name holds a backslash (a Windows path)"
    if name.startswith("/") or re.match(r"[A-Za-z]:", name):
        return "its path is absolute"
    if ".." in name.split("/"):
        return "its path climbs out of the archive (..)"
    if len(name.encode()) > MAX_NAME_BYTES or any(
        len(part.encode()) > MAX_PART_BYTES for part in name.split("/")
    ):
        return f"its name is too long (more than {MAX_PART_BYTES} bytes in one part)"
    if info.flag_bits & 0x1:
        return "it is encrypted"
    if name.lower().endswith(ARCHIVE_SUFFIXES):
        return "it is an archive inside the archive (unpack it and collect it on its own)"
    if info.file_size > MAX_MEMBER_BYTES:
        return f"it unpacks to {_mib(info.file_size)}, more than {_mib(MAX_MEMBER_BYTES)}"
    return None


def _unpack(archive: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, budget: int) -> int:
    """Copy one member to a new file, counting bytes; returns how many were written."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        handle = os.open(target, flags, 0o644)
    except FileExistsError:
        raise Refused("a file of that name is already unpacked") from None
    written = 0
    try:
        with os.fdopen(handle, "wb") as out, archive.open(info) as stream:
            while chunk := stream.read(CHUNK):
                written += len(chunk)
                if written > MAX_MEMBER_BYTES:
                    raise Refused(
                        f"it unpacks to more than {_mib(MAX_MEMBER_BYTES)} "
                        f"(its header said {info.file_size} bytes)"
                    )
                if written > budget:
                    raise Refused(f"the archive unpacks to more than {_mib(MAX_TOTAL_BYTES)}")
                out.write(chunk)
    except Refused:
        target.unlink(missing_ok=True)
        raise
    except (zipfile.BadZipFile, OSError, EOFError, RuntimeError, NotImplementedError) as err:
        target.unlink(missing_ok=True)
        raise Refused(f"it cannot be unpacked ({str(err)[:120] or type(err).__name__})") from None
    return written


class Member(NamedTuple):
    """One unpacked member: its name in the archive, where it was unpacked, its date."""

    name: str
    path: Path
    modified: datetime.datetime


def extract_zip(path: Path, dest: Path) -> tuple[list[Member], list[str]]:
    """Unpack the notebooks of the zip at ``path`` into ``dest``: (the members unpacked, one
    message per member refused or skipped). Each is unpacked to a numbered file of its own
    (``00001.ipynb``...), never to its own path: no member's name can clash with another's
    (a member ``alice_ch1.ipynb/notes.txt`` does not make a folder that blocks alice's file)."""
    dest.mkdir(parents=True, exist_ok=True)
    written, refused, seen = [], [], set()
    total = 0
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as err:
        return [], [f"{path.name} is not a readable zip archive ({err}); nothing was collected"]
    with archive:
        for number, info in enumerate(archive.infolist(), 1):
            if info.is_dir() and not stat.S_ISLNK(info.external_attr >> 16):
                continue
            shown = repr(info.filename[:120] + ("..." if len(info.filename) > 120 else ""))
            try:
                problem = member_problem(info)
                if problem:
                    raise Refused(problem)
                key = posixpath.normpath(info.filename)
                if key in seen:
                    raise Refused("another member has the same name (the first one was kept)")
                if not key.lower().endswith(".ipynb"):
                    refused.append(f"skipped {shown} from {path.name}: not a notebook (.ipynb)")
                    continue
                if total + info.file_size > MAX_TOTAL_BYTES:
                    raise Refused(f"the archive unpacks to more than {_mib(MAX_TOTAL_BYTES)}")
                target = dest / f"{number:05d}.ipynb"
                total += _unpack(archive, info, target, MAX_TOTAL_BYTES - total)
                seen.add(key)
                written.append(Member(key, target, _member_date(info)))
            except Refused as why:
                refused.append(f"refused {shown} from {path.name}: {why}")
    return written, refused


def _member_date(info: zipfile.ZipInfo) -> datetime.datetime:
    try:
        return datetime.datetime(*info.date_time)
    except ValueError:  # a header's date may be anything
        return datetime.datetime(1980, 1, 1)


#: the names `collect` expects by default: ``<student id>_<anything>_<id>.ipynb`` or
#: ``<student id>_<id>.ipynb``, in any folder of the archive, ``<id> (2).ipynb`` (a browser's
#: second download of the same name) counting as a resubmission
DEFAULT_REGEXP = r".*/(?P<student_id>[^/_]+)_(?:.*_)?(?P<file_id>{assignment})(?: \(\d+\))?\.ipynb$"


def expected_name(assignment: str) -> str:
    return f"<student id>_{assignment}.ipynb or <student id>_<anything>_{assignment}.ipynb"


class Candidate(NamedTuple):
    student: str
    member: Member
    stamp: datetime.datetime | None  # from the name's timestamp group, if the pattern has one

    def when(self) -> datetime.datetime:
        """What orders a student's files: the name's timestamp, else the member's date."""
        return self.stamp or self.member.modified


def _candidate(member: Member, assignment: str, pattern: re.Pattern, shown: str):
    """(a Candidate, None) or (None, why the member is skipped)."""
    from nbgrader.utils import parse_utc

    match = pattern.match(f"/{member.name}")
    if not match:
        return None, (
            f"skipped {shown}: its name does not match {expected_name(assignment)} "
            "(the names collect expects; --regexp sets another pattern)"
        )
    fields = match.groupdict()
    student = fields.get("student_id")
    if not isinstance(student, str) or not PLAIN_NAME.match(student):
        return None, (
            f"refused {shown}: its student id {student!r} is not a plain name (letters, "
            "digits and ._@+-, starting with a letter or digit)"
        )
    file_id = fields.get("file_id") or ""
    if file_id.removesuffix(".ipynb") != assignment:
        return None, f"skipped {shown}: it is not {assignment}.ipynb (its name says {file_id!r})"
    stamp = None
    if fields.get("timestamp"):
        try:
            stamp = parse_utc(fields["timestamp"]).replace(tzinfo=None)
        except (ValueError, OverflowError):
            return None, f"skipped {shown}: its timestamp {fields['timestamp']!r} is not a date"
    return Candidate(student, member, stamp), None


def choose(candidates: list[Candidate]) -> tuple[dict[str, Candidate], list[str]]:
    """Each student's newest file (by `Candidate.when`; on a tie, the later in the archive),
    and one message per student with more than one, naming the one kept and those dropped."""
    by_student: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        by_student.setdefault(candidate.student, []).append(candidate)
    kept, messages = {}, []
    for student, files in by_student.items():
        ordered = sorted(files, key=lambda c: (c.when(), c.member.path.name))
        kept[student] = ordered[-1]
        if len(files) > 1:
            dropped = ", ".join(
                f"{c.member.name!r} ({c.when():%Y-%m-%d %H:%M:%S})" for c in ordered[:-1]
            )
            newest = ordered[-1]
            messages.append(
                f"{student}: {len(files)} files; kept the newest, {newest.member.name!r} "
                f"({newest.when():%Y-%m-%d %H:%M:%S}), dropped {dropped}"
            )
    return kept, messages


def collect(course: Path, assignment: str, archive: Path, regexp: str | None = None):
    """Unpack ``archive`` (an LMS download) and put each student's newest notebook at
    ``submitted/<student>/<assignment>/<assignment>.ipynb`` (with ``timestamp.txt`` when the
    file name gives one): (the students collected, one message per member refused or skipped
    and per resubmission). One member's problem never stops the others."""
    course, archive = Path(course), Path(archive)
    staging = course / "downloaded" / assignment / "extracted" / archive.name
    if staging.exists():
        shutil.rmtree(staging)
    members, messages = extract_zip(archive, staging)
    pattern = re.compile(regexp or DEFAULT_REGEXP.format(assignment=re.escape(assignment)))
    candidates = []
    for member in members:
        shown = repr(member.name[:120] + ("..." if len(member.name) > 120 else ""))
        candidate, why = _candidate(member, assignment, pattern, shown)
        if why:
            messages.append(why)
        else:
            candidates.append(candidate)
    kept, chosen = choose(candidates)
    messages.extend(chosen)
    for student, candidate in sorted(kept.items()):
        folder = course / "submitted" / student / assignment
        folder.mkdir(parents=True, exist_ok=True)
        temporary = folder / f".{assignment}.ipynb.collecting"
        shutil.copyfile(candidate.member.path, temporary)
        os.replace(temporary, folder / f"{assignment}.ipynb")
        stamp = folder / "timestamp.txt"
        if candidate.stamp is not None:
            stamp.write_text(candidate.stamp.isoformat(" "))
        elif stamp.is_file() or stamp.is_symlink():
            stamp.unlink()  # an older collection's date is not this file's
    return sorted(kept), messages
