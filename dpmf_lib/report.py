"""``figures/REPORT.md`` and ``figures/index.html``: one row per figure/table of the papers, one row per claim.

Figure rows come from the registry (so unimplemented ones show "not yet"), joined with what the last run wrote in
``figures/<name>/`` (``run.json`` from the runner, ``provenance.json`` and ``measurements.json`` from the notebook).
Claim rows join ``params/claims.yaml`` with every notebook's measurements (see :func:`dpmf_lib.claims.verdict`).
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from .claims import load_claims, verdict
from .paths import figures_dir
from .registry import load_registry


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def collect(fig_dir: Path | None = None) -> tuple[dict, list[dict], list[dict]]:
    fig_dir = fig_dir or figures_dir()
    papers, entries = load_registry()
    rows, all_measurements = [], []
    for e in entries:
        out = fig_dir / e.name
        run = _read_json(out / "run.json") or {}
        prov = _read_json(out / "provenance.json") or {}
        meas = _read_json(out / "measurements.json") or []
        all_measurements.extend(meas)
        datasets = [d.get("label") or d.get("dataset") for d in prov.get("datasets", []) if d.get("dataset")]
        if not e.implemented:
            status = "not yet" if e.quantitative else "not applicable (diagram/summary)"
        else:
            status = run.get("status", "not run")
        png = out / f"{e.name}.png"
        rows.append({
            "name": e.name, "paper": e.paper, "label": e.label, "caption": e.caption, "issue": e.issue,
            "status": status, "profile": prov.get("profile") or run.get("profile"),
            "runtime_s": run.get("runtime_s"), "data": _data_kind(prov) if prov else None,
            "datasets": datasets, "thumbnail": f"{e.name}/{png.name}" if png.exists() else None,
            "error": run.get("error"),
        })
    claim_rows = []
    for c in load_claims():
        v, m = verdict(c, all_measurements)
        others = [x for x in all_measurements if x["claim"] == c.id and x is not m]
        claim_rows.append({"id": c.id, "paper": c.paper, "where": c.where, "quote": c.quote, "dataset": c.dataset,
                           "reference": c.reference, "unit": c.unit, "measures": c.measures, "notebook": c.notebook,
                           "ours": None if m is None else m["value"], "ours_on": None if m is None else m["dataset"],
                           "verdict": v, "other_measurements": others})
    return papers, rows, claim_rows


def _data_kind(prov: dict) -> str:
    ds = prov.get("datasets", [])
    real = [d for d in ds if d.get("real")]
    fake = [d for d in ds if d.get("real") is False]
    if real and fake:
        return "real + stand-in"
    if fake:
        return "stand-in"
    if real:
        return "real"
    return "synthetic by design"


def _fmt(x) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def write_report(fig_dir: Path | None = None) -> tuple[Path, Path]:
    fig_dir = fig_dir or figures_dir()
    fig_dir.mkdir(parents=True, exist_ok=True)
    papers, rows, claims = collect(fig_dir)
    done = sum(r["status"] == "ok" for r in rows)
    md = ["# Reproduction report", "",
          f"{done} of {len(rows)} figures/tables built; {sum(c['verdict'] == 'reproduced' for c in claims)} of "
          f"{len(claims)} claims reproduced. Regenerate with `make figures` (profile `ci`) or "
          "`python -m dpmf_lib.reproduce --profile paper`.", "",
          "Verdicts: *reproduced* (within the stated tolerance, on the real dataset), *differs*, *stand-in only* "
          "(measured on a synthetic stand-in: shown, not evidence), *not yet measured*.", "",
          "## Figures and tables", "",
          "| notebook | paper | item | caption | status | data | profile | runtime (s) |",
          "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['name']} | {r['paper']} | {r['label']} | {r['caption']} | {r['status']} | "
                  f"{_fmt(r['data'])}{' (' + ', '.join(r['datasets']) + ')' if r['datasets'] else ''} | "
                  f"{_fmt(r['profile'])} | {_fmt(r['runtime_s'])} |")
    md += ["", "## Claims", "", "| claim | paper | where | quote | paper value | ours | measured on | verdict |",
           "|---|---|---|---|---|---|---|---|"]
    for c in claims:
        other = "; ".join(f"{m['dataset']}: {m['value']:.4g}" for m in c["other_measurements"])
        md.append(f"| {c['id']} | {c['paper']} | {c['where']} | “{c['quote']}” | {_fmt(c['reference'])} {c['unit']} | "
                  f"{_fmt(c['ours'])} | {_fmt(c['ours_on'])}{' — also ' + other if other else ''} | {c['verdict']} |")
    md_path = fig_dir / "REPORT.md"
    md_path.write_text("\n".join(md) + "\n")
    html_path = fig_dir / "index.html"
    html_path.write_text(_html(papers, rows, claims))
    return md_path, html_path


def _html(papers, rows, claims) -> str:
    e = html.escape
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>DP-MF workbook: reproduction report</title>",
           "<style>body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse;width:100%}"
           "td,th{border:1px solid #ccc;padding:4px 6px;vertical-align:top;font-size:13px}th{background:#f3f3f3}"
           ".ok{color:#075}.fail{color:#b00}.standin{background:#fff4d6}.reproduced{color:#075;font-weight:bold}"
           ".differs{color:#b00;font-weight:bold}img{max-width:220px}</style></head><body>",
           "<h1>Reproduction report</h1>",
           "<p>One row per figure and table of the papers; one row per quantitative claim. Rows built from synthetic "
           "stand-ins are shaded and say so.</p><h2>Figures and tables</h2><table><tr><th>thumbnail</th><th>notebook"
           "</th><th>paper</th><th>item</th><th>caption</th><th>status</th><th>data</th><th>profile</th>"
           "<th>runtime (s)</th></tr>"]
    for r in rows:
        cls = "standin" if r["data"] and "stand-in" in r["data"] else ""
        thumb = f"<a href='{e(r['thumbnail'])}'><img src='{e(r['thumbnail'])}' alt='{e(r['name'])}'></a>" \
            if r["thumbnail"] else ""
        st_cls = "ok" if r["status"] == "ok" else ("fail" if r["status"] == "failed" else "")
        data = _fmt(r["data"]) + (" (" + ", ".join(r["datasets"]) + ")" if r["datasets"] else "")
        out.append(f"<tr class='{cls}'><td>{thumb}</td><td>{e(r['name'])}</td><td>{e(papers[r['paper']]['title'])}</td>"
                   f"<td>{e(r['label'])}</td><td>{e(r['caption'])}</td><td class='{st_cls}'>{e(r['status'])}"
                   f"{'<br><small>' + e(str(r['error'])) + '</small>' if r['error'] else ''}</td><td>{e(data)}</td>"
                   f"<td>{e(_fmt(r['profile']))}</td><td>{e(_fmt(r['runtime_s']))}</td></tr>")
    out.append("</table><h2>Claims</h2><table><tr><th>claim</th><th>where</th><th>quote</th><th>measures</th>"
               "<th>paper value</th><th>ours</th><th>measured on</th><th>verdict</th></tr>")
    for c in claims:
        other = "; ".join(f"{m['dataset']}: {m['value']:.4g}" for m in c["other_measurements"])
        out.append(f"<tr><td>{e(c['id'])}</td><td>{e(c['paper'])}, {e(c['where'])}</td><td>“{e(c['quote'])}”</td>"
                   f"<td>{e(c['measures'])}</td><td>{e(_fmt(c['reference']))} {e(c['unit'])}</td>"
                   f"<td>{e(_fmt(c['ours']))}</td><td>{e(_fmt(c['ours_on']))}"
                   f"{'<br><small>also: ' + e(other) + '</small>' if other else ''}</td>"
                   f"<td class='{c['verdict'].replace(' ', '-')}'>{e(c['verdict'])}</td></tr>")
    out.append("</table></body></html>")
    return "\n".join(out) + "\n"
