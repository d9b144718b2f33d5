"""Objective-perturbation DP matrix factorisation of Hua, Xia, Zhong (2015), with an untrusted recommender, a
semi-honest third party and dynamic users.

Modules
- :mod:`.noise`      — samplers: norm-Gamma (Theorem 1), per-coordinate Laplace (Lemma 1), Theorem 2
  (``mu + b sqrt(2h) c``), the users' shares of eq. (12) and their aggregate.
- :mod:`.fixedpoint` — fixed-point residues modulo ``P = 2^bits``, uniform masks, exact masked sums, random splits.
- :mod:`.kernels`    — one synchronous round of (2)-(5)/(9) (numba, float32) and its numpy reference; |error| kernel.
- :mod:`.mf`         — ``HuaConfig``, ``Problem``, ``train_mf`` (baseline), ``run_s1``, ``run_s2``, ``run_s3``,
  ``OnlineUsers`` (S3 join/leave dynamics); every reconstruction choice is in its docstring.
- :mod:`.protocol`   — the explicit S2/S3 protocol (users, third party, recommender) with byte accounting.
- :mod:`.data`       — ``load_hua_dataset("ml-100k" | "netflix")`` (Netflix: 100 random movies with all their raters).
"""

from .fixedpoint import FixedPoint
from .mf import HuaConfig, OnlineUsers, Problem, run_s1, run_s2, run_s3, train_mf
from .noise import (item_laplace_via_shares, laplace_coords, laplace_scale, norm_gamma, sample_eta, shares,
                    theorem2)
from .protocol import MessageLog, Protocol

__all__ = ["FixedPoint", "HuaConfig", "MessageLog", "OnlineUsers", "Problem", "Protocol", "item_laplace_via_shares",
           "laplace_coords", "laplace_scale", "norm_gamma", "run_s1", "run_s2", "run_s3", "sample_eta", "shares",
           "theorem2", "train_mf"]
