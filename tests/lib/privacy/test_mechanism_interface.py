"""The mechanism interface: a user-defined mechanism (tests/toy_mechanism.py) lands on the frontier through
params (custom_mechanisms) and goes through the audit pipeline (dpmf_lib.privacy.audit) like the ledger's rows."""

import math

import numpy as np
import pytest

from dpmf_lib.errors import ParameterError
from dpmf_lib.privacy import mechanism as mech
from tests.conftest import needs_ml100k
from tests.nbm_toys import toy
from tests.toy_mechanism import NoisyItemMeans

TOY = "tests.toy_mechanism:NoisyItemMeans"


def test_load_and_check_mechanism():
    assert mech.load_mechanism(TOY) is NoisyItemMeans
    assert isinstance(NoisyItemMeans(), mech.Mechanism)
    with pytest.raises(ParameterError):
        mech.load_mechanism("tests.toy_mechanism:Nope")
    with pytest.raises(ParameterError):
        mech.check_mechanism(type("NoKey", (), {"fit": lambda self: None}))


def test_release_record_from_entry():
    rel = NoisyItemMeans(k=3).fit(toy(seed=2, nu=30), 2.0, 1e-5, 4)
    assert rel.record.epsilon_effective == pytest.approx(rel.privacy().epsilon_provable)
    assert rel.record.seed_used == 4 and rel.record.seed_was_fixed
    assert rel.predict(np.array([0, 1]), np.array([2, 3])).shape == (2,)


def test_toy_goes_through_the_audit_pipeline():
    d0 = toy(seed=3, nu=30, ni=8, density=0.7)
    from dpmf_lib.experiments.extra.extra_privacy_ledger import user_neighbour

    d1, _ = user_neighbour(d0)
    row, entry = mech.audit_mechanism(NoisyItemMeans(k=8), d0, d1, 1.0, 1e-5, 200, 0)
    assert row["epsilon_audited"] <= entry.epsilon_provable  # no violation of the proof found
    assert row["n_evaluation"] == 100 and math.isfinite(row["epsilon_detectable"])
    # positive control: the same pipeline catches a leak (no noise at all)
    leak, _ = mech.audit_mechanism(NoisyItemMeans(k=8), d0, d1, 1e4, 1e-5, 200, 0)
    assert leak["epsilon_audited"] > 1.0


@needs_ml100k
def test_toy_appears_on_the_frontier():
    from dpmf_lib.experiments.extra import extra_privacy_frontier as f
    from dpmf_lib.params import load_params

    p = load_params("extra_privacy_frontier", "smoke")
    p["mechanisms"] = ["dpsgd-mf"]  # one cheap workbook mechanism (through its adapter) beside the toy
    p["custom_mechanisms"] = [{"class": TOY, "grid": {"k": [10, 40]}}]
    df = f.run(p)
    toy_rows = df[df.key == NoisyItemMeans.key]
    priv = toy_rows[toy_rows.kind == "private"]
    assert len(priv) == len(p["frontier_epsilons"]) and (priv.selection == "validation").all()
    assert (priv.n_seeds == p["n_seeds"]).all() and (priv.rmse_lo <= priv.rmse).all()
    assert np.isfinite(priv.x_user).all() and (priv.x_kind == "provable").all()
    assert (toy_rows.kind == "reference").sum() == 1  # the non-private choice of the same grid
    assert (df[df.key == "dpsgd-mf"].selection == "validation").all()  # one protocol for every entry


@needs_ml100k
def test_toy_appears_in_the_ledger():
    from dpmf_lib.experiments.extra import extra_privacy_ledger as led
    from dpmf_lib.params import load_params

    p = load_params("extra_privacy_ledger", "smoke")
    assert p["custom_mechanisms"] == []  # default: the ledger's own rows only
    p["mechanisms"] = ["blip"]  # one cheap row of the ledger's own beside the toy
    p["custom_mechanisms"] = [{"class": TOY, "config": {"k": 8}, "epsilon": 1.0, "delta": 1e-5, "runs": 200}]
    df = led.run(p)
    row = df[df.key == NoisyItemMeans.key].iloc[0]
    assert row.epsilon_kind == "provable" and row.epsilon_audited <= row.epsilon_provable
    assert row.n_evaluation == 100 and math.isfinite(row.epsilon_detectable) and row.audit_bound_kind == "provable"
    assert set(df.key) == {"blip", NoisyItemMeans.key}
