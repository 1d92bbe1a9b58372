"""Fresh kernel state for one run, built in the forked child before any student code runs.

Bound read-only into the sandbox beside ``zygote.py`` (standard library and ctypes only). The
child of a run calls ``enter_fresh_state`` right after the fork:

- a user namespace of its own (its uid and gid mapped to themselves), which owns
- an IPC namespace of its own: System V segments, semaphores, message queues and POSIX
  message queues made by the submission die with its last process;
- a network namespace of its own (a loopback brought up fresh: its byte counters,
  ``/proc/net/*``, sockets and ports start empty) and a UTS namespace of its own (the host name);
- a pid namespace of its own, where the run's process is pid 1 (``_become_init``: the child
  that unshared it only waits and passes on its exit status), with a fresh ``/proc`` of that
  namespace: the pids a run sees start at 1, and when it exits the kernel kills everything
  it started. Where the sandbox's own ``/proc`` has locked mounts over parts of it (bwrap run
  as root covers ``/proc/irq``, ``/proc/bus``...), the kernel refuses a fresh ``/proc`` in a
  user namespace below it, and the run keeps the sandbox's pid namespace (``own_pids``
  False, found once by the zygote);
- a mount namespace of its own, with a fresh size-capped tmpfs on ``/tmp`` (the run's working
  directory is made there) and on ``/dev/shm``: files and memory in them are freed when the
  run's last process exits, and the next run never sees them;
- a new anonymous session keyring, and the user keyring of a user namespace no other run
  shares: no key outlives the run;
- then every capability is dropped (bounding set, permitted, effective, inheritable) and
  ``no_new_privs`` set, so the student's code holds none of the power used to build this.

Where the kernel refuses a user namespace (``user.max_user_namespaces`` is 0, or a distribution
switch forbids unprivileged ones), ``enter_fresh_state`` raises ``Unavailable`` before changing
anything, and the zygote falls back to sweeping (``zygote._scrub``): ``describe_mode`` says so.
"""

from __future__ import annotations

import ctypes
import errno
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x8, 0x1000, 0x4000, 0x40000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
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


#: per machine: (the seccomp audit arch, the numbers of add_key, request_key and keyctl)
KEY_SYSCALLS = {"x86_64": (0xC000003E, (248, 249, 250)), "aarch64": (0xC00000B7, (217, 218, 219))}
X32_BIT = 0x40000000  # x86_64's x32 system calls: denied, like any other ABI's
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def deny_keyrings() -> None:
    """A seccomp filter: add_key, request_key and keyctl fail with EPERM, and so does every
    system call of another ABI (i386 or x32, whose numbers differ). Kernel keys outlive the
    processes that make them and are visible by uid, so a run may make none."""
    arch, numbers = KEY_SYSCALLS[os.uname().machine]
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, |JGE|K, BPF_RET|K
    deny = SECCOMP_RET_ERRNO | errno.EPERM
    n = len(numbers)
    program = [
        (ld, 0, 0, 4),  # seccomp_data.arch
        (jeq, 0, n + 3, arch),  # another ABI: deny
        (ld, 0, 0, 0),  # seccomp_data.nr
        (jge, n + 1, 0, X32_BIT),
        *[(jeq, n - i, 0, number) for i, number in enumerate(numbers)],
        (ret, 0, 0, SECCOMP_RET_ALLOW),
        (ret, 0, 0, deny),
    ]
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


def _loopback_up() -> None:
    """Bring up the loopback of the run's fresh network namespace (it starts down), as bwrap
    does for the sandbox's: a run may talk to itself over 127.0.0.1, and only to itself."""
    import fcntl
    import socket
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(probe, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(probe, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


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


def enter_fresh_state(tmp_bytes: int, own_pids: bool = True) -> None:
    """In the forked child, before any student code: the namespaces, mounts and keyring above.
    Returns in the process that runs the submission: with ``own_pids``, pid 1 of a pid
    namespace of its own (its parent, outside it, never returns from here)."""
    uid, gid = os.getuid(), os.getgid()
    if os.uname().machine not in KEY_SYSCALLS:
        raise Unavailable(errno.ENOSYS, f"keyctl's number on {os.uname().machine} is not known")
    # the zygote is not dumpable, so /proc/self/* of its fork belongs to root: this child may
    # own its /proc files again (it is the submission's own process) to write its id maps
    _check(_libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "dumpable")
    flags = CLONE_NEWUSER | CLONE_NEWIPC | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWUTS
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
    _loopback_up()
    if own_pids:
        _become_init()
        # the /proc of this pid namespace (a procfs shows the namespace of whoever mounts it)
        _check(
            _libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None),
            "mount a fresh /proc",
        )
    # the session keyring came with the fork, shared with the zygote: join a new, empty one
    keyctl = KEY_SYSCALLS[os.uname().machine][1][2]
    if _libc.syscall(keyctl, KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"a new session keyring: {os.strerror(code)}")
    drop_capabilities()
    deny_keyrings()
    os.chdir("/tmp")


if __name__ == "__main__":  # run as a slot's uid by the trusted side, before its sandbox starts
    import sys

    if sys.argv[1:] == ["--clear-keyrings"]:
        # a session keyring of our own first: the persistent keyring is linked into it
        _libc.syscall(KEY_SYSCALLS[os.uname().machine][1][2], KEYCTL_JOIN_SESSION_KEYRING, None)
        sys.exit(0 if clear_uid_keyrings() else 1)
