"""The site in Chromium (make e2e-site): every page offline and whole, every pre-rendered widget
moved once, and the search in both languages.

Each page fails on: a request that leaves the loopback, a page error, an HTTP error or failed
request, a broken image, a MathJax error (or math left untypeset), a saved widget that did not
render. On each kernel-free widget, the first control is moved to its far end (End key, last
button, last option, checkbox clicked) and the image must become the frame rendered for that value
(tools/site/grid.py's arithmetic, from the manifest the build wrote), and load.
"""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from tools.site import grid

SITE = pathlib.Path(__file__).resolve().parents[2] / "build" / "site"

PAGES = sorted(str(p.relative_to(SITE)) for p in SITE.rglob("*.html")
               if p.parts[len(SITE.parts)] not in ("_static", "_sources")
               and p.name not in ("search.html", "genindex.html"))
LESSON = re.compile(r"notebooks/(zh/)?\d\d_\w+\.html")
MANIFEST = SITE / "_static" / "frames" / "manifest.js"
WIDGET_TIMEOUT_MS = 60_000
# query -> the lessons with the term in their title, which must be the first hits (in any order)
SEARCHES = {
    "层归一化": {"notebooks/zh/02_batchnorm_vs_layernorm.html", "notebooks/zh/03_layernorm_and_rmsnorm.html"},
    "残差连接": {"notebooks/01_residual_connections.html", "notebooks/zh/01_residual_connections.html"},
    "LayerNorm": {"notebooks/02_batchnorm_vs_layernorm.html", "notebooks/zh/02_batchnorm_vs_layernorm.html",
                  "notebooks/03_layernorm_and_rmsnorm.html", "notebooks/zh/03_layernorm_and_rmsnorm.html"},
}


def frames() -> dict:
    text = MANIFEST.read_text(encoding="utf-8")
    return json.loads(text[text.index("=") + 1:].strip().rstrip(";"))


def open_page(context, url):
    """Open ``url``; returns (page, problems): page errors, HTTP errors, failed requests."""
    page = context.new_page()
    problems = []
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    page.on("requestfailed", lambda r: problems.append(f"failed: {r.url} ({r.failure})"))
    page.goto(url, wait_until="load")
    return page, problems


def expected_move(entry: dict) -> tuple[str, int]:
    """How the test moves the first control, and the frame that must then show."""
    first = entry["controls"][0]
    positions = [c["start"] for c in entry["controls"]]
    last = len(first["values"]) - 1
    positions[0] = 0 if first["start"] == last else last
    key = "Home" if positions[0] == 0 else "End"
    return key, grid.frame_number(positions, [len(c["values"]) for c in entry["controls"]])


MOVE_JS = """([area, key]) => {
  const box = area.querySelector('.widget-interact') || area;
  const control = box.children[0];
  const handle = control.querySelector('.noUi-handle');
  if (handle) { handle.focus(); return 'key'; }
  const buttons = control.querySelectorAll('button');
  if (buttons.length) { buttons[key === 'Home' ? 0 : buttons.length - 1].click(); return 'clicked'; }
  const select = control.querySelector('select');
  if (select) { select.selectedIndex = key === 'Home' ? 0 : select.options.length - 1;
                select.dispatchEvent(new Event('change', {bubbles: true})); return 'selected'; }
  const box2 = control.querySelector('input[type=checkbox]');
  if (box2) { box2.click(); return 'clicked'; }
  return 'none';
}"""


@pytest.mark.parametrize("path", PAGES)
def test_page(server, context, path):
    page, problems = open_page(context, server + path)
    try:
        views = page.locator('script[type="application/vnd.jupyter.widget-view+json"]').count()
        if views:
            page.wait_for_selector("html[data-widgets-rendered]", state="attached",
                                   timeout=WIDGET_TIMEOUT_MS)
            unrendered = page.evaluate("""() => Array.from(document.querySelectorAll(
                'script[type="application/vnd.jupyter.widget-view+json"]')).filter(s => {
                  const a = s.previousElementSibling;
                  return !(a && a.classList.contains('widget-subarea') && a.querySelector('.jupyter-widgets'));
                }).length""")
            assert unrendered == 0, f"{path}: {unrendered} of {views} widgets did not render"
            if LESSON.fullmatch(path):         # every lesson widget moves without a kernel
                frameless = page.locator(".widget-subarea:not([data-normlib-frames]) > .widget-interact")
                assert frameless.count() == 0, f"{path}: {frameless.count()} widgets without frames"
        if page.locator(".math").count():
            page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
            page.evaluate("() => MathJax.startup.promise")
            assert page.locator("mjx-merror").count() == 0, f"{path}: MathJax errors"
            assert page.locator("mjx-container").count() > 0, f"{path}: math left untypeset"
        broken = page.evaluate("""() => Array.from(document.images)
            .filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src)""")
        assert not broken, f"{path}: broken images {broken}"

        manifest = frames()
        for area in page.locator("[data-normlib-frames]").all():
            folder = area.get_attribute("data-normlib-frames")
            entry = next(e for e in manifest.values() if e["folder"] == folder)
            key, frame = expected_move(entry)
            how = page.evaluate(MOVE_JS, [area.element_handle(), key])
            assert how != "none", f"{path}: {folder}: no control to move"
            if how == "key":
                page.keyboard.press(key)
            area.scroll_into_view_if_needed()
            page.wait_for_function("([a, n]) => a.getAttribute('data-normlib-frame') === n",
                                   arg=[area.element_handle(), str(frame)], timeout=10_000)
            img = area.locator("img").last
            src = img.get_attribute("src")
            assert re.search(rf"/_static/{re.escape(folder)}/{frame}\.png$", src), src
            page.wait_for_function("i => i.complete && i.naturalWidth > 0", arg=img.element_handle())
        assert not problems, f"{path}: " + "; ".join(problems)
        assert not context.refused, f"requests left the machine: {context.refused}"
    finally:
        page.close()


@pytest.mark.parametrize("query", SEARCHES)
def test_search(server, context, query):
    page, problems = open_page(context, server + f"search.html?q={query}")
    try:
        # Sphinx lists the hits one by one, then says "Search finished, found N pages ..." (or that
        # nothing matched)
        page.wait_for_function("() => /Search finished|did not match/.test(document.querySelector("
                               "'#search-results .search-summary')?.textContent || '')", timeout=60_000)
        hits = page.evaluate("""() => Array.from(document.querySelectorAll('#search-results li > a'))
            .map(a => new URL(a.href).pathname.replace(/^\\//, ''))""")
        first = SEARCHES[query]
        assert set(hits[:len(first)]) == first, f"{query}: first hits {hits[:len(first) + 2]}"
        assert not problems, "; ".join(problems)
        assert not context.refused, f"requests left the machine: {context.refused}"
    finally:
        page.close()
