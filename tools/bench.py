"""make bench: how fast the widgets answer and the notebooks run, on this machine.

A benchmark, never a test: it measures and prints, and fails only if a notebook raises. Each
absolute figure comes with a ratio to a reference measured in the same run, so that two machines
(or one machine under different load) can be compared:
- a widget callback's median time (build + draw, Agg) against drawing a plain one-line figure of
  the lesson's size the same way; and the median time of a move of each displayed widget's first
  control by one step, as the browser test (tests/e2e/test_jupyterlab.py) presses a key: the
  kernel's share of what that test measures from key press to new plot;
- a notebook's cell time (the sum of its cells' execution times, as nbval runs them: one kernel,
  one notebook at a time) against one training step of a fixed small model (a 12-layer
  TinyTransformerLM, forward and backward, one thread), the kind of work the lessons do.

- the classroom grader (normlib.classroom) on a class of 40 students who each hand in every
  practice notebook, every core busy: what a lecturer waits for (issue 19 asks for about two
  minutes or less on two cores).

    python tools/bench.py [notebook ...]        (default: every lesson and practice notebook, then
                                                 the grader)
    python tools/bench.py --grade-class [N]     (the grader alone, on N students; default 40)
"""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import torch  # noqa: E402
from nbclient import NotebookClient  # noqa: E402

# A move is made as tests/test_widgets.py makes it: one loop for both.
_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_ROOT), str(_ROOT / "tests")]      # tools.images, and the tests' helpers
from test_widgets import (  # noqa: E402
    NOTEBOOKS,
    ROOT,
    call_and_draw,
    callbacks,
    one_step,
    shown_widgets,
    widget_notebooks,
)

import normlib as nl  # noqa: E402
from normlib.viz import reading_mode  # noqa: E402


def median_seconds(fn, repeat: int) -> float:
    fn()                                                   # warm caches
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{cpu}, {os.cpu_count()} logical cores, torch {torch.__version__} "
            f"({torch.backends.cpu.get_cpu_capability()}), load average "
            f"{' '.join(f'{v:.1f}' for v in os.getloadavg())}")


def reference_figure() -> float:
    def draw():
        fig, ax = plt.subplots()
        ax.plot([0, 1, 2], [0, 1, 0])
        fig.canvas.draw()
        plt.close(fig)
    return median_seconds(draw, 15)


def reference_step() -> float:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nl.TinyTransformerLM(64, 32, 12, 4, 16)
    tokens = torch.randint(64, (8, 17), generator=torch.Generator().manual_seed(0))

    def step():
        model.zero_grad()
        nl.lm_loss(model, tokens).backward()
    return median_seconds(step, 20)


def widget_rows(ref_fig: float) -> list[tuple[str, float, float]]:
    """Per callback: (name, build ms, build / one-line figure): the widget's first drawing."""
    rows = []
    reading_mode()
    for path in widget_notebooks():
        for name, fn in callbacks(path):
            def call(fn=fn):
                with contextlib.redirect_stdout(io.StringIO()):     # some callbacks print a table
                    call_and_draw(fn)
                plt.close("all")
            t = median_seconds(call, 5)
            rows.append((f"{path.relative_to(ROOT / 'notebooks')}:{name}", t, t / ref_fig))
    return rows


def move_rows(ref_fig: float) -> list[tuple[str, float, float]]:
    """Per displayed widget: (name, median ms of a move, / one-line figure). A move is what the
    browser test does (tests/e2e): one key press on the widget's first control, alternately up and
    down, and what the kernel does for it (the figure's update, one drawing to PNG, the new image
    put in the widget's output). Axes that rescale make a move cost more than a step that leaves
    the limits in place."""
    rows = []
    reading_mode()
    for path in widget_notebooks():
        for name, box in shown_widgets(path):
            control = box.children[0]
            times = []
            for i in range(10):
                value = one_step(control, forward=i % 2 == 0)
                start = time.perf_counter()
                with contextlib.redirect_stdout(io.StringIO()):
                    control.value = value
                times.append(time.perf_counter() - start)
            t = statistics.median(times[1:])                       # the first move warms caches
            rows.append((f"{path.relative_to(ROOT / 'notebooks')}:{name} ({control.description})",
                         t, t / ref_fig))
            plt.close("all")
    return rows


@contextlib.contextmanager
def kernel_stderr_to(file):
    """Point file descriptor 2 (inherited by the kernel process) at ``file`` for the block."""
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(file.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def notebook_row(path: pathlib.Path) -> tuple[float, float]:
    """(cell time, wall time) in seconds for one fresh-kernel run of the notebook."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    with tempfile.TemporaryFile() as log, kernel_stderr_to(log):   # the kernel's start-up chatter
        try:
            NotebookClient(nb, timeout=600, kernel_name="python3",
                           resources={"metadata": {"path": str(path.parent)}}).execute()
        except Exception:
            log.seek(0)
            sys.stderr.buffer.write(log.read())
            raise
    wall = time.perf_counter() - start
    cell = 0.0
    for c in nb.cells:
        timing = c.get("metadata", {}).get("execution", {})
        if c.cell_type == "code" and "iopub.execute_input" in timing:
            begin, end = (datetime.datetime.fromisoformat(timing[k].replace("Z", "+00:00"))
                          for k in ("iopub.execute_input", "shell.execute_reply"))
            cell += (end - begin).total_seconds()
    return cell, wall


def grade_class_row(students: int = 40) -> tuple[float, int, int]:
    """(seconds, answers, passed): the grader on ``students`` students with every practice
    notebook each (the solution, or in every third notebook one of tests/test_exercises_unseen's
    wrong implementations), built as tests/test_classroom_grader.py builds its class."""
    from test_classroom_grader import KEYS, hand_in, solution, wrong
    from test_exercises_unseen import CHECKERS

    # The grader runs in a fresh process started with -c, as `python -m normlib.classroom grade`
    # runs. The wrong answers import test_exercises_unseen (and with it pytest, 0.5 s): the
    # sandboxes see tests/ and import it once each, as a real class's answers import nothing of
    # the tests. Each of the 40 students gets a sandbox of their own (torch imported once in it).
    script = ("import json, pathlib, sys, time\n"
              f"sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / 'tests')!r}]\n"
              "from normlib.classroom import grade_class\n"
              "start = time.perf_counter()\n"
              "rows = grade_class(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), progress=False,\n"
              f"                   extra_paths=[{str(ROOT / 'tests')!r}], preload=['test_exercises_unseen'])\n"
              "print(json.dumps([time.perf_counter() - start, len(rows), "
              "sum(r['passed'] for r in rows)]))\n")
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp) / "submissions"
        answers = {key: (solution(key), wrong(key) if key in CHECKERS else solution(key))
                   for key in KEYS}
        for s in range(students):
            for i, key in enumerate(KEYS):
                hand_in(root, f"student-{s:02d}", key, answers[key][(s + i) % 3 == 0])
        out = subprocess.run([sys.executable, "-c", script, str(root), str(pathlib.Path(tmp) / "out")],
                             capture_output=True, text=True, check=True).stdout
    seconds, n, passed = json.loads(out.strip().splitlines()[-1])
    return seconds, n, passed


def print_grade_class(students: int) -> None:
    seconds, answers, passed = grade_class_row(students)
    print(f"\nclassroom grader: {students} students, {answers} answers ({passed} passed) in "
          f"{seconds:.1f} s on {os.cpu_count()} cores "
          f"({seconds / answers * 1e3:.0f} ms per answer)")


def main(argv: list[str]) -> None:
    if argv[:1] == ["--grade-class"]:
        print(f"machine: {machine()}")
        print_grade_class(int(argv[1]) if len(argv) > 1 else 40)
        return
    paths = [pathlib.Path(a).resolve() for a in argv] or NOTEBOOKS
    print(f"machine: {machine()}")
    ref_fig, ref_step = reference_figure(), reference_step()
    print(f"references: a one-line figure drawn in {ref_fig * 1e3:.1f} ms; one training step of a "
          f"12-layer TinyTransformerLM in {ref_step * 1e3:.1f} ms\n")
    rows = widget_rows(ref_fig)
    width = max(len(r[0]) for r in rows)
    print(f"{'widget callback: first drawing (build + draw)':{width}s}  median ms  x one-line figure")
    for name, t, ratio in rows:
        print(f"{name:{width}s}  {t * 1e3:9.1f}  {ratio:17.1f}")
    rows = move_rows(ref_fig)
    width = max(len(r[0]) for r in rows)
    print(f"\n{'widget: a move of its first control':{width}s}  median ms  x one-line figure")
    for name, t, ratio in rows:
        print(f"{name:{width}s}  {t * 1e3:9.1f}  {ratio:17.1f}")
    print(f"\n{'notebook':44s}  cell time s  wall s  cell time in reference steps")
    total = 0.0
    for path in paths:
        cell, wall = notebook_row(path)
        total += cell
        print(f"{str(path.relative_to(ROOT / 'notebooks')):44s}  {cell:11.1f}  {wall:6.1f}  "
              f"{cell / ref_step:28.0f}")
    print(f"{'total':44s}  {total:11.1f}")
    if not argv:
        print_grade_class(40)


if __name__ == "__main__":
    main(sys.argv[1:])
