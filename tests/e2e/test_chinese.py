"""The Chinese edition renders its Chinese: every notebook in notebooks/zh/ opened in JupyterLab, and
one Chinese slide deck opened offline, fail when a Chinese heading shows as empty boxes (no CJK font;
.ci/run installs Debian's fonts-noto-cjk). The notebooks are only opened, not run: their code and
outputs are the English notebooks' (make check-translations), which test_jupyterlab.py runs. So this
adds a few seconds per notebook to the browser test, not a second run of every lesson.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from e2e_support import (
    APP_READY_JS,
    CLOSE_ALL_JS,
    GLYPHS_JS,
    NOTEBOOKS,
    OPEN_JS,
    ROOT,
    SCREENSHOTS,
    SLIDES,
    block_non_loopback,
    glyph_problems,
    wait_until,
)

ZH = NOTEBOOKS / "zh"
ZH_PATHS = sorted(p for p in ZH.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
# The deck: a translated lesson with plots, formulas and a table (any translated lesson would do).
ZH_DECK = next((p for p in ZH_PATHS if p.name == "04_prenorm_postnorm_warmup.ipynb"),
               next((p for p in ZH_PATHS if p.parent == ZH), None))
OPEN_TIMEOUT_S = 90
HEADINGS = ".jp-Notebook .jp-RenderedMarkdown h1, .jp-Notebook .jp-RenderedMarkdown h2"


def _id(path):
    return path.relative_to(NOTEBOOKS).as_posix()


@pytest.fixture(scope="module")
def lab_page(lab, context):
    page = context.new_page()
    page.goto(lab.url(), timeout=OPEN_TIMEOUT_S * 1000)
    wait_until(page, APP_READY_JS, OPEN_TIMEOUT_S, "JupyterLab's start")
    yield page
    page.close()


@pytest.mark.parametrize("path", ZH_PATHS, ids=[_id(p) for p in ZH_PATHS])
def test_chinese_notebook_heading_renders(path, lab, context, lab_page):
    rel = _id(path)
    saved = path.read_bytes()
    try:
        lab_page.evaluate(OPEN_JS, rel)
        lab_page.wait_for_selector(".jp-Notebook .jp-RenderedMarkdown h1",
                                   timeout=OPEN_TIMEOUT_S * 1000)
        found = lab_page.evaluate(GLYPHS_JS, HEADINGS)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        lab_page.screenshot(path=str(SCREENSHOTS / (rel.removesuffix(".ipynb")
                                                    .replace("/", "__") + ".png")))
    finally:
        lab_page.evaluate(CLOSE_ALL_JS)
        lab.shutdown_kernels()
    problem = glyph_problems(found, rel)
    assert problem is None, problem
    assert not context.refused, f"{rel}: JupyterLab asked for the internet: {context.refused}"
    assert path.read_bytes() == saved, f"{rel}: the browser test changed the notebook on disk"


@pytest.fixture(scope="session")
def zh_deck():
    """The Chinese deck in build/slides/zh/, built unless it is newer than its notebook."""
    if ZH_DECK is None:
        pytest.skip("no Chinese lesson in notebooks/zh/ yet")
    out = SLIDES / "zh"
    deck = out / f"{ZH_DECK.stem}.slides.html"
    if not deck.exists() or deck.stat().st_mtime < ZH_DECK.stat().st_mtime:
        subprocess.run([sys.executable, str(ROOT / "tools" / "build_slides.py"), "--out", str(out),
                        str(ZH_DECK)], check=True)
    return deck


def test_chinese_deck_heading_renders_offline(zh_deck, browser):
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    refused = block_non_loopback(ctx)
    page = ctx.new_page()
    try:
        page.goto(zh_deck.as_uri())
        page.wait_for_selector(".reveal.ready", timeout=30_000)
        found = page.evaluate(GLYPHS_JS, ".reveal .slides h1, .reveal .slides h2")
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"slides__zh__{zh_deck.name.split('.')[0]}.png"))
    finally:
        ctx.close()
    problem = glyph_problems(found, f"build/slides/zh/{zh_deck.name}")
    assert problem is None, problem
    assert not refused, f"{zh_deck.name}: asked for the internet: {refused}"
