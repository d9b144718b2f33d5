"""Each clip bounds what its proof needs — checked by brute force on toys, against the ledger's own numbers.

A sensitivity argument says "one changed rating moves the released quantity by at most X". These tests change every
rating of a toy (to the far end of the scale, recomputing whatever the mechanism recomputes — the item means
included), measure how far the noise-free release moves, and compare with the X the ledger accounts
(:mod:`dpmf_lib.privacy.ledger`). A sensitivity off by a factor, a clip left out, or a coupling the bound ignores
fails here. The DPPS-PNBM drift is checked to be the gradient of the clipped loss whose bounded terms the
posterior-sampling argument needs."""

import numpy as np
import pytest

from dpmf_lib import nbm
from dpmf_lib.data.ratings import DataSource, Ratings
from dpmf_lib.nbm import accounting as acc
from dpmf_lib.nbm import reference as ref
from dpmf_lib.nbm.model import clipped_gradient
from dpmf_lib.nbm.similarity import item_means
from dpmf_lib.privacy import ledger as lg
from tests.nbm_toys import rows_of, signed_similarity, toy


def far_end(v, lo=1.0, hi=5.0):
    return lo if v >= 0.5 * (lo + hi) else hi


def moved(r: Ratings, k: int) -> Ratings:
    vals = r.values.copy()
    vals[k] = far_end(float(vals[k]), *r.rating_scale)
    return Ratings(r.users, r.items, vals, r.n_users, r.n_items, r.rating_scale, r.source)


# ------------------------------------------------------------------------------------------------ DPSGD-PNBM


@pytest.mark.parametrize("t", [1, 4])
def test_dpsgd_pnbm_one_rating_moves_the_gradient_by_at_most_the_ledgers_bound(t):
    """The ledger's L1 sensitivity of the released gradient at iteration t is L·N_k·ΔF^(t): every rating's
    contribution has ≤ N_k entries, each ≤ e_max(t) φ / C after the clips, and through the non-private item means one
    changed value reaches every rating. Brute force over every rating of a toy, r̄ recomputed on D′."""
    r = toy(seed=5, nu=14, ni=9, density=0.7)
    S = (signed_similarity(r.n_items, seed=6) * 0.2).astype(np.float32)  # small |s|: the C bound is active
    phi, C, Nk = 4.0, 2.0, 3
    e_max = acc.error_clamp(t, phi)

    def G(rr):
        d = nbm.prepare(rr, item_means(rr))
        return nbm.gradient(S, d, rr.users, rr.items, rr.values, Nk=Nk, C=C, e_max=e_max, f_max=phi).astype(float)

    G0 = G(r)
    worst = max(float(np.abs(G(moved(r, k)) - G0).sum()) for k in range(r.n_ratings))
    entry = lg.dpsgd_pnbm_entry(1.0, t, 1.0, r.n_ratings, Nk, phi, C)
    bound = r.n_ratings * Nk * acc.sensitivity(t, phi, C)
    assert entry.extra["l1_sensitivity_bound_t1"] == pytest.approx(r.n_ratings * Nk * acc.sensitivity(1, phi, C))
    assert worst <= bound * (1 + 1e-5)
    # the paper's ΔF bounds one entry of one rating's row, not what one rating moves
    assert worst > 1.5 * acc.sensitivity(t, phi, C)
    # every rating's own row has ≤ N_k entries within e_max φ / C: its L1 is ≤ N_k ΔF / 2
    d = nbm.prepare(r)
    for k in range(r.n_ratings):
        g = nbm.gradient(S, d, r.users[k:k + 1], r.items[k:k + 1], r.values[k:k + 1], Nk=Nk, C=C, e_max=e_max,
                         f_max=phi)
        assert np.count_nonzero(g) <= Nk and np.abs(g).sum() <= Nk * e_max * phi / C * (1 + 1e-5)


def test_dpsgd_pnbm_entry_clip_binds_where_the_neighbour_sum_exceeds_C():
    """With D = Σ|s_ij| > C the derivative is (c_uj − p sgn s_ij)/D and c − p sgn s reaches 2φ when c and p have
    opposite signs: the clip |c − p sgn s| ≤ φ is what keeps every entry of a rating's row within e_max φ / C (the
    paper's ΔF/2). On a toy where it binds, the clipped rows obey the bound and the unclipped ones break it."""
    phi = 4.0
    e_max = acc.error_clamp(1, phi)
    # item offsets near the ends of the scale (|c_uj| up to φ, and p of the other sign) and rows where D is a
    # little above C: |e (c − p sgn s)| / D reaches past e_max φ / C unless f is clipped
    r2 = toy(seed=23, nu=40, ni=10, density=0.9)
    d2 = nbm.prepare(r2, np.where(np.arange(r2.n_items) % 2 == 0, 1.1, 4.9).astype(np.float32))
    S2 = (np.random.default_rng(24).normal(0.0, 1.0, (r2.n_items, r2.n_items)) * 0.15).astype(np.float32)
    np.fill_diagonal(S2, 0.0)
    C2 = 0.5
    over = 0.0
    for k in range(r2.n_ratings):
        sl = slice(k, k + 1)
        g0 = nbm.gradient(S2, d2, r2.users[sl], r2.items[sl], r2.values[sl], Nk=3, C=C2, e_max=e_max)
        g = nbm.gradient(S2, d2, r2.users[sl], r2.items[sl], r2.values[sl], Nk=3, C=C2, e_max=e_max, f_max=phi)
        assert np.abs(g).max() <= e_max * phi / C2 * (1 + 1e-5)
        over = max(over, float(np.abs(g0).max()) / (e_max * phi / C2))
    assert over > 1.0  # here the unclipped row breaks ΔF/2 itself


def test_dpsgd_pnbm_clipped_one_rating_moves_the_clipped_gradient_by_at_most_2_clip():
    """Per-user L1 clipping (ours): given the (noisy, data-independent here) item means, one changed value moves only
    its user's clipped term: ≤ 2·clip in L1 — the sensitivity the ledger's Laplace scale 2·clip/ε_it uses."""
    r = toy(seed=7, nu=12, ni=10, density=0.8)
    S = signed_similarity(r.n_items, seed=8).astype(np.float32)
    rbar = np.full(r.n_items, 3.0, np.float32)
    clip, phi = 0.3, 4.0

    def G(rr):
        g, norms = clipped_gradient(S, nbm.prepare(rr, rbar), rr.users, rr.items, rr.values, Nk=4, C=1.0,
                                    clip_l1=clip, e_max=acc.error_clamp(1, phi), f_max=phi)
        return g.astype(float), norms

    G0, norms = G(r)
    assert (norms > clip).mean() > 0.5  # the clip binds for most users: the test is about it
    worst = max(float(np.abs(G(moved(r, k))[0] - G0).sum()) for k in range(r.n_ratings))
    assert worst <= 2 * clip * (1 + 1e-4)
    e = lg.dpsgd_pnbm_clipped_entry(1.0, 1, clip, 0.1, phi)
    assert e.extra["l1_sensitivity_bound_t1"] == pytest.approx(2 * clip)


# ------------------------------------------------------------------------------------------------ DPSGD-MF


def test_dpsgd_mf_one_rating_moves_the_errors_by_at_most_2phi_per_epoch():
    """DPSGD-MF's queries are the errors r − r̄_i − p_uᵀq_i: one changed value moves its own error by ≤ φ and, through
    the noiseless item mean, each of the item's n_i errors by ≤ φ/n_i — 2φ in L1 per epoch, the ledger's 2φ (not the
    φ the paper's noise is calibrated to)."""
    r = toy(seed=9, nu=20, ni=6, density=0.7)
    rng = np.random.default_rng(0)
    P, Q = rng.normal(0, 0.3, (r.n_users, 3)), rng.normal(0, 0.3, (r.n_items, 3))
    phi = 4.0

    def errors(rr):
        rb = item_means(rr).astype(float)
        return rr.values.astype(float) - rb[rr.items] - np.einsum("kd,kd->k", P[rr.users], Q[rr.items])

    e0 = errors(r)
    changes = [float(np.abs(errors(moved(r, k)) - e0).sum()) for k in range(r.n_ratings)]
    assert max(changes) <= 2 * phi * (1 + 1e-6)
    assert max(changes) > 1.2 * phi  # the item-mean coupling is real: φ alone would be exceeded
    e = lg.dpsgd_mf_entry(1.0, 1, phi)
    assert e.epsilon_idealised == pytest.approx(2.0)  # = (2φ)/(Kφ/ε) with K = 1, ε = 1


# ------------------------------------------------------------------------------------------------ DPPS-PNBM


def test_dpps_drift_is_the_gradient_of_the_clipped_loss():
    """The posterior the privacy argument is about has the clipped loss ½ Σ (clip(r̂, r_min, r_max) − r)² as its
    negative log-likelihood (each term ≤ φ²/2). Its gradient is e ∂r̂/∂S inside the range and 0 outside: central
    finite differences of that loss against the kernel's drift (``clip_pred``), on a toy where many predictions
    leave the range. A clipped error times the unclipped derivative (the gradient of no loss) fails."""
    # offsets r̄ spread over the scale (the gradient's form does not depend on them being the means): r̂ = r̄_i + p
    # leaves [1, 5] on either side, whatever the rating r_ui, so the clipped error is often not 0 out there
    r = toy(seed=11, nu=16, ni=10, density=0.7)
    d = nbm.prepare(r, np.random.default_rng(12).uniform(1.0, 5.0, r.n_items).astype(np.float32))
    S = signed_similarity(r.n_items, seed=12)
    rows, rbar = rows_of(d), d.rbar.astype(np.float64)
    batch = list(zip(r.users, r.items, r.values.astype(float)))
    away = 0  # predictions outside the range whose clipped error is not 0 (the rating is not the boundary hit)
    for u, i, v in batch:
        rh, *_ = ref.predict_one(S, i, rows[u][0], rows[u][1], rbar[i], 4, 0.0)
        away += not (1.0 <= rh <= 5.0) and min(max(rh, 1.0), 5.0) != v
    assert away > 0.1 * len(batch)
    G = nbm.gradient(S.astype(np.float32), d, r.users, r.items, r.values, Nk=4, C=0.0, clip_pred=True).astype(float)
    h = 1e-6
    fd = np.zeros_like(S)
    for a in range(r.n_items):
        for b in range(r.n_items):
            if a != b:
                Sp, Sm = S.copy(), S.copy()
                Sp[a, b] += h
                Sm[a, b] -= h
                fd[a, b] = (ref.loss(Sp, rows, rbar, batch, 4, 0.0, 1.0, 5.0)
                            - ref.loss(Sm, rows, rbar, batch, 4, 0.0, 1.0, 5.0)) / (2 * h)
    assert np.abs(fd).max() > 0.1
    np.testing.assert_allclose(G, fd, atol=2e-4 * max(1.0, np.abs(fd).max()))


def test_dpps_clipped_user_loss_is_within_B():
    """Each user's clipped loss Σ_{i∈R_u} (clip(r̂) − r)² ≤ φ² τ = B after trimming to τ, for any S."""
    r = toy(seed=13, nu=20, ni=12, density=0.9)
    tau = 5
    tr = nbm.trim_to_tau(r, tau, np.random.default_rng(0))
    d = nbm.prepare(tr, item_means(r))
    rows, rbar = rows_of(d), d.rbar.astype(np.float64)
    B = acc.loglik_bound(r.rating_scale, tau)
    for seed in range(5):
        S = signed_similarity(r.n_items, seed=seed) * 5.0
        loss = np.zeros(r.n_users)
        for u, i, v in zip(tr.users, tr.items, tr.values.astype(float)):
            loss[u] += 2 * ref.loss(S, rows, rbar, [(u, i, v)], 6, 0.0, 1.0, 5.0)
        assert loss.max() <= B * (1 + 1e-9)


# ------------------------------------------------------------------------------------------------ Hua S1


def test_hua_s1_one_rating_moves_the_stationarity_noise_by_at_most_2_delta():
    """Theorem 1: with U fixed, the minimiser of (6) on D and D′ is the same v_q when η′_q − η_q = 2 u_p (r − r′);
    ‖u_p‖ ≤ 1 (the projection) bounds it by 2Δ. Checked on U from the implementation's own MF."""
    from dpmf_lib.objpert import mf as hua

    r = toy(seed=15, nu=25, ni=8, density=0.7)
    prob = hua.Problem.from_ratings(r)
    cfg = hua.HuaConfig(d=3)
    _, st = hua.train_mf(prob, cfg, [15], 0, states=True)
    U = st[15][0].astype(np.float64)
    assert np.linalg.norm(U, axis=1).max() <= 1 + 1e-5
    worst = 0.0
    for k in range(r.n_ratings):
        dv = far_end(float(r.values[k])) - float(r.values[k])
        worst = max(worst, float(np.linalg.norm(2.0 * U[r.users[k]] * dv)))
    assert worst <= 2 * prob.delta * (1 + 1e-6)


# ------------------------------------------------------------------------------------------------ Liu


def test_liu_clipped_rating_term_is_within_its_weight_times_the_range():
    """A rating's clipped term w_i (r − clip(r̂))² ≤ w_i (Δ+κ)² for any factors: the per-rating cost the ledger's
    rating-level ε = ε·max_i w_i/τ rests on (with B = τ(Δ+κ)²)."""
    from dpmf_lib.privacy import posterior_sampling as ps

    r = toy(seed=17, nu=30, ni=15, density=0.4)
    pre = ps.preprocess(r, tau=4, kappa=0.5, rho=10.0, seed=0)
    tr, (lo, hi) = pre.train, pre.pred_range
    c = (pre.delta + pre.kappa) ** 2
    rng = np.random.default_rng(1)
    for _ in range(20):
        pred = rng.normal(3, 10, tr.n_ratings)
        term = pre.rating_weights * (tr.values - np.clip(pred, lo, hi)) ** 2
        assert np.all(term <= pre.w[tr.users] * c * (1 + 1e-6))
    assert pre.w.max() > 1  # ρ = 10: light users weigh more than one rating
    assert ps.rating_epsilon(pre, 1.0) == pytest.approx(pre.w.max() * c / pre.B)
