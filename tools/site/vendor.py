"""Copy what the site's pages load from the npm packages locked in site/package-lock.json
(`npm ci` in site/ installs them) into ``<out>/vendor/``, trimmed to the files a page requests.

    python -m tools.site.vendor --out build/site-vendor

MathJax 3 (self-contained: MathJax 4's browser build fetches its fonts from a CDN), require.js, and
the ipywidgets HTML manager's AMD library with its web fonts. A missing file is an error naming
the command that installs it.
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
NODE_MODULES = ROOT / "site" / "node_modules"

# (source under node_modules, destination under vendor/, glob or None for the file itself)
FILES = [
    ("mathjax/es5/tex-mml-chtml.js", "mathjax/tex-mml-chtml.js", None),
    ("mathjax/es5/output/chtml/fonts/woff-v2", "mathjax/output/chtml/fonts/woff-v2", "*.woff"),
    ("mathjax/es5/input/tex/extensions", "mathjax/input/tex/extensions", "**/*.js"),
    ("requirejs/require.js", "require.js", None),
    ("@jupyter-widgets/html-manager/dist/libembed-amd.js", "html-manager/libembed-amd.js", None),
    ("@jupyter-widgets/html-manager/dist", "html-manager", "*.woff*"),
]


def copy(out: pathlib.Path, node_modules: pathlib.Path = NODE_MODULES) -> int:
    """Copy FILES into ``out``/vendor; returns the number of files copied."""
    vendor = out / "vendor"
    shutil.rmtree(vendor, ignore_errors=True)
    count = 0
    for source, dest, pattern in FILES:
        src = node_modules / source
        if not src.exists():
            raise FileNotFoundError(f"site vendor: {src} is missing; run `npm ci` in site/ "
                                    "(make site does)")
        pairs = [(src, vendor / dest)] if pattern is None else [
            (f, vendor / dest / f.relative_to(src)) for f in sorted(src.glob(pattern)) if f.is_file()]
        if not pairs:
            raise FileNotFoundError(f"site vendor: nothing matches {pattern} in {src}")
        for s, d in pairs:
            d.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(s, d)
            count += 1
    return count


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=pathlib.Path, required=True)
    args = parser.parse_args(argv)
    print(f"site vendor: {copy(args.out)} files in {args.out / 'vendor'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
