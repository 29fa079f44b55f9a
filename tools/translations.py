"""The Chinese edition (notebooks/zh/): generated from the English notebooks and translation files.

    python -m tools.translations --write           # regenerate every Chinese notebook
    python -m tools.translations --check           # fail when anything is out of step
    python -m tools.translations --stale [NB ...]  # what needs (re)translation, with the English

English notebook ``notebooks/NAME.ipynb`` -> ``notebooks/zh/NAME.ipynb`` (practice notebooks:
``notebooks/exercises/NAME.ipynb`` -> ``notebooks/zh/exercises/NAME.ipynb``), made from the English
notebook and ``notebooks/zh/_translations/[exercises/]NAME.md``. That file holds one block per English
markdown cell, in notebook order, each opened by a marker line::

    <!-- cell 416cfdc2 sha 3f5a9c0d12ab -->
    ## 1 · 前置归一化与后置归一化（Pre-Norm / Post-Norm）

``cell`` is the English cell's id, ``sha`` the first 12 hex digits of sha256(English source, UTF-8).
The block's text, stripped of leading and trailing blank lines, replaces the cell's source.
Links are rewritten for the Chinese notebook's folder: a link to a notebook that has a Chinese
edition goes to it (its ``#heading`` anchor translated, since JupyterLab's anchors are the heading
text), anything else goes to the English file, one level up.

Code comments are translated too; nothing else in a code cell changes (code, outputs, execution
counts, metadata and attachments are the English notebook's: a comment changes no output; the
practice notebooks' outputs are the exception, below).
``_translations/[exercises/]NAME.comments.md`` holds one block per code cell that has comments in
prose (a shape alone, ``# (B, T, C)``, or a pragma stays as it is), each opened by a marker and
holding one line per comment, its English text, `` => `` and the Chinese (a one-word label, such as
a token of an example sentence, may stay as it is)::

    <!-- code 6a7d7ef8 sha 9147fa6f4dc6 -->
    (..., d): re-center => (..., d)：去均值

``sha`` is sha12 of the cell's comment texts joined by newlines. The generator swaps each comment's
text for its translation in place (what follows the ``#`` and its blank). One more code change: a
Chinese practice notebook's first cell that imports from ``normlib.exercises`` also imports
``set_language`` and calls ``set_language("zh")`` after its imports, so that its checkers report in
Chinese (``--check`` holds the generated notebooks to this like to everything else). Their outputs
are therefore their own, not the English notebook's: a Chinese practice notebook whose code cells
are unchanged keeps the outputs it was executed with, and ``--write`` executes one whose code
changed (nbval then holds the saved outputs to what executing the notebook prints).

``--check`` fails, naming notebook and cell, when an English markdown cell has no block, when a
block's sha no longer matches the English source (the English changed: the translation is stale),
when a block names a cell that no longer exists or comes out of order, when a translated cell has a
different number of headings than the English one (anchors are paired by position), when a link
points to a heading that does not exist, when a translation uses a variant the glossary
(``_translations/glossary.md``) says to avoid, when the Chinese prose keeps an English word (outside
code, math, link targets, glosses in （…）, titles and quotations, citations, names such as GQA or
LayerNorm, and the words listed in ``_translations/english-words.txt``), when a code cell's comments
have no block, a stale one (the English comments changed), a comment left untranslated or one
using a variant the glossary avoids, and when a generated notebook on disk differs from what
``--write`` would write. It checks the Chinese pages too (README.zh-CN.md and every other
``*.zh-CN.md`` at the top level or under docs/, and the bilingual cheat sheet): every relative link
and anchor resolves, a ``*.zh-CN.md`` page links the Chinese edition of every notebook that has one,
and a cheat-sheet row that links an English lesson links its Chinese edition too. And it checks the
Chinese string literals of normlib/exercises/ (the catalogue's tasks and follow-ups, the Chinese
mistake messages) for the glossary's avoided variants, naming file and line. An English notebook
without a translation file fails too, unless it
is listed in ``_translations/PENDING`` (one notebook path per line); the pending list is printed on
every run, to be emptied. ``--stale`` prints the blocks to (re)translate, comment blocks included
(with the translations of the comments that did not change).
"""

from __future__ import annotations

import argparse
import ast
import copy
import dataclasses
import hashlib
import io
import os
import pathlib
import posixpath
import re
import subprocess
import sys
import tokenize
import tomllib

import nbformat

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"

MARKER = re.compile(r"^<!-- cell (\S+) sha ([0-9a-f]{12}) -->[ \t]*$")
ALMOST_MARKER = re.compile(r"^\s*<!--\s*cell\s+\S+\s+sha\b")
HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
FENCE = re.compile(r"^ {0,3}(```|~~~)")
# [text](target) and ![alt](target): targets may hold one level of balanced parentheses, as the
# lessons' anchors do ("#2-·-Gradients-at-initialization-(Xiong-et-al.-2020,-Figure-3)").
MD_LINK = re.compile(r"(\]\()((?:[^()\s]|\([^()\s]*\))+)(\))")
HTML_LINK = re.compile(r"""(\b(?:href|src)=")([^"]+)(")""")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def sha12(source: str) -> str:
    """The first 12 hex digits of sha256 of a cell's source (UTF-8): what a block's marker holds."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:12]


def rel(path: pathlib.Path) -> str:
    """``path`` relative to the repository, with forward slashes (how every message names files)."""
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return path.as_posix()


# ------------------------------------------------------------------------------------- paths

def english_notebooks(notebooks: pathlib.Path = NOTEBOOKS) -> list[pathlib.Path]:
    """Every lesson (notebooks/*.ipynb) and practice notebook (notebooks/exercises/*.ipynb)."""
    return sorted(notebooks.glob("*.ipynb")) + sorted((notebooks / "exercises").glob("*.ipynb"))


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where the English notebooks, the translation files and the Chinese notebooks are."""

    notebooks: pathlib.Path = NOTEBOOKS

    @property
    def zh(self) -> pathlib.Path:
        return self.notebooks / "zh"

    @property
    def translations(self) -> pathlib.Path:
        return self.zh / "_translations"

    def inner(self, english: pathlib.Path) -> pathlib.Path:
        """``03_x.ipynb`` or ``exercises/01_y.ipynb``: the path both editions share."""
        return english.resolve().relative_to(self.notebooks.resolve())

    def translation(self, english: pathlib.Path) -> pathlib.Path:
        return self.translations / self.inner(english).with_suffix(".md")

    def comments(self, english: pathlib.Path) -> pathlib.Path:
        return self.translations / self.inner(english).with_suffix(".comments.md")

    def chinese(self, english: pathlib.Path) -> pathlib.Path:
        return self.zh / self.inner(english)

    def pending(self) -> list[str]:
        """The notebook paths listed in _translations/PENDING (blank lines and # comments skipped)."""
        path = self.translations / "PENDING"
        if not path.exists():
            return []
        lines = (line.split("#", 1)[0].strip() for line in path.read_text("utf-8").splitlines())
        return [line for line in lines if line]


# ---------------------------------------------------------------------------- translation files

@dataclasses.dataclass
class Block:
    cell: str        # the English cell's id
    sha: str         # sha12 of the English source it translates
    text: str        # the Chinese markdown
    line: int        # line of the marker in the translation file (1-based)


def parse(text: str, name: str) -> list[Block]:
    """The blocks of a translation file; ValueError naming the file and line for stray text."""
    blocks: list[Block] = []
    lines: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = MARKER.match(line)
        if not match and ALMOST_MARKER.match(line):
            raise ValueError(f"{name}:{number}: malformed marker {line!r}, expected "
                             "'<!-- cell ID sha 12-hex-digits -->'")
        if match:
            if blocks:
                blocks[-1].text = "\n".join(lines).strip("\n")
            blocks.append(Block(match[1], match[2], "", number))
            lines = []
        elif blocks:
            lines.append(line)
        elif line.strip():
            raise ValueError(f"{name}:{number}: text before the first "
                             f"'<!-- cell ID sha SHA -->' marker: {line[:60]!r}")
    if blocks:
        blocks[-1].text = "\n".join(lines).strip("\n")
    return blocks


def skeleton(english_nb) -> str:
    """A translation file holding the English text of every markdown cell, ready to translate."""
    return "".join(f"<!-- cell {c.id} sha {sha12(c.source)} -->\n{c.source}\n\n"
                   for c in english_nb.cells if c.cell_type == "markdown")


# ------------------------------------------------------------------------------------ glossary

@dataclasses.dataclass
class Term:
    english: str
    chinese: str
    avoid: list[str]
    accept: list[str] = dataclasses.field(default_factory=list)   # "not wrong": never flagged


def _forms(cell: str, glosses: bool = False) -> list[str]:
    """The terms a glossary cell lists, split on 、 , ; / and ；; without ``glosses``, each
    term's （…） gloss or note dropped (an avoided variant keeps it: 提示（prompt）, not 提示)."""
    if not glosses:
        cell = re.sub(r"（[^（）]*）", "", cell)
    return [v.strip() for v in re.split(r"[、,，;；/]", cell) if v.strip() not in ("", "-")]


def parse_glossary(text: str) -> list[Term]:
    """Rows ``| English | 中文 | variants to avoid | also acceptable |`` (the fourth column
    optional; variants split on 、 , ; or /)."""
    terms = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.lstrip().startswith("|") or len(cells) < 3:
            continue
        if set(cells[0]) <= set("-: ") or cells[0].lower() == "english":
            continue                                       # the header and its rule
        terms.append(Term(cells[0], cells[1], _forms(cells[2], glosses=True),
                          _forms(cells[3]) if len(cells) > 3 else []))
    return terms


def _spans(text: str, part: str) -> list[tuple[int, int]]:
    """Every occurrence of ``part`` in ``text`` as (start, end), overlapping ones included."""
    spans, start = [], text.find(part)
    while start != -1:
        spans.append((start, start + len(part)))
        start = text.find(part, start + 1)
    return spans


def avoided_variants(text: str, terms: list[Term]) -> list[tuple[str, Term]]:
    """(variant, term) for each avoided variant in ``text``, each once. An occurrence is excused
    only where a preferred or accepted form overlaps it and reaches beyond it (归一化层 inside
    层归一化层, 前归一化 inside 之前归一化); a form lying wholly inside the variant excuses nothing,
    so 前归一化 is reported although 归一化 is preferred."""
    excusing = {form for t in terms for form in _forms(t.chinese) + t.accept}
    found = []
    for term in terms:
        for variant in term.avoid:
            for start, end in _spans(text, variant):
                if not any(a < end and b > start and (a < start or b > end)
                           for form in excusing for a, b in _spans(text, form)):
                    found.append((variant, term))
                    break
    return found


# The exercises' Chinese outside the notebooks: their titles, tasks and follow-ups (text/*.toml)
# and the checkers' Chinese mistake messages (each catalogue, in the checker's module), in this
# folder of the repository.
EXERCISE_TEXTS = "normlib/exercises"


def chinese_values(source: str) -> list[tuple[str, str]]:
    """(field, text) for each string of a TOML file that holds Chinese; a field of a table in an
    array is named with its index, "followups[2].answer_zh"."""
    def walk(value, where):
        if isinstance(value, str):
            return [(where, value)] if CJK.search(value) else []
        if isinstance(value, dict):
            return [x for k, v in value.items() for x in walk(v, f"{where}.{k}" if where else k)]
        if isinstance(value, list):
            return [x for i, v in enumerate(value) for x in walk(v, f"{where}[{i}]")]
        return []
    return walk(tomllib.loads(source), "")


def chinese_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) for each string literal of a Python source that holds Chinese (adjacent
    literals joined, as Python joins them; the line is the first one's)."""
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and CJK.search(node.value)]


# ------------------------------------------------------------------- English words in Chinese prose

CJK = re.compile(r"[\u3400-\u9fff]")
WORD = re.compile(r"(?<![\w.])[A-Za-z][\w]*(?:['’.-]\w+)*")
# What is not prose: code, math, markup, link targets, addresses.
NOT_PROSE = [re.compile(p, re.S) for p in (
    r"\$\$.*?\$\$", r"(?<!\\)\$[^$\n]+?\$", r"\\\[.*?\\\]", r"\\\(.*?\\\)",   # LaTeX
    r"`[^`\n]*`",                                                                # code spans
    r"<!--.*?-->", r"<[^>\n]+>",                                                 # html
    r"(?<=\])\((?:[^()\s]|\([^()\s]*\))+\)",                                     # link targets
    r"\b(?:https?|ftp)://\S+", r"\b[\w.-]+\.(?:com|org|io|fm|ai|net|cn)(?:/\S*)?",  # addresses
)]
# English kept on purpose: a gloss in full-width parentheses after the Chinese term (the glossary's
# rule), and quotations or titles in quotes or italics that hold no Chinese.
GLOSS = re.compile(r"（[^（）]*）|《[^《》\n]*》")           # and titles in 《》, quoted as written
QUOTED = [re.compile(p) for p in (r"“[^“”\n]*”", r'"[^"\n]*"', r"(?<![*\w])\*[^*\n]+\*(?!\*)")]
# Author-year citations: "Xiong et al. 2020", "Zhang and Sennrich 2019", "Maas, Hannun & Ng 2013".
CITATION = re.compile(r"\b[A-Z][a-z]+(?:(?:, | and | & )[A-Z][a-z]+)*(?: et al\.)?,? (?:19|20)\d\d")
# Code written out in prose: a call f(x), and a word next to an operator (eps) * weight + bias).
CALL = re.compile(r"\b[A-Za-z_][\w.]*(?=\()")
OPERATOR = r"(?:(?<!\*)\*(?!\*)|[=/+<>^×]|->|→|[ \t]-[ \t])"
OPERAND = re.compile(rf"{OPERATOR}[ \t]*[A-Za-z_][\w.]*|[A-Za-z_][\w.]*(?=[ \t]*{OPERATOR})")


def prose(markdown: str) -> str:
    """The prose of a markdown cell: without code fences, code spans, math, html, link targets,
    addresses, glosses in （…）, quotations and titles without Chinese, citations and calls."""
    lines, fenced = [], False
    for line in markdown.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    text = "\n".join(lines)
    for pattern in NOT_PROSE:
        text = pattern.sub(" ", text)
    text = GLOSS.sub(" ", text)
    for pattern in QUOTED:
        text = pattern.sub(lambda m: m[0] if CJK.search(m[0]) else " ", text)
    return OPERAND.sub(" ", CALL.sub(" ", CITATION.sub(" ", text)))


def is_name(word: str) -> bool:
    """A word no English sentence is made of: one letter (a variable), a digit, '_' or '.' inside
    (float32, d_model, x.std), or a capital after the first letter (GQA, RoPE, LayerNorm, arXiv); hyphenated, when a part is one (Pre-LN, n-m)."""
    if "-" in word:
        return any(is_name(part) for part in word.split("-") if part)
    return (len(word) == 1 or any(ch.isdigit() or ch in "_." for ch in word)
            or any(ch.isupper() for ch in word[1:]))


ALLOWLIST = "english-words.txt"                      # beside glossary.md


def parse_allowlist(text: str) -> set[str]:
    """The English words Chinese prose may use: one per line (case-sensitive), '#' comments."""
    return {w for line in text.splitlines() if (w := line.split("#", 1)[0].strip())}


def english_words(markdown: str, allowed: set[str]) -> list[str]:
    """The English words left in the prose of a Chinese markdown cell, in order, each once."""
    found = []
    for word in WORD.findall(prose(markdown)):
        word = word.rstrip("'’")
        if not is_name(word) and word not in allowed and word not in found:
            found.append(word)
    return found


# ------------------------------------------------------------------------------ code comments

CODE_MARKER = re.compile(r"^<!-- code (\S+) sha ([0-9a-f]{12}) -->[ \t]*$")
ALMOST_CODE_MARKER = re.compile(r"^\s*<!--\s*code\s+\S+\s+sha\b")
ARROW = " => "
PRAGMA = re.compile(r"^(?:noqa|type:|pragma|fmt:)")


SHAPE = re.compile(r"\((?:[^()]|\([^()]*\))*\)")


def translatable(comment: str) -> bool:
    """Whether a comment's text is prose to translate: outside code written out, it holds an
    English word that is not a name, or is an all-capital sentence ('YOUR CODE HERE'). A shape
    alone ('(B, T, C)', '(seeds, L)') and pragmas (noqa, type:, fmt:) stay as they are."""
    if PRAGMA.match(comment) or SHAPE.fullmatch(comment):
        return False
    words = WORD.findall(prose(comment))
    return (any(not is_name(w) for w in words)
            or sum(len(w) > 1 and w.isupper() for w in words) > 1)


@dataclasses.dataclass
class Comment:
    row: int         # 0-based line of the cell's source
    col: int         # where '#' is on that line
    lead: str        # '#' and the blank after it, kept in the translation
    text: str        # the comment's text


def code_comments(source: str) -> list[Comment]:
    """The comments of a code cell that are prose, in order (IPython % and ! lines skipped; a %%
    cell magic holds no Python). SyntaxError when the cell cannot be tokenized."""
    if source.lstrip().startswith("%%"):
        return []
    lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n")]
    found = []
    try:
        for token in tokenize.generate_tokens(io.StringIO("\n".join(lines)).readline):
            if token.type == tokenize.COMMENT:
                text = token.string[1:].strip()
                lead = token.string[:len(token.string) - len(token.string[1:].lstrip())]
                if translatable(text):
                    found.append(Comment(token.start[0] - 1, token.start[1], lead, text))
    except (tokenize.TokenError, IndentationError) as err:
        raise SyntaxError(f"cannot read its comments: {err}") from err
    return found


def comments_sha(comments: list[Comment]) -> str:
    """What a comment block's marker holds: sha12 of the cell's comment texts, one per line."""
    return sha12("\n".join(c.text for c in comments))


@dataclasses.dataclass
class CommentBlock:
    cell: str                   # the English code cell's id
    sha: str                    # comments_sha of the English comments it translates
    lines: dict[str, str]       # English comment text -> Chinese
    line: int                   # line of the marker in the file (1-based)


def parse_comments(text: str, name: str) -> list[CommentBlock]:
    """The blocks of a comment-translation file; ValueError naming the file and line for a line
    that is neither a marker nor 'English => 中文'."""
    blocks: list[CommentBlock] = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = CODE_MARKER.match(line)
        if not match and ALMOST_CODE_MARKER.match(line):
            raise ValueError(f"{name}:{number}: malformed marker {line!r}, expected "
                             "'<!-- code ID sha 12-hex-digits -->'")
        if match:
            blocks.append(CommentBlock(match[1], match[2], {}, number))
        elif line.strip():
            if not blocks:
                raise ValueError(f"{name}:{number}: text before the first "
                                 f"'<!-- code ID sha SHA -->' marker: {line[:60]!r}")
            english, arrow, chinese = (line.rstrip() + " ").partition(ARROW)   # 'x =>': to do
            if not arrow:
                raise ValueError(f"{name}:{number}: expected 'English comment{ARROW}中文', "
                                 f"got {line[:60]!r}")
            blocks[-1].lines[english.strip()] = chinese.strip()
    return blocks


def translate_comments(source: str, lines: dict[str, str]) -> str:
    """``source`` with each comment found in ``lines`` replaced by its translation; code, blanks
    and untranslated comments unchanged."""
    rows = source.split("\n")
    for comment in code_comments(source):
        chinese = lines.get(comment.text)
        if chinese:
            rows[comment.row] = rows[comment.row][:comment.col] + comment.lead + chinese
    return "\n".join(rows)


# ------------------------------------------------------------------- practice notebooks' language

EXERCISES_IMPORT = re.compile(r"^from normlib\.exercises(\.\w+)? import [^(\n]+$")
SET_LANGUAGE = 'set_language("zh")  # 检查器用中文给出诊断'


def chinese_checkers(source: str) -> str | None:
    """A practice notebook's import cell with ``set_language("zh")`` added, so its checkers report
    in Chinese: ``set_language`` joins the ``from normlib.exercises import ...`` line (or a line of
    its own before ``from normlib.exercises.drill import ...``, as isort orders them), and the call
    comes right after the imports. None when the cell does not import from normlib.exercises."""
    lines = source.split("\n")
    hit = next((i for i, line in enumerate(lines) if EXERCISES_IMPORT.match(line)), None)
    if hit is None:
        return None
    if EXERCISES_IMPORT.match(lines[hit])[1]:                    # normlib.exercises.<module>
        lines.insert(hit, "from normlib.exercises import set_language")
    else:
        code, hash_, comment = lines[hit].partition("#")
        lines[hit] = code.rstrip() + ", set_language" + (f"  {hash_}{comment}" if hash_ else "")
    last = max(i for i, line in enumerate(lines) if line.startswith(("import ", "from ")))
    if last + 1 < len(lines) and not lines[last + 1].strip():
        lines.insert(last + 2, SET_LANGUAGE)
    else:
        lines[last + 1:last + 1] = ["", SET_LANGUAGE]
    return "\n".join(lines)


def keep_outputs(nb, target: pathlib.Path) -> bool:
    """A practice notebook's checkers report in Chinese, so its outputs are its own, not the English
    notebook's: when every code cell of ``nb`` has the source it has in the Chinese notebook on disk,
    ``nb`` takes that notebook's outputs, execution counts and times, and widget state (the outputs
    of its last execution, which nbval holds to what executing it prints). False, leaving the
    English outputs, when there is no such notebook or its code differs: it must be executed."""
    if not target.exists():
        return False
    old = nbformat.reads(target.read_text("utf-8"), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    old_code = [c for c in old.cells if c.cell_type == "code"]
    if [(c.id, c.source) for c in code] != [(c.id, c.source) for c in old_code]:
        return False
    for cell, old_cell in zip(code, old_code, strict=True):
        cell.outputs, cell.execution_count = old_cell.outputs, old_cell.execution_count
        cell.metadata.pop("execution", None)
        if "execution" in old_cell.metadata:
            cell.metadata["execution"] = old_cell.metadata["execution"]
    nb.metadata.pop("widgets", None)
    if "widgets" in old.metadata:
        nb.metadata["widgets"] = old.metadata["widgets"]
    return True


# ------------------------------------------------------------------------------ headings, links

def headings(markdown: str) -> list[str]:
    """The ATX headings of a markdown cell (outside code fences), as written."""
    found, fenced = [], False
    for line in markdown.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and (m := HEADING.match(line)):
            found.append(m[1])
    return found


def anchor(heading: str) -> str:
    """JupyterLab's anchor for a heading: its rendered text with spaces turned into '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\((?:[^()\s]|\([^()\s]*\))*\)", r"\1", heading)   # links -> text
    text = re.sub(r"`([^`]*)`", r"\1", text)                                         # code spans
    text = re.sub(r"(\*\*|__|\*)(.+?)\1", r"\2", text)                               # emphasis
    text = re.sub(r"<[^>]+>", "", text)                                              # inline html
    return text.strip().replace(" ", "-")


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a markdown file's headings: lower case, punctuation other than '-'
    dropped, spaces to '-', a repeated one suffixed -1, -2, ..."""
    found: set[str] = set()
    for heading in headings(markdown):
        text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
        slug = re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")
        candidate, n = slug, 0
        while candidate in found:
            n += 1
            candidate = f"{slug}-{n}"
        found.add(candidate)
    return found


def _split_target(target: str) -> tuple[str, str]:
    path, hash_, frag = target.partition("#")
    return path, hash_ + frag


class Edition:
    """The translation state of a set of notebooks: what --write writes and --check checks."""

    def __init__(self, layout: Layout = Layout()):
        self.layout = layout
        glossary = layout.translations / "glossary.md"
        self.terms = parse_glossary(glossary.read_text("utf-8")) if glossary.exists() else []
        allowlist = layout.translations / ALLOWLIST
        self.allowed = parse_allowlist(allowlist.read_text("utf-8")) if allowlist.exists() else set()
        self.english = english_notebooks(layout.notebooks)
        self.nbs = {p: nbformat.read(p, as_version=4) for p in self.english}
        self.blocks: dict[pathlib.Path, list[Block]] = {}
        self.problems: list[str] = []
        self.unexecuted: set[pathlib.Path] = set()   # practice notebooks generated with English outputs
        for p in self.english:
            path = layout.translation(p)
            if path.exists():
                try:
                    self.blocks[p] = parse(path.read_text("utf-8"), rel(path))
                except ValueError as err:
                    self.problems.append(str(err))
        self.comment_blocks: dict[pathlib.Path, list[CommentBlock]] = {}
        for p in self.blocks:
            path = layout.comments(p)
            if path.exists():
                try:
                    self.comment_blocks[p] = parse_comments(path.read_text("utf-8"), rel(path))
                except ValueError as err:
                    self.problems.append(str(err))
        self.anchors = {p: self._anchor_map(p) for p in self.blocks}
        self._generated: dict[pathlib.Path, tuple] = {}     # generated(): (notebook, problems)

    # -- pairing English cells with blocks

    def pairs(self, english: pathlib.Path):
        """(cell index, English cell, its block or None) for every English markdown cell."""
        by_id = {b.cell: b for b in self.blocks.get(english, [])}
        return [(i, c, by_id.get(c.id)) for i, c in enumerate(self.nbs[english].cells)
                if c.cell_type == "markdown"]

    def _anchor_map(self, english: pathlib.Path) -> dict[str, str]:
        """English anchor -> Chinese anchor, pairing the headings of each cell by position."""
        mapping = {}
        for _, cell, block in self.pairs(english):
            if block is not None:
                en, zh = headings(cell.source), headings(block.text)
                if len(en) == len(zh):
                    mapping.update({anchor(a): anchor(b) for a, b in zip(en, zh, strict=True)})
        return mapping

    def code_pairs(self, english: pathlib.Path):
        """(cell index, English code cell, its comments, its comment block or None) for every code
        cell with comments to translate."""
        by_id = {b.cell: b for b in self.comment_blocks.get(english, [])}
        out = []
        for index, cell in enumerate(self.nbs[english].cells):
            if cell.cell_type == "code":
                try:
                    comments = code_comments(cell.source)
                except SyntaxError:
                    comments = []
                if comments:
                    out.append((index, cell, comments, by_id.get(cell.id)))
        return out

    def check_comments(self, english: pathlib.Path) -> list[str]:
        """A comment block for each code cell with comments, in step with its English comments."""
        out = []
        path = rel(self.layout.comments(english))
        pairs = self.code_pairs(english)
        wanted = {cell.id for _, cell, _, _ in pairs}
        for index, cell in enumerate(self.nbs[english].cells):
            if cell.cell_type == "code":
                try:
                    code_comments(cell.source)
                except SyntaxError as err:
                    out.append(f"{rel(english)} cell {cell.id} (cell {index}): {err}")
        seen: set[str] = set()
        for block in self.comment_blocks.get(english, []):
            if block.cell in seen:
                out.append(f"{path}:{block.line}: a second block for cell {block.cell}")
            elif block.cell not in wanted:
                out.append(f"{path}:{block.line}: block for cell {block.cell}, which is not a code "
                           f"cell with comments in {rel(english)}: delete or re-key the block")
            seen.add(block.cell)
        for index, cell, comments, block in pairs:
            where = f"{rel(english)} cell {cell.id} (cell {index})"
            if block is None:
                out.append(f"{where}: no translation of its {len(comments)} comment(s) in {path}, "
                           f"e.g. {comments[0].text[:60]!r}")
                continue
            if block.sha != comments_sha(comments):
                out.append(f"{where}: stale comment translation: the English comments changed "
                           f"(sha {block.sha} in {path}, {comments_sha(comments)} now); "
                           "`python -m tools.translations --stale` shows them")
            texts = {c.text for c in comments}
            for comment in comments:
                chinese = block.lines.get(comment.text)
                if not chinese:
                    out.append(f"{where}: comment {comment.text[:60]!r} has no translation")
                elif chinese == comment.text and len(WORD.findall(comment.text)) > 1:
                    out.append(f"{where}: comment {comment.text[:60]!r} is not translated")
                else:
                    out += [f"{where}: comment translation uses {variant!r}; the glossary says "
                            f"{term.chinese!r} ({term.english})"
                            for variant, term in avoided_variants(chinese, self.terms)]
            for english_text in block.lines:
                if english_text not in texts:
                    out.append(f"{where}: {path} translates {english_text[:60]!r}, which the cell "
                               "does not have")
        return out

    # -- links

    def _rewrite(self, target: str, english: pathlib.Path, where: str, bad: list[str]) -> str:
        """A link target written as in the English notebook, for the Chinese notebook's folder."""
        if SCHEME.match(target) or target.startswith("/"):
            return target
        path, frag = _split_target(target)
        dest = english if not path else pathlib.Path(
            os.path.normpath(english.parent / path.replace("/", os.sep)))
        translated = dest in self.blocks
        new_path = posixpath.relpath((self.layout.chinese(dest) if translated else dest).as_posix(),
                                     self.layout.chinese(english).parent.as_posix())
        if frag and dest in self.nbs:
            key = frag[1:]
            english_anchors = {anchor(h) for c in self.nbs[dest].cells if c.cell_type == "markdown"
                               for h in headings(c.source)}
            if translated and key in self.anchors[dest]:
                frag = "#" + self.anchors[dest][key]
            elif translated and key in self.anchors[dest].values() and key not in english_anchors:
                pass                                        # already the Chinese heading's anchor
            elif key not in english_anchors:
                bad.append(f"{where}: link {target!r}: {rel(dest)} has no heading with that anchor")
        if not path:
            return frag
        return new_path + frag

    def localize(self, text: str, english: pathlib.Path, where: str, bad: list[str]) -> str:
        def sub(m):
            return m[1] + self._rewrite(m[2], english, where, bad) + m[3]
        return HTML_LINK.sub(sub, MD_LINK.sub(sub, text))

    # -- generation and checks

    def generate(self, english: pathlib.Path, bad: list[str] | None = None):
        """The Chinese notebook: the English one with each translated markdown cell replaced."""
        bad = [] if bad is None else bad
        nb = copy.deepcopy(self.nbs[english])
        for index, cell, block in self.pairs(english):
            if block is not None:
                where = f"{rel(english)} cell {cell.id} (cell {index})"
                nb.cells[index].source = self.localize(block.text, english, where, bad)
        for index, _, _, block in self.code_pairs(english):
            if block is not None:
                nb.cells[index].source = translate_comments(nb.cells[index].source, block.lines)
        if self.layout.inner(english).parts[0] == "exercises":
            for cell in nb.cells:
                if cell.cell_type == "code" and (source := chinese_checkers(cell.source)):
                    cell.source = source
                    break
            if not keep_outputs(nb, self.layout.chinese(english)):
                self.unexecuted.add(english)
        return nb

    def generated(self, english: pathlib.Path):
        """``generate(english)`` and the problems it found, computed once: the checks read a
        Chinese notebook both to compare it with the file and for the anchors pages link to."""
        if english not in self._generated:
            bad: list[str] = []
            self._generated[english] = self.generate(english, bad), bad
        return self._generated[english]

    def check_notebook(self, english: pathlib.Path) -> list[str]:
        name, out = rel(english), []
        blocks = self.blocks[english]
        ids = [c.id for c in self.nbs[english].cells if c.cell_type == "markdown"]
        seen: set[str] = set()
        for block in blocks:
            where = f"{rel(self.layout.translation(english))}:{block.line}"
            if block.cell in seen:
                out.append(f"{where}: a second block for cell {block.cell}")
            elif block.cell not in ids:
                out.append(f"{where}: block for cell {block.cell}, which {name} no longer has "
                           "(or it is not a markdown cell): delete or re-key the block")
            seen.add(block.cell)
        order = [b.cell for b in blocks if b.cell in ids]
        if order != [i for i in ids if i in order]:
            out.append(f"{rel(self.layout.translation(english))}: blocks are not in the notebook's "
                       "cell order")
        for index, cell, block in self.pairs(english):
            where = f"{name} cell {cell.id} (cell {index})"
            if block is None:
                out.append(f"{where}: no translation (an English markdown cell without a block): "
                           f"{cell.source[:70]!r}")
                continue
            if block.sha != sha12(cell.source):
                out.append(f"{where}: stale translation: the English changed since it was "
                           f"translated (sha {block.sha} in the block, {sha12(cell.source)} now); "
                           "`python -m tools.translations --stale` shows the English")
            if not block.text.strip():
                out.append(f"{where}: empty translation")
            en, zh = headings(cell.source), headings(block.text)
            if len(en) != len(zh):
                out.append(f"{where}: {len(en)} heading(s) in English, {len(zh)} in the translation "
                           "(links to headings are paired by position: keep the same headings)")
            for variant, term in avoided_variants(block.text, self.terms):
                out.append(f"{where}: uses {variant!r}; the glossary says {term.chinese!r} "
                           f"({term.english})")
            for word in english_words(block.text, self.allowed):
                out.append(f"{where}: English word {word!r} in the Chinese prose: translate it, "
                           f"put it in `code` or a （gloss）, or add it to {ALLOWLIST} if it is a name")
        out += self.check_comments(english)
        nb, bad = self.generated(english)
        generated = nbformat.writes(nb)
        out += bad
        target = self.layout.chinese(english)
        if not target.exists():
            out.append(f"{rel(target)}: missing: run `make translations`")
        elif target.read_text("utf-8") != generated:
            out.append(f"{rel(target)}: out of date with {name} and its translation: "
                       "run `make translations`")
        return out

    def check(self) -> list[str]:
        out = list(self.problems)
        pending = self.layout.pending()
        inner = {self.layout.inner(p).as_posix(): p for p in self.english}
        listed = set()
        for entry in pending:
            key = entry.removeprefix("notebooks/")
            if key not in inner:
                out.append(f"PENDING lists {entry}, which is not a lesson or practice notebook")
            elif inner[key] in self.blocks:
                out.append(f"PENDING lists {entry}, which has a translation file: remove the line")
            listed.add(key)
        for english in self.english:
            if english in self.blocks:
                out += self.check_notebook(english)
            elif self.layout.inner(english).as_posix() not in listed:
                out.append(f"{rel(english)}: no translation file "
                           f"({rel(self.layout.translation(english))}); translate it, or list it in "
                           f"{rel(self.layout.translations / 'PENDING')}")
        for page in self.pages():
            out += self.check_page(page)
        out += self.check_exercise_texts()
        expected = {self.layout.chinese(p).resolve() for p in self.blocks}
        for path in sorted(self.layout.zh.rglob("*.ipynb")):
            if ".ipynb_checkpoints" not in path.parts and path.resolve() not in expected:
                out.append(f"{rel(path)}: a Chinese notebook without a translation file: delete it "
                           "(`make translations` writes only translated notebooks)")
        return out

    def _anchors_of(self, notebook: pathlib.Path) -> set[str] | None:
        """The heading anchors of an English or a generated Chinese notebook (None: neither)."""
        zh = self.layout.zh.resolve()
        if notebook.resolve().is_relative_to(zh):
            english = self.layout.notebooks / notebook.resolve().relative_to(zh)
            if english not in self.blocks:
                return None
            nb = self.generated(english)[0]
        elif notebook in self.nbs:
            nb = self.nbs[notebook]
        else:
            return None
        return {anchor(h) for c in nb.cells if c.cell_type == "markdown" for h in headings(c.source)}

    def check_exercise_texts(self) -> list[str]:
        """The glossary's avoided variants in the Chinese string literals of the modules in
        EXERCISE_TEXTS and in the values of its text/*.toml (none in a tree without that folder)."""
        top, out = self.layout.notebooks.parent, []
        folder = top / EXERCISE_TEXTS
        texts = [(path, chinese_literals(path.read_text("utf-8")))
                 for path in sorted(folder.glob("*.py"))]
        texts += [(path, chinese_values(path.read_text("utf-8")))
                  for path in sorted(folder.glob("text/*.toml"))]
        for path, found in texts:
            name = path.relative_to(top).as_posix()
            for where, text in found:
                out += [f"{name}:{where}: uses {variant!r}; the glossary says "
                        f"{term.chinese!r} ({term.english})"
                        for variant, term in avoided_variants(text, self.terms)]
        return out

    def pages(self) -> list[pathlib.Path]:
        """The Chinese entry pages: *.zh-CN.md at the top level and under docs/, and the cheat
        sheet (bilingual: its proof links must reach both editions)."""
        top = self.layout.notebooks.parent
        found = sorted(top.glob("*.zh-CN.md")) + sorted((top / "docs").rglob("*.zh-CN.md"))
        return found + [p for p in [self.layout.notebooks / "cheatsheet.md"] if p.exists()]

    def chinese_target(self, english: pathlib.Path, frag: str, page: pathlib.Path) -> str:
        """The link from ``page`` to the Chinese edition of ``english`` at the same heading."""
        key = frag[1:]
        zh_frag = "#" + self.anchors[english][key] if key in self.anchors[english] else frag
        return posixpath.relpath(self.layout.chinese(english).as_posix(),
                                 page.parent.as_posix()) + zh_frag

    def check_page(self, page: pathlib.Path) -> list[str]:
        """Links of an entry page: every file exists, every #anchor is one of the target's
        headings (a notebook's, as JupyterLab makes them; a markdown file's, as GitHub does), a
        *.zh-CN.md page links the Chinese edition of every notebook that has one, and each row of
        the cheat sheet that links an English lesson links its Chinese edition too."""
        out = []
        text = page.read_text("utf-8")
        zh_page = page.name.endswith(".zh-CN.md")
        for number, line in enumerate(text.splitlines(), start=1):
            linked = []
            for m in [*MD_LINK.finditer(line), *HTML_LINK.finditer(line)]:
                target = m[2]
                if SCHEME.match(target) or target.startswith("/"):
                    continue
                path, frag = _split_target(target)
                dest = (page if not path else
                        pathlib.Path(os.path.normpath(page.parent / path.replace("/", os.sep))))
                where = f"{rel(page)}:{number}: link {target!r}"
                if not dest.exists():
                    out.append(f"{where}: no such file")
                    continue
                linked.append(dest.resolve())
                if dest.suffix == ".ipynb":
                    known = self._anchors_of(dest)
                    if known is None and dest.resolve().is_relative_to(self.layout.zh.resolve()):
                        out.append(f"{where}: a Chinese notebook without a translation file")
                    elif frag and known is not None and frag[1:] not in known:
                        out.append(f"{where}: {rel(dest)} has no heading with that anchor")
                    if zh_page and dest in self.blocks:
                        out.append(f"{where}: {rel(dest)} has a Chinese edition: link "
                                   f"{self.chinese_target(dest, frag, page)}")
                elif dest.suffix == ".md" and frag and frag[1:] not in github_anchors(
                        dest.read_text("utf-8")):
                    out.append(f"{where}: {rel(dest)} has no heading with that anchor")
            if page.name == "cheatsheet.md":
                for m in MD_LINK.finditer(line):
                    path, frag = _split_target(m[2])
                    dest = pathlib.Path(os.path.normpath(page.parent / path.replace("/", os.sep)))
                    if (dest in self.blocks
                            and self.layout.chinese(dest).resolve() not in linked):
                        out.append(f"{rel(page)}:{number}: links {m[2]!r} but not its Chinese "
                                   f"edition: add [中文]({self.chinese_target(dest, frag, page)})")
        return out

    def write(self) -> list[pathlib.Path]:
        written = []
        for english in self.blocks:
            target = self.layout.chinese(english)
            text = nbformat.writes(self.generate(english))
            if not target.exists() or target.read_text("utf-8") != text:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, "utf-8")
                written.append(target)
        return written

    def stale(self, only: list[pathlib.Path] | None = None) -> str:
        """What needs (re)translation, as blocks to paste into the translation files."""
        parts = []
        for english in self.english:
            if only and english.resolve() not in only:
                continue
            if english not in self.blocks:
                if only:
                    parts.append(f"==> {rel(self.layout.translation(english))} (new file)\n"
                                 + skeleton(self.nbs[english]))
                continue
            todo = []
            for index, cell, block in self.pairs(english):
                if block is None or block.sha != sha12(cell.source):
                    state = "no translation" if block is None else f"stale (was sha {block.sha})"
                    todo.append(f"<!-- cell {cell.id} sha {sha12(cell.source)} -->\n"
                                f"<!-- ({state}, cell {index}) the English now: -->\n{cell.source}\n")
            if todo:
                parts.append(f"==> {rel(self.layout.translation(english))}\n" + "\n".join(todo))
            todo = []
            for index, cell, comments, block in self.code_pairs(english):
                if block is None or block.sha != comments_sha(comments):
                    state = "no translation" if block is None else f"stale (was sha {block.sha})"
                    old = {} if block is None else block.lines
                    todo.append(f"<!-- code {cell.id} sha {comments_sha(comments)} -->\n"
                                f"<!-- ({state}, cell {index}) -->\n"
                                + "".join(f"{c.text}{ARROW}{old.get(c.text, '')}\n"
                                          for c in dict((c.text, c) for c in comments).values()))
            if todo:
                parts.append(f"==> {rel(self.layout.comments(english))}\n" + "\n".join(todo))
        return "\n".join(parts)


def _pending_note(layout: Layout) -> str:
    pending = layout.pending()
    if not pending:
        return "Chinese edition: nothing pending."
    return (f"Chinese edition: {len(pending)} notebook(s) still untranslated "
            f"(listed in {rel(layout.translations / 'PENDING')}):\n"
            + "\n".join(f"  {p}" for p in pending))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.translations", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="regenerate the Chinese notebooks")
    mode.add_argument("--check", action="store_true", help="fail when anything is out of step")
    mode.add_argument("--stale", action="store_true",
                      help="print what needs (re)translation; with notebooks, a whole skeleton")
    parser.add_argument("notebooks", nargs="*", type=pathlib.Path,
                        help="with --stale: English notebooks to print in full")
    parser.add_argument("--root", type=pathlib.Path, default=NOTEBOOKS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    layout = Layout(args.root.resolve())
    edition = Edition(layout)
    if args.stale:
        only = [p.resolve() for p in args.notebooks] or None
        print(edition.stale(only) or "Nothing to translate: every block matches its English cell.")
        print(_pending_note(layout))
        return 0
    if args.write:
        for path in edition.write():
            print(f"wrote {rel(path)}")
        run = [layout.chinese(english) for english in sorted(edition.unexecuted)]
        if run:                     # practice notebooks whose code changed: their outputs in Chinese
            subprocess.run([sys.executable, "-m", "nbconvert", "--to", "notebook", "--execute",
                            "--inplace", "--ExecutePreprocessor.timeout=300", *map(str, run)],
                           check=True, cwd=layout.notebooks.parent)
            edition = Edition(layout)
            edition.write()         # as nbformat.writes writes them (nbconvert adds a newline)
    problems = edition.check()
    print(_pending_note(layout))
    if problems:
        print(f"\n{len(problems)} problem(s) in the Chinese edition:", file=sys.stderr)
        for p in problems:
            print(f"- {p}", file=sys.stderr)
        return 1
    print(f"Chinese edition in step: {len(edition.blocks)} notebook(s) translated.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
