"""Submissions that try to pass a value from one run to the next through kernel state the runs
share: the machine-wide counters of /proc, and the page cache of read-only files (whether a
page of a /usr file is resident). Used by tests/test_kernel_channels.py.

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
            pidfd = os.pidfd_open(os.getpid())  # the same advice through process_madvise
            _syscall("process_madvise", pidfd, (ctypes.c_void_p * 2)(where, size), 1, 21, 0)
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
