"""No kernel state carries a value from one run to the next, and each run's memory cap is
absolute (grader v5, items 2 and 3 of the fifth round).

- The run's seccomp filter (``isolation.seccomp_program``), checked instruction by
  instruction for x86_64 and aarch64 by a small BPF interpreter.
- A real sandbox, as root (the slot's uid) and rootless (as `nobody`): each probe of the page
  cache (mincore on a mapped /usr file, preadv2 with RWF_NOWAIT, posix_fadvise DONTNEED,
  madvise PAGEOUT, io_uring_setup, cachestat) is refused, each masked /proc file reads as
  its constant, and the run can make no namespace of its own (so none to unmount a mask
  or mount a fresh /proc in); NumPy, PyTorch and matplotlib still run, and ``os.preadv``
  without flags works.
- Two runs on one sandbox: run A writes a secret into every such place (forks, reads some
  /usr files, evicts the others), run B observes everything; B's observation is the same
  after two different secrets. As root and rootless, and through real graded submissions.
- The memory cap: after two attempts that read page cache and crash, a third that holds
  twice the cap is killed at it ("memory"), the next run may hold most of the cap, and the
  next honest submission on the slot gets full marks.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import test_grader_fresh_state  # noqa: E402 - its `delegated` fixture
from hostile import as_nobody, corpus, kernel  # noqa: E402

from autograder import sandbox  # noqa: E402
from autograder.sandbox.protocol import Plan  # noqa: E402
from autograder.student import frames, isolation  # noqa: E402

A = corpus.A
LIMITS = sandbox.Limits(cell_seconds=60, task_seconds=30, submission_seconds=180)
public_tmp = as_nobody.public_tmp  # a folder `nobody` can reach
delegated = test_grader_fresh_state.delegated  # a cgroup delegated to `nobody`

# ---- the filter, instruction by instruction -------------------------------------------

SECCOMP_RET_ERRNO = isolation.SECCOMP_RET_ERRNO


def _bpf(program, nr: int, arch: int, args=(0, 0, 0, 0, 0, 0)) -> int:
    """What a classic-BPF seccomp program returns for one system call (the instructions the
    filter uses: load a word of seccomp_data, JEQ/JGE/JSET against a constant, return)."""
    words = {0: nr, 4: arch}
    for i, value in enumerate(args):
        words[16 + 8 * i] = value & 0xFFFFFFFF
        words[20 + 8 * i] = value >> 32
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        if code == 0x20:
            acc = words[k]
        elif code == 0x15:
            pc += jt if acc == k else jf
        elif code == 0x35:
            pc += jt if acc >= k else jf
        elif code == 0x45:
            pc += jt if acc & k else jf
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"an instruction the filter does not use: {code:#x}")
        pc += 1


@pytest.mark.parametrize("machine", sorted(isolation.SYSCALLS))
def test_the_filter_denies_each_listed_call_and_nothing_else(machine):
    arch, numbers = isolation.SYSCALLS[machine]
    program = isolation.seccomp_program(machine)
    allow = isolation.SECCOMP_RET_ALLOW
    expected = {
        "add_key": errno.EPERM,
        "request_key": errno.EPERM,
        "keyctl": errno.EPERM,
        "mincore": errno.ENOSYS,
        "preadv2": errno.ENOSYS,
        "pwritev2": errno.ENOSYS,
        "io_uring_setup": errno.ENOSYS,
        "io_uring_enter": errno.ENOSYS,
        "io_uring_register": errno.ENOSYS,
        "cachestat": errno.ENOSYS,
        "io_setup": errno.ENOSYS,
        "io_submit": errno.ENOSYS,
        "process_madvise": errno.ENOSYS,
        "readahead": errno.ENOSYS,
        "remap_file_pages": errno.ENOSYS,
        "bpf": errno.ENOSYS,
        "pidfd_open": errno.ENOSYS,
        "clone3": errno.ENOSYS,
        "setsid": errno.EPERM,
        "perf_event_open": errno.ENOSYS,
    }
    for name, code in expected.items():
        assert _bpf(program, numbers[name], arch) == SECCOMP_RET_ERRNO | code, name
    assert numbers["cachestat"] == 451
    # madvise: only the advice that deactivates or reclaims pages (a high word is ignored,
    # as the kernel reads the advice as an int)
    for advice, verdict in ((20, "deny"), (21, "deny"), (4, "allow"), (8, "allow"), (14, "allow")):
        for high in (0, 1 << 32):
            got = _bpf(program, numbers["madvise"], arch, (0, 4096, advice | high))
            want = SECCOMP_RET_ERRNO | errno.EPERM if verdict == "deny" else allow
            assert got == want, (advice, high)
    for advice, verdict in ((4, "deny"), (5, "deny"), (3, "allow"), (2, "allow"), (0, "allow")):
        got = _bpf(program, numbers["fadvise64"], arch, (3, 0, 0, advice))
        assert got == (SECCOMP_RET_ERRNO | errno.EPERM if verdict == "deny" else allow), advice
    # the counters of docs/threat-model.md: cookies, pidfds, netlink (tests/test_kernel_counters.py)
    eperm = SECCOMP_RET_ERRNO | errno.EPERM
    assert _bpf(program, numbers["clone"], arch, (0x1000 | 17,)) == eperm  # CLONE_PIDFD
    for flag in (0x20000, 0x2000000, 0x4000000, 0x8000000, 0x10000000, 0x20000000, 0x40000000):
        assert _bpf(program, numbers["clone"], arch, (flag | 17,)) == eperm, hex(flag)
        assert _bpf(program, numbers["unshare"], arch, (flag,)) == eperm, hex(flag)
    assert _bpf(program, numbers["unshare"], arch, (0x80,)) == eperm  # CLONE_NEWTIME
    assert _bpf(program, numbers["unshare"], arch, (0x200,)) == allow  # CLONE_FILES
    assert _bpf(program, numbers["clone"], arch, (0x01200011,)) == allow  # glibc's fork
    assert _bpf(program, numbers["clone"], arch, (0x3D0F00,)) == allow  # a thread
    assert _bpf(program, numbers["clone"], arch, (0x4111,)) == allow  # vfork, posix_spawn
    for call, option, code in (
        ("getsockopt", 57, errno.ENOPROTOOPT),  # SO_COOKIE
        ("getsockopt", 71, errno.ENOPROTOOPT),  # SO_NETNS_COOKIE
        ("getsockopt", 77, errno.ENOPROTOOPT),  # SO_PEERPIDFD
        ("setsockopt", 76, errno.ENOPROTOOPT),  # SO_PASSPIDFD
        ("getsockopt", 4, None),  # SO_ERROR...
        ("setsockopt", 2, None),  # SO_REUSEADDR...
    ):
        want = allow if code is None else SECCOMP_RET_ERRNO | code
        assert _bpf(program, numbers[call], arch, (3, 1, option)) == want, (call, option)
    assert _bpf(program, numbers["socket"], arch, (16, 3, 4)) == SECCOMP_RET_ERRNO | 97
    for family in (1, 2, 10):  # AF_UNIX, AF_INET, AF_INET6
        assert _bpf(program, numbers["socket"], arch, (family, 1, 0)) == allow, family
    denied = {numbers[name] for name in expected} | {numbers["madvise"], numbers["fadvise64"]}
    denied |= {numbers[n] for n in ("clone", "unshare", "getsockopt", "setsockopt", "socket")}
    for nr in sorted(set(range(0, 460)) - denied):  # everything else passes
        assert _bpf(program, nr, arch, (0, 0, 4, 4, 0, 0)) == allow, nr
    other = next(a for m, (a, _n) in isolation.SYSCALLS.items() if m != machine)
    assert _bpf(program, 0, other) == SECCOMP_RET_ERRNO | errno.EPERM  # another ABI
    assert _bpf(program, 0, 0x40000003) == SECCOMP_RET_ERRNO | errno.EPERM  # i386
    if machine == "x86_64":
        assert _bpf(program, isolation.X32_BIT | 0, arch) == SECCOMP_RET_ERRNO | errno.EPERM


def test_a_masked_file_keeps_its_shape_and_loses_every_value():
    """On this machine's own /proc: the CPU lines stay (glibc counts CPUs by them), every
    number is 0, meminfo keeps its total (all of it free), and the masks are the same
    whatever the machine does between two reads."""
    first = isolation.proc_masks()
    subprocess.run(["true"], check=True)  # a fork and an exec: "processes" moved
    assert isolation.proc_masks() == first
    real = Path("/proc/stat").read_text().splitlines()
    cpus = [line.split()[0] for line in real if line.startswith("cpu")]
    masked = first["stat"].splitlines()
    assert [line.split()[0] for line in masked if line.startswith("cpu")] == cpus
    assert all(set(line.split()[1:]) == {"0"} for line in masked if line.split()[1:])
    assert first["loadavg"] == "0.00 0.00 0.00 0/0 0\n"
    total = next(
        line for line in Path("/proc/meminfo").read_text().splitlines() if "MemTotal" in line
    )
    meminfo = {k: v.split() for k, v in (line.split(":") for line in first["meminfo"].splitlines())}
    assert meminfo["MemTotal"] == meminfo["MemFree"] == meminfo["MemAvailable"] == total.split()[1:]
    assert meminfo["Cached"] == ["0", "kB"]
    assert "locks" in first  # modules, crypto...: where this kernel has them
    assert all(first[name] == "" for name in isolation.PROC_EMPTIED if name in first)
    zeroed = isolation._zeroed("cpu0  12 3.5 sda1 avg10=1.25 x9\n   7\t 8")
    assert zeroed == "cpu0 0 0.00 sda1 avg10=0.00 x9\n 0\t0"


# ---- a real sandbox -----------------------------------------------------------------------


def run_cells(box, cells, seconds=120.0):
    """One attempt of a program with no tasks (as tests/test_grader_units.py runs one)."""
    request = {
        "cells": cells,
        "release_dir": None,
        "skip_cells": [],
        "limits": box.limits.for_child(),
        "workdir": f"/tmp/{secrets.token_hex(8)}",
    }
    cases = frames.encode_frame({"tasks": [], "skip_tasks": []})
    plan = Plan(list(range(len(cells))), [])
    return box.run(request, cases, plan, time.monotonic() + seconds, lambda *a: None)


#: runs each list of cells in turn on ONE sandbox and prints, per run, how it ended and each
#: cell's error and output (JSON): the same runs, started as `nobody` (rootless mode)
RUNNER = """
import json, secrets, sys, time
from autograder import sandbox
from autograder.student import frames
from autograder.sandbox.protocol import Plan

runs = json.load(open(sys.argv[1]))
box = sandbox.Sandbox(None, sandbox.Limits(cell_seconds=60, task_seconds=30))
out = []
try:
    for cells in runs:
        request = {"cells": cells, "release_dir": None, "skip_cells": [],
                   "limits": box.limits.for_child(), "workdir": f"/tmp/{secrets.token_hex(8)}"}
        cases = frames.encode_frame({"tasks": [], "skip_tasks": []})
        run = box.run(request, cases, Plan(list(range(len(cells))), []),
                      time.monotonic() + 120, lambda *a: None)
        out.append({"ended": run.ended, "fresh": box.fresh,
                    "cells": {str(i): [c["error"], c["output"]] for i, c in run.cells.items()}})
finally:
    box.close()
print(json.dumps(out))
"""


class Outcome:
    """How one run ended and its cells' (error, output), in either mode."""

    def __init__(self, ended: str, cells: dict):
        self.ended, self.cells = ended, cells

    def output(self, cell: int = 0) -> str:
        return self.cells[cell][1]


def _as_root(runs: list[list[str]]) -> list[Outcome]:
    box = sandbox.Sandbox(None, sandbox.Limits(cell_seconds=60, task_seconds=30))
    try:
        out = []
        for cells in runs:
            run = run_cells(box, cells)
            assert box.fresh is True
            out.append(
                Outcome(run.ended, {i: (c["error"], c["output"]) for i, c in run.cells.items()})
            )
        return out
    finally:
        box.close()


def _rootless(folder: Path, runs: list[list[str]]) -> list[Outcome]:
    script, data = folder / "runner.py", folder / "runs.json"
    script.write_text(RUNNER)
    data.write_text(json.dumps(runs))
    home = folder / "home"
    home.mkdir(exist_ok=True)
    import pwd

    nobody = pwd.getpwnam("nobody")
    for path in (folder, script, data, home):
        os.chown(path, nobody.pw_uid, nobody.pw_gid)
    command = as_nobody.nobody_command([sys.executable, str(script), str(data)])
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=as_nobody.environment(home, folder),
        cwd=folder,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = []
    for run in json.loads(done.stdout.splitlines()[-1]):
        assert run["fresh"] is True
        out.append(Outcome(run["ended"], {int(i): tuple(c) for i, c in run["cells"].items()}))
    return out


MODES = ["root", "rootless"]


@pytest.fixture
def runs_in(request, bubblewrap, tmp_path):
    """A function: runs -> outcomes, in the mode the test is parametrized with."""
    if request.param == "root":
        return _as_root
    folder = Path(as_nobody.tempfile.mkdtemp(prefix="grader-kernel-", dir="/tmp"))
    folder.chmod(0o755)
    request.addfinalizer(lambda: as_nobody.shutil.rmtree(folder, ignore_errors=True))
    return lambda runs: _rootless(folder, runs)


PROBES = (
    kernel.FILES
    + kernel.NATIVE
    + """
path = _files(1)[0]
fd = os.open(path, os.O_RDONLY)
where = _mapped(fd, 4096)
os.read(fd, 4096)  # the first page is resident now, whatever the probes say
print("mincore", _syscall("mincore", ctypes.c_void_p(where), ctypes.c_size_t(4096), (ctypes.c_ubyte * 1)()))
print("madvise-pageout", _syscall("madvise", ctypes.c_void_p(where), ctypes.c_size_t(4096), 21))
print("madvise-cold", _syscall("madvise", ctypes.c_void_p(where), ctypes.c_size_t(4096), 20))
print("madvise-dontneed", _syscall("madvise", ctypes.c_void_p(where), ctypes.c_size_t(4096), 4))
for advice in ("DONTNEED", "NOREUSE", "WILLNEED", "SEQUENTIAL"):
    try:
        os.posix_fadvise(fd, 0, 0, getattr(os, "POSIX_FADV_" + advice))
        print("fadvise", advice, "ok")
    except OSError as err:
        print("fadvise", advice, err.errno)
try:
    print("preadv2-nowait", os.preadv(fd, [bytearray(16)], 0, os.RWF_NOWAIT))
except OSError as err:
    print("preadv2-nowait", err.errno)
print("preadv", os.preadv(fd, [bytearray(16)], 0) == 16)
print("io_uring", _syscall("io_uring_setup", 8, (ctypes.c_char * 120)()))
print("cachestat", _syscall("cachestat", fd, (ctypes.c_uint64 * 2)(), (ctypes.c_uint64 * 8)(), 0))
print("readahead", _syscall("readahead", fd, 0, 4096))
context = ctypes.c_ulong(0)
print("io_setup", _syscall("io_setup", 1, ctypes.byref(context)))
try:
    pidfd = os.pidfd_open(os.getpid())
except OSError as err:  # a run gets no pidfd (tests/test_kernel_counters.py)
    pidfd = -1
    print("pidfd_open", err.errno)
span = (ctypes.c_void_p * 2)(where, 4096)
print("process_madvise", _syscall("process_madvise", pidfd, span, 1, 21, 0))
import numpy as np, torch
import matplotlib.pyplot as plt
plt.plot([1, 2])
plt.savefig("/tmp/plot.png")
print("libraries", float(np.linalg.inv(np.eye(3) + 1).sum()), torch.ones(3).sum().item(), os.cpu_count() >= 1)
"""
)

ESCAPE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print("umount", libc.umount2(b"/proc/stat", 2), ctypes.get_errno())
read, write = os.pipe()
child = os.fork()
if child == 0:  # a user, mount and pid namespace of its own: full capabilities in them
    os.close(read)
    said = []
    ok = libc.unshare(0x10000000 | 0x00020000 | 0x20000000) == 0
    said.append(f"unshare {ok}")
    if ok:
        said.append(f"umount {libc.umount2(b'/proc/stat', 2)} {ctypes.get_errno()}")
        grandchild = os.fork()
        if grandchild == 0:  # pid 1 of the new pid namespace: mount its /proc
            os.makedirs("/tmp/p", exist_ok=True)
            r = libc.mount(b"proc", b"/tmp/p", b"proc", 0, None)
            os.write(write, f"proc {r} {ctypes.get_errno()}\\n".encode())
            os._exit(0)
        os.waitpid(grandchild, 0)
    os.write(write, ("\\n".join(said) + "\\n").encode())
    os._exit(0)
os.close(write)
os.waitpid(child, 0)
print(os.read(read, 4096).decode().strip())
print("stat", open("/proc/stat").read().split("processes")[1].split()[0])
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("runs_in", MODES, indirect=True)
def test_each_probe_is_refused_and_the_libraries_still_run(runs_in):
    (probe, escape) = runs_in([[PROBES], [ESCAPE]])
    assert probe.ended == "done" and probe.cells[0][0] is None, probe.cells
    said = dict(line.split(" ", 1) for line in probe.output().splitlines())
    assert said["mincore"] == f"[-1, {errno.ENOSYS}]"
    assert said["madvise-pageout"] == said["madvise-cold"] == f"[-1, {errno.EPERM}]"
    assert said["madvise-dontneed"] == "[0, 0]"  # malloc's own advice still works
    fadvise = [
        line.split()[1:] for line in probe.output().splitlines() if line.startswith("fadvise")
    ]
    assert fadvise == [
        ["DONTNEED", "1"],
        ["NOREUSE", "1"],
        ["WILLNEED", "ok"],
        ["SEQUENTIAL", "ok"],
    ]
    assert said["preadv2-nowait"] == str(errno.EOPNOTSUPP)  # glibc: no preadv2, flags refused
    assert said["preadv"] == "True"
    for name in ("io_uring", "cachestat", "readahead", "io_setup", "process_madvise"):
        assert said[name] == f"[-1, {errno.ENOSYS}]", name
    assert said["pidfd_open"] == str(errno.ENOSYS)
    assert said["libraries"] == "0.75 3.0 True"
    assert escape.ended == "done", escape.cells
    lines = escape.output().splitlines()
    assert lines[0] == f"umount -1 {errno.EPERM}"  # no capability left
    # no namespace of its own at all (its user namespace allows none: isolation.
    # no_more_namespaces), so no way under a mask; before, a user namespace was allowed, and in
    # it the masks were locked mounts, and a fresh /proc refused ("too revealing")
    assert lines[1:] == ["unshare False", "stat 0"], lines


def _observations(runs_in, secrets_: tuple[int, int]) -> list[str]:
    """B's observation after nothing, after A(secret 1), after A(secret 2), on one sandbox."""
    observe = [kernel.OBSERVE]
    runs = [observe]
    for secret in secrets_:
        runs += [[kernel.LEAK + f"\n_leak({secret})\nprint('leaked')"], observe]
    outcomes = runs_in(runs)
    assert [o.ended for o in outcomes] == ["done"] * len(runs), [o.cells for o in outcomes]
    assert all(o.output() == "leaked\n" for o in outcomes[1::2]), outcomes[1].cells
    return [o.output() for o in outcomes[0::2]]


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("runs_in", MODES, indirect=True)
def test_what_a_run_observes_is_the_same_after_any_secret(runs_in):
    """Two secrets differing in every bit that matters (the fork count and which of the 64
    files are resident): the observer sees the same bytes after each, and what it sees is the
    masks' constants and the probes' refusals."""
    seen = _observations(runs_in, (0x5555_5555_5555_5555, 0xAAAA_AAAA_AAAA_AAAA + 30))
    assert seen[0] == seen[1] == seen[2], [s[:300] for s in seen]
    observed = json.loads(seen[0].split(" ", 1)[1])
    assert observed["processes"] == "0" and observed["loadavg"] == "0.00 0.00 0.00 0/0 0\n"
    assert observed["irq"] in ([], None) and observed["files"] == 64
    (probes,) = [json.loads(p) for p in observed["residency"]]  # one answer for every file
    mincore, vector, nowait, cachestat, _stat = probes
    assert mincore == [-1, errno.ENOSYS] and vector == [0] * 16
    assert nowait == errno.EOPNOTSUPP and cachestat == [-1, errno.ENOSYS]
    assert observed["io_uring"] == [-1, errno.ENOSYS]


# ---- through real graded submissions ----------------------------------------------------

#: in nadaraya_watson_ard, which runs on the cases (hidden ones among them): the inputs'
#: digits written into every kernel place LEAK knows
LEAK_FROM_INPUTS = (
    kernel.LEAK
    + """
_honest_nw = nadaraya_watson_ard


def nadaraya_watson_ard(x_query, x_keys, y_values, bandwidths):
    _leak(FACTOR * int(abs(np.asarray(y_values, dtype=float)).sum() * 1e6))
    return _honest_nw(x_query, x_keys, y_values, bandwidths)
"""
)
OBSERVERS = ("kc-1-observer", "kc-3-observer", "kc-5-observer")


def kernel_corpus(course: Path) -> dict:
    """{student: (notebook, score, reasons)} in name order on ONE worker: an observer after
    nothing, after an attacker, after one leaking another value, then an honest student."""
    good = corpus.solved(course, A)
    observer = (corpus.add_cell_after(good, "setup", kernel.OBSERVE), 12, [])

    def attacker(factor: int):
        leak = LEAK_FROM_INPUTS.replace("FACTOR", str(factor))
        return (corpus.append_to_cell(good, "nw", leak), 12, [])

    return {
        "kc-1-observer": observer,
        "kc-2-attacker": attacker(1),
        "kc-3-observer": observer,
        "kc-4-attacker": attacker(7),
        "kc-5-observer": observer,
        "kc-6-honest": (good, 12, []),
    }


@pytest.fixture(scope="module")
def course(tmp_path_factory, bubblewrap):
    return corpus.released_course(tmp_path_factory.mktemp("kernel") / "course")


def _assert_nothing_carried(course: Path) -> None:
    seen = [corpus.observed_in_feedback(course, student) for student in OBSERVERS]
    assert seen[0] == seen[1] == seen[2], [s[:300] for s in seen]
    assert json.loads(seen[0].split(" ", 1)[1])["loadavg"] == "0.00 0.00 0.00 0/0 0\n"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_no_kernel_state_carries_a_hidden_input_to_the_next_submission(course):
    """As root (the slot's uid), graded by grade_assignment."""
    corpus.grade_in_order(course, kernel_corpus(course), LIMITS)
    _assert_nothing_carried(course)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_no_kernel_state_carries_a_hidden_input_as_an_unprivileged_user(course, public_tmp):
    """Rootless (`python -m autograder grade` run as `nobody`, one worker)."""
    _stderr, graded = as_nobody.grade(course, A, public_tmp, kernel_corpus(course), workers=1)
    _assert_nothing_carried(graded)


# ---- the memory cap -----------------------------------------------------------------------

CAP = 256 << 20
#: the files of /usr/lib in a fixed order (the same inside the sandbox, where /usr is bound)
USR_WALK = """
import os


def _usr_files():
    for folder, dirs, names in os.walk("/usr/lib"):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(folder, name)
            if os.path.isfile(path) and not os.path.islink(path):
                yield path
"""
#: reads the 300 MiB of that walk that come after its first {skip} MiB into the page cache
#: (charged to whoever reads a page first), then crashes
READ_AND_CRASH = (
    USR_WALK
    + """
seen = 0
for path in _usr_files():
    if seen >= ({skip} + 300) << 20:
        break
    try:
        with open(path, "rb") as handle:
            if seen + os.path.getsize(path) > {skip} << 20:
                while handle.read(1 << 20):
                    pass
            seen += os.path.getsize(path)
    except OSError:
        pass
os._exit(3)
"""
)


def _evict(mib: int) -> None:
    """Drop the first ``mib`` MiB of the walk from the page cache (as on a machine that has not
    read them lately), so that the runs that read them are charged for them."""
    scope: dict = {}
    exec(USR_WALK, scope)
    seen = 0
    for path in scope["_usr_files"]():
        if seen >= mib << 20:
            return
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            seen += os.fstat(fd).st_size
        finally:
            os.close(fd)


#: holds {mib} MiB of System V shared memory, each segment touched and detached (so that no
#: rlimit counts it; the cgroup does)
HOLD = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
for key in range({mib} // 16):
    segment = libc.shmget(5000 + key, 16 << 20, 0o1600)
    address = libc.shmat(segment, None, 0)
    ctypes.memset(ctypes.c_void_p(address), 1, 16 << 20)
    libc.shmdt(ctypes.c_void_p(address))
print("held {mib} MiB")
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_each_runs_memory_cap_is_the_limit_whatever_ran_before(bubblewrap, monkeypatch):
    """On one sandbox (as root, with the slot's cgroups): two runs that fill the page cache
    and crash, then one holding twice the cap (killed at it), one holding 5/8 of it (done),
    twice the cap again (killed). Every run's cgroup is new, its limit the cap exactly.
    Measured here (memory.max_usage_in_bytes of the run's cgroup): a trivial run peaks at 5
    MiB, the 160 MiB one at 165 MiB, so 91 MiB under the cap; 512 MiB is twice it."""
    limits = sandbox.Limits(cell_seconds=60, task_seconds=30, memory_bytes=CAP)
    box = sandbox.Sandbox(None, limits)
    made = []
    fresh_cgroup = box._run_cgroup

    def spy():
        group = fresh_cgroup()
        memory = group.leaves["memory"]
        name = "memory.max" if group.version == 2 else "memory.limit_in_bytes"
        usage = "memory.current" if group.version == 2 else "memory.usage_in_bytes"
        made.append((memory, int((memory / name).read_text()), int((memory / usage).read_text())))
        return group

    monkeypatch.setattr(box, "_run_cgroup", spy)
    try:
        assert box.cgroup is not None, box.cgroup_note
        _evict(600)
        crashes = [READ_AND_CRASH.format(skip=0), READ_AND_CRASH.format(skip=300)]
        runs = [*crashes, HOLD.format(mib=512), HOLD.format(mib=160)]
        ended = [run_cells(box, [cell]) for cell in [*runs, HOLD.format(mib=512)]]
    finally:
        box.close()
    assert [r.ended for r in ended] == ["crash", "crash", "memory", "done", "memory"], [
        (r.ended, r.detail) for r in ended
    ]
    assert ended[3].cells[0]["output"] == "held 160 MiB\n"
    assert [limit for _path, limit, _usage in made] == [CAP] * 5
    assert [usage for _path, _limit, usage in made] == [0] * 5  # nothing charged before
    assert len({path for path, _limit, _usage in made}) == 5
    assert not any(path.exists() for path, _limit, _usage in made)  # each removed after


def memory_corpus(course: Path) -> dict:
    """A submission whose first two extra cells fill the page cache (300 MiB each, evicted
    first by the test) and crash and whose third holds twice the cap, then an honest
    student, on ONE worker. (Grader v4 set the cap to the zygote's usage, re-measured at each
    restart with that page cache in it, plus the limit: the third cell held its 512 MiB.)"""
    good = corpus.solved(course, A)
    ratchet = corpus.add_cell_after(good, "setup", HOLD.format(mib=512))
    ratchet = corpus.add_cell_after(ratchet, "setup", READ_AND_CRASH.format(skip=300))
    ratchet = corpus.add_cell_after(ratchet, "setup", READ_AND_CRASH.format(skip=0))
    return {"mem-1-ratchet": (ratchet, 12, ["crash", "memory"]), "mem-2-honest": (good, 12, [])}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_submission_cannot_ratchet_its_memory_cap(course):
    """`--memory-mb 256`: the third attempt, after two crashed ones, is killed at the cap."""
    limits = sandbox.Limits(cell_seconds=60, task_seconds=30, submission_seconds=240)
    _evict(600)
    corpus.grade_in_order(course, memory_corpus(course), limits.merged({"memory_bytes": CAP}))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_submission_cannot_ratchet_its_memory_cap_as_an_unprivileged_user(
    course, public_tmp, delegated
):
    """Rootless (`nobody`) in a delegated cgroup: the run's cgroup is made inside the
    delegation and the run moves itself in through descriptors `nobody` opened."""
    version, procs_files = delegated
    _evict(600)
    stderr, _graded = as_nobody.grade(
        course,
        A,
        public_tmp,
        memory_corpus(course),
        procs_files=procs_files,
        workers=1,
        options=["--memory-mb", str(CAP >> 20)],
    )
    assert f"limits: cgroup v{version} per sandbox and a fresh one per run" in stderr, stderr


def test_a_runs_cgroup_sits_beside_the_zygotes_on_both_hierarchies(tmp_path, monkeypatch):
    """Laid out in a folder (the kernel's own cgroup v2 is tested by tests/test_cgroups.py
    and this host's v1 by the sandbox tests above): on v2 the slot's cgroup enables its
    controllers for its children, so it holds no process itself; on v1 the child is made in
    each hierarchy. Its cgroup.procs files open for writing; removal goes deepest first."""
    from autograder.sandbox import cgroups

    slot = tmp_path / "v2" / "slot-0"
    slot.mkdir(parents=True)
    (slot / "cgroup.subtree_control").write_text("")
    v2 = cgroups.Cgroup(2, {c: slot for c in ("memory", "pids", "cpu")}, [])
    run = v2.child("run-0")
    assert (slot / "cgroup.subtree_control").read_text() == "+cpu +memory +pids"
    assert run.leaves == {c: slot / "run-0" for c in ("memory", "pids", "cpu")}
    assert run.procs_files == [str(slot / "run-0" / "cgroup.procs")]
    v1_leaves = {c: tmp_path / c / "slot-0" for c in ("memory", "pids", "cpu")}
    for leaf in v1_leaves.values():
        leaf.mkdir(parents=True)
    v1 = cgroups.Cgroup(1, v1_leaves, [])
    zygote, run = v1.child("zygote"), v1.child("run-0")
    assert sorted(run.procs_files) == sorted(
        str(p / "run-0" / "cgroup.procs") for p in v1_leaves.values()
    )
    # a run's first process joins through the v1 `tasks` files (its one thread: no global
    # lock), a v2 cgroup through cgroup.procs
    assert run.join_files == sorted(str(p / "run-0" / "tasks") for p in v1_leaves.values())
    assert v2.child("run-1").join_files == [str(slot / "run-1" / "cgroup.procs")]
    for path in run.join_files:
        Path(path).write_text("")  # the kernel makes it; a folder does not
    fds = run.open_for_joining()
    try:
        assert len(fds) == 3 and all(os.get_inheritable(fd) is False for fd in fds)
        os.write(fds[0], b"0")
    finally:
        for fd in fds:
            os.close(fd)
    assert Path(run.join_files[0]).read_text() == "0"
    (run.leaves["memory"] / "inner").mkdir()
    below = cgroups._below([v1_leaves["memory"]])
    assert below[0] == run.leaves["memory"] / "inner"  # deepest first, as rmdir needs
    assert set(below[1:]) == {run.leaves["memory"], zygote.leaves["memory"]}
    assert zygote.leaves["memory"].parent == v1_leaves["memory"]
