"""A slot's cgroups: the bookkeeping of what the kernel enforces for one sandbox.

The slot's cgroup bounds the zygote and a run together; the zygote lives in a leaf of its own
(``zygote``: on v2 the slot's cgroup may hold no process itself once it has children), and
each run gets a fresh leaf whose memory limit is the submission's limit exactly, removed after
the run (``docs/threat-model.md``, "Memory"). The zygote's own unreclaimable memory, measured
once it is ready, is the baseline against which a leak after a run is judged. Where the
machine has no cgroup to give, every method is a no-op and ``note`` says why.
"""

from __future__ import annotations

import itertools
import shlex

from autograder.sandbox import cgroups
from autograder.sandbox.limits import Limits
from autograder.sandbox.slots import Slot

START_MEMORY = 4 << 30  # the zygote's room (it imports NumPy and PyTorch), beside a run's limit
LEAK_SLACK = 256 << 20  # unreclaimable memory left after a run beyond this: restart the sandbox
_ROOTLESS_SLOTS = itertools.count()


class SlotCgroup:
    """The cgroup of one slot (None where none can be made: ``note`` says why), the zygote's
    leaf in it and each run's fresh leaf."""

    def __init__(self, slot: Slot | None, limits: Limits, sandboxed: bool):
        self.limits = limits
        self.cgroup: cgroups.Cgroup | None = None
        self.note = "not sandboxed"
        if sandboxed:
            name = f"slot-{slot.uid}" if slot else f"slot-rootless-{next(_ROOTLESS_SLOTS)}"
            self.cgroup, self.note = cgroups.open_cgroup(name)
        self.zygote = self._zygote_leaf()
        self._runs = itertools.count()  # names each run's cgroup
        self.baseline = 0  # the zygote's own unreclaimable memory, measured once it is ready

    def _zygote_leaf(self) -> cgroups.Cgroup | None:
        """The zygote's leaf, with the slot's limits set (a run's and the zygote's room);
        if they cannot be set, no cgroup at all (and the reason)."""
        if self.cgroup is None:
            return None
        try:
            self.cgroup.set_limits(self.limits.memory_bytes + START_MEMORY, self.limits.processes)
            return self.cgroup.child("zygote")
        except OSError as err:
            self.cgroup.remove()
            self.cgroup = None
            self.note = f"cannot create the grader's cgroups ({err.strerror or err})"
            return None

    def joining(self, command: list[str]) -> list[str]:
        """``command`` made to join the zygote's leaf first (emptied of any earlier zygote)."""
        if self.cgroup is None:
            return command
        self.cgroup.kill_all()
        files = " ".join(shlex.quote(f) for f in self.zygote.procs_files)
        return ["/bin/sh", "-c", f'echo $$ | tee {files} > /dev/null && exec "$@"', "sh", *command]

    def measure_baseline(self) -> None:
        """The zygote's memory once it is ready: what a run may leave without being a leak."""
        if self.cgroup is not None:
            self.baseline = self.cgroup.unreclaimable()

    def new_run(self) -> cgroups.Cgroup | None:
        """A fresh cgroup for one run, its memory limit the submission's limit exactly: nothing
        is charged to it before the run's first process moves in (no page cache of an earlier
        run, none of the zygote's memory), so every run may use the same, whatever ran before."""
        if self.cgroup is None:
            return None
        group = self.cgroup.child(f"run-{next(self._runs)}")
        group.set_limits(self.limits.memory_bytes, self.limits.processes)
        return group

    def leaked(self) -> bool:
        """Memory still held after a run's sweep, beyond the slack: a fresh sandbox next."""
        if self.cgroup is None:
            return False
        return self.cgroup.unreclaimable() - self.baseline > LEAK_SLACK

    def kill_all(self) -> int:
        """Every process in the slot's cgroup killed; how many there were."""
        return self.cgroup.kill_all() if self.cgroup is not None else 0

    def close(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
