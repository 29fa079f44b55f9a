"""Build the repository a class clones: lessons, editable practice notebooks, normlib; no answers.

    python -m tools.course DEST          (make course DEST=folder)

DEST becomes a git repository of its own (none of this repository's history) holding:

    README.md, README.zh-CN.md        for students: what is where, what is collected, updates
    .gitignore                        caches, checkpoints, and the lecturer's submissions/, graded/
    pyproject.toml, requirements.txt  so the hub installs normlib from the course
    normlib/                          the library, as in this checkout
    notebooks/, notebooks/zh/         the lessons with their saved outputs (a link to a practice
                                      notebook leads to practice/)
    practice/, practice/zh/           the practice notebooks as tools.workspace copies them (outputs
                                      cleared, editable), each opening with a classroom banner

and nothing else: not notebooks/exercises/ (the solutions live there), tests/, tools/ or docs/.

The first run commits once. A later run on DEST (an earlier build, or a clone of the course
repository) adds one commit on top of its history and never rewrites it: students' copies follow
it through nbgitpuller, which cannot merge a rewritten history (docs/classroom.md, "The merge rule").
Two kinds of files:

- *Rebuilt* every run: normlib/, notebooks/ (files the collection no longer has are removed),
  pyproject.toml, requirements.txt, .gitignore. Students read these and do not write in them.
- *Released once*: the practice notebooks and the READMEs. A file already in DEST is never
  rewritten, even when the collection's version has changed since. nbgitpuller merges a released
  notebook line by line and the student's lines win, so a rewritten practice notebook would reach
  each student half applied (a new check cell under their old answer); the run names such files
  instead, and a changed exercise is released as a new file. The READMEs are the lecturer's to edit.

DEST must be a new or empty folder, or a git work tree with nothing uncommitted (the run commits
everything it changed, and nothing of yours by accident), and never inside this repository.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from tools import workspace

__all__ = ["build", "rebuilt_files", "practice_files", "main", "Built"]

ROOT = Path(__file__).resolve().parents[1]
REBUILT_FOLDERS = ("normlib", "notebooks")
BANNER_ID = "classroom-banner"
# The lessons link a practice notebook as exercises/NN_x.ipynb (relative to notebooks/ and
# notebooks/zh/); in the course the learner's editable copy is in practice/ and practice/zh/.
PRACTICE_LINK = re.compile(r"\]\(exercises/")
LESSONS = {"notebooks": "](../practice/", "notebooks/zh": "](../../practice/zh/"}
# pyproject.toml's sections that build and describe the package; the rest configures this
# repository's own tests and linters.
PACKAGING = re.compile(r"(build-system|project|project\..*|tool\.setuptools(\..*)?)")

GITIGNORE = """\
# Jupyter and Python leave these beside the notebooks; nbgitpuller would commit them in every home.
.ipynb_checkpoints/
.virtual_documents/
__pycache__/
*.egg-info/
build/
# The lecturer's collected notebooks and grades: never published to the class.
submissions/
graded/
# The drill's record of each student's attempts (normlib/exercises/history.py): theirs alone.
drill_history.jsonl
"""

BANNERS = {
    ("en", True): """\
> **Your copy for this class: answer here.** This notebook is yours to edit. Write your answer in \
the cell marked `# YOUR CODE HERE` (in place of `raise NotImplementedError`), then run the cells \
from the top (`Run › Run All Cells`): the check cell names your mistake, or says that every \
check passed. Save with Ctrl+S (⌘S on a Mac).
>
> **What your lecturer collects:** the saved `{path}` in your course folder (the Chinese edition \
is in `practice/zh/`). The grader, `python -m normlib.classroom grade`, runs your answer cell \
alone, after the `import` lines of the cells above it, with this exercise's checker (the one the \
check cell calls), and records the mistake it names. So keep helper functions inside the answer \
cell, keep the file's name (it tells the grader which exercise this is), and save: only the saved \
file counts, as it is when your lecturer collects it at the deadline (a save after the deadline is \
marked late). If you answer in both editions, the copy saved last counts; if your lecturer releases \
a new version of this exercise (`..._v2.ipynb`), answer there: the highest version counts.
>
> **Updates keep your work.** When your lecturer releases new material and you open a course link \
again, nbgitpuller merges it into your folder: your edits stay, and where you and your lecturer \
changed the same lines, your version wins. This notebook is never replaced: a changed exercise \
comes as a new file. A notebook you delete comes back, fresh, the next time you open a link.""",
    ("en", False): """\
> **Your copy for this class.** The drill is for your own practice: it draws an exercise, times \
you and checks your answer. Nothing in it is collected or graded; your lecturer collects the \
numbered practice notebooks in `practice/` (the Chinese edition in `practice/zh/`). Save with \
Ctrl+S (⌘S on a Mac).
>
> **Updates keep your work.** When your lecturer releases new material and you open a course link \
again, nbgitpuller merges it into your folder: your edits stay, and where you and your lecturer \
changed the same lines, your version wins. A notebook you delete comes back, fresh, the next time \
you open a link.""",
    ("zh", True): """\
> **这是你在本课程里的副本：就在这里作答。** 这个笔记本可以随意编辑。在标有 `# YOUR CODE HERE` 的\
单元格里写出你的答案（替换掉 `raise NotImplementedError`），然后从头运行各单元格\
（`Run › Run All Cells`）：检查单元格会指出你犯的是哪种错误，全部通过时也会告诉你。用 Ctrl+S\
（Mac 上是 ⌘S）保存。
>
> **老师收取的是：** 你课程文件夹里保存下来的 `{path}`（英文版在 `practice/`）。评分器\
（`python -m normlib.classroom grade`）只运行你的答案单元格：先执行它上面各单元格里的 `import` 语句，\
再用这道练习的检查器（也就是检查单元格调用的那个）检查它，并记下检查器指出的错误。所以辅助函数也要\
写在答案单元格里；不要改文件名（评分器靠文件名认出是哪道练习）；记得保存：只有保存下来的文件才算数，\
以老师在截止时刻收取时的样子为准（截止之后才保存的会标为迟交）。如果中英文两个版本你都作答了，以最后保存\
的那份为准；如果老师发布了这道练习的新版本（`..._v2.ipynb`），请在新版本里作答：以版本号最高的为准。
>
> **更新不会丢掉你的成果。** 老师发布新材料后，你再次打开课程链接时，nbgitpuller 会把新内容合并进\
你的文件夹：你的改动都会保留；你和老师改了同一些行时，以你的版本为准。这个笔记本不会被替换：改动过的\
练习会作为新文件发布。删掉的笔记本会在你下次打开链接时恢复成一份全新的。""",
    ("zh", False): """\
> **这是你在本课程里的副本。** 面试演练供你自己练习：它随机抽一道练习、计时并检查你的答案。这里的\
内容不会被收取，也不评分；老师收取的是 `practice/zh/` 里带编号的练习笔记本（英文版在 `practice/`）。\
用 Ctrl+S（Mac 上是 ⌘S）保存。
>
> **更新不会丢掉你的成果。** 老师发布新材料后，你再次打开课程链接时，nbgitpuller 会把新内容合并进\
你的文件夹：你的改动都会保留；你和老师改了同一些行时，以你的版本为准。删掉的笔记本会在你下次打开\
链接时恢复成一份全新的。""",
}

README = """\
# {title}

{intro}

| {where} | |
|---|---|
{rows}

{rest}
"""

READMES = {
    "README.md": dict(
        title="Transformer building blocks: the course",
        intro="Lessons you read and run, and practice notebooks you answer in. 中文版："
              "[README.zh-CN.md](README.zh-CN.md).",
        where="where",
        rows=[("`notebooks/`", "the lessons, with their outputs (the Chinese edition in "
                               "`notebooks/zh/`)"),
              ("`practice/`", "your practice notebooks: answer here (the Chinese edition in "
                              "`practice/zh/`)"),
              ("`normlib/`", "the library the lessons and the checkers use")],
        rest="""\
**Answering.** Open a practice notebook, write your answer in the cell marked
`# YOUR CODE HERE`, run the notebook from the top and save. Its check cell runs the same checker
your lecturer's grader uses, and names your mistake, if any.

**What is collected.** Your lecturer collects the saved practice notebooks in `practice/`
(and `practice/zh/`) from your course folder on the hub. Each notebook's first cell says what the
grader reads.

**Updates.** Your lecturer's links bring new material: nbgitpuller merges it into this folder and
keeps your edits (where you and your lecturer changed the same lines, your version wins). A
practice notebook is never replaced; a changed exercise comes as a new file.

**On your own computer** (Python 3.11 or newer), from this folder:

```bash
python -m venv .venv && .venv/bin/pip install -c requirements.txt '.[hf,lab]'
.venv/bin/jupyter lab
```"""),
    "README.zh-CN.md": dict(
        title="Transformer 的基本模块：课程",
        intro="这里有供你阅读和运行的课程，以及供你作答的练习笔记本。English: [README.md](README.md).",
        where="位置",
        rows=[("`notebooks/`", "各课的笔记本，带运行结果（中文版在 `notebooks/zh/`）"),
              ("`practice/`", "你的练习笔记本：在这里作答（中文版在 `practice/zh/`）"),
              ("`normlib/`", "课程和检查器用到的库")],
        rest="""\
**怎么作答。** 打开一个练习笔记本，在标有 `# YOUR CODE HERE` 的单元格里写出答案，从头运行整个笔记本，
然后保存。它的检查单元格运行的检查器和老师评分时用的是同一个，会指出你犯的是哪种错误。

**收取什么。** 老师从 Hub 上你的课程文件夹里收取 `practice/`（以及 `practice/zh/`）中保存下来的练习
笔记本。每个笔记本的第一个单元格说明了评分器读取的是什么。

**更新。** 老师发的链接会带来新材料：nbgitpuller 把它合并进这个文件夹，并保留你的改动（你和老师改了
同一些行时，以你的版本为准）。练习笔记本不会被替换；改动过的练习会作为新文件发布。

**在自己的电脑上**（Python 3.11 或更新版本），在这个文件夹里运行：

```bash
python -m venv .venv && .venv/bin/pip install -c requirements.txt '.[hf,lab]'
.venv/bin/jupyter lab
```"""),
}


@dataclass
class Built:
    """What one run did: the files it wrote or removed, the released files it kept although the
    collection's version differs, and the commit it made (None when nothing changed)."""

    dest: Path
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    kept_changed: list[str] = field(default_factory=list)
    commit: str | None = None


def _git(dest: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(dest), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {dest}: {done.stderr.strip()}")
    return done.stdout


def _check_dest(dest: Path) -> bool:
    """Refuse a DEST this tool must not write to; True when DEST is already a git work tree."""
    resolved = dest.resolve()
    if resolved == ROOT or ROOT in resolved.parents:
        raise ValueError(f"tools.course: DEST must be outside this repository ({ROOT}), got "
                         f"{dest}: the course is a repository of its own")
    if not dest.exists():
        return False
    if not dest.is_dir():
        raise ValueError(f"tools.course: DEST must be a folder, got the file {dest}")
    if not (dest / ".git").exists():
        if any(dest.iterdir()):
            raise ValueError(f"tools.course: DEST must be a new or empty folder or a course "
                             f"repository (a git work tree), got {dest}, which holds files and "
                             f"no .git")
        return False
    if _git(dest, "status", "--porcelain"):
        raise ValueError(f"tools.course: DEST must have nothing uncommitted, got {dest} with "
                         f"changes (`git -C {dest} status`): commit or remove them first")
    return True


def _lessons() -> dict[str, bytes]:
    files = {}
    for folder, practice in LESSONS.items():
        for path in sorted((ROOT / folder).glob("*.ipynb")) + sorted((ROOT / folder).glob("*.md")):
            text = PRACTICE_LINK.sub(practice, path.read_text(encoding="utf-8"))
            files[f"{folder}/{path.name}"] = text.encode("utf-8")
    return files


def _packaging() -> bytes:
    kept, keep = [], True
    for line in (ROOT / "pyproject.toml").read_text(encoding="utf-8").splitlines(keepends=True):
        header = re.fullmatch(r"\[([^\]]+)\]\s*", line)
        if header:
            keep = bool(PACKAGING.fullmatch(header.group(1)))
        if keep:
            kept.append(line)
    return "".join(kept).rstrip("\n").encode("utf-8") + b"\n"


def rebuilt_files() -> dict[str, bytes]:
    """The files every run writes afresh, by their path in the course."""
    files = {path.relative_to(ROOT).as_posix(): path.read_bytes()
             for path in sorted((ROOT / "normlib").rglob("*"))
             if path.is_file() and "__pycache__" not in path.parts}
    files.update(_lessons())
    files["pyproject.toml"] = _packaging()
    files["requirements.txt"] = (ROOT / "requirements.txt").read_bytes()
    files[".gitignore"] = GITIGNORE.encode("utf-8")
    return files


def _banner(path: str, zh: bool, exercise: bool) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_markdown_cell(BANNERS["zh" if zh else "en", exercise].format(path=path))
    cell.id = BANNER_ID
    return cell


def practice_files() -> dict[str, bytes]:
    """The practice notebooks, by their path in the course: copied as ``make exercises`` copies
    them (tools.workspace), the generator's banner (which points to ``make exercises`` and the
    solutions) replaced by the classroom banner."""
    files = {}
    with tempfile.TemporaryDirectory() as staging:
        practice = Path(staging) / "practice"
        for source, target in workspace.editions(ROOT, practice):
            workspace.copy_exercises(source, target)
        for path in sorted(practice.rglob("*.ipynb")):
            name = path.relative_to(staging).as_posix()
            nb = nbformat.read(path, as_version=4)
            exercise = "generated_from" in nb.metadata.pop("normlib", {})
            nb.cells = [c for c in nb.cells if c.get("id") != "generated-banner"]
            nb.cells.insert(0, _banner(name, path.parent.name == "zh", exercise))
            files[name] = (nbformat.writes(nb) + "\n").encode("utf-8")
    return files


def _readmes() -> dict[str, bytes]:
    return {name: README.format(
        title=parts["title"], intro=parts["intro"], where=parts["where"], rest=parts["rest"],
        rows="\n".join(f"| {path} | {what} |" for path, what in parts["rows"])).encode("utf-8")
        for name, parts in READMES.items()}


def _write(dest: Path, name: str, data: bytes) -> None:
    path = dest / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def build(dest: Path) -> Built:
    """Build or update the course in ``dest`` and commit (see the module docstring)."""
    dest = Path(dest)
    existing = _check_dest(dest)
    if not existing:
        dest.mkdir(parents=True, exist_ok=True)
        _git(dest, "init", "--quiet", "--initial-branch=main")
    # Who commits is asked before anything is written: a commit refused at the end would leave
    # files uncommitted in DEST, and the next run refuses a DEST with uncommitted files.
    for ident in ("GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"):
        _git(dest, "var", ident)
    built = Built(dest)
    rebuilt = rebuilt_files()
    tracked = _git(dest, "ls-files", "-z", "--", *REBUILT_FOLDERS).split("\0") if existing else []
    for name in sorted(set(filter(None, tracked)) - set(rebuilt)):
        (dest / name).unlink()
        built.removed.append(name)
    for name, data in rebuilt.items():
        if not (dest / name).is_file() or (dest / name).read_bytes() != data:
            _write(dest, name, data)
            built.written.append(name)
    for name, data in {**practice_files(), **_readmes()}.items():
        if not (dest / name).exists():
            _write(dest, name, data)
            built.written.append(name)
        elif (dest / name).read_bytes() != data:
            built.kept_changed.append(name)
    _git(dest, "add", "--all")
    if _git(dest, "status", "--porcelain"):
        source = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                                capture_output=True, text=True).stdout.strip() or "a copy"
        _git(dest, "commit", "--quiet", "-m",
             f"Course built by tools.course from the collection at {source}: "
             f"{len(built.written)} files written, {len(built.removed)} removed")
        built.commit = _git(dest, "rev-parse", "HEAD").strip()
    return built


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.course",
        description="Build the repository a class clones (lessons, practice notebooks with a "
                    "classroom banner, normlib; no solutions, tests or tools) into DEST, as a "
                    "new commit.")
    parser.add_argument("dest", type=Path, help="a new folder, or an earlier build of the course")
    args = parser.parse_args(argv)
    try:
        built = build(args.dest)
    except (ValueError, RuntimeError) as exc:
        print(exc, file=sys.stderr)
        return 2
    for name in built.kept_changed:
        print(f"kept     {name} (released before; the collection's version differs: release a "
              f"changed exercise as a new file)")
    print(f"{len(built.written)} files written, {len(built.removed)} removed, "
          f"{len(built.kept_changed)} released files kept as they were.")
    if built.commit is None:
        print(f"Nothing changed: no commit in {args.dest}.")
    else:
        print(f"Committed {built.commit[:12]} in {args.dest}. Publish it with "
              f"`git -C {args.dest} push` (first time: add a remote, then "
              f"`git -C {args.dest} push -u origin main`).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
