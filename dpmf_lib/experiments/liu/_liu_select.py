"""C-SGD's step schedule and λ chosen on the data a Liu counterpart runs on, as the paper set its own per dataset.

The paper gives each of its datasets its own C-SGD settings (Section 6.3: η0 = 0.02, λ = 5·10⁻³ for Netflix;
η0 ∈ {0.1, 0.08, 0.06}, λ = 5·10⁻² for Yahoo! Music; "the same decay rate γ = 1 for both"; η_t = η0 / t^γ) and runs
a fixed number of epochs (15 / 30) "because we observe that our SGD solver can reach the convergence at that time".
It does not say how it found them. Our reconstruction for a counterpart on another dataset (ML-100K): the lowest
validation RMSE **after the run's epoch budget** (the model a fixed-epoch run returns; no early stopping, as in the
paper) over the grid ``sgd_grid`` (η0 × λ; γ kept at the paper's 1 for every dataset), each point fitted on the
training part minus a validation part of ``validation_fraction`` of each user's ratings
(:func:`dpmf_lib.tuning.validation_split`, seeded by ``seed``) — the test split is never read. The chosen point then
trains on the whole training part. A fit that diverges scores ∞ (kept in the table, never chosen); the
``selection_off_grid_edge`` guard (kind *tuned*) says whether every searched value was chosen inside its grid.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd

from ...errors import ParameterError
from ...tuning import GridChoice, choose_on_grid, validation_split
from ._liu_mf import run_csgd

#: the C-SGD settings a grid may search (names of the experiment's parameters)
SGD_NAMES = ("sgd_eta0", "sgd_lambda", "sgd_gamma")
#: the solver name of the validation grid's rows in a figure's table (one row per grid point, no test RMSE)
GRID_SOLVER = "csgd (validation grid)"


def sgd_grid(params: dict) -> dict:
    """``params['sgd_grid']`` checked: a mapping of names in :data:`SGD_NAMES` to non-empty lists of positive numbers
    (γ ≥ 0); a name it leaves out keeps its flat value (one point: not searched)."""
    g = params.get("sgd_grid")
    if not isinstance(g, dict) or not g:
        raise ParameterError(f"sgd_grid must map C-SGD settings {list(SGD_NAMES)} to lists of values, got {g!r}")
    out = {}
    for k in SGD_NAMES:
        vals = g.get(k, [params[k]])
        if not isinstance(vals, (list, tuple)) or not vals:
            raise ParameterError(f"sgd_grid[{k!r}] must be a non-empty list of numbers, got {vals!r}")
        try:
            v = [float(x) for x in vals]
        except (TypeError, ValueError):
            raise ParameterError(f"sgd_grid[{k!r}] must hold numbers, got {vals!r}") from None
        lo = 0.0 if k == "sgd_gamma" else None
        if not all(math.isfinite(x) and (x >= lo if lo is not None else x > 0) for x in v):
            raise ParameterError(f"sgd_grid[{k!r}] must hold finite numbers {'≥ 0' if lo is not None else '> 0'}, "
                                 f"got {vals!r}")
        out[k] = v
    unknown = sorted(set(g) - set(SGD_NAMES))
    if unknown:
        raise ParameterError(f"sgd_grid: unknown name(s) {unknown}; allowed: {list(SGD_NAMES)}")
    return out


def selected_on(params: dict, dataset: str) -> bool:
    """Whether ``dataset``'s C-SGD settings are chosen on its validation split (``params['sgd_select_on']``)."""
    on = params.get("sgd_select_on") or []
    if not isinstance(on, (list, tuple)):
        raise ParameterError(f"sgd_select_on must be a list of dataset ids, got {on!r}")
    return dataset in on


def choose_sgd(train, d: int, epochs: int, params: dict, *, threads: int = 1) -> GridChoice:
    """The C-SGD settings of ``sgd_grid`` with the lowest validation RMSE after ``epochs`` epochs at dimension ``d``,
    each fitted on ``train`` minus its validation part (module docstring). ``train`` is the training part only: the
    test split is not an argument. The table also holds each point's ``validation_best_epoch``.

    The fits run on one thread by default: they are not timed, and one thread gives the same choice for the same seed
    (Hogwild on two is not byte-stable) and keeps its pace on a loaded host (42 fits of 30 epochs on ML-100K: 8.8 s on
    one thread, 38 s on two at load 11)."""
    grid = sgd_grid(params)
    fit, val = validation_split(train, float(params["validation_fraction"]), int(params["seed"]))
    best_epoch = []  # per grid point, in order: the epoch of its lowest validation RMSE (shown, not used to choose)

    def score(point: dict) -> float:
        try:
            c = run_csgd(fit, val, d, epochs, {**params, **point}, threads=threads, label="csgd (validation)")
        except ParameterError as e:  # the grid's values were checked above: only a diverged fit raises here
            if "diverged" not in str(e):
                raise
            best_epoch.append(math.nan)
            return math.inf
        c = c.sort_values("epoch")
        best_epoch.append(float(c.epoch.iloc[int(c.test_rmse.to_numpy().argmin())]))
        return float(c.test_rmse.iloc[-1])

    choice = choose_on_grid(grid, score)
    return replace(choice, table=choice.table.assign(validation_best_epoch=best_epoch))


def grid_rows(choice: GridChoice, d: int, epochs: int) -> pd.DataFrame:
    """The validation grid as rows of a figure's table (solver :data:`GRID_SOLVER`): the settings, the validation
    RMSE after ``epochs`` epochs (NaN with ``diverged`` True for a fit that diverged), ``chosen``, and
    ``validation_best_epoch`` (the epoch of the point's lowest validation RMSE: before ``epochs``, its validation
    curve turned up — shown, never used to choose)."""
    t = choice.table.rename(columns={"score": "validation_rmse"})
    bad = ~t.validation_rmse.map(math.isfinite)
    return t.assign(validation_rmse=t.validation_rmse.where(~bad), diverged=bad, solver=GRID_SOLVER, d=d,
                    epoch=epochs)
