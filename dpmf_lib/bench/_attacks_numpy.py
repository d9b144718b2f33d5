"""Vectorised numpy baseline of the BLIP Gibbs kernel running the *same incremental algorithm*, so that the attacks
suite compares like for like (lives in the bench, not in :mod:`dpmf_lib.attacks`).

:func:`dpmf_lib.attacks.gibbs.blip_gibbs_kernel` keeps, per transition, the bit coverage counts ``cnt`` and every
candidate's gain ``d_j = Σ_{l ∈ X_j, cnt(l) = 0} sgn(l)`` up to date by touching only the ≤ K bits of the item that
leaves or enters and, through an inverted bit → candidates index, the candidates sharing a bit whose count crosses 0.
:func:`blip_gibbs_numpy_incremental` does exactly that with whole-array numpy operations (fancy indexing, ``bincount``,
``cumsum``) instead of loops — the fair numpy counterpart. (``dpmf_lib.attacks.gibbs.blip_gibbs_numpy`` recomputes
every gain by a gather over the candidates × K bit table at each step: another algorithm, kept as a record.)

The draw reproduces ``_draw``: weights ``exp(logw − max)`` (0 for −inf), sequential running sum, the first option whose
running sum exceeds ``u × total`` among positive weights (fallback: the last positive one).
"""

from __future__ import annotations

import math

import numpy as np


def blip_gibbs_numpy_incremental(bits, nbits, sgn, lam, log_rho, slots, slot_draws, uniforms, burn_in):
    """Same inputs and chain as :func:`dpmf_lib.attacks.gibbs.blip_gibbs_kernel`; returns ``(counts, slots)`` (counts:
    post-burn-in states holding each candidate)."""
    bits = np.asarray(bits, np.int64)
    nbits = np.asarray(nbits, np.int64)
    sgn = np.asarray(sgn, np.float64)
    log_rho = np.asarray(log_rho, np.float64)
    n_c, K = bits.shape
    L = len(sgn)
    c_max = len(slots)
    rows = [bits[j, : nbits[j]] for j in range(n_c)]
    if any(len(np.unique(r)) != len(r) for r in rows):
        raise ValueError("each candidate's bits must be distinct (as the codebook stores them)")
    # inverted index bit -> candidates (CSR), built with a stable sort
    flat_bits = np.concatenate(rows) if n_c else np.zeros(0, np.int64)
    flat_owner = np.repeat(np.arange(n_c), nbits)
    order = np.argsort(flat_bits, kind="stable")
    owners = flat_owner[order]
    start = np.zeros(L + 1, np.int64)
    np.cumsum(np.bincount(flat_bits, minlength=L), out=start[1:])

    def owners_of(bl):
        # concatenated owner lists of the bits bl, with the sign of each bit
        lens = start[bl + 1] - start[bl]
        idx = np.repeat(start[bl] - np.cumsum(lens) + lens, lens) + np.arange(lens.sum())
        return owners[idx], np.repeat(sgn[bl], lens)

    slots = np.array(slots, dtype=np.int64)
    cnt = np.zeros(L, np.int64)
    in_p = np.zeros(n_c, bool)
    for k in slots[slots >= 0]:
        cnt[rows[k]] += 1
        in_p[k] = True
    m = int(in_p.sum())
    valid = np.arange(K)[None, :] < nbits[:, None]
    safe = np.where(valid, bits, 0)
    d = np.where(valid & (cnt[safe] == 0), sgn[safe], 0.0).sum(1)
    counts = np.zeros(n_c, np.int64)
    w = np.empty(n_c + 1)
    n_steps = len(slot_draws)
    for t in range(1, n_steps + 1):
        i = int(slot_draws[t - 1])
        old = int(slots[i])
        m_rest = m
        if old >= 0:
            bl = rows[old]
            cnt[bl] -= 1
            un = bl[cnt[bl] == 0]
            if len(un):
                o, s = owners_of(un)
                d += np.bincount(o, weights=s, minlength=n_c)
            in_p[old] = False
            m_rest = m - 1
        np.multiply(d, lam, out=w[:n_c])
        w[:n_c] += log_rho
        w[:n_c] -= math.log(c_max - m_rest)
        w[:n_c][in_p] = -np.inf
        w[n_c] = 0.0
        e = np.exp(w - w.max())
        acc = np.cumsum(e)
        hit = np.flatnonzero((uniforms[t - 1] * acc[-1] < acc) & (e > 0))
        new = int(hit[0]) if len(hit) else int(np.flatnonzero(e > 0)[-1])
        if new == n_c:
            new = -1
        if new >= 0:
            bl = rows[new]
            cov = bl[cnt[bl] == 0]
            if len(cov):
                o, s = owners_of(cov)
                d -= np.bincount(o, weights=s, minlength=n_c)
            cnt[bl] += 1
            in_p[new] = True
        slots[i] = new
        m = m_rest + (1 if new >= 0 else 0)
        if t > burn_in:
            counts[in_p] += 1
    return counts, slots
