"""The released notebooks' prose: readable in Jupyter, and in Chinese.

The source notebooks are written in the book's MyST: ``{eq}`ch2-softmax``` and
``{ref}`some-section``` render on the site, but Jupyter shows them raw. At release time:

- ``book_targets`` reads the book's chapter notebooks once: every labelled display equation
  gets the number the site gives it, ``(K.N)`` (chapter K, its N-th labelled equation;
  ``math_numfig`` with ``numfig_secnum_depth: 1`` in ``_config.yml``), and every ``(label)=``
  target the title of the heading under it (in Chinese, that heading's translation in the
  page's own catalog);
- ``resolve_roles`` writes those in place of the roles; a role it cannot resolve is an error,
  so a new role in a source notebook fails the release instead of reaching students raw;
- ``messages`` splits the prose of a source notebook into paragraphs, the units a translator
  translates (``locale/zh_CN/LC_MESSAGES/assignments/<id>.po``, kept with the book's
  catalogs by ``tools/translations.py``);
- ``translate_notebook`` gives the Chinese release: the same notebook, cell for cell (ids,
  nbgrader metadata, code, answer cells untouched, so it is graded exactly as the English
  one), with the prose paragraphs translated.

Checksums: nbgrader stores one per locked cell; a cell whose text changed here gets the
checksum of its new text, so the released notebook is consistent with itself (autograding
restores locked cells from the source notebook either way).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BOOK = REPO / "book"
ZH_CATALOGS = REPO / "locale" / "zh_CN" / "LC_MESSAGES"
ASSIGNMENT_CATALOGS = ZH_CATALOGS / "assignments"
LANGUAGES = ("en", "zh_CN")

ROLE = re.compile(r"\{(eq|ref)\}`([^`<>]+)`")
ANY_ROLE = re.compile(r"\{[a-z][a-z:]*\}`[^`]*`")
LABELLED_MATH = re.compile(r"\$\$.+?\$\$[ \t]*\(([\w-]+)\)", re.DOTALL)
MATH_DIRECTIVE_LABEL = re.compile(r"^```\{math\}[^\n]*\n(?::[a-z]+:.*\n)*?:label:\s*([\w-]+)", re.M)
TARGET = re.compile(r"^\(([\w-]+)\)=[ \t]*\n+#+[ \t]+(.+?)[ \t]*$", re.M)
CHAPTER = re.compile(r"ch(\d+)_")


class AssignmentTextError(ValueError):
    """A released notebook's prose cannot be made: an unknown role or a missing translation."""


@dataclass(frozen=True)
class Targets:
    equations: dict  # label -> "K.N"
    headings: dict  # label -> (page, English title)


def _markdown(notebook) -> list[str]:
    return [
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        for c in notebook["cells"]
        if c["cell_type"] == "markdown"
    ]


def book_targets(book: Path = BOOK) -> Targets:
    """Equation numbers and section titles of every chapter notebook in ``book``."""
    import nbformat

    equations, headings = {}, {}
    for path in sorted(book.glob("ch*_*.ipynb")):
        chapter = int(CHAPTER.match(path.name).group(1))
        text = "\n".join(_markdown(nbformat.read(path, as_version=4)))
        labelled = sorted(
            [(m.start(), m.group(1)) for m in LABELLED_MATH.finditer(text)]
            + [(m.start(), m.group(1)) for m in MATH_DIRECTIVE_LABEL.finditer(text)]
        )
        for number, (_, label) in enumerate(labelled, start=1):
            equations[label] = f"{chapter}.{number}"
        for m in TARGET.finditer(text):
            headings[m.group(1)] = (path.stem, m.group(2))
    return Targets(equations, headings)


def _heading_in(language: str, page: str, title: str) -> str:
    if language == "en":
        return title
    catalog = read_catalog(ZH_CATALOGS / "book" / f"{page}.po")
    translated = catalog.get(title)
    if not translated:
        raise AssignmentTextError(f"the heading {title!r} of {page} has no Chinese translation")
    return translated


INLINE_MATH = re.compile(r"\$[^$]*\$")


def _in_parentheses(text: str, at: int) -> bool:
    """Whether position ``at`` of ``text`` is inside parentheses its paragraph opened (ASCII
    or full-width; inline math, where a bracket may close an interval, not counted)."""
    start = text.rfind("\n\n", 0, at)
    before = INLINE_MATH.sub("", text[start + 1 if start >= 0 else 0 : at])
    opened = before.count("(") + before.count("（")
    return opened > before.count(")") + before.count("）")


def resolve_roles(text: str, targets: Targets, language: str = "en") -> str:
    """``{eq}`label``` -> ``(K.N)``, or ``K.N`` inside parentheses the text opened already
    (``({eq}`label`)`` is ``(K.N)``, never ``((K.N))``); ``{ref}`label``` -> the section's
    title, quoted."""

    def replace(match: re.Match) -> str:
        role, label = match.group(1), match.group(2).strip()
        if role == "eq":
            if label not in targets.equations:
                raise AssignmentTextError(f"{{eq}}`{label}`: no such equation in the book")
            number = targets.equations[label]
            return number if _in_parentheses(match.string, match.start()) else f"({number})"
        if label not in targets.headings:
            raise AssignmentTextError(f"{{ref}}`{label}`: no such section in the book")
        title = _heading_in(language, *targets.headings[label])
        return f"“{title}”"

    resolved = ROLE.sub(replace, text)
    left = ANY_ROLE.search(resolved)
    if left:
        raise AssignmentTextError(
            f"{left.group(0)}: a role the released notebooks cannot show (only {{eq}} and "
            "{ref} are resolved at release time)"
        )
    return resolved


# ----------------------------------------------------------------------------------------
# the Chinese edition of an assignment


def is_prose_cell(cell) -> bool:
    """A markdown cell of the instructor's text: not a student's answer cell."""
    return cell["cell_type"] == "markdown" and not cell.get("metadata", {}).get("nbgrader", {}).get(
        "solution", False
    )


def paragraphs(text: str) -> list[str]:
    """Blank-line separated paragraphs; a fenced code block stays whole."""
    out, current, fenced = [], [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not line.strip() and not fenced:
            if current:
                out.append("\n".join(current))
                current = []
            continue
        current.append(line)
    if current:
        out.append("\n".join(current))
    return out


#: words inside a formula: ``\text{...}``; a name alone (``\text{head}_h``, as the paper
#: writes it) is not a remark to translate, ``\text{(masked)}`` is
TEXT_IN_MATH = re.compile(r"\\text\{([^{}]*)\}")
NAME_IN_MATH = re.compile(r"[A-Za-z]+(?:\\?_[A-Za-z]+)*")


def words_in_formula(content: str) -> bool:
    """Whether the content of a formula's ``\\text{...}`` is words a reader reads (not a name)."""
    return bool(re.search(r"[A-Za-z]{2,}", content)) and not NAME_IN_MATH.fullmatch(content)


def needs_translation(paragraph: str) -> bool:
    """A paragraph with words outside code fences, code spans and math, or with words in a
    formula's ``\\text{...}`` (``softmax(S)\\ \\text{(masked)}``: the Chinese edition says it in
    Chinese)."""
    stripped = re.sub(r"```.*?```|`[^`]*`|\$\$.*?\$\$|\$[^$]*\$", "", paragraph, flags=re.S)
    if re.search(r"[A-Za-z]{2,}", stripped) is not None:
        return True
    without_code = re.sub(r"```.*?```|`[^`]*`", "", paragraph, flags=re.S)
    return any(words_in_formula(m.group(1)) for m in TEXT_IN_MATH.finditer(without_code))


def messages(notebook) -> list[str]:
    """What a translator translates, in order: the paragraphs of ``notebook``'s prose cells,
    and the docstrings' paragraphs and the comments of its stubs and given code
    (``code_messages``)."""
    seen, out = set(), []
    for cell in notebook["cells"]:
        if is_prose_cell(cell):
            found = [p for p in paragraphs(_cell_text(cell)) if needs_translation(p)]
        elif is_stub_cell(cell) or is_given_cell(cell):
            found = code_messages(_cell_text(cell))
        else:
            continue
        for message in found:
            if message not in seen:
                seen.add(message)
                out.append(message)
    return out


# The stubs: a solution cell's code outside its solution region (the signature, the
# docstring, comments) is what the student reads of a task; the given code (the setup
# cell's helpers, a given model, a cell to try things in) is what the student reads and
# calls. The Chinese edition gives the docstrings and comments of both in Chinese, the code
# unchanged (a locked cell is restored from the source when graded: the same code either
# way). Not a test cell: it is one call of the instructor's, with no prose.
SOLUTION_REGION = re.compile(
    r"^[ \t]*### BEGIN SOLUTION.*?^[ \t]*### END SOLUTION[^\n]*\n?", re.M | re.S
)
NBGRADER_MARKER = re.compile(r"YOUR CODE HERE|BEGIN SOLUTION|END SOLUTION|HIDDEN TESTS")
OPENING_QUOTE = re.compile(r"""[rRuU]{0,2}("{3}|'{3}|"|')""")


def is_stub_cell(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell["cell_type"] == "code" and bool(meta.get("solution")) and not meta.get("grade")


def is_given_cell(cell) -> bool:
    """A code cell the instructor gives (no solution to write, not a test cell)."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell["cell_type"] == "code" and not meta.get("solution") and not meta.get("grade")


def _parts(code: str):
    """``code`` without its solution region, its docstrings (``ast.Expr`` nodes) and its
    comments as (line, column, text), those a translator translates."""
    import ast
    import io
    import tokenize

    code = SOLUTION_REGION.sub("", code)
    try:
        tree = ast.parse(code)
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (SyntaxError, tokenize.TokenError):
        return code, [], []
    docstrings = []
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                docstrings.append(body[0])
    comments = []
    for token in tokens:
        text = token.string.lstrip("#").strip()
        if token.type == tokenize.COMMENT and needs_translation(text):
            if not NBGRADER_MARKER.search(text):
                comments.append((token.start[0], token.start[1], text))
    return code, docstrings, comments


def _docstring_paragraphs(expr) -> list[str]:
    import inspect

    return paragraphs(inspect.cleandoc(expr.value.value))


def code_messages(code: str) -> list[str]:
    """The docstring paragraphs and comments of a stub a translator translates."""
    _, docstrings, comments = _parts(code)
    found = [p for d in docstrings for p in _docstring_paragraphs(d) if needs_translation(p)]
    return found + [text for _, _, text in comments]


def translate_code(code: str, catalog: dict) -> str:
    """A stub with its docstrings and comments translated (code, names and layout kept).
    A cell that still has its solution region is the instructor's: left as it is."""
    if SOLUTION_REGION.search(code):
        return code
    code, docstrings, comments = _parts(code)
    lines = code.split("\n")
    for row, col, text in comments:
        lines[row - 1] = lines[row - 1][:col] + "# " + catalog.get(text, text)
    # docstrings from the last to the first, so that each one's line numbers stay right
    for expr in sorted(docstrings, key=lambda e: e.lineno, reverse=True):
        first, last, col = expr.lineno - 1, expr.end_lineno - 1, expr.col_offset
        opening = OPENING_QUOTE.match(lines[first][col:])
        if opening is None:
            continue
        prefix = lines[first][col : col + opening.start(1)]
        parts = [
            catalog.get(p, p) if needs_translation(p) else p for p in _docstring_paragraphs(expr)
        ]
        text = "\n\n".join(parts)
        if "\\" in text and "r" not in prefix.lower():
            prefix = "r" + prefix  # a translation's LaTeX: no escapes in a docstring
        indent = " " * col
        body = text.split("\n")
        new = [lines[first][:col] + prefix + '"""' + body[0]]
        if len(body) > 1:
            new += [indent + line if line else "" for line in body[1:]] + [indent]
        new[-1] += '"""' + lines[last][expr.end_col_offset :]
        lines[first : last + 1] = new
    return "\n".join(lines)


def _cell_text(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _po_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t")
    lines = escaped.split("\n")
    if len(lines) == 1:
        return f'"{lines[0]}"'
    parts = [f'"{line}\\n"' for line in lines[:-1]] + ([f'"{lines[-1]}"'] if lines[-1] else [])
    return '""\n' + "\n".join(parts)


def template(assignment: str, notebook) -> str:
    """A gettext template (.pot) of the assignment's prose, as Sphinx writes the book's."""
    header = (
        'msgid ""\nmsgstr ""\n'
        f'"Project-Id-Version: {assignment}\\n"\n'
        '"MIME-Version: 1.0\\n"\n'
        '"Content-Type: text/plain; charset=UTF-8\\n"\n'
        '"Content-Transfer-Encoding: 8bit\\n"\n'
    )
    entries = [
        f'#: autograder/source/{assignment}/{assignment}.ipynb\nmsgid {_po_string(m)}\nmsgstr ""\n'
        for m in messages(notebook)
    ]
    return "\n".join([header, *entries])


def write_templates(folder: Path, source: Path) -> list[Path]:
    """``<id>.pot`` in ``folder`` for every source notebook under ``source``."""
    import nbformat

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(source.glob("*/*.ipynb")):
        if path.parent.name != path.stem:
            continue
        target = folder / f"{path.stem}.pot"
        target.write_text(template(path.stem, nbformat.read(path, as_version=4)), "utf-8")
        written.append(target)
    return written


def read_catalog(path: Path) -> dict:
    """msgid -> msgstr of the translated, non-fuzzy entries of a .po file."""
    from babel.messages.pofile import read_po

    if not path.exists():
        return {}
    with open(path, "rb") as handle:
        catalog = read_po(handle)
    return {m.id: m.string for m in catalog if m.id and m.string and not m.fuzzy}


def translate_notebook(notebook, catalog: dict, targets: Targets):
    """The Chinese notebook: each prose paragraph replaced by its translation, roles
    resolved; everything else (cells, ids, metadata, code, answer cells) as it was."""
    missing = [m for m in messages(notebook) if m not in catalog]
    if missing:
        raise AssignmentTextError(
            f"{len(missing)} paragraph(s) have no Chinese translation (run "
            "`.venv/bin/python tools/translations.py update`, then translate them in "
            "locale/zh_CN/LC_MESSAGES/assignments/); the first: " + repr(missing[0][:120])
        )
    translated = copy.deepcopy(notebook)
    for cell in translated["cells"]:
        if is_prose_cell(cell):
            parts = [
                catalog[p] if needs_translation(p) else p for p in paragraphs(_cell_text(cell))
            ]
            set_text(cell, resolve_roles("\n\n".join(parts), targets, "zh_CN"))
        elif is_stub_cell(cell) or is_given_cell(cell):
            set_text(cell, translate_code(_cell_text(cell), catalog))
    return translated


def resolve_notebook(notebook, targets: Targets):
    """The English notebook with its prose cells' roles resolved."""
    resolved = copy.deepcopy(notebook)
    for cell in resolved["cells"]:
        if is_prose_cell(cell):
            set_text(cell, resolve_roles(_cell_text(cell), targets, "en"))
    return resolved


def set_text(cell, text: str) -> None:
    """Replace a cell's text, and its nbgrader checksum if it has one."""
    if text == _cell_text(cell):
        return
    cell["source"] = text
    meta = cell.get("metadata", {}).get("nbgrader", {})
    if isinstance(meta, dict) and meta.get("checksum"):
        from autograder.checking.notebook import checksum_of

        checksum = checksum_of(cell)  # nbgrader's, on metadata checked first
        if checksum is None:
            raise ValueError("a cell's nbgrader metadata is not nbgrader's: no checksum for it")
        meta["checksum"] = checksum
