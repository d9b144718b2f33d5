"""Liu et al. with the prediction clipped inside the loss (ours, issue #13 part 3): the SGLD kernel against its
reference, the flat likelihood outside the range, the per-user bound B_i without a rejection loop, and the release's ε
(liu_fig7's clipped series is checked on its smoke run in test_fig7.py)."""

import numba
import numpy as np
import pytest

from dpmf_lib.privacy import posterior_sampling as ps
from dpmf_lib.errors import ParameterError
from dpmf_lib.mf import GaussianTable, Schedule, init_model, sample_sgld, tiered_layout
from dpmf_lib.mf.noise import stream_seed
from dpmf_lib.mf.reference import sgld_epoch_lazy_reference
from dpmf_lib.mf.sgld import _sgld_epoch_lazy
from tests.mf_toys import random_ratings

f = np.float32


def _round(clip, lik_scale=1.0, kernel=True, d=6):
    r = random_ratings(seed=1)
    lay = tiered_layout(r, block_users=7, tiers=(5, 10))
    gu, gv, _, _ = lay.noise_ahead_counters()
    m = init_model(r.n_users, r.n_items, d, seed=3, b0=3.0, scale=0.5)
    table = GaussianTable.create(997, seed=2)
    ext = table.extended(d + 2)
    N = r.n_ratings
    cu, cv = np.bincount(lay.users, minlength=r.n_users), np.bincount(lay.items, minlength=r.n_items)
    pwu = np.where(cu > 0, N / np.maximum(cu, 1), 0).astype(f)
    pwv = np.where(cv > 0, N / np.maximum(cv, 1), 0).astype(f)
    Lu, Lv = np.linspace(1, 2, d).astype(f), np.linspace(2, 3, d).astype(f)
    eta, zeta, lik, lamb = f(0.02 / N), f(0.5), f(lik_scale * N), f(1.0)
    base = stream_seed(11, 1)
    A = [m.U.copy(), m.V.copy(), m.bu.copy(), m.bi.copy()]
    if kernel:
        old = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            on = clip is not None
            lo, hi = clip if on else (0.0, 0.0)
            _sgld_epoch_lazy(lay.users, lay.items, lay.values, np.zeros(1, f), False, gu, gv, lay.seg, *A, f(3.0), eta,
                             zeta, lik, pwu, pwv, Lu, Lv, lamb, True, ext, table.size, base, 2, True, True, on, f(lo),
                             f(hi))
        finally:
            numba.set_num_threads(old)
    else:
        sgld_epoch_lazy_reference(lay, gu, gv, *A, 3.0, eta, zeta, lik, pwu, pwv, Lu, Lv, lamb, ext, table.size, base,
                                  clip=clip)
    return A


@pytest.mark.parametrize("d", [6, 16])  # the loop kernel and the whole-row kernel
def test_clipped_kernel_matches_reference_and_bites(d):
    clip = (2.6, 3.4)  # narrow: a fair share of the toy's predictions lie outside
    A, B = _round(clip, d=d), _round(clip, kernel=False, d=d)
    for a, b in zip(A, B):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
    assert not np.allclose(A[0], _round(None, d=d)[0])  # the clip changed the chain


def test_outside_the_range_only_the_prior_drives():
    """All predictions outside [lo, hi]: the clipped loss is flat there, so the round equals one without likelihood."""
    A, B = _round((50.0, 60.0)), _round(None, lik_scale=0.0)
    for a, b in zip(A, B):
        np.testing.assert_array_equal(a, b)


def test_clipped_user_loss_is_bounded_by_B_i_for_any_factors():
    """The property Theorem 1 needs, for arbitrary (U, V): Σ_j w_i (r_ij − clip(r̂_ij))² ≤ B_i for every user, while
    the unclipped loss of the same factors exceeds B (which is why the paper needs the range loop)."""
    r = random_ratings(seed=4)
    pre = ps.preprocess(r, tau=5, kappa=0.5, rho=1.0, seed=0)
    tr = pre.train
    lo, hi = pre.pred_range
    rng = np.random.default_rng(0)
    worst_unclipped = 0.0
    for _ in range(50):
        U, V = rng.normal(0, 2, (tr.n_users, 3)), rng.normal(0, 2, (tr.n_items, 3))
        pred = (U[tr.users] * V[tr.items]).sum(1) + 3.0
        w = pre.rating_weights.astype(np.float64)
        lc = np.bincount(tr.users, weights=w * (tr.values - np.clip(pred, lo, hi)) ** 2, minlength=tr.n_users)
        lu = np.bincount(tr.users, weights=w * (tr.values - pred) ** 2, minlength=tr.n_users)
        assert np.all(lc <= pre.B_i * (1 + 1e-9))
        worst_unclipped = max(worst_unclipped, float(lu.max()))
    assert worst_unclipped > pre.B


def test_clipped_loss_release_holds_epsilon_without_the_range_loop():
    r = random_ratings(n_users=40, n_items=20, n_ratings=300, seed=5)
    kw = dict(Lambda_u=0.5, Lambda_v=0.5, lam_bias=0.5, d=2, rounds=3, eta_n_max=1.0, resample_rounds=1,
              schedule=Schedule(n_threads=1), seed=0, max_resamples=2)
    pre = ps.preprocess(r, tau=5, kappa=1e-4, rho=1.0, seed=0)
    paper = ps.sample_private(pre, 0.01, **kw)  # a broad sample: the range rule binds and the loop gives up
    assert not paper.constraint_satisfied and paper.epsilon_effective is None
    ours = ps.sample_private(pre, 0.01, clip_loss=True, priors_public=True, **kw)  # Λ = 0.5: a number
    assert ours.loss_clipped and ours.n_resamples == 0 and ours.epsilon_effective == 0.01
    # the same release with Λ that may come from the ratings (the figures' Section 6.6 priors): no ε holds
    fitted = ps.sample_private(pre, 0.01, clip_loss=True, **kw)
    assert fitted.epsilon_effective is None and any("premise broken" in c for c in fitted.privacy_caveats)
    assert len(ours.violations) == 1  # still measured once, reported, not looped on
    assert any("ours" in c for c in ours.privacy_caveats)
    assert not paper.loss_clipped


@pytest.mark.parametrize("bad", [(1.0,), (3.0, 2.0), (float("nan"), 1.0), "x"])
def test_bad_clip_prediction_raises(bad):
    r = random_ratings(seed=2)
    with pytest.raises(ParameterError):
        sample_sgld(r, d=2, epochs=1, clip_prediction=bad, schedule=Schedule(n_threads=1))
