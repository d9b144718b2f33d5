"""Private alternating least squares (Chien, Jain, Krichene, Rendle, Song, Thakurta, Zhang, ICML 2021).

Release model: joint ("billboard") user-level DP, as Liu's Algorithm 1: the server releases item factors V; every
user computes their own factor u_i from V and their own ratings, locally, and it is never released. Each of the
``alternations`` rounds:

1. every user solves their ridge regression against the current V (:func:`user_factors`) and clips u_i to norm ≤ 1
   (with ``item_bias``: u_i = [ũ_i, a], ‖ũ_i‖ ≤ √(1 − a²), the fixed coordinate a makes V's last column an item
   offset);
2. each user contributes, for at most ``k`` of their ratings (a uniform sample drawn once per user: the per-user
   row-norm bound of the paper's uniform sampling), u_i u_iᵀ to item j's Gram matrix A_j and (r_ij − c) u_i to its
   right-hand side b_j — c the public midpoint of the rating scale, |r − c| ≤ Γ = (r_max − r_min)/2
   (:func:`item_statistics`, numba; reference :func:`item_statistics_reference`);
3. the server adds symmetric Gaussian noise N(0, σ_A²) to every upper-triangular entry of every A_j and N(0, σ_b²)
   to every b_j (:func:`noisy_item_statistics`), projects each A_j on the PSD cone and releases
   v_j = (A_j + λ I)⁻¹ b_j (post-processing).

Sensitivity, replace-one-user relation (the frontier's user level; one user's ratings — values, which items, how
many — replaced by anything): the user's stacked Gram contributions X, X′ (≤ k blocks u uᵀ, ‖u‖ ≤ 1) satisfy
‖X − X′‖_F² ≤ Σ_j ‖u uᵀ − u′u′ᵀ‖_F² ≤ 2k (⟨u uᵀ, u′u′ᵀ⟩ = (uᵀu′)² ≥ 0) over the upper triangle as well, so
Δ_A = √(2k); the right-hand sides ‖y − y′‖ ≤ 2Γ√k = Δ_b. (Add/remove-one-user: √k and Γ√k.) With noise
multipliers z_A = σ_A/Δ_A, z_b = σ_b/Δ_b one round is a Gaussian mechanism of multiplier z with
1/z² = 1/z_A² + 1/z_b² (``gram_share`` of 1/z² on A), T rounds compose adaptively (the round's U depends on the
released V only): ρ-zCDP with ρ = T/(2z²).

Accounting (:func:`accounting`): ε at δ from dp-accounting's RDP accountant (the calibration: the smallest z whose
RDP ε ≤ the target), PLD as the cross-check, the exact Gaussian curve of T composed Gaussians (one Gaussian of
multiplier z/√T; Balle & Wang 2018) and the paper's closed form via zCDP, ε = ρ + 2√(ρ ln(1/δ)) (Bun & Steinke 2016,
Proposition 1.3), which is an upper bound of the others.

The bounds count one rating per (user, item) (k ratings of one item would give ‖k u uᵀ‖ = k > √(2k)): ``fit``
refuses duplicate pairs.
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

NAME = "Private ALS (Chien et al. 2021)"
UNIT = "user (replace one user's ratings)"


# ----------------------------------------------------------------------------------------------- kernels


@njit(cache=True)
def item_statistics(rows, cols, vals, F, A, b):
    """A[rows[e]] += F[cols[e]] F[cols[e]]ᵀ and b[rows[e]] += vals[e] F[cols[e]] for every entry e (float64; A, b
    zeroed by the caller). With rows = items, cols = users, F = U: the per-item Gram matrices and right-hand sides."""
    D = F.shape[1]
    for e in range(rows.shape[0]):
        j = rows[e]
        i = cols[e]
        r = vals[e]
        for p in range(D):
            fp = F[i, p]
            b[j, p] += r * fp
            for q in range(D):
                A[j, p, q] += fp * F[i, q]


def item_statistics_reference(rows, cols, vals, F, n_rows: int):
    """Plain numpy :func:`item_statistics`: (A, b) of shapes (n_rows, D, D), (n_rows, D)."""
    F = np.asarray(F, np.float64)
    D = F.shape[1]
    A = np.zeros((n_rows, D, D))
    b = np.zeros((n_rows, D))
    Fc = F[cols]
    np.add.at(A, rows, np.einsum("np,nq->npq", Fc, Fc))
    np.add.at(b, rows, np.asarray(vals, np.float64)[:, None] * Fc)
    return A, b


def statistics(rows, cols, vals, F, n_rows: int):
    """(A, b) by the numba kernel (contiguous int64/float64 copies of the inputs)."""
    F = np.ascontiguousarray(F, np.float64)
    A = np.zeros((n_rows, F.shape[1], F.shape[1]))
    b = np.zeros((n_rows, F.shape[1]))
    item_statistics(np.ascontiguousarray(rows, np.int64), np.ascontiguousarray(cols, np.int64),
                    np.ascontiguousarray(vals, np.float64), F, A, b)
    return A, b


# ----------------------------------------------------------------------------------------------- pieces


def sample_contributions(users, n_users: int, k: int, rng) -> np.ndarray:
    """Indices of at most ``k`` ratings per user, uniformly at random without replacement (data-independent)."""
    users = np.asarray(users)
    order = np.lexsort((rng.random(users.shape[0]), users))
    starts = np.searchsorted(users[order], np.arange(n_users))
    rank = np.arange(users.shape[0]) - starts[users[order]]
    return np.sort(order[rank < int(k)])


def sensitivities(k: int, gamma: float, relation: str = "replace") -> tuple[float, float]:
    """(Δ_A, Δ_b): L2 sensitivity of the stacked upper-triangular Gram entries and of the stacked right-hand sides
    for one user with ≤ k contributions, ‖u‖ ≤ 1, |r − c| ≤ γ (module docstring)."""
    if relation == "replace":
        return math.sqrt(2.0 * k), 2.0 * gamma * math.sqrt(k)
    if relation == "add_remove":
        return math.sqrt(float(k)), gamma * math.sqrt(k)
    raise ParameterError(f"relation must be 'replace' or 'add_remove', got {relation!r}")


def symmetric_noise(n: int, D: int, sigma: float, rng) -> np.ndarray:
    """n symmetric D×D matrices whose upper-triangular entries (diagonal included) are i.i.d. N(0, σ²)."""
    Z = rng.standard_normal((n, D, D)) * sigma
    up = np.triu(Z)
    return up + np.transpose(np.triu(Z, 1), (0, 2, 1))


def noisy_item_statistics(A, b, sigma_A: float, sigma_b: float, rng):
    """The released statistics: A + symmetric Gaussian noise (σ_A), b + N(0, σ_b²)."""
    return A + symmetric_noise(A.shape[0], A.shape[1], sigma_A, rng), b + rng.standard_normal(b.shape) * sigma_b


def solve_items(A, b, lam: float) -> np.ndarray:
    """v_j = (P(A_j) + λ I)⁻¹ b_j with P the projection on the PSD cone (eigenvalues clipped at 0)."""
    w, Q = np.linalg.eigh(A)
    Ap = np.einsum("nij,nj,nkj->nik", Q, np.maximum(w, 0.0), Q)
    D = A.shape[1]
    return np.linalg.solve(Ap + lam * np.eye(D)[None], b[..., None])[..., 0]


def user_factors(users, items, centred, n_users: int, V, lam: float, bias_coord: float | None, clip: bool = True):
    """Each user's ridge regression against V (done by the user, locally): with ``bias_coord`` a the last
    coordinate is fixed to a and ũ solves min Σ (r − c − a v_jD − ũᵀv_j)² + λ‖ũ‖²; clipped to norm √(1 − a²)
    (1 without bias) when ``clip``. Users without ratings get ũ = 0."""
    V = np.asarray(V, np.float64)
    if bias_coord is None:
        Vf, target = V, np.asarray(centred, np.float64)
    else:
        Vf, target = V[:, :-1], np.asarray(centred, np.float64) - bias_coord * V[np.asarray(items), -1]
    A, bb = statistics(users, items, target, Vf, n_users)
    U = np.linalg.solve(A + lam * np.eye(Vf.shape[1])[None], bb[..., None])[..., 0]
    if clip:
        cap = 1.0 if bias_coord is None else math.sqrt(1.0 - bias_coord ** 2)
        nrm = np.linalg.norm(U, axis=1)
        U *= np.minimum(1.0, cap / np.maximum(nrm, 1e-300))[:, None]
    if bias_coord is not None:
        U = np.hstack([U, np.full((n_users, 1), bias_coord)])
    return U


# ----------------------------------------------------------------------------------------------- accounting


def _rdp_epsilon(z: float, T: int, delta: float) -> float:
    from dp_accounting import dp_event, rdp

    acc = rdp.RdpAccountant()
    acc.compose(dp_event.GaussianDpEvent(float(z)), int(T))
    return float(acc.get_epsilon(float(delta)))


def zcdp_epsilon(z: float, T: int, delta: float) -> float:
    """The closed form: T Gaussian rounds of multiplier z are ρ-zCDP, ρ = T/(2z²); ε = ρ + 2√(ρ ln(1/δ))."""
    rho = T / (2.0 * z * z)
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


@lru_cache(maxsize=256)
def calibrate(epsilon: float, delta: float, T: int) -> float:
    """The smallest noise multiplier z (to 1e-6 relative) with RDP ε(z, T rounds) ≤ ``epsilon`` at ``delta``."""
    lo, hi = 1e-3, 1.0
    while _rdp_epsilon(hi, T, delta) > epsilon:
        hi *= 2.0
        if hi > 1e7:
            raise ParameterError(f"no noise multiplier reaches ε = {epsilon} at δ = {delta} over {T} rounds")
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if _rdp_epsilon(mid, T, delta) > epsilon else (lo, mid)
        if hi / lo < 1 + 1e-6:
            break
    return hi


@lru_cache(maxsize=1024)
def _accounting(z: float, T: int, delta: float) -> tuple:
    return tuple(_accounting_dict(z, T, delta).items())


def accounting(z: float, T: int, delta: float) -> dict:
    """ε at ``delta`` of T rounds of multiplier z by four routes (module docstring); memoised (a grid's
    configurations share z, T and δ per target ε)."""
    return dict(_accounting(float(z), int(T), float(delta)))


def _accounting_dict(z: float, T: int, delta: float) -> dict:
    from dp_accounting.pld import privacy_loss_distribution as pld

    from .ledger import analytic_gaussian_epsilon

    one = z / math.sqrt(T)  # T composed Gaussians = one Gaussian of multiplier z/√T
    p = pld.from_gaussian_mechanism(standard_deviation=one, sensitivity=1.0, value_discretization_interval=1e-4)
    return {"rdp_epsilon": _rdp_epsilon(z, T, delta), "pld_epsilon": float(p.get_epsilon_for_delta(delta)),
            "exact_gaussian_epsilon": analytic_gaussian_epsilon(one, 1.0, delta),
            "zcdp_epsilon": zcdp_epsilon(z, T, delta), "zcdp_rho": T / (2.0 * z * z)}


def entry(epsilon: float, delta: float, cfg: "DPALSConfig", z: float, n_users: int):
    from .ledger import FLOAT_GAUSSIAN, LedgerEntry

    acc = accounting(z, cfg.alternations, delta)
    return LedgerEntry(NAME, "paper", UNIT, float(epsilon), float(delta), acc["rdp_epsilon"], float(delta),
                       conditions=(f"joint DP: u_i computed by each user from the released V and their own ratings, "
                                   f"never released; ≤ k = {cfg.k} contributions per user, ‖u_i‖ ≤ 1, |r − c| ≤ Γ "
                                   f"(c public); {cfg.alternations} adaptive rounds; the number of users "
                                   f"({n_users}) and of items public; the server sums the clipped contributions"),
                       noise_sampler=FLOAT_GAUSSIAN,
                       pld_epsilon=acc["pld_epsilon"], rdp_epsilon=acc["rdp_epsilon"],
                       accounting_note=(f"RDP (dp-accounting) of {cfg.alternations} Gaussian rounds, multiplier "
                                        f"z = {z:.4g}; PLD, exact Gaussian and the zCDP closed form beside it"),
                       extra={"noise_multiplier": z, "exact_gaussian_epsilon": acc["exact_gaussian_epsilon"],
                              "zcdp_epsilon": acc["zcdp_epsilon"], "zcdp_rho": acc["zcdp_rho"]})


# ----------------------------------------------------------------------------------------------- the mechanism


@dataclass(frozen=True)
class DPALSConfig:
    d: int = 8
    alternations: int = 5
    k: int = 50  # contributions per user
    lam_u: float = 1.0  # users' local ridge
    lam_v: float = 50.0  # item solve, on top of the PSD projection
    gram_share: float = 0.5  # share of 1/z² spent on the Gram matrices
    bias_coord: float | None = 0.5  # the fixed coordinate a of u_i (None: no item offset column)
    init_std: float = 0.1
    clip_users: bool = True  # False (ablation, noise-free only): u_i unclipped, no sensitivity bound holds

    def __post_init__(self):
        if int(self.d) < 1 or int(self.alternations) < 1 or int(self.k) < 1:
            raise ParameterError(f"d, alternations, k must be ≥ 1, got {self}")
        if not (0.0 < self.gram_share < 1.0):
            raise ParameterError(f"gram_share must lie in (0, 1), got {self.gram_share}")
        if self.bias_coord is not None and not (0.0 < self.bias_coord < 1.0):
            raise ParameterError(f"bias_coord must be None or in (0, 1), got {self.bias_coord}")
        if self.lam_u <= 0 or self.lam_v <= 0:
            raise ParameterError("lam_u and lam_v must be > 0")
        if not isinstance(self.clip_users, bool):
            raise ParameterError(f"clip_users must be true or false, got {self.clip_users!r}")


@dataclass
class DPALSResult:
    V: np.ndarray  # released item factors (last column: item offsets when bias_coord is set)
    U: np.ndarray  # the users' local factors (all their ratings, never released)
    centre: float
    sigma_A: float | None
    sigma_b: float | None
    noise_multiplier: float | None
    seed_used: int | None
    seed_was_fixed: bool
    history: list = field(default_factory=list)

    def predict(self, users, items) -> np.ndarray:
        return self.centre + np.einsum("nd,nd->n", self.U[np.asarray(users)], self.V[np.asarray(items)])


def fit(train, epsilon: float | None, delta: float, cfg: DPALSConfig, seed=None, *, test=None) -> DPALSResult:
    """Private ALS on ``train`` at (ε, δ) user level (replace one user); ``epsilon=None``: the same algorithm
    without noise (clipping and sampling kept, unless ``cfg.clip_users`` is False — the ablation's noise-free
    variant, refused with noise since the sensitivity bound needs ‖u_i‖ ≤ 1). ``test``: per-round RMSE in
    ``history`` (evaluation only)."""
    validate.unique_pairs(train.users, train.items, train.n_items, "train", what="private ALS")
    if epsilon is not None and not cfg.clip_users:
        raise ParameterError("clip_users=False voids the sensitivity bound: private ALS runs it only without noise "
                             "(epsilon=None)")
    rng, seed_used, fixed = seeded(seed)
    lo, hi = train.rating_scale
    c, gamma = 0.5 * (lo + hi), 0.5 * (hi - lo)
    n, M = train.n_users, train.n_items
    D = int(cfg.d) + (cfg.bias_coord is not None)
    centred = np.clip(train.values.astype(np.float64) - c, -gamma, gamma)
    keep = sample_contributions(train.users, n, int(cfg.k), rng)
    T = int(cfg.alternations)
    if epsilon is None:
        z = sA = sb = None
    else:
        z = calibrate(float(epsilon), float(delta), T)
        dA, db = sensitivities(int(cfg.k), gamma, "replace")
        sA = dA * z / math.sqrt(cfg.gram_share)
        sb = db * z / math.sqrt(1.0 - cfg.gram_share)
    V = rng.standard_normal((M, D)) * cfg.init_std
    res = DPALSResult(V, None, c, sA, sb, z, seed_used, fixed)
    clip = bool(cfg.clip_users)
    for _ in range(T):
        U = user_factors(train.users, train.items, centred, n, V, cfg.lam_u, cfg.bias_coord, clip)
        A, b = statistics(train.items[keep], train.users[keep], centred[keep], U, M)
        if z is not None:
            A, b = noisy_item_statistics(A, b, sA, sb, rng)
        V = solve_items(A, b, cfg.lam_v)
        if test is not None:
            res.V, res.U = V, user_factors(train.users, train.items, centred, n, V, cfg.lam_u, cfg.bias_coord, clip)
            res.history.append(float(np.sqrt(np.mean((np.clip(res.predict(test.users, test.items), lo, hi)
                                                      - test.values) ** 2))))
    res.V = V
    res.U = user_factors(train.users, train.items, centred, n, V, cfg.lam_u, cfg.bias_coord, clip)
    return res


class PrivateALS:
    """Frontier adapter (:mod:`dpmf_lib.privacy.mechanism`): one :class:`DPALSConfig`."""

    key = "private-als"
    label = "Private ALS (Chien et al. 2021)"

    def __init__(self, **cfg):
        self.cfg = DPALSConfig(**cfg)

    def fit(self, train, epsilon, delta, seed):
        from .mechanism import Release, privacy_record

        r = fit(train, epsilon, delta, self.cfg, seed)
        n_users = int(np.count_nonzero(train.user_counts()))
        e = None if epsilon is None else entry(epsilon, delta, self.cfg, r.noise_multiplier, n_users)
        return Release(r.predict, e, privacy_record(e, r.seed_used, r.seed_was_fixed), published=r.V,
                       extra={"noise_multiplier": r.noise_multiplier})
