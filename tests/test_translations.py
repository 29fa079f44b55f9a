"""The Chinese edition's generator and check (tools.translations), on a small notebook tree in a
temporary folder: a good pair passes; a changed English cell, a missing block, an out-of-date
generated notebook, an avoided glossary variant, an English word left in the Chinese prose, an
entry page linking an English lesson, a stale or missing comment translation and an unlisted
untranslated notebook each fail, naming the notebook and the cell."""

from __future__ import annotations

import pathlib

import nbformat
import pytest

from tools.translations import (
    Edition,
    Layout,
    chinese_checkers,
    code_comments,
    comments_sha,
    english_words,
    main,
    parse,
    parse_comments,
    parse_glossary,
    sha12,
    skeleton,
)

INTRO = "# 01 · LayerNorm\n\nSee [the next lesson](02_next.ipynb#2-·-Warmup-(why)) and [the README](../README.md)."
BODY = "## 1 · Pre-LN and Post-LN\n\nThe norm goes before the sublayer."
NEXT = "# 02 · Next\n\n## 2 · Warmup (why)\n\nBack to [lesson 01](01_lesson.ipynb#1-·-Pre-LN-and-Post-LN)."
CODE = "x = 6  # the answer, (B, T)\n# (B, T, C)\ns = '# not a comment'\nprint(x)  # print it\n"
COMMENTS_ZH = (f"<!-- code c0000003 sha {comments_sha(code_comments(CODE))} -->\n"
               "the answer, (B, T) => 答案，(B, T)\nprint it => 打印出来\n")
GLOSSARY = """| English | 中文 | variants to avoid |
|---|---|---|
| LayerNorm | 层归一化 | 层标准化 |
| Pre-Norm / Pre-LN | 前置归一化 | 前归一化、预归一化 |
"""


def _notebook(*cells):
    nb = nbformat.v4.new_notebook()
    for i, (kind, source) in enumerate(cells):
        cell = (nbformat.v4.new_markdown_cell if kind == "md" else nbformat.v4.new_code_cell)(source)
        cell.id = f"c{i:07d}"
        if kind == "code":
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="6\n")]
            cell.execution_count = i
        nb.cells.append(cell)
    return nb


def _block(cell_id, english, chinese):
    return f"<!-- cell {cell_id} sha {sha12(english)} -->\n{chinese}\n\n"


LESSON_ZH = (_block("c0000000", INTRO, "# 01 · 层归一化（LayerNorm）\n\n见[下一课](02_next.ipynb#2-·-Warmup-(why))"
                    "和 [README](../README.md)。")
             + _block("c0000002", BODY, "## 1 · 前置归一化（Pre-LN）与后置归一化（Post-LN）\n\n"
                                        "归一化放在子层之前。"))


@pytest.fixture
def tree(tmp_path):
    """notebooks/01_lesson.ipynb (translated), notebooks/02_next.ipynb (not yet: PENDING)."""
    root = tmp_path / "notebooks"
    (root / "exercises").mkdir(parents=True)
    nbformat.write(_notebook(("md", INTRO), ("code", "print(6)"), ("md", BODY), ("code", CODE)),
                   root / "01_lesson.ipynb")
    nbformat.write(_notebook(("md", NEXT)), root / "02_next.ipynb")
    tr = root / "zh" / "_translations"
    tr.mkdir(parents=True)
    (tr / "01_lesson.md").write_text(LESSON_ZH, "utf-8")
    (tr / "01_lesson.comments.md").write_text(COMMENTS_ZH, "utf-8")
    (tr / "glossary.md").write_text(GLOSSARY, "utf-8")
    (tr / "english-words.txt").write_text("# names\nREADME\n", "utf-8")
    (tr / "PENDING").write_text("# untranslated\nnotebooks/02_next.ipynb\n", "utf-8")
    Edition(Layout(root)).write()
    return root


def _problems(root):
    return Edition(Layout(root)).check()


def test_a_good_pair_passes_and_keeps_code_and_outputs(tree):
    assert _problems(tree) == []
    english = nbformat.read(tree / "01_lesson.ipynb", as_version=4)
    chinese = nbformat.read(tree / "zh" / "01_lesson.ipynb", as_version=4)
    assert chinese.cells[1] == english.cells[1]                  # code, outputs, count, id
    assert chinese.metadata == english.metadata
    assert chinese.cells[2].source.startswith("## 1 · 前置归一化")


def test_links_point_to_the_chinese_edition_or_one_level_up(tree):
    intro = nbformat.read(tree / "zh" / "01_lesson.ipynb", as_version=4).cells[0].source
    assert "(../02_next.ipynb#2-·-Warmup-(why))" in intro     # not translated: the English one
    assert "(../../README.md)" in intro                          # outside notebooks/: one level up
    # Once 02 is translated, the link goes to the Chinese notebook and its Chinese heading.
    (tree / "zh" / "_translations" / "02_next.md").write_text(
        _block("c0000000", NEXT, "# 02 · 下一课\n\n## 2 · 学习率预热（为什么）\n\n"
                                 "回到[第 01 课](01_lesson.ipynb#1-·-Pre-LN-and-Post-LN)。"), "utf-8")
    (tree / "zh" / "_translations" / "PENDING").write_text("", "utf-8")
    edition = Edition(Layout(tree))
    edition.write()
    assert edition.check() == []
    intro = nbformat.read(tree / "zh" / "01_lesson.ipynb", as_version=4).cells[0].source
    assert "(02_next.ipynb#2-·-学习率预热（为什么）)" in intro
    back = nbformat.read(tree / "zh" / "02_next.ipynb", as_version=4).cells[0].source
    assert "(01_lesson.ipynb#1-·-前置归一化（Pre-LN）与后置归一化（Post-LN）)" in back


def test_a_changed_english_cell_fails_naming_notebook_and_cell(tree):
    nb = nbformat.read(tree / "01_lesson.ipynb", as_version=4)
    nb.cells[2].source += " Always."
    nbformat.write(nb, tree / "01_lesson.ipynb")
    problems = _problems(tree)
    stale = [p for p in problems if "stale translation" in p]
    assert len(stale) == 1, problems
    assert "01_lesson.ipynb cell c0000002 (cell 2)" in stale[0]


def test_a_missing_block_fails_naming_notebook_and_cell(tree):
    tr = tree / "zh" / "_translations" / "01_lesson.md"
    tr.write_text(LESSON_ZH.split("<!-- cell c0000002")[0], "utf-8")
    problems = _problems(tree)
    assert any("01_lesson.ipynb cell c0000002 (cell 2): no translation" in p for p in problems), problems


def test_an_out_of_date_generated_notebook_fails(tree):
    english = nbformat.read(tree / "01_lesson.ipynb", as_version=4)
    english.cells[1].outputs[0].text = "7\n"                      # re-executed: new output
    nbformat.write(english, tree / "01_lesson.ipynb")
    problems = _problems(tree)
    assert len(problems) == 1 and "zh/01_lesson.ipynb: out of date" in problems[0], problems
    Edition(Layout(tree)).write()                                  # make translations fixes it
    assert _problems(tree) == []


def test_an_avoided_glossary_variant_fails_naming_the_preferred_term(tree):
    tr = tree / "zh" / "_translations" / "01_lesson.md"
    tr.write_text(LESSON_ZH.replace("归一化放在子层之前", "层标准化放在子层之前"), "utf-8")
    Edition(Layout(tree)).write()
    problems = _problems(tree)
    assert len(problems) == 1, problems
    assert "01_lesson.ipynb cell c0000002" in problems[0]
    assert "'层标准化'" in problems[0] and "'层归一化'" in problems[0]


def test_a_preferred_term_containing_a_variant_is_not_flagged():
    terms = parse_glossary(GLOSSARY + "| X | 后置归一化 | 置归一 |\n")
    edition_terms = {t.english: t for t in terms}
    assert edition_terms["Pre-Norm / Pre-LN"].avoid == ["前归一化", "预归一化"]
    from tools.translations import avoided_variants
    assert avoided_variants("后置归一化与前置归一化", terms) == []
    assert [v for v, _ in avoided_variants("预归一化", terms)] == ["预归一化"]


def test_a_preferred_term_inside_a_variant_excuses_nothing_an_accepted_phrase_around_it_does():
    from tools.translations import avoided_variants
    terms = parse_glossary("| normalization | 归一化 | - |\n"
                           "| Pre-Norm | 前置归一化 | 前归一化 | 之前归一化（动词短语） |\n")
    assert [v for v, _ in avoided_variants("这里用了前归一化。", terms)] == ["前归一化"]
    assert avoided_variants("在子层之前归一化。", terms) == []
    # Excused in one place, reported in another: one report.
    assert [v for v, _ in avoided_variants("之前归一化，也叫前归一化", terms)] == ["前归一化"]


ROOT = pathlib.Path(__file__).resolve().parents[1]
GLOSSARY_TERMS = parse_glossary((ROOT / "notebooks" / "zh" / "_translations" / "glossary.md")
                                .read_text("utf-8"))


@pytest.mark.parametrize("variant, term", [(v, t) for t in GLOSSARY_TERMS for v in t.avoid],
                         ids=lambda x: x if isinstance(x, str) else "")
def test_every_avoided_variant_of_the_glossary_is_reported_alone_in_a_sentence(variant, term):
    from tools.translations import avoided_variants
    found = avoided_variants(f"这一段写的是{variant}，请看下面。", GLOSSARY_TERMS)
    assert (variant, term) in found, found


def test_the_glossary_has_its_avoided_variants():
    assert sum(len(t.avoid) for t in GLOSSARY_TERMS) >= 111     # the glossary's count, issue 37


def test_avoided_variants_in_the_exercises_chinese_strings_fail_naming_file_and_line(tree):
    package = tree.parent / "normlib" / "exercises"
    package.mkdir(parents=True)
    (package / "gelu.py").write_text('M = {\n    "a": "归一化放在子层之前。",\n'
                                     '    "b": "这是" "层标准化。",\n}\n', "utf-8")
    (package / "text").mkdir()
    (package / "text" / "gelu.toml").write_text('task = "Normalize"\ntask_zh = "层标准化"\n'
                                                '[[followups]]\nanswer_zh = "前归一化"\n', "utf-8")
    problems = _problems(tree)
    assert problems == [
        "normlib/exercises/gelu.py:3: uses '层标准化'; the glossary says '层归一化' (LayerNorm)",
        "normlib/exercises/text/gelu.toml:task_zh: uses '层标准化'; the glossary says '层归一化' "
        "(LayerNorm)",
        "normlib/exercises/text/gelu.toml:followups[0].answer_zh: uses '前归一化'; the glossary says "
        "'前置归一化' "
        "(Pre-Norm / Pre-LN)"], problems


def test_untranslated_notebooks_fail_unless_pending_and_the_list_is_printed(tree, capsys):
    (tree / "zh" / "_translations" / "PENDING").write_text("", "utf-8")
    problems = _problems(tree)
    assert len(problems) == 1 and "02_next.ipynb: no translation file" in problems[0], problems
    (tree / "zh" / "_translations" / "PENDING").write_text(
        "notebooks/02_next.ipynb\nnotebooks/01_lesson.ipynb\nnotebooks/99_gone.ipynb\n", "utf-8")
    problems = _problems(tree)
    assert any("01_lesson.ipynb, which has a translation file" in p for p in problems), problems
    assert any("99_gone.ipynb, which is not a lesson" in p for p in problems), problems
    (tree / "zh" / "_translations" / "PENDING").write_text("notebooks/02_next.ipynb\n", "utf-8")
    assert main(["--check", "--root", str(tree)]) == 0
    assert "1 notebook(s) still untranslated" in capsys.readouterr().out


def test_structure_problems_are_named(tree):
    tr = tree / "zh" / "_translations" / "01_lesson.md"
    text = (LESSON_ZH.replace("## 1 · 前置", "1 · 前置")                   # a heading lost
            + _block("c9999999", "gone", "旧的段落"))                      # a cell that is gone
    tr.write_text(text, "utf-8")
    Edition(Layout(tree)).write()
    problems = _problems(tree)
    assert any("cell c0000002 (cell 2): 1 heading(s) in English, 0" in p for p in problems), problems
    assert any("block for cell c9999999, which" in p for p in problems), problems


def test_a_link_to_a_missing_heading_fails(tree):
    tr = tree / "zh" / "_translations" / "01_lesson.md"
    tr.write_text(LESSON_ZH.replace("#2-·-Warmup-(why)", "#2-·-Warmup"), "utf-8")
    Edition(Layout(tree)).write()
    problems = _problems(tree)
    assert any("has no heading with that anchor" in p and "c0000000" in p for p in problems), problems


def test_stray_text_and_bad_markers_are_errors_with_a_line():
    with pytest.raises(ValueError, match=r"x\.md:1: text before the first"):
        parse("hello\n<!-- cell a sha 0123456789ab -->\n", "x.md")
    with pytest.raises(ValueError, match=r"x\.md:2: malformed marker"):
        parse("\n<!-- cell a sha 123 -->\n", "x.md")
    with pytest.raises(ValueError, match=r"x\.md:3: malformed marker"):
        parse("<!-- cell a sha 0123456789ab -->\n中文\n<!--cell b sha 0123456789ab-->\n", "x.md")
    blocks = parse("<!-- cell a sha 0123456789ab -->\n\n中文\n\n\n<!-- cell b sha 0123456789ab -->\n乙\n",
                   "x.md")
    assert [(b.cell, b.text, b.line) for b in blocks] == [("a", "中文", 1), ("b", "乙", 6)]


def test_the_skeleton_round_trips(tree):
    nb = nbformat.read(tree / "01_lesson.ipynb", as_version=4)
    blocks = parse(skeleton(nb), "skeleton")
    assert [(b.cell, b.sha, b.text) for b in blocks] == [
        (c.id, sha12(c.source), c.source) for c in nb.cells if c.cell_type == "markdown"]


def test_entry_pages_link_existing_headings_and_the_chinese_edition(tree):
    readme = tree.parent / "README.zh-CN.md"
    readme.write_text("[第 01 课](notebooks/zh/01_lesson.ipynb#1-·-前置归一化（Pre-LN）与后置归一化（Post-LN）)\n"
                      "[第 02 课](notebooks/02_next.ipynb)\n", "utf-8")
    (tree / "cheatsheet.md").write_text("| x | [01 §1](01_lesson.ipynb#1-·-Pre-LN-and-Post-LN) "
                                        "[中文](zh/01_lesson.ipynb#1-·-前置归一化（Pre-LN）与后置归一化（Post-LN）) |\n",
                                        "utf-8")
    assert _problems(tree) == []
    readme.write_text("[lesson 01](notebooks/01_lesson.ipynb)\n[gone](notebooks/zh/02_next.ipynb)\n",
                      "utf-8")
    (tree / "cheatsheet.md").write_text("[01 §9](01_lesson.ipynb#9-·-Nothing)\n", "utf-8")
    problems = _problems(tree)
    assert any("README.zh-CN.md:1" in p and "has a Chinese edition" in p for p in problems), problems
    assert any("README.zh-CN.md:2" in p and "no such file" in p for p in problems), problems
    assert any("cheatsheet.md:1" in p and "no heading with that anchor" in p for p in problems), problems


def test_stale_prints_the_blocks_to_retranslate_with_their_new_sha(tree, capsys):
    nb = nbformat.read(tree / "01_lesson.ipynb", as_version=4)
    nb.cells[2].source = BODY + " Always."
    nbformat.write(nb, tree / "01_lesson.ipynb")
    assert main(["--stale", "--root", str(tree)]) == 0
    out = capsys.readouterr().out
    assert f"<!-- cell c0000002 sha {sha12(BODY + ' Always.')} -->" in out
    assert f"stale (was sha {sha12(BODY)})" in out and "Always." in out
    assert "c0000000" not in out                                  # the unchanged cell is not listed


# ------------------------------------------------------------------- English words in the prose

def test_an_english_word_in_the_chinese_prose_fails_naming_notebook_cell_and_word(tree, capsys):
    tr = tree / "zh" / "_translations" / "01_lesson.md"
    tr.write_text(LESSON_ZH.replace("归一化放在子层之前。", "归一化放在每个 block 的子层之前。"), "utf-8")
    Edition(Layout(tree)).write()
    assert main(["--check", "--root", str(tree)]) == 1
    problems = capsys.readouterr().err
    print(problems)
    assert ("01_lesson.ipynb cell c0000002 (cell 2): English word 'block' in the Chinese prose"
            in problems), problems
    assert problems.count("English word") == 1, problems
    # A name goes in the allowlist beside the glossary; then it passes.
    (tree / "zh" / "_translations" / "english-words.txt").write_text("README\nblock\n", "utf-8")
    assert _problems(tree) == []


def test_code_math_links_glosses_quotes_citations_and_names_are_not_prose():
    allowed = {"token"}
    clean = ("每个 token 的 `x.std()`、$\\mathrm{LN}(x)$ 和 $$\\text{when } a > 0$$；层归一化（layer "
             "normalization）；见[这里](../README.md#the-setup)和 <a href=\"x.html\">链接</a>；"
             "论文题为“Attention Is All You Need”，即 *Root Mean Square Layer Normalization*；"
             "《为什么Pre Norm的效果不如Post Norm？》；Xiong et al. 2020 和 Zhang and Sennrich 2019；"
             "GQA、RoPE、LLaMA、float32、d_model、Pre-LN、x 和 y；sqrt(v + eps) * weight + bias。\n"
             "```python\nfor step in range(3): pass\n```")
    assert english_words(clean, allowed) == []
    assert english_words("在固定的 batch 上，每个 head 的 batch 统计量（见 notebook）", allowed) == [
        "batch", "head"]
    assert english_words("KV cache 与 Post-norm", allowed) == ["cache", "Post-norm"]


# --------------------------------------------------------------------------- entry pages

def test_chinese_pages_must_link_the_chinese_lessons_and_resolve(tree):
    top = tree.parent
    (top / "README.zh-CN.md").write_text("[第 01 课](notebooks/01_lesson.ipynb#1-·-Pre-LN-and-Post-LN)\n",
                                         "utf-8")
    (top / "docs").mkdir()
    (top / "docs" / "teaching.zh-CN.md").write_text(
        "## 讲课\n\n[上面](#讲课)、[不存在](#没有这一节)、[说明](../CONTRIBUTING.md#setup)\n", "utf-8")
    (top / "CONTRIBUTING.md").write_text("# Contributing\n\n## Set-up\n", "utf-8")
    (tree / "cheatsheet.md").write_text("| x | [01 §1](01_lesson.ipynb#1-·-Pre-LN-and-Post-LN) |\n",
                                        "utf-8")
    problems = _problems(tree)
    print("\n".join(problems))
    assert any("README.zh-CN.md:1: link" in p and "has a Chinese edition: link "
               "notebooks/zh/01_lesson.ipynb#1-·-前置归一化（Pre-LN）与后置归一化（Post-LN）" in p
               for p in problems), problems
    assert any("docs/teaching.zh-CN.md:3: link '#没有这一节'" in p and "no heading" in p
               for p in problems), problems
    assert any("docs/teaching.zh-CN.md:3: link '../CONTRIBUTING.md#setup'" in p
               for p in problems), problems
    assert not any("'#讲课'" in p for p in problems), problems
    assert any("cheatsheet.md:1: links '01_lesson.ipynb#1-·-Pre-LN-and-Post-LN' but not its Chinese "
               "edition: add [中文](zh/01_lesson.ipynb#1-·-前置归一化（Pre-LN）与后置归一化（Post-LN）)" in p
               for p in problems), problems
    assert len(problems) == 4, problems


# ------------------------------------------------------------------------------ code comments

def test_code_comments_are_translated_and_nothing_else_changes(tree):
    assert _problems(tree) == []
    english = nbformat.read(tree / "01_lesson.ipynb", as_version=4).cells[3]
    chinese = nbformat.read(tree / "zh" / "01_lesson.ipynb", as_version=4).cells[3]
    assert chinese.source == ("x = 6  # 答案，(B, T)\n# (B, T, C)\ns = '# not a comment'\n"
                              "print(x)  # 打印出来\n")
    assert chinese.outputs == english.outputs and chinese.id == english.id
    assert [c.text for c in code_comments(CODE)] == ["the answer, (B, T)", "print it"]


def test_a_changed_english_comment_fails_and_stale_shows_it(tree, capsys):
    nb = nbformat.read(tree / "01_lesson.ipynb", as_version=4)
    nb.cells[3].source = CODE.replace("# print it", "# print the answer")
    nbformat.write(nb, tree / "01_lesson.ipynb")
    problems = _problems(tree)
    print("\n".join(problems))
    assert any("01_lesson.ipynb cell c0000003 (cell 3): stale comment translation" in p
               for p in problems), problems
    assert any("comment 'print the answer' has no translation" in p for p in problems), problems
    assert any("translates 'print it', which the cell does not have" in p for p in problems)
    assert main(["--stale", "--root", str(tree)]) == 0
    out = capsys.readouterr().out
    new_sha = comments_sha(code_comments(nb.cells[3].source))
    assert f"<!-- code c0000003 sha {new_sha} -->" in out
    assert "the answer, (B, T) => 答案，(B, T)\nprint the answer => \n" in out   # kept, and to do


def test_missing_untranslated_and_avoided_comment_translations_fail(tree):
    tr = tree / "zh" / "_translations" / "01_lesson.comments.md"
    tr.write_text(COMMENTS_ZH.replace("print it => 打印出来", "print it => print it"), "utf-8")
    problems = _problems(tree)
    assert any("cell c0000003 (cell 3): comment 'print it' is not translated" in p
               for p in problems), problems
    one_word = "x = 6  # cat\nprint(x)  # print it\n"                 # a label may stay as it is
    assert [c.text for c in code_comments(one_word)] == ["cat", "print it"]
    tr.write_text(COMMENTS_ZH.replace("答案", "层标准化的答案"), "utf-8")
    problems = _problems(tree)
    assert any("cell c0000003 (cell 3): comment translation uses '层标准化'" in p
               for p in problems), problems
    tr.unlink()
    problems = _problems(tree)
    assert any("cell c0000003 (cell 3): no translation of its 2 comment(s)" in p
               for p in problems), problems


def test_comment_files_reject_stray_lines():
    with pytest.raises(ValueError, match=r"c\.md:2: expected 'English comment => 中文'"):
        parse_comments("<!-- code a sha 0123456789ab -->\nno arrow here\n", "c.md")
    with pytest.raises(ValueError, match=r"c\.md:1: text before the first"):
        parse_comments("a => 甲\n", "c.md")
    blocks = parse_comments("<!-- code a sha 0123456789ab -->\n\na => 甲\n", "c.md")
    assert [(b.cell, b.lines, b.line) for b in blocks] == [("a", {"a": "甲"}, 1)]


# ------------------------------------------------------------------ practice notebooks' language

def test_chinese_practice_notebooks_set_the_checkers_language(tree):
    setup = ("import torch\n\nimport normlib as nl\nfrom normlib.exercises import check_rms_norm\n\n"
             "_ = torch.manual_seed(0)")
    nbformat.write(_notebook(("md", "# 练习"), ("code", setup), ("code", "check_rms_norm(f)")),
                   tree / "exercises" / "01_ex.ipynb")
    (tree / "zh" / "_translations" / "exercises").mkdir()
    (tree / "zh" / "_translations" / "exercises" / "01_ex.md").write_text(
        _block("c0000000", "# 练习", "# 练习一"), "utf-8")
    Edition(Layout(tree)).write()
    assert _problems(tree) == []
    chinese = nbformat.read(tree / "zh" / "exercises" / "01_ex.ipynb", as_version=4)
    assert chinese.cells[1].source == (
        "import torch\n\nimport normlib as nl\nfrom normlib.exercises import check_rms_norm, "
        'set_language\n\nset_language("zh")  # 检查器用中文给出诊断\n_ = torch.manual_seed(0)')
    assert chinese.cells[2].source == "check_rms_norm(f)"                  # only the first cell
    # The lessons are left alone, and so is a Chinese notebook that lost the call: out of date.
    lesson = nbformat.read(tree / "zh" / "01_lesson.ipynb", as_version=4)
    assert "set_language" not in lesson.cells[1].source
    chinese.cells[1].source = setup
    nbformat.write(chinese, tree / "zh" / "exercises" / "01_ex.ipynb")
    assert any("zh/exercises/01_ex.ipynb: out of date" in p for p in _problems(tree))


def test_set_language_joins_the_imports_as_isort_orders_them():
    drill = "from IPython.display import Markdown\n\nfrom normlib.exercises.drill import Drill, menu"
    assert chinese_checkers(drill) == (
        "from IPython.display import Markdown\n\nfrom normlib.exercises import set_language\n"
        'from normlib.exercises.drill import Drill, menu\n\nset_language("zh")  # 检查器用中文给出诊断')
    assert chinese_checkers("import torch\nx = 1") is None
