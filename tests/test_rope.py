"""RoPE: three derivations agree, scores depend on m - n only, norms are kept."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tolerances import DTYPES, close

import normlib as nl


def test_frequencies():
    theta = nl.rope_frequencies(8, base=10000.0, dtype=torch.float64)
    close(theta, torch.tensor([1.0, 10000 ** -0.25, 10000 ** -0.5, 10000 ** -0.75],
                              dtype=torch.float64))


def test_interleaved_rotation_by_hand():
    # One pair (D = 2) at position 3 with theta_0 = 1 is rotated by 3 radians.
    x = torch.tensor([[1.0, 0.0]] * 4, dtype=torch.float64)        # (T=4, D=2)
    y = nl.apply_rope(x)
    three = torch.tensor(3.0, dtype=torch.float64)
    close(y[3], torch.stack([three.cos(), three.sin()]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_complex_form_equals_interleaved(dtype):
    x = torch.randn(2, 3, 11, 16, dtype=torch.float64).to(dtype)   # (B, H, T, D)
    close(nl.apply_rope_complex(x), nl.apply_rope(x, layout="interleaved"))


@pytest.mark.parametrize("D", [2, 8, 64])
def test_layouts_agree_after_permutation(D):
    perm = nl.half_to_interleaved(D)
    x = torch.randn(3, 9, D, dtype=torch.float64)
    close(nl.apply_rope(x[..., perm], layout="interleaved"), nl.apply_rope(x, layout="half")[..., perm])
    assert torch.equal(torch.sort(perm).values, torch.arange(D))
    assert torch.equal(nl.half_to_interleaved(4), torch.tensor([0, 2, 1, 3]))


def test_scores_agree_after_permuting_weight_rows():
    D, C, T = 8, 12, 6
    Wq, Wk, x = torch.randn(D, C, dtype=torch.float64), torch.randn(D, C, dtype=torch.float64), \
        torch.randn(T, C, dtype=torch.float64)
    perm = nl.half_to_interleaved(D)
    s_half = nl.apply_rope(x @ Wq.T, layout="half") @ nl.apply_rope(x @ Wk.T, layout="half").T
    s_int = nl.apply_rope(x @ Wq[perm].T) @ nl.apply_rope(x @ Wk[perm].T).T
    close(s_int, s_half)
    wrong = nl.apply_rope(x @ Wq.T) @ nl.apply_rope(x @ Wk.T).T   # half weights, interleaved RoPE
    assert not torch.allclose(wrong, s_half, atol=1e-3)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_scores_depend_only_on_relative_position(layout):
    D, T = 16, 12
    q, k = torch.randn(D, dtype=torch.float64), torch.randn(D, dtype=torch.float64)
    Q = nl.apply_rope(q.expand(T, D), layout=layout)       # the same q at every position
    K = nl.apply_rope(k.expand(T, D), layout=layout)
    S = Q @ K.T                                             # S[m, n] = q_m . k_n
    for offset in range(-T + 1, T):
        diag = torch.diagonal(S, offset)
        close(diag, diag[:1].expand_as(diag))              # constant along each diagonal: Toeplitz


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 8), st.integers(1, 16), st.floats(10.0, 1e6), st.sampled_from(["interleaved", "half"]))
def test_rope_keeps_norms(half_d, T, base, layout):
    x = torch.randn(T, 2 * half_d, dtype=torch.float64)
    close(nl.apply_rope(x, base=base, layout=layout).norm(dim=-1), x.norm(dim=-1))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 500), st.integers(0, 500), st.integers(-20, 20))
def test_shifting_both_positions_keeps_the_score(m, n, shift):
    q, k = torch.randn(1, 8, dtype=torch.float64), torch.randn(1, 8, dtype=torch.float64)
    def score(a, b):
        return (nl.apply_rope(q, torch.tensor([a])) * nl.apply_rope(k, torch.tensor([b]))).sum()
    close(score(m + abs(shift), n + abs(shift)), score(m, n), rtol=1e-9, atol=1e-9)


def test_positions_argument():
    x = torch.randn(2, 5, 8)
    close(nl.apply_rope(x, torch.arange(5)), nl.apply_rope(x))
    close(nl.apply_rope(x, torch.arange(3, 8))[:, 0], nl.apply_rope(torch.randn(2, 8, 8).index_copy(
        1, torch.tensor([3]), x[:, :1]))[:, 3])


def test_decay_bound():
    b = nl.rope_decay_bound(128, 300)
    assert b.shape == (301,)
    close(b[0], torch.tensor(65 / 2, dtype=torch.float64))        # S_j = j at distance 0
    assert b[250:].mean() < 0.25 * b[0]                            # decays with distance
    assert nl.rope_decay_bound(128, 300, base=500000.0)[50:].mean() > b[50:].mean()  # slower


# ----------------------------------------------------------------- RoPE beyond the training length
# (HF's implementations of the same four methods are compared in test_hf_parity.py.)
f64 = torch.float64


def test_explicit_theta_equals_the_base():
    x = torch.randn(2, 7, 16, dtype=f64)
    for layout in nl.ROPE_LAYOUTS:
        theta = nl.rope_frequencies(16, 500000.0, dtype=f64)
        assert torch.equal(nl.apply_rope(x, layout=layout, theta=theta),
                           nl.apply_rope(x, layout=layout, base=500000.0))


def test_position_interpolation_is_dividing_the_positions():
    # theta_i / s at position m is theta_i at position m / s (Chen et al. 2023, Section 2.3, Eq. 4).
    x, m = torch.randn(3, 12, 32, dtype=f64), torch.arange(12) * 700
    theta = nl.linear_scaling_frequencies(32, 10000.0, 4.0, dtype=f64)
    close(nl.apply_rope(x, m, theta=theta), nl.apply_rope(x, m / 4.0))


def test_ntk_scaling_keeps_the_highest_and_divides_the_lowest_frequency_by_s():
    theta = nl.rope_frequencies(64, dtype=f64)
    ntk = nl.ntk_scaling_frequencies(64, 10000.0, 8.0, dtype=f64)
    close(ntk[0], theta[0])
    close(ntk[-1], theta[-1] / 8)
    ratio = theta / ntk                                   # s^(2i / (D - 2)): 1 ... s, increasing
    assert (ratio[1:] > ratio[:-1]).all()


@pytest.mark.parametrize("method", ["yarn", "llama3"])
def test_by_parts_methods_keep_short_wavelengths_and_interpolate_long_ones(method):
    D, L, s, base = 128, 8192, 8.0, 500000.0
    theta = nl.rope_frequencies(D, base, dtype=f64)
    if method == "yarn":
        scaled = nl.yarn_frequencies(D, base, s, original_max_position_embeddings=L, dtype=f64)
        keep, divide = L * theta / (2 * torch.pi) > 32, L * theta / (2 * torch.pi) < 1  # turns
    else:
        scaled = nl.llama3_frequencies(D, base, s, original_max_position_embeddings=L, dtype=f64)
        wavelength = 2 * torch.pi / theta
        keep, divide = wavelength < L / 4, wavelength > L
    assert keep.sum() >= 10 and divide.sum() >= 10        # both regimes exist at these settings
    assert torch.equal(scaled[keep], theta[keep])
    close(scaled[divide], theta[divide] / s)
    assert ((scaled <= theta) & (scaled >= theta / s * (1 - 1e-12))).all()     # a blend between
    assert (scaled[1:] < scaled[:-1]).all()                                    # still decreasing


def test_scaling_with_factor_one_changes_nothing():
    theta = nl.rope_frequencies(32, dtype=f64)
    for scaled in (nl.linear_scaling_frequencies(32, factor=1.0, dtype=f64),
                   nl.ntk_scaling_frequencies(32, factor=1.0, dtype=f64),
                   nl.yarn_frequencies(32, factor=1.0, original_max_position_embeddings=64,
                                       dtype=f64),
                   nl.llama3_frequencies(32, 10000.0, factor=1.0, original_max_position_embeddings=64,
                                         dtype=f64)):
        close(scaled, theta)
    assert nl.yarn_attention_factor(1.0) == 1.0
    close(torch.tensor(nl.yarn_attention_factor(16.0)), torch.tensor(1 + 0.1 * 2.772588722239781))


def test_rope_cos_sin_in_float32_is_the_exact_angle_rounded_once():
    # Integer positions times float32 frequencies: the float32 product is the exact product
    # rounded once (24 + 24 significant bits fit in float64's 53), as HF's float32 angles.
    theta = nl.rope_frequencies(64, 500_000.0)                                  # float32
    positions = torch.tensor([0, 1, 7, 8191, 131_071])
    cos, sin = nl.rope_cos_sin(theta, positions)
    exact = (positions.double()[:, None] * theta.double()[None, :]).float()
    assert cos.dtype == torch.float32 and torch.equal(cos, exact.cos())
    assert torch.equal(sin, exact.sin())


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_rotate_with_precomputed_cos_sin_is_apply_rope(layout):
    x = torch.randn(2, 3, 9, 16)
    positions = torch.arange(4, 13)
    cos, sin = nl.rope_cos_sin(nl.rope_frequencies(16), positions)
    assert torch.equal(nl.rotate(x, cos, sin, layout), nl.apply_rope(x, positions, layout=layout))
    with pytest.raises(ValueError, match=r"cos must have shape \(T, D/2\) = \(9, 8\)"):
        nl.rotate(x, cos[:4], sin, layout)
