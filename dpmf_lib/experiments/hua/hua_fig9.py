"""Hua, Xia, Zhong (2015), Figure 9: effects of the joining and leaving probabilities in S3, Netflix.

Panel (a): leaving probability fixed, joining probability varied; panel (b): joining probability fixed, leaving varied;
y axis: mean increase of ``|prediction error|`` over the baseline (non-private MF, 100 iterations) after the S3 run.
The paper's probability grid is read off the text ("as the joining probability increases between [0.005, 0.02]");
ours is in ``params/hua_fig9.yaml``. The claim measured: the mean increase declines as the joining probability grows
(we record the relative change (increase(p_join max) - increase(p_join min)) / increase(p_join min) at each seed,
expected < -0.01: a decline of at least 1 %, our margin). The figure shows ``n_seeds`` seeds (the block of
consecutive seeds that holds ``seed``, :func:`~dpmf_lib.experiments.hua.hua_common.figure_seeds`): mean ± 95 %
Student-t interval, every seed as a grey dot, the y axis from 0.
"""

from __future__ import annotations

import pandas as pd

from ...claims import Measurement
from ...outputs import attach
from . import hua_common as hc
from . import hua_plots

FIGURE = 9
CLAIM = "hua-5-join-probability-netflix"


def run(params: dict) -> pd.DataFrame:
    df, sources = hc.joinleave_experiment(params)
    label = df["dataset"].iloc[0]
    real = bool(list(sources.values())[0]["real"])
    seed = int(params["seed"])
    a = df[(df.panel == "a") & (df.seed == seed)].sort_values("probability")
    m = []
    if len(a) >= 2 and int(params["iterations_s3"]) == 10000:
        diff, note = hc.joinleave_difference(df, seed)
        base = float(a.mean_increase.iloc[0])
        # a relative change needs a positive base: at base ≤ 0 the sign would flip (a rise read as a decline)
        m.append(Measurement(CLAIM, diff / base if base > 0 else float("nan"), label, real,
                             f"relative change {note}, divided by the latter (the seeds of the figure: "
                             f"{sorted(df.seed.unique().tolist())}; the claim's seeds come from the replicates)",
                             guards={"reference_gain_over_bias_only": hc.reference_gain(params)}))
    return attach(df, sources=hc.sources_of(sources), measurements=m)


def plot(df: pd.DataFrame, params: dict):
    return hua_plots.plot_joinleave(df, params, FIGURE)
