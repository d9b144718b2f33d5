"""Differential privacy by posterior sampling (Liu, Wang & Smola 2015, Section 3, Algorithm 1, Theorem 2).

Public API (all in :mod:`dpmf_lib.privacy.posterior_sampling`: ``from dpmf_lib.privacy import posterior_sampling as
ps``; this package re-exports only :mod:`~dpmf_lib.privacy.common`, see the end of this docstring)
- :func:`check_privacy_params` — validates ε, τ, κ, ρ (raises ``ParameterError`` naming the parameter)
- :func:`user_weights` — w_i, B_i and B from per-user counts (Algorithm 1 line 1, Section 6.6)
- :func:`fixed_priors` — Λ_u, Λ_v (and a bias precision) from a non-private SGLD run (Section 6.6)
- :func:`preprocess` → :class:`Preprocessed` — seeded trimming to τ + per-rating weights
- :func:`likelihood_scale` — the SGLD ``likelihood_scale`` that makes the sampler target exp(−ε/(4B)·F)
- :func:`sample_private` → :class:`PrivateRelease` — SGLD on the scaled posterior with fixed Λ_u, Λ_v and the
  prediction-range rejection loop of Algorithm 1 lines 5–6 (with a count of how often it binds); releases V only
- :func:`local_user_factors` — each user's ridge regression (eq. 5) against the released V (numba; reference
  :func:`local_user_factors_reference`)
- :func:`range_violations` — out-of-range predictions over all (user, item) pairs (numba; reference
  :func:`range_violations_reference`)
- :func:`privacy_accounting` — per-user personalized ε_i (Theorem 2) and the realized log-likelihood at the sample
- :func:`privacy_summary` — user-level ε, rating-level ε (:func:`rating_epsilon`: ε max_i w_i (Δ+κ)² / B), quantiles of ε_i / ε

Shared by every DP release path of the workbook (:mod:`dpmf_lib.privacy.common`): :func:`check_dp_epsilon` (only None
means non-private; NaN / inf raise) and :func:`resolve_seed` (``seed=None`` → fresh OS entropy, recorded as
``seed_used`` / ``seed_was_fixed``).

Why the package does not import :mod:`~dpmf_lib.privacy.posterior_sampling`: a notebook's result goes stale when any
module it imports changes (:mod:`dpmf_lib.dependencies`), and importing ``privacy.common`` runs this ``__init__``;
re-exporting the posterior sampler here would put the SGLD and C-SGD kernels in the closure of every notebook that only
needs ``check_dp_epsilon`` or ``resolve_seed`` (chapter 4, Hua, ...), so every kernel change would stale them.
"""

from .common import check_dp_epsilon, resolve_seed

__all__ = ["check_dp_epsilon", "resolve_seed"]
