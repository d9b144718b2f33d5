"""A pytest plugin for ``tests/select_changed.py --record``: each test's CPU seconds into the JSON-lines file named by
``$DPMF_DURATIONS_OUT``, with whether it is marked ``slow`` and whether `.ci/run`'s `make test` skips it
(``replaced_in_ci_by``: marker ``ci_replaced``; the checks of the ci runs, marker ``ci_figures``, never run there).

CPU seconds of a test: its setup, call and teardown in this process, in the processes it started and waited for, and
in the descendants still running (a loky or dask worker's time so far), so a test that hands its work to other
processes is counted by that work, not by its wait."""

from __future__ import annotations

import json
import os
import resource

import pytest


def _cpu() -> float:
    import psutil

    own = resource.getrusage(resource.RUSAGE_SELF)
    waited = resource.getrusage(resource.RUSAGE_CHILDREN)
    live = 0.0
    for p in psutil.Process().children(recursive=True):
        try:
            t = p.cpu_times()
            live += t.user + t.system
        except psutil.Error:
            pass
    return own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime + live


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before = _cpu()
    yield
    out = os.environ.get("DPMF_DURATIONS_OUT")
    if out:
        with open(out, "a", encoding="utf-8") as f:
            f.write(json.dumps({"id": item.nodeid, "cpu": round(_cpu() - before, 3),
                                "slow": item.get_closest_marker("slow") is not None,
                                "in_ci": item.get_closest_marker("ci_replaced") is None
                                and item.get_closest_marker("ci_figures") is None}) + "\n")
