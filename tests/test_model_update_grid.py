"""Lesson 05's cached alpha/beta ablation (normlib/data/model_update_grid.json): its schema, the
models it is measured on, and its shallowest depth measured again now (tools/model_update_grid.py;
`make model-update-grid` recomputes all of it)."""

import json

import torch

from normlib.model import TinyTransformerLM
from tools import model_update_grid as tg


def test_the_file_records_the_settings_it_was_made_with():
    raw = json.loads(tg.PATH.read_text())
    for key, value in tg.SETTINGS.items():
        assert raw[key] == value, f"{key}: the file has {raw[key]!r}, the tool {value!r}"
    assert "make model-update-grid" in raw["about"]
    S = tg.SETTINGS
    u = torch.tensor(raw["updates"])
    assert u.shape == (len(S["depths"]), len(S["beta_init"]), len(S["alpha_exponents"]), S["steps"])
    assert ((u > 0) & (u < 1)).all() and (u.diff(dim=-1) > 0).all()     # grows step by step


def test_beta_off_is_post_ln_and_beta_on_alpha_one_is_deepnets_init():
    tokens = torch.randint(64, (2, 16), generator=torch.Generator().manual_seed(0))
    torch.manual_seed(tg.SETTINGS["seed"])
    post = TinyTransformerLM(**tg.SETTINGS["model"], n_layers=6, placement="post")
    torch.manual_seed(tg.SETTINGS["seed"])
    deepnorm = TinyTransformerLM(**tg.SETTINGS["model"], n_layers=6, placement="deepnorm", alpha=1.0)
    with torch.no_grad():
        assert torch.equal(tg.build(6, 1.0, beta_init=False)(tokens), post(tokens))
        assert torch.equal(tg.build(6, 1.0, beta_init=True)(tokens), deepnorm(tokens))
        assert not torch.equal(post(tokens), deepnorm(tokens))
    alpha = 12 ** 0.25                                         # DeepNet's (2N)^(1/4), kept at run time
    assert all(abs(b.alpha.item() - alpha) < 1e-6 for b in tg.build(6, alpha, beta_init=False).blocks)


def test_the_shallowest_depth_measured_again_matches_the_file():
    raw = json.loads(tg.PATH.read_text())
    depth = min(tg.SETTINGS["depths"])
    stored = torch.tensor(raw["updates"][tg.SETTINGS["depths"].index(depth)])
    torch.testing.assert_close(tg.updates(depth), stored, rtol=2e-3, atol=1e-5)
