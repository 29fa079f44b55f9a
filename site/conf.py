"""The offline site (make site): the repository root as the source, stored notebook outputs,
English and Chinese editions as two sections of one site (sphinx-build -c site . build/site).

Offline: MathJax 3, require.js and the ipywidgets HTML manager come from the npm packages locked in
site/package-lock.json (tools/site/vendor.py copies them into _static/vendor); no page names another
host. Widgets: the saved widget state renders with site/_static/widgets-render.js, which also swaps
in each lesson widget's pre-rendered frames (tools/site/frames.py). Search: jieba with the
glossary's words (tools/site/jieba_dict.py) and site/zh_search.py's fix.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BUILD = ROOT / "build"
sys.path.insert(0, str(HERE))

project = "normlib"
author = "normlib contributors"
root_doc = "README"
language = "en"

extensions = ["myst_nb", "zh_search", "pages"]
include_patterns = ["README.md", "README.zh-CN.md", "ARCHITECTURE*.md", "CONTRIBUTING*.md",
                    "docs/*.md", "notebooks/cheatsheet.md", "normlib/classroom/ISOLATION.md",
                    "notebooks/[0-9]*.ipynb", "notebooks/zh/[0-9]*.ipynb",
                    "notebooks/exercises/[0-9]*.ipynb", "notebooks/zh/exercises/[0-9]*.ipynb"]
# Never a solution: the practice notebooks' sources hold the answers.
exclude_patterns = ["notebooks/exercises/solutions/**", "notebooks/zh/_translations/**",
                    "build/**", "workspace/**", ".venv/**", "**/node_modules/**"]

myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist", "html_image"]
# The notebooks link to headings by JupyterLab's anchors (case kept, spaces as "-").
myst_heading_slug_func = "pages.jupyter_slug"
myst_heading_anchors = 4
nb_execution_mode = "off"           # the stored outputs, as nbval checks them
nb_merge_streams = True
nb_ipywidgets_js = {
    "widgets-offline.js": {},
    "vendor/require.js": {},
    "vendor/html-manager/libembed-amd.js": {},
    "frames/manifest.js": {},
    "widgets-render.js": {},
}

html_theme = "sphinx_book_theme"
html_title = "normlib"
html_static_path = ["_static", str(BUILD / "site-vendor"), str(BUILD / "site-frames")]
html_css_files = ["site.css"]
html_extra_path = ["extra"]
# No download button: with the sources not copied (html_copy_source) its links would lead nowhere;
# each notebook page says how to run it instead (site/pages.py).
html_theme_options = {"show_toc_level": 2, "use_download_button": False}
html_copy_source = False
html_show_sourcelink = False
mathjax_path = "vendor/mathjax/tex-mml-chtml.js"

# One search index for both editions: jieba for Chinese, the English stemmer for Latin words.
html_search_language = "zh"
html_search_options = {"dict": os.environ.get("NORMLIB_SITE_DICT", str(BUILD / "site-vendor" / "jieba_user_dict.txt"))}
