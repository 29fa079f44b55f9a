"""Write docs/mistakes.md, the list of every mistake code, from the checkers' own tables.

    python -m tools.mistake_codes            # write docs/mistakes.md (make mistake-codes)
    python -m tools.mistake_codes --check    # exit 1 when docs/mistakes.md is out of date

Each code's English and Chinese messages come from normlib.exercises.codes (the checkers'
catalogues); its minimal wrong example is the checker's own mutant for that mistake (the expression
in the checker's table), or, for a mistake only a property probe finds, the probe that finds it.

``emitted_keys`` reads a checker's source for every mistake key it can emit (mutant tables, probe
results, ``Fail(..., key)``): tests/test_exercises_tools.py checks that each is in the catalogue,
so that a typo cannot silently degrade a diagnosis to "wrong values".
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

from normlib.exercises import EXERCISES, codes
from normlib.exercises._generic import GENERIC_MISTAKES, OUTCOMES

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "mistakes.md"
SOURCES = ROOT / "normlib" / "exercises"

# the checker modules of each exercise, from the registry (a shared module counts for each exercise
# that uses it): the checker's own module and the helper modules it keeps its tables in
HELPERS = {"batch_norm": ("_statistics",)}
MODULES = {key: (e.checker.__module__.rsplit(".", 1)[1], *HELPERS.get(key, ()))
           for key, e in EXERCISES.items()}
# modules shared by several exercises: each key they emit is in one of those exercises' catalogues
# (the norm probes emit LayerNorm's keys for LayerNorm and RMSNorm's for RMSNorm)
SHARED = {"_probes": ("layer_norm", "rms_norm")}
# strings in those positions that are not mistake keys: parameter and layout names
NOT_KEYS = {"correct", "running_mean", "running_var", "x", "alpha", "beta", "half", "interleaved",
            "w1", "w2", "w3", "var", "variance", "tanh", "cat", "interleave", "attention"}
_KEY = re.compile(r"^[a-z][a-z0-9_]*$")

# the wrong code behind each generic outcome, for the page
GENERIC_EXAMPLES = {
    "not_implemented": "raise NotImplementedError",
    "cannot_tell": "a mistake no catalogue lists and every probe misses",
    "shortcut": "return F.layer_norm(x, x.shape[-1:], weight, bias, eps)",
    "not_callable": "check_layer_norm(layer_norm(x, w, b))",
    "returned_none": "y = (x - mu) / sigma  # no return",
    "not_a_tensor": "return y.tolist()",
    "wrong_shape": "return y.mean(-1)",
    "wrong_dtype": "return y.float()  # for float16 input",
    "nan": "return x / 0",
    "in_place": "x -= x.mean(-1, keepdim=True)",
    "raised": "return x @ weight  # shapes do not match",
    "time_limit": "while True: pass",
    "no_autograd": "return torch.tensor(y.tolist())",
    "wrong_grad": "a forward right in value whose gradient is cut off in part",
    "wrong_values": "any other wrong value",
}


def _strs(node) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.IfExp):
        return _strs(node.body) + _strs(node.orelse)
    return []


def _is_text_or_code(node) -> bool:
    """A sentence, or the code of a mutant: what follows a key in a table."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return " " in node.value
    return isinstance(node, (ast.JoinedStr, ast.BinOp, ast.Lambda, ast.Call, ast.Name,
                             ast.Attribute, ast.Subscript))


def _key_positions(tree) -> list[tuple[str, ast.AST, ast.AST | None]]:
    """(key, the node naming it, the node after it: a mutant's code or a probe's sentence)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple):
            for a, b in zip(node.elts, node.elts[1:], strict=False):
                if _is_text_or_code(b):
                    found += [(k, a, b) for k in _strs(a)]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("Fail", "_Stop"):
            args = node.args[1:2] if node.func.id == "Fail" else node.args[:1]
            args += [k.value for k in node.keywords if k.arg == "mistake"]
            found += [(k, a, None) for a in args for k in _strs(a)]
        elif isinstance(node, ast.IfExp):
            keys = _strs(node)
            if len(keys) == 2:
                found += [(k, node, None) for k in keys]
    return [(k, a, b) for k, a, b in found if _KEY.match(k) and k not in NOT_KEYS]


def emitted_keys(module: str) -> set[str]:
    """Every mistake key the checker module (e.g. "layer_norm", "_probes") can emit, read from its
    source."""
    return {k for k, _, _ in _key_positions(ast.parse((SOURCES / f"{module}.py").read_text()))}


def examples(exercise: str) -> dict[str, str]:
    """{key: the checker's mutant for it, as written in its table, in Markdown} (the first one)."""
    out: dict[str, str] = {}
    for module in MODULES[exercise]:
        source = (SOURCES / f"{module}.py").read_text()
        for key, _, after in _key_positions(ast.parse(source)):
            if key in out:
                continue
            if isinstance(after, (ast.Lambda, ast.Call)):
                out[key] = "`" + " ".join((ast.get_source_segment(source, after) or "").split()) + "`"
            elif isinstance(after, ast.Name) and f"def {after.id}(" in source:
                out[key] = f"`{after.id}` in normlib/exercises/{module}.py"
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def page() -> str:
    registry = codes.registry()
    lines = [
        "# Mistake codes",
        "",
        "Every mistake the practice checkers can name has a stable code, `<exercise>.<mistake>`, "
        "with a one-line message in English and Chinese: `result.code`, `result.message`, "
        "`result.message_zh` of a `CheckResult`, and the `code` column of the grader's gradebook. "
        "A released code is never renamed or dropped without an alias (tests/data/released_codes.txt, "
        "`ALIASES` in normlib/exercises/codes.py).",
        "",
        "Generated by `make mistake-codes` from the checkers' catalogues: do not edit by hand. The "
        "example is the checker's own wrong implementation of that mistake (its mutant), or the "
        "property probe that finds it.",
        "",
        "## Every exercise",
        "",
        "Each exercise has these codes too, e.g. `layer_norm.returned_none`.",
        "",
        "| code | English | 中文 | example |",
        "|---|---|---|---|",
    ]
    first = next(iter(codes.catalogues()))
    for key in {**OUTCOMES, **GENERIC_MISTAKES}:
        c = registry[codes.code_of(first, key)]
        lines.append(f"| `<exercise>.{key}` | {_cell(c.message)} | {_cell(c.message_zh)} | "
                     f"`{_cell(GENERIC_EXAMPLES[key])}` |")
    for exercise, catalogue in codes.catalogues().items():
        shown = examples(exercise)
        lines += ["", f"## {exercise}", "", "| code | English | 中文 | example |", "|---|---|---|---|"]
        for key in catalogue:
            c = registry[codes.code_of(exercise, key)]
            example = _cell(shown[key]) if key in shown else "no mutant: found by a probe or a check"
            lines.append(f"| `{c.code}` | {_cell(c.label)}: {_cell(c.message)} | "
                         f"{_cell(c.message_zh)} | {example} |")
    changed = [f"| `{old}` | renamed: now `{new}` | 已改名：现为 `{new}` |"
               for old, new in codes.ALIASES.items()]
    changed += [f"| `{code}` | {_cell(en)} | {_cell(zh)} |"
                for code, (en, zh) in codes.REDEFINED.items()]
    if changed:
        lines += ["", "## Codes renamed or redefined since their release", "",
                  "A gradebook written before the change means by these codes what this table "
                  "says.", "", "| code | what changed | 中文 |", "|---|---|---|", *changed]
    lines += ["", "## submission (the grader)", "", "| code | English | 中文 | example |",
              "|---|---|---|---|"]
    for code, (_, en, zh, example) in codes.SUBMISSION_CODES.items():
        lines.append(f"| `{code}` | {_cell(en)} | {_cell(zh)} | `{_cell(example)}` |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when the page is out of date")
    args = parser.parse_args(argv)
    text = page()
    if args.check:
        if not PAGE.exists() or PAGE.read_text() != text:
            print(f"{PAGE.relative_to(ROOT)} is out of date: run make mistake-codes",
                  file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(ROOT)}: {len(codes.registry())} codes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
