"""How `.ci/run` splits its checks between `make test` and the `ci` notebook runs it makes right after.

`.ci/run` runs `make test` with ``DPMF_CI_FIGURES=pending``, then `make figures` at the `ci` profile, then the tests
marked :data:`needs_ci_figures` with ``DPMF_CI_FIGURES=<figures dir>``: checks of those runs' outputs that replace
slower executions in `make test` (the notebooks' smoke runs, liu_table2's valgrind round trip on a toy), which skip
themselves while ``CI_FIGURES`` is set. A plain `make test` (no variable) runs the slow executions and skips the checks.
"""

import os

import pytest

CI_FIGURES = os.environ.get("DPMF_CI_FIGURES")

needs_ci_figures = pytest.mark.skipif(CI_FIGURES in (None, "pending"),
                                      reason="runs in .ci/run after make figures (DPMF_CI_FIGURES=<figures dir>)")


def replaced_in_ci_by(check: str):
    """Skip a slow execution under `.ci/run`, naming the check of CI's own `ci` run that covers it."""
    return pytest.mark.skipif(CI_FIGURES is not None, reason=f"CI checks its own `ci` runs instead, after make figures: "
                                                             f"{check}")
