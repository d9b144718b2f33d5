"""Hua et al. (2015) on MovieLens: hua_fig4's and extra_hua_message_sizes' run() at the smoke profile (the
Netflix-subset restriction is in tests/lib/objpert/test_data.py)."""

import numpy as np

from dpmf_lib.params import load_params


def test_movielens_notebooks_run_at_smoke():
    import dpmf_lib.experiments.extra.extra_hua_message_sizes as msg
    import dpmf_lib.experiments.hua.hua_common as hc
    import dpmf_lib.experiments.hua.hua_fig4 as fig4

    p = load_params("hua_fig4", "smoke")
    df = fig4.run(p)
    assert (df.dataset == "ml-100k").all()
    # panel (c): the labelled W-scaled variant (not covered by Theorem 1) when the params ask for it, never in (a)/(b)
    assert set(df.panel) == ({"a", "b", "c"} if p["w_scaled_variant"] else {"a", "b"})
    assert set(df[df.panel == "c"].noise) <= {hc.W_LABEL, "none"} and hc.W_LABEL not in set(df[df.panel != "c"].noise)
    assert np.all(np.diff(df[df.curve == df.curve.iloc[0]].cdf.to_numpy()) >= 0)  # a CDF
    fig4.plot(df, p)
    p = load_params("extra_hua_message_sizes", "smoke")
    t = msg.run(p).set_index("quantity")
    assert t.loc["all_exact", "measured_P2^64"] == 1.0 and t.loc["all_exact", "measured_P2^32"] == 1.0
    assert t.loc["user_up_20_items", "measured_P2^64"] == 20 * 50 * 8
    assert t.loc["user_up_20_items", "measured_P2^32"] == 20 * 50 * 4
