"""The grader's cgroups on a cgroup v2 host (the v1 and hybrid path, this CI host's, is
exercised for real by tests/test_grader_fresh_state.py and the hostile corpus).

Two kinds of test:
- the kernel's own cgroup2 filesystem, mounted in a temporary folder: what the grader does
  with the unified hierarchy this host really has (on a hybrid host like CI's, every
  controller the grader needs is bound to v1, so it must say so and say what is weaker);
- a cgroup2 tree laid out in a temporary folder, for the placement rules a kernel here
  cannot show: as root, the subtree goes under the root cgroup; rootless, under the
  grader's own delegated cgroup, after the grader moves itself into a leaf ("no internal
  processes"); and a refusal says what to run instead.
"""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

from autograder import sandbox
from autograder.sandbox import cgroups


@pytest.fixture
def fresh_placement(monkeypatch):
    monkeypatch.setattr(cgroups, "_STARTED_IN", {})


@pytest.fixture
def cgroup2_mount(tmp_path, fresh_placement, monkeypatch):
    """The kernel's unified hierarchy, mounted at a temporary folder and used as the root."""
    if os.geteuid() != 0:
        pytest.skip("mounting cgroup2 needs root (CI runs as root)")
    where = tmp_path / "cgroup2"
    where.mkdir()
    subprocess.run(["mount", "-t", "cgroup2", "none", str(where)], check=True)
    monkeypatch.setattr(cgroups, "ROOT", where)
    yield where
    subprocess.run(["umount", str(where)], check=True)


def test_the_real_unified_hierarchy(cgroup2_mount):
    offered = set((cgroup2_mount / "cgroup.controllers").read_text().split())
    missing = sorted({"memory", "pids", "cpu"} - offered)
    cgroup, why = cgroups.open_cgroup("test-slot")
    if missing:  # a hybrid host: the controllers are bound to v1, none can be had on v2
        assert cgroup is None
        assert why == f"the cgroup {cgroup2_mount} does not offer {missing}"
        lines = sandbox.describe_mode()
        assert "no cgroup" in lines[-1] and "weaker" in lines[-1], lines
        assert not list(cgroup2_mount.glob(f"{cgroups.PROJECT}-*")), "made nothing"
        return
    try:  # a v2 host: a leaf of the grader's own, with its limits
        assert why == "" and cgroup.version == 2
        cgroup.set_limits(256 << 20, 7)
        leaf = cgroup.leaves["memory"]
        assert leaf.parent == cgroup2_mount / f"{cgroups.PROJECT}-{os.getpid()}"
        assert int((leaf / "memory.max").read_text()) == 256 << 20
        assert (leaf / "pids.max").read_text().strip() == "7"
        assert (leaf / "cpu.max").read_text().split() == ["100000", "100000"]
    finally:
        if cgroup is not None:
            cgroup.remove()
    assert not leaf.exists() and not leaf.parent.exists()


def _fake_v2(root: Path, scope: str, enabled: str = "") -> Path:
    """A cgroup2 root offering memory, pids and cpu, with the grader's own cgroup ``scope``."""
    for folder in (root, root / scope.lstrip("/")):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
        (folder / "cgroup.subtree_control").write_text(enabled)
        (folder / "cgroup.procs").write_text(f"{os.getpid()}\n")
    return root / scope.lstrip("/")


SCOPE = "/user.slice/user-1000.slice/run-r1.scope"


def test_rootless_moves_itself_into_a_leaf_of_its_own_subtree(
    tmp_path, fresh_placement, monkeypatch
):
    own = _fake_v2(tmp_path, SCOPE)
    monkeypatch.setattr(cgroups, "ROOT", tmp_path)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(cgroups, "_own_paths", lambda: {"": SCOPE})
    first, why = cgroups.open_cgroup("slot-rootless-0")
    assert why == "" and first.version == 2
    subtree = own / f"{cgroups.PROJECT}-{os.getpid()}"
    assert (subtree / "grader" / "cgroup.procs").read_text() == str(os.getpid())
    assert (own / "cgroup.subtree_control").read_text() == "+cpu +memory +pids"
    assert (subtree / "cgroup.subtree_control").read_text() == "+cpu +memory +pids"
    assert first.leaves == {c: subtree / "slot-rootless-0" for c in ("memory", "pids", "cpu")}
    # a second slot: /proc/self/cgroup now names the grader's leaf, the subtree stays put
    monkeypatch.setattr(cgroups, "_own_paths", lambda: {"": f"{SCOPE}/{subtree.name}/grader"})
    second, _ = cgroups.open_cgroup("slot-rootless-1")
    assert second.leaves["memory"] == subtree / "slot-rootless-1"
    (second.leaves["memory"] / "memory.swap.max").write_text("max")
    second.set_limits(3 << 30, 48, cpus=1.0)
    assert (second.leaves["memory"] / "memory.max").read_text() == str(3 << 30)
    assert (second.leaves["memory"] / "memory.swap.max").read_text() == "0"
    assert (second.leaves["memory"] / "pids.max").read_text() == "48"
    assert (second.leaves["memory"] / "cpu.max").read_text() == "100000 100000"


def test_as_root_the_subtree_goes_under_the_root_cgroup(tmp_path, fresh_placement, monkeypatch):
    own = _fake_v2(tmp_path, "/user.slice/user-0.slice/session-3.scope", enabled="cpu memory pids")
    monkeypatch.setattr(cgroups, "ROOT", tmp_path)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(
        cgroups, "_own_paths", lambda: {"": "/user.slice/user-0.slice/session-3.scope"}
    )
    cgroup, why = cgroups.open_cgroup("slot-61000")
    assert why == ""
    assert cgroup.leaves["memory"] == tmp_path / f"{cgroups.PROJECT}-{os.getpid()}" / "slot-61000"
    assert (tmp_path / "cgroup.subtree_control").read_text() == "cpu memory pids", "left alone"
    assert not list(own.glob(f"{cgroups.PROJECT}-*")), "the session scope is untouched"


def test_a_refused_delegation_says_what_to_run(tmp_path, fresh_placement, monkeypatch):
    own = _fake_v2(tmp_path, SCOPE)
    monkeypatch.setattr(cgroups, "ROOT", tmp_path)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(cgroups, "_own_paths", lambda: {"": SCOPE})
    write = cgroups._write

    def busy(path, value):  # other processes still share the grader's cgroup
        if path == own / "cgroup.subtree_control":
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY))
        write(path, value)

    monkeypatch.setattr(cgroups, "_write", busy)
    cgroup, why = cgroups.open_cgroup("slot-rootless-0")
    assert cgroup is None
    assert why.startswith(f"cannot enable ['cpu', 'memory', 'pids'] for the cgroups under {own}")
    assert "systemd-run --user --scope -p Delegate=yes" in why
