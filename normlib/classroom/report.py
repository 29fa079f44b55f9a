"""The grader's outputs: gradebook.csv, results.jsonl, one offline report.html, and (through
exports.py and feedback.py) the LMS files and a page per student.

Everything a student wrote (their id, their error messages, what their code printed) is
HTML-escaped; the page makes no outside request (inline CSS and SVG, no script, no web font).
Every text cell of gradebook.csv that a spreadsheet would read as a formula is neutralised. The
files are the lecturer's alone: 0600, in a folder made 0700.
"""

from __future__ import annotations

import csv
import html
import json
import os
from collections import Counter
from pathlib import Path

from normlib.exercises import EXERCISES

from .assignment import UNASSIGNED, Assignment, points, status

__all__ = ["write_gradebook", "write_results", "write_report", "one_line", "private_folder",
           "private_file", "lesson_link", "explanation"]

COLUMNS = ["student", "exercise", "passed", "code", "message", "status", "points", "max_points",
           "submitted_at", "late"]


KEYS = {Path(e.notebook).stem: e for e in EXERCISES.values()}


FONTS = ('system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans CJK SC", "Noto Sans SC", '
         '"Source Han Sans SC", "PingFang SC", "Hiragino Sans GB", "Microsoft YaHei", '
         '"WenQuanYi Micro Hei", sans-serif')
STYLE = f"""
body {{ font-family: {FONTS}; margin: 2em auto; max-width: 60em; padding: 0 1em; color: #222; }}
h1, h2, h3 {{ font-weight: 600; }} h2 {{ border-top: 1px solid #ccc; padding-top: 1em; }}
table {{ border-collapse: collapse; width: 100%; margin: .5em 0 1em; }}
td, th {{ border: 1px solid #ddd; padding: .3em .5em; vertical-align: top; text-align: left; }}
.pass {{ color: #1a7f37; }} .fail {{ color: #b3261e; }}
code, pre {{ font-family: ui-monospace, "Cascadia Mono", Menlo, Consolas, "Noto Sans Mono CJK SC",
  monospace; }}
pre {{ background: #f6f6f6; padding: .5em; white-space: pre-wrap; overflow-wrap: anywhere; }}
.zh {{ color: #444; }} .muted {{ color: #666; }}
"""


def one_line(text) -> str:
    """Text as one line (tabs and line breaks folded to spaces), safe to open in a spreadsheet: a
    cell that starts with = + - @ gets a leading apostrophe."""
    line = " ".join(str(text or "").split())
    return "'" + line if line[:1] in ("=", "+", "-", "@") else line


def private_folder(out: Path) -> None:
    """``out`` created if needed, and made 0700: the grades are the lecturer's alone."""
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(out, 0o700)


def private_file(path: Path, bom: bool = False, **kwargs):
    """``path`` opened for writing text as 0600 (an existing file too), never through a link;
    ``bom``: UTF-8 with a byte-order mark, which Excel needs to read non-ASCII text."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "w", encoding="utf-8-sig" if bom else "utf-8", **kwargs)


def write_gradebook(rows: list[dict], path: Path, assignment: Assignment = UNASSIGNED,
                    bom: bool = False) -> None:
    """One row per student and exercise (long format, for a spreadsheet or a script)."""
    with private_file(path, bom, newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for r in rows:
            possible = assignment.possible(r["exercise"])
            writer.writerow([one_line(r["student"]), one_line(r["exercise"]),
                             "true" if r["passed"] else "false",
                             "" if r["passed"] else one_line(r["code"]), one_line(r["message"]),
                             status(r), f"{points(r, possible):g}", f"{possible:g}",
                             r.get("submitted_at") or "", "true" if r.get("late") else "false"])


def write_results(rows: list[dict], path: Path) -> None:
    with private_file(path) as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def _e(text) -> str:
    return html.escape(str(text if text is not None else ""), quote=True)


def _bars(counts: list[tuple[str, int]], total: int) -> str:
    """An inline SVG bar chart: one bar per mistake code, its length the number of students."""
    width, label, height = 720, 300, 24
    scale = (width - label - 60) / max(total, 1)
    parts = [f'<svg role="img" width="{width}" '
             f'height="{height * len(counts) + 4}" viewBox="0 0 {width} {height * len(counts) + 4}">']
    for i, (code, n) in enumerate(counts):
        y = i * height + 2
        parts.append(f'<text x="{label - 6}" y="{y + 16}" text-anchor="end" font-size="13" '
                     f'font-family="monospace">{_e(code)}</text>'
                     f'<rect x="{label}" y="{y + 3}" width="{max(n * scale, 1):.1f}" height="16" '
                     f'fill="#b3261e"/><text x="{label + n * scale + 6:.1f}" y="{y + 16}" '
                     f'font-size="13">{n}</text>')
    parts.append("</svg>")
    return "".join(parts)


def explanation(code: str) -> tuple[str, str] | None:
    """The code's registered message (English, Chinese), or None for a code not registered."""
    from normlib.exercises.codes import resolve
    try:
        c = resolve(code)
    except KeyError:
        return None
    return c.message, c.message_zh


def _anchor(heading: str) -> str:
    return heading.replace(" ", "-")


def lesson_link(key: str, lessons_url: str | None, zh: bool = False) -> str:
    """The lesson and section that teach exercise ``key`` as HTML: a link into ``lessons_url``
    (the Chinese lesson in its zh/ folder) when one is given, the names alone otherwise."""
    if key not in EXERCISES:
        return ""
    lesson, section = EXERCISES[key].lesson
    text = f"{'notebooks/zh/' if zh else 'notebooks/'}{_e(lesson)} § {_e(section)}"
    if lessons_url is None:
        return text
    href = f"{lessons_url.rstrip('/')}/{'zh/' if zh else ''}{lesson}#{_anchor(section)}"
    return f'<a href="{_e(href)}">{text}</a>'


def _needs_a_look(rows: list[dict]) -> list[str]:
    """The report's section on answers whose text or record suggests tampering (flags.py)."""
    flagged = [r for r in rows if r.get("flags")]
    if not flagged:
        return []
    out = ["<h2>Needs a look · 需要人工查看</h2>",
           "<p>An answer runs beside the checker that judges it, so it could forge its own row "
           "(never another student's: ISOLATION.md). These answers use what such an attempt "
           "needs, or sent a record the grader refused; read them before trusting their rows. "
           "A flag is not a verdict. · 这些答案用到了伪造自身结果所需的手段，或返回了评分程序拒收的"
           "记录：请先读代码再采信其结果。标记不等于判定。</p>",
           "<table><tr><th>student</th><th>exercise</th><th>result</th><th>why</th></tr>"]
    for r in flagged:
        result = "passed" if r["passed"] else r["code"]
        out.append(f"<tr><td>{_e(r['student'])}</td><td>{_e(r['exercise'])}</td>"
                   f"<td><code>{_e(result)}</code></td><td>{_e('; '.join(r['flags']))}</td></tr>")
    out.append("</table>")
    return out


def _similar(pairs) -> list[str]:
    """The report's section on pairs of answers that are alike (similarity.py), side by side."""
    if not pairs:
        return []
    out = ["<h2>Similar answers · 相似的答案</h2>",
           "<p>Answers to the same exercise that are alike once names, comments and layout are "
           "set aside (the notebook's stub and what half the class writes do not count). A pair "
           "is a reason to read both, not a verdict: a short exercise has few ways to be right. "
           "· 去掉变量名、注释和排版差异后仍然相似的答案（练习自带的代码框架和半数同学都会写的"
           "写法不计入）。这只是请你对照阅读的理由，不是结论。</p>"]
    for p in pairs:
        a, b = p.students
        out.append(f"<h3>{_e(p.exercise)}: {_e(a)} · {_e(b)} — {p.score:.0%}</h3>"
                   '<table><tr>'
                   f"<th>{_e(a)}</th><th>{_e(b)}</th></tr><tr>"
                   f"<td><pre>{_e(p.answers[0])}</pre></td><td><pre>{_e(p.answers[1])}</pre></td>"
                   "</tr></table>")
    return out


def write_report(rows: list[dict], path: Path, lessons_url: str | None = None,
                 complete: bool = True, assignment: Assignment = UNASSIGNED,
                 similar=()) -> None:
    """report.html: the headline (passed of the attempted answers; not attempted and missing
    apart); per exercise a chart of the class's mistakes with their explanations (English and
    Chinese) and the lesson section that teaches them; the answers that need a look; the similar
    pairs; then one section per student. An incomplete run says so at the top."""
    students = list(dict.fromkeys(r["student"] for r in rows))
    stems = list(dict.fromkeys(r["exercise"] for r in rows))
    sid = {s: f"student-{i}" for i, s in enumerate(students)}
    counts = Counter(status(r) for r in rows)
    attempted = counts["passed"] + counts["failed"]
    late = sum(bool(r.get("late")) for r in rows)
    due = (f" · due {_e(assignment.deadline.isoformat(timespec='minutes'))}, {late} late"
           if assignment.deadline else "")
    out = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           "<title>Class report · 班级报告</title>", f"<style>{STYLE}</style></head><body>",
           "<h1>Class report · 班级报告</h1>",
           f"<p>{len(students)} students · {len(stems)} exercises{due} · "
           f"<strong>{counts['passed']} of {attempted} attempted answers passed</strong> · "
           f"{counts['not attempted']} not attempted · {counts['missing']} missing "
           f"(nothing handed in).</p>"]
    if assignment.roster:
        extra = [s for s in students if s not in assignment.roster.extra]
        if extra:
            out.append(f"<p>Not on the roster, graded anyway · 不在名单上（仍已评分）："
                       f"{_e(', '.join(extra))}</p>")
    if not complete:
        left = sum(r["code"] == "submission.not_graded" for r in rows)
        out.append(f'<p class="fail"><strong>Incomplete · 未完成</strong>: the run was stopped; '
                   f"{left} answers were not graded (<code>submission.not_graded</code>). "
                   f"· 评分被中止，{left} 份答案未评分。</p>")
    out.append("<h2>Exercises · 练习</h2><table><tr><th>exercise</th><th>passed</th>"
               "<th>failed</th><th>not attempted</th><th>missing</th>"
               "<th>most common mistake</th></tr>")
    by_stem = {s: [r for r in rows if r["exercise"] == s] for s in stems}
    for stem in stems:
        rs = by_stem[stem]
        n = Counter(status(r) for r in rs)
        common = Counter(r["code"] for r in rs if status(r) == "failed").most_common(1)
        out.append(f'<tr><td><a href="#{_e(stem)}">{_e(stem)}</a></td>'
                   f"<td>{n['passed']} / {n['passed'] + n['failed']}</td><td>{n['failed']}</td>"
                   f"<td>{n['not attempted']}</td><td>{n['missing']}</td>"
                   f"<td><code>{_e(common[0][0]) if common else ''}</code></td></tr>")
    out.append("</table>")
    for stem in stems:
        rs, exercise = by_stem[stem], KEYS[stem]
        out.append(f'<h2 id="{_e(stem)}">{_e(stem)} · {_e(exercise.title)} · '
                   f'<span class="zh">{_e(exercise.title_zh)}</span></h2>')
        taught = lesson_link(exercise.key, lessons_url)
        if taught:
            out.append(f"<p>Taught in · 讲解：{taught}</p>")
        n = Counter(status(r) for r in rs)
        out.append(f'<p><span class="pass">{n["passed"]} passed</span> · '
                   f'<span class="fail">{n["failed"]} failed</span> of '
                   f'{n["passed"] + n["failed"]} who attempted it · {n["not attempted"]} not '
                   f'attempted · {n["missing"]} missing</p>')
        counts = Counter(r["code"] for r in rs if status(r) == "failed").most_common()
        if counts:
            out.append(_bars(counts, len(rs)))
            out.append("<table><tr><th>code</th><th>students</th><th>what it means · 含义</th></tr>")
            for code, n in counts:
                first = next(r for r in rs if r["code"] == code)
                en, zh = explanation(code) or (first["message"], first.get("message_zh"))
                zh = f'<br><span class="zh">{_e(zh)}</span>' if zh else ""
                who = ", ".join(f'<a href="#{sid[r["student"]]}">{_e(r["student"])}</a>'
                                for r in rs if r["code"] == code)
                out.append(f"<tr><td><code>{_e(code)}</code></td><td>{n}: {who}</td>"
                           f"<td>{_e(en)}{zh}</td></tr>")
            out.append("</table>")
    out += _needs_a_look(rows)
    out += _similar(similar)
    out.append("<h2>Students · 学生</h2>")
    for student in students:
        out.append(f'<h3 id="{sid[student]}">{_e(student)}</h3><table><tr><th>exercise</th>'
                   "<th>result</th><th>points</th><th>feedback · 反馈</th></tr>")
        for r in (r for r in rows if r["student"] == student):
            mark = '<span class="pass">✓ passed</span>' if r["passed"] else \
                f'<span class="fail">✗</span> <code>{_e(r["code"])}</code>'
            if r.get("late"):
                mark += f' <span class="fail">late · 迟交 ({_e(r["submitted_at"])})</span>'
            possible = assignment.possible(r["exercise"])
            score = f"{points(r, possible):g} / {possible:g}"
            zh = f'<br><span class="zh">{_e(r["message_zh"])}</span>' if r.get("message_zh") \
                else ""
            details = ""
            if r.get("checks") or r.get("output"):
                body = _e("\n".join(r.get("checks") or []))
                if r.get("output"):
                    body += "\n\n" + _e("printed:\n" + r["output"])
                details = f"<details><summary>checks</summary><pre>{body}</pre></details>"
            edition = f' <span class="muted">({_e(r["notebook"])})</span>' if r.get("notebook") \
                else ""
            out.append(f"<tr><td>{_e(r['exercise'])}{edition}</td><td>{mark}</td>"
                       f"<td>{score}</td><td>{_e(r['message'])}{zh}{details}</td></tr>")
        out.append("</table>")
    out.append("</body></html>")
    with private_file(path) as f:
        f.write("\n".join(out))
