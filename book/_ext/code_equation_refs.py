"""Equation references in the code a page shows read as the book's numbers, not raw MyST.

The reference package and the chapters' code cells cite equations by label in MyST role
syntax, {eq}`ch1-average-pool` (tests/test_equation_refs.py checks that every such label
exists, on the chapter it names). A code block is not parsed as MyST, so on the page the
role would appear verbatim, backticks and all, in every code cell and in every function
a chapter shows with ``literalinclude``. This post-transform rewrites each role inside a
literal block to the number the page gives that equation, e.g. "eq. (1.2)" ("(1.2)" alone
after "eq." or "eqs." and in a list of roles), numbered exactly as Sphinx numbers an
{eq} reference in the text. The downloadable notebooks and the package keep the labels.
A label the book does not define is left as it is: tests/test_equation_refs.py reports it.
"""

from __future__ import annotations

import re

from docutils import nodes
from docutils.nodes import make_id
from sphinx.transforms.post_transforms import SphinxPostTransform

ROLE = re.compile(r"\{eq\}`([^`<>]+?)`")
# text right before a role that already says "equation": "eq. ", "eqs. ", or a previous
# role and "," or "and" (a list of equations)
ALREADY_NAMED = re.compile(
    r"(?:\beqs?\.|\bequations?|\{eq\}`[^`]*`\s*(?:,\s*and|,|\band))\s*$", re.IGNORECASE
)


def equation_number(env, label: str) -> str | None:
    """The number the book displays for equation ``label`` ("1.2"), None if undefined.

    The same computation as ``sphinx.domains.math.MathDomain.resolve_xref``: with
    ``math_numfig`` the number comes from the table of contents' figure numbers.
    """
    found = env.get_domain("math").equations.get(label)
    if not found:
        return None
    docname, number = found
    if env.config.math_numfig and env.config.numfig:
        numbers = env.toc_fignumbers.get(docname, {}).get("displaymath", {})
        parts = numbers.get(make_id(f"equation-{label}"), ())
        if parts:
            eqno = ".".join(map(str, parts))
            return env.config.math_numsep.join(eqno.rsplit(".", 1))
    return str(number)


def rewrite(text: str, number_of) -> str:
    """``text`` with every {eq}`label` whose number is known replaced by "(n)" or "eq. (n)"."""

    def replace(match: re.Match) -> str:
        number = number_of(match.group(1))
        if number is None:
            return match.group(0)
        named = ALREADY_NAMED.search(text, 0, match.start())
        return f"({number})" if named else f"eq. ({number})"

    return ROLE.sub(replace, text)


class CodeEquationReferences(SphinxPostTransform):
    """Rewrite {eq} roles in literal blocks (code cells, literalinclude) to equation numbers."""

    default_priority = 400  # after the references of the text are resolved

    def run(self, **kwargs) -> None:
        for block in list(self.document.findall(nodes.literal_block)):
            text = block.astext()
            if "{eq}`" not in text:
                continue
            new = rewrite(text, lambda label: equation_number(self.env, label))
            if new == text:
                continue
            # rawsource too: the HTML writer highlights a block only when rawsource equals
            # its text (otherwise it takes it for a parsed literal and skips highlighting)
            block.rawsource = new
            block[:] = [nodes.Text(new)]


def setup(app):
    app.add_post_transform(CodeEquationReferences)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
