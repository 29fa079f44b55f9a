"""The grader's outputs: gradebook.csv, results.jsonl and one offline report.html.

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

__all__ = ["write_all", "write_gradebook", "write_results", "write_report", "LESSONS", "one_line",
           "private_folder"]

COLUMNS = ["student", "exercise", "passed", "code", "message"]
KEYS = {Path(e.notebook).stem: e for e in EXERCISES.values()}

# Where the collection teaches what each exercise practises: (lesson notebook, section heading).
LESSONS = {
    "layer_norm": ("03_layernorm_and_rmsnorm.ipynb", "2 · Write them from scratch (手撕)"),
    "batch_norm": ("02_batchnorm_vs_layernorm.ipynb", "3 · BatchNorm and LayerNorm from scratch (手撕)"),
    "rms_norm": ("03_layernorm_and_rmsnorm.ipynb", "2 · Write them from scratch (手撕)"),
    "deep_norm": ("05_deepnorm.ipynb", "1 · The rule: $\\alpha$ at run time, $\\beta$ at initialization"),
    "swiglu_ffn": ("07_glu_and_ffn.ipynb", "2 · GLU and its variants: one projection gates the other"),
    "rope": ("08_rope.ipynb", "3 · RoPE on a whole head, from scratch"),
    "warmup_cosine": ("04_prenorm_postnorm_warmup.ipynb", "3 · Learning-rate warmup (学习率预热) schedules"),
    "gelu_tanh": ("06_activations.ipynb", "6 · GELU: the input weighted by the chance that it is larger than other inputs"),
    "attention": ("10_attention.ipynb", "1 · Scaled dot-product attention in four lines"),
    "layer_norm_backward": ("03_layernorm_and_rmsnorm.ipynb", "2 · Write them from scratch (手撕)"),
    "multi_head_attention": ("10_attention.ipynb", "4 · Multi-head attention: the reshapes"),
    "llama_block": ("10_attention.ipynb", "8 · The same numbers as Hugging Face's LLaMA"),
    "online_softmax_attention": ("10_attention.ipynb", "1 · Scaled dot-product attention in four lines"),
    "sliding_window_attention": ("10_attention.ipynb", "6 · Decoding with a KV cache"),
    "qk_norm_attention": ("11_norms_of_2025_models.ipynb", "1 · QK-norm: a bound on every attention logit"),
}

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


def _private(path: Path, **kwargs):
    """``path`` opened for writing as 0600 (an existing file too), never through a link."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "w", encoding="utf-8", **kwargs)


def write_gradebook(rows: list[dict], path: Path) -> None:
    with _private(path, newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for r in rows:
            writer.writerow([one_line(r["student"]), one_line(r["exercise"]),
                             "true" if r["passed"] else "false",
                             "" if r["passed"] else one_line(r["code"]), one_line(r["message"])])


def write_results(rows: list[dict], path: Path) -> None:
    with _private(path) as f:
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


def write_report(rows: list[dict], path: Path, lessons_url: str = "../notebooks",
                 complete: bool = True) -> None:
    """report.html: per exercise a chart of the class's mistakes with their explanations (English
    and Chinese) and the lesson section that teaches them; the answers that need a look; then one
    section per student. An incomplete run says so at the top."""
    students = sorted({r["student"] for r in rows})
    stems = sorted({r["exercise"] for r in rows})
    sid = {s: f"student-{i}" for i, s in enumerate(students)}
    out = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           "<title>Class report · 班级报告</title>", f"<style>{STYLE}</style></head><body>",
           "<h1>Class report · 班级报告</h1>",
           f"<p>{len(students)} students · {len(stems)} exercises · "
           f"{sum(r['passed'] for r in rows)} of {len(rows)} answers passed.</p>"]
    if not complete:
        left = sum(r["code"] == "submission.not_graded" for r in rows)
        out.append(f'<p class="fail"><strong>Incomplete · 未完成</strong>: the run was stopped; '
                   f"{left} answers were not graded (<code>submission.not_graded</code>). "
                   f"· 评分被中止，{left} 份答案未评分。</p>")
    out.append("<h2>Exercises · 练习</h2><table><tr><th>exercise</th><th>passed</th>"
               "<th>most common mistake</th></tr>")
    by_stem = {s: [r for r in rows if r["exercise"] == s] for s in stems}
    for stem in stems:
        rs = by_stem[stem]
        common = Counter(r["code"] for r in rs if not r["passed"]).most_common(1)
        out.append(f'<tr><td><a href="#{_e(stem)}">{_e(stem)}</a></td>'
                   f"<td>{sum(r['passed'] for r in rs)} / {len(rs)}</td>"
                   f"<td><code>{_e(common[0][0]) if common else ''}</code></td></tr>")
    out.append("</table>")
    for stem in stems:
        rs, exercise = by_stem[stem], KEYS[stem]
        out.append(f'<h2 id="{_e(stem)}">{_e(stem)} · {_e(exercise.title)} · '
                   f'<span class="zh">{_e(exercise.title_zh)}</span></h2>')
        lesson, section = LESSONS.get(exercise.key, (None, None))
        if lesson:
            href = f"{lessons_url.rstrip('/')}/{lesson}#{_anchor(section)}"
            out.append(f'<p>Taught in · 讲解：<a href="{_e(href)}">{_e(lesson)} § {_e(section)}</a></p>')
        passed = sum(r["passed"] for r in rs)
        out.append(f'<p><span class="pass">{passed} passed</span> · '
                   f'<span class="fail">{len(rs) - passed} failed</span> of {len(rs)} students</p>')
        counts = Counter(r["code"] for r in rs if not r["passed"]).most_common()
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
    out.append("<h2>Students · 学生</h2>")
    for student in students:
        out.append(f'<h3 id="{sid[student]}">{_e(student)}</h3><table><tr><th>exercise</th>'
                   "<th>result</th><th>feedback · 反馈</th></tr>")
        for r in (r for r in rows if r["student"] == student):
            mark = '<span class="pass">✓ passed</span>' if r["passed"] else \
                f'<span class="fail">✗</span> <code>{_e(r["code"])}</code>'
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
                       f"<td>{_e(r['message'])}{zh}{details}</td></tr>")
        out.append("</table>")
    out.append("</body></html>")
    with _private(path) as f:
        f.write("\n".join(out))


def write_all(rows: list[dict], out: Path, complete: bool = True) -> None:
    """The three outputs into ``out`` (created, 0700); a grader-level row gets its code's
    Chinese."""
    for r in rows:
        if r["code"] and r["code"].startswith("submission.") and not r.get("message_zh"):
            r["message_zh"] = (explanation(r["code"]) or ("", None))[1]
    out = Path(out)
    private_folder(out)
    write_gradebook(rows, out / "gradebook.csv")
    write_results(rows, out / "results.jsonl")
    write_report(rows, out / "report.html", complete=complete)
