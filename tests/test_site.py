"""The site's build steps without a browser (make e2e-site opens the site): the frame grid's
arithmetic, the jieba dictionary from the glossary, the run-it and twin links, and Sphinx 9.0.4's
Chinese-search bug, whose workaround (site/zh_search.py) must go once the pinned Sphinx is fixed."""

from __future__ import annotations

import importlib.util
import math
import pathlib

import pytest

from tools.site import grid, jieba_dict

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _site_module(name: str):
    spec = importlib.util.spec_from_file_location(f"normlib_site_{name}", ROOT / "site" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------ the frame grid

def test_options_are_kept_whole_and_sliders_fit_the_cap():
    kept = grid.plan([4, 19, 51], [False, True, True], [0, 8, 10], cap=48)
    assert kept[0] == [0, 1, 2, 3]
    assert math.prod(map(len, kept)) <= 48
    assert all(len(k) >= 2 for k in kept)


def test_slider_keeps_its_ends_and_its_start():
    kept = grid.plan([201], [True], [10], cap=48)[0]
    assert len(kept) == 48 and kept[0] == 0 and kept[-1] == 200 and 10 in kept


def test_small_grid_keeps_every_step():
    assert grid.plan([3, 5], [False, True], [1, 2], cap=48) == [[0, 1, 2], [0, 1, 2, 3, 4]]


def test_options_beyond_the_cap_are_all_kept():
    kept = grid.plan([3, 7, 5, 5], [False] * 4, [0] * 4, cap=48)
    assert math.prod(map(len, kept)) == 525


def test_nearest_and_frame_number():
    assert grid.nearest([0.0, 0.5, 1.0], 0.7) == 1
    assert grid.nearest([0.01, 0.1, 1.0], 0.05, log=True) == 1      # log: 0.05 is nearer 0.1
    assert grid.nearest([0.01, 0.1, 1.0], 0.05) == 0
    combos = grid.combinations([[0, 1], [0, 5, 9]])
    assert combos[grid.frame_number([1, 2], [2, 3])] == (1, 9)


def test_frame_number_rejects_a_position_outside_the_grid():
    with pytest.raises(ValueError, match="outside"):
        grid.frame_number([3], [3])


# ------------------------------------------------------------------ search

def test_jieba_dictionary_holds_the_glossary_terms_whole():
    text = jieba_dict.GLOSSARY.read_text(encoding="utf-8")
    words = jieba_dict.terms(text)
    assert {"层归一化", "残差连接", "均方根归一化", "前置归一化"} <= set(words)
    assert all(jieba_dict.HAN_WORD.fullmatch(w) for w in words)


def _site_package(name: str):
    """A package of site/requirements.txt: `make site` installs them, so `make pytest` (which runs
    first in CI) skips these tests and `make e2e-site` runs them."""
    return pytest.importorskip(name, reason=f"{name} is installed by `make site` (site/requirements.txt)")


def test_jieba_keeps_terms_whole_with_the_dictionary(tmp_path):
    jieba = _site_package("jieba")
    path = tmp_path / "dict.txt"
    path.write_text(jieba_dict.dictionary(jieba_dict.GLOSSARY.read_text(encoding="utf-8")),
                    encoding="utf-8")
    tokenizer = jieba.Tokenizer()
    tokenizer.load_userdict(str(path))
    for term in ("层归一化", "残差连接"):
        assert term in tokenizer.lcut_for_search(f"我们比较{term}的作用")


def test_sphinx_chinese_search_bug_is_still_there():
    """Fails once the pinned Sphinx writes a stemmer name its JS defines: then delete
    site/zh_search.py and its line in site/conf.py (sphinx-doc/sphinx#14229)."""
    _site_package("sphinx")
    from sphinx.search.zh import SearchChinese
    zh_search = _site_module("zh_search")
    assert not zh_search.stemmer_defined(SearchChinese), (
        "Sphinx's Chinese search names a stemmer it defines now: site/zh_search.py is no longer needed")
    assert zh_search.stemmer_defined(zh_search.SearchChineseFixed)


# ------------------------------------------------------------------ page links

def test_twins_and_launch_links():
    pages = _site_module("pages")
    assert pages.twin("notebooks/03_layernorm_and_rmsnorm") == "notebooks/zh/03_layernorm_and_rmsnorm"
    assert pages.twin("notebooks/zh/exercises/01_layer_norm") == "notebooks/exercises/01_layer_norm"
    assert pages.twin("README") == "README.zh-CN" and pages.twin("docs/teaching.zh-CN") == "docs/teaching"
    assert pages.twin("docs/mistakes") is None
    assert pages.launch_links("notebooks/03_x.ipynb", "") == [("local", "make lab")]
    assert pages.launch_links("notebooks/exercises/01_x.ipynb", "") == [("local", "make practice")]
    colab, binder = pages.launch_links("notebooks/03_x.ipynb", "https://github.com/o/normlib.git")
    assert colab[1] == "https://colab.research.google.com/github/o/normlib/blob/HEAD/notebooks/03_x.ipynb"
    assert binder[1] == "https://mybinder.org/v2/gh/o/normlib/HEAD?labpath=notebooks%2F03_x.ipynb"


def test_markdown_anchors_follow_the_site_slug():
    pages = _site_module("pages")
    text = "see [Practice](#practice-手撕)\n\n## Practice (手撕)\n"
    assert "](#Practice-(手撕))" in pages.markdown_anchors(text)


# ------------------------------------------------------------------ widgets and their frames

def test_control_axes():
    import ipywidgets as widgets

    from tools.site import kernel_frames
    axis = kernel_frames._axis(widgets.IntSlider(value=3, min=1, max=5))
    assert axis["values"] == [1, 2, 3, 4, 5] and axis["start"] == 2 and axis["slider"]
    log = kernel_frames._axis(widgets.FloatLogSlider(value=1.0, base=10, min=-1, max=1, step=1))
    assert log["kind"] == "log" and log["values"] == pytest.approx([0.1, 1.0, 10.0]) and log["start"] == 1
    toggle = kernel_frames._axis(widgets.ToggleButtons(options=[("Post-LN", "post"), ("Pre-LN", "pre")],
                                                       value="pre"))
    assert toggle == {"kind": "index", "values": [0, 1], "start": 1, "slider": False,
                      "labels": ["Post-LN", "Pre-LN"]}
    assert kernel_frames._axis(widgets.Checkbox(value=True))["start"] == 1
    with pytest.raises(TypeError, match="no grid for a Text control"):
        kernel_frames._axis(widgets.Text(description="name"))


def test_stored_widgets_of_a_lesson_and_its_chinese_edition():
    from tools.site import frames
    name = "03_layernorm_and_rmsnorm.ipynb"
    english = frames.stored_widgets(frames.NOTEBOOKS / name)
    chinese = frames.stored_widgets(frames.NOTEBOOKS / "zh" / name)
    assert len(english) == 2
    assert all(len(w["controls"]) >= 1 and w["output"] for w in english.values())
    assert chinese == english           # same code, outputs and widget state: the same frames
