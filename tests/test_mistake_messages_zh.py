"""Every mistake code's Chinese message names the same key terms as its English one (issue 37,
item 4; chinese-review-2 M-4, M-7, M-8): a Chinese message shared by key across exercises must not
talk about the variance or a row where the English talks about the RMS or a channel."""

import re

import pytest

from normlib.exercises import codes

# (name, English pattern, Chinese pattern): a term that changes a message's meaning. A code's
# English and Chinese messages must both name it or both leave it out.
TERMS = [
    ("RMS", r"\bRMS|root \*?mean\*? square", r"均方根|RMS"),
    ("mean(x^2)", r"mean\(x\^2\)|(?<!root )\bmean square|pow\(2\)\.mean", r"mean\(x(\^2|²)\)|均方值|pow\(2\)\.mean"),
    ("per channel", r"\bchannels?\b", r"通道"),
    ("variance", r"variance|\bvar\b", r"方差|\.var\("),
    # a table's row; not the ✗ lines of the report, nor 运行 / 执行 / 进行 / 并行 / 行为
    ("row", r"\brows?\b", r"(?<!✗ )(?<![运执进并])行(?!为)"),
    ("constant", r"\bconstant (row|channel)", r"常数(行|通道)"),
    ("all-zero", r"all-zero", r"全零"),
    ("encoder-only", r"encoder-only", r"仅编码器"),
    ("decoder-only", r"decoder-only", r"仅解码器"),
    ("every dim but the last", r"(every|all) dims? but the last", r"最后一维以外的(所有)?维度(上)?求和"),
]


def _mismatches(en: str, zh: str) -> list[str]:
    """The terms one message names and the other does not, as 'term: English only' lines."""
    out = []
    for name, en_pattern, zh_pattern in TERMS:
        in_en = re.search(en_pattern, en) is not None
        in_zh = re.search(zh_pattern, zh) is not None
        if in_en != in_zh:
            out.append(f"{name}: {'English' if in_en else 'Chinese'} only")
    return out


def test_every_code_names_the_same_terms_in_both_languages():
    wrong = {c: (m, code.message, code.message_zh)
             for c, code in codes.registry().items()
             if (m := _mismatches(code.message, code.message_zh))}
    assert not wrong, "\n".join(f"{c}: {m}\n  en: {en}\n  zh: {zh}"
                                for c, (m, en, zh) in wrong.items())


@pytest.mark.parametrize("en, zh, term", [
    ("RMSNorm divides by sqrt(mean(x^2) + eps).", "没有除以每一行的离散程度（重缩放）。", "RMS"),
    ("without eps a constant channel divides 0 by 0 (NaN).", "漏掉了 eps：常数行会出现 0 / 0（NaN）。",
     "per channel"),
    ("eps sits outside the square root: sqrt(mean(x^2) + eps).", "eps 放在了开方之外：应为 sqrt(方差 + eps)。",
     "variance"),
    ("dweight = sum(dy * x_hat) over every dim but the last.", "应为 (dy * x_hat) 对批次维求和。",
     "every dim but the last"),
])
def test_the_comparison_reports_the_review_s_mismatches(en, zh, term):
    assert any(line.startswith(f"{term}:") for line in _mismatches(en, zh))


def test_the_report_lines_of_the_chinese_report_are_not_rows():
    assert _mismatches("your code raises an exception (see the ✗ lines).", "代码抛出了异常（见 ✗ 行）。") == []
    assert _mismatches("look for an endless loop", "运行超过了时间限制") == []
