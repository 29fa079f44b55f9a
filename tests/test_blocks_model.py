"""Transformer blocks in every placement, and the tiny language model."""

import ast
import copy
import dataclasses
import importlib
import pathlib

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tolerances import close
from torch.func import functional_call, stack_module_state

import normlib as nl


@pytest.mark.parametrize("placement", nl.PLACEMENTS)
@pytest.mark.parametrize("norm", nl.NORMS)
@pytest.mark.parametrize("ffn", nl.FFNS)
def test_every_block_runs_and_keeps_shape(placement, norm, ffn):
    block = nl.TransformerBlock(16, 4, norm=norm, placement=placement, ffn=ffn, rope=ffn == "swiglu")
    x = torch.randn(2, 5, 16)
    y = block(x)
    assert y.shape == x.shape and torch.isfinite(y).all()
    y.sum().backward()


def _manual(block, x, placement, alpha=1.0):
    a, f, n1, n2 = block.attn, block.ffn, block.norm1, block.norm2
    if placement == "pre":
        x = x + a(n1(x))
        return x + f(n2(x))
    if placement == "sandwich":
        x = x + block.norm1_out(a(n1(x)))
        return x + block.norm2_out(f(n2(x)))
    if placement == "reordered":                     # OLMo 2: the norm on F's output only
        x = x + n1(a(x))
        return x + n2(f(x))
    x = n1(alpha * x + a(x))
    return n2(alpha * x + f(x))


@pytest.mark.parametrize("placement", nl.PLACEMENTS)
def test_block_equations(placement):
    alpha = 2.5 if placement == "deepnorm" else 1.0
    block = nl.TransformerBlock(16, 2, placement=placement, alpha=alpha).double()
    x = torch.randn(2, 4, 16, dtype=torch.float64)
    close(block(x), _manual(block, x, placement, alpha))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_deepnorm_alpha_buffer_equals_the_python_float_bit_for_bit(dtype):
    alpha = nl.deepnorm_constants(num_decoder_layers=7)["decoder"][0]     # 14^(1/4), not dyadic
    block = nl.TransformerBlock(16, 2, placement="deepnorm", alpha=alpha).to(dtype)
    assert block.alpha.shape == () and block.alpha.item() == torch.tensor(alpha, dtype=dtype).item()
    assert "alpha" not in block.state_dict()                               # persistent=False
    x = torch.randn(2, 4, 16, dtype=dtype)
    assert torch.equal(block(x), _manual(block, x, "deepnorm", alpha))


def test_post_and_deepnorm_lms_stack_and_run_under_vmap():
    # alpha is a buffer, so Post-LN (alpha = 1) and DeepNorm models share one structure and
    # torch.func can batch them: vmap over the stacked parameters equals each model's forward.
    lms = [nl.TinyTransformerLM(20, 16, 2, 2, 8, placement=p, norm="rmsnorm").double()
           for p in ("post", "deepnorm")]
    lms.append(nl.TinyTransformerLM(20, 16, 2, 2, 8, placement="pre", norm="rmsnorm", rope=True,
                                    ffn="swiglu", n_kv_heads=1).double())
    idx = torch.randint(20, (3, 8))
    for group in (lms[:2], lms[2:] * 2):
        params, buffers = stack_module_state(group)
        base = copy.deepcopy(group[0]).to("meta")

        def loss(p, b, i, base=base):
            return functional_call(base, (p, b), (i,)).logsumexp(-1).mean()

        logits = torch.vmap(lambda p, b, i, base=base: functional_call(base, (p, b), (i,)),
                            in_dims=(0, 0, None))(params, buffers, idx)
        for i, lm in enumerate(group):
            close(logits[i], lm(idx))
        grads = torch.vmap(torch.func.grad(loss), in_dims=(0, 0, None))(params, buffers, idx)
        assert all(torch.isfinite(g).all() for g in grads.values())
    assert [b.alpha.item() for b in lms[0].blocks] == [1.0, 1.0]


def test_post_block_output_is_normalized_pre_block_is_not():
    x = torch.randn(4, 8, 32) * 5
    post = nl.TransformerBlock(32, 4, placement="post")(x)
    pre = nl.TransformerBlock(32, 4, placement="pre")(x)
    close(post.var(-1, unbiased=False).mean(), torch.tensor(1.0), atol=1e-3, rtol=0)
    assert pre.var(-1, unbiased=False).mean() > 10


def test_glu_default_width_keeps_parameters():
    plain = nl.make_ffn("relu", 96)
    glu = nl.make_ffn("swiglu", 96)
    n_plain = sum(p.numel() for p in plain.parameters() if p.dim() == 2)
    n_glu = sum(p.numel() for p in glu.parameters())
    assert glu.w1.out_features == 256 and abs(n_glu - n_plain) / n_plain < 0.01


@pytest.mark.parametrize("placement,final_norm", [("pre", True), ("sandwich", True),
                                                  ("post", False), ("deepnorm", False)])
def test_tiny_lm(placement, final_norm):
    lm = nl.TinyTransformerLM(50, 32, 2, 4, 16, placement=placement, norm="rmsnorm")
    idx = torch.randint(50, (3, 10))
    logits = lm(idx)
    assert logits.shape == (3, 10, 50)
    assert isinstance(lm.norm_f, nl.RMSNorm) == final_norm
    idx2 = idx.clone()
    idx2[:, 7:] = torch.randint(50, (3, 3))                  # changing the future ...
    close(lm(idx2)[:, :7], logits[:, :7])                    # ... leaves the past unchanged


def test_tiny_lm_with_rope_has_no_position_embedding():
    lm = nl.TinyTransformerLM(20, 16, 1, 2, 8, rope=True)
    assert lm.pos_emb is None and lm(torch.zeros(1, 8, dtype=torch.long)).shape == (1, 8, 20)


def test_markov_language_and_training():
    lang = nl.MarkovLanguage(vocab_size=16, order=1, branching=2, seed=0)
    tokens = lang.sample(64, 20, torch.Generator().manual_seed(0))
    assert tokens.shape == (64, 20)
    for a, b in zip(tokens[:, :-1].flatten().tolist(), tokens[:, 1:].flatten().tolist(), strict=True):
        assert b in lang.successors[a].tolist()
    assert 0 < lang.entropy <= torch.log(torch.tensor(2.0)).item() + 1e-6
    lm = nl.TinyTransformerLM(16, 32, 2, 4, 32)
    losses = nl.train_lm(lm, lang, steps=60, lr=3e-3, batch_size=16, seq_len=16)
    assert len(losses) == 60
    assert sum(losses[-10:]) / 10 < lang.uniform_loss - 1.0      # it learned the transitions


@pytest.mark.parametrize("placement", nl.PLACEMENTS)
@pytest.mark.parametrize("norm", nl.NORMS)
def test_fused_norms_are_the_same_model(placement, norm):
    """fused_norm=True swaps normlib's norms for nn.LayerNorm / nn.RMSNorm: same parameters (names,
    initial values), same logits and gradients; the weights load either way."""
    cfg = dict(vocab_size=11, d_model=16, n_layers=3, n_heads=4, max_seq_len=8, norm=norm,
               placement=placement)
    torch.manual_seed(0)
    ref = nl.TinyTransformerLM(**cfg).double()
    torch.manual_seed(0)
    fused = nl.TinyTransformerLM(**cfg, fused_norm=True).double()
    expected = nl.LayerNorm if norm == "layernorm" else nl.RMSNorm
    assert isinstance(ref.blocks[0].norm1, expected)
    assert type(fused.blocks[0].norm1) is (torch.nn.LayerNorm if norm == "layernorm" else torch.nn.RMSNorm)
    assert ref.state_dict().keys() == fused.state_dict().keys()
    assert all(torch.equal(a, b) for a, b in zip(ref.state_dict().values(), fused.state_dict().values(), strict=True))
    idx = torch.randint(0, 11, (2, 8))
    for model in (ref, fused):
        model(idx).square().mean().backward()
    close(fused(idx), ref(idx))
    for (name, p), q in zip(ref.named_parameters(), fused.parameters(), strict=True):
        close(q.grad, p.grad, msg=name)


def test_fused_norm_must_be_a_bool():
    with pytest.raises(TypeError, match=r"make_norm: fused must be True or False, got 'yes'"):
        nl.TransformerBlock(16, 4, fused_norm="yes")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_deepnorm_alpha_is_not_rounded_by_a_half_cast(dtype):
    # Review finding 11: a float64 alpha buffer followed .to(bfloat16), so (2 * 12)^(1/4) =
    # 2.21336 became 2.21875 and about half of the products alpha * x differed from x times the
    # Python float. The buffer stays float32 (float64 again after .double()).
    alpha = nl.deepnorm_constants(num_decoder_layers=12)["decoder"][0]
    block = nl.TransformerBlock(16, 2, placement="deepnorm", alpha=alpha).to(dtype)
    assert block.alpha.dtype == torch.float32
    assert block.alpha.item() == torch.tensor(alpha, dtype=torch.float32).item()
    x = torch.randn(2, 4, 16).to(dtype)
    assert torch.equal(block(x), _manual(block, x, "deepnorm", alpha))
    assert block.double().alpha.item() == alpha


def test_rope_frequencies_are_not_rounded_by_a_half_cast():
    mha = nl.MultiHeadAttention(32, 4, rope=True, rope_base=500_000.0).to(torch.bfloat16)
    assert torch.equal(mha.inv_freq, nl.rope_frequencies(8, 500_000.0))          # float32
    assert torch.equal(mha.double().inv_freq, nl.rope_frequencies(8, 500_000.0, dtype=torch.float64))
    assert "inv_freq" not in mha.state_dict()


class _Created(torch.overrides.TorchFunctionMode):
    """Every tensor that a torch function returns while the mode is on."""

    def __init__(self):
        super().__init__()
        self.tensors = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, tuple | list) else (out,):
            if isinstance(t, torch.Tensor):
                self.tensors.append(t)
        return out


@pytest.mark.parametrize("options", [dict(rope=True, n_kv_heads=2, norm="rmsnorm", ffn="swiglu"),
                                     dict(placement="deepnorm"), dict(placement="sandwich")])
def test_a_forward_pass_creates_nothing_on_the_cpu_and_nothing_float64(options):
    # Issue 20 (device-agnostic) and review finding 11 (MPS has no float64): a model built on the
    # meta device runs a full pass and cached decoding without one CPU or float64 tensor.
    lm = nl.TinyTransformerLM(20, 32, 3, 4, 12, device="meta", **options)
    assert {p.device.type for p in lm.parameters()} == {"meta"}
    idx = torch.zeros(2, 6, dtype=torch.long, device="meta")
    caches = [nl.KVCache() for _ in lm.blocks]
    with _Created() as created:
        lm(idx)
        lm(idx[:, :4], caches)
        lm(idx[:, 4:5], caches)
    assert created.tensors
    assert {(t.device.type, t.dtype) for t in created.tensors
            if t.device.type != "meta" or t.dtype == torch.float64} == set()


def test_rope_cos_sin_are_computed_once_per_forward(monkeypatch):
    calls = []
    monkeypatch.setattr(importlib.import_module("normlib.attention"), "rope_cos_sin",
                        lambda *a: calls.append(a) or nl.rope_cos_sin(*a))
    lm = nl.TinyTransformerLM(20, 32, 3, 4, 12, rope=True)
    reference = nl.TinyTransformerLM(20, 32, 3, 4, 12, rope=True)
    reference.load_state_dict(lm.state_dict())
    idx = torch.randint(20, (2, 12))
    out = lm(idx)
    assert len(calls) == 1 and calls[0][0].dtype == torch.float32           # 3 layers, one call
    close(out, torch.stack([reference(i[None])[0] for i in idx]))


def test_model_config_is_built_from_the_keywords_and_kept():
    lm = nl.TinyTransformerLM(32, d_model=32, n_layers=2, n_heads=4, max_seq_len=16,
                              placement="deepnorm", norm="rmsnorm")
    assert lm.config == nl.ModelConfig(32, 32, 2, 4, 16, placement="deepnorm", norm="rmsnorm")
    assert lm.blocks[0].alpha.item() == pytest.approx(4 ** 0.25)          # DeepNet's (2N)^(1/4)
    same = nl.TinyTransformerLM(config=lm.config)
    assert same.config is lm.config and same.state_dict().keys() == lm.state_dict().keys()
    with pytest.raises(dataclasses.FrozenInstanceError):
        lm.config.n_layers = 3
    with pytest.raises(TypeError, match="either config or the sizes"):
        nl.TinyTransformerLM(32, config=lm.config)
    with pytest.raises(TypeError, match="unexpected keyword argument 'placment'"):
        nl.TinyTransformerLM(32, 32, 2, 4, 16, placment="post")


def test_tiny_lm_takes_int32_ids_and_factory_kwargs():
    lm = nl.TinyTransformerLM(20, 16, 1, 2, 8, dtype=torch.float64)
    assert {p.dtype for p in lm.parameters()} == {torch.float64}
    idx = torch.randint(20, (2, 8))
    assert torch.equal(lm(idx.int()), lm(idx))


def test_reset_parameters_resets_the_norms_too():
    lm = nl.TinyTransformerLM(20, 16, 2, 2, 8, norm="rmsnorm")
    with torch.no_grad():
        for p in lm.parameters():
            p.add_(1.0)
    lm.reset_parameters()
    assert all(torch.equal(m.weight, torch.ones_like(m.weight)) for m in lm.modules()
               if isinstance(m, nl.RMSNorm))


def test_markov_language_is_frozen_and_refuses_a_table_too_large():
    lang = nl.MarkovLanguage(vocab_size=8, order=2, branching=2, seed=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        lang.order = 3
    with pytest.raises(ValueError, match=r"vocab_size=64, order=4: 1,073,741,824 entries"):
        nl.MarkovLanguage(vocab_size=64, order=4)


@pytest.mark.parametrize("placement", ["pre", "sandwich"])
def test_stream_rms_is_the_rms_after_each_block(placement):
    torch.manual_seed(0)
    lm = nl.TinyTransformerLM(50, 32, 3, 4, 16, placement=placement)
    idx = torch.randint(50, (4, 10))                                     # (B, T)
    x = lm.tok_emb(idx) + lm.pos_emb(torch.arange(10))                   # by hand: (B, T, C)
    expected = []
    with torch.no_grad():
        for block in lm.blocks:
            x = block(x)
            expected.append(x.pow(2).mean(-1).sqrt().mean())
    torch.testing.assert_close(nl.stream_rms(lm, idx), torch.stack(expected), rtol=0, atol=0)
    assert all(not block._forward_hooks for block in lm.blocks)          # the hooks are removed
    with pytest.raises(TypeError, match="stream_rms: model must be a TinyTransformerLM, got Linear"):
        nl.stream_rms(torch.nn.Linear(2, 2), idx)


# Each field's values: good ones and bad ones, so that many combinations break a rule between fields
CONFIG_FIELDS = dict(
    d_model=st.sampled_from([0, 6, 8, 12, 16]), n_heads=st.sampled_from([1, 2, 3, 4]),
    n_kv_heads=st.sampled_from([None, 1, 2, 3]), norm=st.sampled_from([*nl.NORMS, "batchnorm"]),
    norm_eps=st.sampled_from([1e-5, 0.0, -1.0]),
    placement=st.sampled_from([*nl.PLACEMENTS, "middle"]), ffn=st.sampled_from([*nl.FFNS, "mlp"]),
    d_ff=st.sampled_from([None, 0, 8]), rope=st.booleans(), causal=st.booleans(),
    fused_norm=st.booleans(), alpha=st.sampled_from([None, 1.0, 2.0, -1.0]),
    qk_norm=st.sampled_from([None, *nl.QK_NORMS, "typo"]),
    sliding_window=st.sampled_from([None, 0, 2]), softcap=st.sampled_from([None, 5.0, -1.0]))


@settings(max_examples=80, deadline=None)
@given(st.fixed_dictionaries(CONFIG_FIELDS))
def test_a_config_that_constructs_builds_a_model_that_runs(fields):
    # Code review 2: ModelConfig(64, 32, 2, 4, 64, sliding_window=4, causal=False, softcap=-1.0,
    # qk_norm='typo') constructed, and only TinyTransformerLM(config=c) failed. The config now
    # checks everything the model's parts check.
    try:
        config = nl.ModelConfig(vocab_size=10, n_layers=2, max_seq_len=8, **fields)
    except (TypeError, ValueError) as error:
        assert str(error).startswith("ModelConfig: ")
        return
    lm = nl.TinyTransformerLM(config=config)
    assert torch.isfinite(lm(torch.randint(10, (1, 4)))).all()


def test_config_names_every_problem_in_one_error():
    with pytest.raises(ValueError) as info:
        nl.ModelConfig(64, 32, 2, 4, 64, sliding_window=4, causal=False, softcap=-1.0,
                       qk_norm="typo")
    assert str(info.value) == (
        "ModelConfig: 3 problems: (1) unknown qk_norm 'typo'; expected one of 'per_head', "
        "'projection' (2) softcap must be > 0, got -1.0 (3) sliding_window=4 is causal and needs "
        "causal=True, got causal=False")
    with pytest.raises(TypeError, match=r"2 problems: \(1\) n_layers must be an int, got float "
                                        r"2.0 \(2\) alpha is DeepNorm's"):     # a type: TypeError
        nl.ModelConfig(64, 32, 2.0, 4, 64, alpha=2.0)
    config = nl.ModelConfig(64, 32, 2, 4, 64)
    with pytest.raises(ValueError, match="RoPE needs an even head_dim, got d_model // n_heads = 9"):
        dataclasses.replace(config, d_model=36, rope=True)      # replace checks the new config


@pytest.mark.parametrize("ffn", nl.FFNS)
def test_differences_fill_in_the_defaults_the_model_uses(ffn):
    config = nl.ModelConfig(20, 24, 2, 4, 8, ffn=ffn)
    width = nl.TinyTransformerLM(config=config).blocks[0].ffn.w2.in_features   # make_ffn's d_ff
    assert config.differences(dataclasses.replace(config, d_ff=width, n_kv_heads=4)) == []
    assert config.differences(dataclasses.replace(config, d_ff=width + 1, n_kv_heads=2)) == [
        ("n_kv_heads", 4, 2), ("d_ff", width, width + 1)]


def test_configs_without_differences_give_the_same_logits():
    # Post-LN is DeepNorm's code with alpha 1; alpha is compared unless ignored (train_ensemble
    # ignores it: a buffer per member)
    post = nl.ModelConfig(20, 16, 2, 2, 8, placement="post")
    deepnorm = dataclasses.replace(post, placement="deepnorm")
    assert post.differences(deepnorm) == []
    assert post.differences(deepnorm, ignore=()) == [("alpha", 1.0, 4 ** 0.25)]  # (2 N)^(1/4)
    alpha_one = dataclasses.replace(deepnorm, alpha=1.0)
    assert post.differences(alpha_one, ignore=()) == []
    a, b = nl.TinyTransformerLM(config=post), nl.TinyTransformerLM(config=alpha_one)
    b.load_state_dict(a.state_dict())
    idx = torch.randint(20, (2, 8))
    with torch.no_grad():
        assert torch.equal(a(idx), b(idx))
    with pytest.raises(ValueError, match="ignore must be a tuple of field names, got 'alpha'"):
        post.differences(deepnorm, ignore="alpha")
    with pytest.raises(ValueError, match=r"got \('alfa',\)"):
        post.differences(deepnorm, ignore=("alfa",))
    with pytest.raises(TypeError, match="other must be a ModelConfig, got dict"):
        post.differences(dataclasses.asdict(post))


def _normlib_imports() -> dict[str, set[str]]:
    """normlib's top-level modules -> the normlib modules each imports, anywhere in its file
    (inside a function too)."""
    root = pathlib.Path(nl.__file__).parent
    modules = {p.stem for p in root.glob("*.py")} - {"__init__"}
    graph = {}
    for module in modules:
        imported = set()
        for node in ast.walk(ast.parse((root / f"{module}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                imported |= {node.module.split(".")[0]} if node.module else \
                    {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("normlib."):
                imported.add(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                imported |= {a.name.split(".")[1] for a in node.names
                             if a.name.startswith("normlib.")}
        graph[module] = imported & modules
    return graph


def test_normlibs_modules_import_each_other_without_a_cycle():
    # Code review 2: model.py imported .hf inside from_hf_config while hf.py imports .model. The
    # model and its config know nothing of HF or of training.
    graph = _normlib_imports()
    assert graph["config"].isdisjoint({"model", "hf", "train"})
    assert graph["model"].isdisjoint({"hf", "train"})
    done, path = set(), []

    def visit(module):
        assert module not in path, f"import cycle: {' -> '.join([*path, module])}"
        if module not in done:
            path.append(module)
            for other in sorted(graph[module]):
                visit(other)
            path.pop()
            done.add(module)
    for module in sorted(graph):
        visit(module)
