"""mkdocs hooks of the course sites (scripts/course.py `site` names this file in each site's mkdocs.yml).

mkdocs-jupyter builds a notebook page's table of contents from a Markdown export of the notebook,
slugified by python-markdown, while the page's headings get their ids from nbconvert's HTML. The
two disagree on a heading with inline code (``5. A few GRPO steps with `oar_lite.train` ``: the
table of contents links ``#5-a-few-grpo-steps-with``, the heading's id is
``5-a-few-grpo-steps-with-oar_litetrain``) and the contents' entry loses the code's text. Here
every page's table of contents is rebuilt from the headings of its own HTML, so each entry links
an id that exists and reads as the heading does.
"""
from __future__ import annotations

import html
import html.parser

from mkdocs.structure.toc import get_toc


class _Headings(html.parser.HTMLParser):
    """``[(level, id, text)]`` of the h1-h6 with an id, in page order; the text without the
    heading's own anchor link (nbconvert's pilcrow)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[int, str, str]] = []
        self._open: tuple[int, str] | None = None
        self._text: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if self._open is None and len(tag) == 2 and tag[0] == "h" and tag[1] in "123456" and attrs.get("id"):
            self._open, self._text = (int(tag[1]), attrs["id"]), []
        elif self._open is not None and tag == "a" and "anchor-link" in (attrs.get("class") or "").split():
            self._skip += 1
        elif self._open is not None and self._skip and tag == "a":
            self._skip += 1

    def handle_endtag(self, tag):
        if self._open is not None and tag == "a" and self._skip:
            self._skip -= 1
        elif self._open is not None and tag == f"h{self._open[0]}":
            text = " ".join("".join(self._text).split())
            self.found.append((self._open[0], self._open[1], text))
            self._open = None

    def handle_data(self, data):
        if self._open is not None and not self._skip:
            self._text.append(data)


def headings(page_html: str) -> list[tuple[int, str, str]]:
    parser = _Headings()
    parser.feed(page_html)
    return parser.found


def toc_tokens(page_html: str, depth: int = 3) -> list[dict]:
    """python-markdown's ``toc_tokens`` shape (``level, id, name, children``) from the headings
    of ``page_html`` down to ``depth``, nested by level."""
    roots: list[dict] = []
    stack: list[dict] = []
    for level, anchor, text in headings(page_html):
        if level > depth or not text:
            continue
        token = {"level": level, "id": anchor, "name": html.escape(text), "children": []}
        while stack and stack[-1]["level"] >= level:
            stack.pop()
        (stack[-1]["children"] if stack else roots).append(token)
        stack.append(token)
    return roots


def on_page_content(html_text, page, config, files):
    if page.file.src_uri.endswith(".ipynb"):
        page.toc = get_toc(toc_tokens(html_text))
    return html_text
