"""Beyond the papers: the privacy ledger — stated vs provable vs audited ε for every mechanism.

For each mechanism one row: the ε (and δ) the paper states; the ε that provably holds for this implementation
(:mod:`dpmf_lib.privacy.ledger`, with every caveat accounted or "no finite ε" and the reason), cross-checked with
Google's dp-accounting where the mechanism is one it models — or, where the implementation breaks a premise of the
proof (a noiseless function of the same ratings in the release: U, r̄, Λ), ``epsilon_provable`` inf and the bound
as ``epsilon_idealised`` (:mod:`dpmf_lib.privacy.ledger`); and an empirical lower bound ε_lower from a
distinguishing audit (:mod:`dpmf_lib.privacy.audit`): ``n_audit`` runs on each of two neighbouring datasets, a
threshold test chosen on half the runs (calibration), Clopper–Pearson bounds on the other half's error rates
(evaluation, disjoint) at ``confidence``. An audited bound above the provable ε would be a bug in our accounting;
above the *stated* ε it is a finding.

Every row audits the release its bound is about and says what its audit could find: ``audit_reach`` (the largest
ε its evaluation runs can certify), ``epsilon_detectable`` (the smallest true ε any test could detect at those runs)
and ``epsilon_detectable_over_bound`` (the smallest true ε at which it could catch a violation of the row's bound,
``audit_bound``; inf: beyond its reach — such a row cannot check its bound). The evaluation counts (``audit_fp`` of
``audit_n0``, ``audit_fn`` of ``audit_n1``) are stored with every claim measurement (as guards), so a per-seed
Clopper–Pearson bound at a Bonferroni-corrected confidence can be formed from them. Each audit has a positive
control — a known-broken variant through the same pipeline (``leak``), which tests/properties/test_audit_controls.py
requires it to catch.

Audit instances (our choices; every one is small so that thousands of runs are cheap):

- **ratings sub-instance** of ML-100K: the ``sub_items`` most-rated items and the ``sub_users`` users with the most
  ratings among them (ids re-indexed). Neighbouring pairs (the "worst-case-ish" rule):
  *rating level* — the rating whose move to the far end of the scale (r ≥ 3 → r_min, else r_max) changes the
  mechanism's release most where that can be computed (DPSGD-PNBM: max L1 change of the gradient over all ratings),
  else the most active user's rating of the most-rated item; *user level* — the most active user's ratings all
  moved to the far end (the personalized-ε_i row: the least active user instead).
- **profiles** (BLIP, JLT): the least active ML-100K user's item set P (20 items) over all 1682 items; D′ = P ∪ {j} with j the
  item whose codeword is most exposed (BLIP: K distinct positions none of which P sets; JLT: the largest ‖X_j‖).
  JLT runs at the thesis's δ = ``jlt_delta`` (0.1) and again at ``jlt_delta_standard`` (10⁻⁵), where the
  provable ε is not 0.
- mechanisms run as implemented (package functions, fresh seeds per run) except where stated: Liu's rows as the
  figures run them — Λ_u, Λ_v, λ_b from a non-private SGLD run on each neighbouring dataset itself, the ``fast``
  SGLD mode — and DPPS-MF with its data-independent Λ = λλ_r; DPSGD-PNBM audited white-box at one iteration (the noisy
  gradient, K = 1, γ = 1: the per-iteration release the paper's ΔF is about) with the exact Laplace
  log-likelihood-ratio test (its per-user clipped variant, ours, the same way given one noisy item-mean release),
  ``laplace_runs`` runs per dataset; DPSGD-MF white-box on what its bound is about, the K epochs of noisy errors
  (Laplace queries) at the data-independent start, exact LLR test; Hua S1 exact with U fixed (Theorem 1's premise)
  and the exact norm-Gamma LLR test; Hua S2/S3 on the per-round transcript (every round's noisy aggregate of the
  changed rating's item — what the untrusted recommender sees and the T·ε bound is about; S3 with every user online,
  the bound's worst case); the other black-box mechanisms with a linear test on the release learned on the
  calibration half. Step sizes of the tiny DPPS runs are raised so the release moves away from its random start.

Columns: ``epsilon_stated``, ``epsilon_provable`` (inf = no finite ε, ``no_finite_reason``), ``pld_epsilon`` /
``rdp_epsilon`` (dp-accounting), ``epsilon_audited`` (ε_lower at ``confidence``; with ``n_evaluation`` runs per
dataset behind it), ``epsilon_pair`` (the exact privacy loss of the audited pair where it has a closed form),
``audit_instance`` (what was audited).
"""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd

from ...claims import Measurement
from ...data import load_ratings
from ...data.ratings import Ratings
from ...errors import ParameterError
from ...outputs import attach
from ...plotting import figure, standin_title
from ...privacy import audit as au
from ...privacy import ledger as lg

CLAIM_PREFIX = "ledger-audited-le-provable-"


#: ledger keys with an "audited ≤ provable" claim in params/claims.yaml (those with a finite provable ε)
FINITE_CLAIMS = ("blip", "jlt-1", "jlt-6", "dpsgd-pnbm", "dpps-pnbm", "dpsgd-mf", "hua-s1-exact", "hua-s2",
                 "hua-s2-composed", "hua-s3", "hua-s3-composed")
#: ledger keys audited against the paper's stated ε
STATED_CLAIMS = {"dpsgd-pnbm": "ledger-dpsgd-pnbm-audited-le-stated", "hua-s1-gd": "ledger-hua-s1-gd-audited-le-stated"}


def claim_id(key: str) -> str:
    return CLAIM_PREFIX + key


# ----------------------------------------------------------------------------------------------- instances


def sub_instance(r: Ratings, n_users: int, n_items: int) -> Ratings:
    """The ``n_items`` most-rated items × the ``n_users`` users with most ratings among them, ids re-indexed."""
    items = np.argsort(-r.item_counts(), kind="stable")[:n_items]
    keep = np.isin(r.items, items)
    uc = np.bincount(r.users[keep], minlength=r.n_users)
    users = np.argsort(-uc, kind="stable")[:n_users]
    keep &= np.isin(r.users, users)
    umap = np.full(r.n_users, -1, np.int64)
    umap[users] = np.arange(len(users))
    imap = np.full(r.n_items, -1, np.int64)
    imap[items] = np.arange(len(items))
    from dataclasses import replace

    src = replace(r.source, note=(r.source.note + f"; audit sub-instance {n_users} users x {n_items} items").strip("; "))
    return Ratings(np.ascontiguousarray(umap[r.users[keep]], np.int32), np.ascontiguousarray(imap[r.items[keep]],
                   np.int32), np.ascontiguousarray(r.values[keep], np.float32), len(users), len(items),
                   r.rating_scale, src)


def far_end(v: float, scale) -> float:
    lo, hi = scale
    return float(lo) if v >= 0.5 * (lo + hi) else float(hi)


def with_values(r: Ratings, idx, new_values) -> Ratings:
    from dataclasses import replace

    vals = r.values.copy()
    vals[np.asarray(idx)] = np.asarray(new_values, np.float32)
    return replace(r, values=np.ascontiguousarray(vals))


def rating_neighbour(r: Ratings) -> tuple[Ratings, int]:
    """The most active user's rating of the most-rated item (or its first rating), moved to the far end."""
    u = int(np.argmax(r.user_counts()))
    mine = np.flatnonzero(r.users == u)
    k = int(mine[np.argmax(r.item_counts()[r.items[mine]])])
    return with_values(r, [k], [far_end(r.values[k], r.rating_scale)]), k


def user_neighbour(r: Ratings, least_active: bool = False) -> tuple[Ratings, int]:
    counts = r.user_counts().astype(float)
    if least_active:
        counts = np.where(counts > 0, counts, np.inf)
        u = int(np.argmin(counts))
    else:
        u = int(np.argmax(counts))
    mine = np.flatnonzero(r.users == u)
    return with_values(r, mine, [far_end(v, r.rating_scale) for v in r.values[mine]]), u


# ----------------------------------------------------------------------------------------------- audits


def _audit_row(res: au.AuditResult, instance: str, seconds: float, pair: float = float("nan")) -> dict:
    """The audit's columns: ε_lower and its point estimate, the runs (calibration and evaluation, disjoint), the
    evaluation error counts (``audit_fp`` of ``audit_n0`` runs on D, ``audit_fn`` of ``audit_n1`` on D′: what a
    per-seed Clopper–Pearson bound at another confidence is formed from), and the exact loss of the pair."""
    return {"epsilon_audited": res.epsilon_lower, "epsilon_audited_point": res.epsilon_point,
            "n_evaluation": res.n_evaluation, "n_calibration": res.n_calibration, "confidence": res.confidence,
            "audit_delta": res.delta, "audit_fp": res.fp, "audit_fn": res.fn, "audit_n0": res.n0, "audit_n1": res.n1,
            "epsilon_pair": pair, "audit_instance": instance, "seconds": seconds}


def audit_bound(entry: lg.LedgerEntry) -> tuple[float, str]:
    """(the ε an audit of this row is checked against, which one): the provable ε when one holds for what ran, else
    the idealised ε when finite, else the stated ε."""
    if math.isfinite(entry.epsilon_provable):
        return float(entry.epsilon_provable), "provable"
    if math.isfinite(entry.epsilon_idealised):
        return float(entry.epsilon_idealised), "idealised"
    return float(entry.epsilon_stated), "stated"


def power_columns(entry: lg.LedgerEntry, audit: dict) -> dict:
    """The audit's power at its evaluation runs (:func:`dpmf_lib.privacy.audit.detectable_epsilon`): the largest ε
    it could certify (``audit_reach``), the smallest true ε it could detect at all (``epsilon_detectable``) and the
    smallest true ε at which it could catch a violation of the row's bound (``epsilon_detectable_over_bound``; inf:
    the bound is beyond the audit's reach, so the audit cannot check it)."""
    n, delta, conf = int(audit["n_evaluation"]), float(audit["audit_delta"]), float(audit["confidence"])
    bound, which = audit_bound(entry)
    return {"audit_bound": bound, "audit_bound_kind": which,
            "audit_reach": au.reach(n, delta=delta, confidence=conf),
            "epsilon_detectable": au.detectable_epsilon(n, 0.0, delta=delta, confidence=conf),
            "epsilon_detectable_over_bound": au.detectable_epsilon(n, bound, delta=delta, confidence=conf)}


def _blackbox(run_d, run_d1, n: int, seed: int, delta: float, confidence: float):
    rs = np.random.SeedSequence(seed).generate_state(2 * n, np.uint64) & np.uint64((1 << 62) - 1)
    R0 = np.stack([np.ravel(run_d(int(rs[k]))) for k in range(n)])
    R1 = np.stack([np.ravel(run_d1(int(rs[n + k]))) for k in range(n)])
    return au.audit_releases(R0, R1, delta=delta, confidence=confidence)


# Every audit takes ``leak`` (default 1: the mechanism as implemented). ``leak`` > 1 runs a known-broken variant
# through the same pipeline — the noise scale divided by ``leak`` (ε multiplied by it for the samplers), while the
# row's stated and provable ε stay — the positive control an audit must catch (tests/properties/test_audit_controls.py).


def audit_blip(profile, n_items: int, p: dict, n: int, seed: int, conf: float, *, leak: float = 1.0):
    from ...attacks.mechanisms import BLIP, bloom_codebook, bloom_filter

    cb = bloom_codebook(n_items, p["blip_L"], p["blip_K"], seed=seed)
    bp = bloom_filter(profile, cb)
    cand = [j for j in range(n_items) if j not in set(profile) and cb.nbits[j] == cb.K
            and not bp[cb.bits[j, :cb.K]].any()]
    if not cand:
        raise ParameterError("BLIP audit: no item with K distinct positions uncovered by the profile; lower blip_K")
    j = cand[0]
    mech = BLIP(cb, float(p["blip_epsilon"]) * leak)
    rng = np.random.default_rng(seed)
    pos = cb.bits[j, :cb.K]
    s0 = np.array([mech.sanitize(profile, seed=rng)[pos].sum() for _ in range(n)], float)
    prof1 = np.append(profile, j)
    s1 = np.array([mech.sanitize(prof1, seed=rng)[pos].sum() for _ in range(n)], float)
    res = au.audit_statistics(s0, s1, confidence=conf)
    return res, cb, float(p["blip_epsilon"])


def audit_jlt(profile, n_items: int, p: dict, eps: float, n: int, seed: int, conf: float, delta: float | None = None,
              *, leak: float = 1.0):
    """``delta``: the δ of the mechanism and of the audit (default ``p["jlt_delta"]``, the thesis's 0.1)."""
    from ...attacks.mechanisms import JLT, jlt_codebook

    delta = float(p["jlt_delta"] if delta is None else delta)

    cb = jlt_codebook(n_items, p["jlt_L"], seed=seed)
    norms = np.linalg.norm(cb.X.astype(np.float64), axis=1)
    outside = np.setdiff1d(np.arange(n_items), profile)
    j = int(outside[np.argmax(norms[outside])])
    mech = JLT(cb, eps * leak, delta)
    rng = np.random.default_rng(seed)
    xj = cb.X[j].astype(np.float64)
    base = cb.X[profile].astype(np.float64).sum(axis=0)
    s0 = np.array([(mech.sanitize(profile, seed=rng) - base) @ xj for _ in range(n)])
    prof1 = np.append(profile, j)
    s1 = np.array([(mech.sanitize(prof1, seed=rng) - base) @ xj for _ in range(n)])
    res = au.audit_statistics(s0, s1, delta=delta, confidence=conf)
    pair = lg.analytic_gaussian_epsilon(mech.sigma, float(norms[j]), delta)
    return res, float(norms.max()), pair


def audit_count_sketch(sub: Ratings, p: dict, n: int, seed: int, conf: float):
    from ...sketch.model import make_model

    # neighbour: one star towards the middle (a far-end move makes the loss exceed the threshold, so clipping would
    # skip it in both runs — the mildest change is the one clipping does not hide)
    _, k = rating_neighbour(sub)
    mid = 0.5 * sum(sub.rating_scale)
    v = float(sub.values[k])
    d1 = with_values(sub, [k], [v - 1.0 if v > mid else v + 1.0])

    def release(r, s):
        m = make_model("count_sketch", r.n_users, r.n_items, 2, gamma=1.0, seed=s)
        rng = np.random.default_rng(s)
        vals = np.ascontiguousarray(r.values - mid, np.float32)
        for _ in range(int(p["sketch_epochs"])):
            order = rng.permutation(r.n_ratings).astype(np.int64)
            m.sgd_epoch(r.users, r.items, vals, order, 0.05, 0.01, float(p["sketch_threshold"]))
        return m.C.ravel().astype(np.float64)

    # the hash seed is public: the adversary recomputes D's release for the seed it sees
    s0, s1 = [], []
    for t in range(n):
        s = seed * 100003 + t
        ref = release(sub, s)
        s0.append(float(np.abs(release(sub, s) - ref).sum()))
        s1.append(float(np.abs(release(d1, s) - ref).sum()))
    return au.audit_statistics(np.array(s0), np.array(s1), confidence=conf)


def liu_priors(r: Ratings, p: dict, seed: int) -> dict:
    """Λ_u, Λ_v, λ_b as the figures fix them (Section 6.6, :func:`dpmf_lib.experiments.liu.liu_fig7.nonprivate_sgld`):
    the final Gibbs-sampled precisions of a non-private SGLD run on the same ratings ``r`` (λ_r = 2)."""
    from ...mf import Schedule, sample_sgld
    from ...privacy import posterior_sampling as ps

    res = sample_sgld(r, d=int(p["liu_d"]), epochs=int(p["liu_prior_rounds"]), eta0=0.02 / r.n_ratings, gamma=0.6,
                      lambda_r=2.0, burn_in=int(p["liu_prior_rounds"]) // 2, seed=ps.prior_run_seed(seed),
                      schedule=Schedule(n_threads=1))
    return ps.fixed_priors(res)


def audit_liu(sub: Ratings, p: dict, eps: float, n: int, seed: int, conf: float, *, least_active=False, lam=None,
              clip_loss: bool = False, leak: float = 1.0):
    """Black-box audit of Algorithm 1 as the figures run it: ``lam`` None (Liu's rows) — Λ_u, Λ_v, λ_b from a
    non-private SGLD run on each neighbouring dataset itself (:func:`liu_priors`, fresh seed per run), as
    ``liu_fig7`` does; a number (DPPS-MF) — the data-independent Λ = λλ_r. SGLD in the figures' ``fast`` mode.
    The release audited is (V, b_j)."""
    from ...mf import Schedule
    from ...privacy import posterior_sampling as ps

    d1, u = user_neighbour(sub, least_active=least_active)
    d = int(p["liu_d"])
    info = {}

    def run(r):
        def f(s):
            if lam is None:
                pri = liu_priors(r, p, s)
            else:
                L = np.full(d, float(lam), np.float32)
                pri = {"Lambda_u": L, "Lambda_v": L, "lam_bias": 1.0}
            pre = ps.preprocess(r, tau=int(p["liu_tau"]), kappa=1.0, rho=float(p["liu_rho"]), seed=s)
            rel = ps.sample_private(pre, eps * leak, Lambda_u=pri["Lambda_u"], Lambda_v=pri["Lambda_v"],
                                    lam_bias=pri["lam_bias"], d=d, rounds=int(p["liu_rounds"]),
                                    max_resamples=int(p["liu_max_resamples"]), seed=s, mode=str(p["liu_mode"]),
                                    schedule=Schedule(n_threads=1), clip_loss=clip_loss,
                                    priors_public=lam is not None)
            info.setdefault("satisfied", []).append(rel.constraint_satisfied)
            info["B"] = pre.B
            info["pre"] = pre
            return np.concatenate([rel.V.ravel(), rel.bi.ravel()])
        return f

    res = _blackbox(run(sub), run(d1), n, seed, 0.0, conf)
    return res, info, u


def _worst_rating(sub: Ratings, grad) -> tuple[int, float, np.ndarray, np.ndarray]:
    """(k, L1 change, G on D, G on D′) for the rating whose move to the far end changes ``grad`` most in L1."""
    G0 = grad(sub)
    best, best_k = -1.0, 0
    for k in range(sub.n_ratings):
        dk = float(np.abs(grad(with_values(sub, [k], [far_end(sub.values[k], sub.rating_scale)])) - G0).sum())
        if dk > best:
            best, best_k = dk, k
    return best_k, best, G0, grad(with_values(sub, [best_k], [far_end(sub.values[best_k], sub.rating_scale)]))


def audit_dpsgd_pnbm(sub: Ratings, p: dict, eps: float, n: int, seed: int, conf: float, *, leak: float = 1.0):
    """White-box audit of one DPSGD-PNBM iteration (K = 1, γ = 1): the noisy gradient G + Lap(b_1) on D and D′ (the
    release the ledger's bound is about), the exact Laplace LLR test."""
    from ...nbm import accounting as acc
    from ...nbm.model import gradient, init_similarity, prepare
    from ...nbm.similarity import item_means

    lo, hi = sub.rating_scale
    phi = hi - lo
    C, Nk, beta = float(p["pnbm_C"]), int(p["pnbm_Nk"]), float(p["pnbm_beta"])
    S = init_similarity(sub.n_items, beta, 0.2, np.random.default_rng(seed))

    def grad(r):
        data = prepare(r, item_means(r))
        return gradient(S, data, r.users, r.items, r.values, Nk=Nk, C=C, e_max=acc.error_clamp(1, phi),
                        f_max=phi).astype(np.float64)

    _, best, G0, G1 = _worst_rating(sub, grad)
    b = acc.laplace_scale(1, eps, 1, 1.0, phi, C)
    res = au.audit_laplace_vector(G0, G1, b / leak, n, seed=seed, confidence=conf)
    return res, best / b, best / acc.sensitivity(1, phi, C)


def audit_dpsgd_pnbm_clipped(sub: Ratings, p: dict, eps: float, n: int, seed: int, conf: float, *,
                             leak: float = 1.0):
    """White-box audit of one iteration (K = 1, γ = 1) of the per-user clipped variant (ours): the noisy clipped
    gradient on D and D′ with the item means held at one noisy release (the means are a separate release; given
    them, the gradient stage is the (1 − share)·ε Laplace mechanism audited here). Worst-case-ish rating: the largest
    L1 change of the clipped gradient over all ratings moved to the far end. Returns (audit, exact pair loss,
    L1 change / clip)."""
    from ...nbm import accounting as acc
    from ...nbm.model import clipped_gradient, init_similarity, noisy_item_means, prepare

    lo, hi = sub.rating_scale
    phi = hi - lo
    C, Nk, beta = float(p["pnbm_C"]), int(p["pnbm_Nk"]), float(p["pnbm_beta"])
    clip, share = float(p["pnbm_clip_l1"]), float(p["pnbm_mean_share"])
    rng = np.random.default_rng(seed)
    S = init_similarity(sub.n_items, beta, 0.2, rng)
    rbar = noisy_item_means(sub, share * eps, rng)

    def grad(r):
        G, _ = clipped_gradient(S, prepare(r, rbar), r.users, r.items, r.values, Nk=Nk, C=C, clip_l1=clip,
                                e_max=acc.error_clamp(1, phi), f_max=phi)
        return G.astype(np.float64)

    _, best, G0, G1 = _worst_rating(sub, grad)
    b = 2.0 * clip / ((1.0 - share) * eps)
    res = au.audit_laplace_vector(G0, G1, b / leak, n, seed=seed, confidence=conf)
    return res, best / b, best / clip


def audit_dpps_pnbm(sub: Ratings, p: dict, eps: float, n: int, seed: int, conf: float, *, leak: float = 1.0):
    """Black-box audit of the released S of DPPS-PNBM (the drift is the gradient of the clipped loss). The chain's
    random start S⁰ is part of the mechanism and, over the short audited chain, dominates its final state; the
    positive control (``leak`` > 1) also shares one start S⁰ across all runs, so that only the data and the Langevin
    noise tell the runs apart."""
    from ...nbm.model import init_similarity, sample_pnbm

    d1, _ = user_neighbour(sub)
    kw = dict(tau=int(p["pnbm_tau"]), T=int(p["dpps_T"]), L=int(p["dpps_L"]), eta1=float(p["dpps_eta1"]),
              rho=float(p["dpps_rho"]), lam=0.02, Nk=int(p["pnbm_Nk"]))
    if leak != 1.0:
        kw["init_S"] = init_similarity(sub.n_items, 1.0, 0.2, np.random.default_rng(seed))

    def run(r):
        return lambda s: sample_pnbm(r, epsilon=eps * leak, seed=s, **kw).S.astype(np.float64)

    return _blackbox(run(sub), run(d1), n, seed, 0.0, conf)


def audit_dpsgd_mf(sub: Ratings, p: dict, eps: float, n: int, seed: int, conf: float, *, leak: float = 1.0):
    """White-box audit of what DPSGD-MF's bound is about: its K epochs of Laplace queries, one noisy error per rating
    and epoch, e + Lap(Kφ/ε). Given the state the queries are asked at (here the data-independent start, held for
    the K epochs: the worst case of the adaptive composition is no weaker), the noisy errors on D and D′ differ in
    their centres e(D), e(D′) — the changed rating's own error and, through the noiseless item mean r̄_i, the errors
    of the item's other ratings (≤ 2φ in L1 per epoch). The exact Laplace LLR test on the K·n noisy errors. Returns
    (audit, exact pair loss, L1 change of the errors per epoch / φ)."""
    from ...nbm.similarity import item_means

    K, d = int(p["mf_K"]), 2
    lo, hi = sub.rating_scale
    phi = hi - lo
    rng = np.random.default_rng(seed)
    P = rng.standard_normal((sub.n_users, d)) * 0.1
    Q = rng.standard_normal((sub.n_items, d)) * 0.1

    def errors(r):
        rbar = item_means(r).astype(np.float64)
        return r.values.astype(np.float64) - rbar[r.items] - np.einsum("kd,kd->k", P[r.users], Q[r.items])

    e0 = errors(sub)
    best, best_k = -1.0, 0
    for k in range(sub.n_ratings):  # the rating whose far-end move changes the error vector most
        dk = float(np.abs(errors(with_values(sub, [k], [far_end(sub.values[k], sub.rating_scale)])) - e0).sum())
        if dk > best:
            best, best_k = dk, k
    e1 = errors(with_values(sub, [best_k], [far_end(sub.values[best_k], sub.rating_scale)]))
    b = K * phi / eps
    res = au.audit_laplace_vector(np.tile(e0, K), np.tile(e1, K), b / leak, n, seed=seed, confidence=conf)
    return res, K * best / b, best / phi


def _hua_setup(sub: Ratings, p: dict):
    from ...objpert import mf as hmf

    prob = hmf.Problem.from_ratings(sub)
    cfg = hmf.HuaConfig(d=int(p["hua_d"]), reopt="exact")
    return hmf, prob, cfg


def audit_hua_s1(sub: Ratings, p: dict, eps: float, reopt: str, n: int, seed: int, conf: float, *,
                 leak: float = 1.0):
    from dataclasses import replace

    from ...objpert import noise as nz

    hmf, prob, cfg = _hua_setup(sub, p)
    cfg = replace(cfg, reopt=reopt)
    d1, k = rating_neighbour(sub)
    prob1 = hmf.Problem.from_ratings(d1)
    T = int(p["hua_T"])
    _, st0 = hmf.train_mf(prob, cfg, [T], seed, states=True)
    _, st1 = hmf.train_mf(prob1, cfg, [T], seed, states=True)
    U, V0 = st0[T]
    V1 = st1[T][1]  # gd starts from each dataset's own non-private V(T); U is held fixed (Theorem 1's premise)
    rng = np.random.default_rng(seed)
    q = int(sub.items[k])
    A = (U[sub.users[sub.items == q]].astype(np.float64).T @ U[sub.users[sub.items == q]].astype(np.float64)
         + cfg.mu * prob.item_counts[q] * np.eye(cfg.d))

    def bvec(r):
        sel = r.items == q
        return U[r.users[sel]].astype(np.float64).T @ r.values[sel].astype(np.float64)

    b0, b1 = bvec(sub), bvec(d1)

    def rel(pr, Vs):
        eta = nz.sample_eta(pr.n_items, cfg.d, eps * leak, pr.delta, cfg.noise_law, rng, np.float32)
        return hmf.s1_reoptimize(pr, cfg, U, Vs, eta, T).astype(np.float64)

    R0 = np.stack([rel(prob, V0) for _ in range(n)])
    R1 = np.stack([rel(prob1, V1) for _ in range(n)])
    if reopt == "exact":  # exact LLR of the norm-Gamma noise implied by the released v_q
        c = eps * leak / (2.0 * prob.delta)

        def llr(R):
            e0 = 2.0 * (b0[None, :] - R[:, q, :] @ A.T)
            e1 = 2.0 * (b1[None, :] - R[:, q, :] @ A.T)
            return c * (np.linalg.norm(e0, axis=1) - np.linalg.norm(e1, axis=1))

        return au.audit_statistics(llr(R0), llr(R1), confidence=conf)
    return au.audit_releases(R0.reshape(n, -1), R1.reshape(n, -1), confidence=conf)


def audit_hua_rounds(sub: Ratings, p: dict, eps_round: float, scenario: str, n: int, seed: int, conf: float, *,
                     leak: float = 1.0):
    """S2/S3 for T rounds with ε_round per round (fresh ρ each round, fixed η). The release audited is what the T·ε
    bound and the untrusted recommender are about: the per-round transcript — every round's noisy aggregate
    A_q(t) = Σ_i −2 (r_iq − u_iᵀv_q) u_i + η_q + ρ_q(t) of the changed rating's item q (a sub-vector of the
    transcript: a lower bound for the whole, by post-processing), T × d numbers; a linear test learned on the
    calibration half. S3 differs from S2 by its η from the initialisation phase and the join/leave machinery, run
    here with every user online (the bound's worst case)."""
    from ...objpert import noise as nz

    hmf, prob, cfg = _hua_setup(sub, p)
    d1, k = rating_neighbour(sub)
    q = int(sub.items[k])
    prob1 = hmf.Problem.from_ratings(d1)
    T = int(p["hua_T"])
    e_r = eps_round * leak

    def run(pr):
        rows = np.flatnonzero(pr.items == q)
        users_q, vals_q = pr.users[rows], pr.values[rows].astype(np.float64)

        def f(s):
            rng = np.random.default_rng(s)
            U, V = hmf.init_factors(pr, cfg.d, seed)
            uw, iw = pr.weights(cfg)
            eta = nz.item_laplace_via_shares(pr.n_items, cfg.d, e_r, pr.delta, rng, np.float32)
            # S3: every user online in every round — the worst case of the composition bound ("a user may take part
            # in every round"); partial participation only adds variance from the other raters' aggregate
            dyn = hmf.OnlineUsers(pr.n_users, 1.0, 0.0, pr.n_users, rng) if scenario == "S3" else None
            everyone = np.arange(pr.n_users, dtype=np.int32)
            transcript = np.zeros((T, cfg.d))
            for t in range(T):
                parts = dyn.participants() if dyn is not None else everyone
                rho = nz.item_laplace_via_shares(pr.n_items, cfg.d, e_r, pr.delta, rng, np.float32)
                noise = np.ascontiguousarray(eta + rho)
                on = np.isin(users_q, parts)
                Uq = U[users_q[on]].astype(np.float64)
                err = vals_q[on] - Uq @ V[q].astype(np.float64)
                if on.any():  # the item's aggregate reaches the recommender only when a rater takes part
                    transcript[t] = (-2.0 * err) @ Uq + noise[q].astype(np.float64)
                hmf.mf_round(pr, cfg, U, V, parts, noise, uw, iw)
                if dyn is not None:
                    dyn.step()
            return transcript.ravel()
        return f

    return _blackbox(run(prob), run(prob1), n, seed, 0.0, conf)


def audit_custom(sub: Ratings, spec: dict, n: int, seed: int, conf: float):
    """Black-box audit of a mechanism of the interface (:func:`dpmf_lib.privacy.mechanism.audit_mechanism`) listed in
    ``custom_mechanisms`` as ``{class: "package.module:Class", config: {...}, epsilon: ε, delta: δ, neighbour:
    user | rating, runs: n}`` (``runs`` caps ``n_audit``). Returns (key, audit columns, ledger entry, neighbours)."""
    from ...privacy import mechanism as mech

    if not isinstance(spec, dict) or "class" not in spec or "epsilon" not in spec:
        raise ParameterError(f"custom_mechanisms: each entry needs 'class' (import path) and 'epsilon', got {spec!r}")
    cls = mech.load_mechanism(spec["class"])
    which = str(spec.get("neighbour", "user"))
    if which not in ("user", "rating"):
        raise ParameterError(f"custom_mechanisms: neighbour must be 'user' or 'rating', got {which!r}")
    d1 = user_neighbour(sub)[0] if which == "user" else rating_neighbour(sub)[0]
    runs = min(int(n), int(spec.get("runs", n)))
    res, entry = mech.audit_mechanism(cls(**dict(spec.get("config") or {})), sub, d1, float(spec["epsilon"]),
                                      float(spec.get("delta", 1e-5)), runs, seed, confidence=conf)
    what = ("the most active user's ratings moved to the far end" if which == "user"
            else "one rating moved to the far end")
    return cls.key, res, entry, what


# ----------------------------------------------------------------------------------------------- run


def _ml100k():
    return load_ratings("ml-100k")


def run(params: dict) -> pd.DataFrame:
    """One row per ledger entry (mechanism × setting) with its stated, provable and audited ε."""
    p = params
    n, conf, seed = int(p["n_audit"]), float(p["confidence"]), int(p["seed"])
    ns = min(n, int(p["sampler_runs"]))  # the SGLD samplers cost ~30 ms a run
    nl = int(p["laplace_runs"])  # the white-box Laplace audits cost microseconds a run: power from many runs
    if n < 8:
        raise ParameterError(f"n_audit must be ≥ 8 runs per dataset, got {n}")
    only = set(p.get("mechanisms") or [])
    r = _ml100k()
    sub = sub_instance(r, int(p["sub_users"]), int(p["sub_items"]))
    inst = f"ML-100K sub-instance {sub.n_users} users × {sub.n_items} items ({sub.n_ratings} ratings)"
    profile = np.unique(r.items[r.users == int(np.argmin(r.user_counts()))]).astype(np.int64)  # a 20-item profile
    rows = []

    def want(key):
        return not only or key in only

    def add(key, entry: lg.LedgerEntry, audit: dict):
        lg.check_entry(entry)
        rows.append({"key": key, **entry.as_dict(), **audit, **power_columns(entry, audit)})

    if want("blip"):
        t0 = time.perf_counter()
        res, cb, e = audit_blip(profile, r.n_items, p, n, seed, conf)
        add("blip", lg.blip_entry(e, cb.K), _audit_row(res, f"profile of {len(profile)} items, L={cb.L}, K={cb.K}",
                                                        time.perf_counter() - t0, pair=e))
    for e in (p["jlt_epsilons"] if want("jlt") else []):
        t0 = time.perf_counter()
        res, sens, pair = audit_jlt(profile, r.n_items, p, float(e), n, seed, conf)
        add(f"jlt-{e:g}", lg.jlt_entry(float(e), p["jlt_delta"], sens),
            _audit_row(res, f"profile of {len(profile)} items, L={p['jlt_L']}", time.perf_counter() - t0, pair))
    # the thesis's δ = 0.1 gives a provable ε of 0 at its σ, which says little: the same ε at a standard δ beside it
    std_delta = p.get("jlt_delta_standard")
    for e in (p["jlt_epsilons"] if want("jlt") and std_delta is not None else []):
        t0 = time.perf_counter()
        res, sens, pair = audit_jlt(profile, r.n_items, p, float(e), n, seed, conf, delta=float(std_delta))
        add(f"jlt-{e:g}-delta-{float(std_delta):g}", lg.jlt_entry(float(e), float(std_delta), sens),
            _audit_row(res, f"profile of {len(profile)} items, L={p['jlt_L']}, δ = {float(std_delta):g}",
                       time.perf_counter() - t0, pair))
    if want("count-sketch"):
        t0 = time.perf_counter()
        res = audit_count_sketch(sub, p, min(n, int(p["sketch_runs"])), seed, conf)
        add("count-sketch", lg.count_sketch_entry(float(p["sketch_threshold"])),
            _audit_row(res, inst + f", {p['sketch_epochs']} epochs, public hash seed", time.perf_counter() - t0))
    if want("liu"):
        t0 = time.perf_counter()
        eps = float(p["liu_epsilon"])
        res, info, _ = audit_liu(sub, p, eps, ns, seed, conf)
        sat = bool(np.all(info["satisfied"]))
        pre = info["pre"]
        add("liu", lg.liu_entry(eps, info["B"], int(p["liu_tau"]), constraint_satisfied=sat,
                                w_max=float(pre.w[pre.kept > 0].max())),
            _audit_row(res, inst + f", τ={p['liu_tau']}, d={p['liu_d']}, {p['liu_rounds']} rounds, Λ from a "
                       f"non-private run on each dataset (as the figures), {p['liu_mode']} SGLD; range rule met in "
                       f"{np.mean(info['satisfied']):.0%} of runs", time.perf_counter() - t0))
    if want("liu-clipped"):  # ours: the clipped-loss variant, audited like the paper's row
        t0 = time.perf_counter()
        eps = float(p["liu_epsilon"])
        res, info, _ = audit_liu(sub, p, eps, ns, seed, conf, clip_loss=True)
        pre = info["pre"]
        add("liu-clipped", lg.liu_clipped_entry(eps, info["B"], int(p["liu_tau"]),
                                                w_max=float(pre.w[pre.kept > 0].max())),
            _audit_row(res, inst + f", τ={p['liu_tau']}, d={p['liu_d']}, {p['liu_rounds']} rounds, Λ from a "
                       "non-private run on each dataset (as the figures), loss with the prediction clipped to "
                       "[r_min − κ, r_max + κ], no range loop", time.perf_counter() - t0))
    if want("liu-personalized"):
        t0 = time.perf_counter()
        eps = float(p["liu_epsilon"])
        res, info, u = audit_liu(sub, p, eps, ns, seed + 1, conf, least_active=True)
        pre = info["pre"]
        eps_i = eps * float(pre.B_i[u]) / (2.0 * pre.B)
        add("liu-personalized", lg.liu_entry(eps, pre.B, int(p["liu_tau"]),
                                             constraint_satisfied=bool(np.all(info["satisfied"])),
                                             personalized=eps_i, w_max=float(pre.w[u])),
            _audit_row(res, inst + f", least active user ({int(pre.kept[u])} ratings kept)", time.perf_counter() - t0))
    if want("dpps-mf"):
        t0 = time.perf_counter()
        eps = float(p["liu_epsilon"])
        res, info, _ = audit_liu(sub, p, eps, ns, seed + 2, conf, lam=float(p["dpps_mf_lambda"]) * 2.0)
        e = lg.dpps_mf_entry(eps, int(p["liu_tau"]), constraint_satisfied=bool(np.all(info["satisfied"])),
                             rho=float(p["dpps_rho"]), rho_on_noise_only=False)
        add("dpps-mf", e, _audit_row(res, inst + f", Λ = λλ_r = {2 * p['dpps_mf_lambda']:g}", time.perf_counter() - t0))
    if want("dpsgd-pnbm"):
        t0 = time.perf_counter()
        eps = float(p["pnbm_epsilon"])
        res, pair, ratio = audit_dpsgd_pnbm(sub, p, eps, nl, seed, conf)
        e = lg.dpsgd_pnbm_entry(eps, 1, 1.0, sub.n_ratings, min(int(p["pnbm_Nk"]), sub.n_items - 1),
                                sub.rating_scale[1] - sub.rating_scale[0], float(p["pnbm_C"]))
        e.extra["l1_change_over_deltaF"] = ratio
        add("dpsgd-pnbm", e, _audit_row(res, inst + ", one iteration (K = 1, γ = 1), white-box noisy gradient",
                                        time.perf_counter() - t0, pair))
    if want("dpsgd-pnbm-clipped"):  # ours: the DP-valid variant beside the paper's row
        t0 = time.perf_counter()
        eps = float(p["pnbm_epsilon"])
        res, pair, ratio = audit_dpsgd_pnbm_clipped(sub, p, eps, nl, seed, conf)
        e = lg.dpsgd_pnbm_clipped_entry(eps, 1, float(p["pnbm_clip_l1"]), float(p["pnbm_mean_share"]),
                                        sub.rating_scale[1] - sub.rating_scale[0])
        e.extra["l1_change_over_clip"] = ratio
        add("dpsgd-pnbm-clipped", e, _audit_row(res, inst + ", one iteration (K = 1, γ = 1), white-box noisy clipped "
                                                "gradient given one noisy item-mean release", time.perf_counter() - t0,
                                                pair))
    if want("dpps-pnbm"):
        t0 = time.perf_counter()
        eps = float(p["dpps_epsilon"])
        res = audit_dpps_pnbm(sub, p, eps, ns, seed, conf)
        B = (sub.rating_scale[1] - sub.rating_scale[0]) ** 2 * int(p["pnbm_tau"])
        add("dpps-pnbm", lg.dpps_pnbm_entry(eps, B, sub.n_users, float(p["dpps_rho"]), rho_on_noise_only=False),
            _audit_row(res, inst + f", T={p['dpps_T']}, η₁={p['dpps_eta1']:g}", time.perf_counter() - t0))
    if want("dpsgd-mf"):
        t0 = time.perf_counter()
        eps = float(p["mf_epsilon"])
        res, pair, ratio = audit_dpsgd_mf(sub, p, eps, nl, seed, conf)
        e = lg.dpsgd_mf_entry(eps, int(p["mf_K"]), sub.rating_scale[1] - sub.rating_scale[0])
        e.extra["l1_change_over_phi"] = ratio
        add("dpsgd-mf", e, _audit_row(res, inst + f", K={p['mf_K']}: the K·n noisy errors (white-box, at the "
                                      "data-independent start)", time.perf_counter() - t0, pair))
    for reopt in (("exact", "gd") if want("hua-s1") else ()):
        t0 = time.perf_counter()
        eps = float(p["hua_epsilon"])
        res = audit_hua_s1(sub, p, eps, reopt, n, seed, conf)
        add(f"hua-s1-{reopt}", lg.hua_s1_entry(eps, reopt),
            _audit_row(res, inst + f", d={p['hua_d']}, T={p['hua_T']}, U fixed", time.perf_counter() - t0))
    for sc in (("S2", "S3") if want("hua-rounds") else ()):
        T, eps = int(p["hua_T"]), float(p["hua_epsilon"])
        t0 = time.perf_counter()
        res = audit_hua_rounds(sub, p, eps, sc, n, seed, conf)
        add(f"hua-{sc.lower()}", lg.hua_rounds_as_stated(eps, T, int(p["hua_d"]), sc),
            _audit_row(res, inst + f", d={p['hua_d']}, T={T} rounds at ε per round, the per-round transcript of "
                       "the changed item's aggregate", time.perf_counter() - t0))
        t0 = time.perf_counter()
        res = audit_hua_rounds(sub, p, eps / T, sc, n, seed + 7, conf)
        add(f"hua-{sc.lower()}-composed", lg.hua_rounds_entry(eps, T, int(p["hua_d"]), sc),
            _audit_row(res, inst + f", d={p['hua_d']}, T={T} rounds at ε/T per round, the per-round transcript of "
                       "the changed item's aggregate", time.perf_counter() - t0))
    for spec in p.get("custom_mechanisms") or []:  # user-defined mechanisms of dpmf_lib.privacy.mechanism
        t0 = time.perf_counter()
        key, res, entry, what = audit_custom(sub, spec, n, seed, conf)
        add(key, entry, {**res, "epsilon_pair": float("nan"), "seconds": time.perf_counter() - t0,
                         "audit_instance": inst + f", {what}, black-box linear test on the release's `published`"})
    df = pd.DataFrame(rows)
    df.insert(0, "dataset", r.source.label)
    df["audited_le_provable"] = df.epsilon_audited <= df.epsilon_provable
    df["audited_le_idealised"] = df.epsilon_audited <= df.epsilon_idealised
    df["audited_gt_stated"] = df.epsilon_audited > df.epsilon_stated
    ms = []
    for row in df.itertuples():
        k, a, st, m = row.key, row.epsilon_audited, row.epsilon_stated, row.mechanism
        # the evaluation counts behind this seed's bound (a per-seed Clopper–Pearson bound at any confidence)
        counts = {"audit_fp": row.audit_fp, "audit_fn": row.audit_fn, "audit_n0": row.audit_n0,
                  "audit_n1": row.audit_n1}
        if k in FINITE_CLAIMS and row.audit_bound_kind in ("provable", "idealised"):
            b, kind = row.audit_bound, row.audit_bound_kind
            ms.append(Measurement(claim_id(k), float(a - b), r.source.label, r.source.real,
                                  note=f"{m}: ε_audited {a:.4g} − ε_{kind} {b:.4g}"
                                       + ("" if kind == "provable" else f" (premise broken: {row.premise_broken})"),
                                  setting=k, guards=counts))
        if k in STATED_CLAIMS:
            ms.append(Measurement(STATED_CLAIMS[k], float(a - st), r.source.label, r.source.real,
                                  note=f"{m}: ε_audited {a:.4g} − ε_stated {st:.4g}", setting=k, guards=counts))
    return attach(df, sources=[r.source], measurements=ms)


# ----------------------------------------------------------------------------------------------- plot


def plot(df: pd.DataFrame, params: dict):
    """Bars per row: stated ε; the ε that holds for what ran (blue), or — where the code breaks a premise of the proof —
    the ε of the idealised release (orange, hatched, labelled so), or "no finite ε" (red); the audited lower bound."""
    fig, axes = figure(ncols=1, nrows=1, width=11.0, height=5.0)
    ax = axes[0, 0]
    x = np.arange(len(df))
    w = 0.27
    finite_any = np.concatenate([df.epsilon_provable[np.isfinite(df.epsilon_provable)],
                                 df.epsilon_idealised[np.isfinite(df.epsilon_idealised)], [1.0]])
    top = 10 ** math.ceil(math.log10(max(10.0, float(np.nanmax(finite_any))) * 10))
    kind = df.epsilon_kind.to_numpy()
    height = np.where(kind == "provable", df.epsilon_provable, np.where(kind == "idealised", df.epsilon_idealised,
                                                                         top))
    floor = 1e-3
    ax.bar(x - w, np.maximum(df.epsilon_stated, floor), w, label="stated ε (paper)", color="#9ecae1")
    sel = kind == "provable"
    ax.bar(x[sel], np.maximum(height[sel], floor), w, label="provable ε (holds for what ran)", color="#3182bd")
    sel = kind == "idealised"
    if sel.any():
        ax.bar(x[sel], np.maximum(height[sel], floor), w, color="#fdae6b", hatch="..", edgecolor="#e6550d",
               label="idealised ε (premise broken: not for what ran)")
    sel = kind == "none"
    if sel.any():
        ax.bar(x[sel], np.full(sel.sum(), top), w, color="#de2d26", hatch="//", label="no finite ε")
        for xi in x[sel]:
            ax.text(xi, top * 0.6, "no finite ε", rotation=90, ha="center", va="top", fontsize=7, color="white")
    ax.bar(x + w, np.maximum(df.epsilon_audited, floor), w,
           label=f"audited ε_lower ({df.confidence.iloc[0]:.0%} Clopper–Pearson)", color="#31a354")
    pld = df.pld_epsilon.to_numpy(float)
    ok = np.isfinite(pld)
    ax.plot(x[ok], pld[ok], "k_", ms=14, mew=2, label="dp-accounting PLD ε (of the bar beside it)")
    ax.set_yscale("log")
    ax.set_ylim(floor, top * 1.5)
    ax.set_xticks(x)
    ax.set_xticklabels(df.mechanism, rotation=35, ha="right", fontsize=7)
    ax.set_ylabel("ε (log scale; bars at 10⁻³ are 0)")
    # outside the axes: inside, it covered the bars of the first mechanisms
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False)
    ax.set_title(standin_title("Privacy ledger: stated vs provable (or idealised) vs audited ε", df.dataset.unique()),
                 fontsize=9)
    return fig
