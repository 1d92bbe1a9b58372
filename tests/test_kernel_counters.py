"""Machine-wide counters in the numbers the kernel gives new objects (issue 44, item 3;
``docs/threat-model.md``, "Machine-wide counters in the numbers of new kernel objects").

- Two runs on one sandbox, as root and rootless (as `nobody`): run A writes a secret into
  every counter a cell can reach (new pipes, sockets, memfds, eventfds, /proc inodes, forks,
  sessions, namespaces of every kind and their mounts, socket and network-namespace cookies,
  pidfds), run B reads them all (``hostile/kernel.py``, ``COUNTERS``: ``/proc/sys/fs``,
  ``/proc/cgroups``, the cookies, pidfds, netlink, bpf, nested namespaces, sessions and the
  autogroup, the run's cgroup, its pids, the loopback's index, the inode numbers of new
  files in /tmp and /dev/shm and of eventfds, timerfds, inotify and epoll); B reads the same
  bytes after two different secrets, and each refusal is the one the filter gives.
- The same through real graded submissions, the secret taken from the hidden cases: exact
  scores, and an honest submission after keeps full marks.
- The residual (the inode numbers of new pipes, sockets and memfds, which no namespace
  resets and the run cannot be kept from reading): a submission's hidden run comes after
  every attempt of its public run, retries included, so no output a student sees is made
  after a hidden input of theirs existed on the machine; another student's hidden inputs
  are another student's (tests/test_grader_hidden_split.py).
"""

from __future__ import annotations

import errno
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import test_kernel_channels  # noqa: E402 - its runs_in fixture, its course
from hostile import as_nobody, corpus, kernel  # noqa: E402

A = corpus.A
LIMITS = test_kernel_channels.LIMITS
MODES = test_kernel_channels.MODES
runs_in = test_kernel_channels.runs_in  # root or rootless, one sandbox
course = test_kernel_channels.course
public_tmp = as_nobody.public_tmp


def _observed(text: str) -> dict:
    (line,) = [line for line in text.splitlines() if line.startswith("observed ")]
    return json.loads(line.split(" ", 1)[1])


def _assert_closed(observed: dict) -> None:
    """What each counter B reads is: a refusal, or a number no run moves."""
    shown = observed["shown"]
    enoprotoopt, eafnosupport = f"E{errno.ENOPROTOOPT}", f"E{errno.EAFNOSUPPORT}"
    assert shown["so_cookie"] == shown["so_cookie_tcp"] == enoprotoopt
    assert shown["netns_cookie"] == shown["peer_pidfd"] == enoprotoopt
    assert shown["netlink"] == eafnosupport
    for call in ("bpf", "pidfd_open", "clone3"):
        assert shown[call] == [-1, errno.ENOSYS], call
    nested = {name: json.loads(said) for name, said in shown["nested"].items()}
    assert nested == {
        "user": [-1, errno.ENOSPC],  # user.max_user_namespaces is 0 in the run's namespace
        "user+net": [-1, errno.ENOSPC],
        "user+mnt": [-1, errno.ENOSPC],
        "user+pid": [-1, errno.ENOSPC],
        "net": [-1, errno.EPERM],  # and the run holds no capability
        "mnt": [-1, errno.EPERM],
    }, nested
    assert shown["setsid"] == f"E{errno.EPERM}"
    assert shown["autogroup"] == shown["child_autogroup"]
    assert all(line.endswith(":/") for line in shown["cgroup"].splitlines()), shown["cgroup"]
    assert shown["pids"][:2] == [1, 0]  # pid 1 of its own pid namespace; its children count on from 2
    assert shown["lo"] == 1
    # a fresh tmpfs each: its root is inode 1, the run's first new file in /dev/shm 2
    assert shown["shm"] == [2, 3] and shown["tmp"][1] == shown["tmp"][0] + 1
    assert len(set(shown["anon"])) == 1  # eventfd, timerfd, inotify, epoll: one shared inode


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("runs_in", MODES, indirect=True)
def test_every_counter_reads_the_same_after_any_secret(runs_in):
    observe = [kernel.COUNTERS, kernel.RESIDUAL]
    runs = [observe]
    for secret in (5, 200):
        runs += [[kernel.WRITE_COUNTERS + f"\n_write_counters({secret})\nprint('written')"], observe]
    outcomes = runs_in(runs)
    assert [o.ended for o in outcomes] == ["done"] * len(runs), [o.cells for o in outcomes]
    assert [o.output() for o in outcomes[1::2]] == ["written\n"] * 2, outcomes[1].cells
    seen = [_observed(o.output()) for o in outcomes[0::2]]
    assert seen[0] == seen[1] == seen[2], [s["parts"] for s in seen]
    _assert_closed(seen[0])
    residual = [o.output(1).split() for o in outcomes[0::2]]
    assert all(r[0] == "residual" and r[1].isdigit() and r[2].isdigit() for r in residual)
    print("residual (pipe, memfd inode numbers):", [r[1:] for r in residual])
