"""Run a command as `nobody` with this checkout, its virtualenv and its interpreter reachable,
even where they live under a folder only root can enter (a home directory is 0700).

Nothing on disk changes: the command runs in a mount namespace of its own where each such
folder on the way is covered by a tmpfs (mode 0755) holding only the entries on the way, each
bound back from the original. The rest of the private folder stays out of sight."""

from __future__ import annotations

import os
import pwd
import shlex
import stat
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _needed_paths() -> list[Path]:
    """The checkout, the virtualenv's python (and what its links resolve to), the interpreter."""
    paths = [REPO, Path(sys.prefix), Path(sys.executable).parent]
    paths += [Path(os.path.realpath(sys.executable)).parent, Path(sys.base_prefix)]
    return [p for p in paths if p.exists()]


def _private_ancestors() -> dict[Path, set[str]]:
    """{folder `nobody` cannot search: the names inside it that the needed paths go through}."""
    covers: dict[Path, set[str]] = {}
    for path in _needed_paths():
        for parent, child in zip(path.parents, (path, *path.parents)):
            mode = parent.stat().st_mode
            if not (mode & stat.S_IXOTH):
                covers.setdefault(parent, set()).add(child.name)
    return covers


def nobody_command(argv: list[str]) -> list[str]:
    """``argv`` as `nobody` (no supplementary groups); needs root."""
    nobody = pwd.getpwnam("nobody")
    become = [
        "/usr/bin/setpriv",
        f"--reuid={nobody.pw_uid}",
        f"--regid={nobody.pw_gid}",
        "--clear-groups",
    ]
    covers = _private_ancestors()
    if not covers:
        return become + argv
    steps = []
    for number, (folder, names) in enumerate(sorted(covers.items(), key=lambda c: len(c[0].parts))):
        keep = f"/tmp/.nobody-view-{os.getpid()}-{number}"
        quoted = shlex.quote(str(folder))
        steps += [f"mkdir -p {keep}", f"mount --bind {quoted} {keep}"]
        steps.append(f"mount -t tmpfs -o mode=0755,size=1m nobody-view {quoted}")
        for name in sorted(names):
            inside = shlex.quote(str(folder / name))
            original = shlex.quote(f"{keep}/{name}")
            steps += [f"if [ -d {original} ]; then mkdir {inside}; else touch {inside}; fi"]
            steps.append(f"mount --bind {original} {inside}")
    script = " && ".join(steps) + ' && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"] + (
        become + argv
    )


def environment(home: Path, tmp: Path) -> dict:
    """What the command needs in its environment: this checkout's packages first."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "PYTHONPATH": str(REPO),
    }
