"""The set-up: `make book` and `make test` install or ask for what they need, lint runs first.

- tools/require-system-packages, which every make target calls first with its list of
  Debian packages (the Makefile's BOOK_PACKAGES, TEST_PACKAGES, ...): silent when all are
  installed; as an unprivileged user, a package that is surely absent stops make before it
  creates .venv or writes anything, with the one `sudo apt-get install` line to run; on a
  machine without apt-get it checks for what each package provides instead.
- The order of `make test`: system check, then .venv, then lint, then the book, then pytest.
- `make lint` fails on a lint finding and on an unformatted file, and says how to fix both.
- `make test` fails when pytest collects no test (its exit status 5 is not swallowed).

The install path as root (apt-get update, apt-get install) is proven by .ci/run, which in CI
removes the packages and lets `make book` and `make test` put them back.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REQUIRE = REPO / "tools" / "require-system-packages"
VENV = Path(sys.prefix)  # the venv running these tests: its ruff and pytest serve the make runs
ABSENT = "attention-derived-no-such-package"  # no distribution ships a package of this name
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def run(argv: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 120):
    """Run argv in its own process group (killed whole on timeout); return (status, stdout+stderr)."""
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"{argv} did not finish in {timeout} s; it printed:\n{output}")
    return process.returncode, output


def required_packages(
    variable: str = "TEST_PACKAGES", variables: tuple[str, ...] = ()
) -> list[str]:
    """The Debian packages a target needs, as the Makefile lists them (TEST_PACKAGES: make test's)."""
    printer = "print-%: ; @echo $($*)"
    status, output = run(["make", "-s", "--eval", printer, f"print-{variable}", *variables], REPO)
    assert status == 0, output
    return output.split()


def files_under(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*")}


@pytest.fixture
def clean_copy():
    """The repository's files (tracked and new, none ignored) in a fresh directory, as a clone has them.

    Owned by an unprivileged user when the tests run as root, so that user *could* create .venv
    there: a check that failed to stop make would show as files written.
    """
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    root = Path(tempfile.mkdtemp(prefix="attention-setup-"))
    copy = root / "repo"
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    home = root / "home"
    home.mkdir()
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        for path in [root, *root.rglob("*")]:
            os.chown(path, nobody.pw_uid, nobody.pw_gid)
    root.chmod(0o755)
    yield copy, home
    shutil.rmtree(root)


def as_unprivileged(argv: list[str]) -> list[str]:
    """argv run as `nobody` (no supplementary groups) when we are root; as ourselves otherwise."""
    if os.geteuid() != 0:
        return argv
    nobody = pwd.getpwnam("nobody")
    return [
        "setpriv",
        f"--reuid={nobody.pw_uid}",
        f"--regid={nobody.pw_gid}",
        "--clear-groups",
        "--",
        *argv,
    ]


# ----------------------------------------------------------------------------------------
# tools/require-system-packages


@pytest.mark.parametrize(
    "goal, variable",
    [("book", "BOOK_PACKAGES"), ("test", "BOOK_PACKAGES"), ("test", "TEST_PACKAGES")],
)
def test_unprivileged_make_stops_before_writing_anything_and_prints_the_sudo_line(
    clean_copy, goal, variable
):
    copy, home = clean_copy
    before = files_under(copy)
    listed = " ".join(required_packages(variable))
    env = {"PATH": SYSTEM_PATH, "HOME": str(home), "LANG": "C.UTF-8"}
    status, output = run(
        as_unprivileged(["make", goal, f"{variable}={listed} {ABSENT}"]), copy, env=env
    )
    assert status != 0, output
    assert f"make {goal} needs these Debian packages" in output
    sudo_lines = [
        line.strip()
        for line in output.splitlines()
        if line.strip().startswith("sudo apt-get install -y ")
    ]
    assert len(sudo_lines) == 1 and ABSENT in sudo_lines[0].split(), output
    assert f"require-{goal}] Error 1" in output, output  # the check stopped make, nothing later
    assert files_under(copy) == before, "make wrote files before the system check stopped it"


@pytest.mark.parametrize(
    "venv_exists, python, expected",
    [(False, "false", ["python3-venv"]), (False, sys.executable, []), (True, "false", [])],
)
def test_venv_module_is_asked_for_only_when_python_cannot_create_the_venv(
    tmp_path, venv_exists, python, expected
):
    """`false` stands for a Debian python3 without its venv module: `import ensurepip` fails."""
    venv = tmp_path / "venv"
    if venv_exists:
        (venv / "bin").mkdir(parents=True)
        (venv / "bin" / "python").symlink_to(sys.executable)
    variables = (f"VENV={venv}", f"PYTHON={python}")
    assert required_packages("VENV_PACKAGES", variables) == expected


def test_check_is_silent_when_every_package_is_installed():
    """make test installs its packages before pytest runs, so here they are all present."""
    status, output = run(["bash", str(REQUIRE), "make test", *required_packages()], REPO)
    assert (status, output) == (0, "")


def without_apt(tmp_path: Path, tools: list[str]) -> dict[str, str]:
    """An environment whose PATH holds only the named tools: a machine with no apt-get or dpkg."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in tools:
        found = shutil.which(tool, path=SYSTEM_PATH)
        assert found, f"{tool} is needed to run this test"
        (bin_dir / tool).symlink_to(found)
    return {"PATH": str(bin_dir), "LANG": "C.UTF-8"}


def test_without_apt_it_checks_what_packages_provide_and_names_what_is_missing(tmp_path):
    """No apt-get: chromium is found at /usr/bin/chromium and the font by fc-list (both installed
    here, as make test ensures), bwrap is not on this PATH, and the unknown package cannot be
    checked: the last two are reported by what they provide, with no sudo line."""
    env = without_apt(tmp_path, ["bash", "id", "grep", "fc-list"])
    argv = [
        "bash",
        str(REQUIRE),
        "make test",
        "chromium",
        "fonts-wqy-microhei",
        "bubblewrap",
        ABSENT,
    ]
    status, output = run(argv, REPO, env=env)
    assert status == 1, output
    assert "no apt-get" in output
    reported = {line.split()[0] for line in output.splitlines() if line.startswith("  ")}
    assert reported == {"bubblewrap", ABSENT}, output
    assert "bubblewrap (bwrap)" in output and "sudo" not in output


def test_without_apt_it_passes_when_everything_is_provided(tmp_path):
    env = without_apt(tmp_path, ["bash", "id", "grep", "fc-list", "bwrap"])
    argv = ["bash", str(REQUIRE), "make test", "chromium", "fonts-wqy-microhei", "bubblewrap"]
    assert run(argv, REPO, env=env) == (0, "")


# ----------------------------------------------------------------------------------------
# the Makefile: order, lint gate, pytest's exit status


def make_dir(tmp_path: Path) -> Path:
    """A directory with the project's Makefile and ruff/pytest configuration, and nothing else."""
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy2(REPO / name, tmp_path / name)
    (tmp_path / "tests").mkdir()
    return tmp_path


def make_with_our_venv(directory: Path, *args: str) -> tuple[int, str]:
    """make in directory, using the venv of these tests and never (re)installing it."""
    stamp = VENV / ".installed"
    return run(["make", "--no-print-directory", f"VENV={VENV}", "-o", str(stamp), *args], directory)


def test_make_test_checks_packages_then_sets_up_then_lints_then_builds_then_tests():
    status, plan = run(["make", "--no-print-directory", "-n", "-B", "test"], REPO)
    assert status == 0, plan
    steps = [
        'require-system-packages "make test"',
        "-m venv",
        "ruff check",
        "ruff format --check",
        'require-system-packages "make book"',
        "tools/build_book.py",
        "-m pytest",
    ]
    positions = [plan.find(step) for step in steps]
    assert -1 not in positions and positions == sorted(positions), plan


def test_lint_fails_on_a_finding_and_on_formatting_and_says_how_to_fix(tmp_path):
    directory = make_dir(tmp_path)
    (directory / "module.py").write_text("import os\nx = {'a':1}\n")
    status, output = make_with_our_venv(directory, "lint")
    assert status != 0
    assert "F401" in output and "module.py" in output and "would be reformatted" in output
    assert f"{VENV}/bin/ruff check --fix ." in output and f"{VENV}/bin/ruff format ." in output


def test_lint_passes_on_a_clean_tree(tmp_path):
    directory = make_dir(tmp_path)
    (directory / "module.py").write_text('x = {"a": 1}\n')
    status, output = make_with_our_venv(directory, "lint")
    assert status == 0, output


def test_make_test_fails_when_pytest_collects_nothing(tmp_path):
    directory = make_dir(tmp_path)  # tests/ is empty: pytest exits 5
    status, output = make_with_our_venv(
        directory, "-o", "require-test", "-o", "lint", "-o", "book", "test"
    )
    assert status != 0 and "no tests ran" in output and "Error 5" in output, output
