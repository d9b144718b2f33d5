"""The explicit S2/S3 protocol of Hua et al. (2015): users, a semi-honest third party and the recommender exchanging
fixed-point vectors masked modulo P, with every message counted in bytes.

One round (Sec. 4.2 steps 1-4, with the S3 changes of "Further Practical Consideration"):

1. recommender -> each participating user ``i``, for each item ``j`` she rated: ``v_j(t)`` (d float32), the mask
   ``psi_j^i(t)`` (d residues mod P), in S3 the piece ``tau_hat_j^i`` of ``tau_hat_j = alpha_j + eta_j`` (d residues),
   the shared exponential vector ``H^rho_j(t)`` for the rho~ shares (d float32) and the group size ``k'_j`` (int32);
2. user ``i``: ``phi_j^i = enc(grad_j^i + rho~_j^i(t)) + eta-piece + psi_j^i mod P`` -> third party (d residues per item),
   where the eta-piece is ``enc(eta_j^i)`` (S2, her Theorem-2 share) or ``tau_hat_j^i`` (S3);
3. third party: ``phi_j = sum_i phi_j^i (- alpha_j in S3) mod P`` -> recommender (d residues per updated item);
4. recommender: ``phi_j - sum_i psi_j^i mod P`` = ``sum_i enc(grad + rho~) + eta_j`` exactly; decode, update (9).

S3 initialisation (once): the recommender picks ``k`` online users UO and sends each, per item, ``H_j`` (d float32) and
``beta_j^i`` (d residues); each returns ``enc(eta_j^i) + beta_j^i`` to the third party, which adds ``alpha_j`` and forwards
the sum; the recommender removes the betas and keeps ``tau_hat_j = alpha_j + sum_i enc(eta_j^i)``.

Choices: how the users obtain a common exponential vector for the rho~ shares is not stated; we let the recommender
send a fresh ``H^rho_j(t)`` per item and round (counted). This module is for correctness and message sizes; the
figure simulations use the distributionally identical aggregate path in :mod:`dpmf_lib.objpert.mf`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..privacy.common import resolve_seed
from . import noise as nz
from .fixedpoint import FixedPoint
from .mf import HuaConfig, Problem, init_factors

FLOAT_BYTES = 4  # v_j and H vectors are float32
COUNT_BYTES = 4  # k'_j as int32


@dataclass
class MessageLog:
    """Bytes per party per round: per-user down/up (arrays over that round's participants) and party totals."""

    rounds: list = field(default_factory=list)
    init: dict = field(default_factory=dict)

    def frame(self):
        import pandas as pd

        return pd.DataFrame([{k: v for k, v in r.items() if not isinstance(v, np.ndarray)} for r in self.rounds])


class Protocol:
    """Explicit multi-party simulation on a :class:`Problem` (``scenario`` "s2" or "s3")."""

    def __init__(self, prob: Problem, cfg: HuaConfig, eps: float, *, scenario: str = "s3", fp: FixedPoint | None = None,
                 seed=None, init_users: np.ndarray | None = None):
        if scenario not in ("s2", "s3"):
            from ..errors import ParameterError

            raise ParameterError(f"parameter 'scenario' must be 's2' or 's3', got {scenario!r}")
        if getattr(cfg, "noise_scale", "theorem1") != "theorem1":
            from ..errors import ParameterError

            raise ParameterError("parameter 'noise_scale': the explicit protocol runs the paper's mechanism only "
                                 f"('theorem1'); the W-scaled variant is a simulation label, got {cfg.noise_scale!r}")
        self.prob, self.cfg, self.eps, self.scenario = prob, cfg, nz.check_eps(eps), scenario
        self.fp = fp or FixedPoint()
        # seed=None: fresh OS entropy (a DP release must not be replayable by default); an int reproduces the run
        seed, self.seed_was_fixed = resolve_seed(seed)
        self.seed_used = seed
        self.rng = np.random.default_rng(np.random.SeedSequence([int(seed), 5]))
        self.U, self.V = init_factors(prob, cfg.d, seed)
        self.uw, self.iw = prob.weights(cfg)
        self.log = MessageLog()
        m, d = prob.n_items, cfg.d
        self.b = 0.0 if math.isinf(self.eps) else nz.laplace_scale(d, self.eps, prob.delta)
        # pair arrays of the user CSR (user of each CSR slot)
        self.pair_user = np.repeat(np.arange(prob.n_users), np.diff(prob.indptr)).astype(np.int64)
        self.eta_plain = np.zeros((m, d))  # sum of the shares actually used (float, for tests)
        if scenario == "s2":
            # every rater of j holds a fixed Theorem-2 share of eta_j (k = k_j, H_j from the recommender)
            H = nz.exponential_vectors(m, d, self.rng)
            k = prob.item_counts[prob.indices]
            c = self.rng.standard_normal((len(prob.indices), d)) / np.sqrt(np.maximum(k, 1))[:, None]
            self.eta_share = self.b * np.sqrt(2.0 * H[prob.indices]) * c  # per CSR slot
            self.eta_share_enc = self.fp.encode(self.eta_share, k=int(max(prob.item_counts.max(), 1)))
            np.add.at(self.eta_plain, prob.indices, self.eta_share)
            self.tau_hat = None
        else:
            self._initialise(init_users)

    # ---- S3 initialisation phase -------------------------------------------------------------------------
    def _initialise(self, init_users):
        prob, d, fp, rng = self.prob, self.cfg.d, self.fp, self.rng
        m = prob.n_items
        uo = (np.arange(min(prob.n_users, 100)) if init_users is None else np.asarray(init_users))
        k = len(uo)
        H = nz.exponential_vectors(m, d, rng)  # recommender -> each user in UO
        beta = fp.random((k, m, d), rng)  # recommender -> each user in UO
        c = rng.standard_normal((k, m, d)) / math.sqrt(k)
        eta_sh = self.b * np.sqrt(2.0 * H)[None] * c
        self.eta_plain = eta_sh.sum(axis=0)
        enc = fp.encode(eta_sh, k=k)
        tau = fp.add(enc, beta)  # user -> third party
        self.alpha = fp.random((m, d), rng)  # third party's secret
        tau_tilde = fp.add(self.alpha, fp.sum(tau, axis=0))  # third party -> recommender
        self.tau_hat = fp.sub(tau_tilde, fp.sum(beta, axis=0))  # recommender keeps alpha + sum enc(eta^i)
        self.eta_enc_sum = fp.sum(enc, axis=0)  # for tests only (no party holds it)
        e = fp.bytes_per_element
        self.log.init = {"users": k, "down_per_user": m * d * (FLOAT_BYTES + e), "up_per_user": m * d * e,
                         "tp_to_recommender": m * d * e}

    # ---- one round ---------------------------------------------------------------------------------------
    def round(self, participants: np.ndarray) -> dict:
        prob, cfg, fp, rng = self.prob, self.cfg, self.fp, self.rng
        d, m = cfg.d, prob.n_items
        parts = np.asarray(participants, dtype=np.int64)
        slots = (np.concatenate([np.arange(prob.indptr[i], prob.indptr[i + 1]) for i in parts]) if len(parts)
                 else np.zeros(0, dtype=np.int64))
        rows = self.pair_user[slots]
        cols = prob.indices[slots].astype(np.int64)
        r = prob.csr_values[slots].astype(np.float64)
        U0, V0 = self.U.astype(np.float64), self.V.astype(np.float64)
        e2 = -2.0 * (r - np.einsum("kd,kd->k", U0[rows], V0[cols]))
        grad = e2[:, None] * U0[rows]  # local item gradients (eq. 5 terms)
        kprime = np.bincount(cols, minlength=m)
        touched = kprime > 0
        # step 1: recommender -> users
        psi = fp.random((len(slots), d), rng)
        Hrho = nz.exponential_vectors(m, d, rng)
        # step 2: users
        crho = rng.standard_normal((len(slots), d)) / np.sqrt(np.maximum(kprime[cols], 1))[:, None]
        rho = self.b * np.sqrt(2.0 * Hrho[cols]) * crho
        kmax = int(max(kprime.max() if len(kprime) else 1, 1))
        plain_enc = fp.encode(grad + rho, k=kmax)
        if self.scenario == "s2":
            eta_piece = self.eta_share_enc[slots]
        else:
            eta_piece = self._pieces(cols, kprime)
        phi = fp.add(plain_enc, eta_piece, psi)  # user -> third party
        # step 3: third party
        agg = np.zeros((m, d), dtype=np.uint64)
        np.add.at(agg, cols, phi)
        agg = fp.reduce(agg)
        if self.scenario == "s3":
            agg = fp.sub(agg, self.alpha)
        # step 4: recommender
        psi_sum = np.zeros((m, d), dtype=np.uint64)
        np.add.at(psi_sum, cols, psi)
        unmasked = fp.sub(agg, fp.reduce(psi_sum))
        # what the unmasked aggregate must equal, computed without masks (tests compare exactly)
        expect = np.zeros((m, d), dtype=np.uint64)
        np.add.at(expect, cols, plain_enc)
        if self.scenario == "s2":
            np.add.at(expect, cols, self.eta_share_enc[slots])
        else:
            expect = fp.add(expect, np.where(touched[:, None], self.eta_enc_sum, np.uint64(0)))
        expect = fp.reduce(expect)
        A = fp.decode(unmasked)
        # updates: users (eq. 2, projected) then items (eq. 9) from U(t-1), V(t-1)
        gu = np.zeros((prob.n_users, d))
        np.add.at(gu, rows, e2[:, None] * V0[cols])
        newu = U0[parts] - cfg.gamma * (self.uw[parts][:, None] * gu[parts] + 2 * cfg.lam * U0[parts])
        nrm = np.linalg.norm(newu, axis=1)
        newu *= np.where(nrm > cfg.max_norm, cfg.max_norm / np.maximum(nrm, 1e-300), 1.0)[:, None]
        self.U[parts] = newu.astype(np.float32)
        t = touched
        self.V[t] = (V0[t] - cfg.gamma * (self.iw[t][:, None] * A[t] + 2 * cfg.mu * V0[t])).astype(np.float32)
        # message accounting
        e = fp.bytes_per_element
        n_items_user = np.bincount(np.searchsorted(parts, rows), minlength=len(parts)) if len(parts) else np.zeros(0)
        per_item_down = d * FLOAT_BYTES + d * e + d * FLOAT_BYTES + COUNT_BYTES + (d * e if self.scenario == "s3" else 0)
        rec = {"round": len(self.log.rounds), "participants": len(parts), "pairs": len(slots),
               "items_updated": int(touched.sum()), "user_items": n_items_user,
               "user_down": n_items_user * per_item_down, "user_up": n_items_user * d * e,
               "tp_to_recommender": int(touched.sum()) * d * e, "users_to_tp": len(slots) * d * e,
               "recommender_to_users": len(slots) * per_item_down,
               "exact": bool(np.array_equal(unmasked[t], expect[t]))}
        self.log.rounds.append(rec)
        return {"unmasked": unmasked, "expected": expect, "aggregate": A, "touched": touched,
                "true_sum": self._true_sum(cols, grad + rho, m, d)}

    @staticmethod
    def _true_sum(cols, x, m, d):
        s = np.zeros((m, d))
        np.add.at(s, cols, x)
        return s

    def _pieces(self, cols, kprime):
        """The recommender's random split of ``tau_hat_j`` into ``k'_j`` pieces, one per participating rater of j."""
        fp = self.fp
        pieces = fp.random((len(cols), self.cfg.d), self.rng)
        order = np.argsort(cols, kind="stable")
        last = np.zeros(len(self.prob.item_counts), dtype=np.int64) - 1
        last[cols[order]] = order  # the last slot (in sorted order) of each item takes the remainder
        s = np.zeros((len(kprime), self.cfg.d), dtype=np.uint64)
        np.add.at(s, cols, pieces)
        has = last >= 0
        li = last[has]
        pieces[li] = fp.sub(fp.add(self.tau_hat[has], pieces[li]), fp.reduce(s[has]))
        return pieces
