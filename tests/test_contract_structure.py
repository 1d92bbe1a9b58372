"""The grading package's shape: one contract, chapters as plug-ins, a core that names no chapter."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

from autograder.checking import casefile, checks, judging, messages
from autograder.student import contract

PACKAGE = Path(checks.__file__).resolve().parent.parent
# everything but chapters/ and source/: the package's modules and the grading pipeline
CORE = sorted(PACKAGE.glob("*.py")) + sorted(
    p
    for package in ("grading", "sandbox", "student", "checking", "course")
    for p in (PACKAGE / package).glob("*.py")
)


def _chapter_words() -> set[str]:
    words = set(checks.CHAPTERS)
    for chapter in checks.CHAPTERS.values():
        modules = {checks.reference_name(c.reference).rsplit(".", 1)[0] for c in chapter.checks}
        # solutions.<module> or answers.<assignment>, and <module>
        words |= modules | {m.split(".")[-1] for m in modules}
        words |= set(chapter.support_files)
    return words


def test_the_core_names_no_chapter():
    words = _chapter_words()
    assert len(checks.CHAPTERS) >= 5 and "ch1_pooling" in words and "answers.ch1_pooling" in words
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


#: the shipped checker's size bound, in lines: 824 before the split; 786 with the codec's
#: writer gone to casefile.py, the frames and the blob writer (``pack``) to frames.py, and the
#: typed Case and Verdict added (what is left: the reader, the case runner, the judge and its
#: teaching messages, ``check``); the writer coming back (about 60 lines) would break it.
#: 795: the ``integer`` comparator (a ``shift_right`` returning floats failed nothing, issue
#: 35), 7 lines.
#: 701 (issue 36): what only the sandbox or the grader needs moved out (the hidden cases'
#: wording, the hidden summary and ``ERROR_CODES`` to judging.py, ``FILE_TOO_LARGE`` to
#: frames.py, the in-sandbox flag and ``decode`` to the worker), the messages made one catalog
#: (``MESSAGES``: data, 90 lines of it) and the judge one ``assess`` with a finding per message.
#: 711: the typed ``Outcome`` of a call (its fields and docstring) in place of a dict, 398 lines
#: of code
#: 758 (issue 44, one vocabulary): the typed ``Spec`` of a check (its fields, docstring and JSON
#: at the case file's edge) in place of a dict, and the typed ``Finding`` of the judge
#: 818 (issue 45, diagnosis that generalises): ``consistent`` (a derived mistake is named only
#: where every failing case of its kind agrees, so the checker, the hidden check and the grader
#: decide alike), ``Derived`` (what marks a derived mistake), ``derived`` (its outputs read as a
#: recipe of the expected ones, not stored as arrays), ``run_cases`` running every case before
#: judging any, and the finding of outputs returned in another order
SHIPPED_LINES = 821  # 818 + issue 45's Python-int message (dtype.int)
#: the shipped checker's lines of *code*, issue 36's bound: docstrings, comments, blank lines
#: and the message catalog's data (``MESSAGES``) apart (546 before issue 36, 396 after; 421
#: with issue 44's typed ``Spec`` and ``Finding``; 456 with issue 45's ``consistent``,
#: ``Derived``, ``derived`` and the outputs' order; 457 with a number's Python int, dtype.int)
SHIPPED_CODE_LINES = 457


def code_lines(text: str) -> int:
    """Lines holding code: no blank or comment line, no docstring, not the catalog's data."""
    tree = ast.parse(text)
    skipped = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skipped |= set(range(first.lineno, first.end_lineno + 1))
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == [
            "MESSAGES"
        ]:
            skipped |= set(range(node.lineno, node.end_lineno + 1))
    ignored = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
    code = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type not in ignored + (tokenize.ENDMARKER,):
            code |= set(range(token.start[0], token.end[0] + 1))
    return len(code - skipped)


def test_code_lines_counts_code_only():
    text = '"""doc\n\nmore"""\n\n# a comment\nMESSAGES = {\n    "a": "b",\n}\n\n\ndef f(x):\n'
    text += '    """why"""\n    return (\n        x\n    )\n'
    assert code_lines(text) == 4  # def, return ( x )


def _defined(tree) -> set[str]:
    return {
        node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))
    } | {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def test_the_shipped_checker_imports_only_numpy_and_the_standard_library():
    tree = ast.parse(Path(contract.__file__).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "the shipped checker is one file: no relative import"
            imported.add(node.module.split(".")[0])
    import sys

    assert imported - {"__future__"} <= set(sys.stdlib_module_names) | {"numpy"}, imported


def test_the_shipped_checker_holds_no_writer_and_stays_small():
    """What ships as attention_check.py reads cases, runs and judges them, and no more: the
    codec's writer and the release's file writer are the grader's (casefile.py)."""
    text = Path(contract.__file__).read_text()
    defined = _defined(ast.parse(text))
    assert {"value", "fresh", "load_cases", "run_case", "assess", "judge", "summary"} <= defined
    assert {"check", "MESSAGES", "render"} <= defined
    writer = set(casefile.__all__)
    assert writer == {"encode", "save_cases", "as_stored"} and not writer & defined, (
        writer & defined
    )
    assert '"t": "array"' not in text and "np.frombuffer(json.dumps" not in text
    assert "np.savez" not in text and "encode_frame" not in text and "struct" not in text
    lines = text.count("\n")
    assert lines <= SHIPPED_LINES, f"the shipped checker grew to {lines} lines"
    assert code_lines(text) <= SHIPPED_CODE_LINES, code_lines(text)


def test_what_only_the_sandbox_or_the_grader_needs_does_not_ship():
    """The hidden cases' wording and summary, the error codes a sandboxed run may send, the
    in-sandbox flag and the sandbox's decoding live on the trusted or the sandbox side."""
    text = Path(contract.__file__).read_text()
    defined = _defined(ast.parse(text))
    gone = {"ERROR_CODES", "_IN_SANDBOX", "decode", "hidden_shown", "FILE_TOO_LARGE"}
    assert not gone & defined, gone & defined
    for wording in ("another shape", "another dtype", "hidden check failed", "failed too"):
        assert wording not in text, wording
    assert "hidden" not in "".join(contract.MESSAGES)  # no hidden wording among the ids
    assert {"hidden_shown", "summary", "judge", "ERROR_CODES"} <= set(dir(judging))
    from autograder.sandbox.command import IN_SANDBOX

    # the grader's wording and catalog stay on the trusted side: not bound into the sandbox
    assert judging not in IN_SANDBOX and messages not in IN_SANDBOX
    for module in IN_SANDBOX:
        imported = set()
        for node in ast.walk(ast.parse(Path(module.__file__).read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                imported |= {a.name.rsplit(".", 1)[-1] for a in node.names}
                imported.add((getattr(node, "module", None) or "").rsplit(".", 1)[-1])
        assert not imported & {"judging", "messages"}, module


def test_the_case_writer_never_ships_and_is_not_in_the_sandbox():
    from autograder import sandbox
    from autograder.course import release

    source = Path(release.__file__).read_text()
    assert "shutil.copyfile(Path(contract.__file__)" in source and "casefile.__file__" not in source
    from autograder.sandbox.command import IN_SANDBOX

    assert casefile not in IN_SANDBOX
    for path in Path(sandbox.__file__).parent.glob("*.py"):
        assert "casefile" not in path.read_text(), path
    assert release.FORBIDDEN.search("from autograder.checking.casefile import encode")


def test_one_codec_and_one_case_runner():
    """Case values are encoded only by the writer (casefile.py) and decoded only by the
    contract, and only the contract calls a student's function on a case: no second codec or
    case loop lives anywhere else in the package."""
    for path in CORE + sorted((PACKAGE / "chapters").glob("*.py")):
        text = path.read_text()
        if path.name != "casefile.py":
            assert '"t": "array"' not in text and "'t': 'array'" not in text, path.name
        if path.name != "contract.py":
            assert "default_rng(spec" not in text and "def value(" not in text, path.name
        assert "def decode" not in text, path.name


def test_a_reference_is_the_function_itself_and_loading_the_registry_imports_no_torch():
    """Every check names its reference function (no "module:function" string): a module
    without PyTorch imported as usual, a torch-backed one through ``checks.lazy_module``, so
    that a process that loads the registry never pays for PyTorch."""
    import subprocess
    import sys

    for check in checks.REGISTRY.values():
        fn = check.reference
        resolved = fn.resolve() if isinstance(fn, checks.LazyFunction) else fn
        # the chapter's code (solutions) or the answer key of its exercises (answers)
        assert callable(resolved) and resolved.__module__.startswith(("solutions.", "answers.")), (
            check.name
        )
        assert checks.reference_name(fn).startswith(("solutions.", "answers.")), check.name
    for path in sorted((PACKAGE / "chapters").glob("ch*.py")):
        assert not re.search(r'"solutions\.\w+:', path.read_text()), path.name
    probe = "import sys; from autograder.checking import checks; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


# ----------------------------------------------------------------------------------------
# the one message catalog: every id the code uses exists, every id is used

#: the modules that word messages
WORDING = [
    "student/contract.py",
    "checking/judging.py",
    "checking/messages.py",
    "grading/verdict.py",
]
MESSAGE_ID = re.compile(r"^[a-z][a-z_]*(\.[a-z_ ]+)*$")


def _choices(node) -> set:
    """The string constants an expression can be: "a", or "a" if ... else "b"."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        return _choices(node.body) | _choices(node.orelse)
    return set()


def _used_message_ids(sources=None) -> tuple[set, set]:
    """(ids the code looks up, prefixes of ids it builds) from the wording modules' syntax
    (``sources``: texts, the wording modules' by default): the key of every
    ``render``/``say`` call, every finding ``("<id>", {...})``, every constant a finding's
    key is chosen from, and the id families built with an f-string."""
    used, families = set(), set()
    for source in sources or [(PACKAGE / name).read_text() for name in WORDING]:
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
                at = {"render": 1, "say": 1, "_located": 0}.get(func)
                if at is not None and len(node.args) > at:
                    keys = _choices(node.args[at])
                    used |= keys | ({k + ".at" for k in keys} if func == "_located" else set())
            if isinstance(node, ast.Tuple) and len(node.elts) == 2:
                key, params = node.elts
                if isinstance(key, ast.Constant) and isinstance(params, ast.Dict):
                    used.add(key.value)
            if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == [
                "key"
            ]:
                used |= _choices(node.value)
            if isinstance(node, ast.JoinedStr) and isinstance(node.values[0], ast.Constant):
                prefix = node.values[0].value
                if MESSAGE_ID.match(prefix.rstrip(".")) and prefix.endswith("."):
                    families.add(prefix)
    return used, families


def test_the_message_id_scan_finds_each_kind_of_lookup():
    source = (
        'render(m, "a.one", x=1)\nsay("en", "b" if c else "c.two")\n'
        'found = ("d.three", {"x": 1})\nkey = "e" if c else "f"\n_located("g", p, w, "values")\n'
        'k = f"stopped.{reason}"\nrender(m, variable)\n'
    )
    used, families = _used_message_ids([source])
    assert used == {"a.one", "b", "c.two", "d.three", "e", "f", "g", "g.at"}, used
    assert families == {"stopped."}


def test_every_message_id_the_code_uses_is_in_the_catalog_and_every_id_is_used():
    catalog = messages.english()
    used, families = _used_message_ids()
    assert {"case", "hint", "values.at", "hidden.values", "grader.stopped", "cell.raised"} <= used
    assert families >= {"bad.", "stopped."}, families
    assert not used - set(catalog), sorted(used - set(catalog))
    built = {k for k in catalog if any(k.startswith(f) for f in families)}
    # the hidden wordings are chosen from judging's table, the shape explanations by
    # ``contract._shape_diagnosis``: both are constants of the wording modules too
    constants = set()
    for name in WORDING:
        for node in ast.walk(ast.parse((PACKAGE / name).read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                constants.add(node.value)
    unused = set(catalog) - used - built - constants
    assert not unused, sorted(unused)


def test_every_public_failure_has_a_hidden_wording_with_no_number_of_the_outcome():
    """Each message a failing case can get has its hidden wording (``judging.hidden_finding``),
    which keeps none of the numbers computed from what the function returned."""
    from autograder.checking import judging as j

    failures = [
        k
        for k in contract.MESSAGES
        if k.split(".")[0]
        in {"arity", "shape", "dtype", "mask", "nonfinite", "values", "tokens", "accuracy"}
        and k not in ("tokens.exact", "accuracy.pass")
    ]
    returned = {"got", "axis", "axes", "last", "count", "index", "error", "dtype", "wrong"}
    returned |= {"row", "accuracy", "correct", "allowed"}
    for key in failures:
        params = {p: 7 for p in re.findall(r"\{(\w+)\}", contract.MESSAGES[key])}
        params.update(size=10, scaled=False, total=10, wrong=3, count=3)
        params["because"] = ("end", {})
        params["bound"] = ("bound", {"atol": "1e-08", "rtol": "1e-05"})
        hidden_key, hidden_params = j.hidden_finding((key, params))
        assert hidden_key.startswith("hidden."), key
        assert not returned & set(hidden_params), (key, hidden_params)
        messages.say("en", hidden_key, **hidden_params)  # every placeholder filled
        messages.say("zh_CN", hidden_key, **hidden_params)
    for key in judging.UNCHANGED:
        assert judging.hidden_finding((key, {})) == (key, {})
