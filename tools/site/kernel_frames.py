"""Run inside a lesson's kernel, right after the cell that displayed a widget: move the widget's
controls over its grid (tools/site/grid.py) as a reader would, and save what its Output shows.

Setting a control's value runs the widget's own callback (normlib.viz.interactive's move, or any
widget built from ipywidgets controls and one Output), so a frame is exactly the picture the lesson
draws for those values, with nothing re-implemented here. Each frame is the Output's PNG; an update
that raises (an error output) stops the build with the lesson's traceback.
"""

from __future__ import annotations

import base64
import json
import pathlib

import ipywidgets as widgets
from ipywidgets.widgets.widget import _instances  # open widgets by id; Widget.widgets: deprecated

from tools.site import grid


def _tree(widget) -> list:
    """``widget`` and its descendants, depth first (the order the page's models are walked)."""
    children = getattr(widget, "children", ()) or ()
    return [widget, *(w for child in children for w in _tree(child))]


def _axis(control) -> dict:
    """What a control can take: its values (what the browser's model reports) and its kind."""
    if isinstance(control, widgets.widget_selection._Selection):
        n = len(control.options)
        return {"kind": "index", "values": list(range(n)), "start": control.index,
                "slider": isinstance(control, widgets.SelectionSlider),
                "labels": list(control._options_labels)}
    if isinstance(control, (widgets.Checkbox, widgets.ToggleButton)):
        return {"kind": "value", "values": [False, True], "start": int(bool(control.value)),
                "slider": False, "labels": ["off", "on"]}
    if isinstance(control, widgets.FloatLogSlider):
        n = round((control.max - control.min) / control.step) + 1
        exps = [control.min + k * control.step for k in range(n)]
        values = [control.base ** e for e in exps]
        start = grid.nearest(values, control.value, log=True)
        return {"kind": "log", "values": values, "start": start, "slider": True}
    if isinstance(control, (widgets.IntSlider, widgets.FloatSlider)):
        n = round((control.max - control.min) / control.step) + 1
        values = [control.min + k * control.step for k in range(n)]
        if isinstance(control, widgets.IntSlider):
            values = [int(v) for v in values]
        start = grid.nearest(values, control.value)
        return {"kind": "value", "values": values, "start": start, "slider": True}
    raise TypeError(f"site frames: no grid for a {type(control).__name__} control "
                    f"({control.description!r}); tools/site/kernel_frames.py knows sliders, "
                    "selections (dropdowns, toggles, selection sliders) and checkboxes")


def _set(control, axis: dict, index: int) -> None:
    if axis["kind"] == "index":
        control.index = index
    else:
        control.value = axis["values"][index]


def render(model_id: str, folder: str, cap: int = grid.CAP) -> str:
    """Render the frames of the widget ``model_id`` into ``folder`` (0.png, 1.png ...); returns
    its grid as JSON: per control (depth first) its kind, kept values and labels, and the frames'
    count; ``start`` is the position of the value a control starts at. The controls are left as
    they started."""
    root = _instances.get(model_id)
    if root is None:
        raise KeyError(f"site frames: no widget {model_id} in this kernel")
    tree = _tree(root)
    outputs = [w for w in tree if isinstance(w, widgets.Output)]
    controls = [w for w in tree if isinstance(w, widgets.ValueWidget) and not isinstance(w, widgets.Output)]
    if len(outputs) != 1 or not controls:
        raise ValueError(f"site frames: widget {model_id} has {len(outputs)} Output widgets and "
                         f"{len(controls)} controls; a pre-rendered widget needs one of the first "
                         "and at least one of the second")
    (out,) = outputs
    axes = [_axis(c) for c in controls]
    starts = [a["start"] for a in axes]
    kept = grid.plan([len(a["values"]) for a in axes], [a["slider"] for a in axes], starts, cap)
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for number, indices in enumerate(grid.combinations(kept)):
        for control, axis, index in zip(controls, axes, indices, strict=True):
            _set(control, axis, index)
        errors = [o for o in out.outputs if o.get("output_type") == "error"]
        if errors:
            raise RuntimeError(f"site frames: the widget's update raised at "
                               f"{[a['values'][i] for a, i in zip(axes, indices, strict=True)]}:\n"
                               + "".join(errors[0]["traceback"]))
        images = [o["data"]["image/png"] for o in out.outputs if "image/png" in o.get("data", {})]
        if len(images) != 1:
            raise RuntimeError(f"site frames: widget {model_id} showed {len(images)} images, not 1")
        (folder / f"{number}.png").write_bytes(base64.b64decode(images[0]))
    for control, axis, start in zip(controls, axes, starts, strict=True):
        _set(control, axis, start)
    return json.dumps({"count": len(grid.combinations(kept)), "controls": [
        {"kind": a["kind"], "values": [a["values"][i] for i in k], "start": k.index(a["start"]),
         **({"labels": [a["labels"][i] for i in k]} if "labels" in a else {})}
        for a, k in zip(axes, kept, strict=True)]})
