"""normlib.diagrams: each diagram carries the labels its lesson relies on, and its layout holds.

A layout holds when, after drawing, no two text labels overlap, every label lies inside the figure,
and a label centred in a box fits inside that box; in the reading style and in lecture mode.
"""

import itertools
import re

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from normlib import diagrams, viz  # noqa: E402

DIAGRAMS = {
    "decoder_block_map": lambda: diagrams.decoder_block_map(),
    "placements_post_pre": lambda: diagrams.placements(("post", "pre")),
    "placements_all": lambda: diagrams.placements(diagrams.PLACEMENT_KINDS),
    "placements_one": lambda: diagrams.placements("deepnorm"),
    "placements_four": lambda: diagrams.placements(("sandwich", "parallel", "deepnorm", "olmo2")),
    "swiglu_flow": lambda: diagrams.swiglu_flow(),
    "swiglu_flow_llama7b": lambda: diagrams.swiglu_flow(4096, 11008),
    "rope_layouts": lambda: diagrams.rope_layouts(),
    "rope_layouts_16": lambda: diagrams.rope_layouts(16),
    "rope_layouts_2": lambda: diagrams.rope_layouts(2),
    "attention_shapes": lambda: diagrams.attention_shapes(),
}


pytestmark = pytest.mark.usefixtures("restore_matplotlib")


def _texts(fig):
    """The visible, non-empty text artists of fig, drawn, with their boxes in pixels."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return [(t, t.get_window_extent(renderer)) for t in fig.findobj(Text)
            if t.get_visible() and t.get_text().strip()]


def _labels(fig) -> str:
    return "\n".join(t.get_text() for t in fig.findobj(Text))


def _overlap(a, b) -> bool:
    """Whether two pixel boxes share more than half a pixel each way."""
    return min(a.x1, b.x1) - max(a.x0, b.x0) > 0.5 and min(a.y1, b.y1) - max(a.y0, b.y0) > 0.5


def layout_problems(fig) -> list[str]:
    """Overlapping labels, labels cut off by the figure's edge, labels spilling out of their box."""
    texts = _texts(fig)
    width, height = fig.canvas.get_width_height()
    problems = [f"{a.get_text()!r} overlaps {b.get_text()!r}"
                for (a, ba), (b, bb) in itertools.combinations(texts, 2) if _overlap(ba, bb)]
    for t, box in texts:
        if box.x0 < 0 or box.y0 < 0 or box.x1 > width or box.y1 > height:
            problems.append(f"{t.get_text()!r} is cut off: {box} outside {width} x {height} px")
    renderer = fig.canvas.get_renderer()
    boxes = [p.get_window_extent(renderer) for p in fig.findobj(FancyBboxPatch)]
    for t, box in texts:
        cx, cy = (box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2
        for patch in boxes:
            if patch.contains(cx, cy):
                if box.x0 < patch.x0 or box.x1 > patch.x1 or box.y0 < patch.y0 or box.y1 > patch.y1:
                    problems.append(f"{t.get_text()!r} spills out of its box")
    return problems


def test_the_layout_check_finds_crowded_labels():
    fig, ax = diagrams._canvas(10, 4)
    diagrams._box(ax, 2, 3, 1.0, 1.0, "a label far too long for its box")
    diagrams._note(ax, 5, 1, "one label")
    diagrams._note(ax, 5.3, 1.1, "another label")
    diagrams._note(ax, 9.8, 3, "off the edge")
    problems = layout_problems(fig)
    assert "'a label far too long for its box' spills out of its box" in problems
    assert "'one label' overlaps 'another label'" in problems
    assert any(p.startswith("'off the edge' is cut off") for p in problems)
    assert "'a label far too long for its box' is cut off" not in problems


@pytest.mark.parametrize("mode", ["reading", "lecture"])
@pytest.mark.parametrize("name", DIAGRAMS)
def test_layout_holds_in_both_styles(name, mode):
    viz.lecture_mode(mode == "lecture")
    fig = DIAGRAMS[name]()
    assert isinstance(fig, Figure)
    assert layout_problems(fig) == []


def test_lecture_mode_enlarges_a_diagram_without_changing_its_layout():
    viz.reading_mode()
    small = diagrams.swiglu_flow().canvas.get_width_height()
    viz.lecture_mode()
    large = diagrams.swiglu_flow().canvas.get_width_height()
    assert large[0] >= 1.9 * small[0] and large[1] >= 1.9 * small[1]     # 1.6x inches, 1.25x dpi


def test_the_figure_is_opaque_white_for_light_and_dark_themes():
    for fig in (f() for f in DIAGRAMS.values()):
        assert matplotlib.colors.to_rgba(fig.get_facecolor()) == (1.0, 1.0, 1.0, 1.0)
        plt.close(fig)


def test_the_map_tags_every_lesson():
    text = _labels(diagrams.decoder_block_map())
    for lesson in ("00", "01", "02", "03", "04", "05", "06", "07", "08", "09", "10"):
        assert re.search(rf"\b{lesson}\b", text), f"lesson {lesson} is not on the map"
    for part in ("Token embedding", "RMSNorm", "LayerNorm", "RoPE", "attention", "SwiGLU",
                 "Final RMSNorm", "LM head", "residual", "DeepNorm", "warmup"):
        assert part in text


def test_placements_name_each_placement_and_mark_the_identity_path():
    text = _labels(diagrams.placements(diagrams.PLACEMENT_KINDS))
    for label in ("Post-LN", "Pre-LN", "Sandwich-LN", "Gemma 2", "GPT-J", "PaLM", "DeepNorm",
                  "OLMo 2", "x ← LN(x + F(x))", "x ← x + F(LN(x))", "x ← LN(α·x + F(x))",
                  "x ← x + LN(F(LN(x)))", "x ← x + RMSNorm(F(x))"):
        assert label in text
    post, pre = (_labels(diagrams.placements(k)) for k in ("post", "pre"))
    assert "identity path crosses LN" in post and "identity path: untouched" in pre
    assert "identity path crosses × α and LN" in _labels(diagrams.placements("deepnorm"))


def test_swiglu_flow_names_both_schemes_and_the_shapes():
    text = _labels(diagrams.swiglu_flow())
    for label in ("w1", "w3", "w2", "gate_proj", "up_proj", "down_proj", "SiLU",
                  "d_model → hidden", "hidden → d_model"):
        assert label in text
    assert "4,096 → 11,008" in _labels(diagrams.swiglu_flow(4096, 11008))


def test_rope_layouts_pair_the_slots_of_each_layout():
    fig = diagrams.rope_layouts(8)
    text = _labels(fig)
    assert "Meta" in text and "rotate_half" in text
    # each layout row: slot labels 0..7 with the frequency index of their pair beneath
    thetas = [t.get_text() for t in fig.findobj(Text) if t.get_text().startswith("$\\theta")]
    interleaved = [int(s[9:-2]) for s in thetas[:8]]
    half = [int(s[9:-2]) for s in thetas[8:]]
    assert interleaved == [0, 0, 1, 1, 2, 2, 3, 3]
    assert half == [0, 1, 2, 3, 0, 1, 2, 3]


def test_attention_shapes_follow_the_tensors():
    text = _labels(diagrams.attention_shapes())
    for label in ("(B, T, C)", "(B, H, T, D)", "(B, H_kv, T, D)", "(B, H, T, T)", "repeat_kv",
                  "causal mask", "softmax", "o_proj", "concat heads", "q_proj", "k_proj", "v_proj",
                  "KV cache", "(B, H_kv, S, D)", "(B, H, T, S)", "(B, H, 1, S)"):
        assert label in text


def test_attention_shapes_cache_sits_after_rope_and_before_repeat_kv():
    # the keys are cached rotated and unrepeated (H_kv heads): the cache box lies below RoPE's box
    # and above repeat_kv's
    fig = diagrams.attention_shapes()
    texts = {t.get_text(): t.get_position()[1] for t in fig.findobj(Text) if t.get_text().strip()}
    rope = texts["RoPE on q and k (lesson 08)"]
    cache = texts["KV cache: after RoPE, before repeat_kv"]
    repeat = next(y for label, y in texts.items() if label.startswith("repeat_kv"))
    assert rope > cache > repeat


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda: diagrams.placements("postnorm"), ValueError,
     "placements: unknown kinds entry 'postnorm'; expected one of 'post'"),
    (lambda: diagrams.placements(()), TypeError, "placements: kinds must be"),
    (lambda: diagrams.placements(3), TypeError, "placements: kinds must be"),
    (lambda: diagrams.rope_layouts(7), ValueError, "rope_layouts: head_dim must be even .* got 7"),
    (lambda: diagrams.rope_layouts(32), ValueError, "rope_layouts: head_dim .* at most 16"),
    (lambda: diagrams.rope_layouts(8.0), TypeError, "rope_layouts: head_dim must be an int"),
    (lambda: diagrams.swiglu_flow(0), ValueError, "swiglu_flow: d_model must be >= 1, got 0"),
    (lambda: diagrams.swiglu_flow(64, "big"), TypeError, "swiglu_flow: hidden must be an int"),
])
def test_bad_arguments_name_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()
