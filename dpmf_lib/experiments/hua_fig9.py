"""Hua, Xia, Zhong (2015), Figure 9: effects of the joining and leaving probabilities in S3, Netflix.

Panel (a): leaving probability fixed, joining probability varied; panel (b): joining probability fixed, leaving varied;
y axis: mean increase of ``|prediction error|`` over the baseline (non-private MF, 100 iterations) after the S3 run.
The paper's probability grid is read off the text ("as the joining probability increases between [0.005, 0.02]");
ours is in ``params/hua_fig9.yaml``. The claim measured: the mean increase declines as the joining probability grows
(we record increase(p_join max) - increase(p_join min), expected < 0).
"""

from __future__ import annotations

import pandas as pd

from ..claims import Measurement
from ..outputs import attach
from . import hua_common as hc

FIGURE = 9
CLAIM = "hua-5-join-probability-netflix"


def run(params: dict) -> pd.DataFrame:
    df, sources = hc.joinleave_experiment(params)
    label = df["dataset"].iloc[0]
    real = bool(list(sources.values())[0]["real"])
    a = df[df.panel == "a"].sort_values("probability")
    m = []
    if len(a) >= 2 and int(params["iterations_s3"]) == 10000:
        m.append(Measurement(CLAIM, float(a.mean_increase.iloc[-1] - a.mean_increase.iloc[0]), label, real,
                             f"increase(p_join={a.probability.iloc[-1]:g}) - increase(p_join={a.probability.iloc[0]:g}); "
                             f"the increases themselves: {a.mean_increase.iloc[-1]:.4g} and {a.mean_increase.iloc[0]:.4g} "
                             "(a difference far below them is within run-to-run variation)"))
    return attach(df, sources=hc.sources_of(sources), measurements=m)


def plot(df: pd.DataFrame, params: dict):
    return hc.plot_joinleave(df, params, FIGURE)
