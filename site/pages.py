"""What each page of the site adds to its notebook or markdown (site/conf.py): the table of contents
of the two editions, a link to the page's other-language twin, "run it" links on the lessons and
practice notebooks, and the page's language (lang="zh-CN" on the Chinese edition)."""

from __future__ import annotations

import html
import re
import sys
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tools import notebook_setup  # noqa: E402  (REPOSITORY: the one place the address is written)

# Sections of each edition's table of contents: (caption, glob patterns of docnames).
CONTENTS = {
    "README": [("Lessons", ["notebooks/[0-9]*"]), ("Practice", ["notebooks/exercises/[0-9]*"]),
               ("Reference", ["notebooks/cheatsheet", "docs/mistakes"]),
               ("Guides", ["docs/teaching", "docs/classroom", "normlib/classroom/ISOLATION", "ARCHITECTURE",
                           "CONTRIBUTING"]),
               ("中文", ["README.zh-CN"])],
    "README.zh-CN": [("课程", ["notebooks/zh/[0-9]*"]), ("手撕练习", ["notebooks/zh/exercises/[0-9]*"]),
                     ("指南", ["docs/teaching.zh-CN", "docs/classroom.zh-CN", "ARCHITECTURE.zh-CN",
                               "CONTRIBUTING.zh-CN"])],
}


def jupyter_slug(text: str) -> str:
    """A heading's anchor as JupyterLab makes it (the notebooks link to these): spaces become "-",
    case and punctuation kept."""
    return text.strip().replace(" ", "-")


def github_slug(text: str) -> str:
    """A heading's anchor as GitHub makes it (the markdown pages link to these): lower case,
    punctuation dropped, spaces as "-"."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def markdown_anchors(text: str) -> str:
    """``text`` (a markdown page) with its links to its own headings rewritten from GitHub's anchors
    to the site's (jupyter_slug): one slug function serves the notebooks and the pages."""
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*$", text, flags=re.M)
    slugs = {github_slug(h): jupyter_slug(h) for h in headings}
    return re.sub(r"\]\(#([^)\s]+)\)",
                  lambda m: f"](#{slugs.get(m[1], m[1])})", text)


def is_chinese(docname: str) -> bool:
    return docname.startswith("notebooks/zh/") or docname.endswith(".zh-CN")


def twin(docname: str) -> str | None:
    """The other edition's docname of a page (None when the page is one for both, as the cheat
    sheet and the mistake codes, which hold both languages)."""
    if docname.startswith("notebooks/zh/"):
        return "notebooks/" + docname.removeprefix("notebooks/zh/")
    if docname.startswith("notebooks/") and docname != "notebooks/cheatsheet":
        return "notebooks/zh/" + docname.removeprefix("notebooks/")
    if docname.endswith(".zh-CN"):
        return docname.removesuffix(".zh-CN")
    if docname in ("README", "ARCHITECTURE", "CONTRIBUTING", "docs/teaching", "docs/classroom"):
        return docname + ".zh-CN"
    return None


def github(repository: str) -> tuple[str, str] | None:
    """(owner, name) of a GitHub address, else None (Colab and Binder links need GitHub)."""
    m = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", repository)
    return (m[1], m[2]) if m else None


def launch_links(path: str, repository: str = notebook_setup.REPOSITORY) -> list[tuple[str, str]]:
    """("label", url or command) to run the notebook at ``path`` (repository-relative): Colab and
    Binder when the repository's public address is set (as the notebooks' setup cell installs
    from it on Colab), else the local command, as the setup cell says it."""
    where = github(repository)
    if where is not None:
        owner, name = where
        return [("Colab", f"https://colab.research.google.com/github/{owner}/{name}/blob/HEAD/{path}"),
                ("Binder", f"https://mybinder.org/v2/gh/{owner}/{name}/HEAD?labpath="
                           + urllib.parse.quote(path, safe=""))]
    practice = "/exercises/" in path
    return [("local", "make practice" if practice else "make lab")]


def banner(docname: str, relative_uri, zh: bool) -> str:
    """The HTML put above a page: the twin link and, on a notebook, how to run it."""
    parts = []
    other = twin(docname)
    if other is not None:
        label = "English" if zh else "中文版"
        parts.append(f'<a class="normlib-twin" hreflang="{"en" if zh else "zh-CN"}" '
                     f'href="{html.escape(relative_uri(other))}">{label}</a>')
    if docname.startswith("notebooks/") and docname != "notebooks/cheatsheet":
        path = docname + ".ipynb"
        run = "运行：" if zh else "Run it:"
        links = []
        for label, target in launch_links(path):
            if target.startswith("https://"):
                links.append(f'<a class="normlib-launch" href="{html.escape(target)}">{label}</a>')
            else:
                where = ("在仓库的克隆里执行" if zh else "in a clone of the repository, run")
                links.append(f'<span class="normlib-launch">{where} <code>{target}</code> '
                             f'{"并打开" if zh else "and open"} <code>{html.escape(path)}</code></span>')
        parts.append(f'<span class="normlib-run">{run} {" · ".join(links)}</span>')
    return f'<p class="normlib-banner">{" — ".join(parts)}</p>\n' if parts else ""


def on_source(app, docname: str, source: list[str]) -> None:
    """A markdown page's own anchors in the site's form; each edition's hidden table of contents
    appended to its README (the sidebar shows it)."""
    if app.env.doc2path(docname).suffix == ".md":
        source[0] = markdown_anchors(source[0])
    for section, globs in CONTENTS.get(docname, []):
        source[0] += ("\n\n```{toctree}\n:hidden:\n:glob:\n:caption: " + section + "\n\n"
                      + "\n".join("/" + g for g in globs) + "\n```\n")


def add_banner(app, pagename, templatename, context, doctree) -> None:
    if doctree is None or "body" not in context:
        return
    zh = is_chinese(pagename)
    if zh:
        context["language"] = "zh-CN"
    context["body"] = banner(pagename, lambda d: app.builder.get_relative_uri(pagename, d), zh) \
        + context["body"]


def setup(app) -> None:
    app.connect("source-read", on_source)
    app.connect("html-page-context", add_banner)
