"""The grader's modules depend one way only: no back-arrows between its layers.

The layers, lowest first; a module may import from its own layer and the layers below it,
never from a layer above (every import counts: at the top of a file, in a function, under
``if __name__ == "__main__"``):

0. vocabulary: ``contract``, ``casefile`` (the codec's writer), ``messages`` (the message
   catalog), ``judging`` (the grader's wording), ``frames``, ``isolation``, ``cgroups``, ``notebook``,
   ``sanitise``, ``intake``, ``gradebook_ids``, ``nbgrader_api`` (how nbgrader's gradebook
   API is imported), ``assignment_text``, ``checks`` and the
   chapter plug-ins (``chapters``): what the student's checker, the sandbox and the trusted
   side share, and the course's data;
1. the sandbox: ``wire``, ``protocol``, ``zygote`` and the package ``sandbox``;
2. the trusted services the grading run uses: ``budgets`` (the limits' formula),
   ``gradebook`` (the recording), ``report``, ``release``, ``collect``,
   ``nbgrader_sanitise``, ``nbgrader_config``;
3. the package ``grading`` (prepare, run, verdict, record: it calls everything below, and
   hands ``gradebook`` its ``not_graded`` rather than being imported by it);
4. the entry points: ``cli``, ``__main__``.

Besides, the modules bound into the sandbox (``autograder.sandbox.command.IN_SANDBOX``)
import none of the grader's modules but each other: nothing else exists in there.
"""

from __future__ import annotations

import ast
from pathlib import Path

from autograder.sandbox.command import IN_SANDBOX

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "autograder"

LAYERS = {
    "autograder.student.contract": 0,
    "autograder.checking.casefile": 0,
    "autograder.student.frames": 0,
    "autograder.student.isolation": 0,
    "autograder.sandbox.cgroups": 0,
    "autograder.checking.notebook": 0,
    "autograder.checking.sanitise": 0,
    "autograder.checking.intake": 0,
    "autograder.course.gradebook_ids": 0,
    "autograder.course.nbgrader_api": 0,
    "autograder.checking.assignment_text": 0,
    "autograder.checking.checks": 0,
    "autograder.checking.messages": 0,
    "autograder.checking.judging": 0,
    "autograder.chapters": 0,
    "autograder.student": 0,
    "autograder.checking": 0,
    "autograder.sandbox.wire": 1,
    "autograder.sandbox.protocol": 1,
    "autograder.student.zygote": 1,
    "autograder.sandbox": 1,
    "autograder.course": 2,
    "autograder.sandbox.budgets": 2,
    "autograder.course.gradebook": 2,
    "autograder.course.report": 2,
    "autograder.course.release": 2,
    "autograder.course.collect": 2,
    "autograder.course.nbgrader_sanitise": 2,
    "autograder.nbgrader_config": 2,
    "autograder.grading": 3,
    "autograder.cli": 4,
    "autograder.__main__": 4,
    "autograder": 4,  # the package's own __init__ (empty)
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
    sources["autograder.extra"] = ""
    assert back_arrows(sources) == [
        "autograder.course.gradebook (layer 2) imports autograder.grading.verdict (layer 3)",
        "autograder.extra is in no layer: add it to LAYERS",
        "autograder.sandbox.budgets (layer 2) imports autograder.grading (layer 3)",
        "autograder.sandbox.host (layer 1) imports autograder.grading.work (layer 3)",
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
