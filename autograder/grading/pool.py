"""The sandboxes of one process (local threads or one Dask worker), reused across jobs."""

from __future__ import annotations

import atexit
import threading

from autograder.grading.work import AssignmentWork
from autograder.sandbox import Sandbox


class SandboxPool:
    """Sandboxes shared by the jobs of one process (local threads or one Dask worker), by
    what they were started for: (release folder, limits, sandboxed, preloaded modules)."""

    def __init__(self):
        self._free: dict = {}
        self._lock = threading.Lock()

    def acquire(self, key: tuple) -> Sandbox:
        with self._lock:
            free = self._free.setdefault(key, [])
            if free:
                return free.pop()
        return Sandbox(*key)

    def warm(self, key: tuple, count: int) -> None:
        """Make sure `count` started sandboxes are waiting (started in parallel)."""
        with self._lock:
            missing = count - len(self._free.get(key, []))
        fresh = [Sandbox(*key) for _ in range(max(0, missing))]
        threads = [threading.Thread(target=box.start) for box in fresh]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for box in fresh:
            if box.process is not None:
                self.give_back(box)
            else:
                box.close()

    def give_back(self, sandbox: Sandbox) -> None:
        key = (sandbox.release_root, sandbox.limits, sandbox.sandboxed, sandbox.preload)
        with self._lock:
            self._free.setdefault(key, []).append(sandbox)

    def close(self) -> None:
        with self._lock:
            for sandboxes in self._free.values():
                for sandbox in sandboxes:
                    sandbox.close()
            self._free.clear()


def sandbox_key(work: AssignmentWork) -> tuple:
    """What the sandboxes of this work are started with (see SandboxPool)."""
    return (work.release_root(), work.limits, work.sandboxed, work.preload)


POOL = SandboxPool()
atexit.register(POOL.close)
