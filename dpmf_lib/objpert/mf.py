"""The three scenarios of Hua, Xia, Zhong (2015) as simulations: S1 trusted, S2 untrusted/static, S3 untrusted/dynamic.

Reconstruction choices (the paper leaves them open; each is repeated in the notebooks):

- **Iteration** = one synchronous round of (2)-(3): every participating user updates ``u_i`` from her own ratings, the
  recommender updates every ``v_j`` from the aggregate of the local gradients (what S2/S3 make possible).
- **Gradient weights.** (4)-(5) are sums over an item's raters. With ``gamma = 2^-5`` and thousands of raters per Netflix
  item the summed step diverges (``gamma * 2 * lambda_max(sum_i u_i u_i^T) >> 2``). We use the mean (``1/k_j`` for item
  ``j`` with ``k_j`` raters in the data, ``1/n_i`` for user ``i``): this is the perturbed objective (6) with the
  undefined ``1/M`` replaced by per-item weights ``1/k_j``. Theorem 1's argument is unchanged — the stationarity
  condition (7) ``eta_j - 2 sum_i u_i (r_ij - u_i^T v_j) = -2 mu k_j v_j`` is the same on D and D' because ``k_j`` does not
  depend on rating values. ``grad_weights="sum"`` gives the literal (4)-(5).
- **||u_i|| <= 1** is enforced by projecting every updated ``u_i`` onto the unit ball (``max_norm=1``): the sensitivity
  bound ``||eta_q - eta'_q|| = 2 ||u_p|| |r_pq - r'_pq| <= 2 Delta`` in the proof of Theorem 1 needs it. Initial rows of U
  and V are uniformly random unit vectors (Sec. 3.1).
- **S1**: ``iterations`` rounds of non-private MF give ``U``; then V is re-optimised with U fixed on (6). Default
  ``reopt="exact"``: the per-item ridge system ``(sum_i u_i u_i^T + mu k_j I) v_j = sum_i u_i r_ij - eta_j / 2`` — the
  exact minimiser that Theorem 1 is about (normal equations built by a segment sum over the ratings grouped by item,
  :func:`~dpmf_lib.objpert.kernels.item_gram_nb`). ``reopt="gd"`` (kept, labelled, NOT covered by Theorem 1):
  ``reopt_iters`` (default: the same number) gradient rounds from ``V(T)``; that V still carries most of the
  non-private V(T) and understates S1's error, so its result has ``epsilon_effective = None``. ``eta_j``: norm-Gamma
  (Theorem 1) or per-coordinate Laplace (Lemma 1), ``noise_law``.
- **S2**: every round adds ``eta_j`` (fixed; the sum of the users' Theorem-2 shares) and a fresh ``rho~_j(t)`` (the sum
  of fresh shares, per-coordinate Laplace(2 Delta sqrt(d)/eps)) to the aggregate of item ``j`` (update (9), with the sign
  of gradient *descent*: the paper's "+gamma(...)" in (9) is a typo against (3)).
  The simulation draws the sums directly ("aggregate" path): the sum of ``k`` shares has exactly the same law, and the
  masked aggregation is exact (both are tested; :mod:`dpmf_lib.objpert.protocol` runs the explicit protocol).
- **S3**: before round 1 every user is online with probability ``p_join`` (all start offline and get one chance to
  join); after each round online users leave with ``p_leave`` and offline users join with ``p_join``; each round the
  recommender picks at most ``max_online`` online users uniformly. Only items with a participating rater are updated;
  the aggregate carries the fixed ``eta_j`` (initialisation phase with the beta/alpha masks) plus a fresh ``rho~_j(t)``.
- **Error metric**: ``|r'_ij - r_ij|`` over the training ratings R (Sec. 5), predictions ``u_i^T v_j`` not clipped.
- **W-scaled noise** (``noise_scale="w_scaled"``, a labelled variant, NOT covered by Theorem 1): every noise vector that
  enters the objective or an aggregate (S1's ``eta_j``; S2/S3's ``eta_j + rho~_j(t)``) is divided by
  ``W = |R|`` (the number of ratings, Sec. 3) while the data term keeps its weights. It is one reading of the
  ``1/M`` in front of ``sum_j eta_j^T v_j`` in (6) applied to the noise only; it reproduces the paper's "negligible"
  errors, but the stationarity condition (7) then gives ``||eta_q - eta'_q|| <= 2 Delta W`` and the stated eps does
  not hold (``epsilon_effective = None``, with the reason in ``caveats``). Default ``"theorem1"``: the noise as drawn.

Privacy record (for a ledger): ``run_s1/2/3`` return a :class:`ScenarioResult` — the ``{T: summary}`` dict with a
``privacy`` attribute: ``epsilon_stated`` (the paper's ε; None: non-private), ``epsilon_effective`` (the ε that holds
for what ran, or None with the reason in ``caveats``), ``seed_used``, ``seed_was_fixed``. S1 exact: Theorem 1's ε for V
given U would hold for an idealised release; as run, U is non-private MF on the same ratings, so None. S1 gd: None
(not the minimiser). S2/S3: None — the stated ε is per round: every round releases an aggregate
with fresh noise ``rho~_j(t)`` (and the fixed ``eta_j``), and T rounds compose to more than ε; the composition is not
accounted here. Seeds: ``seed=None`` (the default) draws fresh OS entropy; an int reproduces (and replays) the noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import validate
from ..errors import ParameterError
from ..metrics import rms
from ..privacy.common import PrivacyRecord, resolve_seed
from . import noise as nz
from .kernels import abs_errors_nb, item_gram_nb, item_gram_reference, mf_round_nb, mf_round_reference

#: |error| values at which the CDF is kept: 0..5 in steps of 0.01 (the paper's axis) and a log grid 1e-3..1e5, so the
#: CDFs of runs with errors in the hundreds (the paper's noise scale) are visible on a log axis
CDF_GRID = np.unique(np.round(np.concatenate([np.linspace(0.0, 5.0, 501), np.geomspace(1e-3, 1e5, 321)]), 6))


@dataclass(frozen=True)
class HuaConfig:
    d: int = 50
    gamma: float = 2.0 ** -5
    lam: float = 0.001
    mu: float = 0.001
    max_norm: float = 1.0  # ||u_i|| <= 1 (Theorem 1's proof); inf disables the projection
    grad_weights: str = "mean"  # "mean" (1/k_j, 1/n_i) or "sum" (literal (4)-(5))
    noise_law: str = "norm_gamma"  # S1's eta: "norm_gamma" (Theorem 1) or "laplace" (Lemma 1)
    reopt: str = "exact"  # S1: "exact" (per-item ridge solve, Theorem 1) or "gd" (reopt_iters rounds; not Theorem 1)
    reopt_iters: int | None = None  # S1, reopt="gd": None = same as the MF iterations
    kernel: str = "numba"  # "numba" or "numpy" (reference)
    noise_scale: str = "theorem1"  # "theorem1" (eta as drawn) | "w_scaled" (eta / W, W = |R|: NOT covered by Theorem 1)

    def __post_init__(self):
        validate.integer(self.d, "d")
        for name in ("gamma", "lam", "mu"):
            validate.positive(getattr(self, name), name)
        if not (self.max_norm > 0):
            raise ParameterError(f"parameter 'max_norm' must be > 0 (inf: no projection), got {self.max_norm!r}")
        choices = {"grad_weights": ("mean", "sum"), "noise_law": ("norm_gamma", "laplace"), "reopt": ("gd", "exact"),
                   "kernel": ("numba", "numpy"), "noise_scale": ("theorem1", "w_scaled")}
        for name, ok in choices.items():
            if getattr(self, name) not in ok:
                raise ParameterError(f"parameter '{name}' must be one of {ok}, got {getattr(self, name)!r}")

    @classmethod
    def from_params(cls, p: dict) -> "HuaConfig":
        keys = ("d", "gamma", "lam", "mu", "max_norm", "grad_weights", "noise_law", "reopt", "reopt_iters", "kernel",
                "noise_scale")
        return cls(**{k: (float(p[k]) if k == "max_norm" else p[k]) for k in keys if k in p})


@dataclass
class Problem:
    """A ratings set prepared for the kernels (user CSR, weights, rating triples)."""

    users: np.ndarray
    items: np.ndarray
    values: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    csr_values: np.ndarray
    n_users: int
    n_items: int
    delta: float
    label: str = ""
    user_counts: np.ndarray = field(default=None)
    item_counts: np.ndarray = field(default=None)

    @classmethod
    def from_ratings(cls, r) -> "Problem":
        csr = r.user_csr()
        lo, hi = r.rating_scale
        return cls(r.users, r.items, r.values, csr.indptr, csr.indices, csr.values, r.n_users, r.n_items,
                   float(hi - lo), r.source.label, r.user_counts(), r.item_counts())

    def weights(self, cfg: HuaConfig) -> tuple[np.ndarray, np.ndarray]:
        if cfg.grad_weights == "sum":
            return np.ones(self.n_users, np.float32), np.ones(self.n_items, np.float32)
        return ((1.0 / np.maximum(self.user_counts, 1)).astype(np.float32),
                (1.0 / np.maximum(self.item_counts, 1)).astype(np.float32))


def noise_factor(prob: Problem, cfg: HuaConfig) -> float:
    """What every noise vector is multiplied by: 1 (``theorem1``) or ``1 / W`` with ``W = |R|`` the number of ratings
    (``w_scaled``: the labelled variant that is not covered by Theorem 1, module docstring)."""
    return 1.0 / max(len(prob.values), 1) if cfg.noise_scale == "w_scaled" else 1.0


def unit_rows(n: int, d: int, rng) -> np.ndarray:
    """``n`` uniformly random unit vectors in R^d (float32)."""
    g = validate.generator(rng, "rng").standard_normal((n, d))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    return np.ascontiguousarray(g, dtype=np.float32)


def init_factors(prob: Problem, d: int, seed) -> tuple[np.ndarray, np.ndarray]:
    """U(0), V(0) with uniformly random unit-norm rows (Sec. 3.1); the same seed gives the same start in every scenario."""
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 1]))
    return unit_rows(prob.n_users, d, rng), unit_rows(prob.n_items, d, rng)


def mf_round(prob: Problem, cfg: HuaConfig, U, V, participants, item_noise, uw, iw, *, users=True, items=True):
    fn = mf_round_nb if cfg.kernel == "numba" else mf_round_reference
    return fn(prob.indptr, prob.indices, prob.csr_values, participants, U, V, uw, iw, item_noise,
              float(cfg.gamma), float(cfg.lam), float(cfg.mu), bool(users), bool(items), float(cfg.max_norm))


def abs_errors(prob: Problem, U, V) -> np.ndarray:
    return abs_errors_nb(prob.users, prob.items, prob.values, U, V)


def summarize(err: np.ndarray) -> dict:
    """Mean/median/RMSE/p90 of |error| and its CDF on :data:`CDF_GRID` (compact enough to cache)."""
    e = np.sort(np.asarray(err, dtype=np.float64))
    if not np.all(np.isfinite(e)):
        e = np.where(np.isfinite(e), e, np.inf)
    cdf = np.searchsorted(e, CDF_GRID, side="right") / max(len(e), 1)
    finite = e[np.isfinite(e)]
    return {"mean": float(np.mean(e)) if np.all(np.isfinite(e)) else float("inf"),
            "median": float(np.median(e)), "rmse": rms(finite) if len(finite) else float("nan"),
            "p90": float(np.quantile(e, 0.9)), "cdf": cdf.astype(np.float32)}


#: a checkpoint whose mean |error| exceeds this many times the rating range (times 1 + 2d/ε, the noise's reach, for a
#: private run) has diverged: the runs at stable step sizes stay below 3x (non-private) and 0.1x (private, ML-100K,
#: d 8 and 50, γ ≤ 1, ε ≥ 0.05, up to 100 rounds); past the V update's stability limit (γ·(max_norm² + μ) > 1 with
#: mean weights) the error grows geometrically (γ = 2: 1e9 after 40 rounds; γ = 50: S2 at ε = 1 700x after 3 rounds,
#: 1e8 after 5)
DIVERGED_AT = 100.0


def require_converging(summary: dict, scenario: str, T: int, prob: "Problem", cfg: HuaConfig, eps=None) -> None:
    """Raise :class:`ParameterError` naming ``gamma`` when a checkpoint's errors are not finite or have exploded
    (:data:`DIVERGED_AT`); reads the summary only."""
    mean = summary["mean"]
    reach = prob.delta * (1.0 if eps is None else 1.0 + 2.0 * cfg.d / eps)
    if math.isfinite(mean) and mean <= DIVERGED_AT * reach:
        return
    what = "not finite" if not math.isfinite(mean) else f"{mean:.3g} on ratings spanning {prob.delta:g}"
    raise ParameterError(f"{scenario} diverged by iteration {T} (mean |error| {what}): the step size is too large — "
                         f"lower gamma (now {cfg.gamma:g}; with grad_weights 'mean' the V update is stable only for "
                         f"gamma·(max_norm² + mu) < 1, far smaller with 'sum')")


class DivergenceWatch:
    """Every round's check for the slow divergence the checkpoints miss: past the V update's stability limit by a
    little (gamma = 1.05-1.2 with mean weights) a few items' v_j grow geometrically while the mean |error| stays at
    10-20 stars for a hundred rounds (and the runs at the paper's settings reach thousands of stars legitimately).

    The rule reads only what the noise cannot change. With U fixed, a round maps v_j to
    ``(I - 2 gamma (A_j + mu I)) v_j + (data and noise terms)``, ``A_j = w_j sum_{i rates j} u_i u_i^T``: the noise is
    added, never multiplied, so the noise-free part expands only where ``gamma (lambda_max(A_j) + mu) > 1``. Since
    ``lambda_max(A_j) <= tr(A_j) <= max_norm²`` (mean weights; ``k_j max_norm²`` with sums), a config with
    ``gamma (max_norm² + mu) <= 1`` cannot expand whatever the noise: the watch is off and costs nothing (the
    paper's gamma = 2^-5, max_norm = 1: 0.031). Otherwise, each round, a run has diverged when the current U makes
    the update expanding (``gamma (max_j tr(A_j) + mu) > 1``) and the largest |error| on the training ratings is past
    :data:`DIVERGED_AT` times the rating range (times the noise's reach for a private run, as in
    :func:`require_converging`) for :data:`OVER_FOR` consecutive rounds; or when U or V is not finite."""

    OVER_FOR = 3

    def __init__(self, prob: "Problem", cfg: HuaConfig, scenario: str, eps=None):
        self.prob, self.cfg, self.scenario, self.eps = prob, cfg, scenario, eps
        widest = cfg.max_norm ** 2 * (1.0 if cfg.grad_weights == "mean" else float(np.max(prob.item_counts, initial=1)))
        self.active = cfg.gamma * (widest + cfg.mu) > 1.0
        self.bound = DIVERGED_AT * prob.delta * (1.0 if eps is None else 1.0 + 2.0 * cfg.d / eps)
        self.over = 0

    def check(self, U, V, t: int, iw) -> None:
        """After round ``t`` (``iw``: the item weights the round used)."""
        if not self.active:
            return
        if not (np.isfinite(U).all() and np.isfinite(V).all()):
            self._raise(t, "U or V is not finite")
        prob = self.prob
        sq = np.einsum("id,id->i", U, U, dtype=np.float64)
        trace = np.asarray(iw, np.float64) * np.bincount(prob.items, weights=sq[prob.users], minlength=prob.n_items)
        widest = float(trace.max(initial=0.0))
        worst = float(abs_errors(prob, U, V).max(initial=0.0))
        if self.cfg.gamma * (widest + self.cfg.mu) > 1.0 and worst > self.bound:
            self.over += 1
        else:
            self.over = 0
        if self.over >= self.OVER_FOR:
            self._raise(t, f"largest |error| {worst:.3g} on ratings spanning {prob.delta:g} for {self.over} rounds, while "
                           f"the V update expands: gamma·(mean ||u||² of an item's raters + mu) = "
                           f"{self.cfg.gamma * (widest + self.cfg.mu):.3g} > 1")

    def _raise(self, t: int, what: str):
        raise ParameterError(f"{self.scenario} diverged by iteration {t} ({what}): the step size is too large "
                             f"— lower gamma (now {self.cfg.gamma:g}; with grad_weights 'mean' the V update is stable "
                             f"only for gamma·(max_norm² + mu) < 1, far smaller with 'sum')")


def _checkpoints(iterations) -> list[int]:
    its = sorted({int(t) for t in (iterations if isinstance(iterations, (list, tuple, np.ndarray)) else [iterations])})
    if not its or its[0] < 0:
        raise ParameterError(f"parameter 'iterations' must be non-negative integers, got {iterations!r}")
    return its


def _streams(seed):
    ss = np.random.SeedSequence([int(seed), 2])
    return [np.random.default_rng(s) for s in ss.spawn(3)]  # noise, protocol/selection, dynamics


def train_mf(prob: Problem, cfg: HuaConfig, iterations, seed=0, *, states: bool = False):
    """Non-private MF (the paper's baseline): ``{T: summary}`` (and ``{T: (U, V)}`` copies when ``states``)."""
    its = _checkpoints(iterations)
    U, V = init_factors(prob, cfg.d, seed)
    uw, iw = prob.weights(cfg)
    parts = np.arange(prob.n_users, dtype=np.int32)
    zero = np.zeros((prob.n_items, cfg.d), np.float32)
    out, st = {}, {}
    t = 0
    watch = DivergenceWatch(prob, cfg, "the non-private MF")
    for T in its:
        while t < T:
            mf_round(prob, cfg, U, V, parts, zero, uw, iw)
            t += 1
            watch.check(U, V, t, iw)
        out[T] = summarize(abs_errors(prob, U, V))
        require_converging(out[T], "the non-private MF", T, prob, cfg)
        if states:
            st[T] = (U.copy(), V.copy())
    return (out, st) if states else out


def item_gram(prob: Problem, U, kernel: str = "numba"):
    """``(A, b)``: ``A[j] = sum_i u_i u_i^T``, ``b[j] = sum_i u_i r_ij`` over the raters of each item (float64)."""
    if kernel == "numpy":
        return item_gram_reference(prob.users, prob.items, prob.values, U, prob.n_items)
    order = np.argsort(prob.items, kind="stable")
    iptr = np.zeros(prob.n_items + 1, dtype=np.int64)
    np.cumsum(np.bincount(prob.items, minlength=prob.n_items), out=iptr[1:])
    d = U.shape[1]
    A = np.zeros((prob.n_items, d, d))
    b = np.zeros((prob.n_items, d))
    item_gram_nb(iptr, np.ascontiguousarray(prob.users[order]), np.ascontiguousarray(prob.values[order]),
                 np.ascontiguousarray(U, dtype=np.float32), A, b)
    return A, b


def s1_reoptimize(prob: Problem, cfg: HuaConfig, U, V, eta, iters: int, eps=None):
    """V minimising (6) with U fixed: the exact ridge solve (``exact``) or ``iters`` V-only gradient rounds from
    ``V`` (``gd``, which is not the minimiser)."""
    uw, iw = prob.weights(cfg)
    V = V.copy()
    if cfg.reopt == "exact":
        d = cfg.d
        A, b = item_gram(prob, U, cfg.kernel)
        reg = cfg.mu * (np.ones(prob.n_items) if cfg.grad_weights == "sum" else prob.item_counts.astype(np.float64))
        A += reg[:, None, None] * np.eye(d)[None]
        rhs = b - 0.5 * eta.astype(np.float64)
        has = prob.item_counts > 0
        V[has] = np.linalg.solve(A[has], rhs[has][:, :, None])[:, :, 0].astype(np.float32)
        return V
    parts = np.arange(prob.n_users, dtype=np.int32)
    noise = np.ascontiguousarray(eta, dtype=np.float32)
    Uc = U.copy()
    watch = DivergenceWatch(prob, cfg, "S1's V re-optimisation", eps)
    for t in range(int(iters)):
        mf_round(prob, cfg, Uc, V, parts, noise, uw, iw, users=False)
        watch.check(Uc, V, t + 1, iw)
    return V


class ScenarioResult(dict):
    """``{T: summary}`` of one scenario run, with ``privacy`` (the run's privacy record, module docstring) and, when
    asked for with ``keep_factors=True``, ``factors`` ``{T: (U, V)}`` (copies at each checkpoint)."""

    def __init__(self, *args, privacy: dict | None = None, factors: dict | None = None, **kw):
        super().__init__(*args, **kw)
        self.privacy = dict(privacy or {})
        self.factors = dict(factors or {})


def _eps_or_none(eps):
    """The checked ε of a scenario (None: non-private)."""
    return validate.epsilon(eps, "eps", allow_none=True)


def _privacy(scenario: str, eps, cfg: HuaConfig, seed_used, fixed) -> dict:
    caveats, effective = [], None
    if eps is None:
        caveats.append("non-private run (eps None)")
    else:
        if fixed:
            caveats.append("fixed seed: the noise is replayable by anyone who knows it (reproducibility choice)")
        if not (cfg.max_norm <= 1.0):
            caveats.append("max_norm > 1: the sensitivity bound of Theorem 1 (||u_i|| <= 1) does not hold")
        if cfg.noise_scale == "w_scaled":
            caveats.append("W-scaled noise (not covered by Theorem 1): the noise is divided by W = |R| while the data "
                           "term is not, so ||eta_q - eta'_q|| <= 2 Delta W and the stated eps does not hold")
        if scenario == "s1":
            if cfg.reopt != "exact":
                caveats.append("reopt='gd': V after finite gradient rounds from the non-private V(T) is not the "
                               "minimiser of (6) that Theorem 1 covers")
            else:  # Theorem 1 is about V given a U that does not depend on the ratings: none holds here
                caveats.append("premise broken: Theorem 1 covers V given a fixed U; here U is non-private MF on the "
                               "same ratings and V = A(U)^-1 (b(U) - eta/2) depends on it, so no eps holds "
                               "(eps would hold for an idealised release with U independent of the ratings)")
        else:
            caveats.append("eps is per round: every round releases an aggregate with fresh noise rho~_j(t) (plus "
                           "the fixed eta_j); T rounds compose to more than eps (composition not accounted here)")
    return {"scenario": scenario, **PrivacyRecord(eps, effective, seed_used, fixed, tuple(caveats)).to_dict()}


def run_s1(prob: Problem, cfg: HuaConfig, eps, iterations, seed=None, *, keep_factors: bool = False) -> ScenarioResult:
    """S1 (trusted recommender): ``{T: summary}`` for each checkpoint T (MF for T rounds, then V re-optimised on (6)).
    ``eps=None``: no noise. ``seed=None`` (default): fresh OS entropy."""
    eps = _eps_or_none(eps)
    its = _checkpoints(iterations)
    seed, fixed = resolve_seed(seed)
    rng_noise, _, _ = _streams(seed)
    eta = nz.sample_eta(prob.n_items, cfg.d, eps, prob.delta, cfg.noise_law, rng_noise, np.float32)
    if cfg.noise_scale != "theorem1":
        eta = (eta * np.float32(noise_factor(prob, cfg))).astype(np.float32)
    _, states = train_mf(prob, cfg, its, seed, states=True)
    out = ScenarioResult(privacy=_privacy("s1", eps, cfg, seed, fixed))
    for T in its:
        U, V = states[T]
        V2 = s1_reoptimize(prob, cfg, U, V, eta, T if cfg.reopt_iters is None else cfg.reopt_iters, eps)
        out[T] = summarize(abs_errors(prob, U, V2))
        require_converging(out[T], "S1", T, prob, cfg, eps)
        if keep_factors:
            out.factors[T] = (U.copy(), V2.copy())
    return out


def run_s2(prob: Problem, cfg: HuaConfig, eps, iterations, seed=None, *, keep_factors: bool = False) -> ScenarioResult:
    """S2 (untrusted recommender, static users): every round adds ``eta_j + rho~_j(t)`` to the item aggregates —
    ``eta_j`` drawn once, ``rho~_j(t)`` fresh every round (Sec. 4.2: "should be re-sampled during each iteration")."""
    eps = _eps_or_none(eps)
    its = _checkpoints(iterations)
    seed, fixed = resolve_seed(seed)
    rng_noise, _, _ = _streams(seed)
    m, d = prob.n_items, cfg.d
    eta = nz.item_laplace_via_shares(m, d, eps, prob.delta, rng_noise, np.float32)
    U, V = init_factors(prob, d, seed)
    uw, iw = prob.weights(cfg)
    parts = np.arange(prob.n_users, dtype=np.int32)
    out, t = ScenarioResult(privacy=_privacy("s2", eps, cfg, seed, fixed)), 0
    watch = DivergenceWatch(prob, cfg, "S2", eps)
    for T in its:
        while t < T:
            rho = nz.item_laplace_via_shares(m, d, eps, prob.delta, rng_noise, np.float32)
            mf_round(prob, cfg, U, V, parts, _scaled(eta + rho, prob, cfg), uw, iw)
            t += 1
            watch.check(U, V, t, iw)
        out[T] = summarize(abs_errors(prob, U, V))
        require_converging(out[T], "S2", T, prob, cfg, eps)
        if keep_factors:
            out.factors[T] = (U.copy(), V.copy())
    return out


def _scaled(noise: np.ndarray, prob: Problem, cfg: HuaConfig) -> np.ndarray:
    """The aggregate noise as it enters a round: unchanged (``theorem1``, bit-identical to before) or divided by W."""
    if cfg.noise_scale == "theorem1":
        return np.ascontiguousarray(noise)
    return np.ascontiguousarray(noise * np.float32(noise_factor(prob, cfg)), dtype=np.float32)


def _slots(prob: Problem, parts: np.ndarray) -> np.ndarray:
    if not len(parts):
        return np.zeros(0, dtype=np.int64)
    return np.concatenate([np.arange(prob.indptr[i], prob.indptr[i + 1]) for i in parts])


class OnlineUsers:
    """Join/leave dynamics of S3 and the recommender's choice of at most ``max_online`` participants per round."""

    def __init__(self, n_users: int, p_join: float, p_leave: float, max_online: int, rng: np.random.Generator):
        for name, p in (("p_join", p_join), ("p_leave", p_leave)):
            if not (0.0 <= p <= 1.0):
                raise ParameterError(f"parameter '{name}' must be a probability in [0, 1], got {p!r}")
        if int(max_online) < 1:
            raise ParameterError(f"parameter 'max_online' must be >= 1, got {max_online!r}")
        self.n, self.p_join, self.p_leave, self.cap, self.rng = n_users, p_join, p_leave, int(max_online), rng
        self.online = rng.random(n_users) < p_join  # everybody starts offline and gets one chance to join

    def participants(self) -> np.ndarray:
        idx = np.flatnonzero(self.online)
        if len(idx) > self.cap:
            idx = np.sort(self.rng.choice(idx, size=self.cap, replace=False))
        return idx.astype(np.int32)

    def step(self) -> None:
        on = np.flatnonzero(self.online)
        off = np.flatnonzero(~self.online)
        leave = self.rng.binomial(len(on), self.p_leave) if len(on) else 0
        join = self.rng.binomial(len(off), self.p_join) if len(off) else 0
        if leave:
            self.online[self.rng.choice(on, size=leave, replace=False)] = False
        if join:
            self.online[self.rng.choice(off, size=join, replace=False)] = True


def run_s3(prob: Problem, cfg: HuaConfig, eps, iterations, seed=None, *, p_join=0.005, p_leave=0.01,
           max_online=100, item_weight: str = "all_raters", trace: list | None = None,
           keep_factors: bool = False) -> ScenarioResult:
    """S3 (untrusted recommender, dynamic users): ``{T: summary}``; ``trace`` (a list) receives per-round counts.
    ``eta_j`` is fixed in the initialisation phase and NOT redrawn ("eta_j no longer varies in different iterations",
    Sec. 4.3); ``rho~_j(t)`` is fresh every round."""
    eps = _eps_or_none(eps)
    its = _checkpoints(iterations)
    seed, fixed = resolve_seed(seed)
    rng_noise, _, rng_dyn = _streams(seed)
    m, d = prob.n_items, cfg.d
    eta = nz.item_laplace_via_shares(m, d, eps, prob.delta, rng_noise, np.float32)  # fixed in the initialisation
    U, V = init_factors(prob, d, seed)
    uw, iw = prob.weights(cfg)
    if item_weight not in ("all_raters", "participants"):
        raise ParameterError(f"parameter 's3_item_weight' must be 'all_raters' or 'participants', got {item_weight!r}")
    dyn = OnlineUsers(prob.n_users, p_join, p_leave, max_online, rng_dyn)
    out, t = ScenarioResult(privacy=_privacy("s3", eps, cfg, seed, fixed)), 0
    watch = DivergenceWatch(prob, cfg, "S3", eps)
    for T in its:
        while t < T:
            parts = dyn.participants()
            rho = nz.item_laplace_via_shares(m, d, eps, prob.delta, rng_noise, np.float32)
            if item_weight == "participants":
                kp = np.bincount(prob.indices[_slots(prob, parts)], minlength=m)
                iw = (1.0 / np.maximum(kp, 1)).astype(np.float32)
            touched = mf_round(prob, cfg, U, V, parts, _scaled(eta + rho, prob, cfg), uw, iw)
            if trace is not None:
                trace.append((t, int(dyn.online.sum()), len(parts), int(touched.sum())))
            dyn.step()
            t += 1
            watch.check(U, V, t, iw)
        out[T] = summarize(abs_errors(prob, U, V))
        require_converging(out[T], "S3", T, prob, cfg, eps)
        if keep_factors:
            out.factors[T] = (U.copy(), V.copy())
    return out
