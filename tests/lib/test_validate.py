"""dpmf_lib.validate: one rule per parameter kind, and every public DP entry point applying the ε rule."""


import numpy as np
import pytest

from dpmf_lib.mf import Schedule
from dpmf_lib import validate
from dpmf_lib.errors import ParameterError
from tests.nbm_toys import toy

NAN, INF = float("nan"), float("inf")


# ------------------------------------------------------------------------------------------------ numbers


@pytest.mark.parametrize("value, expect", [(2, 2.0), (0.5, 0.5), (np.float32(0.25), 0.25), (np.int64(3), 3.0),
                                           (np.array(1.5), 1.5), (-4, -4.0)])
def test_finite_returns_the_float(value, expect):
    got = validate.finite(value, "x")
    assert type(got) is float and got == expect


@pytest.mark.parametrize("bad", [NAN, INF, -INF, True, np.bool_(False), "1.0", None, [1.0]])
def test_finite_refuses_naming_the_parameter(bad):
    with pytest.raises(ParameterError, match="parameter 'rate'"):
        validate.finite(bad, "rate")


def test_positive_strict_and_non_negative():
    assert validate.positive(3, "x") == 3.0 and validate.positive(0, "x", strict=False) == 0.0
    for bad in (0, 0.0, -1e-300, NAN, INF, True):
        with pytest.raises(ParameterError, match="'x' must be a finite number > 0"):
            validate.positive(bad, "x")
    for bad in (-1, NAN, INF, False):
        with pytest.raises(ParameterError, match="'x' must be a finite number ≥ 0"):
            validate.positive(bad, "x", strict=False)


def test_positive_names_what_and_fix():
    with pytest.raises(ParameterError) as exc:
        validate.positive(-1, "delta", what="the noise", fix="give the rating range")
    assert str(exc.value) == ("parameter 'delta' of the noise must be a finite number > 0, got -1 "
                              "(give the rating range)")


# ------------------------------------------------------------------------------------------------ ε


def test_epsilon_accepts_finite_positive_numbers_as_floats():
    for v in (1, 0.1, np.float32(2.0), np.int64(4), 1e300):
        got = validate.epsilon(v)
        assert type(got) is float and got == float(v)


@pytest.mark.parametrize("bad", [True, False, np.bool_(True), NAN, INF, -INF, 0, 0.0, -1, "1", [1.0]])
def test_epsilon_refuses_bool_nan_inf_and_non_positive(bad):
    for allow_none in (False, True):
        with pytest.raises(ParameterError, match="parameter 'epsilon'"):
            validate.epsilon(bad, allow_none=allow_none)


def test_epsilon_none_means_non_private_only_where_allowed():
    assert validate.epsilon(None, allow_none=True) is None
    with pytest.raises(ParameterError, match="got None"):
        validate.epsilon(None)


def test_epsilon_zero_only_where_the_mechanism_allows_it():
    assert validate.epsilon(0, allow_zero=True) == 0.0
    with pytest.raises(ParameterError):
        validate.epsilon(-0.5, allow_zero=True)
    with pytest.raises(ParameterError, match="ε ≤ 0 gives no privacy guarantee; use None"):
        validate.epsilon(0, allow_none=True)


def test_epsilon_messages_say_the_fix():
    with pytest.raises(ParameterError, match="only None \\(YAML null\\) means non-private"):
        validate.epsilon(NAN, "eps", allow_none=True)
    with pytest.raises(ParameterError, match="a boolean is not a privacy level"):
        validate.epsilon(True, "eps")
    with pytest.raises(ParameterError, match="use 4B"):
        validate.epsilon(-1, fix="use 4B")


# ------------------------------------------------------------------------------------------------ integers


def test_integer_bounds():
    assert validate.integer(1, "d") == 1 and validate.integer(np.int32(4096), "d", hi=4096) == 4096
    assert validate.integer(0, "M", lo=0) == 0
    for bad in (0, 4097, 2.0, True, "3", None, np.float64(3)):
        with pytest.raises(ParameterError, match="parameter 'd' must be an integer in \\[1, 4096\\]"):
            validate.integer(bad, "d", hi=4096)
    with pytest.raises(ParameterError, match="an integer ≥ 1"):
        validate.integer(-2, "K")


# ------------------------------------------------------------------------------------------------ seeds


def test_generator_keeps_each_seed_kind_s_stream():
    g = np.random.default_rng(5)
    assert validate.generator(g) is g
    ref = np.random.default_rng(7).random(4)
    for seed in (7, np.int64(7), np.uint32(7)):
        np.testing.assert_array_equal(validate.generator(seed).random(4), ref)
    np.testing.assert_array_equal(validate.generator([7, 0xD9]).random(3), np.random.default_rng([7, 0xD9]).random(3))
    ss = np.random.SeedSequence(3)
    np.testing.assert_array_equal(validate.generator(ss).random(3),
                                  np.random.default_rng(np.random.SeedSequence(3)).random(3))


def test_generator_none_is_fresh_entropy_or_refused():
    a, b = validate.generator(None).integers(0, 2**62), validate.generator(None).integers(0, 2**62)
    assert a != b  # fresh OS entropy each time (collision probability 2^-62)
    with pytest.raises(ParameterError, match="pass an int seed"):
        validate.generator(None, allow_none=False)


@pytest.mark.parametrize("bad", [-1, True, 1.5, "7", [1, -2], [], object()])
def test_generator_refuses_other_seeds(bad):
    with pytest.raises(ParameterError, match="parameter 'seed'"):
        validate.generator(bad)


# ------------------------------------------------------------------------------------------------ DP entry points


def _entry_points(r):
    """(name, call(eps), takes None as non-private, takes ε = 0) for every public DP entry point, on ratings ``r``."""
    from dpmf_lib import nbm, params
    from dpmf_lib.attacks import mechanisms as mech
    from dpmf_lib.experiments.liu import liu_fig7
    from dpmf_lib.nbm import accounting as acc
    from dpmf_lib.nbm import runs
    from dpmf_lib.objpert import mf as hua
    from dpmf_lib.objpert import noise as nz
    from dpmf_lib.objpert.protocol import Protocol
    from dpmf_lib.privacy import posterior_sampling as ps
    from dpmf_lib.privacy.common import check_dp_epsilon

    pre = ps.preprocess(r, tau=8, kappa=1.0, rho=1.0, seed=1)
    prob = hua.Problem.from_ratings(r)
    cfg = hua.HuaConfig(d=2)
    fast = dict(Nk=5, min_user_ratings=3, seed=0)
    return [
        ("validate.epsilon(allow_none)", lambda e: validate.epsilon(e, allow_none=True), True, False),
        ("check_dp_epsilon", lambda e: check_dp_epsilon(e), True, False),
        ("ps.sample_private", lambda e: ps.sample_private(pre, e, Lambda_u=1.0, Lambda_v=1.0, d=2, rounds=1,
                                                          schedule=Schedule(n_threads=1), seed=0), False, False),
        ("ps.gibbs_chain", lambda e: ps.gibbs_chain(pre, e, Lambda_u=1.0, Lambda_v=1.0, lam_bias=1.0, d=2, sweeps=2,
                                                    burn_in=1), False, False),
        ("ps.likelihood_scale", lambda e: ps.likelihood_scale(e, pre.B, 2.0), False, False),
        ("ps.privacy_accounting", lambda e: ps.privacy_accounting(pre, e), False, False),
        ("ps.check_privacy_params", lambda e: ps.check_privacy_params(epsilon=e), True, False),
        ("nbm.train_pnbm", lambda e: nbm.train_pnbm(r, epsilon=e, K=1, **fast), True, False),
        ("nbm.train_pnbm_clipped", lambda e: nbm.train_pnbm_clipped(r, epsilon=e, K=1, **fast), False, False),
        ("nbm.sample_pnbm", lambda e: nbm.sample_pnbm(r, epsilon=e, T=1, L=5, Nk=5, seed=0), True, False),
        ("nbm.sample_pnbm_batch", lambda e: nbm.sample_pnbm_batch(
            r, [{"epsilon": e, "eta1": 1e-5, "rho": 0.01, "lam": 0.02}], T=1, L=5, Nk=5, seed=0), True, False),
        ("nbm.train_dpsgd_mf", lambda e: nbm.train_dpsgd_mf(r, epsilon=e, K=1, seed=0), True, False),
        ("nbm.runs.evaluate", lambda e: runs.evaluate("dpsgd-pnbm", "no-such-dataset", 1, epsilon=e), None, False),
        ("accounting.epsilon_per_iteration", lambda e: acc.epsilon_per_iteration(e, 5, 0.5), False, False),
        ("accounting.amplified_epsilon", lambda e: acc.amplified_epsilon(e, 5, 0.5), False, False),
        ("accounting.posterior_scale", lambda e: acc.posterior_scale(e, 10.0), True, False),
        ("hua.run_s1", lambda e: hua.run_s1(prob, cfg, e, [1], seed=0), True, False),
        ("hua.run_s2", lambda e: hua.run_s2(prob, cfg, e, [1], seed=0), True, False),
        ("hua.run_s3", lambda e: hua.run_s3(prob, cfg, e, [1], seed=0), True, False),
        ("objpert Protocol", lambda e: Protocol(prob, cfg, e, scenario="s2", seed=0), True, False),
        ("noise.norm_gamma", lambda e: nz.norm_gamma(2, 3, e, 4.0, 0), True, False),
        ("noise.laplace_coords", lambda e: nz.laplace_coords(2, 3, e, 4.0, 0), True, False),
        ("noise.item_laplace_via_shares", lambda e: nz.item_laplace_via_shares(2, 3, e, 4.0, 0), True, False),
        ("noise.shares", lambda e: nz.shares(np.ones(3), 2, 3, e, 4.0, 0), True, False),
        ("BLIP", lambda e: mech.BLIP(mech.bloom_codebook(10, 20, 2), e), False, True),
        ("blip_flip_probability", lambda e: mech.blip_flip_probability(e, 2), False, True),
        ("JLT", lambda e: mech.JLT(mech.jlt_codebook(10, 20), e), False, False),
        ("jlt_sigma", lambda e: mech.jlt_sigma(e), False, False),
        ("jlt_guarantee_void", lambda e: mech.jlt_guarantee_void(e), False, False),
        ("params.require_epsilons", lambda e: params.require_epsilons({"epsilons": [e]}), False, False),
        ("liu_fig7.resolve_epsilons", lambda e: liu_fig7.resolve_epsilons([e], pre.B), False, False),
    ]


ENTRY_NAMES = ["validate.epsilon(allow_none)", "check_dp_epsilon", "ps.sample_private", "ps.gibbs_chain",
               "ps.likelihood_scale", "ps.privacy_accounting", "ps.check_privacy_params", "nbm.train_pnbm",
               "nbm.train_pnbm_clipped", "nbm.sample_pnbm", "nbm.sample_pnbm_batch", "nbm.train_dpsgd_mf",
               "nbm.runs.evaluate", "accounting.epsilon_per_iteration", "accounting.amplified_epsilon",
               "accounting.posterior_scale", "hua.run_s1", "hua.run_s2", "hua.run_s3", "objpert Protocol",
               "noise.norm_gamma", "noise.laplace_coords", "noise.item_laplace_via_shares", "noise.shares", "BLIP",
               "blip_flip_probability", "JLT", "jlt_sigma", "jlt_guarantee_void", "params.require_epsilons",
               "liu_fig7.resolve_epsilons"]

BAD = {"True": True, "nan": NAN, "inf": INF, "-inf": -INF, "0": 0.0, "negative": -1.0}


@pytest.fixture(scope="module")
def entry_points():
    points = {name: (call, none_ok, zero_ok) for name, call, none_ok, zero_ok in _entry_points(toy(nu=30))}
    assert list(points) == ENTRY_NAMES
    return points


@pytest.mark.parametrize("bad", list(BAD), ids=list(BAD))
@pytest.mark.parametrize("name", ENTRY_NAMES)
def test_every_dp_entry_point_refuses_a_bad_epsilon(entry_points, name, bad):
    call, _, zero_ok = entry_points[name]
    value = BAD[bad]
    if bad == "0" and zero_ok:  # BLIP: ε = 0 is the fair-coin limit of (3.4), a valid point
        call(value)
        return
    with pytest.raises(ParameterError, match="eps"):
        call(value)


@pytest.mark.parametrize("name", ENTRY_NAMES)
def test_none_is_non_private_where_an_entry_point_has_that_variant(entry_points, name):
    call, none_ok, _ = entry_points[name]
    if none_ok is None:  # None runs the non-private method on data: tested with the nbm runs
        pytest.skip("None runs the non-private method on a dataset")
    if none_ok:
        call(None)
    else:
        with pytest.raises(ParameterError):
            call(None)
