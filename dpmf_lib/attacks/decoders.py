"""Reconstruction attacks of thesis chapter 3: popularity, single decoders, and the MCMC joint decoder.

Every attack returns a ranking of all N items (best first); the reconstruction is its top c_hat items (Section 3.5.2)
and mAP@10 reads its top 10 (Section 3.5.3).

Choices the thesis leaves open (ours, also stated in the notebooks):
- c_hat: BLIP inverts (3.9) then (3.6); JLT uses (3.11). Rounded and clipped to [1, N]. At eps = 0 (p_eps = 1/2) (3.9)
  is undefined and the BLIP carries no information, so c_hat falls back to the mean training profile size (the only
  size information the adversary has).
- c_max (the number of slots) is the upper end of a 99 % confidence interval: for BLIP the binomial interval of
  w(b~)/L mapped through (3.9)/(3.6); for JLT the chi-square interval of sum y^2 / (sigma^2 + c/L) ~ chi2_L. It is
  clipped to [c_hat, |candidates|] (at eps = 0: all candidates).
- Priors: independent items, P[j in P] = q_j. "With prior": q_j = smoothed training frequency (profiles.item_priors);
  "flat": every item gets the mean of those q_j (same expected profile size, no item preference; ``flat_prior=
  "candidates"`` instead sets c_hat / |candidates| — tried, it changes little).
- Prefilter: the f * c_hat items with the best single-decoder score (f = 4, the thesis says f in [2, 6]); for the
  with-prior decoder the score also adds the log prior odds (the "most probable" items, Section 3.5.1) — without it, at
  eps -> 0 the candidate set would be random and the prior could not act.
- MCMC initial state: c_hat random candidates ("started with c_hat random items"); ranking = marginals (3.33), ties
  (e.g. candidates never visited, items outside the prefilter) broken by the prefilter score.
- Constant chains (ours): where the posterior is nearly a point mass (JLT at ε = 600, BLIP at ε = 59) a mixed chain
  sits in one state through both halves of its kept samples, and so does a chain stuck in a local mode: split-R̂ is
  undefined for both. Only there, a check chain of the same length is run from a dispersed start (c_hat candidates
  disjoint from both the first chain's start and the state it sat in) on a stream of its own; R̂ is then computed
  over the four halves of the two chains (:func:`split_rhat_counts`): two chains constant in the same state give
  R̂ = 1 (a point mass reached from two disjoint starts), in different states R̂ = inf, and a check chain that moved
  gives the ordinary four-half R̂ (converged where ≤ 1.05, like any chain). Where the candidates are too few for a
  disjoint start, the check proves nothing and R̂ stays undefined. The attack's marginals stay the first chain's (the
  thesis runs one chain): the check chain is a diagnostic, and every other row is unchanged by it (its stream is
  drawn after the chains'). ``seconds_all_attacks`` includes the check chains' time.
- Chain length: the thesis fixes T = 1,000 burn-in and M = 19,000 kept transitions whatever the profile. One transition
  redraws ONE of the c_max slots, so that is (T + M) / c_max updates per slot: ~47 at c_max ~ 420 (ML-100K at eps = 0),
  too few to mix. ``min_sweeps`` (ours; None = the thesis's fixed T, M) lengthens a user's chain to at least
  ``min_sweeps * c_max`` transitions, keeping the T : M ratio (:func:`chain_length`).
- Exact check at a flat likelihood (ours): where the observation carries no information (BLIP at eps = 0, p_eps = 1/2)
  and nothing truncates the profile (c_max = |candidates|), the posterior marginal of candidate j is exactly its prior
  q_j = rho_j / (1 + rho_j) (independent items; the coding-multiplicity correction of ``gibbs`` makes the chain target
  it). ``diagnostics`` then receives the mean absolute error of the chain's marginals against it and (prior with
  item preference only) their Spearman correlation: a second convergence guard beside split-R̂.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from .. import validate
from ..diagnostics import split_rhat_counts
from ..errors import ParameterError
from . import gibbs
from .mechanisms import BLIP, JLT

Z99 = float(stats.norm.ppf(0.995))


# ---------------------------------------------------------------------------------------------------- size estimates
def _c_from_pi(pi: float, K: int, L: int) -> float:
    if pi <= 0:
        return 0.0
    if pi >= 1:
        return math.inf
    return math.log1p(-pi) / (K * math.log1p(-1.0 / L))


def estimate_c_blip(btilde: np.ndarray, p_eps: float, K: int, *, n_items: int, fallback: float,
                    z: float = Z99) -> tuple[int, float]:
    """(c_hat, c_upper): (3.9) inverted through (3.6), and the upper end of a z-sigma interval (inf if unbounded)."""
    L = len(btilde)
    if abs(1 - 2 * p_eps) < 1e-12:  # eps = 0: no information about c
        return int(np.clip(round(fallback), 1, n_items)), math.inf
    w = float(np.count_nonzero(btilde)) / L
    pi_hat = (w - p_eps) / (1 - 2 * p_eps)
    c = _c_from_pi(pi_hat, K, L)
    w_hi = w + z * math.sqrt(max(w * (1 - w), 1.0 / L) / L)
    c_up = _c_from_pi((w_hi - p_eps) / (1 - 2 * p_eps), K, L)
    c_hat = int(np.clip(round(c) if math.isfinite(c) else n_items, 1, n_items))
    return c_hat, c_up


def estimate_c_jlt(y: np.ndarray, sigma: float, *, n_items: int, alpha: float = 0.01) -> tuple[int, float]:
    """(c_hat, c_upper): (3.11), and the chi-square upper confidence bound on c."""
    L = len(y)
    s = float(y @ y)
    c = L / (L - 1) * s - L * sigma * sigma
    c_up = L * (s / stats.chi2.ppf(alpha / 2, L) - sigma * sigma)
    return int(np.clip(round(c), 1, n_items)), c_up


# ---------------------------------------------------------------------------------------------------- single decoders
def blip_single_scores(btilde: np.ndarray, blip: BLIP, pi_tilde: float | None = None) -> np.ndarray:
    """s_j = n11 log((1-p)/pi~) + n01 log(p/(1-pi~)) (3.27)–(3.29) over the distinct bits of X_j; pi~ = w(b~)/L."""
    cb = blip.codebook
    L = cb.L
    pt = float(np.count_nonzero(btilde)) / L if pi_tilde is None else pi_tilde
    pt = min(max(pt, 0.5 / L), 1 - 0.5 / L)
    p = blip.p_eps
    bt = np.append(btilde.astype(np.int64), 0)  # index -1 (padding) reads the appended 0
    n11 = bt[cb.bits].sum(axis=1)
    n01 = cb.nbits - n11
    return n11 * math.log((1 - p) / pt) + n01 * math.log(p / (1 - pt))


def jlt_single_scores(y: np.ndarray, jlt: JLT, c_hat: float) -> np.ndarray:
    """Log-likelihood ratio of H1: y ~ N(X_j, sigma^2 + (c-1)/L) against H0: y ~ N(0, sigma^2 + c/L) (Section 3.2.2)."""
    X = jlt.codebook.x64()
    L = jlt.L
    c = max(float(c_hat), 1.0)
    v1 = jlt.sigma ** 2 + (c - 1) / L
    v0 = jlt.sigma ** 2 + c / L
    yy = float(y @ y)
    xy = X @ np.asarray(y, dtype=np.float64)
    xx = np.diagonal(jlt.codebook.gram()) if getattr(jlt.codebook, "_gram", None) is not None else \
        np.einsum("ij,ij->i", X, X)
    d1 = yy - 2 * xy + xx
    return -d1 / (2 * v1) + yy / (2 * v0) - 0.5 * L * math.log(v1 / v0)


def rank(scores: np.ndarray, tiebreak: np.ndarray | None = None) -> np.ndarray:
    """Items by decreasing score (ties: decreasing ``tiebreak``, then increasing id)."""
    if tiebreak is None:
        return np.argsort(-scores, kind="stable").astype(np.int32)
    return np.lexsort((-tiebreak, -scores)).astype(np.int32)


def log_odds(q: np.ndarray) -> np.ndarray:
    q = np.clip(np.asarray(q, dtype=np.float64), 1e-12, 1 - 1e-12)
    return np.log(q) - np.log1p(-q)


# ---------------------------------------------------------------------------------------------------- joint decoder
@dataclass
class MCMCResult:
    candidates: np.ndarray  # item ids of the prefiltered candidates
    marginals: np.ndarray  # (3.33) on the candidates
    c_max: int
    n_transitions: int
    split_rhat: float = float("nan")  # of the two halves: dpmf_lib.diagnostics.split_rhat_counts
    start: np.ndarray | None = None  # candidate indices (positions in ``candidates``) of the initial state
    halves: tuple = ()  # counts of the two halves of the kept samples, the second rescaled to the first's length
    n_half: int = 0  # kept states per half (the first half's)


def point_mass_rhat(first: "MCMCResult", check: "MCMCResult") -> tuple[float, bool]:
    """(R̂, same point) of a constant chain ``first`` and its check chain (see the module notes): R̂ over the four
    halves of the two chains; 1.0 and True when both sat in the same state through all four (the posterior is a point
    mass there, reached from two disjoint starts); inf when they sat in different states."""
    if len(first.halves) != 2 or len(check.halves) != 2 or check.n_half != first.n_half or first.n_half < 2:
        raise ValueError("point_mass_rhat needs two chains of equal length, each run in two halves of >= 2 states "
                         f"(got halves {len(first.halves)}/{len(check.halves)}, {first.n_half}/{check.n_half} states)")
    r = split_rhat_counts(list(first.halves) + list(check.halves), first.n_half)
    if np.isnan(r):
        return 1.0, True
    return r, False


def _run_in_halves(kernel, args_before, args_after, sd, u, burn_in: int, n_samples: int, n_cand: int):
    """Run a Gibbs kernel as two consecutive calls (the chain state lives in ``slots`` and is rebuilt from it by each
    call, so this is the same chain as one call) and return (counts, split-R̂, (first half's counts, second half's
    rescaled to the first's length), kept states per half)."""
    half = burn_in + n_samples // 2
    c1 = np.zeros(n_cand, dtype=np.int64)
    c2 = np.zeros(n_cand, dtype=np.int64)
    empty = np.zeros((0, n_cand + 1))
    kernel(*args_before, np.ascontiguousarray(sd[:half]), np.ascontiguousarray(u[:half]), *args_after, burn_in, c1,
           empty)
    kernel(*args_before, np.ascontiguousarray(sd[half:]), np.ascontiguousarray(u[half:]), *args_after, 0, c2, empty)
    n_a, n_b = n_samples // 2, n_samples - n_samples // 2
    c2_scaled = c2 * (n_a / n_b)  # an odd n: the longer half rescaled to the shorter
    return c1 + c2, split_rhat_counts([c1, c2_scaled], n_a), (c1, c2_scaled), n_a


def _slots_init(n_cand: int, c_max: int, c_init: int, rng, avoid: np.ndarray | None = None) -> np.ndarray:
    """The initial state: ``c_init`` random candidates (at most c_max, n_cand); with ``avoid``, drawn from the
    candidates not in it first (a dispersed start for a check chain), topped up from the rest if too few remain."""
    slots = np.full(c_max, -1, dtype=np.int64)
    k = min(c_init, c_max, n_cand)
    if avoid is None:
        slots[:k] = rng.choice(n_cand, size=k, replace=False)
        return slots
    taken = np.zeros(n_cand, dtype=bool)
    taken[np.asarray(avoid, dtype=np.int64)] = True
    free, used = np.flatnonzero(~taken), np.flatnonzero(taken)
    first = rng.choice(free, size=min(k, len(free)), replace=False)
    rest = rng.choice(used, size=k - len(first), replace=False)
    slots[:k] = np.concatenate([first, rest])
    return slots


def _draws(c_max: int, n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    return rng.integers(0, c_max, size=n).astype(np.int64), rng.random(n)


def _check_mcmc(burn_in: int, n_samples: int, c_max: int, n_cand: int):
    if burn_in < 0 or n_samples < 1:
        raise ParameterError(f"MCMC needs burn_in >= 0 and n_samples >= 1, got {burn_in}, {n_samples}")
    if c_max < 1 or n_cand < 1:
        raise ParameterError(f"MCMC needs c_max >= 1 and at least one candidate, got {c_max}, {n_cand}")


def mcmc_blip(btilde: np.ndarray, blip: BLIP, candidates: np.ndarray, log_rho: np.ndarray, *, c_max: int, c_init: int,
              burn_in: int, n_samples: int, seed=None, avoid: np.ndarray | None = None) -> MCMCResult:
    """Joint decoder for BLIP on ``candidates`` (item ids); ``log_rho`` are the prior log-odds of all N items;
    ``avoid``: candidate positions the initial state avoids (:func:`_slots_init`; a check chain's dispersed start)."""
    rng = validate.generator(seed)
    cand = np.ascontiguousarray(candidates, dtype=np.int64)
    _check_mcmc(burn_in, n_samples, c_max, len(cand))
    p = blip.p_eps
    lam = math.log((1 - p) / p)
    sgn = np.where(np.asarray(btilde) > 0, 1, -1).astype(np.int32)
    bits = np.ascontiguousarray(blip.codebook.bits[cand])
    nbits = np.ascontiguousarray(blip.codebook.nbits[cand])
    slots = _slots_init(len(cand), c_max, c_init, rng, avoid)
    start = slots[slots >= 0].copy()
    sd, u = _draws(c_max, burn_in + n_samples, rng)
    counts, rhat, halves, n_half = _run_in_halves(
        gibbs.blip_gibbs_kernel, (bits, nbits, sgn, lam, np.ascontiguousarray(log_rho[cand], dtype=np.float64), slots),
        (), sd, u, burn_in, n_samples, len(cand))
    return MCMCResult(cand, counts / n_samples, c_max, burn_in + n_samples, rhat, start, halves, n_half)


def mcmc_jlt(y: np.ndarray, jlt: JLT, candidates: np.ndarray, log_rho: np.ndarray, *, c_max: int, c_init: int,
             burn_in: int, n_samples: int, seed=None, avoid: np.ndarray | None = None) -> MCMCResult:
    """Joint decoder for JLT: P[y | P] ∝ exp(-||y - sum_{j in P} X_j||^2 / (2 sigma^2)) (end of Section 3.4.2);
    ``avoid`` as in :func:`mcmc_blip`."""
    rng = validate.generator(seed)
    cand = np.ascontiguousarray(candidates, dtype=np.int64)
    _check_mcmc(burn_in, n_samples, c_max, len(cand))
    Gc = np.ascontiguousarray(jlt.codebook.gram()[np.ix_(cand, cand)])  # the candidates' rows, read contiguously
    z = jlt.codebook.x64()[cand] @ np.asarray(y, dtype=np.float64)
    slots = _slots_init(len(cand), c_max, c_init, rng, avoid)
    start = slots[slots >= 0].copy()
    sd, u = _draws(c_max, burn_in + n_samples, rng)
    counts, rhat, halves, n_half = _run_in_halves(
        gibbs.jlt_gibbs_kernel,
        (Gc, z, 1.0 / (2 * jlt.sigma ** 2), np.ascontiguousarray(log_rho[cand], dtype=np.float64), slots),
        (), sd, u, burn_in, n_samples, len(cand))
    return MCMCResult(cand, counts / n_samples, c_max, burn_in + n_samples, rhat, start, halves, n_half)


def chain_length(burn_in: int, n_samples: int, c_max: int, min_sweeps: float | None) -> tuple[int, int]:
    """(T, M) of one user's chain: the given T, M, or — when ``min_sweeps`` asks for more — both scaled by the same
    factor so that T + M >= min_sweeps * c_max (every slot is redrawn ~min_sweeps times; T : M kept)."""
    if min_sweeps is None:
        return int(burn_in), int(n_samples)
    validate.positive(min_sweeps, "min_sweeps", fix="or None for the given burn_in, n_samples")
    total = burn_in + n_samples
    need = float(min_sweeps) * c_max
    if need <= total:
        return int(burn_in), int(n_samples)
    fac = need / total
    return int(math.ceil(burn_in * fac)), int(math.ceil(n_samples * fac))


def flat_likelihood_check(mech, res: "MCMCResult", log_rho: np.ndarray) -> tuple[float, float] | None:
    """(mean |marginal - exact|, Spearman) against the exact marginals when the likelihood is flat (BLIP at
    p_eps = 1/2) and c_max = |candidates| (no truncation): exact = rho / (1 + rho) on the candidates. None otherwise;
    the Spearman is NaN when the exact marginals are all equal (flat prior)."""
    if not (isinstance(mech, BLIP) and abs(1 - 2 * mech.p_eps) < 1e-12 and res.c_max >= len(res.candidates)):
        return None
    exact = 1.0 / (1.0 + np.exp(-np.asarray(log_rho, dtype=np.float64)[res.candidates]))
    err = float(np.mean(np.abs(res.marginals - exact)))
    rho = float(stats.spearmanr(res.marginals, exact)[0]) if np.ptp(exact) > 0 and np.ptp(res.marginals) > 0 \
        else float("nan")
    return err, rho


# ---------------------------------------------------------------------------------------------------- one user
ATTACKS = ("popularity", "single", "single_prior", "mcmc_prior", "mcmc_flat")


def attack(mech, obs: np.ndarray, q: np.ndarray, *, attacks=ATTACKS, f: float = 4.0, burn_in: int = 1000,
           n_samples: int = 19000, c_fallback: float, flat_prior: str = "catalog", min_sweeps: float | None = None,
           seed=None, diagnostics: dict | None = None) -> tuple[int, dict[str, np.ndarray]]:
    """Run the attacks on one sanitized profile ``obs``; returns (c_hat, {attack: ranking of all items}).

    ``q``: the adversary's item priors (training frequencies); ``c_fallback``: mean training profile size.
    ``flat_prior``: the flat decoder's item rate — "catalog": mean(q) (= mean training profile size / N), or
    "candidates": c_hat / |candidates| (the prior expects c_hat items among the prefiltered candidates).
    ``min_sweeps``: see :func:`chain_length` (None: the fixed ``burn_in``, ``n_samples``).
    ``diagnostics``: if a dict, receives each MCMC attack's split-R̂ (:func:`split_rhat_counts`; for a constant chain
    the two-chain :func:`point_mass_rhat`, NaN where no disjoint check start existed) under its name, its updates per slot under ``<name>:sweeps``, where a check
    chain ran ``<name>:point_mass`` (1.0: both chains sat in the same state, 0.0: not) and, where
    :func:`flat_likelihood_check` applies, ``<name>:exact_err`` and ``<name>:exact_spearman``."""
    if flat_prior not in ("catalog", "candidates"):
        raise ParameterError(f"flat_prior must be 'catalog' or 'candidates', got {flat_prior!r}")
    unknown = set(attacks) - set(ATTACKS)
    if unknown:
        raise ParameterError(f"unknown attack(s) {sorted(unknown)}; choose from {ATTACKS}")
    if f < 1:
        raise ParameterError(f"prefilter factor f must be >= 1, got {f}")
    rng = validate.generator(seed)
    N = len(q)
    if isinstance(mech, BLIP):
        c_hat, c_up = estimate_c_blip(obs, mech.p_eps, mech.codebook.K, n_items=N, fallback=c_fallback)
        single = blip_single_scores(obs, mech)
        run_mcmc = mcmc_blip
    elif isinstance(mech, JLT):
        c_hat, c_up = estimate_c_jlt(obs, mech.sigma, n_items=N)
        single = jlt_single_scores(obs, mech, c_hat)
        run_mcmc = mcmc_jlt
    else:
        raise ParameterError(f"unknown mechanism {type(mech).__name__}; use BLIP or JLT")
    out = {}
    if "popularity" in attacks:
        out["popularity"] = rank(q)
    if "single" in attacks:
        out["single"] = rank(single)
    lo_prior = log_odds(q)
    # one stream per MCMC attack, drawn in a fixed order whatever is requested: a run of mcmc_flat alone must give the
    # rows a run of both gives (the per-ε cache serves either)
    mcmc_rng = {name: np.random.default_rng(rng.integers(0, 2**63 - 1)) for name in ("mcmc_prior", "mcmc_flat")}
    # the check chains' streams are drawn after the chains' own: the chains, and so every row, are what they were
    # before the check existed
    check_rng = {name: np.random.default_rng(rng.integers(0, 2**63 - 1)) for name in ("mcmc_prior", "mcmc_flat")}
    if "single_prior" in attacks:
        # the single decoder given the same item prior as the joint one (ours, not the thesis's): the fair baseline
        # for "joint beats single", which otherwise also credits the joint decoder with the prior's gain
        out["single_prior"] = rank(single + lo_prior)
    n_cand = int(min(N, max(1, math.ceil(f * c_hat))))
    for name in ("mcmc_prior", "mcmc_flat"):
        if name not in attacks:
            continue
        rate = q.mean() if flat_prior == "catalog" else min(c_hat / n_cand, 0.5)
        lr = lo_prior if name == "mcmc_prior" else np.full(N, log_odds(np.array([rate]))[0])
        pref = single + (lr if name == "mcmc_prior" else 0.0)
        cand = rank(pref)[:n_cand]
        c_max = int(np.clip(math.ceil(c_up) if math.isfinite(c_up) else n_cand, c_hat, n_cand))
        T, M = chain_length(burn_in, n_samples, c_max, min_sweeps)
        res = run_mcmc(obs, mech, cand, lr, c_max=c_max, c_init=c_hat, burn_in=T, n_samples=M,
                       seed=mcmc_rng[name])
        if diagnostics is not None:
            diagnostics[name] = res.split_rhat
            if np.isnan(res.split_rhat) and res.n_half >= 2:  # constant: a point mass, or stuck? (module notes)
                # the check chain starts away from both the first chain's start and the state it sat in
                avoid = np.union1d(res.start, np.flatnonzero(res.halves[0] > 0))
                check = run_mcmc(obs, mech, cand, lr, c_max=c_max, c_init=c_hat, burn_in=T, n_samples=M,
                                 seed=check_rng[name], avoid=avoid)
                if np.intersect1d(check.start, avoid).size:  # too few candidates for a disjoint start: no evidence
                    diagnostics[name + ":point_mass"] = 0.0
                else:
                    diagnostics[name], same = point_mass_rhat(res, check)
                    diagnostics[name + ":point_mass"] = 1.0 if same else 0.0
            diagnostics[name + ":sweeps"] = (T + M) / c_max
            chk = flat_likelihood_check(mech, res, lr)
            if chk is not None:
                diagnostics[name + ":exact_err"], diagnostics[name + ":exact_spearman"] = chk
        marg = np.full(N, -1.0)
        marg[res.candidates] = res.marginals
        out[name] = rank(marg, pref)
    return c_hat, out
