"""Independent chains of the private samplers and their diagnostics (Liu et al. 2015, Figure 7).

- :func:`chain_seed`, :func:`phase_seed`, :func:`prior_run_seed`, :func:`diagnostic_chain_seed` — the seed namespaces
  of a run's chains, of a chain's constant-step phase, of the non-private run whose Λ the chains hold fixed and of the
  extra chains run beside a released one only for its diagnostics;
- :func:`chain_diagnostics` — split-R̂ and ESS (:mod:`dpmf_lib.diagnostics`) over the statistics of a per-draw trace.

Used by :func:`dpmf_lib.privacy.posterior_sampling.sample_private` (which re-exports them) and by
:mod:`dpmf_lib.privacy.exact_gibbs`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..diagnostics import ess, split_rhat
from ..errors import ParameterError


def chain_seed(seed: int, k: int) -> int:
    """The seed of independent chain ``k`` of a run seeded ``seed`` (k = 0: ``seed`` itself; k ≥ 1: a SeedSequence
    child, so the chains' counter-based noise streams, noise tables and initialisations do not overlap)."""
    if int(k) == 0:
        return int(seed)
    return int(np.random.SeedSequence([int(seed), 0xC4A1, int(k)]).generate_state(1, np.uint64)[0] >> np.uint64(2))


def phase_seed(chain: int) -> int:
    """The seed of the constant-step (sampling) phase of the chain seeded ``chain`` (a :func:`chain_seed`). A
    namespace of its own: deriving it as ``chain_seed(chain, 1)`` made chain 0's sampling phase replay chain 1's
    burn-in noise (chain 0's seed is the run's seed itself), so the "independent" redraw and the R̂ over the two
    chains shared noise. A chain stays a function of its own seed alone."""
    return int(np.random.SeedSequence([int(chain), 0x5A3E]).generate_state(1, np.uint64)[0] >> np.uint64(2))


def prior_run_seed(seed: int) -> int:
    """The seed of the non-private SGLD run whose Λ the private chains of a run seeded ``seed`` hold fixed (Section
    6.6; ``liu_fig7.nonprivate_sgld``). A namespace of its own: seeding that run with ``seed`` itself gave it chain 0's
    burn-in noise stream (``chain_seed(seed, 0) == seed``), so the priors and the first private chain shared noise."""
    return int(np.random.SeedSequence([int(seed), 0x7A1B]).generate_state(1, np.uint64)[0] >> np.uint64(2))


def diagnostic_chain_seed(seed: int, k: int) -> int:
    """The seed of extra chain ``k`` (≥ 1) run beside the released chain of a run seeded ``seed``, for its split-R̂
    and ESS only (the PNBM figures' DPPS chains). A namespace of its own: :func:`chain_seed` ``(seed, k)`` is the
    seed of the release's k-th redraw, so an extra chain seeded by it would share noise with a chain that may be
    released."""
    if int(k) < 1:
        raise ParameterError(f"extra chains are numbered from 1 (chain 0 is the released one), got {k}")
    return int(np.random.SeedSequence([int(seed), 0xD1A6, int(k)]).generate_state(1, np.uint64)[0] >> np.uint64(2))


def chain_diagnostics(trace: pd.DataFrame, stats=("v_norm2", "sample_rmse")) -> dict:
    """Split-R̂ (max over ``stats``) and ESS (min over ``stats``) of a per-draw trace with columns ``chain``, ``draw``
    and the statistics; every chain is cut to the shortest one's length."""
    out = {"rhat": float("nan"), "ess": float("nan"), "n_chains": 0, "n_draws": 0}
    if trace is None or not len(trace):
        return out
    chains = [g.sort_values("draw") for _, g in trace.groupby("chain")]
    n = min(len(g) for g in chains)
    out["n_chains"], out["n_draws"] = len(chains), n
    rh, es = [], []
    for s in stats:
        if s not in trace or trace[s].isna().all():
            continue
        x = np.stack([g[s].to_numpy()[-n:] for g in chains])
        rh.append(split_rhat(x))
        es.append(ess(x))
        out[f"rhat_{s}"], out[f"ess_{s}"] = rh[-1], es[-1]
    if rh:  # one unmeasurable statistic leaves the chain unvouched for: NaN (a guard on it then fails)
        out["rhat"] = float("nan") if np.any(np.isnan(rh)) else float(max(rh))
        out["ess"] = float("nan") if np.any(np.isnan(es)) else float(min(es))
    return out
