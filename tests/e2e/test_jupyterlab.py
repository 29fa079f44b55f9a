"""Every lesson and exercise notebook, run in JupyterLab in a real browser (Chromium).

For each notebook (notebooks/**/*.ipynb, found by glob): open it, wait for a live kernel, Run > Run
All Cells from the menu, wait until idle, then assert that no cell (nor any Output widget) shows an
error (cells tagged ``raises-exception`` may), that every widget the saved notebook displays has
rendered, that every cell tagged ``diagram`` shows its figure as an image, that no Output widget
shows the same plot twice, and that moving one control (a slider first: focus its handle, press an
arrow key; else a dropdown, toggle buttons, a checkbox) changes the output it drives (three moves,
each within 10 s). Every lesson (notebooks/*.ipynb) needs such a control. A screenshot per notebook
goes to build/screenshots/; the seconds from "run all" to idle and the median latency from key press
to redrawn output are printed at the end of the run: they are measurements, not assertions (speed is
a benchmark, never a test).
"""

from __future__ import annotations

import statistics
import time

import pytest
from e2e_support import (
    APP_READY_JS,
    ARM_JS,
    CLOSE_ALL_JS,
    DUPLICATE_IMAGES_JS,
    FIND_CONTROL_JS,
    IDLE_JS,
    KERNEL_READY_JS,
    MISSING_IMAGES_JS,
    NOTEBOOKS,
    OPEN_JS,
    PROBLEMS_JS,
    RESULT_KEY,
    SCREENSHOTS,
    SCROLL_JS,
    WATCH_RUN_JS,
    WIDGETS_JS,
    cells_allowed_to_fail,
    declared_widgets,
    diagram_cells,
    is_lesson,
    notebook_paths,
    wait_until,
)

OPEN_TIMEOUT_S = 90      # page load and kernel start, on two busy cores
RUN_TIMEOUT_S = 300      # a functional limit (a hung kernel), far above any lesson's run time
MOVES = 3                # control moves per notebook; the median latency is reported

PATHS = notebook_paths()


def _id(path):
    return path.relative_to(NOTEBOOKS).as_posix()


def _shot_name(rel: str) -> str:
    return rel.removesuffix(".ipynb").replace("/", "__") + ".png"


class LabPage:
    """One JupyterLab page for the whole run: loading JupyterLab once saves seconds per notebook.
    When a step times out or the page breaks, the page is thrown away and the next notebook gets a
    freshly loaded JupyterLab, so one notebook's trouble cannot leak into the next."""

    def __init__(self, lab, context):
        self.lab, self.context, self.page = lab, context, None

    def get(self):
        if self.page is None or self.page.is_closed():
            self.page = self.context.new_page()
            self.page.goto(self.lab.url(), timeout=OPEN_TIMEOUT_S * 1000)
            wait_until(self.page, APP_READY_JS, OPEN_TIMEOUT_S, "JupyterLab's start")
        return self.page

    def discard(self):
        if self.page is not None and not self.page.is_closed():
            self.page.close()
        self.page = None


@pytest.fixture(scope="module")
def lab_page(lab, context):
    holder = LabPage(lab, context)
    yield holder
    holder.discard()


def _open(page, rel):
    page.evaluate(OPEN_JS, rel)
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=OPEN_TIMEOUT_S * 1000)
    wait_until(page, KERNEL_READY_JS, OPEN_TIMEOUT_S, f"{rel}: a live, idle kernel")


def _run_all(page) -> float:
    """Run > Run All Cells from the menu bar; returns seconds until every cell has finished."""
    page.evaluate(WATCH_RUN_JS)
    page.locator(".lm-MenuBar-item", has_text="Run").first.click()
    start = time.monotonic()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
    wait_until(page, "() => window.__e2eRan", 30, "Run All: a cell starting ([*])")
    wait_until(page, IDLE_JS, RUN_TIMEOUT_S, "the end of Run All")
    return time.monotonic() - start


def _errors(page, path) -> list[str]:
    allowed = cells_allowed_to_fail(path)
    return [f"cell {i}: {text}" for i, text in page.evaluate(PROBLEMS_JS) if i not in allowed]


def _check_widgets(page, rel, expected):
    # Views fill in asynchronously after the kernel is idle: wait while any says "Loading widget".
    deadline = time.monotonic() + 15
    while True:
        views = page.evaluate(WIDGETS_JS)
        loading = [v for v in views if v["state"] == "loading"]
        if (not loading and len(views) >= expected) or time.monotonic() > deadline:
            break
        page.wait_for_timeout(200)
    broken = [v["text"] for v in views if v["state"] in ("loading", "error")]
    assert not broken, f"{rel}: widgets that did not render: {broken}"
    assert len(views) == expected, \
        f"{rel}: the saved notebook displays {expected} widgets, JupyterLab shows {len(views)}"


def _check_diagrams(page, rel, cells):
    """Each cell tagged ``diagram`` shows an image (images decode asynchronously: wait up to 10 s)."""
    deadline = time.monotonic() + 10
    while True:
        missing = page.evaluate(MISSING_IMAGES_JS, cells)
        if not missing or time.monotonic() > deadline:
            break
        page.wait_for_timeout(200)
    assert not missing, f"{rel}: cells tagged 'diagram' that show no image after Run All: {missing}"


def _check_no_duplicate_plots(twice, rel):
    assert not twice, (
        f"{rel}: an Output widget shows the same plot twice, in the cell starting {twice[0]!r}: "
        "ipywidgets' interact() displays the callback's return value after plt.show() has shown "
        "the figure. Build the widget with nl.viz.interactive and return nl.viz.live(fig, update).")


def _settle(page, quiet_s: float = 0.3, timeout_s: float = 10) -> None:
    """Wait until the Output widgets' content has not changed for ``quiet_s`` seconds."""
    js = "() => [...document.querySelectorAll('.jp-Notebook .widget-output')].map(o => o.innerHTML.length).join()"
    last, since, deadline = None, time.monotonic(), time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = page.evaluate(js)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        page.wait_for_timeout(50)


def _move_control(page, rel) -> float | None:
    """Move the notebook's first control MOVES times; returns the median latency in ms."""
    kind = page.evaluate(FIND_CONTROL_JS)
    if kind is None:
        return None
    control = page.locator("[data-e2e-control]")
    control.scroll_into_view_if_needed()
    _settle(page)
    latencies = []
    for i in range(MOVES):
        page.evaluate(ARM_JS, 10_000)
        if kind == "slider":
            now, low, top = (float(control.get_attribute(f"aria-value{a}") or 0)
                             for a in ("now", "min", "max"))
            key = "ArrowLeft" if now >= top or (i % 2 and now > low) else "ArrowRight"
            control.focus()
            page.keyboard.press(key)
        elif kind == "dropdown":
            options = control.locator("option").all_inner_texts()
            current = control.evaluate("s => s.options[s.selectedIndex].text")
            control.select_option(label=next(o for o in options if o != current))
        elif kind == "toggle":
            page.locator(".widget-toggle-buttons button:not(.mod-active)").first.click()
        else:
            control.click()
        latency = page.evaluate("window.__e2eChange")
        assert latency is not None, (
            f"{rel}: moving the {kind} did not change its output within 10 s "
            f"(move {i + 1}; slider value now {control.get_attribute('aria-valuenow')})")
        latencies.append(latency)
        wait_until(page, IDLE_JS, 30, "idle after the move")
        _settle(page)
    return statistics.median(latencies)


@pytest.mark.parametrize("path", PATHS, ids=[_id(p) for p in PATHS])
def test_notebook_runs_in_jupyterlab(path, lab, lab_page, request):
    rel = _id(path)
    expected = declared_widgets(path)
    saved = path.read_bytes()
    result = {}
    request.node.user_properties.append((RESULT_KEY, (rel, result)))     # for the summary
    start = time.monotonic()
    page = lab_page.get()
    ok = False
    try:
        _open(page, rel)
        result["open_s"] = time.monotonic() - start
        result["run_s"] = _run_all(page)
        problems = _errors(page, path)
        assert not problems, f"{rel}: cells show errors:\n" + "\n\n".join(problems)
        _check_widgets(page, rel, expected)
        _check_diagrams(page, rel, diagram_cells(path))
        twice = page.evaluate(DUPLICATE_IMAGES_JS)
        latency = _move_control(page, rel)
        result["latency_ms"] = latency
        if is_lesson(path):
            assert latency is not None, \
                f"{rel}: a lesson needs at least one control (slider, dropdown...) driving an output"
        problems = _errors(page, path)
        assert not problems, f"{rel}: errors after moving the control:\n" + "\n\n".join(problems)
        _check_no_duplicate_plots(twice, rel)
        assert not lab_page.context.refused, \
            f"{rel}: JupyterLab asked for the internet: {lab_page.context.refused}"
        ok = True
    except AssertionError:
        ok = True            # a finding about the notebook: the page itself is fine to reuse
        raise
    finally:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        try:
            page.evaluate(SCROLL_JS)
            page.screenshot(path=str(SCREENSHOTS / _shot_name(rel)))
            page.evaluate(CLOSE_ALL_JS)
        except Exception:
            ok = False
        if not ok:
            lab_page.discard()
        lab.shutdown_kernels()
        result["total_s"] = time.monotonic() - start
    assert path.read_bytes() == saved, f"{rel}: the browser test changed the notebook on disk"
