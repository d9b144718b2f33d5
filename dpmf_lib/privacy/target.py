"""Algorithm 1's target density exp(−ε/(4B)·F) × prior (Liu, Wang & Smola 2015): the ε check and the likelihood
scale that both of its samplers use — the SGLD path (:func:`dpmf_lib.privacy.posterior_sampling.sample_private`) and
exact block Gibbs (:mod:`dpmf_lib.privacy.exact_gibbs`). Re-exported by :mod:`~dpmf_lib.privacy.posterior_sampling`.
"""

from __future__ import annotations

from .. import validate


def check_epsilon(epsilon) -> float:
    """ε of Algorithm 1 (:func:`dpmf_lib.validate.epsilon`); no None here: ε = 4B is the non-private posterior."""
    return validate.epsilon(epsilon, fix="use a large value such as 4B for the non-private posterior")


def likelihood_scale(epsilon: float, B: float, lambda_r: float) -> float:
    """The ``likelihood_scale`` s of :func:`dpmf_lib.mf.sample_sgld` for the density exp(−ε/(4B) Σ w (r − r̂)²).

    The sampler's data term is (s λ_r / 2) Σ w (r − r̂)², hence s = ε / (2 B λ_r).
    """
    return check_epsilon(epsilon) / (2.0 * float(B) * float(lambda_r))
