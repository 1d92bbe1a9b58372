"""book/_ext/code_equation_refs.py: {eq} roles in shown code become the page's numbers.

A code cell or a ``literalinclude`` is not parsed as MyST, so without the extension the
reader sees {eq}`ch1-average-pool` verbatim. The pure rewriting is checked on strings; a
small Sphinx build (two numbered chapters, equations, a code block and a literalinclude)
checks that the number in the code is the number the text's own {eq} reference gets, and
that the code is still highlighted.
"""

from __future__ import annotations

import html
import importlib.util
import re
from pathlib import Path

from sphinx.application import Sphinx

ROOT = Path(__file__).resolve().parents[1]
EXT = ROOT / "book" / "_ext"


def _module():
    spec = importlib.util.spec_from_file_location(
        "code_equation_refs", EXT / "code_equation_refs.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


NUMBERS = {"ch1-a": "1.1", "ch1-b": "1.2", "ch2-c": "2.3"}


def test_rewrite_names_the_equation_once_and_leaves_unknown_labels():
    rewrite = _module().rewrite
    cases = {
        "present, {eq}`ch1-a`.": "present, eq. (1.1).",
        "# eq. {eq}`ch1-a`": "# eq. (1.1)",
        "eqs. {eq}`ch1-a` and {eq}`ch1-b`": "eqs. (1.1) and (1.2)",
        "({eq}`ch1-a`, {eq}`ch2-c`)": "(eq. (1.1), (2.3))",
        "see {eq}`ch9-missing` here": "see {eq}`ch9-missing` here",
        "x = 1  # no role": "x = 1  # no role",
    }
    for text, want in cases.items():
        assert rewrite(text, NUMBERS.get) == want, text


CONF = """
extensions = ["code_equation_refs"]
numfig = True
math_numfig = True
numfig_secnum_depth = 1
"""
INDEX = """
Book
====

.. toctree::
   :numbered:

   one
   two
"""
ONE = """
One
===

.. math::
   :label: ch1-a

   x = 1

Text :eq:`ch1-a`.

.. code-block:: python

   y = 2  # eq. {eq}`ch1-a`, and {eq}`ch2-c` of the next chapter
"""
TWO = """
Two
===

.. math::
   :label: ch2-b

   b = 1

.. math::
   :label: ch2-c

   c = 1

Text :eq:`ch2-c`.

.. literalinclude:: code.py
   :language: python
"""
CODE = '''def f(x):
    """The mean, {eq}`ch1-a`; unknown {eq}`ch9-missing`."""
    return x
'''


def _code_blocks(page: str) -> list[tuple[str, int]]:
    """(text, number of highlighting spans) of every highlighted code block of a page."""
    blocks = re.findall(r'<div class="highlight"><pre>(.*?)</pre>', page, re.S)
    return [(html.unescape(re.sub(r"<[^>]+>", "", b)), b.count("<span")) for b in blocks]


def _text_reference(page: str, label: str) -> str:
    """The number the text's {eq} reference to ``label`` shows, e.g. '2.2'."""
    return re.search(rf'href="[^"]*#equation-{label}"[^>]*>\(([\d.]+)\)', page).group(1)


def test_a_sphinx_build_shows_the_texts_numbers_in_the_code(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    files = {"conf.py": CONF, "index.rst": INDEX, "one.rst": ONE, "two.rst": TWO, "code.py": CODE}
    for name, text in files.items():
        (src / name).write_text(text, encoding="utf-8")
    (src / "conf.py").write_text(f"import sys\nsys.path.insert(0, {str(EXT)!r})\n" + CONF)
    app = Sphinx(
        src, src, tmp_path / "html", tmp_path / "doctrees", "html", status=None, warning=None
    )
    app.build()
    one = (tmp_path / "html" / "one.html").read_text(encoding="utf-8")
    two = (tmp_path / "html" / "two.html").read_text(encoding="utf-8")
    a, c = _text_reference(one, "ch1-a"), _text_reference(two, "ch2-c")
    assert (a, c) == ("1.1", "2.2")  # chapter-numbered, as the book numbers them
    [(code_one, spans_one)] = _code_blocks(one)
    [(code_two, spans_two)] = _code_blocks(two)
    assert code_one == f"y = 2  # eq. ({a}), and ({c}) of the next chapter\n"
    assert code_two.startswith(
        f'def f(x):\n    """The mean, eq. ({a}); unknown {{eq}}`ch9-missing`.'
    )
    assert "{eq}`ch1-a`" not in one + two
    assert spans_one > 3 and spans_two > 3  # still highlighted as Python
