"""Balu 2016, Figure 4.8: KL-divergence leakage (eq. 4.15) against the clipping threshold (the thesis's "ε"; clipping
adds no noise, so no finite ε holds) — the runs of Figure 4.7 (see :mod:`dpmf_lib.experiments.balu_fig4_7`), plotted
as KLD."""

from __future__ import annotations

from . import balu_fig4_7 as _f

run = _f.run


def plot(df, params):
    return _f._plot(df, params, "kld", "KL divergence (train vs test errors)",
                    "Figure 4.8: KL divergence vs clipping threshold")
