"""Sanitise: nothing a student wrote reaches the instructor's browser as live HTML.

The autograded notebook is what ``nbgrader generate_feedback`` and the formgrader render, and
nbgrader's templates put markdown cells and HTML outputs into the page as they are. So the
notebook is cleaned as it is written (`autograder.course.gradebook.Recorder.write_notebook`), with
`nh3` (the Python binding of the Rust sanitiser ammonia), before nbgrader ever reads it:

- a markdown cell is rendered by nbconvert's own markdown renderer (the one the feedback and
  the formgrader use), the HTML is cleaned, and the cell's source becomes that clean HTML on
  one line: a single HTML block that markdown passes through unchanged, math included
  (MathJax still typesets ``$...$``). Scripts, event handlers, ``javascript:`` and other
  non-web URLs, iframes, object/embed, forms, styles and SVG are removed; links keep
  http(s)/mailto targets; images keep only inline PNG/JPEG/GIF data (the cell's own
  attachments), so a student's answer makes the instructor's browser fetch nothing;
- a raw cell's source is cleaned the same way (nbconvert shows an HTML raw cell as is);
- an output keeps plain text, PNG/JPEG/GIF data that is really base64, cleaned HTML,
  markdown as cleaned HTML, and SVG as an ``<img>`` of the SVG (a browser runs no script in
  an image); JavaScript, widgets, LaTeX and any other type are dropped, and so is the
  output's metadata except a numeric image width/height;
- cell metadata keeps only ``nbgrader``, and of it only the fields nbgrader writes with the
  types it writes them (`nbgrader_fields`; tags become CSS classes in nbconvert's templates,
  ``magics_language`` and ``raw_mimetype`` choose a lexer or a renderer: all dropped);
- notebook metadata keeps only the kernel and the language, each one the course uses
  (`KERNELS`: Python, as every released notebook says; any other name becomes Python), and
  the grader's own record. nbconvert picks the Pygments lexer of every code cell from
  ``language_info`` (``pygments_lexer``, else ``name``) *before* any preprocessor runs, so
  the name on disk is the one the formgrader's page highlights with: a lexer the student
  named (AutoIt's is quadratic on a run of spaces: one 200,000-space cell took the feedback
  over 120 s) never runs. ``language_info`` is always written, so nbconvert never falls back
  to the IPython lexer, which hands ``%%bash``, ``%%ruby``... cells to other lexers;
- a fenced code block in markdown is shown as plain text: nbconvert's renderer would
  highlight it with the lexer its info string names (the classes it adds are removed by the
  cleaner anyway).
"""

from __future__ import annotations

import base64
import binascii
import copy
import html
import re

import nh3

#: web links only; the image rule below is stricter (inline image data only)
LINK_SCHEMES = ("http://", "https://", "mailto:", "#")
INLINE_IMAGE = re.compile(r"data:image/(png|jpeg|gif);base64,[A-Za-z0-9+/=\s]*\Z")
BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*\Z")
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif")
#: elements removed with everything inside them (the rest of an unknown element's text stays)
CLEAN_CONTENT_TAGS = {"script", "style", "iframe", "object", "embed", "svg", "math", "template"}


#: elements open inside each other past which HTML is shown as text, not parsed: the parse
#: of ``nh3`` (html5ever) takes time that grows faster than the depth (8,000 nested
#: ``<div>``: 0.16 s; 230,000: minutes), so the depth is found first, in one linear scan
MAX_HTML_DEPTH = 100
#: a tag; neither part can run past the next "<" or ">", so the scan is linear
TAG = re.compile(r"<(/?)([A-Za-z][^\s/<>]*)([^<>]*)>")
#: elements that never hold others (no end tag)
VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())


def html_depth(text: str, stop: int = MAX_HTML_DEPTH) -> int:
    """How many elements the HTML ``text`` opens inside each other, counting every start tag
    that is not closed later (what a parser may nest), in one pass; the scan stops once the
    depth is over ``stop`` (then the result is ``stop + 1``). An end tag closes the innermost
    open element of its name and every one opened after it; one of no open element is
    ignored. Linear: each end tag searches at most ``stop`` open elements."""
    open_tags: list[str] = []
    deepest = 0
    for match in TAG.finditer(text):
        end, name, self_closing = match.group(1), match.group(2).lower(), match.group(3)[-1:] == "/"
        if end:
            if name in open_tags:
                del open_tags[len(open_tags) - 1 - open_tags[::-1].index(name) :]
        elif name not in VOID and not self_closing:
            open_tags.append(name)
            deepest = max(deepest, len(open_tags))
            if deepest > stop:
                return stop + 1
    return deepest


def _attribute_filter(element: str, attribute: str, value: str) -> str | None:
    if element == "img" and attribute == "src":
        return value if INLINE_IMAGE.match(value.strip()) else None
    if attribute == "href":
        return value if value.strip().lower().startswith(LINK_SCHEMES) else None
    return value


def clean_html(text: str) -> str:
    """An HTML fragment with nothing that runs, loads or navigates by itself. HTML nested
    more than ``MAX_HTML_DEPTH`` deep is not parsed: it is shown as escaped text."""
    if html_depth(str(text)) > MAX_HTML_DEPTH:
        return html.escape(str(text))
    return nh3.clean(
        str(text),
        clean_content_tags=CLEAN_CONTENT_TAGS,
        url_schemes={"http", "https", "mailto", "data"},
        attribute_filter=_attribute_filter,
    )


def _one_block(html: str) -> str:
    """Clean HTML as one markdown HTML block: one line (a blank line would end the block and
    let markdown reinterpret the rest), newlines kept as character references, which a
    browser reads as newlines (inside ``<pre>`` too)."""
    flat = html.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "&#10;")
    return f"<div>{flat}</div>"


def markdown_html(source: str, attachments: dict | None = None) -> str:
    """A student's markdown as nbconvert renders it, cleaned; fenced code as plain text."""
    from mistune import HTMLRenderer
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    class Renderer(IPythonRenderer):
        def block_code(self, code: str, info: str | None = None) -> str:
            # never a lexer the student names (nor mermaid's markup): mistune's plain block
            return HTMLRenderer.block_code(self, code, None)

        def _embed_image_or_attachment(self, src: str) -> str:
            # an attachment that is not there (never attached, not an image, or dropped at
            # intake: `notebook.drop_ungraded`) is no image, not an error that stops the record
            if src.startswith("attachment:") and src[len("attachment:") :] not in self.attachments:
                return ""
            return super()._embed_image_or_attachment(src)

    renderer = Renderer(escape=False, attachments=_image_attachments(attachments))
    return clean_html(MarkdownWithMath(renderer=renderer).render(str(source)))


def _image_attachments(attachments) -> dict:
    """Only attachments that are images in base64 (nbconvert inlines them as data URLs)."""
    if not isinstance(attachments, dict):
        return {}
    kept = {}
    for name, bundle in attachments.items():
        if not isinstance(bundle, dict):
            continue
        images = {
            mime: data
            for mime, data in bundle.items()
            if mime in IMAGE_TYPES and isinstance(data, str) and _is_base64(data)
        }
        if images:
            kept[str(name)] = images
    return kept


def _is_base64(data: str) -> bool:
    if not BASE64.match(data):
        return False
    try:
        base64.b64decode("".join(data.split()), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _size(value) -> int | float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 100_000
    return value if ok else None


def clean_output(output) -> dict | None:
    """One output as the instructor may see it, or None when nothing of it is safe to show."""
    kind = output.get("output_type")
    if kind == "stream":  # text: nbconvert's templates escape it
        name = output.get("name") if output.get("name") in ("stdout", "stderr") else "stdout"
        return {"output_type": "stream", "name": name, "text": _text(output.get("text", ""))}
    if kind == "error":
        traceback = output.get("traceback", [])
        return {
            "output_type": "error",
            "ename": str(output.get("ename", "")),
            "evalue": str(output.get("evalue", "")),
            "traceback": [str(line) for line in traceback] if isinstance(traceback, list) else [],
        }
    if kind not in ("display_data", "execute_result"):
        return None
    data, metadata = output.get("data", {}) or {}, output.get("metadata", {}) or {}
    clean: dict = {}
    if "text/plain" in data:
        clean["text/plain"] = _text(data["text/plain"])
    for mime in IMAGE_TYPES:
        if mime in data and _is_base64(_text(data[mime])):
            clean[mime] = _text(data[mime])
    if "text/html" in data:
        clean["text/html"] = clean_html(_text(data["text/html"]))
    elif "text/markdown" in data:
        clean["text/html"] = markdown_html(_text(data["text/markdown"]))
    elif "image/svg+xml" in data:
        encoded = base64.b64encode(_text(data["image/svg+xml"]).encode()).decode()
        clean["text/html"] = f'<img alt="SVG output" src="data:image/svg+xml;base64,{encoded}">'
    if not clean:
        return None
    sizes = {}
    for mime in IMAGE_TYPES:
        fields = metadata.get(mime) if isinstance(metadata, dict) else None
        if mime in clean and isinstance(fields, dict):
            kept = {k: _size(fields.get(k)) for k in ("width", "height")}
            if any(v is not None for v in kept.values()):
                sizes[mime] = {k: v for k, v in kept.items() if v is not None}
    result = {"output_type": kind, "data": clean, "metadata": sizes}
    if kind == "execute_result":
        result["execution_count"] = None
    return result


#: the kernels of the course's notebooks, by language (``language_info.name``): every
#: released notebook is Python's (``tests/test_renderer_budget.py`` checks each source
#: notebook against this table). A notebook keeps its language only if it is one of these,
#: and then the course's kernel for it; anything else is the default's.
KERNELS = {
    "python": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
}
DEFAULT_LANGUAGE = "python"


def course_language(metadata) -> str:
    """The language a notebook's (hostile) metadata names, if the course uses it, else the
    default: read from ``language_info.name`` and ``kernelspec.language`` alike, which must
    agree."""
    meta = metadata if isinstance(metadata, dict) else {}
    info, kernel = meta.get("language_info"), meta.get("kernelspec")
    named = {
        value.get(key)
        for value, key in ((info, "name"), (kernel, "language"))
        if isinstance(value, dict) and key in value
    }
    (language,) = named if len(named) == 1 else (None,)
    return language if isinstance(language, str) and language in KERNELS else DEFAULT_LANGUAGE


#: nbgrader's cell metadata (its schema version 3, and what its feedback adds) and the type
#: of each field
NBGRADER_FIELDS = {
    "grade_id": str,
    "grade": bool,
    "solution": bool,
    "locked": bool,
    "task": bool,
    "points": (int, float),
    "schema_version": int,
    "checksum": str,
    "cell_type": str,
    # what nbgrader's GetGrades adds from the gradebook before the feedback page is rendered
    # (this runs after it there): the score and the instructor's comment
    "score": (int, float, type(None)),
    "comment": (str, type(None)),
}
#: the fields only the gradebook fills in (``GetGrades``): kept only where it just did
FROM_GRADEBOOK = ("score", "comment")


def nbgrader_fields(meta) -> dict | None:
    """The fields of a cell's nbgrader metadata that nbgrader writes, each of its type (a
    bool is no number), or None when ``meta`` is not a mapping: what the formgrader's page may
    read. A notebook the grader records was validated before (`autograder.checking.notebook`),
    this keeps a notebook written any other way from reaching a template with other types."""
    if not isinstance(meta, dict):
        return None
    return {
        key: meta[key]
        for key, kind in NBGRADER_FIELDS.items()
        if key in meta
        and isinstance(meta[key], kind)
        and (kind is bool or not isinstance(meta[key], bool))
    }


def clean_notebook(notebook, keep_record: bool = True, graded: bool = False):
    """A copy of an nbformat v4 notebook that nbgrader can render without running anything
    the student wrote (see the module docstring for what is kept). ``keep_record``: keep the
    grader's record (``metadata.autograder``); nbgrader's autograde drops it, since there it
    would be the student's. ``graded``: nbgrader's ``GetGrades`` has just filled in each
    cell's score and comment from the gradebook (the feedback page); anywhere else those
    fields are the student's (a comment the page would show as the instructor's) and go."""
    import nbformat

    notebook = copy.deepcopy(notebook)
    for cell in notebook.cells:
        fields = nbgrader_fields(cell.metadata.get("nbgrader"))
        if fields and not graded:
            fields = {k: v for k, v in fields.items() if k not in FROM_GRADEBOOK}
        cell.metadata = nbformat.from_dict({"nbgrader": fields} if fields else {})
        if cell.cell_type == "markdown":
            cell.source = _one_block(markdown_html(_text(cell.source), cell.get("attachments")))
            cell.pop("attachments", None)  # inlined above, when they were images
        elif cell.cell_type == "raw":
            cell.source = clean_html(_text(cell.source))
            cell.pop("attachments", None)
        elif cell.cell_type == "code":
            outputs = (clean_output(o) for o in cell.get("outputs", []))
            cell.outputs = [nbformat.from_dict(o) for o in outputs if o is not None]
    meta = notebook.metadata
    language = course_language(meta)
    kept = {"kernelspec": dict(KERNELS[language]), "language_info": {"name": language}}
    if keep_record and "autograder" in meta:
        kept["autograder"] = meta["autograder"]
    notebook.metadata = nbformat.from_dict(kept)
    return notebook
