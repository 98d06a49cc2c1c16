"""The course sites in a real browser (``make check-site``, part of ``make check-course``).

Headless Chromium from the npm package ``@sparticuz/chromium`` (its ``executablePath()`` unpacks
the browser to a temporary folder; package.json pins it, ``npm ci`` installs it), driven by
playwright's Python API. Each page of the teacher and the student site is opened from disk with
every network request refused, so a page that needed the web to render would show it here. On
every notebook page: the display maths is typeset by MathJax (output elements, no TeX error, no
raw ``$$`` left in the text), every image has loaded with a non-zero size, the Key equations'
links land on their anchors; on the student site no line of a solution, a model answer or a
hidden test appears. On every page of both sites: no JavaScript error and no console error.
Reading: every table-of-contents link lands on its heading, below the fixed header, and reads as
the heading does; navigation titles are plain text; the built-in search finds pages from the file
system (no server, no network); a table wider than the page scrolls inside it with its first
column (the row's key) held in place, so 06's regimes table shows the regime and its verdict side
by side at 1280 px. Screenshots go to build/screenshots/.
"""
from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "build" / "site"
SHOTS = ROOT / "build" / "screenshots"
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
# {(site, page): the heading to scroll to first}; the third, teacher-01_grpo_basics.png, shows 01's
# Key equations (test_the_key_equations_are_typeset_at_the_top)
SCREENSHOTS = {("teacher", "index"): None, ("student", "notebooks/04_bilevel_reshaping"): "5. Sliders"}

spec = importlib.util.spec_from_file_location("course", ROOT / "scripts" / "course.py")
course = importlib.util.module_from_spec(spec)
spec.loader.exec_module(course)
NOTEBOOKS = course.notebooks()


def chromium_path() -> str:
    """The browser binary @sparticuz/chromium unpacks (to a temporary folder)."""
    if not (ROOT / "node_modules" / "@sparticuz" / "chromium").is_dir():
        pytest.fail("node_modules/@sparticuz/chromium is missing: run `npm ci` (make check-site does)")
    proc = subprocess.run(["node", "--input-type=module", "-e",
                           "import chromium from '@sparticuz/chromium'; console.log(await chromium.executablePath());"],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    for kind in ("teacher", "student"):
        if not (SITE / kind / "index.html").exists():
            pytest.fail(f"{SITE / kind}/index.html is missing: run `make site` first")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=chromium_path(), args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    outside = []

    def refuse(route):
        if route.request.url.startswith(("http://", "https://")):
            outside.append(route.request.url)
            return route.abort()
        return route.continue_()

    context.route("**/*", refuse)
    page = context.new_page()
    page.outside = outside
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(f"uncaught: {error}"))
    page.on("console", lambda message: page.errors.append(f"console.{message.type}: {message.text}")
            if message.type == "error" else None)
    yield page
    context.close()


def screenshot(page, name: str, heading: str | None = None):
    """The page's window, scrolled to ``heading`` (below the site's fixed header), into build/screenshots."""
    if heading:
        page.locator("h1, h2, h3", has_text=heading).first.evaluate(
            "h => window.scrollTo(0, h.getBoundingClientRect().top + window.scrollY"
            " - document.querySelector('.md-header').getBoundingClientRect().bottom - 16)")
    page.wait_for_timeout(400)          # the header's title swaps with a transition on scrolling
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))


def open_page(page, path: Path):
    page.goto(path.as_uri(), wait_until="load")
    if page.evaluate("typeof window.MathJax === 'object' && !!window.MathJax.startup"):
        page.evaluate("() => window.MathJax.startup.promise")
    return page


MATHS = """() => {
  const prose = [...document.querySelectorAll('.jp-RenderedMarkdown, .jp-RenderedHTMLCommon')]
    .map(e => { const c = e.cloneNode(true); c.querySelectorAll('pre, code, mjx-container').forEach(x => x.remove());
                return c.innerText; }).join('\\n');
  return {display: document.querySelectorAll('mjx-container[display="true"]').length,
          all: document.querySelectorAll('mjx-container').length,
          errors: document.querySelectorAll('mjx-merror').length,
          raw: prose.includes('$$')};
}"""
IMAGES = """() => [...document.images].map(i => ({src: i.src.slice(0, 80), complete: i.complete,
                                             width: i.naturalWidth, shown: i.getBoundingClientRect().width}))"""
ANCHORS = """() => [...document.querySelectorAll('a[href^="#eq-"]')].map(a => [a.getAttribute('href'),
                                                                       !!document.getElementById(a.getAttribute('href').slice(1))])"""


def _displayed_maths(path: Path) -> int:
    nb = nbformat.read(path, as_version=4)
    return sum(c.source.count("$$") // 2 for c in nb.cells if c.cell_type == "markdown")


@pytest.mark.parametrize("kind", ["teacher", "student"])
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_page_renders_offline(page, kind, path):
    html = SITE / kind / "notebooks" / f"{path.stem}.html"
    open_page(page, html)
    if (kind, f"notebooks/{path.stem}") in SCREENSHOTS:      # before the checks, so a failing page is seen too
        screenshot(page, f"{kind}-{path.stem}", SCREENSHOTS[(kind, f"notebooks/{path.stem}")])
    maths = page.evaluate(MATHS)
    expected = _displayed_maths(path)
    assert maths["errors"] == 0, f"{kind}/{html.name}: {maths['errors']} TeX errors"
    assert not maths["raw"], f"{kind}/{html.name}: raw $$ left in the text (MathJax did not typeset it)"
    if expected:
        assert maths["display"] >= 1, f"{kind}/{html.name}: no typeset display maths, the source has {expected}"
    images = page.evaluate(IMAGES)
    broken = [i for i in images if not (i["complete"] and i["width"] > 0 and i["shown"] > 0)]
    assert images and not broken, f"{kind}/{html.name}: images not loaded or drawn at zero size: {broken[:5]}"
    anchors = page.evaluate(ANCHORS)
    assert all(found for _, found in anchors), f"{kind}/{html.name}: Key equations links without their anchor: {anchors}"
    if kind == "student":
        text = page.evaluate("() => document.body.innerText")
        shown = [line for line in course.solution_lines(nbformat.read(path, as_version=4)) if line in text]
        assert "BEGIN SOLUTION" not in text and "Model answer." not in text and not shown, (
            f"student/{html.name} shows solutions: {shown[:5]}")
    assert not page.outside, f"{kind}/{html.name} asked the network for {page.outside[:5]}"
    assert not page.errors, f"{kind}/{html.name}: {page.errors[:5]}"


@pytest.mark.parametrize("kind", ["teacher", "student"])
def test_index_renders_offline(page, kind):
    open_page(page, SITE / kind / "index.html")
    assert page.locator("h1").first.inner_text().startswith("oar-lite")
    links = page.evaluate("() => [...document.querySelectorAll('a[href^=\"notebooks/\"]')].length")
    assert links >= len(NOTEBOOKS)
    assert not page.outside, f"{kind}/index.html asked the network for {page.outside[:5]}"
    if (kind, "index") in SCREENSHOTS:
        screenshot(page, f"{kind}-index", SCREENSHOTS[(kind, "index")])


def test_the_key_equations_are_typeset_at_the_top(page):
    """The Key equations block of 01, the first thing after the title, is typeset maths."""
    open_page(page, SITE / "teacher" / "notebooks" / "01_grpo_basics.html")
    screenshot(page, "teacher-01_grpo_basics", "Key equations")
    block = page.evaluate("""() => { const h = [...document.querySelectorAll('h3')].find(e => e.innerText.startsWith('Key equations'));
                                     if (!h) return null; const cell = h.closest('.jp-Cell');
                                     return {maths: cell.querySelectorAll('mjx-container[display="true"]').length,
                                             links: cell.querySelectorAll('a[href^="#eq-"]').length}; }""")
    assert block is not None and block["maths"] >= 3 and block["links"] == block["maths"]


# ---- reading: console, tables of contents, navigation, search, wide tables --------------------

def site_pages(kind: str) -> list[Path]:
    return sorted(p for p in (SITE / kind).rglob("*.html") if "assets" not in p.relative_to(SITE / kind).parts)


PAGES = [(kind, page.relative_to(SITE / kind).as_posix()) for kind in ("teacher", "student")
         for page in (site_pages(kind) if (SITE / kind).is_dir() else [])]


@pytest.mark.parametrize("kind,name", PAGES, ids=[f"{k}-{n}" for k, n in PAGES])
def test_no_javascript_or_console_error(page, kind, name):
    open_page(page, SITE / kind / name)
    page.wait_for_timeout(200)           # the theme's scripts run after load (search, table wrapping)
    assert not page.errors, f"{kind}/{name}: {page.errors[:5]}"
    assert not page.outside, f"{kind}/{name} asked the network for {page.outside[:5]}"


TOC = """() => [...document.querySelectorAll('nav.md-nav--secondary a.md-nav__link')].map(a => a.getAttribute('href'))"""
LAND = r"""href => {
  const a = [...document.querySelectorAll('nav.md-nav--secondary a.md-nav__link')].find(l => l.getAttribute('href') === href);
  const target = document.getElementById(decodeURIComponent(href.slice(1)));
  if (!target) return {missing: true, label: a.innerText};
  window.scrollTo(0, 0);
  a.click();
  return new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => {
    const clone = target.cloneNode(true); clone.querySelectorAll('.anchor-link, .headerlink').forEach(x => x.remove());
    const box = target.getBoundingClientRect();
    done({missing: false, label: a.innerText.trim().replace(/\s+/g, ' '), heading: clone.textContent.trim().replace(/\s+/g, ' '),
          top: box.top, header: document.querySelector('.md-header').getBoundingClientRect().bottom,
          height: window.innerHeight, hash: location.hash,
          atEnd: window.scrollY + window.innerHeight >= document.documentElement.scrollHeight - 2});
  })));
}"""


@pytest.mark.parametrize("kind", ["teacher", "student"])
@pytest.mark.parametrize("name", [f"notebooks/{p.stem}.html" for p in NOTEBOOKS]
                         + ["index.html", "project.html", "docs/trl.html", "docs/oar-spec.html", "benchmarks/RESULTS.html"])
def test_table_of_contents_links_land_on_their_headings_below_the_header(page, kind, name):
    """Each link of the page's table of contents: its heading exists, the link reads as the heading
    (no code dropped, no raw Markdown), and clicking it brings the heading to the top of the
    window, below the fixed header (or into view where the page ends before)."""
    open_page(page, SITE / kind / name)
    links = page.evaluate(TOC)
    assert len(links) >= 2, f"{kind}/{name}: no table of contents"
    problems = []
    for href in links:
        got = page.evaluate(LAND, href)
        if got["missing"]:
            problems.append(f"{href} ({got['label']!r}): no element with that id")
            continue
        if got["label"] != got["heading"] or "`" in got["label"]:
            problems.append(f"{href}: the link reads {got['label']!r}, the heading {got['heading']!r}")
        below = got["header"] <= got["top"] < got["header"] + 80
        if not (below or (got["atEnd"] and got["header"] <= got["top"] < got["height"])):
            problems.append(f"{href}: the heading lands at {got['top']:.0f} px, the header ends at {got['header']:.0f} px")
    if (kind, name) == ("teacher", "notebooks/01_grpo_basics.html"):
        page.evaluate(LAND, next(h for h in links if h.startswith("#5-")))
        screenshot(page, "teacher-01-toc-link-with-code")
    assert not problems, f"{kind}/{name}:\n" + "\n".join(problems)


@pytest.mark.parametrize("kind", ["teacher", "student"])
def test_navigation_titles_are_plain_text(page, kind):
    open_page(page, SITE / kind / "index.html")
    titles = page.evaluate("() => [...document.querySelectorAll('.md-nav--primary > .md-nav__list > .md-nav__item > a.md-nav__link')]"
                           ".map(a => a.innerText.trim())")
    assert len([t for t in titles if t[:2].isdigit()]) == len(NOTEBOOKS), titles
    raw = [t for t in titles if any(mark in t for mark in ("`", "**", "](", "$"))]
    assert not raw, f"{kind}: navigation titles with raw Markdown: {raw}"
    assert any(t.startswith("07 ") and "OARGRPOTrainer" in t for t in titles), titles


@pytest.mark.parametrize("kind", ["teacher", "student"])
def test_search_works_from_the_file_system(page, kind):
    """The built-in search (Material's, its index inlined by the offline plugin, its worker run
    through the iframe-worker shim served from the site) finds the reshaping notebook."""
    open_page(page, SITE / kind / "index.html")
    page.locator(".md-search__input").first.click()
    # the worker builds the index first ("Initializing search"); a query typed before is not rerun
    page.wait_for_function("() => { const m = document.querySelector('.md-search-result__meta');"
                           " return m && m.innerText.trim() && !/initializing/i.test(m.innerText); }", timeout=30000)
    page.locator(".md-search__input").press_sequentially("mass preservation")     # the theme reads keyup events
    results = page.locator(".md-search-result__item")
    results.first.wait_for(timeout=15000)
    hrefs = page.evaluate("() => [...document.querySelectorAll('.md-search-result__item a')].map(a => a.getAttribute('href'))")
    assert any("04_bilevel_reshaping.html" in h for h in hrefs), hrefs
    if kind == "student":
        screenshot(page, "student-search")
    assert not page.errors and not page.outside, (page.errors[:5], page.outside[:5])


TABLES = """() => [...document.querySelectorAll('article table')].map((t, i) => {
  let box = t.parentElement;
  while (box && box.tagName !== 'ARTICLE' && !(['auto', 'scroll'].includes(getComputedStyle(box).overflowX) && box.scrollWidth > box.clientWidth + 1))
    box = box.parentElement;
  const scrolls = box && box.tagName !== 'ARTICLE';
  const article = t.closest('article').getBoundingClientRect();
  const head = [...t.rows[0].cells].map(c => c.innerText.trim());
  if (!scrolls) return {i, head, scrolls, fits: t.getBoundingClientRect().right <= article.right + 1};
  box.scrollLeft = box.scrollWidth;          // scrolled to the far end: the last column in view
  const frame = box.getBoundingClientRect();
  const rows = [...t.rows].map(r => ({first: r.cells[0].getBoundingClientRect(), last: r.cells[r.cells.length - 1].getBoundingClientRect(),
                                      sticky: getComputedStyle(r.cells[0]).position}));
  return {i, head, scrolls, inPage: frame.right <= article.right + 1,
          keyShown: rows.every(r => r.sticky === 'sticky' && r.first.left >= frame.left - 1 && r.first.right <= frame.right),
          lastShown: rows.every(r => r.last.right <= frame.right + 1 && r.last.left >= rows[0].first.right - 1)};
})"""


@pytest.mark.parametrize("kind", ["teacher", "student"])
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_wide_tables_are_readable_at_1280_px(page, kind, path):
    """Every table fits the page's column, or scrolls inside it: scrolled to its far end, its
    first column (the row's key) is still in view beside the last (06: the regime beside its
    verdict)."""
    open_page(page, SITE / kind / "notebooks" / f"{path.stem}.html")
    tables = page.evaluate(TABLES)
    bad = [t for t in tables if not (t["fits"] if not t["scrolls"] else (t["inPage"] and t["keyShown"] and t["lastShown"]))]
    assert not bad, f"{kind}/{path.stem}: tables not readable: {bad}"
    if path.stem.startswith("06"):
        regimes = [t for t in tables if t["head"][:1] == ["regime"] and "oracle credit" in t["head"]]
        assert regimes, f"06: the regimes table is gone: {[t['head'][:3] for t in tables]}"
        if kind == "teacher":
            page.locator("th", has_text="oracle credit").first.evaluate(
                "th => window.scrollTo(0, th.getBoundingClientRect().top + window.scrollY - 120)")
            screenshot(page, "teacher-06-regimes-table")
