"""A failed build stays failed until the notebook passes (tools/build_book.py).

myst-nb caches a notebook's execution only when it succeeds, and Sphinx re-reads a page only
when its source changed: a second ``make book`` after a notebook failed used to find nothing
to do and report success, with the failed page published. Here the book's own build
(``tools/build_book.py``'s ``build``, the same Sphinx call and execution cache) runs on a
two-page book in a temporary folder whose notebook fails: the first build fails, and so does
the second, unchanged; once the notebook is fixed, the build passes, and passes again with
nothing to execute.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]

CONFIG = """\
title: "a failing notebook"
only_build_toc_files: true
execute:
  execute_notebooks: cache
  timeout: 60
  allow_errors: false
  stderr_output: error
  run_in_temp: false
sphinx:
  config:
    extensions: [myst_nb, jupyter_book, sphinx_comments, sphinx_external_toc, sphinx_book_theme]
    language: en
"""
TOC = """\
format: jb-book
root: book/index
chapters:
  - file: book/claim
"""
#: what the driver runs: the book's build with its folders pointed at the temporary book
DRIVER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path.insert(0, {tools!r})
    import build_book
    build_book.ROOT = Path({root!r})
    build_book.BUILD = build_book.ROOT / "_build"
    sys.exit(build_book.build("en"))
    """
)


def _claim(holds: bool) -> nbformat.NotebookNode:
    return nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# A claim\n\nThe cell below checks it."),
            nbformat.v4.new_code_cell(f"value = {0.5 if holds else 0.9}\nassert value < 0.6"),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}},
    )


def _build(root: Path) -> subprocess.CompletedProcess:
    driver = DRIVER.format(tools=str(REPO / "tools"), root=str(root))
    return subprocess.run(
        [sys.executable, "-c", driver], cwd=root, capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
def test_a_failed_notebook_fails_every_build_until_it_passes(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "_config.yml").write_text(CONFIG)
    (tmp_path / "_toc.yml").write_text(TOC)
    (tmp_path / "book" / "index.md").write_text("# A book\n\nOne chapter.\n")
    nbformat.write(_claim(holds=False), tmp_path / "book" / "claim.ipynb")

    first = _build(tmp_path)
    assert first.returncode == 1, first.stdout[-2000:] + first.stderr[-2000:]
    second = _build(tmp_path)  # nothing changed: before the fix, status 0 here
    assert second.returncode == 1, second.stdout[-2000:] + second.stderr[-2000:]
    assert "no successful run cached for claim.ipynb" in second.stdout

    nbformat.write(_claim(holds=True), tmp_path / "book" / "claim.ipynb")
    fixed = _build(tmp_path)
    assert fixed.returncode == 0, fixed.stdout[-2000:] + fixed.stderr[-2000:]
    again = _build(tmp_path)
    assert again.returncode == 0 and "no successful run cached" not in again.stdout
    assert "Executing notebook" not in again.stdout + again.stderr
