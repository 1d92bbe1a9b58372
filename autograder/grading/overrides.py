"""The limits an instructor gave for one student, kept for every later run.

``grade A --student s07 --max-notebook-mb 16 --force`` is a decision about s07: their notebook
may be bigger. A later ``grade A --force`` for the whole class, without the option, must not
undo it and zero s07 again. So a run that names its students and gives limits records those
limits for each of them (`remember`, called by the CLI's ``grade``), in ``autograded/.limits/<assignment>.json`` beside the
run log, and every later run grades each student with the limits recorded for them, under
the ones it gives itself (`for_students`: the command line still wins). Giving the option
again for that student changes the decision; the CLI says whose recorded limits a run used.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import tempfile
from pathlib import Path

from autograder.checking.notebook import Caps
from autograder.sandbox import Limits

#: the names a recorded limit may have: a `Limits` or a `Caps` field
NAMES = frozenset(f.name for f in dataclasses.fields(Limits)) | frozenset(
    f.name for f in dataclasses.fields(Caps)
)


def path_of(course: Path, assignment: str) -> Path:
    return Path(course) / "autograded" / ".limits" / f"{assignment}.json"


def recorded(course: Path, assignment: str) -> dict[str, dict]:
    """{student: {limit name: value}} as recorded (an unreadable file, or an entry that is not
    a limit with a positive number, is none: the defaults apply)."""
    try:
        data = json.loads(path_of(course, assignment).read_text())
    except (OSError, ValueError):
        return {}
    students = data.get("students") if isinstance(data, dict) else None
    out: dict[str, dict] = {}
    for student, entry in (students if isinstance(students, dict) else {}).items():
        limits = entry.get("limits") if isinstance(entry, dict) else None
        if not isinstance(limits, dict):
            continue
        kept = {
            name: value
            for name, value in limits.items()
            if name in NAMES
            and isinstance(value, int | float)
            and not isinstance(value, bool)
            and value > 0
        }
        if kept:
            out[str(student)] = kept
    return out


def remember(course: Path, assignment: str, students: list[str], given: dict) -> None:
    """Record ``given`` (the run's explicit limits) for each of ``students``, over what was
    recorded for them before; written whole, atomically."""
    given = {k: v for k, v in given.items() if k in NAMES}
    if not students or not given:
        return
    path = path_of(course, assignment)
    try:
        data = json.loads(path.read_text())
        data = data if isinstance(data, dict) and isinstance(data.get("students"), dict) else {}
    except (OSError, ValueError):
        data = {}
    entries = data.setdefault("students", {})
    when = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    for student in students:
        entry = entries.get(student) if isinstance(entries.get(student), dict) else {}
        limits = entry.get("limits") if isinstance(entry.get("limits"), dict) else {}
        entries[student] = {"limits": {**limits, **given}, "given": when}
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as stream:
            json.dump(data, stream, indent=1, sort_keys=True)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def for_students(
    course: Path, assignment: str, students: list[str], given: dict
) -> list[tuple[dict, list[str]]]:
    """The students grouped by the explicit limits each is graded with: what was recorded for
    them, under ``given`` (this run's, which win). In the order the students came; one group
    when nobody has limits of their own."""
    kept = recorded(course, assignment)
    groups: dict[tuple, tuple[dict, list[str]]] = {}
    for student in students:
        limits = {**kept.get(student, {}), **given}
        key = tuple(sorted(limits.items()))
        groups.setdefault(key, (limits, []))[1].append(student)
    return list(groups.values()) or [(dict(given), [])]
