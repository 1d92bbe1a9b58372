"""Nothing a student wrote is live HTML in what the instructor opens.

- `autograder.checking.sanitise` on its own: a written answer full of active HTML keeps its text, math,
  web links and attached images, and loses every script, handler, ``javascript:`` URL,
  frame, object/embed and SVG, as nbgrader's own markdown renderer shows it; outputs keep
  only inert types; cell tags and notebook metadata are dropped.
- End to end: a submission whose hand-graded answer, raw cell, cell tags and notebook
  metadata are hostile is graded in the sandbox, then the feedback nbgrader generates and
  the formgrader's page for that submission (nbgrader's Jupyter server extension, started
  on 127.0.0.1 with a token) are opened in headless Chromium with every request that leaves
  127.0.0.1 blocked: no student script runs (each payload would append to
  ``window.__pwned`` or request ``/pwned/...``), no handler attribute, ``javascript:`` link,
  frame, object or embed is in the DOM of the notebook, and the answer's text is shown; an
  HTML file submitted beside the notebook is not served by the formgrader.
"""

from __future__ import annotations

import functools
import html.parser
import http.server
import re
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from formgrader_server import formgrader_server  # noqa: E402
from hostile import corpus  # noqa: E402
from test_site_browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402  (the project's launch)

from autograder import cli, grading, sandbox  # noqa: E402
from autograder.checking import sanitise  # noqa: E402
from autograder.course.nbgrader_sanitise import SanitiseFeedback, SanitiseForInstructor  # noqa: E402

A = "ch1_pooling"
STUDENT = "hostile-answer"
WRITTEN = "written-bandwidth"
PNG = (  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


#: a comment a student put in a cell's nbgrader metadata, as if the instructor's
FORGED = "FORGED-INSTRUCTOR-COMMENT"


def _mark(kind: str) -> str:
    """JavaScript that leaves a trace if it ever runs: a global and a request."""
    return f"window.top.__pwned=(window.top.__pwned||[]).concat(['{kind}']);fetch('/pwned/{kind}')"


HOSTILE_ANSWER = f"""As $h\\to0$ each prediction copies the **nearest neighbour** among the keys.

<script>{_mark("script")}</script>

<img src="x" onerror="{_mark("img-onerror")}">

<a href="javascript:{_mark("javascript-link")}">click me</a> and [this too](javascript:{_mark("md-link")})

<iframe srcdoc="<script>{_mark("iframe")}</script>"></iframe>

<svg onload="{_mark("svg-onload")}"><circle r="4"></circle></svg>

<object data="javascript:{_mark("object")}"></object><embed src="javascript:{_mark("embed")}">

<details open ontoggle="{_mark("details-ontoggle")}">details</details>

<div style="position:fixed;top:0;left:0">Score: 2 / 2</div>

See [the chapter](https://example.org/ch1) and ![a plot](attachment:plot.png)
"""


class Tags(html.parser.HTMLParser):
    """Every element and attribute of an HTML text."""

    def __init__(self, text: str):
        super().__init__()
        self.elements: list[tuple[str, dict]] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))


def assert_inert(fragment: str) -> None:
    elements = Tags(fragment).elements
    tags = {tag for tag, _ in elements}
    assert not tags & {"script", "iframe", "object", "embed", "svg", "style", "form", "frame"}
    for tag, attrs in elements:
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)
        assert "style" not in attrs and "srcdoc" not in attrs, (tag, attrs)
        href = (attrs.get("href") or "").strip().lower()
        assert not href or href.startswith(("http://", "https://", "mailto:", "#")), href
        if tag == "img" and "src" in attrs:
            assert re.match(r"data:image/(png|jpeg|gif);base64,", attrs["src"]), attrs["src"]


# ----------------------------------------------------------------------------------------
# the sanitiser on its own


def _answer_cell():
    cell = nbformat.v4.new_markdown_cell(HOSTILE_ANSWER)
    cell.metadata["nbgrader"] = {"grade_id": WRITTEN, "grade": True, "solution": True}
    cell.metadata["tags"] = ['x" onmouseover="alert(1)']
    cell["attachments"] = {
        "plot.png": {"image/png": PNG},
        "evil.svg": {"image/svg+xml": "<svg onload='alert(1)'/>"},
    }
    return cell


def test_a_written_answer_keeps_its_text_math_links_and_images_and_nothing_active():
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    notebook = nbformat.v4.new_notebook(cells=[_answer_cell()])
    notebook.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"x": 1}}
    clean = sanitise.clean_notebook(notebook)
    nbformat.validate(clean)  # nbgrader still reads it
    cell = clean.cells[0]
    assert cell.metadata == {"nbgrader": notebook.cells[0].metadata["nbgrader"]}
    assert "attachments" not in cell and "widgets" not in clean.metadata
    assert "\n" not in cell.source  # one HTML block: markdown cannot reinterpret a part of it
    shown = markdown2html_mistune(cell.source)  # what nbgrader's templates render
    assert shown.strip() == cell.source  # passed through unchanged
    assert_inert(shown)
    assert "<strong>nearest neighbour</strong>" in shown and "$h\\to0$" in shown
    assert 'href="https://example.org/ch1"' in shown and f"base64,{PNG}" in shown
    assert "Score: 2 / 2" in shown  # the text stays; only its styling is gone
    assert "pwned" not in shown  # every payload is gone


def test_outputs_keep_only_inert_types():
    hostile = [
        {
            "output_type": "display_data",
            "data": {
                "application/javascript": "alert(1)",
                "application/vnd.jupyter.widget-view+json": {"model_id": "x"},
                "text/plain": "plain",
                "text/html": "<b onclick='alert(1)'>bold</b><script>alert(1)</script>",
            },
            "metadata": {"text/html": {"isolated": True}},
        },
        {
            "output_type": "execute_result",
            "execution_count": 3,
            "data": {"image/svg+xml": "<svg onload='alert(1)'><circle r='3'/></svg>"},
            "metadata": {},
        },
        {
            "output_type": "display_data",
            "data": {"text/markdown": "<img src=x onerror=alert(1)> *ok*"},
            "metadata": {},
        },
        {
            "output_type": "display_data",
            "data": {"image/png": PNG, "image/jpeg": 'abc"><script>alert(1)</script>'},
            "metadata": {"image/png": {"width": "1 onerror=alert(1)", "height": 20}},
        },
        {"output_type": "display_data", "data": {"text/latex": "\\href{javascript:x}{y}"}},
        {"output_type": "weird", "text": "<script>"},
    ]
    cleaned = [sanitise.clean_output(o) for o in hostile]
    first, svg, markdown, image, latex, weird = cleaned
    assert first["data"] == {"text/plain": "plain", "text/html": "<b>bold</b>"}
    assert first["metadata"] == {}
    assert list(svg["data"]) == ["text/html"] and svg["execution_count"] is None
    (img,) = Tags(svg["data"]["text/html"]).elements
    assert img[0] == "img" and img[1]["src"].startswith("data:image/svg+xml;base64,")
    assert_inert(markdown["data"]["text/html"]) and "<em>ok</em>" in markdown["data"]["text/html"]
    assert image["data"] == {"image/png": PNG} and image["metadata"] == {
        "image/png": {"height": 20}
    }
    assert latex is None and weird is None


# ----------------------------------------------------------------------------------------
# end to end: graded in the sandbox, opened in Chromium


@pytest.fixture(scope="module")
def graded(tmp_path_factory, bubblewrap):
    course = corpus.released_course(tmp_path_factory.mktemp("html") / "course")
    notebook = corpus.solved(course, A)
    index = next(
        i
        for i, c in enumerate(notebook.cells)
        if c.metadata.get("nbgrader", {}).get("grade_id") == WRITTEN
    )
    answer = _answer_cell()
    answer.metadata["nbgrader"] = notebook.cells[index].metadata["nbgrader"]
    if notebook.nbformat_minor < 5:
        answer.pop("id", None)
    notebook.cells[index] = answer
    raw = nbformat.v4.new_raw_cell(f"<script>{_mark('raw-cell')}</script>")
    raw.metadata["format"] = "text/html"
    extra = nbformat.v4.new_code_cell("extra = 1")
    extra.metadata["tags"] = [f'x" onmouseover="{_mark("cell-tag")}']
    # well-formed nbgrader metadata of a cell nbgrader grades nothing in, with the fields only
    # the gradebook fills in: a comment the feedback page would show as the instructor's
    extra.metadata["nbgrader"] = {
        "schema_version": 3,
        "grade": False,
        "solution": False,
        "locked": False,
        "score": 99,
        "comment": FORGED,
    }
    for cell in (raw, extra):
        if notebook.nbformat_minor < 5:
            cell.pop("id", None)
    notebook.cells[index + 1 : index + 1] = [raw, extra]
    notebook.metadata["widgets"] = {
        "application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2}
    }
    path = corpus.write_submission(course, A, STUDENT, notebook)
    # a file beside the notebook: the formgrader serves the autograded folder's files
    (path.parent / "answer.html").write_text(f"<script>{_mark('extra-file')}</script>")
    limits = sandbox.Limits(cell_seconds=60, task_seconds=60, submission_seconds=240)
    outcome = grading.grade_assignment(course, A, workers=1, limits=limits)
    (result,) = outcome.graded
    assert result.score == 12.0 and not result.reasons, (result.score, result.notes)
    assert cli.main(["--course", str(course), "feedback", A]) == 0
    return course


@pytest.fixture(scope="module")
def chromium():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} not found: apt-get install chromium", pytrace=False)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()


class Watched:
    """A page whose requests leaving 127.0.0.1 are blocked and whose /pwned/ requests are kept."""

    def __init__(self, browser):
        self.context = browser.new_context()
        self.page = self.context.new_page()
        self.pwned_requests: list[str] = []
        self.page.route("**/*", self._route)

    def _route(self, route):
        parts = urlsplit(route.request.url)
        if "/pwned/" in parts.path:
            self.pwned_requests.append(route.request.url)
        if parts.scheme in ("http", "https", "ws", "wss") and parts.hostname != "127.0.0.1":
            route.abort("blockedbyclient")
        else:
            route.continue_()

    def probe(self, cells: str) -> dict:
        """What student content could have done: the trace globals, and the handler attributes,
        script-like links and embedded documents inside the notebook's cells."""
        self.page.get_by_text("click me").first.click()
        return self.page.evaluate(
            """cells => {
                const inCells = [...document.querySelectorAll(cells)];
                const all = inCells.flatMap(c => [c, ...c.querySelectorAll('*')]);
                return {
                    pwned: window.__pwned || null,
                    cells: inCells.length,
                    handlers: all.flatMap(e => [...e.attributes]
                        .filter(a => a.name.toLowerCase().startsWith('on'))
                        .map(a => `${e.tagName}.${a.name}`)),
                    links: all.filter(e => /^\\s*javascript:/i.test(e.getAttribute('href') || ''))
                        .length,
                    // (an <svg> that MathJax drew for an equation is the course's own)
                    frames: all.filter(e => ['IFRAME', 'OBJECT', 'EMBED', 'FRAME', 'SVG', 'svg']
                        .includes(e.tagName) && !e.closest('mjx-container')).length,
                    scripts: [...document.scripts].filter(s => s.text.includes('pwned')).length,
                    text: document.body.innerText,
                };
            }""",
            cells,
        )

    def close(self):
        self.context.close()


def _assert_nothing_ran(watched: Watched, state: dict) -> None:
    assert state["cells"] > 0, "the probe found no notebook cell on the page"
    assert state["pwned"] is None, f"student script ran: {state['pwned']}"
    assert watched.pwned_requests == [], watched.pwned_requests
    assert state["handlers"] == [] and state["links"] == 0, state
    assert state["frames"] == 0 and state["scripts"] == 0, state
    assert "nearest neighbour" in state["text"]


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.timeout(900)
def test_a_cells_score_and_comment_are_the_gradebooks_never_the_students():
    """Only nbgrader's GetGrades writes a cell's ``score`` and ``comment`` (the feedback page
    shows them as the instructor's): anywhere else the sanitiser drops them."""
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("x = 1")
    meta = {"schema_version": 3, "grade": True, "solution": False, "locked": True}
    cell.metadata["nbgrader"] = {
        **meta,
        "grade_id": "t",
        "points": 1,
        "score": 9,
        "comment": FORGED,
    }
    notebook.cells.append(cell)
    for clean in (
        sanitise.clean_notebook(notebook),
        SanitiseForInstructor().preprocess(notebook, {})[0],
    ):
        assert clean.cells[0].metadata["nbgrader"] == {**meta, "grade_id": "t", "points": 1}
    filled = SanitiseFeedback().preprocess(notebook, {})[0]  # after GetGrades: the gradebook's
    assert filled.cells[0].metadata["nbgrader"]["comment"] == FORGED


def test_no_comment_a_student_wrote_reaches_the_feedback_or_the_record(graded):
    pages = [*(graded / "feedback" / STUDENT / A).glob("*.html")]
    recorded = [*(graded / "autograded" / STUDENT / A).glob("*.ipynb")]
    assert pages and recorded
    for path in pages + recorded:
        assert FORGED not in path.read_text(), path


def test_feedback_html_runs_no_student_script(graded, chromium):
    folder = graded / "feedback" / STUDENT / A

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    watched = Watched(chromium)
    try:
        watched.page.goto(
            f"http://127.0.0.1:{server.server_address[1]}/{A}.html", wait_until="load"
        )
        _assert_nothing_ran(watched, watched.probe(".cell"))
    finally:
        watched.close()
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def formgrader(graded, tmp_path_factory):
    """nbgrader's formgrader (a Jupyter server extension) on 127.0.0.1, with a token."""
    with formgrader_server(graded, tmp_path_factory.mktemp("jupyter")) as (base, token):
        yield base, token


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.timeout(900)
def test_formgrader_submission_page_runs_no_student_script(graded, formgrader, chromium):
    from nbgrader.api import Gradebook

    base, token = formgrader
    with Gradebook(f"sqlite:///{graded / 'gradebook.db'}") as gb:
        submission = gb.find_submission_notebook(A, A, STUDENT).id
    watched = Watched(chromium)
    try:
        response = watched.page.goto(
            f"{base}/formgrader/submissions/{submission}/?token={token}", wait_until="load"
        )
        assert response.ok, response.status
        assert "Submission 1 / 1" in watched.page.content()  # the grading page, not a login
        _assert_nothing_ran(watched, watched.probe(".cell"))
        # only the sanitised notebook (and timestamp.txt) is copied to the autograded folder
        # that the formgrader serves files from: the student's own HTML file is not there
        extra = watched.page.goto(f"{base}/formgrader/submissions/{submission}/answer.html")
        assert extra.status == 404 and watched.page.evaluate("window.__pwned || null") is None
    finally:
        watched.close()


def test_an_image_of_a_missing_attachment_is_no_image_and_no_error():
    """A written answer whose attachment was never there, was no image, or was dropped at
    intake (`notebook.drop_ungraded`) renders without it: nbconvert's "missing attachment"
    error would otherwise stop the recording of that submission on every rerun."""
    source = "before ![gone](attachment:gone.png) after ![kept](attachment:plot.png)"
    shown = sanitise.markdown_html(source, {"plot.png": {"image/png": PNG}})
    assert "before" in shown and "after" in shown
    sources = re.findall(r'src="([^"]*)"', shown)
    assert len(sources) == 1 and sources[0].startswith("data:image/png;base64,"), shown
    assert "gone.png" not in shown.split("alt=")[0]
