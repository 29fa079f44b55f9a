"""Build reveal.js slide decks of the lessons that need no internet connection (`make slides`).

    python tools/build_slides.py [--out build/slides] [NOTEBOOK ...]   # decks; default notebooks/*.ipynb
    python tools/build_slides.py --annotate NOTEBOOK ...               # write default slide types into cells

Slide types. Each cell's ``metadata.slideshow.slide_type`` says where it goes, as in JupyterLab's
property inspector (right sidebar, gear icon, "Slide Type"): "slide" starts a slide, "subslide" a
slide below it, "fragment" appears on the next key press, "skip" and "notes" stay off the slides,
"-" continues the current slide. A cell without one gets a default at build time
(``default_slide_type``): a markdown cell that opens with a level-1 or level-2 heading starts a
slide, a level-3 heading a subslide, a code cell that draws a plot or shows a widget starts a
subslide (the plot with the line that drew it), the imports (the first code cell, when it is
tagged "setup") are skipped, and any other cell continues the slide, unless the slide is already
full (about SLIDE_LINES lines of text, a plot counted by its height): then it starts a subslide
(``slide_types``). So a lesson without slide metadata still makes a deck; metadata written in the
notebook always wins.
``--annotate`` writes these defaults into the cells that have none (metadata only; outputs are
untouched), to adjust by hand afterwards. Arrow keys, space and clickers walk every slide in order.
Every lesson states a slide type on every cell (tests/test_slides.py checks it).

What a slide shows of a cell. One scheme, set in JupyterLab's property inspector:
- slide type "skip" leaves the whole cell out of the deck (the setup imports, cells that only
  assert what the cell above printed); by default a code cell made only of ``assert`` statements
  is skipped;
- the cell tag ``hide-input`` (HIDE_INPUT) keeps only the cell's outputs: long plotting or diagram
  code whose figure is the point of the slide. The notebook itself is unchanged.

Widgets. A deck is static HTML, executed when the notebook was last saved. Each widget output is
replaced by what its Output widget showed then (the plot, as an image) and a line naming the controls
and their values; live controls need JupyterLab.

Offline. Every script, style and font comes from the npm packages pinned in tools/slides/package.json and
package-lock.json (reveal.js, require.js, jQuery, MathJax 2; ``npm ci`` in tools/slides/ installs them),
copied into ``<out>/assets/``, or from nbconvert (its JupyterLab styles, inlined). The build refuses a
deck that would load anything from another host, and tests/e2e/test_slides.py opens every deck with
each request that leaves the machine refused. Open ``<out>/index.html`` in a browser, or serve the
folder on the loopback: ``python -m http.server --bind 127.0.0.1 --directory build/slides 8000``.
"""

from __future__ import annotations

import argparse
import ast
import base64
import copy
import html
import math
import pathlib
import re
import shutil
import sys

import nbformat
from nbconvert.exporters import SlidesExporter
from traitlets.config import Config

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
NODE_MODULES = HERE / "slides" / "node_modules"
TEMPLATES = HERE / "slides" / "templates"
SLIDE_TYPES = {"slide", "subslide", "fragment", "skip", "notes", "-"}
HIDE_INPUT = "hide-input"  # cell tag: the deck shows the cell's outputs, not its code
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
SLIDE_LINES = 28          # lines of 20 px text that fit a 1280 x 800 slide, with its margins
LINE_PX = 30
CONTROL_MODELS = ("Slider", "Dropdown", "ToggleButtons", "ToggleButton", "Checkbox",
                  "RadioButtons", "Select", "Text", "Play")

# What the decks load, copied from node_modules (package: [paths inside it]).
ASSETS = {
    "reveal.js": ["dist/reveal.js", "dist/reveal.css", "dist/theme", "plugin/notes", "LICENSE"],
    "requirejs": ["require.js"],
    "jquery": ["dist/jquery.min.js", "LICENSE.txt"],
    "mathjax": ["MathJax.js", "config/TeX-AMS_SVG-full.js", "config/Safe.js", "config/local",
                "extensions", "jax/input/TeX", "jax/element", "jax/output/SVG/jax.js",
                "jax/output/SVG/config.js", "jax/output/SVG/autoload", "jax/output/SVG/fonts/TeX",
                "LICENSE"],
}
URLS = {
    "reveal_url_prefix": "assets/reveal.js",
    "require_js_url": "assets/requirejs/require.js",
    "jquery_url": "assets/jquery/dist/jquery.min.js",
    # SVG output: MathJax draws glyphs as paths, so no web font has to load (works from file:// too).
    "mathjax_url": "assets/mathjax/MathJax.js?config=TeX-AMS_SVG-full,Safe",
}


# ------------------------------------------------------------------------------ slide types

def default_slide_type(cell, first_code: bool = False) -> str:
    """The slide type a cell gets when it has none (see the module docstring); ``first_code``:
    the cell is the notebook's first code cell."""
    if cell.cell_type == "markdown":
        first = cell.source.lstrip().split("\n", 1)[0]
        level = len(first) - len(first.lstrip("#"))
        if first[level:level + 1] == " ":
            if level in (1, 2):
                return "slide"
            if level == 3:
                return "subslide"
    if cell.cell_type == "code":
        if first_code and "setup" in cell.metadata.get("tags", []):
            return "skip"                                # the imports
        if assertions_only(cell):
            return "skip"
        if any(key.startswith("image/") or key == WIDGET_VIEW
               for out in cell.outputs for key in out.get("data", {})):
            return "subslide"
    return "-"


def assertions_only(cell) -> bool:
    """Whether ``cell`` is a code cell of ``assert`` statements (and comments) with no output."""
    if cell.cell_type != "code" or cell.outputs:
        return False
    try:
        body = ast.parse(cell.source).body
    except SyntaxError:
        return False
    return bool(body) and all(isinstance(node, ast.Assert) for node in body)


def slide_type(cell, first_code: bool = False) -> str:
    """The cell's slide type: its own metadata when it has one, otherwise the default."""
    given = cell.metadata.get("slideshow", {}).get("slide_type")
    if given is None:
        return default_slide_type(cell, first_code)
    if given not in SLIDE_TYPES:
        raise ValueError(f"slide_type must be one of {sorted(SLIDE_TYPES)}, got {given!r}")
    return given


def _png_height(b64: str) -> int:
    head = base64.b64decode(b64[:32])
    return int.from_bytes(head[20:24], "big") if head[:8] == b"\x89PNG\r\n\x1a\n" else 300


def _text_lines(text, width: int) -> float:
    text = "".join(text) if isinstance(text, list) else text
    return sum(max(1, math.ceil(len(line) / width)) if line.strip() else 0.5
               for line in text.split("\n"))


def estimated_lines(cell) -> float:
    """Roughly how many lines of text a cell fills on a 1280 x 800 slide (a plot: its height)."""
    if cell.cell_type == "markdown":
        return _text_lines(cell.source, 110) + 1.5 * (cell.source.count("$$") // 2) + 1
    if cell.cell_type != "code":
        return 0
    lines = 0 if HIDE_INPUT in cell.metadata.get("tags", []) else len(cell.source.split("\n")) + 1
    for out in cell.outputs:
        data = out.get("data", {})
        if out.get("output_type") == "stream":
            lines += min(_text_lines(out.get("text", ""), 105), 25)
        elif "image/png" in data:
            lines += _png_height(data["image/png"]) / LINE_PX + 1
        elif WIDGET_VIEW in data:
            lines += 12
        elif "text/html" in data:
            lines += min(max(2, "".join(data["text/html"]).count("<tr")), 25)
        elif "text/plain" in data:
            lines += min(_text_lines(data["text/plain"], 105), 25)
    return lines


def slide_types(nb) -> list[str]:
    """Each cell's slide type: its own when it has one, else the default; and a cell without one
    that would overflow its slide (about SLIDE_LINES lines) starts a subslide below it."""
    types, used = [], 0.0
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    for i, cell in enumerate(nb.cells):
        kind = slide_type(cell, first_code=bool(code) and i == code[0])
        explicit = "slide_type" in cell.metadata.get("slideshow", {})
        lines = estimated_lines(cell)
        if kind in ("slide", "subslide"):
            used = 0.0
        elif kind == "-" and not explicit and used > 0 and used + lines > SLIDE_LINES:
            kind, used = "subslide", 0.0
        if kind not in ("skip", "notes"):
            used += lines
        types.append(kind)
    return types


def with_slide_types(nb):
    """A copy of ``nb`` in which every cell states its slide type (see ``slide_types``)."""
    nb = copy.deepcopy(nb)
    for cell, kind in zip(nb.cells, slide_types(nb), strict=True):
        cell.metadata.setdefault("slideshow", {})["slide_type"] = kind
    return nb


def without_test_markers(nb):
    """A copy of ``nb`` without nbval's marker lines (``# NBVAL_IGNORE_OUTPUT``...) in code cells."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            lines = cell.source.split("\n")
            cell.source = "\n".join(ln for ln in lines if not ln.lstrip().startswith("# NBVAL_"))
    return nb


def annotate(path: pathlib.Path) -> int:
    """Write the default slide type into each cell of ``path`` that has none; returns how many."""
    nb = nbformat.read(path, as_version=4)
    added = 0
    for cell, kind in zip(nb.cells, slide_types(nb), strict=True):
        if "slide_type" not in cell.metadata.get("slideshow", {}):
            cell.metadata.setdefault("slideshow", {})["slide_type"] = kind
            added += 1
    if added:
        nbformat.write(nb, path)
    return added


# ------------------------------------------------------------------------------ widgets

def _walk(model_id: str, state: dict, outputs: list, controls: list) -> None:
    model = state.get(model_id)
    if model is None:
        return
    name, st = model.get("model_name", ""), model.get("state", {})
    if name == "OutputModel":
        outputs.extend(st.get("outputs", []))
    elif name.removesuffix("Model").endswith(CONTROL_MODELS) and st.get("description"):
        if "_options_labels" in st and st.get("index") is not None:
            value = st["_options_labels"][st["index"]]
        else:
            value = st.get("value")
        controls.append(f"{st['description']} = {value}")
    for child in st.get("children", []):
        if isinstance(child, str):
            _walk(child.removeprefix("IPY_MODEL_"), state, outputs, controls)


def widgets_as_images(nb):
    """A copy of ``nb`` in which each widget output shows what its Output widgets held (plots as
    images) and a line naming its controls; widget outputs with neither (progress bars) go."""
    nb = copy.deepcopy(nb)
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        kept = []
        for out in cell.outputs:
            view = out.get("data", {}).get(WIDGET_VIEW)
            if view is None:
                kept.append(out)
                continue
            outputs, controls = [], []
            _walk(view.get("model_id", ""), state, outputs, controls)
            if controls:
                line = ", ".join(html.escape(str(c)) for c in controls)
                note = (f'<p class="live-note"><em>Live in JupyterLab, shown here at {line}.'
                        f"</em></p>")
                kept.append(nbformat.v4.new_output("display_data", data={"text/html": note}))
            kept.extend(nbformat.from_dict(o) for o in outputs)
        cell.outputs = kept
    nb.metadata.pop("widgets", None)
    return nb


def unsaved_widgets(nb) -> list[int]:
    """The code cells (their index among all cells) that show a widget whose state the notebook
    did not save: the deck can show nothing of it but the code. JupyterLab saves widget state
    only with Settings › Save Widget State Automatically; `make execute` always does."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    return [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
            and any(out.get("data", {}).get(WIDGET_VIEW, {}).get("model_id") not in state
                    for out in cell.get("outputs", []) if WIDGET_VIEW in out.get("data", {}))]


# ------------------------------------------------------------------------------ build

_REMOTE = re.compile(r"""(?:<script[^>]*\ssrc=|<link[^>]*\shref=|<img[^>]*\ssrc=|url\(|import\s*\(?)\s*["']?(?:https?:)?//""",
                     re.IGNORECASE)


def remote_loads(page: str) -> list[str]:
    """Places where ``page`` would load a script, style, font or image from another host."""
    return [page[max(0, m.start() - 40):m.end() + 60] for m in _REMOTE.finditer(page)]


def copy_assets(out: pathlib.Path) -> None:
    """Copy what the decks load from tools/slides/node_modules into ``out/assets``."""
    if not NODE_MODULES.is_dir():
        raise SystemExit(f"{NODE_MODULES} is missing: run `make slides` "
                         f"(or `npm ci` in {HERE}) to install the slide assets")
    for package, parts in ASSETS.items():
        for part in parts:
            src = NODE_MODULES / package / part
            dst = out / "assets" / package / part
            if not src.exists():
                raise SystemExit(f"{src} is missing: run `npm ci` in {HERE}")
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, dst, dirs_exist_ok=True)
            else:
                shutil.copy2(src, dst)


def exporter() -> SlidesExporter:
    c = Config()
    for key, value in URLS.items():
        setattr(c.SlidesExporter, key, value)
    c.SlidesExporter.extra_template_basedirs = [str(TEMPLATES)]
    c.SlidesExporter.template_name = "offline"
    c.SlidesExporter.reveal_theme = "white"
    c.SlidesExporter.reveal_scroll = True          # a slide taller than the screen scrolls
    c.SlidesExporter.reveal_number = "c/t"
    c.SlidesExporter.reveal_width = "1280"         # 100-character code lines fit at the template's
    c.SlidesExporter.reveal_height = "800"         # 19 px code font; reveal scales to the screen
    c.SlidesExporter.exclude_input_prompt = True
    c.SlidesExporter.exclude_output_prompt = True
    c.TagRemovePreprocessor.enabled = True
    c.TagRemovePreprocessor.remove_input_tags = {HIDE_INPUT}
    return SlidesExporter(config=c)


def title(nb, fallback: str) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith("# "):
            return cell.source.lstrip()[2:].split("\n", 1)[0].strip()
    return fallback


def build_deck(path: pathlib.Path, out: pathlib.Path, exp: SlidesExporter) -> pathlib.Path:
    nb = nbformat.read(path, as_version=4)
    unsaved = unsaved_widgets(nb)
    if unsaved:
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        print(f"warning: {path.name}: cells {', '.join(map(str, unsaved))} show a widget whose "
              "state was not saved, so their slides show only the code. Save the state "
              "(JupyterLab: Settings › Save Widget State Automatically, then save the notebook) "
              f"or run `make execute NB={shown}` before `make slides`.", file=sys.stderr)
    nb = with_slide_types(widgets_as_images(without_test_markers(nb)))
    page, _ = exp.from_notebook_node(nb, resources={"metadata": {"name": path.stem}})
    remote = remote_loads(page)
    if remote:
        raise SystemExit(f"{path.name}: the deck would load from another host: {remote[:3]}")
    target = out / f"{path.stem}.slides.html"
    target.write_text(page, encoding="utf-8")
    return target


def write_index(decks: list[tuple[str, str]], out: pathlib.Path) -> None:
    items = "\n".join(f'  <li><a href="{html.escape(f)}">{html.escape(t)}</a></li>' for f, t in decks)
    (out / "index.html").write_text(f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Transformer building blocks: slides</title>
<style>body {{ font: 18px/1.5 sans-serif; max-width: 46em; margin: 2em auto; }}</style></head>
<body>
<h1>Transformer building blocks: slides</h1>
<p>Arrow keys or space move through a deck, <kbd>Esc</kbd> shows all slides, <kbd>s</kbd> opens the
speaker view. Plots are images from the last run; live widgets need JupyterLab
(<code>make lab</code>).</p>
<ul>
{items}
</ul>
</body></html>
""", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=pathlib.Path,
                        help="notebooks to build (default: notebooks/*.ipynb)")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "build" / "slides")
    parser.add_argument("--annotate", action="store_true",
                        help="write default slide types into the notebooks instead of building")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    if not paths:
        raise SystemExit("no notebooks to build")
    if args.annotate:
        for path in paths:
            print(f"{path}: {annotate(path)} cells annotated")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    copy_assets(args.out)
    exp, decks = exporter(), []
    for path in paths:
        target = build_deck(path, args.out, exp)
        decks.append((target.name, title(nbformat.read(path, as_version=4), path.stem)))
        print(f"{target}")
    write_index(decks, args.out)
    print(f"{len(decks)} decks in {args.out}; open {args.out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
