"""Release every chapter's assignment: ``python -m autograder.release`` (what ``make release`` runs).

For every assignment id, in order:

1. compute the public cases from the reference (``autograder.checks``) and write them, with
   the contract module (``contract.py`` shipped as ``attention_check.py``) and the chapter's
   support files (its plug-in's ``support_files``), into ``source/<id>/``: the notebook uses them, and
   nbgrader copies every file of the source folder into the release (and back over a
   submission when it autogrades, so a student's edited copy never counts);
2. run the real ``nbgrader generate_assignment <id> --force`` through nbgrader's Python API
   with the course's ``nbgrader_config.py`` (gradebook ``autograder/gradebook.db``);
3. zip ``release/<id>/`` into ``release/<id>.zip``;
4. scan the release (files, zips and the public-case JSON) for solution text, hidden tests
   and imports of the reference package; if anything is found, delete that release and its
   zip and fail loudly (exit status 1, every finding listed).

Options: ``--course DIR`` (a copy of the course, as the tests use), ``--only ID`` (repeatable).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

from autograder import checks, contract

COURSE = Path(__file__).resolve().parent
CHECK_MODULE = "attention_check.py"
FORBIDDEN = re.compile(
    r"BEGIN SOLUTION|END SOLUTION|BEGIN HIDDEN TESTS|END HIDDEN TESTS|"
    r"from solutions|import solutions"
)


class ReleaseError(RuntimeError):
    """The release could not be made, or would leak solutions or hidden tests."""


# ----------------------------------------------------------------------------------------
# step 1: the generated files next to the notebook


def build_public_cases(assignment: str, path: Path) -> int:
    """Write ``public_cases.npz`` for one assignment; returns the number of cases."""
    entries, total = {}, 0
    for check in checks.checks_for(assignment):
        cases = []
        for case in checks.public_cases(check.name):
            cases.append(
                {
                    "name": case.name,
                    "args": case.args,
                    "kwargs": case.kwargs,
                    "expected": checks.expected(check.name, case),
                    "mistakes": checks.mistake_outputs(check.name, case),
                }
            )
        entries[check.name] = {"spec": checks.spec(check.name), "cases": cases}
        total += len(cases)
    contract.save_cases(path, assignment, entries)
    return total


def write_support_files(assignment: str, folder: Path) -> list[Path]:
    """The public cases, the contract module and the chapter's support files, into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / contract.CASES_FILE, folder / CHECK_MODULE]
    build_public_cases(assignment, written[0])
    shutil.copyfile(Path(contract.__file__), written[1])
    for name, write in checks.chapter(assignment).support_files.items():
        written.append(folder / name)
        write(written[-1])
    return written


# ----------------------------------------------------------------------------------------
# step 2: nbgrader


def ensure_tools_on_path() -> None:
    """nbgrader runs ``alembic`` (its database migrations) as a command: make the tools
    installed next to this interpreter findable even when the virtualenv is not activated."""
    bindir = os.path.dirname(sys.executable)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")


def nbgrader_api(course: Path):
    """nbgrader's Python API configured with the course's own ``nbgrader_config.py``."""
    ensure_tools_on_path()
    from nbgrader.apps import NbGraderAPI
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    config.CourseDirectory.root = str(course)  # the folder we were given, even if moved
    config.CourseDirectory.db_url = "sqlite:///" + str(course / "gradebook.db")
    return NbGraderAPI(config=config)


def generate(course: Path, assignment: str) -> None:
    api = nbgrader_api(course)
    cwd = os.getcwd()
    os.chdir(course)  # nbgrader resolves some paths against the working directory
    try:
        result = api.generate_assignment(assignment, force=True)
    finally:
        os.chdir(cwd)
    if not result["success"]:
        raise ReleaseError(
            f"nbgrader generate_assignment {assignment} failed:\n"
            f"{result.get('error') or ''}\n{result.get('log') or ''}"
        )


# ----------------------------------------------------------------------------------------
# steps 3 and 4: zip and scan


def make_zip(folder: Path) -> Path:
    target = folder.parent / f"{folder.name}.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.rglob("*")):
            if (
                path.is_file()
                and "__pycache__" not in path.parts
                and ".ipynb_checkpoints" not in path.parts
            ):
                zf.write(path, Path(folder.name) / path.relative_to(folder))
    return target


def _texts_of(name: str, data: bytes):
    """Every piece of text inside a released file worth scanning."""
    if name.endswith(".npz"):
        import io

        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            for key in npz.files:
                arr = npz[key]
                if arr.dtype.kind == "U":
                    yield "\n".join(map(str, arr.ravel()))
                elif key == "__meta__":  # the public cases' JSON, stored as bytes
                    yield arr.tobytes().decode("utf-8", errors="replace")
    else:
        yield data.decode("utf-8", errors="replace")


def scan(release_dir: Path) -> list[str]:
    """Problems found in a release folder (and its zips): an empty list means clean."""
    problems = []
    for path in sorted(release_dir.rglob("*")):
        if not path.is_file():
            continue
        items = []
        if path.suffix == ".zip":
            with zipfile.ZipFile(path) as zf:
                items = [(f"{path.name}:{n}", zf.read(n)) for n in zf.namelist()]
        else:
            items = [(str(path.relative_to(release_dir)), path.read_bytes())]
        for label, data in items:
            for text in _texts_of(label, data):
                for match in FORBIDDEN.finditer(text):
                    line = text[: match.start()].count("\n") + 1
                    problems.append(f"{label}, line {line}: {match.group(0)!r}")
    return problems


def release(course: Path = COURSE, only: list[str] | None = None, log=print) -> dict[str, float]:
    """Release the assignments; returns the seconds each one took."""
    course = Path(course).resolve()
    timings = {}
    for assignment in only or checks.ASSIGNMENTS:
        start = time.perf_counter()
        source = course / "source" / assignment
        if not (source / f"{assignment}.ipynb").exists():
            raise ReleaseError(f"no source notebook {source / (assignment + '.ipynb')}")
        write_support_files(assignment, source)
        generate(course, assignment)
        released = course / "release" / assignment
        zip_path = make_zip(released)
        problems = scan(released) + scan_zip(zip_path)
        if problems:  # never leave a leaking release where someone could publish it
            shutil.rmtree(released, ignore_errors=True)
            zip_path.unlink(missing_ok=True)
            raise ReleaseError(
                f"the release of {assignment} leaks solutions or hidden tests:\n  "
                + "\n  ".join(problems)
            )
        timings[assignment] = time.perf_counter() - start
        log(f"released {assignment}: {released} and {zip_path.name} ({timings[assignment]:.1f} s)")
    return timings


def scan_zip(zip_path: Path) -> list[str]:
    problems = []
    with zipfile.ZipFile(zip_path) as zf:
        for name in zf.namelist():
            for text in _texts_of(name, zf.read(name)):
                for match in FORBIDDEN.finditer(text):
                    problems.append(f"{zip_path.name}:{name}: {match.group(0)!r}")
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m autograder.release", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--course", type=Path, default=COURSE, help="course directory (default: autograder/)"
    )
    parser.add_argument(
        "--only", action="append", choices=checks.ASSIGNMENTS, help="release only this assignment"
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        release(args.course, args.only)
    except ReleaseError as err:
        print(f"release failed: {err}", file=sys.stderr)
        return 1
    print(
        f"released {len(args.only or checks.ASSIGNMENTS)} assignment(s) in {time.perf_counter() - start:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
