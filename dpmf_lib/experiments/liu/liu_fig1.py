"""Liu, Wang & Smola (2015), Figure 1 and the tier sizes of section 5.2.

Figure 1 plots, on log-log axes, how many items have a given number of ratings ("Many movies have 100 ratings or
less, while the majority of ratings focuses on a small number of movies"). Section 5.2 builds on it: items are cut
into popularity tiers (Top 500, Next 4,000, the long tail); "the Top 500 block fits into L1 cache (this amounts to
44% of all movie ratings in the Netflix dataset)" and "even in the extreme case of 2048 dimensions we can fit about
55% of all ratings into cache, albeit L3 cache".

What we compute, for every dataset in ``params["datasets"]`` (real when fetched, else a labelled synthetic stand-in):

- ``distribution``: for each distinct number of ratings c, the number of items with exactly c ratings (the figure);
- ``tiers``: the share of all ratings in each tier (``params["tiers"]`` = tier sizes, the rest is the tail);
- ``cache_fit``: for each cache level of *this* machine (sizes as the OS reports them) and each dimension in
  ``params["cache_dims"]``, how many float32 item vectors (d values plus one bias) fit, and the share of ratings
  those most-rated items hold. The paper does not state its cache sizes, so the 55% figure is checked against
  this machine's L3 (32 MiB on the machine this was written on); the row says which size was used.

Choices: the tier shares are computed on all ratings (no train/test split, as the paper's statement is about the
dataset). On a stand-in these numbers follow from the generator's power-law parameters (derived from the published
shape, never from this claim) — the report shows them but judges the claim only on real data.

The stand-in's left tail: its shape model is fitted to three published facts (max, median, total; see
:mod:`dpmf_lib.data.standin`), which cannot give the real tail of rarely rated movies — the full-size Netflix stand-in
has no movie below ~130 ratings where the real data goes down to 3, so the "100 ratings or less" region of the
paper's caption is empty on it. :func:`standin_floor_notes` measures the floor from the plotted data and the plot
says it on the distribution panel. Neither claim of this figure reads that region: both are shares of the
most-rated items (the head), and the tail enters only through the total.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...bench.machine import cache_sizes
from ...claims import Measurement
from ...data import load_ratings
from ...data.datasets import standin_permitted
from ...outputs import attach
from ...params import require_datasets
from ...plotting import figure, standin_title

TOP500_CLAIM = "liu-5.2-top500-share-netflix"
L3_CLAIM = "liu-5.2-l3-share-d2048-netflix"


def count_distribution(item_counts: np.ndarray) -> pd.DataFrame:
    """Number of items with each distinct rating count (items with zero ratings are left out, as on a log axis)."""
    values, n_items = np.unique(item_counts[item_counts > 0], return_counts=True)
    return pd.DataFrame({"ratings_per_item": values, "n_items": n_items})


def log_binned(dist: pd.DataFrame, bins_per_decade: int = 10) -> pd.DataFrame:
    """Items per logarithmic bin of the rating count (the tail of a 100M-rating set is unreadable count by count)."""
    c = dist.ratings_per_item.to_numpy(dtype=float)
    edges = 10 ** np.arange(0, np.log10(c.max()) + 1.0 / bins_per_decade + 1e-9, 1.0 / bins_per_decade)
    idx = np.searchsorted(edges, c, side="right") - 1
    items = np.bincount(idx, weights=dist.n_items.to_numpy(dtype=float), minlength=len(edges))
    centers = np.sqrt(edges * edges * 10 ** (1.0 / bins_per_decade))
    keep = items > 0
    return pd.DataFrame({"bin_center": centers[keep], "n_items": items[keep]})


def top_share(item_counts: np.ndarray, k: int) -> float:
    """Share of all ratings held by the ``k`` most-rated items."""
    total = item_counts.sum()
    if total == 0:
        return float("nan")
    top = np.sort(item_counts)[::-1][:k]
    return float(top.sum() / total)


def tier_shares(item_counts: np.ndarray, tiers: list[int]) -> pd.DataFrame:
    """Rows ``tier, first_rank, n_items, share``: consecutive popularity tiers of the given sizes, then the tail."""
    order = np.sort(item_counts)[::-1]
    total = order.sum()
    rows, start = [], 0
    names = [f"top {tiers[0]}"] + [f"next {t}" for t in tiers[1:]] + ["tail"]
    bounds = list(np.cumsum(tiers)) + [len(order)]
    for name, stop in zip(names, bounds):
        stop = min(int(stop), len(order))
        rows.append({"tier": name, "first_rank": start + 1, "n_items": stop - start,
                     "share": float(order[start:stop].sum() / total) if total else float("nan")})
        start = stop
    return pd.DataFrame(rows)


def cache_fit(item_counts: np.ndarray, dims: list[int], caches: dict[str, int]) -> pd.DataFrame:
    """How many d-dimensional float32 item vectors (+ bias) fit in each cache level, and their share of ratings."""
    rows = []
    for level, size in caches.items():
        for d in dims:
            n_fit = int(size // (4 * (d + 1)))
            rows.append({"cache": level, "cache_bytes": int(size), "dim": int(d), "items_fitting": n_fit,
                         "share": top_share(item_counts, n_fit)})
    return pd.DataFrame(rows)


def standin_floor_notes(df: pd.DataFrame, standin_scale: float = 1.0) -> list[tuple[str, int, str]]:
    """``(dataset label, fewest ratings on an item, note)`` for every stand-in in the ``distribution`` table.

    The floor is measured on the data (``ratings_per_item`` of the plotted rows), never hard-coded; the note adds the
    real dataset's published minimum where the registry knows it."""
    from data_fetch.registry import get_spec

    dist = df[(df.table == "distribution") & (~df.real.astype(bool))]
    out = []
    for label, g in dist.groupby("dataset", sort=False):
        floor = int(g.ratings_per_item.min())
        ds = str(label).split(" [")[0]
        try:
            real_min = get_spec(ds).min_item_count
        except Exception:  # an id the registry does not know (a user's own data is never a stand-in)
            real_min = None
        tail = f"the real tail goes to {real_min}" if real_min is not None else "not the real tail"
        scaled = f"; counts ×{standin_scale:g} of full size" if standin_scale != 1.0 else ""
        out.append((str(label), floor, f"{ds} stand-in: no item below {floor:,} rating{'s' * (floor != 1)}\n"
                                        f"(3-fact shape model: max, median, total;\n{tail}{scaled})"))
    return out


def run(params: dict) -> pd.DataFrame:
    """Long table with a ``table`` column (distribution / tiers / cache_fit) and a ``dataset`` label column."""
    require_datasets(params)  # first: before any data is loaded or model trained
    caches = cache_sizes()
    frames, sources, measurements = [], [], []
    for ds in params["datasets"]:
        r = load_ratings(ds, allow_standin=standin_permitted(ds), seed=params["seed"],
                     standin_scale=params["standin_scale"])
        label, real = r.source.label, r.source.real
        counts = r.item_counts()
        dist = count_distribution(counts).assign(table="distribution")
        tiers = tier_shares(counts, params["tiers"]).assign(table="tiers")
        fit = cache_fit(counts, params["cache_dims"], caches).assign(table="cache_fit")
        frames += [df.assign(dataset=label, real=real, dataset_users=r.n_users, dataset_items=r.n_items,
                             dataset_ratings=r.n_ratings) for df in (dist, tiers, fit)]
        sources.append(r.source)
        measurements.append(Measurement(TOP500_CLAIM, top_share(counts, 500), label, real,
                                        note=f"{r.n_ratings:,} ratings, {r.n_items:,} items"))
        if "L3" in caches:
            l3 = fit[(fit.cache == "L3") & (fit.dim == 2048)]
            if len(l3):
                measurements.append(Measurement(L3_CLAIM, float(l3.share.iloc[0]), label, real,
                                                note=f"L3 = {caches['L3'] // 2**20} MiB: {int(l3.items_fitting.iloc[0])}"
                                                     " item vectors of 2048 float32"))
    df = pd.concat(frames, ignore_index=True)
    return attach(df, sources=sources, measurements=measurements)


#: the paper's Section 5.2 number drawn on the tier bars: the 500 most-rated Netflix items hold 44 % of the ratings
PAPER_TOP500_NETFLIX = 0.44


def plot(df: pd.DataFrame, params: dict):
    from matplotlib.lines import Line2D

    from ...plotting import OKABE_ITO, ROLES

    fig, axes = figure(ncols=2, width=5.2, height=4.4)
    ax, ax2 = axes[0]
    dist = df[df.table == "distribution"]
    colors = {}
    looks = iter(("paper", "compared", "ours", "ours-alt", "ours-2"))
    for label, g in dist.groupby("dataset", sort=False):
        binned = log_binned(g)
        look = ROLES[next(looks, "ours-2")]
        (line,) = ax.loglog(binned.bin_center, binned.n_items, marker=look["marker"], ls=look["ls"],
                            color=look["color"], ms=3.5, lw=1.2, label=label)
        colors[label] = line.get_color()
    ax.axvline(100, color="0.5", ls=":", lw=1)
    notes = ["dotted: 100 ratings (caption: \"100 ratings or less\")"]
    for label, floor, note in standin_floor_notes(df, params.get("standin_scale", 1.0)):
        ax.axvline(floor, color=colors.get(label, "0.3"), ls="--", lw=0.8)
        notes.append("dashed: " + note)
    ax.set_xlabel("number of ratings of an item")
    ax.set_ylabel("number of items (10 log bins per decade)")
    ax.set_title("Items by number of ratings")
    legend = ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(0.0, -0.2), frameon=False)  # off the curves
    tiers = df[df.table == "tiers"]
    pivot = tiers.pivot_table(index="dataset", columns="tier", values="share", sort=False)
    pivot = pivot[[c for c in tiers.tier.drop_duplicates()]]
    tier_colors = [OKABE_ITO[c] for c in ("blue", "orange", "grey", "green", "purple")][:pivot.shape[1]]
    pivot.plot.barh(stacked=True, ax=ax2, width=0.6, color=tier_colors, edgecolor="white", lw=0.5)
    for i, (_, row) in enumerate(pivot.iterrows()):
        if row.iloc[0] >= 0.05:  # a label wider than its bar would be unreadable
            ax2.text(row.iloc[0] / 2, i, f"{row.iloc[0]:.0%}", va="center", ha="center", fontsize=8, color="white")
    rows = [i for i, name in enumerate(pivot.index) if str(name).startswith("netflix")]
    if rows:  # the paper's top-500 share beside ours on the Netflix bar
        ax2.plot([PAPER_TOP500_NETFLIX] * len(rows), rows, marker="|", color="#000000", ms=26, mew=2.5, ls="none",
                 label=f"paper: top 500 = {PAPER_TOP500_NETFLIX:.0%} (Netflix)")
    ax2.set_xlabel("share of all ratings")
    ax2.set_ylabel("")
    ax2.set_xlim(0, 1)
    ax2.set_title("Popularity tiers (Section 5.2)")
    handles, labels = ax2.get_legend_handles_labels()
    handles = [Line2D([], [], marker="|", color="#000000", ms=12, mew=2.5, ls="none") if lab.startswith("paper") else h
               for h, lab in zip(handles, labels)]
    ax2.legend(handles, labels, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2,
               frameon=False)  # off the bars
    fig.suptitle(standin_title("Liu et al. 2015, Figure 1", df.dataset.unique()), fontsize=10)
    fig.tight_layout()
    fig.canvas.draw()
    y = ax.transAxes.inverted().transform(legend.get_window_extent())[0][1]
    ax.text(0.0, y - 0.02, "\n".join(notes), transform=ax.transAxes, fontsize=7, color="0.2", va="top", ha="left")
    return fig
