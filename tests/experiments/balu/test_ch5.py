"""Chapter-5 experiments (balu_table5_1, balu_fig5_1, balu_fig5_2) at tiny sizes, and their helpers; Table 5.1's paired
frames (#15 F5)."""

import numpy as np
import pandas as pd
import pytest

from dpmf_lib import lsh
from dpmf_lib.errors import ParameterError
from dpmf_lib.params import load_params


def test_table5_1_smoke_has_every_method_and_paper_values():
    import dpmf_lib.experiments.balu.balu_table5_1 as e

    p = load_params("balu_table5_1", "smoke", {"n_vectors": 1500, "n_antisparse": 30, "n_common": 30,
                                                "n_timing": 500, "n_frames": 2, "n_spread": 500})
    df = e.run(p)
    assert df.key.tolist() == ["lsh", "lsh+frame", "antisparse", "optimal", "qolsh"]
    assert (df.dataset == "synthetic-sphere-d8").all()
    mse = df.set_index("key").mse
    assert mse["optimal"] <= mse[["lsh+frame", "qolsh", "antisparse", "lsh"]].min()  # eq. 5.6 is optimal
    assert mse["qolsh"] < mse["lsh+frame"]
    assert (df.entropy_bits <= np.log2(df.n_encoded) + 1e-9).all() and (df.entropy_bits <= 16).all()
    assert {"mse_paper", "entropy_paper", "us_per_vector_paper"} <= set(df.columns)
    claims = {m["claim"] for m in df.attrs["measurements"]}
    assert "balu-5.1-mse-qolsh" in claims and "balu-5.1-qolsh-encoding-us" in claims
    assert "balu-5.1-entropy-qolsh" not in claims  # only at n >= 1M
    assert set(e.MSE_CLAIMS.values()) <= claims  # every MSE claim, frame-averaged (Table 5.1 section below)
    assert df.mse_frames_mean.notna().all() and (df.n_frames == 2).all()
    e.plot(df, p)


def test_table5_1_every_entropy_is_a_claim_at_the_thesis_sample_size(monkeypatch):
    """Each encoder's entropy is measured for its own claim (Table 5.1's five entropies), and only at n >= the
    threshold (lowered here so a tiny run crosses it)."""
    import dpmf_lib.experiments.balu.balu_table5_1 as e
    from dpmf_lib.claims import load_claims

    ids = {c.id for c in load_claims()}
    assert set(e.ENTROPY_CLAIMS.values()) <= ids and len(e.ENTROPY_CLAIMS) == 5
    monkeypatch.setattr(e, "ENTROPY_MIN_N", 1000)
    p = load_params("balu_table5_1", "smoke", {"n_vectors": 1500, "n_antisparse": 800, "n_common": 30,
                                                "n_timing": 500, "n_frames": 2, "n_spread": 500})
    df = e.run(p)
    got = {m["claim"]: m["value"] for m in df.attrs["measurements"] if "entropy" in m["claim"]}
    ent = df.set_index("key").entropy_bits
    # anti-sparse encodes 800 < 1000 vectors: no entropy claim; every other encoder's value is its row's entropy
    assert got == {e.ENTROPY_CLAIMS[k]: ent[k] for k in ("lsh", "lsh+frame", "optimal", "qolsh")}


def test_fig5_1_pairs_have_the_requested_cosine():
    from dpmf_lib.experiments.balu.balu_fig5_1 import make_pairs

    X, Y, c = make_pairs(500, 32, -1.0, 1.0, 0)
    np.testing.assert_allclose((X.astype(np.float64) * Y).sum(1), c, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(Y, axis=1), 1, atol=1e-6)


def test_fig5_1_smoke():
    import dpmf_lib.experiments.balu.balu_fig5_1 as e

    p = load_params("balu_fig5_1", "smoke", {"n_pairs": 1500, "d": 32, "L": 64})
    df = e.run(p)
    assert set(df.key) == {"lsh", "lsh+frame", "qolsh"} and (df.q05 <= df.q95).all()
    s = e.summary(df)
    assert s.width["qolsh"] < s.width["lsh"]
    assert {m["claim"] for m in df.attrs["measurements"]} == {e.BIAS_CLAIM, e.NOISE_CLAIM}
    e.plot(df, p)
    with pytest.raises(ParameterError):
        e.run({**p, "cos_min": 0.5, "cos_max": 0.1})


def test_fig5_2_smoke_and_helpers():
    import dpmf_lib.experiments.balu.balu_fig5_2 as e

    p = load_params("balu_fig5_2", "smoke", {"synth_n_base": 400, "synth_n_queries": 20, "antisparse_max_base": 400,
                                             "digits_n_queries": 20})
    df = e.run(p)
    assert set(df.panel) == {"synthetic", "sklearn digits"}
    assert set(df[df.panel == "synthetic"].key) == set(lsh.METHODS)
    for _, g in df.groupby(["panel", "key"]):
        r = g.sort_values("R").recall.to_numpy()
        assert (np.diff(r) >= 0).all() and 0 <= r[0] and r[-1] <= 1  # recall@R is non-decreasing in R
        assert len(r) == g.shortlist.iloc[0]
    assert e.shortlist_size(p, 1_000_000) == 1000 and e.shortlist_size(p, 1682) == 50
    e.plot(df, p)
    with pytest.raises(ParameterError, match="unknown dataset"):
        e.run({**p, "datasets": ["sift"]})


def test_als_factors_fit_the_ratings():
    from dpmf_lib.data.ratings import DataSource, Ratings
    from dpmf_lib.experiments.balu.balu_fig5_2 import als_factors

    rng = np.random.default_rng(0)
    U0, V0 = rng.standard_normal((60, 3)), rng.standard_normal((40, 3))
    u, i = np.divmod(np.arange(60 * 40), 40)
    keep = rng.random(len(u)) < 0.6
    vals = (U0 @ V0.T)[u, i] + 3.0
    r = Ratings(u[keep].astype(np.int32), i[keep].astype(np.int32), vals[keep].astype(np.float32), 60, 40,
                (0.0, 6.0), DataSource("toy", False))
    U, V = als_factors(r, 3, 0.01, 15, 0)
    pred = (U @ V.T)[r.users, r.items] + r.values.mean()
    assert np.sqrt(np.mean((pred - r.values) ** 2)) < 0.05 * r.values.std()


def test_fig5_2_reads_sift1m_when_present(tmp_path, monkeypatch):
    import dpmf_lib.experiments.balu.balu_fig5_2 as e
    from dpmf_lib.data.loaders import write_vecs

    root = tmp_path / "data" / "sift1m"
    root.mkdir(parents=True)
    rng = np.random.default_rng(0)
    write_vecs(root / "sift_base.fvecs", rng.random((600, 16), dtype=np.float32))
    write_vecs(root / "sift_query.fvecs", rng.random((30, 16), dtype=np.float32))
    monkeypatch.setenv("DPMF_DATA_DIR", str(tmp_path / "data"))
    assert e.sift1m_path() == root
    p = load_params("balu_fig5_2", "smoke", {"datasets": ["sift1m"], "sift_n_base": 500, "sift_n_queries": 20})
    df = e.run(p)
    assert set(df.panel) == {"SIFT1M"} and df.n_base.iloc[0] == 500 and df.L.iloc[0] == 32
    assert [m["claim"] for m in df.attrs["measurements"]] == [e.SIFT_CLAIM]
    monkeypatch.setenv("DPMF_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.delenv("DPMF_DATA_MIRROR", raising=False)
    assert e.sift1m_path() is None
    df = e.run({**p, "datasets": ["sift1m", "digits"]})
    assert set(df.panel) == {"sklearn digits"} and "sift1m" in df.attrs["skipped"][0]


def test_fig5_2_paired_r1_hand_case():
    """The paired test over queries (#15 item 6): 10 queries, qoLSH alone right on 6, the other alone right on 1,
    both right on 2: diff = 0.5, exact McNemar p = P(Binomial(7, 1/2) ∈ {0, 1, 6, 7}) = 16/128, one-sided p = 8/128."""
    import dpmf_lib.experiments.balu.balu_fig5_2 as e

    a = np.array([1, 1, 1, 1, 1, 1, 1, 1, 0, 0], bool)
    b = np.array([1, 1, 0, 0, 0, 0, 0, 0, 1, 0], bool)
    pt = e.paired_r1(a, b)
    assert (pt["only_a"], pt["only_b"], pt["n"]) == (6, 1, 10)
    assert pt["diff"] == pytest.approx(0.5)
    assert pt["p"] == pytest.approx(16 / 128) and pt["p_greater"] == pytest.approx(8 / 128)
    d = a.astype(float) - b.astype(float)
    assert pt["se"] == pytest.approx(d.std(ddof=1) / np.sqrt(10))
    assert e.paired_r1(a, a)["p"] == 1.0
    with pytest.raises(ParameterError):
        e.paired_r1(a, b[:5])


# ---- Table 5.1 (#15 F5): every method's MSE is a mean ± sd over the same paired frames, and the claims read it ----

N_FRAMES = 4


@pytest.fixture(scope="module")
def run():
    import dpmf_lib.experiments.balu.balu_table5_1 as e

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
    import dpmf_lib.experiments.balu.balu_table5_1 as e

    p = load_params("balu_table5_1", "smoke", {"n_vectors": 200, "n_antisparse": 200, "n_common": 200,
                                                "n_timing": 100, "n_timing_lp": 3, "timing_repeats": 1,
                                                "n_frames": 1, "n_spread": 100, "methods": ["lsh", "optimal"]})
    df = e.run(p)
    assert df.mse_frames_mean.notna().all() and df.mse_frames_sd.isna().all()
    assert isinstance(e.frames_table(df), pd.DataFrame) and len(e.frames_table(df)) == 2
