"""Submissions that try to pass a value from one run to the next through kernel state the runs
share: the machine-wide counters of /proc, the page cache of read-only files (whether a
page of a /usr file is resident) and the numbers the kernel gives new objects. Used by
tests/test_kernel_channels.py and tests/test_kernel_counters.py.

- `LEAK`: a function ``_leak(value)`` that writes ``value`` into every such place: it forks
  ``value % 61 + 1`` processes (/proc/stat's ``processes``, /proc/loadavg's last pid), reads
  the /usr files whose bit of ``value`` is 1 (making them resident) and tries to evict the
  others (posix_fadvise DONTNEED, madvise PAGEOUT and COLD on a mapping of them, and
  process_madvise PAGEOUT on itself).
- `OBSERVE`: a cell that reads every masked /proc file and probes the residency of those
  files every way the kernel offers (mincore, preadv2 with RWF_NOWAIT, cachestat, io_uring)
  and prints ``observed <json>``: what a later run would decode (the digest of all of it, and
  the probes' answers).
- `PROBE`: a cell that prints what each probe gets, one line each, for the exact checks.
- `COUNTERS`, `WRITE_COUNTERS`, `RESIDUAL`, `EVERYDAY`: the machine-wide counters in the
  numbers of new kernel objects (tests/test_kernel_counters.py): a cell that reads every one
  and prints ``observed <json>``, ``_write_counters(value)`` that moves each by ``value``, a
  cell that prints the two the grader cannot close, and a cell of everyday calls that the
  refusals must leave working.
"""

from __future__ import annotations

#: the files a value is written into: the first 64 regular files of at least 64 KiB under
#: /usr/share and /usr/lib, in a fixed order (the same list in every run)
FILES = """
import os


def _files(count=64):
    found = []
    for top in ("/usr/share", "/usr/lib"):
        for folder, dirs, names in os.walk(top):
            dirs.sort()
            for name in sorted(names):
                path = os.path.join(folder, name)
                try:
                    if os.path.isfile(path) and not os.path.islink(path) and os.path.getsize(path) >= 1 << 16:
                        found.append(path)
                except OSError:
                    continue
                if len(found) == count:
                    return found
    return found
"""

#: libc's mmap and the system call numbers the probes use, per machine
NATIVE = """
import ctypes, json

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_NR = {
    "x86_64": {"mincore": 27, "madvise": 28, "io_uring_setup": 425, "cachestat": 451,
               "readahead": 187, "io_setup": 206, "process_madvise": 440},
    "aarch64": {"mincore": 232, "madvise": 233, "io_uring_setup": 425, "cachestat": 451,
                "readahead": 213, "io_setup": 0, "process_madvise": 440},
}[os.uname().machine]
PROT_READ, MAP_SHARED = 1, 1


def _mapped(fd, size):
    return _libc.mmap(None, size, PROT_READ, MAP_SHARED, fd, 0)


def _syscall(name, *args):
    result = _libc.syscall(_NR[name], *args)
    return [result, ctypes.get_errno() if result < 0 else 0]
"""

LEAK = (
    FILES
    + NATIVE
    + """

def _leak(value):
    for _ in range(value % 61 + 1):  # /proc/stat "processes", /proc/loadavg's last pid
        try:
            child = os.fork()
        except OSError:
            break
        if child == 0:
            os._exit(0)
        os.waitpid(child, 0)
    for bit, path in enumerate(_files()):
        fd = os.open(path, os.O_RDONLY)
        try:
            if value >> bit & 1:  # resident
                while os.read(fd, 1 << 20):
                    pass
                continue
            try:  # not resident: evict it every way there is
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            except OSError:
                pass
            size = os.fstat(fd).st_size
            where = _mapped(fd, size)
            for advice in (21, 20):  # MADV_PAGEOUT, MADV_COLD
                _syscall("madvise", ctypes.c_void_p(where), ctypes.c_size_t(size), advice)
            try:  # the same advice through process_madvise (a run gets no pidfd: -1 then)
                pidfd = os.pidfd_open(os.getpid())
            except OSError:
                pidfd = -1
            _syscall("process_madvise", pidfd, (ctypes.c_void_p * 2)(where, size), 1, 21, 0)
            if pidfd >= 0:
                os.close(pidfd)
            _libc.munmap(ctypes.c_void_p(where), ctypes.c_size_t(size))
        finally:
            os.close(fd)
"""
)

#: every /proc file the grader masks (autograder/student/isolation.py), read whole
MASKED = [
    "stat",
    "loadavg",
    "uptime",
    "vmstat",
    "zoneinfo",
    "buddyinfo",
    "diskstats",
    "interrupts",
    "softirqs",
    "schedstat",
    "swaps",
    "pressure/cpu",
    "pressure/io",
    "pressure/memory",
    "pressure/irq",
    "sys/fs/file-nr",
    "sys/fs/inode-nr",
    "sys/fs/inode-state",
    "sys/fs/dentry-state",
    "sys/fs/aio-nr",
    "sys/kernel/pty/nr",
    "sys/kernel/ns_last_pid",
    "locks",
    "modules",
    "crypto",
    "kallsyms",
    "key-users",
    "slabinfo",
    "vmallocinfo",
    "meminfo",
    "sys/kernel/random/entropy_avail",
]

OBSERVE = (
    FILES
    + NATIVE
    + f"""

def _text(path):
    try:
        with open(path) as handle:
            return handle.read()
    except OSError as err:
        return type(err).__name__


def _resident(path):
    \"\"\"What each probe says of the first 16 pages of a file.\"\"\"
    fd = os.open(path, os.O_RDONLY)
    try:
        where = _mapped(fd, 16 * 4096)
        vector = (ctypes.c_ubyte * 16)()
        mincore = _syscall("mincore", ctypes.c_void_p(where), ctypes.c_size_t(16 * 4096), vector)
        _libc.munmap(ctypes.c_void_p(where), ctypes.c_size_t(16 * 4096))
        try:
            nowait = os.preadv(fd, [bytearray(4096)], 0, os.RWF_NOWAIT)
        except OSError as err:
            nowait = err.errno
        stat = (ctypes.c_uint64 * 8)()
        span = (ctypes.c_uint64 * 2)(0, 0)
        cachestat = _syscall("cachestat", fd, span, stat, 0)
        return [mincore, list(vector), nowait, cachestat, list(stat)]
    finally:
        os.close(fd)


seen = {{name: _text("/proc/" + name) for name in {MASKED!r}}}
seen["irq"] = os.listdir("/proc/irq") if os.path.isdir("/proc/irq") else None
seen["residency"] = [_resident(path) for path in _files()]
seen["io_uring"] = _syscall("io_uring_setup", 8, (ctypes.c_char * 120)())
import hashlib  # the whole observation is longer than a cell's kept output: its digest

full = json.dumps(seen, sort_keys=True)
print("observed", json.dumps({{
    "digest": hashlib.sha256(full.encode()).hexdigest(),
    "processes": seen["stat"].split("processes ")[1].split()[0],
    "loadavg": seen["loadavg"],
    "irq": seen["irq"],
    "files": len(seen["residency"]),
    "residency": sorted({{json.dumps(probes) for probes in seen["residency"]}}),
    "io_uring": seen["io_uring"],
}}, sort_keys=True))
"""
)


#: counters in the numbers the kernel gives new objects, which a run reads from a cell
#: (tests/test_kernel_counters.py): each one either closed for every run (the same answer
#: whatever ran before) or a documented residual (docs/threat-model.md, "Machine-wide
#: counters in the numbers of new kernel objects").
COUNTERS_NATIVE = """
import ctypes, json, os, socket, struct

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_NR = {"x86_64": {"pidfd_open": 434, "clone3": 435, "bpf": 321, "perf_event_open": 298},
       "aarch64": {"pidfd_open": 434, "clone3": 435, "bpf": 280, "perf_event_open": 241}}[os.uname().machine]
SO_COOKIE, SO_NETNS_COOKIE, SO_PEERPIDFD = 57, 71, 77
CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWPID = 0x10000000, 0x00020000, 0x40000000, 0x20000000


def _err(call):
    try:
        return call()
    except OSError as err:
        return "E%d" % err.errno


def _cookie(option, family=socket.AF_INET, kind=socket.SOCK_DGRAM):
    with socket.socket(family, kind) as sock:
        return _err(lambda: struct.unpack("Q", sock.getsockopt(socket.SOL_SOCKET, option, 8))[0])


def _in_child(body):
    \"\"\"body() in a forked child; its result (a short string) back through a pipe.\"\"\"
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.write(write, str(body()).encode()[:4000])
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    out = os.read(read, 4096).decode()
    os.close(read)
    return out


def _nested():
    \"\"\"A namespace of each kind, unshared by a child (a network namespace takes the next
    cookie, any namespace an inode number, a mount the next mount id).\"\"\"
    said = {}
    for name, flags in (("user", CLONE_NEWUSER), ("user+net", CLONE_NEWUSER | CLONE_NEWNET),
                        ("user+mnt", CLONE_NEWUSER | CLONE_NEWNS), ("user+pid", CLONE_NEWUSER | CLONE_NEWPID),
                        ("net", CLONE_NEWNET), ("mnt", CLONE_NEWNS)):
        said[name] = _in_child(lambda: [_libc.unshare(flags), ctypes.get_errno()])
    return said


def _session():
    return _in_child(lambda: _err(os.setsid))


def _send(count=1):
    \"\"\"UDP to 127.0.0.1: each packet over the loopback counts in /proc/net/softnet_stat, the
    machine's per CPU.\"\"\"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        return [_err(lambda: sock.sendto(b"x", ("127.0.0.1", 9))) for _ in range(count)][-1]


def _perf_event():
    \"\"\"A software event on the calling process (task-clock, user space only: allowed
    unprivileged at perf_event_paranoid 2) and its id, one more for every event the machine
    opens: [fd or -1, errno, id].\"\"\"
    attr = bytearray(128)
    struct.pack_into("IIQ", attr, 0, 1, 128, 1)  # PERF_TYPE_SOFTWARE, its size, TASK_CLOCK
    struct.pack_into("Q", attr, 32, 1 << 2)  # read_format: PERF_FORMAT_ID
    struct.pack_into("Q", attr, 40, 1 << 5 | 1 << 6)  # exclude_kernel, exclude_hv
    fd = _libc.syscall(_NR["perf_event_open"], (ctypes.c_char * 128).from_buffer(attr), 0, -1, -1, 0)
    if fd < 0:
        return [-1, ctypes.get_errno(), None]
    ident = ctypes.c_uint64()
    _libc.ioctl(int(fd), 0x80082407, ctypes.byref(ident))  # PERF_EVENT_IOC_ID
    os.close(fd)
    return [0, 0, ident.value]
"""

COUNTERS = (
    COUNTERS_NATIVE
    + """

def _sysctls():
    \"\"\"Every readable file of /proc/sys (fs/ among them: inode-nr, file-nr, dentry-state,
    aio-nr...), but a new random UUID per read and the sample rate the kernel lowers while
    some perf sampling on the machine runs long.\"\"\"
    out = {}
    skip = ("/proc/sys/kernel/random/uuid", "/proc/sys/kernel/perf_event_max_sample_rate")
    for folder, dirs, names in os.walk("/proc/sys"):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(folder, name)
            if path in skip:
                continue
            try:
                with open(path) as handle:
                    out[path] = handle.read()
            except OSError as err:
                out[path] = "E%d" % err.errno
    return out


def _ino_of(make):
    def read():
        fd = make()
        try:
            return os.fstat(fd).st_ino
        finally:
            os.close(fd)
    return _err(read)


def _tmpfs(folder):
    path = os.path.join(folder, "counted")
    with open(path, "w"):
        pass
    os.mkdir(path + ".d")
    numbers = [os.stat(path).st_ino, os.stat(path + ".d").st_ino]
    os.unlink(path)
    os.rmdir(path + ".d")
    return numbers


seen = {
    "sysctl": _sysctls(),
    "cgroups": open("/proc/cgroups").read() if os.path.exists("/proc/cgroups") else None,
    "so_cookie": _cookie(SO_COOKIE),
    "so_cookie_tcp": _cookie(SO_COOKIE, socket.AF_INET, socket.SOCK_STREAM),
    "netns_cookie": _cookie(SO_NETNS_COOKIE),
    "peer_pidfd": _cookie(SO_PEERPIDFD, socket.AF_UNIX, socket.SOCK_STREAM),
    "netlink": _err(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 4).close()),
    "bpf": [_libc.syscall(_NR["bpf"], 0, None, 0), ctypes.get_errno()],
    "pidfd_open": [_libc.syscall(_NR["pidfd_open"], os.getpid(), 0), ctypes.get_errno()],
    "clone3": [_libc.syscall(_NR["clone3"], None, 0), ctypes.get_errno()],
    "perf_event": _perf_event(),
    "udp": _send(),
    "nested": _nested(),
    "setsid": _session(),
    "autogroup": _err(lambda: open("/proc/self/autogroup").read()),
    "child_autogroup": _in_child(lambda: open("/proc/self/autogroup").read()),
    "cgroup": open("/proc/self/cgroup").read(),
    "ns": {name: os.readlink("/proc/self/ns/" + name) for name in ("time", "time_for_children")},
    "pids": [os.getpid(), os.getppid(), _in_child(os.getpid)],
    "lo": _err(lambda: socket.if_nametoindex("lo")),
    "tmp": _tmpfs("/tmp"),
    "shm": _tmpfs("/dev/shm"),
    "anon": [_ino_of(lambda: os.eventfd(0)), _ino_of(lambda: _libc.timerfd_create(1, 0)),
             _ino_of(lambda: _libc.inotify_init()), _ino_of(lambda: _libc.epoll_create1(0))],
}
import hashlib  # the whole observation, and each part's digest (a cell keeps 4,000 characters)

print("observed", json.dumps({
    "digest": hashlib.sha256(json.dumps(seen, sort_keys=True).encode()).hexdigest(),
    "parts": {k: hashlib.sha256(json.dumps(v, sort_keys=True).encode()).hexdigest()[:12] for k, v in seen.items()},
    "shown": {k: v for k, v in seen.items() if k not in ("sysctl", "cgroups")},
}, sort_keys=True))
"""
)

#: the residual: the inode number of a new pipe (the kernel's get_next_ino, per CPU) and of
#: a new memfd (the internal tmpfs's, per CPU); printed, never compared
RESIDUAL = """
import os
_r, _w = os.pipe()
_m = os.memfd_create("counted")
print("residual", os.fstat(_r).st_ino, os.fstat(_m).st_ino)
for _fd in (_r, _w, _m):
    os.close(_fd)
"""

#: ``_write_counters(value)``: ``value`` written into every counter COUNTERS reads (and the
#: residual ones): new objects of each kind, forks, sessions, namespaces and their mounts,
#: cookies; each attempt that the run's filter refuses is simply refused
WRITE_COUNTERS = (
    COUNTERS_NATIVE
    + """
import mmap


def _write_counters(value):
    for _ in range(value % 211 + 1):
        r, w = os.pipe()
        os.close(r), os.close(w)
        a, b = socket.socketpair()
        a.close(), b.close()
        for option in (SO_COOKIE, SO_NETNS_COOKIE):
            _cookie(option)
        _err(lambda: os.close(os.memfd_create("w")))
        mmap.mmap(-1, 4096).close()
        os.close(os.eventfd(0))
        os.close(os.open("/proc/self/status", os.O_RDONLY))
        _err(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 4).close())
        fd = _libc.syscall(_NR["pidfd_open"], os.getpid(), 0)
        if fd >= 0:
            os.close(fd)
        _perf_event()
        _send(3)
    for _ in range(value % 7 + 1):
        _nested()
        _session()
"""
)

#: what an honest run does that the counters' refusals must leave working: threads (glibc
#: falls back from clone3 to clone), a subprocess, a multiprocessing pool, name resolution
#: (glibc's netlink probe refused), asyncio's socketpair, PyTorch with two threads
EVERYDAY = """
import asyncio, multiprocessing, socket, subprocess, threading
import torch

done = []
thread = threading.Thread(target=lambda: done.append("thread"))
thread.start()
thread.join()
done.append(subprocess.run(["/bin/echo", "subprocess"], capture_output=True, text=True).stdout.strip())
with multiprocessing.get_context("fork").Pool(2) as pool:
    done.append(sum(pool.map(abs, [-1, -2, 3])))
done.append(socket.getaddrinfo("127.0.0.1", 80)[0][4][0])


async def _main():
    await asyncio.sleep(0)
    return "asyncio"


done.append(asyncio.run(_main()))
torch.set_num_threads(2)
done.append(float((torch.ones(300, 300) @ torch.ones(300, 300)).sum()))
print(done)
"""
