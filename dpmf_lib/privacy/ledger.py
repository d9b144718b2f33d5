"""The privacy ledger: for every mechanism, the ε the paper states, the ε that holds for this
implementation, and the reason — or "no finite ε" with the reason.

One :class:`LedgerEntry` per mechanism and setting. Two numbers, never one for both:

- ``epsilon_idealised``: the ε the proof gives when every premise it rests on holds (sensitivity actually bounded,
  temperature, composition over rounds, the neighbouring relation stated in ``unit``);
- ``epsilon_provable``: the ε that holds for the release *as the code runs it*. It equals ``epsilon_idealised`` unless
  the code breaks a premise of the proof — computes a noiseless function of the same ratings into the release
  (``premise_broken``: U or r̄ or Λ without noise, a drift that is not the target's gradient); then it is ``inf``
  ("no finite ε") and ``no_finite_reason`` starts with "premise broken:". :class:`LedgerEntry` applies that rule
  itself, so an entry cannot print an idealised bound as provable.

``conditions`` lists what both still assume and no number accounts for: an exact posterior sample where the
implementation runs a finite chain (shared by every posterior-sampling row: the papers' own δ-far caveat), ideal
real-valued noise where the code draws floating-point noise (``noise_sampler``: the textbook samplers −b·log u,
b·√(2h)·z, Box–Muller / polar normals are not the discrete or snapped samplers whose ε survives rounding; Mironov
2012), and the public parts of the neighbouring relation. ``pld_epsilon`` / ``rdp_epsilon``: the same ε recomputed with Google's ``dp-accounting``
(privacy-loss distributions / Rényi DP) where the mechanism is one the library models (Laplace, Gaussian, randomized
response and their compositions); NaN with the reason in ``accounting_note`` otherwise (exponential mechanisms, the
K-norm noise of Hua's Theorem 1).

The formulas (each in its function's docstring) are ours where the papers leave gaps; the notebook
``extra_privacy_ledger`` repeats them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from ..errors import ParameterError

INF = math.inf
#: the floating-point samplers of the workbook (conditions of every noisy row; see the module docstring)
FLOAT_LAPLACE = ("floating-point Laplace (−b·log u or numpy's sampler): ε assumes real-valued noise; the rounding "
                 "is not accounted (Mironov 2012)")
FLOAT_GAUSSIAN = "floating-point Gaussian: ε assumes real-valued noise; the rounding is not accounted"
FLOAT_THEOREM2 = ("floating-point b·√(2h)·z (Theorem 2 of Hua et al.): ε assumes real-valued Laplace noise; the "
                  "rounding is not accounted")
FLOAT_NORM_GAMMA = ("floating-point norm-Gamma (Gamma radius × normalised Gaussian direction): ε assumes real-valued "
                    "noise; the rounding is not accounted")
FLOAT_SGLD = ("floating-point Gaussian Langevin noise of a finite chain: ε is the exact sample's; neither the chain's "
              "distance to the target nor the rounding is accounted")
PURE_DELTA = 1e-6  # δ at which dp-accounting's PLD reports a pure-ε mechanism (its discretisation has a tiny δ tail)


@dataclass
class LedgerEntry:
    mechanism: str  # e.g. "Liu Algorithm 1"
    source: str  # "paper" (the paper's mechanism as implemented) or "ours" (a DP-valid variant)
    unit: str  # neighbouring relation: "user (replace one user's ratings)", "rating (change one value)", ...
    epsilon_stated: float
    delta_stated: float
    epsilon_provable: float  # inf: no finite ε
    delta_provable: float
    no_finite_reason: str = ""
    conditions: str = ""  # what the provable ε still assumes
    # a premise of the provable ε that the implementation itself does not meet (U or r̄ computed without noise, a
    # finite chain for an exact sample): the ε is then a bound for an idealised release, not for what ran
    premise_broken: str = ""
    caveats: str = ""  # everything else a reader must know (temperature, data-dependent hyper-parameters, ...)
    pld_epsilon: float = float("nan")
    rdp_epsilon: float = float("nan")
    accounting_note: str = ""
    extra: dict = field(default_factory=dict)
    epsilon_idealised: float = float("nan")  # the proof's ε when its premises hold (set by __post_init__ when NaN)
    # how the noise is drawn, and that its floating-point form is not accounted ("" where there is no noise)
    noise_sampler: str = ""

    def __post_init__(self):
        if math.isnan(self.epsilon_idealised):
            self.epsilon_idealised = float(self.epsilon_provable)
        if self.premise_broken and not self.no_finite_reason.startswith("premise broken"):
            # the bound is for an idealised release: it does not hold for what ran
            self.epsilon_provable = INF
            reason = f"premise broken: {self.premise_broken}"
            self.no_finite_reason = reason if not self.no_finite_reason else f"{reason}; {self.no_finite_reason}"
            if self.accounting_note:
                self.accounting_note += " (of the idealised release)"

    @property
    def kind(self) -> str:
        """``provable`` (finite for what ran), ``idealised`` (finite only if the broken premise held) or ``none``."""
        if math.isfinite(self.epsilon_provable):
            return "provable"
        return "idealised" if (self.premise_broken and math.isfinite(self.epsilon_idealised)) else "none"

    def as_dict(self) -> dict:
        d = asdict(self)
        extra = d.pop("extra")
        d.update(extra)
        d["epsilon_kind"] = self.kind
        return d


# ----------------------------------------------------------------------------------------------- dp-accounting


def pld_laplace(scale: float, sensitivity: float, compositions: int = 1, delta: float = PURE_DELTA) -> float:
    """ε at ``delta`` of ``compositions`` Laplace(scale) releases of L1 sensitivity ``sensitivity`` (dp-accounting PLD)."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    p = pld.from_laplace_mechanism(parameter=float(scale), sensitivity=float(sensitivity),
                                   value_discretization_interval=1e-3)
    if compositions > 1:
        p = p.self_compose(int(compositions))
    return float(p.get_epsilon_for_delta(float(delta)))


def rdp_laplace(scale: float, sensitivity: float, compositions: int = 1, delta: float = PURE_DELTA) -> float:
    from dp_accounting import dp_event, rdp

    acc = rdp.RdpAccountant()
    acc.compose(dp_event.LaplaceDpEvent(float(scale) / float(sensitivity)), int(compositions))
    return float(acc.get_epsilon(float(delta)))


def pld_gaussian(sigma: float, sensitivity: float, delta: float, compositions: int = 1) -> float:
    from dp_accounting.pld import privacy_loss_distribution as pld

    p = pld.from_gaussian_mechanism(standard_deviation=float(sigma), sensitivity=float(sensitivity))
    if compositions > 1:
        p = p.self_compose(int(compositions))
    return float(p.get_epsilon_for_delta(float(delta)))


def rdp_gaussian(sigma: float, sensitivity: float, delta: float, compositions: int = 1) -> float:
    from dp_accounting import dp_event, rdp

    acc = rdp.RdpAccountant()
    acc.compose(dp_event.GaussianDpEvent(float(sigma) / float(sensitivity)), int(compositions))
    return float(acc.get_epsilon(float(delta)))


def pld_randomized_response(flip_p: float, bits: int, delta: float = PURE_DELTA) -> float:
    """ε of ``bits`` independent binary randomized responses that each flip with probability ``flip_p``."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    p = pld.from_randomized_response(noise_parameter=2.0 * float(flip_p), num_buckets=2,
                                     value_discretization_interval=1e-4)
    if bits > 1:
        p = p.self_compose(int(bits))
    return float(p.get_epsilon_for_delta(float(delta)))


# ----------------------------------------------------------------------------------------------- Gaussian mechanism


def analytic_gaussian_epsilon(sigma: float, sensitivity: float, delta: float) -> float:
    """The smallest ε with Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ) ≤ δ: the exact (ε, δ) curve of the Gaussian mechanism
    (Balle & Wang 2018, Theorem 8). ``inf`` for σ = 0."""
    from scipy.stats import norm

    if sigma <= 0:
        return INF
    D, s = float(sensitivity), float(sigma)

    def d_of(e):
        return norm.cdf(D / (2 * s) - e * s / D) - math.exp(e) * norm.cdf(-D / (2 * s) - e * s / D)

    if d_of(0.0) <= delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while d_of(hi) > delta:
        hi *= 2.0
        if hi > 1e6:
            return INF
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if d_of(mid) > delta else (lo, mid)
    return hi


# ----------------------------------------------------------------------------------------------- entries


def blip_entry(eps: float, K: int, nbits_max: int | None = None) -> LedgerEntry:
    """BLIP (thesis 3.1): one item's codeword sets ≤ K distinct bits, each flipped with p = 1/(1 + e^{ε/K}); adding
    or removing one item changes ≤ K bits, each a randomized response with likelihood ratio e^{ε/K}: ε-DP at item level
    (exactly ε when the item's K positions are distinct and not covered by the rest of the profile)."""
    from ..attacks.mechanisms import blip_flip_probability

    p = blip_flip_probability(eps, K)
    k = K if nbits_max is None else int(nbits_max)
    prov = k * math.log((1 - p) / p)
    return LedgerEntry("BLIP", "paper", "item (add/remove one item of a profile)", eps, 0.0, prov, 0.0,
                       conditions="public codebook (hash positions); fresh flips per release",
                       noise_sampler="randomized response: a bit flips when a uniform double is below p",
                       caveats="a user who publishes several BLIPs of one profile composes their ε",
                       pld_epsilon=pld_randomized_response(p, k), accounting_note=f"PLD: {k} randomized responses "
                       f"(flip p = {p:.4g}) at δ = {PURE_DELTA:g}")


def jlt_entry(eps: float, delta: float, sensitivity: float) -> LedgerEntry:
    """JLT (thesis 3.2): Y = Σ_{j∈P} X_j + N(0, σ²I), σ = 4/ε √ln(1/δ) (3.10). Adding one item moves Y by X_j, so the
    L2 sensitivity is max_j ‖X_j‖ of the public codebook (≈ 1, not exactly 1). The provable ε at the stated δ is the
    exact Gaussian-mechanism curve (:func:`analytic_gaussian_epsilon`); (3.10) itself needs ε < ln(1/δ)."""
    from ..attacks.mechanisms import jlt_sigma

    sigma = jlt_sigma(eps, delta)
    prov = analytic_gaussian_epsilon(sigma, sensitivity, delta)
    ok = eps < math.log(1.0 / delta)
    return LedgerEntry(f"JLT (ε={eps:g}, δ={delta:g})", "paper", "item (add/remove one item of a profile)", eps, delta,
                       prov, delta,
                       no_finite_reason="" if math.isfinite(prov) else "σ = 0",
                       conditions=f"public codebook, L2 sensitivity max_j ‖X_j‖ = {sensitivity:.4f}",
                       caveats=("" if ok else f"(3.10) needs ε < ln(1/δ) = {math.log(1 / delta):.3g}: violated, so the "
                                "thesis's calibration does not give the stated ε; the provable column is the exact "
                                "Gaussian curve at this σ"),
                       pld_epsilon=pld_gaussian(sigma, sensitivity, delta),
                       rdp_epsilon=rdp_gaussian(sigma, sensitivity, delta),
                       noise_sampler=FLOAT_GAUSSIAN,
                       accounting_note=f"PLD and RDP of a Gaussian, σ = {sigma:.4g}", extra={"sigma": sigma,
                                                                                           "eps_below_ln_1_delta": ok})


def count_sketch_entry(threshold: float) -> LedgerEntry:
    """Count-sketch "data-clipped privacy" (thesis 4.2): ratings with a loss above a threshold are skipped; nothing is
    random given the (public) hash seed, so two neighbouring datasets whose releases differ are told apart with
    certainty: no finite ε. The thesis calls the threshold ε."""
    return LedgerEntry("Count-sketch data clipping", "paper", "rating (change one value)", threshold, 0.0, INF, 0.0,
                       no_finite_reason="no noise: the release is a deterministic function of the data and the seed",
                       caveats="the 'ε' of figures 4.7/4.8 is a clipping threshold on the loss, not a privacy level",
                       accounting_note="nothing to account: no randomness")


def liu_entry(eps: float, B: float, tau: int, *, constraint_satisfied: bool, w_max: float,
              lambda_data_dependent: bool = True, personalized: float | None = None,
              zeta: float = 1.0) -> LedgerEntry:
    """Liu et al. Algorithm 1 (Theorem 1): one sample from exp(−ε/(4B)·F) under a data-independent prior is ε-DP at
    user level *when every prediction lies in [r_min − κ, r_max + κ]* (lines 5–6), which bounds each user's
    log-likelihood by B = τ(Δ+κ)² (data-independent B₀: the paper's max over the data would move with one user's
    counts). If the range loop did not land, Theorem 1 does not apply: no finite ε. ``lambda_data_dependent``: Λ_u,
    Λ_v (and λ_b) come from a non-private run on the same ratings (Section 6.6, the figures' pipeline): a noiseless
    function of the data inside the target, a broken premise (the ε is then for an idealised release).
    ``personalized``: the user's ε_i = ε B_i/(2B) of Theorem 2 (same conditions). ``zeta``: the temperature the
    paper's SGLD would use; a ζ ≠ 1 on the noise alone targets the (ε/ζ)-posterior (refused by ``sample_private``).

    Rating level (``epsilon_rating_stated``): one rating's term is ≤ w_i (Δ+κ)², so on Theorem 1's scale changing one
    value costs ε w_i (Δ+κ)²/B = ε w_i/τ; the release's rating-level ε is ε·``w_max``/τ with w_max = max_i w_i
    (= min(ρ, τ/min_i m_i)): the paper's ε/τ only when every w_i ≤ 1."""
    name = "Liu Algorithm 1" if personalized is None else "Liu personalized ε_i (Theorem 2)"
    stated = eps if personalized is None else personalized
    caveats = []
    if zeta != 1.0:
        caveats.append(f"temperature ζ = {zeta:g} on the noise only would target ε/ζ = {eps / zeta:g}")
    reason = "" if constraint_satisfied else ("the prediction-range rule (lines 5–6) did not land: the log-likelihood "
                                              "bound B behind Theorem 1 does not hold for the release")
    return LedgerEntry(name, "paper", "user (replace one user's ratings)", stated, 0.0,
                       stated if constraint_satisfied else INF, 0.0, no_finite_reason=reason,
                       conditions="exact posterior sample (the chain is finite) with every prediction in range; "
                                  "B = τ(Δ+κ)² data-independent",
                       premise_broken=("Λ_u, Λ_v (and λ_b) come from a non-private run on the same ratings"
                                       if lambda_data_dependent else ""),
                       caveats="; ".join(caveats), noise_sampler=FLOAT_SGLD,
                       accounting_note="exponential mechanism: no dp-accounting event",
                       extra={"epsilon_rating_stated": eps * float(w_max) / tau, "w_max": float(w_max), "B": B})


def liu_clipped_entry(eps: float, B: float, tau: int, *, w_max: float,
                      lambda_data_dependent: bool = True) -> LedgerEntry:
    """Liu et al. with the prediction clipped inside the loss (ours, ``sample_private(clip_loss=True)``): every term
    w_i (r − clip(r̂, r_min − κ, r_max + κ))² ≤ w_i (Δ + κ)², so each user's part of F is ≤ B for any (U, V) and one
    exact sample of exp(−ε/(4B)·F) under a data-independent prior is ε-DP at user level (Theorem 1's argument)
    without the range rule. With Λ from a non-private run on the same ratings (``lambda_data_dependent``, the
    figures' pipeline) the premise of a data-independent prior is broken. Rating level: ε·``w_max``/τ (as
    :func:`liu_entry`)."""
    return LedgerEntry("Liu Algorithm 1, clipped loss (ours)", "ours", "user (replace one user's ratings)", eps, 0.0,
                       eps, 0.0,
                       conditions="exact posterior sample of the clipped-loss target (the chain is finite); "
                                  "B = τ(Δ+κ)² data-independent",
                       premise_broken=("Λ_u, Λ_v (and λ_b) come from a non-private run on the same ratings"
                                       if lambda_data_dependent else ""),
                       noise_sampler=FLOAT_SGLD,
                       accounting_note="exponential mechanism: no dp-accounting event",
                       extra={"epsilon_rating_stated": eps * float(w_max) / tau, "w_max": float(w_max), "B": B})


def dpsgd_pnbm_entry(eps: float, K: int, gamma: float, L: int, Nk_eff: int, phi: float, C: float) -> LedgerEntry:
    """DPSGD-PNBM as implemented. The paper's ΔF^(t) = 2 e_max(t) φ/C bounds one entry of one rating's gradient. What
    one rating changes: its own gradient row; every prediction of its user where it is a neighbour; and — through the
    non-private item mean r̄_j — every rating of every user who rated item j. Each rating's contribution to G has
    ≤ N_k entries, each ≤ e_max φ/C after the clips, so one changed value moves G by at most L · N_k · ΔF^(t) in L1 per
    iteration (L = ratings per minibatch; no amplification by subsampling because r̄ reaches ratings outside the
    batch too). Laplace of scale ΔF^(t)/ε^(t) then gives L · N_k · ε^(t) per iteration and, composed over K,
    ε_provable = L · N_k · ε / γ — finite, astronomically above the stated ε."""
    per_it = L * Nk_eff * eps / (K * gamma)
    prov = K * per_it
    from ..nbm import accounting as acc

    b1 = acc.laplace_scale(1, eps, K, gamma, phi, C)
    sens1 = L * Nk_eff * acc.sensitivity(1, phi, C)
    return LedgerEntry("DPSGD-PNBM", "paper", "rating (change one value)", eps, 0.0, prov, 0.0,
                       conditions=f"release = S; clips as implemented (|e| ≤ e_max(t), |c − p sgn s| ≤ φ, "
                                  f"D ≥ C = {C:g}); L = {L}, N_k = {Nk_eff}",
                       premise_broken="the predictor also releases the item means r̄, computed without noise (the "
                                      "bound covers S alone)",
                       noise_sampler=FLOAT_LAPLACE,
                       caveats="the paper's ΔF bounds one gradient entry; non-private item means r̄ spread one "
                               "rating to every rating of the item's raters; the 'privacy enhancing' γ factor is not "
                               "the standard subsampling bound",
                       pld_epsilon=_composed_laplace_pld([(acc.laplace_scale(t, eps, K, gamma, phi, C),
                                                           L * Nk_eff * acc.sensitivity(t, phi, C))
                                                          for t in range(1, K + 1)]),
                       accounting_note="PLD of K Laplace releases with the bounded L1 sensitivity",
                       extra={"epsilon_amplified_paper_formula": acc.amplified_epsilon(eps, K, gamma),
                              "laplace_scale_t1": b1, "l1_sensitivity_bound_t1": sens1})


def dpsgd_pnbm_clipped_entry(eps: float, K: int, clip_l1: float, mean_share: float, phi: float) -> LedgerEntry:
    """DPSGD-PNBM with per-user L1 clipping (ours, :func:`dpmf_lib.nbm.model.train_pnbm_clipped`). Item means are
    released first with Laplace(φ/ε_r) on each item's sum, ε_r = share·ε (one changed value moves one sum by ≤ φ);
    everything after uses only them. Each iteration adds Laplace(2·clip/ε_it), ε_it = (1 − share)ε/K, to a sum of
    per-user contributions each clipped to L1 ≤ clip: one changed value moves only its user's term (given r̄), so
    by ≤ 2·clip. Basic composition: ε_r + K ε_it = ε (no subsampling amplification claimed). PLD/RDP of the same
    K + 1 Laplace releases beside it."""
    eps_r = mean_share * eps
    eps_it = (1.0 - mean_share) * eps / K
    b = 2.0 * clip_l1 / eps_it
    pairs = [(phi / eps_r, phi)] + [(b, 2.0 * clip_l1)] * int(K)
    from dp_accounting import dp_event, rdp

    ra = rdp.RdpAccountant()
    ra.compose(dp_event.LaplaceDpEvent(1.0 / eps_r))
    ra.compose(dp_event.LaplaceDpEvent(b / (2.0 * clip_l1)), int(K))
    return LedgerEntry("DPSGD-PNBM, per-user clipped (ours)", "ours", "rating (change one value)", eps, 0.0, eps, 0.0,
                       conditions=f"which (user, item) pairs are rated is public; per-user L1 clip {clip_l1:g}; item "
                                  f"means with ε_r = {eps_r:g}; K = {K}",
                       caveats="float32 rounding of the clipped sum is not accounted",
                       noise_sampler=FLOAT_LAPLACE,
                       pld_epsilon=_composed_laplace_pld(pairs), rdp_epsilon=float(ra.get_epsilon(PURE_DELTA)),
                       accounting_note=f"PLD/RDP of 1 + {K} Laplace releases (item means; clipped gradients)",
                       extra={"laplace_scale_t1": b, "l1_sensitivity_bound_t1": 2.0 * clip_l1,
                              "epsilon_item_means": eps_r, "epsilon_per_iteration": eps_it})


def _composed_laplace_pld(pairs, delta: float = PURE_DELTA) -> float:
    """ε of a composition of Laplace releases given as (scale, sensitivity) pairs; exact sum when the PLD would
    overflow its discretisation (per-step ε > 50)."""
    if any(s / b > 50 for b, s in pairs):
        return float(sum(s / b for b, s in pairs))
    from dp_accounting.pld import privacy_loss_distribution as pld

    out = None
    for b, s in pairs:
        p = pld.from_laplace_mechanism(parameter=float(b), sensitivity=float(s), value_discretization_interval=1e-3)
        out = p if out is None else out.compose(p)
    return float(out.get_epsilon_for_delta(delta))


def dpps_pnbm_entry(eps: float, B: float, n_users: int, rho: float, rho_on_noise_only: bool, *,
                    drift: str = "clipped_loss") -> LedgerEntry:
    """DPPS-PNBM. One exact sample from exp(−κ Σ_u ℓ_u), κ = min(1, ε/(4B)), ℓ_u ∈ [0, B] (clipped predictions,
    τ-trimming): if only user u's term changed, ε-DP. But ℓ_v uses the non-private item means r̄, which one user's
    ratings move, so every user's term can change: |ΔE| ≤ κ n B and the exact sample is (n κ B · 2)-DP = n·min(ε, 4B)/2
    at user level. With the temperature on the noise only (the paper's reading) the chain targets ε/ϱ instead of ε.
    The predictor releases r̄ itself too (noiseless): a broken premise. ``drift``: ``"clipped_loss"`` (the gradient
    of the clipped loss, whose posterior the bound is about) or ``"clipped_error"`` (clipped error × unclipped
    derivative: not the gradient of any loss, so even an infinite chain does not target the bounded posterior — a
    broken premise too)."""
    target = min(eps / rho if rho_on_noise_only else eps, 4.0 * B)
    prov = n_users * target / 2.0
    broken = ["the predictor also releases the item means r̄, computed without noise"]
    if drift != "clipped_loss":
        broken.append("the drift (clipped error × unclipped derivative) is not the gradient of the clipped loss, so "
                      "the chain does not target the B-bounded posterior")
    return LedgerEntry("DPPS-PNBM", "paper", "user (replace one user's ratings)", eps, 0.0, prov, 0.0,
                       conditions="exact posterior sample (the SGLD chain is finite: not covered)",
                       premise_broken="; ".join(broken),
                       caveats=(f"non-private item means r̄ couple all {n_users} users' likelihood terms; "
                                + (f"ϱ = {rho:g} on the noise only targets ε/ϱ = {eps / rho:g}" if rho_on_noise_only
                                   else f"ϱ = {rho:g} scales drift and noise alike (no change of target)")),
                       noise_sampler=FLOAT_SGLD,
                       accounting_note="exponential mechanism: no dp-accounting event",
                       extra={"epsilon_target": target, "drift": drift})


def dpps_mf_entry(eps: float, tau: int, *, constraint_satisfied: bool, rho: float, rho_on_noise_only: bool,
                  w_max: float = 1.0):
    """DPPS-MF = Liu's Algorithm 1 with the PNBM paper's grid; data-independent Λ = λλ_r and the weight cap ρ_w = 1
    (so w_max ≤ 1). Same range rule as Liu."""
    e = liu_entry(eps, tau * 25.0, tau, constraint_satisfied=constraint_satisfied, w_max=w_max,
                  lambda_data_dependent=False, zeta=rho if rho_on_noise_only else 1.0)
    e.mechanism = "DPPS-MF"
    if not rho_on_noise_only:
        e.caveats += ("; " if e.caveats else "") + f"ϱ = {rho:g} applied as a step scale (no change of target)"
    return e


def dpsgd_mf_entry(eps: float, K: int, phi: float) -> LedgerEntry:
    """DPSGD-MF (Berlioz et al. 2015): every epoch each rating's error gets Laplace(Kφ/ε) before the clamp, so the
    released (P, Q) is a post-processing of n·K adaptively chosen Laplace queries. Changing one value r moves its own
    error by ≤ φ and — through the non-private item mean r̄_i — the error of each of the item's n_i ratings by φ/n_i:
    ≤ 2φ per epoch in L1, i.e. 2ε/K per epoch and 2ε over K epochs (pair (u, i) public). r̄ itself is released
    without noise for prediction: counted, the model has no finite ε."""
    b = K * phi / eps
    return LedgerEntry("DPSGD-MF", "paper", "rating (change one value)", eps, 0.0, 2.0 * eps, 0.0,
                       conditions="release = (P, Q); which (user, item) pairs are rated is public",
                       premise_broken="the predictor also releases the item means r̄, computed without noise",
                       caveats="item means r̄ (prediction offsets) are computed without noise: with them the model "
                               "has no finite ε",
                       noise_sampler=FLOAT_LAPLACE,
                       pld_epsilon=pld_laplace(b, 2 * phi, K), rdp_epsilon=rdp_laplace(b, 2 * phi, K),
                       accounting_note="PLD/RDP of K Laplace releases, L1 sensitivity 2φ per epoch")


def hua_s1_entry(eps: float, reopt: str) -> LedgerEntry:
    """Hua S1: V = argmin of (6) with U fixed and η ~ exp(−ε‖η‖/(2Δ)) (Theorem 1). With ``reopt="exact"`` the
    release is that minimiser: ε-DP at rating level given U (Theorem 1's premise; U is fit to the same ratings without
    noise). With ``reopt="gd"`` it is a few gradient rounds from the non-private V(T), which it still carries: no
    finite ε."""
    if reopt == "exact":
        return LedgerEntry("Hua S1 (exact minimiser)", "paper", "rating (change one value)", eps, 0.0, eps, 0.0,
                           conditions="U held fixed (Theorem 1's premise); ‖u_i‖ ≤ 1",
                           premise_broken="U is fit to the same ratings without noise",
                           caveats="U is fit to the same ratings without noise: with U counted, no finite ε",
                           noise_sampler=FLOAT_NORM_GAMMA,
                           accounting_note="K-norm (norm-Gamma) noise: no dp-accounting event")
    return LedgerEntry("Hua S1 (gd re-optimisation)", "paper", "rating (change one value)", eps, 0.0, INF, 0.0,
                       no_finite_reason="the release is gradient rounds from the non-private V(T), not the minimiser "
                                        "Theorem 1 covers; it keeps a noiseless function of the data",
                       accounting_note="no finite ε to account")


def hua_rounds_entry(eps: float, T: int, d: int, scenario: str, delta: float = 1e-5) -> LedgerEntry:
    """Hua S2/S3 with the composition over rounds accounted (ours): each of the T rounds adds fresh per-coordinate
    Laplace(2Δ√d/ε_r) with ε_r = ε/T to every item aggregate (plus the fixed η_j, which can only help: revealing it
    leaves T Laplace releases). Given the round's U (the paper's per-round premise) one changed rating moves one item's
    aggregate by ≤ 2Δ in L2, ≤ 2Δ√d in L1: ε_r per round and T ε_r = ε by basic composition (S3: a user may be online
    in every round). PLD gives the tighter ε at δ in ``pld_epsilon``."""
    er = eps / T
    b, s = 2.0 * math.sqrt(d) / er, 2.0 * math.sqrt(d)
    return LedgerEntry(f"Hua {scenario}, ε/T per round (ours)", "ours", "rating (change one value)", eps, 0.0,
                       eps, 0.0,
                       premise_broken="U is updated from the same ratings without noise between rounds",
                       conditions="U fixed within each round (the paper's premise); a user may take part in every "
                                  "round",
                       caveats="u_p's dependence on the rating spreads the change to p's other items in later rounds "
                               "(not covered, as in the paper)",
                       noise_sampler=FLOAT_THEOREM2,
                       pld_epsilon=pld_laplace(b, s, T, delta), rdp_epsilon=rdp_laplace(b, s, T, delta),
                       accounting_note=f"PLD/RDP of {T} Laplace rounds at δ = {delta:g}",
                       extra={"delta_pld": delta, "epsilon_per_round": er})


def hua_rounds_as_stated(eps: float, T: int, d: int, scenario: str, delta: float = 1e-5) -> LedgerEntry:
    """Hua S2/S3 as the paper runs them: fresh noise calibrated to ε in every one of the T rounds while ε is stated
    for the whole protocol; the provable ε of what runs is T ε (basic composition; PLD at δ in ``pld_epsilon``)."""
    b, s = 2.0 * math.sqrt(d) / eps, 2.0 * math.sqrt(d)
    return LedgerEntry(f"Hua {scenario} ({T} rounds at ε each)", "paper", "rating (change one value)", eps, 0.0,
                       T * eps, 0.0,
                       premise_broken="U is updated from the same ratings without noise between rounds",
                       conditions="U fixed within each round (the paper's premise)",
                       caveats=f"the stated ε ignores the composition over T = {T} rounds",
                       noise_sampler=FLOAT_THEOREM2,
                       pld_epsilon=pld_laplace(b, s, T, delta) if T * eps < 2000 else float("nan"),
                       rdp_epsilon=rdp_laplace(b, s, T, delta),
                       accounting_note=f"PLD/RDP of {T} Laplace rounds at δ = {delta:g}",
                       extra={"delta_pld": delta, "epsilon_per_round": eps})


def check_entry(e: LedgerEntry) -> LedgerEntry:
    if not (e.epsilon_stated > 0):
        raise ParameterError(f"{e.mechanism}: stated ε must be > 0")
    if not np.isfinite(e.epsilon_provable) and not e.no_finite_reason:
        raise ParameterError(f"{e.mechanism}: an infinite provable ε needs a reason")
    if e.premise_broken and np.isfinite(e.epsilon_provable):
        raise ParameterError(f"{e.mechanism}: a premise is broken ({e.premise_broken}), so its ε is idealised: "
                             "epsilon_provable must be inf (the bound goes in epsilon_idealised)")
    return e
