"""MCMC convergence diagnostics, one implementation each: split-R̂ and the effective sample size.

- :func:`split_rhat` — split-R̂ (Gelman et al., BDA3 eq. 11.4; no rank normalisation) of real-valued draws shaped
  (chains, draws): every chain cut in halves, so one chain that drifts is caught as well as chains that disagree.
- :func:`split_rhat_counts` — the same statistic for 0/1 inclusion indicators known only through each sequence's
  count of ones (the Gibbs attacks of thesis chapter 3 keep counts, not draws), maximised over candidates.
- :func:`ess` — effective sample size: the multi-chain autocorrelation estimate with Geyer's initial monotone
  sequence on split chains (Stan's / BDA3's estimator without rank normalisation).

Split-R̂ agrees with ArviZ's ``rhat(method="split")`` to rounding, and the ESS with ``ess(method="mean")`` on
long chains; on short, strongly autocorrelated chains ArviZ also keeps the last even lag of Geyer's sequence (Stan's
"improved" estimate), a few percent apart. The numpy code is kept rather than calling ArviZ because saved R̂ / ESS
columns must not move: equal formulas are not equal floating-point operations.
"""

from __future__ import annotations

import numpy as np


def _rhat(W, b_over_n, n):
    """sqrt(((n − 1)/n W + B/n) / W): within-sequence variance W, between-sequence variance of the means B/n."""
    return np.sqrt(((n - 1) / n * W + b_over_n) / W)


def _as_chains(x) -> np.ndarray:
    """Draws as a float64 array shaped (chains, draws); a 1-d array is one chain."""
    x = np.asarray(x, dtype=np.float64)
    return x[None, :] if x.ndim == 1 else x


def _split_halves(x) -> np.ndarray:
    """(2·chains, n) halves of draws shaped (chains, draws) (a 1-d array is one chain; an odd middle draw dropped)."""
    x = _as_chains(x)
    n = x.shape[1] // 2
    return np.concatenate([x[:, :n], x[:, x.shape[1] - n:]], axis=0)


def split_rhat(x) -> float:
    """Split-R̂ of draws ``x`` shaped (chains, draws). 1 for mixed chains; NaN with fewer than 4 draws per chain or a
    non-finite draw; inf when the within-half variance is 0 but the halves differ."""
    x = _as_chains(x)
    if x.ndim != 2 or x.shape[1] < 4 or not np.all(np.isfinite(x)):
        return float("nan")
    h = _split_halves(x)
    n = h.shape[1]
    means = h.mean(axis=1)
    W = float(h.var(axis=1, ddof=1).mean())
    B = n * float(means.var(ddof=1))
    if W <= 0:
        return float("nan") if B == 0 else float("inf")
    return float(_rhat(W, B / n, n))


def split_rhat_counts(counts, n: int) -> float:
    """Split-R̂ of 0/1 indicators from counts: ``counts`` holds m ≥ 2 sequences' per-candidate counts of ones over
    ``n`` states each (the halves of one or more chains; a count may be rescaled to ``n`` from a longer half).

    Per candidate, a sequence with mean p has within variance p(1 − p) n/(n − 1); R̂ is maximised over candidates.
    Candidates constant and equal in every sequence carry no information and are skipped; constant but unequal ones
    give inf; NaN when every candidate is constant and equal (for two chains from disjoint starts: both sat in the
    same state). For m = 2 (one chain's halves) the between variance is the closed form ½ (p_a − p_b)² and "equal"
    compares the counts themselves: the arithmetic the chapter-3 rows were computed with."""
    if n < 2 or len(counts) < 2:
        return float("nan")
    m = len(counts)
    p = np.stack([np.asarray(c, dtype=np.float64) for c in counts]) / n
    w = (p * (1 - p)).mean(axis=0) * n / (n - 1)
    b_over_n = 0.5 * (p[0] - p[1]) ** 2 if m == 2 else p.var(axis=0, ddof=1)
    live = w > 0
    spread = np.ptp(p, axis=0) > 0
    if not live.any():
        differ = not np.array_equal(counts[0], counts[1]) if m == 2 else spread.any()
        return float("inf") if differ else float("nan")
    r = _rhat(w[live], b_over_n[live], n)
    return float("inf") if ((~live) & spread).any() else float(r.max())


def ess(x) -> float:
    """Effective sample size of draws ``x`` shaped (chains, draws) on split chains (module docstring). NaN with
    fewer than 4 draws per half or a non-finite draw."""
    x = _split_halves(x)
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
