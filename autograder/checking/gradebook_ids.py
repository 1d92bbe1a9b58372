"""What may name a student or a file in the course: nbgrader turns both into folder and file
names and shows them in its pages, so only plain names are accepted (by `collect`, and by
`grade` for the folders under submitted/); and what the course's gradebook holds, read
without writing (`gradebook_rows`: collect's roster and due date, the report's names)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

#: a student id or a file id: letters, digits and . _ @ + -, starting with a letter or digit
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}\Z")


def gradebook_rows(course: Path, query: str, params: tuple = ()) -> list[tuple] | None:
    """The rows of ``query`` on the course's ``gradebook.db``, opened read-only (never
    created, never locked for writing); None when there is no gradebook or it cannot be
    read."""
    path = Path(course) / "gradebook.db"
    if not path.is_file():
        return None
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            return db.execute(query, params).fetchall()
        finally:
            db.close()
    except sqlite3.Error:
        return None
