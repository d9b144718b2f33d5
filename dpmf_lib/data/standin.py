"""Synthetic stand-ins with a dataset's published shape, for datasets we cannot have (Netflix, Yahoo!, EachMovie, Digg)
or do not have yet.

A stand-in is always labelled (``DataSource(real=False)``, ``source.label == "<id> [synthetic stand-in]"``) and states
its shape, seed and scale in ``source.note``. It reproduces *shape facts* of the dataset, never a claim of a paper: e.g.
the share of Netflix ratings on the top-500 movies (44% in Liu et al.) is something we measure, not an input.

Shape (targets, all from :mod:`data_fetch.registry`):

- Exactly ``n_users = round(scale·U)``, ``n_items = I`` (unchanged by ``scale``), ``n_ratings = round(scale·N)``; every
  user and every item has ≥ 1 rating; no duplicate (user, item) pair; values on the dataset's scale and step.
- User activity and item popularity follow rank-frequency laws ``c(r)``, ``r = 1..n``, clipped to the feasible range
  ``[c_min, other dimension]``. Nothing in them is fitted to a claim of a paper: every parameter follows from published
  shape facts of the dataset (:mod:`data_fetch.registry`).

  * Where the dataset's MEDIAN count is published (Netflix; ml-100k, computed from the real file), the law is
    Zipf–Mandelbrot, ``c(r) = c_max · ((1 + q) / (r + q))^α`` — flat over the first ~q ranks, a power law of exponent
    α in the tail — and (q, α) are determined by three facts: ``c(1) = c_max`` (the published maximum),
    ``c(n/2) = median`` (exactly: at the median rank (n + 1)/2) and ``Σ_r clip(c(r), c_min, cap) = N`` (the published
    total). For a given q the median fixes α; q is found by bisection on the total (:func:`fit_zipf_mandelbrot`:
    the fit exists iff the total lies between the pure-Zipf (q = 0) and exponential (q → ∞) curves through the two
    points, and is unique for skewed counts, c_max/median ≳ 5, which covers every dataset here; otherwise
    :class:`ParameterError` names the dataset). Netflix: users q = 341, α = 0.795 (c(U) = 55); movies q = 418,
    α = 1.944 (c(I) = 152). ml-100k: users q = 31.9, α = 0.890; movies q = 80.5, α = 1.266.
  * Where no median is published (ml-1m, ml-10m, EachMovie, Yahoo!, Digg) ``q = 0``: the pure Zipf law
    ``c(r) = c_max · r^(-α)``, with α the exponent for which the clipped curve sums to ``N``.

  ``c_max`` is the published maximum where known (Netflix: 17,653 ratings for the heaviest user, 232,944 for the most
  rated movie; MovieLens: see the registry). Where it is unknown (EachMovie, Yahoo!, Digg) we borrow Netflix's
  max/mean ratios (84.4 for users, 41.2 for items) — the closest dataset with published maxima — capped at the other
  dimension. ``c_min`` is the dataset's published floor (MovieLens: every user has ≥ 20 ratings; Netflix movies ≥ 3),
  else 1; it floors the full-size curve (the item *weights*), but sampled item counts are not clipped to it.
  Consequences worth knowing: a pure Zipf law pinned at the max with the right mean is far flatter than real data
  (Netflix movie / user medians 4,318 / 170 against a real 561 / 96); through the median the Netflix curve's tail is
  much steeper and its head heavier. Measured on the full-size seed-0 stand-in: movies
  min 130, median 563, max 232,868; users min 55, median 96, max 17,653 (pure Zipf: movies 3,020 / 4,318 / 232,705,
  users 131 / 170 / 17,653). There is still a floor of ~130 ratings per movie and ~55 per user where the real data
  goes down to 3 and 1: three facts cannot give the real tail of rarely rated movies and light users. The
  top-500-movie share (53.9%; pure Zipf 13.2%) is a consequence, measured, never an input: Liu et al.'s 44% is a
  claim we measure on it, and nothing is tuned toward it. (Check on real data: the ml-100k stand-in gives a top-500 share of 73%, the
  real u.data 78%.) The stand-in is a shape model, not a replica.
- At ``scale`` s the user curve is evaluated at s·U evenly spaced ranks 1..U of the full-size curve (the same activity
  distribution, including the heaviest and the lightest user) and rescaled to sum to s·N, so the heaviest user keeps
  c_max up to that rescaling (Netflix at s = 0.002: 16,810 instead of 17,653, median user 91 instead of 96; at
  s = 0.01: 17,498 and 95); item weights keep their law, so item counts (median included) scale with s.
- Which user/item gets which rank is a seeded random permutation (ids are not sorted by popularity, as in real files).

Sampling: user u gets exactly its count k_u of distinct items, drawn by successive weighted sampling without
replacement. The item weights come from :func:`saturation_corrected_weights`: they make the *expected* item counts
equal the curve's targets despite saturation (a user cannot rate an item twice, which would otherwise cut the top items
~20% short). Draws come from a Walker alias table, rejecting items already taken (a marker array stamped with the user
id); a user whose rejections exceed 4·k_u + 64 (very heavy users, e.g. 17,653 of 17,770 Netflix movies) finishes with
the Efraimidis–Spirakis exponential-key method over the remaining items, which continues the same sampling law exactly.
Items left with no rating (only at tiny scales) each take one rating from an item with more than one, so every item is
rated. A numba kernel runs over blocks of 4,096 users in parallel; every block reseeds its generator from the seed, so
the bytes do not depend on the thread count. Rows are stored user by user (a user's items in draw order); shuffle if an
algorithm needs random order. Full Netflix shape: ≈ 30 s of CPU, ≈ 25 s of it in the sampling kernel, ≈ 3 GB peak
memory; cached after the first run.

Ratings (explicit data): ``r = μ + b_u + b_i + p_u·q_i + ε``, rounded to the dataset's step and clipped to its scale,
with b_u ~ N(0, 0.40²), b_i ~ N(0, 0.45²), p_u·q_i from rank-8 Gaussian factors with std 0.45, ε ~ N(0, 0.80²) — in
stars for a 1–5 scale, multiplied by (r_max − r_min)/4 otherwise; the total spread (≈ 1.1 stars) is that of ml-100k
(1.126). b_u and b_i are centred with the activity/popularity weights, and μ is calibrated (bisection on a 200,000-pair
sample) so the mean rating after rounding and clipping is the dataset's typical mean (Netflix 3.60; ml-100k 3.53;
ml-1m 3.58; ml-10m 3.51). Where the mean is unknown (EachMovie, Yahoo!) we use Netflix's relative position on the scale,
(3.60 − 1)/4 = 0.65. Binary profiles (Digg) have every value 1.

Cache: stand-ins with ≥ 1,000,000 ratings are stored as
``data_dir()/standins/<id>-seed<seed>-scale<scale>-v<version>.npz`` (written to a temporary file, then ``os.replace``);
bump :data:`GENERATOR_VERSION` whenever the output changes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numba
import numpy as np
from numba import prange

from .. import validate
from ..errors import ParameterError
from ..paths import data_dir
from .ratings import DataSource, Ratings

GENERATOR_VERSION = 3  # 2: note states the scale as a float ("scale 1.0"); 3: Zipf–Mandelbrot through the median
BLOCK_USERS = 4096
CACHE_MIN_RATINGS = 1_000_000
NETFLIX_USER_MAX_OVER_MEAN = 17_653 / (100_480_507 / 480_189)  # 84.4
NETFLIX_ITEM_MAX_OVER_MEAN = 232_944 / (100_480_507 / 17_770)  # 41.2
NETFLIX_MEAN_POSITION = (3.60 - 1.0) / 4.0
RANK = 8
SD_USER_BIAS, SD_ITEM_BIAS, SD_INTERACTION, SD_NOISE = 0.40, 0.45, 0.45, 0.80  # stars on a 1–5 scale


@dataclass(frozen=True)
class StandinTarget:
    """What a stand-in reproduces (all derived from the registry entry and ``scale``)."""

    dataset: str
    title: str
    n_users: int
    n_items: int
    n_ratings: int
    rating_scale: tuple[float, float]
    rating_step: float | None  # None: binary (every value = rating_scale[1])
    mean_rating: float | None
    user_alpha: float
    item_alpha: float
    user_q: float  # Zipf–Mandelbrot offsets (0: pure Zipf law, no published median)
    item_q: float
    user_max: int  # full-size c_max used to derive user_alpha
    item_max: int
    user_min: int
    item_min: int  # floor of the full-size item curve (the sampled counts are not clipped: see the module docstring)
    user_median: float | None  # published median the curve passes through at rank (n+1)/2, None: pure Zipf
    item_median: float | None
    scale: float
    published: tuple[int, int, int]  # (users, items, ratings) at scale 1

    def note(self, seed) -> str:
        u, i, n = self.published
        return (f"synthetic stand-in for {self.title} ({u:,} users × {i:,} items, {n:,} ratings), seed {seed}, "
                f"scale {self.scale!r}" + ("" if self.scale == 1 else
                                           f" → {self.n_users:,} users, {self.n_ratings:,} ratings"))


# ---------------------------------------------------------------------------------------------------------------------
# power laws


def zipf_curve(n: int, alpha: float, ranks: np.ndarray | None = None, q: float = 0.0) -> np.ndarray:
    """``((1 + q) / (r + q))^alpha`` at ranks 1..n (or at the given real-valued ranks); 1 at r = 1.

    ``q = 0`` is the pure Zipf law ``r^(-alpha)`` (computed exactly as before); ``q > 0`` is the Zipf–Mandelbrot law,
    flat over the first ~q ranks and a power law of exponent ``alpha`` beyond them.
    """
    r = np.arange(1, n + 1, dtype=np.float64) if ranks is None else np.asarray(ranks, dtype=np.float64)
    if q == 0:
        return r ** (-alpha)
    return np.exp(-alpha * np.log1p((r - 1.0) / (1.0 + q)))


def solve_zipf_exponent(n: int, total: float, c_max: float, *, c_min: float = 0.0, cap: float = np.inf) -> float:
    """The α ≥ 0 with ``Σ_{r=1..n} clip(c_max·r^-α, c_min, cap) = total`` (bisection; the sum decreases in α)."""
    return _solve_zipf_exponent(int(n), float(total), float(c_max), float(c_min), float(cap))


@functools.lru_cache(maxsize=64)
def _solve_zipf_exponent(n, total, c_max, c_min, cap):
    if not (n >= 1 and total > 0 and c_max > 0):
        raise ParameterError(f"need n ≥ 1, total > 0, c_max > 0; got n={n}, total={total}, c_max={c_max}")
    r = np.arange(1, n + 1, dtype=np.float64)
    logr = np.log(r)

    def mass(a):
        return np.clip(c_max * np.exp(-a * logr), c_min, cap).sum()

    if mass(0.0) < total * (1 - 1e-12):
        raise ParameterError(f"c_max={c_max:g} is below the mean {total / n:g}: no decreasing power law fits")
    lo, hi = 0.0, 1.0
    while mass(hi) > total:
        hi *= 2
        if hi > 64:
            raise ParameterError(f"no Zipf exponent fits n={n}, total={total}, c_max={c_max}, c_min={c_min}")
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if mass(mid) > total:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


ZM_Q_MAX = 1e12  # largest Zipf–Mandelbrot offset searched (q ≫ n: the curve is then its exponential limit)
_ZM_Q_GRID = np.concatenate([[0.0], np.geomspace(1e-3, ZM_Q_MAX, 61)])  # 4 points per decade


def median_rank(n: int) -> float:
    """The rank of the median among n sorted counts, ``(n + 1) / 2`` (n/2 up to half a rank)."""
    return 0.5 * (n + 1)


def zipf_mandelbrot_alpha(n: int, c_max: float, median: float, q: float) -> float:
    """The α with ``c_max·((1+q)/(m+q))^α = median`` at the median rank ``m = (n+1)/2``."""
    return float(np.log(c_max / median) / np.log1p((median_rank(n) - 1.0) / (1.0 + q)))


def zipf_mandelbrot_mass(n: int, c_max: float, median: float, q: float, *, c_min: float = 0.0,
                         cap: float = np.inf) -> float:
    """``Σ_{r=1..n} clip(c(r), c_min, cap)`` for the curve through (1, c_max) and ((n+1)/2, median) with offset q."""
    return _zm_mass(np.arange(n, dtype=np.float64), float(c_max), float(median), float(q), float(c_min), float(cap))


def _zm_mass(r_minus_1, c_max, median, q, c_min, cap):
    m1 = r_minus_1[-1] / 2.0  # median rank − 1 = (n − 1)/2
    h = np.log1p(r_minus_1 / (1.0 + q)) / np.log1p(m1 / (1.0 + q))  # 0 at r = 1, 1 at the median rank
    return float(np.clip(c_max * np.exp(-np.log(c_max / median) * h), c_min, cap).sum())


def fit_zipf_mandelbrot(n: int, total: float, c_max: float, median: float, *, c_min: float = 0.0,
                        cap: float = np.inf, dataset: str = "") -> tuple[float, float]:
    """(q, α) of the Zipf–Mandelbrot curve ``c(r) = c_max·((1+q)/(r+q))^α`` with ``c(1) = c_max``,
    ``c((n+1)/2) = median`` and ``Σ_{r=1..n} clip(c(r), c_min, cap) = total``, q ∈ [0, ZM_Q_MAX].

    For a given q the median fixes α (:func:`zipf_mandelbrot_alpha`), so only q is searched: the clipped sum T(q) is
    evaluated on a log grid (q = 0, 10⁻³ … 10¹², 4 points per decade), the first bracket where T crosses ``total`` is
    refined by bisection on log(1 + q). q = 0 is the pure Zipf law through the two points, q → ∞ the exponential curve
    through them, and T moves between those limits. For skewed counts (c_max/median ≳ 5: every dataset in the
    registry) T increases with q, so a fit exists iff T(0) ≤ total ≤ T(∞) and it is unique. For weakly skewed counts
    (c_max/median ≲ 4) T can peak at q ~ n/10 and then fall slightly, so two fits can exist in a narrow band of
    totals; the smallest q (the one closest to a pure Zipf law) is returned. No fit: :class:`ParameterError` naming
    ``dataset`` and the range of totals the two points allow.
    """
    return _fit_zipf_mandelbrot(int(n), float(total), float(c_max), float(median), float(c_min), float(cap),
                                str(dataset))


@functools.lru_cache(maxsize=64)
def _fit_zipf_mandelbrot(n, total, c_max, median, c_min, cap, dataset):
    what = f"{dataset}: " if dataset else ""
    if not (n >= 3 and total > 0 and np.isfinite(total) and np.isfinite(c_max) and np.isfinite(median)):
        raise ParameterError(f"{what}need n ≥ 3 and finite total > 0, c_max, median; got n={n}, total={total}, "
                             f"c_max={c_max}, median={median}")
    if not (c_min <= median < c_max and median <= cap and median > 0):
        raise ParameterError(f"{what}the median count {median:g} must lie in [c_min, c_max) = [{c_min:g}, {c_max:g}) "
                             f"and be ≤ cap {cap:g}; fix median_*_count / min_*_count / max_*_count in the registry")
    r1 = np.arange(n, dtype=np.float64)
    f = np.array([_zm_mass(r1, c_max, median, q, c_min, cap) for q in _ZM_Q_GRID]) - total
    f[np.abs(f) <= 1e-12 * total] = 0.0  # a grid point that already fits (up to rounding of the sum)
    if f[0] == 0.0:
        return 0.0, zipf_mandelbrot_alpha(n, c_max, median, 0.0)
    cross = np.flatnonzero(np.sign(f[:-1]) * np.sign(f[1:]) <= 0)
    if len(cross) == 0:
        raise ParameterError(
            f"{what}no Zipf–Mandelbrot curve through c(1) = {c_max:g} and c({median_rank(n):g}) = {median:g} "
            f"(clipped to [{c_min:g}, {cap:g}]) sums to {total:g} over {n:,} ranks: with q in [0, {ZM_Q_MAX:g}] the "
            f"sum ranges over [{f.min() + total:.6g}, {f.max() + total:.6g}]; check the published total, maximum and "
            f"median, or drop the median (pure Zipf law)")
    k = int(cross[0])
    lo, hi = np.log1p(_ZM_Q_GRID[k]), np.log1p(_ZM_Q_GRID[k + 1])
    f_lo = f[k]
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        fm = _zm_mass(r1, c_max, median, float(np.expm1(mid)), c_min, cap) - total
        if fm == 0.0:
            lo = hi = mid
            break
        if np.sign(fm) == np.sign(f_lo):
            lo, f_lo = mid, fm
        else:
            hi = mid
        if hi - lo <= 1e-15 * max(1.0, hi):
            break
    q = float(np.expm1(0.5 * (lo + hi)))
    return q, zipf_mandelbrot_alpha(n, c_max, median, q)


def integer_counts(weights: np.ndarray, total: int, lo: int, hi: int) -> np.ndarray:
    """Integers ``c_j ∈ [lo, hi]`` summing exactly to ``total``, proportional to ``weights`` where the bounds allow."""
    w = np.asarray(weights, dtype=np.float64)
    n = len(w)
    if not (n * lo <= total <= n * hi):
        raise ParameterError(f"cannot split {total} into {n} counts within [{lo}, {hi}]")
    a, b = 0.0, 1.0
    while np.clip(b * w, lo, hi).sum() < total:
        b *= 2
    for _ in range(200):
        m = 0.5 * (a + b)
        if np.clip(m * w, lo, hi).sum() < total:
            a = m
        else:
            b = m
    x = np.clip(b * w, lo, hi)
    c = np.floor(x).astype(np.int64)
    rem = int(total - c.sum())
    frac = x - c
    if rem > 0:
        order = np.argsort(-frac, kind="stable")
        order = order[c[order] < hi][:rem]
        c[order] += 1
    elif rem < 0:
        order = np.argsort(frac, kind="stable")
        order = order[c[order] > lo][:-rem]
        c[order] -= 1
    assert c.sum() == total
    return c


# ---------------------------------------------------------------------------------------------------------------------
# targets


def standin_target(dataset_id: str, scale: float = 1.0) -> StandinTarget:
    """The shape a stand-in of ``dataset_id`` reproduces at ``scale`` (see the module docstring)."""
    from data_fetch.registry import get_spec

    spec = get_spec(dataset_id)
    if spec.kind == "vectors" or spec.shape is None:
        raise ParameterError(f"{dataset_id} holds vectors, not ratings; use dpmf_lib.data.datasets.load_vectors")
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not (0 < scale <= 1) or not np.isfinite(scale):
        raise ParameterError(f"standin_scale must be in (0, 1], got {scale!r}")
    U, I, N = spec.shape.users, spec.shape.items, spec.shape.ratings
    user_max = spec.max_user_count or int(min(round(NETFLIX_USER_MAX_OVER_MEAN * N / U), I))
    item_max = spec.max_item_count or int(min(round(NETFLIX_ITEM_MAX_OVER_MEAN * N / I), U))
    user_min = spec.min_user_count or 1
    item_min = spec.min_item_count or 1
    user_q, user_alpha = _curve_law(U, N, user_max, spec.median_user_count, user_min, I, f"{spec.id} users")
    item_q, item_alpha = _curve_law(I, N, item_max, spec.median_item_count, item_min, U, f"{spec.id} items")
    n_users = max(1, int(round(scale * U)))
    n_ratings = int(round(scale * N))
    if n_ratings < max(I, n_users * user_min):
        raise ParameterError(f"standin_scale={scale:g} is too small for {dataset_id}: {n_ratings} ratings cannot give "
                             f"all {I:,} items and {n_users:,} users ≥ 1 rating (≥ {user_min} per user); "
                             f"use scale ≥ {max(I, U * user_min) / N:.2g}")
    lo, hi = spec.rating_scale
    mean = spec.mean_rating
    if mean is None and spec.rating_step is not None:
        mean = lo + NETFLIX_MEAN_POSITION * (hi - lo)
    return StandinTarget(dataset=spec.id, title=spec.title, n_users=n_users, n_items=I, n_ratings=n_ratings,
                         rating_scale=(float(lo), float(hi)), rating_step=spec.rating_step, mean_rating=mean,
                         user_alpha=user_alpha, item_alpha=item_alpha, user_q=user_q, item_q=item_q,
                         user_max=user_max, item_max=item_max, user_min=user_min, item_min=item_min,
                         user_median=spec.median_user_count, item_median=spec.median_item_count,
                         scale=float(scale), published=(U, I, N))


def _curve_law(n, total, c_max, median, c_min, cap, what) -> tuple[float, float]:
    """(q, α): Zipf–Mandelbrot through the published median where there is one, else pure Zipf (q = 0)."""
    if median is None:
        return 0.0, solve_zipf_exponent(n, total, c_max, c_min=c_min, cap=cap)
    return fit_zipf_mandelbrot(n, total, c_max, median, c_min=c_min, cap=cap, dataset=what)


def user_activity(target: StandinTarget) -> np.ndarray:
    """Exact per-rank user counts at the target scale (descending), summing to ``n_ratings``."""
    U = target.published[0]
    m = target.n_users
    ranks = np.linspace(1.0, U, m) if m > 1 else np.ones(1)
    w = zipf_curve(0, target.user_alpha, ranks=ranks, q=target.user_q)
    return integer_counts(w, target.n_ratings, min(target.user_min, target.n_ratings // m), target.n_items)


def item_curve(target: StandinTarget) -> np.ndarray:
    """Full-size target count per item rank: ``clip(c_max·c(r), item_min, users)``, summing to the published total."""
    c = target.item_max * zipf_curve(target.n_items, target.item_alpha, q=target.item_q)
    return np.clip(c, target.item_min, target.published[0])


def item_weights(target: StandinTarget) -> np.ndarray:
    """Item popularity weights per rank (descending, sum 1): :func:`item_curve` normalised."""
    w = item_curve(target)
    return w / w.sum()


# ---------------------------------------------------------------------------------------------------------------------
# kernels


def alias_table(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Walker/Vose alias table of the distribution ``p`` (float64 acceptance thresholds, int32 aliases)."""
    p = np.asarray(p, dtype=np.float64)
    n = len(p)
    scaled = p * n / p.sum()
    prob = np.ones(n)
    alias = np.arange(n, dtype=np.int32)
    small = list(np.flatnonzero(scaled < 1.0))
    large = list(np.flatnonzero(scaled >= 1.0))
    while small and large:
        s, l_ = small.pop(), large.pop()
        prob[s] = scaled[s]
        alias[s] = l_
        scaled[l_] -= 1.0 - scaled[s]
        (small if scaled[l_] < 1.0 else large).append(l_)
    return prob, alias


@numba.njit(cache=True, inline="always")
def _rating(mu, bu, bi, p, q, noise, lo, hi, step):
    x = mu + bu + bi + noise
    for k in range(p.shape[0]):
        x += p[k] * q[k]
    if step <= 0.0:
        return hi
    x = lo + step * np.floor((x - lo) / step + 0.5)
    if x < lo:
        x = lo
    if x > hi:
        x = hi
    return x


@numba.njit(cache=True, parallel=True)
def _sample_ratings(counts, indptr, prob, alias, weights, block_seeds, block_size, P, Q, bu, bi, mu, sd_noise, lo, hi,
                    step, items_out, values_out):
    n_users = len(counts)
    n_items = len(prob)
    n_blocks = len(block_seeds)
    for b in prange(n_blocks):
        np.random.seed(block_seeds[b])
        marker = np.full(n_items, -1, np.int64)
        u0 = b * block_size
        u1 = min(n_users, u0 + block_size)
        for u in range(u0, u1):
            k = counts[u]
            start = indptr[u]
            filled = 0
            attempts = 0
            limit = 4 * k + 64
            while filled < k and attempts < limit:
                attempts += 1
                x = np.random.random() * n_items
                j = int(x)
                if j >= n_items:
                    j = n_items - 1
                if x - j >= prob[j]:
                    j = alias[j]
                if marker[j] != u:
                    marker[j] = u
                    items_out[start + filled] = j
                    filled += 1
            if filled < k:  # heavy user: Efraimidis–Spirakis keys over the items not yet taken
                keys = np.empty(n_items)
                for j in range(n_items):
                    keys[j] = np.inf if marker[j] == u else -np.log(1.0 - np.random.random()) / weights[j]
                order = np.argsort(keys)
                for t in range(k - filled):
                    j = order[t]
                    marker[j] = u
                    items_out[start + filled] = j
                    filled += 1
            for t in range(start, start + k):
                j = items_out[t]
                values_out[t] = _rating(mu, bu[u], bi[j], P[u], Q[j], sd_noise * np.random.standard_normal(), lo, hi,
                                        step)


@numba.njit(cache=True)
def _cover_unrated_items(users, items, values, n_items, seed, P, Q, bu, bi, mu, sd_noise, lo, hi, step):
    """Give every item with no rating one rating taken from an item with more than one (user counts unchanged)."""
    np.random.seed(seed)
    counts = np.zeros(n_items, np.int64)
    for t in range(len(items)):
        counts[items[t]] += 1
    n = len(items)
    for z in range(n_items):
        if counts[z] > 0:
            continue
        while True:
            t = int(np.random.random() * n)
            if t >= n:
                t = n - 1
            j = items[t]
            if counts[j] > 1:
                break
        counts[j] -= 1
        counts[z] += 1
        items[t] = z
        u = users[t]
        values[t] = _rating(mu, bu[u], bi[z], P[u], Q[z], sd_noise * np.random.standard_normal(), lo, hi, step)


@numba.njit(cache=True, parallel=True)
def _inclusion_thresholds(w, ks):
    """For each draw count k, the t with Σ_j (1 − exp(−w_j t)) = k (Newton from t = k; f is concave increasing)."""
    n_items = len(w)
    t_out = np.empty(len(ks))
    for b in prange(len(ks)):
        k = ks[b]
        if k >= n_items - 1e-9:
            t_out[b] = np.inf
            continue
        t = k
        for _ in range(100):
            f = -k
            df = 0.0
            for j in range(n_items):
                e = np.exp(-w[j] * t)
                f += 1.0 - e
                df += w[j] * e
            if f >= -1e-9 * k or df <= 0.0:
                break
            t -= f / df
        t_out[b] = t
    return t_out


@numba.njit(cache=True, parallel=True)
def _expected_counts(w, t, nk):
    out = np.empty(len(w))
    for j in prange(len(w)):
        s = 0.0
        for b in range(len(t)):
            s += nk[b] * (1.0 if np.isinf(t[b]) else 1.0 - np.exp(-w[j] * t[b]))
        out[j] = s
    return out


def _draw_count_groups(counts: np.ndarray, max_groups: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Distinct user draw counts with multiplicities, merged into ≤ max_groups log-spaced groups (mean k per group)."""
    ks, nk = np.unique(counts, return_counts=True)
    if len(ks) <= max_groups:
        return ks.astype(np.float64), nk.astype(np.float64)
    edges = np.geomspace(ks[0], ks[-1] + 1, max_groups + 1)
    g = np.clip(np.searchsorted(edges, ks, side="right") - 1, 0, max_groups - 1)
    n = np.bincount(g, weights=nk, minlength=max_groups)
    mass = np.bincount(g, weights=nk * ks, minlength=max_groups)
    keep = n > 0
    return mass[keep] / n[keep], n[keep]


def saturation_corrected_weights(target_share: np.ndarray, counts: np.ndarray, n_iter: int = 30,
                                 tol: float = 1e-3) -> np.ndarray:
    """Sampling weights whose expected item counts under per-user sampling without replacement match the targets.

    Without correction the most popular items fall short of their Zipf target (a user cannot take an item twice).
    Successive weighted sampling of k items ≈ item j is taken iff its exponential clock E_j/w_j is below a threshold
    t_k with Σ_j (1 − exp(−w_j t_k)) = k, so E[count_j] = Σ_u (1 − exp(−w_j t_{k_u})). We iterate
    w_j ← w_j · target_j / E[count_j] (targets capped at 95% of the users). Draw counts are grouped into ≤ 64
    log-spaced groups to keep this O(64 · n_items) per iteration.
    """
    n_users = len(counts)
    total = counts.sum()
    target = np.minimum(target_share / target_share.sum() * total, 0.95 * n_users)
    ks, nk = _draw_count_groups(counts)
    w = target / target.sum()
    for _ in range(n_iter):
        t = _inclusion_thresholds(w, ks)
        expected = _expected_counts(w, t, nk)
        ratio = target / np.maximum(expected, 1e-300)
        if np.max(np.abs(ratio - 1.0)) < tol:
            break
        w = w * ratio
        w /= w.sum()
    return w


def _round_clip(x, lo, hi, step):
    if step is None or step <= 0:
        return np.full_like(x, hi)
    return np.clip(lo + step * np.floor((x - lo) / step + 0.5), lo, hi)


def _calibrate_mu(target: StandinTarget, rng, counts, w_items, P, Q, bu, bi, sd_noise, n_sample=200_000) -> float:
    """μ such that the mean of the rounded, clipped ratings is the target mean (bisection on a pair sample)."""
    lo, hi = target.rating_scale
    if target.rating_step is None or target.mean_rating is None:
        return 0.0
    u = rng.choice(len(counts), size=n_sample, p=counts / counts.sum())
    j = rng.choice(len(w_items), size=n_sample, p=w_items)
    z = bu[u] + bi[j] + np.einsum("ij,ij->i", P[u], Q[j]) + sd_noise * rng.standard_normal(n_sample)
    a, b = lo - 3 * (hi - lo), hi + 3 * (hi - lo)
    for _ in range(60):
        m = 0.5 * (a + b)
        if _round_clip(m + z, lo, hi, target.rating_step).mean() < target.mean_rating:
            a = m
        else:
            b = m
    return 0.5 * (a + b)


# ---------------------------------------------------------------------------------------------------------------------
# generation and cache


def generate_standin(dataset_id: str, *, seed: int = 0, scale: float = 1.0) -> Ratings:
    """Generate the stand-in of ``dataset_id`` (no cache; see :func:`load_standin`)."""
    validate.integer(seed, "seed", lo=0)
    t = standin_target(dataset_id, scale)
    ss = np.random.SeedSequence([int(seed), GENERATOR_VERSION, 0x57A4D1])
    rng_perm, rng_model, rng_cal, rng_blocks = (np.random.default_rng(s) for s in ss.spawn(4))

    counts_by_rank = user_activity(t)
    user_rank_of = rng_perm.permutation(t.n_users)  # user id u has activity rank user_rank_of[u]
    counts = np.ascontiguousarray(counts_by_rank[user_rank_of], dtype=np.int64)
    w_rank = item_weights(t)
    item_rank_of = rng_perm.permutation(t.n_items)
    w_items = np.ascontiguousarray(w_rank[item_rank_of])

    lo, hi = t.rating_scale
    unit = (hi - lo) / 4.0
    sd_f = (SD_INTERACTION * unit) ** 0.5 / RANK ** 0.25  # p·q = Σ_k p_k q_k has std SD_INTERACTION·unit
    P = (rng_model.standard_normal((t.n_users, RANK)) * sd_f).astype(np.float32)
    Q = (rng_model.standard_normal((t.n_items, RANK)) * sd_f).astype(np.float32)
    bu = rng_model.standard_normal(t.n_users) * SD_USER_BIAS * unit
    bi = rng_model.standard_normal(t.n_items) * SD_ITEM_BIAS * unit
    bu = (bu - np.dot(counts / counts.sum(), bu)).astype(np.float32)
    bi = (bi - np.dot(w_items, bi)).astype(np.float32)
    sd_noise = SD_NOISE * unit
    mu = _calibrate_mu(t, rng_cal, counts, w_items, P, Q, bu, bi, sd_noise)
    step = -1.0 if t.rating_step is None else float(t.rating_step)

    w_sample = saturation_corrected_weights(w_items, counts)
    prob, alias = alias_table(w_sample)
    indptr = np.zeros(t.n_users + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    n_blocks = (t.n_users + BLOCK_USERS - 1) // BLOCK_USERS
    block_seeds = rng_blocks.integers(0, 2**32 - 1, size=n_blocks + 1, dtype=np.int64)
    items = np.empty(t.n_ratings, dtype=np.int32)
    values = np.empty(t.n_ratings, dtype=np.float32)
    _sample_ratings(counts, indptr, prob, alias.astype(np.int64), w_sample, block_seeds[:-1], BLOCK_USERS, P, Q, bu, bi,
                    float(mu), float(sd_noise), float(lo), float(hi), step, items, values)
    users = np.repeat(np.arange(t.n_users, dtype=np.int32), counts)
    _cover_unrated_items(users, items, values, t.n_items, int(block_seeds[-1]), P, Q, bu, bi, float(mu),
                         float(sd_noise), float(lo), float(hi), step)
    params = {"generator_version": GENERATOR_VERSION, "seed": int(seed), **_jsonable(asdict(t)), "mu": float(mu)}
    checksum = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()
    source = DataSource(dataset=t.dataset, real=False, checksum=checksum, note=t.note(seed))
    return Ratings(users=users, items=items, values=values, n_users=t.n_users, n_items=t.n_items,
                   rating_scale=t.rating_scale, source=source, extra={"standin": params})


def sample_user_items(counts: np.ndarray, weights: np.ndarray, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(users, items): ``counts[u]`` distinct items per user by successive sampling ∝ ``weights`` (the sampling step of
    :func:`generate_standin` on its own, for tests against ``numpy.random.Generator.choice(replace=False, p=...)``)."""
    counts = np.ascontiguousarray(counts, dtype=np.int64)
    w = np.ascontiguousarray(weights, dtype=np.float64)
    w = w / w.sum()
    if counts.max(initial=0) > len(w):
        raise ParameterError(f"a user cannot take {counts.max()} distinct items out of {len(w)}")
    prob, alias = alias_table(w)
    indptr = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    n_blocks = (len(counts) + BLOCK_USERS - 1) // BLOCK_USERS
    seeds = np.random.default_rng(seed).integers(0, 2**32 - 1, size=n_blocks, dtype=np.int64)
    items = np.empty(indptr[-1], dtype=np.int32)
    values = np.empty(indptr[-1], dtype=np.float32)
    zero_u, zero_i = np.zeros((len(counts), 1), np.float32), np.zeros((len(w), 1), np.float32)
    _sample_ratings(counts, indptr, prob, alias.astype(np.int64), w, seeds, BLOCK_USERS, zero_u, zero_i,
                    zero_u[:, 0], zero_i[:, 0], 0.0, 0.0, 1.0, 1.0, -1.0, items, values)
    return np.repeat(np.arange(len(counts), dtype=np.int32), counts), items


def _jsonable(d: dict) -> dict:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}


def cache_path(dataset_id: str, seed: int, scale: float, root: Path | None = None) -> Path:
    root = Path(root) if root is not None else data_dir()
    return root / "standins" / f"{dataset_id}-seed{int(seed)}-scale{float(scale)!r}-v{GENERATOR_VERSION}.npz"


def load_standin(dataset_id: str, *, seed: int = 0, scale: float = 1.0, cache: bool | None = None,
                 data_root: Path | None = None) -> Ratings:
    """The stand-in of ``dataset_id``, from the cache when present; generated (and cached if large) otherwise.

    ``cache=None`` caches stand-ins with ≥ 1,000,000 ratings; True/False force it.
    """
    t = standin_target(dataset_id, scale)
    use_cache = (t.n_ratings >= CACHE_MIN_RATINGS) if cache is None else bool(cache)
    path = cache_path(dataset_id, seed, scale, data_root)
    if use_cache and path.is_file():
        cached = _read_cache(path)
        if cached is not None:
            return cached
    r = generate_standin(dataset_id, seed=seed, scale=scale)
    if use_cache:
        _write_cache(path, r)
    return r


def _write_cache(path: Path, r: Ratings) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, users=r.users, items=r.items, values=r.values,
                     meta=np.frombuffer(json.dumps({"n_users": r.n_users, "n_items": r.n_items,
                                                    "rating_scale": list(r.rating_scale),
                                                    "source": r.source.as_dict(), "extra": r.extra}).encode(),
                                        dtype=np.uint8))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_cache(path: Path) -> Ratings | None:
    try:
        with np.load(path) as z:
            meta = json.loads(z["meta"].tobytes().decode())
            src = meta["source"]
            return Ratings(users=z["users"], items=z["items"], values=z["values"], n_users=meta["n_users"],
                           n_items=meta["n_items"], rating_scale=tuple(meta["rating_scale"]),
                           source=DataSource(src["dataset"], src["real"], src["checksum"], src["note"]),
                           extra=meta["extra"])
    except (OSError, KeyError, ValueError):
        return None  # unreadable cache: regenerate
