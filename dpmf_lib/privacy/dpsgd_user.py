"""DP-SGD for matrix factorisation with per-user clipping (the standard user-level baseline of the private-ALS line
of work): joint DP, item factors V released, user factors local (as :mod:`dpmf_lib.privacy.private_als`).

Each of ``steps`` steps:

1. users are sampled independently with probability q (Poisson sampling, as implemented: ``rng.random(n) < q``);
2. every sampled user solves their ridge regression against the current V, locally (the same solve as private ALS,
   u_i = [ũ_i, a] with the fixed offset coordinate a when ``bias_coord`` is set), and computes the gradient of their
   squared error Σ_j (r_ij − c − u_iᵀv_j)² with respect to the rows v_j of their items, a matrix G_i;
3. G_i is clipped to Frobenius norm ≤ C (:func:`clipped_user_gradients`, numba; reference
   :func:`clipped_user_gradients_reference`); the server sums the clipped G_i and adds N(0, σ²C²) to every entry of
   the M × D sum;
4. V ← V − η (sum / (q n) + λ V) — divided by the *expected* batch size q n (public), never by the realised one.

Accounting over the steps actually taken (:func:`accounting`): each step is a Poisson-subsampled Gaussian of noise
multiplier σ. Replace-one-user (the frontier's user level, the relation of private ALS and Liu): the PLD
accountant's REPLACE_ONE relation with multiplier σ — it places the two clipped contributions at ±C, i.e. 2C apart
(at q = 1 the Gaussian mechanism at L2 sensitivity 2C) — the provable ε, in the ledger's ``pld_epsilon`` too.
Add/remove-one-user (a smaller ε, not the plotted one): dp-accounting's PLD and RDP accountants, in the entry's
``extra`` (its RDP accountant refuses REPLACE_ONE for Poisson sampling, so ``rdp_epsilon`` stays empty). σ is
calibrated on the replace-one PLD ε (:func:`calibrate`). Both bounds need at most one rating per (user, item):
``fit`` refuses duplicate pairs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from numba import njit

from .. import validate
from ..errors import ParameterError
from .common import seeded
from .private_als import user_factors

NAME = "DP-SGD-MF, per-user clipping"
UNIT = "user (replace one user's ratings)"


# ----------------------------------------------------------------------------------------------- kernels


@njit(cache=True)
def clipped_user_gradients(uptr, uitems, uvals, sampled, U, V, C, G, norms):
    """G += Σ_{i ∈ sampled} min(1, C/‖G_i‖) G_i with G_i[j] = −2 (r_ij − u_iᵀv_j) u_i for the items j of user i
    (``uitems[uptr[i]:uptr[i+1]]``, centred ratings ``uvals``); norms[k] = ‖G_i‖_F of the k-th sampled user before
    the clip. float64; G accumulated in place."""
    D = V.shape[1]
    for k in range(sampled.shape[0]):
        i = sampled[k]
        s2 = 0.0
        u2 = 0.0
        for p in range(D):
            u2 += U[i, p] * U[i, p]
        for e in range(uptr[i], uptr[i + 1]):
            j = uitems[e]
            pred = 0.0
            for p in range(D):
                pred += U[i, p] * V[j, p]
            err = uvals[e] - pred
            s2 += 4.0 * err * err * u2
        nrm = math.sqrt(s2)
        norms[k] = nrm
        scale = 1.0 if nrm <= C else C / nrm
        for e in range(uptr[i], uptr[i + 1]):
            j = uitems[e]
            pred = 0.0
            for p in range(D):
                pred += U[i, p] * V[j, p]
            g = -2.0 * (uvals[e] - pred) * scale
            for p in range(D):
                G[j, p] += g * U[i, p]


def clipped_user_gradients_reference(users, items, vals, sampled, U, V, C: float):
    """Plain numpy: (G, norms) as :func:`clipped_user_gradients` (one user at a time, dense G_i)."""
    G = np.zeros(V.shape)
    norms = np.zeros(len(sampled))
    for k, i in enumerate(sampled):
        m = users == i
        Gi = np.zeros(V.shape)
        err = vals[m] - V[items[m]] @ U[i]
        np.add.at(Gi, items[m], -2.0 * err[:, None] * U[i][None, :])
        norms[k] = np.linalg.norm(Gi)
        G += Gi * min(1.0, C / norms[k]) if norms[k] > 0 else Gi
    return G, norms


def by_user(users, items, vals, n_users: int):
    """(uptr, uitems, uvals): the ratings grouped by user (CSR)."""
    order = np.argsort(users, kind="stable")
    uptr = np.zeros(n_users + 1, np.int64)
    np.cumsum(np.bincount(users, minlength=n_users), out=uptr[1:])
    return uptr, np.ascontiguousarray(items[order], np.int64), np.ascontiguousarray(vals[order], np.float64)


def poisson_sample(n: int, q: float, rng) -> np.ndarray:
    """Users kept independently with probability q (the sampling the accounting assumes)."""
    return np.flatnonzero(rng.random(n) < q).astype(np.int64)


# ----------------------------------------------------------------------------------------------- accounting


def _event(q: float, sigma: float, steps: int):
    from dp_accounting import dp_event

    return dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(float(q), dp_event.GaussianDpEvent(
        float(sigma))), int(steps))


def pld_epsilon(q: float, sigma: float, steps: int, delta: float, relation: str = "replace") -> float:
    """ε at δ by dp-accounting's PLD accountant, noise multiplier σ (noise std σC for clip C): ``replace``
    (REPLACE_ONE: contributions at ±C, 2C apart) or ``add_remove`` (one contribution of norm ≤ C)."""
    from dp_accounting import NeighboringRelation as NR
    from dp_accounting.pld import pld_privacy_accountant as pa

    rel = {"replace": NR.REPLACE_ONE, "add_remove": NR.ADD_OR_REMOVE_ONE}.get(relation)
    if rel is None:
        raise ParameterError(f"relation must be 'replace' or 'add_remove', got {relation!r}")
    acc = pa.PLDAccountant(rel, value_discretization_interval=1e-3)
    acc.compose(_event(q, sigma, steps))
    return float(acc.get_epsilon(float(delta)))


def rdp_epsilon(q: float, sigma: float, steps: int, delta: float) -> float:
    """ε at δ by dp-accounting's RDP accountant, add/remove-one relation."""
    from dp_accounting import rdp

    # integer and large orders: dp-accounting's fractional-order series for the subsampled Gaussian fails to converge
    # up to α ≈ 1.5 at moderate σ (it then drops the order with a warning); the optimum lies above at δ = 1e-5
    acc = rdp.RdpAccountant(orders=[1.75] + list(range(2, 64)) + [96, 128, 256, 512])
    acc.compose(_event(q, sigma, steps))
    return float(acc.get_epsilon(float(delta)))


@lru_cache(maxsize=256)
def calibrate(epsilon: float, delta: float, q: float, steps: int) -> float:
    """The smallest σ (to 0.5 % relative) with the replace-one PLD ε ≤ ``epsilon`` at ``delta``."""
    lo, hi = 0.05, 1.0
    while pld_epsilon(q, hi, steps, delta) > epsilon:
        lo, hi = hi, hi * 2.0
        if hi > 1e5:
            raise ParameterError(f"no σ reaches ε = {epsilon} at δ = {delta} ({steps} steps, q = {q})")
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if pld_epsilon(q, mid, steps, delta) > epsilon else (lo, mid)
        if hi / lo < 1.005:
            break
    return hi


def accounting(q: float, sigma: float, steps: int, delta: float) -> dict:
    """The replace-one and add/remove-one ε of ``steps`` Poisson-subsampled Gaussians; memoised (a grid's
    configurations share q, σ, the steps and δ per target ε)."""
    return dict(_accounting(float(q), float(sigma), int(steps), float(delta)))


@lru_cache(maxsize=1024)
def _accounting(q: float, sigma: float, steps: int, delta: float) -> tuple:
    return (("pld_epsilon_replace", pld_epsilon(q, sigma, steps, delta, "replace")),
            ("pld_epsilon_add_remove", pld_epsilon(q, sigma, steps, delta, "add_remove")),
            ("rdp_epsilon_add_remove", rdp_epsilon(q, sigma, steps, delta)))


def entry(epsilon: float, delta: float, cfg: "DPSGDUserConfig", sigma: float, steps: int, n_users: int):
    from .ledger import FLOAT_GAUSSIAN, LedgerEntry

    a = accounting(cfg.q, sigma, steps, delta)
    return LedgerEntry(NAME, "ours", UNIT, float(epsilon), float(delta), a["pld_epsilon_replace"], float(delta),
                       conditions=(f"joint DP: u_i computed by each user from the released V and their own ratings, "
                                   f"never released; Poisson sampling q = {cfg.q:g} as implemented; per-user "
                                   f"gradient clipped to C = {cfg.C:g}; {steps} steps; the number of users ({n_users}) "
                                   "and of items public; the server sums the clipped gradients"),
                       noise_sampler=FLOAT_GAUSSIAN,
                       pld_epsilon=a["pld_epsilon_replace"], rdp_epsilon=float("nan"),
                       accounting_note=(f"provable = pld_epsilon: PLD (dp-accounting), replace-one, {steps} "
                                        f"Poisson-subsampled Gaussians (q = {cfg.q:g}, multiplier σ = {sigma:.4g}); "
                                        "no RDP replace-one accountant for Poisson sampling (rdp_epsilon empty); "
                                        "the add/remove-one ε (PLD, RDP) in extra"),
                       extra={"noise_multiplier": sigma, "steps": steps, "sampling_q": cfg.q,
                              "pld_epsilon_add_remove": a["pld_epsilon_add_remove"],
                              "rdp_epsilon_add_remove": a["rdp_epsilon_add_remove"]})


# ----------------------------------------------------------------------------------------------- the mechanism


@dataclass(frozen=True)
class DPSGDUserConfig:
    d: int = 4
    steps: int = 50
    q: float = 0.2
    C: float = 1.0
    eta: float = 0.5
    lam_v: float = 0.01  # weight decay on V (public)
    lam_u: float = 1.0  # users' local ridge
    bias_coord: float | None = 0.9
    init_std: float = 0.1

    def __post_init__(self):
        if int(self.d) < 1 or int(self.steps) < 1:
            raise ParameterError(f"d and steps must be ≥ 1, got {self}")
        if not (0.0 < self.q <= 1.0) or self.C <= 0 or self.eta <= 0 or self.lam_u <= 0 or self.lam_v < 0:
            raise ParameterError(f"need 0 < q ≤ 1, C > 0, eta > 0, lam_u > 0, lam_v ≥ 0; got {self}")
        if self.bias_coord is not None and not (0.0 < self.bias_coord < 1.0):
            raise ParameterError(f"bias_coord must be None or in (0, 1), got {self.bias_coord}")


@dataclass
class DPSGDUserResult:
    V: np.ndarray
    U: np.ndarray
    centre: float
    sigma: float | None
    steps: int
    batch_sizes: list
    seed_used: int | None
    seed_was_fixed: bool
    history: list = field(default_factory=list)

    def predict(self, users, items) -> np.ndarray:
        return self.centre + np.einsum("nd,nd->n", self.U[np.asarray(users)], self.V[np.asarray(items)])


def noisy_step_gradient(csr, sampled, U, V, C: float, sigma: float | None, rng):
    """(noisy sum, clean clipped sum, norms before the clip) of one step (module docstring, step 3)."""
    uptr, uitems, uvals = csr
    G = np.zeros(V.shape)
    norms = np.zeros(len(sampled))
    clipped_user_gradients(uptr, uitems, uvals, np.ascontiguousarray(sampled, np.int64),
                           np.ascontiguousarray(U, np.float64), np.ascontiguousarray(V, np.float64), float(C), G, norms)
    noisy = G if sigma is None else G + rng.standard_normal(G.shape) * (sigma * C)
    return noisy, G, norms


def fit(train, epsilon: float | None, delta: float, cfg: DPSGDUserConfig, seed=None, *, test=None):
    """DP-SGD-MF at (ε, δ) user level (replace one user); ``epsilon=None``: no noise (sampling, clipping kept)."""
    validate.unique_pairs(train.users, train.items, train.n_items, "train", what="DP-SGD-MF")
    rng, seed_used, fixed = seeded(seed)
    lo, hi = train.rating_scale
    c, gamma = 0.5 * (lo + hi), 0.5 * (hi - lo)
    n, M = train.n_users, train.n_items
    D = int(cfg.d) + (cfg.bias_coord is not None)
    centred = np.clip(train.values.astype(np.float64) - c, -gamma, gamma)
    csr = by_user(train.users, train.items, centred, n)
    steps = int(cfg.steps)
    sigma = None if epsilon is None else calibrate(float(epsilon), float(delta), float(cfg.q), steps)
    V = rng.standard_normal((M, D)) * cfg.init_std
    res = DPSGDUserResult(V, None, c, sigma, steps, [], seed_used, fixed)
    denom = cfg.q * n
    for t in range(steps):
        sampled = poisson_sample(n, cfg.q, rng)
        res.batch_sizes.append(len(sampled))
        U = user_factors(train.users, train.items, centred, n, V, cfg.lam_u, cfg.bias_coord)
        noisy, _, _ = noisy_step_gradient(csr, sampled, U, V, cfg.C, sigma, rng)
        V = V - cfg.eta * (noisy / denom + cfg.lam_v * V)
        if test is not None and (t + 1) % max(1, steps // 5) == 0:
            res.V, res.U = V, user_factors(train.users, train.items, centred, n, V, cfg.lam_u, cfg.bias_coord)
            res.history.append((t + 1, float(np.sqrt(np.mean((np.clip(res.predict(test.users, test.items), lo, hi)
                                                              - test.values) ** 2)))))
    res.V = V
    res.U = user_factors(train.users, train.items, centred, n, V, cfg.lam_u, cfg.bias_coord)
    return res


class DPSGDUserMF:
    """Frontier adapter (:mod:`dpmf_lib.privacy.mechanism`): one :class:`DPSGDUserConfig`."""

    key = "dpsgd-user-mf"
    label = "DP-SGD-MF, per-user clipping"

    def __init__(self, **cfg):
        self.cfg = DPSGDUserConfig(**cfg)

    def fit(self, train, epsilon, delta, seed):
        from .mechanism import Release, privacy_record

        r = fit(train, epsilon, delta, self.cfg, seed)
        n_users = int(np.count_nonzero(train.user_counts()))
        e = None if epsilon is None else entry(epsilon, delta, self.cfg, r.sigma, r.steps, n_users)
        return Release(r.predict, e, privacy_record(e, r.seed_used, r.seed_was_fixed), published=r.V,
                       extra={"noise_multiplier": r.sigma, "mean_batch": float(np.mean(r.batch_sizes))})
