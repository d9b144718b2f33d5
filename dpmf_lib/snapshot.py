"""The committed reference snapshot of the ``paper`` profile: ``results/paper/<name>/``.

A reviewer should see the papers' settings without spending a day of compute, so the results of ``paper`` runs are
kept in the repository — the table (``<name>.csv``), the claims' values over seeds (``measurements.json``), the
provenance, the run record and the figure (a 256-colour PNG: :func:`compact_figure`) — never data files or executed
notebooks.

    make paper-snapshot [ONLY=pattern]             # run the paper profile and keep each successful run
    python -m dpmf_lib.snapshot --take [--only P]  # keep paper runs already in figures/
    python -m dpmf_lib.snapshot --compact          # re-encode the kept figures (rows taken before compacting)
    python -m dpmf_lib.snapshot                    # list the snapshot: current, stale (and why), missing
    python -m dpmf_lib.snapshot --scorecard        # write and print results/paper/SCORECARD.md and the README's headline
                                                   # (every listing writes both)
    python -m dpmf_lib.snapshot --canary-record    # record each current row's canary (dpmf_lib.runner.canary)
    python -m dpmf_lib.snapshot --revalidate       # re-run stale rows' canaries; identical → current (revalidated)

A snapshot row is **current** when its run hash equals the working tree's ``paper`` run hash for that notebook
(profile, params, notebook, the code it imports, its claims: :func:`dpmf_lib.runner.hashing.run_hash`) and every dataset
it read is in the state it read. A stale row stays in the snapshot so its numbers can still be seen, but the report
marks it stale with the reason, and its measurements are never judged as if current. A row stale only by a code
change whose canary run is byte-identical is current again, labelled ``current (revalidated at <commit>)``
(:mod:`dpmf_lib.runner.canary`).

``results/paper/SCORECARD.md`` (:func:`scorecard_markdown`) is what the snapshot answers, first: per paper and
chapter, the claims judged at ``paper`` on real data — reproduced, differs by cause, inconclusive by reason and which
way the data lean, needs data — then the reproduced claims with their intervals and every differs / inconclusive
with its cause and evidence. It is rewritten by every listing, so a committed scorecard is current when the listing
leaves it unchanged (tested); so is the README's headline, the per-paper counts read from it (:func:`readme_headline`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from .paths import REPO_ROOT, figures_dir

#: what a snapshot keeps of a run (``{name}`` is the notebook's name); nothing else is copied
KEPT = ("{name}.csv", "{name}_timings.csv", "measurements.json", "provenance.json", "run.json", "{name}.png")
#: a table larger than this is kept gzipped (``<name>.csv.gz``, written with mtime 0 so the same table gives the same
#: bytes), to keep the committed snapshot at a few MB; ``pandas.read_csv`` reads either
GZIP_ABOVE_BYTES = 256 * 1024


def table_path(name: str) -> Path | None:
    """The snapshot's table of ``name`` (``.csv`` or ``.csv.gz``), or None."""
    for suffix in (".csv", ".csv.gz"):
        f = snapshot_dir() / name / f"{name}{suffix}"
        if f.exists():
            return f
    return None


def table_bytes(name: str) -> bytes:
    """The snapshot's table of ``name`` as the CSV bytes the run wrote (decompressed)."""
    import gzip

    f = table_path(name)
    if f is None:
        raise FileNotFoundError(f"no table of {name} in {snapshot_dir()}")
    return gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_bytes()


def _gzip_large_tables(folder: Path) -> None:
    import gzip

    for f in folder.glob("*.csv"):
        if f.stat().st_size > GZIP_ABOVE_BYTES:
            with open(f, "rb") as src, open(f.with_suffix(".csv.gz"), "wb") as raw, \
                    gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as gz:
                shutil.copyfileobj(src, gz)
            f.unlink()


def compact_figure(path: Path) -> bool:
    """Re-encode a run's figure as a 256-colour palette PNG (median cut, no dithering, optimized): about a third of
    the bytes of matplotlib's RGBA output (6.9 → 2.4 MB over the 41 rows of 2026-11-27) with the same lines, text and
    fills — a plot has few colours; only antialiased edges lose shades. The snapshot's figure is a preview: the
    numbers are its table and measurements, and the run's own PNG stays in ``figures/<name>/``. A colour bar (the
    heatmaps of Figs 4.1, 4.2, 4.6) shows its gradient in bands of a few levels: read values from the cells' numbers
    or the table, not from the colour. A palette PNG is left
    as it is (so compacting twice changes nothing). Returns whether the file was rewritten."""
    from PIL import Image

    with Image.open(path) as im:
        if im.mode == "P":
            return False
        q = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    tmp = path.with_name(f".{path.name}.tmp")
    q.save(tmp, "PNG", optimize=True)
    os.replace(tmp, path)
    return True


def snapshot_dir() -> Path:
    """``results/paper`` in the repository; ``$DPMF_SNAPSHOT_DIR`` moves it (tests)."""
    return Path(os.environ.get("DPMF_SNAPSHOT_DIR", REPO_ROOT / "results" / "paper")).resolve()


def snapshot_dir_text() -> str:
    """The snapshot's folder as the runner prints it (relative to the repository where it lies inside)."""
    d = snapshot_dir()
    return str(d.relative_to(REPO_ROOT)) if d.is_relative_to(REPO_ROOT) else str(d)


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def take(name: str, fig_dir: Path | None = None) -> Path:
    """Copy the ``paper`` run in ``figures/<name>/`` into the snapshot, replacing the old row whole."""
    src = (fig_dir or figures_dir()) / name
    run = _read_json(src / "run.json") or {}
    if run.get("status") != "ok" or run.get("profile") != "paper":
        raise ValueError(f"{src} does not hold a successful paper-profile run (run.json: status "
                         f"{run.get('status')!r}, profile {run.get('profile')!r}); run "
                         f"`python -m dpmf_lib.reproduce --profile paper --only {name}` first")
    from .runner.staleness import damaged

    broken = damaged(src, run)
    if broken:
        raise ValueError(f"{src} is damaged: {'; '.join(broken)}; run `python -m dpmf_lib.reproduce --profile paper "
                         f"--only {name}` again before taking it")
    dest = snapshot_dir() / name
    staging = dest.parent / f".staging-{name}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for pattern in KEPT:
        f = src / pattern.format(name=name)
        if f.exists():
            shutil.copy2(f, staging / f.name)
    _gzip_large_tables(staging)
    if (staging / f"{name}.png").exists():
        compact_figure(staging / f"{name}.png")
    from .runner.execution import output_checksums, swap_into_place

    if (staging / "run.json").exists():  # the row's own files (gzipped table, compacted figure), as kept here
        (staging / "run.json").write_text(json.dumps({**run, "outputs": output_checksums(staging)}, indent=2) + "\n")

    swap_into_place(staging, dest)
    return dest


def row_state(entry, digest: str | None = None) -> tuple[str, str | None]:
    """``("current", None)``, ``("stale", why)``, ``("damaged", why)`` (a file of the row is not as it was taken: the
    file is named) or ``("missing", None)`` for one registry entry. A row revalidated
    by its canary for this run hash (:mod:`dpmf_lib.runner.canary`) is current; :func:`revalidated_at` tells it
    apart, and every listing shows it as ``current (revalidated at <commit>)``."""
    from .runner.hashing import run_hash
    from .runner.staleness import DAMAGED, staleness

    out = snapshot_dir() / entry.name
    if not (out / "run.json").exists():
        return "missing", None
    digest = digest or run_hash(entry, "paper")
    why = staleness(entry, digest, out_dir=out, profile="paper")
    if why and revalidated_at(entry, digest):
        own = (_read_json(out / "run.json") or {}).get("hash")
        why = staleness(entry, own, out_dir=out)  # data and seed rules still count
    if why and why.startswith(DAMAGED):
        return "damaged", why
    return ("stale", why) if why else ("current", None)


def revalidated_at(entry, digest: str | None = None) -> str | None:
    """The commit at which the row's canary revalidated it for the tree's run hash (``digest``), else None."""
    from .runner.hashing import run_hash
    from .runner.canary import revalidated_at as _at

    return _at(entry, snapshot_dir() / entry.name, digest or run_hash(entry, "paper"))


def state_label(row: dict) -> str:
    """``current``, ``current (revalidated at <commit>)``, ``stale`` or ``missing``."""
    if row["state"] == "current" and row.get("revalidated"):
        return f"current (revalidated at {row['revalidated']})"
    return row["state"]


def rows() -> list[dict]:
    """One row per implemented notebook: its snapshot state, why stale, whether current only by canary
    revalidation (the commit), the measured time and peak memory."""
    from .registry import load_registry
    from .runner.hashing import run_hash

    out = []
    for e in load_registry()[1]:
        if not e.implemented:
            continue
        digest = run_hash(e, "paper")
        state, why = row_state(e, digest)
        run = _read_json(snapshot_dir() / e.name / "run.json") or {}
        revalidated = revalidated_at(e, digest) if state == "current" and run.get("hash") != digest else None
        out.append({"name": e.name, "paper": e.paper, "state": state, "why": why, "revalidated": revalidated,
                    "runtime_s": run.get("runtime_s"), "peak_rss_mib": run.get("peak_rss_mib"),
                    "cpu": run.get("cpu")})
    return out


def measurements(current_only: bool = True) -> list[dict]:
    """The snapshot's measurements (of current rows only, unless ``current_only`` is False)."""
    found = []
    for r in rows():
        if r["state"] == "current" or (r["state"] == "stale" and not current_only):
            found.extend(_read_json(snapshot_dir() / r["name"] / "measurements.json") or [])
    return found


def paper_verdicts() -> dict[str, dict]:
    """Per claim, its verdict from the current snapshot rows (``verdict``, ``mean``, ``lo``, ``hi``, ``n``,
    ``reason``), or, when its notebook's row is stale or missing, ``{"verdict": None, "state": …, "why": …}``."""
    from .dependencies import current_claims
    from .verdicts import judge

    states = {r["name"]: r for r in rows()}
    current = measurements(current_only=True)
    out = {}
    for c in current_claims():
        row = states.get(c.notebook, {"state": "missing", "why": None})
        if row["state"] != "current":
            out[c.id] = {"verdict": None, "state": row["state"], "why": row["why"]}
            continue
        j = judge(c, current)
        out[c.id] = {"verdict": j.verdict, "mean": j.mean, "lo": j.lo, "hi": j.hi, "n": j.n, "reason": j.reason,
                     "category": j.category, "lean": j.lean, "asymmetric": j.asymmetric,
                     "state": "current", "why": None}
    return out


# ---------------------------------------------------------------------------------------------------------------------
# the scorecard: what the paper snapshot says about each paper, first

SCORECARD = "SCORECARD.md"


def chapter(claim) -> str:
    """The paper and chapter a claim belongs to on the scorecard (Balu's thesis by chapter; the privacy ledger's
    audits of a paper's stated ε count with that paper)."""
    from .report import paper_short_name
    from .registry import load_registry

    papers = load_registry()[0]
    short = paper_short_name(claim.paper, papers.get(claim.paper))
    if claim.paper == "balu":
        for prefix, ch in (("balu-3", "ch. 3"), ("balu-4", "ch. 4"), ("balu-table4", "ch. 4"), ("balu-5", "ch. 5"),
                           ("balu-fig5", "ch. 5")):
            if claim.id.startswith(prefix):
                return f"{short}, {ch}"
    return short


def _value_text(v: dict) -> str:
    if v.get("mean") is None:
        return "—"
    lo, hi = v.get("lo"), v.get("hi")
    if lo is None or hi is None or lo == hi or v.get("n", 0) < 2:
        return f"{v['mean']:.4g}" + (f" (n = {v['n']})" if v.get("n") else "")
    if v.get("asymmetric"):
        return f"{v['mean']:.4g} [{lo:.3g}, {hi:.3g}] (n = {v['n']})"
    return f"{v['mean']:.4g} ± {(hi - lo) / 2:.2g} (n = {v['n']})"


def scorecard(states: list[dict] | None = None, verdicts: dict | None = None) -> dict:
    """The paper snapshot's verdicts per paper and chapter, for :func:`scorecard_markdown` and the report page:
    ``groups`` (counts: judged on real data, reproduced, differs by cause, inconclusive by reason with the way the
    data lean, needs data, shown), ``reproduced`` / ``differs`` / ``inconclusive`` / ``shown`` rows, the rows'
    states (``rows_text``) and the causes' meanings."""
    from collections import Counter

    from .claims import DIFFERS, INCONCLUSIVE, NOT_MEASURED, REPRODUCED, SHOWN, STANDIN_ONLY
    from .dependencies import current_claims
    from .verdicts import CAUSE_TEXT, notes_for

    states = rows() if states is None else states
    verdicts = paper_verdicts() if verdicts is None else verdicts
    current = [r for r in states if r["state"] == "current"]
    revalidated = [r for r in current if r.get("revalidated")]
    rows_text = f"{len(current)} of {len(states)} notebooks current"
    if revalidated:
        at: dict[str, int] = {}
        for r in revalidated:
            at[r["revalidated"]] = at.get(r["revalidated"], 0) + 1
        rows_text += (f", {len(revalidated)} of them only by canary revalidation ("
                      + ", ".join(f"{n} at {c}" for c, n in sorted(at.items(), key=lambda kv: -kv[1]))
                      + "; `python -m dpmf_lib.snapshot` names them)")
    stale = [r["name"] for r in states if r["state"] != "current"]
    if stale:
        rows_text += f"; stale or missing (their claims are not judged): {', '.join(stale)}"
    groups, lists = {}, {REPRODUCED: [], DIFFERS: [], INCONCLUSIVE: [], SHOWN: []}
    for c in current_claims():
        v = verdicts.get(c.id) or {}
        notes = notes_for(c)
        g = groups.setdefault(chapter(c), {"name": chapter(c), "claims": 0, REPRODUCED: 0, DIFFERS: Counter(),
                                          INCONCLUSIVE: Counter(), "lean": Counter(), "needs data": 0, SHOWN: 0,
                                          "stale": 0})
        g["claims"] += 1
        verdict = v.get("verdict")
        row = {"id": c.id, "where": c.where, "paper": g["name"], "value": _value_text(v), "unit": c.unit,
               "reason": v.get("reason") or "", "cause": notes.cause, "evidence": notes.evidence,
               "category": v.get("category") or "", "lean": v.get("lean") or "", "fair_form": notes.fair_form,
               "dataset": c.dataset, "headline_for": ""}
        if verdict is None:
            g["stale"] += 1
        elif verdict == REPRODUCED:
            g[REPRODUCED] += 1
            lists[REPRODUCED].append(row)
        elif verdict == DIFFERS:
            g[DIFFERS][notes.cause or "no cause given"] += 1
            lists[DIFFERS].append(row)
        elif verdict == INCONCLUSIVE:
            g[INCONCLUSIVE][row["category"] or "other"] += 1
            if row["lean"]:
                g["lean"][row["lean"]] += 1
            lists[INCONCLUSIVE].append(row)
        elif verdict in (STANDIN_ONLY, NOT_MEASURED):
            g["needs data"] += 1
        elif verdict == SHOWN:
            g[SHOWN] += 1
            lists[SHOWN].append(row)
    for g in groups.values():
        g["judged"] = g[REPRODUCED] + sum(g[DIFFERS].values()) + sum(g[INCONCLUSIVE].values())
    # a fair claim is the headline of the paper's form of its comparison: say so on its row, with what that form says
    paper_forms: dict[str, list] = {}  # one fair claim can head several paper's forms
    for r in lists[SHOWN]:
        if r["fair_form"]:
            paper_forms.setdefault(r["fair_form"], []).append(r)
    for r in (row for key in (REPRODUCED, DIFFERS, INCONCLUSIVE) for row in lists[key]):
        forms = paper_forms.get(r["id"], [])
        r["headline_for"] = "; ".join(
            f"{f['id']} (the paper's form; alone: {f['reason'].split('would be: ', 1)[-1].split(' (', 1)[0]})"
            for f in forms)
    return {"rows_text": rows_text, "groups": list(groups.values()), "reproduced": lists[REPRODUCED],
            "differs": lists[DIFFERS], "inconclusive": lists[INCONCLUSIVE], "shown": lists[SHOWN],
            "causes": CAUSE_TEXT}


def _claim_cell(r: dict) -> str:
    head = f" — headline for {r['headline_for']}" if r.get("headline_for") else ""
    return f"`{r['id']}`{head}".replace("|", "\\|")


def _counts(counter) -> str:
    return ", ".join(f"{k} {n}" for k, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))


def scorecard_markdown(card: dict | None = None) -> str:
    """``results/paper/SCORECARD.md``: per paper and chapter, the claims judged at ``paper`` on real data, then the
    reproduced ones with value ± 95 % interval, then every differs / inconclusive with its cause and evidence."""
    card = card or scorecard()

    def cell(text) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    out = ["# Scorecard: the papers' claims at the `paper` profile",
           "",
           "What the committed `paper` snapshot (`results/paper/`) says, judged on real data by the rules of "
           f"`dpmf_lib/verdicts.py`. Snapshot: {card['rows_text']}. Written by `python -m dpmf_lib.snapshot`; every "
           "claim, with the `ci` run beside it, is in the report (`figures/REPORT.md`, `figures/index.html`).",
           "",
           "| paper | claims | judged on real data | reproduced | differs (by cause) | inconclusive (by reason) "
           "| inconclusive, the data lean to | needs data | shown, not judged |",
           "|---|---:|---:|---:|---|---|---|---:|---:|"]
    for g in card["groups"]:
        differs, inconc = g["differs"], g["inconclusive"]
        d_text = f"{sum(differs.values())} ({_counts(differs)})" if differs else "0"
        i_text = f"{sum(inconc.values())} ({_counts(inconc)})" if inconc else "0"
        stale = f" ({g['stale']} stale, not judged)" if g["stale"] else ""
        out.append(f"| {g['name']}{stale} | {g['claims']} | {g['judged']} | {g['reproduced']} | {d_text} | {i_text} "
                   f"| {_counts(g['lean']) or '—'} | {g['needs data']} | {g['shown, not judged']} |")
    total = {k: sum(g[k] if isinstance(g[k], int) else sum(g[k].values()) for g in card["groups"])
             for k in ("claims", "judged", "reproduced", "differs", "inconclusive", "needs data", "shown, not judged")}
    out.append(f"| **all** | {total['claims']} | {total['judged']} | {total['reproduced']} | {total['differs']} | "
               f"{total['inconclusive']} | | {total['needs data']} | {total['shown, not judged']} |")
    out += ["",
            "*Needs data*: measured only on a synthetic stand-in, or not at all, because the paper's dataset (Netflix, "
            "Yahoo! Music, ML-1M, ML-10M, EachMovie, SIFT1M) is not on this machine. *Inconclusive* reasons: a guard "
            "failed, a guard the rule table requires was not measured (a re-take records it), the interval straddles "
            "the line, or a privacy audit of a mechanism with no proof. Causes: "
            + "; ".join(f"*{k}* — {v}" for k, v in card["causes"].items()) + ".",
            "",
            "## Reproduced",
            "",
            "| claim | paper | ours (mean ± 95 % interval over seeds) |",
            "|---|---|---|"]
    out += [f"| {_claim_cell(r)} | {cell(r['paper'])} | {cell(r['value'])} {cell(r['unit'])} |"
            for r in card["reproduced"]]
    for title, key in (("Differs", "differs"), ("Inconclusive", "inconclusive")):
        out += ["", f"## {title}", "",
                "| claim | ours | " + ("why inconclusive | the data lean to | " if key == "inconclusive" else "")
                + "cause | evidence |",
                "|---|---|" + ("---|---|" if key == "inconclusive" else "") + "---|---|"]
        for r in card[key]:
            why = f"{cell(r['category'] or 'other')} | {cell(r['lean'] or '—')} | " if key == "inconclusive" else ""
            out.append(f"| {_claim_cell(r)} | {cell(r['value'])} | {why}"
                       f"{cell(r['cause'] or '**no cause given**')} | {cell(r['evidence'] or '')} |")
    if card["shown"]:
        out += ["", "## Shown, not judged", "",
                "| claim | why |", "|---|---|"]
        out += [f"| {r['id']} | {cell(r['reason'][:240] + ('…' if len(r['reason']) > 240 else ''))} |"
                for r in card["shown"]]
    return "\n".join(out) + "\n"


#: the README's headline block lies between these lines; :func:`write_scorecard` rewrites what is between them
README_BEGIN = "<!-- scorecard headline: written by `python -m dpmf_lib.snapshot --scorecard` from results/paper/ -->"
README_END = "<!-- end of the scorecard headline -->"


def readme_headline(scorecard_text: str) -> str:
    """The README's headline (between :data:`README_BEGIN` and :data:`README_END`), read from a scorecard's text
    (:func:`scorecard_markdown`, as committed in ``results/paper/SCORECARD.md``): per paper, the claims judged on real
    data, reproduced, differs, inconclusive, needs data and shown, and how many snapshot rows are current. The
    README shows what the committed scorecard says, never more."""
    import re

    lines = scorecard_text.splitlines()
    top = next(i for i, line in enumerate(lines) if line.startswith("| paper | claims |"))
    out = ["| paper | claims | judged on real data | reproduced | differs | inconclusive | needs data | shown, not judged |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for line in lines[top + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        paper, counts = cells[0], [re.match(r"\d*", c).group(0) or "0" for c in cells[1:]]
        # the scorecard's columns: claims, judged, reproduced, differs, inconclusive, lean (not a count), needs, shown
        counts = counts[:5] + counts[6:8]
        if paper == "**all**":
            out.append("| **all** | " + " | ".join(f"**{c}**" for c in counts) + " |")
        else:
            out.append(f"| {paper} | " + " | ".join(counts) + " |")
    rows = re.search(r"Snapshot: (.*?)\. Written by", scorecard_text)
    out += ["", f"Snapshot: {rows.group(1) if rows else 'unknown'}."]
    return "\n".join(out)


def write_readme_headline(readme: Path | None = None, scorecard_text: str | None = None) -> Path | None:
    """Rewrite the block between :data:`README_BEGIN` and :data:`README_END` of ``README.md`` with
    :func:`readme_headline` of the scorecard (default: the committed ``results/paper/SCORECARD.md``); None (nothing
    written) when the README has no such block."""
    readme = readme or REPO_ROOT / "README.md"
    if scorecard_text is None:
        scorecard_text = (REPO_ROOT / "results" / "paper" / SCORECARD).read_text(encoding="utf-8")
    try:
        text = readme.read_text(encoding="utf-8")
    except OSError:
        return None
    head, sep, rest = text.partition(README_BEGIN + "\n")
    _, sep2, tail = rest.partition(README_END)
    if not sep or not sep2:
        return None
    new = head + sep + readme_headline(scorecard_text) + "\n" + README_END + tail
    if new != text:
        readme.write_text(new, encoding="utf-8")
    return readme


def write_scorecard(path: Path | None = None) -> Path:
    """Write :func:`scorecard_markdown` to ``results/paper/SCORECARD.md`` (or ``path``). Written to its own place,
    from the repository's own snapshot, it rewrites the README's headline block too (:func:`write_readme_headline`)."""
    default = path is None
    path = path or snapshot_dir() / SCORECARD
    text = scorecard_markdown()
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    if default and snapshot_dir() == (REPO_ROOT / "results" / "paper").resolve():
        write_readme_headline(scorecard_text=text)
    return path


PLOT_CELL = "fig = experiment.plot(df, nb.params)"


def replot(name: str) -> str:
    """Re-render a current row's figure from its own table with the tree's plot code: ``"updated"`` or
    ``"unchanged"`` (the same pixels).

    A change of a plot function only restyles; its canary table is byte-identical, so the row revalidates but keeps
    the figure its run drew. This redraws it as the notebook would: ``experiment.plot(df, params)`` on the row's
    whole table (``<name>_timings.csv`` where kept, the wall-clock columns included) at the ``paper`` parameters,
    saved with the notebook's settings and compacted like a taken row; the new figure's sha256 goes into
    ``run.json``'s ``outputs`` with the commit it was drawn at (``figure_redrawn_at``). A redraw by the code that ran
    gives the committed figure pixel for pixel (docs/staleness.md). Refused (ValueError) for a
    row that is not current (its table need not be what this code computes: re-take it) and for a notebook whose
    figure is not drawn by exactly ``fig = experiment.plot(df, nb.params)``."""
    import importlib
    import tempfile

    import numpy as np
    import pandas as pd
    from PIL import Image

    from .params import load_params
    from .registry import load_registry
    from .runner.canary import _commit
    from .runner.execution import sha256_of
    from .runner.hashing import experiment_module

    entry = next((e for e in load_registry()[1] if e.name == name and e.implemented), None)
    if entry is None:
        raise ValueError(f"{name} is not an implemented notebook (see params/registry.yaml)")
    state, why = row_state(entry)
    if state != "current":
        raise ValueError(f"{name} is {state}{': ' + why if why else ''}; only a current row's figure can be redrawn "
                         f"from its table: re-take it (make paper-snapshot ONLY={name})")
    cells = json.loads(entry.notebook.read_text(encoding="utf-8"))["cells"]
    if not any("".join(c["source"]).strip() == PLOT_CELL for c in cells if c["cell_type"] == "code"):
        raise ValueError(f"{entry.notebook} does not draw its figure with a cell `{PLOT_CELL}`: re-take {name} instead")
    row = snapshot_dir() / name
    table = next((f for f in (row / f"{name}_timings.csv", row / f"{name}_timings.csv.gz") if f.exists()), None)
    df = pd.read_csv(table or table_path(name))
    experiment = importlib.import_module(experiment_module(entry))
    fig = experiment.plot(df, load_params(name, "paper"))
    import matplotlib.pyplot as plt

    try:
        with tempfile.TemporaryDirectory(dir=row.parent) as tmp:
            png = Path(tmp) / f"{name}.png"
            fig.savefig(png)
            compact_figure(png)
            old = row / f"{name}.png"
            with Image.open(png) as a, Image.open(old) as b:
                same = a.size == b.size and np.array_equal(np.asarray(a.convert("RGB")), np.asarray(b.convert("RGB")))
            if same:
                return "unchanged"
            os.replace(png, old)
    finally:
        plt.close(fig)
    run = _read_json(row / "run.json") or {}
    outputs = {**(run.get("outputs") or {}), f"{name}.png": sha256_of(old)}
    run = {**run, "outputs": outputs, "figure_redrawn_at": _commit()}
    tmp = row / ".run.json.tmp"
    tmp.write_text(json.dumps(run, indent=2) + "\n")
    os.replace(tmp, row / "run.json")
    return "updated"


def times_table() -> str:
    """The measured `paper` time, peak memory and result-cache state of every row, from its ``run.json`` (the
    record the runner writes), as a Markdown table with the total; what ``docs/performance.md`` shows."""
    lines = ["| notebook | paper | state | minutes | peak MiB | cache entries at start |", "|---|---|---|---:|---:|---:|"]
    total = 0.0
    for r in rows():
        run = _read_json(snapshot_dir() / r["name"] / "run.json") or {}
        minutes = (run.get("runtime_s") or 0) / 60
        total += minutes
        warm = (run.get("result_cache") or {}).get("entries_at_start")
        lines.append(f"| {r['name']} | {r['paper']} | {state_label(r)} | {minutes:.1f} | "
                     f"{run.get('peak_rss_mib') or 0:.0f} | {warm if warm is not None else ''} |")
    lines.append(f"| **total** | | | **{total:.0f}** ({total / 60:.1f} h) | | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from .registry import load_registry, select

    ap = argparse.ArgumentParser(prog="python -m dpmf_lib.snapshot", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--take", action="store_true", help="copy successful paper runs from figures/ into the snapshot")
    ap.add_argument("--only", default=None, help="shell pattern(s) of notebook names, comma-separated")
    ap.add_argument("--compact", action="store_true",
                    help="re-encode the snapshot's figures as palette PNGs (what --take does to each row it keeps)")
    ap.add_argument("--canary-record", action="store_true",
                    help="run the canary profile of current rows that have no canary for their code, and keep its "
                         "fingerprint beside the row (dpmf_lib.runner.canary)")
    ap.add_argument("--force", action="store_true",
                    help="with --canary-record: record again rows that have a canary for their code")
    ap.add_argument("--revalidate", action="store_true",
                    help="re-run the canaries of rows stale only by a code change; a byte-identical canary table "
                         "marks the row current (revalidated at <commit>)")
    ap.add_argument("--times", action="store_true",
                    help="print the rows' measured paper times and peak memory (from run.json) as a Markdown table")
    ap.add_argument("--replot", action="store_true",
                    help="redraw current rows' figures from their tables with the tree's plot code (a restyle "
                         "revalidates a row but keeps its old figure); rows that are not current are refused")
    ap.add_argument("--scorecard", action="store_true",
                    help=f"write {SCORECARD} (the paper verdicts per paper and chapter) and the README's headline "
                         "block, and print the scorecard; every listing writes both too")
    args = ap.parse_args(argv)
    if args.times:
        print(times_table())
        return 0
    if args.scorecard:
        path = write_scorecard()
        print(path.read_text(encoding="utf-8"))
        return 0
    if args.canary_record or args.revalidate:
        from .runner import canary

        chosen = [e for e in select(load_registry()[1], args.only) if e.implemented]
        if args.canary_record:
            canary.each(chosen, "record", snapshot_dir(), force=args.force)
        if args.revalidate:
            canary.each(chosen, "revalidate", snapshot_dir())
    if args.replot:
        for e in select(load_registry()[1], args.only):
            if e.implemented:
                try:
                    print(f"{e.name}: figure {replot(e.name)}")
                except ValueError as err:
                    print(f"{e.name}: not redrawn: {err}")
    if args.compact:
        done = [f for f in sorted(snapshot_dir().glob("*/*.png")) if compact_figure(f)]
        print(f"{len(done)} figure(s) re-encoded as palette PNGs in {snapshot_dir()}")
    if args.take:
        taken = 0
        for e in select(load_registry()[1], args.only):
            run = _read_json(figures_dir() / e.name / "run.json") or {}
            if run.get("status") == "ok" and run.get("profile") == "paper":
                print(f"kept {take(e.name)}")
                taken += 1
        print(f"{taken} paper run(s) kept in {snapshot_dir()}")
    from .runner.execution import cpu_record

    here = cpu_record()
    for r in rows():
        t = "" if r["runtime_s"] is None else f"{r['runtime_s'] / 60:6.1f} min  {r['peak_rss_mib'] or 0:6.0f} MiB"
        # a row from another CPU (or from before the CPU was recorded) need not replay byte for byte here
        # (runner.execution.cpu_record); a stale or missing row is re-run anyway
        if r["state"] != "current" or r["cpu"] == here:
            other = ""
        elif not r["cpu"]:
            other = "  (CPU not recorded: taken before run.json kept it)"
        else:
            other = (f"  (taken on another CPU or numpy build: {r['cpu'].get('model')}, numpy {r['cpu'].get('numpy')}"
                     f" SIMD {r['cpu'].get('numpy_simd')})")
        print(f"{r['name']:32s} {state_label(r):8s} {t}  {r['why'] or ''}{other}")
    # on stderr: stdout stays one line per row (name, state, ...), which scripts and tests parse
    print(f"scorecard: {write_scorecard()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
