"""Item-item probabilistic NBM (the paper's reference [29], item-item instance), its two DP trainers, and the baselines.

Public API (all seeded; ε ≤ 0 / NaN raise :class:`~dpmf_lib.errors.ParameterError`):
- :func:`prepare` → :class:`NBMData` (user CSR, centred ratings, item means);
- :func:`predict`, :func:`rmse`; :func:`knn_rmse` (non-private PCC / COS baselines);
- :func:`train_pnbm` — SGD (4)-(5), noise-free (``epsilon=None``) or DPSGD-PNBM (Algorithm 1, reconstructed);
- :func:`train_pnbm_clipped` — DPSGD-PNBM with per-user L1 clipping and noise calibrated to it (ours, DP-valid);
- :func:`sample_pnbm` — SGLD (11), non-private (``epsilon=None``) or DPPS-PNBM (Algorithm 2, reconstructed);
- :func:`train_dpsgd_mf` — DPSGD-MF baseline (Berlioz et al. 2015, the paper's [4]).

Algorithm 1 (DPSGD-PNBM) as reconstructed here — the paper's algorithm box is missing, every line is our choice guided
by section 3:
  0. preprocessing: train only on the ratings of users with > 20 training ratings (``min_user_ratings``);
  1. S ← β S⁰,  S⁰_ij ~ U(0, ``init_high``) i.i.d. for i ≠ j, S_ii = 0 (data-independent, so the start leaks nothing;
     ``init="pcc"`` starts from β·PCC instead — NOT private, for the non-private comparison only);
  2. for t = 1..K:
  3.   Φ ← L = round(γ 𝓛) ratings drawn uniformly without replacement from the preprocessed training set;
  4.   G ← Σ_{(u,i)∈Φ} e_ui ∂r̂_ui/∂S with |e| ≤ 0.5 + (φ-1)/(t+1), |c_uj - p sgn(s_ij)| ≤ φ, |S_i| I_u ≥ C (kernels.py);
  5.   b_t ← ΔF^(t)/ε^(t) = 2(0.5 + (φ-1)/(t+1)) φ/C · Kγ/ε;
  6.   G ← G + Lap(0, b_t) on every off-diagonal entry of the M×M gradient (entries outside u's neighbours included,
       so the support of the noise does not depend on the data);
  7.   S ← S - η (β G + λ S)  (the gradient is up-scaled by β, undoing the 1/β shrink of eq. 5 under rescaling);
  8. release S (predictions use it with each user's own training ratings).
The neighbour set of (u, i) is the N_k rated items with the largest current |s_ij|. Item means r̄_i come from the
training fold without noise (the paper does not privatise them either). Caveat (stated in the notebooks): the paper's
ΔF bounds one gradient *entry* of one rating; a rating r_uj also enters the predictions of u's other items as a
neighbour, and a row of G has many entries, so the L1 sensitivity of the released gradient is larger than ΔF. We
implement the paper's noise scale as stated and report its ε as the paper defines it.

Algorithm 2 (DPPS-PNBM) as reconstructed here:
  0. trim every user to ≤ τ random training ratings; B = (r_max - r_min)² τ; κ = min(1, ε/(4B));
  1. S ← S⁰ (as above with β = 1); H_ij = P(items i and j both in Φ) for minibatches of L draws with replacement;
  2. for t = 1..T: η_t = η_1 t^(-ξ);  Φ ← L ratings drawn with replacement;
  3.   S ← S - (η_t/2) κ (𝓛/L Σ_Φ g_ui + λ S ∘ H⁻¹ ∘ 𝕀[i, j ∈ Φ]) + z_t,  z_t ~ N(0, ϱ η_t) on every off-diagonal entry;
  4. release S^(T) (one sample).
g_ui is the gradient of the clipped loss ½(clip(r̂, r_min, r_max) − r)² — each squared error is then ≤ (r_max − r_min)²,
the bound B the privacy argument assumes — i.e. e ∂r̂/∂S while r̂ is in the range and 0 outside it, so the chain
targets the posterior whose log-likelihood B bounds (the paper states the bound but no clip; the clipped error times
the unclipped derivative would be the gradient of no loss). Model (2) without the C bound (C = 0).

Temperature ϱ (our choice, stated because it decides which ε holds): ϱ multiplies the step size of drift AND noise
alike, i.e. step 3 runs with η_t' = ϱ η_t: S ← S - (ϱη_t/2) κ (...) + N(0, ϱ η_t). That is the paper's literal "multiply
the step size by ϱ" and keeps its grids ϱ ∈ {0.001, 0.006, 0.09} runnable; the target stays the (ε/(4B))-scaled
posterior, so the sample is ε-DP (as far as the posterior argument goes). The other reading — ϱ on the noise
variance only, Liu et al.'s temperature — would target the (ε/ϱ)-posterior (167 × the stated ε at ϱ = 0.006), so it is
not offered. Consequence for the grids: at a fixed η₁ the chain moves ϱ times less far per step.

Every result carries the stated ``epsilon``, ``epsilon_effective`` (see :class:`PNBMResult`), the seed policy
(``seed_used``, ``seed_was_fixed``; ``seed=None`` — the default — draws fresh OS entropy, an int reproduces and makes
the noise replayable) and ``privacy_caveats``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from .. import metrics, validate
from ..data.ratings import Ratings, require_ratings
from ..errors import ParameterError
from ..privacy.common import PrivacyRecord, WithPrivacyRecord, seeded
from . import accounting as acc
from .data import trim_to_tau, users_with_more_than
from .kernels import (clipped_grad_kernel, dpsgd_step_kernel, draw_key, grad_kernel, mf_epoch_kernel, mf_predict_kernel,
                      predict_kernel, sgld_step_batch_kernel, sgld_update_kernel)
from .similarity import cosine, item_means, pcc


@dataclass(frozen=True)
class NBMData:
    """Training ratings in the kernels' layout: user CSR (int64 indptr, int32 items), centred float32 values."""

    uptr: np.ndarray
    uitems: np.ndarray
    uvals: np.ndarray
    ucent: np.ndarray
    rbar: np.ndarray
    n_users: int
    n_items: int
    rating_scale: tuple[float, float]


def prepare(train: Ratings, rbar: np.ndarray | None = None) -> NBMData:
    if train.n_ratings == 0:
        raise ParameterError("the training set is empty")
    csr = train.user_csr()
    rbar = item_means(train) if rbar is None else np.ascontiguousarray(rbar, dtype=np.float32)
    cent = np.ascontiguousarray(csr.values - rbar[csr.indices], dtype=np.float32)
    return NBMData(csr.indptr, csr.indices, csr.values, cent, rbar, train.n_users, train.n_items, train.rating_scale)


def _check_nk(Nk):
    return validate.integer(Nk, "Nk", what="the neighbourhood (neighbour size)")


def predict(S: np.ndarray, data: NBMData, test: Ratings, *, Nk: int, C: float = 0.0) -> np.ndarray:
    """Clipped predictions (eq. 2) for the test pairs from each user's training ratings in ``data``."""
    S = np.ascontiguousarray(S, dtype=np.float32)
    if S.shape != (data.n_items, data.n_items):
        raise ParameterError(f"similarity matrix has shape {S.shape}, expected {(data.n_items, data.n_items)}")
    out = np.empty(test.n_ratings, dtype=np.float32)
    lo, hi = data.rating_scale
    predict_kernel(S, data.uptr, data.uitems, data.ucent, data.rbar, test.users, test.items, _check_nk(Nk),
                   float(C), float(lo), float(hi), out)
    return out


def rmse(pred: np.ndarray, test: Ratings) -> float:
    """RMSE of predictions for the pairs of ``test`` (:func:`dpmf_lib.metrics.rmse`)."""
    return metrics.rmse(pred, test.values)


def knn_rmse(train: Ratings, test: Ratings, kind: str, Nk: int = 900) -> float:
    """Non-private item-item kNN baseline: similarity ``pcc`` or ``cos``, prediction (2) with C = 0."""
    sims = {"pcc": pcc, "cos": cosine}
    if kind not in sims:
        raise ParameterError(f"unknown similarity '{kind}'; choose one of {sorted(sims)}")
    data = prepare(train)
    return rmse(predict(sims[kind](train), data, test, Nk=Nk, C=0.0), test)


def init_similarity(n_items: int, scale: float, high: float, rng) -> np.ndarray:
    S = (rng.random((n_items, n_items), dtype=np.float32) * np.float32(high * scale)).astype(np.float32)
    np.fill_diagonal(S, 0.0)
    return S


def _group_by_item(items: np.ndarray, users: np.ndarray, vals: np.ndarray, n_items: int):
    order = np.argsort(items, kind="stable")
    bptr = np.zeros(n_items + 1, dtype=np.int64)
    np.cumsum(np.bincount(items, minlength=n_items), out=bptr[1:])
    return bptr, np.ascontiguousarray(users[order]), np.ascontiguousarray(vals[order])


def gradient(S: np.ndarray, data: NBMData, users, items, vals, *, Nk: int, C: float, e_max: float = math.inf,
             f_max: float = math.inf, clip_pred: bool = False, out: np.ndarray | None = None) -> np.ndarray:
    """Σ over the given ratings of e_ui ∂r̂_ui/∂S (eq. 5) with the kernels' clips; float32 M×M.

    ``out``: a zeroed float32 M×M buffer to accumulate into (the fused trainers reuse one; their step kernels zero
    it again); default a new one."""
    bptr, bu, bv = _group_by_item(np.asarray(items, np.int32), np.asarray(users, np.int32),
                                  np.asarray(vals, np.float32), data.n_items)
    G = np.zeros_like(S, dtype=np.float32) if out is None else out
    lo, hi = data.rating_scale
    grad_kernel(np.ascontiguousarray(S, dtype=np.float32), data.uptr, data.uitems, data.ucent, data.rbar, bptr, bu, bv,
                _check_nk(Nk), float(C), float(e_max), float(f_max), float(lo), float(hi), bool(clip_pred), G)
    return G


# caveats every nbm DP method shares (the ledger reads them from the results)
_RBAR_CAVEAT = ("item means r̄_i are computed from the training ratings without noise and enter the release "
                "(the paper does not privatise them either)")


@dataclass
class PNBMResult(WithPrivacyRecord):
    """A trained/sampled similarity matrix with its privacy record.

    ``epsilon_effective``: the ε that holds for what ran, ``None`` when none is established — for DPPS-PNBM ``None``:
    the targeted posterior would be min(ε, 4B)-DP if its likelihood terms were each one user's, but the non-private
    item means r̄ couple every user's term (an exact sample is n·min(ε, 4B)/2-DP at user level: the privacy ledger,
    ``info["epsilon_target"]`` keeps min(ε, 4B)) and the chain is finite; for DPSGD-PNBM ``None``: the Laplace noise
    is calibrated to one gradient entry (the paper's ΔF) while one rating changes many entries of the released
    gradient; for the per-user clipped variant (:func:`train_pnbm_clipped`, ours) the stated ε, which its accounting
    proves (it releases noisy item means). ``privacy_caveats`` lists the reasons."""

    S: np.ndarray
    epsilon: float | None  # the paper's ε (rating level for DPSGD, user level for DPPS); None: non-private
    epsilon_amplified: float | None  # DPSGD: K ln(1 + γ(e^{ε/(Kγ)} - 1)); DPPS: None
    noise_scales: list = field(default_factory=list)  # DPSGD: Laplace b_t per iteration; DPPS: noise sd per step
    history: list = field(default_factory=list)  # (iteration, test RMSE) when a test set was given
    info: dict = field(default_factory=dict)
    privacy: PrivacyRecord | None = None  # None: a record of the stated ε alone


def _dp_training_data(train: Ratings, rbar: np.ndarray, min_user_ratings: int):
    """(all of ``train`` for prediction, the ratings of users with more than ``min_user_ratings`` that DPSGD trains
    on, and those prepared): section 3's "users who have more than 20 ratings"."""
    full = prepare(train, rbar)
    dp_train = users_with_more_than(train, min_user_ratings)
    if dp_train.n_ratings == 0:
        raise ParameterError(f"no user has more than {min_user_ratings} training ratings; lower 'min_user_ratings'")
    return full, dp_train, prepare(dp_train, rbar)


IMPLS = ("fused", "numpy")  # the noise + update path: numba kernels drawing the noise in the kernel, or the reference


def _check_impl(impl):
    if impl not in IMPLS:
        raise ParameterError(f"parameter 'impl' must be one of {IMPLS}, got {impl!r}")
    return impl


def _noisy_step(S, G, b, off, rng, res, *, eta: float, beta: float, lam: float, impl: str = "numpy") -> None:
    """One step of the DPSGD-PNBM trainers (the paper's and the clipped variant): Laplace(b) noise on the
    off-diagonal of the gradient when ``b`` is given (recorded in ``res.noise_scales``), then
    S ← S − η(βG + λS) with the diagonal kept at 0. Updates ``S`` in place.

    ``impl="numpy"`` (the reference): numpy's ``rng.laplace`` on a float64 M×M matrix, then the update in numpy.
    ``impl="fused"``: :func:`~dpmf_lib.nbm.kernels.dpsgd_step_kernel` — one pass, noise drawn in the kernel from a
    counter-based stream keyed by one draw of ``rng`` (same law; different bytes than the reference), G zeroed."""
    if impl == "fused":
        key = draw_key(rng) if b is not None else np.uint64(0)
        dpsgd_step_kernel(S, G, float(b) if b is not None else 0.0, key, float(eta), float(beta), float(lam))
        if b is not None:
            res.noise_scales.append(b)
        return
    if b is not None:
        G += (rng.laplace(0.0, b, size=G.shape) * off).astype(np.float32)
        res.noise_scales.append(b)
    S -= np.float32(eta) * (np.float32(beta) * G + np.float32(lam) * S)
    np.fill_diagonal(S, 0.0)


def train_pnbm(train: Ratings, *, epsilon=None, K: int = 10, eta: float = 0.1, lam: float = 0.05, beta: float = 10.0,
               C: float = 10.0, Nk: int = 500, gamma: float = 1.0, min_user_ratings: int = 20, init: str = "uniform",
               init_high: float = 0.2, seed=None, test: Ratings | None = None, eval_every: int = 0,
               impl: str = "fused") -> PNBMResult:
    """SGD training of the probabilistic NBM; DPSGD-PNBM when ``epsilon`` is a number (Algorithm 1, module doc).

    ``seed=None`` (default): fresh OS entropy; an int reproduces the run (recorded in ``seed_used``). ``impl``:
    ``"fused"`` (default; noise drawn inside the update kernel) or ``"numpy"`` (the reference path) — same law, not
    the same bytes (:func:`_noisy_step`)."""
    _check_impl(impl)
    if epsilon is not None:
        acc.check_epsilon(epsilon)
    for n, v in (("eta", eta), ("beta", beta), ("C", C), ("init_high", init_high)):
        validate.positive(v, n)
    validate.positive(lam, "lam", strict=False)
    acc.epsilon_per_iteration(1.0, K, gamma)  # validates K and gamma
    rng, seed_used, seed_fixed = seeded(seed)
    lo, hi = train.rating_scale
    phi = hi - lo
    rbar = item_means(train)
    full, dp_train, dp = _dp_training_data(train, rbar, min_user_ratings)
    M = train.n_items
    if init == "uniform":
        S = init_similarity(M, beta, init_high, rng)
    elif init == "pcc":
        S = np.ascontiguousarray(beta * pcc(train), dtype=np.float32)
    else:
        raise ParameterError(f"unknown init '{init}'; choose 'uniform' (data-independent) or 'pcc' (not private)")
    n = dp_train.n_ratings
    L = max(1, int(round(gamma * n)))
    eps = None if epsilon is None else float(epsilon)
    caveats = () if epsilon is None else (
        "Laplace noise calibrated to one gradient entry (the paper's ΔF), but one rating changes many entries of "
        "the released gradient (it also enters other predictions as a neighbour): no ε is established",
        _RBAR_CAVEAT)
    res = PNBMResult(S, eps, None if epsilon is None else acc.amplified_epsilon(epsilon, K, gamma),
                     privacy=PrivacyRecord(eps, None, seed_used, seed_fixed, caveats))
    off = None if impl == "fused" else ~np.eye(M, dtype=bool)
    Gbuf = np.zeros((M, M), dtype=np.float32) if impl == "fused" else None  # zeroed again by the step kernel
    t0 = time.perf_counter()
    for t in range(1, K + 1):
        idx = np.sort(rng.choice(n, size=L, replace=False)) if L < n else np.arange(n)
        G = gradient(S, dp, dp_train.users[idx], dp_train.items[idx], dp_train.values[idx], Nk=Nk, C=C,
                     e_max=acc.error_clamp(t, phi), f_max=phi, out=Gbuf)
        b = None if epsilon is None else acc.laplace_scale(t, epsilon, K, gamma, phi, C)
        _noisy_step(S, G, b, off, rng, res, eta=eta, beta=beta, lam=lam, impl=impl)
        if test is not None and eval_every and (t % eval_every == 0 or t == K):
            res.history.append((t, rmse(predict(S, full, test, Nk=Nk, C=C), test)))
    res.S = S
    res.info = {"L": L, "n_train_dp": n, "gamma": gamma, "impl": impl, "seconds": time.perf_counter() - t0}
    if test is not None:
        res.info["rmse"] = rmse(predict(S, full, test, Nk=Nk, C=C), test)
    return res


def clipped_gradient(S: np.ndarray, data: NBMData, users, items, vals, *, Nk: int, C: float, clip_l1: float,
                     e_max: float = math.inf, f_max: float = math.inf, out: np.ndarray | None = None):
    """(G, norms): Σ_u min(1, clip_l1/‖g_u‖₁) g_u over the users of the given ratings, g_u = Σ of u's e ∂r̂/∂S
    (eq. 5 with the kernels' clips); norms[u] = ‖g_u‖₁ before the clip. Kernel: kernels.clipped_grad_kernel."""
    validate.positive(clip_l1, "clip_l1")
    users = np.asarray(users, np.int32)
    items = np.asarray(items, np.int32)
    order = np.lexsort((items, users))  # grouped by user, items sorted within a user (the kernel sums duplicates)
    bptr = np.zeros(data.n_users + 1, dtype=np.int64)
    np.cumsum(np.bincount(users, minlength=data.n_users), out=bptr[1:])
    G = np.zeros((data.n_items, data.n_items), dtype=np.float32) if out is None else out  # out: zeroed, reused
    norms = np.zeros(data.n_users, dtype=np.float64)
    clipped_grad_kernel(np.ascontiguousarray(S, dtype=np.float32), data.uptr, data.uitems, data.ucent, data.rbar, bptr,
                        np.ascontiguousarray(items[order]), np.ascontiguousarray(np.asarray(vals, np.float32)[order]),
                        _check_nk(Nk), float(C), float(e_max), float(f_max), float(clip_l1), G, norms)
    return G, norms


def noisy_item_means(train: Ratings, epsilon: float, rng) -> np.ndarray:
    """Item means released with ε-DP at rating level (one value changed; which pairs are rated is public): Laplace of
    scale φ/ε on each item's sum (one rating moves one sum by ≤ φ = r_max − r_min), divided by the public count and
    clipped to the scale (post-processing); items without ratings get the scale's midpoint."""
    lo, hi = train.rating_scale
    counts = np.bincount(train.items, minlength=train.n_items).astype(np.float64)
    sums = np.bincount(train.items, weights=train.values, minlength=train.n_items)
    sums = sums + rng.laplace(0.0, (hi - lo) / float(epsilon), size=train.n_items)
    m = np.where(counts > 0, sums / np.maximum(counts, 1.0), 0.5 * (lo + hi))
    return np.clip(m, lo, hi).astype(np.float32)


def train_pnbm_clipped(train: Ratings, *, epsilon, clip_l1: float = 1.0, mean_share: float = 0.1, K: int = 10,
                       eta: float = 0.1, lam: float = 0.05, beta: float = 10.0, C: float = 10.0, Nk: int = 500,
                       gamma: float = 1.0, min_user_ratings: int = 20, init_high: float = 0.2, seed=None,
                       test: Ratings | None = None, eval_every: int = 0, impl: str = "fused") -> PNBMResult:
    """DPSGD-PNBM with the whole gradient contribution clipped in L1 and Laplace noise calibrated to the clip (ours).

    Neighbouring relation: one rating's value changed (the paper's rating level; which (user, item) pairs are rated is
    public). Why the clipped unit is the *user*, not the rating: a rating r_uj enters, through c_uj, every prediction
    of u in which j is a neighbour, so changing it moves the gradient terms of all of u's sampled ratings (and those
    of u's ratings it is not itself sampled with). Clipping each rating's term to C would therefore bound one changed
    rating's effect only by 2C × (u's ratings in the batch). Clipping the user's summed term g_u to ``clip_l1`` bounds
    it by 2·clip_l1 — and then by the same bound for a change of all of u's ratings (user level) too.

    Steps (differences from :func:`train_pnbm` marked):
      0. users with > ``min_user_ratings`` training ratings (public counts); S⁰ data-independent (``init="pcc"`` is
         not offered: it would not be private);
      1. [ours] item means r̄ released with ε_r = ``mean_share``·ε (:func:`noisy_item_means`): the paper's non-private
         r̄ would couple every rater of an item to one rating (the ledger's finding), so they are privatised and
         everything below uses only them (post-processing);
      2. for t = 1..K: Φ ← L = round(γ n) ratings without replacement; g_u = Σ_{(u,i)∈Φ} e ∂r̂/∂S with the paper's
         clips (|e| ≤ e_max(t), |c − p sgn s| ≤ φ, D ≥ C); [ours] G = Σ_u min(1, clip_l1/‖g_u‖₁) g_u;
      3. [ours] G ← G + Lap(b) on every off-diagonal entry, b = Δ/ε_iter with Δ = 2·clip_l1 and
         ε_iter = (1 − mean_share)·ε / K;  S ← S − η (β G + λ S).
    Accounting: step 1 is ε_r-DP (one item sum moves by ≤ φ); each iteration's noisy G is ε_iter-DP given S and r̄
    (L1 sensitivity Δ, Laplace mechanism); adaptive basic composition over the K iterations and step 1 gives
    ε_r + K ε_iter = ε, which is ``epsilon_effective``. Subsampling gives no amplification here: a changed r_uj moves
    g_u whenever any of u's ratings is sampled (not only when r_uj is), and L is fixed, so the standard
    sampling-without-replacement bound does not apply to the rating; no such factor is claimed
    (``epsilon_amplified`` is None). A tighter total from the PLD of the same Laplace releases is in the ledger.
    ``seed=None`` (default): fresh OS entropy; an int reproduces the run (``seed_used``)."""
    acc.check_epsilon(epsilon)
    _check_impl(impl)  # "fused" (default) or "numpy": the noise + update path, as in train_pnbm
    for n, v in (("clip_l1", clip_l1), ("eta", eta), ("beta", beta), ("C", C), ("init_high", init_high)):
        validate.positive(v, n)
    if not (isinstance(mean_share, (int, float)) and 0.0 < mean_share < 1.0):
        raise ParameterError(f"parameter 'mean_share' (share of ε spent on the item means) must lie in (0, 1), "
                             f"got {mean_share!r}")
    validate.positive(lam, "lam", strict=False)
    acc.epsilon_per_iteration(1.0, K, gamma)  # validates K and gamma
    require_ratings(train, "train", "train_pnbm_clipped")
    rng, seed_used, seed_fixed = seeded(seed)
    lo, hi = train.rating_scale
    phi = hi - lo
    eps = float(epsilon)
    eps_mean = mean_share * eps
    eps_iter = (1.0 - mean_share) * eps / K
    b = 2.0 * float(clip_l1) / eps_iter
    rbar = noisy_item_means(train, eps_mean, rng)
    full, dp_train, dp = _dp_training_data(train, rbar, min_user_ratings)
    M = train.n_items
    S = init_similarity(M, beta, init_high, rng)
    n = dp_train.n_ratings
    L = max(1, int(round(gamma * n)))
    res = PNBMResult(S, eps, None, privacy=PrivacyRecord(
        eps, eps, seed_used, seed_fixed,
        ("rating level: which (user, item) pairs are rated is public (counts, neighbour sets)",
         "the ε holds for the Laplace mechanisms as stated; float32 rounding of the clipped sum is not accounted")))
    off = None if impl == "fused" else ~np.eye(M, dtype=bool)
    Gbuf = np.zeros((M, M), dtype=np.float32) if impl == "fused" else None  # zeroed again by the step kernel
    frac_clipped = []
    t0 = time.perf_counter()
    for t in range(1, K + 1):
        idx = np.sort(rng.choice(n, size=L, replace=False)) if L < n else np.arange(n)
        G, norms = clipped_gradient(S, dp, dp_train.users[idx], dp_train.items[idx], dp_train.values[idx], Nk=Nk,
                                    C=C, clip_l1=clip_l1, e_max=acc.error_clamp(t, phi), f_max=phi, out=Gbuf)
        active = norms > 0
        frac_clipped.append(float(np.mean(norms[active] > clip_l1)) if active.any() else 0.0)
        _noisy_step(S, G, b, off, rng, res, eta=eta, beta=beta, lam=lam, impl=impl)
        if test is not None and eval_every and (t % eval_every == 0 or t == K):
            res.history.append((t, rmse(predict(S, full, test, Nk=Nk, C=C), test)))
    res.S = S
    res.info = {"L": L, "n_train_dp": n, "gamma": gamma, "impl": impl, "clip_l1": float(clip_l1), "sensitivity": 2.0 * clip_l1,
                "epsilon_item_means": eps_mean, "epsilon_per_iteration": eps_iter, "laplace_scale": b,
                "rbar": rbar, "fraction_users_clipped": frac_clipped, "seconds": time.perf_counter() - t0}
    if test is not None:
        res.info["rmse"] = rmse(predict(S, full, test, Nk=Nk, C=C), test)
    return res


def sample_pnbm(train: Ratings, *, epsilon=None, tau: int = 200, T: int = 200, L: int = 1000, eta1: float = 8e-6,
                xi: float = 0.3, rho: float = 0.006, lam: float = 0.02, Nk: int = 500, init_high: float = 0.2,
                seed=None,
                test: Ratings | None = None, eval_every: int = 0, init_S: np.ndarray | None = None,
                impl: str = "fused") -> PNBMResult:
    """SGLD sampling (eq. 11) of the similarity posterior; DPPS-PNBM when ``epsilon`` (user level) is a number.

    ``rho`` (ϱ) scales the step of drift and noise alike (module docstring), so it never changes the target and the
    result's ``epsilon_effective`` is the targeted posterior's ε. ``seed=None`` (default): fresh OS entropy.
    ``impl``: ``"fused"`` (default; :func:`~dpmf_lib.nbm.kernels.sgld_step_kernel` draws the Gaussian in the
    kernel from a counter-based stream keyed by one draw of the generator per step) or ``"numpy"`` (the reference:
    numpy's ``standard_normal`` M×M, then :func:`~dpmf_lib.nbm.kernels.sgld_update_kernel`) — same law, not the
    same bytes. One chain of :func:`sample_pnbm_batch` (the same bytes as in any batch)."""
    return sample_pnbm_batch(train, [{"epsilon": epsilon, "eta1": eta1, "rho": rho, "lam": lam}], tau=tau, T=T, L=L,
                             xi=xi, Nk=Nk, init_high=init_high, seed=seed, test=test, eval_every=eval_every,
                             init_S=init_S, impl=impl)[0]


def sample_pnbm_batch(train: Ratings, chains: list, *, tau: int = 200, T: int = 200, L: int = 1000, xi: float = 0.3,
                      Nk: int = 500, init_high: float = 0.2, seed=None, test: Ratings | None = None,
                      eval_every: int = 0, init_S: np.ndarray | None = None, impl: str = "fused",
                      noise_seed: int | None = None, eval_after: int = 0) -> list:
    """:func:`sample_pnbm` for several chains in lockstep with common random numbers: ``chains`` is a list of
    ``{"epsilon", "eta1", "rho", "lam"}`` (what a grid varies at a fixed seed); they share the trimmed data, the start
    S⁰, every minibatch and every Gaussian draw — exactly what separate calls with the same ``seed`` draw — so each
    returned :class:`PNBMResult` has the bytes of its separate run, while the M×M noise is generated once per step
    for all chains (kernels.sgld_step_batch_kernel). Memory: 2 float32 M×M matrices per chain.

    With ``test`` and ``eval_every``, at the steps t > ``eval_after``, ``history`` gets (t, test RMSE),
    ``info["movement"]`` (t, ‖S_t − S⁰‖_F / ‖S⁰‖_F): how far the chain moved from its data-independent start (at the
    paper's steps DPPS chains barely move), and ``info["s_norm2"]`` (t, mean squared entry of S_t), a statistic for
    convergence diagnostics; ``info["moved"]`` is that ratio for the released sample, always.

    ``noise_seed`` (an int): an independent chain on the same trimmed data — ``seed`` still trims, the start S⁰, the
    minibatches and the Gaussian draws come from ``noise_seed`` instead (None: from ``seed``, as one run draws them).
    Chains from different starts for split-R̂ (:func:`dpmf_lib.nbm.runs.dpps_pnbm_chains`)."""
    _check_impl(impl)
    if not chains:
        raise ParameterError("sample_pnbm_batch needs at least one chain")
    for c in chains:
        unknown = set(c) - {"epsilon", "eta1", "rho", "lam"}
        if unknown:
            raise ParameterError(f"unknown chain setting(s) {sorted(unknown)}; a chain sets epsilon, eta1, rho, lam")
        if c.get("epsilon") is not None:
            acc.check_epsilon(c["epsilon"])
        for n in ("eta1", "rho"):
            validate.positive(c[n], n)
        validate.positive(c["lam"], "lam", strict=False)
    for n, v in (("init_high", init_high), ("xi", xi)):
        validate.positive(v, n)
    validate.integer(T, "T")
    validate.integer(L, "L")
    validate.integer(eval_after, "eval_after", lo=0)
    rng, seed_used, seed_fixed = seeded(seed)
    rbar = item_means(train)
    full = prepare(train, rbar)
    tr = trim_to_tau(train, tau, rng)
    if noise_seed is not None:  # the same trimmed data; start, minibatches and noise of an independent chain
        rng = np.random.default_rng(validate.integer(noise_seed, "noise_seed", lo=0))
    data = prepare(tr, rbar)
    Bnd = acc.loglik_bound(train.rating_scale, tau)
    M = train.n_items
    H = acc.pair_inclusion_prob(tr.item_counts(), L)
    Hinv = np.divide(1.0, H, out=np.zeros_like(H), where=H > 0).astype(np.float32)
    S0 = init_similarity(M, 1.0, init_high, rng) if init_S is None else np.array(init_S, dtype=np.float32)
    nb = len(chains)
    S = np.empty((nb, M, M), dtype=np.float32)
    S[:] = S0
    G = np.zeros((nb, M, M), dtype=np.float32)  # zeroed again by the step kernels
    n = tr.n_ratings
    kappa = np.array([acc.posterior_scale(c.get("epsilon"), Bnd) for c in chains])
    lam = np.array([float(c["lam"]) for c in chains])
    step = np.array([float(c["rho"]) * float(c["eta1"]) for c in chains])  # ϱ scales drift and noise alike
    out = []
    for c in chains:
        eps = c.get("epsilon")
        stated = None if eps is None else float(eps)
        caveats = () if eps is None else (
            _RBAR_CAVEAT + ": they couple every user's likelihood term, so even an exact sample is only "
            "n·min(ε, 4B)/2-DP at user level (privacy ledger)",
            "SGLD runs a finite minibatch chain: no ε holds for the law of this sample")
        # epsilon_effective stays None (class docstring); the target is recorded beside it
        res = PNBMResult(None, stated, None, privacy=PrivacyRecord(stated, None, seed_used, seed_fixed, caveats))
        if eps is not None:
            res.info["epsilon_target"] = float(min(float(eps), 4.0 * Bnd))  # κ = min(1, ε/(4B))
        res.info["movement"] = []
        res.info["s_norm2"] = []
        out.append(res)
    # the start's RMSE (one start for every chain): the guard "the chain moved" compares the released sample with it
    rmse_start = rmse(predict(S0, full, test, Nk=Nk, C=0.0), test) if test is not None else None
    s0_norm = float(np.linalg.norm(S0.astype(np.float64))) if (test is not None and eval_every) else 1.0
    t0 = time.perf_counter()
    for t in range(1, T + 1):
        eta = step * t ** (-xi)
        idx = rng.integers(0, n, size=L)
        bptr, bu, bv = _group_by_item(tr.items[idx], tr.users[idx], tr.values[idx], M)
        for b in range(nb):
            grad_kernel(S[b], data.uptr, data.uitems, data.ucent, data.rbar, bptr, bu, bv, _check_nk(Nk), 0.0,
                        math.inf, math.inf, float(data.rating_scale[0]), float(data.rating_scale[1]), True, G[b])
        present = np.zeros(M, dtype=np.uint8)
        present[tr.items[idx]] = 1
        sd = np.sqrt(eta)
        a = 0.5 * eta * kappa
        if impl == "fused":
            sgld_step_batch_kernel(S, G, Hinv, present, float(n / L), lam, a, sd, draw_key(rng))
        else:
            Z = rng.standard_normal(size=(M, M), dtype=np.float32)
            for b in range(nb):
                sgld_update_kernel(S[b], G[b], Hinv, present, float(n / L), float(lam[b]), float(a[b]),
                                   float(sd[b]), Z)
                G[b].fill(0.0)
        for b in range(nb):
            out[b].noise_scales.append(float(sd[b]))
        if test is not None and eval_every and t > eval_after and (t % eval_every == 0 or t == T):
            for b in range(nb):
                out[b].history.append((t, rmse(predict(S[b], full, test, Nk=Nk, C=0.0), test)))
                out[b].info["movement"].append(
                    (t, float(np.linalg.norm(S[b].astype(np.float64) - S0)) / s0_norm))
                out[b].info["s_norm2"].append((t, float(np.mean(np.square(S[b], dtype=np.float64)))))
    secs = time.perf_counter() - t0
    for b, res in enumerate(out):
        res.S = S[0] if nb == 1 else S[b].copy()  # a copy: one result must not keep the whole batch alive
        res.info["moved"] = float(np.linalg.norm(S[b].astype(np.float64) - S0) / max(np.linalg.norm(S0), 1e-300))
        res.info = {**res.info, "kappa": float(kappa[b]), "B": Bnd, "n_trimmed": n, "L": L,
                    "rho_step_scale": float(chains[b]["rho"]), "impl": impl, "chains_in_batch": nb,
                    "seconds": secs / nb}
        if test is not None:
            res.info["rmse"] = rmse(predict(S[b], full, test, Nk=Nk, C=0.0), test)
            res.info["rmse_start"] = rmse_start
    return out


@dataclass
class MFResult(WithPrivacyRecord):
    """DPSGD-MF factors with their privacy record. ``epsilon_effective`` is ``None``: the released predictor uses the
    item means r̄ computed without noise. The factors (P, Q) alone are 2ε-DP at rating level (``epsilon_factors``):
    one rating moves its own error by ≤ φ and, through r̄_i, each of the item's n_i errors by φ/n_i — 2φ per epoch in
    L1, not the φ the paper's noise is calibrated to (the privacy ledger); see ``privacy_caveats``."""

    P: np.ndarray
    Q: np.ndarray
    rbar: np.ndarray  # item means used as offsets
    epsilon: float | None
    noise_scale: float | None
    rmse: float | None = None
    epsilon_factors: float | None = None  # what (P, Q) alone satisfy: 2ε (class docstring)
    privacy: PrivacyRecord | None = None  # None: a record of the stated ε alone


def train_dpsgd_mf(train: Ratings, *, epsilon=None, K: int = 20, eta: float = 8e-4, lam: float = 0.02, d: int = 10,
                   e_max: float = 2.0, init_std: float = 0.1, seed=None, test: Ratings | None = None) -> MFResult:
    """DPSGD-MF of Berlioz et al. (2015), the paper's baseline [4]: K epochs of SGD over all ratings in random order;
    each rating's error gets Laplace noise of scale K φ/ε (φ = r_max - r_min, ε/K per epoch, every rating used once
    per epoch) and is clamped to ±``e_max`` (our choice: 2.0; [4] clamps but the paper does not give the value).
    Prediction r̄_i + p_u·q_i with the item means r̄_i of the training fold (not privatised — the same item means the
    NBMs use, so all methods share one baseline); P, Q ~ N(0, init_std²). ``seed=None`` (default): fresh OS entropy."""
    require_ratings(train, "train", "train_dpsgd_mf")
    if epsilon is not None:
        acc.check_epsilon(epsilon)
    for n, v in (("eta", eta), ("e_max", e_max), ("init_std", init_std)):
        validate.positive(v, n)
    validate.integer(d, "d")
    validate.integer(K, "K")
    rng, seed_used, seed_fixed = seeded(seed)
    lo, hi = train.rating_scale
    P = (rng.standard_normal((train.n_users, d)) * init_std).astype(np.float32)
    Q = (rng.standard_normal((train.n_items, d)) * init_std).astype(np.float32)
    rbar = item_means(train)
    b = None if epsilon is None else K * (hi - lo) / float(epsilon)
    n = train.n_ratings
    for _ in range(K):
        order = rng.permutation(n).astype(np.int64)
        noise = rng.laplace(0.0, b, size=n) if b is not None else np.zeros(n)
        mf_epoch_kernel(train.users, train.items, train.values, order, noise, P, Q, rbar, float(eta), float(lam),
                        float(e_max))
    stated = None if epsilon is None else float(epsilon)
    caveats = () if epsilon is None else (  # epsilon_effective stays None: r̄ is released without noise (docstring)
        _RBAR_CAVEAT + ": with them the predictor has no finite ε",
        "the factors alone: 2ε at rating level (one rating moves the item's other errors through r̄; the paper's "
        "noise is calibrated to φ, not 2φ)")
    res = MFResult(P, Q, rbar, stated, b, privacy=PrivacyRecord(stated, None, seed_used, seed_fixed, caveats))
    if epsilon is not None:
        res.epsilon_factors = 2.0 * float(epsilon)
    if test is not None:
        out = np.empty(test.n_ratings, dtype=np.float32)
        mf_predict_kernel(P, Q, rbar, test.users, test.items, float(lo), float(hi), out)
        res.rmse = rmse(out, test)
    return res
