"""`python -m dpmf_lib.bench` prints a readable table and compares with an earlier run (#17); a ratio's
``met`` is a JSON boolean."""

import json

from dpmf_lib.bench import ratio, record
from dpmf_lib.bench.__main__ import main, table


def _doc(speed, when):
    return {"suite": "mf", "profile": "quick", "wall_time_s": 12.0, "finished_utc": when,
            "records": [record("csgd", "throughput", speed, "updates/s", d=128)],
            "ratios": [ratio("csgd/naive", speed / 1e6, ">= 3")]}


def test_table_shows_ratios_with_targets_then_records():
    text = table(_doc(4e6, "t1"))
    lines = text.splitlines()
    assert lines[1].split() == ["ratio", "value", "range", "over", "repeats", "target", "met"]
    assert "csgd/naive" in lines[2] and ">= 3" in lines[2] and "met" in lines[2]
    assert any("csgd · throughput" in x and "updates/s" in x and "d=128" in x for x in lines)


def test_compare_puts_the_earlier_value_and_the_ratio_beside():
    text = table(_doc(4e6, "t2"), _doc(2e6, "t1"))
    row = next(x for x in text.splitlines() if x.startswith("csgd/naive"))
    assert "2" in row.split() and "2.00×" in row and "compared with t1" in text
    rec = next(x for x in text.splitlines() if x.startswith("csgd · throughput"))
    assert "2e+06" in rec and "2.00×" in rec


def test_compare_refuses_another_suites_file(tmp_path, capsys):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({**_doc(1, "t0"), "suite": "lsh"}))
    assert main(["mf", "--compare", str(old)]) == 2
    assert "not 'mf'" in capsys.readouterr().err


def test_ratio_met_is_a_json_boolean_for_numpy_values():
    import json

    import numpy as np

    from dpmf_lib.bench import ratio

    r = ratio("x", np.float64(1.6), "<= 1")
    assert r["met"] is False and json.loads(json.dumps(r, default=str))["met"] is False
    assert ratio("y", np.float32(3.5), ">= 3")["met"] is True
