"""Answers that are alike once names and formatting are set aside: pairs for the lecturer to read.

Per exercise, each attempted answer cell (the stub's ``raise NotImplementedError`` gone) is parsed,
never run, and turned into a sequence of tokens that keeps its structure and drops what a copier
changes cheaply: comments, docstrings, string texts, blank lines and layout, and the names the
answer binds itself (its variables, arguments and helper functions become ``_0``, ``_1``... in the
order they first appear). Names it does not bind (``torch``, ``F``, ``math``), attribute names
(``.mean``, ``.rsqrt``), operators and numbers stay: they are what the answer does. Runs of
``K`` tokens are fingerprints (as MOSS's winnowing hashes k-grams; Schleimer, Wilkerson and Aiken,
SIGMOD 2003); two answers' similarity is the Jaccard index of their fingerprints, after removing
the obvious: the fingerprints of the stub the notebook gave (its signature and docstring), and
those that more than half of the class's answers share (the idiom most students write), once the
exercise has at least MIN_CLASS answers. An answer left with fewer than MIN_FINGERPRINTS fingerprints is
too short to tell a copy from a coincidence and is not compared.

A listed pair is a reason to read two answers side by side, never a verdict: short exercises have
few ways to be right.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from collections import Counter
from dataclasses import dataclass
from itertools import combinations

from .notebooks import ROOT, practice_cells, read_notebook

__all__ = ["normalised_tokens", "fingerprints", "similar_pairs", "Pair", "THRESHOLD"]

K = 8                       # tokens per fingerprint: about one short statement
THRESHOLD = 0.8             # Jaccard index at or above which a pair is listed
MIN_FINGERPRINTS = 12       # fewer left after the obvious is removed: not compared
MIN_CLASS = 5               # answers an exercise needs before a shared idiom counts as obvious
MAX_NODES = 50_000          # a real answer has a few hundred


def _bound(tree: ast.AST) -> set[str]:
    """The names the code binds: assigned, arguments, functions and classes it defines, imports'
    aliases, loop and exception variables."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.alias) and node.asname:
            names.add(node.asname)
    return names


def _is_docstring(node: ast.AST) -> bool:
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str))


def normalised_tokens(source: str) -> list[str] | None:
    """The answer as tokens with its own names renamed in order of appearance, its comments,
    docstrings, string texts and layout gone; None when it does not parse or is far too large."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    try:
        bound = _bound(tree)
    except RecursionError:
        return None
    rename: dict[str, str] = {}

    def name(n: str) -> str:
        if n not in bound:
            return n
        return rename.setdefault(n, f"_{len(rename)}")

    tokens, stack, seen = [], [tree], 0
    while stack:                                   # depth first, in source order, no recursion
        node = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            return None
        if isinstance(node, (ast.expr_context, ast.Module)) or _is_docstring(node):
            if isinstance(node, ast.Module):
                stack.extend(reversed(node.body))
            continue
        tokens.append(type(node).__name__)
        if isinstance(node, ast.Name):
            tokens.append(name(node.id))
        elif isinstance(node, ast.arg):
            tokens.append(name(node.arg))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            tokens.append(name(node.name))
        elif isinstance(node, ast.Attribute):
            tokens.append(node.attr)
        elif isinstance(node, ast.keyword):
            tokens.append(node.arg or "**")
        elif isinstance(node, ast.alias):
            tokens.append(node.name)
            if node.asname:
                tokens.append(name(node.asname))
        elif isinstance(node, ast.Constant):
            tokens.append("str" if isinstance(node.value, (str, bytes)) else repr(node.value))
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return tokens


def fingerprints(source: str) -> frozenset[str]:
    """The answer's fingerprints: a hash of every run of K normalised tokens (empty when it does
    not parse)."""
    tokens = normalised_tokens(source) or []
    return frozenset(hashlib.blake2b("\x1f".join(tokens[i:i + K]).encode(), digest_size=8)
                     .hexdigest() for i in range(max(len(tokens) - K + 1, 0)))


@functools.cache
def _stub(stem: str) -> frozenset[str]:
    """The fingerprints of the stub's answer cells (both editions) in the collection's practice
    notebook: what every answer starts from."""
    ids, found = practice_cells(stem)[0], set()
    for folder in (ROOT / "notebooks" / "exercises", ROOT / "notebooks" / "zh" / "exercises"):
        try:
            cells = read_notebook(folder / f"{stem}.ipynb")
        except ValueError:
            continue
        for cell in cells:
            if cell["id"] in ids:
                found |= fingerprints(cell["source"])
    return frozenset(found)


@dataclass(frozen=True)
class Pair:
    """Two students' answers to one exercise and their similarity (0 to 1)."""

    exercise: str            # the notebook's stem, "01_layer_norm"
    students: tuple[str, str]
    score: float
    answers: tuple[str, str]


def similar_pairs(items: list[dict], threshold: float = THRESHOLD) -> list[Pair]:
    """The pairs of answers to the same exercise whose similarity is at least ``threshold``, most
    similar first. ``items`` are grade.find_submissions's: the attempted answers (jobs whose
    answer no longer raises NotImplementedError) are compared."""
    if not 0 < threshold <= 1:
        raise ValueError(f"--similarity: expected a number above 0 and at most 1, got "
                         f"{threshold!r}")
    by_stem: dict[str, list[dict]] = {}
    for item in items:
        if "answer" in item and "raise NotImplementedError" not in item["answer"]:
            by_stem.setdefault(item["stem"], []).append(item)
    pairs = []
    for stem, answers in by_stem.items():
        prints = {a["student"]: fingerprints(a["answer"]) - _stub(stem) for a in answers}
        if len(answers) >= MIN_CLASS:
            shared = Counter(f for p in prints.values() for f in p)
            common = {f for f, n in shared.items() if n > len(answers) / 2}
            prints = {s: p - common for s, p in prints.items()}
        text = {a["student"]: a["answer"] for a in answers}
        judged = sorted(s for s, p in prints.items() if len(p) >= MIN_FINGERPRINTS)
        for a, b in combinations(judged, 2):
            score = len(prints[a] & prints[b]) / len(prints[a] | prints[b])
            if score >= threshold:
                pairs.append(Pair(stem, (a, b), round(score, 3), (text[a], text[b])))
    return sorted(pairs, key=lambda p: (-p.score, p.exercise, p.students))
