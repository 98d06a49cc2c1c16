"""The course sites in a real browser (``make check-site``, part of ``make check-course``).

Headless Chromium from the npm package ``@sparticuz/chromium`` (its ``executablePath()`` unpacks
the browser to a temporary folder; package.json pins it, ``npm ci`` installs it), driven by
playwright's Python API. Each page of the teacher and the student site is opened from disk with
every network request refused, so a page that needed the web to render would show it here. On
every notebook page: the display maths is typeset by MathJax (output elements, no TeX error, no
raw ``$$`` left in the text), every image has loaded with a non-zero size, the Key equations'
links land on their anchors; on the student site no line of a solution, a model answer or a
hidden test appears. Screenshots of three pages go to build/screenshots/.
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
    yield page
    context.close()


def screenshot(page, name: str, heading: str | None = None):
    """The page's window, scrolled to ``heading`` (below the site's fixed menu), into build/screenshots."""
    if heading:
        page.locator("h1, h2, h3", has_text=heading).first.evaluate(
            "h => window.scrollTo(0, h.getBoundingClientRect().top + window.scrollY - 240)")
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
