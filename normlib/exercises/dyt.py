"""The DyT checker (Dynamic Tanh, Zhu et al. 2025, arXiv 2503.10622), and the mistakes it can name.

Notation: C channels, the last dim. The learner writes ``DyT(normalized_shape, alpha_init=0.5)``
(nl.DyT's argument names) holding a learnable scalar ``alpha`` (shape (1,), initialized to
alpha_init), ``weight`` (C,) ones and ``bias`` (C,) zeros, and

    forward(x) = weight * tanh(alpha * x) + bias        (elementwise over the last dim)

in float32 for float16 / bfloat16 inputs, returned in x's dtype. The reference is
``nl.dyt(x, alpha, weight, bias)``. A computation kept in float16 is accepted: it differs from the
float32 one by at most two units in the last place of the larger term, weight * tanh or bias
(measured in the exercise's notebook: 0.002 near 1, inside the float16 check's tolerance), so no
check can tell it from a right answer and the catalogue does not name it.
Hugging Face transformers has no DyT layer to compare with.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import normlib as nl

from ._cases import Case, new_module, run_cases
from ._compare import grad_output, randn
from ._generic import catalogue
from ._probes import fmt, near, output
from ._session import Fail, Session
from .result import CheckResult

__all__ = ["check_dyt", "DYT_MISTAKES", "DYT_MUTANTS"]

DYT_MISTAKES = catalogue("dyt", {
    "missing_parameter": ("alpha, weight or bias missing", "the module holds three parameters "
                          "under these names: alpha (1,), weight (C,) and bias (C,), "
                          "C = normalized_shape.",
                          "缺少 alpha、weight 或 bias（名字不对或没有定义）：模块应有三个参数 alpha (1,)、"
                          "weight (C,) 和 bias (C,)，C = normalized_shape。"),
    "alpha_per_channel": ("alpha per channel", "alpha is one learnable scalar shared by every "
                          "channel, shape (1,): nn.Parameter(torch.full((1,), alpha_init)). "
                          "Only weight and bias are per channel.",
                          "alpha 按通道各设了一个：alpha 是所有通道共享的一个可学习标量，形状 (1,)："
                          "nn.Parameter(torch.full((1,), alpha_init))。只有 weight 和 bias 按通道设置。"),
    "alpha_not_learnable": ("alpha not learnable", "alpha is learned: make it an nn.Parameter "
                            "(not a float, a plain tensor or a buffer) and use it as a tensor in "
                            "forward (no .item(), float() or .detach()), so that it gets a gradient.",
                            "alpha 不可学习：应把它设为 nn.Parameter（不是 float、普通张量或缓冲区），"
                            "并在前向传播中作为张量使用（不要 .item()、float() 或 .detach()），这样它才有梯度。"),
    "alpha_init": ("alpha not initialized to alpha_init", "alpha starts at the alpha_init "
                   "passed (0.5 by default, the paper's), not at 1 or a fixed value.",
                   "alpha 的初值不是传入的 alpha_init：应从 alpha_init 开始（默认 0.5，论文的取值），"
                   "而不是 1 或某个写死的值。"),
    "affine_init": ("weight or bias not initialized to ones / zeros", "weight starts at ones "
                    "and bias at zeros, as LayerNorm's affine: at init DyT is tanh(alpha x).",
                    "weight 或 bias 的初值不对：weight 初始化为全 1，bias 为全 0（与层归一化的仿射参数"
                    "一样），这样初始时 DyT 就是 tanh(alpha x)。"),
    "alpha_outside": ("alpha outside the tanh", "alpha scales the input of the tanh, "
                      "tanh(alpha * x), which sets where it saturates; alpha * tanh(x) only "
                      "rescales the output, as the weight already does.",
                      "alpha 放在了 tanh 外面：alpha 缩放的是 tanh 的输入 tanh(alpha * x)，而不是输出 "
                      "alpha * tanh(x)。"),
    "alpha_divides": ("x divided by alpha", "the tanh's input is alpha * x, not x / alpha.",
                      "用 alpha 去除了 x：tanh 的输入是 alpha * x，不是 x / alpha。"),
    "no_alpha": ("alpha unused", "multiply the input by alpha inside the tanh: "
                 "weight * tanh(alpha * x) + bias.",
                 "没有用到 alpha：应在 tanh 里乘以 alpha，weight * tanh(alpha * x) + bias。"),
    "weight_bias_swapped": ("weight and bias swapped", "weight multiplies the tanh and bias is "
                            "added: weight * tanh(alpha * x) + bias.",
                            "weight 和 bias 用反了：weight 乘 tanh，bias 是加上去的，"
                            "weight * tanh(alpha * x) + bias。"),
    "bias_inside": ("bias inside the tanh", "the bias is added after the tanh, as LayerNorm's "
                    "beta: weight * tanh(alpha * x) + bias, not weight * tanh(alpha * x + bias).",
                    "bias 放进了 tanh 里：bias 在 tanh 之后再加（同层归一化的 beta），"
                    "weight * tanh(alpha * x) + bias。"),
    "weight_inside": ("weight inside the tanh", "the weight scales the tanh's output, as "
                      "LayerNorm's gamma: weight * tanh(alpha * x) + bias, not "
                      "tanh(alpha * weight * x) + bias.",
                      "weight 放进了 tanh 里：weight 缩放的是 tanh 的输出（同层归一化的 gamma），"
                      "weight * tanh(alpha * x) + bias。"),
    "no_bias": ("bias missing or unused", "add the bias after the weight: "
                "weight * tanh(alpha * x) + bias.",
                "缺少 bias 或没有用到：在乘完 weight 之后加上 bias，weight * tanh(alpha * x) + bias。"),
    "weight_unused": ("weight unused", "multiply the tanh by the weight: "
                      "weight * tanh(alpha * x) + bias.",
                      "没有用到 weight：tanh 的结果要乘以 weight，weight * tanh(alpha * x) + bias。"),
    "mean_subtracted": ("the mean subtracted (a LayerNorm habit)", "DyT takes no statistics: "
                        "no mean is subtracted, each element is squashed on its own, "
                        "tanh(alpha * x).",
                        "减去了均值（层归一化的习惯）：DyT 不求任何统计量，不减均值，每个元素各自经过 "
                        "tanh(alpha * x)。"),
    "statistics": ("normalized by statistics first", "DyT replaces the norm: no mean, no "
                   "variance, no reduction over the features; the output of one element depends "
                   "on that element alone.",
                   "先用统计量做了归一化：DyT 取代的正是归一化，不求均值、方差，也不在特征上做任何归约；"
                   "每个元素的输出只取决于它自己。"),
    "not_tanh": ("not tanh", "the squashing function is tanh (an S-curve into (-1, 1), like the "
                 "input-output curves of trained LayerNorms): torch.tanh(alpha * x).",
                 "压缩函数不是 tanh：应为 torch.tanh(alpha * x)（值域 (-1, 1) 的 S 形曲线，与训练好的层归一化"
                 "的输入输出曲线相似）。"),
    "affine": ("weight and bias misapplied", "apply the weight as a scale and the bias as a "
               "shift after the tanh: weight * tanh(alpha * x) + bias.",
               "weight 和 bias 用法不对：tanh 之后，weight 作缩放、bias 作平移，"
               "weight * tanh(alpha * x) + bias。"),
})


def _dyt(x, alpha, weight, bias, *, squash=torch.tanh, where="in", stats=None, affine="ok"):
    """weight * squash(alpha * x) + bias in float32 for half inputs; each keyword other than its
    default is one classic mistake."""
    dtype = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    xf, a, w, b = (t.to(dtype) for t in (x, alpha, weight, bias))
    if stats == "mean":
        xf = xf - xf.mean(-1, keepdim=True)
    elif stats == "layer_norm":
        xf = F.layer_norm(xf, xf.shape[-1:])
    u = {"in": a * xf, "none": xf, "divide": xf / a, "bias": a * xf + b,
         "weight": a * w * xf}.get(where, a * xf)
    t = squash(u)
    if where == "out":
        t = a * t
    y = {"ok": w * t + b, "swapped": b * t + w, "no_bias": w * t, "no_weight": t + b,
         "inside": w * t}[affine]
    if where == "weight":
        y = t + b
    return y.to(x.dtype)


def _m(**knobs):
    return lambda x, alpha, weight, bias: _dyt(x, alpha, weight, bias, **knobs)


DYT_MUTANTS = [
    ("alpha_outside", _m(where="out")),
    ("alpha_divides", _m(where="divide")),
    ("no_alpha", _m(where="none")),
    ("weight_bias_swapped", _m(affine="swapped")),
    ("bias_inside", _m(where="bias", affine="inside")),
    ("weight_inside", _m(where="weight")),
    ("no_bias", _m(affine="no_bias")),
    ("weight_unused", _m(affine="no_weight")),
    ("mean_subtracted", _m(stats="mean")),
    ("statistics", _m(stats="layer_norm")),
    ("not_tanh", _m(squash=torch.sigmoid)),
    ("not_tanh", _m(squash=lambda u: u.clamp(-1, 1))),
]


def _reference(x, alpha, weight, bias):
    return nl.dyt(x, alpha, weight, bias)


def _inputs(shape, seed, dtype=torch.float32, *, scale=2.0, alpha=0.7):
    """x ~ scale N(0, 1), alpha, weight ~ 1 + 0.3 N(0, 1), bias ~ 0.5 N(0, 1)."""
    C = shape[-1]
    return lambda: (randn(*shape, seed=seed, dtype=dtype, scale=scale),
                    torch.tensor([alpha], dtype=dtype),
                    randn(C, seed=seed + 1, dtype=dtype, scale=0.3, offset=1.0),
                    randn(C, seed=seed + 2, dtype=dtype, scale=0.5))


CASES = [
    Case("alpha 0.7", _inputs((2, 5, 8), 10)),
    Case("odd C, alpha 1.3", _inputs((3, 7), 20, torch.float64, alpha=1.3)),
    Case("saturating inputs (|x| up to 60), alpha 0.2", _inputs((4, 6), 30, scale=20.0,
                                                                alpha=0.2)),
    Case("alpha 0.5", _inputs((2, 4, 16), 40, torch.float16, scale=3.0, alpha=0.5)),
    Case("alpha 0.9", _inputs((2, 3, 8), 50, torch.bfloat16, scale=3.0, alpha=0.9)),
]


_NAMES = ("alpha", "weight", "bias")                 # the parameters, as nl.DyT names them


def _parameter(m, name):
    """The module's attribute ``name`` (None when missing)."""
    return getattr(m, name, None)


def check_dyt(cls, *, time_limit: float = 3.0) -> CheckResult:
    """Check the class ``cls(normalized_shape, alpha_init=0.5)`` (alpha, weight, bias; forward)
    against nl.DyT with the same parameters."""
    s = Session("DyT", DYT_MISTAKES, exercise="dyt", time_limit=time_limit,
                references={nl.dyt: "nl.dyt", nl.DyT.forward: "nl.DyT"})
    if not s.require_callable(cls, "your class"):
        return s.result()

    def make(C, *args, **kwargs):
        what = f"DyT({', '.join([str(C), *map(str, args), *(f'{k}={v}' for k, v in kwargs.items())])})"
        m = new_module(s, cls, C, *args, what=what, **kwargs)
        structure(m, C)
        return m

    def structure(m, C):
        """alpha: a learnable scalar; weight and bias: (C,) parameters."""
        params = dict(m.named_parameters())
        alpha = _parameter(m, "alpha")
        if alpha is None:
            raise Fail("no attribute alpha", "missing_parameter")
        if isinstance(alpha, torch.Tensor) and alpha.numel() == C and C > 1:
            raise Fail(f"alpha has shape {tuple(alpha.shape)}: one per channel", "alpha_per_channel")
        if not isinstance(alpha, torch.Tensor) or alpha.numel() != 1:
            shown = tuple(alpha.shape) if isinstance(alpha, torch.Tensor) else type(alpha).__name__
            raise Fail(f"alpha is {shown}, expected a learnable scalar of shape (1,)",
                       "alpha_not_learnable" if not isinstance(alpha, torch.Tensor) else
                       "missing_parameter")
        if params.get("alpha") is not alpha:
            raise Fail("alpha is a tensor but not an nn.Parameter of the module",
                       "alpha_not_learnable")
        for name in ("weight", "bias"):
            p = _parameter(m, name)
            if p is None:
                raise Fail(f"no parameter {name}", "no_bias" if name == "bias" else
                           "missing_parameter")
            if not isinstance(p, torch.Tensor) or tuple(p.shape) != (C,):
                shown = tuple(p.shape) if isinstance(p, torch.Tensor) else type(p).__name__
                raise Fail(f"{name} is {shown}, expected a parameter of shape ({C},)",
                           "missing_parameter")
            if params.get(name) is not p:
                raise Fail(f"{name} is not an nn.Parameter of the module", "missing_parameter")

    def load(m, dtype, alpha, weight, bias):
        m = s.call(m.to, dtype)
        with torch.no_grad():
            for name, value in zip(_NAMES, (alpha, weight, bias), strict=True):
                p = getattr(m, name)
                p.copy_(value.reshape(p.shape).to(p.dtype))
        return m

    def init():
        for args, kwargs, a in (((), {}, 0.5), ((), {"alpha_init": 0.8}, 0.8)):
            m = make(8, *args, **kwargs)
            got = float(m.alpha.detach().reshape(()))
            if abs(got - a) > 1e-6:
                raise Fail(f"DyT(8{', alpha_init=0.8' if kwargs else ''}): alpha starts at "
                           f"{fmt(got)}, expected {a}", "alpha_init")
            w, b = m.weight.detach(), m.bias.detach()
            if not (bool((w == 1).all()) and bool((b == 0).all())):
                raise Fail("weight must start at ones and bias at zeros", "affine_init")

    def forward(cls, x, alpha, weight, bias):
        m = load(make(x.shape[-1]), x.dtype, alpha, weight, bias)
        return s.call(m, x)

    def backward():
        x, alpha, weight, bias = _inputs((3, 4, 5), 60, torch.float64, alpha=0.9)()
        m = load(make(5), torch.float64, alpha, weight, bias)
        s.expect_grads(lambda x: m(x), lambda x: _reference(x, alpha, weight, bias), {"x": x},
                       mutants=[(k, (lambda x, f=f: f(x, alpha, weight, bias)))
                                for k, f in DYT_MUTANTS])
        leaves = [t.clone().requires_grad_(True) for t in (alpha, weight, bias)]
        out = _reference(x, *leaves)
        (out * grad_output(out.shape, out.dtype)).sum().backward()
        for name, leaf in zip(_NAMES, leaves, strict=True):
            got = getattr(m, name).grad
            if got is None:
                raise Fail(f"no gradient reaches {name}", "alpha_not_learnable" if name == "alpha"
                           else "no_autograd")
            if not torch.allclose(got.reshape(leaf.grad.shape), leaf.grad, rtol=1e-4, atol=1e-6):
                raise Fail(f"gradient w.r.t. {name}: wrong values", "wrong_grad")

    s.run("__init__: alpha (1,) = alpha_init, weight (C,) ones, bias (C,) zeros", init)
    run_cases(s, cls, CASES, reference=_reference, mutants=DYT_MUTANTS, call=forward,
              prefix="forward ")
    s.run("backward float64: x, alpha, weight and bias", backward)
    s.probe(*_probes(s, make, load))
    return s.result()


def _probes(s: Session, make, load) -> list:
    """Properties on float64 inputs with chosen parameters (C = 6): one element changed changes
    no other output (elementwise); with weight 1 and bias 0 the output is a function of alpha x
    alone, and atanh of it is alpha x; then weight = 2, bias = 1."""
    C = 6
    x = randn(4, C, seed=800, dtype=torch.float64, scale=1.5)
    one = torch.ones(C, dtype=torch.float64)

    def run(inp, alpha, weight, bias):
        m = load(make(C), torch.float64, torch.tensor([alpha], dtype=torch.float64), weight, bias)
        return output(s, m, inp, like=inp)

    def elementwise():
        y = run(x, 0.7, one, 0 * one)
        x2 = x.clone()
        x2[:, 0] += 3.0
        y2 = run(x2, 0.7, one, 0 * one)
        if near(y2[:, 1:], y[:, 1:], 1e-9, 1e-12):
            return None
        if near(run(x + 2.0, 0.7, one, 0 * one), y, 1e-9, 1e-12):
            return ("mean_subtracted", "Changing one feature changed the outputs of the others, "
                    "and adding a constant to a row changes nothing: you subtract the row's mean, "
                    "a LayerNorm habit. DyT takes no statistics: tanh(alpha * x), element by "
                    "element.")
        return ("statistics", "Changing one feature changed the outputs of the others: your "
                "output depends on statistics of the row. DyT is elementwise: "
                "weight * tanh(alpha * x) + bias, no mean or variance.")

    def alpha_place():
        a = 0.7
        y = run(x, a, one, 0 * one)
        want = torch.tanh(a * x)
        if near(y, want, 1e-6, 1e-9):
            return None
        known = [("alpha_outside", a * torch.tanh(x), "alpha * tanh(x): alpha goes inside, "
                  "tanh(alpha * x)"),
                 ("no_alpha", torch.tanh(x), "tanh(x): alpha is not used; it multiplies x "
                  "inside the tanh"),
                 ("alpha_divides", torch.tanh(x / a), "tanh(x / alpha): multiply by alpha, "
                  "tanh(alpha * x)"),
                 ("not_tanh", torch.sigmoid(a * x), "sigmoid(alpha * x): the S-curve of DyT is "
                  "tanh, into (-1, 1)"),
                 ("not_tanh", (a * x).clamp(-1, 1), "clamp(alpha * x, -1, 1): DyT's curve is "
                  "the smooth tanh")]
        for key, w, text in known:
            if near(y, w, 1e-6, 1e-9):
                return (key, f"With weight 1, bias 0 and alpha = {a} your output is {text}.")
        if bool((y.abs() < 1).all()) and bool((x.abs() > 1e-3).all()):
            k = torch.atanh(y) / x                       # tanh(k x): k is constant for a tanh
            if near(k, k.mean().expand_as(k), 1e-6, 1e-9):
                return ("cannot_tell", f"With weight 1, bias 0 and alpha = {a} your output is "
                        f"tanh(k x) with k = {fmt(float(k.mean()))}, not tanh({a} x): the input of "
                        "the tanh is not alpha * x (2 sigmoid(u) - 1 is tanh(u / 2)).")
        return None

    def affine():
        a = 0.7
        t = torch.tanh(a * x)
        if not near(run(x, a, one, 0 * one), t, 1e-6, 1e-9):
            return None                        # the tanh itself is off: alpha_place says so
        y = run(x, a, 2 * one, one)
        if near(y, 2 * t + 1, 1e-6, 1e-9):
            return None
        known = [("weight_bias_swapped", t * 1 + 2, "tanh(alpha x) * bias + weight: weight and "
                  "bias are swapped"),
                 ("bias_inside", 2 * torch.tanh(a * x + 1), "weight * tanh(alpha x + bias): the "
                  "bias is added after the tanh"),
                 ("weight_inside", torch.tanh(2 * a * x) + 1, "tanh(alpha weight x) + bias: the "
                  "weight scales the tanh's output"),
                 ("no_bias", 2 * t, "weight * tanh(alpha x): the bias is missing"),
                 ("weight_unused", t + 1, "tanh(alpha x) + bias: the weight is not used")]
        for key, w, text in known:
            if near(y, w, 1e-6, 1e-9):
                return (key, f"With alpha = {a}, weight = 2 and bias = 1 your output is {text}.")
        return ("affine", f"With alpha = {a}, weight = 2 and bias = 1 your output is not "
                "2 tanh(alpha x) + 1: weight * tanh(alpha * x) + bias.")

    return [elementwise, alpha_place, affine]
