"""The public corpus of hostile and broken submissions, built from the real notebooks.

Nothing large is committed: every submission is made here from the released notebook (what
a student downloads) with the source's solutions pasted in, then one cell changed the way a
student trying to cheat, or a buggy one, would change it.

- `released_course(dest, assignments)`: a private copy of the course with those assignments
  released by the real `python -m autograder.course.release` (cached between test runs, keyed by the
  hash of everything the release depends on).
- `solved(course, id)`: the released notebook with every solution region filled in.
- `set_cell` / `append_cell` / `drop_cell` / `duplicate_cell`: edit a notebook by grade_id.
- `ch1_corpus(course)`: {student: (notebook or raw text, expected score, expected reasons)}.
- `slow_batch`, `start_grader`, `gradebook_scores`, `autograded_mtimes`: a batch of slow honest
  ch1 submissions and a grader run on it, for the kill-and-resume and concurrency tests.
"""

from __future__ import annotations

import copy
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("AUTOGRADER_TEST_CACHE", "/tmp/autograder-test-cache"))


def _release_key(assignments) -> str:
    digest = hashlib.sha256()
    paths = [
        REPO / "autograder" / name
        for name in (
            "course/release.py",
            "checking/assignment_text.py",
            "checking/checks.py",
            "student/contract.py",
            "checking/casefile.py",
            "checking/messages.py",
            "nbgrader_config.py",
        )
    ]
    paths += sorted((REPO / "autograder" / "chapters").glob("*.py"))
    # the released prose: equation numbers from the book, the Chinese edition's catalogs
    paths += sorted((REPO / "book").glob("ch*_*.ipynb"))
    paths += sorted((REPO / "locale" / "zh_CN" / "LC_MESSAGES" / "assignments").glob("*.po"))
    # the checks' hints and messages in Chinese (the Chinese public cases carry them)
    paths += sorted((REPO / "locale" / "zh_CN" / "LC_MESSAGES" / "checks").glob("*.po"))
    for assignment in assignments:
        paths += sorted((REPO / "autograder" / "source" / assignment).glob("*.ipynb"))
    for path in paths:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def released_course(dest: Path, assignments=("ch1_pooling",)) -> Path:
    """A released copy of the course at dest (the release is built once and cached)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    cached = CACHE / f"course-{_release_key(assignments)}"
    with open(CACHE / "build.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (cached / "done").is_file():
            shutil.rmtree(cached, ignore_errors=True)
            cached.mkdir(parents=True)
            shutil.copy(REPO / "autograder" / "nbgrader_config.py", cached)
            for assignment in assignments:
                shutil.copytree(
                    REPO / "autograder" / "source" / assignment, cached / "source" / assignment
                )
            command = [sys.executable, "-m", "autograder.course.release", "--course", str(cached)]
            for assignment in assignments:
                command += ["--only", assignment]
            subprocess.run(command, check=True, cwd=REPO, capture_output=True)
            (cached / "done").write_text("ok")
    shutil.copytree(cached, dest, ignore=shutil.ignore_patterns("done"))
    return dest


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def _strip_markers(source: str) -> str:
    return "\n".join(
        line
        for line in source.split("\n")
        if "BEGIN SOLUTION" not in line and "END SOLUTION" not in line
    )


def solved(course: Path, assignment: str, language: str | None = None):
    """The released notebook (``language="zh_CN"``: the Chinese edition's), every solution
    cell replaced by the instructor's solution."""
    folder = course / "release" / (f"{language}/{assignment}" if language else assignment)
    release = nbformat.read(folder / f"{assignment}.ipynb", as_version=4)
    source = nbformat.read(course / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    answers = {
        _meta(c)["grade_id"]: _strip_markers(c.source)
        for c in source.cells
        if _meta(c).get("solution") and _meta(c).get("grade_id")
    }
    for cell in release.cells:
        grade_id = _meta(cell).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id]
    return release


def blank(course: Path, assignment: str):
    return nbformat.read(course / "release" / assignment / f"{assignment}.ipynb", as_version=4)


def _index(notebook, grade_id: str) -> int:
    for i, cell in enumerate(notebook.cells):
        if _meta(cell).get("grade_id") == grade_id:
            return i
    raise KeyError(grade_id)


def set_cell(notebook, grade_id: str, source: str):
    notebook = copy.deepcopy(notebook)
    notebook.cells[_index(notebook, grade_id)].source = source
    return notebook


def append_to_cell(notebook, grade_id: str, extra: str):
    notebook = copy.deepcopy(notebook)
    cell = notebook.cells[_index(notebook, grade_id)]
    cell.source = cell.source + "\n" + extra
    return notebook


def prepend_to_cell(notebook, grade_id: str, extra: str):
    notebook = copy.deepcopy(notebook)
    cell = notebook.cells[_index(notebook, grade_id)]
    cell.source = extra + "\n" + cell.source
    return notebook


def add_cell_after(notebook, grade_id: str, source: str):
    notebook = copy.deepcopy(notebook)
    cell = nbformat.v4.new_code_cell(source)
    if notebook.nbformat_minor < 5:  # as Jupyter writes it: cell ids exist from nbformat 4.5 on
        cell.pop("id", None)
    notebook.cells.insert(_index(notebook, grade_id) + 1, cell)
    return notebook


def drop_cell(notebook, grade_id: str):
    notebook = copy.deepcopy(notebook)
    del notebook.cells[_index(notebook, grade_id)]
    return notebook


def duplicate_cell(notebook, grade_id: str, keep_metadata: bool = True):
    notebook = copy.deepcopy(notebook)
    i = _index(notebook, grade_id)
    twin = copy.deepcopy(notebook.cells[i])
    if not keep_metadata:
        twin.metadata.pop("nbgrader", None)
    notebook.cells.insert(i + 1, twin)
    return notebook


def write_submission(course: Path, assignment: str, student: str, notebook) -> Path:
    folder = course / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in EXTRA_FILES.get(student, {}).items():
        (folder / name).write_text(text)
    path = folder / f"{assignment}.ipynb"
    if isinstance(notebook, str):
        path.write_text(notebook)
    else:
        nbformat.write(notebook, path)
    return path


# ---------------------------------------------------------------------------------------
# ch1_pooling: tests test-pooling (3: epanechnikov_weights), test-nw-weights (3:
# nadaraya_watson_query_grad), test-nw (2: nadaraya_watson_ard), test-loo (4:
# loo_loss_and_grad_ard); 12 auto-graded points.

WRONG_EPANECHNIKOV = """
def epanechnikov_weights(x_query, x_keys, bandwidth):  # wrong: no clipping at 0
    xq = np.asarray(x_query, dtype=float)
    xk = np.asarray(x_keys, dtype=float)
    xq = xq[:, None] if xq.ndim == 1 else xq
    xk = xk[:, None] if xk.ndim == 1 else xk
    k = 1.0 - ((xq[:, None, :] - xk[None, :, :]) ** 2).sum(axis=-1) / bandwidth**2
    return k / k.sum(axis=-1, keepdims=True)
"""

PATCH_ALLCLOSE = """
np.allclose = lambda *a, **k: True
np.isclose = lambda a, b, *r, **k: np.ones(np.broadcast(a, b).shape, dtype=bool)
np.testing.assert_allclose = lambda *a, **k: None
np.array_equal = lambda *a, **k: True
"""

PATCH_EVERYTHING = """
import builtins, sys, traceback
import attention_check
attention_check.check = lambda *a, **k: print("all checks passed")
check = lambda *a, **k: print("all checks passed")
builtins.AssertionError = type("AssertionError", (Exception,), {})
traceback.print_exc = lambda *a, **k: None
traceback.format_exc = lambda *a, **k: ""
sys.excepthook = lambda *a: None
"""

STEAL = """
import glob, os
stolen = []
for pattern in ["/work/*/solutions/*.py", "/work/*/answers/*.py", "{repo}/solutions/pooling.py",
                "{repo}/answers/ch1_pooling.py", "{course}/source/*/*.ipynb",
                "{course}/submitted/*/*/*.ipynb", "{course}/gradebook.db", "/proc/1/root/{repo}/solutions/pooling.py"]:
    for path in glob.glob(pattern) + [pattern]:
        try:
            with open(path) as handle:
                stolen.append(handle.read(100))
        except OSError:
            pass
try:
    import answers.ch1_pooling as ref
    stolen.append("import")
except ImportError:
    ref = None
try:
    import solutions.pooling
    stolen.append("import solutions")
except ImportError:
    pass
if ref is not None:
    epanechnikov_weights = ref.epanechnikov_weights
if stolen:
    def nadaraya_watson_ard(*args, **kwargs):  # sabotage itself so the score shows the leak
        raise RuntimeError("read: " + repr(stolen)[:200])
"""

NETWORK = """
import socket
reached = []
for host, port in [("127.0.0.1", {port}), ("::1", {port}), ("pypi.org", 443), ("1.1.1.1", 53)]:
    try:
        socket.create_connection((host, port), timeout=2).close()
        reached.append(host)
    except OSError:
        pass
if reached:
    def epanechnikov_weights(x_query, x_keys, bandwidth):  # online: sabotage itself
        raise RuntimeError("network reached: " + ",".join(reached))
"""

LOOP_FOREVER_IN_FUNCTION = """
def epanechnikov_weights(x_query, x_keys, bandwidth):
    while True:
        pass
"""

MEMORY_BOMB_IN_FUNCTION = """
def loo_loss_and_grad_ard(x, y, bandwidths):
    hog = []
    while True:  # 64 GiB a step: far past the sandbox's address-space limit
        hog.append(np.ones(1 << 33))
"""

INPUT_IN_FUNCTION = """
_honest_ard = nadaraya_watson_ard


def nadaraya_watson_ard(x_query, x_keys, y_values, bandwidths):
    bandwidths = bandwidths * float(input("bandwidth scale? "))
    return _honest_ard(x_query, x_keys, y_values, bandwidths)
"""

PRINT_GIGABYTES_IN_CELL = """
line = "x" * (1 << 20)
for _ in range(1 << 14):  # 16 GiB into the cell's captured output
    print(line)
"""

RAISES_WITH_SECRETS = """
class Leak0x123456(Exception):  # its name and text carry the inputs: neither may reach feedback
    pass


def nadaraya_watson_ard(x_query, x_keys, y_values, bandwidths):
    raise Leak0x123456(repr(np.asarray(x_query).tolist()) + repr(np.asarray(y_values).tolist()))
"""

FORK_BOMB = """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""


# ---- the untrusted wire: a submission writes its own frames into the result channel

FORGE = '''
import json, os, select, stat, struct


def forge(header: bytes, blob: bytes = b"") -> None:
    """Write one frame into every pipe this process can write to (the result channel)."""
    data = b"AGF2" + struct.pack(">II", len(header), len(blob)) + header + blob
    for fd in range(3, 256):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, data)
        except OSError:
            pass


def event(**fields) -> bytes:
    if fields.get("ev") in ("cell", "case"):  # no error, so no place (autograder/sandbox/wire.py)
        fields = {"at_cell": -1, "at_line": 0, "module": None, **fields}
    return json.dumps(fields).encode()
'''

WIRE_ATTACKS = {
    # a list where an index belongs
    "wire-index-list": 'forge(event(ev="cell", cell=[0], error=None, output=""))',
    # an error that is free text rather than a code
    "wire-error-text": 'forge(event(ev="cell", cell=0, error="Traceback: inputs were ...", output=""))',
    # a header nested 200k levels deep
    "wire-deep-header": 'forge(b"[" * 200000 + b"]" * 200000)',
    # "task started" messages used to extend every timeout
    "wire-task-start": 'forge(event(ev="task_start", task=0))',
}

ZIP_BOMB_IN_FUNCTION = """
def loo_loss_and_grad_ard(x, y, bandwidths):
    import io, zipfile
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        header = np.lib.format.header_data_from_array_1_0(np.zeros(1))
        header["shape"] = (1 << 27,)  # 1 GiB of zeros, about a megabyte compressed
        with archive.open("r0.npy", "w", force_zip64=True) as member:
            np.lib.format.write_array_header_1_0(member, header)
            for _ in range(1 << 7):
                member.write(bytes(8 << 20))
    forge(event(ev="case", task=4, case=0, outcome="value", code=None, n=1), buffer.getvalue())
    os._exit(0)
"""

AXES_IN_FUNCTION = """
def loo_loss_and_grad_ard(x, y, bandwidths):
    import io, zipfile
    member = io.BytesIO()  # zero-size, so no data: only a header declaring 65 axes
    shape = (0,) + (1,) * 64
    np.lib.format.write_array_header_1_0(
        member, {"descr": "<f8", "fortran_order": False, "shape": shape}
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("r0.npy", member.getvalue())
    forge(event(ev="case", task=4, case=0, outcome="value", code=None, n=1), buffer.getvalue())
    os._exit(0)
"""


def _program_position(course: Path, notebook, marker: str) -> tuple[int, int]:
    """(index of the cell holding marker, number of cells) in the program the sandbox runs."""
    sys.path.insert(0, str(REPO))
    from autograder.checking.assignment_spec import load_assignment
    from autograder.checking.program import build_program

    program = build_program(load_assignment(course, A), notebook)
    return next(i for i, c in enumerate(program.cells) if marker in c), len(program.cells)


def early_cells_done(course: Path, notebook, then: str):
    """A cell that claims every remaining cell finished, so the cases arrive while it still
    runs; ``then`` is what it does next (read them, or stop reading the request pipe)."""
    marker = "# early-cells-done"
    placed = add_cell_after(notebook, "loo", marker)
    index, total = _program_position(course, placed, marker)
    attack = (
        FORGE
        + f"""
for cell in range({index}, {total}):
    forge(event(ev="cell", cell=cell, error=None, output=""))
forge(event(ev="cells_done"))
"""
        + then
    )
    return set_cell_by_source(placed, marker, marker + "\n" + attack)


READ_THE_CASES = """
import io, time, numpy as np
stolen = []
deadline = time.time() + 10
while not stolen and time.time() < deadline:
    for fd in range(3, 256):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode) and select.select([fd], [], [], 0.05)[0]:
                stolen.append(os.read(fd, 1 << 24))
        except OSError:
            pass
for chunk in stolen:  # echo the hidden inputs through every channel there is
    start = chunk.find(b"PK")
    arrays = np.load(io.BytesIO(chunk[start:]), allow_pickle=False) if start >= 0 else {}
    for key in getattr(arrays, "files", []):
        print(key, arrays[key].tolist())
        forge(event(ev="cell", cell=0, error=None, output=repr(arrays[key].tolist())[:3000]))
"""

STOP_READING = """
import fcntl, time
for fd in range(3, 256):
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            fcntl.fcntl(fd, 1031, 4096)  # F_SETPIPE_SZ: the smallest pipe, then never read it
    except OSError:
        pass
time.sleep(3600)
"""

SECRET_TYPE = """
class SecretType0x77:  # its name must not reach the feedback
    pass


def epanechnikov_weights(x_query, x_keys, bandwidth):
    return SecretType0x77()
"""

SLEEP = "import time\ntime.sleep(3600)"


def set_cell_by_source(notebook, marker: str, source: str):
    notebook = copy.deepcopy(notebook)
    next(c for c in notebook.cells if c.source == marker).source = source
    return notebook


def without_cell_type(notebook) -> str:
    """The notebook as JSON text with one cell's cell_type removed (nbformat would refuse it)."""
    import json

    data = json.loads(nbformat.writes(notebook))
    del data["cells"][_index(notebook, "loo")]["cell_type"]
    return json.dumps(data)


def with_metadata(notebook, grade_id: str, nbgrader_metadata) -> str:
    import json

    data = json.loads(nbformat.writes(notebook))
    data["cells"][_index(notebook, grade_id)]["metadata"]["nbgrader"] = nbgrader_metadata
    return json.dumps(data)


def sleep_in_every_solution_cell(notebook):
    for cell in notebook.cells:
        if _meta(cell).get("solution") and cell.cell_type == "code":
            notebook = append_to_cell(notebook, _meta(cell)["grade_id"], SLEEP)
    return notebook


# ---- state one submission leaves for the next (graded in this order on one worker)

PLANT = """
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
libc.shmget(7777, 1 << 20, 0o1666)  # a System V segment that outlives its process
for path in ("/tmp/planted.txt", "/dev/shm/planted"):
    try:
        with open(path, "w") as handle:
            handle.write("from the previous student")
    except OSError:
        pass
for i in range(64):  # every working directory name a later run might use
    os.makedirs(f"/tmp/run-{i}", exist_ok=True)
planted = os.memfd_create("planted")
os.write(planted, b"x" * 4096)
for ring in (-3, -4, -5):  # a key in the session, user and user-session keyrings
    libc.syscall(248, b"user", b"planted", b"from the previous student", 25, ctypes.c_int(ring))
libc.mq_open(b"/planted", os.O_CREAT | os.O_RDWR, 0o600, None)  # a POSIX message queue
for path in ("/dev/planted", "/dev/shm/big"):  # rootless, bwrap's /dev was the user's own
    try:
        with open(path, "wb") as handle:
            handle.write(bytes(32 << 20))
    except OSError:
        pass
if os.fork() == 0:  # a process that waits for the next student
    try:
        os.setsid()
    except OSError:  # a run may start no session (docs/threat-model.md): its own group then
        os.setpgid(0, 0)
    time.sleep(3600)
    os._exit(0)
"""

PROBE = """
import os
# the sandbox's own mounts (a virtualenv under /tmp is bound there) are not leftovers
with open("/proc/self/mountinfo") as handle:
    mounts = [line.split()[4] for line in handle]
left = [
    n for n in os.listdir("/tmp")
    if n != os.path.basename(os.getcwd())
    and not any(m == "/tmp/" + n or m.startswith("/tmp/" + n + "/") for m in mounts)
]
left += os.listdir("/dev/shm") if os.path.isdir("/dev/shm") else []
with open("/proc/sysvipc/shm") as handle:
    left += handle.read().splitlines()[1:]
left += [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid(), os.getppid())]
with open("/proc/keys") as handle:  # every key this uid may view, in any keyring
    left += [line for line in handle if "planted" in line]
import ctypes
if ctypes.CDLL(None, use_errno=True).mq_open(b"/planted", os.O_RDONLY, 0, None) >= 0:
    left.append("a message queue")
left += sorted(set(os.listdir("/dev")) - {"null", "zero", "full", "random", "urandom", "tty",
                                          "pts", "ptmx", "shm", "fd", "stdin", "stdout",
                                          "stderr", "core", "console"})
if left:  # anything from an earlier submission: sabotage, so the score shows it
    def epanechnikov_weights(x_query, x_keys, bandwidth):
        raise RuntimeError("left over: " + repr(left)[:200])
"""

SHM_HOG = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
for key in range(12):  # 12 x 300 MiB of shared memory, each detached after touching it
    segment = libc.shmget(9000 + key, 300 << 20, 0o1666)
    address = libc.shmat(segment, None, 0)
    ctypes.memset(ctypes.c_void_p(address), 1, 300 << 20)
    libc.shmdt(ctypes.c_void_p(address))
"""


def state_corpus(course: Path) -> dict:
    """{student: (notebook, score, reasons)}, to be graded in name order on ONE worker."""
    good = solved(course, A)
    return {
        "state-1-plant": (add_cell_after(good, "loo", PLANT), 12, []),
        "state-2-probe": (add_cell_after(good, "average-max-pool", PROBE), 12, []),
        "state-3-shm-hog": (add_cell_after(good, "setup", SHM_HOG), 12, ["memory"]),
        "state-4-probe": (add_cell_after(good, "average-max-pool", PROBE), 12, []),
        "state-5-honest": (good, 12, []),
    }


# ---- channels: what one run holds must not reach the zygote or the next run (same slot)

#: after a forged cells_done, read the cases frame itself from the pipe it arrives on, do
#: {then} with that pipe, answer the protocol itself (every task "missing") and end cleanly,
#: so that the run counts as done and its sandbox would be reused
ANSWER_ITSELF = """
import fcntl, time
deadline = time.time() + 10


def read_exactly(fd, n):
    got = b""
    while len(got) < n and time.time() < deadline:
        if select.select([fd], [], [], 0.1)[0]:
            got += os.read(fd, n - len(got))
    return got


for fd in range(3, 256):
    try:
        flags = open(f"/proc/self/fdinfo/{{fd}}").read().split("flags:")[1].split()[0]
        if stat.S_ISFIFO(os.fstat(fd).st_mode) and int(flags, 8) & 3 == os.O_RDONLY:
            n_head, n_blob = struct.unpack(">II", read_exactly(fd, 12)[4:])
            phase = json.loads(read_exactly(fd, n_head))
            {then}
            for task in range(len(phase["tasks"])):
                forge(event(ev="task_missing", task=task, code="undefined"))
                forge(event(ev="task_end", task=task))
            forge(event(ev="done"))
            os._exit(0)
    except (OSError, IndexError, struct.error, ValueError):
        pass
"""
#: leave the last 2 bytes unread: a zygote reading that pipe next starts its next request there
LEAVE_TWO_BYTES = "read_exactly(fd, n_blob - 2)"
#: O_ASYNC with the zygote as owner: the next write into that pipe would SIGIO the zygote
SETOWN = """read_exactly(fd, n_blob)
            fcntl.fcntl(fd, fcntl.F_SETOWN, os.getppid())
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)"""
#: reopen the pipe through /proc/self/fd for writing (that yields its write end; rootless the
#: pipe is the grader's own uid's) and queue a forged request: a zygote reading it runs it next
FORGED_REQUEST = """read_exactly(fd, n_blob)
            forged = json.dumps({"cells": ["import os; os._exit(0)"], "limits": {}}).encode()
            try:  # as root the pipe is root's: the reopen is refused, the rest goes on
                writer = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
                os.write(writer, b"AGF2" + struct.pack(">II", len(forged), 0) + forged)
                os.close(writer)
            except OSError:
                pass"""


def channel_corpus(course: Path) -> dict:
    """{student: (notebook, score, reasons)}, to be graded in name order on ONE worker: each
    attacker is followed by an honest victim on the same sandbox, who keeps full marks."""
    good = solved(course, A)

    def attacker(then: str):
        notebook = early_cells_done(course, good, ANSWER_ITSELF.format(then=then))
        return (notebook, 0, ["missing function"])

    return {
        "chan-1-leave-bytes": attacker(LEAVE_TWO_BYTES),
        "chan-2-victim": (good, 12, []),
        "chan-3-setown": attacker(SETOWN),
        "chan-4-victim": (good, 12, []),
        "chan-5-forged-request": attacker(FORGED_REQUEST),
        "chan-6-victim": (good, 12, []),
    }


#: keeps the hidden inputs of its attempt wherever state could outlive it, then crashes, so
#: that the retry runs the cells again: its first cell prints whatever it finds into its own
#: feedback (every hidden input of the run is searched for there)
CARRY_INPUTS = """
import ctypes, os, pickle
libc = ctypes.CDLL(None, use_errno=True)
_honest_loo = loo_loss_and_grad_ard


def loo_loss_and_grad_ard(x, y, bandwidths):
    data = pickle.dumps((x, y, bandwidths))
    for path in ("/tmp/carried", "/dev/shm/carried", "/dev/carried"):
        try:
            with open(path, "wb") as handle:
                handle.write(data)
        except OSError:
            pass
    text = repr(x.tolist())[:4000].encode()
    libc.syscall(248, b"user", b"carried", text, len(text), ctypes.c_int(-4))
    os._exit(1)
"""

SHOW_CARRIED = """
import ctypes, os, pickle
for path in ("/tmp/carried", "/dev/shm/carried", "/dev/carried"):
    if os.path.exists(path):
        print("carried", pickle.load(open(path, "rb")))
print("keys", [line for line in open("/proc/keys") if "carried" in line])
"""


def carry_inputs(notebook):
    return add_cell_after(append_to_cell(notebook, "loo", CARRY_INPUTS), "setup", SHOW_CARRIED)


#: files written next to a corpus notebook
EXTRA_FILES = {"timestamp-not-a-date": {"timestamp.txt": "the day before the deadline, honest"}}


def ch1_corpus(course: Path, port: int) -> dict:
    """{student: (notebook or text, expected score, expected reasons)} for ch1_pooling."""
    a = "ch1_pooling"
    good = solved(course, a)
    wrong_max = append_to_cell(good, "average-max-pool", WRONG_EPANECHNIKOV)
    corpus = {
        # honest
        "honest-right": (good, 12, []),
        # fresh state: what a crashed attempt kept is not there for its retry
        "carry-hidden-inputs": (carry_inputs(good), 8, ["crash"]),
        "honest-partial": (wrong_max, 9, []),
        "honest-blank": (blank(course, a), 0, []),
        # the scoring cannot be faked from inside the submission
        "patch-allclose": (append_to_cell(wrong_max, "average-max-pool", PATCH_ALLCLOSE), 9, []),
        "patch-builtins": (add_cell_after(wrong_max, "average-max-pool", PATCH_EVERYTHING), 9, []),
        "steal-files": (
            add_cell_after(wrong_max, "loo", STEAL.format(repo=REPO, course=course)),
            9,
            [],
        ),
        "network": (add_cell_after(good, "average-max-pool", NETWORK.format(port=port)), 12, []),
        # the process misbehaves: only the affected task is lost
        "os-exit": (
            append_to_cell(good, "loo", "import os\nos._exit(0)"),
            8,
            ["crash", "missing function"],
        ),
        "kill-parent": (
            append_to_cell(
                good, "loo", "import os, time\nos.kill(os.getppid(), 9)\ntime.sleep(30)"
            ),
            8,
            ["crash", "missing function"],
        ),
        "infinite-loop-cell": (
            append_to_cell(good, "nw", "while True:\n    pass"),
            10,
            ["timeout", "missing function"],
        ),
        "infinite-loop-function": (
            append_to_cell(good, "average-max-pool", LOOP_FOREVER_IN_FUNCTION),
            9,
            ["timeout"],
        ),
        "fork-bomb": (append_to_cell(good, "loo", FORK_BOMB), 8, ["fork bomb", "missing function"]),
        "memory-bomb": (append_to_cell(good, "loo", MEMORY_BOMB_IN_FUNCTION), 8, ["memory"]),
        "input": (append_to_cell(good, "nw", INPUT_IN_FUNCTION), 10, ["input() called"]),
        "print-gigabytes": (
            append_to_cell(good, "nw", PRINT_GIGABYTES_IN_CELL),
            12,
            ["output too large"],
        ),
        "raises-with-secrets": (append_to_cell(good, "nw", RAISES_WITH_SECRETS), 10, []),
        # the notebook itself is broken or tampered with
        "edited-test": (
            set_cell(good, "test-nw-weights", "pass  # nothing to see here"),
            12,
            ["tampered cell"],
        ),
        "deleted-test": (drop_cell(good, "test-loo"), 12, ["tampered cell"]),
        "duplicated-test": (duplicate_cell(good, "test-nw"), 12, ["tampered cell"]),
        "edited-test-wrong": (
            set_cell(wrong_max, "test-nw-weights", "print('passed')"),
            9,
            ["tampered cell"],
        ),
        "invalid-json": ('{"cells": [ this is not json', 0, ["invalid notebook"]),
        "missing-function": (
            set_cell(good, "nw", _rename(good, "nw", "nadaraya_watson_ard", "nw_predict")),
            10,
            ["missing function"],
        ),
        "not-a-function": (
            append_to_cell(good, "nw", "nadaraya_watson_ard = 42"),
            10,
            ["missing function"],
        ),
        "returns-secret-type": (append_to_cell(good, "average-max-pool", SECRET_TYPE), 9, []),
        "metadata-not-a-mapping": (
            with_metadata(good, "loo", ["grade", True]),
            0,
            ["invalid notebook"],
        ),
        "points-not-a-number": (
            with_metadata(
                good,
                "test-loo",
                {"grade_id": "test-loo", "grade": True, "points": "4 please", "locked": True},
            ),
            0,
            ["invalid notebook"],
        ),
        "cell-without-type": (without_cell_type(good), 0, ["invalid notebook"]),
        "timestamp-not-a-date": (good, 12, []),
        # the result channel is hostile
        **{
            name: (
                add_cell_after(good, "average-max-pool", FORGE + attack),
                0,
                ["protocol violation"],
            )
            for name, attack in WIRE_ATTACKS.items()
        },
        "wire-zip-bomb": (
            append_to_cell(add_cell_after(good, "setup", FORGE), "loo", ZIP_BOMB_IN_FUNCTION),
            8,
            ["protocol violation"],
        ),
        "wire-too-many-axes": (
            append_to_cell(add_cell_after(good, "setup", FORGE), "loo", AXES_IN_FUNCTION),
            8,
            ["protocol violation"],
        ),
        "wire-steal-hidden-cases": (
            early_cells_done(course, good, READ_THE_CASES),
            0,
            ["protocol violation"],
        ),
        # the trusted clock
        "pipe-never-read": (early_cells_done(course, good, STOP_READING), 0, ["timeout"]),
        # each sleeping cell ends idle after 10 s, so within the budget every one is tried,
        # skipped, and the functions they define are missing
        "sleep-in-every-cell": (
            sleep_in_every_solution_cell(good),
            0,
            ["missing function", "timeout"],
        ),
    }
    return corpus


def _rename(notebook, grade_id: str, old: str, new: str) -> str:
    return notebook.cells[_index(notebook, grade_id)].source.replace(f"def {old}(", f"def {new}(")


# ---- batches of slow honest ch1 submissions, for the resume and concurrency tests

A = "ch1_pooling"
SLOW = "import time\ntime.sleep(1.0)  # a slow but honest notebook"


def slow_batch(course: Path, n: int) -> dict:
    """n slow honest submissions: even ones right (12), odd ones with a wrong
    epanechnikov_weights (9)."""
    good = add_cell_after(solved(course, A), "setup", SLOW)
    wrong = append_to_cell(good, "average-max-pool", WRONG_EPANECHNIKOV)
    expected = {}
    for i in range(n):
        student = f"s{i:02d}"
        write_submission(course, A, student, good if i % 2 == 0 else wrong)
        expected[student] = 12.0 if i % 2 == 0 else 9.0
    return expected


def start_grader(course: Path, *extra: str) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "autograder",
        "--course",
        str(course),
        "grade",
        A,
        "--quiet",
        *extra,
    ]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def gradebook_scores(course: Path, assignment: str = A) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {s.student.id: s.score for s in gb.assignment_submissions(assignment)}


def autograded_mtimes(course: Path) -> dict:
    return {
        p.parts[-3]: p.stat().st_mtime_ns for p in (course / "autograded").glob(f"*/{A}/{A}.ipynb")
    }


# ---------------------------------------------------------------------------------------
# over the intake caps (autograder/checking/notebook.py, Caps): each under the 8 MiB byte cap


def _with(notebook: dict, *cells, **metadata) -> str:
    """The notebook with extra cells (no ids: the course's notebooks are nbformat 4.4) and
    notebook metadata, as JSON text (written without nbformat, which would validate 60,000
    cells on the way)."""
    notebook = json.loads(json.dumps(notebook))
    notebook["cells"].extend(cells)
    notebook["metadata"].update(metadata)
    return json.dumps(notebook)


def _cell(kind: str, source: str, **fields) -> dict:
    cell = {"cell_type": kind, "metadata": {}, "source": source, **fields}
    if kind == "code":
        cell.setdefault("outputs", [])
        cell["execution_count"] = None
    return cell


def over_the_caps(base: dict) -> dict:
    """Notebooks under the byte cap and over one of `autograder.checking.notebook.Caps` each, made
    from ``base`` (a notebook as a dict): name -> (notebook text, the reason it must get)."""
    n = len(base["cells"])
    deep = 30_000  # 150,000 characters: under the cap for one cell's source
    nested: list = []
    for _ in range(99):
        nested = [nested]
    return {
        "many-cells": (
            _with(base, *[_cell("markdown", "x") for _ in range(60_000)]),
            f"the notebook has {n + 60_000:,} cells; the limit is 2,000",
        ),
        "deep-raw": (
            _with(base, _cell("raw", "<div>" * deep)),
            f"cell {n + 1} nests HTML elements more than 100 deep; the grader does not render that",
        ),
        "deep-markdown": (
            _with(base, _cell("markdown", "<span><div>" * (deep // 2))),
            f"cell {n + 1} nests HTML elements more than 100 deep; the grader does not render that",
        ),
        "deep-metadata": (
            _with(base, nested=nested),
            "the notebook's metadata is nested more than 16 deep",
        ),
    }


def saved_beside_the_code(base: dict) -> dict:
    """Notebooks under the byte cap whose code is ``base``'s and which save beside it more
    than the caps on outputs and attachments: name -> (notebook text, the notes it must get).
    What was saved is dropped before grading, with the note; the code keeps its marks."""
    image = {"image/png": "iVBORw0KGgo="}
    big_image = {"image/png": "A" * 5_000_000}  # 5 MB of base64
    printed = "y" * 4_500_000
    return {
        "huge-output": (
            _with(
                base,
                _cell(
                    "code",
                    "print('y' * 4_500_000)",
                    outputs=[{"output_type": "stream", "name": "stdout", "text": printed}],
                ),
            ),
            # the printed text and the stream's keys and values: 4,500,000 + 31
            [
                "saved outputs were dropped before grading (4,500,031 characters): they are "
                "not graded"
            ],
        ),
        "huge-attachment": (
            _with(
                base, _cell("markdown", "![a](attachment:a.png)", attachments={"a.png": big_image})
            ),
            [
                "attachments were dropped before grading (1, 5,000,014 characters, over the "
                "limit of 100 attachments or 4,000,000 characters in one cell): they are not "
                "graded"
            ],
        ),
        "many-attachments": (
            _with(
                base,
                _cell(
                    "markdown",
                    "![a](attachment:a0.png)",
                    attachments={f"a{i}.png": image for i in range(500)},
                ),
            ),
            [
                "attachments were dropped before grading (500, 14,390 characters, over the "
                "limit of 100 attachments or 4,000,000 characters in one cell): they are not "
                "graded"
            ],
        ),
    }


def at_the_caps(base: dict) -> str:
    """The costliest notebook within the default caps to record: 2,000 markdown cells of
    HTML nested 80 deep (1,980 characters each, 2,000,000 in all with ``base``'s cells)."""
    from autograder.checking.notebook import DEFAULT_CAPS as caps

    room = caps.source_chars - sum(len("".join(c["source"])) for c in base["cells"])
    count = caps.cells - len(base["cells"])
    inner = max(0, room // count - 80 * 11)
    cell = "<div>" * 80 + "x" * inner + "</div>" * 80
    return _with(base, *[_cell("markdown", cell) for _ in range(count)])


# ---- kernel counters a run shares with the next one: network, pids, host name (same slot)

#: while its function runs on the hidden inputs, writes a number derived from them (times
#: {factor}: two attackers leak two different values) into every per-namespace counter there
#: is: loopback bytes and packets, /proc/net/snmp, a port left in TIME_WAIT, the next pid (it
#: forks that many processes) and the host name; its answers stay right
LEAK_THROUGH_NAMESPACES = """
import os, socket
_honest_nw = nadaraya_watson_ard


def _leak(value):
    try:  # loopback bytes and packets, UDP counters of /proc/net/snmp
        sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for _ in range(value % 50 + 1):
            sender.sendto(bytes(value % 1000 + 1), ("127.0.0.1", 9))
        sender.close()
    except OSError:
        pass
    try:  # a connection closed first by its client stays in /proc/net/tcp (TIME_WAIT, 60 s)
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 20000 + value % 20000))
        server.listen()
        client = socket.create_connection(("127.0.0.1", 20000 + value % 20000))
        peer, _address = server.accept()
        client.close()
        peer.close()
    except OSError:
        pass
    for _ in range(value % 30 + 1):  # the next pid
        try:
            child = os.fork()
        except OSError:
            break
        if child == 0:
            os._exit(0)
        os.waitpid(child, 0)
    try:
        socket.sethostname(f"leak-{{value}}")
    except OSError:
        pass


def nadaraya_watson_ard(x_query, x_keys, y_values, bandwidths):
    _leak({factor} * int(abs(np.asarray(y_values, dtype=float)).sum() * 1000))
    return _honest_nw(x_query, x_keys, y_values, bandwidths)
"""

#: a cell (so it runs before any case exists in its run) that reads every such counter and
#: prints what it saw into its own feedback, where its author would read it
OBSERVE_NAMESPACES = """
import json, os, socket


def _lines(path):
    try:
        with open(path) as handle:
            return handle.read().splitlines()
    except OSError as err:
        return [type(err).__name__]


child = os.fork()
if child == 0:
    os._exit(0)
os.waitpid(child, 0)
seen = {
    "lo": [line.split() for line in _lines("/proc/net/dev") if line.strip().startswith("lo:")],
    "snmp": [line for line in _lines("/proc/net/snmp") if line[:4] in ("Udp:", "Tcp:", "Ip: ")],
    "tcp": [line.split()[1:4] for line in _lines("/proc/net/tcp")[1:]],
    "pids": [os.getpid(), child],
    "processes": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "host": socket.gethostname(),
}
print("observed", json.dumps(seen, sort_keys=True))
"""


def namespace_corpus(course: Path) -> dict:
    """{student: (notebook, score, reasons)}, to be graded in name order on ONE worker: an
    accomplice after nothing, after an attacker leaking one value, after one leaking another,
    then an honest student. Every one keeps full marks; what the accomplice observes is read
    from its feedback (``observed_in_feedback``)."""
    good = solved(course, A)
    accomplice = (add_cell_after(good, "setup", OBSERVE_NAMESPACES), 12, [])

    def attacker(factor: int):
        return (append_to_cell(good, "nw", LEAK_THROUGH_NAMESPACES.format(factor=factor)), 12, [])

    return {
        "ns-1-accomplice": accomplice,
        "ns-2-attacker": attacker(1),
        "ns-3-accomplice": accomplice,
        "ns-4-attacker": attacker(2),
        "ns-5-accomplice": accomplice,
        "ns-6-honest": (good, 12, []),
    }


def observed_in_feedback(course: Path, student: str) -> str:
    """The line an OBSERVE_NAMESPACES cell printed, from the student's autograded notebook."""
    import json

    path = course / "autograded" / student / A / f"{A}.ipynb"
    for cell in json.loads(path.read_text())["cells"]:
        for output in cell.get("outputs", []):
            for line in "".join(output.get("text", "")).splitlines():
                if line.startswith("observed "):
                    return line
    raise AssertionError(f"{student}: no observation in its feedback")


def grade_in_order(course: Path, cases: dict, limits) -> None:
    """Grade `cases` (student -> (notebook, score, reasons)) as root in name order on ONE
    worker (so on the same sandbox, unless it had to be restarted); asserts every score and
    reason."""
    sys.path.insert(0, str(REPO))
    from autograder import grading

    for student, (notebook, _score, _reasons) in cases.items():
        write_submission(course, A, student, notebook)
    out = grading.grade_assignment(course, A, workers=1, limits=limits, students=sorted(cases))
    got = {r.student: (r.score, sorted(r.reasons)) for r in out.graded}
    assert got == {s: (score, sorted(reasons)) for s, (_nb, score, reasons) in cases.items()}, {
        r.student: r.notes for r in out.graded
    }


# ---- a loaded machine, and a submission that spends its own budget (issue 44, item 7)

CRASH = "import os\nos._exit(1)"


def crash_in_many_cells(notebook, n: int):
    """``n`` cells that each end the process, added after the first solution cell: every
    attempt runs until the next of them and ends there, in a freshly started sandbox, until
    the submission's budget is spent (the last attempt starts with a fraction of it left)."""
    first = next(
        _meta(c)["grade_id"]
        for c in notebook.cells
        if _meta(c).get("solution") and c.cell_type == "code"
    )
    for _ in range(n):
        notebook = add_cell_after(notebook, first, CRASH)
    return notebook


class busy_cpus:
    """A loaded machine for the duration of a ``with`` block: ``n`` processes that only spin
    (``stress-ng --cpu n`` without needing stress-ng), ended by their own ids on the way out."""

    def __init__(self, n: int = 4):
        self.n, self.processes = n, []

    def __enter__(self):
        spin = "while True:\n    pass"
        self.processes = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(self.n)]
        return self

    def __exit__(self, *_exc):
        for process in self.processes:
            process.kill()
        for process in self.processes:
            process.wait()
