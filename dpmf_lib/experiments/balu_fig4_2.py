"""Balu 2016, Figure 4.2: the heatmaps of Figure 4.1 on EachMovie (see :mod:`dpmf_lib.experiments.balu_fig4_1`)."""

from __future__ import annotations

from . import balu_fig4_1 as _f

CLAIM_K = "balu-4.1.5.3-k4-beats-k1-eachmovie"


def run(params):
    # not through the result cache: at `paper` no other notebook trains on this EachMovie stand-in (its entries
    # would only fill the cache)
    return _f.run(params, claim=CLAIM_K, cached=False)


def plot(df, params):
    return _f.plot(df, params, figure_label="Figure 4.2")
