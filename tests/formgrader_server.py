"""nbgrader's formgrader for the browser tests, started as the README tells an instructor to:
Jupyter Server in the course folder (where it reads ``nbgrader_config.py``), on 127.0.0.1,
with a token, on a port the server picks (read back from its runtime file: no port race).

The course config imports ``autograder``: the server gets this checkout on ``PYTHONPATH``,
and its own Jupyter config, runtime and data folders (nobody's personal settings).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@contextmanager
def formgrader_server(course: Path, home: Path) -> Iterator[tuple[str, str]]:
    """Yield (base URL, token) of a Jupyter Server with the formgrader serving ``course``;
    ``home`` holds its Jupyter folders and ``server.log``."""
    token = secrets.token_hex(16)
    bindir = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTER_DATA_DIR": str(home / "data"),
        "IPYTHONDIR": str(home / "ipython"),
    }
    log_path = home / "server.log"
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [
                str(bindir / "jupyter-server"),
                "--no-browser",
                "--ServerApp.ip=127.0.0.1",
                "--ServerApp.port=0",  # the server picks a free port
                f"--IdentityProvider.token={token}",
                f"--ServerApp.root_dir={course}",
                *(["--allow-root"] if os.geteuid() == 0 else []),  # CI runs as root
            ],
            cwd=course,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            yield _wait_until_up(server, home / "runtime", token, log_path), token
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def _wait_until_up(server: subprocess.Popen, runtime: Path, token: str, log: Path) -> str:
    deadline = time.monotonic() + 180  # start-up on a loaded machine, not a measured time
    while time.monotonic() < deadline:
        if server.poll() is not None:
            break
        info = runtime / f"jpserver-{server.pid}.json"
        if info.is_file():
            base = json.loads(info.read_text())["url"].rstrip("/")
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5):
                    return base
            except OSError:
                pass
        time.sleep(0.5)
    pytest.fail(f"the formgrader did not start:\n{log.read_text()[-3000:]}", pytrace=False)
