"""Synthetic stand-ins with a dataset's published shape, for datasets we cannot have (Netflix, Yahoo!, EachMovie, Digg)
or do not have yet.

A stand-in is always labelled (``DataSource(real=False)``, ``source.label == "<id> [synthetic stand-in]"``) and states
its shape, seed and scale in ``source.note``. It reproduces *shape facts* of the dataset, never a claim of a paper: e.g.
the share of Netflix ratings on the top-500 movies (44% in Liu et al.) is something we measure, not an input.

Shape (targets, all from :mod:`data_fetch.registry`):

- Exactly ``n_users = round(scale·U)``, ``n_items = I`` (unchanged by ``scale``), ``n_ratings = round(scale·N)``; every
  user and every item has ≥ 1 rating; no duplicate (user, item) pair; values on the dataset's scale and step.
- User activity and item popularity follow Zipf rank-frequency laws ``c(r) = c_max · r^(-α)``, ``r = 1..n``. The
  exponent is *derived*, not fitted to anything: it is the α for which the curve, pinned at the largest published count
  ``c_max`` and clipped to the feasible range ``[c_min, other dimension]``, sums to the published total ``N``.
  ``c_max`` is the published maximum where known (Netflix: 17,653 ratings for the heaviest user, 232,944 for the most
  rated movie; MovieLens: see the registry). Where it is unknown (EachMovie, Yahoo!, Digg) we borrow Netflix's
  max/mean ratios (84.4 for users, 41.2 for items) — the closest dataset with published maxima — capped at the other
  dimension. ``c_min`` is the dataset's published floor (MovieLens: every user has ≥ 20 ratings), else 1.
  Consequence worth knowing: a pure power law pinned at the max with the right mean is flatter in the tail than real
  data (Netflix stand-in users have ≥ ~140 ratings where many real users have a handful). The stand-in is a shape
  model, not a replica.
- At ``scale`` s the user curve is evaluated at s·U evenly spaced ranks 1..U of the full-size curve (the same activity
  distribution, including the heaviest and the lightest user) and rescaled to sum to s·N, so the heaviest user keeps
  c_max up to that rescaling (Netflix at s = 0.002: 16,379 instead of 17,653); item weights keep their exponent.
- Which user/item gets which rank is a seeded random permutation (ids are not sorted by popularity, as in real files).

Sampling: user u gets exactly its count k_u of distinct items, drawn by successive weighted sampling without
replacement. The item weights come from :func:`saturation_corrected_weights`: they make the *expected* item counts
equal the Zipf targets despite saturation (a user cannot rate an item twice, which would otherwise cut the top items
~20% short). Draws come from a Walker alias table, rejecting items already taken (a marker array stamped with the user
id); a user whose rejections exceed 4·k_u + 64 (very heavy users, e.g. 17,653 of 17,770 Netflix movies) finishes with
the Efraimidis–Spirakis exponential-key method over the remaining items, which continues the same sampling law exactly.
Items left with no rating (only at tiny scales) each take one rating from an item with more than one, so every item is
rated. A numba kernel runs over blocks of 4,096 users in parallel; every block reseeds its generator from the seed, so
the bytes do not depend on the thread count. Rows are stored user by user (a user's items in draw order); shuffle if an
algorithm needs random order. Full Netflix shape: ≈ 10–15 s of CPU and ≈ 2 GB peak memory.

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

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numba
import numpy as np
from numba import prange

from ..errors import ParameterError
from ..paths import data_dir
from .ratings import DataSource, Ratings

GENERATOR_VERSION = 2  # 2: note states the scale as a float ("scale 1.0")
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
    user_max: int  # full-size c_max used to derive user_alpha
    item_max: int
    user_min: int
    scale: float
    published: tuple[int, int, int]  # (users, items, ratings) at scale 1

    def note(self, seed) -> str:
        u, i, n = self.published
        return (f"synthetic stand-in for {self.title} ({u:,} users × {i:,} items, {n:,} ratings), seed {seed}, "
                f"scale {self.scale!r}" + ("" if self.scale == 1 else
                                           f" → {self.n_users:,} users, {self.n_ratings:,} ratings"))


# ---------------------------------------------------------------------------------------------------------------------
# power laws


def zipf_curve(n: int, alpha: float, ranks: np.ndarray | None = None) -> np.ndarray:
    """``r^(-alpha)`` at ranks 1..n (or at the given real-valued ranks)."""
    r = np.arange(1, n + 1, dtype=np.float64) if ranks is None else np.asarray(ranks, dtype=np.float64)
    return r ** (-alpha)


def solve_zipf_exponent(n: int, total: float, c_max: float, *, c_min: float = 0.0, cap: float = np.inf) -> float:
    """The α ≥ 0 with ``Σ_{r=1..n} clip(c_max·r^-α, c_min, cap) = total`` (bisection; the sum decreases in α)."""
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


def fitted_zipf_exponent(counts: np.ndarray, top_fraction: float = 1.0, min_count: float = 1.0) -> float:
    """Least-squares slope of log(count) on log(rank) over the top ranks (a diagnostic, used in tests)."""
    c = np.sort(np.asarray(counts, dtype=np.float64))[::-1]
    c = c[: max(2, int(len(c) * top_fraction))]
    c = c[c >= min_count]
    r = np.arange(1, len(c) + 1, dtype=np.float64)
    slope = np.polyfit(np.log(r), np.log(c), 1)[0]
    return float(-slope)


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
    user_alpha = solve_zipf_exponent(U, N, user_max, c_min=user_min, cap=I)
    item_alpha = solve_zipf_exponent(I, N, item_max, c_min=1, cap=U)
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
                         user_alpha=user_alpha, item_alpha=item_alpha, user_max=user_max, item_max=item_max,
                         user_min=user_min, scale=float(scale), published=(U, I, N))


def user_activity(target: StandinTarget) -> np.ndarray:
    """Exact per-rank user counts at the target scale (descending), summing to ``n_ratings``."""
    U = target.published[0]
    m = target.n_users
    ranks = np.linspace(1.0, U, m) if m > 1 else np.ones(1)
    w = zipf_curve(0, target.user_alpha, ranks=ranks)
    return integer_counts(w, target.n_ratings, min(target.user_min, target.n_ratings // m), target.n_items)


def item_weights(target: StandinTarget) -> np.ndarray:
    """Item popularity weights per rank (descending, sum 1)."""
    w = zipf_curve(target.n_items, target.item_alpha)
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
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ParameterError(f"seed must be a non-negative integer, got {seed!r}")
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
