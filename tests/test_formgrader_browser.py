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
the feedback page. A second student, ``ada``, submits the solved notebook with math in her
written answer; her Autograde button is clicked too.
After each page: ``window.__pwned`` is unset, the beacon got nothing, no request left
127.0.0.1 for a host the student named, and no ``javascript:`` link is left to click.
Under the course's Content-Security-Policy the manual-grading view still grades with the
mouse: the eye icon shows the student's name (an inline ``onclick``), "Full credit", a score
typed in and a comment are saved in the gradebook, and Chromium reports no violation.
It also grades with the keyboard (nbgrader's ``formgrade.js``, which calls MathJax 2's API
on a page that carries MathJax 3): no error on load, Tab moves to the next score field and a
score typed there is saved in the gradebook, Ctrl+. opens the next submission and Ctrl+, the
previous one at the same field, and each student's math is typeset with no outside request.
"""

from __future__ import annotations

import http.server
import json
import re
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
CLASSMATE = "ada"  # a second submission, for the keyboard's next and previous
CLASSMATE_ANSWER = (
    "The weights are $w_i = K((q - k_i)/h) / \\sum_j K((q - k_j)/h)$, and as $h \\to 0$ "
    "only the nearest key is left."
)
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
    corpus.write_submission(
        course,
        A,
        CLASSMATE,
        corpus.set_cell(corpus.solved(course, A), "written-bandwidth", CLASSMATE_ANSWER),
    )
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


def _click_and_wait(visit: PageVisit, column: str, log: Path, student: str = STUDENT) -> None:
    """Click ``student``'s button in ``column`` of Manage Submissions; wait for its modal."""
    visit.goto(f"formgrader/manage_submissions/{A}", settle=False)
    page = visit.page
    row = page.locator("#main-table tr", has=page.locator("td.student-id", has_text=student))
    row.locator(f"td.{column} a").click()
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
    """The instructor has clicked mallory's Autograde button, then ada's: mallory's
    autograded notebook."""
    for student in (STUDENT, CLASSMATE):
        _click_and_wait(instructor, "autograde", formgrader["log"], student)
        path = formgrader["course"] / "autograded" / student / A / f"{A}.ipynb"
        assert path.is_file(), f"the Autograde button wrote no autograded notebook for {student}"
    return formgrader["course"] / "autograded" / STUDENT / A / f"{A}.ipynb"


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


#: every uncaught error of the page's scripts, from before its first script runs
RECORD_ERRORS = """window.__errors = [];
window.addEventListener('error', e => window.__errors.push(String(e.message)));"""
#: formgrade.js has finished its set-up (``formgrader.loaded``, after its keyboard shortcuts are
#: registered) and MathJax's end of start-up has reached it (its listener sets
#: ``MathJax.loaded``), or a script failed
GRADER_READY = """() => window.__errors.length > 0 || (window.formgrader && formgrader.loaded === true
  && window.MathJax && MathJax.loaded === true)"""


def _grader_ready(visit: PageVisit, where: str) -> None:
    page = visit.page
    page.wait_for_function(GRADER_READY)
    errors = page.evaluate("() => window.__errors")
    uncaught = [e for e in visit.console_errors if e.startswith("uncaught")]
    assert errors == [] and uncaught == [], (
        f"{where}: the page's scripts failed: {errors} {uncaught}"
    )


def _focused_index(page) -> int:
    """The index among the formgrader's fields (``.tabbable``) of the focused element."""
    return page.evaluate(
        "() => [...document.querySelectorAll('.tabbable')].indexOf(document.activeElement)"
    )


def _typeset_answer(page) -> int:
    """MathJax 3's output elements in the written answer (the cell of ``written-bandwidth``)."""
    cell = page.locator(".nbgrader_cell", has=page.locator("#written-bandwidth"))
    return cell.locator(".text_cell_render mjx-container svg").count()


def test_keyboard_grading_moves_saves_and_turns_the_page_with_math_typeset(
    instructor, formgrader, autograded
):
    from nbgrader.api import Gradebook

    gradebook = f"sqlite:///{formgrader['course'] / 'gradebook.db'}"
    with Gradebook(gradebook) as gb:
        students = {s.id: s.student.id for s in gb.notebook_submissions(A, A)}
    first, second = sorted(students)  # Ctrl+. and Ctrl+, walk the submissions' sorted ids

    def manual_score():
        with Gradebook(gradebook) as gb:
            return gb.find_grade("written-bandwidth", A, A, students[first]).manual_score

    visit = PageVisit(instructor.context, formgrader["url"])  # its own errors and requests
    page = visit.page
    page.add_init_script(RECORD_ERRORS)
    page.add_init_script(RECORD_VIOLATIONS)
    visit.goto(f"formgrader/submissions/{first}/", settle=False)
    _grader_ready(visit, f"{students[first]}'s submission")
    # the written answer's score field, and the field before it to start from (?index=)
    fields = page.evaluate("() => [...document.querySelectorAll('.tabbable')].map(e => e.id)")
    score = fields.index("written-bandwidth")
    assert score >= 1, fields
    # the browser's own Tab would stop first at the cell's "Full credit" button: landing on the
    # score field is the formgrader's doing
    buttons = page.locator(".nbgrader_cell", has=page.locator("#written-bandwidth"))
    assert buttons.locator("button.full-credit").is_visible()
    visit.goto(f"formgrader/submissions/{first}/?index={score - 1}", settle=False)
    _grader_ready(visit, f"{students[first]}'s submission at field {score - 1}")
    assert _focused_index(page) == score - 1, "the formgrader did not focus the field of ?index="
    assert manual_score() != 0.5

    page.keyboard.press("Tab")
    assert _focused_index(page) == score, f"Tab went to {_focused_index(page)}, not {score}"
    page.keyboard.type("0.5")
    page.keyboard.press("Tab")  # the score is saved as it loses focus
    assert _focused_index(page) == score + 1
    deadline = time.monotonic() + 120  # a bound on a shared machine, not a measured time
    while manual_score() != 0.5 and time.monotonic() < deadline:
        time.sleep(0.25)
    assert manual_score() == 0.5, f"the score typed was not saved: {manual_score()}"
    page.keyboard.press("Shift+Tab")
    assert _focused_index(page) == score, "Shift+Tab did not go back to the score field"
    assert _typeset_answer(page) > 0, f"{students[first]}'s math is not typeset"

    page.keyboard.press("Control+.")
    page.wait_for_url(re.compile(rf"/formgrader/submissions/{second}/?\?index={score}$"))
    _grader_ready(visit, f"{students[second]}'s submission, after Ctrl+.")
    assert _focused_index(page) == score, "Ctrl+. did not keep the field"
    assert _typeset_answer(page) > 0, f"{students[second]}'s math is not typeset"

    page.keyboard.press("Control+,")
    page.wait_for_url(re.compile(rf"/formgrader/submissions/{first}/?\?index={score}$"))
    _grader_ready(visit, f"{students[first]}'s submission, after Ctrl+,")
    assert _focused_index(page) == score, "Ctrl+, did not keep the field"
    assert manual_score() == 0.5
    assert visit.external == [], f"requests that left the server: {visit.external}"
    assert page.evaluate("() => window.__violations") == [], "the policy refused the formgrader"
    visit.close()


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


def test_manage_students_lists_the_students_by_name_not_none(instructor, autograded):
    instructor.goto("formgrader/manage_students", settle=False)
    page = instructor.page
    page.wait_for_selector("#main-table td.name a")
    names = sorted(page.locator("#main-table td.name").all_inner_texts())
    assert len(names) == 2, names
    for name, student in zip(names, sorted((STUDENT, CLASSMATE))):
        assert name.startswith(student) and "None" not in name, names
