"""The pages for each reader: every relative link and anchor resolves (the Chinese pages are
checked by `make check-translations`, with the same link check), and the README stays the
learner's short page."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.translations import Edition

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "ARCHITECTURE.md",
         *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "classroom").glob("*.md"))]
PAGES = [p for p in PAGES if not p.name.endswith(".zh-CN.md")]


@pytest.fixture(scope="module")
def edition() -> Edition:
    return Edition()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(edition, page):
    assert edition.check_page(page) == []


def test_a_broken_link_and_anchor_are_caught(edition, tmp_path):
    page = ROOT / "docs" / "_planted.md"
    page.write_text("[gone](../NOPE.md) and [anchor](../CONTRIBUTING.md#no-such-heading)\n")
    try:
        problems = edition.check_page(page)
    finally:
        page.unlink()
    assert len(problems) == 2 and "no such file" in problems[0] and "anchor" in problems[1]


@pytest.mark.parametrize("name", ["README.md", "README.zh-CN.md"])
def test_the_readme_is_the_learners_short_page(name):
    lines = (ROOT / name).read_text().count("\n")
    assert lines <= 200, f"{name} has {lines} lines: author and lecturer material belongs in " \
                         "CONTRIBUTING.md and docs/teaching.md"
