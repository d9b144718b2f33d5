"""``figures/REPORT.md`` and ``figures/index.html``: one row per figure/table of the papers, one row per claim.

Figure rows come from the registry (so unimplemented ones show "not yet"), joined with the runner's last canonical
run in ``figures/<name>/``. A run's outputs are read only when its ``run.json`` says ``ok`` *and* it is current
(same run hash, same data state: :func:`dpmf_lib.reproduce.staleness`); a failed or stale run is listed with the
reason and none of its measurements reach a verdict. Claim rows judge every measurement of each claim
(:func:`dpmf_lib.claims.judge`).

    python -m dpmf_lib.report                      # rebuild REPORT.md and index.html from figures/
    python -m dpmf_lib.report --check-verdicts     # compare the verdicts with params/expected_verdicts.yaml (exit 1)
    python -m dpmf_lib.report --accept-verdicts    # write the current verdicts there (then commit the file)
"""

from __future__ import annotations

import argparse
import html
import json
import sys
from pathlib import Path

import yaml

from .claims import (DIFFERS, INCONCLUSIVE, INDICATIVE, NOT_MEASURED, REPRODUCED, SHOWN, STANDIN_ONLY, VERDICTS,
                     judge, load_claims)
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


def collect(fig_dir: Path | None = None) -> tuple[dict, list[dict], list[dict]]:
    from .reproduce import run_hash, staleness
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
                why = staleness(e, run_hash(e, run.get("profile") or "ci"))
            except WorkbookError as exc:
                why = f"cannot check: {exc}"
            if run.get("status") != "ok":
                status = "failed"
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
            "status": status, "why": why if status == "stale" else None,
            "profile": prov.get("profile") or run.get("profile"),
            "runtime_s": run.get("runtime_s"), "data": _data_kind(prov) if prov else None,
            "datasets": datasets, "thumbnail": f"{e.name}/{png.name}" if status == "ok" and png.exists() else None,
            "error": run.get("error"),
        })
    claim_rows = []
    for c in load_claims():
        j = judge(c, all_measurements)
        m = j.measurement
        others = [p.measurement for p in j.parts if p.measurement is not m]
        claim_rows.append({"id": c.id, "paper": c.paper, "where": c.where, "quote": c.quote, "dataset": c.dataset,
                           "reference": c.reference, "unit": c.unit, "measures": c.measures, "notebook": c.notebook,
                           "rule": c.rule(), "min_profile": c.min_profile,
                           "guards": [g.describe() for g in c.guards],
                           "ours": j.mean, "lo": j.lo, "hi": j.hi, "n": j.n,
                           "profile": None if m is None else m.get("profile"),
                           "ours_on": None if m is None else m["dataset"],
                           "setting": None if m is None else m.get("setting"),
                           "verdict": j.verdict, "reason": j.reason,
                           "parts": [{"setting": p.measurement.get("setting") or p.measurement["dataset"],
                                      **p.as_dict()} for p in j.parts],
                           "other_measurements": others})
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


def _value(c: dict) -> str:
    if c["ours"] is None:
        return "—"
    if c["n"] and c["n"] > 1:
        return f"{c['ours']:.4g} ± {(c['hi'] - c['lo']) / 2:.2g} (n={c['n']})"
    return f"{c['ours']:.4g}"


def summary(claims: list[dict]) -> dict:
    return {v: sum(c["verdict"] == v for c in claims) for v in VERDICTS}


def write_report(fig_dir: Path | None = None) -> tuple[Path, Path]:
    fig_dir = fig_dir or figures_dir()
    fig_dir.mkdir(parents=True, exist_ok=True)
    papers, rows, claims = collect(fig_dir)
    done = sum(r["status"] == "ok" for r in rows)
    counts = summary(claims)
    md = ["# Reproduction report", "",
          f"{done} of {len(rows)} figures/tables built and current. Claims: "
          + ", ".join(f"{n} {v}" for v, n in counts.items() if n) + f" (of {len(claims)}).", "",
          "Regenerate with `make figures` (profile `ci`) or `python -m dpmf_lib.reproduce --profile paper`. "
          "Values are the mean over seeds ± the half-width of the 95 % interval.", "",
          "Verdicts:", ""]
    md += [f"- *{v}*: {LEGEND[v]}" for v in VERDICTS]
    md += ["", "## Figures and tables", "",
           "| notebook | paper | item | caption | status | data | profile | runtime (s) |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        status = r["status"] + (f" ({r['why']})" if r["why"] else "")
        md.append(f"| {r['name']} | {r['paper']} | {r['label']} | {r['caption']} | {status} | "
                  f"{_fmt(r['data'])}{' (' + ', '.join(r['datasets']) + ')' if r['datasets'] else ''} | "
                  f"{_fmt(r['profile'])} | {_fmt(r['runtime_s'])} |")
    md += ["", "## Claims", "",
           "| claim | where | quote | paper value | rule | ours | measured on (profile) | needs | verdict | why |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for c in claims:
        on = _fmt(c["ours_on"]) + (f", {c['setting']}" if c["setting"] else "") + \
            (f" ({c['profile']})" if c["profile"] else "")
        reason = c["reason"].replace("|", "/")
        if c["guards"]:
            reason += ("; " if reason else "") + "guards: " + "; ".join(c["guards"]).replace("|", "/")
        md.append(f"| {c['id']} | {c['paper']}, {c['where']} | “{c['quote']}” | {_fmt(c['reference'])} {c['unit']} "
                  f"| {c['rule']} | {_value(c)} | {on} | {c['min_profile']} | {c['verdict']} | {reason} |")
    md_path = fig_dir / "REPORT.md"
    md_path.write_text("\n".join(md) + "\n")
    html_path = fig_dir / "index.html"
    html_path.write_text(_html(papers, rows, claims, counts))
    return md_path, html_path


def _cls(verdict: str) -> str:
    return "v-" + verdict.split()[0].replace(",", "").replace("-", "")


def _html(papers, rows, claims, counts) -> str:
    e = html.escape
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>DP-MF workbook: reproduction report</title>",
           "<style>body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse;width:100%}"
           "td,th{border:1px solid #ccc;padding:4px 6px;vertical-align:top;font-size:13px}th{background:#f3f3f3}"
           ".ok{color:#075}.fail{color:#b00}.stale{color:#a60}.standin{background:#fff4d6}"
           ".v-reproduced{color:#075;font-weight:bold}.v-differs{color:#b00;font-weight:bold}"
           ".v-inconclusive{color:#a60}.v-indicative{color:#557;font-style:italic}.v-shown{color:#555}"
           ".v-standin{color:#865}.v-not{color:#999}img{max-width:220px}</style></head><body>",
           "<h1>Reproduction report</h1><p>" + ", ".join(
               f"<span class='{_cls(v)}'>{n} {e(v)}</span>" for v, n in counts.items() if n) + "</p><ul>"]
    out += [f"<li><span class='{_cls(v)}'>{e(v)}</span>: {e(LEGEND[v])}</li>" for v in VERDICTS]
    out.append("</ul><h2 id='figures'>Figures and tables</h2><table><tr><th>thumbnail</th><th>notebook</th>"
               "<th>paper</th><th>item</th><th>caption</th><th>status</th><th>data</th><th>profile</th>"
               "<th>runtime (s)</th></tr>")
    for r in rows:
        cls = "standin" if r["data"] and "stand-in" in r["data"] else ""
        thumb = f"<a href='{e(r['thumbnail'])}'><img src='{e(r['thumbnail'])}' alt='{e(r['name'])}'></a>" \
            if r["thumbnail"] else ""
        st_cls = {"ok": "ok", "failed": "fail", "stale": "stale"}.get(r["status"], "")
        note = r["error"] if r["status"] == "failed" else r["why"]
        data = _fmt(r["data"]) + (" (" + ", ".join(r["datasets"]) + ")" if r["datasets"] else "")
        out.append(f"<tr class='{cls}' id='{e(r['name'])}'><td>{thumb}</td><td>{e(r['name'])}</td>"
                   f"<td>{e(r['paper'])}</td><td>{e(r['label'])}</td><td>{e(r['caption'])}</td>"
                   f"<td class='{st_cls}'>{e(r['status'])}{'<br><small>' + e(str(note)) + '</small>' if note else ''}"
                   f"</td><td>{e(data)}</td><td>{e(_fmt(r['profile']))}</td><td>{e(_fmt(r['runtime_s']))}</td></tr>")
    out.append("</table><h2 id='claims'>Claims</h2><table><tr><th>claim</th><th>where</th><th>quote</th>"
               "<th>measures</th><th>paper value</th><th>rule</th><th>ours</th><th>measured on (profile)</th>"
               "<th>needs</th><th>verdict</th></tr>")
    for c in claims:
        on = _fmt(c["ours_on"]) + (f", {c['setting']}" if c["setting"] else "") + \
            (f" ({c['profile']})" if c["profile"] else "")
        guards = "".join(f"<br><small>guard: {e(g)}</small>" for g in c["guards"])
        out.append(f"<tr id='{e(c['id'])}'><td>{e(c['id'])}</td><td>{e(c['paper'])}, {e(c['where'])}</td>"
                   f"<td>“{e(c['quote'])}”</td><td>{e(c['measures'])}</td>"
                   f"<td>{e(_fmt(c['reference']))} {e(c['unit'])}</td><td>{e(c['rule'])}{guards}</td>"
                   f"<td>{e(_value(c))}</td><td>{e(on)}</td><td>{e(c['min_profile'])}</td>"
                   f"<td class='{_cls(c['verdict'])}'>{e(c['verdict'])}"
                   f"{'<br><small>' + e(c['reason']) + '</small>' if c['reason'] else ''}</td></tr>")
    out.append("</table></body></html>")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------------------------------
# the regression guard on verdicts


def current_verdicts(fig_dir: Path | None = None) -> dict[str, str]:
    return {c["id"]: c["verdict"] for c in collect(fig_dir)[2]}


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
    args = ap.parse_args(argv)
    md, page = write_report()
    print(f"report: {md} and {page}")
    if args.accept_verdicts or args.check_verdicts:
        other = sorted(f"{r['name']} ({r['profile']})" for r in collect()[1]
                       if r["status"] == "ok" and r["profile"] != "ci")
        if other:  # the expected file holds ci verdicts: another profile's outputs would be compared or accepted
            print("the expected verdicts are those of the ci profile, but these figures were built at another "
                  "profile: " + ", ".join(other) + " — rebuild them with `make figures` (PROFILE=ci)",
                  file=sys.stderr)
            return 2
    if args.accept_verdicts:
        print(f"wrote {write_expected(current_verdicts())}")
    elif args.check_verdicts:
        changes = verdict_changes(current_verdicts(), read_expected())
        if changes:
            print("verdicts changed since params/expected_verdicts.yaml was last accepted:\n  " + "\n  ".join(changes)
                  + "\nIf the change is intended, run `python -m dpmf_lib.report --accept-verdicts` and commit "
                  "params/expected_verdicts.yaml with it.", file=sys.stderr)
            return 1
        print(f"verdicts: all {len(read_expected())} as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
