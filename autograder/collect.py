"""Collect: an LMS download into ``submitted/``, member by member; what is hostile is refused.

``python -m autograder collect <id> FILE.zip`` runs nbgrader's ``zip_collect`` with the two
plug-ins below in place of nbgrader's own, so every file of the archive passes through them:

- `SafeExtractor` unpacks a zip into ``downloaded/<id>/extracted/<archive name>/`` itself
  (`extract_zip`). A member is refused, with a warning that names it and says why, when it
  is a symbolic link or anything but a regular file; its name is absolute, climbs out with
  ``..``, holds a backslash or a control character, or is absurdly long; it is encrypted;
  it repeats a name already unpacked (the first is kept); it is an archive itself; or it
  unpacks to more than `MAX_MEMBER_BYTES` (the declared size is checked first and the
  bytes are counted while unpacking, so a header that lies changes nothing), or the archive
  to more than `MAX_TOTAL_BYTES`. Files are created with ``O_EXCL | O_NOFOLLOW`` under a
  folder checked to be inside the extraction folder. Everything else is unpacked.
- `SafeCollector` is nbgrader's file-name collector that also refuses a student id or file
  id that is not a plain name (``..``, ``<script>``, a slash, spaces...), since nbgrader
  makes ``submitted/<student id>/`` from it, and drops a timestamp that is not a date
  (nbgrader would stop the whole collection on it).
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import stat
import zipfile
from pathlib import Path

from nbgrader.plugins.zipcollect import ExtractorPlugin, FileNameCollectorPlugin

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


def _inside(root: Path, relative: str) -> Path:
    """root/relative, its folders created, refusing any folder that is a link or not inside."""
    target = root.joinpath(*relative.split("/"))
    folder = root
    for part in relative.split("/")[:-1]:
        folder = folder / part
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            raise Refused("its folder clashes with a file of the same name")
        folder.mkdir(exist_ok=True)
    if os.path.commonpath([root.resolve(), target.parent.resolve()]) != str(root.resolve()):
        raise Refused("its path leaves the extraction folder")
    return target


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


def extract_zip(path: Path, dest: Path) -> tuple[list[Path], list[str]]:
    """Unpack the zip at path into dest: (files written, one message per refused member)."""
    dest.mkdir(parents=True, exist_ok=True)
    written, refused, seen = [], [], set()
    total = 0
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as err:
        return [], [f"{path.name} is not a readable zip archive ({err}); nothing was collected"]
    with archive:
        for info in archive.infolist():
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
                if total + info.file_size > MAX_TOTAL_BYTES:
                    raise Refused(f"the archive unpacks to more than {_mib(MAX_TOTAL_BYTES)}")
                target = _inside(dest, key)
                total += _unpack(archive, info, target, MAX_TOTAL_BYTES - total)
                seen.add(key)
                written.append(target)
            except Refused as why:
                refused.append(f"refused {shown} from {path.name}: {why}")
    return written, refused


class SafeExtractor(ExtractorPlugin):
    """nbgrader's extractor step, with every zip member checked (see `extract_zip`)."""

    def extract(self, archive_path: str, extracted_path: str) -> None:
        root = Path(archive_path)
        for path in sorted(p for p in root.rglob("*") if p.is_file() or p.is_symlink()):
            into = Path(extracted_path) / path.parent.relative_to(root)
            if path.is_symlink():
                self.log.warning("refused %s: it is a symbolic link", path)
            elif zipfile.is_zipfile(path):
                written, refused = extract_zip(path, into / path.stem)
                for message in refused:
                    self.log.warning(message)
                self.log.info("unpacked %d file(s) from %s", len(written), path.name)
            elif path.suffix.lower() in ARCHIVE_SUFFIXES:
                self.log.warning("refused %s: only zip archives are unpacked", path.name)
            else:
                into.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, into / path.name)


class SafeCollector(FileNameCollectorPlugin):
    """nbgrader's file-name collector that refuses ids nbgrader cannot safely make paths of."""

    def collect(self, submitted_file: str) -> dict | None:
        info = super().collect(submitted_file)
        if not info:
            return info
        name = Path(submitted_file).name
        for key in ("student_id", "file_id"):
            value = info.get(key)
            if not isinstance(value, str) or not PLAIN_NAME.match(value):
                self.log.warning(
                    "refused %r: its %s %r is not a plain name (letters, digits and ._@+-, "
                    "starting with a letter or digit)",
                    name,
                    key.replace("_", " "),
                    value,
                )
                return None
        if info.get("timestamp"):
            from nbgrader.utils import parse_utc

            try:
                parse_utc(info["timestamp"])
            except (ValueError, OverflowError):
                self.log.warning("%r: its timestamp is not a date and was ignored", name)
                info = {k: v for k, v in info.items() if k != "timestamp"}
        return info
