"""The workbook's own mechanisms behind the frontier's interface (:mod:`dpmf_lib.privacy.mechanism`).

Thin adapters: each calls the existing training or sampling code of its paper (never a second implementation) and
returns a :class:`~dpmf_lib.privacy.mechanism.Release` with the ledger entry of what ran
(:mod:`dpmf_lib.privacy.ledger`). An instance is one configuration: the keyword arguments of the underlying function
plus the adapter's fixed settings. ``fit(train, epsilon, delta, seed)``: ε in the mechanism's own unit (the ledger
entry's ``unit``); ``delta`` is not used by the pure-ε mechanisms; ``epsilon`` None is the non-private fit where the
underlying code has one (``NONPRIVATE`` True; its release has no ledger entry).

The paper forms keep their ledger entries: premise-broken entries (non-private Λ, item means r̄ or U inside the
release) carry ``epsilon_provable`` inf and the idealised ε, and are drawn as such. The DP-valid variants beside them
are ``liu-clipped`` (clipped loss and a data-independent Λ = λλ_r), ``dpsgd-pnbm-clipped`` (per-user L1 clipping,
noisy item means: :func:`dpmf_lib.nbm.model.train_pnbm_clipped`) and ``hua-s2-composed`` / ``hua-s3-composed``
(ε/T per round, :func:`dpmf_lib.privacy.ledger.hua_rounds_entry` — still premise-broken: U between rounds).
"""

from __future__ import annotations

import numpy as np

from . import ledger as lg
from .mechanism import Release, privacy_record


def _release(predictor, entry, seed, published, **extra) -> Release:
    return Release(predictor, entry, privacy_record(entry, int(seed), True), published=published, extra=extra)


def _pairs(train, users, items):
    """A :class:`Ratings` of the (user, item) pairs to predict (values unused), in the training id space."""
    from ..data.ratings import Ratings

    n = len(users)
    return Ratings(np.ascontiguousarray(users, np.int32), np.ascontiguousarray(items, np.int32),
                   np.zeros(n, np.float32), train.n_users, train.n_items, train.rating_scale, train.source)


class _Adapter:
    key = ""
    label = ""
    NONPRIVATE = False
    FIXED: tuple[str, ...] = ()  # settings that are not grid parameters (shown apart from the config)

    def __init__(self, **cfg):
        self.cfg = dict(cfg)


# ----------------------------------------------------------------------------------------------- posterior sampling


class _LiuBase(_Adapter):
    """Liu et al. Algorithm 1 (:func:`dpmf_lib.privacy.posterior_sampling.sample_private`); users fit u_i locally."""

    FIXED = ("tau", "sgld", "private", "lambda_r")
    clip_loss = False

    def _priors(self, train, seed):
        raise NotImplementedError

    def fit(self, train, epsilon, delta, seed):
        from ..mf import Schedule
        from . import posterior_sampling as ps

        c = self.cfg
        d, tau, pv, sl = int(c["d"]), int(c["tau"]), c["private"], c["sgld"]
        pri, lam_dep = self._priors(train, seed)
        pre = ps.preprocess(train, tau=tau, kappa=1.0, rho=float(c["rho"]), seed=seed)
        rel = ps.sample_private(pre, float(epsilon), Lambda_u=pri["Lambda_u"], Lambda_v=pri["Lambda_v"], d=d,
                                lambda_r=float(c.get("lambda_r", 2.0)), lam_bias=pri["lam_bias"],
                                rounds=int(pv["rounds"]), eta_n=float(pv.get("eta_n", sl["eta_n"])),
                                eta_n_max=float(pv["eta_n_max"]), gamma=float(sl["gamma"]),
                                max_resamples=int(pv["max_resamples"]), resample_rounds=int(pv["resample_rounds"]),
                                seed=seed, schedule=Schedule(n_threads=1), clip_loss=self.clip_loss,
                                priors_public=not lam_dep)
        w_max = float(pre.w[pre.kept > 0].max())
        e = self._entry(float(epsilon), pre, rel, w_max, lam_dep)
        model = rel.local_model(train)
        return _release(lambda u, i: model.predict(u, i), e, seed, np.asarray(rel.V),
                        range_rule_met=bool(rel.constraint_satisfied))


class LiuAlgorithm1(_LiuBase):
    """The figures' pipeline: Λ_u, Λ_v, λ_b from a non-private SGLD run on the same training data (a broken premise)."""

    key, label = "liu", "Liu Alg. 1 (posterior sampling)"

    #: (id of the training data, d, SGLD settings, seed) → (data, priors): the validation fits of a grid share one
    #: prior run per d (the data are held so their id stays theirs)
    _PRIORS: dict = {}

    def _priors(self, train, seed):
        key = (id(train), int(self.cfg["d"]), repr(self.cfg["sgld"]), float(self.cfg.get("lambda_r", 2.0)), int(seed))
        hit = self._PRIORS.get(key)
        if hit is None or hit[0] is not train:
            if len(self._PRIORS) > 64:
                self._PRIORS.clear()
            hit = self._PRIORS[key] = (train, self._prior_run(train, seed))
        return hit[1], True

    def _prior_run(self, train, seed):
        from ..mf import Schedule, sample_sgld
        from . import posterior_sampling as ps

        sl = self.cfg["sgld"]
        res = sample_sgld(train, d=int(self.cfg["d"]), epochs=int(sl["rounds"]), eta0=float(sl["eta_n"]) / train.n_ratings,
                          gamma=float(sl["gamma"]), lambda_r=float(self.cfg.get("lambda_r", 2.0)),
                          burn_in=int(sl["burn_in"]), seed=ps.prior_run_seed(seed), schedule=Schedule(n_threads=1))
        return ps.fixed_priors(res)

    def _entry(self, eps, pre, rel, w_max, lam_dep):
        return lg.liu_entry(eps, pre.B, pre.tau, constraint_satisfied=bool(rel.constraint_satisfied), w_max=w_max)


class LiuClipped(_LiuBase):
    """Ours, DP-valid: the clipped loss (no range loop) and a data-independent prior Λ = ``Lambda`` (λλ_r)."""

    key, label = "liu-clipped", "Liu Alg. 1, clipped loss, fixed Λ (ours)"
    clip_loss = True

    def _priors(self, train, seed):
        L = np.full(int(self.cfg["d"]), float(self.cfg["Lambda"]), np.float32)
        return {"Lambda_u": L, "Lambda_v": L, "lam_bias": 1.0}, False

    def _entry(self, eps, pre, rel, w_max, lam_dep):
        return lg.liu_clipped_entry(eps, pre.B, pre.tau, w_max=w_max, lambda_data_dependent=False)


class DPPSMF(_Adapter):
    """DPPS-MF: :func:`dpmf_lib.nbm.runs.dpps_mf_release` (Algorithm 1 with Λ = λλ_r)."""

    key, label = "dpps-mf", "DPPS-MF"
    FIXED = ("tau",)

    def fit(self, train, epsilon, delta, seed):
        from ..nbm import runs

        c = {k: v for k, v in self.cfg.items() if k != "tau"}
        tau = int(self.cfg["tau"])
        rel = runs.dpps_mf_release(train, epsilon=float(epsilon), seed=seed, tau=tau, **c)
        e = lg.dpps_mf_entry(float(epsilon), tau, constraint_satisfied=bool(rel.constraint_satisfied),
                             rho=float(c["rho"]), rho_on_noise_only=False)
        model = rel.local_model(train)
        return _release(lambda u, i: model.predict(u, i), e, seed, np.asarray(rel.V),
                        range_rule_met=bool(rel.constraint_satisfied))


class DPPSPNBM(_Adapter):
    """DPPS-PNBM: :func:`dpmf_lib.nbm.model.sample_pnbm`; prediction from the released S and the item means."""

    key, label = "dpps-pnbm", "DPPS-PNBM"
    FIXED = ("tau",)
    NONPRIVATE = True

    def fit(self, train, epsilon, delta, seed):
        from ..nbm.model import prepare, predict, sample_pnbm
        from ..nbm.similarity import item_means

        c = {k: v for k, v in self.cfg.items() if k != "tau"}
        res = sample_pnbm(train, epsilon=None if epsilon is None else float(epsilon), seed=seed,
                          tau=int(self.cfg["tau"]), **c)
        data = prepare(train, item_means(train))
        n_users = int(np.count_nonzero(train.user_counts()))
        e = None if epsilon is None else lg.dpps_pnbm_entry(float(epsilon), float(res.info["B"]), n_users,
                                                             float(c["rho"]), rho_on_noise_only=False)
        S, Nk = res.S, int(c["Nk"])
        return _release(lambda u, i: predict(S, data, _pairs(train, u, i), Nk=Nk), e, seed, np.asarray(S))


# ----------------------------------------------------------------------------------------------- DPSGD


class DPSGDMF(_Adapter):
    """DPSGD-MF (Berlioz et al.): :func:`dpmf_lib.nbm.model.train_dpsgd_mf`; prediction r̄_i + p_uᵀq_i."""

    key, label = "dpsgd-mf", "DPSGD-MF"
    NONPRIVATE = True

    def fit(self, train, epsilon, delta, seed):
        from ..nbm.kernels import mf_predict_kernel
        from ..nbm.model import train_dpsgd_mf

        res = train_dpsgd_mf(train, epsilon=epsilon, seed=seed, **self.cfg)
        lo, hi = train.rating_scale

        def pred(u, i):
            out = np.empty(len(u), np.float32)
            mf_predict_kernel(res.P, res.Q, res.rbar, np.ascontiguousarray(u, np.int32),
                              np.ascontiguousarray(i, np.int32), float(lo), float(hi), out)
            return out

        e = None if epsilon is None else lg.dpsgd_mf_entry(float(epsilon), int(self.cfg["K"]), float(hi - lo))
        return _release(pred, e, seed, np.asarray(res.Q))


class _PNBMBase(_Adapter):
    NONPRIVATE = True

    def _predictor(self, train, res, rbar):
        from ..nbm.model import prepare, predict

        data = prepare(train, rbar)
        S, Nk, C = res.S, int(self.cfg["Nk"]), float(self.cfg["C"])
        return lambda u, i: predict(S, data, _pairs(train, u, i), Nk=Nk, C=C)


class DPSGDPNBM(_PNBMBase):
    """DPSGD-PNBM as the paper runs it: :func:`dpmf_lib.nbm.model.train_pnbm` (non-private item means)."""

    key, label = "dpsgd-pnbm", "DPSGD-PNBM"

    def fit(self, train, epsilon, delta, seed):
        from ..nbm.model import train_pnbm
        from ..nbm.similarity import item_means

        res = train_pnbm(train, epsilon=epsilon, seed=seed, **self.cfg)
        c = self.cfg
        phi = float(train.rating_scale[1] - train.rating_scale[0])
        nk = min(int(c["Nk"]), train.n_items - 1)
        e = None if epsilon is None else lg.dpsgd_pnbm_entry(float(epsilon), int(c["K"]), float(c["gamma"]),
                                                              int(res.info["L"]), nk, phi, float(c["C"]))
        return _release(self._predictor(train, res, item_means(train)), e, seed, np.asarray(res.S))


class DPSGDPNBMClipped(_PNBMBase):
    """Ours, DP-valid: per-user L1-clipped DPSGD-PNBM with noisy item means (:func:`~dpmf_lib.nbm.model.train_pnbm_clipped`)."""

    key, label = "dpsgd-pnbm-clipped", "DPSGD-PNBM, per-user clipped (ours)"
    NONPRIVATE = False

    def fit(self, train, epsilon, delta, seed):
        from ..nbm.model import train_pnbm_clipped

        c = self.cfg
        res = train_pnbm_clipped(train, epsilon=float(epsilon), seed=seed, **c)
        phi = float(train.rating_scale[1] - train.rating_scale[0])
        e = lg.dpsgd_pnbm_clipped_entry(float(epsilon), int(c["K"]), float(c["clip_l1"]), float(c["mean_share"]), phi)
        return _release(self._predictor(train, res, res.info["rbar"]), e, seed, np.asarray(res.S))


# ----------------------------------------------------------------------------------------------- Hua et al.


class _Hua(_Adapter):
    """Hua et al. (:mod:`dpmf_lib.objpert.mf`) on the training data; prediction u_iᵀv_j of the released factors."""

    NONPRIVATE = True
    FIXED = ("p_join", "p_leave", "max_online")
    scenario = ""
    composed = False

    def fit(self, train, epsilon, delta, seed):
        from ..objpert import mf as hmf

        c = self.cfg
        prob = hmf.Problem.from_ratings(train)
        T = int(c["iterations_s3"] if self.scenario == "s3" else c["iterations"])
        hc = hmf.HuaConfig(d=int(c["d"]), reopt="exact")
        eps = None if epsilon is None else float(epsilon)
        run_eps = None if eps is None else (eps / T if self.composed else eps)
        if self.scenario == "s1":
            res = hmf.run_s1(prob, hc, run_eps, [T], seed, keep_factors=True)
            e = None if eps is None else lg.hua_s1_entry(eps, "exact")
        elif self.scenario == "s2":
            res = hmf.run_s2(prob, hc, run_eps, [T], seed, keep_factors=True)
            e = None if eps is None else (lg.hua_rounds_entry if self.composed else lg.hua_rounds_as_stated)(
                eps, T, hc.d, "S2")
        else:
            res = hmf.run_s3(prob, hc, run_eps, [T], seed, keep_factors=True, p_join=float(c["p_join"]),
                             p_leave=float(c["p_leave"]), max_online=int(c["max_online"]))
            e = None if eps is None else (lg.hua_rounds_entry if self.composed else lg.hua_rounds_as_stated)(
                eps, T, hc.d, "S3")
        U, V = (np.asarray(a, np.float64) for a in res.factors[T])
        return _release(lambda u, i: np.einsum("nd,nd->n", U[u], V[i]), e, seed, V, T=T)


class HuaS1(_Hua):
    key, label, scenario = "hua-s1", "Hua S1 (exact)", "s1"


class HuaS2(_Hua):
    key, label, scenario = "hua-s2", "Hua S2 (T rounds at ε each)", "s2"


class HuaS3(_Hua):
    key, label, scenario = "hua-s3", "Hua S3 (T rounds at ε each)", "s3"


class HuaS2Composed(_Hua):
    key, label, scenario, composed = "hua-s2-composed", "Hua S2, ε/T per round (ours)", "s2", True
    NONPRIVATE = False  # its non-private fit is hua-s2's


class HuaS3Composed(_Hua):
    key, label, scenario, composed = "hua-s3-composed", "Hua S3, ε/T per round (ours)", "s3", True
    NONPRIVATE = False


#: key → adapter class (the frontier's workbook mechanisms)
ADAPTERS = {c.key: c for c in (LiuAlgorithm1, LiuClipped, DPPSMF, DPSGDMF, DPSGDPNBM, DPSGDPNBMClipped, DPPSPNBM,
                               HuaS1, HuaS2, HuaS3, HuaS2Composed, HuaS3Composed)}
