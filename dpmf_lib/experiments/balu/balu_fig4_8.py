"""Balu 2016, Figure 4.8: KL-divergence leakage (eq. 4.15) against the clipping threshold (the thesis's "ε"; clipping
adds no noise, so no finite ε holds) — the runs of Figure 4.7 (see :mod:`dpmf_lib.experiments.balu.balu_fig4_7`), plotted
as KLD. Its claims are the KLD ones (4.7 measures the RMSE one); its runs, and its claims' fresh-seed re-fits, are
4.7's, read from the result cache."""

from __future__ import annotations

from . import balu_fig4_7 as _f


def run(params):
    return _f.run(params, measure=_f.measure_kld)


def fresh_seeds(df, params):
    """``fresh_seeds(df, nb.params).replicate(nb)``: the KLD claims at 5 fresh seeds (see :mod:`.balu_fig4_7`)."""
    return _f.fresh_seeds(df, params, measure=_f.measure_kld)


def plot(df, params):
    return _f._plot(df, params, "kld", "KL divergence (train vs test errors)",
                    "Figure 4.8: KL divergence vs clipping threshold")
