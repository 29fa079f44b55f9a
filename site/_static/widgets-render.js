/* Renders the notebooks' saved widgets with the ipywidgets HTML manager (in place of its
   embed-amd.js, so that the models stay in reach), and makes each lesson widget move without a
   kernel: window.normlibFrames (frames/manifest.js, tools/site/frames.py) lists, per saved widget,
   its controls' models, the values each was rendered at and a folder of frames, numbered with the
   last control varying fastest. When a control moves, each control is snapped to its nearest
   rendered value (in log space for a log slider; tools/site/grid.py does the same in Python) and
   the widget's image becomes that frame. A note under the widget says the view is pre-rendered (or,
   for a normlib.viz.interactive widget without frames, as the practice notebooks', that it is the
   saved picture). */
(function () {
  "use strict";
  var STATE = 'script[type="application/vnd.jupyter.widget-state+json"]';
  var VIEW = 'script[type="application/vnd.jupyter.widget-view+json"]';
  var staticUrl = new URL(".", document.currentScript.src).href;
  var zh = (document.documentElement.lang || "").indexOf("zh") === 0;
  var STATIC_NOTE = zh
    ? "保存的视图：这个控件的图是笔记本保存时的那一张，移动控件不会改变它。要移动它，请在 JupyterLab 中运行本笔记本（见页首的“运行”）。"
    : "Saved view: this widget's picture is the one the notebook was saved with, and moving a control does not change it. To move it, run the notebook in JupyterLab (see \"Run it\" at the top of the page).";
  var NOTE = zh
    ? "预渲染视图：构建网站时按这些控件的取值画好的图，移动控件时显示最接近的一张。要实时运行，请在 JupyterLab 中打开本笔记本（见页首的“运行”）。"
    : "Pre-rendered view: the pictures were drawn when this site was built, over a grid of these controls' values; moving a control shows the nearest one. To run it live, open the notebook in JupyterLab (see \"Run it\" at the top of the page).";

  function nearest(values, value, log) {
    var best = 0, bestDistance = Infinity;
    for (var i = 0; i < values.length; i++) {
      var d = log ? Math.abs(Math.log(values[i]) - Math.log(value)) : Math.abs(Number(values[i]) - Number(value));
      if (d < bestDistance) { best = i; bestDistance = d; }
    }
    return best;
  }

  function wire(entry, models, area, viewTag) {
    var controls = entry.controls.map(function (c) { return {spec: c, model: models[c.model]}; });
    if (controls.some(function (c) { return !c.model; })) {
      throw new Error("normlib frames: a control of " + entry.folder + " is not in the saved state");
    }
    area.setAttribute("data-normlib-frames", entry.folder);
    function show() {
      var number = 0;
      controls.forEach(function (c) {
        var value = c.model.get(c.spec.kind === "index" ? "index" : "value");
        number = number * c.spec.values.length + nearest(c.spec.values, value, c.spec.kind === "log");
      });
      var images = area.querySelectorAll("img");
      if (!images.length) { throw new Error("normlib frames: no image in " + entry.folder); }
      images[images.length - 1].src = new URL(entry.folder + "/" + number + ".png", staticUrl).href;
      area.setAttribute("data-normlib-frame", String(number));
    }
    controls.forEach(function (c) { c.model.on("change:value change:index", show); });
    addNote(viewTag, NOTE);
  }

  function addNote(viewTag, text) {
    var note = document.createElement("p");
    note.className = "normlib-prerendered";
    note.textContent = text;
    viewTag.parentElement.insertBefore(note, viewTag.nextSibling);
  }

  async function renderState(tag, htmlmanager, loader) {
    var manager = new htmlmanager.HTMLManager({loader: loader});
    var list = await manager.set_state(JSON.parse(tag.textContent));
    var models = {};
    list.forEach(function (m) { models[m.model_id] = m; });
    var frames = window.normlibFrames || {};
    await Promise.all(Array.from(document.querySelectorAll(VIEW)).map(async function (viewTag) {
      var id = JSON.parse(viewTag.textContent).model_id;
      if (!models[id]) { return; }
      var area = document.createElement("div");
      area.className = "widget-subarea";
      viewTag.parentElement.insertBefore(area, viewTag);
      var view = await manager.create_view(models[id]);
      await manager.display_view(view, area);
      if (frames[id]) {
        wire(frames[id], models, area, viewTag);
      } else if ((models[id].get("_dom_classes") || []).indexOf("widget-interact") >= 0) {
        addNote(viewTag, STATIC_NOTE);     // a normlib.viz.interactive widget without frames
      }
    }));
  }

  window.require(["@jupyter-widgets/html-manager", "@jupyter-widgets/html-manager/dist/libembed-amd"],
    function (htmlmanager, embed) {
      function start() {
        var done = Promise.all(Array.from(document.querySelectorAll(STATE)).map(function (tag) {
          return renderState(tag, htmlmanager, embed.requireLoader);
        }));
        done.then(function () { document.documentElement.setAttribute("data-widgets-rendered", "1"); },
                  function (error) { setTimeout(function () { throw error; }); });
      }
      if (document.readyState === "complete") { start(); } else { window.addEventListener("load", start); }
    });
})();
