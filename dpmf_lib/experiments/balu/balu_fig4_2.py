"""Balu 2016, Figure 4.2: the heatmaps of Figure 4.1 on EachMovie (see :mod:`dpmf_lib.experiments.balu.balu_fig4_1`).

It measures the thesis's EachMovie claim only: at ``paper`` it runs on an EachMovie stand-in (never judged); at ``ci``
/ ``smoke`` it runs on ML-100K with a grid complementary to Figure 4.1's, and the ML-100K counterpart of the claim is
Figure 4.1's (its notebook), so this figure's value there is shown as "not judged here"."""

from __future__ import annotations

from . import balu_fig4_1 as _f

CLAIMS_K = {"eachmovie": "balu-4.1.5.3-k4-beats-k1-eachmovie"}
CLAIM_K = CLAIMS_K["eachmovie"]


def run(params):
    # through the result cache (like every chapter-4 run): no other notebook trains on this EachMovie stand-in, but a
    # run stopped by its time budget resumes from the runs it finished
    return _f.run(params, claims=CLAIMS_K, default="eachmovie")


def plot(df, params):
    return _f.plot(df, params, figure_label="Figure 4.2")
