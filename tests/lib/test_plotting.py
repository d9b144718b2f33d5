"""dpmf_lib.plotting: the shared figure style (titles name the data and flag stand-ins)."""


def test_titles_name_the_data_and_flag_stand_ins():
    from dpmf_lib.plotting import standin_title

    t = standin_title("Fig", ["ml-100k", "netflix [synthetic stand-in]"])
    assert "data: ml-100k, netflix [synthetic stand-in]" in t and "not the real data" in t
    assert standin_title("Fig", ["ml-100k"]) == "Fig\ndata: ml-100k"


def _committed(name: str):
    import pandas as pd

    from dpmf_lib.snapshot import table_path

    path = table_path(name)
    if path is None:
        import pytest

        pytest.skip(f"no committed table of {name}")
    return pd.read_csv(path)


def _legend_is_below_the_panels(fig) -> None:
    fig.canvas.draw()
    assert all(ax.get_legend() is None for ax in fig.axes), "a legend sits over the data"
    assert len(fig.legends) == 1
    box = fig.legends[0].get_window_extent()
    assert box.y1 <= min(ax.get_window_extent().y0 for ax in fig.axes) + 1


def test_liu_fig7_keeps_diagnostics_out_of_the_result_panels():
    """Liu Fig. 7 from its committed table: one legend below the panels, split-R̂ in its own row of panels."""
    import matplotlib.pyplot as plt

    from dpmf_lib.experiments.liu import liu_fig7

    fig = liu_fig7.plot(_committed("liu_fig7"), {})
    try:
        _legend_is_below_the_panels(fig)
        results = [ax for ax in fig.axes if ax.get_ylabel() == "test RMSE"]
        diagnostics = [ax for ax in fig.axes if ax.get_ylabel() == "split-R̂"]
        assert results and len(diagnostics) == len(results)
        for ax in results:  # no rings or crosses drawn over the results
            assert not [ln for ln in ax.get_lines() if ln.get_linestyle() == "None"]
    finally:
        plt.close(fig)


def test_pnbm_fig1_zooms_on_the_papers_comparison():
    """PNBM Fig. 1: the paper's comparison on an axis that shows its 0.005–0.015 differences; the clipped series (up
    to RMSE 1.9) in a panel of its own."""
    import matplotlib.pyplot as plt

    from dpmf_lib.experiments.pnbm import pnbm_fig1

    df = _committed("pnbm_fig1")
    fig = pnbm_fig1.plot(df, {})
    try:
        _legend_is_below_the_panels(fig)
        main = fig.axes[0]
        lo, hi = main.get_ylim()
        assert hi - lo < 0.2, (lo, hi)
        labels = {ln.get_label() for ln in main.get_lines()} | {c.get_label() for c in main.containers}
        assert not any("clipped" in lab for lab in labels)
    finally:
        plt.close(fig)


def test_references_label_the_same_in_every_panel_and_colours_are_colour_blind_safe():
    import matplotlib.pyplot as plt

    from dpmf_lib.plotting import OKABE_ITO, ROLES, figure, legend_below, references, series

    assert {r["color"] for r in ROLES.values()} <= set(OKABE_ITO.values())
    assert len({(r["color"], r["marker"]) for r in ROLES.values()}) == len(ROLES)
    fig, axes = figure(ncols=2)
    try:
        for ax, v in zip(axes[0], (0.9, 0.8)):
            series(ax, [1, 2], [1.0, 1.1], "paper", "ours")
            ax.set_ylim(0.7, 1.2)
            references(ax, [("SGD", v)])
        leg = legend_below(fig, axes)
        assert [t.get_text() for t in leg.get_texts()] == ["ours", "SGD"]
    finally:
        plt.close(fig)
