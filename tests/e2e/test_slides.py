"""The slide decks of `make slides` render and advance with no internet connection.

Each deck in build/slides/ is opened from disk (file://) in Chromium with every request that would
leave the machine refused, and must: make no such request, load every script, style, font and image
it asks for, raise no script error, start reveal.js and MathJax, show its plots as images, and move
to another slide on ArrowRight.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from e2e_support import ROOT, SCREENSHOTS, SLIDES, block_non_loopback

LESSONS = sorted((ROOT / "notebooks").glob("*.ipynb"))

# reveal.js is loaded as an AMD module by require.js: ask require for the instance.
REVEAL_JS = """() => new Promise(done => require(['assets/reveal.js/dist/reveal.js'],
    R => done({ready: R.isReady(), indices: R.getIndices(), total: R.getTotalSlides()})))"""
MATHJAX_IDLE_JS = """() => !!window.MathJax && MathJax.isReady === true
                           && MathJax.Hub.queue.pending === 0 && !MathJax.Hub.queue.running"""
IMAGES_JS = """() => [...document.querySelectorAll('.reveal .slides img')]
                       .map(i => i.complete && i.naturalWidth > 0)"""
FAILED_FONTS_JS = "() => [...document.fonts].filter(f => f.status === 'error').map(f => f.family)"


@pytest.fixture(scope="session")
def decks():
    """Build the decks unless `make slides` has just done so (make e2e depends on it)."""
    missing = [p for p in LESSONS if not (SLIDES / f"{p.stem}.slides.html").exists()
               or (SLIDES / f"{p.stem}.slides.html").stat().st_mtime < p.stat().st_mtime]
    if missing:
        subprocess.run([sys.executable, str(ROOT / "tools" / "build_slides.py"), "--out", str(SLIDES)],
                       check=True)
    return SLIDES


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_deck_renders_and_advances_offline(lesson, decks, browser):
    deck = decks / f"{lesson.stem}.slides.html"
    assert deck.exists(), f"{deck} was not built"
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    refused = block_non_loopback(ctx)
    page = ctx.new_page()
    failed, errors = [], []
    page.on("requestfailed", lambda r: failed.append(f"{r.url[:120]} ({r.failure})"))
    page.on("response", lambda r: r.status >= 400 and failed.append(f"{r.url[:120]} ({r.status})"))
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(deck.as_uri())
        page.wait_for_selector(".reveal.ready", timeout=30_000)
        state = page.evaluate(REVEAL_JS)
        assert state["ready"] and state["total"] >= 2, f"{deck.name}: reveal.js state {state}"
        page.wait_for_function(MATHJAX_IDLE_JS, timeout=30_000)
        images = page.evaluate(IMAGES_JS)
        assert images and all(images), f"{deck.name}: plots as images, loaded: {images}"
        page.keyboard.press("ArrowRight")
        page.wait_for_timeout(300)
        moved = page.evaluate(REVEAL_JS)["indices"]
        assert moved != state["indices"], f"{deck.name}: ArrowRight stayed on slide {moved}"
        page.wait_for_timeout(900)              # the slide transition, for the screenshot
        page.wait_for_function(MATHJAX_IDLE_JS, timeout=30_000)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"slides__{lesson.stem}.png"))
        assert not refused, f"{deck.name}: asked for the internet: {refused}"
        assert not failed, f"{deck.name}: requests that failed: {failed}"
        assert not errors, f"{deck.name}: script errors: {errors}"
        fonts = page.evaluate(FAILED_FONTS_JS)
        assert not fonts, f"{deck.name}: fonts that failed to load: {fonts}"
    finally:
        ctx.close()
