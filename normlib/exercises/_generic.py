"""A mistake as a value (its short label, English and Chinese messages together), the mistakes
every checker can name whatever the exercise, and ``catalogue``, which turns an exercise's own
table {key: (label, English, Chinese)} into mistakes and keeps them from shadowing the generic ones."""

from typing import NamedTuple

__all__ = ["Mistake", "GENERIC_MISTAKES", "OUTCOMES", "CANNOT_TELL", "catalogue"]


class Mistake(NamedTuple):
    """One mistake a checker can name; its key is the catalogue's, its code ``<exercise>.<key>``."""

    label: str       # a few words: "unbiased variance (n - 1)"
    en: str          # the one-line explanation, in English
    zh: str          # the same, in Chinese (terms of notebooks/zh/_translations/glossary.md)


def _mistakes(table: dict) -> dict[str, Mistake]:
    return {key: Mistake(*texts) for key, texts in table.items()}

CANNOT_TELL = ("I cannot tell exactly which mistake this is: the values differ from the reference "
               "(see the ✗ lines), but every property the checker probes holds. Compare your code "
               "with the formula step by step on a small input.")

# What a check can end with that is no mistake in the code's values: {key: (label, explanation)}.
OUTCOMES = _mistakes({
    "not_implemented": ("not implemented yet", "replace `raise NotImplementedError` with your "
                        "code, then run the cell again.",
                        "尚未实现：把 `raise NotImplementedError` 换成你的代码。"),
    "cannot_tell": ("cannot tell exactly", CANNOT_TELL,
                    "无法确定是哪一种错误：数值与参考结果不同，但检查器的每个探针都通过了。请在小输入上逐步对照公式。"),
    "shortcut": ("calls the built-in being practised", "you call the very thing this exercise asks "
                 "you to write by hand: build it from tensor operations instead.",
                 "调用了本练习要手写的内置函数：请只用张量运算实现。"),
})

GENERIC_MISTAKES = _mistakes({
    "not_callable": ("not callable", "pass your function (or class) itself, not its result.",
                     "传入的不是可调用对象：请传函数（或类）本身，而不是它的返回值。"),
    "returned_none": ("returned None", "your code returns None: did you forget `return`?",
                      "代码返回了 None：是不是忘了写 `return`？"),
    "not_a_tensor": ("not a tensor", "your code must return a torch.Tensor.",
                     "输出必须是 torch.Tensor。"),
    "wrong_shape": ("wrong shape", "the output has the wrong shape: normalization and rotations "
                    "keep the input's shape; print the shapes of your intermediate tensors.",
                    "输出形状不对：打印中间张量的形状，逐步对照。"),
    "wrong_dtype": ("wrong dtype", "the output dtype differs from the input's: compute in float32 "
                    "if you need to, then cast back with .to(x.dtype) or .type_as(x).",
                    "输出的 dtype 与输入不同：需要时先用 float32 计算，再用 .to(x.dtype) 转回。"),
    "nan": ("NaN or inf", "your output has NaN or inf where the reference is finite.",
            "在参考结果有限的位置，输出出现了 NaN 或 inf。"),
    "in_place": ("modifies its input", "your code changes its input in place (x -= mu, x.sub_(...), "
                 "x[...] = ...); the caller's tensor changes under them. Build new tensors: "
                 "y = x - mu.",
                 "代码原地修改了输入（x -= mu、x.sub_(...)、x[...] = ...）："
                 "请构造新张量。"),
    "raised": ("raised an exception", "your code raises an exception (see the ✗ lines).",
               "代码抛出了异常（见 ✗ 行）。"),
    "time_limit": ("too slow", "your code ran past the time limit: look for an endless loop, or a "
                   "Python loop over every element where a tensor operation would do.",
                   "运行超过了时间限制：检查是否有死循环，或逐元素的 Python 循环。"),
    "no_autograd": ("cut off from autograd", "gradients do not reach the inputs: avoid .detach(), "
                    ".data, .item(), numpy and torch.no_grad() in the forward pass.",
                    "梯度传不到输入：前向传播中不要用 .detach()、.data、.item()、numpy 或 torch.no_grad()。"),
    "wrong_grad": ("wrong gradients", "the forward values are right but the gradients differ: "
                   "something is detached or computed outside autograd.",
                   "前向数值正确，但梯度不对：有一部分被截断，或在自动求导之外计算。"),
    "wrong_values": ("wrong values", "the values differ from the reference in a way the checker does "
                     "not recognise: compare your code with the formula, step by step, on a small "
                     "input.",
                     "数值与参考结果不同，检查器认不出是哪种错误：在小输入上逐步对照公式。"),
})


def catalogue(exercise: str, mistakes: dict) -> dict[str, Mistake]:
    """``mistakes`` ({key: (short label, English, Chinese)}) as Mistakes, after checking that each
    has its three texts and that no key is a generic mistake's or an outcome's: a catalogue that
    reused "wrong_shape" for its own meaning silently replaced "the output has the wrong shape"
    (code review 2, finding 5). Called where a checker defines its catalogue, so a clash fails at
    import; Session and codes.registry check again."""
    clash = sorted(set(mistakes) & (set(GENERIC_MISTAKES) | set(OUTCOMES)))
    if clash:
        raise ValueError(f"catalogue of {exercise!r}: mistake keys {clash} shadow the generic "
                         "mistakes of every exercise (normlib/exercises/_generic.py); give the "
                         "exercise's own mistake another key")
    bad = [key for key, texts in mistakes.items()
           if len(texts) != 3 or not all(isinstance(s, str) and s for s in texts)]
    if bad:
        raise ValueError(f"catalogue of {exercise!r}: mistakes {bad} need three non-empty texts, "
                         "(short label, English message, Chinese message)")
    return _mistakes(mistakes)
