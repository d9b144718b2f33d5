"""Experimental protocol of Balu 2016, section 4.1.5.1 / 4.2.4.1, around the kernels.

Choices where the thesis is silent (also stated in the notebooks):

- **split**: random 0.8/0.1/0.1 of the ratings (``dpmf_lib.data.splits.random_split``), split ``s`` uses
  seed ``seed + s``.
- **mean correction**: global mean μ of the training ratings; user bias ``b_u`` = mean of ``r − μ`` over the user's
  training ratings; item bias ``b_i`` = mean of ``r − μ − b_u`` over the item's training ratings (0 when unseen). The
  factor model is trained on the residuals; the RMSE of a residual prediction equals the RMSE of the rating prediction
  ``μ + b_u + b_i + p̃ᵀq̃`` (no clipping of predictions to the rating scale).
- **frequency thresholding**: validation and test ratings whose user or item has fewer than ``min_freq`` (10)
  ratings *in the training set* are removed; training keeps everything.
- **SGD**: ratings visited in a fresh random order every epoch; ``η_t = η / (1 + b·t/T)`` with ``t`` the 0-based epoch,
  ``T`` the number of epochs and ``b = 1`` (4.2.4.1 writes ``b`` without a value).
- **two-stage log-scale line search** on validation RMSE: stage 1 evaluates a coarse log grid of (η, λ) pairs; stage 2
  the 3 × 3 finer grid best × 10^(−refine, 0, +refine) around the winner. (A coordinate-wise search — η at fixed λ₀,
  then λ — was tried first and stalled near the no-learning corner on ML-100K, so both are searched jointly.)
  The test RMSE reported is that of the model that won on validation (no retraining).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import metrics, validate
from ..errors import ParameterError
from ..data import load_ratings
from ..privacy.common import seeded
from ..data.datasets import standin_permitted
from ..data.splits import random_split, subsample
from ..data.user import NOTE_PREFIX as USER_NOTE
from . import kernels
from .model import METHODS, MFModel, make_model



# ----------------------------------------------------------------------------------------------------------- data
def load_dataset(dataset: str, *, seed: int = 0, standin_scale: float = 1.0, max_ratings: int | None = None):
    """``dpmf_lib.data.load_ratings(dataset)``, optionally cut to a random subset of ``max_ratings`` ratings.

    The subset (for the smoke profile) is written into ``source.note``.
    """
    r = load_ratings(dataset, allow_standin=standin_permitted(dataset), seed=seed, standin_scale=standin_scale)
    return subsample(r, max_ratings, seed)


@dataclass
class Triples:
    users: np.ndarray  # int32
    items: np.ndarray  # int32
    values: np.ndarray  # float32 residuals (mean corrected)

    def __len__(self):
        return len(self.values)


@dataclass
class PreparedSplit:
    """One random split after mean correction and frequency thresholding."""

    n_users: int
    n_items: int
    train: Triples
    val: Triples
    test: Triples
    mu: float
    user_bias: np.ndarray
    item_bias: np.ndarray
    info: dict = field(default_factory=dict)


def mean_correction(users, items, values, n_users, n_items):
    """(μ, b_u, b_i) fitted on training triples (see module docstring)."""
    values = values.astype(np.float64)
    mu = float(values.mean())
    cu = np.bincount(users, minlength=n_users)
    bu = np.bincount(users, weights=values - mu, minlength=n_users) / np.maximum(cu, 1)
    ci = np.bincount(items, minlength=n_items)
    bi = np.bincount(items, weights=values - mu - bu[users], minlength=n_items) / np.maximum(ci, 1)
    return mu, bu, bi


def prepare_split(r, seed: int, *, fractions=(0.8, 0.1, 0.1), min_freq: int = 10) -> PreparedSplit:
    """Random split, mean correction fitted on train, frequency thresholding of validation and test."""
    if len(fractions) != 3 or abs(sum(fractions) - 1) > 1e-9 or min(fractions) <= 0:
        raise ParameterError(f"fractions must be three positive numbers summing to 1, got {fractions!r}")
    tr, va, te = random_split(r, list(fractions), seed)
    mu, bu, bi = mean_correction(tr.users, tr.items, tr.values, r.n_users, r.n_items)
    ucount, icount = tr.user_counts(), tr.item_counts()

    def triples(part, threshold):
        keep = np.ones(len(part), bool)
        if threshold:
            keep = (ucount[part.users] >= min_freq) & (icount[part.items] >= min_freq)
        u, i, v = part.users[keep], part.items[keep], part.values[keep]
        resid = (v - mu - bu[u] - bi[i]).astype(np.float32)
        return Triples(np.ascontiguousarray(u), np.ascontiguousarray(i), np.ascontiguousarray(resid))

    t0, v0, s0 = triples(tr, False), triples(va, True), triples(te, True)
    # a user's own dataset too small for its split is refused with the numbers (an empty set gives RMSE NaN in every
    # row, then a wrong "diverged"); the built-in data's small test profiles keep their empty-set rows, read as such
    own = (getattr(r.source, "note", "") or "").startswith(USER_NOTE)
    if own and not (len(t0) and len(v0) and len(s0)):
        raise ParameterError(f"{r.source.dataset or 'the ratings'}: split {seed} of {r.n_ratings} ratings leaves "
                             f"{len(t0)} training, {len(v0)} validation (of {len(va)}) and {len(s0)} test (of {len(te)}) "
                             f"ratings after keeping only users and items with at least min_freq = {min_freq} training "
                             "ratings — lower min_freq or use a larger dataset")
    info = {"n_train": len(t0), "n_val": len(v0), "n_test": len(s0), "n_val_removed": len(va) - len(v0),
            "n_test_removed": len(te) - len(s0), "split_seed": seed}
    return PreparedSplit(r.n_users, r.n_items, t0, v0, s0, mu, bu, bi, info)


# ------------------------------------------------------------------------------------------------------ training
def rmse(model: MFModel, t: Triples) -> float:
    if len(t) == 0:
        return float("nan")
    val = metrics.rmse(model.predict(t.users, t.items), t.values)
    return val if math.isfinite(val) else float("inf")


def kld_gaussian(err_train: np.ndarray, err_test: np.ndarray) -> float:
    """Eq. (4.15): KL divergence between N(m_tr, s_tr²) and N(m_te, s_te²) fitted to the prediction errors."""
    m_tr, m_te = float(np.mean(err_train)), float(np.mean(err_test))
    v_tr, v_te = float(np.var(err_train)), float(np.var(err_test))
    if not (v_tr > 0 and v_te > 0):
        return float("nan")
    return 0.5 * (v_tr / v_te + (m_tr - m_te) ** 2 / v_te - 1.0 + math.log(v_te / v_tr))


def prediction_errors(model: MFModel, t: Triples) -> np.ndarray:
    return model.predict(t.users, t.items).astype(np.float64) - t.values


def check_rates(eta: float, lam: float, clip: float = math.inf):
    validate.positive(eta, "eta", what="SGD (the learning rate)")
    validate.positive(lam, "lam", strict=False, what="SGD (the regularization)")
    if math.isnan(clip) or clip <= 0:
        raise ParameterError(f"clipping threshold 'clip' must be > 0 (use inf for no clipping), got {clip!r}")


def train(model: MFModel, data: PreparedSplit, *, epochs: int, eta: float, lam: float, clip: float = math.inf,
          decay_b: float = 1.0, seed=None, track: tuple[str, ...] = ()) -> list[dict]:
    """Run ``epochs`` SGD passes with ``η_t = η/(1 + b·t/T)``; returns one record per epoch.

    ``clip``: the clipping threshold of data clipping (4.2.1; the thesis calls it ε). It adds no noise, so no finite
    DP ε holds: the same data, model and seed give a bit-identical result. ``seed=None`` (default): fresh OS entropy
    for the visiting order; an int or Generator reproduces it.
    ``track`` ⊆ {"val", "test"} adds the RMSE on those sets after every epoch (costs a reconstruction per epoch).
    """
    check_rates(eta, lam, clip)
    if epochs < 1:
        raise ParameterError(f"epochs must be >= 1, got {epochs}")
    rng = seeded(seed)[0]
    tr = data.train
    history = []
    for t in range(epochs):
        order = rng.permutation(len(tr)).astype(np.int64)
        eta_t = eta / (1.0 + decay_b * t / epochs)
        n_app, n_skip, loss = model.sgd_epoch(tr.users, tr.items, tr.values, order, eta_t, lam, clip)
        rec = {"epoch": t + 1, "eta_t": eta_t, "train_loss": loss / max(1, len(tr)), "n_applied": int(n_app),
               "n_skipped": int(n_skip)}
        for name in track:
            rec[f"{name}_rmse"] = rmse(model, getattr(data, name))
        history.append(rec)
        if not math.isfinite(loss):
            break
    return history


def fit_eval(method: str, data: PreparedSplit, *, d: int, gamma: float = 1.0, k: int | None = None, epochs: int,
             eta: float, lam: float, clip: float = math.inf, init_scale: float = 0.1, seed=None,
             track: tuple[str, ...] = (), with_kld: bool = False) -> dict:
    """Initialise ``method``, train, and return validation/test RMSE (and the KLD of eq. 4.15 if asked).

    ``seed=None`` (default): fresh OS entropy (hash salts, initial values, visiting order); an int reproduces the run
    bit for bit. The result records ``seed_used`` and ``seed_was_fixed``. ``clip`` is a clipping threshold, not a
    DP ε (no noise is added; see :func:`train`)."""
    rng, seed_used, seed_fixed = seeded(seed)
    model = make_model(method, data.n_users, data.n_items, d, gamma=gamma, k=k, init_scale=init_scale, seed=rng)
    hist = train(model, data, epochs=epochs, eta=eta, lam=lam, clip=clip, seed=rng, track=track)
    return _result(method, model, data, hist, d=d, gamma=gamma, eta=eta, lam=lam, clip=clip, epochs=epochs,
                   seed_used=seed_used, seed_fixed=seed_fixed, with_kld=with_kld)


def _result(method, model, data, hist, *, d, gamma, eta, lam, clip, epochs, seed_used, seed_fixed, with_kld) -> dict:
    """The dict :func:`fit_eval` returns for the trained ``model`` (one construction: the key order is the frame's
    column order)."""
    out = {"method": method, "d": d, "gamma": gamma, "k": model.k, "w": model.w, "model_bytes": model.nbytes,
           "eta": eta, "lam": lam, "clip": clip, "epochs": epochs, "val_rmse": rmse(model, data.val),
           "test_rmse": rmse(model, data.test), "skipped_last_epoch": hist[-1]["n_skipped"], "history": hist,
           "seed_used": seed_used, "seed_was_fixed": seed_fixed}
    if with_kld:
        out["kld"] = kld_gaussian(prediction_errors(model, data.train), prediction_errors(model, data.test))
        out["train_rmse"] = rmse(model, data.train)
    return out


# ------------------------------------------------------------------------------------- several models in one pass
#: fewer runs than this are trained one by one (the shared pass costs about two one-model passes)
BATCH_MIN = 4
#: the cells of the models one batched kernel call trains (M × k × w float32) are kept under this many bytes; a
#: larger batch is trained in chunks (each chunk's result is the same: the models of a batch never interact)
BATCH_BYTES = 256 * 2**20


def batchable(method: str, seed, n_runs: int) -> bool:
    """Whether :func:`fit_eval_many` trains ``n_runs`` runs of ``method`` together: count-sketch models (count
    sketch, feature hashing) with an int seed (every run then draws the same salts, initial cells and visiting
    orders; a Generator or ``None`` gives each run its own)."""
    if n_runs < BATCH_MIN or METHODS.get(method, ("",))[0] != "sketch":
        return False
    if seed is None or isinstance(seed, (bool, np.random.Generator, np.random.SeedSequence)):
        return False
    return isinstance(seed, (int, np.integer)) and seed >= 0


def fit_eval_many(method: str, data: PreparedSplit, points, *, d: int, gamma: float = 1.0, k: int | None = None,
                  epochs: int, clip: float = math.inf, init_scale: float = 0.1, seed=None,
                  track: tuple[str, ...] = (), with_kld: bool = False) -> list[dict]:
    """``[fit_eval(method, data, eta=eta, lam=lam, ...) for eta, lam in points]``, bit for bit, faster.

    With a fixed int seed every run of the list starts from the same model (salts, cells) and visits the ratings in
    the same orders; only η and λ differ. Count-sketch models are then trained together
    (:func:`train_many`, :func:`dpmf_lib.sketch.kernels.sketch_sgd_epoch_many`: the hashing is shared and the
    models' identical float32 operations run side by side). Anything else (dense factors, ``seed`` None or a
    Generator, fewer than :data:`BATCH_MIN` points) is ``fit_eval`` in a loop."""
    points = [(eta, lam) for eta, lam in points]
    kw = dict(d=d, gamma=gamma, k=k, epochs=epochs, clip=clip, init_scale=init_scale, seed=seed, track=track,
              with_kld=with_kld)
    if not batchable(method, seed, len(points)):
        return [fit_eval(method, data, eta=eta, lam=lam, **kw) for eta, lam in points]
    out, lo, size = [], 0, 0
    while lo < len(points):
        rng, seed_used, seed_fixed = seeded(seed)
        model = make_model(method, data.n_users, data.n_items, d, gamma=gamma, k=k, init_scale=init_scale, seed=rng)
        if not size:  # equal chunks of at most BATCH_BYTES
            size = math.ceil(len(points) / math.ceil(len(points) / max(1, BATCH_BYTES // model.nbytes)))
        chunk = points[lo:lo + size]
        C, hists = train_many(model, data, epochs=epochs, etas=[eta for eta, _ in chunk],
                              lams=[lam for _, lam in chunk], clip=clip, seed=rng, track=track)
        out.extend(_result(method, model_of(model, C, m), data, h, d=d, gamma=gamma, eta=eta, lam=lam, clip=clip,
                           epochs=epochs, seed_used=seed_used, seed_fixed=seed_fixed, with_kld=with_kld)
                   for m, (h, (eta, lam)) in enumerate(zip(hists, chunk)))
        lo += len(chunk)
    return out


def train_many(model: MFModel, data: PreparedSplit, *, epochs: int, etas, lams, clip: float = math.inf,
               decay_b: float = 1.0, seed=None, track: tuple[str, ...] = ()) -> tuple[np.ndarray, list[list[dict]]]:
    """:func:`train` of copies of the count-sketch ``model``, one per (``etas[m]``, ``lams[m]``), in one pass per
    epoch over the same visiting order (:func:`~dpmf_lib.sketch.kernels.sketch_sgd_epoch_many`). Returns the
    trained cells, (k, w, M), and the histories: ``model_of(model, C, m)`` and ``histories[m]`` are bit for bit
    what :func:`train` makes of a copy of ``model`` with the same ``seed`` (a model whose loss stops being finite
    stops there, as in :func:`train`). ``model`` itself is not changed."""
    if model.kind != "sketch":
        raise ParameterError(f"train_many trains count-sketch models; got a {model.kind} model (use train)")
    etas, lams = [e for e in etas], [lam for lam in lams]
    if len(etas) != len(lams) or not etas:
        raise ParameterError(f"etas and lams must have the same length >= 1, got {len(etas)} and {len(lams)}")
    for eta, lam in zip(etas, lams):
        check_rates(eta, lam, clip)
    if epochs < 1:
        raise ParameterError(f"epochs must be >= 1, got {epochs}")
    rng = seeded(seed)[0]
    tr = data.train
    M = len(etas)
    C = np.ascontiguousarray(np.repeat(model.C[:, :, None], M, axis=2))
    active = np.ones(M, dtype=np.bool_)
    lam_arr = np.array(lams, dtype=np.float64)
    histories: list[list[dict]] = [[] for _ in range(M)]
    for t in range(epochs):
        order = rng.permutation(len(tr)).astype(np.int64)
        eta_t = [eta / (1.0 + decay_b * t / epochs) for eta in etas]
        n_app, n_skip, loss = kernels.sketch_sgd_epoch_many(C, model.salts, model.d, tr.users, tr.items, tr.values,
                                                            order, np.array(eta_t, dtype=np.float64), lam_arr,
                                                            clip, active)
        for m in np.flatnonzero(active):
            lm = float(loss[m])
            rec = {"epoch": t + 1, "eta_t": eta_t[m], "train_loss": lm / max(1, len(tr)),
                   "n_applied": int(n_app[m]), "n_skipped": int(n_skip[m])}
            if track:
                sm = model_of(model, C, m)
                for name in track:
                    rec[f"{name}_rmse"] = rmse(sm, getattr(data, name))
            histories[m].append(rec)
            if not math.isfinite(lm):
                active[m] = False
        if not active.any():
            break
    return C, histories


def model_of(model: MFModel, C: np.ndarray, m: int) -> MFModel:
    """Model ``m`` of the cells ``C`` (k, w, M) that :func:`train_many` trained from ``model`` (a copy)."""
    return MFModel("sketch", model.n_users, model.n_items, model.d, model.k, model.w,
                   C=np.ascontiguousarray(C[:, :, m]), salts=model.salts)


def fit_runs(runs: list[dict], data: PreparedSplit) -> list[dict]:
    """``[fit_eval(data=data, **run) for run in runs]``, bit for bit: runs that differ only in ``eta`` and ``lam``
    go through :func:`fit_eval_many` together (in the order given)."""
    groups: dict[tuple, list[int]] = {}
    for n, run in enumerate(runs):
        key = repr(sorted((key, val) for key, val in run.items() if key not in ("eta", "lam")))
        groups.setdefault(key, []).append(n)
    out: list[dict | None] = [None] * len(runs)
    for idx in groups.values():
        rest = {key: val for key, val in runs[idx[0]].items() if key not in ("eta", "lam")}
        method = rest.pop("method")
        res = fit_eval_many(method, data, [(runs[n]["eta"], runs[n]["lam"]) for n in idx], **rest)
        for n, r in zip(idx, res):
            out[n] = r
    return out


def line_search(evaluate, *, eta_grid, lam_grid, refine: float = 0.5, evaluate_many=None) -> tuple[dict, list[dict]]:
    """Two-stage line search in log scale (module docstring). ``evaluate(eta, lam) -> dict`` with ``val_rmse``.

    Stage 1 evaluates the coarse grid ``eta_grid × lam_grid``; stage 2 the 3 × 3 grid ``best · 10^{-refine, 0,
    +refine}`` around the stage-1 winner (λ = 0 stays 0). Ties go to the smaller η, then the smaller λ.
    ``evaluate_many(points) -> [evaluate(eta, lam) for eta, lam in points]`` (optional): a stage's new points in one
    call (trained together, e.g. by :func:`fit_eval_many`); the results must be ``evaluate``'s.
    Returns (best result, all results)."""
    cache: dict[tuple[float, float], dict] = {}

    def stage(points):
        keys = [(float(f"{eta:.6g}"), float(f"{lam:.6g}")) for eta, lam in points]
        new = list(dict.fromkeys(key for key in keys if key not in cache))
        results = evaluate_many(new) if evaluate_many is not None and new else [evaluate(*key) for key in new]
        for key, res in zip(new, results):
            v = res["val_rmse"]
            res["val_rmse"] = v if math.isfinite(v) else float("inf")
            cache[key] = res
        return [cache[key] for key in keys]

    def best_of(cands):
        return min(cands, key=lambda r: (r["val_rmse"], r["eta"], r["lam"]))

    if not len(eta_grid) or not len(lam_grid):
        raise ParameterError("eta_grid and lam_grid must each list at least one value")
    best = best_of(stage([(e, lam) for e in eta_grid for lam in lam_grid]))
    if refine:
        f = [10.0 ** -refine, 1.0, 10.0 ** refine]
        around = [(best["eta"] * a, best["lam"] * b) for a in f for b in (f if best["lam"] > 0 else [1.0])]
        best = best_of(stage(around))
    return best, list(cache.values())
