"""Review nits of the posterior-sampling release (issue #14): the release states how its redraws were made, and the
chains do not hold every chain's kept V draws after the diagnostics have read them."""

import gc
import weakref

import numpy as np
import pytest

import dpmf_lib.mf as mf
from dpmf_lib.errors import ParameterError
from dpmf_lib.privacy import posterior_sampling as ps
from mf_toys import dense_toy


def _release_args():
    z = np.zeros((3, 2), np.float32)
    return (z, np.zeros(3, np.float32), 3.0, 1.0, 10.0, 0.05, np.ones(2, np.float32), np.ones(2, np.float32), 1.0,
            2.0, True, 0)


def test_a_release_must_say_how_its_redraws_were_made():
    # the dataclass once defaulted to "continue" while sample_private defaults to "fresh": a release built without the
    # field misreported its redraws. Now it is a required keyword, checked against REDRAWS.
    with pytest.raises(TypeError, match="redraw"):
        ps.PrivateRelease(*_release_args(), sampler="sgld")
    with pytest.raises(ParameterError, match="redraw"):
        ps.PrivateRelease(*_release_args(), redraw="again", sampler="sgld")
    for r in ps.REDRAWS:
        assert ps.PrivateRelease(*_release_args(), redraw=r, sampler="sgld").redraw == r


def test_a_release_must_say_which_sampler_ran():
    with pytest.raises(TypeError, match="sampler"):
        ps.PrivateRelease(*_release_args(), redraw="fresh")
    with pytest.raises(ParameterError, match="sampler"):
        ps.PrivateRelease(*_release_args(), redraw="fresh", sampler="hmc")
    for s in ps.SAMPLERS:
        assert ps.PrivateRelease(*_release_args(), redraw="fresh", sampler=s).sampler == s


def test_sample_private_reports_the_redraw_that_ran():
    pre = ps.preprocess(dense_toy(), tau=5, kappa=1.0, rho=1.0, seed=0)
    kw = dict(Lambda_u=0.5, Lambda_v=0.5, lam_bias=0.5, d=2, rounds=4, burn_in=2, eta_n_max=1.0,
              schedule=mf.Schedule(n_threads=1), seed=1, max_resamples=1)
    assert ps.sample_private(pre, 0.01, **kw).redraw == "fresh"  # the function's default
    assert ps.sample_private(pre, 0.01, **kw, redraw="continue").redraw == "continue"


def test_a_chain_drops_its_kept_v_draws_once_the_trace_has_read_them(monkeypatch):
    """At paper scale rounds/thin copies of V per chain add up: when chain k+1 starts, chain k's kept V draws must be
    gone (only its final model, history and layout are read afterwards)."""
    real = mf.sample_sgld
    refs, alive_at_start = [], []

    def spy(*a, **kw):
        gc.collect()
        alive_at_start.append(sum(r() is not None for r in refs))
        res = real(*a, **kw)
        refs.extend(weakref.ref(v) for v in res.samples_V)
        return res

    monkeypatch.setattr(mf, "sample_sgld", spy)
    pre = ps.preprocess(dense_toy(), tau=5, kappa=1.0, rho=1.0, seed=0)
    rel = ps.sample_private(pre, 0.01, Lambda_u=0.5, Lambda_v=0.5, lam_bias=0.5, d=2, rounds=6, burn_in=2, thin=1,
                            n_chains=3, eta_n_max=1.0, schedule=mf.Schedule(n_threads=1), seed=2, max_resamples=0)
    assert len(refs) == 3 * 6  # the draws were kept (the trace needs them) ...
    assert len(rel.trace) == 3 * 6 and rel.trace.v_norm2.notna().all()
    assert alive_at_start == [0] * 6  # ... and none outlived its chain (2 sample_sgld calls per chain)
