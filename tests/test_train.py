"""train_ensemble: M models trained as one batched model equal M independent Adam runs."""

import pytest
import torch

import normlib as nl

LANG = nl.MarkovLanguage(vocab_size=16, order=1, branching=3, seed=0)
CFG = dict(vocab_size=16, d_model=16, n_layers=2, n_heads=2, max_seq_len=8)
STEPS = 6


def model(seed, **options):
    torch.manual_seed(seed)
    return nl.TinyTransformerLM(**CFG, **options)


def reference_run(m, seed, schedule, lr=3e-3):
    """The textbook loop: one torch.optim.Adam and LambdaLR per model."""
    batches = LANG.sample(STEPS * 4, 9, torch.Generator().manual_seed(seed)).view(STEPS, 4, 9)
    opt = torch.optim.Adam(m.parameters(), lr=lr, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule or (lambda step: 1.0))
    losses = []
    for tokens in batches:                                   # (4, 9) each: all drawn at the start
        loss = nl.lm_loss(m, tokens)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    return torch.tensor(losses)


@pytest.mark.filterwarnings("error")          # and nothing to warn about
@pytest.mark.parametrize("placement,fused_norm", [("post", False), ("pre", True)])
def test_ensemble_equals_separate_adam_runs(placement, fused_norm):
    schedules = [None, nl.cosine_with_warmup(3, STEPS), nl.linear_warmup(2)]
    seeds = [0, 1, 2]
    batched = [model(s, placement=placement, fused_norm=fused_norm) for s in seeds]
    losses = nl.train_ensemble(batched, LANG, steps=STEPS, lr=3e-3, schedules=schedules,
                               seeds=seeds, batch_size=4, seq_len=8)
    assert losses.shape == (3, STEPS)
    for i, (s, schedule) in enumerate(zip(seeds, schedules, strict=True)):
        alone = model(s, placement=placement, fused_norm=fused_norm)
        expected = reference_run(alone, s, schedule)
        torch.testing.assert_close(losses[i], expected, rtol=1e-5, atol=1e-5)
        for (name, p), q in zip(batched[i].named_parameters(), alone.parameters(), strict=True):
            torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=name)


def test_train_lm_is_the_one_member_ensemble():
    a, b = model(0), model(0)
    losses = nl.train_lm(a, LANG, steps=STEPS, lr=3e-3, batch_size=4, seq_len=8, seed=5)
    torch.testing.assert_close(torch.tensor(losses), reference_run(b, 5, None),
                               rtol=1e-5, atol=1e-5)


def test_a_diverging_member_leaves_the_others_alone():
    blow_up = lambda step: float("nan") if step == 2 else 1.0    # noqa: E731
    models = [model(0), model(1)]
    losses = nl.train_ensemble(models, LANG, steps=STEPS, lr=3e-3, schedules=[None, blow_up],
                               seeds=[0, 1], batch_size=4, seq_len=8)
    assert torch.isfinite(losses[0]).all()
    assert torch.isfinite(losses[1, :3]).all() and torch.isnan(losses[1, 3:]).all()
    torch.testing.assert_close(losses[0], reference_run(model(0), 0, None), rtol=1e-5, atol=1e-5)


def test_stop_after_trains_the_start_of_the_whole_run():
    # the same batches and schedule as the whole run: its first steps exactly (the batches of a run
    # are drawn together, so a run of 2 steps would see others)
    whole = nl.train_ensemble([model(0), model(1)], LANG, steps=STEPS, lr=3e-3, batch_size=4,
                              seq_len=8, schedules=[nl.cosine_with_warmup(0, STEPS)] * 2)
    start = nl.train_ensemble([model(0), model(1)], LANG, steps=STEPS, lr=3e-3, batch_size=4,
                              seq_len=8, schedules=[nl.cosine_with_warmup(0, STEPS)] * 2,
                              stop_after=2)
    assert start.shape == (2, 2) and torch.equal(start, whole[:, :2])
    short = nl.train_ensemble([model(0), model(1)], LANG, steps=2, lr=3e-3, batch_size=4, seq_len=8,
                              schedules=[nl.cosine_with_warmup(0, STEPS)] * 2)
    assert not torch.isclose(short[:, 0], whole[:, 0]).any()       # other batches from the start
    with pytest.raises(ValueError, match=r"stop_after must be at most steps \(6\), got 7"):
        nl.train_ensemble([model(0)], LANG, steps=STEPS, lr=3e-3, stop_after=7)
    with pytest.raises(ValueError, match="stop_after must be >= 1, got 0"):
        nl.train_ensemble([model(0)], LANG, steps=STEPS, lr=3e-3, stop_after=0)


def test_on_step_sees_the_current_weights():
    m = model(0)
    start = m.lm_head.weight.detach().clone()
    moved = []
    nl.train_lm(m, LANG, steps=3, lr=3e-3, batch_size=4, seq_len=8,
                on_step=lambda step, mod: moved.append((mod.lm_head.weight - start).norm().item()))
    assert len(moved) == 3 and 0 < moved[0] < moved[1] < moved[2]


def test_ensemble_rejects_models_of_different_shapes():
    with pytest.raises(ValueError, match=r"models\[1\]\.config\.d_model = 8, models\[0\]'s = 16"):
        nl.train_ensemble([model(0), nl.TinyTransformerLM(**{**CFG, "d_model": 8})],
                          LANG, steps=1, lr=1e-3)
    with pytest.raises(ValueError, match=r"models\[1\]\.\(root\) is Linear\(in_features=3, "
                                         r"out_features=5"):             # no config to compare
        nl.train_ensemble([torch.nn.Linear(3, 4), torch.nn.Linear(3, 5)], LANG, steps=1, lr=1e-3)
    with pytest.raises(ValueError, match=r"names, shapes and dtypes\); models\[1\] differs"):
        nl.train_ensemble([torch.nn.Linear(3, 4), torch.nn.Linear(3, 4).double()], LANG, steps=1,
                          lr=1e-3)
    with pytest.raises(ValueError, match="schedules must have one entry per model"):
        nl.train_ensemble([model(0)], LANG, steps=1, lr=1e-3, schedules=[None, None])
    with pytest.raises(TypeError, match="models must be a non-empty sequence"):
        nl.train_ensemble([], LANG, steps=1, lr=1e-3)


@pytest.mark.parametrize("options,field", [(dict(ffn="gelu"), "ffn"), (dict(causal=False), "causal"),
                                           (dict(norm_eps=1e-6), "norm_eps"),
                                           (dict(placement="sandwich"), "placement")])
def test_ensemble_refuses_members_that_compute_differently(options, field):
    # Review finding 1: every member runs models[0]'s code, and only shapes were compared, so a
    # GELU member trained as a ReLU model (its losses equal a ReLU model's) and a causal=False
    # member trained causal. Now the configs are compared and the message names the field.
    first, other = model(0), model(1, **options)
    with pytest.raises(ValueError, match=rf"models\[1\]\.config\.{field} = "
                                         rf"{getattr(other.config, field)!r}, models\[0\]'s = "
                                         rf"{getattr(first.config, field)!r}"):
        nl.train_ensemble([first, other], LANG, steps=1, lr=1e-3, batch_size=4, seq_len=8)


def test_ensemble_refuses_a_member_whose_block_class_was_swapped():
    # Lesson 05 swaps a block's class for a wrong DeepNorm; its config still says "deepnorm".
    class AlphaOnBranch(nl.TransformerBlock):
        def forward(self, x):
            x = self.norm1(x + self.alpha * self.attn(x))
            return self.norm2(x + self.alpha * self.ffn(x))

    right, wrong = model(0, placement="deepnorm"), model(1, placement="deepnorm")
    for blk in wrong.blocks:
        blk.__class__ = AlphaOnBranch
    with pytest.raises(ValueError, match=r"models\[1\]\.blocks\.0 is .*AlphaOnBranch"):
        nl.train_ensemble([right, wrong], LANG, steps=1, lr=1e-3, batch_size=4, seq_len=8)


def test_post_ln_and_deepnorm_members_train_as_they_would_alone():
    # The per-member fields: alpha (a buffer), and Post-LN is DeepNorm's code with alpha = 1.
    members = [model(0, placement="post"), model(1, placement="deepnorm")]
    alone = [model(0, placement="post"), model(1, placement="deepnorm")]
    assert members[1].config.differences(members[0].config) == []
    losses = nl.train_ensemble(members, LANG, steps=STEPS, lr=3e-3, batch_size=4, seq_len=8)
    for i, m in enumerate(alone):
        expected = nl.train_lm(m, LANG, steps=STEPS, lr=3e-3, batch_size=4, seq_len=8, seed=i)
        torch.testing.assert_close(losses[i], torch.tensor(expected))


def test_ensemble_trains_on_the_device(device):
    # Issue 20: the batched trainer runs where the models are (a GPU when one is present).
    models = [model(s, rope=True, n_kv_heads=1, norm="rmsnorm", ffn="swiglu").to(device)
              for s in (0, 1)]
    losses = nl.train_ensemble(models, LANG, steps=3, lr=3e-3, batch_size=4, seq_len=8)
    assert losses.shape == (2, 3) and torch.isfinite(losses).all()
    assert {p.device.type for m in models for p in m.parameters()} == {device}
