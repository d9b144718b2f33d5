"""Balu Table 5.1 (#15 F5): every method's MSE is a mean ± sd over the same paired frames, and the claims read it."""

import numpy as np
import pandas as pd
import pytest

from dpmf_lib import lsh
from dpmf_lib.params import load_params

N_FRAMES = 4


@pytest.fixture(scope="module")
def run():
    import dpmf_lib.experiments.balu_table5_1 as e

    p = load_params("balu_table5_1", "smoke", {"n_vectors": 400, "n_antisparse": 400, "n_common": 400,
                                                "n_timing": 200, "n_timing_lp": 5, "timing_repeats": 1,
                                                "n_frames": N_FRAMES, "n_spread": 300, "seed": 3})
    df = e.run(p)
    return e, p, df, e.frames_table(df)


def test_every_method_has_n_frames_values(run):
    e, p, df, fr = run
    assert set(fr.key) == set(e.PAPER) == set(df.key)  # every method's MSE depends on the frame
    counts = fr.groupby("key").frame.agg(["count", "nunique"])
    assert (counts["count"] == N_FRAMES).all() and (counts["nunique"] == N_FRAMES).all()
    assert (fr.n_vectors == p["n_spread"]).all()
    assert (df.n_frames == N_FRAMES).all() and (df.n_spread == p["n_spread"]).all()
    assert df.mse_frames_mean.notna().all() and (df.mse_frames_sd > 0).all()


def test_frames_are_paired_across_methods(run):
    e, p, df, fr = run
    # one seed per frame, the same for every method; different frames have different seeds
    seeds = fr.pivot(index="frame", columns="key", values="frame_seed")
    assert (seeds.nunique(axis=1) == 1).all() and seeds.iloc[:, 0].nunique() == N_FRAMES
    # the tight-frame methods share one frame per frame index (the thesis: "the same tight frame for all the methods
    # except LSH"); LSH's Gaussian projections differ from it
    sha = fr.pivot(index="frame", columns="key", values="frame_sha")
    tight = ["lsh+frame", "antisparse", "optimal", "qolsh"]
    assert (sha[tight].nunique(axis=1) == 1).all() and (sha["lsh"] != sha["lsh+frame"]).all()
    assert sha["lsh+frame"].nunique() == N_FRAMES
    # the recorded seed is the one used: frame k rebuilt from child k of the spread seed gives the same frame and MSE
    X = lsh.random_unit_vectors(p["n_vectors"], p["d"], np.random.default_rng(
        np.random.SeedSequence(p["seed"]).spawn(3)[2]))[: p["n_spread"]]
    for k, ss in enumerate(e.frame_seeds(p["seed"], N_FRAMES)):
        assert seeds.loc[k].iloc[0] == f"{ss.entropy}/{'.'.join(map(str, ss.spawn_key))}"
        for m in ("lsh", "qolsh"):
            W = lsh.frame_for(m, p["d"], p["L"], np.random.default_rng(ss))
            row = fr[(fr.key == m) & (fr.frame == k)].iloc[0]
            assert row.mse == pytest.approx(lsh.mse(X, W, lsh.encode(X, W, m, p["M"])), rel=1e-12)


def test_table_and_claims_read_the_frame_means(run):
    e, p, df, fr = run
    t = df.set_index("key")
    for m, g in fr.groupby("key"):
        assert t.mse_frames_mean[m] == pytest.approx(g.mse.mean(), rel=1e-12)
        assert t.mse_frames_sd[m] == pytest.approx(g.mse.std(ddof=1), rel=1e-12)
    meas = {m["claim"]: m["value"] for m in df.attrs["measurements"]}
    for m, claim in e.MSE_CLAIMS.items():
        assert meas[claim] == pytest.approx(t.mse_frames_mean[m], rel=1e-12)
    # "qoLSH is the best tractable encoder": the mean over frames of the per-frame (paired) gap
    w = fr.pivot(index="frame", columns="key", values="mse")
    gap = (w[["antisparse", "lsh+frame", "lsh"]].min(axis=1) - w.qolsh).mean()
    assert meas[e.BEST_TRACTABLE_CLAIM] == pytest.approx(gap, rel=1e-12)
    # optimal is optimal in every frame (eq. 5.6), not only on average
    assert (w.optimal.values[:, None] <= w[["lsh+frame", "antisparse", "qolsh"]].values + 1e-12).all()


def test_one_frame_has_no_spread():
    import dpmf_lib.experiments.balu_table5_1 as e

    p = load_params("balu_table5_1", "smoke", {"n_vectors": 200, "n_antisparse": 200, "n_common": 200,
                                                "n_timing": 100, "n_timing_lp": 3, "timing_repeats": 1,
                                                "n_frames": 1, "n_spread": 100, "methods": ["lsh", "optimal"]})
    df = e.run(p)
    assert df.mse_frames_mean.notna().all() and df.mse_frames_sd.isna().all()
    assert isinstance(e.frames_table(df), pd.DataFrame) and len(e.frames_table(df)) == 2
