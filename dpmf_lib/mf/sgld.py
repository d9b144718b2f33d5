"""Fast SGLD for the biased MF posterior (Liu et al. 2015, Sections 4 and 5.4), and an exact (eager-noise) mode.

Target (λ_r, Λ_u, Λ_v diagonal; s = ``likelihood_scale``; w_r optional per-rating weights):
    log p(U, V, b | R) = −(s λ_r / 2) Σ_r w_r (r − r̂_r)² − ½ Σ_i u_iᵀΛ_u u_i − ½ Σ_j v_jᵀΛ_v v_j − (λ_b/2)(Σ b_i² + Σ b_j²)
Step for rating r = (i, j) at step size η (Welling & Teh 2011 with a one-rating minibatch; the paper's eq. 4 and the
N/N_i prior scaling of Section 5.4):
    u_i ← u_i + (η/2) [ N s λ_r w_r e v_j − (N/N_i) Λ_u u_i ] + noise (see the schedules below)
and likewise for v_j (N/M_j), b_i, b_j. Each vector gets N(0, ζη) per step of the round. ζ = 1 samples the posterior;
ζ < 1 is the paper's temperature (noise N(0, ζ·η_t), Section 6.3), i.e. the chain targets p^(1/ζ).

Lazy noise (``noise_schedule="lazy"``): a vector touched after c untouched steps receives one N(0, c ζ η) draw (Gaussians are
closed under addition, so this equals eager noise in distribution). **Noise ahead**: the draw is added at the end of the
vector's *previous* touch instead of at the start of this one — its gradient step and the noise owed until its next
touch (or the round's end) go into the same store — and the steps up to each vector's first touch are added before the
round (``_row_noise``). Nothing reads a vector between two of its touches (with one thread; under Hogwild as before), so
every gradient sees the same law of state and every vector still gets exactly N steps' worth of variance per round; the
round's end state, which the Λ Gibbs step and the test evaluation read, is the same too. Why: the step's first pass then
only reads the rows (adding the pending noise there wrote both rows, which the step re-read and re-wrote). The counters
come from the layout (:func:`dpmf_lib.mf.layout.noise_ahead_counters`). Vectors with no training rating have the prior
as conditional posterior and interact with nothing: they are integrated out during the run (held at the prior mean 0, so
test predictions for them use the posterior mean, and left out of the Λ Gibbs step, which is then exact for the rated
rows' marginal), and drawn from N(0, ζ Λ⁻¹) only in the returned sample and kept samples.

Noise source: ``noise="table"`` reads contiguous segments of a :class:`~dpmf_lib.mf.noise.GaussianTable` from random
offsets; ``noise="normal"`` draws fresh Box–Muller normals. ``mode="exact"`` = fresh normals + eager noise (every vector
gets its own draw at every step; cost O(N (n_users + n_items) d) per round — only for small validation problems).

Hyper-parameters: unless ``fixed_lambda`` is given, Λ_u, Λ_v (diagonal) are Gibbs-sampled once per round from their
Gamma(α, β) conditionals — shape α + n/2, rate β + ½ Σ u_ik² over the n rows with ratings (β is read as a rate; the paper says only "α = 1.0,
β = 100.0"). λ_r and λ_b are fixed parameters.
**Temperature and Λ (not tempered).** With ζ < 1 the U, V, b steps target p^(1/ζ), but the Λ Gibbs step above uses
the untempered conditional (shape α + n/2, rate β + ½ Σ u_ik²). The tempered joint p^(1/ζ)(U, V, Λ) would need
shape (α − 1)/ζ + 1 + n/(2ζ) and rate (β + ½ Σ u_ik²)/ζ; with the paper's ζ = 0.07 the chain is therefore a tempered
U, V sampler coupled to an untempered hyper-prior step, not an exact sampler of p^(1/ζ). We keep it (the paper
describes ζ only as a factor on the noise, Section 6.3) and say so on every figure run at ζ < 1 that reads Λ from
the chain (Figure 4); ``fixed_lambda`` (Algorithm 1, Figure 7) is unaffected.

Speed: the fused table step (:func:`_sgld_range_table`) does C-SGD's row work (a read-only dot pass, one
read-modify-write pass) plus two random table segments of d + 2 numbers and two more FMAs per element, prefetching the
factor rows 8 ratings ahead and the next update's table segments. With an isotropic Λ (every ``fixed_lambda`` given as
scalars, and the first round of the Gibbs mode) the gradient step uses scalar coefficients (``iso``); its results differ
from the general step's in float32 rounding only. For d in ``sgd_kernels.ROW_LENGTHS`` the segment runs
:func:`_sgld_range_table_rows` (whole rows as vector values emitted in register-sized chunks, see
:mod:`dpmf_lib.mf.sgd_kernels` and :mod:`dpmf_lib.mf.rowvec`). Throughput figures are in docs/performance.md.

**Default table size** (:func:`default_table_size`): the smallest power of two
≥ 512 (d + 1) numbers, at least 2^16 — i.e. at least 512 non-overlapping segments of a vector's d + 1 numbers,
about the paper's own threshold in segments (its Figure 4 finds results "essentially indistinguishable" from fresh
normals "once we have more than 10,000 numbers", at d = 16: ≈ 590 segments). Overlapping segments are shifted copies
of the same numbers (noise correlated across vectors), so the size has to grow with d: 2^16 at d ≤ 127 (256 KB,
fits this machine's 1 MB L2 beside the factor rows), 2^17 at d = 128, 2^19 at d = 512, 2^21 at d = 2048 (where a
fixed 2^16 would hold only 32 segments, and one update's u and v segments would overlap 6 % of the time). A smaller
table is faster at large d (its random segments compete less with the out-of-L3 user rows), so the size is a trade.
An explicit ``noise_table_size`` means what it says (``liu_fig4`` studies it).

For Liu Algorithm 1 (DP posterior sampling, density ∝ exp(−ε/(4B) F)): pass ``likelihood_scale``, per-rating ``weights``
w_i, and ``fixed_lambda``; the returned ``SGLDResult.samples_V`` holds the V samples to release.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from numba import literally, njit, prange

from .. import validate
from ..data.ratings import require_ratings
from ..errors import ParameterError
from ..metrics import rmse
from .csgd import _external_model, _internal_model, make_layout, num_threads
from .layout import Layout
from .model import DIM_HINT, MAX_DIM, MFModel, init_model, learning_rate
from .noise import GaussianTable, randint_below, splitmix_next, standard_normals, stream_seed
from .prefetch import prefetch_address, prefetch_row
from .rowvec import row_dot, sgld_row_step_diag, sgld_row_step_iso
from .schedule import Schedule, check_schedule
from .sgd_kernels import MAX_ROW_LENGTH


if TYPE_CHECKING:
    import pandas as pd

@njit(cache=True, inline="always")
def _block_state(base, s):
    st, z = splitmix_next(base ^ (np.uint64(s) * np.uint64(0xD6E8FEB86659FD93)))
    return z


@njit(cache=True, fastmath=True, inline="always")
def _add_noise(A, b, row, sd, use_table, ext, size, state, buf, upd_b):
    d = A.shape[1]
    if use_table:
        state, o = randint_below(state, size)
        for f in range(d):
            A[row, f] += sd * ext[o + f]
        if upd_b:
            b[row] += sd * ext[o + d]
    else:
        state = standard_normals(state, buf)
        for f in range(d):
            A[row, f] += sd * buf[f]
        if upd_b:
            b[row] += sd * buf[d]
    return state


@njit(cache=True, fastmath=True, inline="always")
def _likelihood_drift(r, s, bu_i, bi_j, b0, lik, clip_on, clip_lo, clip_hi):
    """The per-rating start of every SGLD step (``_sgld_step`` and both fused table kernels): the error
    e = r − (s + b_i + b_j + b_0) of a rating ``r`` whose factor dot product is ``s``, zero when ``clip_on`` and the
    prediction lies outside [``clip_lo``, ``clip_hi``] (the loss (r − clip(r̂, lo, hi))² is constant there, so its
    gradient is 0), times ``lik``. Scalars only: an inlined call with array arguments costs reference counting per
    rating (see :func:`_sgld_range_table`)."""
    e = r - (s + bu_i + bi_j + b0)
    if clip_on:
        pr = s + bu_i + bi_j + b0
        if pr < clip_lo or pr > clip_hi:
            e = np.float32(0.0)
    return lik * e


@njit(cache=True, fastmath=True, inline="always")
def _sgld_step(k, users, items, vals, w, has_w, U, V, bu, bi, b0, h, lik, pwu, pwv, Lu, Lv, lamb, upd_v, upd_b,
               clip_on, clip_lo, clip_hi):
    d = U.shape[1]
    i = users[k]
    j = items[k]
    s = np.float32(0.0)
    for f in range(d):
        s += U[i, f] * V[j, f]
    g = _likelihood_drift(vals[k], s, bu[i], bi[j], b0, lik, clip_on, clip_lo, clip_hi)
    if has_w:
        g = g * w[k]
    pu = pwu[i]
    pv = pwv[j]
    if upd_v:
        for f in range(d):
            uf = U[i, f]
            vf = V[j, f]
            U[i, f] = uf + h * (g * vf - pu * Lu[f] * uf)
            V[j, f] = vf + h * (g * uf - pv * Lv[f] * vf)
        if upd_b:
            bi[j] += h * (g - pv * lamb * bi[j])
    else:
        for f in range(d):
            U[i, f] += h * (g * V[j, f] - pu * Lu[f] * U[i, f])
    if upd_b:
        bu[i] += h * (g - pu * lamb * bu[i])


@njit(cache=True, fastmath=True)
def _sgld_range_table(users, items, vals, w, has_w, ahead_u, ahead_v, start, stop, U, V, bu, bi, b0, h, ze, lik, pwu,
                      pwv, Lu, Lv, lamb, ext, size, state, pf, upd_b, clip_on, clip_lo, clip_hi, iso=False):
    """Ratings ``start:stop`` of one segment with table noise fused into the step: the loop kernel, for d not in
    ``sgd_kernels.ROW_LENGTHS`` (:func:`_sgld_range_table_rows` runs the others).

    Per rating: a read-only pass computes <u_i, v_j>; a second pass does the gradient step and adds, in the same
    store, the noise the vector is owed until its next touch (``ahead_u[k]`` / ``ahead_v[k]`` steps, table segments at
    offsets ``ou``, ``ov``; see "noise ahead" in the module docstring) — one pass that writes the rows, as C-SGD's.
    Same draws, in the same order, as ``_sgld_step`` followed by ``_add_noise`` (U, b_i, then V, b_j); the same
    operations per element up to float32 association (tested against the reference). The offsets are drawn one update ahead (the same sequence of draws) so that the next update's table
    segments are prefetched while this one computes; with ``pf > 0`` the factor rows ``pf`` ratings ahead too.

    The loop body is written out here rather than calling an inlined step function: numba gave every array argument
    of the inlined call a reference-count increment and decrement per rating (22 atomic operations per update, seen
    in the assembly), which cost more than the arithmetic at d = 128.

    ``iso`` (Λ_u and Λ_v multiples of the identity, e.g. ``fixed_lambda=(1.0, 1.0)``): the gradient step with scalar
    prior coefficients (equal to the general step up to float32 rounding, tested against the reference). Returns the
    stream state."""
    d = U.shape[1]
    ou_n = np.int64(0)
    ov_n = np.int64(0)
    if start < stop:
        state, ou_n = randint_below(state, size)
        state, ov_n = randint_below(state, size)
    for k in range(start, stop):
        if pf > 0 and k + pf < stop:
            prefetch_row(V, items[k + pf])
            prefetch_row(U, users[k + pf])
        ou = ou_n
        ov = ov_n
        state, ou_n = randint_below(state, size)
        state, ov_n = randint_below(state, size)
        for q in range(0, d + 2, 16):
            prefetch_address(ext, ou_n + q)
            prefetch_address(ext, ov_n + q)
        i = users[k]
        j = items[k]
        s = np.float32(0.0)
        for f in range(d):
            s += U[i, f] * V[j, f]
        g = _likelihood_drift(vals[k], s, bu[i], bi[j], b0, lik, clip_on, clip_lo, clip_hi)
        if has_w:
            g = g * w[k]
        pu = pwu[i]
        pv = pwv[j]
        sdu = np.sqrt(np.float32(ahead_u[k]) * ze)
        sdv = np.sqrt(np.float32(ahead_v[k]) * ze)
        if iso:
            # Λ_u = λ_u I, Λ_v = λ_v I: u + h (g v − p_u λ_u u) as (u + (h g) v) − (h p_u λ_u) u, scalar coefficients
            # and no Λ rows to load (the same step up to float32 rounding), then the noise owed until the next touch.
            # Not as (1 − h p_u λ_u) u: that factor rounds to float32 next to 1, a systematic error of the prior term
            # (1 % at h p_u λ_u = 1e-6; the prior vanishes below 3e-8)
            hg = h * g
            cu = h * pu * Lu[0]
            cv = h * pv * Lv[0]
            for f in range(d):
                uf = U[i, f]
                vf = V[j, f]
                U[i, f] = ((uf + hg * vf) - cu * uf) + sdu * ext[ou + f]
                V[j, f] = ((vf + hg * uf) - cv * vf) + sdv * ext[ov + f]
        else:
            for f in range(d):
                uf = U[i, f]
                vf = V[j, f]
                U[i, f] = (uf + h * (g * vf - pu * Lu[f] * uf)) + sdu * ext[ou + f]
                V[j, f] = (vf + h * (g * uf - pv * Lv[f] * vf)) + sdv * ext[ov + f]
        if upd_b:
            bi[j] += h * (g - pv * lamb * bi[j]) + sdv * ext[ov + d]
            bu[i] += h * (g - pu * lamb * bu[i]) + sdu * ext[ou + d]
    return state


@njit(cache=True, fastmath=True)
def _sgld_range_table_rows(users, items, vals, w, has_w, ahead_u, ahead_v, start, stop, U, V, bu, bi, b0, h, ze, lik,
                           pwu, pwv, Lu, Lv, lamb, ext, size, state, pf, upd_b, clip_on, clip_lo, clip_hi, iso, D):
    """``_sgld_range_table`` for rows of the literal length ``D`` (:mod:`dpmf_lib.mf.rowvec`), with the next rating's
    dot product read before this rating's step is stored, and read again after it when the two ratings share a user
    or an item — as :func:`dpmf_lib.mf.sgd_kernels._sgd_range_rows` (why it pays is said there). The same
    draws in the same order as ``_sgld_range_table``; the dot product's summation order differs (float32 rounding).
    Returns the stream state."""
    literally(D)
    if start >= stop:
        return state
    state, ou_n = randint_below(state, size)
    state, ov_n = randint_below(state, size)
    i = np.uint32(users[start])
    j = np.uint32(items[start])
    s = row_dot(U, i, V, j, D)
    for k in range(start, stop):
        if pf > 0 and k + pf < stop:
            prefetch_row(V, items[k + pf])
            prefetch_row(U, users[k + pf])
        ou = ou_n
        ov = ov_n
        state, ou_n = randint_below(state, size)
        state, ov_n = randint_below(state, size)
        for q in range(0, D + 2, 16):
            prefetch_address(ext, ou_n + q)
            prefetch_address(ext, ov_n + q)
        g = _likelihood_drift(vals[k], s, bu[i], bi[j], b0, lik, clip_on, clip_lo, clip_hi)
        if has_w:
            g = g * w[k]
        pu = pwu[i]
        pv = pwv[j]
        sdu = np.sqrt(np.float32(ahead_u[k]) * ze)
        sdv = np.sqrt(np.float32(ahead_v[k]) * ze)
        more = k + 1 < stop
        i_next = i
        j_next = j
        s_next = s
        if more:
            i_next = np.uint32(users[k + 1])
            j_next = np.uint32(items[k + 1])
            s_next = row_dot(U, i_next, V, j_next, D)
        if iso:
            sgld_row_step_iso(U, i, V, j, h * g, h * pu * Lu[0], h * pv * Lv[0], sdu, sdv, ext, ou, ov, D)
        else:
            sgld_row_step_diag(U, i, V, j, h, g, pu, pv, Lu, Lv, sdu, sdv, ext, ou, ov, D)
        if upd_b:
            bi[j] += h * (g - pv * lamb * bi[j]) + sdv * ext[ov + D]
            bu[i] += h * (g - pu * lamb * bu[i]) + sdu * ext[ou + D]
        if more and (i_next == i or j_next == j):
            s_next = row_dot(U, i_next, V, j_next, D)
        i = i_next
        j = j_next
        s = s_next
    return state


@njit(cache=True, fastmath=True)
def _sgld_segment_table(users, items, vals, w, has_w, ahead_u, ahead_v, start, stop, U, V, bu, bi, b0, h, ze, lik,
                        pwu, pwv, Lu, Lv, lamb, ext, size, state, pf, upd_b, clip_on, clip_lo, clip_hi, iso):
    """One segment of the fused table step: the whole-row kernel for d in ``ROW_LENGTHS``, else the loop kernel."""
    d = U.shape[1]
    if MAX_ROW_LENGTH >= 16 and d == 16:
        return _sgld_range_table_rows(users, items, vals, w, has_w, ahead_u, ahead_v, start, stop, U, V, bu, bi, b0,
                                      h, ze, lik, pwu, pwv, Lu, Lv, lamb, ext, size, state, pf, upd_b, clip_on,
                                      clip_lo, clip_hi, iso, 16)
    if MAX_ROW_LENGTH >= 32 and d == 32:
        return _sgld_range_table_rows(users, items, vals, w, has_w, ahead_u, ahead_v, start, stop, U, V, bu, bi, b0,
                                      h, ze, lik, pwu, pwv, Lu, Lv, lamb, ext, size, state, pf, upd_b, clip_on,
                                      clip_lo, clip_hi, iso, 32)
    if MAX_ROW_LENGTH >= 64 and d == 64:
        return _sgld_range_table_rows(users, items, vals, w, has_w, ahead_u, ahead_v, start, stop, U, V, bu, bi, b0,
                                      h, ze, lik, pwu, pwv, Lu, Lv, lamb, ext, size, state, pf, upd_b, clip_on,
                                      clip_lo, clip_hi, iso, 64)
    if MAX_ROW_LENGTH >= 128 and d == 128:
        return _sgld_range_table_rows(users, items, vals, w, has_w, ahead_u, ahead_v, start, stop, U, V, bu, bi, b0,
                                      h, ze, lik, pwu, pwv, Lu, Lv, lamb, ext, size, state, pf, upd_b, clip_on,
                                      clip_lo, clip_hi, iso, 128)
    return _sgld_range_table(users, items, vals, w, has_w, ahead_u, ahead_v, start, stop, U, V, bu, bi, b0, h, ze,
                             lik, pwu, pwv, Lu, Lv, lamb, ext, size, state, pf, upd_b, clip_on, clip_lo, clip_hi, iso)


@njit(cache=True, parallel=True, fastmath=True)
def _sgld_epoch_lazy(users, items, vals, w, has_w, ahead_u, ahead_v, seg, U, V, bu, bi, b0, eta, zeta, lik, pwu, pwv,
                     Lu, Lv, lamb, use_table, ext, size, base, pf, upd_v, upd_b, clip_on=False, clip_lo=0.0,
                     clip_hi=0.0, iso=False):
    n_seg = seg.shape[0] - 1
    d = U.shape[1]
    h = np.float32(0.5) * eta
    ze = zeta * eta
    for s in prange(n_seg):
        state = _block_state(base, s)
        start = seg[s]
        stop = seg[s + 1]
        if use_table and upd_v:  # the common case: noise fused into the step
            _sgld_segment_table(users, items, vals, w, has_w, ahead_u, ahead_v, start, stop, U, V, bu, bi, b0, h, ze,
                                lik, pwu, pwv, Lu, Lv, lamb, ext, size, state, pf, upd_b, clip_on, clip_lo, clip_hi, iso)
            continue
        buf = np.empty(d + 2, dtype=np.float32)
        for k in range(start, stop):
            if pf > 0 and k + pf < stop:
                prefetch_row(V, items[k + pf])
            _sgld_step(k, users, items, vals, w, has_w, U, V, bu, bi, b0, h, lik, pwu, pwv, Lu, Lv, lamb, upd_v, upd_b,
                       clip_on, clip_lo, clip_hi)
            state = _add_noise(U, bu, users[k], np.sqrt(np.float32(ahead_u[k]) * ze), use_table, ext, size, state,
                               buf, upd_b)
            if upd_v:
                state = _add_noise(V, bi, items[k], np.sqrt(np.float32(ahead_v[k]) * ze), use_table, ext, size,
                                   state, buf, upd_b)


@njit(cache=True)
def _sgld_epoch_eager(users, items, vals, w, has_w, U, V, bu, bi, b0, eta, zeta, lik, pwu, pwv, Lu, Lv, lamb,
                      use_table, ext, size, base, cnt_u, cnt_v, upd_v, upd_b, clip_on=False, clip_lo=0.0,
                      clip_hi=0.0):
    d = U.shape[1]
    h = np.float32(0.5) * eta
    sd = np.sqrt(zeta * eta)
    state = _block_state(base, 0)
    buf = np.empty(d + 2, dtype=np.float32)
    for k in range(users.shape[0]):
        for i in range(U.shape[0]):
            if cnt_u[i] > 0:
                state = _add_noise(U, bu, i, sd, use_table, ext, size, state, buf, upd_b)
        if upd_v:
            for j in range(V.shape[0]):
                if cnt_v[j] > 0:
                    state = _add_noise(V, bi, j, sd, use_table, ext, size, state, buf, upd_b)
        _sgld_step(k, users, items, vals, w, has_w, U, V, bu, bi, b0, h, lik, pwu, pwv, Lu, Lv, lamb, upd_v, upd_b,
                       clip_on, clip_lo, clip_hi)


@njit(cache=True, parallel=True, fastmath=True)
def _row_noise(A, b, steps, cnt, ze, use_table, ext, size, base, upd_b):
    """Noise for whole rows outside the rating stream: row ``r`` gets N(0, steps[r] ζη) (lazy schedule: before a
    round, the steps up to the row's first touch). Rows without ratings are skipped (see ``_fill_unrated``)."""
    n = A.shape[0]
    d = A.shape[1]
    chunk = 1024
    n_chunks = (n + chunk - 1) // chunk
    for c in prange(n_chunks):
        state = _block_state(base, c)
        buf = np.empty(d + 2, dtype=np.float32)
        for r in range(c * chunk, min(n, (c + 1) * chunk)):
            if cnt[r] > 0 and steps[r] > 0:
                state = _add_noise(A, b, r, np.sqrt(np.float32(steps[r]) * ze), use_table, ext, size, state, buf,
                                   upd_b)


@dataclass
class SGLDResult:
    model: MFModel  # the last sample, in the Ratings id space
    history: "pd.DataFrame"  # per round: epoch, eta, seconds, wall, updates_per_s, test_rmse, test_rmse_avg, lambda_u, ...
    samples_V: list = field(default_factory=list)  # V samples (Ratings item ids) kept every ``keep_every`` rounds
    samples_U: list = field(default_factory=list)  # U samples, only with ``keep_users=True``
    Lambda_u: np.ndarray | None = None
    Lambda_v: np.ndarray | None = None
    layout: Layout | None = None
    extra: dict = field(default_factory=dict)

    @property
    def updates_per_s(self) -> float:
        h = self.history
        return float(h["updates"].sum() / h["seconds"].sum())


def _as_lambda(x, d, name):
    a = np.asarray(x, dtype=np.float32)
    if a.ndim == 0:
        a = np.full(d, float(a), dtype=np.float32)
    if a.shape != (d,) or not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ParameterError(f"{name} must be a positive scalar or a length-{d} positive vector, got {x!r}")
    return np.ascontiguousarray(a)


def is_isotropic(Lu: np.ndarray, Lv: np.ndarray) -> bool:
    """Whether Λ_u and Λ_v are each a multiple of the identity (the fused kernel's scalar-coefficient step)."""
    return bool(np.all(Lu == Lu[0]) and np.all(Lv == Lv[0]))


def default_table_size(d: int) -> int:
    """The fast sampler's default Gaussian-table size at dimension ``d``: the smallest power of two ≥ 512 (d + 1),
    at least 2^16 (see the module docstring: ≥ 512 non-overlapping segments, as the paper's 10,000 numbers at d = 16)."""
    need = 512 * (int(d) + 1)
    return max(1 << 16, 1 << (need - 1).bit_length())


def sample_sgld(train, *, d: int = 16, epochs: int = 30, eta0: float | None = None, gamma: float = 0.6,
                zeta: float = 1.0, lambda_r: float = 1.0, alpha: float = 1.0, beta: float = 100.0,
                lambda_init: float = 1.0, fixed_lambda=None, lam_bias: float = 1.0, likelihood_scale: float = 1.0,
                weights: np.ndarray | None = None, mode: str = "fast", noise: str | None = None,
                noise_schedule: str | None = None, noise_table_size: int | None = None,
                schedule: Schedule = Schedule(), seed: int = 0, test=None, burn_in: int = 0, keep_every: int = 0,
                model: MFModel | None = None,
                init_scale: float | None = None, layout: Layout | None = None, freeze_items: bool = False,
                keep_users: bool = False, biases: bool = True,
                time_budget: float | None = None, clip_prediction=None) -> SGLDResult:
    """Run SGLD for ``epochs`` rounds; returns the last sample, per-round history and kept V samples.

    ``noise_table_size``: entries of the Gaussian lookup table in fast mode; ``None`` → :func:`default_table_size`
    (grows with ``d``). ``eta0``: step size of round 1 (η_t = η0 / t^γ); default 0.02 / N (the paper's 2·10⁻¹⁰ on Netflix's 10⁸ ratings
    is the same ηN). ``mode``: "fast" (lookup table + lazy noise) or "exact" (fresh normals + eager noise);
    ``noise`` / ``noise_schedule`` override either part. ``schedule`` (:class:`~dpmf_lib.mf.schedule.Schedule`):
    order, block and tier sizes, prefetch stride and threads (the eager noise schedule runs on one thread).
    ``weights``: per-rating w_r aligned with ``train``.
    ``fixed_lambda``: ``(Λ_u, Λ_v)`` scalars or length-d vectors, disables the Gibbs step.
    ``biases=False``: the model without biases (b_i = b_j = 0, and b_0 = 0 unless ``model`` sets it), as in the
    paper's Algorithm 1 (F(U, V) = Σ w_i (R_ij − u_iᵀv_j)² + λ(‖U‖² + ‖V‖²)).
    ``keep_users``: also keep (U | b_u) samples (n_users × (d+1)) at the same rounds as V.
    ``freeze_items``: keep V and the item biases fixed (sample U, b_u given V; e.g. conjugate checks, two-stage use).
    ``test_rmse_avg`` averages test predictions over the samples after ``burn_in`` rounds (posterior predictive mean).
    ``clip_prediction=(lo, hi)``: the likelihood uses the clipped prediction, −(sλ_r/2) Σ w (r − clip(r̂, lo, hi))²
    (ours, for a DP-valid variant: bounds every rating's term without a rejection loop); a rating whose prediction
    lies outside [lo, hi] contributes no likelihood drift. ``None``: the unclipped model.
    """
    import pandas as pd

    t_setup = time.perf_counter()
    require_ratings(train, "train", "sample_sgld")  # N = 0 would divide by zero in the step size
    sch = check_schedule(schedule, "sample_sgld")
    if sch.hot_rows != "shared":
        raise ParameterError(f"sample_sgld has no private hot rows (Schedule.hot_rows is train_sgd's): pass "
                             f"hot_rows='shared', got {sch.hot_rows!r}")
    order, block_users, tiers, prefetch_stride, n_threads = (sch.order, sch.block_users, sch.tiers,
                                                             sch.prefetch_stride, sch.n_threads)
    d = validate.integer(d, "d", hi=MAX_DIM, fix=DIM_HINT)
    if not isinstance(epochs, (int, np.integer)) or epochs < 1:
        raise ParameterError(f"epochs must be a positive integer, got {epochs!r}")
    if mode not in ("fast", "exact"):
        raise ParameterError(f"mode must be 'fast' or 'exact', got {mode!r}")
    noise = noise or ("table" if mode == "fast" else "normal")
    noise_schedule = noise_schedule or ("lazy" if mode == "fast" else "eager")
    if noise not in ("table", "normal"):
        raise ParameterError(f"noise must be 'table' or 'normal', got {noise!r}")
    if noise_schedule not in ("lazy", "eager"):
        raise ParameterError(f"noise_schedule must be 'lazy' or 'eager', got {noise_schedule!r}")
    N = train.n_ratings
    eta0 = 0.02 / N if eta0 is None else validate.positive(eta0, "eta0")
    gamma = validate.positive(gamma, "gamma", strict=False)
    zeta = validate.positive(zeta, "zeta")
    lambda_r = validate.positive(lambda_r, "lambda_r")
    alpha = validate.positive(alpha, "alpha")
    beta = validate.positive(beta, "beta")
    lam_bias = validate.positive(lam_bias, "lam_bias")
    likelihood_scale = validate.positive(likelihood_scale, "likelihood_scale")
    clip_on, clip_lo, clip_hi = False, 0.0, 0.0
    if clip_prediction is not None:
        try:
            clip_lo, clip_hi = (float(x) for x in clip_prediction)
        except (TypeError, ValueError):
            raise ParameterError(f"clip_prediction must be None or a pair (lo, hi), got {clip_prediction!r}") from None
        if not (np.isfinite(clip_lo) and np.isfinite(clip_hi) and clip_lo < clip_hi):
            raise ParameterError(f"clip_prediction=(lo, hi) needs finite lo < hi, got {clip_prediction!r}")
        clip_on = True
    if noise_schedule == "eager":
        work = N * (train.n_users + train.n_items) * (d + 1)
        if work > 5e9:
            raise ParameterError(f"noise_schedule='eager' costs N·(users+items)·(d+1) = {work:.2g} noise draws per "
                                 "round; use it only on small validation problems (or noise_schedule='lazy')")
    if layout is not None:
        lay = layout
    else:
        with num_threads(n_threads):  # the layout is built with the threads the rounds use
            lay = make_layout(train, order, block_users=block_users, tiers=tiers, seed=seed)
    has_w = weights is not None
    if has_w:
        w_in = np.asarray(weights, dtype=np.float32)
        if w_in.shape != (N,) or not np.all(np.isfinite(w_in)) or np.any(w_in < 0):
            raise ParameterError(f"weights must be {N} finite non-negative numbers aligned with the training ratings")
        w = np.ascontiguousarray(w_in[lay.order])
    else:
        w = np.zeros(1, dtype=np.float32)
    cnt_u = np.bincount(lay.users, minlength=lay.n_users)
    cnt_v = np.bincount(lay.items, minlength=lay.n_items)
    pwu = np.where(cnt_u > 0, N / np.maximum(cnt_u, 1), 0.0).astype(np.float32)
    pwv = np.where(cnt_v > 0, N / np.maximum(cnt_v, 1), 0.0).astype(np.float32)
    if noise_schedule == "lazy":
        ahead_u, ahead_v, first_u, first_v = lay.noise_ahead_counters()
    use_table = noise == "table"
    if noise_table_size is None:
        noise_table_size = default_table_size(d)
    table = GaussianTable.create(int(noise_table_size), seed=seed) if use_table else None
    ext = table.extended(d + 2) if use_table else np.zeros(1, np.float32)
    size = table.size if use_table else 1
    if fixed_lambda is not None:
        if not (isinstance(fixed_lambda, (tuple, list)) and len(fixed_lambda) == 2):
            raise ParameterError("fixed_lambda must be a pair (Lambda_u, Lambda_v) of scalars or length-d vectors")
        Lu, Lv = _as_lambda(fixed_lambda[0], d, "fixed_lambda[0]"), _as_lambda(fixed_lambda[1], d, "fixed_lambda[1]")
    else:
        Lu = Lv = _as_lambda(lambda_init, d, "lambda_init")
    b0 = float(train.values.mean())
    m0 = model.copy() if model is not None else init_model(train.n_users, train.n_items, d, seed=seed,
                                                            scale=init_scale, b0=b0 if biases else 0.0)
    if not biases:
        m0.bu[:] = 0
        m0.bi[:] = 0
    m = _internal_model(m0, lay)
    unrated_u, unrated_v = cnt_u == 0, cnt_v == 0
    m.U[unrated_u] = 0
    m.bu[unrated_u] = 0
    if not freeze_items:
        m.V[unrated_v] = 0
        m.bi[unrated_v] = 0
    b0 = float(m.b0)
    lik = np.float32(likelihood_scale * lambda_r * N)
    rng = np.random.default_rng([seed, 0x561D])
    test_i = lay.to_internal_items(test.items) if test is not None else None
    pred_sum, n_avg = None, 0
    rows, samples, samples_u, wall = [], [], [], 0.0
    setup_seconds = time.perf_counter() - t_setup  # layout, noise counters, noise table, initialisation
    with num_threads(n_threads if noise_schedule == "lazy" else 1):
        for t in range(1, epochs + 1):
            eta = np.float32(learning_rate(eta0, gamma, t))
            base = stream_seed(seed, t)
            ze = np.float32(zeta * eta)
            t0 = time.perf_counter()
            if noise_schedule == "lazy":
                # the noise each row is owed for the steps up to its first touch; the rest comes with its touches
                _row_noise(m.U, m.bu, first_u, cnt_u, ze, use_table, ext, size, stream_seed(seed, t, 1), biases)
                if not freeze_items:
                    _row_noise(m.V, m.bi, first_v, cnt_v, ze, use_table, ext, size, stream_seed(seed, t, 2), biases)
                _sgld_epoch_lazy(lay.users, lay.items, lay.values, w, has_w, ahead_u, ahead_v, lay.seg, m.U, m.V,
                                 m.bu, m.bi, np.float32(b0), eta, np.float32(zeta), lik, pwu, pwv, Lu, Lv,
                                 np.float32(lam_bias), use_table, ext, size, base, np.int64(prefetch_stride),
                                 not freeze_items, biases, clip_on, np.float32(clip_lo), np.float32(clip_hi),
                                 is_isotropic(Lu, Lv))
            else:
                _sgld_epoch_eager(lay.users, lay.items, lay.values, w, has_w, m.U, m.V, m.bu, m.bi, np.float32(b0),
                                  eta, np.float32(zeta), lik, pwu, pwv, Lu, Lv, np.float32(lam_bias), use_table, ext,
                                  size, base, cnt_u, cnt_v, not freeze_items, biases, clip_on, np.float32(clip_lo),
                                  np.float32(clip_hi))
            dt = time.perf_counter() - t0
            wall += dt
            if fixed_lambda is None:  # Gibbs step for the diagonal precisions, once per round
                Lu = _gibbs_lambda(m.U[~unrated_u], alpha, beta, rng)
                if not freeze_items:
                    Lv = _gibbs_lambda(m.V[~unrated_v], alpha, beta, rng)
            row = {"epoch": t, "eta": float(eta), "seconds": dt, "wall": wall, "updates": N, "updates_per_s": N / dt,
                   "lambda_u": float(Lu.mean()), "lambda_v": float(Lv.mean())}
            if not np.all(np.isfinite(m.U[:1])) or not np.all(np.isfinite(m.V[:1])):
                raise ParameterError(f"SGLD diverged in round {t} (non-finite factors): lower eta0 (now {eta0:g})")
            if test is not None:
                p = m.predict(test.users, test_i).astype(np.float64)
                row["test_rmse"] = rmse(p, test.values)
                if t > burn_in:
                    pred_sum = p if pred_sum is None else pred_sum + p
                    n_avg += 1
                    row["test_rmse_avg"] = rmse(pred_sum / n_avg, test.values)
            if keep_every and t > burn_in and (t - burn_in) % keep_every == 0:
                fill_rng = np.random.default_rng([seed, t, 0xF11])
                mo = _fill_unrated(m.copy(), unrated_u, unrated_v if not freeze_items else None, Lu, Lv, lam_bias,
                                   zeta, biases, fill_rng)
                samples.append(_external_model(mo, lay).V.copy())
                if keep_users:
                    samples_u.append(np.concatenate([mo.U, mo.bu[:, None]], axis=1))
            rows.append(row)
            if time_budget is not None and wall >= time_budget:
                break
    m = _fill_unrated(m, unrated_u, unrated_v if not freeze_items else None, Lu, Lv, lam_bias, zeta, biases,
                      np.random.default_rng([seed, 0xF11]))
    return SGLDResult(_external_model(m, lay), pd.DataFrame(rows), samples, samples_u, Lu, Lv, lay,
                      {"mode": mode, "noise": noise, "noise_schedule": noise_schedule, "d": d, "eta0": eta0,
                       "noise_table_size": int(noise_table_size) if use_table else None,
                       "setup_seconds": setup_seconds})


def _fill_unrated(m: MFModel, unrated_u, unrated_v, Lu, Lv, lam_bias, zeta, biases, rng) -> MFModel:
    """Rows without ratings drawn from their conditional posterior, the prior N(0, ζ Λ⁻¹) (in place; returns m)."""
    for A, b, mask, L in ((m.U, m.bu, unrated_u, Lu), (m.V, m.bi, unrated_v, Lv)):
        if mask is None or not mask.any():
            continue
        k = int(mask.sum())
        A[mask] = (rng.standard_normal((k, A.shape[1])) * np.sqrt(zeta / L)).astype(np.float32)
        if biases:
            b[mask] = (rng.standard_normal(k) * np.sqrt(zeta / lam_bias)).astype(np.float32)
    return m


def _gibbs_lambda(A: np.ndarray, alpha: float, beta: float, rng: np.random.Generator) -> np.ndarray:
    n = A.shape[0]
    ss = np.einsum("ij,ij->j", A, A, dtype=np.float64)
    return rng.gamma(alpha + 0.5 * n, 1.0 / (beta + 0.5 * ss)).astype(np.float32)
