"""The DeepNorm checker (Wang et al. 2022, "DeepNet", arXiv 2203.00555), and the mistakes it names.

The learner writes ``DeepNorm(d_model, n_layers)``, an nn.Module with attributes ``alpha`` and
``beta`` (the encoder-only constants, ``nl.deepnorm_constants(num_encoder_layers=n_layers)``) and
``forward(x, sublayer) = LayerNorm(alpha * x + sublayer(x))``. beta is for initialization only
(the xavier gain of the sublayer's weights); it never scales activations at run time.
"""

from __future__ import annotations

import math

import torch
from torch import nn

import normlib as nl

from ._cases import Case, new_module, run_cases
from ._compare import bind, bind_last, randn
from ._generic import catalogue
from ._probes import fmt, near, output
from ._session import Fail, Session
from .result import CheckResult

__all__ = ["check_deep_norm", "DEEP_NORM_MISTAKES", "DEEP_NORM_CONSTANT_MUTANTS",
           "DEEP_NORM_MUTANTS"]

DEEP_NORM_MISTAKES = catalogue("deep_norm", {
    "missing_constants": ("no alpha/beta attributes", "the module needs attributes alpha and beta "
                          "(numbers), computed from n_layers in __init__.",
                          "缺少 alpha / beta 属性。"),
    "wrong_exponents": ("wrong exponents", "alpha and beta use the wrong formula: encoder-only "
                        "DeepNorm has alpha = (2N)^(1/4) and beta = (8N)^(-1/4) (DeepNet, Figure 2).",
                        "alpha 或 beta 的公式不对：仅编码器模型的 DeepNorm 为 alpha = (2N)^(1/4)，"
                        "beta = (8N)^(-1/4)（DeepNet，图 2）。"),
    "operator_precedence": ("2 * N ** 0.25", "operator precedence: 2 * N ** 0.25 is 2 N^(1/4); "
                            "DeepNorm's alpha is (2 * N) ** 0.25, and beta is (8 * N) ** -0.25.",
                            "写成了 2 * N ** 0.25：运算符优先级让 ** 先算，应为 (2 * N) ** 0.25。"),
    "constants_swapped": ("2N and 8N swapped", "the 2N and 8N are swapped: alpha = (2N)^(1/4) "
                          "(> 1, up-weights the residual), beta = (8N)^(-1/4) (< 1, shrinks the "
                          "initial weights).",
                          "2N 和 8N 用反了：alpha = (2N)^(1/4)，beta = (8N)^(-1/4)。"),
    "decoder_constants": ("encoder-decoder constants", "those are the encoder-decoder model's "
                          "decoder-side constants, (3M)^(1/4) and (12M)^(-1/4); this exercise asks "
                          "for the encoder-only ones, (2N)^(1/4) and (8N)^(-1/4).",
                          "用了编码器-解码器模型解码器一侧的常数 (3M)^(1/4)、(12M)^(-1/4)："
                          "本题是仅编码器模型，alpha = (2N)^(1/4)，beta = (8N)^(-1/4)。"),
    "glm_alpha": ("alpha = (2N)^(1/2)", "alpha = (2N)^(1/2) is GLM-130B's choice; the DeepNet paper's "
                  "encoder-only alpha is (2N)^(1/4).",
                  "alpha = (2N)^(1/2) 是 GLM-130B 的取法：DeepNet 论文中仅编码器模型的 alpha 是 (2N)^(1/4)。"),
    "alpha_on_sublayer": ("alpha on the sublayer branch", "alpha multiplies the sublayer's output; "
                          "DeepNorm up-weights the residual: LayerNorm(alpha * x + sublayer(x)).",
                          "alpha 乘在了残差分支 F(x) 上：DeepNorm 的 alpha 乘的是恒等路径 x，"
                          "LN(alpha * x + F(x))。"),
    "beta_at_run_time": ("beta applied at run time", "you scale activations by beta in forward; beta "
                         "is used once, at initialization (xavier_normal_(w, gain=beta) for the "
                         "FFN, v_proj and out_proj weights), never at run time.",
                         "在前向传播中乘了 beta：beta 只用于初始化（缩放子层权重），不参与前向计算。"),
    "no_alpha": ("no alpha (plain Post-LN)", "forward ignores alpha: LayerNorm(x + sublayer(x)) is "
                 "Post-LN. DeepNorm is LayerNorm(alpha * x + sublayer(x)).",
                 "没有乘 alpha，这是普通的后置归一化（Post-LN）。"),
    "no_layer_norm": ("no LayerNorm", "the residual sum must go through a LayerNorm: "
                      "LayerNorm(alpha * x + sublayer(x)).",
                      "输出没有经过层归一化：DeepNorm 是 LN(alpha * x + F(x))。"),
    "pre_norm": ("Pre-LN form", "that is a Pre-LN block, x + sublayer(LayerNorm(x)); DeepNorm is "
                 "Post-LN with an up-weighted residual: LayerNorm(alpha * x + sublayer(x)).",
                 "写成了前置归一化（Pre-LN）的形式：DeepNorm 是后置归一化，LN(alpha * x + F(x))。"),
    "sublayer_of_scaled_x": ("sublayer(alpha * x)", "the sublayer gets x itself; only the residual "
                             "branch is scaled: LayerNorm(alpha * x + sublayer(x)).",
                             "子层的输入应是 x 本身，即 F(x) 而不是 F(alpha * x)；alpha 只乘在恒等路径上："
                             "LN(alpha * x + F(x))。"),
    "sublayer_calls": ("sublayer called more than once", "call the sublayer once per forward: "
                       "attention or an FFN is the expensive part (and dropout would differ).",
                       "子层被调用了不止一次。"),
    "output_not_normalized": ("output not normalized", "the last step is the LayerNorm: x_{l+1} = "
                              "LN(alpha * x + G(x)), so every output row has mean 0 and std 1 at "
                              "weight 1, bias 0.",
                              "输出没有被归一化：最后一步是层归一化，x_{l+1} = LN(alpha * x + G(x))，"
                              "weight 为 1、bias 为 0 时每个输出行的均值为 0、标准差为 1。"),
    "residual_weight": ("the identity path not scaled by alpha", "alpha multiplies the identity "
                        "path x, not beta and not the sublayer: LN(alpha * x + G(x)).",
                        "恒等路径乘的不是 alpha：DeepNorm 是 LN(alpha * x + F(x))。"),
    "sublayer_input": ("wrong sublayer input", "the sublayer reads the layer's input x itself: "
                       "G(x), not LayerNorm(x) (Pre-LN).",
                       "子层的输入不对：应为 F(x)，x 是这一层的输入。"),
    "alpha_growth": ("alpha grows wrongly with N", "alpha = (2N)^(1/4): it grows as N^0.25 (x ** "
                     "1/4 is x / 4 in Python).",
                     "alpha 随层数 N 的增长不对：alpha = (2N)^(1/4)。"),
    "alpha_prefactor": ("alpha's factor misplaced", "the factor 2 belongs inside the power: alpha "
                        "= (2N)^(1/4).",
                        "alpha 的系数放错了位置：2 应在幂里面，alpha = (2N)^(1/4)。"),
    "beta_growth": ("beta varies wrongly with N", "beta = (8N)^(-1/4): it falls as N^-0.25.",
                    "beta 随层数 N 的变化不对：beta = (8N)^(-1/4)，层数越多越小。"),
    "beta_prefactor": ("beta's factor misplaced", "the factor 8 belongs inside the power: beta = "
                       "(8N)^(-1/4).",
                       "beta 的系数放错了位置：8 应在幂里面，beta = (8N)^(-1/4)。"),
})

# (key, alpha(N), beta(N)) for formulas a learner may write instead of DeepNet's encoder-only pair
DEEP_NORM_CONSTANT_MUTANTS = [
    ("operator_precedence", lambda N: 2 * N ** 0.25, lambda N: 8 * N ** -0.25),
    ("constants_swapped", lambda N: (8 * N) ** 0.25, lambda N: (2 * N) ** -0.25),
    ("decoder_constants", lambda N: (3 * N) ** 0.25, lambda N: (12 * N) ** -0.25),
    ("glm_alpha", lambda N: (2 * N) ** 0.5, None),
]


def _ln(z):
    return nl.layer_norm(z, z.shape[-1], eps=1e-5)


DEEP_NORM_MUTANTS = [         # forward mistakes, f(x, sublayer, alpha, beta)
    ("alpha_on_sublayer", lambda x, sub, a, b: _ln(x + a * sub(x))),
    ("beta_at_run_time", lambda x, sub, a, b: _ln(a * x + sub(b * x))),
    ("beta_at_run_time", lambda x, sub, a, b: _ln(a * x + b * sub(x))),
    ("beta_at_run_time", lambda x, sub, a, b: _ln(a * b * x + sub(x))),
    ("no_alpha", lambda x, sub, a, b: _ln(x + sub(x))),
    ("no_layer_norm", lambda x, sub, a, b: a * x + sub(x)),
    ("pre_norm", lambda x, sub, a, b: x + sub(_ln(x))),
    ("pre_norm", lambda x, sub, a, b: a * x + sub(_ln(x))),
    ("sublayer_of_scaled_x", lambda x, sub, a, b: _ln(a * x + sub(a * x))),
]


class _Sublayer(nn.Module):
    """A fixed non-linear sublayer, 2 tanh(x W^T + c), that counts its calls and keeps its last
    input."""

    def __init__(self, d: int, seed: int, dtype: torch.dtype):
        super().__init__()
        self.weight = randn(d, d, seed=seed, dtype=dtype, scale=d ** -0.5)
        self.bias = randn(d, seed=seed + 1, dtype=dtype, scale=0.5)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        self.last_input = x.detach().clone()
        return 2 * torch.tanh(x @ self.weight.T + self.bias)


def _case(shape, N, seed, dtype=torch.float32, note=""):
    """x ~ 1.5 N(0, 1) of ``shape`` and a fixed sublayer, for a DeepNorm of n_layers = N."""
    return Case(", ".join(filter(None, [note, f"n_layers={N}"])), lambda: (
        randn(*shape, seed=seed, dtype=dtype, scale=1.5), _Sublayer(shape[-1], seed + 1, dtype)),
        {"n_layers": N})


# forward uses the module's own alpha and beta, so a wrong constant is reported only above
CASES = [
    _case((2, 5, 8), 6, 10),
    _case((3, 4, 6), 12, 20, torch.float64),
    _case((2, 8), 1, 30, note="a batch of 2"),
]


def check_deep_norm(cls, *, time_limit: float = 3.0) -> CheckResult:
    """Check the class ``cls(d_model, n_layers)`` (alpha, beta, forward(x, sublayer))."""
    s = Session("DeepNorm", DEEP_NORM_MISTAKES, exercise="deep_norm",
                time_limit=time_limit, vague=("wrong_exponents",))
    if not s.require_callable(cls, "your class"):
        return s.result()

    def build(d, N, dtype=torch.float32):
        return s.call(new_module(s, cls, d, N, what=f"DeepNorm({d}, {N})").to, dtype)

    def constants(m):
        try:
            return float(m.alpha), float(m.beta)
        except (AttributeError, TypeError, ValueError, RuntimeError):
            raise Fail("alpha and beta must be numbers (attributes of the module)",
                       "missing_constants") from None

    def check_constants(N):
        def check():
            a, b = constants(build(8, N))
            want_a, want_b = nl.deepnorm_constants(num_encoder_layers=N)["encoder"]
            if abs(a - want_a) <= 1e-6 * want_a and abs(b - want_b) <= 1e-6 * want_b:
                return
            for key, fa, fb in DEEP_NORM_CONSTANT_MUTANTS:
                ma, mb = fa(N), (fb(N) if fb else want_b)
                if (ma, mb) != (want_a, want_b) and abs(a - ma) <= 1e-6 * ma and \
                        abs(b - mb) <= 1e-6 * mb:
                    raise Fail(f"alpha {a:.4f}, beta {b:.4f}; expected {want_a:.4f}, "
                               f"{want_b:.4f} (looks like: {s.short(key)})", key)
            raise Fail(f"alpha {a:.4f}, beta {b:.4f}; expected {want_a:.4f}, {want_b:.4f}",
                       "wrong_exponents")
        return check

    def forward(cls, x, sub, n_layers):
        m = build(x.shape[-1], n_layers, x.dtype)
        return m, s.call(m, x, sub)

    def judge(got, args, case):
        (m, out), (x, sub, N) = got, args
        if sub.calls > 1:
            raise Fail(f"sublayer called {sub.calls} times in one forward", "sublayer_calls")
        a, b = own_constants(m, N)
        s.expect_close(out, _ln(a * x + sub(x)), mutants=bind(DEEP_NORM_MUTANTS, x, sub, a, b))

    def own_constants(m, N):
        """The learner's alpha and beta (so that forward is checked apart from the constants)."""
        try:
            return constants(m)
        except Fail:
            return nl.deepnorm_constants(num_encoder_layers=N)["encoder"]

    def check_backward():
        d, N = 6, 4
        m = build(d, N, torch.float64)
        sub = _Sublayer(d, 41, torch.float64)
        a, b = own_constants(m, N)
        x = randn(2, 3, d, seed=40, dtype=torch.float64)
        s.expect_grads(lambda x: m(x, sub), lambda x: _ln(a * x + sub(x)), {"x": x},
                       mutants=bind_last(DEEP_NORM_MUTANTS, sub, a, b))

    for N in (1, 6, 100):
        s.run(f"alpha, beta for n_layers={N}", check_constants(N))
    run_cases(s, cls, CASES, call=forward, judge=judge, prefix="forward ")
    s.run("backward float64 (2, 3, 6)", check_backward)
    s.probe(*_probes(s, cls))
    return s.result()


def _probes(s: Session, cls) -> list:
    """Property probes: how alpha and beta grow with N, what the sublayer receives, whether the
    output is a LayerNorm's, and the weight of the residual relative to the sublayer's output."""
    want = {N: nl.deepnorm_constants(num_encoder_layers=N)["encoder"] for N in (1, 16, 256)}

    def constants():
        got = {}
        for N in want:
            m = s.call(cls, 8, N)
            got[N] = float(m.alpha), float(m.beta)
        found = []
        for i, (name, sign, c) in enumerate((("alpha", "", 2), ("beta", "-", 8))):
            g1, g256 = got[1][i], got[256][i]
            growth = "alpha_growth" if name == "alpha" else "beta_growth"
            prefactor = "alpha_prefactor" if name == "alpha" else "beta_prefactor"
            if g1 <= 0 or g256 <= 0:
                found.append((growth, f"Your {name} is {fmt(g1)} at N = 1 and "
                              f"{fmt(g256)} at N = 256; it must be positive: ({c}N)^({sign}1/4)."))
                continue
            p = math.log(g256 / g1) / math.log(256)
            if abs(p - float(f"{sign}0.25")) > 1e-6:
                found.append((growth, f"Your {name} grows as N^{p:.4g} ({fmt(g1)} at "
                              f"N = 1, {fmt(g256)} at N = 256); DeepNet's is ({c}N)^({sign}1/4), "
                              f"which grows as N^{sign}0.25. Check the exponent (x ** 1/4 is x / 4 "
                              "in Python)."))
            elif abs(g1 - want[1][i]) > 1e-6 * want[1][i]:
                found.append((prefactor, f"Your {name} has the right power of N but is "
                              f"{fmt(g1)} at N = 1 instead of {c}^({sign}1/4) = {fmt(want[1][i])}: "
                              f"the factor {c} belongs inside the power, ({c}N)^({sign}1/4)."))
        if len(found) == 2 and all(k.endswith("_growth") for k, _ in found):
            return ("wrong_exponents", " ".join(text for _, text in found))
        if found:
            return found[0][0], " ".join(text for _, text in found)
        return None

    d, N = 8, 6
    x = randn(4, d, seed=700, dtype=torch.float64, scale=1.5)

    def module():
        m = s.call(cls, d, N)
        return s.call(m.to, torch.float64)

    def sublayer_input():
        m, sub = module(), _Sublayer(d, 701, torch.float64)
        output(s, m, x, sub, like=x)
        a, b = nl.deepnorm_constants(num_encoder_layers=N)["encoder"]
        seen = getattr(sub, "last_input", None)
        if seen is None or seen.shape != x.shape or near(seen, x, 1e-6, 1e-9):
            return None
        for key, t, text in (("sublayer_input", _ln(x), "LayerNorm(x): that is Pre-LN"),
                             ("sublayer_of_scaled_x", a * x, "alpha * x"),
                             ("beta_at_run_time", b * x, "beta * x")):
            if near(seen, t, 1e-5, 1e-7):
                return (key, f"Your sublayer receives {text}; DeepNorm calls it on x itself: "
                        "LayerNorm(alpha * x + sublayer(x)).")
        return ("sublayer_input", "Your sublayer does not receive x itself: DeepNorm computes "
                "LayerNorm(alpha * x + sublayer(x)).")

    def normalized_output():
        m, sub = module(), _Sublayer(d, 702, torch.float64)
        y = output(s, m, x, sub, like=x)
        mean, std = y.mean(-1), y.var(-1, unbiased=False).sqrt()
        if near(mean, torch.zeros_like(mean), 0, 1e-4) and near(std, torch.ones_like(std), 1e-3):
            return None
        a, b = nl.deepnorm_constants(num_encoder_layers=N)["encoder"]
        extra = next((f" (times {name} = {fmt(v)})" for name, v in (("alpha", a), ("beta", b))
                      if near(std, torch.full_like(std, v), 1e-3)), "")
        return ("output_not_normalized", "With the LayerNorm at weight 1 and bias 0, every output "
                f"row should have mean 0 and std 1; yours have std {fmt(float(std.mean()))}{extra} "
                f"and means up to {fmt(float(mean.abs().max()))}: DeepNorm's output is the "
                "LayerNorm itself, LayerNorm(alpha * x + sublayer(x)), nothing after it.")

    def residual_weight():
        m, sub = module(), _Sublayer(d, 703, torch.float64)
        y = output(s, m, x, sub, like=x)
        u = sub(x)
        a, b = nl.deepnorm_constants(num_encoder_layers=N)["encoder"]
        try:
            a = float(m.alpha)           # the forward is judged with the learner's own alpha
        except (AttributeError, TypeError, ValueError, RuntimeError):
            pass
        xc, uc = x - x.mean(-1, keepdim=True), u - u.mean(-1, keepdim=True)
        A = torch.stack((xc, uc), -1)                              # (rows, d, 2)
        coef = torch.linalg.lstsq(A, y.unsqueeze(-1)).solution.squeeze(-1)   # (rows, 2)
        if not near(A @ coef.unsqueeze(-1), y.unsqueeze(-1), 1e-5, 1e-7):
            return None              # not a normalized sum of x and sublayer(x): other probes
        r = coef[:, 0] / coef[:, 1]
        if not near(r, r.mean().expand_as(r), 1e-5):
            return None
        r = float(r.mean())
        if abs(r - a) <= 1e-5 * a:
            return None
        for key, v, text in (("no_alpha", 1.0, "1: plain Post-LN"),
                             ("alpha_on_sublayer", 1 / a, "1 / alpha: alpha sits on the sublayer"),
                             ("residual_weight", b, "beta: beta in place of alpha"),
                             ("beta_at_run_time", a * b, "alpha * beta: beta applied at run time")):
            if abs(r - v) <= 1e-5 * v:
                return (key, f"Inside the LayerNorm, x enters with {fmt(r)} times the weight of "
                        f"sublayer(x), i.e. {text}. DeepNorm up-weights the residual by alpha = "
                        f"{fmt(a)}: LayerNorm(alpha * x + sublayer(x)).")
        return ("residual_weight", f"Inside the LayerNorm, x enters with {fmt(r)} times the weight "
                f"of sublayer(x); DeepNorm's is alpha = {fmt(a)}: "
                "LayerNorm(alpha * x + sublayer(x)).")

    return [constants, sublayer_input, normalized_output, residual_weight]
