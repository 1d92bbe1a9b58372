"""The source notebooks and `python -m autograder.course.release` (on a temporary copy of the course).

- every source notebook has the required structure: an opening that names the chapter,
  4-6 auto-graded tasks worth 10-20 points, one manually graded answer, locked test cells
  whose `check(...)` calls (found with the grader's regex) name registry checks of that
  assignment and whose hidden block calls run_hidden for the same checks;
- the release holds no solution, no hidden test and no import of `solutions`, has the
  stubs, the public cases and the check module, is zipped, and its public checks run
  offline from the released folder alone;
- the scan fails loudly on a planted leak.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from autograder.checking import assignment_text, checks
from autograder.course import release
from autograder.student import contract

COURSE = Path(release.__file__).resolve().parent.parent
CONTRACT_REGEX = re.compile(r"check\(\s*[\"'](\w+)[\"']\s*,\s*(\w+)\s*\)")
HIDDEN_BLOCK = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)
REPO = COURSE.parent


def chapter_title(assignment: str) -> str:
    """The title of the book chapter an assignment belongs to: the first ``# `` heading of
    ``book/<assignment id>.ipynb`` (a registered chapter without a book page fails here)."""
    path = REPO / "book" / f"{assignment}.ipynb"
    assert path.is_file(), f"chapter {assignment} is registered but the book has no {path.name}"
    for cell in nbformat.read(path, as_version=4).cells:
        for line in cell.source.splitlines():
            if cell.cell_type == "markdown" and line.startswith("# "):
                return line[2:].strip()
    raise AssertionError(f"{path} has no '# ' title")


def _source(assignment):
    return nbformat.read(COURSE / "source" / assignment / f"{assignment}.ipynb", as_version=4)


def _graded_code_cells(nb):
    return [
        c for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")
    ]


TASK_HEADING = re.compile(r"^## Task \d+ — (.*) \((\d+) points?(, graded by hand)?\)$", re.M)


def _tasks(nb) -> list:
    """(title, stated points, by hand, graded cells) of each "## Task N — ... (P points)"."""
    tasks: list = []
    for cell in nb.cells:
        heading = TASK_HEADING.search(cell.source) if cell.cell_type == "markdown" else None
        if heading:
            tasks.append((heading[1], int(heading[2]), bool(heading[3]), []))
        if cell.metadata.get("nbgrader", {}).get("grade") and tasks:
            tasks[-1][3].append(cell)
    return tasks


@pytest.mark.parametrize("assignment", checks.ASSIGNMENTS)
def test_source_notebook_structure(assignment):
    nb = _source(assignment)
    assert chapter_title(assignment) in nb.cells[0].source, (
        "the opening must name the chapter to read"
    )
    tests = _graded_code_cells(nb)
    tasks = _tasks(nb)
    assert 4 <= len([t for t in tasks if not t[2]]) <= 6  # the ladder: warm-up, core, stretch
    for title, stated, _by_hand, cells in tasks:  # a task's points are its test cells'
        assert cells and sum(c.metadata["nbgrader"]["points"] for c in cells) == stated, title
    points = sum(c.metadata["nbgrader"]["points"] for c in tests)
    assert 10 <= points <= 20
    # one check per test cell: one task's bug never costs another task's points
    assert all(len(CONTRACT_REGEX.findall(HIDDEN_BLOCK.sub("", c.source))) == 1 for c in tests)
    manual = [
        c
        for c in nb.cells
        if c.cell_type == "markdown" and c.metadata.get("nbgrader", {}).get("grade")
    ]
    assert len(manual) == 1 and manual[0].metadata["nbgrader"]["solution"]
    used = []
    for cell in tests:
        meta = cell.metadata["nbgrader"]
        assert meta["locked"] and meta["points"] > 0
        hidden = HIDDEN_BLOCK.search(cell.source)
        assert hidden, "every test cell has a hidden block"
        public_part = HIDDEN_BLOCK.sub("", cell.source)
        calls = CONTRACT_REGEX.findall(public_part)
        assert calls, cell.source
        for name, fn in calls:
            assert name == fn and checks.REGISTRY[name].assignment == assignment
            assert f'run_hidden("{name}", {fn})' in hidden.group(1)
        used += [name for name, _ in calls]
    assert sorted(used) == sorted(c.name for c in checks.checks_for(assignment))
    ids = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if "nbgrader" in c.metadata]
    assert len(ids) == len(set(ids))
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
            assert (
                "### BEGIN SOLUTION" in cell.source and '"""' in cell.source
            )  # docstring with shapes
        assert (
            "from solutions" not in cell.source
            and "import solutions" not in cell.source
            or "BEGIN HIDDEN TESTS" in cell.source
        )


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    shutil.copy(COURSE / "nbgrader_config.py", course)
    shutil.copytree(
        COURSE / "source",
        course / "source",
        ignore=shutil.ignore_patterns("*.npz", "attention_check.py", "__pycache__"),
    )
    release.release(course, log=lambda *_: None)
    return course


@pytest.mark.parametrize("assignment", checks.ASSIGNMENTS)
def test_release_contents(released, assignment):
    folder = released / "release" / assignment
    files = {p.name for p in folder.iterdir()}
    assert {f"{assignment}.ipynb", "public_cases.npz", release.CHECK_MODULE} <= files
    nb = nbformat.read(folder / f"{assignment}.ipynb", as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    assert release.FORBIDDEN.search(text) is None
    assert "run_hidden" not in text
    solutions = [
        c
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"
    ]
    assert solutions and all("raise NotImplementedError()" in c.source for c in solutions)
    for cell in _graded_code_cells(nb):
        assert CONTRACT_REGEX.search(cell.source)
    loaded = contract.load_cases(folder / "public_cases.npz")
    assert sorted(loaded) == sorted(c.name for c in checks.checks_for(assignment))
    with zipfile.ZipFile(released / "release" / f"{assignment}.zip") as zf:
        names = set(zf.namelist())
    assert {f"{assignment}/{f}" for f in files if f != "__pycache__"} <= names
    assert (
        release.scan(folder) == []
        and release.scan_zip(released / "release" / f"{assignment}.zip") == []
    )
    # each edition's guide beside the notebook names every function the student writes
    # (the stubs, not a given wrapper), says `jupyter lab` and ships a requirements.txt
    for edition, guide_name in release.GUIDES.items():
        where = folder if edition == "en" else released / "release" / edition / assignment
        listed = {p.name for p in where.iterdir()}
        assert guide_name in listed and not (set(release.GUIDES.values()) - {guide_name}) & listed
        guide = (where / guide_name).read_text(encoding="utf-8")
        assert guide.startswith(f"# {assignment}")
        for name in release.functions_to_write(
            json.loads((where / f"{assignment}.ipynb").read_text(encoding="utf-8"))
        ):
            assert f"`{name}`" in guide
        assert "jupyter lab" in guide and "jupyter notebook" not in guide
        # what the notebook needs, read from its imports: only ch3 trains a PyTorch model
        assert ("PyTorch" in guide) == (assignment == "ch3_seq2seq")
        wanted = (where / "requirements.txt").read_text().split()
        assert wanted == [release.pinned(p) for p in ("numpy", "jupyterlab")] + (
            [release.pinned("torch")] if assignment == "ch3_seq2seq" else []
        )
    assert f"{assignment}/README.md" in names
    assert "“读懂检查给出的信息”" in (
        released / "release" / "zh_CN" / assignment / release.GUIDE_ZH
    ).read_text(encoding="utf-8")  # the messages page by its own Chinese title
    # the released notebook shows no MyST role raw (Jupyter would print it as typed)
    assert not re.search(r"\{(eq|ref|doc|cite|term)[a-z:]*\}`", text)


def _code_without_text(source: str) -> str:
    """The program a cell holds: its syntax tree with every docstring emptied (comments are
    not in the tree)."""
    import ast

    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                body[0].value.value = ""
    return ast.dump(tree)


def _assert_same_cases_with_hints_in_chinese(assignment, english, chinese):
    """The two editions' public cases: the same cases, answers and known mistakes' outputs;
    the hints (of the spec and of the known mistakes) in each edition's language, every
    Chinese one translated."""
    en, zh = contract.load_cases(english), contract.load_cases(chinese)
    assert list(en) == list(zh)
    han = re.compile(r"[\u4e00-\u9fff]")

    def same(a, b):
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            a, b = np.asarray(a), np.asarray(b)
            return (
                a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
            )
        return type(a) is type(b) and a == b

    for name in en:
        spec = en[name]["spec"]
        assert dataclasses.replace(zh[name]["spec"], hints={}) == dataclasses.replace(
            spec, hints={}
        )
        assert zh[name]["spec"].hints == {
            k: checks.translated_hint(v, "zh_CN", assignment) for k, v in spec.hints.items()
        }
        assert all(han.search(text) for text in zh[name]["spec"].hints.values()), name
        for a, b in zip(en[name]["cases"], zh[name]["cases"], strict=True):
            # the case's name in the edition's language (the chapter's catalog, as a hint)
            assert checks.translated_hint(a.name, "zh_CN", assignment) == b.name
            assert han.search(b.name) or not re.search("[A-Za-z]{2}", b.name)  # "H=16"
            assert len(a.args) == len(b.args)
            assert all(same(x, y) for x, y in zip([*a.args, *a.expected], [*b.args, *b.expected]))
            assert [checks.translated_hint(h, "zh_CN", assignment) for h, _ in a.mistakes] == [
                h for h, _ in b.mistakes
            ]
            assert all(han.search(h) for h, _ in b.mistakes), (name, a.name)
            for (_h, xs), (_g, ys) in zip(a.mistakes, b.mistakes, strict=True):
                assert all(same(x, y) for x, y in zip(xs, ys, strict=True))


@pytest.mark.parametrize("assignment", checks.ASSIGNMENTS)
def test_chinese_release_has_the_same_files_and_cells(released, assignment):
    english = released / "release" / assignment
    chinese = released / "release" / "zh_CN" / assignment
    assert {p.name for p in chinese.iterdir()} - {release.GUIDE_ZH} == {
        p.name for p in english.iterdir()
    } - {"README.md"}
    for name in (release.CHECK_MODULE, "requirements.txt"):
        assert (chinese / name).read_bytes() == (english / name).read_bytes()
    _assert_same_cases_with_hints_in_chinese(
        assignment, english / contract.CASES_FILE, chinese / contract.CASES_FILE
    )
    en = nbformat.read(english / f"{assignment}.ipynb", as_version=4)
    zh = nbformat.read(chinese / f"{assignment}.ipynb", as_version=4)
    assert [(c.get("id"), c.cell_type) for c in zh.cells] == [
        (c.get("id"), c.cell_type) for c in en.cells
    ]
    stubs = 0
    for a, b in zip(en.cells, zh.cells):
        if assignment_text.is_stub_cell(a) or assignment_text.is_given_cell(a):
            # the same code: only its docstrings and comments are Chinese
            stubs += assignment_text.is_stub_cell(a)
            assert _code_without_text(a.source) == _code_without_text(b.source)
            assert {k: v for k, v in a.metadata.items() if k != "nbgrader"} == {
                k: v for k, v in b.metadata.items() if k != "nbgrader"
            }
            if assignment_text.code_messages(a.source):
                assert re.search(r"[\u4e00-\u9fff]", b.source), b.source[:200]
        elif a.cell_type == "code" or a.metadata.get("nbgrader", {}).get("solution"):
            assert a.source == b.source and a.metadata == b.metadata
    assert stubs
    assert re.search(r"[\u4e00-\u9fff]", zh.cells[0].source)
    with zipfile.ZipFile(released / "release" / "zh_CN" / f"{assignment}.zip") as zf:
        names = set(zf.namelist())
    assert names == {f"{assignment}/{p.name}" for p in chinese.iterdir()}
    assert release.scan(chinese) == []


def test_public_checks_run_offline_from_the_released_folder(released, tmp_path):
    """Unzip a release elsewhere and run the instructor's solution cells against it in a
    fresh interpreter: every public check passes, and neither `solutions` nor
    `autograder` is imported."""
    with zipfile.ZipFile(released / "release" / "ch5_multihead.zip") as zf:
        zf.extractall(tmp_path)
    folder = tmp_path / "ch5_multihead"
    source = _source("ch5_multihead")
    code = [
        c.source
        for c in source.cells
        if c.cell_type == "code" and not c.metadata.get("nbgrader", {}).get("grade")
    ]
    checks_code = [re.sub(HIDDEN_BLOCK, "", c.source) for c in _graded_code_cells(source)]
    script = "\n\n".join(
        code
        + checks_code
        + [
            "import sys\nassert not [m for m in sys.modules if m.split('.')[0] in ('solutions', 'autograder')]\n"
        ]
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=folder, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("public cases passed") == len(checks.checks_for("ch5_multihead"))


def test_ch3_release_ships_training_data_loadable_without_pickle(released):
    from autograder.chapters import ch3_seq2seq

    with np.load(
        released / "release" / "ch3_seq2seq" / ch3_seq2seq.DATA_FILE, allow_pickle=False
    ) as data:
        assert (
            data["train_src"].shape[0]
            == data["train_tgt"].shape[0]
            == ch3_seq2seq.TRANSLATE_TRAIN_SIZE
        )
        assert list(data["target_vocab"][:3]) == ["<pad>", "<bos>", "<eos>"]


def test_scan_finds_planted_leaks(tmp_path):
    folder = tmp_path / "release" / "ch1_pooling"
    folder.mkdir(parents=True)
    (folder / "ok.py").write_text("print('fine')\n")
    assert release.scan(folder) == []
    (folder / "leak.py").write_text("x = 1\n### BEGIN SOLUTION\n")
    (folder / "cheat.py").write_text("from solutions.pooling import average_pool\n")
    (folder / "attention_check.py").write_text("from autograder.checking.casefile import encode\n")
    problems = release.scan(folder)
    assert any("leak.py, line 2" in p for p in problems) and any("cheat.py" in p for p in problems)
    assert any("attention_check.py" in p for p in problems)
    zip_path = release.make_zip(folder)
    assert len(release.scan_zip(zip_path)) == 3


def test_release_fails_loudly_when_a_notebook_imports_solutions(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy(COURSE / "nbgrader_config.py", course)
    shutil.copytree(
        COURSE / "source" / "ch5_multihead",
        course / "source" / "ch5_multihead",
        ignore=shutil.ignore_patterns("*.npz", "attention_check.py", "__pycache__"),
    )
    path = course / "source" / "ch5_multihead" / "ch5_multihead.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(2, nbformat.v4.new_code_cell("from solutions.multihead import split_heads"))
    nbformat.write(nb, path)
    with pytest.raises(release.ReleaseError, match="from solutions"):
        release.release(course, only=["ch5_multihead"], log=lambda *_: None)
    assert not (course / "release" / "ch5_multihead").exists()  # the leaking release is gone
    assert not (course / "release" / "ch5_multihead.zip").exists()


def test_cli_reports_failure_with_exit_code(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "autograder.course.release",
            "--course",
            str(tmp_path),
            "--only",
            "ch1_pooling",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1 and "no source notebook" in result.stderr


def test_ch3_locked_tiny_seq2seq_is_the_model_the_grader_decodes_with(tmp_path, monkeypatch):
    """The notebook's locked TinySeq2Seq (with model_from_parameters) and the trusted copy in
    ``solutions.seq2seq`` have the same parameter names and shapes in the same order (the
    order a flat vector of parameters is read in), and for the same random parameters the
    same encoder states, initial state, logits, next state and attention weights, exactly:
    the copy the grader's expected tokens come from cannot drift from the students' one."""
    from autograder.chapters import ch3_seq2seq
    from solutions import seq2seq

    monkeypatch.chdir(tmp_path)
    ch3_seq2seq.write_translation_data(tmp_path / ch3_seq2seq.DATA_FILE)
    locked = next(
        c.source
        for c in _source("ch3_seq2seq").cells
        if c.metadata.get("nbgrader", {}).get("grade_id") == "given-model"
    )
    namespace = {"np": np, "__name__": "__main__"}
    exec(compile(locked, "<ch3 given-model>", "exec"), namespace)

    case = checks.public_cases("translate_given_model")[0]
    src, parameters, _ = case.args
    theirs = namespace["model_from_parameters"](parameters)
    ours = seq2seq.tiny_model(parameters)
    assert [(n, p.shape) for n, p in theirs.named_parameters()] == [
        (n, p.shape) for n, p in ours.named_parameters()
    ]
    with torch.no_grad():
        src = torch.as_tensor(src)
        encoded = theirs.encode(src), ours.encode(src)
        for a, b in zip(*encoded):
            assert torch.equal(a, b)
        h, mask, s0 = encoded[1]
        y = torch.arange(len(src)) % len(seq2seq.TARGET_VOCAB)  # every kind of token
        for a, b in zip(theirs.step(y, s0, h, mask), ours.step(y, s0, h, mask)):
            assert torch.equal(a, b)
        # and the parameters really differ from a fresh model's: the vector was read
        fresh = namespace["TinySeq2Seq"](len(seq2seq.SOURCE_VOCAB), len(seq2seq.TARGET_VOCAB))
        assert not torch.equal(theirs.out.bias, fresh.out.bias)
