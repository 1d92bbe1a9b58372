"""The Chinese edition of every assignment, as a student unzips it: no English left to read.

Each chapter's ``release/zh_CN/<id>.zip`` is built by the real release
(``python -m autograder.course.release``, cached by ``tests/hostile/corpus.released_course``)
and scanned, file by file, for what a Chinese student would read:

- the notebook's prose (markdown cells) and the guide (``使用说明.md``);
- the docstrings and comments of every code cell (the stubs and the given code: a setup
  cell's helpers, a given model, a cell to try things in);
- in ``public_cases.npz``: every case's name, every hint of a check's spec and of a known
  mistake, and the checker's message catalog.

The rule, one for all of them (``english_runs``): outside what is not prose (code spans and
fences, ``$...$`` math, URLs, Python identifiers such as ``n_q`` or ``model.parameters()``,
``<eos>``-style tokens), no run of **three or more English words** in a row, words joined
only by spaces and ASCII punctuation; the few English phrases a Chinese text keeps on
purpose are listed in ``ALLOWED`` (a reference's "et al.", the English menu of JupyterLab
the student clicks); an indented line without Chinese is a code block (the guide's shell
commands). A case's name is short, so for it two English words in a row are
already too many, and one with an English word must hold Chinese ("H=16" need not). Anywhere, ``\\text{...}`` with an English word
inside is English in a formula (``\\operatorname{softmax}`` is a function's name, as in the
English). The terminology's drifted renderings (``tools/translations.VARIANTS``: 几何数列,
正向, 评分 for grading...) are reported too. And the checker-message ``|expected|`` is written in Chinese.

The check module ``attention_check.py`` is not scanned: it is the one contract the grader
shares, shipped byte for byte as the English edition's (tests/test_release.py), a library
the student calls but does not read; everything it says comes from the catalog scanned here.
"""

from __future__ import annotations

import io
import json
import re
import sys
import tempfile
import tokenize
import zipfile
from pathlib import Path

import pytest

from autograder.checking import checks
from autograder.student import contract

sys.path.insert(0, str(Path(__file__).parent))
from hostile.corpus import released_course  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools.translations import variant_problems  # noqa: E402

HAN = re.compile(r"[\u4e00-\u9fff]")
#: English a Chinese text keeps on purpose: a citation's "et al.", the English title of a
#: cited paper, and the JupyterLab menu (its interface is English) the guide tells the
#: student to click
ALLOWED = (
    "et al.",
    "Are Sixteen Heads Really Better than One?",
    "Run → Run All Cells",
    "Run All Cells",
)
#: the words of chapter 3's data set, English spoken phone numbers ("four double oh seven"):
#: quoted as the inputs they are
SPOKEN_DIGITS = set("zero one two three four five six seven eight nine oh double triple".split())
#: what is not prose: fenced code, code spans, display and inline math, URLs, <tokens>,
#: identifiers with an underscore, a dot or a call (n_q, model.parameters(), np.sort), a
#: tuple of names ((dq, dk, dv))
NOT_PROSE = re.compile(
    r"```.*?```|`[^`]*`|\$\$.*?\$\$|\$[^$\n]+\$|https?://\S+|<[a-z/][^<>\n]*>"
    r"|\b\w+(?:[._]\w+)+(?:\(\))?|\b\w+\(\)|\(\s*\w+(?:\s*,\s*\w+)+\s*\)",
    re.S,
)
#: an indented line with no Chinese: a code block (the guide's shell commands)
INDENTED_CODE = re.compile(r"^(?: {4}|\t)[^\n\u4e00-\u9fff]*$", re.M)
WORD = r"[A-Za-z][A-Za-z'’-]*[A-Za-z]"  # two letters or more
SEPARATOR = r"[ \t\n,;:.!?'\"()\[\]/]+"
TEXT_COMMAND = re.compile(r"\\(?:text|textrm|textit|textbf|mbox)\{([^{}]*)\}")
#: a name in a formula (\text{head}_i, \text{coverage\_context}): one word, as in the paper
NAME = re.compile(r"[A-Za-z]+(?:\\?_[A-Za-z]+)*")


def english_runs(text: str, words: int = 3, code_names: frozenset = frozenset()) -> list[str]:
    """The runs of ``words`` or more English words in the prose of ``text``; a word in
    ``code_names`` (a name the release's code defines or uses) is code, not English."""
    for phrase in ALLOWED:
        text = text.replace(phrase, " ")
    prose = NOT_PROSE.sub(" ", INDENTED_CODE.sub(" ", text))
    run = re.compile(rf"{WORD}(?:{SEPARATOR}{WORD}){{{words - 1},}}")
    found = []
    for match in run.finditer(prose):
        english = [w for w in re.findall(WORD, match.group()) if w not in code_names]
        if len(english) >= words and not set(w.lower() for w in english) <= SPOKEN_DIGITS:
            found.append(match.group())
    return found


def english_in_formulas(text: str) -> list[str]:
    """``\\text{...}`` (and its kin) holding English prose, in any formula of ``text``: more
    than one word, or a remark in brackets (``\\text{(masked)}``); a name alone is not."""
    return [
        m.group()
        for m in TEXT_COMMAND.finditer(text)
        if re.search(WORD, m.group(1)) and not NAME.fullmatch(m.group(1))
    ]


def code_names(files: dict[str, bytes]) -> frozenset:
    """Every name (not a keyword) the code cells of a release's notebooks use: ``dq``,
    ``memory``, ``embed`` in a docstring or a list of parameters are code."""
    import keyword

    names = set()
    for name, data in files.items():
        if name.endswith(".ipynb"):
            for cell in json.loads(data)["cells"]:
                if cell["cell_type"] == "code":
                    try:
                        tokens = list(
                            tokenize.generate_tokens(io.StringIO("".join(cell["source"])).readline)
                        )
                    except (tokenize.TokenError, SyntaxError):
                        continue
                    names |= {t.string for t in tokens if t.type == tokenize.NAME}
    return frozenset(n for n in names if not keyword.iskeyword(n) or n in ("None", "True", "False"))


def code_texts(source: str) -> list[str]:
    """The docstrings and comments of a code cell (its strings that are a statement alone)."""
    import ast

    out = []
    try:
        tree = ast.parse(source)
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (SyntaxError, tokenize.TokenError):
        return [source]
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            if isinstance(node.value.value, str):
                out.append(node.value.value)
    out += [t.string.lstrip("#") for t in tokens if t.type == tokenize.COMMENT]
    # nbgrader's own marker stays as nbgrader writes it (the autograder looks for it)
    return [t for t in out if t.strip() != "YOUR CODE HERE"]


def findings(files: dict[str, bytes]) -> list[str]:
    """Every English text a Chinese student would read in a release's files."""
    found, names = [], code_names(files)

    def scan(where: str, text: str, words: int = 3) -> None:
        found.extend(f"{where}: {r!r}" for r in english_runs(text, words, names))
        found.extend(f"{where}: {r!r} (English in a formula)" for r in english_in_formulas(text))
        found.extend(f"{where}: {problem}" for problem in variant_problems(text))

    for name, data in sorted(files.items()):
        if name.endswith(".ipynb"):
            notebook = json.loads(data)
            for i, cell in enumerate(notebook["cells"]):
                source = "".join(cell["source"])
                answer = cell["metadata"].get("nbgrader", {}).get("solution", False)
                if cell["cell_type"] == "markdown" and not answer:
                    scan(f"{name} cell {i}", source)
                elif cell["cell_type"] == "code":
                    for text in code_texts(source):
                        scan(f"{name} cell {i} (docstring or comment)", text)
        elif name.endswith(".md"):
            scan(name, data.decode("utf-8"))
        elif name.endswith(contract.CASES_FILE):
            catalog: dict = {}
            with tempfile.TemporaryDirectory() as folder:
                (Path(folder) / contract.CASES_FILE).write_bytes(data)
                cases = contract.load_cases(Path(folder) / contract.CASES_FILE, catalog)
            for key, template in catalog.items():
                scan(f"message {key}", template)
                if "|expected|" in template:
                    found.append(f"message {key}: '|expected|'")
            for check, entry in cases.items():
                for kind, hint in entry["spec"].hints.items():
                    scan(f"{check} hint {kind}", hint)
                for case in entry["cases"]:
                    if re.search(WORD, case.name) and not HAN.search(case.name):
                        found.append(f"{check} case {case.name!r}: no Chinese")
                    scan(f"{check} case {case.name!r}", case.name, words=2)
                    for hint, _ in case.mistakes:
                        scan(f"{check} case {case.name!r}, a mistake", hint)
    return found


def test_the_rule_finds_english_and_passes_chinese():
    """The scan's rule on texts whose answer is known (what would break if it were wrong)."""
    assert english_runs("the chapter's masked softmax (given)") == [
        "the chapter's masked softmax (given"
    ]
    assert english_runs("本章的掩蔽 softmax（已给出）：由评分 (..., n_q, n_k) 得到权重") == []
    assert english_runs("a row with no allowed key: shift by 0")
    assert english_runs("fully-masked row", words=2) == ["fully-masked row"]
    assert english_runs("完全被掩蔽的行", words=2) == []
    # identifiers, code, math and tokens are not prose
    assert (
        english_runs("返回 `np.sort(x, axis=-1)`，$\\sqrt{d}$，model.parameters() 和 <eos>") == []
    )
    assert english_runs("See et al. 引入它") == []
    assert english_in_formulas(r"$\sqrt{\text{number of layers}}$") == [r"\text{number of layers}"]
    assert english_in_formulas(r"$$x \qquad\text{(1)}$$") == []
    assert english_in_formulas(r"$a = \operatorname{softmax}(e)\ \text{(masked)}$")
    assert english_in_formulas(r"$\text{head}_i$, $\text{coverage\_context}$") == []
    assert english_in_formulas(r"$P(k \text{ wins})$")  # a word of a sentence, not a name
    # a name of the code is code; the data's spoken digits are data
    assert english_runs("返回 dq, dk, dv", code_names=frozenset({"dq", "dk", "dv"})) == []
    assert english_runs("返回 dq, dk, dv")
    assert english_runs("返回 (dq, dk, dv)") == []  # a tuple of names is code
    assert english_runs("例如 “four double oh seven”") == []
    assert english_in_formulas(r"$\text{层数}$") == []
    # a docstring and a comment of given code are read, nbgrader's marker is not
    code = 'def f(x):\n    """Row softmax of the scores."""\n    # YOUR CODE HERE\n    return x  # a b\n'
    assert code_texts(code) == ["Row softmax of the scores.", " a b"]


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    return released_course(tmp_path_factory.mktemp("course") / "course", checks.ASSIGNMENTS)


@pytest.mark.parametrize("assignment", checks.ASSIGNMENTS)
def test_the_chinese_zip_has_no_english_to_read(released, assignment):
    path = released / "release" / "zh_CN" / f"{assignment}.zip"
    with zipfile.ZipFile(path) as zf:
        files = {n: zf.read(n) for n in zf.namelist() if not n.endswith(".py")}
    assert any(n.endswith(".ipynb") for n in files) and any(
        n.endswith(contract.CASES_FILE) for n in files
    )
    problems = findings(files)
    assert problems == [], f"{len(problems)} English texts in {path.name}:\n" + "\n".join(
        problems[:40]
    )


@pytest.mark.parametrize("assignment", checks.ASSIGNMENTS[:1])
def test_the_english_zip_is_english_to_the_scan(released, assignment):
    """The same scan on the English zip finds English everywhere it looks (the scan reads
    what it should: a scan that read nothing would pass the Chinese zip too)."""
    with zipfile.ZipFile(released / "release" / f"{assignment}.zip") as zf:
        files = {n: zf.read(n) for n in zf.namelist() if not n.endswith(".py")}
    problems = findings(files)
    for where in (".ipynb cell", "README.md", "case ", "message ", "hint "):
        assert any(where in p for p in problems), where
