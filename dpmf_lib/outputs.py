"""What a notebook writes, and the provenance that goes with it.

Every notebook ends with :meth:`NotebookRun.save`, which writes into ``figures/<name>/`` (the runner's canonical run)
or ``figures/_runs/<name>-<profile>-<hash>/`` (any other run):
``<name>.png`` and ``<name>.svg`` (the figure), ``<name>.csv`` (the plotted numbers, with the ``dataset`` column
naming real data or ``[synthetic stand-in]``), ``provenance.json`` (git commit, params, profile, datasets with
checksums or "synthetic stand-in", seeds, package versions, wall time) and ``measurements.json`` (values of
``params/claims.yaml`` claims, read by the report).
"""

from __future__ import annotations

import json
import os
import shutil
import platform
import re
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pandas as pd

from .claims import Measurement, merge_replicates
from .data.ratings import DataSource
from .notebook_params import RUN_DIR_VAR, RUN_NOTEBOOK_VAR, merge_named_parameters, scratch_dir
from .params import load_params
from .paths import REPO_ROOT, figures_dir

PACKAGES = ("numpy", "numba", "scipy", "pandas", "matplotlib", "seaborn", "scikit-learn", "papermill", "joblib",
            "faiss-cpu", "scikit-surprise", "libmf")


def attach(df: pd.DataFrame, sources=(), measurements=()) -> pd.DataFrame:
    """Record the data sources and claim measurements an experiment's DataFrame was built from (in ``df.attrs``)."""
    srcs = list(df.attrs.get("sources", []))
    for s in sources:
        d = s.as_dict() if isinstance(s, DataSource) else dict(s)
        if d not in srcs:
            srcs.append(d)
    meas = list(df.attrs.get("measurements", [])) + [m.as_dict() if isinstance(m, Measurement) else dict(m)
                                                      for m in measurements]
    df.attrs["sources"] = srcs
    df.attrs["measurements"] = meas
    return df


def git_state() -> dict:
    def git(*args):
        try:
            return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    return {"commit": git("rev-parse", "HEAD") or None, "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def package_versions() -> dict:
    out = {"python": platform.python_version()}
    for p in PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            pass
    return out


def seeds_of(params: dict) -> dict:
    return {k: v for k, v in params.items() if "seed" in k}


#: Columns that hold wall-clock measurements (times, throughputs, bandwidths): they differ between two runs of the same
#: seed, so :meth:`NotebookRun.save` moves them out of the main CSV into ``<name>_timings.csv``. A paper's value of
#: such a quantity (``paper_*``, ``*_paper``) is a constant and stays. Experiments can name more in ``df.attrs["timing_columns"]``.
TIMING_COLUMN = re.compile(r"^(seconds|wall|wall_s|runtime_s)$|seconds|_per_s$|^us_per_|GBps|GFLOPs")


def _is_paper_value(col: str) -> bool:
    return col.startswith("paper") or col.endswith("_paper")


def timing_columns(df: pd.DataFrame) -> list[str]:
    named = set(df.attrs.get("timing_columns", []))
    return [c for c in df.columns
            if c in named or (TIMING_COLUMN.search(str(c)) and not _is_paper_value(str(c)))]


class NotebookRun:
    """One execution of a notebook: resolved parameters, a start time, :meth:`replicate` and :meth:`save`.

    ``NotebookRun("liu_fig1", profile, overrides)`` loads ``params/liu_fig1.yaml`` at ``profile`` with ``overrides``
    (unknown names raise), applies the shared plotting style and starts the clock. A notebook passes
    ``namespace=globals()`` as well: its ``parameters`` cell defines one ``name = None`` per parameter of the file, and
    the ones set to something else (by papermill's ``-p name value``, or by hand) become overrides; a name papermill
    injected that is not a parameter raises (:func:`merge_named_parameters`). A run by hand makes the runner's checks
    of overrides here, before the experiment starts (:func:`dpmf_lib.runner.preflight.preflight`: values, memory,
    work far past the profile's).

    Where it writes: only the runner (``python -m dpmf_lib.reproduce``), with no overrides, writes the canonical
    ``figures/<name>/`` (it hands the kernel a staging directory and renames it into place when the run succeeds).
    Any other run — papermill by hand, JupyterLab, overrides — writes to ``figures/_runs/<name>-<profile>-<hash>/``
    and says so, so a hand run can never replace the outputs the report is built from.
    """

    def __init__(self, name: str, profile: str = "ci", overrides: dict | None = None, *, out_dir: Path | None = None,
                 namespace: dict | None = None):
        from .plotting import style

        self.name = name
        self.profile = profile
        self.overrides = dict(overrides or {})
        if namespace is not None:
            self.overrides = merge_named_parameters(name, namespace, self.overrides)
        self.params = load_params(name, profile, self.overrides)
        staging = os.environ.get(RUN_DIR_VAR)
        # Run by the runner: write into its staging directory, which it renames into place (figures/<name>/, or
        # figures/_runs/… for a run with `--set`). Canonical only without overrides; the runner checks that too.
        self.by_runner = bool(staging) and os.environ.get(RUN_NOTEBOOK_VAR) == name and out_dir is None
        if not self.by_runner:  # the runner made these checks before starting this kernel; by hand they are made here
            from .runner.preflight import preflight

            for warning in preflight(name, profile, self.overrides, hand=True):
                print(warning)
        self.canonical = self.by_runner and not self.overrides
        if out_dir is not None:
            self.out_dir = Path(out_dir).resolve()
            if self.out_dir == (figures_dir() / name).resolve():
                raise ValueError(f"out_dir {out_dir} is the canonical figures/{name}/, which only the runner "
                                 "(python -m dpmf_lib.reproduce) writes; pick another directory")
        elif self.by_runner:
            self.out_dir = Path(staging)
        else:
            self.out_dir = scratch_dir(name, self.params)
            print(f"Outputs go to {self.out_dir} (a scratch run: figures/{name}/ is written only by "
                  "`python -m dpmf_lib.reproduce`, with no overrides).")
        self.measurements: list[dict] | None = None
        self.replicate_seeds: list[int] = [self.params.get("seed", 0)]
        self.started = time.time()
        style()

    # -- claims over seeds -------------------------------------------------------------------------------------------
    def _judged_claims(self) -> dict:
        from .claims import load_claims

        return {c.id: c for c in load_claims()}

    def seeds_needed(self, measurements: list[dict]) -> int:
        """Seeds the claims measured here need at this profile.

        Only measurements that can get a verdict at this profile count: on the real dataset the claim is about (a
        stand-in's is never judged), not ``shown_not_judged``, and with ``min_profile`` at most this profile (below it the value is indicative and
        more seeds would not change that). 1 when none does, or every one is deterministic.
        """
        from .claims import PROFILE_RANK

        claims = self._judged_claims()
        unknown = sorted({m["claim"] for m in measurements} - set(claims))
        if unknown:
            raise ValueError(f"{self.name}: measurements of claims not in params/claims.yaml: {unknown}")
        rank = PROFILE_RANK.get(self.profile, 0)
        need = [claims[m["claim"]].seeds_needed(self.profile) for m in measurements
                if m["real"] and m["dataset"] == claims[m["claim"]].dataset and not claims[m["claim"]].shown_not_judged
                and PROFILE_RANK[claims[m["claim"]].min_profile] <= rank]
        return max(need, default=1)

    def replicate(self, run, df: pd.DataFrame, n_seeds: int | None = None) -> pd.DataFrame:
        """Measure the claims over seeds: re-run ``run(params)`` at ``seed + 1 … seed + n − 1`` and keep only their
        claim measurements (the figure and the CSV stay those of ``seed``).

        ``n`` is what the claims measured here need at this profile (3 at ``ci``, 5 at ``paper``, more where a claim
        asks; 1 when every claim is deterministic or shown without a verdict). Returns one row per measurement: mean,
        95 % interval over the seeds, and the verdict it would get (see :mod:`dpmf_lib.verdicts`).
        """
        from tqdm import tqdm  # a text bar: tqdm.auto would want ipywidgets in the kernel and warn in every notebook

        base = list(df.attrs.get("measurements", []))
        n = self.seeds_needed(base) if n_seeds is None else int(n_seeds)
        seed0 = int(self.params.get("seed", 0))
        seeds = [seed0 + k for k in range(max(1, n))]
        runs = [base]
        for s in tqdm(seeds[1:], desc=f"{self.name}: claims at further seeds", disable=len(seeds) < 2):
            runs.append(list(run({**self.params, "seed": s}).attrs.get("measurements", [])))
        self.measurements = merge_replicates(runs, seeds)
        self.replicate_seeds = seeds
        return self.claims_table()

    def claims_table(self) -> pd.DataFrame:
        """The claim measurements of this run with their interval and the verdict they would get. Judging reads the
        run and never fails it (:mod:`dpmf_lib.verdicts` is not a run input): a rule that raises, or a verdicts module
        that does not import, shows as "could not be judged"."""
        claims = self._judged_claims()
        rows = []
        self._half_widths: dict[int, float | None] = {}
        self._bounds: dict[int, tuple] = {}
        for m in self._measurements():
            c = claims.get(m["claim"])
            j, rule_text, error = None, None, ""
            try:
                from .verdicts import judge_measurement, rule

                if c is not None:
                    rule_text = rule(c)
                    j = judge_measurement(c, {**m, "profile": self.profile})
            except Exception as exc:  # noqa: BLE001 — any failure of the rules is shown, not raised
                j, error = None, f"could not be judged: {type(exc).__name__}: {exc}"
            if not m["real"]:
                verdict = "stand-in only"
            elif c is not None and m["dataset"] != c.dataset:
                verdict = f"not judged here (the claim is about {c.dataset})"
            elif error:
                verdict = "inconclusive"
            else:
                verdict = c.shown_not_judged and "shown, not judged" or j.verdict
            rows.append({"claim": m["claim"], "setting": m.get("setting", ""), "data": m["dataset"],
                         "paper": None if c is None else c.reference, "ours": j.mean if j else m["value"],
                         "95% interval": None if j is None or j.lo is None else f"[{j.lo:.4g}, {j.hi:.4g}]",
                         "seeds": len(m.get("values") or [m["value"]]),
                         "rule": rule_text, "verdict": verdict, "why": error or ("" if j is None else j.reason)})
            self._half_widths[len(rows) - 1] = None if j is None or j.lo is None else (j.hi - j.lo) / 2
            self._bounds[len(rows) - 1] = (None, None, False) if j is None else (j.lo, j.hi, j.asymmetric)
        return pd.DataFrame(rows)

    def _measurements(self) -> list[dict]:
        return self.measurements or []

    # -- what a reader sees ------------------------------------------------------------------------------------------
    def summary(self, df: pd.DataFrame, max_rows: int = 12) -> "Shown":
        """A tidy view of the experiment's table: the table itself when it is short, else one row per column (its
        values or range); the whole table is ``<name>.csv`` once :meth:`save` has run."""
        return summarize(df, max_rows=max_rows, csv=f"{self.name}.csv")

    def results(self) -> "Shown":
        """The notebook's result against the paper: one row per claim measured here — the paper's quote, its value,
        ours ± the 95 % interval over the seeds, the data, and the verdict (with its reason when it is not final).
        Claims of ``params/claims.yaml`` for this notebook that this run did not measure are listed below it."""
        from .claims import load_claims

        claims = {c.id: c for c in load_claims()}
        if self.measurements is None:
            raise RuntimeError("call nb.replicate(...) or nb.save(...) first: the claims are measured there")
        table = self.claims_table()
        rows = []
        for i, r in enumerate(table.to_dict("records")):
            c = claims.get(r["claim"])
            n = r["seeds"]
            ours = "—" if r["ours"] is None or r["ours"] != r["ours"] else f"{r['ours']:.4g}"
            half = self._half_widths.get(i)
            if half is not None and half == half and n > 1:
                lo, hi, asymmetric = self._bounds[i]
                ours += f" [{lo:.3g}, {hi:.3g}]" if asymmetric else f" ± {half:.2g}"
            ours += f" ({n} seed{'s' if n != 1 else ''})"
            paper = "—" if c is None or c.reference is None else f"{c.reference:g}"
            if c is not None and c.unit:
                paper += f" {c.unit}"
            rule = r["rule"] or ""
            if c is not None and rule and c.direction is not None:
                rule = f"{c.direction} ({rule})"
            judged = r["verdict"] in ("differs", "inconclusive", "indicative")  # not: stand-in, other data, shown
            verdict = r["verdict"] + (f" — {r['why']}" if r["why"] and judged else "")
            rows.append({"claim": r["claim"] + (f" [{r['setting']}]" if r["setting"] else ""),
                         "quote": _clip(c.quote if c else "", 90), "data": r["data"], "paper": paper,
                         "ours ± 95%": ours, "rule": rule, "verdict": _clip(verdict, 160)})
        measured = {r["claim"] for r in table.to_dict("records")}
        missing = sorted(c.id for c in claims.values() if c.notebook == self.name and c.id not in measured)
        head = (f"{self.name} at profile {self.profile}, seeds {self.replicate_seeds}: "
                f"{len(rows)} measurement(s) of the paper's claims (rules: dpmf_lib/verdicts.py).")
        if not rows:
            head = (f"{self.name} at profile {self.profile}: no claim of params/claims.yaml is measured here — compare "
                    "the figure with the paper's by eye.")
        foot = f"Claims of this notebook not measured in this run: {', '.join(missing)}." if missing else ""
        return Shown(pd.DataFrame(rows), head, foot)

    # -- outputs -----------------------------------------------------------------------------------------------------
    def save(self, df: pd.DataFrame, fig=None, *, extra_tables: dict[str, pd.DataFrame] | None = None) -> Path:
        """Write figure, CSV, provenance and measurements into a temporary directory, then rename it into place.

        Wall-clock columns (:func:`timing_columns`) go to ``<name>_timings.csv`` (the whole table, timings included)
        instead of the main CSV, so the same seed and thread count give a byte-identical ``<name>.csv``.
        """
        if "dataset" not in df.columns:
            raise ValueError(f"{self.name}: the DataFrame needs a `dataset` column (Ratings.source.label) so that "
                             "the CSV says which rows come from real data and which from a synthetic stand-in")
        if self.measurements is None:  # not replicated: the claims get this run's values only
            own = list(df.attrs.get("measurements", []))
            self.seeds_needed(own)  # unknown claim ids fail here, not in the report
            self.measurements = merge_replicates([own], self.replicate_seeds)
        measurements = [{**m, "profile": self.profile} for m in self.measurements]
        final = self.out_dir
        tmp = final.parent / f".{final.name}.tmp-{os.getpid()}"
        if self.by_runner:  # the runner's staging directory is itself renamed into place by the runner
            tmp = final
        else:
            shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True, exist_ok=True)
        stem = tmp / self.name
        if fig is not None:
            fig.savefig(stem.with_suffix(".png"))
            fig.savefig(stem.with_suffix(".svg"), metadata={"Date": None})
        timing = timing_columns(df)
        df.drop(columns=timing).to_csv(stem.with_suffix(".csv"), index=False)
        if timing:
            df.to_csv(tmp / f"{self.name}_timings.csv", index=False)
        for table_name, table in (extra_tables or {}).items():
            table.to_csv(tmp / f"{self.name}_{table_name}.csv", index=False)
        sources = df.attrs.get("sources", [])
        provenance = {
            "notebook": self.name,
            "profile": self.profile,
            "canonical": self.canonical,
            "params": self.params,
            "overrides": self.overrides,
            "datasets": sources or [{"dataset": None, "real": None, "note": "no dataset (synthetic by design)"}],
            "uses_standin": any(not s.get("real", True) for s in sources),
            "seeds": seeds_of(self.params),
            "claim_seeds": self.replicate_seeds,
            "timing_columns": timing,
            "git": git_state(),
            "packages": package_versions(),
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": sys.version.split()[0],
                        "numba_threads": _numba_threads()},
            "wall_time_s": round(time.time() - self.started, 3),
            "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        _write_json(tmp / "provenance.json", provenance)
        _write_json(tmp / "measurements.json", measurements)
        if tmp != final:
            old = final.parent / f".{final.name}.old-{os.getpid()}"
            if final.exists():
                os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        return final


def _clip(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


class Shown:
    """A table with a line above (and optionally below) it, shown as HTML in a notebook and as text elsewhere; the
    table itself is ``.table``."""

    def __init__(self, table: pd.DataFrame, head: str = "", foot: str = ""):
        self.table, self.head, self.foot = table, head, foot

    def _repr_html_(self) -> str:
        import html

        body = "" if self.table.empty else self.table.to_html(index=False, na_rep="", escape=True)
        parts = [f"<p>{html.escape(self.head)}</p>" if self.head else "", body,
                 f"<p>{html.escape(self.foot)}</p>" if self.foot else ""]
        return "\n".join(p for p in parts if p)

    def __repr__(self) -> str:
        with pd.option_context("display.max_colwidth", 60, "display.width", 160):
            body = "" if self.table.empty else self.table.to_string(index=False, na_rep="")
        return "\n".join(p for p in (self.head, body, self.foot) if p)


def _is_scalar_column(col: pd.Series) -> bool:
    from collections.abc import Hashable

    return bool(col.map(lambda v: isinstance(v, Hashable) and not isinstance(v, tuple)
                        and getattr(v, "ndim", 0) == 0).all())


def _fmt(v) -> str:
    if isinstance(v, float):
        return "" if v != v else f"{v:.4g}"
    return str(v)


def summarize(df: pd.DataFrame, max_rows: int = 12, csv: str | None = None) -> Shown:
    """A tidy view of an experiment's table: short tables as they are (columns holding lists or arrays left out,
    numbers to 4 significant digits); longer ones as one row per column with its distinct values, or its range."""
    scalar = [c for c in df.columns if _is_scalar_column(df[c])]
    dropped = [str(c) for c in df.columns if c not in scalar]
    where = f"; the whole table is {csv}" if csv else ""
    head = f"{len(df)} rows × {len(df.columns)} columns{where}."
    foot = f"Not shown (lists or arrays per row): {', '.join(dropped)}." if dropped else ""
    view = df[scalar]
    if len(df) <= max_rows:
        return Shown(view.apply(lambda col: col.map(_fmt) if col.dtype.kind == "f" else col), head, foot)
    rows = []
    for c in scalar:
        col = view[c]
        values = col.dropna().unique()
        if col.dtype.kind in "iuf" and len(values) > 8:
            shown = f"{_fmt(col.min())} … {_fmt(col.max())}"
        else:
            shown = ", ".join(_fmt(v) for v in values[:8]) + (" …" if len(values) > 8 else "")
        rows.append({"column": str(c), "distinct": len(values), "values": _clip(shown, 100),
                     "missing": int(col.isna().sum()) or ""})
    return Shown(pd.DataFrame(rows), head + " One row per column:", foot)


def _numba_threads():
    try:
        import numba

        return numba.get_num_threads()
    except Exception:  # numba missing or not initialised: provenance still gets written
        return None


def _write_json(path: Path, obj) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=_jsonable) + "\n")
    os.replace(tmp, path)


def _jsonable(o):
    try:
        import numpy as np

        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:
        pass
    if isinstance(o, Path):
        return str(o)
    return str(o)
