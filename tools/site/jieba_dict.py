"""The jieba user dictionary of the site's Chinese search, made from the glossary (make site).

    python -m tools.site.jieba_dict OUT      # writes OUT, one "term frequency" line per term

The browser does not segment a query: it looks the typed string up in the index as a whole. jieba,
which splits the pages' Chinese when Sphinx indexes them, cuts a term it does not know into pieces
(层归一化 into 层 + 归一化), and a reader's 层归一化 then finds nothing. Every Chinese term of
notebooks/zh/_translations/glossary.md, preferred or accepted, becomes a word jieba keeps whole (its
cut_for_search still indexes the pieces too, so 归一化 alone is found as well).
"""

from __future__ import annotations

import pathlib
import re
import sys

from tools.translations import _forms, parse_glossary

ROOT = pathlib.Path(__file__).resolve().parents[2]
GLOSSARY = ROOT / "notebooks" / "zh" / "_translations" / "glossary.md"
# jieba's frequency for a user word: high enough that it wins over its pieces in jieba's cut.
FREQUENCY = 100_000
HAN_WORD = re.compile(r"[\u3400-\u9fff]{2,}")


def terms(glossary_text: str) -> list[str]:
    """The glossary's Chinese words of two or more characters (each Han run of a preferred or
    accepted form: 前置归一化（Pre-LN）gives 前置归一化), sorted, each once."""
    words = set()
    for term in parse_glossary(glossary_text):
        for form in _forms(term.chinese) + term.accept:
            words.update(HAN_WORD.findall(form))
    return sorted(words)


def dictionary(glossary_text: str) -> str:
    words = terms(glossary_text)
    if not words:
        raise ValueError(f"jieba_dict: no Chinese term found in {GLOSSARY}")
    return "".join(f"{w} {FREQUENCY}\n" for w in words)


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tools.site.jieba_dict OUT", file=sys.stderr)
        return 2
    out = pathlib.Path(args[0])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dictionary(GLOSSARY.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
