"""The sandbox worker: besides the notebook, the only code that runs inside the grader's sandbox.

It is bound read-only into the sandbox beside ``contract.py`` (whose codec and case runner it
uses), ``frames.py`` (the frame format) and ``isolation.py``
(``autograder.sandbox.command.IN_SANDBOX``), and is never shipped to students.

- ``zygote``: one per sandbox, started as ``python -I -S zygote.py``. It imports NumPy (and
  PyTorch where the notebook does) once, then waits on its control socket, the one channel it
  reads. A run arrives there as one small message (a nonce, the working directory) carrying
  two descriptors made for that run alone (SCM_RIGHTS): the write end of the run's event
  pipe and the read end of its input pipe; where the grader has cgroups, also the files
  that move a process into the run's own cgroup (one per hierarchy: ``Cgroup.join_files``),
  opened by the trusted side, into which the child writes itself first (``_join_cgroup``).
- The child forked for a run closes the control socket before anything else and keeps only
  its run's two descriptors: nothing a submission holds is read again, by the zygote or the
  trusted side, once its run is over (``docs/threat-model.md``, "Per-run channels").
- ``run_submission``: in the child, the request (cells, limits) and later the cases, both read
  from the run's input pipe; every event goes to the run's event pipe. The order of events is
  ``autograder/sandbox/protocol.py``'s.
- The child builds the run's fresh state (``isolation.enter_fresh_state``: its own user, IPC,
  mount, network, UTS and, where the kernel allows a fresh /proc here, pid namespace, in which
  the submission runs as pid 1).
- After the child: every process left in the sandbox is killed and reaped; emptying /tmp,
  /dev/shm and System V IPC is a second line. The zygote then reports
  ``{"ev": "exit", "run": nonce, "code": status, "clean": bool}`` on the control socket.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import os
import signal
import socket
import sys
import time

if __name__ == "__main__":  # in the sandbox (python -I -S): the site-packages come as arguments
    sys.path.extend(a for a in sys.argv[1 : sys.argv.index("--")] if a.startswith("/"))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import contract  # noqa: I001 - the copies bound beside this file
    import frames
    import isolation
else:
    from autograder.student import contract, frames, isolation

import numpy as np  # noqa: E402 - after the sandbox's site-packages are on the path

#: the one message the trusted side sends per run, besides its descriptors (two, and "cgroups")
RUN_FIELDS = {"run": str, "workdir": str, "tmp_bytes": int, "cgroups": int}
MAX_CGROUPS = 3  # cgroup v1: memory, pids and cpu hierarchies; v2: one
#: the child's exit status when it could not build its fresh state (before any student code)
NO_FRESH_STATE = 71
#: the child's exit status when it could not move into its run's cgroup (idem)
NO_CGROUP = 72
#: ignored by the zygote (SIGPIPE is already, as in any Python process), default in the child
RESET_SIGNALS = ("SIGIO", "SIGURG", "SIGHUP", "SIGTTIN", "SIGTTOU")


def error_code(err: BaseException) -> str:
    """The contract's name for an error, and ``frames.FILE_TOO_LARGE`` for a full file or
    disk (EFBIG, ENOSPC): the sandbox's output limit, which only a sandboxed run meets."""
    if isinstance(err, OSError) and err.errno in frames.FULL_FILE_ERRNOS:
        return frames.FILE_TOO_LARGE
    return contract.error_code(err)


def run_case(function, args, kwargs, cells: int) -> contract.Outcome:
    """``contract.run_case``, where a KeyboardInterrupt is only something the function raised
    (no one at a keyboard) and a full file is the output limit; an error's outcome as it
    leaves the sandbox: where it was raised (`error_place`, in a program of ``cells`` cells)
    in place of the exception object, which holds the student's values."""
    try:
        outcome = contract.run_case(function, args, kwargs)
    except KeyboardInterrupt as err:
        outcome = contract.Outcome("error", exception=err)
    if outcome.kind != "error":
        return outcome
    err = outcome.exception
    place = dict(zip(PLACE_FIELDS, error_place(err, cells)))
    return dataclasses.replace(outcome, code=error_code(err), exception=None, **place)


#: a callee's table (``answering``) holds no argument of any call, only answers, each sealed
#: with a key made from the call's arguments: a float is rounded to CALL_BITS significant bits
#: (0 below CALL_FLOOR), so an array a few ulps away from the reference caller's gives the same
#: key; where a value is within CALL_RTOL (relative) + CALL_ATOL of a rounding edge, both
#: roundings are tried, at most MAX_CALL_KEYS keys per call
CALL_BITS = 12
CALL_FLOOR = 2.0**-20
CALL_RTOL, CALL_ATOL = 1e-9, 1e-12
MAX_CALL_KEYS = 256


def _grid(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        mantissa, exponent = np.frexp(x)
        q = np.ldexp(np.rint(np.ldexp(mantissa, CALL_BITS)), exponent - CALL_BITS)
        q = np.where(np.abs(x) < CALL_FLOOR, 0.0, q) + 0.0  # + 0.0: no -0.0
        return np.where(np.isnan(x), np.nan, q)


def _digest(*parts: bytes) -> bytes:
    return hashlib.sha256(b"\0".join(parts)).digest()


def argument_keys(value, spread: bool) -> list[bytes]:
    """One argument of a call as the callee tables key it: a digest of its rounded values
    (numbers and arrays, any numeric dtype, as float64, with the shape), of None, a bool or a
    string; ``spread``: every digest a value within the tolerance of this one may have (the
    sandbox's side), else the one of this value (the trusted side's). [] for any other value
    (no key: the call is not answered)."""
    try:
        if value is None:
            return [_digest(b"none")]
        if isinstance(value, (bool, np.bool_)):
            return [_digest(b"bool", b"1" if value else b"0")]
        if isinstance(value, str):
            return [_digest(b"str", value.encode("utf-8", "surrogatepass"))]
        x = np.asarray(value)
        if x.dtype.kind not in "biuf":
            return []
        x = x.astype(np.float64)
        head = b"num" + repr(x.shape).encode()
        if not spread:
            return [_digest(head, _grid(x).tobytes())]
        with np.errstate(all="ignore"):
            width = np.where(np.isfinite(x), CALL_RTOL * np.abs(x) + CALL_ATOL, 0.0)
            low, high = _grid(x - width), _grid(x + width)
        edges = np.flatnonzero((low != high) & ~np.isnan(x))
        if 1 << min(len(edges), 63) > MAX_CALL_KEYS:
            return []
        keys = []
        for choice in itertools.product((False, True), repeat=len(edges)):
            q = np.array(low)
            q.flat[edges[list(choice)]] = high.flat[edges[list(choice)]]
            keys.append(_digest(head, q.tobytes()))
        return keys
    except Exception:  # noqa: BLE001 - a value that does not convert has no key
        return []


def call_keys(name: str, params, given: dict, spread: bool) -> list[bytes]:
    """The keys of a call to the callee ``name`` (``given``: its arguments by parameter name,
    defaults applied; ``argument_keys``): [] where a parameter is missing or has no key, or
    where they would be more than MAX_CALL_KEYS."""
    per = []
    for param in params:
        keys = argument_keys(given[param], spread) if param in given else []
        if not keys:
            return []
        per.append(keys)
    if math.prod(len(keys) for keys in per) > MAX_CALL_KEYS:
        return []
    head = b"callee\0" + name.encode()
    return [_digest(head, *keys) for keys in itertools.product(*per)]


def answer_id(key: bytes) -> str:
    """Where a callee table files the answer sealed with ``key``."""
    return hashlib.sha256(b"answer id\0" + key).hexdigest()[:32]


def _stream(key: bytes, n: int) -> np.ndarray:
    return np.frombuffer(hashlib.shake_256(b"answer key\0" + key).digest(n), np.uint8)


def seal(key: bytes, plain: bytes) -> np.ndarray:
    """``plain`` sealed with ``key`` (``unseal`` opens it): an array of bytes."""
    return np.frombuffer(plain, np.uint8) ^ _stream(key, len(plain))


def unseal(key: bytes, sealed: np.ndarray) -> bytes:
    sealed = np.asarray(sealed, dtype=np.uint8).ravel()
    return (sealed ^ _stream(key, sealed.size)).tobytes()


def answer_value(plain: bytes):
    """An answer as a table seals it (``grading.callees.answer_bytes``: the length of a JSON
    header, the header, a ``.npz`` of its arrays), every array a fresh one."""
    n = int.from_bytes(plain[:4], "big")
    meta, arrays = json.loads(plain[4 : 4 + n]), contract.unpack(plain[4 + n :])
    parts = tuple(contract.fresh(contract.value(spec, arrays)) for spec in meta["parts"])
    return parts if meta["tuple"] else parts[0]


def answering(own, table: dict, arrays: dict):
    """The callee ``own`` of a caller being graded on hidden cases, answering a call the
    reference caller makes on the case with the reference callee's answer (``table``, made on
    the trusted side, ``autograder.grading.callees``: the callee's parameter names and
    defaults, and its answers, each sealed with the key of its call's arguments,
    ``call_keys``); any other call goes to ``own``. The table holds no argument of any call:
    an answer opens only to the call it answers, so the caller learns only what calling
    gives, and a caller whose only fault is its callee's is scored on its own work."""
    name, params = table["name"], list(table["params"])
    defaults = {k: contract.value(s, arrays) for k, s in table["defaults"].items()}
    sealed = {i: contract.value(s, arrays) for i, s in table["answers"].items()}

    def callee(*args, **kwargs):
        given = dict(zip(params, args))
        if len(args) <= len(params) and not set(given) & set(kwargs) and set(kwargs) <= set(params):
            given.update(kwargs)
            for param in params:
                if param not in given and param in defaults:
                    given[param] = defaults[param]
            for key in call_keys(name, params, given, spread=True):
                found = sealed.get(answer_id(key))
                if found is not None:
                    return answer_value(unseal(key, found))
        if own is None:
            raise NameError(f"name {name!r} is not defined")
        return own(*args, **kwargs)

    return callee


def run_answered(
    namespace: dict, function, args, kwargs, tables: dict, arrays, cells: int
) -> contract.Outcome:
    """``run_case`` with each callee named in ``tables`` answering its reference calls
    (``answering``): in the hidden run only (the public run is sent no table)."""
    saved = {name: namespace.get(name) for name in tables}
    try:
        for name, table in tables.items():
            namespace[name] = answering(saved[name], table, arrays)
        return run_case(function, args, kwargs, cells)
    finally:
        for name, own in saved.items():
            if own is None:
                namespace.pop(name, None)
            else:
                namespace[name] = own


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("pipe closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> tuple[dict, bytes]:
    """A frame from the trusted side (requests and cases), read to its last byte only."""
    return frames.read_frame(lambda n: _read_exact(fd, n))


#: the modules a student plausibly imports: a failed import of one is named in its message,
#: any other is "a module not installed here" (the name is the submission's choice)
KNOWN_MODULES = frozenset(
    (
        "numpy torch matplotlib scipy pandas sklearn seaborn tensorflow keras jax einops tqdm "
        "IPython PIL cv2 statsmodels sympy numba transformers torchvision torchtext d2l mxnet "
        "plotly ipywidgets networkx solutions answers autograder attention_check google"
    ).split()
)
#: the bound on a program cell's index and on a line number the sandbox reports (the trusted
#: side checks both again against the program): more than any notebook within the intake
#: caps holds (2,000 cells, 200,000 characters in one)
MAX_PLACE = 1 << 20
#: an error event's place: `error_place`'s three values, the fields of a ``contract.Outcome``
PLACE_FIELDS = ("at_cell", "at_line", "module")
#: what compiled code of program cell N is called, so an error's frames name their cell
CELL_FILE = "<cell {}>"


def error_place(err: BaseException, cells: int) -> tuple[int, int, str | None]:
    """(program cell, line in it, module): where the innermost frame of the submission's own
    cells was when ``err`` was raised (-1, 0 when none was), and for a failed import the
    top-level module's name if it is one of `KNOWN_MODULES`. Numbers and a name from a fixed
    list only: the trusted side reads the line from the source it parsed."""
    cell, line, module = -1, 0, None
    try:
        tb = err.__traceback__
        while tb is not None:
            name = tb.tb_frame.f_code.co_filename
            if name.startswith("<cell ") and name.endswith(">") and name[6:-1].isdigit():
                index = int(name[6:-1])
                if index < cells and 0 < tb.tb_lineno <= MAX_PLACE:
                    cell, line = index, tb.tb_lineno
            tb = tb.tb_next
        if isinstance(err, ModuleNotFoundError) and isinstance(err.name, str):
            top = err.name.split(".")[0]
            module = top if top in KNOWN_MODULES else None
    except BaseException:  # noqa: BLE001 - a hostile exception object: no place to give
        return -1, 0, None
    return cell, line, module


def neutralise_magics(source: str) -> str:
    # IPython line magics and shell escapes are not Python: they become comments
    out = []
    for line in source.split("\n"):
        stripped = line.lstrip()
        out.append(
            line[: len(line) - len(stripped)] + "pass  # " + stripped
            if stripped.startswith(("%", "!"))
            else line
        )
    return "\n".join(out)


def _read_capture(path: str, limit: int) -> str:
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError:
        return ""
    text = data[:limit].decode("utf-8", "replace")
    return text[:limit] + ("\n[output truncated]" if len(data) > limit else "")


def _set_limits(limits: dict) -> None:
    import resource

    if limits.get("address_space_bytes"):  # where no cgroup caps memory: the address space
        with open("/proc/self/statm") as handle:
            pages = int(handle.read().split()[0])
        size = pages * os.sysconf("SC_PAGE_SIZE") + int(limits["address_space_bytes"])
        resource.setrlimit(resource.RLIMIT_AS, (size, size))
    if limits.get("cpu_seconds"):  # SIGXCPU at the soft limit, SIGKILL a little later
        seconds = int(limits["cpu_seconds"])
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 5))
    if limits.get("processes"):
        resource.setrlimit(resource.RLIMIT_NPROC, (int(limits["processes"]),) * 2)
    if limits.get("file_bytes"):
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(limits["file_bytes"]),) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _copy_release(release: str | None, workdir: str) -> None:
    import shutil

    if not release or not os.path.isdir(release):
        return
    for name in os.listdir(release):
        src = os.path.join(release, name)
        if name.endswith(".ipynb"):
            continue
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(workdir, name))
        else:
            shutil.copy(src, workdir)


def run_submission(input_fd: int, events_fd: int) -> None:
    """In the forked child: the request, its cells, then (once the trusted side sends them)
    the cases, all read from this run's input pipe; events to this run's event pipe.

    The cases are not in this process while the cells run; what runs after the cells prints
    into /dev/null, so nothing printed can carry a hidden input back.
    """
    request, _blob = read_frame(input_fd)
    limits = request["limits"]
    output_limit = int(limits.get("cell_output_chars", 4000))
    workdir = request["workdir"]  # chosen by the trusted side: a fresh random name
    os.mkdir(workdir, 0o700)
    _copy_release(request.get("release_dir"), workdir)
    os.chdir(workdir)
    sys.path.insert(0, workdir)
    capture = os.path.join(workdir, ".captured_output")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)  # input() gets EOF
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an over-long write fails with EFBIG instead
    _set_limits(limits)

    def emit(header, blob=b""):
        _write_all(events_fd, frames.encode_frame(header, blob))

    emit({"ev": "setup"})  # the first event: no student code has run before it
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    skip_cells = set(request.get("skip_cells", []))
    for index, source in enumerate(request["cells"]):
        if index in skip_cells:
            continue
        out_fd = os.open(capture, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(out_fd)
        error, place = None, (-1, 0, None)
        try:
            exec(compile(neutralise_magics(source), CELL_FILE.format(index), "exec"), namespace)
        except BaseException as err:  # noqa: BLE001 - SystemExit too: a cell error
            error = error_code(err)
            place = error_place(err, len(request["cells"]))
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001 - a full disk must not stop the report
            pass
        emit(
            {
                "ev": "cell",
                "cell": index,
                "error": error,
                "output": _read_capture(capture, output_limit),
                **dict(zip(PLACE_FIELDS, place)),
            }
        )
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    emit({"ev": "cells_done"})

    phase, blob = read_frame(input_fd)
    os.close(input_fd)
    arrays = contract.unpack(blob)
    skip_tasks = set(phase.get("skip_tasks", []))
    for task_index, task in enumerate(phase["tasks"]):
        if task_index in skip_tasks:
            continue
        function = namespace.get(task["function"])
        if not callable(function):
            code = "not_callable" if task["function"] in namespace else "undefined"
            emit({"ev": "task_missing", "task": task_index, "code": code})
            emit({"ev": "task_end", "task": task_index})
            continue
        for case_index, case in enumerate(task["cases"]):
            args = [contract.fresh(contract.value(s, arrays)) for s in case["args"]]
            kwargs = {
                k: contract.fresh(contract.value(s, arrays)) for k, s in case["kwargs"].items()
            }
            tables = case.get("calls") or {}
            cells = len(request["cells"])
            if tables:
                outcome = run_answered(namespace, function, args, kwargs, tables, arrays, cells)
            else:
                outcome = run_case(function, args, kwargs, cells)
            header = {
                "ev": "case",
                "task": task_index,
                "case": case_index,
                "outcome": outcome.kind,
                "code": outcome.code,
                "n": len(outcome.arrays),
                **{name: getattr(outcome, name) for name in PLACE_FIELDS},
            }
            payload = b""
            if outcome.kind == "value":
                try:
                    payload = frames.pack({f"r{i}": a for i, a in enumerate(outcome.arrays)})
                except MemoryError:
                    header.update(outcome="error", code="MemoryError", n=0)
            emit(header, payload)
        emit({"ev": "task_end", "task": task_index})
    emit({"ev": "done"})


def _prctl(option: int, value: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except OSError:
        pass


def _sweep(whole_namespace: bool, child: int) -> None:
    """Kill and reap everything the child left (in the sandbox: every process but us)."""
    for _ in range(200):
        try:
            if whole_namespace:
                os.kill(-1, signal.SIGKILL)
            else:
                os.killpg(child, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0] != 0:
                pass
        except ChildProcessError:
            return
        time.sleep(0.005)


def _remove_ipc() -> None:
    """Remove every System V shared memory segment, semaphore set and message queue of this
    IPC namespace (the sandbox has its own): none may outlive the submission that made it."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for table, remove in (
        ("shm", lambda i: libc.shmctl(i, 0, None)),
        ("sem", lambda i: libc.semctl(i, 0, 0)),
        ("msg", lambda i: libc.msgctl(i, 0, None)),
    ):
        try:
            with open(f"/proc/sysvipc/{table}") as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            remove(int(row.split()[1]))  # IPC_RMID = 0


def _visible_keys() -> set:
    """The serial numbers of every kernel key this uid can see (/proc/keys)."""
    try:
        with open("/proc/keys") as handle:
            return {line.split(None, 1)[0] for line in handle if line.strip()}
    except OSError:
        return set()


#: the keys visible when the zygote became ready: the instructor's own, in rootless mode
_KEYS_BEFORE: set = set()


def _keys_gone(wait_seconds: float = 2.0) -> bool:
    """A run's keys die with its user namespace, but the kernel collects them a moment later
    (tens of milliseconds): wait until no key is visible that was not there at start. As root the
    slot uid's own keyrings are cleared first (an earlier grader may have left keys in them).
    False if some key is still there. Asked before each fork, not after each run, so the
    kernel collects while the trusted side judges the run that ended; a run that finds keys
    left never starts (the zygote ends, and the trusted side reruns it in a fresh sandbox)."""
    if isolation.in_initial_user_namespace() and not isolation.clear_uid_keyrings():
        return False
    deadline = time.monotonic() + wait_seconds
    while not _visible_keys() <= _KEYS_BEFORE:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def _scrub(roots=("/tmp", "/dev/shm")) -> bool:
    """Delete everything under the writable places; True if they are empty afterwards."""
    import shutil

    _remove_ipc()
    clean = True
    try:  # the sandbox's own read-only binds (a virtualenv under /tmp) are not state
        with open("/proc/self/mountinfo") as handle:
            mounts = [line.split()[4] for line in handle]
    except OSError:
        mounts = []
    for root in roots:
        try:
            names = os.listdir(root)
        except OSError:
            continue
        kept = []
        for name in names:
            path = os.path.join(root, name)
            if any(m == path or m.startswith(path + "/") for m in mounts):
                kept.append(name)
                continue
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
            except OSError:
                clean = False
        clean = clean and sorted(os.listdir(root)) == sorted(kept)
    for table in ("shm", "sem", "msg"):
        try:
            with open(f"/proc/sysvipc/{table}") as handle:
                clean = clean and len(handle.read().splitlines()) <= 1
        except OSError:
            pass
    return clean


def _run_message(data: bytes, fds: list[int]) -> dict | None:
    """The trusted side's run message: a frame whose header has exactly RUN_FIELDS, and two
    descriptors plus one per cgroup hierarchy. Anything else (only the trusted side can write
    here) ends the zygote."""
    try:
        head, blob = frames.single_frame(data)
        header = json.loads(head)
        if blob or not isinstance(header, dict) or set(header) != set(RUN_FIELDS):
            return None
        if not all(isinstance(header[k], t) for k, t in RUN_FIELDS.items()):
            return None
        if not 0 <= header["cgroups"] <= MAX_CGROUPS or len(fds) != 2 + header["cgroups"]:
            return None
        return header
    except (ValueError, TypeError):
        return None


def _join_cgroup(fds: list[int]) -> None:
    """Move this process (the run's first, just forked: its only thread, before it forks or
    runs anything of the submission) into the run's own cgroup: "0" names the writer, and the
    kernel checks the permission of the trusted side that opened these files (``tasks`` on
    cgroup v1: the one thread is the whole process). Everything the run starts is born
    there; the descriptors are closed, so no code of the submission can move anything."""
    for fd in fds:
        os.write(fd, b"0")
        os.close(fd)


def _fresh_state_works(own_pids: bool) -> bool:
    """Whether a child can build its own namespaces here (see isolation.py), with a pid
    namespace and a /proc of its own or without; tried once, in a throwaway child, so that a
    kernel which refuses says so once instead of every run."""
    pid = os.fork()
    if pid == 0:
        try:
            isolation.enter_fresh_state(1 << 20, own_pids)
            os._exit(0)
        except BaseException:  # noqa: BLE001 - the answer is the exit status
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def zygote(preload: list[str], sandboxed: bool, control_fd: int) -> None:
    """Import the heavy modules once, then fork one child per run message on the control socket."""
    control = socket.socket(fileno=control_fd)
    control.setblocking(True)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the zygote reads and writes nothing but its control socket
        os.dup2(null, fd)
    os.close(null)
    # a child may set O_ASYNC/F_SETOWN on its own descriptors: no signal it arranges can end us
    for name in RESET_SIGNALS:
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    for module in preload:
        try:
            __import__(module)
        except Exception:  # noqa: BLE001 - a missing optional module only costs time later
            pass
    if "torch" in sys.modules:  # preloaded: one thread per sandbox
        sys.modules["torch"].set_num_threads(1)
    if sandboxed:  # what the imports wrote (matplotlib's caches) is gone before the first run
        if isolation.in_initial_user_namespace():
            isolation.clear_uid_keyrings()
        _KEYS_BEFORE.update(_visible_keys())
        _scrub()
    _prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphans come back to us
    _prctl(4, 0)  # PR_SET_DUMPABLE 0: no /proc/<us>/fd for the child
    masks = isolation.proc_masks() if sandboxed else {}  # once: the same for every run
    own_pids = sandboxed and _fresh_state_works(own_pids=True)
    fresh = own_pids or (sandboxed and _fresh_state_works(own_pids=False))
    control.sendall(frames.encode_frame({"ev": "ready", "error": None, "fresh": fresh}))
    while True:
        try:
            data, fds, _flags, _address = socket.recv_fds(control, 1 << 16, 2 + MAX_CGROUPS)
        except OSError:
            return
        run = _run_message(data, fds) if data else None
        if run is None:  # the trusted side closed the socket, or sent what it never sends
            for fd in fds:
                os.close(fd)
            return
        if sandboxed and not _keys_gone():  # a key of an earlier run is still visible
            for fd in fds:
                os.close(fd)
            return  # the run never starts: "lost", rerun in a fresh sandbox
        events_fd, input_fd, *cgroup_fds = fds
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                control.close()  # the child holds no channel of ours: only its run's two
                code = NO_CGROUP
                _join_cgroup(cgroup_fds)
                code = 0
                for name in RESET_SIGNALS:
                    signal.signal(getattr(signal, name), signal.SIG_DFL)
                if sandboxed:  # a process group of its own, in the zygote's session and
                    os.setpgid(0, 0)  # autogroup: a new session is a machine-wide counter
                else:
                    os.setsid()
                if fresh:
                    code = NO_FRESH_STATE
                    isolation.enter_fresh_state(run["tmp_bytes"], own_pids, masks)
                    code = 0
                elif sandboxed and os.uname().machine in isolation.SYSCALLS:
                    isolation.deny_syscalls()  # no namespaces here, but the same filter
                run_submission(input_fd, events_fd)
            except BaseException:  # noqa: BLE001 - reported by exit status
                code = code or 70
            finally:
                os._exit(code)
        for fd in fds:  # from here on only the child and the trusted side hold them
            os.close(fd)
        _pid, status = os.waitpid(pid, 0)
        _sweep(sandboxed, pid)
        import shutil

        shutil.rmtree(run["workdir"], ignore_errors=True)
        clean = _scrub() if sandboxed else True
        control.sendall(
            frames.encode_frame(
                {
                    "ev": "exit",
                    "run": run["run"],
                    "code": os.waitstatus_to_exitcode(status),
                    "clean": clean,
                }
            )
        )


if __name__ == "__main__":
    # argv: [--sandboxed] --control-fd=N site-packages... -- preloads...
    arguments = sys.argv[1:]
    in_sandbox = arguments[0] == "--sandboxed"
    arguments = arguments[1:] if in_sandbox else arguments
    control = int(arguments[0].split("=", 1)[1])
    zygote(arguments[arguments.index("--") + 1 :], in_sandbox, control)
