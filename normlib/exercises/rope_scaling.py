"""The RoPE scaling checker: inverse frequencies stretched for a longer context, as Hugging Face
computes them (``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS``), and the mistakes it can name.

The learner writes ``scaled_inv_freq(head_dim, base, factor, kind,
original_max_position_embeddings=4096, seq_len=None)`` returning ``(inv_freq, attention_factor)``,
inv_freq of shape (head_dim/2,) in float32 as HF's buffer, for one kind per call:
    "linear"   position interpolation (Chen et al. 2023, arXiv 2306.15595): theta_i / s;
    "dynamic"  dynamic NTK (HF's ``_compute_dynamic_ntk_parameters``): base' = base * s'^(D/(D-2))
               with s' = factor * l / L - (factor - 1), l = max(seq_len, L) (no scaling up to L);
    "yarn"     YaRN (Peng et al. 2023, arXiv 2309.00071, Sections 3.2 and 3.4; HF's
               ``_compute_yarn_parameters``): a ramp over the pair index between the (floored,
               ceiled) indices where r = L / lambda_i equals beta_fast = 32 and beta_slow = 1,
               blending theta_i (many turns) and theta_i / s (few), and attention factor
               0.1 ln(s) + 1.
The attention factor is 1.0 for "linear" and "dynamic". The references are normlib's own
``linear_scaling_frequencies``, ``ntk_scaling_frequencies``, ``yarn_frequencies`` and
``yarn_attention_factor`` (tests/test_hf_parity.py shows each equals HF's).
"""

from __future__ import annotations

import math
import sys

import torch

import normlib as nl

from ._cases import Case, DoesNotApply, run_cases
from ._generic import catalogue
from ._probes import fmt
from ._session import Fail, Session
from .result import CheckResult

__all__ = ["check_rope_scaling", "ROPE_SCALING_MISTAKES", "ROPE_SCALING_MUTANTS"]

ROPE_SCALING_MISTAKES = catalogue("rope_scaling", {
    "not_a_pair": ("not (inv_freq, attention_factor)", "return a pair, as HF's rope init "
                   "functions: inv_freq, a float32 tensor of shape (head_dim / 2,), and the "
                   "attention factor, a float (1.0 for linear and dynamic).",
                   "返回值应是一对 (inv_freq, attention_factor)，与 HF 的 RoPE 初始化函数相同：inv_freq "
                   "是形状 (head_dim / 2,) 的 float32 张量，attention_factor 是一个 float（linear 和 "
                   "dynamic 为 1.0）。"),
    "not_float32": ("inv_freq not float32", "inv_freq is float32, as HF's buffer: compute in "
                    "float64 if you like (the two differ by about 1e-7, far below what matters), "
                    "then return .float().",
                    "inv_freq 应为 float32（与 HF 的缓冲区相同）：可以用 float64 计算（两者只差约 "
                    "1e-7），再用 .float() 返回。"),
    "base_frequencies": ("theta_i = base^(-2i/D) wrong", "the unscaled frequencies are theta_i "
                         "= base^(-2i/D) for the pair index i = 0 .. D/2 - 1: "
                         "1 / base ** (torch.arange(0, D, 2) / D).",
                         "未缩放的频率不对：对 i = 0 .. D/2 - 1，theta_i = base^(-2i/D)，即 "
                         "1 / base ** (torch.arange(0, D, 2) / D)。"),
    "linear_multiplied": ("linear: multiplied by the factor", "position interpolation squeezes "
                          "positions m -> m / s, so every frequency is divided by the factor: "
                          "theta_i / s (Chen et al. 2023, Section 2.3); multiplying turns the "
                          "angles s times faster.",
                          "linear 把频率乘以了 factor：位置插值把位置 m 压成 m / s，相当于每个频率除以 "
                          "factor，即 theta_i / s（Chen et al. 2023，第 2.3 节）。"),
    "linear_scaling": ("linear: not theta / s", "position interpolation divides every frequency "
                       "by the factor: theta_i / s.",
                       "linear 的频率不是 theta_i / s：位置插值把每个频率都除以 factor。"),
    "ntk_exponent_missing": ("NTK: base * s, exponent missing", "NTK-aware scaling raises the "
                             "base to base * s^(D / (D - 2)), so that the lowest frequency is "
                             "divided by exactly s; base * s divides it by s^((D - 2) / D) only.",
                             "NTK 的指数漏掉了：新的 base 应为 base * s^(D / (D - 2))，这样最低频率"
                             "正好除以 s；只写 base * s 时它只除以 s^((D - 2) / D)。"),
    "ntk_exponent_inverted": ("NTK: exponent (D - 2) / D", "the exponent is D / (D - 2), not "
                              "(D - 2) / D: base' = base * s^(D / (D - 2)).",
                              "NTK 的指数写反了：应为 D / (D - 2)，即 base' = base * s^(D / (D - 2))。"),
    "ntk_base": ("NTK: base not raised as HF", "dynamic NTK computes base' = base * s^(D / (D - "
                 "2)) and the frequencies base'^(-2i/D).",
                 "NTK 的新 base 不对：应为 base' = base * s^(D / (D - 2))，频率为 base'^(-2i/D)。"),
    "dynamic_static": ("dynamic: the factor used as it is", "dynamic NTK recomputes the scale "
                       "from the current length l: s = factor * l / L - (factor - 1) for l > L, "
                       "and no scaling up to L (HF's _compute_dynamic_ntk_parameters); using "
                       "factor itself is static NTK.",
                       "dynamic 直接用了 factor：动态 NTK 按当前长度 l 重算缩放，l > L 时 s = factor * "
                       "l / L - (factor - 1)，l 不超过 L 时不缩放；直接用 factor 是静态 NTK。"),
    "dynamic_scale": ("dynamic: wrong scale from the length", "dynamic NTK uses s = factor * l "
                      "/ L - (factor - 1) with l = max(seq_len, L), L = "
                      "original_max_position_embeddings.",
                      "dynamic 由长度算出的缩放不对：应为 s = factor * l / L - (factor - 1)，"
                      "其中 l = max(seq_len, L)，L = original_max_position_embeddings。"),
    "dynamic_short_scaled": ("dynamic: scaled below L", "up to the training length nothing is "
                             "scaled: HF takes l = max(seq_len, L), so s = 1 for seq_len <= L (and "
                             "for seq_len = None).",
                             "dynamic 在训练长度以内也做了缩放：HF 取 l = max(seq_len, L)，所以 "
                             "seq_len <= L（以及 seq_len = None）时 s = 1。"),
    "ramp_reversed": ("YaRN: ramp reversed", "YaRN keeps the high frequencies (many turns "
                      "within L, low pair index) and interpolates the low ones: theta'_i = "
                      "(1 - gamma_i) theta_i / s + gamma_i theta_i with gamma = 1 below the "
                      "beta_fast index. Yours does the opposite (the ramp or the blend reversed, "
                      "or the bounds from swapped betas).",
                      "YaRN 的斜坡反了：应保留高频（在 L 内转很多圈、对序号小的那些），对低频做插值："
                      "theta'_i = (1 - gamma_i) theta_i / s + gamma_i theta_i；你的代码正好相反（斜坡或"
                      "混合反了，或两个 beta 用反了）。"),
    "ramp_on_dims": ("YaRN: ramp over dims, not pairs", "the ramp runs over the pair index i = "
                     "0 .. D/2 - 1 (torch.arange(D // 2)), not over the dimension index 2i "
                     "(torch.arange(0, D, 2)).",
                     "YaRN 的斜坡按维度序号 2i 取了值：应按对序号 i = 0 .. D/2 - 1"
                     "（torch.arange(D // 2)）计算。"),
    "ramp_not_rounded": ("YaRN: bounds not floored / ceiled", "HF (truncate=True, its default) "
                         "rounds the ramp's bounds outward: low = floor(i(beta_fast)), high = "
                         "ceil(i(beta_slow)), then clamps them to [0, D - 1].",
                         "YaRN 斜坡的边界没有向外取整：HF 默认（truncate=True）取 low = "
                         "floor(i(beta_fast))、high = ceil(i(beta_slow))，再限制在 [0, D - 1] 内。"),
    "ramp_bounds": ("YaRN: ramp bounds wrong", "the bounds are the pair indices where the "
                    "number of turns over L, r = L / lambda_i, equals beta_fast = 32 and beta_slow "
                    "= 1: i(r) = D ln(L / (2 pi r)) / (2 ln base) (HF's find_correction_dim).",
                    "YaRN 斜坡的边界不对：边界是在 L 内转的圈数 r = L / lambda_i 等于 beta_fast = 32 "
                    "和 beta_slow = 1 的对序号：i(r) = D ln(L / (2 pi r)) / (2 ln base)。"),
    "yarn_blend": ("YaRN: not a blend of theta and theta / s", "YaRN blends, per pair, the "
                   "unchanged frequency and the interpolated one: (1 - gamma_i) theta_i / s + "
                   "gamma_i theta_i.",
                   "YaRN 不是 theta 与 theta / s 的混合：每一对应为 (1 - gamma_i) theta_i / s + "
                   "gamma_i theta_i。"),
    "attention_factor_missing": ("YaRN: attention factor missing", "YaRN scales the logits "
                                 "through the attention factor sqrt(1/t) = 0.1 ln(s) + 1 (Peng "
                                 "et al. 2023, Section 3.4); yours returns 1.",
                                 "YaRN 漏掉了注意力因子：sqrt(1/t) = 0.1 ln(s) + 1（Peng et al. 2023，"
                                 "第 3.4 节）；你返回的是 1。"),
    "attention_factor_log10": ("YaRN: log10 for ln", "the attention factor is 0.1 ln(s) + 1, "
                               "the natural log (math.log), not log10.",
                               "YaRN 注意力因子用了 log10：应为自然对数，0.1 ln(s) + 1（math.log）。"),
    "attention_factor": ("YaRN: attention factor wrong", "the attention factor is sqrt(1/t) = "
                         "0.1 ln(s) + 1, returned as it is (HF multiplies cos and sin by it).",
                         "YaRN 注意力因子不对：应为 sqrt(1/t) = 0.1 ln(s) + 1，原样返回（HF 用它乘 cos "
                         "和 sin）。"),
    "attention_factor_other_kinds": ("attention factor for linear / dynamic", "only YaRN "
                                     "scales the attention: linear and dynamic return 1.0.",
                                     "只有 YaRN 有注意力因子：linear 和 dynamic 应返回 1.0。"),
    "seq_len_none": ("dynamic: seq_len=None not handled", "seq_len defaults to None, which "
                     "means the training length L (HF: seq_len = max(seq_len, L), None taken as L): "
                     "l = max(seq_len or L, L).",
                     "dynamic 没有处理 seq_len=None：默认值 None 表示训练长度 L（HF 中 None 取 L），"
                     "即 l = max(seq_len or L, L)。"),
    "kind_mixed_up": ("kinds mixed up", "each kind has its own formula: \"linear\" divides by "
                      "the factor, \"dynamic\" raises the base, \"yarn\" blends per pair.",
                      "几种方法搞混了：\"linear\" 除以 factor，\"dynamic\" 增大 base，\"yarn\" 逐对混合。"),
})

KINDS = ("linear", "dynamic", "yarn")


# --------------------------------------------------------------------------- the checker's own math
def _theta(D, base, exponent="2i"):
    i = torch.arange(D // 2, dtype=torch.float64)
    return base ** (-(2 * i if exponent == "2i" else i) / D)


def _ramp_bounds(D, base, L, fast=32.0, slow=1.0, rounded=True, two_pi=True):
    def index_of(turns):
        return D * math.log(L / (turns * (2 * math.pi if two_pi else 1.0))) / (2 * math.log(base))
    low, high = index_of(fast), index_of(slow)
    if rounded:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, D - 1)
    if low == high:
        high += 0.001
    return low, high


def _scaled(D, base, factor, kind, L=4096, seq_len=None, *, linear="div", ntk="right",
            dyn="right", ramp="right", attn="ln", theta="2i", betas=(32.0, 1.0)):
    """(inv_freq float32, attention factor) with one knob turned: the mutants' common code."""
    th = _theta(D, base, theta)
    a = 1.0
    if kind == "linear":
        f = th / factor if linear == "div" else th * factor
    elif kind == "dynamic":
        length = seq_len if seq_len is not None else L
        if dyn != "no_clamp":
            length = max(length, L)
        s = {"right": factor * length / L - (factor - 1), "no_clamp": factor * length / L
             - (factor - 1), "static": factor, "ratio": length / L,
             "no_offset": factor * length / L}[dyn]
        e = {"right": D / (D - 2), "none": 1.0, "inverted": (D - 2) / D}[ntk]
        f = _theta(D, base * s ** e, theta)
    elif kind == "yarn":
        fast, slow = betas
        low, high = _ramp_bounds(D, base, L, fast, slow, rounded=ramp != "unrounded",
                                 two_pi=ramp != "no_2pi")
        i = torch.arange(D // 2, dtype=torch.float64)
        if ramp == "dims":
            i = 2 * i
        gamma = 1 - ((i - low) / (high - low)).clamp(0, 1)            # 1: keep theta_i
        if ramp == "reversed":
            gamma = 1 - gamma
        f = (1 - gamma) * th / factor + gamma * th
        a = 1.0 if factor <= 1 else {"ln": 0.1 * math.log(factor) + 1, "none": 1.0,
                                     "log10": 0.1 * math.log10(factor) + 1,
                                     "squared": (0.1 * math.log(factor) + 1) ** 2}[attn]
    else:
        raise DoesNotApply(kind)
    if attn == "all_kinds" and factor > 1:
        a = 0.1 * math.log(factor) + 1
    return f.float(), a


def _mutant(**knobs):
    return lambda D, base, factor, kind, L, seq_len: _scaled(D, base, factor, kind, L, seq_len,
                                                             **knobs)


ROPE_SCALING_MUTANTS = [
    ("linear_multiplied", _mutant(linear="mul")),
    ("base_frequencies", _mutant(theta="i")),
    ("ntk_exponent_missing", _mutant(ntk="none")),
    ("ntk_exponent_inverted", _mutant(ntk="inverted")),
    ("dynamic_static", _mutant(dyn="static")),
    ("dynamic_scale", _mutant(dyn="ratio")),
    ("dynamic_scale", _mutant(dyn="no_offset")),
    ("dynamic_short_scaled", _mutant(dyn="no_clamp")),
    ("ramp_reversed", _mutant(ramp="reversed")),
    ("ramp_reversed", _mutant(betas=(1.0, 32.0))),
    ("ramp_on_dims", _mutant(ramp="dims")),
    ("ramp_not_rounded", _mutant(ramp="unrounded")),
    ("ramp_bounds", _mutant(ramp="no_2pi")),
    ("attention_factor_missing", _mutant(attn="none")),
    ("attention_factor_log10", _mutant(attn="log10")),
    ("attention_factor", _mutant(attn="squared")),
    ("attention_factor_other_kinds", _mutant(attn="all_kinds")),
]


def _reference(D, base, factor, kind, L=4096, seq_len=None):
    """normlib's functions, which tests/test_hf_parity.py shows equal HF's."""
    if kind == "linear":
        return nl.linear_scaling_frequencies(D, base, factor), 1.0
    if kind == "dynamic":
        length = max(seq_len if seq_len is not None else L, L)
        return nl.ntk_scaling_frequencies(D, base, factor * length / L - (factor - 1)), 1.0
    return (nl.yarn_frequencies(D, base, factor, original_max_position_embeddings=L),
            nl.yarn_attention_factor(factor))


def _case(note, D, base, factor, kind, L=4096, seq_len=None, defaults=()):
    kwargs = {"head_dim": D, "base": base, "factor": factor, "kind": kind,
              "original_max_position_embeddings": L, "seq_len": seq_len}
    return Case(f"{kind}: {note}", lambda: (), kwargs, defaults=defaults)


CASES = [
    _case("D 128, base 10,000, factor 4", 128, 10000.0, 4.0, "linear"),
    _case("D 64, base 500,000, factor 2.5", 64, 500000.0, 2.5, "linear"),
    _case("factor 2, seq_len 8192 = 2 L", 128, 10000.0, 2.0, "dynamic", 4096, 8192),
    _case("factor 4, seq_len 5000", 128, 10000.0, 4.0, "dynamic", 4096, 5000),
    _case("D 64, factor 1, seq_len 3 L", 64, 10000.0, 1.0, "dynamic", 2048, 6144),
    _case("seq_len 2000 < L: no scaling", 128, 10000.0, 4.0, "dynamic", 4096, 2000),
    _case("seq_len left to its default (None): no scaling", 128, 10000.0, 4.0, "dynamic", 4096,
          defaults=("seq_len",)),
    _case("D 128, base 10,000, factor 4, L 4096", 128, 10000.0, 4.0, "yarn", 4096),
    _case("D 128, base 500,000, factor 8, L 8192", 128, 500000.0, 8.0, "yarn", 8192),
    _case("D 64, base 10,000, factor 16, L 2048", 64, 10000.0, 16.0, "yarn", 2048),
    _case("D 96, base 1,000,000, factor 32, L 4096", 96, 1e6, 32.0, "yarn", 4096),
]

_FREQ_TOL = (2e-5, 0.0)          # relative: the smallest frequencies are ~1e-4 / s
_ATTN_TOL = (1e-6, 1e-9)


def _references() -> dict:
    """The built-ins a learner may not call: normlib's functions, and HF's when loaded."""
    refs = {nl.linear_scaling_frequencies: "nl.linear_scaling_frequencies",
            nl.ntk_scaling_frequencies: "nl.ntk_scaling_frequencies",
            nl.yarn_frequencies: "nl.yarn_frequencies",
            nl.yarn_attention_factor: "nl.yarn_attention_factor",
            nl.llama3_frequencies: "nl.llama3_frequencies"}
    hf = sys.modules.get("transformers.modeling_rope_utils")
    for fn in getattr(hf, "ROPE_INIT_FUNCTIONS", {}).values():
        refs[fn] = f"transformers' {fn.__name__}"
    return refs


def check_rope_scaling(fn, *, time_limit: float = 3.0) -> CheckResult:
    """Check ``fn(head_dim, base, factor, kind, original_max_position_embeddings=4096,
    seq_len=None)`` -> (inv_freq, attention_factor) for kind "linear", "dynamic", "yarn",
    against normlib's scaled frequencies (equal to HF's ROPE_INIT_FUNCTIONS)."""
    s = Session("RoPE scaling", ROPE_SCALING_MISTAKES, exercise="rope_scaling",
                time_limit=time_limit, references=_references(),
                error_hints=((r"NoneType", "seq_len_none"),))
    if not s.require_callable(fn):
        return s.result()

    def call(fn, **kwargs):
        return s.call(fn, **kwargs)

    def judge(got, args, case):
        D, base, factor, kind, L, seq_len = args
        want_f, want_a = _reference(D, base, factor, kind, L, seq_len)
        outputs = [(key, (lambda m=m: m(*args))) for key, m in ROPE_SCALING_MUTANTS]
        freq, attn = _unpack(got)
        if isinstance(freq, torch.Tensor) and freq.shape == want_f.shape and \
                freq.is_floating_point():
            values = freq.detach().float()
        else:
            values = freq
        s.expect_close(values, want_f, what="inv_freq", tol=_FREQ_TOL, mutants=[
            (key, (lambda out=out: out()[0])) for key, out in outputs])
        if freq.dtype != torch.float32:
            raise Fail(f"inv_freq has dtype {freq.dtype}, expected torch.float32", "not_float32")
        a = torch.tensor(attn, dtype=torch.float64)
        s.expect_close(a, torch.tensor(want_a, dtype=torch.float64), what="attention factor",
                       tol=_ATTN_TOL, mutants=[(key, (lambda out=out: torch.tensor(
                           out()[1], dtype=torch.float64))) for key, out in outputs])
        return f"attention factor {fmt(float(a))}" if kind == "yarn" else None

    run_cases(s, fn, CASES, call=call, judge=judge)
    s.probe(*_probes(s, fn))
    return s.result()


def _unpack(got):
    """(inv_freq, attention factor as a float) from the learner's output, or a Fail."""
    if got is None:
        raise Fail("returned None", "returned_none")
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        what = f"a {type(got).__name__}" + (f" of shape {tuple(got.shape)}"
                                            if isinstance(got, torch.Tensor) else "")
        raise Fail(f"returned {what}, expected (inv_freq, attention_factor)", "not_a_pair")
    freq, attn = got
    if not isinstance(freq, torch.Tensor):
        raise Fail(f"inv_freq is a {type(freq).__name__}, expected a torch.Tensor", "not_a_tensor")
    if isinstance(attn, torch.Tensor) and attn.numel() == 1:
        attn = attn.item()
    if isinstance(attn, bool) or not isinstance(attn, (int, float)):
        raise Fail(f"the attention factor is a {type(attn).__name__}, expected a float",
                   "not_a_pair")
    return freq, float(attn)


def _probes(s: Session, fn) -> list:
    """Probes on chosen arguments (D = 64, base 10,000, L = 4096), each reading one property of
    the learner's output: the unscaled frequencies (linear, factor 1), the direction of position
    interpolation, dynamic NTK's exponent (factor 1, seq_len 2 L: s = 2) and its scale (factor 4,
    seq_len 2 L: s = 5), YaRN's ramp direction, and the attention factor at s = 4 and 16."""
    D, base, L = 64, 10000.0, 4096
    theta = _theta(D, base)

    def run(factor, kind, seq_len=None):
        got = s.call(fn, head_dim=D, base=base, factor=factor, kind=kind,
                     original_max_position_embeddings=L, seq_len=seq_len)
        freq, attn = _unpack(got)
        if freq.shape != theta.shape or not bool(freq.isfinite().all()):
            raise Fail("unusable output")
        return freq.detach().double(), attn

    def near_all(a, b):
        return bool(((a - b).abs() <= 1e-4).all())

    def rel(a, b, tol=1e-5):
        return bool(((a - b).abs() <= tol * b.abs()).all())

    def base_frequencies():
        f, _ = run(1.0, "linear")
        if rel(f, theta):
            return None
        if rel(f, _theta(D, base, "i")):
            return ("base_frequencies", "With kind 'linear' and factor 1 your frequencies are "
                    "base^(-i/D): the exponent is 2i/D (torch.arange(0, D, 2) / D), so that they "
                    "fall from 1 to about 1/base.")
        return ("base_frequencies", f"With kind 'linear' and factor 1 (no scaling) your "
                f"frequencies are not base^(-2i/D): theta_1 = {fmt(float(f[1]))}, expected "
                f"{fmt(float(theta[1]))}.")

    def linear():
        f, _ = run(4.0, "linear")
        if rel(f, theta / 4):
            return None
        if rel(f, theta * 4):
            return ("linear_multiplied", "With kind 'linear' and factor 4 your frequencies are 4 "
                    "times theta_i: position interpolation divides them by the factor, so that "
                    "position 4L turns as far as L did.")
        others = {"yarn": _reference(D, base, 4.0, "yarn", L)[0],
                  "NTK": nl.ntk_scaling_frequencies(D, base, 4.0)}
        for kind, other in others.items():
            if rel(f, other.double()):
                return ("kind_mixed_up", f"With kind 'linear' and factor 4 your frequencies are "
                        f"{kind}'s: \"linear\" divides every theta_i by the factor.")
        r = f / theta
        return ("linear_scaling", f"With kind 'linear' and factor 4 your frequencies are theta_i "
                f"times {fmt(float(r[0]))} (pair 0) to {fmt(float(r[-1]))} (pair D/2 - 1): "
                "position interpolation divides every one by 4.")

    def dynamic():
        f1, _ = run(1.0, "dynamic", 2 * L)                      # s = 2
        if not rel(f1, theta, 1e-5) and rel(f1[0:1], theta[0:1]):
            implied = float(f1[1]) ** (-D / 2)                   # base' from theta'_1 = base'^(-2/D)
            e = math.log(implied / base) / math.log(2.0)
            if abs(e - D / (D - 2)) > 1e-3:
                if abs(e - 1) < 1e-3:
                    return ("ntk_exponent_missing", "With factor 1 at seq_len 2 L (s = 2) your "
                            "base grows by 2^1: base * s. NTK-aware scaling raises it to base * "
                            f"s^(D / (D - 2)) = base * 2^{fmt(D / (D - 2))}.")
                if abs(e - (D - 2) / D) < 1e-3:
                    return ("ntk_exponent_inverted", "With factor 1 at seq_len 2 L (s = 2) your "
                            f"base grows by 2^{fmt(e)}: the exponent is (D - 2) / D; it is D / "
                            "(D - 2).")
                return ("ntk_base", f"With factor 1 at seq_len 2 L (s = 2) your base grows by "
                        f"2^{fmt(e)}; NTK raises it by s^(D / (D - 2)) = 2^{fmt(D / (D - 2))}.")
            f4, _ = run(4.0, "dynamic", 2 * L)                  # s = 4 * 2 - 3 = 5
            implied = float(f4[1]) ** (-D / 2)
            s_seen = (implied / base) ** ((D - 2) / D)
            for want, key, text in ((4.0, "dynamic_static", "the factor itself: static NTK"),
                                    (2.0, "dynamic_scale", "seq_len / L, without the factor"),
                                    (8.0, "dynamic_scale", "factor * seq_len / L, without "
                                     "- (factor - 1)")):
                if abs(s_seen - want) < 1e-3:
                    return (key, f"With factor 4 at seq_len 2 L your scale is s = {fmt(s_seen)}, "
                            f"{text}; HF's dynamic NTK uses s = factor * l / L - (factor - 1) "
                            "= 5.")
        elif rel(f1, theta, 1e-5):
            return ("dynamic_static", "With factor 1 at seq_len 2 L your frequencies are not "
                    "scaled: dynamic NTK scales by s = factor * l / L - (factor - 1) = 2 there.")
        fs, _ = run(4.0, "dynamic", L // 2)
        if not rel(fs, theta):
            return ("dynamic_short_scaled", "With seq_len L / 2 your frequencies are scaled: "
                    "up to the training length dynamic NTK changes nothing (l = max(seq_len, L)).")
        return None

    def yarn():
        f, a = run(4.0, "yarn")
        ratio = f / theta                                        # 1 kept ... 1/4 interpolated
        if not bool(((ratio > 0.25 - 1e-6) & (ratio < 1 + 1e-6)).all()):
            return ("yarn_blend", "With kind 'yarn' and factor 4 some of your frequencies are "
                    "not between theta_i / 4 and theta_i: YaRN blends the two, (1 - gamma_i) "
                    "theta_i / s + gamma_i theta_i.")
        if float(ratio[0]) < 0.5 and float(ratio[-1]) > 0.5:
            return ("ramp_reversed", "With kind 'yarn' and factor 4 your highest frequency is "
                    "interpolated (theta_0 / 4) and your lowest kept: YaRN keeps the pairs that "
                    "turn many times within L (low i) and interpolates the others.")
        gamma = (ratio - 0.25) / 0.75                            # 1: kept, 0: divided by 4
        low, high = _ramp_bounds(D, base, L)
        want = 1 - ((torch.arange(D // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
        if near_all(gamma, want) or not bool((gamma[1:] <= gamma[:-1] + 1e-6).all()):
            return None
        kept = int((gamma > 1 - 1e-6).sum())
        divided = int((gamma < 1e-6).sum())
        return ("ramp_bounds", f"With kind 'yarn', factor 4, D = {D}, base 10,000 and L = {L} "
                f"your ramp keeps {kept} pairs and divides {divided} by 4; HF's keeps pairs "
                f"i <= low = {low} and divides pairs i >= high = {high} (of {D // 2}), low = "
                "floor(i(32)), high = ceil(i(1)), i(r) = D ln(L / (2 pi r)) / (2 ln base).")

    def attention():
        _, a4 = run(4.0, "yarn")
        _, a16 = run(16.0, "yarn")
        if abs(a4 - (0.1 * math.log(4) + 1)) < 1e-6 and abs(a16 - (0.1 * math.log(16) + 1)) < 1e-6:
            return None
        shown = f"with factor 4 your attention factor is {fmt(a4)}, with 16 {fmt(a16)}"
        if a4 == 1.0 and a16 == 1.0:
            return ("attention_factor_missing", f"{shown.capitalize()}: YaRN's is 0.1 ln(s) + 1 "
                    f"= {fmt(0.1 * math.log(4) + 1)} and {fmt(0.1 * math.log(16) + 1)}.")
        if abs(a4 - (0.1 * math.log10(4) + 1)) < 1e-6:
            return ("attention_factor_log10", f"{shown.capitalize()}, 0.1 log10(s) + 1: YaRN's "
                    "is 0.1 ln(s) + 1, the natural log.")
        return ("attention_factor", f"{shown.capitalize()}: YaRN's is sqrt(1/t) = 0.1 ln(s) + 1 "
                f"= {fmt(0.1 * math.log(4) + 1)} and {fmt(0.1 * math.log(16) + 1)}.")

    def other_kinds():
        _, a = run(4.0, "linear")
        _, b = run(4.0, "dynamic", 2 * L)
        if a != 1.0 or b != 1.0:
            return ("attention_factor_other_kinds", f"With factor 4 your attention factor is "
                    f"{fmt(a)} for 'linear' and {fmt(b)} for 'dynamic': only YaRN scales the "
                    "attention; the others return 1.0.")
        return None

    return [base_frequencies, linear, dynamic, yarn, attention, other_kinds]

