"""Helpers for the browser test: paths, the offline request filter, a JupyterLab handle, and the
page-side probes (kernel state, errors, widgets, and the latency of one control)."""

from __future__ import annotations

import ipaddress
import json
import os
import pathlib
import time
import urllib.parse
import urllib.request

import nbformat

ROOT = pathlib.Path(__file__).resolve().parents[2]
# E2E_NOTEBOOKS points the test at another folder (used to check that the test fails when it should).
NOTEBOOKS = pathlib.Path(os.environ.get("E2E_NOTEBOOKS", ROOT / "notebooks")).resolve()
BUILD = ROOT / "build"
SCREENSHOTS = BUILD / "screenshots"
SLIDES = BUILD / "slides"
STATE = ROOT / ".jupyter"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
# Per-notebook numbers for the summary at the end of the run: each test attaches (name, numbers)
# to its report under RESULT_KEY, so that they reach conftest.py's summary from pytest-xdist workers.
RESULT_KEY = "e2e_result"


def notebook_paths() -> list[pathlib.Path]:
    """Every lesson and exercise notebook, found by glob so new ones are picked up. Not the Chinese
    edition (notebooks/zh/): its code and outputs are the English notebooks' (make
    check-translations), so test_chinese.py only opens it and checks that its Chinese renders."""
    return sorted(p for p in NOTEBOOKS.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
                  and p.relative_to(NOTEBOOKS).parts[0] != "zh")


def is_lesson(path: pathlib.Path) -> bool:
    """Lessons sit directly in notebooks/ (exercises in subfolders such as notebooks/exercises/)."""
    return path.parent == NOTEBOOKS


def cells_allowed_to_fail(path: pathlib.Path) -> set[int]:
    """Indices of the cells tagged ``raises-exception`` (nbval's and JupyterLab's tag)."""
    nb = nbformat.read(path, as_version=4)
    return {i for i, c in enumerate(nb.cells) if "raises-exception" in c.metadata.get("tags", [])}


def diagram_cells(path: pathlib.Path) -> list[int]:
    """Indices of the cells tagged ``diagram`` (a call into normlib.diagrams that draws a figure)."""
    nb = nbformat.read(path, as_version=4)
    return [i for i, c in enumerate(nb.cells) if "diagram" in c.metadata.get("tags", [])]


def declared_widgets(path: pathlib.Path) -> int:
    """How many widget views the notebook displays: widget outputs in its committed cells."""
    nb = nbformat.read(path, as_version=4)
    return sum(WIDGET_VIEW in out.get("data", {})
               for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs)


def is_loopback(url: str) -> bool:
    """True for local URLs (data:, blob:, file:) and for URLs whose host is the loopback."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme in {"data", "blob", "file", "about"}:
        return True
    host = (parts.hostname or "").strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def block_non_loopback(context) -> list[str]:
    """Refuse every request to an address other than the loopback; returns the refused URLs."""
    refused: list[str] = []

    def handle(route):
        url = route.request.url
        if is_loopback(url):
            route.continue_()
        else:
            refused.append(url)
            route.abort("blockedbyclient")

    context.route("**/*", handle)
    return refused


class Lab:
    """A running JupyterLab: ``url(relpath)`` opens a notebook, ``api()`` calls its REST API."""

    def __init__(self, port: int, token: str, proc, log: pathlib.Path):
        self.base = f"http://127.0.0.1:{port}"
        self.token, self.proc, self.log = token, proc, log

    def url(self) -> str:
        """JupyterLab in a workspace of its own, reset, logged in with the token."""
        return f"{self.base}/lab/workspaces/e2e?reset&token={self.token}"

    def api(self, method: str, path: str):
        req = urllib.request.Request(f"{self.base}/api/{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        """Delete every session, and so its kernel: each notebook's kernel ends after its check."""
        for session in self.api("GET", "sessions"):
            self.api("DELETE", f"sessions/{session['id']}")


# ---------------------------------------------------------------- page-side probes (JupyterLab)

APP_READY_JS = """() => !!window.jupyterapp && !!document.querySelector('.jp-LabShell')
                       && !!document.querySelector('#jp-MainMenu')"""

OPEN_JS = """async (path) => {
  await window.jupyterapp.restored;
  await window.jupyterapp.commands.execute('docmanager:open', {path, factory: 'Notebook'});
}"""

# Close every tab without saving (the test never writes a notebook).
CLOSE_ALL_JS = """() => {
  for (const w of Array.from(window.jupyterapp.shell.widgets('main'))) {
    if (w.context && w.context.model) w.context.model.dirty = false;
    w.dispose();
  }
}"""

# The toolbar can show the kernel's name and an idle indicator before the notebook's session has a
# connected kernel, and Run All then clears the outputs and runs nothing, as JupyterLab does without
# a kernel (seen once in 72 notebooks, two browser tests running at once). So the session's own
# kernel must be connected and idle too.
KERNEL_READY_JS = """() => {
  const name = document.querySelector('.jp-NotebookPanel-toolbar .jp-Toolbar-kernelName');
  const ind = document.querySelector('.jp-NotebookPanel-toolbar .jp-Notebook-ExecutionIndicator');
  const panel = window.jupyterapp.shell.currentWidget;
  const kernel = panel && panel.sessionContext && panel.sessionContext.session
      && panel.sessionContext.session.kernel;
  return !!name && !name.textContent.includes('No Kernel')
      && !!ind && ind.getAttribute('data-status') === 'idle'
      && !!kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle';
}"""

# Records whether any cell shows the running prompt [*] from now on (window.__e2eRan), so that a
# notebook that finishes between two polls still counts as run, and one that never ran does not.
WATCH_RUN_JS = """() => {
  window.__e2eRan = false;
  const notebook = document.querySelector('.jp-Notebook');
  const check = () => {
    if ([...notebook.querySelectorAll('.jp-InputArea-prompt')].some(p => p.textContent.includes('*'))) {
      window.__e2eRan = true;
      obs.disconnect();
    }
  };
  const obs = new MutationObserver(check);
  obs.observe(notebook, {subtree: true, childList: true, characterData: true});
}"""

IDLE_JS = """() => {
  const ind = document.querySelector('.jp-NotebookPanel-toolbar .jp-Notebook-ExecutionIndicator');
  const busy = [...document.querySelectorAll('.jp-Notebook .jp-InputArea-prompt')]
                 .some(p => p.textContent.includes('*'));
  return !!ind && ind.getAttribute('data-status') === 'idle' && !busy;
}"""

# Errors: [cell index, text] for each error output of a cell (from JupyterLab's notebook model:
# on screen, a traceback and a warning are both rendered as stderr text) and for each traceback
# inside an Output widget (an exception in a widget callback, shown in colour by IPython).
PROBLEMS_JS = """() => {
  const found = [];
  const model = window.jupyterapp.shell.currentWidget.content.model;
  for (let i = 0; i < model.cells.length; i++) {
    const cell = model.cells.get(i);
    if (cell.type !== 'code') continue;
    for (let j = 0; j < cell.outputs.length; j++) {
      const out = cell.outputs.get(j).toJSON();
      if (out.output_type === 'error') found.push([i, `${out.ename}: ${out.evalue}`]);
    }
  }
  const cells = [...document.querySelectorAll('.jp-Notebook .jp-Cell')];
  for (const el of document.querySelectorAll(
      '.jp-Notebook .widget-output [data-mime-type="application/vnd.jupyter.stderr"]')) {
    if (el.querySelector('.ansi-red-fg') || /Traceback \\(most recent call last\\)/.test(el.innerText))
      found.push([cells.indexOf(el.closest('.jp-Cell')), 'in an Output widget: ' + el.innerText.slice(0, 1500)]);
  }
  return found;
}"""

# The given cells (indices) that do not show a drawn image: no image/png output in JupyterLab's
# notebook model, or no loaded <img> in the cell's output area on screen.
MISSING_IMAGES_JS = """(indices) => {
  const model = window.jupyterapp.shell.currentWidget.content.model;
  const cells = [...document.querySelectorAll('.jp-Notebook .jp-Cell')];
  return indices.filter(i => {
    const cell = model.cells.get(i);
    let png = false;
    for (let j = 0; j < cell.outputs.length; j++)
      if ((cell.outputs.get(j).toJSON().data || {})['image/png']) png = true;
    const img = cells[i] && cells[i].querySelector('.jp-OutputArea-output img');
    return !(png && img && img.complete && img.naturalWidth > 0);
  });
}"""

# Bring what matters into view for the screenshot: an error, else the control, else a widget.
SCROLL_JS = """() => {
  const el = document.querySelector('.jp-Notebook [data-mime-type="application/vnd.jupyter.stderr"] .ansi-red-fg')
          || document.querySelector('[data-e2e-control]')
          || document.querySelector('.jp-Notebook .jupyter-widgets');
  if (el) el.scrollIntoView({block: 'center'});
}"""

# The widget views of the notebook's cells (not those nested in Output widgets). ipywidgets'
# renderer shows "Loading widget..." until the view exists, "Error displaying widget..." when it
# has no model, an error widget ("Click to show javascript error") when the view fails, and hides
# itself when the kernel closes the widget (a finished progress bar).
WIDGETS_JS = r"""() => {
  const tops = [...document.querySelectorAll('.jp-Notebook .jp-Cell-outputArea .jp-OutputArea-output')]
                 .filter(el => !el.parentElement.closest('.widget-output, .jupyter-widgets'));
  return tops.filter(el => !el.hasAttribute('data-mime-type') || el.querySelector('.jupyter-widgets')
                           || /Loading widget|Error displaying widget/.test(el.textContent))
    .map(el => ({
      state: el.classList.contains('lm-mod-hidden') ? 'hidden'
           : /^\s*Loading widget/.test(el.textContent) ? 'loading'
           : (el.querySelector('.jupyter-widgets-error-widget') || el.classList.contains('jupyter-widgets')
              || !el.querySelector('.jupyter-widgets')) ? 'error' : 'rendered',
      text: el.textContent.trim().slice(0, 200),
    }));
}"""

# Output widgets that show the same image twice: a callback that returns its figure after
# plt.show() inside interact(), which displays the return value again.
DUPLICATE_IMAGES_JS = """() => [...document.querySelectorAll('.jp-Notebook .widget-output')]
  .filter(o => { const srcs = [...o.querySelectorAll('img')].map(i => i.src);
                 return new Set(srcs).size < srcs.length; })
  .map(o => o.closest('.jp-Cell').querySelector('.jp-InputArea-editor').textContent.slice(0, 200))"""

# The first control of the notebook that drives an ipywidgets Output: a slider handle first, then
# a dropdown, toggle buttons, a checkbox. Marks it (data-e2e-control) and returns its kind.
FIND_CONTROL_JS = """() => {
  const kinds = [
    ['slider', ".widget-slider .noUi-handle[role='slider']"],
    ['dropdown', '.widget-dropdown select'],
    ['toggle', '.widget-toggle-buttons button'],
    ['checkbox', ".widget-checkbox input[type='checkbox']"],
    ['radio', ".widget-radio-box input[type='radio']"],
  ];
  for (const [kind, sel] of kinds) {
    for (const el of document.querySelectorAll('.jp-Notebook ' + sel)) {
      const cell = el.closest('.jp-Cell');
      if (cell && cell.querySelector('.widget-output')) {
        document.querySelectorAll('[data-e2e-control]').forEach(e => e.removeAttribute('data-e2e-control'));
        el.setAttribute('data-e2e-control', kind);
        return kind;
      }
    }
  }
  return null;
}"""

# Arms a watcher on the Output widgets of the control's cell: resolves with the milliseconds from
# the first key press / click / change on the page to the first DOM state whose outputs (images,
# text) differ from the current ones. window.__e2eChange holds the promise.
ARM_JS = """(timeoutMs) => {
  const control = document.querySelector('[data-e2e-control]');
  const cell = control.closest('.jp-Cell');
  const signature = () => [...cell.querySelectorAll('.widget-output')].map(o =>
      [...o.querySelectorAll('img')].map(i => i.src).join('|')
      + '#' + o.innerText).join('||');
  const before = signature();
  let t0 = null;
  const mark = () => { if (t0 === null) t0 = performance.now(); };
  for (const ev of ['keydown', 'mousedown', 'change']) document.addEventListener(ev, mark, true);
  window.__e2eChange = new Promise(resolve => {
    const done = (value) => {
      obs.disconnect();
      for (const ev of ['keydown', 'mousedown', 'change']) document.removeEventListener(ev, mark, true);
      resolve(value);
    };
    const obs = new MutationObserver(() => {
      const now = signature();
      const hasContent = [...cell.querySelectorAll('.widget-output')].some(o =>
          o.querySelector('img, svg, canvas') || o.innerText.trim() !== '');
      if (t0 !== null && now !== before && hasContent) done(performance.now() - t0);
    });
    obs.observe(cell, {subtree: true, childList: true, characterData: true, attributes: true,
                       attributeFilter: ['src']});
    setTimeout(() => done(null), timeoutMs);
  });
  return before.length;
}"""


def wait_until(page, js: str, timeout_s: float, what: str) -> None:
    """Poll a page predicate until true; raise with ``what`` in the message after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(js):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout_s:.0f} s")
        page.wait_for_timeout(100)


# ------------------------------------------------------------ page-side probe: Chinese glyphs

# Whether Chinese text is drawn with real glyphs. In the first element matching the selector whose
# text has Chinese (Han) characters, each distinct Han character is drawn on a canvas in the
# element's computed font (the browser falls back to the same fonts as for the element itself),
# and so is U+0378, an unassigned code point that no font has: the browser draws it as the missing-
# glyph box. A character drawn as that box, drawn as nothing, or drawn exactly like another Han
# character (every missing glyph is the same box) is reported. Without a CJK font, all are.
GLYPHS_JS = r"""(selector) => {
  const han = /\p{Script=Han}/u;
  const el = [...document.querySelectorAll(selector)].find(e => han.test(e.textContent));
  if (!el) return null;
  const style = getComputedStyle(el);
  const size = Math.ceil(parseFloat(style.fontSize));
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 2 * size;
  const ctx = canvas.getContext('2d', {willReadFrequently: true});
  ctx.font = `${style.fontStyle} ${style.fontWeight} ${size}px ${style.fontFamily}`;
  const draw = (ch) => {
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    ctx.fillText(ch, size / 2, 1.5 * size);
    return ctx.getImageData(0, 0, canvas.width, canvas.height).data
              .filter((_, i) => i % 4 === 3).join(',');
  };
  const box = draw('\u0378');
  const chars = [...new Set([...el.textContent].filter(c => han.test(c)))];
  const seen = new Map(), bad = [];
  for (const c of chars) {
    const image = draw(c);
    if (image === box) bad.push(`${c} (the missing-glyph box)`);
    else if (!/[1-9]/.test(image)) bad.push(`${c} (nothing drawn)`);
    else if (seen.has(image)) bad.push(`${c} (drawn exactly like ${seen.get(image)})`);
    else seen.set(image, c);
  }
  return {text: el.textContent.trim().slice(0, 80), font: ctx.font, chars: chars.length, bad};
}"""


def glyph_problems(found, where: str) -> str | None:
    """A failure message for GLYPHS_JS's result, or None when the Chinese renders."""
    if found is None:
        return f"{where}: no heading with Chinese characters to check"
    if found["chars"] < 2:
        return f"{where}: the heading {found['text']!r} has {found['chars']} Chinese character(s)"
    if found["bad"]:
        return (f"{where}: the Chinese heading {found['text']!r} renders as empty boxes, no CJK font "
                f"(font {found['font']}): {', '.join(found['bad'][:6])}. Install one: "
                "apt-get install fonts-noto-cjk (README, 'Chinese fonts').")
    return None
