"""Hua claims are measured on the rows they quote (review of issue #16's W-scaled variant and Figs 9–10)."""

import numpy as np
import pandas as pd

from dpmf_lib.experiments import hua_common as hc
from dpmf_lib.experiments import hua_fig7, hua_fig9


def _sources():
    return {"netflix": {"dataset": "netflix", "real": False, "label": "Netflix (stand-in)", "checksum": None}}


def test_fig7_claims_read_theorem1_rows_even_when_the_w_scaled_row_comes_first(monkeypatch):
    rows = []
    for noise, inc in ((hc.NOISE_LABEL["w_scaled"], 0.001), (hc.NOISE_LABEL["theorem1"], 250.0)):
        for scen in ("s1", "s2"):
            rows.append({"panel": "a", "scenario": scen, "noise": noise, "eps": 0.15, "iterations": 100,
                         "mean_increase": inc, "dataset": "Netflix (stand-in)"})
    df = pd.DataFrame(rows)
    monkeypatch.setattr(hc, "increase_experiment", lambda params: (df, _sources()))
    monkeypatch.setattr(hc, "sources_of", lambda s: [])
    monkeypatch.setattr(hua_fig7, "attach", lambda d, sources, measurements: measurements)
    ms = hua_fig7.run({})
    assert [m.value for m in ms] == [250.0, 250.0]


def test_join_probability_claim_is_unmeasured_when_the_base_increase_is_not_positive(monkeypatch):
    df = pd.DataFrame({"panel": "a", "seed": 0, "probability": [0.005, 0.02], "mean_increase": [-2.0, 1.0],
                       "dataset": "Netflix (stand-in)"})
    monkeypatch.setattr(hc, "joinleave_experiment", lambda params: (df, _sources()))
    monkeypatch.setattr(hc, "joinleave_difference", lambda d, seed: (3.0, "note"))
    monkeypatch.setattr(hc, "sources_of", lambda s: [])
    monkeypatch.setattr(hua_fig9, "attach", lambda d, sources, measurements: measurements)
    ms = hua_fig9.run({"seed": 0, "iterations_s3": 10000})
    assert len(ms) == 1 and np.isnan(ms[0].value)  # judged inconclusive (a seed without a finite value)
