"""Math in the feedback pages and the formgrader is typeset offline, in headless Chromium.

nbgrader's templates load MathJax from a CDN: with no network a student's feedback page and
the instructor's manual-grading view showed raw TeX. The course's macro
(``autograder/course/nbgrader_templates/base/mathjax.html.j2``, set up in
``autograder/nbgrader_config.py``) writes the site's own MathJax 3 into the page. Here, on a
released copy of ch1_pooling with one recorded submission (``alice``, solved, whose written
answer mixes math with TeX that would make a link, a style, a class or load code), every
request that leaves the page's own origin is aborted and recorded:

- the feedback page that ``python -m autograder feedback`` writes, opened from its file (as a
  student opens it, alone, after it went through an LMS): MathJax typesets every display
  equation of the notebook and the answer's, no ``$$`` is left in the visible text, and the
  page requested nothing but itself;
- the same notebook in the formgrader's manual-grading view (Jupyter Server in the course
  folder, as the README starts it): the same, and no request leaves 127.0.0.1;
- on both, the student's TeX made no link, no ``style`` with a URL, no class of its own, and
  asked nothing of the network.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from formgrader_server import formgrader_server  # noqa: E402
from hostile import corpus  # noqa: E402
from test_site_browser import PageVisit, browser  # noqa: E402, F401 - the shared Chromium

from autograder import cli  # noqa: E402
from autograder.checking import notebook as nbparse  # noqa: E402
from autograder.course.gradebook import Recorder  # noqa: E402
from autograder.grading.results import SubmissionResult, TaskResult  # noqa: E402
from autograder.grading.verdict import not_graded  # noqa: E402
from autograder.student.contract import Verdict  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(900)]
A = "ch1_pooling"
STUDENT = "alice"
REPO = Path(__file__).resolve().parents[1]
ELSEWHERE = "http://attacker.example/mathjax"
#: the written answer: two formulas MathJax must typeset, then TeX a student could use to make
#: a link, a style, a class or an id, or to load code, each of which the course's MathJax
#: refuses (its packages draw math only)
ANSWER = (
    "The kernel's support ends at the bandwidth:\n\n"
    "$$K(u) = \\max\\left(0, 1 - \\frac{u^2}{h^2}\\right)$$\n\n"
    "so a query far from every key has weights $0/0$:\n\n"
    "$$w_i = \\frac{K(x - x_i)}{\\sum_j K(x - x_j)}$$\n\n"
    f"$\\href{{javascript:window.__pwned=1}}{{a}}$ $\\href{{{ELSEWHERE}/href}}{{b}}$ "
    f"$\\style{{background-image: url({ELSEWHERE}/style)}}{{c}}$ "
    f"$\\bbox[background-image: url({ELSEWHERE}/bbox)]{{d}}$ "
    "$\\class{student-class}{e}$ $\\cssId{student-id}{f}$ $\\require{html}$ "
    "$\\unicode[Comic Sans MS]{x41}$ $\\color{red; background: url(x)}{g}$\n"
)
DISPLAY_IN_ANSWER = 2

#: in the page: how many display equations MathJax typeset, once its first typeset is done
#: (-1: MathJax never started), and what the student's TeX could have made
PROBE = """async () => {
  for (let i = 0; i < 600 && !(window.MathJax && MathJax.startup && MathJax.startup.promise); i++)
    await new Promise(r => setTimeout(r, 50));
  if (!(window.MathJax && MathJax.startup && MathJax.startup.promise)) return {display: -1};
  await MathJax.startup.promise;
  const clone = document.body.cloneNode(true);
  clone.querySelectorAll('pre, code, script, style, mjx-container').forEach(e => e.remove());
  const inMath = sel => [...document.querySelectorAll(
    sel.split(',').map(s => 'mjx-container ' + s.trim()).join(', '))];
  return {
    display: document.querySelectorAll('mjx-container[display="true"]').length,
    inline: document.querySelectorAll('mjx-container:not([display="true"])').length,
    prose: clone.textContent,
    links: inMath('a, [href]').map(e => e.getAttribute('href')),
    styled: inMath('[style*="url"]').map(e => e.getAttribute('style')),
    classes: inMath('.student-class, #student-id').length,
    pwned: window.__pwned === undefined ? null : String(window.__pwned),
  };
}"""


def _display_equations(notebook) -> int:
    """The ``$$...$$`` blocks of the notebook's markdown cells (what must be typeset)."""
    return sum(c.source.count("$$") // 2 for c in notebook.cells if c.cell_type == "markdown")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A released ch1_pooling with alice's submission recorded (as `grade_assignment` records
    it: every automatic test passed) and its feedback generated."""
    tmp = tmp_path_factory.mktemp("feedback-math")
    course = corpus.released_course(tmp / "course", (A,))
    recorder = Recorder(course, nbparse.load_assignment(course, A), not_graded)
    spec = recorder.spec
    notebook = corpus.set_cell(corpus.solved(course, A), "written-bandwidth", ANSWER)
    result = SubmissionResult(STUDENT, A, seed=1, max_score=spec.max_score, sha256="a" * 64)
    result.tasks = [
        TaskResult(t.grade_id, t.points, "passed", [Verdict(c, "a case", False, True)])
        for t in spec.tests
        for c, _f in t.checks[:1]
    ]
    recorder.record(result, nbformat.writes(notebook).encode())
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", str(REPO))  # nbgrader reads this checkout's templates
        assert cli.main(["--course", str(course), "feedback", A]) == 0
    return {"course": course, "tmp": tmp, "notebook": notebook}


@pytest.fixture(scope="module")
def context(browser):  # noqa: F811 - the fixture imported above
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(300_000)  # a shared, loaded machine
    yield context
    context.close()


def _check_math(state: dict, notebook, where: str) -> None:
    expected = _display_equations(notebook)
    assert expected >= DISPLAY_IN_ANSWER + 1  # the released prose has equations of its own
    assert state["display"] == expected, f"{where}: {state['display']} of {expected} typeset"
    assert state["inline"] > 10, where  # $h$, $0/0$, the prose's symbols
    at = state["prose"].find("$$")
    assert at < 0, f"{where}: raw TeX left: {state['prose'][max(0, at - 80) : at + 80]!r}"
    assert "\\frac" not in state["prose"], where
    assert state["links"] == [] and state["styled"] == [] and state["classes"] == 0, (
        f"{where}: the student's TeX made {state}"
    )
    assert state["pwned"] is None, where


def test_a_feedback_page_opened_alone_typesets_its_math_and_requests_nothing(course, context):
    page_file = course["course"] / "feedback" / STUDENT / A / f"{A}.html"
    assert sorted(p.name for p in page_file.parent.iterdir()) == [f"{A}.html"]  # one file
    text = page_file.read_text()
    assert "cdnjs" not in text and not re.search(r"<script[^>]+src=", text)
    visit = PageVisit(context, "file://")
    requested = []
    visit.page.route(
        "**/*",
        lambda route: (
            requested.append(route.request.url),
            route.continue_() if route.request.url == page_file.as_uri() else route.abort(),
        ),
    )
    visit.page.goto(page_file.as_uri(), wait_until="load")
    state = visit.page.evaluate(PROBE)
    visit.page.screenshot(path=str(course["tmp"] / "feedback.png"), full_page=True)
    visit.close()
    _check_math(state, course["notebook"], "the feedback page")
    assert requested == [page_file.as_uri()], requested
    assert visit.console_errors == [], visit.console_errors


def test_the_formgraders_manual_grading_view_typesets_its_math_offline(course, context):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course['course'] / 'gradebook.db'}") as gb:
        submission_id = gb.find_submission_notebook(A, A, STUDENT).id
    home = course["tmp"] / "server"
    home.mkdir()
    with formgrader_server(course["course"], home) as (url, token):
        visit = PageVisit(context, url)
        visit.goto(f"formgrader?token={token}", settle=False)  # the token becomes a cookie
        visit.goto(f"formgrader/submissions/{submission_id}/", settle=False)
        state = visit.page.evaluate(PROBE)
        visit.close()
    log = (home / "server.log").read_text()
    _check_math(state, course["notebook"], "the manual-grading view")
    assert visit.external == [], f"requests that left the server: {visit.external}"
    assert visit.bad_local == [], visit.bad_local
    assert "Traceback" not in log, log[-3000:]


def test_the_macro_replaces_nbconverts_in_both_templates():
    """The course's template folder comes first for the feedback and the formgrade template
    alike, so both pages get the course's MathJax (and nbconvert's CDN macro is never used)."""
    from nbconvert.exporters import HTMLExporter
    from traitlets.config import Config, PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", str(REPO / "autograder")).load_config()
    for template in ("feedback", "formgrade"):
        exporter = HTMLExporter(config=Config(config), template_name=template)
        source, path, _ = exporter.environment.loader.get_source(
            exporter.environment, "mathjax.html.j2"
        )
        assert Path(path) == REPO / "autograder" / "course" / "nbgrader_templates" / "base" / (
            "mathjax.html.j2"
        ), template
        assert "course_mathjax" in source and "cdnjs" not in source
        script = exporter.environment.filters["course_mathjax"]("tex-svg.js")
        assert "MathJax" in script and len(script) > 1_000_000  # tex-svg.js, whole
        assert "</script" not in script.lower()
