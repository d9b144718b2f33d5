"""NotebookRun: where a run writes, claims over seeds, timing columns out of the CSV."""

import json

import pandas as pd
import pytest

from dpmf_lib.claims import Measurement
from dpmf_lib.outputs import RUN_DIR_VAR, RUN_NOTEBOOK_VAR, NotebookRun, attach, timing_columns

CLAIM = "balu-5.1-mse-lsh"  # min_profile ci, not deterministic, real synthetic data: 3 seeds at ci


def toy_run(params):
    df = pd.DataFrame({"dataset": ["synthetic-sphere-d8"], "mse": [0.4 + 0.001 * params["seed"]],
                       "seconds": [0.123 * (params["seed"] + 1)]})
    return attach(df, measurements=[Measurement(CLAIM, 0.43 + 0.001 * params["seed"], "synthetic-sphere-d8", True,
                                                setting="frames")])


def test_hand_runs_go_to_scratch_and_the_runner_to_its_staging_dir(figures_tmp, tmp_path, monkeypatch):
    nb = NotebookRun("balu_table5_1", "smoke")
    assert not nb.canonical and nb.out_dir.parent == figures_tmp / "_runs"
    assert nb.out_dir.name.startswith("balu_table5_1-smoke-")
    assert NotebookRun("balu_table5_1", "smoke", {"seed": 1}).out_dir != nb.out_dir
    monkeypatch.setenv(RUN_DIR_VAR, str(tmp_path / "staging"))
    monkeypatch.setenv(RUN_NOTEBOOK_VAR, "balu_table5_1")
    assert NotebookRun("balu_table5_1", "smoke").canonical
    assert not NotebookRun("balu_table5_1", "smoke", {"seed": 1}).canonical  # overrides are never canonical
    monkeypatch.setenv(RUN_NOTEBOOK_VAR, "liu_fig1")
    assert not NotebookRun("balu_table5_1", "smoke").canonical


def test_replicate_measures_claims_over_seeds_and_keeps_the_figure_of_seed(figures_tmp):
    nb = NotebookRun("balu_table5_1", "ci")
    df = toy_run(nb.params)
    table = nb.replicate(toy_run, df)
    assert nb.replicate_seeds == [0, 1, 2]
    row = table.iloc[0]
    assert row["seeds"] == 3 and row["claim"] == CLAIM and abs(row["ours"] - 0.431) < 1e-12
    assert row["verdict"] == "reproduced"  # [0.43, 0.432] ± t-interval lies within 0.434 ± 0.04
    out = nb.save(df, None)
    m = json.loads((out / "measurements.json").read_text())[0]
    assert m["values"] == pytest.approx([0.43, 0.431, 0.432]) and m["profile"] == "ci" and m["seeds"] == [0, 1, 2]
    # the CSV is seed 0's, without the wall-clock column; the timings file keeps it
    assert (out / "balu_table5_1.csv").read_text() == "dataset,mse\nsynthetic-sphere-d8,0.4\n"
    assert "seconds" in (out / "balu_table5_1_timings.csv").read_text()
    assert json.loads((out / "provenance.json").read_text())["timing_columns"] == ["seconds"]
    assert not list(out.parent.glob(".*tmp*"))  # written to a temporary directory, renamed into place


def test_no_replicates_at_smoke_or_for_deterministic_and_unjudged_claims(figures_tmp):
    nb = NotebookRun("balu_table5_1", "smoke")
    nb.replicate(toy_run, toy_run(nb.params))
    assert nb.replicate_seeds == [0]
    nb = NotebookRun("liu_table2", "ci")  # cachegrind rates: hardware-dependent, shown not judged
    m = Measurement("liu-6.5-csgd-l1-miss-d16", 2.0, "netflix", True).as_dict()
    assert nb.seeds_needed([m]) == 1
    standin = Measurement(CLAIM, 0.43, "synthetic-sphere-d8 [synthetic stand-in]", False).as_dict()
    assert NotebookRun("balu_table5_1", "ci").seeds_needed([standin]) == 1  # a stand-in is never judged


def test_a_measurement_of_an_unknown_claim_is_refused(figures_tmp):
    nb = NotebookRun("balu_table5_1", "smoke")
    df = attach(pd.DataFrame({"dataset": ["x"]}), measurements=[Measurement("no-such-claim", 1.0, "x", True)])
    with pytest.raises(ValueError, match="no-such-claim"):
        nb.save(df, None)


def test_timing_columns_by_name():
    df = pd.DataFrame(columns=["solver", "seconds", "wall", "updates_per_s", "read_GBps", "paper_read_GBps",
                               "us_per_vector", "us_per_vector_paper", "us_per_vector_facets", "test_rmse"])
    assert timing_columns(df) == ["seconds", "wall", "updates_per_s", "read_GBps", "us_per_vector",
                                  "us_per_vector_facets"]


def test_a_measurement_missing_in_one_seed_is_inconclusive_not_a_crash(figures_tmp):
    """merge_replicates fills NaN where a replicate lacks a measurement; the claims table must show it, not fail."""
    nb = NotebookRun("balu_table5_1", "ci")

    def flaky(params):
        df = toy_run(params)
        if params["seed"] == 1:
            df.attrs["measurements"] = []
        return df

    table = nb.replicate(flaky, flaky(nb.params))
    row = table.iloc[0]
    assert row["verdict"] == "inconclusive" and "finite" in row["why"] and row["95% interval"] is None


def test_out_dir_cannot_be_the_canonical_directory(figures_tmp):
    with pytest.raises(ValueError, match="only the runner"):
        NotebookRun("balu_table5_1", "smoke", out_dir=figures_tmp / "balu_table5_1")


# -- parameters by name (papermill -p), the tidy summary and the result table ------------------------------------------

def test_named_parameters_that_are_not_none_become_overrides(figures_tmp):
    from dpmf_lib.notebook_params import parameter_names

    names = parameter_names("balu_table5_1")
    ns = {k: None for k in names} | {"seed": 3, "profile": "smoke", "overrides": {}}
    nb = NotebookRun("balu_table5_1", "smoke", {}, namespace=ns)
    assert nb.overrides == {"seed": 3} and nb.params["seed"] == 3
    assert not nb.canonical and nb.out_dir.parent == figures_tmp / "_runs"  # an override run: scratch, never canonical
    plain = NotebookRun("balu_table5_1", "smoke", {}, namespace={k: None for k in names})
    assert plain.overrides == {} and plain.params["seed"] == 0


def test_a_name_given_by_name_and_in_overrides_must_agree(figures_tmp):
    from dpmf_lib.errors import ParameterError

    with pytest.raises(ParameterError, match="'seed' is given twice"):
        NotebookRun("balu_table5_1", "smoke", {"seed": 1}, namespace={"seed": 2})
    assert NotebookRun("balu_table5_1", "smoke", {"seed": 2}, namespace={"seed": 2}).params["seed"] == 2


def test_an_unknown_name_papermill_injected_is_an_error_naming_it_and_the_fix(figures_tmp):
    """papermill only warns "Passed unknown parameter" and runs on; the notebook refuses it. The injected cell is
    found in IPython's input history (`In`), so a variable the notebook defines itself is never mistaken for one."""
    from dpmf_lib.errors import ParameterError
    from dpmf_lib.notebook_params import injected_names

    injected = "# Parameters\nprofile = \"smoke\"\nseedz = 1\n"
    ns = {"In": ["", "# Parameters (papermill injects ...)\nprofile = 'ci'\nseed = None\n", injected],
          "seedz": 1, "seed": None, "my_own_variable": 5}
    assert injected_names(ns) == {"profile", "seedz"}
    with pytest.raises(ParameterError, match=r"unknown parameter 'seedz' \(did you mean 'seed'\?\).*--help-notebook"):
        NotebookRun("balu_table5_1", "smoke", {}, namespace=ns)
    ns["In"][2] = "# Parameters\nprofile = \"smoke\"\nseed = 1\n"
    assert NotebookRun("balu_table5_1", "smoke", {}, namespace={**ns, "seed": 1}).params["seed"] == 1
    assert injected_names({"In": ["", "x = 1"]}) == set() and injected_names({}) == set()


def test_summary_shows_short_tables_and_one_row_per_column_of_long_ones(figures_tmp):
    from dpmf_lib.outputs import summarize

    short = pd.DataFrame({"dataset": ["a", "b"], "rmse": [0.912345678, 1.0], "history": [[1, 2], [3]]})
    s = summarize(short, csv="x.csv")
    assert list(s.table.columns) == ["dataset", "rmse"] and s.table["rmse"].tolist() == ["0.9123", "1"]
    assert "history" in s.foot and "x.csv" in s.head and "<table" in s._repr_html_()
    long = pd.DataFrame({"eps": [0.1 * k for k in range(40)], "method": ["sgd", "sgld"] * 20, "rmse": range(40)})
    s = summarize(long)
    assert s.table["column"].tolist() == ["eps", "method", "rmse"] and len(s.table) == 3
    assert s.table.set_index("column").loc["method", "values"] == "sgd, sgld"
    assert s.table.set_index("column").loc["rmse", "values"] == "0 … 39"
    assert s.head.startswith("40 rows × 3 columns") and "sgd, sgld" in repr(s)


def test_results_table_gives_quote_paper_value_ours_with_interval_and_verdict(figures_tmp):
    nb = NotebookRun("balu_table5_1", "ci")
    with pytest.raises(RuntimeError, match="replicate"):
        nb.results()
    nb.replicate(toy_run, toy_run(nb.params))
    shown = nb.results()
    row = shown.table.iloc[0]
    assert list(shown.table.columns) == ["claim", "quote", "data", "paper", "ours ± 95%", "rule", "verdict"]
    assert row["claim"] == f"{CLAIM} [frames]" and row["verdict"] == "reproduced" and row["quote"]
    assert row["ours ± 95%"].startswith("0.431 ± ") and row["ours ± 95%"].endswith("(3 seeds)")
    assert "seeds [0, 1, 2]" in shown.head
    assert "Claims of this notebook not measured in this run" in shown.foot  # balu_table5_1 has more claims
    assert "PosixPath" not in repr(shown)


def test_a_broken_judging_rule_changes_nothing_a_run_saves_and_does_not_fail_it(figures_tmp, monkeypatch):
    """dpmf_lib.verdicts is not a run input (dependencies.NOT_RUN_INPUTS): what a run saves must be the same whatever
    the rules say, and a rule that raises must not fail the run (it shows as 'could not be judged')."""
    from dpmf_lib import verdicts

    def saved():
        nb = NotebookRun("balu_table5_1", "ci")
        df = toy_run(nb.params)
        table = nb.replicate(toy_run, df)
        shown = nb.results()
        out = nb.save(df, None)
        files = {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.name != "provenance.json"}
        prov = json.loads((out / "provenance.json").read_text())
        for volatile in ("wall_time_s", "finished_utc", "git"):
            prov.pop(volatile)
        return files, prov, table, shown

    files, prov, table, _ = saved()

    def broken(*args, **kwargs):
        raise RuntimeError("a rule with a bug")

    monkeypatch.setattr(verdicts, "judge_measurement", broken)
    files2, prov2, table2, shown2 = saved()
    assert files2 == files and prov2 == prov
    assert table.iloc[0]["verdict"] == "reproduced" and table2.iloc[0]["verdict"] == "inconclusive"
    assert "could not be judged: RuntimeError" in table2.iloc[0]["why"]
    monkeypatch.setattr(verdicts, "rule", broken)  # the rule text is judging code too
    files3, prov3, table3, _ = saved()
    assert files3 == files and prov3 == prov and table3.iloc[0]["verdict"] == "inconclusive"
