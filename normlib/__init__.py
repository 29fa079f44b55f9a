"""normlib: reference implementations of the Transformer's building blocks, for learning by hand.

Every layer that PyTorch also ships matches PyTorch's numbers (see tests/). Modules, one idea each:
norms (BatchNorm, LayerNorm, RMSNorm), deepnorm, blocks (Post/Pre/DeepNorm/Sandwich/Reordered
placement), schedules (warmup), activations (activations, GLU variants, FFNs), rope, rope_scaling
(context extension), attention (MHA, GQA, MQA; QK-norm), kv_cache (a KV cache for decoding),
sliding_window (banded masks, a rolling cache), flash (tiled attention with the online softmax),
gqa_uptrain (MHA into GQA by mean-pooling heads), softcap (logit soft-capping), z_loss, dyt (Dynamic
Tanh), mla (multi-head latent attention), config (ModelConfig), model (TinyTransformerLM), hf
(Hugging Face LLaMA weights into it), data (a synthetic language), train (a training loop), viz
(plot style), diagrams (labelled block diagrams, ``nl.diagrams``).
"""

import importlib

__version__ = "0.2.0"

from .activations import (
    ACTIVATIONS,
    GLU_VARIANTS,
    FeedForward,
    GLUFeedForward,
    activation,
    gelu,
    glu_variant,
    leaky_relu,
    llama_ffn_hidden_dim,
    relu,
    silu,
    swish,
)
from .attention import QK_NORMS, MultiHeadAttention, attention, repeat_kv
from .blocks import FFNS, NORMS, PLACEMENTS, TransformerBlock, make_ffn, make_norm
from .config import ModelConfig
from .data import MarkovLanguage
from .deepnorm import deepnorm_constants, deepnorm_init_
from .dyt import DyT, dyt
from .flash import online_softmax_attention
from .gqa_uptrain import mha_to_gqa
from .hf import (
    hf_llama_to_normlib_name,
    llama_model_config,
    load_llama_weights,
    model_from_llama_config,
)
from .kv_cache import KVCache, kv_cache_bytes
from .mla import MultiHeadLatentAttention, mla_cache_elements
from .model import TinyTransformerLM, stream_rms
from .norms import BatchNorm, LayerNorm, RMSNorm, batch_norm, layer_norm, rms_norm
from .rope import (
    ROPE_LAYOUTS,
    apply_rope,
    apply_rope_complex,
    half_to_interleaved,
    rope_cos_sin,
    rope_decay_bound,
    rope_frequencies,
    rotate,
)
from .rope_scaling import (
    linear_scaling_frequencies,
    llama3_frequencies,
    ntk_scaling_frequencies,
    yarn_attention_factor,
    yarn_frequencies,
)
from .schedules import cosine_with_warmup, inverse_sqrt, linear_warmup
from .sliding_window import RollingKVCache, sliding_window_mask
from .softcap import softcap
from .train import lm_loss, train_ensemble, train_lm
from .z_loss import z_loss

__all__ = [
    "__version__",
    "ACTIVATIONS", "GLU_VARIANTS", "FeedForward", "GLUFeedForward", "activation", "gelu",
    "glu_variant", "leaky_relu", "llama_ffn_hidden_dim", "relu", "silu", "swish",
    "MultiHeadAttention", "attention", "repeat_kv", "KVCache", "kv_cache_bytes",
    "QK_NORMS", "RollingKVCache", "sliding_window_mask", "softcap", "z_loss", "DyT", "dyt",
    "MultiHeadLatentAttention", "mla_cache_elements", "online_softmax_attention", "mha_to_gqa",
    "FFNS", "NORMS", "PLACEMENTS", "TransformerBlock", "make_ffn", "make_norm",
    "MarkovLanguage", "deepnorm_constants", "deepnorm_init_", "ModelConfig", "TinyTransformerLM",
    "stream_rms",
    "hf_llama_to_normlib_name", "llama_model_config", "load_llama_weights",
    "model_from_llama_config",
    "BatchNorm", "LayerNorm", "RMSNorm", "batch_norm", "layer_norm", "rms_norm",
    "ROPE_LAYOUTS", "apply_rope", "apply_rope_complex", "half_to_interleaved",
    "rope_cos_sin", "rope_decay_bound", "rope_frequencies", "rotate",
    "linear_scaling_frequencies", "llama3_frequencies", "ntk_scaling_frequencies",
    "yarn_attention_factor", "yarn_frequencies",
    "cosine_with_warmup", "inverse_sqrt", "linear_warmup", "lm_loss", "train_ensemble", "train_lm",
    "diagrams", "viz",
]


def __getattr__(name: str):
    """nl.viz and nl.diagrams import matplotlib on first use, so `import normlib` does not."""
    if name in ("diagrams", "viz"):
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'normlib' has no attribute {name!r}")
