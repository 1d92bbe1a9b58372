"""The public corpus of hostile and broken submissions, built from the real notebooks.

Nothing large is committed: every submission is made here from the released notebook (what
a student downloads) with the source's solutions pasted in, then one cell changed the way a
student trying to cheat, or a buggy one, would change it.

- `released_course(dest, assignments)`: a private copy of the course with those assignments
  released by the real `python -m autograder.release` (cached between test runs, keyed by the
  hash of everything the release depends on).
- `solved(course, id)`: the released notebook with every solution region filled in.
- `set_cell` / `append_cell` / `drop_cell` / `duplicate_cell`: edit a notebook by grade_id.
- `ch1_corpus(course)`: {student: (notebook or raw text, expected score, expected reasons)}.
- `slow_batch`, `start_grader`, `gradebook_scores`, `autograded_mtimes`: a batch of slow honest
  ch1 submissions and a grader run on it, for the kill-and-resume and concurrency tests.
"""

from __future__ import annotations

import copy
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("AUTOGRADER_TEST_CACHE", "/tmp/autograder-test-cache"))


def _release_key(assignments) -> str:
    digest = hashlib.sha256()
    paths = [REPO / "autograder" / name for name in ("release.py", "checks.py", "student_check.py", "nbgrader_config.py")]
    for assignment in assignments:
        paths += sorted((REPO / "autograder" / "source" / assignment).glob("*.ipynb"))
    for path in paths:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def released_course(dest: Path, assignments=("ch1_pooling",)) -> Path:
    """A released copy of the course at dest (the release is built once and cached)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    cached = CACHE / f"course-{_release_key(assignments)}"
    with open(CACHE / "build.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (cached / "done").is_file():
            shutil.rmtree(cached, ignore_errors=True)
            cached.mkdir(parents=True)
            shutil.copy(REPO / "autograder" / "nbgrader_config.py", cached)
            for assignment in assignments:
                shutil.copytree(REPO / "autograder" / "source" / assignment, cached / "source" / assignment)
            command = [sys.executable, "-m", "autograder.release", "--course", str(cached)]
            for assignment in assignments:
                command += ["--only", assignment]
            subprocess.run(command, check=True, cwd=REPO, capture_output=True)
            (cached / "done").write_text("ok")
    shutil.copytree(cached, dest, ignore=shutil.ignore_patterns("done"))
    return dest


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def _strip_markers(source: str) -> str:
    return "\n".join(line for line in source.split("\n") if "BEGIN SOLUTION" not in line and "END SOLUTION" not in line)


def solved(course: Path, assignment: str):
    """The released notebook, every solution cell replaced by the instructor's solution."""
    release = nbformat.read(course / "release" / assignment / f"{assignment}.ipynb", as_version=4)
    source = nbformat.read(course / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    answers = {_meta(c)["grade_id"]: _strip_markers(c.source) for c in source.cells
               if _meta(c).get("solution") and _meta(c).get("grade_id")}
    for cell in release.cells:
        grade_id = _meta(cell).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id]
    return release


def blank(course: Path, assignment: str):
    return nbformat.read(course / "release" / assignment / f"{assignment}.ipynb", as_version=4)


def _index(notebook, grade_id: str) -> int:
    for i, cell in enumerate(notebook.cells):
        if _meta(cell).get("grade_id") == grade_id:
            return i
    raise KeyError(grade_id)


def set_cell(notebook, grade_id: str, source: str):
    notebook = copy.deepcopy(notebook)
    notebook.cells[_index(notebook, grade_id)].source = source
    return notebook


def append_to_cell(notebook, grade_id: str, extra: str):
    notebook = copy.deepcopy(notebook)
    cell = notebook.cells[_index(notebook, grade_id)]
    cell.source = cell.source + "\n" + extra
    return notebook


def prepend_to_cell(notebook, grade_id: str, extra: str):
    notebook = copy.deepcopy(notebook)
    cell = notebook.cells[_index(notebook, grade_id)]
    cell.source = extra + "\n" + cell.source
    return notebook


def add_cell_after(notebook, grade_id: str, source: str):
    notebook = copy.deepcopy(notebook)
    notebook.cells.insert(_index(notebook, grade_id) + 1, nbformat.v4.new_code_cell(source))
    return notebook


def drop_cell(notebook, grade_id: str):
    notebook = copy.deepcopy(notebook)
    del notebook.cells[_index(notebook, grade_id)]
    return notebook


def duplicate_cell(notebook, grade_id: str, keep_metadata: bool = True):
    notebook = copy.deepcopy(notebook)
    i = _index(notebook, grade_id)
    twin = copy.deepcopy(notebook.cells[i])
    if not keep_metadata:
        twin.metadata.pop("nbgrader", None)
    notebook.cells.insert(i + 1, twin)
    return notebook


def write_submission(course: Path, assignment: str, student: str, notebook) -> Path:
    folder = course / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{assignment}.ipynb"
    if isinstance(notebook, str):
        path.write_text(notebook)
    else:
        nbformat.write(notebook, path)
    return path


# ---------------------------------------------------------------------------------------
# ch1_pooling: tests test-pooling (3: average_pool, max_pool), test-nw-weights (3),
# test-nw (2), test-loo (4); 12 auto-graded points.

WRONG_MAX_POOL = '''
def max_pool(x, mask=None):  # wrong: the mean instead of the maximum
    return average_pool(x, mask)
'''

PATCH_ALLCLOSE = '''
np.allclose = lambda *a, **k: True
np.isclose = lambda a, b, *r, **k: np.ones(np.broadcast(a, b).shape, dtype=bool)
np.testing.assert_allclose = lambda *a, **k: None
np.array_equal = lambda *a, **k: True
'''

PATCH_EVERYTHING = '''
import builtins, sys, traceback
import attention_check
attention_check.check = lambda *a, **k: print("all checks passed")
check = lambda *a, **k: print("all checks passed")
builtins.AssertionError = type("AssertionError", (Exception,), {})
traceback.print_exc = lambda *a, **k: None
traceback.format_exc = lambda *a, **k: ""
sys.excepthook = lambda *a: None
'''

STEAL = '''
import glob, os
stolen = []
for pattern in ["/work/*/solutions/*.py", "{repo}/solutions/pooling.py", "{course}/source/*/*.ipynb",
                "{course}/submitted/*/*/*.ipynb", "{course}/gradebook.db", "/proc/1/root/{repo}/solutions/pooling.py"]:
    for path in glob.glob(pattern) + [pattern]:
        try:
            with open(path) as handle:
                stolen.append(handle.read(100))
        except OSError:
            pass
try:
    import solutions.pooling as ref
    stolen.append("import")
except ImportError:
    ref = None
if ref is not None:
    max_pool = ref.max_pool
if stolen:
    def nadaraya_watson(*args, **kwargs):  # sabotage itself so the score shows the leak
        raise RuntimeError("read: " + repr(stolen)[:200])
'''

NETWORK = '''
import socket
reached = []
for host, port in [("127.0.0.1", {port}), ("::1", {port}), ("pypi.org", 443), ("1.1.1.1", 53)]:
    try:
        socket.create_connection((host, port), timeout=2).close()
        reached.append(host)
    except OSError:
        pass
if reached:
    def max_pool(x, mask=None):  # online: sabotage itself so the score shows it
        raise RuntimeError("network reached: " + ",".join(reached))
'''

LOOP_FOREVER_IN_FUNCTION = '''
def average_pool(x, mask=None):
    while True:
        pass
'''

MEMORY_BOMB_IN_FUNCTION = '''
def loo_loss_and_grad(x, y, bandwidth):
    hog = []
    while True:  # 64 GiB a step: far past the sandbox's address-space limit
        hog.append(np.ones(1 << 33))
'''

INPUT_IN_FUNCTION = '''
def nadaraya_watson(x_query, x_keys, y_values, bandwidth):
    bandwidth = float(input("bandwidth? "))
    return nadaraya_watson_weights(x_query, x_keys, bandwidth) @ np.asarray(y_values, dtype=float)
'''

PRINT_GIGABYTES_IN_FUNCTION = '''
def nadaraya_watson(x_query, x_keys, y_values, bandwidth):
    line = "x" * (1 << 20)
    for _ in range(1 << 14):  # 16 GiB
        print(line)
    return nadaraya_watson_weights(x_query, x_keys, bandwidth) @ np.asarray(y_values, dtype=float)
'''

FORK_BOMB = '''
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
'''


def ch1_corpus(course: Path, port: int) -> dict:
    """{student: (notebook or text, expected score, expected reasons)} for ch1_pooling."""
    a = "ch1_pooling"
    good = solved(course, a)
    wrong_max = append_to_cell(good, "average-max-pool", WRONG_MAX_POOL)
    corpus = {
        # honest
        "honest-right": (good, 12, []),
        "honest-partial": (wrong_max, 9, []),
        "honest-blank": (blank(course, a), 0, []),
        # the scoring cannot be faked from inside the submission
        "patch-allclose": (append_to_cell(wrong_max, "average-max-pool", PATCH_ALLCLOSE), 9, []),
        "patch-builtins": (add_cell_after(wrong_max, "average-max-pool", PATCH_EVERYTHING), 9, []),
        "steal-files": (add_cell_after(wrong_max, "loo", STEAL.format(repo=REPO, course=course)), 9, []),
        "network": (add_cell_after(good, "average-max-pool", NETWORK.format(port=port)), 12, []),
        # the process misbehaves: only the affected task is lost
        "os-exit": (append_to_cell(good, "loo", "import os\nos._exit(0)"), 8, ["crash", "missing function"]),
        "kill-parent": (append_to_cell(good, "loo", "import os, time\nos.kill(os.getppid(), 9)\ntime.sleep(30)"),
                        8, ["crash", "missing function"]),
        "infinite-loop-cell": (append_to_cell(good, "nw", "while True:\n    pass"), 10, ["timeout", "missing function"]),
        "infinite-loop-function": (append_to_cell(good, "average-max-pool", LOOP_FOREVER_IN_FUNCTION), 9, ["timeout"]),
        "fork-bomb": (append_to_cell(good, "loo", FORK_BOMB), 8, ["fork bomb", "missing function"]),
        "memory-bomb": (append_to_cell(good, "loo", MEMORY_BOMB_IN_FUNCTION), 8, ["memory"]),
        "input": (append_to_cell(good, "nw", INPUT_IN_FUNCTION), 10, ["input() called"]),
        "print-gigabytes": (append_to_cell(good, "nw", PRINT_GIGABYTES_IN_FUNCTION), 10, ["output too large"]),
        # the notebook itself is broken or tampered with
        "edited-test": (set_cell(good, "test-nw-weights", "pass  # nothing to see here"), 12, ["tampered cell"]),
        "deleted-test": (drop_cell(good, "test-loo"), 12, ["tampered cell"]),
        "duplicated-test": (duplicate_cell(good, "test-nw"), 12, ["tampered cell"]),
        "edited-test-wrong": (set_cell(wrong_max, "test-nw-weights", "print('passed')"), 9, ["tampered cell"]),
        "invalid-json": ('{"cells": [ this is not json', 0, ["invalid notebook"]),
        "missing-function": (set_cell(good, "nw", _rename(good, "nw", "nadaraya_watson", "nw_predict")),
                             10, ["missing function"]),
    }
    return corpus


def _rename(notebook, grade_id: str, old: str, new: str) -> str:
    return notebook.cells[_index(notebook, grade_id)].source.replace(f"def {old}(", f"def {new}(")


# ---- batches of slow honest ch1 submissions, for the resume and concurrency tests

A = "ch1_pooling"
SLOW = "import time\ntime.sleep(1.0)  # a slow but honest notebook"


def slow_batch(course: Path, n: int) -> dict:
    """n slow honest submissions: even ones right (12), odd ones with a wrong max_pool (9)."""
    good = add_cell_after(solved(course, A), "setup", SLOW)
    wrong = append_to_cell(good, "average-max-pool", WRONG_MAX_POOL)
    expected = {}
    for i in range(n):
        student = f"s{i:02d}"
        write_submission(course, A, student, good if i % 2 == 0 else wrong)
        expected[student] = 12.0 if i % 2 == 0 else 9.0
    return expected


def start_grader(course: Path, *extra: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "autograder", "--course", str(course), "grade", A, "--quiet", *extra]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def gradebook_scores(course: Path) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {s.student.id: s.score for s in gb.assignment_submissions(A)}


def autograded_mtimes(course: Path) -> dict:
    return {p.parts[-3]: p.stat().st_mtime_ns for p in (course / "autograded").glob(f"*/{A}/{A}.ipynb")}
