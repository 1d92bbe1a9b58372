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
  asked nothing of the network: neither through the macros of the packages that make them
  (off) nor through base's ``\\mmlToken``, which sets any attribute MathJax lets a token have
  (``href``, ``style``, ``class``, ``id``, ``mathbackground``, ``mathcolor``, ``fontfamily``,
  an ``mglyph``'s ``src``...). Every link on the page (``a``, ``[href]``, ``[xlink:href]``) is
  clicked and no script runs (``window.__pwned``; in the formgrader, no file is created in the
  course folder through ``/api/contents``), and the only ``href`` left is the page's own
  ``#fragment``;
- both pages carry the course's Content-Security-Policy as the first element of ``<head>``:
  its script sources are exactly the SHA-256 hashes of the page's own inline scripts (and, in
  the formgrader, the server's own static files), so a script the test itself adds to the
  opened page does not run and Chromium reports the violation.
"""

from __future__ import annotations

import base64
import hashlib
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
from autograder.checking.assignment_spec import load_assignment  # noqa: E402
from autograder.checking.results import SubmissionResult, TaskResult  # noqa: E402
from autograder.course.gradebook import Recorder  # noqa: E402
from autograder.grading.verdict import not_graded  # noqa: E402
from autograder.student.contract import Verdict  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(900)]
A = "ch1_pooling"
STUDENT = "alice"
REPO = Path(__file__).resolve().parents[1]
ELSEWHERE = "http://attacker.example/mathjax"
#: what a javascript: link runs when clicked: it sets the canary and, in the formgrader, uses
#: the instructor's session to create a file in the course folder (Jupyter's contents API
#: wants the _xsrf cookie echoed in a header; a page's script can read it)
PWNED_FILE = "pwned-by-mathjax.txt"
PWN = (
    "window.__pwned='mmlToken';fetch('/api/contents/" + PWNED_FILE + "',{method:'PUT',"
    "headers:{'X-XSRFToken':document.cookie.split('_xsrf=').pop().split(';').shift()},"
    "body:JSON.stringify({type:'file',format:'text',content:'pwned'})})"
)
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
    "$\\unicode[Comic Sans MS]{x41}$ $\\color{red; background: url(x)}{g}$\n\n"
    # base's \mmlToken: every attribute MathJax 3.2 lets a token have beyond its MathML
    # defaults (href, style, class, id, fontfamily, fontsize, fontweight, fontstyle, color,
    # background), the defaults that take a colour, and an mglyph's image
    + " ".join(
        f"$\\mmlToken{{{kind}}}[{attribute}]{{{text}}}$"
        for kind, attribute, text in [
            ("mi", f'href="javascript:{PWN}"', "h"),
            ("mi", f'href="{ELSEWHERE}/mml-href"', "i"),
            ("mi", f'style="background-image: url({ELSEWHERE}/mml-style)"', "j"),
            ("mi", 'class="student-class"', "k"),
            ("mi", 'id="student-id"', "l"),
            ("mi", f'mathbackground="url({ELSEWHERE}/mathbackground)"', "m"),
            ("mi", f'mathcolor="url({ELSEWHERE}/mathcolor)"', "n"),
            ("mi", f'background="url({ELSEWHERE}/background)"', "o"),
            ("mi", f'color="url({ELSEWHERE}/color)"', "p"),
            ("mi", f'fontfamily="x; background: url({ELSEWHERE}/fontfamily)"', "q"),
            ("mi", 'fontsize="400em", fontweight="bold", fontstyle="italic"', "r"),
            ("mglyph", f'src="{ELSEWHERE}/mglyph.png", width="20", height="20", alt="s"', ""),
        ]
    )
    + "\n"
)
DISPLAY_IN_ANSWER = 2

#: in the page, inside ``scope`` (the feedback page's body; the formgrader's notebook, beside
#: its own navigation): how many display equations MathJax typeset once its first typeset is
#: done (-1: MathJax never started), and what the student's TeX could have made
PROBE = """async (scope) => {
  for (let i = 0; i < 600 && !(window.MathJax && MathJax.startup && MathJax.startup.promise); i++)
    await new Promise(r => setTimeout(r, 50));
  if (!(window.MathJax && MathJax.startup && MathJax.startup.promise)) return {display: -1};
  await MathJax.startup.promise;
  const root = document.querySelector(scope);
  const clone = root.cloneNode(true);
  clone.querySelectorAll('pre, code, script, style, mjx-container').forEach(e => e.remove());
  const XLINK = 'http://www.w3.org/1999/xlink';
  const href = e => e.getAttribute('href') ?? e.getAttributeNS(XLINK, 'href');
  const math = [...root.querySelectorAll('mjx-container, mjx-container *')];
  return {
    display: root.querySelectorAll('mjx-container[display="true"]').length,
    inline: root.querySelectorAll('mjx-container:not([display="true"])').length,
    prose: clone.textContent,
    // every href left, but the page's own #fragments (the table of contents, MathJax's glyphs)
    links: [...root.querySelectorAll('*')]
      .filter(e => e.hasAttribute('href') || e.hasAttributeNS(XLINK, 'href'))
      .map(href).filter(u => !/^#[^:]*$/.test(u.trim())),
    // any attribute of anything MathJax made that names a URL, a script or the student's host
    named: math.flatMap(e => [...e.attributes]
      .filter(a => !a.name.startsWith('xmlns') && /url\\(|javascript:|:\\/\\/|attacker/i.test(a.value))
      .map(a => `<${e.localName} ${a.name}="${a.value}">`)),
    styled: math.filter(e => /url/i.test(e.getAttribute('style') || '')).length,
    classes: document.querySelectorAll('.student-class, #student-id').length,
    images: root.querySelectorAll('mjx-container image, mjx-container img').length,
    pwned: window.__pwned === undefined ? null : String(window.__pwned),
  };
}"""

#: every link in ``scope``: ``a``, ``[href]``, ``[xlink:href]``, but MathJax's ``<use>`` of its
#: own glyphs (hundreds, each ``#MJX-...``, checked by PROBE's ``links``; no link)
LINKS = """(scope) => [...document.querySelector(scope).querySelectorAll(
  'a, [href]:not(use), [xlink\\\\:href]:not(use)')].map((e, i) => {
    e.setAttribute('data-test-link', i);
    return e.getAttribute('href') ?? e.getAttributeNS('http://www.w3.org/1999/xlink', 'href');
  })"""
#: scroll link ``i`` into view; its box in the window (null if it has none to click)
LINK_BOX = """(i) => {
  const e = document.querySelector(`[data-test-link="${i}"]`);
  e.scrollIntoView({block: 'center'});
  const r = e.getBoundingClientRect();
  if (r.width < 1 || r.height < 1) {
    e.dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true, view: window}));
    return null;
  }
  return {x: r.left + r.width / 2, y: r.top + r.height / 2};
}"""


def _click_every_link(page, scope: str) -> tuple[list[str], list[str]]:
    """Click (the mouse, or a dispatched click where a link has no box) every link in
    ``scope``, one by one, as an instructor might; return where the clicks took the page and
    what they set ``window.__pwned`` to (the page is opened again after a click that left it)."""
    url = page.url.split("#")[0]
    hrefs = page.evaluate(LINKS, scope)
    assert hrefs, f"no link at all in {scope}"
    left, pwned = [], []
    for i, href in enumerate(hrefs):
        page.evaluate("() => { window.__stillHere = true; }")
        box = page.evaluate(LINK_BOX, i)
        if box is not None:
            page.mouse.click(box["x"], box["y"])
        page.wait_for_timeout(150)  # a javascript: URL runs as a task after the click
        here = page.evaluate(
            "() => [window.__stillHere === true, location.href, window.__pwned ?? null]"
        )
        if here[2] is not None:
            pwned.append(f"{href!r}: {here[2]}")
        if not here[0] or here[1].split("#")[0] != url:
            left.append(f"{href!r} -> {here[1]}")
            page.goto(url, wait_until="load")
            page.evaluate(PROBE, scope)
            page.evaluate(LINKS, scope)
    return left, pwned


GLYPHICONS_REFUSED = re.compile(
    r"Loading the font '[^']*/fonts/glyphicons-halflings-regular\.(?:eot|woff2?|ttf|svg)"
    r"[^']*' violates the following Content Security Policy directive: \"default-src 'none'\""
)


def _display_equations(notebook) -> int:
    """The ``$$...$$`` blocks of the notebook's markdown cells (what must be typeset)."""
    return sum(c.source.count("$$") // 2 for c in notebook.cells if c.cell_type == "markdown")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A released ch1_pooling with alice's submission recorded (as `grade_assignment` records
    it: every automatic test passed) and its feedback generated."""
    tmp = tmp_path_factory.mktemp("feedback-math")
    course = corpus.released_course(tmp / "course", (A,))
    recorder = Recorder(course, load_assignment(course, A), not_graded)
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


@pytest.fixture(scope="module")
def formgrader(course):
    """The course served by Jupyter Server with the formgrader (as the README starts it), and
    the URL path of alice's manual-grading view."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course['course'] / 'gradebook.db'}") as gb:
        submission_id = gb.find_submission_notebook(A, A, STUDENT).id
    home = course["tmp"] / "server"
    home.mkdir()
    with formgrader_server(course["course"], home) as (url, token):
        yield {
            "url": url,
            "token": token,
            "view": f"formgrader/submissions/{submission_id}/",
            "log": home / "server.log",
        }


def _check_math(state: dict, notebook, where: str) -> None:
    expected = _display_equations(notebook)
    assert expected >= DISPLAY_IN_ANSWER + 1  # the released prose has equations of its own
    assert state["display"] == expected, f"{where}: {state['display']} of {expected} typeset"
    assert state["inline"] > 10, where  # $h$, $0/0$, the prose's symbols
    at = state["prose"].find("$$")
    assert at < 0, f"{where}: raw TeX left: {state['prose'][max(0, at - 80) : at + 80]!r}"
    assert "\\frac" not in state["prose"], where
    assert "mmlToken" not in state["prose"], where  # each one typeset (an error shows the TeX)
    made = {k: state[k] for k in ("links", "named", "styled", "classes", "images")}
    assert made == {"links": [], "named": [], "styled": 0, "classes": 0, "images": 0}, (
        f"{where}: the student's TeX made {made}"
    )
    assert state["pwned"] is None, where


def _sha256(script: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"


#: the policy's text and the page's inline scripts, as Chromium parsed them
PAGE_POLICY = """() => ({
  first: [document.head.firstElementChild.localName,
          document.head.firstElementChild.getAttribute('http-equiv')],
  policy: [...document.querySelectorAll('meta[http-equiv="Content-Security-Policy" i]')]
    .map(m => m.getAttribute('content')),
  scripts: [...document.scripts].filter(s => !s.src).map(s => s.text),
})"""


def _policy(page) -> tuple[dict[str, list[str]], list[str]]:
    """The page's one Content-Security-Policy (a meta, the first element of its head), as
    {directive: sources}, and the text of its inline scripts."""
    seen = page.evaluate(PAGE_POLICY)
    assert len(seen["policy"]) == 1, seen["policy"]
    assert seen["first"] == ["meta", "Content-Security-Policy"], seen["first"]
    directives = {}
    for part in seen["policy"][0].split(";"):
        name, *sources = part.split()
        assert name not in directives, part
        directives[name] = sources
    return directives, seen["scripts"]


def _check_feedback_policy(page) -> None:
    directives, scripts = _policy(page)
    assert len(scripts) == 2, "the MathJax configuration, then MathJax (with ui/safe)"
    assert directives == {
        "default-src": ["'none'"],
        "script-src": [_sha256(s) for s in scripts],
        "style-src": ["'unsafe-inline'"],
        "img-src": ["data:"],
        "base-uri": ["'none'"],
        "form-action": ["'none'"],
    }, directives


#: the test itself puts script into the opened page, the ways a student's markup would if a
#: sanitiser let it through; under the page's policy none of it runs, and Chromium reports
INJECT = """async () => {
  const violations = [];
  document.addEventListener('securitypolicyviolation',
    e => violations.push(`${e.effectiveDirective} ${e.blockedURI}`));
  const script = document.createElement('script');
  script.textContent = 'window.__pwned = 2';
  document.body.appendChild(script);
  const holder = document.createElement('div');
  holder.innerHTML = '<img src="data:," onerror="window.__pwned = 3">'
    + '<a id="test-js-link" href="javascript:window.__pwned = 4">x</a>';
  document.body.appendChild(holder);
  document.getElementById('test-js-link').click();
  await new Promise(r => setTimeout(r, 500));
  return {pwned: window.__pwned === undefined ? null : String(window.__pwned), violations};
}"""


def _check_injection_blocked(page, where: str) -> None:
    seen = page.evaluate(INJECT)
    assert seen["pwned"] is None, f"{where}: the injected script ran ({seen})"
    assert any(v.startswith("script-src") for v in seen["violations"]), f"{where}: {seen}"


def test_a_feedback_page_opened_alone_typesets_its_math_and_requests_nothing(course, context):
    page_file = course["course"] / "feedback" / STUDENT / A / f"{A}.html"
    pages = [p.name for p in page_file.parent.iterdir() if p.suffix == ".html"]
    assert pages == [f"{A}.html"]  # one page (beside it nbgrader's timestamp.txt)
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
    state = visit.page.evaluate(PROBE, "html")
    visit.page.screenshot(path=str(course["tmp"] / "feedback.png"), full_page=True)
    left, pwned = _click_every_link(visit.page, "body")
    visit.close()
    assert left == [] and pwned == [], f"clicked links went to {left}, ran {pwned}"
    _check_math(state, course["notebook"], "the feedback page")
    assert requested == [page_file.as_uri()], requested
    # nbgrader inlines bootstrap.min.css, whose @font-face names its icon font by a relative
    # URL: no feedback page has it beside it (none was ever loaded), and Chromium reports the
    # policy's refusal of the URL once the rule is parsed, whether or not a glyph uses it
    assert [e for e in visit.console_errors if not GLYPHICONS_REFUSED.match(e)] == [], (
        visit.console_errors
    )


def test_the_feedback_pages_policy_allows_its_own_scripts_only(course, context):
    page_file = course["course"] / "feedback" / STUDENT / A / f"{A}.html"
    visit = PageVisit(context, "file://")
    visit.page.goto(page_file.as_uri(), wait_until="load")
    visit.page.evaluate(PROBE, "html")
    _check_feedback_policy(visit.page)
    _check_injection_blocked(visit.page, "the feedback page")
    visit.close()


def test_the_formgraders_manual_grading_view_typesets_its_math_offline(course, context, formgrader):
    visit = PageVisit(context, formgrader["url"])
    visit.goto(f"formgrader?token={formgrader['token']}", settle=False)  # token -> cookie
    visit.goto(formgrader["view"], settle=False)
    state = visit.page.evaluate(PROBE, "#notebook")
    left, pwned = _click_every_link(visit.page, "#notebook")
    visit.page.wait_for_timeout(1000)  # a fetch a click started
    visit.close()
    log = formgrader["log"].read_text()
    assert left == [] and pwned == [], f"clicked links went to {left}, ran {pwned}"
    assert not (course["course"] / PWNED_FILE).exists(), "a click wrote into the course"
    _check_math(state, course["notebook"], "the manual-grading view")
    assert visit.external == [], f"requests that left the server: {visit.external}"
    assert visit.bad_local == [], visit.bad_local
    assert "Traceback" not in log, log[-3000:]


def test_the_formgraders_view_has_a_policy_that_allows_its_own_scripts_only(context, formgrader):
    visit = PageVisit(context, formgrader["url"])
    visit.goto(f"formgrader?token={formgrader['token']}", settle=False)
    visit.goto(formgrader["view"], settle=False)
    visit.page.evaluate(PROBE, "#notebook")
    directives, scripts = _policy(visit.page)
    # the formgrader's own: its variables, toggle_name, the tooltips; the course's MathJax
    assert len(scripts) == 5, scripts
    handlers = ["toggle_name(true);", "toggle_name(false);"]  # the eye icons' onclick
    assert directives == {
        "default-src": ["'none'"],
        "script-src": ["'self'", "'unsafe-hashes'", *map(_sha256, scripts + handlers)],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "base-uri": ["'none'"],
        "form-action": ["'none'"],
    }, directives
    _check_injection_blocked(visit.page, "the manual-grading view")
    visit.close()
    assert visit.external == [], visit.external


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
