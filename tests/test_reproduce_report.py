import json

import nbformat

from dpmf_lib import reproduce
from dpmf_lib.report import collect, write_report
from dpmf_lib.registry import load_registry


def test_report_has_a_row_per_registry_entry_and_claim(figures_tmp):
    md, html = write_report()
    _, entries = load_registry()
    text = md.read_text()
    for e in entries:
        assert f"| {e.name} |" in text
    _, rows, claims = collect()
    by_name = {e.name: e for e in entries}
    for r in rows:  # nothing has run in this empty directory
        e = by_name[r["name"]]
        expected = "not run" if e.implemented else ("not yet" if e.quantitative else "not applicable (diagram/summary)")
        assert r["status"] == expected, r
    assert all(c["verdict"] == "not yet measured" for c in claims)  # nothing has run in this empty directory
    assert "<table>" in html.read_text()


def test_failed_notebook_is_reported_with_its_cell(figures_tmp, tmp_path, monkeypatch):
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("profile = 'ci'"),
                                         nbformat.v4.new_code_cell("x = 1"),
                                         nbformat.v4.new_code_cell("raise ValueError('boom in cell three')")])
    nb.cells[0].metadata["tags"] = ["parameters"]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, nbdir / "broken.ipynb")
    monkeypatch.setattr(reproduce, "notebooks_dir", lambda: nbdir)
    rec = reproduce.execute("broken", "smoke", "h")
    assert rec["status"] == "failed"
    assert "ValueError" in rec["error"] and "boom in cell three" in rec["error"] and "cell" in rec["error"]
    saved = json.loads((figures_tmp / "broken" / "run.json").read_text())
    assert saved["status"] == "failed"


def test_up_to_date_needs_matching_hash_and_outputs(figures_tmp):
    _, entries = load_registry()
    e = next(x for x in entries if x.name == "liu_fig1")
    digest = reproduce.run_hash(e, "smoke", reproduce.code_digest(), reproduce.data_digest())
    assert digest != reproduce.run_hash(e, "ci", reproduce.code_digest(), reproduce.data_digest())
    out = figures_tmp / e.name
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"hash": digest, "status": "ok"}))
    assert not reproduce.up_to_date(e, digest)  # outputs missing
    (out / "provenance.json").write_text("{}")
    (out / f"{e.name}.csv").write_text("dataset\n")
    assert reproduce.up_to_date(e, digest)
    assert not reproduce.up_to_date(e, "other")


def test_unknown_only_pattern_fails_cleanly(capsys):
    assert reproduce.main(["--only", "nosuch_*"]) == 2
    assert "no implemented notebook matches" in capsys.readouterr().err


def test_kernels_get_the_callers_thread_limits_not_lokys(figures_tmp, tmp_path, monkeypatch):
    """loky caps NUMBA_NUM_THREADS & co. in its workers; the runner hands the kernel the caller's values."""
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    code = ("import os, json, pathlib\n"
            "pathlib.Path(os.environ['DPMF_FIGURES_DIR'], 'env.json').write_text("
            "json.dumps({v: os.environ.get(v) for v in ('NUMBA_NUM_THREADS', 'OMP_NUM_THREADS')}))")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("profile = 'ci'"), nbformat.v4.new_code_cell(code)])
    nb.cells[0].metadata["tags"] = ["parameters"]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, nbdir / "envcheck.ipynb")
    monkeypatch.setattr(reproduce, "notebooks_dir", lambda: nbdir)
    monkeypatch.setenv("NUMBA_NUM_THREADS", "1")  # as loky would have set it in a worker
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    reproduce.execute("envcheck", "smoke", "h", {"NUMBA_NUM_THREADS": None, "OMP_NUM_THREADS": "3"})
    seen = json.loads((figures_tmp / "env.json").read_text())
    assert seen == {"NUMBA_NUM_THREADS": None, "OMP_NUM_THREADS": "3"}
