"""`autograder.checking.nbgrader_api`: nbgrader's gradebook API without its Jupyter server
extensions, and the whole package for whatever asks for more later in the same process.
Each case runs in a fresh interpreter (what is imported is the point)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_gradebook_api_comes_without_the_server_extensions_until_asked_for():
    out = _run(
        """
import importlib.metadata, sys
from autograder.checking import nbgrader_api
api = nbgrader_api.api()
assert nbgrader_api.utils().parse_utc("2026-12-06 10:00:00").year == 2026
assert api.Gradebook.__module__ == "nbgrader.api" and issubclass(api.MissingEntry, Exception)
heavy = ("nbgrader.server_extensions", "jupyter_server", "nbconvert")
print("before", sorted(m for m in heavy if m in sys.modules))
import nbgrader
assert nbgrader.api is api  # one module, whichever way it was reached
print("version", nbgrader.__version__ == importlib.metadata.version("nbgrader"))
print("after", sorted(m for m in heavy if m in sys.modules))
print("points", nbgrader._jupyter_server_extension_points())
from nbgrader.apps import NbGraderAPI
print("apps", NbGraderAPI.__name__)
try:
    nbgrader.no_such_thing
except AttributeError as err:
    print("missing", err)
"""
    )
    assert "before []" in out, out
    assert "version True" in out, out
    assert "after ['jupyter_server', 'nbconvert', 'nbgrader.server_extensions']" in out, out
    assert "points [{'module': 'nbgrader'}]" in out, out
    assert "apps NbGraderAPI" in out, out
    assert "missing module 'nbgrader' has no attribute 'no_such_thing'" in out, out


def test_an_nbgrader_imported_first_is_used_as_it_is():
    out = _run(
        """
import nbgrader, nbgrader.api
from autograder.checking import nbgrader_api
print(nbgrader_api.api() is nbgrader.api, "__getattr__" in vars(nbgrader))
"""
    )
    assert out.split() == ["True", "False"], out
