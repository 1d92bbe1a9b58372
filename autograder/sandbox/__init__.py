"""The trusted side of the sandbox: start a sandboxed worker, send it work, enforce wall time.

One concern per module:

- `limits`: `Limits`, every resource limit of a submission in one place (memory, CPU,
  processes, file size, wall time per cell and per task, output sizes), and `DEFAULT_LIMITS`.
- `python`: the interpreter and site-packages a sandbox binds, and what its zygote preloads
  (`preload_for`, `FULL_PRELOAD`).
- `host`: what this machine allows (bubblewrap, root or user namespaces, a fresh state per
  run: `require_sandbox`, `fresh_state_works`, `describe_mode`).
- `command`: the bubblewrap command line, built from small named parts, and `IN_SANDBOX`,
  the grader's only modules inside the sandbox.
- `slots`: a worker slot (a lock file) and its unprivileged uid; stray processes of free slots.
- `processes`: the process table (a slot uid's processes, a sandbox's tree and CPU time).
- `worker`: `Sandbox`, the handle of one long-lived zygote (`autograder/student/zygote.py`) per slot:
  start it, send it a run on pipes of the run's own, read the events, kill it; put together
  from `slot_cgroup` (the slot's cgroups: the zygote's leaf, each run's fresh one, the leak
  check), `zygote_process` (the zygote's process and control channel: start, ready, kill)
  and `attempt` (one run driven to its end against the trusted clock).
- `cgroups`: kernel-enforced limits, one cgroup per worker slot in the grader's subtree.
- `budgets`: each chapter's wall-clock budgets, derived from its reference time, and
  layered under the chapter's own limits and the command line's.
- `protocol`: the event protocol of one run: which event may come next, each step's
  budget.
- `wire`: every byte the sandbox sends back, parsed against a strict schema.

The names the grader, the tests and the benches use are importable from here.
"""

from __future__ import annotations

from autograder.sandbox.command import reachable_command, sandbox_command
from autograder.sandbox.host import (
    SandboxUnavailable,
    describe_mode,
    find_bwrap,
    fresh_state_works,
    require_sandbox,
)
from autograder.sandbox.limits import DEFAULT_LIMITS, Limits
from autograder.sandbox.processes import descendants
from autograder.sandbox.python import FULL_PRELOAD, preload_for
from autograder.sandbox.slots import FIRST_UID, stray_processes
from autograder.sandbox.worker import Sandbox

__all__ = [
    "DEFAULT_LIMITS",
    "FIRST_UID",
    "FULL_PRELOAD",
    "Limits",
    "Sandbox",
    "SandboxUnavailable",
    "descendants",
    "describe_mode",
    "find_bwrap",
    "fresh_state_works",
    "preload_for",
    "reachable_command",
    "require_sandbox",
    "sandbox_command",
    "stray_processes",
]
