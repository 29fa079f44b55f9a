"""Build the learner notebooks from the solution notebooks, with nbgrader's markers.

    notebooks/exercises/solutions/NN_name.ipynb   the source of truth (committed, executed)
      -> notebooks/exercises/NN_name.ipynb        generated for learners (committed, executed)

In code cells, each block from ``### BEGIN SOLUTION`` to ``### END SOLUTION`` becomes
``# YOUR CODE HERE`` + ``raise NotImplementedError`` at the marker's indentation, and each block from
``### BEGIN HIDDEN TESTS`` to ``### END HIDDEN TESTS`` is removed. Cells tagged ``solution-only``
are dropped, and a banner cell says where the notebook comes from.

The words come from the exercise's text file (normlib/exercises/text/KEY.toml), not from the
notebook: the solution notebook's task paragraphs (``**Task.** ...`` and ``**任务。** ...``) and
its interview-questions cell are written from it (``with_text``), so the drill, the grader and the
notebooks can never state two tasks.

Only *sources* are compared (cell type, source, tags), never outputs: a learner notebook is out of
date when its cells differ from what the solution notebook generates today, and a solution notebook
when its task or follow-ups differ from its text file.

The generated notebooks are read-only in JupyterLab (cell metadata ``editable: false``) and start
with a line pointing to ``make exercises``. Each records the SHA-256 of the sources it was
generated with; a notebook whose sources no longer match that record was edited by a person, and
the generator moves it into ``workspace/`` (under a free name) before writing the new one, so work
typed there is never lost.

    python -m tools.generate_exercises             # rewrite the learner notebooks that changed
    python -m tools.generate_exercises --execute   # ... and execute them (outputs for nbval)
    python -m tools.generate_exercises --check     # exit 1 if any is out of date (make test)
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

from normlib.exercises import EXERCISES

__all__ = ["strip_solutions", "with_text", "learner_notebook", "out_of_date", "edited", "generate",
           "main"]

ROOT = Path(__file__).resolve().parents[1]
EXERCISES_DIR = Path("notebooks") / "exercises"
MARKERS = {"### BEGIN SOLUTION": "solution", "### BEGIN HIDDEN TESTS": "hidden"}
ENDS = {"solution": "### END SOLUTION", "hidden": "### END HIDDEN TESTS"}
WORKSPACE = Path("workspace")
BANNER = ("> **Read-only here: run `make exercises` and solve this in your copy in `workspace/`.**\n"
          ">\n"
          "> **Practice notebook**, generated from `notebooks/exercises/solutions/{name}` by "
          "`python -m tools.generate_exercises` (edit the solution notebook, not this file). "
          "Work in your own copy: `make exercises` puts one in `workspace/`, which updates of the "
          "collection never overwrite, and `make practice` opens JupyterLab there. Stuck? The "
          "solution notebook has the answer.")


def strip_solutions(source: str, *, markdown: bool = False) -> str:
    """Replace solution blocks and remove hidden-test blocks (see the module docstring)."""
    out, inside = [], None
    for number, line in enumerate(source.splitlines(), 1):
        mark = line.strip()
        if inside is None and mark in MARKERS:
            inside = MARKERS[mark]
            if inside == "solution":
                indent = line[: len(line) - len(line.lstrip())]
                out += [indent + "YOUR ANSWER HERE"] if markdown else \
                    [indent + "# YOUR CODE HERE", indent + "raise NotImplementedError"]
        elif inside is not None and mark == ENDS[inside]:
            inside = None
        elif mark in ENDS.values() or (inside is not None and mark in MARKERS):
            raise ValueError(f"strip_solutions: unexpected {mark!r} at line {number}")
        elif inside is None:
            out.append(line)
    if inside is not None:
        raise ValueError(f"strip_solutions: {ENDS[inside]!r} missing")
    return "\n".join(out)


FOLLOWUPS_HEADING = "## Interview questions · 面试追问"
_TASK = re.compile(r"\*\*Task\.\*\* [^\n]*\n\n\*\*任务。\*\* [^\n]*")


def followups_markdown(text) -> str:
    """The interview-questions cell of an exercise's notebook, from its text's follow-ups."""
    lines = [FOLLOWUPS_HEADING, "", "What an interviewer asks once your code runs. Answer out loud "
             "first, then open the answer.", ""]
    for i, f in enumerate(text.followups, 1):
        lines += [f"**{i}. {f.question}**  ", f.question_zh, "",
                  "<details><summary>Answer · 参考答案</summary>", "", f.answer, "", f.answer_zh,
                  "", "</details>", ""]
    return "\n".join(lines).rstrip()


def with_text(solution: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """The solution notebook ``name`` with its task paragraphs and interview-questions cell written
    from its exercise's text file (unchanged when no registered exercise has that notebook)."""
    text = next((e.text for e in EXERCISES.values() if e.notebook == name), None)
    if text is None:
        return solution
    nb = copy.deepcopy(solution)
    task = f"**Task.** {text.task}\n\n**任务。** {text.task_zh}"
    tasks = [c for c in nb.cells if c.cell_type == "markdown" and _TASK.search(c.source)]
    asks = [c for c in nb.cells if c.cell_type == "markdown"
            and c.source.startswith(FOLLOWUPS_HEADING)]
    if len(tasks) != 1 or len(asks) != 1:
        raise ValueError(f"with_text: {name} needs one markdown cell with the paragraphs "
                         "'**Task.** ...' and '**任务。** ...' and one starting "
                         f"{FOLLOWUPS_HEADING!r}; found {len(tasks)} and {len(asks)}")
    tasks[0].source = _TASK.sub(lambda _: task, tasks[0].source)
    asks[0].source = followups_markdown(text)
    return nb


def learner_notebook(solution: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """The learner version of a solution notebook (no outputs)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata = {k: copy.deepcopy(v) for k, v in solution.metadata.items() if k != "widgets"}
    nb.metadata["normlib"] = {"generated_from": f"solutions/{name}"}
    banner = nbformat.v4.new_markdown_cell(BANNER.format(name=name))
    banner.id = "generated-banner"
    nb.cells.append(banner)
    for cell in solution.cells:
        tags = cell.metadata.get("tags", [])
        if "solution-only" in tags:
            continue
        if cell.cell_type == "code":
            new = nbformat.v4.new_code_cell(strip_solutions(cell.source))
        elif cell.cell_type == "markdown":
            new = nbformat.v4.new_markdown_cell(strip_solutions(cell.source, markdown=True))
        else:
            new = nbformat.v4.new_raw_cell(cell.source)
        new.id = cell.get("id", new.id)
        new.metadata = copy.deepcopy({k: v for k, v in cell.metadata.items()
                                      if k not in ("execution",)})
        nb.cells.append(new)
    for cell in nb.cells:
        cell.metadata["editable"] = False          # JupyterLab: read-only; work in workspace/
    nb.metadata["normlib"]["sources_sha256"] = _digest(nb)
    return nb


def _digest(nb) -> str:
    return hashlib.sha256(json.dumps(_sources(nb)).encode()).hexdigest()


def _sources(nb) -> list[tuple]:
    return [(c.cell_type, c.source, tuple(c.metadata.get("tags", []))) for c in nb.cells]


def _pairs(root: Path):
    folder = root / EXERCISES_DIR
    for solution in sorted((folder / "solutions").glob("*.ipynb")):
        yield solution, folder / solution.name


def _up_to_date(learner: Path, want) -> bool:
    if not learner.exists():
        return False
    nb = nbformat.read(learner, as_version=4)
    return _sources(nb) == _sources(want) and nb.metadata.get("normlib") == want.metadata["normlib"]


def out_of_date(root: Path = ROOT) -> list[str]:
    """Learner notebooks (paths relative to root) that differ from their generated version, are
    missing, or were generated from a solution notebook that no longer exists."""
    stale = []
    for solution, learner in _pairs(root):
        nb = nbformat.read(solution, as_version=4)
        if _sources(with_text(nb, solution.name)) != _sources(nb):
            stale.append(f"{solution.relative_to(root)} (its task or follow-ups differ from "
                         "normlib/exercises/text/)")
        want = learner_notebook(nb, solution.name)
        if not _up_to_date(learner, want):
            stale.append(str(learner.relative_to(root)))
    for learner in sorted((root / EXERCISES_DIR).glob("*.ipynb")):
        origin = nbformat.read(learner, as_version=4).metadata.get("normlib", {})
        if origin.get("generated_from") and not (learner.parent / origin["generated_from"]).exists():
            stale.append(str(learner.relative_to(root)))
    return stale


def edited(path: Path) -> bool:
    """True when the notebook at ``path`` is not what the generator wrote: its sources differ from
    the digest it recorded (or it records none)."""
    nb = nbformat.read(path, as_version=4)
    return nb.metadata.get("normlib", {}).get("sources_sha256") != _digest(nb)


def _keep(path: Path, root: Path) -> Path:
    """Move an edited practice notebook into workspace/ under a name not taken yet."""
    folder = root / WORKSPACE
    folder.mkdir(exist_ok=True)
    target, n = folder / f"{path.stem}.edited.ipynb", 2
    while target.exists():
        target, n = folder / f"{path.stem}.edited-{n}.ipynb", n + 1
    shutil.move(path, target)
    return target


def generate(root: Path = ROOT) -> list[Path]:
    """Write every learner notebook whose sources changed; return the paths written. A notebook
    edited by hand is first moved into workspace/ (and named on stdout)."""
    written = []
    for solution, learner in _pairs(root):
        nb = nbformat.read(solution, as_version=4)
        texted = with_text(nb, solution.name)
        if _sources(texted) != _sources(nb):
            nbformat.write(texted, solution)
            written.append(solution)
        want = learner_notebook(texted, solution.name)
        if _up_to_date(learner, want):
            continue
        if learner.exists() and edited(learner):
            kept = _keep(learner, root)
            print(f"{learner.relative_to(root)} was edited by hand: your version is kept as "
                  f"{kept.relative_to(root)}")
        nbformat.validate(want)
        nbformat.write(want, learner)
        written.append(learner)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.generate_exercises",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if any is out of date")
    parser.add_argument("--execute", action="store_true", help="execute the notebooks written")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    args = parser.parse_args(argv)
    if args.check:
        stale = out_of_date(args.root)
        for path in stale:
            hand = (args.root / path).exists() and edited(args.root / path)
            print(f"out of date: {path}" + (" (edited by hand: `make generate-exercises` moves "
                                             "your version into workspace/ first)" if hand else ""))
        if stale:
            print("Run `make generate-exercises` (python -m tools.generate_exercises --execute).")
            return 1
        print("learner notebooks are up to date")
        return 0
    written = generate(args.root)
    for path in written:
        print(f"wrote {path.relative_to(args.root)}")
    if not written:
        print("learner notebooks are up to date")
    elif args.execute:
        subprocess.run([sys.executable, "-m", "nbconvert", "--to", "notebook",
                        "--execute", "--inplace", "--ExecutePreprocessor.timeout=300",
                        *map(str, written)], check=True, cwd=args.root)
    else:
        print("Now execute them: make execute NB=\"" + " ".join(
            str(p.relative_to(args.root)) for p in written) + "\"")
    return 0


if __name__ == "__main__":
    sys.exit(main())
