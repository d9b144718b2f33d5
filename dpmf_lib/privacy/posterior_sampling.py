"""Differentially private matrix factorization by posterior sampling (Liu, Wang & Smola 2015, Section 3).

Algorithm 1 as we implement it (Δ = r_max − r_min, c = (Δ + κ)²):

1. Weights (Section 6.6): w_i = min(ρ, B₀ / (m_i c)) with B₀ = τ c ("We set B = τ(5 − 1 + κ)²"), m_i the user's
   number of training ratings *before* trimming (Algorithm 1 lists "number of ratings of each user {m_1..m_n}" and
   line 1 uses min{τ, m_i}, so m_i is the untrimmed count). Users without ratings get w_i = 0.
2. Line 1: B_i = min(τ, m_i) w_i c (Theorem 2) ≤ B₀ for every user. The paper's B = max_i B_i is a maximum over the
   data (under the user-level relation one user's counts move it, and with it the target's scale ε/(4B)), which no
   ε accounts for; we use the data-independent bound B = B₀ = τ c (``Preprocessed.B``, also ``B_weights``) in the
   target and in every ε, and record the data's max_i B_i as ``Preprocessed.B_data`` (equal to B₀ whenever some
   user has ρ·min(τ, m_i) ≥ τ, e.g. any user with ≥ τ ratings when ρ ≥ 1).
3. Line 2: each user with m_i > τ keeps τ ratings chosen uniformly at random (seeded,
   :func:`dpmf_lib.data.splits.trim_per_user`).
4. Lines 3–4: sample (U, V) ∝ exp(−ε/(4B) Σ_i Σ_{j∈Ω_i} w_i (r_ij − r̂_ij)²) × prior, by SGLD
   (:func:`dpmf_lib.mf.sample_sgld`, which targets exp(−(s λ_r/2) Σ w (r − r̂)² − ½ uᵀΛ_u u − ½ vᵀΛ_v v − ...); we pass
   s = ε / (2 B λ_r)). The paper scales the whole F, regularizer included; Section 6.6 instead fixes Λ_u, Λ_v at the
   values of a non-private SGLD run ("because we are sampling P(U, V | rest)"), which is what we do, and the prior is
   not rescaled. That prior is NOT data-independent: Λ_u, Λ_v (and our bias precision) come from a non-private run
   on the same training data, so they are data-dependent hyper-parameters. Theorem 1's argument (the exponential
   mechanism on the data term under a data-independent prior) does not account for them; a formally private use
   would take Λ from public data or spend part of the budget on them. The release records this in
   ``PrivateRelease.privacy_caveats``. With λ_r = 2 the non-private posterior exp(−F) is exactly the case ε = 4B.
   r̂_ij = u_iᵀv_j + b_i + b_j + b_0 (the paper omits biases "for convenience"): b_j is released with v_j, b_i is fitted
   locally with u_i, and b_0 is fixed at the data-independent midpoint (r_min + r_max)/2 (the training mean would leak).
   The chain starts from a data-independent random initialisation (N(0, 0.1²) factors, zero biases).
5. Lines 5–6: while some prediction r̂_ij over all pairs (every user with a training rating × every item, observed or
   not) lies outside [r_min − κ, r_max + κ], draw a new sample. A new draw (``redraw="fresh"``, default) = the final state of
   the next independent chain (own seed, own data-independent start); ``redraw="continue"`` is a
   Markov-chain stand-in (the same chain continued for ``resample_rounds`` rounds at its last step). The loop stops after ``max_resamples`` redraws; the release then
   carries ``constraint_satisfied=False`` and the count of violating pairs: the worst-case guarantee of Theorem 1 does
   not formally hold for such a sample (we report this rather than silently clipping).
6. Release V (and the item biases) only; each user fits (u_i, b_i) by the ridge regression of eq. (5) on their own
   training ratings (all of them — users have no privacy expectation towards themselves), with the prior precision of
   the sampler as ridge: (λ_r Σ_j x_j x_jᵀ + diag(Λ_u, λ_b)) z_i = λ_r Σ_j x_j (r_ij − b_0 − b_j), x_j = (v_j, 1).
   This is the conditional posterior mean of (u_i, b_i) given V; eq. (5) is its bias-free form with a scalar λ.

Sampler (ours): ``sampler="sgld"`` (default) is the paper's fast SGLD; ``sampler="gibbs"`` samples the same
target exp(−ε/(4B)·F) × prior by exact block Gibbs (every (u_i, b_i) from its Gaussian conditional given (V, b_j),
then every (v_j, b_j) given (U, b_i); see :func:`gibbs_chain`). Theorem 1 is a statement about an exact sample of
the target, so any sampler of it releases under the same ε; Gibbs has no step size and no discretisation bias and
mixes far faster per sweep (ML-100K, d = 16, ε = 4B: ESS ≈ 350 from 2 × 400 sweeps, against ≈ 40 from 2 × 600
SGLD rounds). A sweep costs O(Σ_i (n_i d² + d³)), ≈ 60 ms on ML-100K, so it is offered where that is affordable.
An exact scale move (U·c, V/c per dimension, drawn from its generalised-inverse-Gaussian conditional) was tried
first on the SGLD chain and did not help (ESS 18 vs 17 on the same chains): the slow direction is not the scale
of V. Gibbs cannot sample the clipped-loss variant (its likelihood has no Gaussian conditional).

Temperature and step (our choice, so that the reported ε is the ε of the target): the SGLD temperature ζ scales only
the noise, so a chain at ζ < 1 targets exp(−(ε/ζ)/(4B)·F), i.e. it is an (ε/ζ)-posterior sample, not an ε one.
:func:`sample_private` therefore refuses ``zeta != 1`` (a ParameterError naming ``zeta`` and the fix) and offers
``step_scale`` instead, which multiplies the step size of drift and noise alike (a smaller step, same target).
``PrivateRelease.epsilon_effective`` is the ε that Theorem 1 gives for what ran: the stated ε when the sample met
the prediction-range constraint (lines 5–6), else ``None`` — without the range, one rating's term of the likelihood
is unbounded and no finite ε holds (the ledger, :mod:`dpmf_lib.privacy.ledger`, says the same). ``privacy_caveats``
lists what even a met constraint does not cover (finite SGLD chain, data-dependent Λ).

Seeds: ``seed=None`` (the default of :func:`preprocess` and :func:`sample_private`) draws fresh OS entropy; a fixed
seed is a reproducibility choice recorded as ``seed_used`` / ``seed_was_fixed``. With a fixed seed the noise is fully
replayable by anyone who knows it: the SGLD noise comes from a counter-based splitmix64 stream, and ``mode="fast"``
reads a Gaussian lookup table (generated once from the seed) at splitmix64-chosen offsets, so the same seed gives the
same table and the same offsets.

Accounting (Theorem 2, Section 6.7): user-level ε; rating-level ε·max_i w_i c / B (one rating's term is ≤ w_i c, on
Theorem 1's scale where a user's ≤ B gives ε: :func:`rating_epsilon`; the paper's ε/τ is the case w_i ≤ 1, and with
ρ > 1 a light user's weight reaches ρ); personalized ε_i = ε B_i / (2B); and the realized
per-user log-likelihood at the released sample ℓ_i = ε/(4B) Σ_{j∈Ω_i} w_i (r_ij − r̂_ij)² (the user's term in the
exponent). The proof of Theorem 2 bounds the privacy ratio by exp(2 × the bound on the user's log-likelihood), so the
realized analogue of ε_i is 2ℓ_i = ε L_i / (2B) with L_i = Σ w_i (r_ij − r̂_ij)²; the paper's "a typical user's personal
privacy loss is about ε/25" is compared with the median of 2ℓ_i / ε. This is a realized value at one sample, not a
worst-case bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from numba import njit, prange

from .. import validate
from ..errors import ParameterError
# the chains' seeds and diagnostics, exact Gibbs and the target's checks live in their own modules; those named here
# are also this module's API (``ps.chain_seed``, ``ps.prior_run_seed``, ``ps.check_epsilon``, ...)
from .chains import chain_diagnostics, chain_seed, phase_seed, prior_run_seed  # noqa: F401
from .common import PrivacyRecord, WithPrivacyRecord, resolve_seed
from .exact_gibbs import gibbs_chain
from .linalg import _cholesky_solve
from .target import check_epsilon, likelihood_scale

# ----------------------------------------------------------------------------------------------- parameter checks


def check_privacy_params(*, epsilon=None, tau=None, kappa=None, rho=None) -> dict:
    """Validate the parameters of Algorithm 1 that are given; returns them as plain numbers.

    ε > 0 finite; τ an integer ≥ 1 (max ratings per user); κ > 0 finite (the paper: "a predefined positive parameter
    κ"); ρ > 0 finite (the weight cap of Section 6.6).
    """
    out = {}
    if epsilon is not None:
        out["epsilon"] = check_epsilon(epsilon)
    if tau is not None:
        out["tau"] = validate.integer(tau, "tau", what="Algorithm 1 (max ratings per user)")
    if kappa is not None:
        out["kappa"] = validate.positive(kappa, "kappa",
                                         what="Algorithm 1 (margin of the prediction range [r_min − κ, r_max + κ])")
    if rho is not None:
        out["rho"] = validate.positive(rho, "rho", what="Algorithm 1 (the per-user weight cap)")
    return out


# ----------------------------------------------------------------------------------------------- preprocessing


def user_weights(m, *, tau: int, kappa: float, rho: float, rating_scale=(1.0, 5.0)):
    """``(w, B_i, B, B0)`` from untrimmed per-user counts ``m`` (Section 6.6 and Algorithm 1 line 1).

    w_i = min(ρ, B0 / (m_i c)), B0 = τ c, c = (Δ + κ)²; B_i = min(τ, m_i) w_i c; B = max_i B_i. Users with m_i = 0
    get w_i = 0 and B_i = 0.
    """
    p = check_privacy_params(tau=tau, kappa=kappa, rho=rho)
    m = np.asarray(m)
    if m.ndim != 1 or (m.size and (m.min() < 0 or not np.issubdtype(m.dtype, np.integer))):
        raise ParameterError("m (ratings per user) must be a 1-d array of non-negative integers")
    lo, hi = float(rating_scale[0]), float(rating_scale[1])
    if not hi > lo:
        raise ParameterError(f"rating_scale must be (r_min, r_max) with r_max > r_min, got {rating_scale!r}")
    c = (hi - lo + p["kappa"]) ** 2
    B0 = p["tau"] * c
    mf = m.astype(np.float64)
    with np.errstate(divide="ignore"):
        w = np.where(m > 0, np.minimum(p["rho"], B0 / (np.maximum(mf, 1.0) * c)), 0.0)
    B_i = np.minimum(p["tau"], mf) * w * c
    B = float(B_i.max()) if B_i.size else 0.0
    if B <= 0:
        raise ParameterError("no user has a rating: B = max_i min(τ, m_i) w_i (Δ+κ)² is 0")
    return w, B_i, B, B0


@dataclass(frozen=True)
class Preprocessed:
    """Algorithm 1 preprocessing of a training set (see the module docstring)."""
    train: object  # Ratings, trimmed to ≤ τ per user
    m: np.ndarray  # int64 untrimmed ratings per user
    kept: np.ndarray  # int64 ratings per user after trimming (= min(τ, m_i))
    w: np.ndarray  # float64 per-user weight w_i
    B_i: np.ndarray  # float64 per-user bound min(τ, m_i) w_i (Δ+κ)²
    B: float  # B₀ = τ (Δ+κ)²: the data-independent bound the target and every ε use (module docstring)
    B_weights: float  # τ (Δ+κ)², the B of the weight formula (Section 6.6); = B
    rating_weights: np.ndarray  # float32 w_i of each rating of ``train`` (aligned)
    tau: int
    kappa: float
    rho: float
    rating_scale: tuple
    n_trimmed: int  # ratings removed by trimming
    seed: int | None = 0  # the trimming seed used (None: the caller passed a Generator)
    seed_was_fixed: bool = True  # False: drawn from fresh OS entropy (seed=None)
    B_data: float = float("nan")  # max_i B_i (the paper's Algorithm 1 line 1, a max over the data): recorded, not used

    @property
    def delta(self) -> float:
        return float(self.rating_scale[1] - self.rating_scale[0])

    @property
    def pred_range(self) -> tuple[float, float]:
        return float(self.rating_scale[0] - self.kappa), float(self.rating_scale[1] + self.kappa)


WEIGHTS_FROM = ("untrimmed", "trimmed")
REDRAWS = ("fresh", "continue")
SAMPLERS = ("sgld", "gibbs")


def preprocess(train, *, tau: int, kappa: float, rho: float, seed=None, weights_from: str = "untrimmed") -> Preprocessed:
    """Seeded trimming to τ ratings per user and the weights of Section 6.6 (Algorithm 1 lines 1–2).

    The trimming is part of the mechanism (which ratings a heavy user keeps is random): ``seed=None`` (default) draws
    fresh OS entropy; pass an int to reproduce a run (recorded in ``Preprocessed.seed`` / ``seed_was_fixed``).

    ``weights_from``: which m_i enters Section 6.6's w_i = min(ρ, B / (m_i (Δ+κ)²)) — the paper does not say whether
    m_i is counted before or after trimming to τ. ``"untrimmed"`` (default; the paper's m_i is "the number of ratings
    of each user" in Algorithm 1's input, before line 2 trims): a user with m_i > τ keeps τ ratings at weight τ/m_i,
    B_i = τ²c/m_i < B. ``"trimmed"``: m_i → min(τ, m_i), so every user with m_i ≥ τ gets w_i = 1 and B_i = B. Both
    keep B_i ≤ B, so both are ε-DP; they differ in utility (on ML-100K the trimmed reading moved test RMSE by ~0.01)
    and in the personalized losses of heavy users."""
    from ..data.splits import trim_per_user

    p = check_privacy_params(tau=tau, kappa=kappa, rho=rho)
    if weights_from not in WEIGHTS_FROM:
        raise ParameterError(f"weights_from must be one of {WEIGHTS_FROM} (m_i before or after trimming to τ), "
                             f"got {weights_from!r}")
    seed_used, fixed = resolve_seed(seed)
    seed = seed if seed_used is None else seed_used
    m = train.user_counts().astype(np.int64)
    m_w = m if weights_from == "untrimmed" else np.minimum(m, p["tau"])
    w, B_i, B, B0 = user_weights(m_w, tau=p["tau"], kappa=p["kappa"], rho=p["rho"], rating_scale=train.rating_scale)
    trimmed = trim_per_user(train, p["tau"], seed=seed)
    kept = trimmed.user_counts().astype(np.int64)
    if not np.array_equal(kept, np.minimum(m, p["tau"])):  # guards the contract of trim_per_user
        raise AssertionError("trim_per_user did not keep min(τ, m_i) ratings per user")
    rw = np.ascontiguousarray(w[trimmed.users].astype(np.float32))
    # B₀, not the data's max_i B_i: a bound that one user's counts move would change the target's scale with the data
    return Preprocessed(trimmed, m, kept, w, B_i, B0, B0, rw, p["tau"], p["kappa"], p["rho"],
                        (float(train.rating_scale[0]), float(train.rating_scale[1])),
                        int(train.n_ratings - trimmed.n_ratings), seed_used, fixed, B_data=B)

# ----------------------------------------------------------------------------------------------- range constraint


@njit(cache=True, parallel=True, fastmath=False)
def _range_kernel(U, V, bu, bi, b0, lo, hi, n_out, pmin, pmax):
    n_users = U.shape[0]
    n_items = V.shape[0]
    d = U.shape[1]
    for i in prange(n_users):
        c = 0
        mn = np.inf
        mx = -np.inf
        for j in range(n_items):
            s = np.float64(0.0)
            for f in range(d):
                s += np.float64(U[i, f]) * np.float64(V[j, f])
            p = s + bu[i] + bi[j] + b0
            if p < lo or p > hi:
                c += 1
            if p < mn:
                mn = p
            if p > mx:
                mx = p
        n_out[i] = c
        pmin[i] = mn
        pmax[i] = mx


def _check_factors(U, V, bu, bi):
    U = np.ascontiguousarray(U, dtype=np.float32)
    V = np.ascontiguousarray(V, dtype=np.float32)
    bu = np.ascontiguousarray(bu, dtype=np.float32)
    bi = np.ascontiguousarray(bi, dtype=np.float32)
    if U.ndim != 2 or V.ndim != 2 or U.shape[1] != V.shape[1] or bu.shape != (U.shape[0],) or bi.shape != (V.shape[0],):
        raise ParameterError(f"factor shapes do not match: U {U.shape}, V {V.shape}, bu {bu.shape}, bi {bi.shape}")
    return U, V, bu, bi


def range_violations(U, V, bu, bi, b0, lo, hi, users=None) -> dict:
    """Predictions r̂_ij = u_iᵀv_j + b_i + b_j + b_0 outside [lo, hi] over all pairs (rows ``users`` of U, default all).

    Returns ``{"n_out", "n_pairs", "min", "max"}`` (float64 accumulation; numba, parallel over users).
    """
    U, V, bu, bi = _check_factors(U, V, bu, bi)
    if users is not None:
        users = np.asarray(users, dtype=np.int64)
        U, bu = np.ascontiguousarray(U[users]), np.ascontiguousarray(bu[users])
    n = U.shape[0]
    n_out = np.zeros(n, np.int64)
    pmin = np.empty(n, np.float64)
    pmax = np.empty(n, np.float64)
    if n and V.shape[0]:
        _range_kernel(U, V, bu, bi, float(b0), float(lo), float(hi), n_out, pmin, pmax)
    return {"n_out": int(n_out.sum()), "n_pairs": int(n) * int(V.shape[0]),
            "min": float(pmin.min()) if n and V.shape[0] else float("nan"),
            "max": float(pmax.max()) if n and V.shape[0] else float("nan")}


def range_violations_reference(U, V, bu, bi, b0, lo, hi, users=None) -> dict:
    """Plain numpy version of :func:`range_violations` (dense prediction matrix; small problems only)."""
    U, V, bu, bi = _check_factors(U, V, bu, bi)
    if users is not None:
        U, bu = U[np.asarray(users)], bu[np.asarray(users)]
    P = U.astype(np.float64) @ V.astype(np.float64).T + bu[:, None].astype(np.float64) + bi[None, :] + float(b0)
    return {"n_out": int(((P < lo) | (P > hi)).sum()), "n_pairs": int(P.size),
            "min": float(P.min()) if P.size else float("nan"), "max": float(P.max()) if P.size else float("nan")}


# ----------------------------------------------------------------------------------------------- local ridge (eq. 5)


@njit(cache=True, parallel=True)
def _ridge_kernel(indptr, idx, vals, V, bi, b0, reg, lam_r, U_out, bu_out):
    n_users = indptr.shape[0] - 1
    d = V.shape[1]
    for i in prange(n_users):
        A = np.zeros((d + 1, d + 1))
        rhs = np.zeros(d + 1)
        x = np.empty(d + 1)
        for p in range(indptr[i], indptr[i + 1]):
            j = idx[p]
            for f in range(d):
                x[f] = V[j, f]
            x[d] = 1.0
            y = vals[p] - b0 - bi[j]
            for a in range(d + 1):
                rhs[a] += lam_r * x[a] * y
                for c in range(a + 1):
                    A[a, c] += lam_r * x[a] * x[c]
        for a in range(d + 1):
            A[a, a] += reg[a]
            for c in range(a):
                A[c, a] = A[a, c]
        z = _cholesky_solve(A, rhs)
        for f in range(d):
            U_out[i, f] = z[f]
        bu_out[i] = z[d]


def _ridge_inputs(V, bi, Lambda_u, lam_bias, lambda_r):
    V = np.ascontiguousarray(V, dtype=np.float32)
    bi = np.ascontiguousarray(bi, dtype=np.float32)
    d = V.shape[1]
    Lu = np.asarray(Lambda_u, dtype=np.float64)
    Lu = np.full(d, float(Lu)) if Lu.ndim == 0 else Lu
    if Lu.shape != (d,) or not np.all(np.isfinite(Lu)) or np.any(Lu <= 0):
        raise ParameterError(f"Lambda_u must be a positive scalar or a length-{d} positive vector")
    lam_bias = validate.positive(lam_bias, "lam_bias")
    lambda_r = validate.positive(lambda_r, "lambda_r")
    reg = np.concatenate([Lu, [lam_bias]]).astype(np.float64)
    return V, bi, reg, lambda_r


def local_user_factors(ratings, V, bi, b0, *, Lambda_u, lam_bias: float = 1.0, lambda_r: float = 1.0):
    """Each user's local fit (eq. 5 with biases) against released item factors; returns ``(U, bu)`` float32.

    Solves (λ_r Σ_j x_j x_jᵀ + diag(Λ_u, λ_b)) z_i = λ_r Σ_j x_j (r_ij − b_0 − b_j), x_j = (v_j, 1), z_i = (u_i, b_i),
    over the user's ratings in ``ratings`` (users without ratings get zeros). numba, parallel over users.
    """
    V, bi, reg, lambda_r = _ridge_inputs(V, bi, Lambda_u, lam_bias, lambda_r)
    csr = ratings.user_csr()
    U = np.zeros((ratings.n_users, V.shape[1]), np.float32)
    bu = np.zeros(ratings.n_users, np.float32)
    _ridge_kernel(csr.indptr, csr.indices, csr.values, V, bi, float(b0), reg, lambda_r, U, bu)
    return U, bu


def local_user_factors_reference(ratings, V, bi, b0, *, Lambda_u, lam_bias: float = 1.0, lambda_r: float = 1.0):
    """Plain numpy version of :func:`local_user_factors` (``np.linalg.solve`` per user)."""
    V, bi, reg, lambda_r = _ridge_inputs(V, bi, Lambda_u, lam_bias, lambda_r)
    d = V.shape[1]
    U = np.zeros((ratings.n_users, d), np.float32)
    bu = np.zeros(ratings.n_users, np.float32)
    for i in range(ratings.n_users):
        sel = ratings.users == i
        X = np.hstack([V[ratings.items[sel]].astype(np.float64), np.ones((sel.sum(), 1))])
        y = ratings.values[sel].astype(np.float64) - b0 - bi[ratings.items[sel]]
        z = np.linalg.solve(lambda_r * X.T @ X + np.diag(reg), lambda_r * X.T @ y)
        U[i], bu[i] = z[:d], z[d]
    return U, bu


# ----------------------------------------------------------------------------------------------- sampling


@dataclass
class PrivateRelease(WithPrivacyRecord):
    """What Algorithm 1 releases (``V``, ``bi``, ``b0``) plus diagnostics that are *not* released."""
    V: np.ndarray  # float32 (n_items, d): the release
    bi: np.ndarray  # float32 item biases (released with V)
    b0: float  # data-independent global offset
    epsilon: float
    B: float
    likelihood_scale: float
    Lambda_u: np.ndarray
    Lambda_v: np.ndarray
    lam_bias: float
    lambda_r: float
    constraint_satisfied: bool
    n_resamples: int  # redraws made by the rejection loop (lines 5–6)
    violations: list = field(default_factory=list)  # out-of-range pair count of every draw (first draw first)
    n_pairs: int = 0
    pred_min: float = float("nan")
    pred_max: float = float("nan")
    sampled_model: object = None  # the full (U, V, b) sample — internal, used for accounting only
    history: pd.DataFrame | None = None
    # for a privacy ledger: the ε of the distribution the chain targets (ζ = 1 is enforced, so = epsilon), the step
    # scale that ran, the seed policy, and what the targeted ε does not cover
    step_scale: float = 1.0
    privacy: PrivacyRecord | None = None  # None: a record of the stated ε alone
    loss_clipped: bool = False  # ours: the likelihood used clip(r̂, r_min − κ, r_max + κ) (no range loop needed)
    # chains: how many ran, which one's final state is released, how redraws were made, and the split-R̂ /
    # ESS of their per-draw diagnostics (``trace``); ``chain_models``: every chain's final sample (internal, not
    # released); ``step_nN``: the step η0·N that ran (constant after burn-in)
    n_chains: int = 1
    released_chain: int = 0
    # how the redraws of lines 5–6 were made (one of REDRAWS): keyword-only and without a default, so a release can
    # not misreport it (a default of "continue" once contradicted sample_private's default "fresh")
    redraw: str = field(kw_only=True)
    # which sampler of the target ran (one of SAMPLERS): keyword-only without a default, like ``redraw``
    sampler: str = field(kw_only=True)
    rhat: float = float("nan")
    ess: float = float("nan")
    trace: pd.DataFrame | None = None
    chain_models: list = field(default_factory=list)
    step_nN: float = float("nan")

    def __post_init__(self):
        super().__post_init__()
        if self.redraw not in REDRAWS:
            raise ParameterError(f"redraw must be one of {REDRAWS} (how the redraws were made), got {self.redraw!r}")
        if self.sampler not in SAMPLERS:
            raise ParameterError(f"sampler must be one of {SAMPLERS}, got {self.sampler!r}")

    def local_model(self, ratings):
        """The MFModel users obtain locally: (u_i, b_i) by eq. (5) on ``ratings``, with the released V, b_j, b_0."""
        from ..mf import MFModel

        U, bu = local_user_factors(ratings, self.V, self.bi, self.b0, Lambda_u=self.Lambda_u, lam_bias=self.lam_bias,
                                   lambda_r=self.lambda_r)
        return MFModel(U, self.V.copy(), bu, self.bi.copy(), float(self.b0))


def step_size(scale: float, eta_n: float, eta_n_max: float, Lambda_u, Lambda_v) -> float:
    """η0·N for a sampler whose likelihood is ``scale`` times the non-private one.

    SGLD takes a per-round Langevin step of size η·N (every vector receives N steps of noise per round). The curvature
    of the scaled posterior is roughly scale × (likelihood curvature) + Λ, so we use η0·N = eta_n / scale (eta_n is the
    non-private value), capped at min(eta_n_max, 1 / max Λ) where the prior dominates. Our choice (the paper tunes η0
    per setting without stating a rule).
    """
    cap = min(float(eta_n_max), 1.0 / float(max(np.max(Lambda_u), np.max(Lambda_v))))
    return float(min(eta_n / max(scale, 1e-300), cap))


def chain_start(pre: Preprocessed, d: int, seed: int, k: int = 0, init_scale: float | None = None):
    """The data-independent start of chain ``k`` of a :func:`sample_private` run seeded ``seed`` (an
    :class:`~dpmf_lib.mf.MFModel`: factors N(0, ``init_scale``²), zero biases, b₀ the rating scale's midpoint)."""
    from ..mf import init_model

    b0 = 0.5 * (pre.rating_scale[0] + pre.rating_scale[1])
    return init_model(pre.train.n_users, pre.train.n_items, d, seed=[chain_seed(seed, k), 0xD9], b0=b0,
                      scale=init_scale)


def sample_private(pre: Preprocessed, epsilon: float, *, Lambda_u, Lambda_v, d: int = 16, lambda_r: float = 2.0,
                   lam_bias: float = 1.0, rounds: int = 20, eta_n: float = 0.02, eta_n_max: float = 0.2,
                   gamma: float = 0.6, max_resamples: int = 5, resample_rounds: int = 2, check_range: bool = True,
                   mode: str = "fast", seed=None, schedule=None, test=None, zeta: float = 1.0,
                   step_scale: float = 1.0, clip_loss: bool = False, burn_in: int = 0, n_chains: int = 1,
                   redraw: str = "fresh", thin: int = 1, sampler: str = "sgld", priors_public: bool = False,
                   init_scale: float | None = None, **sgld_kwargs) -> PrivateRelease:
    """Algorithm 1 lines 3–7 on preprocessed data: SGLD on exp(−ε/(4B)·F) with fixed Λ, then the range loop.

    ``Lambda_u``, ``Lambda_v``: fixed prior precisions (Section 6.6: from a non-private SGLD run on the same data —
    data-dependent, see the module docstring). ``eta_n``: η0·N of the non-private sampler; see :func:`step_size` for
    how it is adapted to ε. ``max_resamples``: cap of the rejection loop of lines 5–6 (the paper loops until
    success); ``check_range=False`` skips the loop.

    ``zeta``: must be 1. A temperature ζ ≠ 1 scales only the SGLD noise, so the chain would target the
    (ε/ζ)-posterior while the release reports ε; it is refused rather than silently accepted. ``step_scale``
    multiplies the step size of drift and noise alike (what a "smaller temperature step" can honestly mean: the target,
    hence ε, is unchanged). ``seed=None`` (default): fresh OS entropy; an int seed reproduces (and lets anyone who
    knows it replay) the noise — the splitmix64 streams and, in ``mode="fast"``, the Gaussian lookup table.

    ``clip_loss=True`` (ours, DP-valid; not the paper's algorithm): the likelihood uses the clipped prediction,
    F = Σ w_i (r_ij − clip(r̂_ij, r_min − κ, r_max + κ))² + prior. Every term is then ≤ w_i (Δ + κ)² for any (U, V),
    so each user's part of F is ≤ B_i ≤ B by construction and Theorem 1 applies to the exact sample of this target
    without the range rule of lines 5–6: the rejection loop is not run (``n_resamples`` = 0; the out-of-range count is
    still measured and reported). The target is a different (flat outside the range) likelihood; the finite-chain
    caveat stays.

    ``priors_public``: True when ``Lambda_u``, ``Lambda_v`` and ``lam_bias`` are data-independent (fixed numbers, or
    the PNBM paper's λλ_r). False (default): they may come from the data — Section 6.6 fixes them at a non-private
    SGLD run on the same ratings (:func:`fixed_priors`), a noiseless function of the data inside the target, which
    breaks Theorem 1's premise (a data-independent prior): then no ε holds and ``epsilon_effective`` is None whatever
    the range rule did. ``epsilon_effective`` is ε only for a data-independent prior and a bounded likelihood (the
    range rule met, or ``clip_loss``); the finite chain is the condition every posterior-sampling ε shares.

    Chains. ``burn_in`` > 0: every chain runs ``burn_in`` rounds at the decaying step η_t = h / t^γ from
    its data-independent start, then ``rounds`` rounds at the constant step h (γ = 0), keeping a draw every ``thin``
    rounds for the diagnostics; ``burn_in`` = 0 is a single decaying run of ``rounds`` rounds (γ throughout).
    ``n_chains`` independent chains (seeds :func:`chain_seed`, independent initialisations :func:`chain_start`) are
    run; their split-R̂ and ESS (of the mean squared item factor and, with ``test``, of the sample's test RMSE —
    diagnostics, not released) are in ``rhat`` / ``ess`` / ``trace``. ``init_scale``: the standard deviation of every
    chain's initial factors (None: :func:`dpmf_lib.mf.init_model`'s 0.1; a larger one starts an over-dispersed chain,
    still data-independent). ``redraw`` (lines 5–6's "draw a new sample"): ``"fresh"``
    (default) — redraw k is the final state of chain k (running a further independent chain when k ≥ ``n_chains``),
    so redraws are independent samples; ``"continue"`` — a Markov-chain stand-in: the released chain continued
    for ``resample_rounds`` more rounds at its last step (correlated with the draw it replaces).

    ``sampler="gibbs"`` (ours): every chain is exact block Gibbs on the same target (:func:`gibbs_chain`):
    ``burn_in`` sweeps, then ``rounds`` sweeps keeping a draw every ``thin``; the step-size arguments (``eta_n``,
    ``eta_n_max``, ``gamma``, ``step_scale``, ``mode``) do not apply. It needs ``redraw="fresh"`` and
    ``clip_loss=False``.

    ``schedule`` (a :class:`dpmf_lib.mf.Schedule`; None: the default one): the SGLD chains' order, block and tier
    sizes, prefetch stride and threads; its ``n_threads`` also sets the threads of the Gibbs blocks.
    """
    from ..mf import sample_sgld
    from ..mf.csgd import num_threads
    from ..mf.schedule import check_schedule

    schedule = check_schedule(schedule, "sample_private")

    eps = check_epsilon(epsilon)
    z = validate.finite(zeta, "zeta")
    if z != 1.0:
        raise ParameterError(f"zeta={zeta!r}: a temperature ≠ 1 scales only the SGLD noise, so the chain would target "
                             f"the (ε/ζ)-posterior (ε_effective = {eps / z:g}, not ε = {eps:g}). Pass zeta=1; for a "
                             "smaller step use step_scale (drift and noise alike), or lower epsilon if a sharper "
                             "posterior is what you want")
    step_scale = validate.positive(step_scale, "step_scale", what="sample_private (multiplier of the SGLD step size)")
    seed_used, seed_fixed = resolve_seed(seed)
    if seed_used is None:
        raise ParameterError("seed must be None (fresh OS entropy) or a non-negative int for sample_private (its "
                             "streams are counter-based and need an integer seed), not a Generator")
    seed = seed_used
    for name, v, lo_ok in (("max_resamples", max_resamples, 0), ("resample_rounds", resample_rounds, 1),
                           ("burn_in", burn_in, 0), ("n_chains", n_chains, 1), ("thin", thin, 1)):
        validate.integer(v, name, lo=lo_ok)
    if redraw not in REDRAWS:
        raise ParameterError(f"redraw must be one of {REDRAWS} (independent chains or the chain continued), "
                             f"got {redraw!r}")
    if sampler not in SAMPLERS:
        raise ParameterError(f"sampler must be one of {SAMPLERS} (the paper's SGLD or exact block Gibbs), got {sampler!r}")
    if sampler == "gibbs" and (clip_loss or redraw != "fresh"):
        raise ParameterError("sampler='gibbs' samples the paper's target only: it needs clip_loss=False (the clipped "
                             "likelihood has no Gaussian conditional) and redraw='fresh' (a redraw is the next "
                             "independent chain); use sampler='sgld' for either")
    train = pre.train
    s = likelihood_scale(eps, pre.B, lambda_r)
    h = step_scale * step_size(s * lambda_r / 2.0, eta_n, eta_n_max, Lambda_u, Lambda_v)
    N = train.n_ratings
    common = dict(d=d, lambda_r=lambda_r, fixed_lambda=(Lambda_u, Lambda_v), lam_bias=lam_bias,
                  likelihood_scale=s, weights=pre.rating_weights, mode=mode, schedule=schedule, test=test,
                  clip_prediction=pre.pred_range if clip_loss else None, **sgld_kwargs)
    traces = []

    def chain(k):
        sk = chain_seed(seed, k)
        if sampler == "gibbs":
            with num_threads(schedule.n_threads):  # the Gibbs blocks are numba-parallel over rows
                g = gibbs_chain(pre, eps, Lambda_u=Lambda_u, Lambda_v=Lambda_v, lam_bias=lam_bias, d=d,
                                sweeps=int(burn_in) + int(rounds), burn_in=int(burn_in), thin=int(thin), seed=sk,
                                test=test, chain=k)
            traces.append(g.trace)
            hst = g.history.assign(chain=k)
            return g, hst
        m0 = chain_start(pre, d, seed, k, init_scale)
        if burn_in == 0:
            r = sample_sgld(train, epochs=int(rounds), eta0=h / N, model=m0, seed=sk, gamma=gamma,
                            keep_every=int(thin), **common)
            hst = r.history.assign(chain=k, phase="sampling")
            kept = hst[hst.epoch % int(thin) == 0]
            tr = pd.DataFrame({"chain": k, "draw": kept.epoch.to_numpy(),
                               "v_norm2": [float(np.mean(np.square(v, dtype=np.float64))) for v in r.samples_V],
                               "sample_rmse": kept.test_rmse.to_numpy() if "test_rmse" in kept else np.nan})
            traces.append(tr)
            r.samples_V, r.samples_U = [], []  # read by the trace only (as below)
            return r, hst
        r1 = sample_sgld(train, epochs=int(burn_in), eta0=h / N, model=m0, seed=sk, gamma=gamma, **common)
        r = sample_sgld(train, epochs=int(rounds), eta0=h / N, model=r1.model, layout=r1.layout,
                        seed=phase_seed(sk), gamma=0.0, keep_every=int(thin), **common)
        hst = pd.concat([r1.history.assign(phase="burn_in"),
                         r.history.assign(phase="sampling", epoch=r.history.epoch + int(burn_in))],
                        ignore_index=True).assign(chain=k)
        kept = r.history[r.history.epoch % int(thin) == 0]
        tr = pd.DataFrame({"chain": k, "draw": kept.epoch.to_numpy() + int(burn_in),
                           "v_norm2": [float(np.mean(np.square(v, dtype=np.float64))) for v in r.samples_V]})
        tr["sample_rmse"] = kept.test_rmse.to_numpy() if "test_rmse" in kept else np.nan
        traces.append(tr)
        # the kept V (and U) draws are read only for the trace above; after it, every caller reads a chain's final
        # model, history and layout (``chain_models``, the released sample, "continue" redraws), never the draws.
        # Drop them so that the runs hold one V per chain instead of rounds/thin of them (memory at paper scale)
        r.samples_V, r.samples_U = [], []
        return r, hst

    runs = [chain(k) for k in range(int(n_chains))]
    res, h0 = runs[0]
    hist = [h0]
    lo, hi = pre.pred_range
    users = np.flatnonzero(pre.kept > 0)
    viol, n_res, info, released = [], 0, {"n_pairs": 0, "min": float("nan"), "max": float("nan")}, 0
    if check_range:
        while True:
            mm = res.model
            info = range_violations(mm.U, mm.V, mm.bu, mm.bi, mm.b0, lo, hi, users=users)
            viol.append(info["n_out"])
            if info["n_out"] == 0 or n_res >= max_resamples or clip_loss:  # clipped loss: no loop needed
                break
            n_res += 1
            if redraw == "fresh":  # an independent draw: the next chain's final state (a new chain when needed)
                if n_res >= len(runs):
                    runs.append(chain(n_res))
                res, hk = runs[n_res]
                released = n_res
                hist.append(hk.assign(resample=n_res))
            else:
                eta_last = float(res.history["eta"].iloc[-1])
                res = sample_sgld(train, epochs=int(resample_rounds), eta0=eta_last, model=res.model,
                                  layout=res.layout, seed=seed + 7919 * n_res, **{**common, "gamma": 0.0})
                hist.append(res.history.assign(resample=n_res))
    trace = pd.concat(traces, ignore_index=True)
    diag = chain_diagnostics(trace) if burn_in > 0 else chain_diagnostics(
        trace[trace.draw > int(rounds) // 2])  # no burn-in phase: the second half of each chain
    model = res.model
    history = pd.concat(hist, ignore_index=True)
    satisfied = bool(check_range and viol and viol[-1] == 0)
    first = "SGLD runs a finite chain: ε holds for the targeted posterior, not for the law of this sample"
    if sampler == "sgld" and mode == "fast":
        size = res.extra.get("noise_table_size") if hasattr(res, "extra") else None
        first += (f"; its noise is read from a Gaussian lookup table of {size} numbers at random offsets (the paper's "
                  "fast SGLD), not fresh draws")
    caveats = [first]
    if not priors_public:
        caveats.append("premise broken: Λ_u, Λ_v (and λ_b) may come from a non-private run on the same data "
                       "(priors_public=False): data-dependent hyper-parameters inside the target, so no ε holds")
    if clip_loss:
        caveats.append("ours: likelihood with the prediction clipped to [r_min − κ, r_max + κ] (bounded by "
                       "construction; a different target than the paper's)")
    elif not satisfied:
        caveats.append("prediction-range constraint (Algorithm 1 lines 5–6) not met or not checked: Theorem 1's "
                       "worst-case bound does not hold for this sample")
    if seed_fixed or pre.seed_was_fixed:
        caveats.append("fixed seed: the trimming or the noise is replayable by anyone who knows the seed "
                       "(a reproducibility choice)")
    if sampler == "gibbs":
        caveats[0] = ("exact block Gibbs runs a finite chain: ε holds for the targeted posterior, not for the law of "
                      "this sample")
    if len(runs) > 1 or len(trace):
        caveats.append(f"diagnostics (split-R̂, ESS, per-draw traces, the models of all {len(runs)} chains) are not "
                       "covered by ε: Theorem 1 covers the one released sample (V, b_j); publishing statistics of "
                       "other chains or intermediate states composes beyond it")
    return PrivateRelease(model.V.copy(), model.bi.copy(), float(model.b0), eps, pre.B, s,
                          np.broadcast_to(np.asarray(Lambda_u, np.float32), (d,)).copy(),
                          np.broadcast_to(np.asarray(Lambda_v, np.float32), (d,)).copy(), float(lam_bias),
                          float(lambda_r), satisfied, n_res, viol,
                          info["n_pairs"], info["min"], info["max"], model, history,
                          step_scale=float(step_scale),
                          privacy=PrivacyRecord(eps, eps if ((satisfied or clip_loss) and priors_public) else None,
                                                seed_used, seed_fixed, tuple(caveats)), loss_clipped=bool(clip_loss),
                          n_chains=len(runs), released_chain=released, redraw=redraw, sampler=sampler,
                          rhat=diag["rhat"],
                          ess=diag["ess"], trace=trace, chain_models=[r.model for r, _ in runs],
                          step_nN=float(h) if sampler == "sgld" else float("nan"))  # Gibbs has no step


def fixed_priors(sgld_result) -> dict:
    """Prior precisions to hold fixed in the private sampler, from a non-private SGLD run (Section 6.6).

    ``Lambda_u``, ``Lambda_v``: the run's final Gibbs-sampled diagonal precisions. ``lam_bias``: the paper has no
    biases; we estimate their precision the same way, as the pooled (n_users + n_items) / Σ b² of the run's last
    sample (our choice; the sampler otherwise fixes λ_b = 1, i.e. a bias prior sd of 1 rating point).
    """
    m = sgld_result.model
    b = np.concatenate([m.bu, m.bi]).astype(np.float64)
    return {"Lambda_u": np.asarray(sgld_result.Lambda_u, np.float32).copy(),
            "Lambda_v": np.asarray(sgld_result.Lambda_v, np.float32).copy(),
            "lam_bias": float(len(b) / max(float(b @ b), 1e-12))}


# ----------------------------------------------------------------------------------------------- accounting


def privacy_accounting(pre: Preprocessed, epsilon: float, model=None) -> pd.DataFrame:
    """One row per user with ≥ 1 training rating: m, kept, w, B_i, eps_i = ε B_i / (2B) (Theorem 2), and — when the
    sampled ``model`` (U, V, biases) is given — the realized weighted squared error L_i = Σ_{j∈Ω_i} w_i (r_ij − r̂_ij)²,
    the log-likelihood ℓ_i = ε L_i / (4B) and the realized personal loss eps_hat_i = 2 ℓ_i (see module docstring)."""
    eps = check_epsilon(epsilon)
    users = np.flatnonzero(pre.kept > 0)
    df = pd.DataFrame({"user": users, "m": pre.m[users], "kept": pre.kept[users], "w": pre.w[users],
                       "B_i": pre.B_i[users]})
    df["eps_i"] = eps * df["B_i"] / (2.0 * pre.B)
    df["eps_i_over_eps"] = df["B_i"] / (2.0 * pre.B)
    if model is not None:
        t = pre.train
        p = model.predict(t.users, t.items).astype(np.float64)
        se = pre.rating_weights.astype(np.float64) * (t.values.astype(np.float64) - p) ** 2
        L = np.bincount(t.users, weights=se, minlength=t.n_users)[users]
        df["L_i"] = L
        df["bound_ok"] = L <= df["B_i"].to_numpy() * (1 + 1e-6)
        df["loglik_i"] = eps * L / (4.0 * pre.B)
        df["eps_hat_i"] = 2.0 * df["loglik_i"]
        df["eps_hat_over_eps"] = L / (2.0 * pre.B)
    return df


def rating_epsilons(pre: Preprocessed, epsilon: float) -> np.ndarray:
    """Per-user rating-level ε: one rating's term of user i is ≤ w_i (Δ+κ)² (range met or loss clipped), so on
    Theorem 1's scale (a user's ≤ B gives ε) changing one of its values costs ε w_i (Δ+κ)² / B. 0 for users without
    ratings."""
    eps = check_epsilon(epsilon)
    c = (pre.delta + pre.kappa) ** 2
    return np.where(pre.kept > 0, eps * np.asarray(pre.w, np.float64) * c / pre.B, 0.0)


def rating_epsilon(pre: Preprocessed, epsilon: float) -> float:
    """The rating-level ε of the release: max over users of :func:`rating_epsilons` = ε max_i w_i (Δ+κ)² / B. With
    B = τ(Δ+κ)² it is ε max_i w_i / τ: the paper's ε/τ when every w_i ≤ 1 (ρ ≤ 1), up to ρ ε/τ otherwise."""
    return float(rating_epsilons(pre, epsilon).max())


def privacy_summary(pre: Preprocessed, epsilon: float, acc: pd.DataFrame | None = None) -> dict:
    """User-level ε, rating-level ε (:func:`rating_epsilon`), B, and quantiles of the personalized losses."""
    eps = check_epsilon(epsilon)
    acc = privacy_accounting(pre, eps) if acc is None else acc
    out = {"epsilon_user": eps, "epsilon_rating": rating_epsilon(pre, eps), "B": pre.B, "B_weights": pre.B_weights,
           "tau": pre.tau, "kappa": pre.kappa, "rho": pre.rho,
           "eps_i_over_eps_median": float(acc["eps_i_over_eps"].median()),
           "eps_i_over_eps_max": float(acc["eps_i_over_eps"].max()),
           "share_users_full_bound": float((acc["B_i"] >= pre.B * (1 - 1e-9)).mean())}
    if "eps_hat_over_eps" in acc:
        out.update({"eps_hat_over_eps_median": float(acc["eps_hat_over_eps"].median()),
                    "eps_hat_over_eps_mean": float(acc["eps_hat_over_eps"].mean()),
                    "eps_hat_over_eps_p90": float(acc["eps_hat_over_eps"].quantile(0.9)),
                    "share_users_within_bound": float(acc["bound_ok"].mean())})
    return out
