"""``figures/REPORT.md`` and ``figures/index.html``: one row per figure/table of the papers, one row per claim.

Figure rows come from the registry (so unimplemented ones show "not yet"), joined with the runner's last canonical
run in ``figures/<name>/``. A run's outputs are read only when its ``run.json`` says ``ok`` *and* it is current
(same run hash, same data state: :func:`dpmf_lib.runner.staleness.staleness`); a failed or stale run is listed with the
reason and none of its measurements reach a verdict. Claim rows judge every measurement of each claim
(:func:`dpmf_lib.verdicts.judge`).

Both files are rendered from the Jinja2 templates ``dpmf_lib/templates/report.{html,md}.j2`` (context:
:func:`page_context`): summary counts and the legend first, then one section per paper (its short name from
``short:`` in params/registry.yaml) with its figure rows and its claim rows. Every figure row and every claim row has
an anchor (``#liu_fig7``, ``#<claim id>``); a figure row links its executed notebook rendered to HTML, the .ipynb,
CSV, SVG, PNG, provenance and run record, and its claims. The executed notebooks are rendered with nbconvert **at
report time** into ``figures/_html/<name>.html`` (only when the .ipynb is newer than its rendering), so the runner and
``figures/<name>/`` stay as they were. Extra per-claim columns (e.g. the committed snapshot's "paper verdict
(snapshot)") plug in with :func:`register_claim_column`.

    python -m dpmf_lib.report                      # rebuild REPORT.md and index.html from figures/
    python -m dpmf_lib.report --check-verdicts     # compare the verdicts with params/expected_verdicts.yaml (exit 1)
    python -m dpmf_lib.report --accept-verdicts    # write the current verdicts there (then commit the file)
    python -m dpmf_lib.report --snapshot-page DIR  # the report of the committed paper snapshot, built in DIR

The two verdict commands judge the figures as they are and render nothing (``make figures`` has written the report).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from .claims import DIFFERS, INCONCLUSIVE, INDICATIVE, NOT_MEASURED, REPRODUCED, SHOWN, STANDIN_ONLY, VERDICTS
from .dependencies import current_claims
from .verdicts import judge, rule
from .paths import figures_dir, params_dir
from .registry import load_registry

LEGEND = {
    REPRODUCED: "the whole 95 % interval over seeds lies within the tolerance (or beyond the direction's margin), "
                "on the real dataset, at the profile the claim needs, with every guard holding",
    DIFFERS: "the whole interval lies outside the tolerance (or on the wrong side of the margin)",
    INCONCLUSIVE: "the interval straddles the line, a guard failed (untrained baseline, unconverged or unmoved "
                  "chain, choice on its grid's edge) or too few seeds: the reason is given",
    INDICATIVE: "measured at a smaller profile than the claim needs: the value is shown, with what it would say",
    SHOWN: "the value is shown without a verdict (cannot fail, or about another machine's hardware)",
    STANDIN_ONLY: "measured on a synthetic stand-in only: shown, not evidence",
    NOT_MEASURED: "no current run has measured it on the real dataset",
}


def expected_verdicts_path() -> Path:
    return params_dir() / "expected_verdicts.yaml"


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def collect(fig_dir: Path | None = None, state_of: Callable | None = None) -> tuple[dict, list[dict], list[dict]]:
    """(papers, figure rows, claim rows) of ``fig_dir``. ``state_of(entry)`` replaces the staleness check of each
    run (None when current, else why): the snapshot page (:func:`write_snapshot_page`) takes the snapshot's states."""
    from .runner.hashing import run_hash
    from .runner.staleness import DAMAGED, staleness
    from .errors import WorkbookError

    fig_dir = fig_dir or figures_dir()
    papers, entries = load_registry()
    rows, all_measurements = [], []
    for e in entries:
        out = fig_dir / e.name
        run = _read_json(out / "run.json") or {}
        prov, meas, why = {}, [], None
        if not e.implemented:
            status = "not yet" if e.quantitative else "not applicable (diagram/summary)"
        elif not run:
            status = "not run"
        else:
            try:
                why = state_of(e) if state_of else \
                    staleness(e, run_hash(e, run.get("profile") or "ci"), profile=run.get("profile") or "ci")
            except WorkbookError as exc:
                why = f"cannot check: {exc}"
            if run.get("status") != "ok":
                status = "failed"
            elif why and why.startswith(DAMAGED):
                status = "damaged"  # files changed after the run: none of its measurements are read
            elif why:
                status = "stale"
            else:
                status = "ok"
                prov = _read_json(out / "provenance.json") or {}
                meas = _read_json(out / "measurements.json") or []
                all_measurements.extend(meas)
        datasets = [d.get("label") or d.get("dataset") for d in prov.get("datasets", []) if d.get("dataset")]
        png = out / f"{e.name}.png"
        rows.append({
            "name": e.name, "paper": e.paper, "label": e.label, "caption": e.caption, "issue": e.issue,
            "status": status, "why": why if status in ("stale", "damaged") else None,
            "profile": prov.get("profile") or run.get("profile"),
            "runtime_s": run.get("runtime_s"), "data": _data_kind(prov) if prov else None,
            "datasets": datasets, "thumbnail": f"{e.name}/{png.name}" if status == "ok" and png.exists() else None,
            "error": run.get("error"),
        })
    claim_rows = []
    for c in current_claims():
        j = judge(c, all_measurements)
        m = j.measurement
        others = [p.measurement for p in j.parts if p.measurement is not m]
        claim_rows.append({"id": c.id, "paper": c.paper, "where": c.where, "quote": c.quote, "dataset": c.dataset,
                           "reference": c.reference, "unit": c.unit, "measures": c.measures, "notebook": c.notebook,
                           "rule": rule(c), "min_profile": c.min_profile,
                           "guards": [g.describe() for g in c.guards],
                           "ours": j.mean, "lo": j.lo, "hi": j.hi, "n": j.n, "asymmetric": j.asymmetric,
                           "profile": None if m is None else m.get("profile"),
                           "ours_on": None if m is None else m["dataset"],
                           "setting": None if m is None else m.get("setting"),
                           "verdict": j.verdict, "reason": j.reason,
                           "parts": [{"setting": p.measurement.get("setting") or p.measurement["dataset"],
                                      **p.as_dict()} for p in j.parts],
                           "other_measurements": others})
    return papers, rows, claim_rows


def _data_kind(prov: dict) -> str:
    """What a run was built from. Only a source naming a dataset can be real data: an analytic model or data the
    experiment makes itself (``dataset: None``) is neither real nor a stand-in, whatever its ``real`` flag says."""
    ds = prov.get("datasets", [])
    real = [d for d in ds if d.get("real") and d.get("dataset")]
    fake = [d for d in ds if d.get("real") is False and d.get("dataset")]
    if real and fake:
        return "real + stand-in"
    if fake:
        return "stand-in"
    if real:
        return "real"
    if any("analytic" in (d.get("note") or "").lower() for d in ds):
        return "analytic (no data)"
    return "synthetic by design"


def _fmt(x) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def _value(c: dict) -> str:
    if c["ours"] is None:
        return "—"
    if c["n"] and c["n"] > 1:
        if c.get("asymmetric"):  # a share of cells: its interval is not ours ± half
            return f"{c['ours']:.4g} [{c['lo']:.3g}, {c['hi']:.3g}] (n={c['n']})"
        return f"{c['ours']:.4g} ± {(c['hi'] - c['lo']) / 2:.2g} (n={c['n']})"
    return f"{c['ours']:.4g}"


def summary(claims: list[dict]) -> dict:
    return {v: sum(c["verdict"] == v for c in claims) for v in VERDICTS}


# ---------------------------------------------------------------------------------------------------------------------
# the page: figures/index.html and figures/REPORT.md from the Jinja2 templates in dpmf_lib/templates/

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
#: Verdicts that settle a claim; every other verdict is shown with its reason.
FINAL = (REPRODUCED, DIFFERS)
VERDICT_CLASS = {REPRODUCED: "v-reproduced", DIFFERS: "v-differs", INCONCLUSIVE: "v-inconclusive",
                 INDICATIVE: "v-indicative", SHOWN: "v-shown", STANDIN_ONLY: "v-standin",
                 NOT_MEASURED: "v-notmeasured"}
STATUS_LEGEND = {
    "ok": "built by the runner and current (same code, params, notebook and data)",
    "failed": "the last run failed: the failing cell is named, the executed notebook is linked",
    "stale": "built, but code, params, notebook or data changed since: its claims are not judged",
    "damaged": "a file of the run is not as the run wrote it (the file is named; sha256 in run.json): its claims "
               "are not judged, and the runner runs it again",
    "not run": "implemented, never run into figures/",
    "not yet": "no notebook yet",
    "not applicable (diagram/summary)": "a diagram or qualitative summary of the paper: nothing to reproduce",
}
STATUS_CLASS = {"ok": "s-ok", "failed": "s-failed", "stale": "s-stale", "damaged": "s-failed", "not run": "s-notrun",
                "not yet": "s-notyet", "not applicable (diagram/summary)": "s-na"}
#: Where the executed notebooks are rendered to HTML (at report time), relative to the figures directory. Outside
#: figures/<name>/ so that only the runner writes those.
HTML_SUBDIR = "_html"

# Per-claim extra columns. A provider is ``fn(claim_row: dict) -> str | None`` registered under a column header; the
# page shows one column per provider after this run's verdict (a value that is a verdict gets its verdict style), or,
# registered ``folded``, a line in the claim's folded detail (long text: the page stays one line per claim).
# This is the hook for the committed paper snapshots:
#     register_claim_column("paper verdict (snapshot)", lambda c: snapshot_verdicts().get(c["id"]))
_CLAIM_COLUMNS: dict[str, Callable[[dict], str | None]] = {}
#: how the page shows a registered column that is not a column of its own: "folded" or "stacked"
_PLACEMENT: dict[str, str] = {}


def register_claim_column(header: str, provider: Callable[[dict], str | None], *, folded: bool = False,
                          stacked: bool = False) -> None:
    """Add (or replace) a per-claim column of the report; ``provider(claim_row)`` returns its text or None. On the
    page (REPORT.md keeps every one as a column): ``folded``, a line of the claim's folded detail; ``stacked``, a
    second line in the cell of the column registered before it."""
    _CLAIM_COLUMNS[header] = provider
    _PLACEMENT.pop(header, None)
    if folded or stacked:
        _PLACEMENT[header] = "folded" if folded else "stacked"


def _column_groups(headers: list[str]) -> tuple[list[list[str]], list[str]]:
    """(the page's extra claim cells, each a list of the headers stacked in it; the folded headers)."""
    cells: list[list[str]] = []
    for h in headers:
        where = _PLACEMENT.get(h)
        if where == "stacked" and cells:
            cells[-1].append(h)
        elif where != "folded":
            cells.append([h])
    return cells, [h for h in headers if _PLACEMENT.get(h) == "folded"]


def extra_claim_columns(claims: list[dict]) -> tuple[list[str], dict[str, dict[str, str | None]]]:
    """(headers, {claim id: {header: text}}) of the registered extra claim columns (none registered: no columns)."""
    headers = list(_CLAIM_COLUMNS)
    return headers, {c["id"]: {h: fn(c) for h, fn in _CLAIM_COLUMNS.items()} for c in claims}


def paper_short_name(key: str, meta: dict | None) -> str:
    """The short name of a paper for every row (``short:`` in params/registry.yaml; else the key)."""
    return str((meta or {}).get("short") or key)


def render_notebook_html(ipynb: Path, out: Path) -> Path | None:
    """The executed notebook rendered to HTML with nbconvert (skipped when ``out`` is newer than ``ipynb``); None
    when it cannot be rendered (the report then links the .ipynb only)."""
    try:
        if out.exists() and out.stat().st_mtime >= ipynb.stat().st_mtime:
            return out
        import nbformat
        from nbconvert import HTMLExporter

        body, _ = HTMLExporter(template_name="lab").from_notebook_node(nbformat.read(ipynb, as_version=4))
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
        tmp.write_text(body, encoding="utf-8")
        os.replace(tmp, out)
        return out
    except Exception as exc:  # a broken notebook must not stop the report
        print(f"report: could not render {ipynb} to HTML ({type(exc).__name__}: {exc})", file=sys.stderr)
        return None


def _older_rules(out: Path) -> str:
    """A note for an executed notebook whose printed claims table may not match this page: the verdict rules or the
    judging fields of its claims changed since it ran (neither is a run input, so the run stays current; this page's
    verdicts are the current ones), or the run predates the record."""
    from .runner.hashing import judging_digest

    try:
        run = json.loads((out / "run.json").read_text())
        ids = [m["claim"] for m in json.loads((out / "measurements.json").read_text())]
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    then = run.get("verdict_rules")
    if not then:
        return "; its claims table was judged under rules this run did not record — this page's verdicts are current"
    if then != judging_digest(ids):
        return "; its claims table predates the current verdict rules — this page's verdicts are current"
    return ""


def _links(fig_dir: Path, r: dict) -> list[tuple[str, str]]:
    """(label, relative href) of every output of a figure row that exists."""
    name, out = r["name"], fig_dir / r["name"]
    if r["status"] not in ("ok", "failed", "stale", "damaged") or not out.is_dir():
        return []
    links = []
    ipynb = out / f"{name}.ipynb"
    if ipynb.exists() and render_notebook_html(ipynb, fig_dir / HTML_SUBDIR / f"{name}.html"):
        links.append((f"notebook (HTML{_older_rules(out)})", f"{HTML_SUBDIR}/{name}.html"))
    for label, fname in (("notebook (.ipynb)", f"{name}.ipynb"), ("CSV", f"{name}.csv"),
                         ("timings CSV", f"{name}_timings.csv"), ("SVG", f"{name}.svg"), ("PNG", f"{name}.png"),
                         ("provenance", "provenance.json"), ("measurements", "measurements.json"),
                         ("run record", "run.json")):
        if (out / fname).exists():
            links.append((label, f"{name}/{fname}"))
    return links


def page_context(fig_dir: Path, papers: dict, rows: list[dict], claims: list[dict]) -> dict:
    """Everything the templates show, grouped by paper (rows and claims keep the registry's and claims.yaml's order)."""
    counts = summary(claims)
    by_nb = {}
    for c in claims:
        by_nb.setdefault(c["notebook"], []).append(c)
    headers, extra = extra_claim_columns(claims)
    row_names = {r["name"] for r in rows}
    for c in claims:
        c["extra"] = extra.get(c["id"], {})
        c["value_text"] = _value(c)
        c["reference_text"] = f"{_fmt(c['reference'])} {c['unit']}".strip()
        c["on_text"] = _fmt(c["ours_on"]) + (f", {c['setting']}" if c["setting"] else "") + \
            (f" ({c['profile']})" if c["profile"] else "")
        reason = c["reason"] or ("" if c["verdict"] in FINAL else LEGEND[c["verdict"]])
        c["reason_text"] = reason
        c["notebook_anchor"] = c["notebook"] in row_names
        c["notebook_link"] = None
    for r in rows:
        r["links"] = _links(fig_dir, r)
        r["main_link"] = next((h for lab, h in r["links"] if lab.startswith("notebook")), None)
        r["note"] = r["error"] if r["status"] == "failed" else r["why"]
        r["standin"] = bool(r["data"] and "stand-in" in r["data"])
        r["claims"] = by_nb.get(r["name"], [])
        for c in r["claims"]:
            c["notebook_link"] = r["main_link"]
    groups = []
    keys = list(papers) + sorted({r["paper"] for r in rows} - set(papers)) \
        + sorted({c["paper"] for c in claims} - set(papers) - {r["paper"] for r in rows})
    for key in keys:
        g_rows = [r for r in rows if r["paper"] == key]
        g_claims = [c for c in claims if c["paper"] == key]
        if not g_rows and not g_claims:
            continue
        short = paper_short_name(key, papers.get(key))
        groups.append({"key": key, "short": short, "title": (papers.get(key) or {}).get("title") or key,
                       "rows": g_rows, "claims": g_claims, "counts": summary(g_claims),
                       "done": sum(r["status"] == "ok" for r in g_rows),
                       "md_anchor": "".join(ch for ch in short.lower().replace(" ", "-")
                                            if ch.isalnum() or ch in "-_")})
    status_counts = {s: sum(r["status"] == s for r in rows) for s in STATUS_LEGEND}
    return {"rows": rows, "claims": claims, "groups": groups, "counts": counts,
            "counts_text": ", ".join(f"{n} {v}" for v, n in counts.items() if n) or "none",
            "done": sum(r["status"] == "ok" for r in rows), "status_counts": {k: v for k, v in status_counts.items()
                                                                             if v},
            "verdicts": VERDICTS, "legend": LEGEND, "verdict_class": VERDICT_CLASS, "status_legend": STATUS_LEGEND,
            "status_class": STATUS_CLASS, "extra_headers": headers, "fig_dir_name": fig_dir.name,
            "column_cells": _column_groups(headers)[0], "folded_headers": _column_groups(headers)[1],
            "snapshot_summary": "", "scorecard": None}


def _md_cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _environment():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)), trim_blocks=True,
                             lstrip_blocks=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["md"] = _md_cell
    env.filters["code"] = _code_html
    return env


def _code_html(text) -> str:
    """``text`` escaped for HTML, its `backticked` spans as <code> (prose written for Markdown, shown on the page)."""
    import re

    from markupsafe import Markup, escape

    return Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", str(escape(text))))


def _fmt_paper(v: dict) -> str | None:
    if v.get("verdict") is None:
        return None
    if v.get("mean") is None:
        return "—"
    ci = "" if v.get("lo") is None or v["lo"] == v["hi"] else f" [{_fmt(v['lo'])}, {_fmt(v['hi'])}]"
    return f"{_fmt(v['mean'])}{ci} (n = {v['n']})"


def add_paper_snapshot(fig_dir: Path, rows: list[dict]) -> tuple[str, dict]:
    """The committed ``paper`` snapshot (results/paper, :mod:`dpmf_lib.snapshot`) beside this run: per figure its
    state (current / stale and why / not in the snapshot) with the measured time and peak memory, per claim the
    verdict of the current snapshot rows and, where it is differs or inconclusive, its cause and evidence. A stale
    row's verdict is never shown as a verdict, only as "stale". Returns the summary line of the snapshot and its
    scorecard (:func:`dpmf_lib.snapshot.scorecard`), which open the page."""
    from . import snapshot
    from .verdicts import notes_for

    snapshot_rows = snapshot.rows()
    states = {r["name"]: r for r in snapshot_rows}
    for r in rows:
        s = states.get(r["name"])
        r["snapshot_text"], r["snapshot_link"] = "—", None
        if not s or s["state"] == "missing":
            continue
        took = "" if s["runtime_s"] is None else f", {s['runtime_s'] / 60:.1f} min, {s['peak_rss_mib'] or 0:.0f} MiB"
        r["snapshot_text"] = s["state"] + took + (f" ({s['why']})" if s["why"] else "")
        png = snapshot.snapshot_dir() / r["name"] / f"{r['name']}.png"
        csv = snapshot.snapshot_dir() / r["name"] / f"{r['name']}.csv"
        target = png if png.exists() else csv
        r["snapshot_link"] = os.path.relpath(target, fig_dir) if target.exists() else None
    verdicts = snapshot.paper_verdicts()
    current = [r for r in states.values() if r["state"] == "current"]
    stale = [r for r in states.values() if r["state"] == "stale"]
    damaged = [r for r in states.values() if r["state"] == "damaged"]
    judged = [v["verdict"] for v in verdicts.values() if v.get("verdict")]
    counts = {v: judged.count(v) for v in dict.fromkeys(judged)}
    summary_text = (
        f"Paper profile (committed snapshot, results/paper): {len(current)} of {len(states)} notebooks current"
        + (f", {len(stale)} stale" if stale else "") + (f", {len(damaged)} damaged" if damaged else "")
        + "; their claims: "
        + (", ".join(f"{n} {v}" for v, n in counts.items()) or "none") + ".")

    def verdict(c: dict) -> str | None:
        v = verdicts.get(c["id"]) or {}
        return v.get("verdict") or ({"stale": "stale snapshot", "damaged": "damaged snapshot row"}.get(v.get("state")))

    by_id = {x.id: x for x in current_claims()}

    def notes(c: dict):
        v = verdicts.get(c["id"]) or {}
        if v.get("verdict") not in (DIFFERS, INCONCLUSIVE):
            return v, None
        return v, notes_for(by_id[c["id"]]) if c["id"] in by_id else None

    def cause(c: dict) -> str | None:
        v, n = notes(c)
        if v.get("verdict") not in (DIFFERS, INCONCLUSIVE):
            return None
        lean = f"the data lean to {v['lean']}; " if v.get("lean") else ""
        return lean + (n.cause if n is not None and n.cause else "no cause given")

    def evidence(c: dict) -> str | None:
        v, n = notes(c)
        return n.evidence if n is not None and n.cause else None

    register_claim_column("paper profile (snapshot)", verdict)
    register_claim_column("paper: ours ± 95 %", lambda c: _fmt_paper(verdicts.get(c["id"]) or {}), stacked=True)
    register_claim_column("paper: why not reproduced", cause)
    register_claim_column("paper: evidence for the cause", evidence, folded=True)
    card = snapshot.scorecard(snapshot_rows, verdicts)
    card["markdown"] = snapshot.scorecard_markdown(card)
    card["total"] = {k: sum(g[k] if isinstance(g[k], int) else sum(g[k].values()) for g in card["groups"])
                     for k in ("claims", "judged", "reproduced", "differs", "inconclusive", "needs data",
                               "shown, not judged")}
    return summary_text, card


def write_report(fig_dir: Path | None = None, state_of: Callable | None = None) -> tuple[Path, Path]:
    fig_dir = fig_dir or figures_dir()
    fig_dir.mkdir(parents=True, exist_ok=True)
    papers, rows, claims = collect(fig_dir, state_of)
    snapshot_summary, card = add_paper_snapshot(fig_dir, rows)
    # the scorecard opens both pages; in REPORT.md its headings sit one level below the page's title
    card["markdown_in_report"] = "\n".join(("#" + line) if line.startswith("#") else line
                                            for line in card["markdown"].splitlines())
    ctx = {**page_context(fig_dir, papers, rows, claims), "snapshot_summary": snapshot_summary, "scorecard": card}
    env = _environment()
    env.autoescape = False
    md_path = fig_dir / "REPORT.md"
    md_path.write_text(env.get_template("report.md.j2").render(**ctx))
    env = _environment()
    env.autoescape = True
    html_path = fig_dir / "index.html"
    html_path.write_text(env.get_template("report.html.j2").render(**ctx))
    return md_path, html_path


def write_snapshot_page(dest: Path) -> tuple[Path, Path]:
    """The report of the committed ``paper`` snapshot, without running anything: its rows copied into ``dest``
    (replaced whole), each figure row in the snapshot's state (a row revalidated by its canary is current), then
    ``dest/REPORT.md`` and ``dest/index.html`` as :func:`write_report` writes them for ``figures/``."""
    import shutil

    from . import snapshot

    dest = Path(dest).resolve()
    src = snapshot.snapshot_dir()
    if dest == src or src in dest.parents:
        raise ValueError(f"{dest}: the snapshot page is written outside the snapshot ({src})")
    for row in src.iterdir():
        if row.is_dir() and (row / "run.json").exists():
            shutil.rmtree(dest / row.name, ignore_errors=True)
            shutil.copytree(row, dest / row.name)

    def state_of(entry) -> str | None:
        state, why = snapshot.row_state(entry)
        return None if state == "current" else (why or state)

    return write_report(dest, state_of)


# ---------------------------------------------------------------------------------------------------------------------
# the regression guard on verdicts


def read_expected(path: Path | None = None) -> dict[str, list[str]]:
    """claim id → the verdicts accepted at ``ci`` (a list where a claim is known to sit on a line)."""
    path = path or expected_verdicts_path()
    doc = yaml.safe_load(path.read_text()) if path.exists() else None
    out = {}
    for cid, v in ((doc or {}).get("verdicts") or {}).items():
        out[cid] = list(v) if isinstance(v, list) else [v]
    return out


def verdict_changes(current: dict[str, str], expected: dict[str, list[str]]) -> list[str]:
    """Lines describing every claim whose verdict is not one the expected file accepts (added/removed claims too)."""
    lines = []
    for cid in sorted(set(current) | set(expected)):
        if cid not in expected:
            lines.append(f"{cid}: new claim, verdict {current[cid]!r} not in the expected file")
        elif cid not in current:
            lines.append(f"{cid}: in the expected file but no longer a claim")
        elif current[cid] not in expected[cid]:
            lines.append(f"{cid}: {' or '.join(expected[cid])} → {current[cid]}")
    return lines


def write_expected(current: dict[str, str], path: Path | None = None) -> Path:
    path = path or expected_verdicts_path()
    old = read_expected(path)
    keep = {cid: (old[cid] if cid in old and v in old[cid] and len(old[cid]) > 1 else v) for cid, v in current.items()}
    header = ("# The verdict of every claim at the `ci` profile, as the last accepted `make figures` gave it.\n"
              "# CI (`make check-verdicts` after `make figures`) fails when a verdict changes and this file was not\n"
              "# updated with it: run `python -m dpmf_lib.report --accept-verdicts` after looking at why, and\n"
              "# commit the file with the change that caused it. A list accepts any of its verdicts (a claim that\n"
              "# sits on its line); keep such lists rare and say why in the commit.\n")
    path.write_text(header + yaml.safe_dump({"verdicts": keep}, sort_keys=True, allow_unicode=True, width=120))
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dpmf_lib.report", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--check-verdicts", action="store_true")
    g.add_argument("--accept-verdicts", action="store_true")
    g.add_argument("--snapshot-page", metavar="DIR", type=Path,
                   help="write the report of the committed paper snapshot into DIR (its rows copied there)")
    args = ap.parse_args(argv)
    if args.snapshot_page:
        md, page = write_snapshot_page(args.snapshot_page)
        print(f"report of the paper snapshot: {md} and {page}")
        return 0
    if not (args.accept_verdicts or args.check_verdicts):
        md, page = write_report()
        print(f"report: {md} and {page}")
        return 0
    # the verdicts only: `make figures` has just written the report, and each collect() hashes every run's inputs
    # again (.ci/run spent ~4 min of a 45.5 min run on a Zen 3 host here, rendering the report and collecting 3x)
    _, rows, claims = collect()
    other = sorted(f"{r['name']} ({r['profile']})" for r in rows if r["status"] == "ok" and r["profile"] != "ci")
    if other:  # the expected file holds ci verdicts: another profile's outputs would be compared or accepted
        print("the expected verdicts are those of the ci profile, but these figures were built at another "
              "profile: " + ", ".join(other) + " — rebuild them with `make figures` (PROFILE=ci)", file=sys.stderr)
        return 2
    current = {c["id"]: c["verdict"] for c in claims}
    if args.accept_verdicts:
        print(f"wrote {write_expected(current)}")
    else:
        changes = verdict_changes(current, read_expected())
        if changes:
            print("verdicts changed since params/expected_verdicts.yaml was last accepted:\n  " + "\n  ".join(changes)
                  + "\nIf the change is intended, run `python -m dpmf_lib.report --accept-verdicts` and commit "
                  "params/expected_verdicts.yaml with it.", file=sys.stderr)
            return 1
        print(f"verdicts: all {len(read_expected())} as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
