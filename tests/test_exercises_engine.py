"""The exercise engine's own rules (issue 33): a catalogue key can never shadow a generic mistake
(code review 2, finding 5), and normlib.exercises has no import cycle, lazy imports included."""

import ast
from pathlib import Path

import pytest
import torch
from test_exercises_llama import block

from normlib import exercises as ex
from normlib.exercises import codes, llama_block
from normlib.exercises._generic import GENERIC_MISTAKES, OUTCOMES, Mistake, catalogue
from normlib.exercises._session import Session
from normlib.exercises.spec import Exercise

PACKAGE = Path(ex.__file__).parent


# --------------------------------------------------------------------------- shadowed keys
@pytest.mark.parametrize("key", ["wrong_shape", "cannot_tell", "raised"])
def test_a_catalogue_key_that_shadows_a_generic_one_fails_where_it_is_defined(key):
    with pytest.raises(ValueError, match=rf"'my_exercise'.*\['{key}'\].*shadow"):
        catalogue("my_exercise", {key: ("mine", "my own meaning"), "fine": ("ok", "ok")})


def test_session_and_the_registry_refuse_a_shadowing_catalogue():
    with pytest.raises(ValueError, match="wrong_shape"):
        Session("x", {"wrong_shape": ("a weight", "a weight of the wrong shape")}, exercise="x")
    shadowing = {**llama_block.LLAMA_MISTAKES,
                 "wrong_dtype": Mistake("mine", "my own meaning", "我自己的意思")}
    with pytest.raises(ValueError, match="llama_block.*wrong_dtype"):
        Exercise.load("llama_block", llama_block.check_llama_block, shadowing)


def test_a_mistake_needs_its_label_and_both_messages():
    with pytest.raises(ValueError, match=r"'my_exercise'.*\['no_zh'\].*three non-empty texts"):
        catalogue("my_exercise", {"no_zh": ("label", "English only"),
                                  "fine": ("label", "English", "中文")})
    with pytest.raises(ValueError, match="text/nothing_here.toml"):
        Exercise.load("nothing_here", llama_block.check_llama_block, {})


def test_no_catalogue_shadows_a_generic_key():
    generic = set(GENERIC_MISTAKES) | set(OUTCOMES)
    for exercise, mistakes in codes.catalogues().items():
        assert not set(mistakes) & generic, exercise


def test_a_llama_block_of_the_wrong_output_shape_is_told_so():
    """Review finding 5's repro: forward returns (B*T, C). It was diagnosed as a weight of the
    wrong shape; the ✗ line and the diagnosis now agree."""
    class Flat(block()):
        def forward(self, x):
            return super().forward(x).flatten(0, 1)

    result = ex.check_llama_block(Flat)
    assert result.code == "llama_block.wrong_shape", result
    assert "output has the wrong shape" in result.message and "权重" not in result.message_zh


def test_a_llama_weight_of_the_wrong_shape_has_its_own_code():
    class Wide(block()):
        def __init__(self, d_model, n_heads, hidden_dim, n_kv_heads=None):
            super().__init__(d_model, n_heads, hidden_dim, n_kv_heads)
            self.ffn.w2 = torch.nn.Linear(hidden_dim + 1, d_model, bias=False)

    result = ex.check_llama_block(Wide)
    assert result.code == "llama_block.weight_shape", result
    assert "ffn.w2.weight has shape" in result.failed_messages[0]


def test_a_redefined_code_keeps_a_note_in_both_languages():
    assert "llama_block.wrong_shape" in codes.registry()
    en, zh = codes.REDEFINED["llama_block.wrong_shape"]
    assert "llama_block.weight_shape" in en and "llama_block.weight_shape" in zh


# --------------------------------------------------------------------------- import cycles
NORMLIB = PACKAGE.parent


def module_name(path: Path) -> str:
    """normlib/exercises/_session.py -> "normlib.exercises._session"; a package's __init__.py is
    the package."""
    parts = path.relative_to(NORMLIB.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """The normlib modules that ``path`` imports anywhere in its source (a lazy import inside a
    function counts), by dotted name; ``from . import a`` names the module a when there is one."""
    modules = {module_name(p) for p in NORMLIB.rglob("*.py")}
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1] + [node.module or ""]) \
                if node.level else node.module
            base = base.rstrip(".")
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                      for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found & modules


def graph() -> dict[str, set[str]]:
    """Every normlib module's imports of other normlib modules, leaving out imports of a package
    (its __init__ gathers the package's names for the reader; no module of normlib needs it)."""
    paths = {module_name(p): p for p in NORMLIB.rglob("*.py")}
    packages = {name for name, p in paths.items() if p.name == "__init__.py"}
    return {name: imports(p) - packages - {name} for name, p in paths.items()
            if name not in packages}


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``edges`` (a list of modules, the first repeated last), or None."""
    state: dict[str, int] = {}                           # 1 on the current path, 2 done

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt, path + [nxt])
                if found:
                    return found
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state:
            found = visit(start, [start])
            if found:
                return found
    return None


def test_the_cycle_finder_finds_a_lazy_cycle():
    assert cycle({"_session": {"catalog"}, "catalog": {"rope"}, "rope": {"_session"}}) == \
        ["_session", "catalog", "rope", "_session"]
    assert cycle({"a": {"b"}, "b": set()}) is None
    assert "normlib.exercises.codes" not in imports(PACKAGE / "_session.py")
    assert "normlib.classroom.grade" in imports(NORMLIB / "classroom" / "__main__.py")


def test_normlib_has_no_import_cycle():
    edges = graph()
    assert len(edges) > 60 and "normlib.exercises._session" in edges["normlib.exercises.rope"]
    assert "normlib.classroom.report" in edges["normlib.classroom.outputs"]     # lazy or not
    assert cycle(edges) is None, " -> ".join(cycle(edges))
