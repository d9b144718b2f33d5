"""Independent chains of the private samplers and their diagnostics (Liu et al. 2015, Figure 7).

- :func:`chain_seed`, :func:`phase_seed`, :func:`prior_run_seed` — the seed namespaces of a run's chains, of a chain's
  constant-step phase and of the non-private run whose Λ the chains hold fixed;
- :func:`split_rhat_chains`, :func:`ess_chains` — split-R̂ and effective sample size of draws shaped (chains, draws);
- :func:`chain_diagnostics` — both, over the statistics of a per-draw trace.

Used by :func:`dpmf_lib.privacy.posterior_sampling.sample_private` (which re-exports them) and by
:mod:`dpmf_lib.privacy.exact_gibbs`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def chain_seed(seed: int, k: int) -> int:
    """The seed of independent chain ``k`` of a run seeded ``seed`` (k = 0: ``seed`` itself; k ≥ 1: a SeedSequence
    child, so the chains' counter-based noise streams, noise tables and initialisations do not overlap)."""
    if int(k) == 0:
        return int(seed)
    return int(np.random.SeedSequence([int(seed), 0xC4A1, int(k)]).generate_state(1, np.uint64)[0] >> np.uint64(2))


def phase_seed(chain: int) -> int:
    """The seed of the constant-step (sampling) phase of the chain seeded ``chain`` (a :func:`chain_seed`). A
    namespace of its own: deriving it as ``chain_seed(chain, 1)`` made chain 0's sampling phase replay chain 1's
    burn-in noise (chain 0's seed is the run's seed itself), so the "independent" redraw and the R̂ over the two
    chains shared noise. A chain stays a function of its own seed alone."""
    return int(np.random.SeedSequence([int(chain), 0x5A3E]).generate_state(1, np.uint64)[0] >> np.uint64(2))


def prior_run_seed(seed: int) -> int:
    """The seed of the non-private SGLD run whose Λ the private chains of a run seeded ``seed`` hold fixed (Section
    6.6; ``liu_fig7.nonprivate_sgld``). A namespace of its own: seeding that run with ``seed`` itself gave it chain 0's
    burn-in noise stream (``chain_seed(seed, 0) == seed``), so the priors and the first private chain shared noise."""
    return int(np.random.SeedSequence([int(seed), 0x7A1B]).generate_state(1, np.uint64)[0] >> np.uint64(2))


def split_rhat_chains(x) -> float:
    """Split-R̂ (Gelman et al. 2013, BDA3 eq. 11.4; no rank normalisation) of draws ``x`` shaped (chains, draws).

    Every chain is split in halves (the middle draw of an odd length dropped), so one chain that drifts is caught as
    well as chains that disagree. 1 for mixed chains; NaN with fewer than 4 draws per chain; inf when the within-half
    variance is 0 but the halves differ."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or x.shape[1] < 4 or not np.all(np.isfinite(x)):
        return float("nan")
    n = x.shape[1] // 2
    h = np.concatenate([x[:, :n], x[:, x.shape[1] - n:]], axis=0)
    means = h.mean(axis=1)
    W = float(h.var(axis=1, ddof=1).mean())
    B = n * float(means.var(ddof=1))
    if W <= 0:
        return float("nan") if B == 0 else float("inf")
    return float(np.sqrt(((n - 1) / n * W + B / n) / W))


def ess_chains(x) -> float:
    """Effective sample size of draws ``x`` shaped (chains, draws): the multi-chain autocorrelation estimate with
    Geyer's initial monotone sequence (Stan's / BDA3's estimator, without rank normalisation), on split chains as
    ArviZ's ``ess`` does (each chain cut in halves, the middle draw of an odd length dropped), so a chain that drifts
    counts as two that disagree. NaN with < 4 draws per half."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = x[None, :]
    half = x.shape[1] // 2
    x = np.concatenate([x[:, :half], x[:, x.shape[1] - half:]], axis=0)
    m, n = x.shape
    if n < 4 or not np.all(np.isfinite(x)):
        return float("nan")
    xc = x - x.mean(axis=1, keepdims=True)
    f = np.fft.rfft(xc, n=2 * n, axis=1)
    acov = np.fft.irfft(f * np.conj(f), axis=1)[:, :n] / n  # biased autocovariance per chain
    chain_var = acov[:, 0] * n / (n - 1)
    mean_var = float(chain_var.mean())
    var_plus = mean_var * (n - 1) / n + (float(x.mean(axis=1).var(ddof=1)) if m > 1 else 0.0)
    if var_plus <= 0:
        return float("nan")
    rho = 1.0 - (mean_var - acov.mean(axis=0)) / var_plus
    rho[0] = 1.0
    tau, prev = -1.0, np.inf
    for t in range(0, n - 1, 2):
        p = rho[t] + rho[t + 1]
        if p < 0:
            break
        p = min(p, prev)  # initial monotone sequence
        tau += 2.0 * p
        prev = p
    tau = max(tau, 1.0 / np.log10(m * n))  # Stan's floor against antithetic chains
    return float(m * n / tau)


def chain_diagnostics(trace: pd.DataFrame, stats=("v_norm2", "sample_rmse")) -> dict:
    """Split-R̂ (max over ``stats``) and ESS (min over ``stats``) of a per-draw trace with columns ``chain``, ``draw``
    and the statistics; every chain is cut to the shortest one's length."""
    out = {"rhat": float("nan"), "ess": float("nan"), "n_chains": 0, "n_draws": 0}
    if trace is None or not len(trace):
        return out
    chains = [g.sort_values("draw") for _, g in trace.groupby("chain")]
    n = min(len(g) for g in chains)
    out["n_chains"], out["n_draws"] = len(chains), n
    rh, es = [], []
    for s in stats:
        if s not in trace or trace[s].isna().all():
            continue
        x = np.stack([g[s].to_numpy()[-n:] for g in chains])
        rh.append(split_rhat_chains(x))
        es.append(ess_chains(x))
        out[f"rhat_{s}"], out[f"ess_{s}"] = rh[-1], es[-1]
    if rh:  # one unmeasurable statistic leaves the chain unvouched for: NaN (a guard on it then fails)
        out["rhat"] = float("nan") if np.any(np.isnan(rh)) else float(max(rh))
        out["ess"] = float("nan") if np.any(np.isnan(es)) else float(min(es))
    return out
