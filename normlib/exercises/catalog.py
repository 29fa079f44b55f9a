"""The exercises: task, signature, target time and the interviewer's follow-up questions (EN / 中文).

The drill (``normlib.exercises.drill``) reads this catalogue; each exercise notebook states the same
task and follow-ups (tests/test_exercises.py checks that they agree).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import (
    attention,
    batch_norm,
    deep_norm,
    gelu,
    layer_norm,
    layer_norm_backward,
    llama_block,
    multi_head_attention,
    online_softmax,
    qk_norm,
    rms_norm,
    rope,
    schedule,
    sliding_window,
    swiglu,
)

__all__ = ["Exercise", "FollowUp", "EXERCISES", "exercise"]


@dataclass(frozen=True)
class FollowUp:
    question: str
    question_zh: str
    answer: str
    answer_zh: str


@dataclass(frozen=True)
class Exercise:
    key: str               # "layer_norm"
    title: str             # "LayerNorm"
    title_zh: str          # "层归一化"
    notebook: str          # "01_layer_norm.ipynb"
    checker: object        # layer_norm.check_layer_norm
    stub: str              # the code the learner starts from
    task: str
    task_zh: str
    minutes: int           # target time in an interview
    followups: tuple[FollowUp, ...] = field(default_factory=tuple)

    @property
    def name(self) -> str:
        """The name the learner's answer is expected under (function or class)."""
        return self.stub.split("(")[0].split()[-1]


def _q(*texts: str) -> FollowUp:
    return FollowUp(*texts)


_EXERCISES = [
    Exercise(
        "layer_norm", "LayerNorm", layer_norm.TITLE_ZH, "01_layer_norm.ipynb",
        layer_norm.check_layer_norm,
        'def layer_norm(x, weight, bias, eps=1e-5):\n    """LayerNorm over the last dim of x."""\n'
        "    raise NotImplementedError\n",
        "Normalize x (..., d) over its last dim: y = (x - mean) / sqrt(var + eps) * weight + bias, "
        "with the biased variance (divide by d). weight and bias have shape (d,). Return x's "
        "shape and dtype.",
        "对 x (..., d) 的最后一维做归一化：y = (x - 均值) / sqrt(方差 + eps) * weight + bias，"
        "方差用有偏估计（除以 d）。weight 和 bias 的形状是 (d,)。输出与 x 同形状、同 dtype。",
        5,
        (_q("Which dim does LayerNorm normalize in BERT, and why not the batch?",
            "BERT 的 LayerNorm 在哪一维上归一化？为什么不在 batch 维上？",
            "The hidden dim (768 in bert-base): every token gets its own mean and variance, so the "
            "result does not depend on the other sentences in the batch or on their padding.",
            "在隐藏维（bert-base 是 768）：每个 token 单独算均值和方差，结果与 batch 里的其他句子、"
            "以及它们的 padding 无关。"),
         _q("Why the biased variance, and where does eps go?",
            "为什么用有偏方差？eps 放在哪里？",
            "nn.LayerNorm divides by d and adds eps inside the sqrt. x.std(-1) is unbiased by "
            "default and eps outside the sqrt changes low-variance rows a lot.",
            "nn.LayerNorm 除以 d，并把 eps 加在根号里面。x.std(-1) 默认是无偏的；eps 放在根号外面，"
            "会大幅改变方差很小的行。"),
         _q("Is LayerNorm learnable? Does it need extra storage?",
            "LayerNorm 有可学习参数吗？需要额外的存储吗？",
            "Learnable weight and bias of shape (d,) (elementwise_affine=True); no running "
            "statistics, so training and eval compute the same thing. BatchNorm keeps buffers.",
            "有可学习的 weight 和 bias，形状 (d,)（elementwise_affine=True）；没有滑动统计量，"
            "训练和推理的计算相同。BatchNorm 需要保存 running 缓冲区。"),
         _q("What is LayerNorm invariant to? And RMSNorm?",
            "LayerNorm 对什么不变？RMSNorm 呢？",
            "Shifting and scaling a row (re-centering and re-scaling); RMSNorm keeps only the "
            "re-scaling invariance.",
            "对一行加上常数或乘以正数不变（平移不变性和缩放不变性）；RMSNorm 只保留缩放不变性。"))),
    Exercise(
        "batch_norm", "BatchNorm", batch_norm.TITLE_ZH, "02_batch_norm.ipynb",
        batch_norm.check_batch_norm,
        "class BatchNorm(nn.Module):\n    def __init__(self, num_features, eps=1e-5, momentum=0.1):\n"
        "        super().__init__()\n        raise NotImplementedError\n\n"
        "    def forward(self, x):\n        raise NotImplementedError\n",
        "An nn.Module for (B, C) and (B, C, H, W) input, statistics per channel over every dim "
        "but 1. Training: normalize with the batch mean and biased variance, and update the "
        "buffers running_mean and running_var: running = (1 - momentum) * running + momentum * "
        "batch_stat, with the unbiased variance for running_var. Eval: use the running "
        "statistics. Learnable weight (ones) and bias (zeros).",
        "实现一个 nn.Module，输入 (B, C) 或 (B, C, H, W)，按通道统计（除第 1 维外的所有维）。"
        "训练时：用 batch 的均值和有偏方差归一化，并更新缓冲区 running_mean、running_var："
        "running = (1 - momentum) * running + momentum * batch_stat，running_var 用无偏方差。"
        "推理时：用 running 统计量。可学习的 weight（全 1）和 bias（全 0）。",
        15,
        (_q("Why does BatchNorm need extra storage, and LayerNorm not?",
            "为什么 BatchNorm 需要额外存储，而 LayerNorm 不需要？",
            "Eval mode cannot rely on a batch, so training keeps running averages of the mean and "
            "variance as buffers (running_mean, running_var, num_batches_tracked). LayerNorm's "
            "statistics come from the sample itself.",
            "推理时不能依赖 batch，所以训练时要把均值和方差的滑动平均存成缓冲区（running_mean、"
            "running_var、num_batches_tracked）。LayerNorm 的统计量来自样本本身。"),
         _q("Which elements share one mean in BatchNorm, and which in LayerNorm?",
            "BatchNorm 和 LayerNorm 分别让哪些元素共用一个均值？",
            "BatchNorm: one channel across the batch (and positions), like standardizing each "
            "country's incomes separately; LayerNorm: all features of one sample or token.",
            "BatchNorm：同一通道在整个 batch（和所有位置）上共用，好比把每个国家的收入分别标准化；"
            "LayerNorm：同一个样本（token）的所有特征共用。"),
         _q("Why is BatchNorm rare in Transformers?",
            "为什么 Transformer 很少用 BatchNorm？",
            "Sequences vary in length and carry padding, batches can be small, and train-time "
            "batch statistics differ from inference; PowerNorm (Shen et al. 2020) found BN's "
            "statistics in NLP fluctuate much more than in vision.",
            "序列长度不一且有 padding，batch 可能很小，训练时的 batch 统计量与推理不一致；"
            "PowerNorm（Shen et al. 2020）发现 NLP 中 BN 的统计量比视觉任务波动大得多。"),
         _q("What happens with one value per channel in training?",
            "训练时每个通道只有一个值会怎样？",
            "The variance is 0 and the unbiased estimate divides by zero; PyTorch raises "
            "\"Expected more than 1 value per channel when training\".",
            "方差为 0，无偏估计要除以 0；PyTorch 会报错 \"Expected more than 1 value per channel "
            "when training\"。"))),
    Exercise(
        "rms_norm", "RMSNorm", rms_norm.TITLE_ZH, "03_rms_norm.ipynb", rms_norm.check_rms_norm,
        'def rms_norm(x, weight, eps=1e-6):\n    """RMSNorm over the last dim of x."""\n'
        "    raise NotImplementedError\n",
        "y = x / sqrt(mean(x^2) + eps) * weight over the last dim, no mean subtracted. Compute in "
        "float32 for float16/bfloat16 input and return the input's dtype (as LLaMA).",
        "在最后一维上计算 y = x / sqrt(mean(x^2) + eps) * weight，不减均值。float16/bfloat16 "
        "输入要先转成 float32 计算，输出转回输入的 dtype（与 LLaMA 相同）。",
        5,
        (_q("What does RMSNorm drop from LayerNorm, and why is that fine?",
            "RMSNorm 去掉了 LayerNorm 的什么？为什么可以去掉？",
            "The mean (re-centering) and the bias. Zhang & Sennrich (2019) argue re-scaling is what "
            "matters; they report comparable quality and 7% to 64% less running time (abstract; "
            "about 7% to 41% for RMSNorm itself in their tables, the 64% is partial RMSNorm).",
            "去掉了减均值（re-centering）和 bias。Zhang & Sennrich（2019）认为起作用的是缩放；"
            "他们报告效果相当，运行时间减少 7% 到 64%（这是摘要里的数字；论文表格中 RMSNorm 本身"
            "约减少 7% 到 41%，64% 来自部分 RMSNorm，即 pRMSNorm）。"),
         _q("Why upcast to float32?",
            "为什么要先转成 float32？",
            "x^2 overflows float16 once |x| >= 256 (its maximum is 65504), and a mean over many "
            "squares loses precision; LLaMA computes in float32 and casts back before the weight.",
            "|x| ≥ 256 时 x^2 会超出 float16 的最大值 65504；对很多平方求均值也会损失精度。"
            "LLaMA 用 float32 计算，乘 weight 之前转回原 dtype。"),
         _q("Where does eps go? Is it in the paper?",
            "eps 放在哪里？论文里有吗？",
            "The paper's formula has none; LLaMA, HF and torch put it inside the sqrt, the "
            "authors' own code outside. Say which you use.",
            "论文公式里没有 eps；LLaMA、HF 和 torch 放在根号里面，作者自己的代码放在外面。"
            "写的时候要说明用哪一种。"),
         _q("Which models use RMSNorm?",
            "哪些模型用 RMSNorm？",
            "LLaMA 1/2/3, Mistral, Qwen2 (Pre-RMSNorm), T5 (T5LayerNorm) and Gemma (with "
            "1 + weight).",
            "LLaMA 1/2/3、Mistral、Qwen2（Pre-RMSNorm），T5（T5LayerNorm），Gemma（用 1 + weight）。"))),
]

_EXERCISES += [
    Exercise(
        "deep_norm", "DeepNorm", deep_norm.TITLE_ZH, "04_deep_norm.ipynb",
        deep_norm.check_deep_norm,
        "class DeepNorm(nn.Module):\n    def __init__(self, d_model, n_layers):\n"
        "        super().__init__()\n        raise NotImplementedError\n\n"
        "    def forward(self, x, sublayer):\n        raise NotImplementedError\n",
        "An nn.Module with attributes alpha = (2N)^(1/4) and beta = (8N)^(-1/4) for an "
        "encoder-only model of N = n_layers layers, and forward(x, sublayer) = "
        "LayerNorm(alpha * x + sublayer(x)) over d_model. beta is for initialization only.",
        "实现一个 nn.Module：属性 alpha = (2N)^(1/4)、beta = (8N)^(-1/4)（N = n_layers 层的仅编码器模型），"
        "forward(x, sublayer) = LayerNorm(alpha * x + sublayer(x))，在 d_model 上归一化。"
        "beta 只用于初始化。",
        8,
        (_q("What is beta for?", "beta 是做什么用的？",
            "Initialization only: xavier_normal_(w, gain=beta) for the FFN weights, v_proj and "
            "out_proj (q_proj and k_proj get gain 1). It never scales activations at run time.",
            "只用于初始化：FFN 的权重、v_proj 和 out_proj 用 xavier_normal_(w, gain=beta)（q_proj、"
            "k_proj 的 gain 为 1）。前向计算时从不乘 beta。"),
         _q("What does DeepNorm combine?", "DeepNorm 结合了什么？",
            "Post-LN's quality with Pre-LN's stable training, using plain LayerNorm (not RMSNorm); "
            "DeepNet trained 1,000 layers (2,500 sublayers).",
            "结合了 Post-LN 的效果和 Pre-LN 的训练稳定性，用的是普通 LayerNorm（不是 RMSNorm）；"
            "DeepNet 训练了 1000 层（2500 个子层）。"),
         _q("And for a decoder-only or encoder-decoder model?",
            "仅解码器或编码器-解码器模型的常数是多少？",
            "Decoder-only, M layers: (2M)^(1/4) and (8M)^(-1/4). Encoder-decoder: encoder "
            "0.81 (N^4 M)^(1/16) and 0.87 (N^4 M)^(-1/16); decoder (3M)^(1/4) and (12M)^(-1/4).",
            "仅解码器模型，M 层：(2M)^(1/4) 和 (8M)^(-1/4)。编码器-解码器：编码器 0.81 (N^4 M)^(1/16) 和 "
            "0.87 (N^4 M)^(-1/16)；解码器 (3M)^(1/4) 和 (12M)^(-1/4)。"),
         _q("Why alpha > 1?", "为什么 alpha > 1？",
            "alpha multiplies the identity path x (not the sublayer's branch), so each sublayer "
            "changes its input by a smaller fraction; "
            "the paper bounds the model update ||F(x, theta_t) - F(x, theta_0)||, which explodes "
            "early in training for Post-LN.",
            "alpha 乘在恒等路径 x 上（不是子层分支上），使每个子层对输入的相对改动更小；"
            "论文据此约束模型更新量 "
            "||F(x, theta_t) - F(x, theta_0)||，而 Post-LN 在训练初期这个量会爆炸。"))),
    Exercise(
        "swiglu_ffn", "SwiGLU FFN", swiglu.TITLE_ZH, "05_swiglu_ffn.ipynb", swiglu.check_swiglu_ffn,
        "class SwiGLUFFN(nn.Module):\n    def __init__(self, dim, hidden_dim):\n"
        "        super().__init__()\n        raise NotImplementedError\n\n"
        "    def forward(self, x):\n        raise NotImplementedError\n",
        "LLaMA's feed-forward layer: bias-free nn.Linear layers w1 (gate, dim -> hidden_dim), "
        "w3 (up, dim -> hidden_dim) and w2 (down, hidden_dim -> dim); "
        "forward(x) = w2(silu(w1(x)) * w3(x)). F.silu is allowed.",
        "LLaMA 的前馈网络：无 bias 的 nn.Linear w1（门控，dim -> hidden_dim）、w3（上投影，"
        "dim -> hidden_dim）和 w2（下投影，hidden_dim -> dim）；forward(x) = w2(silu(w1(x)) * w3(x))。"
        "可以用 F.silu。",
        6,
        (_q("Why three matrices, and how does LLaMA choose hidden_dim?",
            "为什么有三个矩阵？LLaMA 的 hidden_dim 怎么定？",
            "Gate, up and down. To keep the parameters of a 4d FFN, hidden = 2/3 * 4d, rounded up "
            "to a multiple of multiple_of: dim 4096 gives 11008 (LLaMA 7B).",
            "门控、上投影、下投影。为了和 4d 的 FFN 参数量相当，hidden = 2/3 * 4d，再向上取整到 "
            "multiple_of 的倍数：dim 4096 得到 11008（LLaMA 7B）。"),
         _q("GLU, SwiGLU, GEGLU: what differs?", "GLU、SwiGLU、GEGLU 有什么区别？",
            "Only the gate's activation: sigmoid (GLU, Dauphin et al. 2017, Facebook AI Research), "
            "Swish_1 = SiLU (SwiGLU), GELU (GEGLU); Bilinear has none.",
            "只是门控的激活函数不同：sigmoid（GLU，Dauphin et al. 2017，Facebook AI Research）、"
            "Swish_1 = SiLU（SwiGLU）、GELU（GEGLU）；Bilinear 没有激活函数。"),
         _q("Why does SwiGLU work better?", "为什么 SwiGLU 效果更好？",
            "Shazeer (2020, Table 1) measured held-out log-perplexity 1.944 for SwiGLU against "
            "1.997 for ReLU after 65,536 steps, and offers no explanation (\"divine benevolence\").",
            "Shazeer（2020，表 1）测得 65,536 步后 SwiGLU 的验证 log-perplexity 为 1.944，ReLU 为 "
            "1.997；论文没有给出解释（\"divine benevolence\"）。"),
         _q("Why no bias?", "为什么不要 bias？",
            "Shazeer (2020) writes the GLU variants without biases and LLaMA follows "
            "(nn.Linear(..., bias=False)), so weights from a LLaMA checkpoint load as they are.",
            "Shazeer（2020）写的 GLU 变体都没有 bias，LLaMA 沿用（nn.Linear(..., bias=False)），"
            "这样 LLaMA 的权重可以直接加载。"))),
    Exercise(
        "rope", "RoPE", rope.TITLE_ZH, "06_rope.ipynb", rope.check_rope,
        'def rope(x, base=10000.0):\n    """Rotate x (..., T, D): the row at index t of dim -2 is '
        'position t."""\n    raise NotImplementedError\n',
        "Rotate each feature pair i of x (..., T, D) at position t by the angle t * theta_i, "
        "theta_i = base^(-2i/D), i = 0 .. D/2 - 1, counter-clockwise (+theta). Pairs may be "
        "interleaved (2i, 2i+1) or split halves (i, i + D/2); the checker says which it found.",
        "对 x (..., T, D) 中位置 t 的第 i 对特征旋转角度 t * theta_i，theta_i = base^(-2i/D)，"
        "i = 0 .. D/2 - 1，逆时针（+theta）。特征对可以是相邻的 (2i, 2i+1)，也可以是前后两半 "
        "(i, i + D/2)；检查器会告诉你它识别出的是哪一种。",
        10,
        (_q("Why does q_m . k_n depend only on m - n?", "为什么 q_m · k_n 只与 m - n 有关？",
            "Rotations compose: (R_m q) . (R_n k) = q . R_m^T R_n k = q . R_(n-m) k.",
            "旋转可以合成：(R_m q) · (R_n k) = q · R_m^T R_n k = q · R_(n-m) k。"),
         _q("Interleaved pairs or split halves?", "相邻配对还是前后两半配对？",
            "Both are RoPE: Meta's LLaMA rotates pairs (2i, 2i+1) as complex numbers, HF's "
            "rotate_half pairs (i, i + D/2). Checkpoints move between them by permuting the rows "
            "of W_q and W_k.",
            "两者都是 RoPE：Meta 的 LLaMA 把 (2i, 2i+1) 当复数旋转，HF 的 rotate_half 配对 "
            "(i, i + D/2)。权重在两者之间转换时，重排 W_q 和 W_k 的行即可。"),
         _q("What does the base control? Why 500000 in LLaMA-3?",
            "base 控制什么？为什么 LLaMA-3 用 500000？",
            "The wavelengths 2 pi / theta_i, from 2 pi up to about 2 pi * base. A larger base "
            "turns the slow pairs more slowly, so RoFormer's bound decays more slowly with "
            "distance: suited to longer contexts.",
            "波长 2 pi / theta_i，从 2 pi 到约 2 pi * base。base 越大，慢速的特征对转得越慢，"
            "RoFormer 的上界随距离衰减得越慢，适合更长的上下文。"),
         _q("Is RoPE applied to v? Where exactly?", "RoPE 作用在 v 上吗？具体在哪里？",
            "Only to q and k, per head, before the dot product; v is untouched and RoPE has no "
            "learned parameters.",
            "只作用在 q 和 k 上，每个头分别旋转，在点积之前；v 不变，RoPE 没有可学习参数。"))),
]

_EXERCISES += [
    Exercise(
        "warmup_cosine", "Warmup + cosine schedule", schedule.TITLE_ZH, "07_warmup_cosine.ipynb",
        schedule.check_warmup_cosine,
        "def warmup_cosine(step, warmup_steps, total_steps, min_ratio=0.0):\n"
        '    """The learning-rate multiplier at this step."""\n    raise NotImplementedError\n',
        "Return the learning-rate multiplier: step / warmup_steps while step < warmup_steps, "
        "exactly 1 at step == warmup_steps, then a half cosine from 1 down to min_ratio at "
        "total_steps, and min_ratio after that. Steps count from 0 (HF's convention).",
        "返回学习率倍数：step < warmup_steps 时为 step / warmup_steps，step == warmup_steps 时恰好"
        "为 1，之后按半个余弦周期从 1 降到 total_steps 处的 min_ratio，此后保持 min_ratio。"
        "step 从 0 开始计数（HF 的约定）。",
        5,
        (_q("Why warm up, and why does Post-LN need it most?",
            "为什么要预热？为什么 Post-LN 最需要？",
            "At initialization Post-LN's gradients near the output are large (Xiong et al. 2020); "
            "without warmup, Adam reached only 8.45 BLEU on IWSLT14 against about 34 with warmup.",
            "初始化时 Post-LN 靠近输出层的梯度很大（Xiong et al. 2020）；在 IWSLT14 上不预热时 "
            "Adam 只有 8.45 BLEU，预热后约 34。"),
         _q("Does Pre-LN need warmup?", "Pre-LN 需要预热吗？",
            "Xiong et al. (2020) train Pre-LN Transformers without warmup; its gradient norms stay "
            "flat across layers at initialization.",
            "Xiong et al.（2020）不用预热也训练好了 Pre-LN Transformer；初始化时它各层的梯度范数"
            "基本一致。"),
         _q("How do you use it in PyTorch?", "在 PyTorch 里怎么用？",
            "LambdaLR(optimizer, lambda step: warmup_cosine(step, W, T, r)) multiplies the base "
            "lr; call scheduler.step() after each optimizer.step(). The first update uses "
            "step 0, multiplier 0.",
            "LambdaLR(optimizer, lambda step: warmup_cosine(step, W, T, r)) 把倍数乘到基础学习率上；"
            "每次 optimizer.step() 之后调用 scheduler.step()。第一次更新用 step 0，倍数为 0。"),
         _q("Why a floor (min_ratio)?", "为什么要有下限 min_ratio？",
            "So that late training still learns, and the schedule never rises again after "
            "total_steps; LLaMA ends its cosine at 10% of the peak learning rate.",
            "让训练后期仍在学习，并保证 total_steps 之后学习率不再回升；LLaMA 的余弦衰减到"
            "峰值学习率的 10% 为止。"))),
    Exercise(
        "gelu_tanh", "GELU (tanh form)", gelu.TITLE_ZH, "08_gelu_tanh.ipynb", gelu.check_gelu_tanh,
        'def gelu_tanh(x):\n    """GELU, tanh approximation."""\n    raise NotImplementedError\n',
        "GELU's tanh approximation, as GPT-2 and F.gelu(x, approximate='tanh'): "
        "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Keep x's dtype.",
        "GELU 的 tanh 近似（GPT-2 和 F.gelu(x, approximate='tanh') 所用）："
        "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))。保持 x 的 dtype。",
        4,
        (_q("Exact or tanh GELU: who uses which?", "精确 GELU 还是 tanh 近似？各自谁在用？",
            "BERT (HF) uses the exact erf form, GPT-2 the tanh form; they differ by at most about "
            "4.7e-4 (near x = -2.69).",
            "BERT（HF）用精确的 erf 形式，GPT-2 用 tanh 形式；两者最多相差约 4.7e-4（在 x = -2.69 "
            "附近）。"),
         _q("Why GELU rather than ReLU?", "为什么用 GELU 而不用 ReLU？",
            "GELU(x) = x Phi(x) weights x by the probability that a standard normal is below it: "
            "smooth, slightly negative for negative x, with a non-zero gradient there "
            "(Hendrycks & Gimpel 2016).",
            "GELU(x) = x Phi(x)，按标准正态小于 x 的概率给 x 加权：处处光滑，负半轴有小的负值，"
            "梯度也不为 0（Hendrycks & Gimpel 2016）。"),
         _q("And x * sigmoid(1.702 x)?", "x * sigmoid(1.702 x) 呢？",
            "Another approximation from the GELU paper, off by up to 0.020; with 1 instead of "
            "1.702 it is SiLU.",
            "GELU 论文里的另一种近似，最大误差约 0.020；把 1.702 换成 1 就是 SiLU。"))),
    Exercise(
        "attention", "Causal attention", attention.TITLE_ZH, "09_attention.ipynb",
        attention.check_attention,
        'def attention(q, k, v, causal=True):\n    """q, k, v: (B, H, T, D)."""\n'
        "    raise NotImplementedError\n",
        "Scaled dot-product attention for q, k, v of shape (B, H, T, D): "
        "softmax(q k^T / sqrt(D) + mask) v, where with causal=True position t attends to "
        "positions 0 .. t only.",
        "实现缩放点积注意力，q、k、v 形状为 (B, H, T, D)：softmax(q k^T / sqrt(D) + mask) v；"
        "causal=True 时位置 t 只能看到 0 .. t。",
        8,
        (_q("Why divide by sqrt(D)?", "为什么除以 sqrt(D)？",
            "For q and k with independent unit-variance entries, q . k has variance D; scaling "
            "keeps the softmax out of saturation (Vaswani et al. 2017, 3.2.1).",
            "q、k 各分量独立、方差为 1 时，q · k 的方差是 D；缩放后 softmax 不会饱和"
            "（Vaswani et al. 2017，3.2.1 节）。"),
         _q("How is the causal mask built, and why -inf?", "因果掩码怎么构造？为什么用 -inf？",
            "Keep j <= t (torch.ones(T, T).tril()); set the other scores to -inf before the "
            "softmax, so their weight is exactly 0 and every row still sums to 1.",
            "保留 j <= t（torch.ones(T, T).tril()）；softmax 之前把其余分数设为 -inf，"
            "它们的权重恰好为 0，每行之和仍为 1。"),
         _q("What does attention cost?", "注意力的计算代价是多少？",
            "O(T^2 D) time and a T x T score matrix per head; FlashAttention (Dao et al. 2022) "
            "computes the same result without storing that matrix.",
            "时间 O(T^2 D)，每个头要一个 T x T 的分数矩阵；FlashAttention（Dao et al. 2022）得到相同结果但"
            "不存这个矩阵。"),
         _q("Where does RoPE enter?", "RoPE 在哪里加入？",
            "Rotate q and k (per head) by their positions before taking the scores; v is left "
            "as it is.",
            "在计算分数之前，按位置旋转 q 和 k（每个头分别旋转）；v 保持不变。"))),
]

_EXERCISES += [
    Exercise(
        "layer_norm_backward", "LayerNorm backward", layer_norm_backward.TITLE_ZH,
        "10_layer_norm_backward.ipynb", layer_norm_backward.check_layer_norm_backward,
        "def layer_norm_backward(dy, x, weight, eps=1e-5):\n"
        '    """dx, dweight, dbias of LayerNorm over the last dim, by hand."""\n'
        "    raise NotImplementedError\n",
        "Given dy, the gradient of the loss with respect to y = LayerNorm(x) * weight + bias over "
        "the last dim (N features), return (dx, dweight, dbias) computed by hand, without "
        "autograd: dx has x's shape, dweight and dbias have shape (N,).",
        "已知 dy（损失对 y = LayerNorm(x) * weight + bias 的梯度，在最后一维的 N 个特征上归一化），"
        "不用 autograd，手推并返回 (dx, dweight, dbias)：dx 与 x 同形状，dweight 和 dbias 的形状是 "
        "(N,)。",
        12,
        (_q("Why does dx sum to 0 over each row?", "为什么 dx 在每一行上的和为 0？",
            "Adding a constant to a row does not change LayerNorm's output, so the gradient has no "
            "component along (1, ..., 1); the - mean(g) term removes it.",
            "给一行加上常数，LayerNorm 的输出不变，所以梯度在 (1, ..., 1) 方向上没有分量；"
            "- mean(g) 这一项正是把它减掉。"),
         _q("And why is dx orthogonal to x_hat?", "为什么 dx 与 x_hat 正交？",
            "Scaling a row about its mean does not change the output (up to eps), so the gradient "
            "has no component along x_hat; the - x_hat * mean(g * x_hat) term, the path through "
            "the variance, removes it.",
            "把一行绕均值缩放，输出不变（忽略 eps），所以梯度在 x_hat 方向上没有分量；"
            "- x_hat * mean(g * x_hat) 这一项（经过方差的那条路径）正是把它减掉。"),
         _q("How do you test a hand-written backward?", "怎么测试手写的反向传播？",
            "Against autograd on small float64 inputs with odd sizes and a constant row, or with "
            "torch.autograd.gradcheck, which compares with finite differences.",
            "在 float64 的小输入上（奇数尺寸、含常数行）与 autograd 比较，或者用 "
            "torch.autograd.gradcheck 与有限差分比较。"),
         _q("What does the forward pass keep for the backward?", "前向传播要为反向传播保存什么？",
            "One mean and one rstd = 1 / sqrt(var + eps) per row: torch.native_layer_norm returns "
            "(output, mean, rstd), and x_hat is recomputed from them.",
            "每行一个均值和一个 rstd = 1 / sqrt(var + eps)：torch.native_layer_norm 返回 "
            "(output, mean, rstd)，x_hat 由它们重新算出。"))),
]

_EXERCISES += [
    Exercise(
        "multi_head_attention", "Multi-head attention (GQA, KV cache)",
        multi_head_attention.TITLE_ZH,
        "11_multi_head_attention.ipynb", multi_head_attention.check_multi_head_attention,
        "class MultiHeadAttention(nn.Module):\n"
        "    def __init__(self, d_model, n_heads, n_kv_heads=None):\n"
        "        super().__init__()\n        raise NotImplementedError\n\n"
        "    def forward(self, x, cache=None):\n        raise NotImplementedError\n",
        "Causal multi-head self-attention for x (B, T, d_model) with bias-free nn.Linear layers "
        "q_proj and o_proj (d_model -> d_model), k_proj and v_proj (d_model -> n_kv_heads * "
        "head_dim), head_dim = d_model // n_heads; n_kv_heads=None means n_heads, and query head h "
        "reads key/value head h // (n_heads // n_kv_heads) (GQA; MQA when n_kv_heads = 1). "
        "forward(x, cache=None): cache is an nl.KVCache; with one, the new tokens sit at positions "
        "cache.seq_len onwards, cache.update(k, v) appends their (B, n_kv_heads, T, head_dim) keys "
        "and values and returns all of them, and decoding token by token gives the full pass's "
        "outputs.",
        "实现因果多头自注意力，x 形状为 (B, T, d_model)。无 bias 的 nn.Linear：q_proj 和 o_proj"
        "（d_model -> d_model），k_proj 和 v_proj（d_model -> n_kv_heads * head_dim），"
        "head_dim = d_model // n_heads；n_kv_heads=None 表示等于 n_heads，第 h 个查询头读取第 "
        "h // (n_heads // n_kv_heads) 个键值头（GQA；n_kv_heads = 1 即 MQA）。"
        "forward(x, cache=None)：cache 是一个 nl.KVCache；传入时，新 token 的位置从 cache.seq_len "
        "开始，cache.update(k, v) 追加它们的 (B, n_kv_heads, T, head_dim) 键和值并返回全部键值；"
        "逐个 token 解码的输出要与一次性前向的输出相同。",
        15,
        (_q("Why GQA or MQA? What do they save?", "为什么用 GQA 或 MQA？省下了什么？",
            "The KV cache: 2 x layers x B x n_kv_heads x S x head_dim numbers, read at every "
            "decoding step. With 8 key/value heads for 32 query heads (LLaMA 3 8B, Llama 3 paper "
            "Table 3) it is 4 times smaller than with 32: 1 GiB per 8,192-token sequence in bf16. "
            "MQA (Shazeer 2019) keeps one kv head; GQA (Ainslie et al. 2023) sits in between.",
            "省的是键值缓存：2 x 层数 x B x n_kv_heads x S x head_dim 个数，每一步解码都要读一遍。"
            "32 个查询头配 8 个键值头时（LLaMA 3 8B，见 Llama 3 论文表 3），键值缓存只有 32 个键值头"
            "时的 1/4：bf16 下每条 8,192 token 的序列占 1 GiB。MQA（Shazeer 2019）只保留一个键值头；"
            "GQA（Ainslie et al. 2023）介于两者之间。"),
         _q("Why is decoding with the cache equal to the full pass?",
            "为什么用键值缓存逐步解码，结果与一次性完整前向相同？",
            "Under the causal mask an earlier token's key and value never depend on later tokens, "
            "so recomputing them would give the same numbers; the new query at position S attends "
            "to keys 0 .. S, the same row of the full pass's masked scores.",
            "在因果掩码下，前面 token 的键和值不依赖后面的 token，重算也得到同样的数；位置 S 的新查询"
            "关注键 0 .. S，正是一次性前向里被掩码后的分数矩阵的同一行。"),
         _q("Why cache keys and values but not queries?", "为什么缓存键和值，而不缓存查询？",
            "Each query is used once, by its own token; every later token needs all earlier keys "
            "and values. The cache holds the n_kv_heads heads before they are repeated, and, with "
            "RoPE, keys already rotated at their positions.",
            "每个查询只被它自己的 token 用一次；而后面每个 token 都要用到之前所有的键和值。"
            "缓存存的是重复之前的 n_kv_heads 个头；用 RoPE 时，存的是已经按各自位置旋转过的键。"),
         _q("What does one decoding step cost with and without the cache?",
            "有无键值缓存时，每一步解码的代价各是多少？",
            "With it: the projections of one token and one query against S keys, O(S x d_model) "
            "per layer for attention. Without it: the whole prefix again, O(S x d_model^2) for the "
            "projections and O(S^2 x d_model) for attention.",
            "有缓存：只算一个 token 的投影，一个查询对 S 个键，每层注意力 O(S x d_model)。"
            "没有缓存：整个前缀重算一遍，投影 O(S x d_model^2)，注意力 O(S^2 x d_model)。"),
         _q("Why 1/sqrt(head_dim) and not 1/sqrt(d_model)?", "为什么除以 sqrt(head_dim) 而不是 sqrt(d_model)？",
            "Each head's score is a dot product of head_dim terms: for unit-variance entries its "
            "variance is head_dim (Vaswani et al. 2017, 3.2.1).",
            "每个头的分数是 head_dim 项的点积：各分量方差为 1 时，它的方差是 head_dim"
            "（Vaswani et al. 2017，3.2.1 节）。"))),
    Exercise(
        "llama_block", "LLaMA decoder block", llama_block.TITLE_ZH, "12_llama_block.ipynb",
        llama_block.check_llama_block,
        "class LlamaBlock(nn.Module):\n"
        "    def __init__(self, d_model, n_heads, hidden_dim, n_kv_heads=None):\n"
        "        super().__init__()\n        raise NotImplementedError\n\n"
        "    def forward(self, x):\n        raise NotImplementedError\n",
        "A LLaMA decoder block from your own pieces, for x (B, T, d_model) at positions 0 .. T - 1: "
        "h = x + attn(attn_norm(x)), out = h + ffn(ffn_norm(h)). attn_norm and ffn_norm are "
        "RMSNorm (eps 1e-5) with a weight of shape (d_model,); attn is causal multi-head attention "
        "(q_proj, k_proj, v_proj, o_proj, GQA as in exercise 11) with RoPE (base 10000, HF's "
        "\"half\" layout) on q and k; ffn is SwiGLU (w1 gate, w3 up, w2 down, hidden_dim). All "
        "linear layers are bias-free.",
        "用你自己写的组件拼出一个 LLaMA 解码器块，x 形状为 (B, T, d_model)，位置为 0 .. T - 1："
        "h = x + attn(attn_norm(x))，out = h + ffn(ffn_norm(h))。attn_norm 和 ffn_norm 是 RMSNorm"
        "（eps 1e-5），权重形状 (d_model,)；attn 是因果多头注意力（q_proj、k_proj、v_proj、o_proj，"
        "GQA 同练习 11），对 q 和 k 施加 RoPE（base 10000，HF 的 \"half\" 排布）；ffn 是 SwiGLU"
        "（w1 门控、w3 上投影、w2 下投影，隐藏维 hidden_dim）。所有线性层都没有 bias。",
        20,
        (_q("What does LLaMA change from the original Transformer block?",
            "LLaMA 的块相比原始 Transformer 改了什么？",
            "Touvron et al. (2023, Section 2.2): normalization before each sublayer (from GPT-3) "
            "with RMSNorm, SwiGLU instead of ReLU (from PaLM), rotary embeddings instead of "
            "absolute ones (from GPTNeo). In Meta's reference code the linear layers also have no "
            "bias (bias=False); the paper does not mention it.",
            "Touvron 等（2023，2.2 节）：在每个子层之前做归一化（沿用 GPT-3），用 RMSNorm；"
            "用 SwiGLU 代替 ReLU（沿用 PaLM）；用旋转位置编码代替绝对位置编码（沿用 GPTNeo）。"
            "此外，Meta 的参考代码中线性层都不带 bias（bias=False），论文里没有提到这一点。"),
         _q("Why normalize before the sublayer (Pre-LN)?", "为什么在子层之前归一化（Pre-LN）？",
            "The residual stream x + f(norm(x)) keeps an identity path from the output to every "
            "layer, so gradients at initialization are well-behaved and training needs little or "
            "no warmup (Xiong et al. 2020). The stream itself is never normalized: LLaMA applies "
            "one final RMSNorm before the output layer.",
            "残差流 x + f(norm(x)) 从输出到每一层都保留了一条恒等路径，所以初始化时梯度表现良好，"
            "训练几乎不需要预热（Xiong et al. 2020）。残差流本身不被归一化：LLaMA 在输出层之前再做一次 "
            "RMSNorm。"),
         _q("Why RMSNorm rather than LayerNorm?", "为什么用 RMSNorm 而不是 LayerNorm？",
            "It drops the mean subtraction and the bias and keeps the re-scaling, which Zhang and "
            "Sennrich (2019) found is what matters; it is cheaper (their abstract reports 7% to "
            "64% less running time across models; in their tables RMSNorm itself saves about 7% "
            "to 41%, and the 64% is partial RMSNorm).",
            "它去掉了减均值和 bias，只保留缩放；Zhang 和 Sennrich（2019）发现起作用的正是缩放；"
            "它也更省（摘要报告在不同模型上运行时间减少 7% 到 64%；论文表格中 RMSNorm 本身约减少 "
            "7% 到 41%，64% 来自部分 RMSNorm，即 pRMSNorm）。"),
         _q("Where does RoPE enter, and why not on v or on x?", "RoPE 加在哪里？为什么不加在 v 或 x 上？",
            "On q and k of each head, after the projections and before the scores, so that the "
            "score q_m . k_n depends on m - n. v carries content, and nothing is added to the "
            "residual stream, unlike absolute position embeddings.",
            "加在每个头的 q 和 k 上，在投影之后、算分数之前，使分数 q_m · k_n 只依赖 m - n。"
            "v 承载内容；和绝对位置编码不同，残差流里不加任何位置信息。"),
         _q("How many parameters does one LLaMA 7B block have?", "LLaMA 7B 的一个块有多少参数？",
            "d_model 4096, hidden 11008, 32 heads without GQA: attention 4 x 4096^2, FFN "
            "3 x 4096 x 11008, two norms 2 x 4096: 202,383,360. 32 blocks, the embedding and output "
            "matrices (32,000 x 4096 each) and the final norm give 6.74 billion.",
            "d_model 4096，隐藏维 11008，32 个头、不用 GQA：注意力 4 x 4096^2，FFN 3 x 4096 x 11008，"
            "两个归一化 2 x 4096：共 202,383,360。32 个块，加上嵌入矩阵和输出矩阵（各 32,000 x 4096）"
            "和最后的归一化，共 67.4 亿。"))),
]

_EXERCISES += [
    Exercise(
        "online_softmax_attention", "Tiled attention with the online softmax",
        online_softmax.TITLE_ZH, "13_online_softmax_attention.ipynb",
        online_softmax.check_online_softmax_attention,
        "def online_softmax_attention(q, k, v, block_size=2):\n"
        '    """q: (B, H, T, D); k, v: (B, H, S, D). No mask; keys in blocks of block_size."""\n'
        "    raise NotImplementedError\n",
        "Attention without a mask, softmax(q k^T / sqrt(D)) v for q (B, H, T, D) and k, v "
        "(B, H, S, D), equal to F.scaled_dot_product_attention(q, k, v), computed over blocks of "
        "block_size keys (the last may be smaller) with the online softmax: keep per query row a "
        "running max m, a running denominator l and an accumulator o; for each block, the new max "
        "m' = max(m, block max), rescale l and o by exp(m - m'), add the block's exp(s - m') and "
        "exp(s - m') v; divide o by l at the end. No softmax, no SDPA.",
        "实现不带掩码的注意力 softmax(q k^T / sqrt(D)) v，q 形状为 (B, H, T, D)，k、v 形状为 "
        "(B, H, S, D)，结果等于 F.scaled_dot_product_attention(q, k, v)。把键按 block_size 个一块"
        "（最后一块可以更小），用在线 softmax（online softmax）逐块计算：每个查询行维护当前最大值 m、"
        "累计分母 l 和累加器 o；每来一块，新的最大值 m' = max(m, 该块最大值)，把 l 和 o 乘以 "
        "exp(m - m')，再加上该块的 exp(s - m') 和 exp(s - m') v；最后用 o 除以 l。不许用 softmax，"
        "也不许用 SDPA。",
        12,
        (_q("Why is the result exact, not an approximation?", "为什么结果是精确的，而不是近似？",
            "After the last block, l = sum_j exp(s_j - m) and o = sum_j exp(s_j - m) v_j for the "
            "row's true maximum m: every earlier term was multiplied by exp(m_old - m) when the "
            "maximum moved, so o / l is softmax(s) v up to rounding (Milakov & Gimelshein 2018, "
            "Algorithm 3).",
            "最后一块之后，对这一行真正的最大值 m，有 l = sum_j exp(s_j - m)、"
            "o = sum_j exp(s_j - m) v_j：最大值每变一次，之前的每一项都乘过 exp(m_old - m)，所以 "
            "o / l 就是 softmax(s) v，只差舍入误差（Milakov 和 Gimelshein 2018，算法 3）。"),
         _q("What does FlashAttention gain from it?", "FlashAttention 从中得到了什么？",
            "The (T, S) score matrix is never written to GPU memory: each tile of scores lives in "
            "on-chip SRAM, and the kernel reads Q, K, V and writes O, so memory traffic, not flops, "
            "drops and memory grows linearly in T (Dao et al. 2022, Section 3.1). The flops are "
            "the same as standard attention's.",
            "(T, S) 的分数矩阵从不写入显存：每块分数只待在片上 SRAM 里，核函数只读 Q、K、V、写 O，"
            "省下的是访存量而不是计算量，显存占用随 T 线性增长（Dao et al. 2022，3.1 节）。计算量与"
            "标准注意力相同。"),
         _q("What does the forward pass keep for the backward?", "前向传播要为反向传播保存什么？",
            "Only O and one number per row, the log-sum-exp m + log l; the backward pass recomputes "
            "the tiles of scores from Q and K instead of storing them (Dao et al. 2022, Section "
            "3.1, recomputation).",
            "只保存 O 和每行一个数，即 log-sum-exp m + log l；反向传播时由 Q 和 K 重新算出每块"
            "分数，而不是把它们存下来（Dao et al. 2022，3.1 节，重计算）。"),
         _q("Why start m at -inf, and what if a row sees no key?", "为什么 m 从 -inf 开始？某一行一个键也看不到会怎样？",
            "-inf is the max of nothing: the first block sets m to its own max and exp(-inf - m') "
            "= 0 empties the (empty) sums. A row all of whose keys are masked keeps m = -inf and "
            "exp(-inf - (-inf)) is NaN, as is 0 / 0 at the end: a kernel must guard that row "
            "(torch 2.13's SDPA returns zeros for it on the CPU, measured).",
            "-inf 是空集合的最大值：第一块把 m 设成自己的最大值，exp(-inf - m') = 0 把（空的）和清零。"
            "如果某一行的键全被掩码，m 一直是 -inf，exp(-inf - (-inf)) 是 NaN：核函数必须专门处理"
            "这一行，最后的 0 / 0 也是 NaN（实测 torch 2.13 的 SDPA 在 CPU 上对这样的行返回 0）。"))),
]

_EXERCISES += [
    Exercise(
        "sliding_window_attention", "Sliding-window attention with a rolling KV cache",
        sliding_window.TITLE_ZH, "14_sliding_window_attention.ipynb",
        sliding_window.check_sliding_window_attention,
        "def sliding_window_attention(q, k, v, window, cache):\n"
        '    """q, k, v: (B, H, T, D), the new tokens before RoPE; cache: a dict, {} at first."""\n'
        "    raise NotImplementedError\n",
        "Causal sliding-window attention for the T new tokens' q, k, v (B, H, T, D), before RoPE, "
        "with a rolling KV cache held in the dict cache ({} for a new sequence). The new tokens sit "
        "at positions cache['seen'] .. cache['seen'] + T - 1 (no 'seen' yet: 0); rotate q and k "
        "there with nl.apply_rope(x, positions). The keys and values are the kept ones "
        "(cache['k'], cache['v'], if any) followed by the new ones, and the query at position p "
        "attends to the keys at p - window + 1 .. p (itself and the window - 1 before it). Then "
        "keep only the last window - 1 rotated keys and values in cache['k'] and cache['v'], and "
        "count every token in cache['seen']. Decoding token by token must give the full pass's "
        "outputs. No F.scaled_dot_product_attention, no nl.sliding_window_mask.",
        "对 T 个新 token 的 q、k、v（形状 (B, H, T, D)，尚未施加 RoPE）实现因果滑动窗口注意力，"
        "滚动键值缓存存在字典 cache 里（新序列传入 {}）。新 token 的位置是 cache['seen'] .. "
        "cache['seen'] + T - 1（还没有 'seen' 时从 0 开始）；用 nl.apply_rope(x, positions) 在这些"
        "位置上旋转 q 和 k。键和值是保留下来的（cache['k']、cache['v']，如果有）再接上新的；位置 p "
        "的查询关注位置 p - window + 1 .. p 的键（自己和前面 window - 1 个）。然后在 cache['k'] 和 "
        "cache['v'] 里只保留最后 window - 1 个旋转后的键和值，并在 cache['seen'] 里累计全部 token 数。"
        "逐个 token 解码的输出要与一次性前向相同。不许用 F.scaled_dot_product_attention，也不许用 "
        "nl.sliding_window_mask。",
        15,
        (_q("Why keep only window - 1 keys?", "为什么只保留 window - 1 个键？",
            "The next query, at position p, needs keys p - window + 1 .. p: its own (new) key and "
            "the window - 1 before it. Anything older is never read again, so the cache has a "
            "fixed size (B, H_kv, window - 1, D) per layer however long the text (HF's "
            "DynamicSlidingWindowLayer keeps the same).",
            "下一个查询位于 p，需要的键是 p - window + 1 .. p：它自己（新的）键和前面 window - 1 个。"
            "更早的键再也不会被读到，所以每层缓存大小固定为 (B, H_kv, window - 1, D)，与文本多长无关"
            "（HF 的 DynamicSlidingWindowLayer 也这样保留）。"),
         _q("Why must positions count every token seen, not the keys kept?",
            "为什么位置要按见过的全部 token 计，而不是按保留的键数？",
            "RoPE makes a score depend on the distance between positions. The kept keys were "
            "rotated at their true positions; a new token rotated at the number of kept keys (which "
            "stops growing at window - 1) would sit at the wrong distance from them once the cache "
            "rolls.",
            "RoPE 让分数依赖于位置之差。保留下来的键是在真实位置上旋转的；如果新 token 按保留的键数"
            "（增长到 window - 1 就不再变）来旋转，缓存一滚动，它与这些键的距离就错了。"),
         _q("How far back can a stack of sliding-window layers see?",
            "多层滑动窗口叠起来能看到多远？",
            "Each layer moves information at most window - 1 positions back, so L layers reach "
            "L (window - 1) tokens: Mistral 7B's window of 4096 over 32 layers gives about 131K "
            "(Jiang et al. 2023, Section 2, which counts W per layer).",
            "每一层最多把信息往回传 window - 1 个位置，所以 L 层能覆盖 L (window - 1) 个 token："
            "Mistral 7B 窗口 4096、32 层，约 131K（Jiang et al. 2023，第 2 节，按每层 W 计）。"),
         _q("Why do Gemma 3 and gpt-oss keep some global layers?", "为什么 Gemma 3 和 gpt-oss 还保留一些全局层？",
            "Local layers alone only pass long-range information through many hops; one global "
            "layer every few local ones reads the whole context directly. Gemma 3 interleaves 5 "
            "local layers (window 1024) per global one (Gemma 3 report, arXiv 2503.19786, "
            "Section 2); gpt-oss alternates dense and banded (128-token) layers (arXiv 2508.10925).",
            "只有局部层时，长距离信息要经过许多跳才能传到；每隔几层放一个全局层，就能直接读取整个上下文。"
            "Gemma 3 每 5 个局部层（窗口 1024）配 1 个全局层（Gemma 3 技术报告，arXiv 2503.19786，"
            "第 2 节）；gpt-oss 让全注意力层与带状（128 个 token）层交替（arXiv 2508.10925）。"))),
]

_EXERCISES += [
    Exercise(
        "qk_norm_attention", "QK-norm attention (Qwen3)", qk_norm.TITLE_ZH,
        "15_qk_norm_attention.ipynb", qk_norm.check_qk_norm_attention,
        "class QKNormAttention(nn.Module):\n"
        "    def __init__(self, d_model, n_heads, eps=1e-6):\n"
        "        super().__init__()\n        raise NotImplementedError\n\n"
        "    def forward(self, x):\n        raise NotImplementedError\n",
        "Qwen3's causal self-attention for x (B, T, d_model): bias-free nn.Linear layers q_proj, "
        "k_proj, v_proj and o_proj (d_model -> d_model), head_dim = d_model // n_heads, and two "
        "RMSNorms over head_dim, q_norm and k_norm, each with a weight of shape (head_dim,) and "
        "the eps given. Split q and k into heads, apply q_norm to every query head and k_norm to "
        "every key head, then RoPE (nl.apply_rope(x, layout='half'), positions 0 .. T - 1) to "
        "both, then causal attention over v's heads and o_proj. v is not normalized.",
        "实现 Qwen3 的因果自注意力，x 形状为 (B, T, d_model)：无 bias 的 nn.Linear 层 q_proj、k_proj、"
        "v_proj 和 o_proj（d_model -> d_model），head_dim = d_model // n_heads；再加两个在 head_dim 上"
        "做的 RMSNorm：q_norm 和 k_norm，权重形状都是 (head_dim,)，eps 用传入的值。把 q 和 k 拆成多头，"
        "对每个查询头用 q_norm、每个键头用 k_norm，然后对两者施加 RoPE（nl.apply_rope(x, "
        "layout='half')，位置 0 .. T - 1），再对 v 的各头做因果注意力，最后 o_proj。v 不做归一化。",
        12,
        (_q("What does QK-norm buy?", "QK-norm 带来了什么？",
            "A bound on every attention logit: with unit-RMS q and k per head, |q . k| / "
            "sqrt(head_dim) <= sqrt(head_dim) max|q_norm.weight| max|k_norm.weight| (Cauchy-Schwarz), so the "
            "logits cannot grow without bound, the failure Wortsman et al. (arXiv 2309.14322, "
            "Section 3.1) reproduce in small models at high learning rates and QK-norm removes. "
            "Dehghani et al. (arXiv 2302.05442) used it to train ViT-22B.",
            "它给每个注意力 logit 加了上界：每个头的 q、k 均方根为 1 时，|q · k| / sqrt(head_dim) "
            "不超过 sqrt(head_dim) max|q_norm.weight| max|k_norm.weight|（柯西-施瓦茨不等式），logit 就不会无限增长。Wortsman et al."
            "（arXiv 2309.14322，3.1 节）在小模型、大学习率下复现了这种 logit 增长，QK-norm 消除了它；"
            "Dehghani et al.（arXiv 2302.05442）用它训练了 ViT-22B。"),
         _q("Why before RoPE, and does the order matter?", "为什么放在 RoPE 之前？顺序有影响吗？",
            "RoPE rotates feature pairs and keeps each pair's norm, so without the norm's weight "
            "the two orders agree; with a learned per-feature weight they do not, since RoPE "
            "mixes features that the weight scales differently. Qwen3 (HF Qwen3Attention) "
            "normalizes, then rotates; checkpoints are trained in that order.",
            "RoPE 旋转特征对，并保持每一对的范数，所以不带权重时两种顺序结果相同；带上按特征学习的"
            "权重就不同了，因为 RoPE 会混合被权重缩放得不一样的特征。Qwen3（HF 的 Qwen3Attention）"
            "先归一化再旋转，权重也是按这个顺序训练出来的。"),
         _q("Why per head and not over the whole projection?", "为什么按头归一化，而不是在整个投影上？",
            "Each head computes its own logits q_h . k_h: normalizing each head bounds each "
            "head's logits; one norm over d_model lets one head's large entries shrink the "
            "others'. Qwen3 and Gemma 3 normalize per head (head_dim); OLMo 2 normalizes the "
            "whole projection.",
            "每个头各自计算 logit q_h · k_h：按头归一化，就给每个头的 logit 都加了上界；在整个 "
            "d_model 上做一次归一化，一个头里的大数会把其他头压小。Qwen3 和 Gemma 3 按头（head_dim）"
            "归一化；OLMo 2 在整个投影上归一化。"),
         _q("Where else is it used, and what did it replace?", "还有谁在用？它取代了什么？",
            "OLMo 2, Gemma 3 and Qwen3 use QK-norm; Gemma 3 replaced Gemma 2's logit soft-capping "
            "with it (Gemma 3 report, arXiv 2503.19786, Section 2).",
            "OLMo 2、Gemma 3 和 Qwen3 都用 QK-norm；Gemma 3 用它取代了 Gemma 2 的 logit 软截断"
            "（soft-capping）（Gemma 3 技术报告，arXiv 2503.19786，第 2 节）。"))),
]

EXERCISES: dict[str, Exercise] = {e.key: e for e in _EXERCISES}


def exercise(key: str) -> Exercise:
    """The exercise called ``key`` (one of EXERCISES), with a clear error otherwise."""
    if key not in EXERCISES:
        raise ValueError(f"exercise: unknown exercise {key!r}; expected one of "
                         f"{', '.join(EXERCISES)}")
    return EXERCISES[key]
