"""The lessons are ready to present: every cell states its slide type, tools/build_slides.py honours the
`hide-input` tag and the "skip" slide type, and no markdown cell is too long for one slide.

The decks themselves (built, opened offline in Chromium) are tested in tests/e2e/test_slides.py.
"""

from __future__ import annotations

import importlib.util
import pathlib
import re

import nbformat
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MAX_WORDS = 250

_spec = importlib.util.spec_from_file_location("slides_build", ROOT / "tools" / "build_slides.py")
build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build)


def english_words(markdown: str) -> int:
    """Words a reader reads in a markdown cell: whitespace-separated tokens with a letter or digit,
    after removing fenced code blocks, display math ($$...$$), link targets, bare URLs and HTML
    tags. Tables and inline math count (a table's words are read too)."""
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = re.sub(r"<?https?://\S+", " ", text)
    text = re.sub(r"<[^>]+>", " ", text)
    return sum(1 for token in text.split() if re.search(r"[^\W_]", token))


def test_word_count_rule():
    md = ("Two words [link](https://example.org/a/very/long/path)\n\n```python\nx = 1 + 2\n```\n"
          "$$a + b$$ <br> | col | - | https://example.org")
    assert english_words(md) == 4          # Two, words, [link], col
    assert english_words("") == 0


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_every_cell_has_a_slide_type(lesson):
    nb = nbformat.read(lesson, as_version=4)
    missing = [f"cell {i} ({c.get('id')})" for i, c in enumerate(nb.cells)
               if "slide_type" not in c.metadata.get("slideshow", {})]
    assert not missing, (f"{lesson.name}: no slide type on {', '.join(missing)}; set them in "
                         f"JupyterLab (property inspector, Slide Type) or start from "
                         f"`python tools/build_slides.py --annotate {lesson.relative_to(ROOT)}`")
    bad = [(c.get("id"), c.metadata.slideshow.slide_type) for c in nb.cells
           if c.metadata.slideshow.slide_type not in build.SLIDE_TYPES]
    assert not bad, f"{lesson.name}: slide types not in {sorted(build.SLIDE_TYPES)}: {bad}"
    assert nb.cells[0].metadata.slideshow.slide_type == "slide", f"{lesson.name}: the title"


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_no_markdown_cell_over_250_words(lesson):
    nb = nbformat.read(lesson, as_version=4)
    long = [(c.get("id"), english_words(c.source)) for c in nb.cells
            if c.cell_type == "markdown" and english_words(c.source) > MAX_WORDS]
    assert not long, (f"{lesson.name}: markdown cells over {MAX_WORDS} words (id, words): {long}; "
                      f"split them at a natural boundary (and their Chinese blocks)")


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_hidden_inputs_are_plotting_or_diagram_code_with_an_output(lesson):
    """A `hide-input` cell shows something on its slide: it must be a code cell that draws."""
    nb = nbformat.read(lesson, as_version=4)
    for cell in nb.cells:
        if build.HIDE_INPUT in cell.metadata.get("tags", []):
            assert cell.cell_type == "code", f"{lesson.name} {cell.get('id')}: a markdown cell"
            assert cell.metadata.slideshow.slide_type != "skip", (
                f"{lesson.name} {cell.get('id')}: hide-input on a skipped cell")


def _notebook():
    new_code = nbformat.v4.new_code_cell
    png = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
    cells = [
        nbformat.v4.new_markdown_cell("# A title"),
        new_code("import math", metadata={"tags": ["setup"]}),
        new_code("shown_code = 1\nprint(shown_code)",
                 outputs=[nbformat.v4.new_output("stream", text="visible-stream\n")]),
        new_code("assert shown_code == 1\nassert math.pi > 3  # asserted_in_notebook"),
        new_code("hidden_plotting_code = 'draw'", metadata={"tags": ["hide-input"]},
                 outputs=[nbformat.v4.new_output("display_data", data={"image/png": png})]),
        new_code("skipped_by_metadata = 2", metadata={"slideshow": {"slide_type": "skip"}}),
    ]
    return nbformat.v4.new_notebook(cells=cells)


def test_default_slide_types_skip_imports_and_assertion_only_cells():
    nb = _notebook()
    assert build.assertions_only(nb.cells[3])
    assert not build.assertions_only(nb.cells[2])
    assert build.slide_types(nb) == ["slide", "skip", "-", "skip", "subslide", "skip"]


def test_deck_honours_hide_input_and_skip(tmp_path):
    path = tmp_path / "deck.ipynb"
    nbformat.write(_notebook(), path)
    page = build.build_deck(path, tmp_path, build.exporter()).read_text(encoding="utf-8")
    assert "shown_code" in page and "visible-stream" in page
    assert "hidden_plotting_code" not in page, "hide-input: the code must not be on the slide"
    assert "data:image/png;base64," in page, "hide-input: the plot must stay"
    assert "asserted_in_notebook" not in page and "skipped_by_metadata" not in page
    assert "import math" not in page
