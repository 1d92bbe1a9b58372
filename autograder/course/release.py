"""Release every chapter's assignment: ``python -m autograder.course.release`` (what ``make release`` runs).

For every assignment id, in order:

1. compute the public cases from the reference (``autograder.checking.checks``) and write them, with
   the contract module (``contract.py`` shipped as ``attention_check.py``) and the chapter's
   support files (its plug-in's ``support_files``), into ``source/<id>/``: the notebook uses them, and
   nbgrader copies every file of the source folder into the release (and back over a
   submission when it autogrades, so a student's edited copy never counts);
2. run the real ``nbgrader generate_assignment <id> --force`` through nbgrader's Python API
   with the course's ``nbgrader_config.py`` (gradebook ``autograder/gradebook.db``);
3. make the released notebook readable in Jupyter (the book's ``{eq}``/``{ref}`` roles
   written as the site shows them, ``autograder/checking/assignment_text.py``), write the student's
   guide (``README.md``; the Chinese edition's is ``使用说明.md``) with the student's
   ``requirements.txt``, and zip ``release/<id>/`` into ``release/<id>.zip``;
4. the Chinese edition of the assignment: ``release/zh_CN/<id>/``, the same files with the
   notebook's prose, the checks' hints and the guide in Chinese (``locale/zh_CN/LC_MESSAGES/assignments/<id>.po``; a
   paragraph without a translation fails the release) and the checks' messages in Chinese
   (``autograder/checking/messages.py``: the catalog in ``public_cases.npz``; the notebook's metadata
   says ``attention_derived.language``, read by the grader to word the feedback), zipped into
   ``release/zh_CN/<id>.zip``
   (the same file name as the English zip, so the exercise page's instructions hold);
   the cells, their ids, metadata and code are the English notebook's, so both are graded
   alike;
5. scan the release (files, zips and the public-case JSON) for solution text, hidden tests
   and imports of the reference package or of the grader; if anything is found, delete that release and its
   zip and fail loudly (exit status 1, every finding listed);
6. after the scan, copy the release into the course's exchange (``nbgrader
   release_assignment``): the formgrader then lists the assignment as released, not "draft".

Options: ``--course DIR`` (a copy of the course, as the tests use), ``--only ID`` (repeatable).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import re
import shutil
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

from autograder import chapters  # noqa: F401 - every chapter registered
from autograder.checking import assignment_text, casefile, checks, messages
from autograder.checking.assignment_spec import imported_packages
from autograder.student import contract

COURSE = Path(__file__).resolve().parent.parent
CHECK_MODULE = "attention_check.py"
#: what a release must never contain: solution or hidden-test regions, an import of the
#: reference package, or an import of the grader (the shipped checker is one self-contained
#: file; the grader's own modules, the case writer included, never ship)
FORBIDDEN = re.compile(
    r"BEGIN SOLUTION|END SOLUTION|BEGIN HIDDEN TESTS|END HIDDEN TESTS|"
    r"from solutions|import solutions|from answers|import answers|from autograder|import autograder"
)


class ReleaseError(RuntimeError):
    """The release could not be made, or would leak solutions or hidden tests."""


# ----------------------------------------------------------------------------------------
# step 1: the generated files next to the notebook


@functools.lru_cache(maxsize=8)
def _public_cases(assignment: str) -> dict:
    """check name -> its public cases, prepared (computed once per release)."""
    return {
        check.name: [checks.prepare(check.name, case) for case in checks.public_cases(check.name)]
        for check in checks.checks_for(assignment)
    }


def build_public_cases(assignment: str, path: Path, language: str = "en") -> int:
    """Write ``public_cases.npz`` for one assignment, its hints, its cases' names and the
    checker's message catalog (``messages.shipped``) in ``language``; returns the number of
    cases."""
    entries, total = {}, 0
    for name, cases in _public_cases(assignment).items():
        if language != "en":  # the same cases, their names and the known mistakes in the
            # language (a case's name is translated as a hint is: the chapter's catalog)
            cases = [
                dataclasses.replace(
                    case,
                    name=checks.translated_hint(case.name, language, assignment),
                    mistakes=tuple(
                        (checks.translated_hint(hint, language, assignment), outputs)
                        for hint, outputs in case.mistakes
                    ),
                )
                for case in cases
            ]
        entries[name] = {"spec": checks.spec(name, language), "cases": cases}
        total += len(cases)
    casefile.save_cases(path, assignment, entries, messages.shipped(language))
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


# The student's guide next to the notebook, one per edition (the English zip carries
# README.md, the Chinese one 使用说明.md): the exercise page's instructions, short. Generated,
# so the file names and the functions to write are always this assignment's.
GUIDES = {"en": "README.md", "zh_CN": "使用说明.md"}
GUIDE_ZH = GUIDES["zh_CN"]
GUIDE_TEXT = {
    "en": """# {assignment}: how to do this assignment

This is the assignment of chapter {chapter} of the course *{course}*. This guide is
the short form of the chapter's exercise page on the course site, which also gives the math
each task needs.

## Files

- `{assignment}.ipynb`: the notebook you complete;
- `{cases}`: the data of the public checks (inputs and reference outputs, no reference code);
- `{check_module}`: the module that runs the public checks (NumPy only);
- `requirements.txt`: what the notebook needs, pinned.

## Steps

1. Unzip, then open the notebook from inside this folder, so that it finds its check data.
   In a new environment:

       python3 -m venv .venv
       .venv/bin/pip install -r requirements.txt
       .venv/bin/jupyter lab {assignment}.ipynb

   {environment}
2. Replace the stub under each `YOUR CODE HERE` marker (it raises `NotImplementedError`) with
   your code. Keep the names and parameters: the checks call your functions by name. The
   functions you write:
{functions}
3. Run all cells (*Run → Run All Cells*). Each test cell calls your function on the inputs in
   `{cases}` and compares what it returns with the reference outputs at the tolerance its
   message states; nothing is downloaded and no reference code ships. The site's page
   "{messages_page}" explains the messages you will meet most often.
4. When every public check passes, hand in the notebook as your instructor asks. Grading runs
   the same public checks and hidden ones on fresh random inputs at the same tolerances, so
   make your functions right for every shape their docstrings allow. A written answer is
   graded by hand.
""",
    "zh_CN": """# {assignment}：作业使用说明

这是课程《{course}》第 {chapter} 章的作业。本说明是练习页面的简短中文版；完整的说明
（包括每道题需要的数学）见课程网站中文版“练习”部分的第 {chapter} 章练习页面。

## 文件

- `{assignment}.ipynb`：作业笔记本，你要完成的就是它；
- `{cases}`：公开检查的数据（输入与参考输出，不含任何参考代码）；
- `{check_module}`：运行公开检查的模块，只依赖 NumPy；
- `requirements.txt`：笔记本需要的软件包及其版本。

## 步骤

1. 解压后从这个文件夹里打开笔记本，这样它才能找到检查数据。在一个新环境里：

       python3 -m venv .venv
       .venv/bin/pip install -r requirements.txt
       .venv/bin/jupyter lab {assignment}.ipynb

   {environment}
2. 把每个 `YOUR CODE HERE` 标记下的占位代码（它会抛出 `NotImplementedError`）替换成你的实现。
   不要改动函数名和参数：检查按名字调用这些函数。本次作业要你编写的函数：
{functions}
3. 运行全部单元格（*Run → Run All Cells*）。每个检查单元格用 `{cases}` 中的输入调用你的函数，
   并在消息给出的容差内与参考输出比较；不联网，也不含参考代码。课程网站“练习”部分的
   “{messages_page}”一页解释了最常见的信息，以及每种信息指向的错误。
4. 所有公开检查都通过后，按教师的要求提交笔记本。计分时会重新运行这些公开检查，并在新的随机
   输入上运行隐藏检查（容差相同），所以函数要对文档字符串允许的每一种形状都正确，而不只是
   通过公开用例。书面回答由教师人工批改。
""",
}
ENVIRONMENT = {
    "en": "Any environment with Python 3.11, NumPy and JupyterLab works{torch}.",
    "zh_CN": "任何装有 Python 3.11、NumPy 和 JupyterLab 的环境都可以{torch}。",
}
TORCH = {
    "en": "; this assignment also needs PyTorch (`torch`, the CPU build is enough)",
    "zh_CN": "；本次作业还需要 PyTorch（`torch`，CPU 版即可）",
}
MESSAGES_PAGE = ("exercises/checker_messages", "Reading the checks' messages")
#: the course's title, and the page whose catalog holds its translation
COURSE_TITLE = ("preface", "Attention, derived")
#: the student's requirements.txt: what a released notebook needs, pinned to the versions the
#: course is tested with (tests/test_release.py compares them with the course's .venv)
STUDENT_REQUIREMENTS = ("numpy", "jupyterlab")
STUDENT_REQUIREMENTS_TORCH = ("torch",)


def functions_to_write(notebook: dict) -> list[str]:
    """The functions a released notebook asks for: those its stubs define (a function of a
    solution cell whose body nbgrader replaced by the stub's ``NotImplementedError``), in
    order; not the given wrappers that call them."""
    import ast

    def stubbed(node) -> bool:
        return any(
            isinstance(inner, ast.Raise)
            and isinstance(inner.exc, (ast.Name, ast.Call))
            and getattr(getattr(inner.exc, "func", inner.exc), "id", "")
            == NotImplementedError.__name__
            for inner in ast.walk(node)
        )

    names = []
    for cell in notebook["cells"]:
        if assignment_text.is_stub_cell(cell):
            for node in ast.parse("".join(cell["source"])).body:
                if isinstance(node, ast.FunctionDef) and stubbed(node):
                    names.append(node.name)
    return names


def pinned(package: str) -> str:
    """``package==<the version installed here>``: the course's .venv is what it is tested on."""
    from importlib.metadata import version

    return f"{package}=={version(package).split('+')[0]}"


def write_guide(assignment: str, folder: Path, language: str) -> Path:
    """The student's guide (``GUIDES[language]``) and ``requirements.txt`` in ``folder``.
    What the notebook needs (PyTorch or not) is read from what it imports; the title of the
    messages page is that page's own translation, so neither can drift from the truth."""
    notebook = json.loads((folder / f"{assignment}.ipynb").read_text(encoding="utf-8"))
    imports = set()
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            imports |= imported_packages("".join(cell["source"]))
    (page, title), course = MESSAGES_PAGE, COURSE_TITLE[1]
    if language != "en":
        title, course = (
            assignment_text.read_catalog(assignment_text.ZH_CATALOGS / "book" / f"{p}.po").get(t)
            for p, t in (MESSAGES_PAGE, COURSE_TITLE)
        )
        if not title or not course:
            raise ReleaseError(
                f"the title of book/{page}.md or of the course has no Chinese translation"
            )
    needs_torch = "torch" in imports
    packages = STUDENT_REQUIREMENTS + (STUDENT_REQUIREMENTS_TORCH if needs_torch else ())
    (folder / "requirements.txt").write_text(
        "".join(pinned(p) + "\n" for p in packages), encoding="utf-8"
    )
    for name in GUIDES.values():  # one guide per edition: the other edition's is not here
        (folder / name).unlink(missing_ok=True)
    path = folder / GUIDES[language]
    path.write_text(
        GUIDE_TEXT[language].format(
            assignment=assignment,
            course=course,
            chapter=int(re.match(r"ch(\d+)_", assignment).group(1)),
            cases=contract.CASES_FILE,
            check_module=CHECK_MODULE,
            functions="\n".join(f"   - `{name}`" for name in functions_to_write(notebook)),
            environment=ENVIRONMENT[language].format(torch=TORCH[language] if needs_torch else ""),
            messages_page=title,
        ),
        encoding="utf-8",
    )
    return path


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


def publish(course: Path, assignment: str) -> None:
    """``nbgrader release_assignment`` into the exchange of ``nbgrader_config.py``, replacing
    an earlier release of the same assignment."""
    api = nbgrader_api(course)
    outbound = Path(api.exchange_root) / api.course_id / "outbound" / assignment
    shutil.rmtree(outbound, ignore_errors=True)
    result = api.release_assignment(assignment)
    if not result["success"]:
        raise ReleaseError(
            f"nbgrader release_assignment {assignment} failed:\n"
            f"{result.get('error') or ''}\n{result.get('log') or ''}"
        )


# ----------------------------------------------------------------------------------------
# steps 3 to 5: the editions, zip and scan


ZH = assignment_text.LANGUAGES[1]


def write_editions(assignment: str, released: Path, targets) -> Path:
    """Rewrite the released notebook with the book's roles as the site shows them, and make
    ``release/zh_CN/<id>/``: the released folder with the notebook's prose in Chinese."""
    import nbformat

    path = released / f"{assignment}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    catalog = assignment_text.read_catalog(assignment_text.ASSIGNMENT_CATALOGS / f"{assignment}.po")
    try:
        chinese = assignment_text.translate_notebook(notebook, catalog, targets)
        english = assignment_text.resolve_notebook(notebook, targets)
    except assignment_text.AssignmentTextError as err:
        raise ReleaseError(f"the released notebook of {assignment}: {err}") from None
    mark_language(english, messages.ENGLISH)
    nbformat.write(english, path)
    folder = released.parent / ZH / assignment
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(
        released, folder, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints")
    )
    mark_language(chinese, ZH)
    nbformat.write(chinese, folder / path.name)
    build_public_cases(assignment, folder / contract.CASES_FILE, ZH)
    return folder


def mark_language(notebook, language: str) -> None:
    """Say the edition's language in the notebook's metadata, where the grader reads it to
    word the feedback (``messages.language_of``: anything but a known language is English)."""
    notebook.metadata[messages.METADATA_KEY] = {"language": language}


def make_zip(folder: Path) -> Path:
    """``folder`` zipped beside it, as ``<folder name>.zip`` with its files under
    ``<folder name>/``."""
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
    timings, targets = {}, None
    for assignment in only or checks.ASSIGNMENTS:
        start = time.perf_counter()
        source = course / "source" / assignment
        if not (source / f"{assignment}.ipynb").exists():
            raise ReleaseError(f"no source notebook {source / (assignment + '.ipynb')}")
        write_support_files(assignment, source)
        generate(course, assignment)
        released = course / "release" / assignment
        targets = targets or assignment_text.book_targets()
        write_guide(assignment, released, "en")
        chinese = write_editions(assignment, released, targets)
        write_guide(assignment, chinese, ZH)
        zip_path = make_zip(released)
        zh_zip = make_zip(chinese)
        problems = scan(released) + scan_zip(zip_path) + scan(chinese) + scan_zip(zh_zip)
        if problems:  # never leave a leaking release where someone could publish it
            for folder in (released, chinese):
                shutil.rmtree(folder, ignore_errors=True)
            zip_path.unlink(missing_ok=True)
            zh_zip.unlink(missing_ok=True)
            raise ReleaseError(
                f"the release of {assignment} leaks solutions or hidden tests:\n  "
                + "\n  ".join(problems)
            )
        publish(course, assignment)
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
        prog="python -m autograder.course.release", description=__doc__.splitlines()[0]
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
