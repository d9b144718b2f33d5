"""Distinguishing audits: an empirical *lower* bound on the ε of a mechanism.

An (ε, δ)-DP mechanism M and any test that guesses "D′" from one output of M obey, for neighbouring D, D′,
    FPR + e^ε · FNR ≥ 1 − δ   and   FNR + e^ε · FPR ≥ 1 − δ
(FPR = P[test says D′ | run on D], FNR = P[test says D | run on D′]; Kairouz, Oh & Viswanath 2015). So every test with
known error rates certifies  ε ≥ ln((1 − FNR − δ) / FPR)  (and the mirrored bound). We never know the rates, only counts
from n runs on each dataset, so we use one-sided Clopper–Pearson upper bounds FPR_u, FNR_u, each at level α/2 (a union
bound, so the pair holds jointly with probability ≥ 1 − α = ``confidence``), and report

    ε_lower = max(0, ln((1 − FNR_u − δ) / FPR_u), ln((1 − FPR_u − δ) / FNR_u)).

With probability ≥ ``confidence`` the mechanism is not (ε, δ)-DP for any ε < ε_lower. (Jagielski et al. 2020,
Nasr et al. 2021 audit DP-SGD this way.)

The procedure (:func:`audit_statistics`): the statistic of every run on D (``s0``) and on D′ (``s1``) is split into a
calibration half and an evaluation half (the threshold is chosen on the first, so the Clopper–Pearson bounds on the
second stay valid): the threshold and the direction of the test maximise the ε_lower the calibration half certifies;
the evaluation half's counts at that threshold give the reported ε_lower. Black-box mechanisms whose release is a
vector use :func:`projection_statistic` (the release projected on the calibration mean difference).

Kernels: :func:`threshold_counts` (numba; reference :func:`threshold_counts_reference`) counts, for every candidate
threshold, how many s0 lie ≥ it and how many s1 lie below it — the scan over thresholds that picks the test.
:func:`laplace_llr` (numba; reference :func:`laplace_llr_reference`) is the exact log-likelihood-ratio statistic of a
vector released with i.i.d. Laplace noise around one of two known centres (the Neyman–Pearson optimal test).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from numba import njit

from ..errors import ParameterError

DEFAULT_CONFIDENCE = 0.95


# ----------------------------------------------------------------------------------------------- Clopper–Pearson


def cp_upper(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper–Pearson upper bound at level ``alpha``: P[p ≤ cp_upper] ≥ 1 − alpha for k successes in n."""
    from scipy import stats

    if n <= 0:
        raise ParameterError(f"Clopper–Pearson needs n ≥ 1 trials, got n={n}")
    if not 0 <= k <= n:
        raise ParameterError(f"Clopper–Pearson needs 0 ≤ k ≤ n, got k={k}, n={n}")
    if k >= n:
        return 1.0
    return float(stats.beta.ppf(1.0 - alpha, k + 1, n - k))


def epsilon_from_counts(fp: int, n0: int, fn: int, n1: int, *, delta: float = 0.0,
                        confidence: float = DEFAULT_CONFIDENCE) -> float:
    """ε_lower from the false-positive count ``fp`` of ``n0`` runs on D and false-negative count ``fn`` of ``n1`` on D′
    (module docstring); each rate's upper bound at level (1 − confidence)/2."""
    if not 0 < confidence < 1:
        raise ParameterError(f"confidence must lie in (0, 1), got {confidence!r}")
    if not 0 <= delta < 1:
        raise ParameterError(f"delta must lie in [0, 1), got {delta!r}")
    a = (1.0 - confidence) / 2.0
    fpr, fnr = cp_upper(int(fp), int(n0), a), cp_upper(int(fn), int(n1), a)
    best = 0.0
    for num_miss, den in ((fnr, fpr), (fpr, fnr)):
        num = 1.0 - num_miss - delta
        if num > 0 and den > 0:
            best = max(best, math.log(num / den))
    return best


def reach(n: int, *, delta: float = 0.0, confidence: float = DEFAULT_CONFIDENCE) -> float:
    """The largest ε_lower an audit can certify with ``n`` evaluation runs per dataset (no error either way)."""
    return epsilon_from_counts(0, int(n), 0, int(n), delta=delta, confidence=confidence)


def detectable_epsilon(n: int, above: float = 0.0, *, delta: float = 0.0,
                       confidence: float = DEFAULT_CONFIDENCE) -> float:
    """The audit's power at ``n`` evaluation runs per dataset: the smallest true ε of the pair for which the best
    possible test certifies ε_lower > ``above`` at its expected error counts. The pair is randomized response at ε
    (FPR = FNR = (1 − δ)/(1 + e^ε): the pair whose every threshold test is tight for (ε, δ)-DP), so no audit with
    these runs can catch a violation of ``above`` by a mechanism whose true ε is smaller. ``inf`` when ``above`` is
    at or beyond :func:`reach`."""
    def certified(e):
        p = (1.0 - delta) / (1.0 + math.exp(e))
        k = int(round(p * n))
        return epsilon_from_counts(k, int(n), k, int(n), delta=delta, confidence=confidence)

    if above >= reach(n, delta=delta, confidence=confidence) or certified(60.0) <= above:
        return math.inf
    lo, hi = 0.0, 60.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if certified(mid) > above else (mid, hi)
    return hi


# ----------------------------------------------------------------------------------------------- threshold scan


@njit(cache=True)
def threshold_counts(s0_sorted, s1_sorted, thresholds, fp_out, fn_out):
    """For each threshold t (ascending): fp_out = #{s0 ≥ t}, fn_out = #{s1 < t}. Inputs sorted ascending (float64)."""
    n0 = s0_sorted.shape[0]
    n1 = s1_sorted.shape[0]
    i0 = 0
    i1 = 0
    for k in range(thresholds.shape[0]):
        t = thresholds[k]
        while i0 < n0 and s0_sorted[i0] < t:
            i0 += 1
        while i1 < n1 and s1_sorted[i1] < t:
            i1 += 1
        fp_out[k] = n0 - i0
        fn_out[k] = i1


def threshold_counts_reference(s0, s1, thresholds):
    """Plain numpy version of :func:`threshold_counts` (unsorted inputs allowed)."""
    s0 = np.asarray(s0, np.float64)
    s1 = np.asarray(s1, np.float64)
    t = np.asarray(thresholds, np.float64)
    return (s0[None, :] >= t[:, None]).sum(axis=1), (s1[None, :] < t[:, None]).sum(axis=1)


def _scan(s0, s1):
    """(thresholds, fp, fn) for every distinct value of the pooled statistics (+ one above the maximum)."""
    s0 = np.sort(np.asarray(s0, np.float64))
    s1 = np.sort(np.asarray(s1, np.float64))
    pooled = np.unique(np.concatenate([s0, s1]))
    thr = np.concatenate([pooled, [np.inf]]) if pooled.size else np.array([np.inf])
    fp = np.empty(thr.shape[0], np.int64)
    fn = np.empty(thr.shape[0], np.int64)
    threshold_counts(s0, s1, thr, fp, fn)
    return thr, fp, fn


def _best_threshold(s0, s1, delta, confidence):
    """(threshold, sign, ε_lower on these data) maximising the certified ε over thresholds and both test directions."""
    best = (np.inf, 1.0, 0.0)
    for sign in (1.0, -1.0):
        thr, fp, fn = _scan(sign * np.asarray(s0), sign * np.asarray(s1))
        n0, n1 = len(s0), len(s1)
        # point estimates first to keep the scan cheap, then the exact certified value on the few best candidates
        pe = np.log(np.maximum(1.0 - (fn + 1) / (n1 + 2) - delta, 1e-300) / ((fp + 1) / (n0 + 2)))
        for k in np.argsort(-pe)[:16]:
            e = epsilon_from_counts(int(fp[k]), n0, int(fn[k]), n1, delta=delta, confidence=confidence)
            if e > best[2]:
                best = (float(thr[k]), sign, e)
    return best


@dataclass(frozen=True)
class AuditResult:
    """One audit: ε_lower at ``confidence`` from ``n0``/``n1`` evaluation runs (the threshold came from as many more)."""

    epsilon_lower: float
    confidence: float
    delta: float
    n_calibration: int  # runs per dataset used to choose the test
    n_evaluation: int  # runs per dataset the Clopper–Pearson bounds rest on
    fp: int
    fn: int
    threshold: float
    sign: float
    epsilon_point: float  # ln((1 − FNR − δ)/FPR) at the observed rates (+1/2 smoothing): not a bound
    n0: int = -1  # evaluation runs on D (fp counts among them); -1: not recorded
    n1: int = -1  # evaluation runs on D′ (fn counts among them)

    def as_dict(self) -> dict:
        return asdict(self)


def audit_statistics(s0, s1, *, delta: float = 0.0, confidence: float = DEFAULT_CONFIDENCE,
                     calibration_fraction: float = 0.5) -> AuditResult:
    """ε_lower from scalar statistics of runs on D (``s0``) and D′ (``s1``), in run order (see the module docstring)."""
    s0 = np.asarray(s0, np.float64)
    s1 = np.asarray(s1, np.float64)
    if s0.ndim != 1 or s1.ndim != 1 or min(len(s0), len(s1)) < 4:
        raise ParameterError("audit_statistics needs ≥ 4 scalar statistics per dataset")
    if np.isnan(s0).any() or np.isnan(s1).any():
        raise ParameterError("audit statistics contain NaN (a run produced no release?)")
    c0, c1 = int(len(s0) * calibration_fraction), int(len(s1) * calibration_fraction)
    thr, sign, _ = _best_threshold(s0[:c0], s1[:c1], delta, confidence)
    e0, e1 = sign * s0[c0:], sign * s1[c1:]
    fp, fn = int((e0 >= thr).sum()), int((e1 < thr).sum())
    n0, n1 = len(e0), len(e1)
    eps = epsilon_from_counts(fp, n0, fn, n1, delta=delta, confidence=confidence)
    fpr, fnr = (fp + 0.5) / (n0 + 1), (fn + 0.5) / (n1 + 1)
    point = max(0.0, math.log(max(1 - fnr - delta, 1e-300) / fpr), math.log(max(1 - fpr - delta, 1e-300) / fnr))
    return AuditResult(eps, confidence, delta, min(c0, c1), min(n0, n1), fp, fn, thr, sign, point, n0, n1)


def projection_statistic(R0, R1, calibration_fraction: float = 0.5):
    """(s0, s1): releases (rows of R0 on D, R1 on D′) projected on the difference of the calibration halves' means,
    standardised by the calibration halves' per-coordinate spread (a linear test learned on the calibration half)."""
    R0 = np.asarray(R0, np.float64).reshape(len(R0), -1)
    R1 = np.asarray(R1, np.float64).reshape(len(R1), -1)
    c0, c1 = int(len(R0) * calibration_fraction), int(len(R1) * calibration_fraction)
    diff = R1[:c1].mean(axis=0) - R0[:c0].mean(axis=0)
    sd = np.sqrt(0.5 * (R0[:c0].var(axis=0) + R1[:c1].var(axis=0)))
    w = np.where(sd > 0, diff / np.where(sd > 0, sd ** 2, 1.0), np.where(diff != 0, 1e12 * np.sign(diff), 0.0))
    if not np.any(w):
        w = np.ones_like(diff)
    return R0 @ w, R1 @ w


def audit_releases(R0, R1, *, delta: float = 0.0, confidence: float = DEFAULT_CONFIDENCE) -> AuditResult:
    """Black-box audit of vector releases: :func:`projection_statistic` then :func:`audit_statistics`."""
    s0, s1 = projection_statistic(R0, R1)
    return audit_statistics(s0, s1, delta=delta, confidence=confidence)


# ----------------------------------------------------------------------------------------------- Laplace LLR


@njit(cache=True)
def laplace_llr(noise, a, b, scale, centre_is_b, out):
    """out[k] = Σ_e (|x_e − a_e| − |x_e − b_e|) / scale with x = (b if centre_is_b else a) + noise[k] (float64).

    The log-likelihood ratio log p_b(x)/p_a(x) of i.i.d. Laplace(scale) noise around centre b vs a: the optimal test."""
    n, m = noise.shape
    for k in range(n):
        s = 0.0
        for e in range(m):
            x = (b[e] if centre_is_b else a[e]) + noise[k, e]
            s += abs(x - a[e]) - abs(x - b[e])
        out[k] = s / scale


def laplace_llr_reference(noise, a, b, scale, centre_is_b):
    x = (b if centre_is_b else a)[None, :] + noise
    return (np.abs(x - a[None, :]) - np.abs(x - b[None, :])).sum(axis=1) / scale


def audit_laplace_vector(a, b, scale: float, n: int, *, seed=None, delta: float = 0.0,
                         confidence: float = DEFAULT_CONFIDENCE) -> AuditResult:
    """Audit of "release centre + i.i.d. Laplace(scale) noise" with centres ``a`` (on D) and ``b`` (on D′): ``n`` runs
    per dataset, the exact LLR statistic. Its true ε is ‖a − b‖₁ / scale."""
    a = np.ascontiguousarray(np.ravel(a), np.float64)
    b = np.ascontiguousarray(np.ravel(b), np.float64)
    keep = a != b  # equal coordinates add 0 to the LLR whatever the noise: skip them (same law, fewer draws)
    a, b = np.ascontiguousarray(a[keep]), np.ascontiguousarray(b[keep])
    rng = np.random.default_rng(seed)
    s = []
    for centre_is_b in (False, True):
        out = np.empty(n)
        noise = rng.laplace(0.0, scale, size=(n, max(1, a.size)))
        if a.size:
            laplace_llr(noise, a, b, float(scale), centre_is_b, out)
        else:
            out[:] = rng.standard_normal(n)  # identical laws: any statistic is independent of the dataset
        s.append(out)
    return audit_statistics(s[0], s[1], delta=delta, confidence=confidence)
