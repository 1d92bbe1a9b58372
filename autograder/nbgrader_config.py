"""nbgrader configuration of the course *Attention, derived*.

The course directory is the folder of this file (``autograder/``): assignments are
``source/<id>/<id>.ipynb``, students' work goes to ``submitted/<student>/<id>/`` and the
gradebook is ``gradebook.db`` next to this file. Everything is derived from this file's
location, so a copy of the folder (as the pipeline tests make) is a course of its own.
"""

import os

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file

_ROOT = os.path.dirname(os.path.abspath(__file__))

c.CourseDirectory.root = _ROOT
c.CourseDirectory.course_id = "attention-derived"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(_ROOT, "gradebook.db")
# The student's stub in every solution region (nbgrader's default, spelled out).
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# In autograde a cell's timeout is its chapter's (ChapterTimeout below, from
# autograder/course/nbgrader_sanitise.py: the chapter's cell budget of autograder/sandbox/budgets.py plus
# what the student's kernel imports; 46 s for ch6, 70 s for ch3), not 300 s for every
# course: the formgrader's Autograde button runs inside the Jupyter server, which a
# looping cell held for the whole timeout. This one is for any other app that executes.
c.Execute.timeout = 120

# Feedback shows each test cell's verdict and messages, but never the hidden test code.
# Stock nbgrader copies it into the HTML twice: in the cell's source, and in the context
# lines of a traceback raised in the test cell itself (e.g. a NameError when a function
# was never defined). Scrub the tracebacks first, then strip the hidden regions.
import re  # noqa: E402

from nbconvert.preprocessors import Preprocessor  # noqa: E402
from traitlets import Bool  # noqa: E402

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class ScrubHiddenTestsFromTracebacks(Preprocessor):
    """Drop every traceback line of a graded cell that shows a line of its hidden tests."""

    enabled = Bool(True)  # nbconvert preprocessors are off unless enabled

    def preprocess_cell(self, cell, resources, index):
        meta = cell.metadata.get("nbgrader", {})
        if (
            cell.cell_type != "code"
            or not meta.get("grade")
            or "BEGIN HIDDEN TESTS" not in cell.source
        ):
            return cell, resources
        hidden, inside = [], False
        for line in cell.source.splitlines():
            if "BEGIN HIDDEN TESTS" in line:
                inside = True
            if inside and line.strip():
                hidden.append(line.strip())
            if "END HIDDEN TESTS" in line:
                inside = False
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = [
                    "\n".join(
                        part
                        for part in frame.split("\n")
                        if not any(h in _ANSI.sub("", part) for h in hidden)
                    )
                    for frame in output.get("traceback", [])
                ]
        return cell, resources


c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    ScrubHiddenTestsFromTracebacks,
    "nbgrader.preprocessors.ClearHiddenTests",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]

# Nothing a student wrote is live HTML where the instructor looks, whichever path wrote the
# notebook (docs/threat-model.md). Our grader sanitises as it writes autograded/; the same
# sanitiser (autograder/checking/sanitise.py, as the preprocessor of autograder/course/nbgrader_sanitise.py)
# runs last in nbgrader's autograde, so `nbgrader autograde` and the formgrader's Autograde
# button write it sanitised too, and again in what renders it: generate_feedback and the
# formgrader's manual-grading view (its HTMLExporter).
# nbgrader ignores a config file that raises (it logs the error and runs on without it, so
# without the sanitiser): in a checkout, this folder is the `autograder` package itself, and
# its own copy is imported, whichever Python runs nbgrader. (A copy of the course, as the
# tests make, imports the installed package.)
import sys  # noqa: E402

_CHECKOUT = os.path.dirname(_ROOT)
if os.path.basename(_ROOT) == "autograder" and os.path.isfile(
    os.path.join(_ROOT, "checking", "sanitise.py")
):
    sys.path.insert(0, _CHECKOUT)

from nbgrader.converters import Autograde  # noqa: E402
from nbgrader.preprocessors import Execute  # noqa: E402

from autograder.course.nbgrader_sanitise import (  # noqa: E402
    ChapterTimeout,
    KeepOnlyCourseFiles,
    NameStudent,
    SanitiseFeedback,
    SanitiseForInstructor,
    ScrubPaths,
)

c.Autograde.autograde_preprocessors = [
    *(
        ChapterTimeout if step is Execute else step
        for step in Autograde.class_traits()["autograde_preprocessors"].default()
    ),
    ScrubPaths,  # the interrupted cell's traceback names the instructor's folders
    SanitiseForInstructor,
    KeepOnlyCourseFiles,  # the formgrader serves the folder's files: no student page there
    NameStudent,  # nbgrader creates students without a name: "None, None" in the formgrader
]
c.GenerateFeedback.preprocessors = [
    *c.GenerateFeedback.preprocessors,
    ScrubPaths,
    SanitiseFeedback,
]
c.HTMLExporter.preprocessors = [SanitiseForInstructor]

# Math, offline, in the feedback pages and the formgrader: nbgrader's templates call
# nbconvert's ``mathjax()`` macro, whose default loads MathJax from a CDN (raw TeX offline).
# The course's macro (nbgrader_templates/base/mathjax.html.j2) writes MathJax 3 into the page
# instead, from the copy the site serves (the pinned sphinx-mathjax-offline), with MathJax's
# own attribute filter ui/safe in the same script, through the filter ``course_mathjax``.
# Its folder comes first among the exporter's template folders, then nbgrader's own (the
# feedback and formgrade templates): set here, it holds for generate_feedback (which keeps a
# value the config gives) and for the formgrader (which reads this file after setting its own).
# The folder's feedback/ and formgrade/ templates extend nbgrader's (``nbgrader_template``)
# and put the course's Content-Security-Policy first in the page's head (``course_csp``).
import base64  # noqa: E402
import functools  # noqa: E402
import hashlib  # noqa: E402
import html  # noqa: E402
import importlib.metadata  # noqa: E402

import jinja2  # noqa: E402
import nbgrader  # noqa: E402

from autograder.course import nbgrader_sanitise as _sanitise  # noqa: E402 - its package's folder

_NBGRADER_TEMPLATES = os.path.join(
    os.path.dirname(nbgrader.__file__), "server_extensions", "formgrader", "templates"
)


@functools.lru_cache(maxsize=4)
def _course_mathjax(*components: str) -> str:
    """The text of MathJax's combined components, one after the other, to be written into
    one script element of a page (tex-svg.js, then ui/safe.js: MathJax starts one microtask
    after its script ends, and an extension must have registered by then)."""
    texts = []
    for component in components:
        path = importlib.metadata.distribution("sphinx-mathjax-offline").locate_file(
            f"sphinx-mathjax-offline/static/mathjax/{component}"
        )
        text = open(path, encoding="utf-8").read()
        # nothing in it may end the page's <script> element early: HTML ends it at
        # "</script", or after "<!--" and "<script" never (MathJax 3.2's components hold
        # neither tag)
        assert not re.search(r"</?script", text, re.IGNORECASE), path
        texts.append(text)
    return "\n;\n".join(texts)


@jinja2.pass_environment
def _nbgrader_template(environment, name: str):
    """nbgrader's own template ``name`` (its feedback or formgrade page), for the course's
    template of the same name to extend: that name finds the course's first."""
    with open(os.path.join(_NBGRADER_TEMPLATES, name), encoding="utf-8") as template:
        return environment.from_string(template.read())


#: the Content-Security-Policy of each page; {scripts}: its own inline scripts' hashes.
#: A feedback page runs only the course's MathJax and loads nothing: styles are inline
#: (nbconvert's, nbgrader's, MathJax's own), images are data: URLs, and a style cannot load
#: anything else. The formgrader's view also runs the formgrader's scripts, its style sheets
#: and icon font, and saves grades with requests to the server: 'self' for those.
#: No policy allows 'unsafe-inline' script, so a javascript: link does not run either.
COURSE_CSP = {
    "feedback": (
        "default-src 'none'; script-src {scripts}; style-src 'unsafe-inline'; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    ),
    "formgrade": (
        "default-src 'none'; script-src 'self' {scripts}; style-src 'self' 'unsafe-inline'; "
        "img-src data:; font-src 'self'; connect-src 'self'; base-uri 'none'; "
        "form-action 'none'"
    ),
}
_INLINE_SCRIPT = re.compile(r"<script\b([^>]*)>(.*?)</script\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[A-Za-z][^<>]*>")
_HANDLER = re.compile(r"""\son[a-z]+\s*=\s*(?:"([^"]*)"|'([^']*)')""", re.IGNORECASE)


def _csp_hash(script: str) -> str:
    # what the browser hashes: the text as parsed (HTML turns every CR LF and CR into LF)
    text = script.replace("\r\n", "\n").replace("\r", "\n")
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _course_csp(head, page: str, *elsewhere) -> str:
    """``head`` (a page's header block, as rendered: ``<!DOCTYPE html><html><head>...``) with
    the course's policy for ``page`` as the first element of its head. The policy allows the
    inline scripts of ``head`` and of ``elsewhere`` (the course's or nbgrader's own markup
    that the page also holds, rendered alike) by their SHA-256 hashes, and their inline event
    handlers by theirs ('unsafe-hashes'), computed here from the exact text in the page."""
    texts = [str(head), *map(str, elsewhere)]
    scripts, handlers = [], []
    for text in texts:
        for match in _INLINE_SCRIPT.finditer(text):
            if not re.search(r"\bsrc\s*=", match.group(1), re.IGNORECASE):
                scripts.append(match.group(2))
        for tag in _TAG.findall(_INLINE_SCRIPT.sub("", text)):
            handlers += [html.unescape(a or b) for a, b in _HANDLER.findall(tag)]
    sources = [_csp_hash(s) for s in scripts]
    if handlers:
        sources = ["'unsafe-hashes'", *sources, *map(_csp_hash, handlers)]
    policy = COURSE_CSP[page].format(scripts=" ".join(sources))
    opened = re.search(r"<head\b[^>]*>", texts[0], re.IGNORECASE)
    if opened is None:  # no page without its policy
        raise ValueError(f"no <head> in the {page} page's header to put its policy in")
    at = opened.end()
    meta = f'\n<meta http-equiv="Content-Security-Policy" content="{policy}">'
    return texts[0][:at] + meta + texts[0][at:]


c.HTMLExporter.extra_template_basedirs = [
    os.path.join(os.path.dirname(_sanitise.__file__), "nbgrader_templates"),
    _NBGRADER_TEMPLATES,
]
c.HTMLExporter.filters = {
    # a class: nbconvert makes one per notebook, each with its own budget of CPU time; the
    # course's lexer whatever the notebook names (autograder/course/nbgrader_sanitise.py)
    "highlight_code": _sanitise.CourseHighlight,
    "course_mathjax": _course_mathjax,
    "nbgrader_template": _nbgrader_template,
    "course_csp": _course_csp,
}

# The formgrader's view of the course: a course-local exchange (nbgrader's default,
# /srv/nbgrader/exchange, does not exist here, and without one every assignment shows as
# "draft"); `autograder.course.release` releases into it.
c.Exchange.root = os.path.join(_ROOT, "exchange")
os.makedirs(c.Exchange.root, exist_ok=True)
