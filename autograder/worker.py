"""The sandboxed side of the grader: runs a student's code and reports plain arrays.

This file runs INSIDE the sandbox (bubblewrap, an unprivileged uid, no network, no course
files). It imports nothing from the course; the trusted side sends it everything over a pipe.

- One process per worker slot, the *zygote*, imports NumPy, PyTorch and Matplotlib once and
  then waits for requests on stdin. Start-up is paid once per slot, not once per submission.
- For each request it forks a fresh child, which sets resource limits, copies the released
  assignment folder into a private temporary directory, executes the submission's code cells
  in a fresh namespace (stdout/stderr captured to a size-limited file, stdin = /dev/null so
  ``input()`` gets EOF), then calls the student's functions on every case it was sent.
- The child streams *events* back: one per cell, one per case (the return value converted to
  plain numeric arrays, serialised with ``np.savez`` — never pickle). It decides nothing: the
  trusted side compares the arrays with the reference and keeps the score.
- When the child ends, the zygote kills every other process left in the sandbox (a subreaper
  plus ``kill(-1, SIGKILL)``), so nothing one student started can touch the next submission.

Frames on the wire: ``b"AGF1"``, two big-endian uint32 lengths (JSON header, binary blob),
the JSON header, then the blob (an ``.npz`` archive, possibly empty).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import struct
import sys
import time

MAGIC = b"AGF1"
HEADER = struct.Struct(">II")


# ---------------------------------------------------------------------------------------
# framing (also imported by the trusted side)


def encode_frame(header: dict, blob: bytes = b"") -> bytes:
    head = json.dumps(header).encode()
    return MAGIC + HEADER.pack(len(head), len(blob)) + head + blob


def write_frame(fd: int, header: dict, blob: bytes = b"") -> None:
    data = memoryview(encode_frame(header, blob))
    while data:
        n = os.write(fd, data)
        data = data[n:]


def read_exact(fd: int, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("pipe closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, max_bytes: int = 1 << 30) -> tuple[dict, bytes]:
    magic = read_exact(fd, 4)
    if magic != MAGIC:
        raise ValueError(f"bad frame magic {magic!r}")
    n_head, n_blob = HEADER.unpack(read_exact(fd, HEADER.size))
    if n_head + n_blob > max_bytes:
        raise ValueError(f"frame of {n_head + n_blob} bytes exceeds the cap of {max_bytes}")
    header = json.loads(read_exact(fd, n_head))
    return header, read_exact(fd, n_blob)


# ---------------------------------------------------------------------------------------
# values <-> arrays


def decode_value(spec, arrays):
    """One argument of a case, from its JSON spec and the request's npz arrays."""
    kind = spec["t"]
    if kind == "array":
        return arrays[spec["k"]].copy()
    if kind == "seeded":
        import numpy as np

        return np.random.default_rng(spec["v"])
    if kind == "float":
        return float(spec["v"])  # sent as repr so nan/inf survive
    if kind in ("int", "bool", "str"):
        return spec["v"]
    if kind == "none":
        return None
    raise ValueError(f"unknown argument kind {kind!r}")


def _plain_array(value):
    """A numeric/bool ndarray for one returned item, or None if it is not numbers."""
    import numpy as np

    if hasattr(value, "detach") and hasattr(value, "cpu") and hasattr(value, "numpy"):
        value = value.detach().cpu().numpy()
    try:
        array = np.asarray(value)
    except Exception:  # any failure to convert means "not numbers"
        return None
    if array.dtype.kind not in "biufc":
        return None
    return array


def to_arrays(value) -> dict:
    """The student's return value as {structure, arrays} or {bad_type}."""
    if value is None:
        return {"bad_type": "NoneType"}
    items = list(value) if isinstance(value, (tuple, list)) else [value]
    structure = "tuple" if isinstance(value, (tuple, list)) else "single"
    arrays = []
    for item in items:
        array = _plain_array(item)
        if array is None:
            return {"bad_type": type(item).__name__, "structure": structure}
        arrays.append(array)
    return {"structure": structure, "arrays": arrays}


def npz_bytes(arrays: dict) -> bytes:
    import numpy as np

    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------
# the child: runs one submission


def _describe_error(err: BaseException) -> dict:
    import traceback

    kind = type(err).__name__
    message = str(err)[:500]
    errno = getattr(err, "errno", None)
    lines = traceback.format_exception_only(type(err), err)
    return {"type": kind, "message": message, "errno": errno, "text": "".join(lines)[-2000:]}


def _neutralise_magics(source: str) -> str:
    # IPython line magics and shell escapes are not Python; a kernel would run them, the
    # grader does not (no shell, no network), so they become comments.
    out = []
    for line in source.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith(("%", "!")):
            out.append(line[: len(line) - len(stripped)] + "pass  # " + stripped)
        else:
            out.append(line)
    return "\n".join(out)


def _read_capture(path: str, limit: int) -> str:
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError:
        return ""
    text = data[:limit].decode("utf-8", "replace")
    return text + ("\n[output truncated]" if len(data) > limit else "")


def _set_limits(limits: dict) -> None:
    import resource

    def cap(which, value):
        if value:
            resource.setrlimit(which, (int(value), int(value)))

    if limits.get("memory_bytes"):
        # address space = what the zygote already maps (torch is large) + the budget
        with open("/proc/self/statm") as handle:
            pages = int(handle.read().split()[0])
        cap(resource.RLIMIT_AS, pages * os.sysconf("SC_PAGE_SIZE") + limits["memory_bytes"])
    if limits.get("cpu_seconds"):  # SIGXCPU at the soft limit, SIGKILL a little later
        seconds = int(limits["cpu_seconds"])
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 5))
    cap(resource.RLIMIT_NPROC, limits.get("processes"))
    cap(resource.RLIMIT_FSIZE, limits.get("file_bytes"))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_submission(request: dict, result_fd: int) -> None:
    """Executed in the forked child: cells, then every case of every task, streaming events.

    The cases (hidden inputs included) are not in this process while the cells run: they
    are read from the request pipe only after the last cell, so no cell can print them into
    the feedback.
    """
    limits = request.get("limits", {})
    output_limit = int(limits.get("cell_output_chars", 4000))

    # a private working directory with the public files of the release
    workdir = os.path.join("/tmp", f"run-{os.getpid()}")
    os.makedirs(workdir)
    release = request.get("release_dir")
    if release and os.path.isdir(release):
        for name in os.listdir(release):
            src = os.path.join(release, name)
            if name.endswith(".ipynb"):
                continue
            if os.path.isdir(src):
                shutil.copytree(src, os.path.join(workdir, name))
            else:
                shutil.copy(src, workdir)
    os.chdir(workdir)
    sys.path.insert(0, workdir)

    capture = os.path.join(workdir, ".captured_output")
    cases_fd = os.dup(0)  # the trusted side sends the cases here once the cells are done
    devnull = os.open(os.devnull, os.O_RDONLY)
    if devnull != 0:  # stdin becomes /dev/null (input() gets EOF), replacing the request pipe
        os.dup2(devnull, 0)
        os.close(devnull)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an over-long write fails with EFBIG instead
    _set_limits(limits)

    def emit(header, blob=b""):
        write_frame(result_fd, header, blob)

    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    skip_cells = set(request.get("skip_cells", []))
    for index, source in enumerate(request["cells"]):
        if index in skip_cells:
            continue
        emit({"ev": "cell_start", "cell": index})
        out_fd = os.open(capture, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(out_fd)
        error = None
        try:
            code = compile(_neutralise_magics(source), f"<cell {index}>", "exec")
            exec(code, namespace)
        except BaseException as err:  # SystemExit and KeyboardInterrupt too: a cell error
            error = _describe_error(err)
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001 - a full disk must not stop the report
            pass
        emit({"ev": "cell", "cell": index, "error": error, "output": _read_capture(capture, output_limit)})

    emit({"ev": "cells_done"})
    import numpy as np

    phase, blob = read_frame(cases_fd)
    os.close(cases_fd)
    arrays = np.load(io.BytesIO(blob), allow_pickle=False) if blob else {}
    skip_tasks = set(phase.get("skip_tasks", []))
    for task_index, task in enumerate(phase["tasks"]):
        if task_index in skip_tasks:
            continue
        emit({"ev": "task_start", "task": task_index})
        function = namespace.get(task["function"])
        if not callable(function):
            emit({"ev": "task_missing", "task": task_index,
                  "found": type(function).__name__ if task["function"] in namespace else None})
            continue
        for case_index, case in enumerate(task["cases"]):
            header = {"ev": "case", "task": task_index, "case": case_index}
            blob = b""
            try:
                args = [decode_value(spec, arrays) for spec in case["args"]]
                kwargs = {key: decode_value(spec, arrays) for key, spec in case["kwargs"].items()}
                value = function(*args, **kwargs)
                converted = to_arrays(value)
                if "bad_type" in converted:
                    header.update(converted)
                else:
                    header["structure"] = converted["structure"]
                    header["n"] = len(converted["arrays"])
                    blob = npz_bytes({f"r{i}": a for i, a in enumerate(converted["arrays"])})
                    if len(blob) > limits.get("result_bytes", 64 << 20):
                        header = {"ev": "case", "task": task_index, "case": case_index,
                                  "error": {"type": "OutputTooLarge", "errno": None, "text": "",
                                            "message": f"the returned arrays take {len(blob)} bytes"}}
                        blob = b""
            except BaseException as err:  # the student's function raised: a failing case
                header["error"] = _describe_error(err)
            emit(header, blob)
        emit({"ev": "task_end", "task": task_index})
    emit({"ev": "done"})


# ---------------------------------------------------------------------------------------
# the zygote


def _become_subreaper() -> None:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans come back to us
    except OSError:
        pass


def _not_dumpable() -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no /proc/<us>/fd
    except OSError:
        pass


def _sweep(child: int, whole_namespace: bool) -> None:
    """Kill and reap everything the child left behind.

    In the sandbox (our own pid namespace and uid) that is every process but us:
    kill(-1). Unsandboxed (--no-sandbox) kill(-1) would hit the whole machine, so only the
    child's process group is killed there.
    """
    for _ in range(200):
        try:
            if whole_namespace:
                os.kill(-1, signal.SIGKILL)
            else:
                os.killpg(child, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            while True:
                pid, _status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
        except ChildProcessError:
            return
        time.sleep(0.005)


def zygote(preload: list[str], sandboxed: bool, control_fd: int) -> None:
    control_in, events_out = 0, os.dup(1)
    # our own stdout/stderr go nowhere useful; the trusted side reads frames only
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    try:
        import numpy  # noqa: F401 - required: the cases and results are NumPy arrays
    except Exception as err:  # the sandbox cannot see the virtualenv: say so and stop
        write_frame(control_fd, {"ev": "ready", "error": f"cannot import numpy inside the sandbox ({err})"})
        return
    for module in preload:
        try:
            __import__(module)
        except Exception:  # a missing optional module only costs start-up time later
            pass
    try:
        import torch

        torch.set_num_threads(1)
    except Exception:
        pass
    _become_subreaper()
    _not_dumpable()
    write_frame(control_fd, {"ev": "ready", "pid": os.getpid()})
    while True:
        try:
            request, _blob = read_frame(control_in)
        except EOFError:
            return
        pid = os.fork()
        if pid == 0:  # the child: never returns into the loop
            code = 0
            try:
                os.close(control_fd)  # only the zygote may say a run is over
                os.setsid()  # its own process group, so it can be swept as one
                run_submission(request, events_out)
            except BaseException:  # noqa: BLE001 - report by exit status
                code = 70
            finally:
                os._exit(code)
        _pid, status = os.waitpid(pid, 0)
        _sweep(pid, sandboxed)
        write_frame(control_fd, {"ev": "exit", "code": os.waitstatus_to_exitcode(status)})


if __name__ == "__main__":
    # argv: [--sandboxed] --control-fd=N site-packages paths (python -I -S), "--", preloads
    arguments = sys.argv[1:]
    in_sandbox = bool(arguments) and arguments[0] == "--sandboxed"
    arguments = arguments[1:] if in_sandbox else arguments
    control = int(arguments[0].split("=", 1)[1])  # --control-fd=N
    arguments = arguments[1:]
    split = arguments.index("--") if "--" in arguments else len(arguments)
    sys.path.extend(arguments[:split])
    zygote(arguments[split + 1:], in_sandbox, control)
