"""Balu Figure 3.6 (review finding): the utility noise must depend on the ε value, not its place in the list, and the
utility's sketches are the releases the privacy axis attacked."""

import pandas as pd
import pytest

from dpmf_lib.params import load_params


@pytest.fixture(scope="module")
def fig36_setup():
    from dpmf_lib.experiments.balu import _balu_ch3 as ch3
    from dpmf_lib.experiments.balu import balu_fig3_6 as e

    params = load_params("balu_fig3_6", "smoke")
    out = {}
    for kind in ("blip", "jlt"):
        p = e._mech_params(params, kind)
        out[kind] = (p, ch3.prepare(p))
    return params, out


@pytest.mark.parametrize("kind, eps, longer", [("blip", 8.0, [59, 28, 8]), ("jlt", 2.0, [600, 2, 0.1])])
def test_fig3_6_utility_row_depends_on_the_eps_value_not_its_place(fig36_setup, kind, eps, longer):
    from dpmf_lib.experiments.balu import balu_fig3_6 as e

    params, setups = fig36_setup
    p, setup = setups[kind]
    alone = e.utility(kind, {**p, "eps": [eps], "knn_k": params["knn_k"]}, setup)
    inside = e.utility(kind, {**p, "eps": longer, "knn_k": params["knn_k"]}, setup)
    assert len(alone) == 1
    pd.testing.assert_frame_equal(alone.reset_index(drop=True),
                                  inside[inside["eps"] == eps].reset_index(drop=True))


def test_fig3_6_utility_sketches_are_the_attacked_releases(fig36_setup, monkeypatch):
    """Same noise seeds as the attacks ([seed, 2, eps_stream(ε), u]): the sketch the utility uses for an attacked user
    is the release the privacy axis attacked."""
    from dpmf_lib.experiments.balu import _balu_ch3 as ch3
    from dpmf_lib.experiments.balu import _balu_ch3_rows as rows
    from dpmf_lib.experiments.balu import balu_fig3_6 as e

    params, setups = fig36_setup
    p, setup = setups["blip"]
    seen = {"utility": set(), "attack": set()}

    def spy(which, real):
        def f(*parts):
            if len(parts) == 4 and parts[1] == 2:
                seen[which].add(tuple(int(x) for x in parts))
            return real(*parts)
        return f

    real = rows._seed
    monkeypatch.setattr(ch3, "_seed", spy("utility", real))
    e.utility("blip", {**p, "eps": [8], "knn_k": params["knn_k"]}, setup)
    monkeypatch.setattr(rows, "_seed", spy("attack", real))
    rows.attack_one_eps("blip", 8.0, {**p, "attacks": ["popularity"]}, setup)
    assert len(seen["attack"]) == len(setup.attacked) and seen["attack"] <= seen["utility"]
    assert len(seen["utility"]) == len(setup.test)
