"""The runner (dpmf_lib.reproduce): run hashes and staleness, failed and killed runs, --only / --set, override runs,
the kernels it starts. The report it writes is checked in test_report.py."""

import dataclasses
import json

import nbformat
import pytest

from dpmf_lib.runner import cli, execution, hashing, staleness
from dpmf_lib.dependencies import dataset_state, module_closure
from dpmf_lib.paths import notebooks_dir
from dpmf_lib.registry import load_registry


def tiny_notebook(tmp_path, monkeypatch, name: str, *cells: str):
    """notebooks/<name>.ipynb with a `parameters` cell and ``cells``, in a directory the runner is pointed at."""
    nbdir = tmp_path / "nbs"
    nbdir.mkdir(exist_ok=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("profile = 'ci'"),
                                         *(nbformat.v4.new_code_cell(c) for c in cells)])
    nb.cells[0].metadata["tags"] = ["parameters"]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, nbdir / f"{name}.ipynb")
    monkeypatch.setattr(execution, "notebooks_dir", lambda: nbdir)
    return nbdir


def test_failed_notebook_is_reported_with_its_cell(figures_tmp, tmp_path, monkeypatch):
    tiny_notebook(tmp_path, monkeypatch, "broken", "x = 1", "raise ValueError('boom in cell three')")
    rec = execution.execute("broken", "smoke", "h")
    assert rec["status"] == "failed"
    assert "ValueError" in rec["error"] and "boom in cell three" in rec["error"] and "cell" in rec["error"]
    saved = json.loads((figures_tmp / "broken" / "run.json").read_text())
    assert saved["status"] == "failed"


def test_up_to_date_needs_matching_hash_and_outputs(figures_tmp):
    _, entries = load_registry()
    e = next(x for x in entries if x.name == "liu_fig1")
    digest = hashing.run_hash(e, "smoke")
    assert digest != hashing.run_hash(e, "ci")
    out = figures_tmp / e.name
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"hash": digest, "status": "ok"}))
    assert not staleness.up_to_date(e, digest)  # outputs missing
    (out / "provenance.json").write_text("{}")
    (out / f"{e.name}.csv").write_text("dataset\n")
    assert staleness.up_to_date(e, digest)
    assert not staleness.up_to_date(e, "other")


def test_run_hash_covers_the_notebooks_own_code_not_all_code():
    from dpmf_lib.paths import REPO_ROOT

    def rel(module):
        return {p.relative_to(REPO_ROOT).as_posix() for p in module_closure(module)}

    files = rel(hashing.experiment_module(_entry("liu_fig7")))
    assert {"dpmf_lib/experiments/liu/liu_fig7.py", "dpmf_lib/privacy/posterior_sampling.py", "dpmf_lib/data/datasets.py",
            "dpmf_lib/__init__.py", "dpmf_lib/experiments/__init__.py", "data_fetch/registry.py"} <= files
    assert not any("/attacks/" in f or "/lsh/" in f for f in files)  # another paper's code is not a dependency
    assert "dpmf_lib/verdicts.py" not in files and "dpmf_lib/claims.py" in files  # judging is not a run input


def test_run_hash_counts_the_claim_fields_that_decide_the_seeds_not_those_that_judge(tmp_path, monkeypatch):
    import yaml

    from dpmf_lib import claims as claims_mod

    e = _entry("balu_table3_1")
    doc = yaml.safe_load(claims_mod.claims_path().read_text(encoding="utf-8"))
    row = next(r for r in doc["claims"] if r["notebook"] == e.name)
    path = tmp_path / "claims.yaml"
    monkeypatch.setattr(claims_mod, "claims_path", lambda: path)

    def digest_with(**change):
        row_changed = {**row, **change}
        rows = [row_changed if r is row else r for r in doc["claims"]]
        path.write_text(yaml.safe_dump({**doc, "claims": rows}), encoding="utf-8")
        return hashing.run_hash(e, "paper")

    base = digest_with()
    assert digest_with(reference=(row["reference"] or 0) + 1.0, quote="another reading") == base
    assert digest_with(min_seeds=9) != base
    assert digest_with(min_profile="ci" if row["min_profile"] == "paper" else "paper") != base


def test_standin_result_goes_stale_when_the_real_data_appears(figures_tmp):
    _, entries = load_registry()
    e = next(x for x in entries if x.name == "liu_fig1")
    digest = hashing.run_hash(e, "smoke")
    out = figures_tmp / e.name
    out.mkdir()
    (out / "provenance.json").write_text("{}")
    (out / f"{e.name}.csv").write_text("dataset\n")
    # the run read ml-100k as absent (a stand-in); the mirror now holds the real data
    (out / "run.json").write_text(json.dumps({"hash": digest, "status": "ok", "data_state": {"ml-100k": "absent"}}))
    why = staleness.staleness(e, digest)
    assert why and "data changed" in why and "ml-100k" in why
    now = dataset_state("ml-100k")
    (out / "run.json").write_text(json.dumps({"hash": digest, "status": "ok", "data_state": {"ml-100k": now}}))
    assert staleness.staleness(e, digest) is None


def test_a_failed_run_replaces_the_old_outputs(figures_tmp, tmp_path, monkeypatch):
    tiny_notebook(tmp_path, monkeypatch, "was_good", "raise RuntimeError('now broken')")
    old = figures_tmp / "was_good"
    old.mkdir()
    (old / "measurements.json").write_text("[]")
    (old / "was_good.csv").write_text("dataset\n")
    rec = execution.execute("was_good", "smoke", "h")
    assert rec["status"] == "failed"
    # the old outputs are gone; kernel.log stays when the kernel printed anything (it did once under the load of a
    # parallel `make test`), so it is allowed but not required
    assert {p.name for p in old.iterdir()} - {"kernel.log"} == {"run.json", "was_good.ipynb"}
    assert not list(figures_tmp.glob(".staging-*")) and not list(figures_tmp.glob(".old-*"))


def test_recovery_after_a_kill_between_the_two_renames(figures_tmp):
    (figures_tmp / ".old-liu_fig1-123").mkdir()
    (figures_tmp / ".old-liu_fig1-123" / "run.json").write_text("{}")
    (figures_tmp / ".staging-liu_fig1-456").mkdir()
    done = execution.recover_interrupted()
    assert (figures_tmp / "liu_fig1" / "run.json").exists() and len(done) == 2
    assert not list(figures_tmp.glob(".*"))


@pytest.mark.slow
def test_hand_run_with_overrides_cannot_replace_canonical_outputs(figures_tmp, tmp_path):
    """The README's papermill-by-hand call writes to figures/_runs/, never figures/<name>/; the same seed gives a
    byte-identical CSV in both places."""
    import papermill as pm

    rec = execution.execute("liu_fig1", "smoke", hashing.run_hash(_entry("liu_fig1"), "smoke"))
    assert rec["status"] == "ok", rec["error"]
    canon = figures_tmp / "liu_fig1"
    # which CPU the numbers came from (a stand-in's fit can differ an ulp with numpy's AVX-512 paths)
    assert json.loads((canon / "run.json").read_text())["cpu"] == execution.cpu_record()
    before = {p.name: p.read_bytes() for p in canon.iterdir()}
    for overrides in ({"seed": 1}, {}):
        pm.execute_notebook(str(notebooks_dir() / "liu_fig1.ipynb"), str(tmp_path / "out.ipynb"),
                            parameters={"profile": "smoke", "overrides": overrides}, cwd=str(notebooks_dir()),
                            kernel_name="python3", progress_bar=False)
    assert {p.name: p.read_bytes() for p in canon.iterdir()} == before
    assert staleness.up_to_date(_entry("liu_fig1"), hashing.run_hash(_entry("liu_fig1"), "smoke"))
    runs = sorted((figures_tmp / "_runs").iterdir())
    assert len(runs) == 2 and all(r.name.startswith("liu_fig1-smoke-") for r in runs)
    same_seed = [r for r in runs if json.loads((r / "provenance.json").read_text())["params"]["seed"] == 0]
    assert (same_seed[0] / "liu_fig1.csv").read_bytes() == before["liu_fig1.csv"]
    assert not json.loads((same_seed[0] / "provenance.json").read_text())["canonical"]


def _entry(name):
    return next(x for x in load_registry()[1] if x.name == name)


def test_unknown_only_pattern_fails_cleanly(capsys):
    assert cli.main(["--only", "nosuch_*"]) == 2
    assert "no implemented notebook matches" in capsys.readouterr().err


def test_space_separated_only_names_get_the_comma_form_in_the_error(capsys):
    # `make paper-snapshot ONLY='a b'` reads as one pattern "a b", which matches nothing
    assert cli.main(["--only", "pnbm_fig1 liu_fig4"]) == 2
    assert "separate several names or patterns with commas, not spaces: --only 'pnbm_fig1,liu_fig4'" in \
        capsys.readouterr().err


def test_kernels_get_the_callers_thread_limits_not_lokys(figures_tmp, tmp_path, monkeypatch):
    """loky caps NUMBA_NUM_THREADS & co. in its workers; the runner hands the kernel the caller's values."""
    code = ("import os, json, pathlib\n"
            "pathlib.Path(os.environ['DPMF_FIGURES_DIR'], 'env.json').write_text("
            "json.dumps({v: os.environ.get(v) for v in ('NUMBA_NUM_THREADS', 'OMP_NUM_THREADS')}))")
    tiny_notebook(tmp_path, monkeypatch, "envcheck", code)
    monkeypatch.setenv("NUMBA_NUM_THREADS", "1")  # as loky would have set it in a worker
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    execution.execute("envcheck", "smoke", "h", {"NUMBA_NUM_THREADS": None, "OMP_NUM_THREADS": "3"})
    seen = json.loads((figures_tmp / "env.json").read_text())
    assert seen == {"NUMBA_NUM_THREADS": None, "OMP_NUM_THREADS": "3"}


def test_kernels_run_over_ipc_without_the_tcp_warning(figures_tmp, tmp_path, monkeypatch, capfd):
    nbdir = tiny_notebook(tmp_path, monkeypatch, "quiet", "x = 1 + 1")
    rec = execution.execute("quiet", "smoke", "h")
    out = capfd.readouterr()
    assert rec["status"] == "failed"  # it never calls NotebookRun.save(); what matters here is the console
    assert "without encryption" not in out.err + out.out
    assert not list(nbdir.glob("*ipc*"))  # no socket files left beside the notebooks


def test_two_kernels_at_once_do_not_share_ipc_sockets():
    """--jobs 2 runs two kernels at once: each needs its own socket prefix (a shared one crossed their messages)."""
    km = execution._kernel_manager_class()
    a, b = km(kernel_name="python3"), km(kernel_name="python3")
    assert a.transport == b.transport == "ipc" and a.ip != b.ip


def test_recovery_leaves_a_live_runners_directories_alone(figures_tmp):
    import os

    live = figures_tmp / f".staging-liu_fig2-{os.getpid()}"
    live.mkdir()
    (figures_tmp / f".old-liu_fig3-{os.getpid()}").mkdir()
    execution.recover_interrupted()
    assert live.exists() and (figures_tmp / f".old-liu_fig3-{os.getpid()}").exists()
    assert not (figures_tmp / "liu_fig3").exists()  # a live runner's swap is not "restored" under it


# -- --set: one parameter for every selected notebook (or one), as an override run ------------------------------------

def test_set_parses_yaml_values_per_notebook_and_names_an_unknown_key():
    from dpmf_lib.errors import ParameterError

    names = ["liu_fig1", "pnbm_fig1"]
    sets = cli.parse_sets(["seed=1", "liu_fig1.datasets=[ml-100k]", "liu_fig1.standin_scale=0.5"], names)
    assert sets == {"liu_fig1": {"seed": 1, "datasets": ["ml-100k"], "standin_scale": 0.5}, "pnbm_fig1": {"seed": 1}}
    assert cli.parse_sets(["pnbm_fig1.knn_Nk={ml-100k: 10}"], names) == {"pnbm_fig1": {"knn_Nk": {"ml-100k": 10}}}
    assert cli.parse_sets([], names) == {}
    with pytest.raises(ParameterError, match=r"unknown parameter 'sed' for liu_fig1, pnbm_fig1 \(did you mean 'seed'"):
        cli.parse_sets(["sed=1"], names)
    with pytest.raises(ParameterError, match="'tiers' for pnbm_fig1.*--set NAME.KEY=VALUE"):
        cli.parse_sets(["tiers=[1, 2]"], names)  # liu_fig1 has it, pnbm_fig1 does not
    with pytest.raises(ParameterError, match="'hua_fig1' is not among the notebooks selected"):
        cli.parse_sets(["hua_fig1.seed=1"], names, known=names + ["hua_fig1"])
    with pytest.raises(ParameterError, match="KEY=VALUE"):
        cli.parse_sets(["seed"], names)


def test_unknown_set_key_stops_the_runner_before_anything_runs(figures_tmp, capsys):
    assert cli.main(["--profile", "smoke", "--only", "liu_fig1", "--set", "no_such=1"]) == 2
    assert "unknown parameter 'no_such'" in capsys.readouterr().err
    assert not (figures_tmp / "liu_fig1").exists()


def test_a_run_with_set_is_an_override_run_in_figures_runs(figures_tmp, tmp_path, monkeypatch):
    """The runner injects --set values as the notebook's overrides; the run lands where a hand run with the same
    values would (figures/_runs/<name>-<profile>-<hash>/), never in figures/<name>/. A notebook that sets
    overrides of its own is refused as a canonical run."""
    cells = ("from dpmf_lib.outputs import NotebookRun\nimport pandas as pd\n"
             "nb = NotebookRun('balu_table5_1', profile, overrides)\n"
             "nb.save(pd.DataFrame({'dataset': ['x'], 'seed': [nb.params['seed']]}))",)
    nbdir = tiny_notebook(tmp_path, monkeypatch, "balu_table5_1", *cells)
    nb = nbformat.read(nbdir / "balu_table5_1.ipynb", as_version=4)
    nb.cells[0].source = "profile = 'ci'\noverrides = {}"
    nbformat.write(nb, nbdir / "balu_table5_1.ipynb")
    rec = execution.execute("balu_table5_1", "smoke", "h", overrides={"seed": 5})
    assert rec["status"] == "ok", rec["error"]
    out = figures_tmp / "_runs"
    run = next(out.glob("balu_table5_1-smoke-*"))
    assert rec["out_dir"] == str(run) and rec["overrides"] == {"seed": 5}
    prov = json.loads((run / "provenance.json").read_text())
    assert prov["params"]["seed"] == 5 and prov["overrides"] == {"seed": 5} and not prov["canonical"]
    assert (run / "balu_table5_1.ipynb").exists() and json.loads((run / "run.json").read_text())["status"] == "ok"
    assert not (figures_tmp / "balu_table5_1").exists() and not list(out.glob(".staging-*"))
    tiny_notebook(tmp_path, monkeypatch, "balu_table5_1", "overrides = {'seed': 2}", *cells)
    rec = execution.execute("balu_table5_1", "smoke", "h")
    assert rec["status"] == "failed" and "overrides of its own" in rec["error"]


def test_status_lines_go_through_tqdm_write_not_print(figures_tmp, monkeypatch):
    """A finished notebook's line is written with tqdm.write, so it lands above the runner's progress bar instead of
    being glued to it."""
    import tqdm.auto

    written = []
    monkeypatch.setattr(tqdm.auto.tqdm, "write", classmethod(lambda cls, s, *a, **k: written.append(s)))
    monkeypatch.setattr(cli, "_run_all", lambda *a, **k: iter([{"notebook": "liu_fig1", "status": "ok",
                                                                      "runtime_s": 1.0}]))
    monkeypatch.setattr("dpmf_lib.report.write_report", lambda: ("r.md", "r.html"))
    assert cli.main(["--profile", "smoke", "--only", "liu_fig1", "--force"]) == 0
    assert written == ["liu_fig1: ok in 1.0 s"]


def test_a_bad_set_value_stops_the_runner_with_the_parameter_named(capsys, figures_tmp):
    """A spec naming a missing file is an error before any notebook starts (it was a traceback from a worker)."""
    code = cli.main(["--profile", "smoke", "--only", "liu_fig7", "--set",
                           "datasets=[{id: mine, path: /nonexistent.csv, format: csv-header, rating_scale: [1, 5]}]"])
    err = capsys.readouterr().err
    assert code == 2 and "liu_fig7" in err and "field 'path'" in err and "Traceback" not in err
    assert not list(figures_tmp.iterdir())


def test_the_notebooks_markdown_and_comments_are_not_run_inputs_its_code_is(tmp_path):
    from dpmf_lib.dependencies import notebook_code

    e = _entry("balu_table3_1")
    nb = json.loads(e.notebook.read_text(encoding="utf-8"))
    copy = tmp_path / e.notebook.name

    def digest_of(doc):
        copy.write_text(json.dumps(doc), encoding="utf-8")
        return json.dumps(notebook_code(copy))

    base = digest_of(nb)
    md = next(c for c in nb["cells"] if c["cell_type"] == "markdown")
    md["source"] = ["ours > 0.75 + margin 0.1 (a margin edited in claims.yaml)"]
    assert digest_of(nb) == base
    code = next(c for c in nb["cells"] if c["cell_type"] == "code")
    code["source"] = list(code["source"]) + ["\n# an edit"]
    assert digest_of(nb) == base
    code["source"] = list(code["source"][:-1]) + ["\n_an_edit = 1"]
    assert digest_of(nb) != base
    code["source"] = code["source"][:-1]
    assert digest_of(nb) == base
    code.setdefault("metadata", {})["tags"] = ["parameters", "x"]
    assert digest_of(nb) != base


def test_a_changed_seed_rule_of_a_claim_measured_by_another_notebook_makes_the_run_stale(figures_tmp, monkeypatch):
    """balu_table1 measures claims of balu_table3_1: the run hash covers only its own claims, the run record the rest."""
    from dpmf_lib import claims as claims_mod

    e = _entry("balu_table1")
    digest = hashing.run_hash(e, "ci")
    out = figures_tmp / e.name
    out.mkdir()
    (out / "provenance.json").write_text("{}")
    (out / f"{e.name}.csv").write_text("dataset\n")
    (out / "measurements.json").write_text(json.dumps([{"claim": "balu-3.5-ml100k-cavg"}]))
    rules = staleness._seed_rules_of(out / "measurements.json")
    assert list(rules) == ["balu-3.5-ml100k-cavg"]
    (out / "run.json").write_text(json.dumps({"hash": digest, "status": "ok", "claim_seed_rules": rules}))
    assert staleness.staleness(e, digest) is None
    real = claims_mod.load_claims()
    monkeypatch.setattr(claims_mod, "load_claims", lambda path=None: [
        dataclasses.replace(c, min_seeds=9) if c.id == "balu-3.5-ml100k-cavg" else c for c in real])
    why = staleness.staleness(e, digest)
    assert why and "balu-3.5-ml100k-cavg" in why


# -- why the runner runs a notebook; the runs outside figures/<name>/ ------------------------------------------------

def _record_as_run(out, entry, profile, **change):
    """A run record and outputs of ``entry`` at ``profile`` as the runner would write them for the tree as it is,
    with ``change`` applied to the record (a part digest or file digest made to differ)."""
    from dpmf_lib.params import load_params

    out.mkdir(parents=True, exist_ok=True)
    (out / "provenance.json").write_text(json.dumps({"params": load_params(entry.name, profile)}))
    (out / f"{entry.name}.csv").write_text("dataset\n")
    rec = {"notebook": entry.name, "profile": profile, "hash": hashing.run_hash(entry, profile), "status": "ok",
           "hash_parts": hashing.part_digests(hashing.run_hash_parts(entry, profile)),
           "code_files": hashing.code_files(entry)}
    for key, value in change.items():
        rec[key] = value(rec[key]) if callable(value) else value
    if change:
        rec["hash"] = "an older hash"
    (out / "run.json").write_text(json.dumps(rec))
    return rec


def test_the_runner_says_why_it_runs_each_notebook(figures_tmp, monkeypatch, capsys):
    """One line per notebook it runs, before any starts: which part of the run hash changed (and which code files),
    new, forced; nothing for a current one it skips."""
    e = _entry("liu_fig1")
    _record_as_run(figures_tmp / "liu_fig1", e, "smoke",
                   code_files=lambda files: {**files, "dpmf_lib/plotting.py": "0" * 16},
                   hash_parts=lambda parts: {**parts, "code": "0" * 64, "notebook": "0" * 64})
    _record_as_run(figures_tmp / "liu_table1", _entry("liu_table1"), "smoke")  # current
    prov = json.loads((figures_tmp / "liu_fig1" / "provenance.json").read_text())
    prov["params"]["seed"] = 7  # the last run was made with another seed
    (figures_tmp / "liu_fig1" / "provenance.json").write_text(json.dumps(prov))
    rec = json.loads((figures_tmp / "liu_fig1" / "run.json").read_text())
    rec["hash_parts"]["params"] = "0" * 64
    (figures_tmp / "liu_fig1" / "run.json").write_text(json.dumps(rec))
    ran = []
    monkeypatch.setattr(cli, "_run_all", lambda todo, *a, **k: ran.extend(n for n, _ in todo) or iter([]))
    monkeypatch.setattr("dpmf_lib.report.write_report", lambda: ("r.md", "r.html"))
    assert cli.main(["--profile", "smoke", "--only", "liu_fig1,liu_table1,liu_fig2"]) == 0
    out = capsys.readouterr().out
    assert sorted(ran) == ["liu_fig1", "liu_fig2"]
    line = next(x for x in out.splitlines() if x.startswith("liu_fig1: runs — "))
    assert "params changed: seed 7 → 0" in line and "code changed: dpmf_lib/plotting.py" in line
    assert "notebook changed" in line and "claims" not in line
    assert "liu_fig2: runs — new" in out and "liu_table1: runs" not in out
    assert "up to date, skipped: liu_table1" in out
    assert cli.main(["--profile", "smoke", "--only", "liu_table1", "--force"]) == 0
    assert "liu_table1: runs — forced (--force)\n" in capsys.readouterr().out
    assert cli.main(["--profile", "ci", "--only", "liu_table1"]) == 0
    assert "liu_table1: runs — profile changed: smoke → ci" in capsys.readouterr().out


def test_why_names_a_claims_seed_rule_and_an_old_record(figures_tmp):
    e = _entry("liu_fig1")
    _record_as_run(figures_tmp / "liu_fig1", e, "ci", hash_parts=lambda parts: {**parts, "claims": "0" * 64})
    assert cli.reason_to_run(e, "ci", hashing.run_hash(e, "ci")) == "the seed rule of one of its claims changed"
    rec = json.loads((figures_tmp / "liu_fig1" / "run.json").read_text())
    del rec["hash_parts"], rec["code_files"]  # a record written before the runner kept the parts
    (figures_tmp / "liu_fig1" / "run.json").write_text(json.dumps(rec))
    assert "predates per-part digests" in cli.reason_to_run(e, "ci", hashing.run_hash(e, "ci"))
    assert cli.reason_to_run(e, "ci", hashing.run_hash(e, "ci"), overrides={"seed": 1}).startswith("override run")


def test_an_executed_notebook_keeps_its_hash_parts_and_its_figure(figures_tmp, tmp_path, monkeypatch):
    """run.json keeps the digests of the run hash's parts and of every file of the code closure, so that a later
    run can say what changed; the kernel draws inline even when the caller exports MPLBACKEND=Agg (as CI does), so
    the executed notebook carries the figure as an image/png output."""
    monkeypatch.setenv("MPLBACKEND", "Agg")
    cells = ("from dpmf_lib.outputs import NotebookRun\nimport pandas as pd\nimport matplotlib.pyplot as plt\n"
             "nb = NotebookRun('balu_table5_1', profile)",
             "fig, ax = plt.subplots()\nax.plot([0, 1], [1, 0])",
             "nb.save(pd.DataFrame({'dataset': ['x']}), fig)")
    tiny_notebook(tmp_path, monkeypatch, "balu_table5_1", *cells)
    e = _entry("balu_table5_1")
    rec = execution.execute("balu_table5_1", "smoke", hashing.run_hash(e, "smoke"))
    assert rec["status"] == "ok", rec["error"]
    out = figures_tmp / "balu_table5_1"
    saved = json.loads((out / "run.json").read_text())
    assert saved["hash_parts"] == hashing.part_digests(hashing.run_hash_parts(e, "smoke"))
    assert "dpmf_lib/outputs.py" in saved["code_files"] and saved["code_files"] == hashing.code_files(e)
    assert staleness.staleness(e, hashing.run_hash(e, "smoke"), profile="smoke") is None
    executed = nbformat.read(out / "balu_table5_1.ipynb", as_version=4)
    assert any("image/png" in o.get("data", {}) for c in executed.cells if c.cell_type == "code" for o in c.outputs)


def test_runs_lists_hand_set_and_own_data_runs(figures_tmp, monkeypatch, capsys):
    import dpmf_lib.data.user as user

    assert cli.main(["--runs"]) == 0
    assert "no runs in" in capsys.readouterr().out
    runs = figures_tmp / "_runs"
    hand = runs / "liu_fig7-smoke-abc123"
    hand.mkdir(parents=True)
    (hand / "provenance.json").write_text(json.dumps({
        "notebook": "liu_fig7", "profile": "smoke", "overrides": {"datasets": ["mine"], "tau": {"mine": 20}},
        "datasets": [{"dataset": "mine", "real": True}], "finished_utc": "2030-01-01T00:00:00Z"}))
    (hand / "liu_fig7.csv").write_text("dataset\n")
    by_set = runs / "hua_fig1-smoke-def456"
    by_set.mkdir()
    (by_set / "run.json").write_text(json.dumps({"notebook": "hua_fig1", "profile": "smoke", "status": "failed",
                                                 "error": "cell 3: ValueError: boom", "overrides": {"seed": 1}}))
    (runs / ".staging-hua_fig2-1").mkdir()  # a run in progress is not listed
    monkeypatch.setattr(user, "user_ids", lambda: ["mine"])
    assert cli.main(["--runs"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 run(s) in")
    hand_block = out.split("liu_fig7-smoke-abc123", 1)[1].split("hua_fig1", 1)[0]
    assert "liu_fig7 at smoke, by hand, ok, 2030-01-01" in hand_block
    assert 'datasets=["mine"]' in hand_block and "mine (yours)" in hand_block
    assert "hua_fig1 at smoke, runner --set, failed (cell 3: ValueError: boom)" in out and "seed=1" in out
    assert "staging" not in out


def test_list_has_a_header(capsys):
    assert cli.main(["--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["notebook", "paper", "label", "state", "caption"]
    assert lines[1].startswith("liu_fig1 ") and "implemented" in lines[1]
@pytest.mark.parametrize("item,says", [
    ("hua_fig2.eps_values=[0.1, 0]", "parameter 'eps_values': 0 is not a privacy budget"),
    ("hua_fig2.eps_fixed=-1", "parameter 'eps_fixed': -1 is not a privacy budget"),
    ("liu_fig7.epsilons=[.inf]", "parameter 'epsilons': inf is not a privacy budget"),
    ("hua_fig2.dataset=ml-100kk", "parameter 'dataset': unknown dataset 'ml-100kk' (did you mean 'ml-100k'?)"),
    ("liu_fig7.gibbs={datasets: [movielens]}", "parameter 'gibbs.datasets': unknown dataset 'movielens'"),
    ("pnbm_fig1.mf_d=[0]", "parameter 'mf_d': 0 is not a size"),
    ("hua_fig2.d=8.5", "parameter 'd': 8.5 is not a size"),
    ("liu_fig7.sgd={eta: 0.1}", "unknown key 'eta' in parameter 'sgd' (did you mean 'eta0'?)"),
    ("hua_fig2.d=true", "parameter 'd' must be a number"),
    ("liu_fig7.sgd={eta0: 0.1, eta0: 0.2}", "key 'eta0' appears twice"),
])
def test_a_bad_set_value_is_refused_before_any_kernel_starts(item, says, capsys, figures_tmp):
    """ε ≤ 0 or an unknown dataset via --set failed inside the notebook after 23-34 s; `mf_d: [0]` after 73 s."""
    code = cli.main(["--profile", "smoke", "--only", "hua_fig2,liu_fig7,pnbm_fig1", "--set", item])
    err = capsys.readouterr().err
    assert code == 2 and says in err and "Traceback" not in err, err
    assert not list(figures_tmp.iterdir())


def test_set_values_of_one_mapping_merge():
    sets = cli.parse_sets(["liu_fig7.sgd={eta0: 0.1}", "liu_fig7.sgd={epochs: 3}"], ["liu_fig7"])
    assert sets == {"liu_fig7": {"sgd": {"eta0": 0.1, "epochs": 3}}}


def test_good_set_values_pass_the_runners_checks():
    from dpmf_lib.params import load_params
    from dpmf_lib.runner.preflight import check_set_values

    for name, over in [("balu_fig3_6", {"blip_eps": [0, 1]}), ("balu_fig3_2", {"eps": [2, 0]}), ("hua_fig2", {"eps_values": [0.05]}),
                       ("balu_fig5_2", {"datasets": ["sift1m"]}), ("liu_fig7", {"sgd": {"eta0": 0.1}}),
                       ("balu_fig3_6", {"jlt_min_sweeps": "same"})]:
        load_params(name, "smoke", over)
        check_set_values(name, "smoke", over)
