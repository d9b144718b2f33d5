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
from scipy import stats

from ... import lsh
from ...claims import Measurement
from ...data import load_ratings
from ...data.ratings import DataSource
from ...errors import ParameterError
from ...lsh.experiment_util import check_methods, check_positive_int, synthetic_source
from ...outputs import attach
from ...params import require_datasets
from ...plotting import figure, standin_title

LABELS = {"lsh": "LSH", "lsh+frame": "LSH+frame", "antisparse": "Anti-sparse", "optimal": "Optimal", "qolsh": "qoLSH"}
DATASETS = ("synthetic", "sift1m", "ml-100k", "digits")
SYN_LOW_R_CLAIM = "balu-fig5.2-synthetic-qolsh-beats-lsh-at-R1"
SYN_OPT_CLAIM = "balu-fig5.2-synthetic-optimal-best-at-R1"
SIFT_CLAIM = "balu-fig5.2-sift1m-qolsh-beats-lsh-at-R1"
PAIRED_COLUMNS = ("paired_vs", "paired_diff_r1", "paired_se_r1", "paired_p_mcnemar", "paired_p_one_sided",
                  "queries_qolsh_only", "queries_other_only")


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
    from ...data.loaders import read_vecs

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


def paired_r1(hit_a: np.ndarray, hit_b: np.ndarray) -> dict:
    """Paired comparison over the same queries of two methods' hits at R = 1 (booleans, one per query).

    ``diff`` = recall@1(a) − recall@1(b); ``se`` its paired standard error (sd of the per-query differences / √n);
    ``p`` the exact two-sided McNemar test (``scipy.stats.binomtest`` on the discordant queries: a hit by one method
    only), ``p_greater`` the one-sided p-value for "a beats b". Queries both methods get right or wrong carry no
    information on the difference; this is why the paired test is much sharper than comparing two recalls.
    """
    a, b = np.asarray(hit_a, bool), np.asarray(hit_b, bool)
    if a.shape != b.shape or a.ndim != 1 or not len(a):
        raise ParameterError(f"paired_r1 needs two equal-length 1-d hit vectors, got {a.shape} and {b.shape}")
    only_a, only_b = int((a & ~b).sum()), int((b & ~a).sum())
    n_disc = only_a + only_b
    diff = (a.astype(float) - b.astype(float))
    se = float(diff.std(ddof=1) / np.sqrt(len(a))) if len(a) > 1 else float("nan")
    if n_disc:
        p = float(stats.binomtest(only_a, n_disc, 0.5).pvalue)
        p_g = float(stats.binomtest(only_a, n_disc, 0.5, alternative="greater").pvalue)
    else:
        p = p_g = 1.0
    return {"diff": float(diff.mean()), "se": se, "p": p, "p_greater": p_g, "only_a": only_a, "only_b": only_b,
            "n": int(len(a))}


def recall_curves(base, query, methods, L, M, shortlist, estimator, seed, antisparse_max: int | None = None,
                  antisparse_solver: str = "facets", hits: dict | None = None):
    """recall@R for R = 1..shortlist of every method on one (database, queries) pair. Returns {method: curve}.
    ``hits``: if a dict, it receives {method: per-query bool array "exact NN ranked first"} (for paired tests)."""
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
        if hits is not None:
            hits[m] = np.asarray(ranked)[:, 0] == np.asarray(truth).reshape(-1)
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
    paired = {}

    def add_paired(hits, panel):
        if "qolsh" in hits:
            for other in hits:
                if other != "qolsh":
                    paired[(panel, other)] = paired_r1(hits["qolsh"], hits[other])

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
            hits = {}
            curves = recall_curves(base, query, methods, L, M, S, params["estimator"], s_syn_frame,
                                   antisparse_max=params.get("antisparse_max_base"),
                                   antisparse_solver=params["antisparse_solver"], hits=hits)
            add(curves, src, "synthetic", d, L, M, len(base), len(query), S)
            add_paired(hits, "synthetic")
            if {"qolsh", "lsh", "lsh+frame"} <= set(curves):
                rivals = [m for m in ("lsh", "lsh+frame", "antisparse") if m in curves]
                best = max(rivals, key=lambda m: curves[m][0])
                pt = paired_r1(hits["qolsh"], hits[best])
                note = (f"recall@1 of qoLSH minus the best of LSH, LSH+frame, anti-sparse (if run; here {LABELS[best]});"
                        f" N={len(base):,}; paired over {pt['n']:,} queries: SE {pt['se']:.4f}, one-sided McNemar "
                        f"p = {pt['p_greater']:.3g}")
                meas.append(Measurement(SYN_LOW_R_CLAIM, curves["qolsh"][0] - curves[best][0], src.label, True, note,
                                        guards={"paired_p_one_sided": pt["p_greater"]}))
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
        hits = {}
        curves = recall_curves(base, query, methods, L, M, S, params["estimator"], s_real, hits=hits)
        panel = {"sift1m": "SIFT1M", "ml-100k": "ML-100K item factors", "digits": "sklearn digits"}[ds]
        add(curves, src, panel, d, L, M, len(base), len(query), S)
        add_paired(hits, panel)
        if ds == "sift1m" and {"qolsh", "lsh"} <= set(curves):
            best = max([m for m in ("lsh", "lsh+frame") if m in curves], key=lambda m: curves[m][0])
            pt = paired_r1(hits["qolsh"], hits[best])
            meas.append(Measurement(SIFT_CLAIM, curves["qolsh"][0] - curves[best][0], src.label, src.real,
                                    f"recall@1 qoLSH minus best LSH ({LABELS[best]}); N={len(base):,}; paired over "
                                    f"{pt['n']:,} queries: SE {pt['se']:.4f}, one-sided McNemar p = "
                                    f"{pt['p_greater']:.3g}", guards={"paired_p_one_sided": pt["p_greater"]}))
    df = pd.DataFrame(rows)
    # paired significance at R = 1 over the same queries: on each other method's R = 1 row, qoLSH minus that method
    for col in PAIRED_COLUMNS:
        df[col] = np.nan if col != "paired_vs" else ""
    for (panel, other), pt in paired.items():
        sel = (df.panel == panel) & (df.key == other) & (df.R == 1)
        df.loc[sel, list(PAIRED_COLUMNS)] = ["qoLSH minus this", pt["diff"], pt["se"], pt["p"], pt["p_greater"],
                                             pt["only_a"], pt["only_b"]]
    df.attrs["paired_r1"] = {f"{p}|qolsh-vs-{o}": v for (p, o), v in paired.items()}
    df.attrs["skipped"] = skipped
    return attach(df, sources=sources, measurements=meas)


def plot(df: pd.DataFrame, params: dict):
    from ...plotting import legend_below
    from ._balu_ch5_plot import look

    panels = list(dict.fromkeys(df.panel))
    fig, axes = figure(ncols=1, nrows=len(panels), width=6.4, height=3.0)
    for ax, panel in zip(axes[:, 0], panels):
        g = df[df.panel == panel]
        for method, gm in g.groupby("method", sort=False):
            ax.plot(gm.R, gm.recall, lw=1.6, ms=5, markevery=0.1, label=method, **look(method))
        r = g.iloc[0]
        ax.set_xscale("log")
        ax.set_ylim(0, 1.3)  # headroom for the paired-test box
        ax.set_ylabel("recall@R")
        M = int(g.M.dropna().iloc[0]) if g.M.notna().any() else None
        ax.set_title(f"{panel} [{r.dataset}]: N={int(r.n_base):,}, {int(r.n_queries):,} queries, d={int(r.d)}, "
                     f"L={int(r.L)}" + (f", M={M}" if M else "") + f", shortlist {int(r.shortlist):,}", fontsize=9)
        if "paired_vs" in g.columns:
            pr = g[(g.R == 1) & g.paired_diff_r1.notna()]
            rivals = pr[pr.key != "optimal"]  # the tractable rivals; the optimal quantizer is the bound, not a rival
            lines = []
            for _, p in pr[pr.key == "lsh"].iterrows():
                lines.append(p)
            if len(rivals):
                best = rivals.loc[rivals.recall.idxmax()]
                if best.key != "lsh":
                    lines.append(best)
            if lines:
                ax.text(0.02, 0.97, "R = 1, paired over queries (exact McNemar):\n" + "\n".join(
                    f"qoLSH − {p.method} = {p.paired_diff_r1:+.3f} ± {1.96 * p.paired_se_r1:.3f}, p = "
                    f"{p.paired_p_mcnemar:.2g} ({int(p.queries_qolsh_only)} vs {int(p.queries_other_only)} queries)"
                    for p in lines), transform=ax.transAxes, fontsize=7, va="top", ha="left",
                        bbox=dict(fc="w", ec="0.7", alpha=0.9))
    axes[-1, 0].set_xlabel("R (log)")
    fig.suptitle(standin_title("Balu 2016, Figure 5.2 — recall@R, two-stage search", df.dataset.unique()),
                 fontsize=10)
    fig.tight_layout()
    legend_below(fig, axes, ncol=5)
    return fig
