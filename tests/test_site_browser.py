"""The built site in a real browser: headless Chromium (Debian's) over _build/html, no network.

- A local HTTP server on 127.0.0.1 serves ``_build/html`` (built by ``make book``); every
  request to any other host is aborted and recorded as a failure, so a page that needs
  the network (a CDN MathJax, web fonts, thebe, analytics) fails here exactly as it would
  fail for a reader offline.
- Every page of ``_toc.yml`` is tested (new chapters are covered as soon as they are listed):
  HTTP 200, no console errors, every local asset found, every display equation typeset by
  MathJax and no raw TeX or raw MyST role ({eq}`...` in code included) left in the visible
  text, every image decoded, nothing external;
  no stderr output, traceback, warning or build-machine path in any cell output.
- Every figure a chapter's code cell builds is shown on the page (images >= figures built).
- Every code block (a cell's code or output, a listing of ``solutions/``) shows its longest
  line whole, no horizontal scroll bar, at 1280-, 1440- and 1920-pixel-wide windows, in
  text of at least 12 px.
- The search page finds "Nadaraya"; the Chinese one finds the chapters that use a Chinese
  term typed into its box (暂退法, 束搜索, 多头注意力, 标签平滑, 池化); chapter pages link their exercise and offer their
  notebook; exercise pages offer the released zip and notebook.
- A full-page screenshot of every chapter, taken once its math is typeset, goes to
  ``test-artifacts/`` (gitignored).

Both editions are tested (docs/translating.md): every page above in English (the site's
root) and in Chinese (``zh/``), and, between the two, the same number of display equations,
equation numbers, citations and figures on each page, the language switch leading to the
same page and back, the Chinese figures differing from the English ones, and Chinese text
drawn in a CJK font (asked of Chromium's renderer, not assumed).

Point ``ATTENTION_BOOK_HTML`` at another build directory to test it instead of
``_build/html``. A missing build is a failure, never a skip: CI must run these tests.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from autograder.checking import checks

REPO = Path(__file__).resolve().parents[1]
HTML = Path(os.environ.get("ATTENTION_BOOK_HTML", REPO / "_build" / "html")).resolve()
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
ASSIGNMENTS = list(checks.ASSIGNMENTS)  # every registered chapter has its pages

pytestmark = pytest.mark.browser


def toc_pages() -> list[str]:
    """Every document of _toc.yml, in order, e.g. 'book/preface', 'book/ch1_pooling'."""
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    pages = [toc["root"]]

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                pages.append(node["file"])
            for key in ("parts", "chapters", "sections"):
                for child in node.get(key, []):
                    walk(child)

    walk(toc)
    return [
        str(Path(p).with_suffix("")) if Path(p).suffix in (".md", ".ipynb") else p for p in pages
    ]


PAGES = toc_pages()
CHAPTERS = [p for p in PAGES if Path(p).name in ASSIGNMENTS and "exercises" not in p]
# the editions' folders below the site root (book/_ext/editions/): English, Chinese
EDITIONS = ("", "zh/")
EDITION_IDS = ("en", "zh")


# ----------------------------------------------------------------------------------------
# fixtures: the built site, served locally, and one Chromium


@pytest.fixture(scope="module")
def site() -> str:
    """Base URL of _build/html served on 127.0.0.1 (an ephemeral port)."""
    if not (HTML / "index.html").is_file():
        pytest.fail(
            f"no built site at {HTML}: run `make book` first (the browser tests read "
            f"_build/html and must not be skipped)",
            pytrace=False,
        )

    class QuietHandler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(HTML))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"{CHROMIUM} not found: install Debian's chromium (apt-get install chromium; "
            f".ci/run does this)",
            pytrace=False,
        )
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()


class PageVisit:
    """One browser page with every request outside the site blocked and every problem recorded."""

    def __init__(self, context, base: str):
        self.base = base
        self.host = urlsplit(base).netloc
        self.context = context
        self.page = context.new_page()
        self.external: list[str] = []
        self.console_errors: list[str] = []
        self.bad_local: list[str] = []
        self.page.route("**/*", self._route)
        self.page.on(
            "console",
            lambda msg: (
                msg.type == "error"
                and self.console_errors.append(f"{msg.text} ({msg.location.get('url', '')})")
            ),
        )
        self.page.on("pageerror", lambda err: self.console_errors.append(f"uncaught: {err}"))
        self.page.on("response", self._response)

    def _route(self, route):
        url = route.request.url
        parts = urlsplit(url)
        if parts.scheme in ("http", "https", "ws", "wss") and parts.netloc != self.host:
            self.external.append(url)
            route.abort("blockedbyclient")
        else:
            route.continue_()

    def _response(self, response):
        if urlsplit(response.url).netloc == self.host and response.status >= 400:
            self.bad_local.append(f"{response.status} {response.url}")

    def goto(self, path: str, settle: bool = True):
        """Open ``path`` and wait for the load event, then (``settle``) for the page to be
        ready: MathJax done typesetting, its fonts loaded, every image complete. These are
        states of the page, not "the network went quiet": a loaded machine only delays them."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

        response = self.page.goto(f"{self.base}/{path}", wait_until="load")
        if settle:
            try:
                self.page.wait_for_function(READY, timeout=READY_TIMEOUT_MS, polling=100)
            except PlaywrightTimeoutError:
                state = self.page.evaluate(READINESS)
                pytest.fail(
                    f"{path}: not ready {READY_TIMEOUT_MS // 1000} s after its load event: "
                    f"{state}; requests blocked for leaving the site: {self.external}",
                    pytrace=False,
                )
        return response

    def close(self):
        self.page.close()


@pytest.fixture(scope="module")
def browser_context(browser):
    # one context for the module: its HTTP cache spares reloading MathJax on every page
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(90_000)  # generous: CI machines are shared and slow
    yield context
    context.close()


@pytest.fixture
def visit(browser_context, site):
    v = PageVisit(browser_context, site)
    yield v
    v.close()


# ----------------------------------------------------------------------------------------
# in-page probes (JavaScript run in the browser)

# Readiness after the load event, from the page's own state (never "the network went quiet"):
# MathJax, when the page loads it, has run its first typeset (``MathJax.startup.promise``)
# and the fonts that typesetting asked for have loaded; every image is complete. The first
# call starts watching the promise; later calls (wait_for_function polls) read the result.
READINESS = """() => {
  const pending = [...document.images].filter(img => !img.complete).map(img => img.src);
  const wantsMathJax = !!document.querySelector('script[src*="mathjax" i]');
  const startup = window.MathJax && MathJax.startup && MathJax.startup.promise;
  let mathjax = 'absent';
  if (startup) {
    if (!window.__attentionTypeset) {
      window.__attentionTypeset = 'typesetting';
      startup
        .then(() => new Promise(resolve => requestAnimationFrame(() => resolve())))
        .then(() => document.fonts.ready)
        .then(() => { window.__attentionTypeset = 'done'; },
              err => { window.__attentionTypeset = 'failed: ' + err; });
    }
    mathjax = window.__attentionTypeset;
  } else if (wantsMathJax) {
    mathjax = 'script present, not started';
  }
  const ready = (mathjax === 'absent' || mathjax === 'done') && pending.length === 0;
  return {ready, mathjax, pending_images: pending};
}"""
READY = f"() => ({READINESS})().ready"
READY_TIMEOUT_MS = 120_000  # generous: nothing waited for depends on the network

WAIT_FOR_MATHJAX = """async () => {
  const blocks = document.querySelectorAll('div.math, span.math');
  if (blocks.length === 0) return 0;
  for (let i = 0; i < 600 && !(window.MathJax && MathJax.startup && MathJax.startup.promise); i++)
    await new Promise(r => setTimeout(r, 50));
  if (!(window.MathJax && MathJax.startup && MathJax.startup.promise)) return -1;
  await MathJax.startup.promise;
  return blocks.length;
}"""

UNTYPESET_MATH = """() => Array.from(document.querySelectorAll('div.math, span.math'))
  .filter(el => !el.querySelector('mjx-container'))
  .map(el => el.textContent.trim().slice(0, 80))"""

# the reader-visible prose: everything but code, scripts and the typeset formulas themselves
VISIBLE_PROSE = """() => {
  const clone = document.body.cloneNode(true);
  clone.querySelectorAll('pre, code, script, style, template, mjx-container, .highlight, [hidden]')
       .forEach(el => el.remove());
  return clone.textContent;
}"""

# Every code block of the article as the reader sees it (a block inside a closed toggle has
# no box and is skipped): its longest line, the widths it needs and has, its text size.
CODE_BLOCKS = """() => Array.from(document.querySelectorAll('article.bd-article pre'))
  .filter(pre => pre.getClientRects().length > 0)
  .map(pre => {
    const lines = pre.textContent.split('\\n');
    const longest = lines.reduce((a, b) => (b.length > a.length ? b : a), '');
    return {
      longest: longest.slice(0, 60), chars: longest.length,
      scrollWidth: pre.scrollWidth, clientWidth: pre.clientWidth,
      fontPx: parseFloat(getComputedStyle(pre).fontSize),
    };
  })"""
MIN_CODE_FONT_PX = 12  # book/_static/editions.css: code shrinks to fit 88 columns, not below

# What a reader must never see: output a cell wrote to stderr (myst-nb marks it .stderr),
# a traceback, a warning, or a path of the machine that built the page. Searched in the
# cell outputs (texts, not the code that produced them) and, for the unmistakable ones, in
# the whole visible page.
STDERR_OUTPUTS = """() => Array.from(document.querySelectorAll(
    'div.cell_output .stderr, div.cell_output .traceback, div.output.stderr, div.output.traceback'))
  .map(el => el.textContent.trim().slice(0, 160))"""
CELL_OUTPUT_TEXT = """() => Array.from(document.querySelectorAll('div.cell_output'))
  .map(el => el.textContent).join('\\n')"""
LEAKS_IN_OUTPUTS = re.compile(
    r"Traceback|\b[A-Z]\w*Warning\b|warnings\.warn|/root/|/home/|/work/|/tmp/|site-packages"
    r"|dist-packages|\.venv/"
)
LEAKS_ANYWHERE = re.compile(r"Traceback \(most recent call last\)|site-packages|/root/")
# MyST that reached the reader unparsed, e.g. {eq}`ch1-average-pool` in a code cell or a
# literalinclude (book/_ext/code_equation_refs.py turns those into equation numbers)
RAW_MYST_ROLE = re.compile(r"\{(?:eq|cite(?::[a-z]+)?|term|doc|numref|ref|math)\}`")

# Figures per code cell: a cell whose code builds a figure (plt.subplots, plt.figure,
# show_heatmaps) shows at least as many images as it builds figures. A figure built but
# never displayed (a bare expression mid-cell) is one the prose below may discuss unseen.
FIGURES_PER_CELL = """() => Array.from(document.querySelectorAll('div.cell'))
  .filter(cell => cell.querySelector('div.cell_input'))
  .map(cell => ({
    code: cell.querySelector('div.cell_input').textContent,
    images: cell.querySelectorAll('div.cell_output img').length,
  }))"""
BUILDS_A_FIGURE = re.compile(r"\b(?:plt\.subplots|plt\.figure|show_heatmaps)\(")

BROKEN_IMAGES = """() => Array.from(document.images)
  .filter(img => !(img.complete && img.naturalWidth > 0))
  .map(img => img.getAttribute('src'))"""


# ----------------------------------------------------------------------------------------
# every page of the TOC


@pytest.mark.parametrize("edition", EDITIONS, ids=EDITION_IDS)
@pytest.mark.parametrize("page", PAGES)
def test_page_renders_offline_with_math_images_and_no_errors(visit, edition, page):
    page_name = edition + page
    response = visit.goto(f"{page_name}.html")
    assert response is not None and response.status == 200, (
        f"{page_name}.html: HTTP {response and response.status}"
    )

    blocks = visit.page.evaluate(WAIT_FOR_MATHJAX)
    assert blocks != -1, (
        f"{page_name}: the page has math but MathJax never started (is it self-hosted?)"
    )
    untypeset = visit.page.evaluate(UNTYPESET_MATH)
    assert not untypeset, (
        f"{page_name}: {len(untypeset)} math blocks not typeset by MathJax, e.g. {untypeset[:3]}"
    )

    prose = visit.page.evaluate(VISIBLE_PROSE)
    for raw in ("$$", "\\[", "\\begin{"):
        at = prose.find(raw)
        assert at < 0, (
            f"{page_name}: raw TeX {raw!r} left in the visible text: ...{prose[max(0, at - 60) : at + 60]!r}..."
        )

    stderr = visit.page.evaluate(STDERR_OUTPUTS)
    assert not stderr, f"{page_name}: {len(stderr)} stderr/traceback outputs, e.g. {stderr[:3]}"
    outputs = visit.page.evaluate(CELL_OUTPUT_TEXT)
    leak = LEAKS_IN_OUTPUTS.search(outputs)
    assert leak is None, (
        f"{page_name}: a cell output shows {leak.group()!r}: "
        f"...{outputs[max(0, leak.start() - 100) : leak.end() + 100]!r}..."
    )
    text = visit.page.evaluate("() => document.body.innerText")
    leak = LEAKS_ANYWHERE.search(text)
    assert leak is None, (
        f"{page_name}: the page shows {leak.group()!r}: "
        f"...{text[max(0, leak.start() - 100) : leak.end() + 100]!r}..."
    )
    raw = RAW_MYST_ROLE.search(text)
    assert raw is None, (
        f"{page_name}: a MyST role shown raw, {raw.group()!r}: "
        f"...{text[max(0, raw.start() - 100) : raw.end() + 100]!r}..."
    )

    broken = visit.page.evaluate(BROKEN_IMAGES)
    assert not broken, f"{page_name}: images that did not load: {broken}"
    if page in CHAPTERS:  # the picture a reviewer looks at, taken once the math is typeset
        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / f"{edition.replace('/', '-')}{Path(page).name}.png"
        visit.page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000, f"{page_name}: the screenshot {shot} is blank"
    assert not visit.external, f"{page_name}: requests left the site: {visit.external}"
    assert not visit.bad_local, f"{page_name}: local resources missing: {visit.bad_local}"
    assert not visit.console_errors, f"{page_name}: console errors: {visit.console_errors}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_links_its_exercise_and_offers_its_notebook(visit, chapter):
    visit.goto(f"{chapter}.html")
    name = Path(chapter).name
    exercise_links = visit.page.locator(f"article a[href$='exercises/{name}.html']")
    assert exercise_links.count() > 0, f"{chapter}: no link to its exercise page exercises/{name}"

    download = visit.page.locator(f"a[href$='_sources/{chapter}.ipynb']")
    assert download.count() > 0, f"{chapter}: the page offers no download of {name}.ipynb"
    notebook = visit.context.request.get(f"{visit.base}/_sources/{chapter}.ipynb")
    assert notebook.status == 200 and b'"cells"' in notebook.body()


@pytest.mark.parametrize("edition", EDITIONS, ids=EDITION_IDS)
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_figure_a_cell_builds_is_on_the_page(visit, edition, chapter):
    visit.goto(f"{edition}{chapter}.html")
    cells = visit.page.evaluate(FIGURES_PER_CELL)
    assert cells, f"{chapter}: no code cells found on the page"
    unseen = [
        (cell["code"].strip().splitlines()[0][:60], built, cell["images"])
        for cell in cells
        if (built := len(BUILDS_A_FIGURE.findall(cell["code"]))) > cell["images"]
    ]
    assert not unseen, (
        f"{chapter}: cells that build more figures than they show "
        f"(first line, figures built, images shown): {unseen}"
    )


@pytest.mark.parametrize(
    "viewport",
    [(1280, 800), (1440, 900), (1920, 1080)],
    ids=lambda size: f"{size[0]}x{size[1]}",
)
@pytest.mark.parametrize("edition", EDITIONS, ids=EDITION_IDS)
@pytest.mark.parametrize("page", PAGES)
def test_every_code_line_is_shown_whole(visit, page, edition, viewport):
    # a code block whose longest line is cut (a horizontal scroll bar hides its end) at a
    # laptop's 1280-pixel window and at wider ones. The notebooks and the solutions shown by
    # literalinclude are formatted to 88 columns (book/ruff.toml, solutions/ruff.toml); the
    # code's text size follows its column's width down to 12 px so that 88 columns fit, and
    # what a cell prints wraps (book/_static/editions.css).
    width, height = viewport
    visit.page.set_viewport_size({"width": width, "height": height})
    visit.goto(f"{edition}{page}.html", settle=False)
    visit.page.evaluate("() => document.fonts.ready.then(() => true)")
    blocks = visit.page.evaluate(CODE_BLOCKS)
    cut = [b for b in blocks if b["clientWidth"] == 0 or b["scrollWidth"] > b["clientWidth"]]
    assert not cut, (
        f"{edition}{page} at {width} px: {len(cut)} of {len(blocks)} code blocks hide the end "
        f"of their longest line (characters, width needed > shown, text px): "
        + "; ".join(
            f"{b['chars']} chars, {b['scrollWidth']} > {b['clientWidth']} px at "
            f"{b['fontPx']:.1f} px: {b['longest']!r}"
            for b in cut[:4]
        )
    )
    small = sorted({round(b["fontPx"], 2) for b in blocks if b["fontPx"] < MIN_CODE_FONT_PX})
    assert not small, (
        f"{edition}{page} at {width} px: code text smaller than {MIN_CODE_FONT_PX} px: {small}"
    )


@pytest.mark.parametrize("edition", EDITIONS, ids=EDITION_IDS)
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_exercise_page_offers_the_released_zip_and_notebook(visit, edition, assignment):
    page = f"book/exercises/{assignment}"
    if page not in PAGES:
        pytest.fail(f"{page} is not in _toc.yml", pytrace=False)
    visit.goto(f"{edition}{page}.html")
    for suffix, magic in ((f"{assignment}.zip", b"PK\x03\x04"), (f"{assignment}.ipynb", b"{")):
        links = visit.page.locator(f"a.download[href$='/{suffix}']")
        assert links.count() > 0, f"{page}: no download link for {suffix}"
        href = links.first.get_attribute("href")
        body = visit.context.request.get(f"{visit.base}/{edition}book/exercises/{href}").body()
        assert body.startswith(magic), f"{page}: {href} is not a {suffix.rsplit('.', 1)[1]} file"
    assert not visit.external


def test_search_finds_nadaraya_offline(visit):
    visit.goto("search.html?q=Nadaraya")
    results = visit.page.locator("#search-results ul.search li")
    results.first.wait_for(timeout=15_000)
    hrefs = [
        a.get_attribute("href") for a in visit.page.locator("#search-results ul.search li a").all()
    ]
    assert any("ch1_pooling" in (h or "") for h in hrefs), (
        f"search for Nadaraya did not list chapter 1: {hrefs}"
    )
    assert not visit.external, f"search made requests outside the site: {visit.external}"
    assert not visit.console_errors, f"search page console errors: {visit.console_errors}"


def search_results(visit, query: str) -> list[str]:
    """The result links of the search page for ``query``, typed into its search box."""
    # generous waits: a loaded machine (CI runs two pytest workers beside other builds)
    # takes seconds to load the index and rank it; a wrong result still fails at once below
    field = visit.page.locator("input[name='q']:visible").first
    field.wait_for(timeout=60_000)
    field.fill(query)
    field.press("Enter")
    links = visit.page.locator("#search-results ul.search li a")
    links.first.wait_for(timeout=60_000)
    return [a.get_attribute("href") or "" for a in links.all()]


# Chinese terms (book/_ext/editions/search.py segments the index with terminology.tsv as jieba's
# dictionary) and a chapter that uses each: without jieba the index holds no Chinese word
@pytest.mark.parametrize(
    "term, chapter",
    [
        ("暂退法", "ch5_multihead"),
        ("束搜索", "ch6_transformer"),
        ("多头注意力", "ch5_multihead"),
        ("标签平滑", "ch6_transformer"),
        ("池化", "ch1_pooling"),
    ],
)
def test_chinese_search_finds_the_chapters_that_use_a_term(visit, term, chapter):
    visit.goto("zh/search.html", settle=False)
    hrefs = search_results(visit, term)
    assert any(f"book/{chapter}.html" in h for h in hrefs), (
        f"searching the Chinese edition for {term} did not list {chapter}: {hrefs}"
    )
    assert all("/zh/" in visit.page.url and not h.startswith("http") for h in hrefs)
    assert not visit.external and not visit.console_errors, (visit.external, visit.console_errors)


def test_toc_lists_every_chapter_and_exercise():
    for name in ASSIGNMENTS:
        assert f"book/{name}" in PAGES and f"book/exercises/{name}" in PAGES


# ----------------------------------------------------------------------------------------
# the two editions side by side

# What must be the same on a page in both editions: display equations, their numbers,
# citations (links into the bibliography), figures in cell outputs, and inline formulas.
SAME_IN_BOTH = """() => ({
  display_math: document.querySelectorAll('article div.math').length,
  equation_numbers: document.querySelectorAll('article span.eqno').length,
  citations: Array.from(document.querySelectorAll('article a[href*="references.html#"]'))
    .filter(a => !a.closest('.bibliography, dl.citation')).length,
  figures: document.querySelectorAll('article div.cell_output img').length,
  inline_math: document.querySelectorAll('article span.math').length,
})"""
OUTPUT_IMAGES = """() => Array.from(document.querySelectorAll('article div.cell_output img'))
  .map(img => img.getAttribute('src').split('/').pop())"""
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.mark.parametrize("page", PAGES)
def test_both_editions_have_the_same_equations_citations_and_figures(visit, page):
    visit.goto(f"{page}.html")
    english = visit.page.evaluate(SAME_IN_BOTH)
    visit.goto(f"zh/{page}.html")
    chinese = visit.page.evaluate(SAME_IN_BOTH)
    assert chinese == english, f"{page}: English {english}, Chinese {chinese}"
    lang = visit.page.evaluate("() => document.documentElement.lang")
    assert lang == "zh-CN", f"zh/{page}: <html lang={lang!r}>"
    article = visit.page.evaluate("() => document.querySelector('article').innerText")
    assert len(CJK.findall(article)) > 20, f"zh/{page}: the article has no Chinese text"


@pytest.mark.parametrize("page", PAGES)
def test_the_switch_leads_to_the_same_page_in_the_other_edition_and_back(visit, page):
    visit.goto(f"{page}.html", settle=False)
    for there, back in ((f"zh/{page}", page), (page, f"zh/{page}")):
        link = visit.page.locator("a.edition-switch")
        assert link.count() == 1, f"{back}: {link.count()} language switches"
        response = visit.page.goto(
            f"{visit.page.url.rsplit('/', 1)[0]}/{link.get_attribute('href')}", wait_until="load"
        )
        assert response is not None and response.status == 200
        assert visit.page.url == f"{visit.base}/{there}.html", (back, visit.page.url)
    assert not visit.external and not visit.bad_local


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_chinese_figures_are_their_own_renderings(visit, chapter):
    visit.goto(f"{chapter}.html", settle=False)
    english = visit.page.evaluate(OUTPUT_IMAGES)
    visit.goto(f"zh/{chapter}.html", settle=False)
    chinese = visit.page.evaluate(OUTPUT_IMAGES)
    assert len(chinese) == len(english) > 0
    # every figure of the book has words (titles, axis labels), so none is shared
    shared = set(english) & set(chinese)
    assert not shared, f"zh/{chapter}: {len(shared)} figures identical to the English ones"


@pytest.mark.parametrize("page", ["book/preface", *CHAPTERS])
def test_chinese_text_is_drawn_in_a_cjk_font(visit, page):
    """Chromium reports the fonts that drew a node's text (DevTools CSS.getPlatformFontsForNode):
    the Chinese of a paragraph must come from a CJK font, not from a fallback drawing boxes."""
    visit.goto(f"zh/{page}.html")
    found = visit.page.evaluate(
        """() => {
          const p = Array.from(document.querySelectorAll('article p'))
            .find(el => /[\u4e00-\u9fff]{4}/.test(el.textContent));
          if (!p) return false;
          p.id = 'cjk-probe';
          return true;
        }"""
    )
    assert found, f"zh/{page}: no paragraph of Chinese text"
    cdp = visit.context.new_cdp_session(visit.page)
    root = cdp.send("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": "#cjk-probe"})["nodeId"]
    cdp.send("CSS.enable")
    fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    families = {f["familyName"]: f["glyphCount"] for f in fonts}
    cjk = {name: n for name, n in families.items() if CJK_FONTS.search(name)}
    assert cjk, f"zh/{page}: the Chinese was drawn with {families}, no CJK font"


# the CJK fonts book/_static/editions.css names (WenQuanYi Micro Hei is what make installs)
CJK_FONTS = re.compile(r"WenQuanYi|Noto Sans CJK|Source Han|PingFang|YaHei", re.IGNORECASE)


# The texts the theme writes around a page (book/_ext/editions/__init__.py, locale/zh_CN/LC_MESSAGES/
# sphinx.po and booktheme.po): the header's tooltips (Bootstrap moves a title into
# data-bs-original-title once the page runs), the footer, the navigation around the article.
THEME_TEXTS = """() => {
  const tipped = '[title], [data-bs-original-title]';
  const scopes = '.bd-header, .bd-header-article, .prev-next-area, footer';
  const tooltips = Array.from(document.querySelectorAll(scopes))
    .flatMap(scope => Array.from(scope.querySelectorAll(tipped)))
    .filter(el => !el.classList.contains('edition-switch'))
    .map(el => el.getAttribute('data-bs-original-title') || el.getAttribute('title'));
  const frame = Array.from(document.querySelectorAll(
      '.bd-header, .bd-header-article, .bd-sidebar-secondary, .prev-next-area, footer'))
    .map(el => el.innerText).join('\\n');
  const footer = Array.from(document.querySelectorAll('footer')).map(el => el.innerText).join(' ');
  return {tooltips, frame, footer};
}"""
# Taiwan usage and Traditional characters that sphinx-book-theme's zh_CN catalog and
# pydata-sphinx-theme's zh catalog put on pages: none may reach the mainland edition
TAIWAN = re.compile(r"列印|搜尋|檔案|網頁|設定|原始碼|程式|資料|頁面|切換|導覽|側邊")
ENGLISH_FRAME = re.compile(r"\b(?:By|Copyright|Powered|Contents|Toggle|Download|Search|Print)\b")


@pytest.mark.parametrize("page", ["book/ch1_pooling", "book/exercises/ch2_soft_hard"])
def test_the_chinese_frame_tooltips_and_footer_are_mainland_chinese(visit, page):
    visit.goto(f"zh/{page}.html", settle=False)
    texts = visit.page.evaluate(THEME_TEXTS)
    assert len(texts["tooltips"]) >= 4, texts["tooltips"]  # download, PDF, full screen, ...
    latin = [t for t in texts["tooltips"] if not CJK.search(t or "")]
    assert not latin, f"zh/{page}: tooltips not in Chinese: {latin}"
    everything = texts["frame"] + "\n" + "\n".join(texts["tooltips"])
    taiwan = TAIWAN.findall(everything)
    assert not taiwan, f"zh/{page}: Taiwan usage or Traditional characters: {taiwan}"
    english = ENGLISH_FRAME.findall(texts["frame"])
    assert not english, f"zh/{page}: theme texts left in English: {english}"
    assert "作者" in texts["footer"] and "版权所有" in texts["footer"], texts["footer"]
    visit.goto(f"{page}.html", settle=False)  # the English edition keeps its English frame
    english_tooltips = visit.page.evaluate(THEME_TEXTS)["tooltips"]
    assert "Print to PDF" in english_tooltips and not any(CJK.search(t) for t in english_tooltips)
