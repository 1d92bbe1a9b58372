"""The grading package's shape: one contract, chapters as plug-ins, a core that names no chapter."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from autograder import checks, contract

PACKAGE = Path(checks.__file__).resolve().parent
# everything but chapters/ and source/: the package's modules and the grading pipeline
CORE = sorted(PACKAGE.glob("*.py")) + sorted(
    p for package in ("grading", "sandbox") for p in (PACKAGE / package).glob("*.py")
)


def _chapter_words() -> set[str]:
    words = set(checks.CHAPTERS)
    for chapter in checks.CHAPTERS.values():
        words |= {c.reference.split(":")[0] for c in chapter.checks}  # solutions.<module>
        words |= {c.reference.split(":")[0].split(".")[-1] for c in chapter.checks}  # <module>
        words |= set(chapter.support_files)
    return words


def test_the_core_names_no_chapter():
    words = _chapter_words()
    assert len(checks.CHAPTERS) >= 5 and "ch1_pooling" in words and "pooling" in words
    for path in CORE:
        text = path.read_text()
        found = sorted(w for w in words if re.search(rf"\b{re.escape(w)}\b", text))
        assert not found, (
            f"{path.name} names chapter things {found}: move them into autograder/chapters/"
        )


def test_every_chapter_module_registers_exactly_its_own_assignment():
    chapters_dir = PACKAGE / "chapters"
    modules = sorted(p.stem for p in chapters_dir.glob("*.py") if not p.stem.startswith("_"))
    assert modules == sorted(checks.CHAPTERS)
    for assignment, chapter in checks.CHAPTERS.items():
        assert all(c.assignment == assignment for c in chapter.checks)
        assert (PACKAGE / "source" / assignment / f"{assignment}.ipynb").is_file()


def test_the_contract_imports_only_numpy_and_the_standard_library():
    tree = ast.parse(Path(contract.__file__).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    import sys

    assert imported - {"__future__"} <= set(sys.stdlib_module_names) | {"numpy"}, imported


def test_one_codec_and_one_case_runner():
    """Case values are encoded only by the contract, and only the contract calls a student's
    function on a case: no second decoder or case loop lives anywhere else in the package."""
    for path in CORE + sorted((PACKAGE / "chapters").glob("*.py")):
        if path.name == "contract.py":
            continue
        text = path.read_text()
        assert '"t": "array"' not in text and "'t': 'array'" not in text, path.name
        assert "default_rng(spec" not in text and "def decode" not in text, path.name
