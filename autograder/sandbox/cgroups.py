"""Kernel-enforced limits for each sandbox: one cgroup per worker slot, in the grader's own subtree.

The memory controller charges everything a sandbox makes resident: its processes' memory,
the page cache of files it reads or writes, its tmpfs (/tmp), System V shared memory and
memfds. So the memory limit is a real cap, unlike RLIMIT_AS. The pids controller caps the
number of tasks, and the cpu controller gives each sandbox at most one CPU's worth of time.

- cgroup v2 (a unified hierarchy at /sys/fs/cgroup with ``cgroup.controllers``): the subtree
  ``<the grader's own cgroup>/attention-derived-<pid>/`` with memory, pids and cpu enabled;
  this needs the grader's own cgroup to be delegated to it (root, or a systemd user
  delegation such as ``systemd-run --user --scope -p Delegate=yes``).
- cgroup v1 and hybrid hosts (controllers at /sys/fs/cgroup/{memory,pids,cpu}): the same
  subtree under the grader's own cgroup in each controller's hierarchy.

Inside a slot's cgroup, the zygote has a leaf of its own (``zygote``) and each run gets a
fresh one (``Cgroup.child``), made before the run and removed after it: the run's processes
are in it (the run's first step writes itself into it, through descriptors
the trusted side opened: ``autograder/student/zygote.py``), its memory limit is the submission's
limit exactly, and nothing is charged to it from before (page cache an earlier run brought
in, the zygote's own memory), so no earlier run can raise or lower what the next one may use
(``docs/threat-model.md``, "Memory").

Only directories this module made are written to, and `Cgroup.remove` deletes them (the
subtree too, once empty). Where no cgroup can be made, `open_cgroup` returns None and the
reason, which the grader prints with the guarantees that are weaker without it.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PROJECT = "attention-derived"
V1_CONTROLLERS = ("memory", "pids", "cpu")
_STARTED_IN: dict = {}  # cgroup v2 root -> the parent of this grader's subtree


def _own_paths() -> dict:
    """controller (or "" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    paths = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _id, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _write(path: Path, value) -> None:
    path.write_text(str(value))


class Cgroup:
    """One leaf cgroup per controller hierarchy (one directory on v2, up to three on v1)."""

    def __init__(self, version: int, leaves: dict, subtrees: list):
        self.version, self.leaves, self.subtrees = version, leaves, subtrees

    def child(self, name: str) -> Cgroup:
        """A new cgroup below this one in each hierarchy (its limits its own, its usage
        counted in this one's too). On v2 this one may then hold no process itself (the "no
        internal processes" rule): every process goes into a child."""
        if self.version == 2:
            leaf = self.leaves["memory"]
            wanted = " ".join(f"+{c}" for c in sorted(self.leaves))
            if not set(self.leaves) <= set((leaf / "cgroup.subtree_control").read_text().split()):
                _write(leaf / "cgroup.subtree_control", wanted)
            (leaf / name).mkdir()
            return Cgroup(2, {c: leaf / name for c in self.leaves}, [])
        leaves = {c: leaf / name for c, leaf in self.leaves.items()}
        for leaf in leaves.values():
            leaf.mkdir()
        return Cgroup(1, leaves, [])

    def open_for_joining(self) -> list[int]:
        """Descriptors of this cgroup's ``join_files``, opened for writing here: a process
        that holds them moves itself in by writing "0" (the kernel checks the permission of
        whoever opened them), without seeing or reaching any cgroup file."""
        return [os.open(path, os.O_WRONLY | os.O_CLOEXEC) for path in self.join_files]

    @property
    def procs_files(self) -> list[str]:
        return sorted({str(leaf / "cgroup.procs") for leaf in self.leaves.values()})

    @property
    def join_files(self) -> list[str]:
        """The files a run's first process writes "0" into, while it is its only thread. On
        v1, ``tasks``: moving that one thread moves the whole process, and the kernel skips the
        machine-wide lock a ``cgroup.procs`` write takes, whose wait for an RCU grace period
        cost 4.5-22 ms a run on this project's hybrid host (``docs/threat-model.md``, "Memory").
        On v2 (no ``tasks``), ``cgroup.procs``."""
        name = "tasks" if self.version == 1 else "cgroup.procs"
        return sorted({str(leaf / name) for leaf in self.leaves.values()})

    def set_limits(self, memory_bytes: int, pids: int, cpus: float = 1.0) -> None:
        period = 100_000
        if self.version == 2:
            leaf = self.leaves["memory"]
            _write(leaf / "memory.max", memory_bytes)
            if (leaf / "memory.swap.max").exists():
                _write(leaf / "memory.swap.max", 0)
            _write(leaf / "pids.max", pids)
            _write(leaf / "cpu.max", f"{int(period * cpus)} {period}")
            return
        memory = self.leaves["memory"]
        files = ["memory.limit_in_bytes"]
        if (memory / "memory.memsw.limit_in_bytes").exists():  # swap may not evade the cap
            # memory <= memory+swap at every step: raise memsw first, lower it last
            raising = memory_bytes >= int((memory / "memory.limit_in_bytes").read_text())
            files = (
                ["memory.memsw.limit_in_bytes", *files]
                if raising
                else [*files, "memory.memsw.limit_in_bytes"]
            )
        for name in files:
            _write(memory / name, memory_bytes)
        _write(self.leaves["pids"] / "pids.max", pids)
        _write(self.leaves["cpu"] / "cpu.cfs_period_us", period)
        _write(self.leaves["cpu"] / "cpu.cfs_quota_us", int(period * cpus))

    def memory_usage(self) -> int:
        leaf = self.leaves["memory"]
        name = "memory.current" if self.version == 2 else "memory.usage_in_bytes"
        return int((leaf / name).read_text())

    def oom_kills(self) -> int:
        """How many processes the kernel killed here for want of memory, so far."""
        leaf = self.leaves["memory"]
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        for line in (leaf / name).read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def pids(self) -> list[int]:
        """Every process in this cgroup and in the cgroups below it."""
        out = set()
        for leaf in self.leaves.values():
            for procs in leaf.rglob("cgroup.procs"):
                try:
                    out |= {int(p) for p in procs.read_text().split()}
                except OSError:
                    continue
        return sorted(out)

    def unreclaimable(self) -> int:
        """Memory charged here and below that no reclaim can free without killing or
        deleting something (anonymous memory and tmpfs/shared memory): what a leak would hold.
        Page cache is left out: the kernel reclaims it when a limit needs the room."""
        leaf = self.leaves["memory"]
        stat = dict(line.split() for line in (leaf / "memory.stat").read_text().splitlines())
        keys = ("anon", "shmem") if self.version == 2 else ("total_rss", "total_shmem")
        return sum(int(stat.get(key, 0)) for key in keys)

    def kill_all(self) -> int:
        """SIGKILL every process in the cgroup until it is empty; returns how many there were."""
        first = self.pids()
        for _ in range(200):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.01)
        return len(first)

    def remove(self) -> None:
        self.kill_all()
        for leaf in [*_below(self.leaves.values()), *self.leaves.values()]:
            for _ in range(100):
                try:
                    leaf.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # the last processes are still being reaped
                    time.sleep(0.02)
        for subtree in self.subtrees:
            try:
                subtree.rmdir()  # only once every slot of this grader is gone
            except OSError:
                pass


def _below(folders) -> list[Path]:
    """The cgroups below ``folders``, deepest first (the order rmdir needs)."""
    found = {p for folder in folders if folder.is_dir() for p in folder.rglob("*") if p.is_dir()}
    return sorted(found, key=lambda p: -len(p.parts))


def _subtree_name() -> str:
    return f"{PROJECT}-{os.getpid()}"


def _remove_stale(parent: Path) -> None:
    """Remove the empty subtrees of graders that died without cleaning up (SIGKILL)."""
    for subtree in parent.glob(f"{PROJECT}-*"):
        pid = subtree.name.rsplit("-", 1)[-1]
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        for leaf in _below([subtree]):
            try:
                leaf.rmdir()
            except OSError:
                pass
        try:
            subtree.rmdir()
        except OSError:
            pass


def open_cgroup(slot: str) -> tuple[Cgroup | None, str]:
    """(a fresh leaf cgroup for one slot, "") or (None, why none could be made)."""
    try:
        if (ROOT / "cgroup.controllers").is_file():
            return _open_v2(slot)
        if all((ROOT / c / "cgroup.procs").exists() for c in V1_CONTROLLERS):
            return _open_v1(slot)
    except OSError as err:
        return None, f"cannot create the grader's cgroups ({err.strerror or err})"
    return None, "no cgroup hierarchy with the memory, pids and cpu controllers is mounted"


def _open_v1(slot: str) -> tuple[Cgroup | None, str]:
    own = _own_paths()
    leaves, subtrees = {}, []
    for controller in V1_CONTROLLERS:
        parent = ROOT / controller / own.get(controller, "/").lstrip("/")
        _remove_stale(parent)
        subtree = parent / _subtree_name()
        subtree.mkdir(exist_ok=True)
        subtrees.append(subtree)
        leaf = subtree / slot
        leaf.mkdir()
        leaves[controller] = leaf
    if (leaves["memory"] / "memory.use_hierarchy").exists():
        try:
            _write(leaves["memory"] / "memory.use_hierarchy", 1)
        except OSError:
            pass  # already hierarchical (it is inherited)
    return Cgroup(1, leaves, subtrees), ""


def _open_v2(slot: str) -> tuple[Cgroup | None, str]:
    """cgroup v2 forbids processes in a cgroup whose children get controllers (the "no internal
    processes" rule, which exempts only the root). So, as root, the subtree goes directly
    under the root cgroup (of this cgroup namespace), never under a login session's scope;
    rootless, under the grader's own delegated cgroup, after the grader moves itself into a
    leaf of its subtree (``grader``), which works when the grader is the only process there."""
    as_root = os.geteuid() == 0
    # where the grader started (once it has moved itself, /proc/self/cgroup names its leaf)
    parent = _STARTED_IN.setdefault(
        ROOT, ROOT if as_root else ROOT / _own_paths().get("", "/").lstrip("/")
    )
    wanted = {"memory", "pids", "cpu"}
    available = set((parent / "cgroup.controllers").read_text().split())
    if not wanted <= available:
        return None, f"the cgroup {parent} does not offer {sorted(wanted - available)}"
    _remove_stale(parent)
    subtree = parent / _subtree_name()
    enable = " ".join(f"+{c}" for c in sorted(wanted))
    if not wanted <= set((parent / "cgroup.subtree_control").read_text().split()):
        try:
            if not as_root:
                _move_self_into(subtree / "grader")
            _write(parent / "cgroup.subtree_control", enable)
        except OSError as err:
            return None, (
                f"cannot enable {sorted(wanted)} for the cgroups under {parent} ({err.strerror}): "
                "run the grader as root, or as the only process of a delegated cgroup, e.g. "
                "`systemd-run --user --scope -p Delegate=yes .venv/bin/python -m autograder grade <id>`"
            )
    subtree.mkdir(exist_ok=True)
    _write(subtree / "cgroup.subtree_control", enable)
    leaf = subtree / slot
    leaf.mkdir()
    return Cgroup(2, {c: leaf for c in wanted}, [subtree]), ""


def _move_self_into(leaf: Path) -> None:
    """Move this process (all its threads) into ``leaf``, a cgroup of the grader's own subtree."""
    leaf.mkdir(parents=True, exist_ok=True)
    _write(leaf / "cgroup.procs", os.getpid())
