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
  is an archive itself; or it unpacks to more than `MAX_MEMBER_BYTES` (the declared size is
  checked first and the bytes are counted while unpacking, so a header that lies changes
  nothing), or the archive to more than `MAX_TOTAL_BYTES`. A file that is not a notebook,
  and macOS's ``__MACOSX/`` and ``._*`` metadata, are skipped with a message.
- `recognise` tells the layout from the members' names (``--layout`` forces one; members
  named as two LMSs name them are not guessed at), and
  `Identify` names each notebook's student:
  - Canvas (flat ``<sortable name>_[LATE_]<user id>_<submission id>_<file name>``): the
    Canvas user id, looked up in the roster's ``lms_user_id``. The names on both sides of
    the ids are the student's, so every place the ids could be is tried: a name that reads
    as more than one user id is refused.
  - Moodle (folders ``<full name>_<participant id>_assignsubmission_file_/``): the
    participant id (Moodle makes one per assignment), looked up in ``lms_user_id``;
    whatever the files inside are named.
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
  date); of several notebooks, the one the student named ``<id>.ipynb`` (Canvas's
  ``<id>-N.ipynb``), else the student is refused with the names. `choose` (plain): the
  newest file, by the name's timestamp or else the member's date. Each names what it kept
  and dropped.
- the kept file becomes ``submitted/<student>/<id>/<id>.ipynb`` (a message when it replaces
  another), with ``timestamp.txt`` when a plain name gave a timestamp (as ``zip_collect``).
"""

from __future__ import annotations

import datetime
import os
import posixpath
import re
import shutil
import sqlite3
import stat
import zipfile
from pathlib import Path
from typing import NamedTuple

from autograder.checking.gradebook_ids import PLAIN_NAME

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


def is_macos_metadata(name: str) -> bool:
    """A member the Finder adds when it zips a folder (``__MACOSX/...``, ``._<name>``)."""
    parts = name.split("/")
    return parts[0] == "__MACOSX" or parts[-1].startswith("._")


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
                if is_macos_metadata(key):
                    refused.append(
                        f"skipped {shown} from {path.name}: macOS metadata (__MACOSX/, ._*), "
                        "not a submission"
                    )
                    continue
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


# --- who a member belongs to: the roster, and the LMS's own ids in its download's layout


class Roster(NamedTuple):
    """nbgrader's student list: the ids, and which of them carry each ``lms_user_id``."""

    ids: frozenset[str]
    lms: dict[str, tuple[str, ...]]


def read_roster(course: Path) -> Roster:
    """The ``student`` table of the course's ``gradebook.db``, read-only (``nbgrader db
    student import`` fills it); empty when there is no gradebook or no student."""
    path = Path(course) / "gradebook.db"
    ids, lms = set(), {}
    if path.is_file():
        try:
            db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
            try:
                rows = db.execute("SELECT id, lms_user_id FROM student").fetchall()
            finally:
                db.close()
        except sqlite3.Error:
            rows = []
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
#: where the roster holds each LMS's id
ROSTER_COLUMN = {
    "canvas": "the Canvas user id in its lms_user_id column",
    "moodle": "the Moodle participant id in its lms_user_id column",
    "blackboard": "the Blackboard username as its id",
}

#: Canvas: ``<sortable name>_[LATE_]<user id>_<submission id>_<original name>`` (`_canvas_ids`)
#: Moodle: a folder ``<full name>_<participant id>_assignsubmission_<plugin>_/`` (Moodle
#: writes the full name with its ``_`` as spaces; the id is the digits before the suffix)
MOODLE_FOLDER = re.compile(r"(?P<name>.*)_(?P<id>[0-9]+)_assignsubmission_(?P<plugin>[a-z]+)_\Z")
#: Blackboard: ``<assignment name>_<username>_attempt_<date>_<original name>`` and the
#: receipt ``<assignment name>_<username>_attempt_<date>.txt``; the first ``_attempt_<date>``
#: is Blackboard's (the original name after it is the student's)
BLACKBOARD = re.compile(
    r"(?P<stem>[^/]+?)_attempt_(?P<date>[0-9]{4}(?:-[0-9]{2}){5})"
    r"(?:_(?P<original>[^/]+)|(?P<receipt>\.txt))\Z"
)


def _digits(token: str) -> bool:
    return token.isascii() and token.isdigit()


def _canvas_ids(name: str) -> list[tuple[str, bool, str]]:
    """Each (user id, late, original name) a top-level Canvas name could mean: the sortable
    name before the ids and the original name after them are the student's, so may hold
    ``_1_2_`` themselves. One pass over the ``_``-separated parts (a name is hostile)."""
    if "/" in name:
        return []
    parts = name.split("_")
    starts = [0]
    for part in parts[:-1]:
        starts.append(starts[-1] + len(part) + 1)
    found: dict[str, tuple[str, bool, str]] = {}
    for i in range(1, len(parts)):
        late = parts[i] == "LATE"
        j = i + 1 if late else i
        if j + 2 < len(parts) and _digits(parts[j]) and _digits(parts[j + 1]):
            if starts[i] > 1 and parts[j] not in found and name[starts[j + 2] :]:
                found[parts[j]] = (parts[j], late, name[starts[j + 2] :])
    return list(found.values())


def _looks_like(name: str) -> set[str]:
    """The LMS layouts a member's name has (a hostile name may have several)."""
    if is_macos_metadata(name) or name.endswith("/") or len(name.encode()) > MAX_NAME_BYTES:
        return set()
    found = set()
    if "/" in name and MOODLE_FOLDER.match(name.split("/")[0]):
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

    def __init__(self, layout, assignment, roster, enroll_unknown, regexp, lms_assignment, names):
        self.layout, self.assignment, self.roster = layout, assignment, roster
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
                f"refused {shown}: {label} is not on the roster (import it with `nbgrader db "
                f"student import students.csv`, {ROSTER_COLUMN[self.layout]}; or collect "
                "with --enroll-unknown)"
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
        fits = _canvas_ids(member.name)
        if not fits:
            raise NotFiled(
                f"skipped {shown}: not named as Canvas names a submission's file "
                "(<name>_[LATE_]<user id>_<submission id>_<file name>, not in a folder)"
            )
        if len(fits) > 1:  # even one roster user among strangers: the stranger may be the
            # uploader, whose display name holds the roster user's id
            raise NotFiled(
                f"refused {shown}: its name could belong to the Canvas users "
                f"{', '.join(f[0] for f in fits)} (the name before the ids and the file name "
                "after them are the student's); collect it by hand"
            )
        user, late, original = fits[0]
        student, who = self.student(user, shown)
        return Candidate(student, member, None, who, original, None, late)

    def moodle(self, member: Member, shown: str):
        folder, _, rest = member.name.partition("/")
        match = MOODLE_FOLDER.match(folder)
        if not match or not rest:
            raise NotFiled(
                f"skipped {shown}: not in a Moodle submission folder "
                "(<full name>_<participant id>_assignsubmission_file_/)"
            )
        if match["plugin"] != "file":
            raise NotFiled(f"skipped {shown}: not a file submission ({match['plugin']})")
        student, who = self.student(match["id"], shown)
        return Candidate(student, member, None, who, rest)

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
        return Candidate(student, member, None, who, match["original"], attempt)

    def plain(self, member: Member, shown: str):
        if not self.roster.ids:
            raise NotFiled(
                f"refused {shown}: the plain layout ({expected_name(self.assignment)}) "
                "trusts names, so it needs the roster (nbgrader db student import)"
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


def choose_lms(
    candidates: list[Candidate], assignment: str
) -> tuple[dict[str, Candidate], list[str]]:
    """LMS layouts: the LMS's download holds one submission per student (Blackboard: one per
    attempt, the newest attempt by the LMS's date kept). Of several notebooks, the one whose
    original name is ``<id>.ipynb`` (or Canvas's ``<id>-N.ipynb``) is kept; otherwise the
    student is refused with the names, since which one to grade is not ours to guess."""
    preferred = re.compile(rf"{re.escape(assignment)}(?:-[0-9]+)?\.ipynb\Z")
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
            chosen, message = _one_notebook(files, who, preferred, assignment)
            messages.append(message)
            if chosen is None:
                continue
            kept[student] = chosen
        if kept[student].late:
            messages.append(f"{who}: submitted late (Canvas's LATE mark)")
    return kept, messages


def _one_notebook(files: list[Candidate], who: str, preferred: re.Pattern, assignment: str):
    """(the notebook of one submission to grade, or None; the message saying which)."""
    names = ", ".join(repr(c.original) for c in files)
    best = [c for c in files if preferred.match(posixpath.basename(c.original))]
    if len(best) == 1:
        return best[0], (
            f"{who}: {len(files)} notebooks ({names}); kept {best[0].original!r} "
            f"(named {assignment}.ipynb), dropped the others"
        )
    return None, (
        f"refused {who}: {len(files)} notebooks ({names}) and "
        f"{'none' if not best else 'more than one'} named {assignment}.ipynb; "
        "nothing collected for this student (copy the right one by hand)"
    )


def _enroll(course: Path, students: dict[str, str | None]) -> None:
    """Add students to nbgrader's gradebook, each under its LMS id (``--enroll-unknown``)."""
    import sys

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


def collect(
    course: Path,
    assignment: str,
    archive: Path,
    regexp: str | None = None,
    *,
    layout: str | None = None,
    enroll_unknown: bool = False,
    lms_assignment: str | None = None,
):
    """Unpack ``archive`` (an LMS download) and put each student's notebook at
    ``submitted/<student>/<assignment>/<assignment>.ipynb``: (the students collected, one
    message per member refused or skipped, per student with several files and per notebook
    replaced). Who a member belongs to comes from the roster and the LMS's ids in its
    layout (``layout``: forced, else `recognise`d), never from a name the student chose.
    One member's problem never stops the others."""
    course, archive = Path(course), Path(archive)
    staging = course / "downloaded" / assignment / "extracted" / archive.name
    if staging.exists():
        shutil.rmtree(staging)
    names = archive_names(archive)
    if layout is None:
        layout, why = recognise(names)
        if layout is None:
            return [], [f"{archive.name}: {why}; nothing was collected"]
    members, messages = extract_zip(archive, staging)
    roster = read_roster(course)
    identify = Identify(layout, assignment, roster, enroll_unknown, regexp, lms_assignment, names)
    candidates = []
    for member in members:
        candidate, why = identify(member, _shown(member.name))
        if why:
            messages.append(why)
        else:
            candidates.append(candidate)
    if layout == "plain":
        kept, chosen = choose(candidates)
    else:
        kept, chosen = choose_lms(candidates, assignment)
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
    for student, candidate in sorted(kept.items()):
        folder = course / "submitted" / student / assignment
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{assignment}.ipynb"
        if target.is_file() and target.read_bytes() != candidate.member.path.read_bytes():
            messages.append(
                f"{candidate.who}: replaced the notebook collected before with "
                f"{candidate.member.name!r}"
            )
        temporary = folder / f".{assignment}.ipynb.collecting"
        shutil.copyfile(candidate.member.path, temporary)
        os.replace(temporary, target)
        stamp = folder / "timestamp.txt"
        if candidate.stamp is not None:
            stamp.write_text(candidate.stamp.isoformat(" "))
        elif stamp.is_file() or stamp.is_symlink():
            stamp.unlink()  # an older collection's date is not this file's
    return sorted(kept), messages
