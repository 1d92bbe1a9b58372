"""Fresh kernel state for one run, built in the forked child before any student code runs.

Bound read-only into the sandbox beside ``zygote.py`` (standard library and ctypes only). The
child of a run calls ``enter_fresh_state`` right after the fork:

- a user namespace of its own (its uid and gid mapped to themselves), which owns
- an IPC namespace of its own: System V segments, semaphores, message queues and POSIX
  message queues made by the submission die with its last process;
- a network namespace of its own (its byte counters, ``/proc/net/*``, sockets and ports start
  empty; its loopback is left down, so the run sends no packet at all: each one would count
  in the machine's per-CPU ``/proc/net/softnet_stat``), a UTS namespace of its own (the host name)
  and a cgroup namespace rooted at the run's own cgroup (its path is "/", not ``run-<k>``);
- a pid namespace of its own, where the run's process is pid 1 (``_become_init``: the child
  that unshared it only waits and passes on its exit status), with a fresh ``/proc`` of that
  namespace: the pids a run sees start at 1, and when it exits the kernel kills everything
  it started. Where the sandbox's own ``/proc`` has locked mounts over parts of it (bwrap run
  as root covers ``/proc/irq``, ``/proc/bus``...), the kernel refuses a fresh ``/proc`` in a
  user namespace below it, and the run keeps the sandbox's pid namespace (``own_pids``
  False, found once by the zygote);
- in that ``/proc`` (or the sandbox's), the machine-wide counters another run moves (forks,
  interrupts, load, memory, disks...) covered by read-only constant copies (``mask_proc``);
- in that ``/proc``, every ``user.max_*_namespaces`` of the run's user namespace set to 0
  (``no_more_namespaces``): nothing the run starts makes a namespace or a mount, each of
  which takes the next number of a machine-wide counter;
- a mount namespace of its own, with a fresh size-capped tmpfs on ``/tmp`` (the run's working
  directory is made there) and on ``/dev/shm``: files and memory in them are freed when the
  run's last process exits, and the next run never sees them;
- a new anonymous session keyring, and the user keyring of a user namespace no other run
  shares: no key outlives the run;
- then every capability is dropped (bounding set, permitted, effective, inheritable) and
  ``no_new_privs`` set, so the student's code holds none of the power used to build this;
- last, a seccomp filter (``DENIED``): no kernel key, no way to read back or evict the
  page cache the runs share (``docs/threat-model.md``, "Kernel state every run shares"), and
  no reading of the machine-wide counters behind socket and network-namespace cookies,
  pidfds and sessions ("Machine-wide counters in the numbers of new kernel objects").

Where the kernel refuses a user namespace (``user.max_user_namespaces`` is 0, or a distribution
switch forbids unprivileged ones), ``enter_fresh_state`` raises ``Unavailable`` before changing
anything, and the zygote falls back to sweeping (``zygote._scrub``): ``describe_mode`` says so.
"""

from __future__ import annotations

import ctypes
import errno
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_PIDFD = 0x00001000
CLONE_NEWTIME = 0x00000080  # unshare only: in clone's flags these bits are the exit signal
#: every flag that makes a namespace (clone's and unshare's)
NEW_NAMESPACES = (
    CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID
) | CLONE_NEWNET
AF_NETLINK = 16
SO_COOKIE, SO_NETNS_COOKIE, SO_PASSPIDFD, SO_PEERPIDFD = 57, 71, 76, 77
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 0x1, 0x2, 0x4, 0x8, 0x20
MS_BIND, MS_REC, MS_PRIVATE, MNT_DETACH = 0x1000, 0x4000, 0x40000, 0x2
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 4, 24, 38
KEYCTL_JOIN_SESSION_KEYRING = 1
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
SHM_BYTES = 64 << 20  # /dev/shm of a run (inside the memory cap as well)


class Unavailable(OSError):
    """No user namespace can be made here: the zygote sweeps instead."""


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def _mount_tmpfs(target: str, size: int) -> None:
    options = f"size={size},mode=1777".encode()
    _check(
        _libc.mount(b"tmpfs", target.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options),
        f"mount tmpfs on {target}",
    )


def _mounts_under(root: str) -> list[str]:
    """The outermost mount points strictly below ``root``, from /proc/self/mountinfo."""
    with open("/proc/self/mountinfo") as handle:
        points = sorted({line.split()[4] for line in handle}, key=len)
    outer: list[str] = []
    for point in points:
        if point.startswith(root + "/") and not any(point.startswith(o + "/") for o in outer):
            outer.append(point)
    return outer


def drop_capabilities() -> None:
    """No capability left in any set, none to regain (no_new_privs)."""
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last + 1):
        _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop a bounding capability")
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


#: per machine: the seccomp audit arch, and the number of each system call a run is denied
#: (from the kernel's asm/unistd_64.h and asm-generic/unistd.h)
SYSCALLS = {
    "x86_64": (
        0xC000003E,
        {
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
            "mincore": 27,
            "madvise": 28,
            "readahead": 187,
            "fadvise64": 221,
            "remap_file_pages": 216,
            "preadv2": 327,
            "pwritev2": 328,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "cachestat": 451,
            "io_setup": 206,
            "io_submit": 209,
            "process_madvise": 440,
            "pidfd_open": 434,
            "clone3": 435,
            "clone": 56,
            "unshare": 272,
            "getsockopt": 55,
            "setsockopt": 54,
            "socket": 41,
            "setsid": 112,
            "bpf": 321,
            "perf_event_open": 298,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
            "mincore": 232,
            "madvise": 233,
            "readahead": 213,
            "fadvise64": 223,  # fadvise64_64 there, the same arguments
            "remap_file_pages": 234,
            "preadv2": 286,
            "pwritev2": 287,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "cachestat": 451,
            "io_setup": 0,
            "io_submit": 2,
            "process_madvise": 440,
            "pidfd_open": 434,
            "clone3": 435,
            "clone": 220,
            "unshare": 97,
            "getsockopt": 209,
            "setsockopt": 208,
            "socket": 198,
            "setsid": 157,
            "bpf": 280,
            "perf_event_open": 241,
        },
    ),
}
#: per machine: (the audit arch, the numbers of add_key, request_key and keyctl)
KEY_SYSCALLS = {
    machine: (arch, tuple(numbers[n] for n in ("add_key", "request_key", "keyctl")))
    for machine, (arch, numbers) in SYSCALLS.items()
}
MADV_COLD, MADV_PAGEOUT = 20, 21
POSIX_FADV_DONTNEED, POSIX_FADV_NOREUSE = 4, 5
#: what a run may not do: (system call, the errno it gets, None or (argument index, the
#: values of that argument that are denied, or an int: the bits of it any of which is
#: denied)). Why each:
#: - kernel keys outlive the processes that make them and are visible by uid: EPERM;
#: - the page cache is the machine's, shared by every run that reads the same read-only file
#:   (/usr, the interpreter), so whether a page of such a file is resident carries a value
#:   from one run to the next. Reading it back: mincore (on a mapping of the file), preadv2
#:   with RWF_NOWAIT (fails when not resident), cachestat, io_uring and Linux AIO (io_submit
#:   takes RWF_NOWAIT too). Setting it to "not resident" (a read only sets it): posix_fadvise
#:   DONTNEED (evicts) and NOREUSE, madvise COLD and PAGEOUT (deactivate, reclaim), and
#:   process_madvise (the same advice, on the caller itself without any capability).
#:   readahead and remap_file_pages have no use here but fill or map the cache.
#: - ENOSYS where a program treats it as "this kernel has none" and falls back: glibc's
#:   preadv2/pwritev2 without flags become preadv/pwritev (``os.preadv`` with no flags never
#:   calls preadv2), libunwind validates addresses with msync when mincore fails, io_uring
#:   and AIO users fall back to threads; EPERM for the madvise and fadvise advice alone (Python
#:   raises OSError, every library ignores a refused hint).
#: - machine-wide counters a run could move and read back (``docs/threat-model.md``,
#:   "Machine-wide counters in the numbers of new kernel objects"): the ids of the socket
#:   and network-namespace cookies (getsockopt SO_COOKIE, SO_NETNS_COOKIE: ENOPROTOOPT, as on
#:   a kernel without them, at any level, the filter reading only the option's number: no
#:   option of another level the course's code uses has these numbers; a sock_diag dump over netlink and a BPF program make socket
#:   cookies too: no netlink socket, EAFNOSUPPORT, and no bpf, ENOSYS); the inode number
#:   of a pidfd (pidfs numbers them by every pid the machine has made, a fork counter): no
#:   pidfd (pidfd_open, clone3 and clone's CLONE_PIDFD, SO_PEERPIDFD, SO_PASSPIDFD; glibc
#:   falls back to clone where clone3 is ENOSYS); no namespace (clone or unshare with any
#:   CLONE_NEW* flag, EPERM; ``no_more_namespaces`` is the second line where the run has a
#:   /proc of its own): a new namespace takes the lowest free namespace inode number and,
#:   for a network namespace, the next cookie, and in a namespace of its own a run could
#:   mount (the next mount id); the id of the scheduler's autogroup in
#:   /proc/<pid>/autogroup (one more for every new session on the machine): no setsid, EPERM
#:   (the run is given a process group of its own instead, ``zygote.zygote``); the id of a
#:   perf event (PERF_EVENT_IOC_ID: one more for every event opened on the machine, and a
#:   run may open events on itself): no perf_event_open, ENOSYS.
DENIED = (
    ("add_key", errno.EPERM, None),
    ("request_key", errno.EPERM, None),
    ("keyctl", errno.EPERM, None),
    ("mincore", errno.ENOSYS, None),
    ("preadv2", errno.ENOSYS, None),
    ("pwritev2", errno.ENOSYS, None),
    ("io_uring_setup", errno.ENOSYS, None),
    ("io_uring_enter", errno.ENOSYS, None),
    ("io_uring_register", errno.ENOSYS, None),
    ("cachestat", errno.ENOSYS, None),
    ("io_setup", errno.ENOSYS, None),
    ("io_submit", errno.ENOSYS, None),
    ("process_madvise", errno.ENOSYS, None),
    ("readahead", errno.ENOSYS, None),
    ("remap_file_pages", errno.ENOSYS, None),
    ("madvise", errno.EPERM, (2, (MADV_COLD, MADV_PAGEOUT))),
    ("fadvise64", errno.EPERM, (3, (POSIX_FADV_DONTNEED, POSIX_FADV_NOREUSE))),
    ("getsockopt", errno.ENOPROTOOPT, (2, (SO_COOKIE, SO_NETNS_COOKIE, SO_PEERPIDFD))),
    ("setsockopt", errno.ENOPROTOOPT, (2, (SO_PASSPIDFD,))),
    ("socket", errno.EAFNOSUPPORT, (0, (AF_NETLINK,))),
    ("bpf", errno.ENOSYS, None),
    ("pidfd_open", errno.ENOSYS, None),
    ("clone3", errno.ENOSYS, None),
    ("clone", errno.EPERM, (0, CLONE_PIDFD | NEW_NAMESPACES)),
    ("unshare", errno.EPERM, (0, NEW_NAMESPACES | CLONE_NEWTIME)),
    ("setsid", errno.EPERM, None),
    ("perf_event_open", errno.ENOSYS, None),
)
X32_BIT = 0x40000000  # x86_64's x32 system calls: denied, like any other ABI's
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
_LD, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, |JGE|K, BPF_RET|K
_JSET = 0x45  # BPF_JMP|JSET|K: jump if the accumulator has any of the bits


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _rule(number: int, code: int, args) -> list[tuple]:
    """The BPF of one DENIED entry, the system call number in the accumulator: skipped for
    another call; else the errno, or (an argument's low 32 bits, which the kernel reads as an
    int) the errno for the listed values, or for any of the bits of a mask, and ALLOW for any
    other."""
    deny = (_RET, 0, 0, SECCOMP_RET_ERRNO | code)
    if args is None:
        body = [deny]
    elif isinstance(args[1], int):
        index, bits = args
        body = [
            (_LD, 0, 0, 16 + 8 * index),
            (_JSET, 1, 0, bits),
            (_RET, 0, 0, SECCOMP_RET_ALLOW),
            deny,
        ]
    else:
        index, values = args
        n = len(values)
        body = [
            (_LD, 0, 0, 16 + 8 * index),  # seccomp_data.args[index], its low word
            *[(_JEQ, n - i, 0, value) for i, value in enumerate(values)],
            (_RET, 0, 0, SECCOMP_RET_ALLOW),
            deny,
        ]
    return [(_JEQ, 0, len(body), number), *body]


def seccomp_program(machine: str) -> list[tuple]:
    """The run's filter as (code, jt, jf, k): DENIED on this machine's ABI, and every system
    call of another ABI (i386 or x32, whose numbers differ) fails with EPERM."""
    arch, numbers = SYSCALLS[machine]
    rules = [op for name, code, args in DENIED for op in _rule(numbers[name], code, args)]
    other_abi = (_RET, 0, 0, SECCOMP_RET_ERRNO | errno.EPERM)
    head = [
        (_LD, 0, 0, 4),  # seccomp_data.arch
        (_JEQ, 0, 0, arch),  # jf set below: another ABI
        (_LD, 0, 0, 0),  # seccomp_data.nr
        (_JGE, 0, 0, X32_BIT),  # jt set below: x32
    ]
    tail = [(_RET, 0, 0, SECCOMP_RET_ALLOW), other_abi]
    program = head + rules + tail
    last = len(program) - 1
    program[1] = (_JEQ, 0, last - 2, arch)
    program[3] = (_JGE, last - 4, 0, X32_BIT)
    if max(max(jt, jf) for _code, jt, jf, _k in program) > 255:
        raise ValueError("a seccomp jump is too long")  # a DENIED list far longer than today's
    return program


def deny_syscalls() -> None:
    """Install the run's seccomp filter (``DENIED``); kept across fork and exec, and no
    process of the run can remove it. Sets no_new_privs (which an unprivileged process needs
    first): also where no fresh state can be built, the run gets the same filter."""
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    program = seccomp_program(os.uname().machine)
    filters = (_SockFilter * len(program))(*[_SockFilter(*op) for op in program])
    prog = _SockFprog(len(program), filters)
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp")


KEYCTL_CLEAR, KEYCTL_UNLINK, KEYCTL_GET_PERSISTENT = 7, 9, 22
KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = -3, -4, -5


def in_initial_user_namespace() -> bool:
    """True where uids are the machine's own (as root the sandbox keeps the slot's uid there)."""
    try:
        with open("/proc/self/uid_map") as handle:
            return handle.read().split() == ["0", "0", "4294967295"]
    except OSError:
        return False


def clear_uid_keyrings() -> bool:
    """Empty this uid's user, user-session and persistent keyrings (the sweep's second line:
    as root they belong to the slot's uid on the machine and outlive every process, so keys
    an earlier grader left there, or a run that could not get a fresh state, go). Called only
    where the uid is the slot's own (``in_initial_user_namespace``), never an instructor's."""
    machine = os.uname().machine
    if machine not in KEY_SYSCALLS:
        return False
    keyctl = KEY_SYSCALLS[machine][1][2]
    cleared = True
    for ring in (KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING):
        cleared = _libc.syscall(keyctl, KEYCTL_CLEAR, ctypes.c_long(ring)) == 0 and cleared
    persistent = _libc.syscall(
        keyctl, KEYCTL_GET_PERSISTENT, ctypes.c_long(-1), ctypes.c_long(KEY_SPEC_SESSION_KEYRING)
    )
    if persistent > 0:  # only where the kernel has persistent keyrings
        cleared = _libc.syscall(keyctl, KEYCTL_CLEAR, ctypes.c_long(persistent)) == 0 and cleared
        _libc.syscall(
            keyctl,
            KEYCTL_UNLINK,
            ctypes.c_long(persistent),
            ctypes.c_long(KEY_SPEC_SESSION_KEYRING),
        )
    return cleared


def _pass_on(status: int) -> None:
    """End this process the way the run's init ended: the same exit status, or the same signal
    (the zygote reports it, and the trusted side tells a CPU-time kill from a crash by it)."""
    if os.WIFSIGNALED(status):
        import resource
        import signal

        number = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        try:
            signal.signal(number, signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL, SIGSTOP: their action is the default already
            pass
        os.kill(os.getpid(), number)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 70)


def _become_init() -> None:
    """After unshare(CLONE_NEWPID), which places the caller's children (not the caller) in the
    new pid namespace: fork; the child returns as pid 1 of it, the parent holds nothing (every
    descriptor closed), waits for it and ends the same way. When pid 1 exits, the kernel kills
    every process left in its namespace."""
    pid = os.fork()
    if pid == 0:
        return
    os.closerange(3, 1 << 16)  # the run's pipes stay with the run alone
    while True:
        try:
            _pid, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    _pass_on(status)


#: /proc files that show machine-wide counters every process on the machine moves (forks,
#: context switches, interrupts, page faults, disk sectors, pages of each kind, the load
#: average and last pid, idle time, pressure stall times, open files, dentries, inodes, AIO
#: requests, ptys): another run changes them and this one would read the change. Each is
#: covered by a read-only copy of its text with every number 0, so its shape (the CPU lines
#: glibc counts CPUs by, the devices, the field names a parser looks for) stays and no value
#: does (the zygote makes the copies once: ``proc_masks``).
PROC_ZEROED = (
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
)
#: lists whose length is state another run changes: every lock on the machine, the modules
#: and crypto algorithms loaded (a run may make the kernel load one: a socket of a family not
#: yet loaded), kernel symbols (modules' among them), keys per uid, slab caches: empty
PROC_EMPTIED = ("locks", "modules", "crypto", "kallsyms", "key-users", "slabinfo", "vmallocinfo")
#: meminfo: read by libraries that size themselves by the machine's memory, so a plausible
#: constant: the total as it is (no run changes it), all of it free and available, the
#: huge page size as it is, every other number 0 (the free and cached amounts move with what
#: every process, and every run's page cache, holds). entropy_avail: 256 since Linux 5.18.
PROC_KEPT_MEMINFO = ("MemTotal", "Hugepagesize", "VmallocTotal")
PROC_CONSTANT = {"sys/kernel/random/entropy_avail": "256\n"}
#: folders of per-interrupt counters: covered by an empty read-only folder
PROC_HIDDEN = ("irq",)
MASK_STAGING = "/tmp/.proc-masks"  # a tmpfs of its own for the copies, detached once bound


def _zeroed(text: str) -> str:
    """``text`` with every number 0 ("0.00" where it had a fraction) and every run of blanks
    one blank (the padding of a right-aligned column tells how many digits it held); names
    such as cpu0 or sda1 keep their digits (no word boundary inside them)."""
    import re

    fractions = re.sub(r"(?<![\w.])\d+\.\d+(?![\w.])", "0.00", text)
    return _blanks(re.sub(r"(?<![\w.])\d+(?![\w.])", "0", fractions))


def _blanks(text: str) -> str:
    """Every run of spaces and tabs as one (a tab where the run has one)."""
    import re

    return re.sub(r" +", " ", re.sub(r"[ \t]*\t[ \t]*", "\t", text))


def _meminfo(text: str) -> str:
    """meminfo as PROC_KEPT_MEMINFO says: the total, all of it free and available."""
    total = next(
        (line.partition(":")[2] for line in text.splitlines() if line.startswith("MemTotal:")), ""
    )
    out = []
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("MemFree", "MemAvailable"):
            rest = total
        elif key not in PROC_KEPT_MEMINFO:
            rest = _zeroed(rest)
        out.append(f"{key}:{rest}")
    return _blanks("\n".join(out) + "\n")


def _cgroups(text: str) -> str:
    """/proc/cgroups with each controller's count of cgroups 0 (the grader makes one per run,
    and every other cgroup on the machine counts): its hierarchy and "enabled" stay."""
    out = []
    for line in text.splitlines():
        fields = line.split("\t")
        if not line.startswith("#") and len(fields) >= 3:
            fields[2] = "0"
        out.append("\t".join(fields))
    return "\n".join(out) + "\n"


def _read(path: str) -> str | None:
    """The text of a /proc file, "" where this uid may not read it, None where it is absent."""
    if not os.path.exists(path):
        return None
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return ""


def proc_masks(root: str = "/proc") -> dict[str, str]:
    """{path under root: the text a run reads there instead} for the files this kernel has."""
    masks = {}
    for name in PROC_ZEROED:
        text = _read(f"{root}/{name}")
        if text is not None:
            masks[name] = _zeroed(text)
    for name in PROC_EMPTIED:
        if os.path.exists(f"{root}/{name}"):
            masks[name] = ""
    cgroups = _read(f"{root}/cgroups")
    if cgroups is not None:
        masks["cgroups"] = _cgroups(cgroups)
    meminfo = _read(f"{root}/meminfo")
    if meminfo is not None:
        masks["meminfo"] = _meminfo(meminfo)
    for name, text in PROC_CONSTANT.items():
        if os.path.exists(f"{root}/{name}"):
            masks[name] = text
    return masks


#: the user namespace's limits on new namespaces of each kind (``user.max_*_namespaces``)
NAMESPACE_LIMITS = "/proc/sys/user"


def no_more_namespaces() -> None:
    """Set every ``max_*_namespaces`` of the run's own user namespace to 0, while it still holds
    CAP_SYS_RESOURCE there: the kernel checks these limits in every user namespace up the
    chain, so nothing the run starts can make a namespace of any kind (it could before: a
    user namespace of its own, in it network and mount namespaces and mounts). A new network
    namespace takes the next network-namespace cookie of the machine, a new namespace of any
    kind the lowest free namespace inode number and a mount the next mount id: each one a
    counter the next run reads (``docs/threat-model.md``)."""
    names = sorted(n for n in os.listdir(NAMESPACE_LIMITS) if n.endswith("_namespaces"))
    if "max_user_namespaces" not in names:
        raise OSError(errno.ENOENT, "no user.max_user_namespaces in this kernel")
    for name in names:
        _write(f"{NAMESPACE_LIMITS}/{name}", "0")


def _bind_read_only(source: str, target: str) -> None:
    _check(_libc.mount(source.encode(), target.encode(), None, MS_BIND, None), f"cover {target}")
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
    _check(_libc.mount(None, target.encode(), None, flags, None), f"make {target} read-only")


def mask_proc(masks: dict[str, str]) -> None:
    """Cover the machine-wide counters of the run's /proc (``masks``, from ``proc_masks``,
    and ``PROC_HIDDEN``) with read-only copies, in the run's own mount namespace. The run
    holds no capability afterwards, so it cannot unmount them; in a user namespace of its own
    they would be locked mounts, which it cannot unmount either, and under which the kernel
    refuses it a /proc of its own ("too revealing"): no way to the real counters is left."""
    os.mkdir(MASK_STAGING, 0o700)
    _mount_tmpfs(MASK_STAGING, 4 << 20)
    for number, (name, text) in enumerate(sorted(masks.items())):
        copy = f"{MASK_STAGING}/{number}"
        with open(copy, "w") as handle:
            handle.write(text)
        _bind_read_only(copy, f"/proc/{name}")
    os.mkdir(f"{MASK_STAGING}/empty", 0o555)
    for name in PROC_HIDDEN:
        if os.path.isdir(f"/proc/{name}"):
            _bind_read_only(f"{MASK_STAGING}/empty", f"/proc/{name}")
    _check(_libc.umount2(MASK_STAGING.encode(), MNT_DETACH), "detach the copies")
    os.rmdir(MASK_STAGING)


def enter_fresh_state(tmp_bytes: int, own_pids: bool = True, masks: dict | None = None) -> None:
    """In the forked child, before any student code: the namespaces, mounts and keyring above.
    ``masks``: ``proc_masks()`` made once by the zygote (they hold no number, only the files'
    shape, which no run changes), else made here.
    Returns in the process that runs the submission: with ``own_pids``, pid 1 of a pid
    namespace of its own (its parent, outside it, never returns from here)."""
    uid, gid = os.getuid(), os.getgid()
    if os.uname().machine not in SYSCALLS:
        raise Unavailable(errno.ENOSYS, f"the system calls of {os.uname().machine} are not known")
    # the zygote is not dumpable, so /proc/self/* of its fork belongs to root: this child may
    # own its /proc files again (it is the submission's own process) to write its id maps
    _check(_libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "dumpable")
    # a cgroup namespace too, rooted at the run's own cgroup (joined before this): the run's
    # /proc/self/cgroup reads "/", not the run's number on the slot
    flags = CLONE_NEWUSER | CLONE_NEWIPC | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWUTS
    flags |= CLONE_NEWCGROUP
    if _libc.unshare(flags | (CLONE_NEWPID if own_pids else 0)) != 0:
        code = ctypes.get_errno()
        if code in (errno.EPERM, errno.ENOSPC, errno.EINVAL, errno.EUSERS):
            raise Unavailable(code, f"no user namespace: {os.strerror(code)}")
        raise OSError(code, f"unshare: {os.strerror(code)}")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    # nothing mounted here propagates back to the zygote's mounts
    _check(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    # read-only binds under /tmp (a virtualenv or a release that lives there) are held by
    # descriptor, covered by the fresh tmpfs, and bound again at the same place
    held = [(point, os.open(point, os.O_PATH)) for point in _mounts_under("/tmp")]
    _mount_tmpfs("/tmp", tmp_bytes)
    for point, fd in held:
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            os.makedirs(point, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(point), exist_ok=True)
            open(point, "a").close()
        source = f"/proc/self/fd/{fd}".encode()
        _check(_libc.mount(source, point.encode(), None, MS_BIND | MS_REC, None), "bind again")
        os.close(fd)
    _mount_tmpfs("/dev/shm", min(SHM_BYTES, tmp_bytes))
    # the loopback stays down: a packet over it would count in /proc/net/softnet_stat, the
    # machine's per CPU, which no mask covers (it is /proc/<pid>/net/... for every pid)
    if own_pids:
        _become_init()
        # the /proc of this pid namespace (a procfs shows the namespace of whoever mounts it)
        _check(
            _libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None),
            "mount a fresh /proc",
        )
    if own_pids:
        no_more_namespaces()
    # on the fresh /proc, or else on the sandbox's, in this mount namespace
    mask_proc(proc_masks() if masks is None else masks)
    # the session keyring came with the fork, shared with the zygote: join a new, empty one
    keyctl = KEY_SYSCALLS[os.uname().machine][1][2]
    if _libc.syscall(keyctl, KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"a new session keyring: {os.strerror(code)}")
    drop_capabilities()
    deny_syscalls()
    os.chdir("/tmp")


if __name__ == "__main__":  # run as a slot's uid by the trusted side, before its sandbox starts
    import sys

    if sys.argv[1:] == ["--clear-keyrings"]:
        # a session keyring of our own first: the persistent keyring is linked into it
        _libc.syscall(KEY_SYSCALLS[os.uname().machine][1][2], KEYCTL_JOIN_SESSION_KEYRING, None)
        sys.exit(0 if clear_uid_keyrings() else 1)
