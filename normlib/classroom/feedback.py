"""A page of feedback per student, and the command that puts each into that student's home.

``OUT/feedback/<student>.html`` opens offline (inline CSS, no script, everything the student wrote
or printed escaped) and is written in the edition the student answered in (Chinese when most of
their graded notebooks came from ``zh/``). Per assigned exercise: the result and points, late or
not, the mistake named by its code with its message, the checks, the lesson section to reread,
and a follow-up question (its answer folded away).

    python -m normlib.classroom return OUT HOMES [--name week1] [--prefix jupyter-]

copies each page to ``HOMES/<prefix><student>/feedback/<name>.html``. A home is the student's:
nothing in it is followed if it is a symbolic link (the folder and the file are opened with
O_NOFOLLOW, relative to the home's own descriptor), and run as root the copy is made the
student's (the owner of their home), 0600 in a 0700 folder.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

from normlib.exercises import EXERCISES

from .assignment import UNASSIGNED, Assignment, points, status
from .report import FONTS, _e, explanation, lesson_link, private_file, private_folder

__all__ = ["write_feedback", "return_feedback", "TEXT"]

STEMS = {Path(e.notebook).stem: e for e in EXERCISES.values()}
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")

TEXT = {
    "en": {"title": "Feedback", "heading": "Feedback for {student}", "due": "due", "points": "points",
           "passed": "passed: every check passed", "late": "handed in after the deadline",
           "not attempted": "not attempted: the answer cell still raises NotImplementedError",
           "missing": "nothing was handed in", "mistake": "mistake", "checks": "the checks",
           "reread": "Reread", "followup": "A question to go further", "answer": "answer",
           "total": "Total", "notebook": "graded notebook"},
    "zh": {"title": "反馈", "heading": "{student} 的反馈", "due": "截止", "points": "分数",
           "passed": "通过：所有检查都通过了", "late": "截止时间之后提交",
           "not attempted": "未作答：答案单元格仍然抛出 NotImplementedError",
           "missing": "没有提交任何内容", "mistake": "错误", "checks": "各项检查",
           "reread": "请重读", "followup": "进一步思考", "answer": "参考答案",
           "total": "总分", "notebook": "评分的笔记本"},
}
STYLE = f"""
body {{ font-family: {FONTS}; margin: 2em auto; max-width: 50em; padding: 0 1em; color: #222; }}
h1, h2 {{ font-weight: 600; }} h2 {{ border-top: 1px solid #ccc; padding-top: 1em; }}
.pass {{ color: #1a7f37; }} .fail {{ color: #b3261e; }} .muted {{ color: #666; }}
code, pre {{ font-family: ui-monospace, Menlo, Consolas, "Noto Sans Mono CJK SC", monospace; }}
pre {{ background: #f6f6f6; padding: .5em; white-space: pre-wrap; overflow-wrap: anywhere; }}
"""


def _edition(rows: list[dict]) -> str:
    editions = Counter(r["edition"] for r in rows if r.get("notebook"))
    return "zh" if editions["zh"] > editions["en"] else "en"


def _page(student: str, rows: list[dict], assignment: Assignment, lessons_url: str | None
          ) -> str:
    lang = _edition(rows)
    t, zh = TEXT[lang], lang == "zh"
    total = sum(points(r, assignment.possible(r["exercise"])) for r in rows)
    possible = sum(assignment.possible(r["exercise"]) for r in rows)
    out = [f'<!DOCTYPE html><html lang="{"zh-CN" if zh else "en"}"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{t['title']} · {_e(student)}</title><style>{STYLE}</style></head><body>",
           f"<h1>{t['heading'].format(student=_e(student))}</h1>",
           f"<p>{t['total']}: <strong>{total:g} / {possible:g}</strong> {t['points']}"
           + (f" · {t['due']} {_e(assignment.deadline.isoformat(timespec='minutes'))}"
              if assignment.deadline else "") + "</p>"]
    for r in rows:
        exercise = STEMS[r["exercise"]]
        state = status(r)
        score = points(r, assignment.possible(r["exercise"]))
        out.append(f"<h2>{_e(r['exercise'])} · {_e(exercise.title_zh if zh else exercise.title)}"
                   f" — {score:g} / {assignment.possible(r['exercise']):g}</h2>")
        if r.get("notebook"):
            out.append(f'<p class="muted">{t["notebook"]}: {_e(r["notebook"])}'
                       + (f" · {_e(r['submitted_at'])}" if r.get("submitted_at") else "") + "</p>")
        if r.get("late"):
            out.append(f'<p class="fail">{t["late"]}</p>')
        if state == "passed":
            out.append(f'<p class="pass">✓ {t["passed"]}</p>')
        elif state in ("not attempted", "missing"):
            out.append(f'<p class="fail">✗ {t[state]}</p>')
        else:
            message = r["message"]
            if zh:
                message = r.get("message_zh") or (explanation(r["code"]) or (None, None))[1] \
                    or message
            out.append(f'<p class="fail">✗ {t["mistake"]}: <code>{_e(r["code"])}</code></p>'
                       f"<p>{_e(message)}</p>")
            if r.get("checks"):
                out.append(f"<details><summary>{t['checks']}</summary>"
                           f"<pre>{_e(chr(10).join(r['checks']))}</pre></details>")
        taught = lesson_link(exercise.key, lessons_url, zh)
        if taught and state != "passed":
            out.append(f"<p>{t['reread']}: {taught}</p>")
        if exercise.followups:
            q = exercise.followups[0]
            out.append(f"<p><strong>{t['followup']}</strong>: "
                       f"{_e(q.question_zh if zh else q.question)}</p><details><summary>"
                       f"{t['answer']}</summary><p>{_e(q.answer_zh if zh else q.answer)}</p>"
                       "</details>")
    out.append("</body></html>")
    return "\n".join(out)


def write_feedback(rows: list[dict], folder: Path, assignment: Assignment = UNASSIGNED,
                   lessons_url: str | None = None) -> None:
    """``folder/<student>.html`` for every student in ``rows`` (0600 in a 0700 folder)."""
    from .exports import safe_name

    private_folder(folder)
    by_student: dict[str, list[dict]] = {}
    for r in rows:
        by_student.setdefault(r["student"], []).append(r)
    for student, theirs in by_student.items():
        with private_file(folder / f"{safe_name(student)}.html") as f:
            f.write(_page(student, theirs, assignment, lessons_url))


def _check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise ValueError(f"return --name: expected letters, digits, '.', '_' or '-' (not "
                         f"starting with '.'), at most 100, got {name!r}")
    return name


def return_feedback(out: Path, homes: Path, name: str | None = None, prefix: str = ""
                    ) -> list[tuple[str, str]]:
    """Copy every ``out/feedback/<student>.html`` to ``homes/<prefix><student>/feedback/
    <name>.html`` (``name``: the folder ``out``'s name); (student, where it went, or why it was
    skipped or not returned) for each page. A student with no home (never logged in) is skipped;
    a home that is a link or refuses the copy is "not returned"; neither ends the run."""
    out, homes = Path(out), Path(homes)
    pages = out / "feedback"
    if not pages.is_dir():
        raise ValueError(f"return: {pages} does not exist; expected the OUT folder of a grade "
                         "run")
    if not homes.is_dir():
        raise ValueError(f"return: HOMES must be a folder of home folders, got {homes}")
    name = _check_name(name or out.resolve().name)
    done = []
    for page in sorted(pages.glob("*.html")):
        student = page.name[:-len(".html")]
        home = homes / f"{prefix}{student}"
        if not os.path.lexists(home):
            done.append((student, f"skipped: no home {home} (never logged in?)"))
            continue
        try:
            _copy_into(page.read_bytes(), home, name)
            done.append((student, str(home / "feedback" / f"{name}.html")))
        except OSError as exc:
            done.append((student, f"not returned: {home}: {exc.strerror or exc}"))
    return done


def _copy_into(data: bytes, home: Path, name: str) -> None:
    """Write ``data`` to ``home/feedback/<name>.html`` without following any link the student
    made, owned by the home's owner when run as root."""
    home_fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        owner = os.fstat(home_fd)
        try:
            os.mkdir("feedback", 0o700, dir_fd=home_fd)
            if os.geteuid() == 0:
                os.chown("feedback", owner.st_uid, owner.st_gid, dir_fd=home_fd,
                         follow_symlinks=False)
        except FileExistsError:
            pass
        folder_fd = os.open("feedback", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                            dir_fd=home_fd)
        try:
            # a file already there (an earlier copy, or whatever the student put there: a link,
            # a FIFO) is removed, never opened; the new one is created afresh
            try:
                os.unlink(f"{name}.html", dir_fd=folder_fd)
            except FileNotFoundError:
                pass
            fd = os.open(f"{name}.html", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                         0o600, dir_fd=folder_fd)
            with os.fdopen(fd, "wb") as f:
                if os.geteuid() == 0:
                    os.fchown(f.fileno(), owner.st_uid, owner.st_gid)
                os.fchmod(f.fileno(), 0o600)
                f.write(data)
        finally:
            os.close(folder_fd)
    finally:
        os.close(home_fd)
