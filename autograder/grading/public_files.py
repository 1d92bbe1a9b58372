"""The release's public files, as the sandboxes see them.

``release_files`` reads the public release folder once (every file but the notebook: the
student's checker and its public cases); the bytes travel with the assignment's work, so a
Dask worker needs no course folder. ``release_root`` writes them, once per process, into a
private folder named by their content hash, which each sandbox binds read-only as
``/release``.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


def release_files(course: Path, assignment: str) -> dict:
    """The public release folder's files but the notebook: file name -> bytes."""
    folder = Path(course) / "release" / assignment
    if not folder.is_dir():
        return {}
    return {
        p.name: p.read_bytes()
        for p in sorted(folder.iterdir())
        if p.is_file() and p.suffix != ".ipynb"
    }


def release_root(assignment: str, files: dict) -> Path:
    """The release files, written once per process into a private folder (by content hash)."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name])
    root = (
        Path(tempfile.gettempdir()) / f"autograder-release-{os.getuid()}-{digest.hexdigest()[:16]}"
    )
    folder = root / assignment
    if not (root / "complete").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o755)
        for name, data in files.items():
            (folder / name).write_bytes(data)
        (root / "complete").write_text("ok")
    return root
