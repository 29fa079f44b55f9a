/* Loaded before require.js on pages with widgets (site/conf.py, nb_ipywidgets_js).
   1. The HTML manager's bundles compute where their fonts are from the URL require.js gives their
      module names: point those names at the vendored copy (_static/vendor/html-manager), at any page
      depth and from file://, so no font is requested from the page's folder or a CDN.
   2. ipywidgets' controls call MathJax 2's MathJax.Hub.Queue whenever window.MathJax exists; the
      site loads MathJax 3, which has no Hub: typeset the element with MathJax 3 instead. */
(function () {
  "use strict";
  var base = new URL("vendor/html-manager/", document.currentScript.src).href;
  var paths = {"@jupyter-widgets/html-manager/dist": base.replace(/\/$/, "")};
  ["base", "base7", "controls", "controls7", "output", "html-manager"].forEach(function (name) {
    paths["@jupyter-widgets/" + name] = base + name;
  });
  window.require = {paths: paths};
  document.addEventListener("DOMContentLoaded", function () {
    if (window.MathJax && !window.MathJax.Hub) {
      window.MathJax.Hub = {Queue: function (job) {
        var element = job && job[2];
        return window.MathJax.startup.promise.then(function () {
          return window.MathJax.typesetPromise(element ? [element] : undefined);
        });
      }};
    }
  });
})();
