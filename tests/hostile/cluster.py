"""A local Dask scheduler and one worker, started as the tests need them and always stopped."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def dask_cluster(
    worker_options: list[str],
    wrap: Callable[[list[str]], list[str]] = lambda argv: argv,
    **popen,
) -> Iterator[tuple[str, object]]:
    """Yields (address, a connected Client) once the one worker has joined; the worker is
    `python -m distributed.cli.dask_worker <address> <worker_options>` passed through `wrap`
    (e.g. to start it as another user), with `popen`'s env/cwd."""
    from distributed import Client

    address = f"tcp://127.0.0.1:{_free_port()}"
    scheduler = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1"]
        + ["--port", address.rsplit(":", 1)[1], "--no-dashboard"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    argv = [sys.executable, "-m", "distributed.cli.dask_worker", address, *worker_options]
    worker = subprocess.Popen(
        wrap(argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **popen
    )
    try:
        with Client(address, timeout=60) as client:
            client.wait_for_workers(1, timeout=180)
            yield address, client
    finally:
        for process in (worker, scheduler):
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
