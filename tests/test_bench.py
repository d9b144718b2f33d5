"""The bench's ratio records."""


def test_ratio_met_is_a_json_boolean_for_numpy_values():
    import json

    import numpy as np

    from dpmf_lib.bench import ratio

    r = ratio("x", np.float64(1.6), "<= 1")
    assert r["met"] is False and json.loads(json.dumps(r, default=str))["met"] is False
    assert ratio("y", np.float32(3.5), ">= 3")["met"] is True
