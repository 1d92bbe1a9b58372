"""The grader's folders are its layers, and its modules depend one way only: no back-arrows.

The layers, lowest first; a module may import from its own folder and the folders below it,
never from a folder above (every import counts: at the top of a file, in a function, under
``if __name__ == "__main__"``):

0. ``student/``: what runs beside a student's code (the checker's contract, frames, the
   isolation, the zygote), bound flat into the sandbox;
1. ``checking/``: what every trusted part checks with: the check registry, the notebook's
   parse, intake, sanitiser, judge, message catalog, case file, assignment text, and how
   nbgrader's gradebook API is imported and what may name a student;
2. ``chapters/``: the chapter plug-ins, which register their checks (the registry imports
   none of them: whatever reads it imports ``autograder.chapters``);
3. ``sandbox/``: the trusted side of the sandbox, its limits and budgets;
4. ``course/``: the nbgrader course: release, collect, gradebook, report, nbgrader's hooks;
5. ``grading/``: prepare, run, verdict, record (it calls everything below, and hands
   ``gradebook`` its ``not_graded`` rather than being imported by it);
6. the package's own modules: the entry points ``cli``, ``__main__`` and the course's
   ``nbgrader_config``.

Besides, the modules bound into the sandbox (``autograder.sandbox.command.IN_SANDBOX``)
import none of the grader's modules but each other: nothing else exists in there.
"""

from __future__ import annotations

import ast
from pathlib import Path

from autograder.sandbox.command import IN_SANDBOX

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "autograder"

#: the layers: folders of the package, then the package's own top-level modules
LAYERS = {
    "autograder.student": 0,
    "autograder.checking": 1,
    "autograder.chapters": 2,
    "autograder.sandbox": 3,
    "autograder.course": 4,
    "autograder.grading": 5,
    "autograder.cli": 6,
    "autograder.__main__": 6,
    "autograder.nbgrader_config": 6,
    "autograder": 6,  # the package's own __init__ (no imports)
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int | None:
    """The layer of ``module``: that of its longest listed prefix (the package ``autograder``
    itself is no prefix: a new top-level module must be placed)."""
    if module == "autograder":
        return LAYERS[module]
    while module not in LAYERS or module == "autograder":
        if "." not in module:
            return None
        module = module.rsplit(".", 1)[0]
    return LAYERS[module]


def imported(source: str, siblings: set[str] = frozenset()) -> set[str]:
    """Every grader module ``source`` imports, at any depth of the file. ``from autograder
    import x`` counts as the module ``autograder.x`` where there is one; a bare ``import x``
    of a name in ``siblings`` (a copy bound beside the file in the sandbox) as
    ``autograder.student.x``."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "autograder":
                    out.add(alias.name)
                elif alias.name in siblings:
                    out.add(f"autograder.student.{alias.name}")
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "the grader uses absolute imports only"
            if node.module and node.module.split(".")[0] == "autograder":
                for alias in node.names:
                    candidate = f"{node.module}.{alias.name}"
                    path = ROOT / candidate.replace(".", "/")
                    known = path.with_suffix(".py").is_file() or path.is_dir()
                    out.add(candidate if known else node.module)
    return out


def back_arrows(sources: dict[str, str]) -> list[str]:
    """Every import of a module from a higher layer, and every module in no layer."""
    problems = []
    for module, source in sorted(sources.items()):
        own = layer(module)
        if own is None:
            problems.append(f"{module} is in no layer: add it to LAYERS")
            continue
        for target in sorted(imported(source)):
            if layer(target) is not None and layer(target) > own:
                problems.append(f"{module} (layer {own}) imports {target} (layer {layer(target)})")
    return problems


#: the course's folders inside the package: notebooks and what ``make release`` and grading
#: write there (the checker copied beside each source notebook, students' files), not modules
COURSE_FOLDERS = ("source", "release", "submitted", "autograded", "feedback", "exchange")


def grader_sources() -> dict[str, str]:
    return {
        module_name(p): p.read_text()
        for p in sorted(PACKAGE.rglob("*.py"))
        if p.relative_to(PACKAGE).parts[0] not in COURSE_FOLDERS
    }


def test_no_module_imports_from_a_layer_above_its_own():
    sources = grader_sources()
    assert {
        "autograder.grading",
        "autograder.course.gradebook",
        "autograder.sandbox.budgets",
    } <= set(sources)
    assert back_arrows(sources) == []


def test_a_back_arrow_is_found_even_inside_a_function():
    sources = grader_sources()
    sources["autograder.sandbox.budgets"] += (
        "\n\ndef measure():\n    from autograder import grading\n"
    )
    sources["autograder.course.gradebook"] += (
        "\n\ndef f():\n    import autograder.grading.verdict\n"
    )
    sources["autograder.sandbox.host"] += "\nfrom autograder.grading.work import prepare\n"
    sources["autograder.checking.checks"] += "\nfrom autograder import chapters\n"
    sources["autograder.extra"] = ""
    assert back_arrows(sources) == [
        "autograder.checking.checks (layer 1) imports autograder.chapters (layer 2)",
        "autograder.course.gradebook (layer 4) imports autograder.grading.verdict (layer 5)",
        "autograder.extra is in no layer: add it to LAYERS",
        "autograder.sandbox.budgets (layer 3) imports autograder.grading (layer 5)",
        "autograder.sandbox.host (layer 3) imports autograder.grading.work (layer 5)",
    ]


def test_the_modules_in_the_sandbox_import_only_each_other():
    inside = {module.__name__ for module in IN_SANDBOX}
    assert inside == {
        "autograder.student.contract",
        "autograder.student.frames",
        "autograder.student.zygote",
        "autograder.student.isolation",
    }
    siblings = {name.rsplit(".", 1)[1] for name in inside}
    for module in IN_SANDBOX:
        uses = imported(Path(module.__file__).read_text(), siblings)
        assert uses <= inside, (module.__name__, uses - inside)
    # the zygote, run as a script in there, imports the bound copies by their bare names
    zygote = Path(PACKAGE / "student" / "zygote.py").read_text()
    assert imported(zygote, siblings) == inside - {"autograder.student.zygote"}
