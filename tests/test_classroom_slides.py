"""Slides for a class (lecturer walkthrough, problem 3): a lesson saved from JupyterLab without its
widget state loses its widget plots in the deck; the build says so instead of dropping them
silently."""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat

from tools import build_slides

LESSON = Path(__file__).resolve().parents[1] / "notebooks" / "03_layernorm_and_rmsnorm.ipynb"


def test_a_widget_without_saved_state_is_named(tmp_path, capsys):
    nb = nbformat.read(LESSON, as_version=4)
    assert build_slides.unsaved_widgets(nb) == []          # the committed lesson saved its state
    stale = copy.deepcopy(nb)
    stale.metadata["widgets"][build_slides.WIDGET_STATE]["state"] = {}   # as JupyterLab saves it
    cells = build_slides.unsaved_widgets(stale)
    assert cells and all("interactive" in stale.cells[i].source for i in cells)
    path = tmp_path / LESSON.name
    nbformat.write(stale, path)
    build_slides.build_deck(path, tmp_path, build_slides.exporter())
    err = capsys.readouterr().err
    assert f"cells {', '.join(map(str, cells))} show a widget whose state was not saved" in err
    assert "Save Widget State Automatically" in err
