"""Collect: an LMS download into ``submitted/``, member by member; what is hostile is refused.

``python -m autograder collect <id> FILE.zip`` (`collect`) decides every student on its own,
so no member, and no student, can stop the others (nbgrader's ``zip_collect`` stops the
whole collection on a student's second file without timestamps, and its extractor let a
member named like a folder block a real file). Who a notebook belongs to comes from the
roster (nbgrader's ``student`` table: ``id``, ``lms_user_id``; `read_roster`) and the LMS's
own ids in its download's layout, never from a file name or display name a student chose:

- `extract_zip` unpacks the notebooks of the zip into ``downloaded/<id>/extracted/<archive
  name>/``, each to a numbered file of its own. A member is refused, with a message that
  names it and says why, when it is a symbolic link or anything but a regular file; its
  name is absolute, climbs out with ``..``, holds a backslash or a control character, or is
  absurdly long; it is encrypted; it repeats a name already unpacked (the first is kept); it
  is an archive itself (in an LMS's layout a student's ``.zip`` is unpacked once, by the
  same rules, its notebooks the student's the LMS named the zip for:
  `_extract_student_zip`); or it unpacks to more than `MAX_MEMBER_BYTES` (the declared size
  is checked first and the bytes are counted while unpacking, so a header that lies changes
  nothing), or the archive to more than `MAX_TOTAL_BYTES`. A file that is not a notebook,
  and macOS's ``__MACOSX/`` and ``._*`` metadata, are skipped with a message.
- `recognise` tells the layout from the members' names (``--layout`` forces one; members
  named as two LMSs name them are not guessed at), and
  `Identify` names each notebook's student:
  - Canvas (flat ``<sortable name>_[LATE_]<user id>_<attachment id>_<file name>``): the
    Canvas user id, looked up in the roster's ``lms_user_id``. The names on both sides of
    the ids are the student's, so every place the ids could be is tried: a name that reads
    as more than one user id is refused, as is an anonymous download's ``anon_<id>``.
  - Moodle (folders ``<full name>_<participant id>_assignsubmission_file/`` from 4.1,
    ``..._file_/`` before, or not in folders ``..._assignsubmission_file_<file name>``): the
    participant id (Moodle makes one per assignment), looked up in the assignment's own
    (`participants_path`) or else in ``lms_user_id``; whatever the files are named.
  - Blackboard (``<assignment>_<username>_attempt_<date>_<file name>`` and a receipt
    ``...attempt_<date>.txt``): the username, a roster ``id``, after the assignment's name
    (the one the roster's usernames agree on, or ``--lms-assignment``).
  - plain (nbgrader's ``<student id>_[<anything>_]<id>.ipynb``): trusts the names, so only
    with a roster, for archives the instructor made: the roster id that leaves exactly
    ``_<id>.ipynb``, else the one id that fits ``_<anything>_<id>.ipynb``; two, or none,
    refused. ``--regexp`` sets another pattern (groups ``student_id``, a roster id,
    ``file_id``, optionally ``timestamp``).
  An LMS id not on the roster is refused, saying how to import it, or with
  ``--enroll-unknown`` becomes a student of that id (refused if the id is another's).
- `choose_lms`: one submission per student (Blackboard: the newest attempt by Blackboard's
  date); of several notebooks, of those named for the assignment if any, the newest by the
  archive's own evidence (`_newest`: Canvas's attachment id, the number Moodle's file
  picker gives a re-upload, the members' dates), else the one named ``<id>.ipynb``, else the
  student is refused with the names. `choose` (plain): the newest file, by the name's
  timestamp or else the member's date. Each names what it kept and dropped.
- the kept file becomes ``submitted/<student>/<id>/<id>.ipynb`` (a message when it replaces
  another), with ``timestamp.txt`` when the download says when it was submitted (`_timestamp`:
  a plain name's timestamp, Blackboard's attempt date, Moodle 3.x's file date, Canvas's LATE
  mark as 1 s after the due date), which nbgrader's late-submission plug-ins read; the
  LMS's ids of each kept file go to ``downloaded/<id>/lms.json`` for the feedback zip.
"""

from __future__ import annotations

import datetime
import json
import os
import posixpath
import re
import secrets
import shlex
import shutil
import stat
import sys
import zipfile
from pathlib import Path
from typing import NamedTuple

from autograder.checking.gradebook_ids import PLAIN_NAME, gradebook_rows

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


def member_problem(info: zipfile.ZipInfo, inner: str | None = None) -> str | None:
    """Why a member must not be unpacked, from its header alone (None: nothing wrong yet).
    ``inner``: what a ``.zip`` member is (None: refused as an archive inside the archive;
    ``"zip"``: a student's own zip, unpacked once; ``"nested"``: a member of that zip,
    where no archive is unpacked again)."""
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
        if inner == "nested":
            return "it is an archive inside the student's zip (only one level is unpacked)"
        if inner != "zip":
            return (
                "it is an archive inside the archive (the plain layout names a student by the "
                "file's name: unpack it and name its notebook <student id>_<id>.ipynb)"
            )
        if not name.lower().endswith(".zip"):
            return "it is an archive other than a zip (unpack it and upload the notebook)"
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


def is_macos_metadata(name: str) -> bool:
    """A member the Finder adds when it zips a folder (``__MACOSX/...``, ``._<name>``)."""
    parts = name.split("/")
    return parts[0] == "__MACOSX" or parts[-1].startswith("._")


class Member(NamedTuple):
    """One unpacked member: its name in the archive, where it was unpacked, its date in the
    archive; ``inner``: its name inside the student's own zip ``name`` (else "")."""

    name: str
    path: Path
    modified: datetime.datetime
    inner: str = ""


#: a student's zip of more members than this is not a notebook's upload
MAX_INNER_MEMBERS = 1000


class _Budget:
    """What the whole archive may still unpack to (the student's zips count in it)."""

    def __init__(self) -> None:
        self.left = MAX_TOTAL_BYTES

    def check(self, declared: int) -> None:
        if declared > self.left:
            raise Refused(f"the archive unpacks to more than {_mib(MAX_TOTAL_BYTES)}")

    def unpack(self, archive, info, target: Path) -> None:
        self.left -= _unpack(archive, info, target, self.left)


def extract_zip(
    path: Path, dest: Path, *, student_zips: bool = False
) -> tuple[list[Member], list[str]]:
    """Unpack the notebooks of the zip at ``path`` into ``dest``: (the members unpacked, one
    message per member refused or skipped). Each is unpacked to a numbered file of its own
    (``00001.ipynb``...), never to its own path: no member's name can clash with another's
    (a member ``alice_ch1.ipynb/notes.txt`` does not make a folder that blocks alice's file).
    ``student_zips`` (the LMS layouts): a member ``.zip`` is a student's upload, unpacked in
    turn by the same rules (one level only; `_extract_student_zip`), its notebooks dated as
    the LMS dated the zip."""
    dest.mkdir(parents=True, exist_ok=True)
    written, refused, seen = [], [], set()
    budget = _Budget()
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as err:
        return [], [f"{path.name} is not a readable zip archive ({err}); nothing was collected"]
    with archive:
        for number, info in enumerate(archive.infolist(), 1):
            if info.is_dir() and not stat.S_ISLNK(info.external_attr >> 16):
                continue
            shown = _shown(info.filename)
            try:
                problem = member_problem(info, "zip" if student_zips else None)
                if problem:
                    raise Refused(problem)
                key = posixpath.normpath(info.filename)
                if is_macos_metadata(key):
                    refused.append(
                        f"skipped {shown} from {path.name}: macOS metadata (__MACOSX/, ._*), "
                        "not a submission"
                    )
                    continue
                if key in seen:
                    raise Refused("another member has the same name (the first one was kept)")
                if key.lower().endswith(".zip"):
                    seen.add(key)
                    inner, messages = _extract_student_zip(
                        archive, info, key, dest / f"{number:05d}", budget, path.name
                    )
                    written.extend(inner)
                    refused.extend(messages)
                    continue
                if not key.lower().endswith(".ipynb"):
                    refused.append(f"skipped {shown} from {path.name}: not a notebook (.ipynb)")
                    continue
                budget.check(info.file_size)
                target = dest / f"{number:05d}.ipynb"
                budget.unpack(archive, info, target)
                seen.add(key)
                written.append(Member(key, target, _member_date(info)))
            except Refused as why:
                refused.append(f"refused {shown} from {path.name}: {why}")
    return written, refused


def _extract_student_zip(archive, info, key: str, dest: Path, budget: _Budget, outer: str):
    """The notebooks of a student's own zip ``key`` (a member of ``archive``), by the rules
    of the outer archive (`member_problem`, sizes counted in the same budget, links, names,
    duplicates), no archive inside it unpacked. Each is the member ``key`` (the student is
    the one the LMS named the zip for) with its name inside as ``inner``, dated as the LMS
    dated the zip: the dates inside are the student's own clock's."""
    budget.check(info.file_size)
    dest.mkdir()
    packed = dest / "upload.zip"
    budget.unpack(archive, info, packed)
    written, messages, seen = [], [], set()
    where = f"from {outer} (in the student's zip {key!r})"
    try:
        student_zip = zipfile.ZipFile(packed)
    except (zipfile.BadZipFile, OSError) as err:
        packed.unlink()
        raise Refused(f"it is not a readable zip ({str(err)[:120]})") from None
    with student_zip:
        members = student_zip.infolist()
        if len(members) > MAX_INNER_MEMBERS:
            packed.unlink()
            raise Refused(f"the student's zip holds more than {MAX_INNER_MEMBERS} members")
        for number, inner in enumerate(members, 1):
            if inner.is_dir() and not stat.S_ISLNK(inner.external_attr >> 16):
                continue
            shown = _shown(inner.filename)
            try:
                problem = member_problem(inner, "nested")
                if problem:
                    raise Refused(problem)
                name = posixpath.normpath(inner.filename)
                if is_macos_metadata(name):
                    messages.append(f"skipped {shown} {where}: macOS metadata, not a submission")
                    continue
                if name in seen:
                    raise Refused("another member has the same name (the first one was kept)")
                if not name.lower().endswith(".ipynb"):
                    messages.append(f"skipped {shown} {where}: not a notebook (.ipynb)")
                    continue
                budget.check(inner.file_size)
                target = dest / f"{number:05d}.ipynb"
                budget.unpack(student_zip, inner, target)
                seen.add(name)
                written.append(Member(key, target, _member_date(info), name))
            except Refused as why:
                messages.append(f"refused {shown} {where}: {why}")
    packed.unlink()
    return written, messages


def _member_date(info: zipfile.ZipInfo) -> datetime.datetime:
    try:
        return datetime.datetime(*info.date_time)
    except ValueError:  # a header's date may be anything
        return datetime.datetime(1980, 1, 1)


# --- who a member belongs to: the roster, and the LMS's own ids in its download's layout


class Roster(NamedTuple):
    """nbgrader's student list: the ids, and which of them carry each ``lms_user_id``."""

    ids: frozenset[str]
    lms: dict[str, tuple[str, ...]]


def read_roster(course: Path) -> Roster:
    """The ``student`` table of the course's ``gradebook.db``, read-only (``nbgrader db
    student import`` fills it); empty when there is no gradebook or no student."""
    ids, lms = set(), {}
    rows = gradebook_rows(course, "SELECT id, lms_user_id FROM student") or []
    for student, lms_id in rows:
        ids.add(student)
        if lms_id:
            lms.setdefault(str(lms_id).strip(), []).append(student)
    return Roster(frozenset(ids), {key: tuple(sorted(v)) for key, v in lms.items()})


LAYOUTS = ("canvas", "moodle", "blackboard", "plain")
LAYOUT_NAMES = {
    "canvas": "Canvas",
    "moodle": "Moodle",
    "blackboard": "Blackboard",
    "plain": "plain (<student id>_<id>.ipynb)",
}
#: what each LMS's id is called in messages
LMS_ID = {"canvas": "Canvas user", "moodle": "Moodle participant", "blackboard": "Blackboard user"}
#: the course directory the CLI uses unless given another (``autograder/`` of the checkout)
DEFAULT_COURSE = Path(__file__).resolve().parents[1]


def _here(path: Path | str) -> str:
    """``path`` as the instructor types it where they are: relative to the working
    directory (``./`` before a bare name, which the shell would look up on PATH), quoted
    for the shell."""
    relative = os.path.relpath(Path(path).absolute(), Path.cwd())
    return shlex.quote(relative if "/" in relative else f"./{relative}")


def roster_import(layout: str, course: Path, assignment: str) -> str:
    """How to put a student of ``layout`` on the roster, as a command that works as written
    where the instructor runs ``collect`` (this Python, this course): an LMS export through
    ``roster`` (`autograder.course.lms`); Blackboard's usernames, and the plain layout's ids,
    through nbgrader's own import run in the course directory, where the gradebook is (run
    elsewhere, nbgrader makes a new gradebook there)."""
    python = _here(sys.executable)
    course = Path(course)
    default = Path(os.environ.get("AUTOGRADER_COURSE") or DEFAULT_COURSE)  # the CLI's
    where = "" if course.resolve() == default.resolve() else f" --course {_here(course)}"
    if layout == "canvas":
        return (
            "import Canvas's gradebook export (Grades, Export) with "
            f"`{python} -m autograder{where} roster students.csv --lms canvas`"
        )
    if layout == "moodle":
        return (
            "import the assignment's grading worksheet with "
            f"`{python} -m autograder{where} roster students.csv --lms moodle "
            f"--assignment {shlex.quote(assignment)}`"
        )
    activate = Path(sys.prefix) / "bin" / "activate"
    if activate.is_file():  # the venv's nbgrader, and its alembic for a new gradebook
        enter, nbgrader = f". {_here(activate)} && ", "nbgrader"
    else:
        enter, nbgrader = "", shlex.quote(str(Path(sys.executable).absolute().parent / "nbgrader"))
    back = shlex.quote(os.path.join(os.path.relpath(Path.cwd(), course.absolute()), "students.csv"))
    who = "the Blackboard username" if layout == "blackboard" else "the student id"
    return (
        "import a students.csv of nbgrader's columns id,first_name,last_name,email,lms_user_id "
        f"({who} as id) with `({enter}cd {_here(course)} && {nbgrader} db student import "
        f"{back})`"
    )


#: Canvas: ``<sortable name>_[LATE_]<user id>_<attachment id>_<original name>``
#: (`_canvas_ids`): Canvas's ``ContentZipper`` names each file of a submission so (the
#: source is cited in tests/test_lms_layouts.py, as for each layout below)
#: Moodle, "download in folders" (the default since 3.1): a folder per participant and
#: plugin, ``<full name>_<participant id>_assignsubmission_<plugin>_/`` up to 4.0 and
#: ``<full name>_<participant id>_assignsubmission_<plugin>/`` from 4.1 (no trailing ``_``);
#: Moodle writes a full name's ``_`` as spaces, and the id is the digits before the suffix
MOODLE_FOLDER = re.compile(
    r"(?P<name>.*)_(?P<id>[0-9]+)_assignsubmission_(?P<plugin>[a-z0-9]+)(?P<old>_?)\Z"
)
#: Moodle, not in folders (every version): ``<full name>_<participant id>_assignsubmission_
#: <plugin>_<file name>``, the file name the student's; the full name holds no ``_``, so the
#: first ``_<digits>_assignsubmission_`` is Moodle's
MOODLE_FLAT = re.compile(
    r"(?P<name>[^_/]*)_(?P<id>[0-9]+)_assignsubmission_(?P<plugin>[a-z0-9]+)_(?P<original>[^/]+)\Z"
)
#: Blackboard: ``<assignment name>_<username>_attempt_<date>_<original name>`` and the
#: receipt ``<assignment name>_<username>_attempt_<date>.txt``; the first ``_attempt_<date>``
#: is Blackboard's (the original name after it is the student's)
BLACKBOARD = re.compile(
    r"(?P<stem>[^/]+?)_attempt_(?P<date>[0-9]{4}(?:-[0-9]{2}){5})"
    r"(?:_(?P<original>[^/]+)|(?P<receipt>\.txt))\Z"
)


def _digits(token: str) -> bool:
    return token.isascii() and token.isdigit()


def _canvas_ids(name: str) -> list[tuple[str, bool, str, str]]:
    """Each (user id, late, attachment id, original name) a top-level Canvas name could
    mean: the sortable
    name before the ids and the original name after them are the student's, so may hold
    ``_1_2_`` themselves. One pass over the ``_``-separated parts (a name is hostile)."""
    if "/" in name:
        return []
    parts = name.split("_")
    starts = [0]
    for part in parts[:-1]:
        starts.append(starts[-1] + len(part) + 1)
    found: dict[str, tuple[str, bool, str, str]] = {}
    for i in range(1, len(parts)):
        late = parts[i] == "LATE"
        j = i + 1 if late else i
        if j + 2 < len(parts) and _digits(parts[j]) and _digits(parts[j + 1]):
            if starts[i] > 1 and parts[j] not in found and name[starts[j + 2] :]:
                found[parts[j]] = (parts[j], late, parts[j + 1], name[starts[j + 2] :])
    return list(found.values())


def _looks_like(name: str) -> set[str]:
    """The LMS layouts a member's name has (a hostile name may have several)."""
    if is_macos_metadata(name) or name.endswith("/") or len(name.encode()) > MAX_NAME_BYTES:
        return set()
    found = set()
    if ("/" in name and MOODLE_FOLDER.match(name.split("/")[0])) or MOODLE_FLAT.match(name):
        found.add("moodle")
    if BLACKBOARD.match(name):
        found.add("blackboard")
    if _canvas_ids(name):
        found.add("canvas")
    return found


def recognise(names: list[str]) -> tuple[str | None, str]:
    """(the layout, why) from the members' names: the one LMS layout every member that has
    one has; ``plain`` when none has; None when members disagree. A student names some
    members (Canvas's original names, files inside a Moodle folder), so an archive whose
    members look like two layouts is not guessed at: a name made to look like another LMS's
    would be read by that LMS's rules, under another student's id."""
    counts = {layout: 0 for layout in LAYOUTS[:3]}
    odd = []
    for name in names:
        found = _looks_like(name)
        for layout in found:
            counts[layout] += 1
        if len(found) > 1:
            odd.append(name)
    seen = [layout for layout in LAYOUTS[:3] if counts[layout]]
    if not seen:
        return "plain", (
            "no member is named as Canvas, Moodle or Blackboard name them: the file names "
            "are trusted (the plain layout, for an archive you made)"
        )
    if len(seen) > 1 or odd:
        shown = ", ".join(f"{LAYOUT_NAMES[layout]} {counts[layout]}" for layout in seen)
        return None, (
            f"its members are named as more than one LMS names them ({shown}"
            + (f"; {_shown(odd[0])} as several" if odd else "")
            + "): a student's file name may imitate another LMS; give the layout with --layout"
        )
    layout = seen[0]
    return layout, (
        f"{counts[layout]} of {len(names)} members are named as {LAYOUT_NAMES[layout]} names them"
    )


def archive_names(path: Path) -> list[str]:
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.namelist()
    except (zipfile.BadZipFile, OSError):
        return []


class Candidate(NamedTuple):
    student: str  # the nbgrader id
    member: Member
    stamp: datetime.datetime | None  # plain: the name's timestamp group, if the pattern has one
    who: str = ""  # how messages name the student: "ab_12 (Canvas user 1234)"
    original: str = ""  # the student's own file name (LMS layouts)
    attempt: datetime.datetime | None = None  # Blackboard: the attempt's date (the LMS's)
    late: bool = False  # Canvas's LATE mark
    lms_id: str = ""  # the LMS's id of the student (Canvas user, Moodle participant, username)
    attachment: int | None = None  # Canvas: the file's attachment id (larger: uploaded later)
    folder: str = ""  # Moodle: ``<full name>_<participant id>``, its feedback folder's prefix
    submitted: datetime.datetime | None = None  # when the LMS says it was submitted (naive)

    def when(self) -> datetime.datetime:
        """What orders a student's files: the name's timestamp, else the member's date."""
        return self.stamp or self.member.modified


def _plain_name_rule(assignment: str) -> tuple[re.Pattern, re.Pattern]:
    tail = rf"{re.escape(assignment)}(?: \([0-9]+\))?\.ipynb\Z"
    return re.compile(tail), re.compile(rf"(?:.*_)?{tail}")


def expected_name(assignment: str) -> str:
    return f"<student id>_{assignment}.ipynb or <student id>_<anything>_{assignment}.ipynb"


class NotFiled(Exception):
    """A notebook filed under no student, and why (the whole message)."""


class Identify:
    """Who each member belongs to, in one layout: ``(Candidate, None)`` or ``(None, the
    message saying why the member is refused or skipped)``."""

    def __init__(
        self, layout, assignment, roster, enroll_unknown, regexp, lms_assignment, names, course
    ):
        self.layout, self.assignment, self.roster = layout, assignment, roster
        self.hint = roster_import(layout, Path(course), assignment)
        self.enroll_unknown, self.lms_assignment = enroll_unknown, lms_assignment
        self.regexp = re.compile(regexp) if regexp else None
        self.enroll: dict[str, str | None] = {}  # new nbgrader id -> its lms_user_id
        if layout == "blackboard":
            self.prefix = lms_assignment or self._blackboard_prefix(names)

    def __call__(self, member: Member, shown: str):
        try:
            return getattr(self, self.layout)(member, shown), None
        except NotFiled as why:
            return None, str(why)

    def student(self, key: str, shown: str) -> tuple[str, str]:
        """(the nbgrader id of the LMS id ``key``, how messages name the student)."""
        label = f"{LMS_ID[self.layout]} {key}"
        if self.layout == "blackboard":
            fits = (key,) if key in self.roster.ids else ()
        else:
            fits = self.roster.lms.get(key, ())
        if len(fits) == 1:
            return fits[0], f"{fits[0]} ({label})"
        if len(fits) > 1:
            raise NotFiled(
                f"refused {shown}: the roster gives the lms_user_id {key} to {len(fits)} "
                f"students ({', '.join(fits)}); correct the roster"
            )
        if not self.enroll_unknown:
            raise NotFiled(
                f"refused {shown}: {label} is not on the roster ({self.hint}; "
                "or collect with --enroll-unknown)"
            )
        if not PLAIN_NAME.match(key):
            raise NotFiled(
                f"refused {shown}: {label} is not on the roster, and its id is not a plain "
                "name to enroll it under"
            )
        if key in self.roster.ids:
            raise NotFiled(
                f"refused {shown}: {label} is not on the roster, and the nbgrader id {key} "
                "is another student's"
            )
        self.enroll[key] = None if self.layout == "blackboard" else key
        return key, f"{key} ({label}, enrolled)"

    def canvas(self, member: Member, shown: str):
        if member.name.startswith(("anon_", "LATE_anon_")):
            raise NotFiled(
                f"refused {shown}: Canvas names no user in an anonymously graded download "
                "(anon_<anonymous id>); download it once the assignment's anonymity is lifted"
            )
        fits = _canvas_ids(member.name)
        if not fits:
            raise NotFiled(
                f"skipped {shown}: not named as Canvas names a submission's file "
                "(<name>_[LATE_]<user id>_<attachment id>_<file name>, not in a folder)"
            )
        if len(fits) > 1:  # even one roster user among strangers: the stranger may be the
            # uploader, whose display name holds the roster user's id
            raise NotFiled(
                f"refused {shown}: its name could belong to the Canvas users "
                f"{', '.join(f[0] for f in fits)} (the name before the ids and the file name "
                "after them are the student's); collect it by hand"
            )
        user, late, attachment, original = fits[0]
        if member.inner:
            original = f"{original}/{member.inner}"
        student, who = self.student(user, shown)
        return Candidate(student, member, None, who, original, None, late, user, int(attachment))

    def moodle(self, member: Member, shown: str):
        folder, _, rest = member.name.partition("/")
        match = MOODLE_FOLDER.match(folder)
        if match and rest:
            submitted = member.modified if match["old"] else None
        else:  # "not in folders": <full name>_<participant id>_assignsubmission_file_<name>
            match = MOODLE_FLAT.match(member.name)
            rest = match["original"] if match else ""
            submitted = None
        if not match or not rest:
            raise NotFiled(
                f"skipped {shown}: not in a Moodle submission folder "
                "(<full name>_<participant id>_assignsubmission_file/) nor named as Moodle "
                "names a file not in folders"
            )
        if match["plugin"] != "file":
            raise NotFiled(f"skipped {shown}: not a file submission ({match['plugin']})")
        if member.inner:
            rest = f"{rest}/{member.inner}"
        student, who = self.student(match["id"], shown)
        return Candidate(
            student,
            member,
            None,
            who,
            rest,
            lms_id=match["id"],
            folder=f"{match['name']}_{match['id']}",
            submitted=submitted,
        )

    def _blackboard_prefix(self, names) -> str | None:
        """The assignment's name as Blackboard writes it before ``_<username>``: the one most
        of the roster's usernames agree on."""
        votes: dict[str, int] = {}
        for name in names:
            match = BLACKBOARD.match(name)
            if match:
                fits = [r for r in self.roster.ids if match["stem"].endswith(f"_{r}")]
                if len(fits) == 1:
                    prefix = match["stem"][: -len(fits[0]) - 1]
                    votes[prefix] = votes.get(prefix, 0) + 1
        ranked = sorted(votes.items(), key=lambda item: -item[1])
        if ranked and (len(ranked) == 1 or ranked[0][1] > ranked[1][1]):
            return ranked[0][0]
        return None

    def blackboard(self, member: Member, shown: str):
        match = BLACKBOARD.match(member.name)
        if not match or match["receipt"]:
            raise NotFiled(
                f"skipped {shown}: not named as Blackboard names a submission's file "
                "(<assignment>_<username>_attempt_<date>_<file name>, not in a folder)"
            )
        stem = match["stem"]
        if self.prefix is not None:
            if not stem.startswith(f"{self.prefix}_") or len(stem) == len(self.prefix) + 1:
                raise NotFiled(
                    f"refused {shown}: its name does not start with the assignment's name "
                    f"{self.prefix!r} and _ (--lms-assignment sets it)"
                )
            username = stem[len(self.prefix) + 1 :]
        else:
            raise NotFiled(
                f"refused {shown}: the username cannot be told from the assignment's name in "
                "the file names (no student of the archive is on the roster; give the name "
                "with --lms-assignment)"
            )
        try:
            attempt = datetime.datetime.strptime(match["date"], "%Y-%m-%d-%H-%M-%S")
        except ValueError:
            raise NotFiled(
                f"skipped {shown}: its attempt's date {match['date']!r} is not a date"
            ) from None
        student, who = self.student(username, shown)
        original = match["original"]
        if member.inner:
            original = f"{original}/{member.inner}"
        return Candidate(
            student, member, None, who, original, attempt, lms_id=username, submitted=attempt
        )

    def plain(self, member: Member, shown: str):
        if not self.roster.ids:
            raise NotFiled(
                f"refused {shown}: the plain layout ({expected_name(self.assignment)}) "
                f"trusts names, so it needs the roster ({self.hint})"
            )
        if self.regexp is not None:
            return self._plain_regexp(member, shown)
        name = posixpath.basename(member.name)
        exact, loose = _plain_name_rule(self.assignment)
        fits = [r for r in self.roster.ids if name.startswith(f"{r}_")]
        exact_fits = [r for r in fits if exact.match(name, len(r) + 1)]
        loose_fits = [r for r in fits if loose.match(name, len(r) + 1)]
        chosen = exact_fits or loose_fits
        if len(chosen) == 1:
            return Candidate(chosen[0], member, None, chosen[0])
        if chosen:
            raise NotFiled(
                f"refused {shown}: its name fits the roster ids {', '.join(sorted(chosen))} "
                f"({expected_name(self.assignment)})"
            )
        raise NotFiled(
            f"refused {shown}: its name is not {expected_name(self.assignment)} for a "
            "student id on the roster"
        )

    def _plain_regexp(self, member: Member, shown: str):
        from autograder.checking import nbgrader_api

        parse_utc = nbgrader_api.utils().parse_utc
        match = self.regexp.match(f"/{member.name}")
        if not match:
            raise NotFiled(f"skipped {shown}: its name does not match the --regexp pattern")
        fields = match.groupdict()
        student = fields.get("student_id")
        if not isinstance(student, str) or not PLAIN_NAME.match(student):
            raise NotFiled(
                f"refused {shown}: its student id {student!r} is not a plain name (letters, "
                "digits and ._@+-, starting with a letter or digit)"
            )
        if student not in self.roster.ids:
            raise NotFiled(f"refused {shown}: its student id {student!r} is not on the roster")
        file_id = fields.get("file_id") or ""
        if file_id.removesuffix(".ipynb") != self.assignment:
            raise NotFiled(
                f"skipped {shown}: it is not {self.assignment}.ipynb (its name says {file_id!r})"
            )
        stamp = None
        if fields.get("timestamp"):
            try:
                stamp = parse_utc(fields["timestamp"]).replace(tzinfo=None)
            except (ValueError, OverflowError):
                raise NotFiled(
                    f"skipped {shown}: its timestamp {fields['timestamp']!r} is not a date"
                ) from None
        return Candidate(student, member, stamp, student)


def _shown(name: str) -> str:
    return repr(name[:120] + ("..." if len(name) > 120 else ""))


def choose(candidates: list[Candidate]) -> tuple[dict[str, Candidate], list[str]]:
    """Plain layout: each student's newest file (by `Candidate.when`; on a tie, the later in
    the archive), and one message per student with more than one, naming the one kept and
    those dropped."""
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


def _picker_copy(original: str) -> tuple[str, int]:
    """(the name Moodle's file picker started from, its number): the picker names a file
    uploaded over another of the same name ``<name> (1).<ext>``, then ``(2)``... (the newest
    the highest; the first has none, 0). Only names in one folder are numbered so."""
    folder, name = posixpath.split(original)
    stem, dot, ext = name.rpartition(".")
    if not dot:
        stem, ext = name, ""
    match = re.fullmatch(r"(.+) \(([0-9]{1,9})\)", stem)
    if match:
        return posixpath.join(folder, f"{match[1]}{dot}{ext}"), int(match[2])
    return original, 0


def _newest(files: list[Candidate], layout: str) -> tuple[Candidate | None, str]:
    """The newest of one student's files by the LMS's own evidence in the archive, and the
    evidence (None: the archive does not say which is newest). Canvas: the attachment id
    (Canvas numbers files as they are uploaded); Moodle: the file picker's ``(N)`` among
    copies of one name, else the members' dates; Blackboard and the rest: the members' dates
    (Blackboard's attempts are told apart before, by Blackboard's date)."""
    if layout == "canvas" and all(c.attachment is not None for c in files):
        ordered = sorted(files, key=lambda c: c.attachment)
        if ordered[-1].attachment != ordered[-2].attachment:
            return ordered[-1], "the newest by Canvas's attachment id"
    if layout == "moodle":
        copies = {_picker_copy(c.original)[0] for c in files}
        if len(copies) == 1:
            ordered = sorted(files, key=lambda c: _picker_copy(c.original)[1])
            if _picker_copy(ordered[-1].original)[1] != _picker_copy(ordered[-2].original)[1]:
                return ordered[-1], "the newest by the number Moodle's file picker gave it"
    ordered = sorted(files, key=lambda c: c.member.modified)
    if ordered[-1].member.modified != ordered[-2].member.modified:
        return ordered[-1], "the newest by its date in the archive"
    return None, ""


def choose_lms(
    candidates: list[Candidate], assignment: str, layout: str = "canvas"
) -> tuple[dict[str, Candidate], list[str]]:
    """LMS layouts: one notebook per student. Blackboard's download holds one submission per
    attempt: the newest attempt by Blackboard's date is kept. Of several notebooks, those
    named for the assignment (``<id>.ipynb``, the picker's ``<id> (N).ipynb``, Canvas's
    ``<id>-N.ipynb``) if any, and of these the newest by the archive's own evidence
    (`_newest`); when it says nothing, the one named ``<id>.ipynb`` exactly, else the
    student is refused with the names. Each message names what was kept and dropped."""
    named = re.compile(rf"{re.escape(assignment)}(?:-[0-9]+| \([0-9]+\))?\.ipynb\Z")
    exact = re.compile(rf"{re.escape(assignment)}\.ipynb\Z")
    by_student: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        by_student.setdefault(candidate.student, []).append(candidate)
    kept, messages = {}, []
    for student, files in by_student.items():
        who = files[0].who
        attempts = sorted({c.attempt for c in files if c.attempt is not None})
        if len(attempts) > 1:
            newest = attempts[-1]
            dropped = [c for c in files if c.attempt != newest]
            files = [c for c in files if c.attempt == newest]
            messages.append(
                f"{who}: {len(attempts)} attempts; kept the newest "
                f"({newest:%Y-%m-%d %H:%M:%S}: {', '.join(repr(c.original) for c in files)}), "
                "dropped "
                + ", ".join(f"{c.original!r} ({c.attempt:%Y-%m-%d %H:%M:%S})" for c in dropped)
            )
        if len(files) == 1:
            kept[student] = files[0]
        else:
            chosen, message = _one_notebook(files, who, named, exact, assignment, layout)
            messages.append(message)
            if chosen is None:
                continue
            kept[student] = chosen
        if kept[student].late:
            messages.append(f"{who}: submitted late (Canvas's LATE mark)")
    return kept, messages


def _one_notebook(files, who, named, exact, assignment: str, layout: str):
    """(the notebook of one student to grade, or None; the message saying which)."""
    names = ", ".join(repr(c.original) for c in files)
    pool = [c for c in files if named.match(posixpath.basename(c.original))] or files
    if len(pool) == 1:
        named_as = (
            f"{assignment}.ipynb"
            if exact.match(posixpath.basename(pool[0].original))
            else f"for {assignment}"
        )
        return pool[0], (
            f"{who}: {len(files)} notebooks ({names}); kept {pool[0].original!r} "
            f"(named {named_as}), dropped the others"
        )
    chosen, evidence = _newest(pool, layout)
    if chosen is not None:
        dropped = ", ".join(repr(c.original) for c in files if c is not chosen)
        return chosen, (
            f"{who}: {len(files)} notebooks; kept {chosen.original!r} ({evidence}), "
            f"dropped {dropped}"
        )
    best = [c for c in pool if exact.match(posixpath.basename(c.original))]
    if len(best) == 1:
        return best[0], (
            f"{who}: {len(files)} notebooks ({names}), the archive does not say which is "
            f"newest; kept {best[0].original!r} (named {assignment}.ipynb), dropped the others"
        )
    return None, (
        f"refused {who}: {len(files)} notebooks ({names}), the archive does not say which is "
        f"newest and {'none' if not best else 'more than one'} is named {assignment}.ipynb; "
        "nothing collected for this student (copy the right one by hand)"
    )


def _enroll(course: Path, students: dict[str, str | None]) -> None:
    """Add students to nbgrader's gradebook, each under its LMS id (``--enroll-unknown``)."""

    from autograder.checking import nbgrader_api

    Gradebook = nbgrader_api.api().Gradebook
    path = os.environ.get("PATH", "")
    # a new gradebook runs nbgrader's `alembic`, installed beside this Python
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{path}"
    try:
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
            for student, lms_id in sorted(students.items()):
                gb.update_or_create_student(
                    student, lms_user_id=lms_id, last_name=student, first_name=""
                )
    finally:
        os.environ["PATH"] = path


def read_duedate(course: Path, assignment: str) -> datetime.datetime | None:
    """The assignment's due date in nbgrader's gradebook (naive, UTC, as nbgrader keeps it),
    read-only; None when it has none."""
    rows = gradebook_rows(course, "SELECT duedate FROM assignment WHERE name = ?", (assignment,))
    found = rows[0] if rows else None
    if not found or not found[0]:
        return None
    try:
        return datetime.datetime.fromisoformat(str(found[0]))
    except ValueError:
        return None


def lms_record_path(course: Path, assignment: str) -> Path:
    """Where collect keeps, per student, the LMS's ids of what it collected (the Canvas
    attachment id, the Moodle folder), which the feedback archive needs."""
    return Path(course) / "downloaded" / assignment / "lms.json"


def participants_path(course: Path, assignment: str) -> Path:
    """Moodle's participant ids of one assignment (``roster --lms moodle --assignment``):
    Moodle makes them per assignment, so the one ``lms_user_id`` of nbgrader's roster cannot
    hold them all."""
    return Path(course) / "downloaded" / assignment / "moodle_participants.json"


def read_lms_records(course: Path, assignment: str) -> dict[str, dict]:
    try:
        records = json.loads(lms_record_path(course, assignment).read_text())
    except (OSError, ValueError):
        return {}
    return records if isinstance(records, dict) else {}


def _write_json(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.writing")
    temporary.write_text(json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    os.replace(temporary, path)


def _timestamp(candidate: Candidate, zone, due, messages: list[str]) -> str | None:
    """What ``timestamp.txt`` says for a kept file (None: nothing), in UTC, which nbgrader
    compares with the assignment's due date (its late-submission plug-ins apply)."""
    if candidate.stamp is not None:  # plain: the name's timestamp, as zip_collect writes it
        return candidate.stamp.isoformat(" ")
    if candidate.submitted is not None:
        when = candidate.submitted.replace(tzinfo=zone).astimezone(datetime.UTC)
        return when.isoformat(" ")
    if candidate.late:
        if due is None:
            messages.append(
                f"{candidate.who}: Canvas's LATE mark is not recorded: the assignment has no "
                "due date in the gradebook (set it, then collect again)"
            )
            return None
        messages.append(
            f"{candidate.who}: Canvas's download gives no time, only the LATE mark: recorded "
            "as submitted 1 second after the due date"
        )
        late = due.replace(tzinfo=datetime.UTC) + datetime.timedelta(seconds=1)
        return late.isoformat(" ")
    return None


def collect(
    course: Path,
    assignment: str,
    archive: Path,
    regexp: str | None = None,
    *,
    layout: str | None = None,
    enroll_unknown: bool = False,
    lms_assignment: str | None = None,
    lms_timezone: str = "UTC",
):
    """Unpack ``archive`` (an LMS download) and put each student's notebook at
    ``submitted/<student>/<assignment>/<assignment>.ipynb``: (the students collected, one
    message per member refused or skipped, per student with several files and per notebook
    replaced). Who a member belongs to comes from the roster and the LMS's ids in its
    layout (``layout``: forced, else `recognise`d), never from a name the student chose.
    One member's problem never stops the others. ``timestamp.txt`` gets the time the LMS
    gives (the LMS's dates are read in ``lms_timezone``), and ``downloaded/<id>/lms.json``
    the LMS's ids of each file kept (`lms_record_path`)."""
    from zoneinfo import ZoneInfo

    zone = ZoneInfo(lms_timezone)
    course, archive = Path(course), Path(archive)
    staging = course / "downloaded" / assignment / "extracted" / archive.name
    if staging.exists():
        shutil.rmtree(staging)
    names = archive_names(archive)
    if layout is None:
        layout, why = recognise(names)
        if layout is None:
            return [], [f"{archive.name}: {why}; nothing was collected"]
    members, messages = extract_zip(archive, staging, student_zips=layout != "plain")
    roster = read_roster(course)
    if layout == "moodle" and participants_path(course, assignment).is_file():
        roster = roster._replace(lms=_participants(course, assignment))
    identify = Identify(
        layout, assignment, roster, enroll_unknown, regexp, lms_assignment, names, course
    )
    candidates = []
    for member in members:
        candidate, why = identify(member, _shown(_member_shown(member)))
        if why:
            messages.append(why)
        else:
            candidates.append(candidate)
    if layout == "plain":
        kept, chosen = choose(candidates)
    else:
        kept, chosen = choose_lms(candidates, assignment, layout)
    messages.extend(chosen)
    new = {s: lms for s, lms in identify.enroll.items() if s in kept}
    if new:
        try:
            _enroll(course, new)
        except Exception as err:  # the gradebook's own errors: sqlalchemy's, alembic's, OS's
            for student in new:
                messages.append(
                    f"refused {kept.pop(student).who}: it could not be added to the gradebook "
                    f"({type(err).__name__}: {str(err)[:200]})"
                )
        else:
            messages.extend(
                f"{kept[student].who}: added to the gradebook as the student {student} "
                "(--enroll-unknown)"
                for student in sorted(new)
            )
    undated = [c for c in kept.values() if layout == "moodle" and c.submitted is None]
    if any(
        "/" in c.member.name and MOODLE_FOLDER.match(c.member.name.split("/")[0]) for c in undated
    ):
        messages.append(
            f"{archive.name}: Moodle 4.1 and later date each file of the download when the zip "
            "is made, so it gives no submission time: none was recorded"
        )
    elif undated:
        messages.append(
            f"{archive.name}: a Moodle download not in folders does not say which Moodle made "
            "it (4.1 and later date each file when the zip is made), so no submission time "
            "was recorded"
        )
    due = read_duedate(course, assignment)
    records = read_lms_records(course, assignment)
    for student, candidate in sorted(kept.items()):
        folder = course / "submitted" / student / assignment
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{assignment}.ipynb"
        shown = _member_shown(candidate.member)
        same = target.is_file() and target.read_bytes() == candidate.member.path.read_bytes()
        if target.is_file() and not same:
            messages.append(
                f"{candidate.who}: replaced the notebook collected before with {shown!r}"
            )
        temporary = folder / f".{assignment}.ipynb.collecting"
        shutil.copyfile(candidate.member.path, temporary)
        os.replace(temporary, target)
        secret = folder / "submission_secret.txt"
        if not same or not secret.is_file() or secret.is_symlink():
            _write_secret(secret)
        stamp = folder / "timestamp.txt"
        text = _timestamp(candidate, zone, due, messages)
        if text is not None:
            stamp.write_text(text)
        elif stamp.is_file() or stamp.is_symlink():
            stamp.unlink()  # an older collection's date is not this file's
        records[student] = {
            "layout": layout,
            "lms_id": candidate.lms_id,
            "attachment": candidate.attachment,
            "folder": candidate.folder,
            "member": shown,
            "late": candidate.late,
            "timestamp": text,
        }
    if kept:
        _write_json(lms_record_path(course, assignment), records)
    return sorted(kept), messages


def _write_secret(path: Path) -> None:
    """A submission's secret, as nbgrader's ``submit`` writes it (128 hex digits): nbgrader's
    ``release_feedback`` names the page it releases by it, and reads it for every student."""
    temporary = path.with_name(f".{path.name}.writing")
    temporary.write_text(secrets.token_hex(64))
    os.replace(temporary, path)


def _member_shown(member: Member) -> str:
    """A member's name in messages: inside a student's zip, ``<zip>/<name inside>``."""
    return f"{member.name}/{member.inner}" if member.inner else member.name


def _participants(course: Path, assignment: str) -> dict[str, tuple[str, ...]]:
    """`participants_path`'s map, participant id -> (nbgrader id,), as `Roster.lms`."""
    try:
        mapping = json.loads(participants_path(course, assignment).read_text())
    except (OSError, ValueError):
        return {}
    found: dict[str, list[str]] = {}
    for participant, student in mapping.items() if isinstance(mapping, dict) else ():
        found.setdefault(str(participant), []).append(str(student))
    return {key: tuple(sorted(v)) for key, v in found.items()}
