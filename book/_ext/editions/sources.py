"""The page's source in its edition's language: the notebook behind the "download source"
button, its markdown translated from the page's catalog, its code the same."""

from __future__ import annotations

import json
import re
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util.i18n import docname_to_domain

from editions.languages import is_default
from editions.pages import FIGURE_DESCRIPTIONS

# ----------------------------------------------------------------------------------------
# the page's source in the edition's language (the "download source" button)

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,}|:{3,})\s*(.*)$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_ITEM = re.compile(r"^(\s*)([-*+]|\d+[.)])\s+(.*)$")
# directives whose body is prose (translated), the others (math, code, includes) are kept
PROSE_DIRECTIVES = {
    "admonition",
    "note",
    "tip",
    "hint",
    "important",
    "warning",
    "caution",
    "attention",
    "danger",
    "error",
    "seealso",
    "margin",
    "dropdown",
    "epigraph",
}


def translate_markdown(text: str, translate) -> str:
    """``text`` (MyST Markdown) with each message replaced by ``translate(message)``.

    A message is what Sphinx extracts into the catalogs: a paragraph (its lines joined by
    spaces), a heading, a list item's paragraph, a table cell, an admonition's title.
    Math, code, directives other than admonitions, labels and comments are kept as they
    are, and so is a message ``translate`` returns unchanged (it has no translation).
    """
    lines = text.split("\n")
    out: list[str] = []
    i = 0

    def is_block_start(line: str) -> bool:
        """A line that ends a paragraph: blank, a fence, math, a table, a quote, a
        comment, a label ``(name)=``, a heading or a list item."""
        stripped = line.strip()
        return (
            not stripped
            or stripped.startswith(("$$", "|", ">", "%", "+++"))
            or (stripped.startswith("(") and stripped.endswith(")="))
            or bool(_FENCE.match(line) or _HEADING.match(line) or _ITEM.match(line))
        )

    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        fence = _FENCE.match(line)
        if fence:
            indent, marks, info = fence.groups()
            closing = re.compile(rf"^\s*{re.escape(marks[0])}{{{len(marks)},}}\s*$")
            j = i + 1
            while j < len(lines) and not closing.match(lines[j]):
                j += 1
            body = lines[i + 1 : j]
            directive = re.match(r"\{([\w-]+)\}\s*(.*)", info)
            if directive and directive[1] in PROSE_DIRECTIVES:
                title = directive[2].strip()
                head = f"{indent}{marks}{{{directive[1]}}}"
                out.append(f"{head} {translate(title)}" if title else head)
                options = 0
                while options < len(body) and body[options].strip().startswith(":"):
                    options += 1
                out += body[:options]
                out += translate_markdown("\n".join(body[options:]), translate).split(
                    "\n"
                )
            else:
                out.append(line)
                out += body
            if j < len(lines):
                out.append(lines[j])
            i = j + 1
            continue
        if stripped.startswith(">"):  # a block quote: its content, quoted again
            j = i
            while j < len(lines) and lines[j].strip().startswith(">"):
                j += 1
            inner = "\n".join(re.sub(r"^\s*> ?", "", quoted) for quoted in lines[i:j])
            out += [
                "> " + quoted if quoted else ">"
                for quoted in translate_markdown(inner, translate).split("\n")
            ]
            i = j
            continue
        if stripped.startswith("$$"):
            j = i
            if stripped.count("$$") < 2:  # a block: up to the line that closes it
                j = i + 1
                while j < len(lines) and "$$" not in lines[j]:
                    j += 1
            out += lines[i : j + 1]
            i = j + 1
            continue
        heading = _HEADING.match(line)
        if heading:
            out.append(f"{heading[1]} {translate(heading[2])}")
            i += 1
            continue
        if stripped.startswith("|"):
            cells = stripped.strip("|").split("|")
            if all(re.fullmatch(r"\s*:?-+:?\s*", c) for c in cells):
                out.append(line)
            else:
                out.append(
                    "| " + " | ".join(translate(c.strip()) for c in cells) + " |"
                )
            i += 1
            continue
        item = _ITEM.match(line)
        if item:
            indent, marker, first = item.groups()
            body = [first]
            j = i + 1
            while (
                j < len(lines)
                and lines[j].strip()
                and len(lines[j]) - len(lines[j].lstrip()) > len(indent)
                and not _ITEM.match(lines[j])
                and not _FENCE.match(lines[j])
                and not lines[j].strip().startswith("$$")
            ):
                body.append(lines[j].strip())
                j += 1
            out.append(f"{indent}{marker} {translate(' '.join(body))}")
            i = j
            continue
        if not stripped or is_block_start(line):
            out.append(line)
            i += 1
            continue
        j = i
        while (
            j < len(lines)
            and lines[j].strip()
            and (j == i or not is_block_start(lines[j]))
        ):
            j += 1
        paragraph = lines[i:j]
        message = " ".join(part.strip() for part in paragraph)
        translated = translate(message)
        out += paragraph if translated == message else [translated]
        i = j
    return "\n".join(out)


def translated_notebook(source: str, lookup) -> str:
    """A notebook's JSON with its markdown cells and its figures' descriptions translated
    (``translate_markdown``, ``lookup(message, message)`` the translation); its code cells
    are the English notebook's."""

    def translate(message: str) -> str:
        return lookup(message, message)

    notebook = json.loads(source)
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            text = translate_markdown("".join(cell["source"]), translate)
            cell["source"] = text.splitlines(keepends=True)
        descriptions = cell.get("metadata", {}).get(FIGURE_DESCRIPTIONS)
        if descriptions:
            cell["metadata"][FIGURE_DESCRIPTIONS] = [translate(d) for d in descriptions]
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"


def sources_in_this_language(app: Sphinx, exception) -> None:
    """In a translated edition, the page sources the site offers ("download source",
    ``_sources/<page>.ipynb``) are the notebooks in the edition's language: every message
    of the markdown cells from the page's catalog, the code cells unchanged."""
    if exception is not None or is_default(app.config.language):
        return
    if app.builder.format != "html" or not app.config.html_copy_source:
        return
    from babel.messages.pofile import read_po

    catalogs = Path(
        app.srcdir, app.config.locale_dirs[0], app.config.language, "LC_MESSAGES"
    )
    for docname in sorted(app.env.found_docs):
        source = Path(app.env.doc2path(docname))
        if source.suffix != ".ipynb":
            continue
        target = Path(app.outdir, "_sources", docname + source.suffix)
        domain = docname_to_domain(docname, app.config.gettext_compact)
        path = catalogs / f"{domain}.po"
        if not target.is_file() or not path.is_file():
            continue
        with open(path, "rb") as handle:
            messages = {
                m.id: m.string
                for m in read_po(handle, locale=app.config.language)
                if m.id and m.string and not m.fuzzy
            }
        text = translated_notebook(source.read_text(encoding="utf-8"), messages.get)
        target.write_text(text, encoding="utf-8")
