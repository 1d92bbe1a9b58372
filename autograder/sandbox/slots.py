"""Worker slots: an exclusive lock file per slot, and the unprivileged uid that goes with it.

As root, each sandbox runs under its slot's uid (``FIRST_UID`` + the slot's number), so
RLIMIT_NPROC bites per sandbox and everything a sandbox left is found by its uid. A slot is
held by an flock for as long as its sandbox lives, by whichever grader process on the
machine took it; ``stray_processes`` finds processes of a slot nobody holds.
"""

from __future__ import annotations

import fcntl
from pathlib import Path

from autograder.sandbox.processes import processes_of_uid

SLOT_DIR = Path("/tmp/autograder-slots")
FIRST_UID = 61000
MAX_SLOTS = 512


class Slot:
    """An exclusive worker slot (a lock file) and the unprivileged uid that goes with it."""

    def __init__(self):
        SLOT_DIR.mkdir(parents=True, exist_ok=True)
        for number in range(MAX_SLOTS):
            handle = open(SLOT_DIR / f"slot-{number}.lock", "a")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            self.uid, self._handle = FIRST_UID + number, handle
            return
        raise RuntimeError(f"all {MAX_SLOTS} grader slots in {SLOT_DIR} are taken")

    def release(self) -> None:
        self._handle.close()


def stray_processes(slots: int = 32) -> list[int]:
    """Processes still running under the uid of a slot nobody holds (there should be none)."""
    stray = []
    SLOT_DIR.mkdir(parents=True, exist_ok=True)
    for number in range(slots):
        with open(SLOT_DIR / f"slot-{number}.lock", "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # in use by a live grader
            stray += processes_of_uid(FIRST_UID + number)
    return stray
