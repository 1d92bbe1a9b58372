"""The machine's process table, read from /proc: a slot uid's live processes, a sandbox's
process tree and its CPU time.

``Sandbox.kill`` counts and kills by these (``processes_of_uid``, ``descendants``); a run's
idle check samples ``tree_cpu_ticks``; ``slots.stray_processes`` finds what a dead grader
left behind.
"""

from __future__ import annotations

import os


def processes_of_uid(uid: int) -> list[int]:
    """The live processes whose real uid is ``uid``. A zombie is not one: it has exited and
    holds no memory, file or channel, only its pid until its parent reaps it (a sandbox's
    inner bwrap, orphaned when the sandbox is killed, waits for the machine's init)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as handle:
                zombie = False
                for line in handle:
                    if line.startswith("State:"):
                        zombie = line.split()[1] in ("Z", "X")
                    elif line.startswith("Uid:"):
                        if int(line.split()[1]) == uid and not zombie:
                            pids.append(int(entry))
                        break
        except OSError:
            continue
    return pids


def _process_table() -> dict:
    """pid -> the fields of its /proc/<pid>/stat after the command name (state, ppid, ...)."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    table[int(entry)] = handle.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
    return table


def descendants(root: int, table: dict | None = None) -> list[int]:
    """Every process below ``root`` (from /proc's parent links)."""
    children: dict = {}
    for pid, fields in (_process_table() if table is None else table).items():
        try:
            children.setdefault(int(fields[1]), []).append(pid)
        except (ValueError, IndexError):
            continue
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def tree_cpu_ticks(root: int) -> int:
    """The CPU time, in clock ticks, of ``root`` and every process below it: user and system
    time, and that of the children they reaped. It changes whenever anything in that tree runs;
    the idle check of a step (``protocol.IDLE_SECONDS``) watches it. A sandbox's processes all
    stay below its root: its pid namespace's init reaps every orphan."""
    table = _process_table()
    total = 0
    for pid in (root, *descendants(root, table)):
        try:
            total += sum(int(value) for value in table[pid][11:15])  # utime stime cutime cstime
        except (KeyError, ValueError):
            continue
    return total
