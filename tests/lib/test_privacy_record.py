"""PrivacyRecord: the one shape of a release's privacy record, and the keys and columns it produces."""

import math

import numpy as np
import pytest

from dpmf_lib.mf import Schedule
from dpmf_lib.privacy.common import PrivacyRecord
from tests.nbm_toys import toy

RECORD_KEYS = ["epsilon_stated", "epsilon_effective", "seed_used", "seed_was_fixed", "caveats"]


def test_to_dict_has_the_cached_keys_in_order():
    rec = PrivacyRecord(2.0, 2.0, 7, True, ("a", "b"))
    assert list(rec.to_dict()) == RECORD_KEYS
    assert rec.to_dict() == {"epsilon_stated": 2.0, "epsilon_effective": 2.0, "seed_used": 7, "seed_was_fixed": True,
                             "caveats": ["a", "b"]}


def test_columns_give_nan_where_no_epsilon_holds():
    assert list(PrivacyRecord(1.0).columns()) == ["epsilon_effective"]
    assert math.isnan(PrivacyRecord(1.0).columns()["epsilon_effective"])
    got = PrivacyRecord(1.0, np.float32(0.5)).columns()["epsilon_effective"]
    assert got == 0.5 and type(got) is float


def test_the_record_is_immutable():
    with pytest.raises(AttributeError):
        PrivacyRecord(1.0).epsilon_effective = 1.0


def test_objective_perturbation_runs_cache_the_record_s_keys():
    from dpmf_lib.objpert import mf as hua

    prob = hua.Problem.from_ratings(toy(nu=30))
    s1 = hua.run_s1(prob, hua.HuaConfig(d=2), 1.0, [1], seed=3)
    assert list(s1.privacy) == ["scenario"] + RECORD_KEYS
    # Theorem 1 covers V given a U independent of the ratings; S1's U is fit to them: no ε holds
    assert s1.privacy["scenario"] == "s1" and s1.privacy["epsilon_effective"] is None
    assert s1.privacy["seed_used"] == 3 and s1.privacy["seed_was_fixed"] is True
    s2 = hua.run_s2(prob, hua.HuaConfig(d=2), 1.0, [1])
    assert s2.privacy["epsilon_effective"] is None and s2.privacy["seed_was_fixed"] is False  # per-round ε only
    off = hua.run_s2(prob, hua.HuaConfig(d=2), None, [1], seed=0).privacy
    assert off["epsilon_stated"] is None and off["caveats"] == ["non-private run (eps None)"]


def test_every_release_type_reads_its_fields_from_one_record():
    from dpmf_lib import nbm
    from dpmf_lib.privacy import posterior_sampling as ps

    r = toy(nu=30)
    fast = dict(Nk=5, min_user_ratings=3)
    releases = [nbm.train_pnbm(r, epsilon=1.0, K=1, seed=4, **fast),
                nbm.train_pnbm_clipped(r, epsilon=1.0, K=1, seed=4, **fast),
                nbm.sample_pnbm(r, epsilon=1.0, T=1, L=5, Nk=5, seed=4),
                nbm.train_dpsgd_mf(r, epsilon=1.0, K=1, seed=4),
                ps.sample_private(ps.preprocess(r, tau=8, kappa=1.0, rho=1.0, seed=1), 1.0, Lambda_u=1.0,
                                  Lambda_v=1.0, d=2, rounds=2, schedule=Schedule(n_threads=1), seed=4)]
    for rel in releases:
        rec = rel.privacy
        assert isinstance(rec, PrivacyRecord) and rec.epsilon_stated == rel.epsilon == 1.0
        assert (rel.epsilon_effective, rel.seed_used, rel.seed_was_fixed, rel.privacy_caveats) == (
            rec.epsilon_effective, 4, True, rec.caveats)
        assert rec.caveats  # every private release says what its ε does not cover
    assert releases[1].epsilon_effective == 1.0  # the clipped variant proves its ε
    assert releases[0].epsilon_effective is None and releases[3].epsilon_effective is None


def test_a_fresh_seed_is_recorded_as_not_fixed():
    from dpmf_lib import nbm

    res = nbm.train_dpsgd_mf(toy(nu=30), epsilon=1.0, K=1)
    assert res.seed_was_fixed is False and 0 <= res.seed_used < 2**63


def test_a_result_built_without_a_record_gets_the_stated_epsilon_s():
    from dpmf_lib.nbm import PNBMResult

    res = PNBMResult(np.zeros((2, 2)), 3.0, None)
    assert res.privacy == PrivacyRecord(3.0) and res.epsilon_effective is None and res.seed_was_fixed is True
