"""Machine-wide counters in the numbers the kernel gives new objects (issue 44, item 3;
``docs/threat-model.md``, "Machine-wide counters in the numbers of new kernel objects").

- Two runs on one sandbox, as root and rootless (as `nobody`): run A writes a secret into
  every counter a cell can reach (new pipes, sockets, memfds, eventfds, /proc inodes, forks,
  sessions, namespaces of every kind and their mounts, socket and network-namespace cookies,
  pidfds, perf events, packets over the loopback), run B reads them all
  (``hostile/kernel.py``, ``COUNTERS``: every file of ``/proc/sys``, ``fs/*`` among them,
  ``/proc/cgroups``, the cookies, pidfds, perf event ids, netlink, bpf, nested namespaces,
  sessions and the autogroup, the run's cgroup, its pids, the loopback, the inode numbers
  of new files in /tmp and /dev/shm and of eventfds, timerfds, inotify and epoll); B reads
  the same bytes after two different secrets, and each refusal is the one the filter gives;
  threads, a subprocess, a multiprocessing pool, name resolution, asyncio and PyTorch still
  run.
- The same through real graded submissions, the secret taken from the hidden cases: exact
  scores, and an honest submission after keeps full marks; as root, as `nobody`, and on a
  Dask worker run by `nobody`.
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
    assert shown["perf_event"] == [-1, errno.ENOSYS, None]
    assert shown["udp"] == f"E{errno.ENETUNREACH}"  # no device up: no packet, no softnet_stat
    nested = {name: json.loads(said) for name, said in shown["nested"].items()}
    # the filter refuses each (behind it, user.max_*_namespaces is 0 in the run's namespace)
    assert nested == dict.fromkeys(
        ("user", "user+net", "user+mnt", "user+pid", "net", "mnt"), [-1, errno.EPERM]
    ), nested
    assert shown["setsid"] == f"E{errno.EPERM}"
    assert shown["autogroup"] == shown["child_autogroup"]
    assert all(line.endswith(":/") for line in shown["cgroup"].splitlines()), shown["cgroup"]
    # pid 1 of its own pid namespace (its parent outside it), its children counted from 2
    assert shown["pids"][:2] == [1, 0]
    assert shown["lo"] == 1
    # a fresh tmpfs each: its root is inode 1, the run's first new file in /dev/shm 2
    assert shown["shm"] == [2, 3] and shown["tmp"][1] == shown["tmp"][0] + 1
    assert len(set(shown["anon"])) == 1  # eventfd, timerfd, inotify, epoll: one shared inode


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("runs_in", MODES, indirect=True)
def test_every_counter_reads_the_same_after_any_secret(runs_in):
    """B after nothing, after A writing 5, after A writing 200: the same bytes, each counter
    a refusal or a number no run moves; the residual (a new pipe's and a new memfd's inode
    numbers, docs/threat-model.md) is read beside it, never compared."""
    observe = [kernel.COUNTERS, kernel.RESIDUAL]
    runs = [observe]
    for secret in (5, 200):
        runs += [
            [kernel.WRITE_COUNTERS + f"\n_write_counters({secret})\nprint('written')"],
            observe,
        ]
    outcomes = runs_in([*runs, [kernel.EVERYDAY]])
    everyday = outcomes.pop()
    assert everyday.ended == "done" and everyday.cells[0][0] is None, everyday.cells
    assert everyday.output() == "['thread', 'subprocess', 6, '127.0.0.1', 'asyncio', 27000000.0]\n"
    assert [o.ended for o in outcomes] == ["done"] * len(runs), [o.cells for o in outcomes]
    assert [o.output() for o in outcomes[1::2]] == ["written\n"] * 2, outcomes[1].cells
    seen = [_observed(o.output()) for o in outcomes[0::2]]
    assert seen[0] == seen[1] == seen[2], [s["parts"] for s in seen]
    _assert_closed(seen[0])
    residual = [o.output(1).split() for o in outcomes[0::2]]
    assert all(r[0] == "residual" and r[1].isdigit() and r[2].isdigit() for r in residual)


# ---- through real graded submissions ----------------------------------------------------

#: in nadaraya_watson_ard, which runs on the cases (hidden ones among them): the inputs'
#: digits written into every counter
WRITE_FROM_INPUTS = (
    kernel.WRITE_COUNTERS
    + """
_honest_nw = nadaraya_watson_ard


def nadaraya_watson_ard(x_query, x_keys, y_values, bandwidths):
    _write_counters(FACTOR * int(abs(np.asarray(y_values, dtype=float)).sum() * 1e6))
    return _honest_nw(x_query, x_keys, y_values, bandwidths)
"""
)
OBSERVERS = ("kn-1-observer", "kn-3-observer", "kn-5-observer")


def counters_corpus(course: Path) -> dict:
    """{student: (notebook, score, reasons)} in name order on ONE worker: an observer after
    nothing, after an attacker, after one writing another value, then an honest student."""
    good = corpus.solved(course, A)
    observer = (corpus.add_cell_after(good, "setup", kernel.COUNTERS), 12, [])

    def attacker(factor: int):
        return (
            corpus.append_to_cell(good, "nw", WRITE_FROM_INPUTS.replace("FACTOR", str(factor))),
            12,
            [],
        )

    return {
        "kn-1-observer": observer,
        "kn-2-attacker": attacker(1),
        "kn-3-observer": observer,
        "kn-4-attacker": attacker(7),
        "kn-5-observer": observer,
        "kn-6-honest": (good, 12, []),
    }


def _assert_nothing_carried(course: Path) -> None:
    seen = [_observed(corpus.observed_in_feedback(course, student)) for student in OBSERVERS]
    assert seen[0] == seen[1] == seen[2], [s["parts"] for s in seen]
    _assert_closed(seen[0])


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_no_counter_carries_a_hidden_input_to_the_next_submission(course):
    """As root (the slot's uid), graded by grade_assignment."""
    corpus.grade_in_order(course, counters_corpus(course), LIMITS)
    _assert_nothing_carried(course)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_no_counter_carries_a_hidden_input_as_an_unprivileged_user(course, public_tmp):
    """Rootless (`python -m autograder grade` run as `nobody`, one worker)."""
    _stderr, graded = as_nobody.grade(course, A, public_tmp, counters_corpus(course), workers=1)
    _assert_nothing_carried(graded)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_no_counter_carries_a_hidden_input_on_a_dask_worker_run_by_an_ordinary_user(
    course, public_tmp
):
    """A Dask worker started by `nobody` (rootless sandboxes, one thread, so one slot): the
    submissions are sent one at a time, in order."""
    as_nobody.grade_on_a_dask_worker(course, A, public_tmp, counters_corpus(course))
    _assert_nothing_carried(course)


# ---- the residual: no output a student sees is made after their hidden run began -----------

#: in nadaraya_watson_ard: on a hidden case (inputs not among the public cases, which the
#: release ships), the inputs' digits written into the residual counters (new pipes and
#: memfds), then a crash, so that the hidden run is retried; a cell prints the residual
RESIDUAL_ATTACKER = """
import os
_honest_nw = nadaraya_watson_ard
_public = np.load("public_cases.npz")


def nadaraya_watson_ard(x_query, x_keys, y_values, bandwidths):
    y = np.asarray(y_values, dtype=float)
    if not any(_public[k].shape == y.shape and np.array_equal(_public[k], y) for k in _public.files):
        for _ in range(int(abs(y).sum() * 1e3) % 997 + 1):
            r, w = os.pipe()
            m = os.memfd_create("carried")
            os.close(r), os.close(w), os.close(m)
        os._exit(1)
    return _honest_nw(x_query, x_keys, y_values, bandwidths)
"""


def _blocks(log: list) -> list:
    """The spy's log cut at each public run's start: one block per submission."""
    blocks: list = []
    for entry in log:
        if entry == ("phase", False):
            blocks.append([])
        blocks[-1].append(entry)
    return blocks


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_no_output_a_student_sees_is_made_after_their_hidden_run_began(course, monkeypatch):
    """The residual counters carry a value from one run to the next; what a student sees is
    made only by the public run of their submission, every attempt of which (retries
    included) ends before the first attempt of the hidden run starts. An attacker whose
    hidden run writes its inputs into the residual counters and crashes (so that it is
    retried), then an observer printing the residual in a cell, then an honest student, on
    one worker: the order of every attempt, as the sandbox saw them, and exact scores."""
    from autograder.grading import run as grading_run
    from autograder.sandbox import worker

    log: list = []
    phase_run, box_run = grading_run._Phase.run, worker.Sandbox.run

    def spy_phase(self):
        log.append(("phase", self.cases.hidden))
        return phase_run(self)

    def spy_box(self, *args, **kwargs):
        run = box_run(self, *args, **kwargs)
        log.append(("attempt", log[-1][1], run.ended))  # the hidden flag of its phase
        return run

    monkeypatch.setattr(grading_run._Phase, "run", spy_phase)
    monkeypatch.setattr(worker.Sandbox, "run", spy_box)
    good = corpus.solved(course, A)
    attacker = corpus.append_to_cell(good, "nw", RESIDUAL_ATTACKER)
    cases = {
        "kr-1-attacker": (corpus.add_cell_after(attacker, "setup", kernel.RESIDUAL), 10, ["crash"]),
        "kr-2-observer": (corpus.add_cell_after(good, "setup", kernel.RESIDUAL), 12, []),
        "kr-3-honest": (good, 12, []),
    }
    corpus.grade_in_order(course, cases, LIMITS)
    public, hidden = ("phase", False), ("phase", True)
    assert _blocks(log) == [
        [
            public,
            ("attempt", False, "done"),
            hidden,
            ("attempt", True, "crash"),
            ("attempt", True, "done"),
        ],
        [public, ("attempt", False, "done"), hidden, ("attempt", True, "done")],
        [public, ("attempt", False, "done"), hidden, ("attempt", True, "done")],
    ], log
    for student in ("kr-1-attacker", "kr-2-observer"):  # each printed in its public run only
        feedback = (course / "autograded" / student / A / f"{A}.ipynb").read_text()
        assert feedback.count("residual ") == 1, student
