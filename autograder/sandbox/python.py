"""The Python a sandbox runs: the interpreter, its site-packages, what the zygote preloads.

``python_paths`` finds the real interpreter this process runs and the site-packages folders
it needs (both bound read-only into the sandbox by ``autograder.sandbox.command``);
``preload_for`` says which modules a zygote imports before it forks, by the top-level
packages the assignment's notebook imports.
"""

from __future__ import annotations

import os
import sys
import sysconfig

# What a zygote imports before it forks, by the top-level package the assignment's notebook
# imports: NumPy always (the contract needs it); PyTorch (about a second) and matplotlib only
# for a notebook that uses them, so a NumPy-only assignment's sandboxes start in a fraction
# of the time. A submission that imports something else pays for it in its own budget.
PRELOADS = {
    "numpy": ("numpy",),
    "torch": ("torch", "torch.nn", "torch.nn.functional"),
    "matplotlib": ("matplotlib", "matplotlib.pyplot"),
}


def preload_for(imports) -> tuple[str, ...]:
    """The modules a zygote preloads for a notebook that imports these top-level packages."""
    wanted = {"numpy", *imports}
    return tuple(m for package, modules in PRELOADS.items() if package in wanted for m in modules)


FULL_PRELOAD = preload_for(PRELOADS)


def python_paths() -> tuple[str, list[str]]:
    """(the real interpreter, the site-packages directories it needs)."""
    # the interpreter this process really runs (an ordinary user may not reach the one root
    # resolves the virtualenv's link to, e.g. under /root): the first candidate we can execute
    candidates = [
        os.path.realpath(sys.executable),
        os.path.realpath(getattr(sys, "_base_executable", "")),
        os.path.join(
            sys.base_prefix, "bin", f"python{sys.version_info.major}.{sys.version_info.minor}"
        ),
    ]
    interpreter = next((c for c in candidates if c and os.access(c, os.X_OK)), candidates[0])
    # each resolved: a virtualenv reached through a link (``.venv -> /root/.../.venv``) is
    # bound, and made reachable for a slot's uid, where its files really are
    site = {
        os.path.realpath(p)
        for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
        if os.path.isdir(p)
    }
    return interpreter, sorted(site)
