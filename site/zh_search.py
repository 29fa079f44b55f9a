"""Sphinx 9.0.4's Chinese search, made to load (sphinx-doc/sphinx#14229).

SearchChinese ships the English stemmer (english-stemmer.js, which defines EnglishStemmer) but its
language_data.js ends with ``window.Stemmer = ChineseStemmer``: every page's search then stops with
"ChineseStemmer is not defined". Naming the language "English" makes that line name the stemmer the
file defines; the Chinese splitting (jieba) is unchanged. Fixed upstream in a Sphinx that needs
Python 3.12 (PR #14416). tests/test_site.py fails once the pinned Sphinx no longer has the bug, so
that this module is removed then.
"""

from __future__ import annotations

import re
import types

from sphinx.search import IndexBuilder
from sphinx.search.zh import SearchChinese


class SearchChineseFixed(SearchChinese):
    language_name = "English"


def stemmer_defined(language: type) -> bool:
    """Whether the JS that Sphinx writes for ``language`` defines the stemmer it then names."""
    code = IndexBuilder.get_js_stemmer_code(types.SimpleNamespace(lang=language))
    name = f"{language.language_name}Stemmer"
    return re.search(rf"(function|class|var|let|const)\s+{name}\b|\b{name}\s*=\s*function", code) is not None


def setup(app) -> None:
    app.add_search_language(SearchChineseFixed)
