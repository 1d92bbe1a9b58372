"""The formgrader in headless Chromium: nothing a student wrote runs in the instructor's browser.

On a released copy of the course (ch1_pooling only), one student, ``mallory``, submits the
solved notebook with a written answer full of HTML that would run, load or navigate
(``<script>``, an ``onerror`` image, a ``javascript:`` link, an iframe, an SVG ``onload``, a
CSS import, remote images) and a solution cell that displays HTML and JavaScript outputs when
it runs. Every one of them either sets ``window.__pwned`` or asks a beacon for a URL: a small
HTTP server on 127.0.0.1 that records every request it gets; every request to another host is
blocked and recorded by the page.

Jupyter Server runs on 127.0.0.1 with a token and nbgrader's formgrader, from the course
folder as the README says. In Chromium the instructor clicks that submission's Autograde
button (nbgrader's own autograde, in the server: not our grader), then its Generate Feedback
button, then opens the manual-grading view of the autograded notebook, the ``answer.html``
mallory put beside the notebook (the formgrader serves the autograded folder's files), and
the feedback page.
After each page: ``window.__pwned`` is unset, the beacon got nothing, no request left
127.0.0.1 for a host the student named, and no ``javascript:`` link is left to click.
Under the course's Content-Security-Policy the manual-grading view still grades with the
mouse: the eye icon shows the student's name (an inline ``onclick``), "Full credit", a score
typed in and a comment are saved in the gradebook, and Chromium reports no violation.
"""

from __future__ import annotations

import http.server
import json
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from formgrader_server import formgrader_server  # noqa: E402
from hostile import corpus  # noqa: E402
from test_site_browser import PageVisit, browser  # noqa: E402, F401 - the shared Chromium

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(900)]
A = "ch1_pooling"
STUDENT = "mallory"
ATTACKER = "attacker.example"
#: what makes rendered HTML run, load or navigate by itself
LIVE = (
    "<script",
    "onerror",
    "javascript:",
    "<iframe",
    "onload",
    "ontoggle",
    "@import",
    "application/javascript",
    "127.0.0.1",
)


class Beacon:
    """127.0.0.1 HTTP server that answers 204 and records every path asked of it."""

    def __init__(self):
        hits = self.hits = []

        class Record(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                hits.append(self.path)
                self.send_response(204)
                self.end_headers()

            do_POST = do_GET  # noqa: N815

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Record)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def hostile_answer(beacon: str) -> str:
    """A written answer whose every part would run, load or navigate if rendered as is."""
    return "\n\n".join(
        [
            "As $h \\to 0$ the weights pick the nearest key.",
            f'<script>window.__pwned = "script"; fetch("{beacon}/script")</script>',
            f"<img src=\"x\" onerror=\"window.__pwned = 'onerror'; fetch('{beacon}/onerror')\">",
            f"[see the proof](javascript:fetch('{beacon}/javascript-link'))",
            "<a href=\"javascript:window.__pwned='href'\">a link</a>",
            f'<iframe src="{beacon}/iframe"></iframe>',
            f"<svg onload=\"fetch('{beacon}/svg')\"><circle r='4'/></svg>",
            f"<style>@import url('{beacon}/css');</style>",
            f'<img src="{beacon}/pixel.png"> <img src="https://{ATTACKER}/pixel.png">',
            f"<details open ontoggle=\"fetch('{beacon}/ontoggle')\">x</details>",
        ]
    )


def hostile_output_code(beacon: str) -> str:
    """Appended to a solution cell: outputs that run when an HTML page shows them."""
    return (
        "from IPython.display import HTML, Javascript, display\n"
        f'display(HTML("<img src=x onerror=\\"fetch(\'{beacon}/output-html\')\\">"))\n'
        f"display(Javascript(\"window.__pwned = 'js-output'; fetch('{beacon}/output-js')\"))\n"
    )


@pytest.fixture(scope="module")
def beacon():
    b = Beacon()
    yield b
    b.close()


@pytest.fixture(scope="module")
def formgrader(tmp_path_factory, beacon):
    """The course with mallory's submission, served by Jupyter Server with the formgrader."""
    tmp = tmp_path_factory.mktemp("formgrader")
    course = corpus.released_course(tmp / "course", (A,))
    notebook = corpus.set_cell(
        corpus.solved(course, A), "written-bandwidth", hostile_answer(beacon.url)
    )
    notebook = corpus.append_to_cell(notebook, "average-max-pool", hostile_output_code(beacon.url))
    corpus.write_submission(course, A, STUDENT, notebook)
    # a page beside the notebook: nbgrader copies it to autograded/, which the formgrader serves
    (course / "submitted" / STUDENT / A / "answer.html").write_text(
        f'<script>window.__pwned = "page"; fetch("{beacon.url}/page")</script>'
    )
    with formgrader_server(course, tmp) as (url, token):
        yield {"url": url, "token": token, "course": course, "log": tmp / "server.log"}


@pytest.fixture(scope="module")
def instructor(browser, formgrader):  # noqa: F811 - the fixture imported above
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(300_000)  # autograde runs the notebook on a shared machine
    visit = PageVisit(context, formgrader["url"])
    visit.goto(
        f"formgrader?token={formgrader['token']}", settle=False
    )  # logs in: the token becomes a cookie
    yield visit
    visit.close()
    context.close()


def _click_and_wait(visit: PageVisit, column: str, log: Path) -> None:
    """Click the submission's button in ``column`` of Manage Submissions; wait for its modal."""
    visit.goto(f"formgrader/manage_submissions/{A}", settle=False)
    visit.page.locator(f"#main-table td.{column} a").first.click()
    visit.page.wait_for_selector("#success-modal, #error-modal", state="visible")
    if visit.page.locator("#error-modal").count():
        text = visit.page.locator("#error-modal").inner_text()
        pytest.fail(f"the formgrader's {column} failed: {text[-3000:]}\n{log.read_text()[-2000:]}")


def _nothing_ran(visit: PageVisit, beacon: Beacon, where: str) -> None:
    page = visit.page
    page.wait_for_load_state("load")
    assert page.evaluate("() => window.__pwned === undefined"), (
        f"{where}: student code ran (window.__pwned = {page.evaluate('() => window.__pwned')!r})"
    )
    links = page.evaluate(
        "() => [...document.querySelectorAll('[href], [src], [action], [formaction]')]"
        ".map(e => e.getAttribute('href') || e.getAttribute('src') || e.getAttribute('action')"
        " || e.getAttribute('formaction')).filter(u => /^\\s*(javascript|vbscript):/i.test(u))"
    )
    assert links == [], f"{where}: links that would run script when clicked: {links}"
    assert beacon.hits == [], f"{where}: the student's page asked the beacon for {beacon.hits}"
    leaked = [u for u in visit.external if ATTACKER in u]
    assert leaked == [], f"{where}: requests to a host the student named: {leaked}"


@pytest.fixture(scope="module")
def autograded(instructor, formgrader):
    """The instructor has clicked mallory's Autograde button: the autograded notebook."""
    _click_and_wait(instructor, "autograde", formgrader["log"])
    path = formgrader["course"] / "autograded" / STUDENT / A / f"{A}.ipynb"
    assert path.is_file(), "the Autograde button wrote no autograded notebook"
    return path


@pytest.fixture(scope="module")
def feedback(instructor, formgrader, autograded):
    """Then mallory's Generate Feedback button: the feedback page."""
    _click_and_wait(instructor, "generate-feedback", formgrader["log"])
    path = formgrader["course"] / "feedback" / STUDENT / A / f"{A}.html"
    assert path.is_file(), "Generate Feedback wrote no feedback page"
    return path


def test_formgrader_autograde_button_writes_a_sanitised_notebook(autograded, formgrader):
    import nbformat
    from nbgrader.api import Gradebook

    notebook = nbformat.read(autograded, as_version=4)
    # what a page renders as HTML: markdown and raw cells, outputs (code is shown escaped)
    rendered = [c.source for c in notebook.cells if c.cell_type != "code"] + [
        json.dumps(c.outputs) for c in notebook.cells if c.cell_type == "code"
    ]
    for live in LIVE:
        found = [text[:200] for text in rendered if live in text.lower()]
        assert found == [], f"{live!r} survived the formgrader's autograde: {found}"
    with Gradebook(f"sqlite:///{formgrader['course'] / 'gradebook.db'}") as gb:
        # the solved notebook: every auto-graded point (sanitising changed no score)
        assert gb.find_submission_notebook(A, A, STUDENT).score == 12.0


def test_manual_grading_view_runs_nothing_a_student_wrote(
    instructor, formgrader, autograded, beacon
):
    from nbgrader.api import Gradebook

    _nothing_ran(instructor, beacon, "Manage Submissions after Autograde")
    with Gradebook(f"sqlite:///{formgrader['course'] / 'gradebook.db'}") as gb:
        submission_id = gb.find_submission_notebook(A, A, STUDENT).id
    instructor.goto(f"formgrader/submissions/{submission_id}/", settle=False)
    assert "the weights pick the nearest key" in instructor.page.inner_text("body")
    _nothing_ran(instructor, beacon, "the manual-grading view")
    page = instructor.goto(f"formgrader/submissions/{submission_id}/answer.html", settle=False)
    assert page.status == 404, "the formgrader serves the student's own HTML page"
    _nothing_ran(instructor, beacon, "the student's page beside the notebook")


#: every Content-Security-Policy violation of the page, from before its first script runs
RECORD_VIOLATIONS = """window.__violations = [];
document.addEventListener('securitypolicyviolation',
  e => window.__violations.push(`${e.effectiveDirective} ${e.blockedURI} ${e.sample}`));"""


def test_mouse_grading_saves_a_score_and_a_comment_under_the_courses_policy(
    instructor, formgrader, autograded
):
    from nbgrader.api import Gradebook

    def saved():
        with Gradebook(f"sqlite:///{formgrader['course'] / 'gradebook.db'}") as gb:
            grade = gb.find_grade("written-bandwidth", A, A, STUDENT)
            comment = gb.find_comment("written-bandwidth", A, A, STUDENT)
            return grade.manual_score, comment.manual_comment

    with Gradebook(f"sqlite:///{formgrader['course'] / 'gradebook.db'}") as gb:
        submission_id = gb.find_submission_notebook(A, A, STUDENT).id
    page = instructor.page
    page.add_init_script(RECORD_VIOLATIONS)
    instructor.goto(f"formgrader/submissions/{submission_id}/", settle=False)
    policy = page.evaluate(
        "() => [document.head.firstElementChild.getAttribute('http-equiv'),"
        " document.head.firstElementChild.getAttribute('content')]"
    )
    assert policy[0] == "Content-Security-Policy", policy
    assert "script-src 'self' 'unsafe-hashes' 'sha256-" in policy[1], policy
    page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
    page.click("span.glyphicon.name-hidden")  # onclick="toggle_name(true);"
    assert page.locator("a.name-shown").first.is_visible(), "the eye icon did nothing"
    page.click(".panel-heading:has(#written-bandwidth) .full-credit")
    deadline = time.monotonic() + 60
    while saved()[0] != 2 and time.monotonic() < deadline:
        time.sleep(0.25)
    assert saved()[0] == 2, f"Full credit was not saved: {saved()}"
    page.click("#written-bandwidth")
    page.fill("#written-bandwidth", "1.5")
    page.click("#written-bandwidth-comment")  # the score's change is saved as it loses focus
    page.fill("#written-bandwidth-comment", "Right, and the 0/0 is explained.")
    page.click("div.panel-title, h4.panel-title")  # and the comment's
    while saved() != (1.5, "Right, and the 0/0 is explained.") and time.monotonic() < deadline:
        time.sleep(0.25)
    assert saved() == (1.5, "Right, and the 0/0 is explained."), saved()
    assert page.evaluate("() => window.__violations") == [], "the policy refused the formgrader"


def test_feedback_page_runs_nothing_a_student_wrote(instructor, feedback, beacon):
    instructor.page.goto(feedback.as_uri(), wait_until="load")
    assert "the weights pick the nearest key" in instructor.page.inner_text("body")
    _nothing_ran(instructor, beacon, "the feedback page")


def test_manage_assignments_lists_the_release_as_released_without_exchange_warning(instructor):
    instructor.goto("formgrader/manage_assignments", settle=False)
    page = instructor.page
    page.wait_for_selector("#main-table td.status span")
    statuses = page.locator("#main-table td.status").all_inner_texts()
    assert statuses == ["released"], f"assignment status in the formgrader: {statuses}"
    warnings = page.locator(".alert-warning").all_inner_texts()
    assert warnings == [], f"the formgrader warns: {warnings}"


def test_manage_students_lists_the_student_by_name_not_none(instructor, autograded):
    instructor.goto("formgrader/manage_students", settle=False)
    page = instructor.page
    page.wait_for_selector("#main-table td.name a")
    names = page.locator("#main-table td.name").all_inner_texts()
    assert len(names) == 1 and names[0].startswith(STUDENT) and "None" not in names[0], names
