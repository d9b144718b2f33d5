"""Balu (2016) thesis, Figure 5.2: recall@R of the two-stage search, synthetic (top) and SIFT1M (bottom).

Two-stage search for every method (Section 5.4.1): a shortlist of the database vectors nearest to the query's sketch in
Hamming distance, re-ranked by the asymmetric cosine estimate from the un-quantised query; recall@R is the share of
queries whose exact nearest neighbour (largest cosine) is within the first R. Synthetic: N = 1M uniform unit vectors,
10,000 queries, d = 8, L = 16, qoLSH M = 5, all five encoders. SIFT1M: d = 128, L = 256, M = 10, LSH / LSH+frame /
qoLSH (anti-sparse and the optimal quantizer are intractable there).

Real vectors. SIFT1M is used when it has been fetched (``python -m data_fetch sift1m``; TEXMEX fvecs read with the
checked loader ``dpmf_lib.data.loaders.read_vecs``). It cannot be downloaded on every machine, so two real vector sets
that are always available are run as well, each clearly labelled:

- ``ml-100k item factors``: the recommender setting of the chapter — item vectors learned from MovieLens 100K by a
  rank-``mf_rank`` ALS (``mf_reg``, ``mf_iters`` sweeps, on ratings minus the global mean) are the database and the
  users' vectors the queries; the nearest neighbour is the item with the largest cosine to the user vector;
- ``sklearn digits``: the 1,797 × 64 handwritten-digit images shipped in scikit-learn (``load_digits``), split at
  random into ``digits_n_queries`` queries and the rest as database.

Choices the thesis leaves open: the Hamming stage compares the query's sketch made by the same encoder as the
database's; ties in Hamming distance go to the smaller database index; anti-sparse codes come from the exact
facet-enumeration solver (:func:`dpmf_lib.lsh.encoders.encode_antisparse_facets`, the same codes as the LP, ~100×
faster at d = 8, L = 16; ``antisparse_solver: lp`` for the LP); re-ranking uses eq. 5.13 (``estimator: cos``;
``dot`` gives eq. 5.3); the shortlist keeps the paper's ratio 1,000 / 1M — ``round(shortlist_fraction · N)``,
at least ``shortlist_min`` — so that small databases are still filtered by the binary stage (1,000 of 1,682 items would
be no filter at all); R runs from 1 to the shortlist size. Vectors are normalised to unit norm (cosine search).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import lsh
from ..claims import Measurement
from ..data import load_ratings
from ..data.ratings import DataSource
from ..errors import ParameterError
from ..lsh.experiment_util import check_methods, check_positive_int, synthetic_source
from ..outputs import attach
from ..params import require_datasets
from ..plotting import figure, standin_title

LABELS = {"lsh": "LSH", "lsh+frame": "LSH+frame", "antisparse": "Anti-sparse", "optimal": "Optimal", "qolsh": "qoLSH"}
DATASETS = ("synthetic", "sift1m", "ml-100k", "digits")
SYN_LOW_R_CLAIM = "balu-fig5.2-synthetic-qolsh-beats-lsh-at-R1"
SYN_OPT_CLAIM = "balu-fig5.2-synthetic-optimal-best-at-R1"
SIFT_CLAIM = "balu-fig5.2-sift1m-qolsh-beats-lsh-at-R1"


# ----------------------------------------------------------------------------------------------------------- data
def sift1m_path():
    """Directory holding sift_base.fvecs / sift_query.fvecs (data/sift1m or $DPMF_DATA_MIRROR/sift1m), or None."""
    try:
        from data_fetch.fetch import dataset_dir, mirror_dir
    except ImportError:
        return None
    for d in (dataset_dir("sift1m"), mirror_dir("sift1m")):
        if d is not None and (d / "sift_base.fvecs").exists() and (d / "sift_query.fvecs").exists():
            return d
    return None


def load_sift1m(n_base: int, n_queries: int):
    from ..data.loaders import read_vecs

    root = sift1m_path()
    base = read_vecs(root / "sift_base.fvecs", count=n_base)
    query = read_vecs(root / "sift_query.fvecs", count=n_queries)
    src = DataSource("sift1m", True, None, f"TEXMEX ANN_SIFT1M from {root}: first {len(base):,} base, "
                                           f"{len(query):,} query vectors")
    return base, query, src


def als_factors(r, rank: int, reg: float, iters: int, seed):
    """Rank-``rank`` ALS on ratings minus their mean (ridge ``reg`` per solve): user (n_users, rank), item factors."""
    rng = np.random.default_rng(seed)
    mu = float(r.values.mean())
    ucsr, icsr = r.user_csr(), r.item_csr()
    U = (0.1 * rng.standard_normal((r.n_users, rank))).astype(np.float64)
    V = (0.1 * rng.standard_normal((r.n_items, rank))).astype(np.float64)
    eye = reg * np.eye(rank)

    def sweep(csr, other, out):
        for a in range(len(csr.indptr) - 1):
            s, e = csr.indptr[a], csr.indptr[a + 1]
            if s == e:
                out[a] = 0.0
                continue
            F = other[csr.indices[s:e]]
            out[a] = np.linalg.solve(F.T @ F + eye, F.T @ (csr.values[s:e] - mu))

    for _ in range(iters):
        sweep(ucsr, V, U)
        sweep(icsr, U, V)
    return U, V


def load_ml100k_factors(params):
    r = load_ratings("ml-100k")
    U, V = als_factors(r, int(params["mf_rank"]), float(params["mf_reg"]), int(params["mf_iters"]), params["seed"])
    keep_u = np.linalg.norm(U, axis=1) > 0
    keep_v = np.linalg.norm(V, axis=1) > 0
    src = r.source
    return V[keep_v], U[keep_u], src


def load_digits_split(n_queries: int, seed):
    from sklearn.datasets import load_digits

    X = load_digits().data.astype(np.float64)
    X = X[np.linalg.norm(X, axis=1) > 0]
    perm = np.random.default_rng(seed).permutation(len(X))
    q, b = perm[:n_queries], perm[n_queries:]
    import sklearn

    src = DataSource("sklearn-digits", True, None,
                     f"scikit-learn {sklearn.__version__} load_digits (1,797 x 64 real images of handwritten digits, "
                     f"UCI); {len(b):,} database / {len(q):,} query vectors, split seed {seed}")
    return X[b], X[q], src


# ----------------------------------------------------------------------------------------------------------- experiment
def shortlist_size(params, n: int) -> int:
    s = int(round(float(params["shortlist_fraction"]) * n))
    return int(min(n, max(int(params["shortlist_min"]), s)))


def recall_curves(base, query, methods, L, M, shortlist, estimator, seed, antisparse_max: int | None = None,
                  antisparse_solver: str = "facets"):
    """recall@R for R = 1..shortlist of every method on one (database, queries) pair. Returns {method: curve}."""
    base = lsh.normalize_rows(base)
    query = lsh.normalize_rows(query)
    truth = lsh.exact_nn(query, base)
    d = base.shape[1]
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    s_gauss, s_tight = ss.spawn(2)
    # the same tight frame for every method but "lsh" (Table 5.1: "We use the same tight frame for all the methods
    # except LSH"), Gaussian projections for "lsh"
    frames = {"gauss": lsh.gaussian_projections(d, L, np.random.default_rng(s_gauss)),
              "tight": lsh.tight_frame(d, L, np.random.default_rng(s_tight))}
    out = {}
    for m in methods:
        if m == "optimal" and L > 20:
            raise ParameterError(f"the optimal quantizer needs L <= 20 (got L={L}); drop it from the methods")
        if m == "antisparse" and antisparse_max is not None and len(base) > antisparse_max:
            continue  # too slow at this size for this profile; the notebook says so
        W = frames["gauss" if m == "lsh" else "tight"]
        idx = lsh.build_index(base, m, W=W, M=M, antisparse_solver=antisparse_solver)
        ranked = lsh.two_stage_search(idx, query, shortlist=shortlist, estimator=estimator)
        out[m] = lsh.recall_at(ranked, truth)
    return out


def run(params: dict) -> pd.DataFrame:
    require_datasets(params, kinds=None, extra=("synthetic", "digits"))  # first: before any data is loaded
    check_positive_int(params, "synth_d", "synth_L", "synth_n_base", "synth_n_queries", "real_L_factor",
                       "sift_n_base", "sift_n_queries", "digits_n_queries", "mf_rank", "mf_iters", "shortlist_min")
    datasets = list(params["datasets"])
    bad = [d for d in datasets if d not in DATASETS]
    if bad:
        raise ParameterError(f"unknown dataset(s) {bad} in 'datasets'; choose from {list(DATASETS)}")
    if params["estimator"] not in ("cos", "dot"):
        raise ParameterError(f"estimator must be 'cos' (eq. 5.13) or 'dot' (eq. 5.3), got {params['estimator']!r}")
    seed = params["seed"]
    s_syn_frame, s_syn_data, s_real = np.random.SeedSequence(seed).spawn(3)
    rows, sources, meas, skipped = [], [], [], []

    def add(curves, src, panel, d, L, M, n_base, n_q, S):
        sources.append(src)
        for m, curve in curves.items():
            for R, v in enumerate(curve, start=1):
                rows.append({"panel": panel, "method": LABELS[m], "key": m, "R": R, "recall": float(v),
                             "d": d, "L": L, "M": M if m == "qolsh" else np.nan, "n_base": n_base, "n_queries": n_q,
                             "shortlist": S, "dataset": src.label, "profile": params.get("profile")})

    for ds in datasets:
        if ds == "synthetic":
            d, L, M = int(params["synth_d"]), int(params["synth_L"]), int(params["synth_M"])
            methods = check_methods(params["synth_methods"], lsh.METHODS)
            rng = np.random.default_rng(s_syn_data)
            base = lsh.random_unit_vectors(int(params["synth_n_base"]), d, rng)
            query = lsh.random_unit_vectors(int(params["synth_n_queries"]), d, rng)
            S = shortlist_size(params, len(base))
            src = synthetic_source(d, len(base), seed)
            curves = recall_curves(base, query, methods, L, M, S, params["estimator"], s_syn_frame,
                                   antisparse_max=params.get("antisparse_max_base"),
                                   antisparse_solver=params["antisparse_solver"])
            add(curves, src, "synthetic", d, L, M, len(base), len(query), S)
            if {"qolsh", "lsh", "lsh+frame"} <= set(curves):
                best_lsh = max(curves["lsh"][0], curves["lsh+frame"][0], curves.get("antisparse", [-1])[0])
                note = f"recall@1 of qoLSH minus the best of LSH, LSH+frame, anti-sparse (if run); N={len(base):,}"
                meas.append(Measurement(SYN_LOW_R_CLAIM, curves["qolsh"][0] - best_lsh, src.label, True, note))
            if {"qolsh", "optimal"} <= set(curves):
                meas.append(Measurement(SYN_OPT_CLAIM, curves["optimal"][0] - curves["qolsh"][0], src.label, True,
                                        f"recall@1 optimal minus qoLSH; N={len(base):,}"))
            continue
        if ds == "sift1m":
            if sift1m_path() is None:
                skipped.append("sift1m: not fetched (python -m data_fetch sift1m); real vector sets ml-100k and "
                               "sklearn digits are shown instead")
                continue
            base, query, src = load_sift1m(int(params["sift_n_base"]), int(params["sift_n_queries"]))
        elif ds == "ml-100k":
            base, query, src = load_ml100k_factors(params)
            src = DataSource(src.dataset, src.real, src.checksum,
                             (src.note + "; " if src.note else "") + f"item factors of a rank-{params['mf_rank']} "
                             f"ALS (database) and user factors (queries)")
        else:
            base, query, src = load_digits_split(int(params["digits_n_queries"]), seed)
        d = base.shape[1]
        L, M = int(params["real_L_factor"]) * d, int(params["real_M"])
        methods = check_methods(params["real_methods"], lsh.METHODS)
        S = shortlist_size(params, len(base))
        curves = recall_curves(base, query, methods, L, M, S, params["estimator"], s_real)
        panel = {"sift1m": "SIFT1M", "ml-100k": "ML-100K item factors", "digits": "sklearn digits"}[ds]
        add(curves, src, panel, d, L, M, len(base), len(query), S)
        if ds == "sift1m" and {"qolsh", "lsh"} <= set(curves):
            meas.append(Measurement(SIFT_CLAIM, curves["qolsh"][0] - max(curves["lsh"][0], curves.get(
                "lsh+frame", [-1])[0]), src.label, src.real, f"recall@1 qoLSH minus best LSH; N={len(base):,}"))
    df = pd.DataFrame(rows)
    df.attrs["skipped"] = skipped
    return attach(df, sources=sources, measurements=meas)


def plot(df: pd.DataFrame, params: dict):
    panels = list(dict.fromkeys(df.panel))
    fig, axes = figure(ncols=1, nrows=len(panels), width=6.4, height=3.6)
    colors = {"LSH": "C0", "LSH+frame": "C2", "Anti-sparse": "C1", "Optimal": "C4", "qoLSH": "C3"}
    for ax, panel in zip(axes[:, 0], panels):
        g = df[df.panel == panel]
        for method, gm in g.groupby("method", sort=False):
            ax.plot(gm.R, gm.recall, color=colors.get(method), label=method)
        r = g.iloc[0]
        ax.set_xscale("log")
        ax.set_ylim(0, 1.02)
        ax.set_ylabel("recall@R")
        M = int(g.M.dropna().iloc[0]) if g.M.notna().any() else None
        ax.set_title(f"{panel} [{r.dataset}]: N={int(r.n_base):,}, {int(r.n_queries):,} queries, d={int(r.d)}, "
                     f"L={int(r.L)}" + (f", M={M}" if M else "") + f", shortlist {int(r.shortlist):,}", fontsize=9)
        ax.legend(fontsize=8, loc="lower right")
    axes[-1, 0].set_xlabel("R")
    fig.suptitle(standin_title("Balu 2016, Figure 5.2 — recall@R, two-stage search", df.dataset.unique()),
                 fontsize=10)
    fig.tight_layout()
    return fig
