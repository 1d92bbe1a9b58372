"""nbgrader's gradebook API (``nbgrader.api``, ``nbgrader.utils``) without its Jupyter extensions.

``import nbgrader.api`` first runs ``nbgrader/__init__.py``, which loads the package's Jupyter
server extensions (the formgrader, the assignment list: Jupyter Server, Tornado's web stack,
nbconvert, about 900 modules). The gradebook needs none of them, and in a grading call they
cost about 0.4 s of CPU to import and 0.1 s more at exit, on a machine whose two cores are
busy with sandboxes (`bench/grading.py`). So where nbgrader is not imported yet, `api` and
`utils` put the package in place unexecuted (its ``__path__`` set, so its modules import as
usual, also as ``from . import utils``) and run its ``__init__`` the first time anything
else of the package's own is asked for (``nbgrader.__version__``, an extension point):
whatever imports nbgrader later in the same process gets the whole package, as if it had
been imported first.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from types import ModuleType

_LOCK = threading.Lock()


def _package() -> None:
    """``nbgrader`` in ``sys.modules``: the real one if imported, else unexecuted (above)."""
    with _LOCK:
        if "nbgrader" in sys.modules:
            return
        spec = importlib.util.find_spec("nbgrader")
        if spec is None or spec.loader is None:
            raise ModuleNotFoundError("No module named 'nbgrader'", name="nbgrader")
        package = importlib.util.module_from_spec(spec)  # __path__, __spec__; nothing run
        done = threading.Lock()

        def __getattr__(name: str):
            if importlib.util.find_spec(f"nbgrader.{name}") is not None:  # a module of it
                return importlib.import_module(f"nbgrader.{name}")  # (`from . import utils`)
            with done:
                if package.__dict__.get("__getattr__") is __getattr__:
                    del package.__getattr__
                    spec.loader.exec_module(package)  # nbgrader/__init__.py, once
            try:
                return package.__dict__[name]
            except KeyError:
                raise AttributeError(f"module 'nbgrader' has no attribute {name!r}") from None

        package.__getattr__ = __getattr__
        sys.modules["nbgrader"] = package


def api() -> ModuleType:
    """``nbgrader.api``: `Gradebook`, `MissingEntry`..."""
    _package()
    return importlib.import_module("nbgrader.api")


def utils() -> ModuleType:
    """``nbgrader.utils``: `parse_utc`..."""
    _package()
    return importlib.import_module("nbgrader.utils")
