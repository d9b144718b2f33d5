"""The report (dpmf_lib.report): rows and claims collected from a figures tree (failed or stale runs left out), the
expected-verdicts guard, and the page (figures/index.html, REPORT.md) built from a small fake figures tree and from the
committed paper snapshot, checked in a real browser.

Chromium (Debian's ``chromium``, driven over the DevTools protocol: tests/browser.py) loads the page headless: no
console error, exception or failed load; every link resolves to a file that exists and every ``#anchor`` to an
element; every thumbnail decodes (naturalWidth > 0). The snapshot's page is at most 15,000 px tall at 1280 px wide,
does not scroll sideways, and its scorecard is above the fold at 1400 × 900.
"""

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest

from dpmf_lib import report
from dpmf_lib.runner import hashing
from dpmf_lib.claims import VERDICTS, load_claims
from dpmf_lib.registry import load_registry
from dpmf_lib.report import collect, read_expected, verdict_changes, write_expected, write_report
from tests import browser

CHROMIUM = browser.CHROMIUM
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH: the browser check needs Debian's "
                                                             "`chromium` package (apt-get install chromium)")
#: the report page at 1280 px wide: at most this tall (the claims one line each, their detail folded)
MAX_PAGE_HEIGHT = 15_000


def _png(path: Path, color=(30, 120, 200)) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3), dpi=50)
    ax.plot([0, 1], [0, 1], color=[c / 255 for c in color])
    fig.savefig(path)
    fig.savefig(path.with_suffix(".svg"))
    plt.close(fig)


def _executed_notebook(path: Path, text: str) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# {text}"),
                                         nbformat.v4.new_code_cell("x = 1\nx", execution_count=1,
                                                                   outputs=[nbformat.v4.new_output(
                                                                       "execute_result", {"text/plain": "1"},
                                                                       execution_count=1)])])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def _entry(name):
    return next(e for e in load_registry()[1] if e.name == name)


def _run(fig: Path, name: str, *, status="ok", profile="ci", datasets=(), measurements=(), hash_=None, error=None):
    out = fig / name
    out.mkdir()
    digest = hash_ or hashing.run_hash(_entry(name), profile)
    (out / "run.json").write_text(json.dumps({"notebook": name, "profile": profile, "hash": digest, "status": status,
                                              "error": error, "runtime_s": 1.5, "data_state": {}}))
    _executed_notebook(out / f"{name}.ipynb", name)
    if status != "ok":
        return out
    (out / "provenance.json").write_text(json.dumps({"notebook": name, "profile": profile, "datasets": list(datasets)}))
    (out / f"{name}.csv").write_text("dataset,x\nml-100k,1\n")
    _png(out / f"{name}.png")
    (out / "measurements.json").write_text(json.dumps(list(measurements)))
    return out


@pytest.fixture
def fake_tree(figures_tmp):
    """liu_fig1 ok on real data with a measured claim, balu_fig3_1 ok (analytic), liu_fig7 failed, liu_fig2 stale."""
    c = next(c for c in load_claims() if c.notebook == "liu_fig1")
    real = {"dataset": "ml-100k", "real": True, "checksum": "abc", "note": "test", "label": "ml-100k"}
    m = {"claim": c.id, "value": 0.5, "dataset": c.dataset, "real": True, "profile": "smoke", "values": [0.5],
         "seeds": [0], "guards": {}, "setting": ""}
    _run(figures_tmp, "liu_fig1", datasets=[real], measurements=[m])
    _run(figures_tmp, "balu_fig3_1", datasets=[{"dataset": None, "real": True, "checksum": None,
                                               "note": "analytic (simple model of Section 3.1.2); no data"}])
    _run(figures_tmp, "liu_fig7", status="failed", error="cell 3 (index 2): ValueError: boom")
    _run(figures_tmp, "liu_fig2", hash_="older code")
    return figures_tmp


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.refs, self.imgs = [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "a" and a.get("href"):
            self.refs.append(a["href"])
        if tag == "img" and a.get("src"):
            self.refs.append(a["src"])
            self.imgs.append(a)


def _parse(text: str) -> _Page:
    p = _Page()
    p.feed(text)
    return p


def _check_links(page: _Page, base: Path, ids: set[str]) -> None:
    assert page.refs
    for ref in page.refs:
        parts = urlsplit(ref)
        assert parts.scheme in ("", "file"), f"external link {ref!r} in the report"
        if parts.path:
            target = (base / unquote(parts.path)).resolve()
            assert target.is_file(), f"link {ref!r} does not resolve to a file ({target})"
        if parts.fragment and not parts.path:
            assert parts.fragment in ids, f"anchor #{parts.fragment} does not exist"


def test_page_content_without_a_browser(fake_tree):
    md, page_path = report.write_report()
    html = page_path.read_text()
    page = _parse(html)
    ids = set(page.ids)
    assert len(page.ids) == len(ids), "duplicate ids"
    _, entries = load_registry()
    claims = load_claims()
    assert {e.name for e in entries} <= ids and {c.id for c in claims} <= ids  # an anchor per figure and claim
    assert {"summary", "legend"} <= ids and html.index('id="summary"') < html.index('id="paper-liu"')
    _check_links(page, fake_tree, ids)
    # links: rendered notebook, ipynb, CSV, SVG, provenance for an ok run; the executed notebook for a failed one
    for href in ("_html/liu_fig1.html", "liu_fig1/liu_fig1.ipynb", "liu_fig1/liu_fig1.csv", "liu_fig1/liu_fig1.svg",
                 "liu_fig1/provenance.json", "_html/liu_fig7.html", "liu_fig7/run.json"):
        assert href in page.refs, href
    assert "nbconvert" in (fake_tree / "_html" / "liu_fig1.html").read_text().lower() or \
        "jp-Notebook" in (fake_tree / "_html" / "liu_fig1.html").read_text()
    # a style for every verdict, the legend lists every verdict, every non-final verdict has its reason
    style = html[html.index("<style>"):html.index("</style>")]
    for v in VERDICTS:
        assert f".{report.VERDICT_CLASS[v]}{{" in style, v
    rows = report.collect(fake_tree)[2]
    for c in rows:
        if c["verdict"] not in report.FINAL:
            row = html[html.index(f'<tr id="{c["id"]}"'):]
            row = row[:row.index("</tr>")]
            assert "<small>" in row, f"{c['id']}: non-final verdict {c['verdict']!r} shown without a reason"
    assert rows
    # short paper names per row, not the full title repeated; balu_fig3_1 (analytic) not labelled real
    assert html.count("Fast differentially private matrix factorization") == 1
    fig31 = html[html.index('id="balu_fig3_1"'):]
    fig31 = fig31[:fig31.index("</div>")]
    assert "analytic" in fig31 and ">real<" not in fig31
    assert "Balu 2016, Figure 3.1" in fig31
    # REPORT.md: relative links that resolve
    text = md.read_text()
    for href in re.findall(r"\]\(([^)#][^)]*)\)", text):
        assert (fake_tree / href.split("#")[0]).is_file(), href
    assert "](liu_fig1/liu_fig1.csv)" in text


def test_extra_claim_column_hook(fake_tree, monkeypatch):
    monkeypatch.setattr(report, "_CLAIM_COLUMNS", {})
    report.register_claim_column("paper verdict (snapshot)",
                                 lambda c: "reproduced" if c["notebook"] == "liu_fig1" else None)
    md, page = report.write_report()
    html = page.read_text()
    assert "<th>paper verdict (snapshot)</th>" in html
    assert "| paper verdict (snapshot) |" in md.read_text()
    assert report.main(["--check-verdicts"]) in (0, 1, 2)  # the CLI flags still run with the hook in place


def _check_in_browser(page: dict) -> None:
    """No console error or failed load, every image decoded, every link to a file or an anchor of the page."""
    assert page["errors"] == [], page["errors"]
    assert page["images"] and all(i["naturalWidth"] > 0 for i in page["images"]), \
        [i["src"] for i in page["images"] if not i["naturalWidth"]]
    ids = set(page["ids"])
    for link in page["links"]:
        parts = urlsplit(link["url"])
        assert parts.scheme == "file", f"external link {link['href']!r} in the report"
        if link["href"].startswith("#"):
            assert parts.fragment in ids, f"anchor {link['href']} does not exist"
        else:
            target = Path(unquote(parts.path))
            assert target.is_file(), f"link {link['href']!r} does not resolve to a file ({target})"


@needs_chromium
def test_page_in_headless_chromium(fake_tree, tmp_path):
    _, page_path = report.write_report()
    shot = tmp_path / "report.png"
    page = browser.load(page_path, width=1400, height=900, screenshot=shot)
    assert {e.name for e in load_registry()[1]} <= set(page["ids"])
    assert {c.id for c in load_claims()} <= set(page["ids"])
    _check_in_browser(page)
    assert shot.stat().st_size > 10_000


@needs_chromium
@pytest.mark.slow
def test_the_report_of_the_paper_snapshot_in_headless_chromium(tmp_path, monkeypatch):
    """The page a reviewer opens, built from the committed snapshot (nothing run) with every row taken as current
    (the longest page: every figure and every paper verdict shown, whatever code changed since): the scorecard on
    the first screen, every row's figure shown, the whole page short enough to read."""
    from dpmf_lib import snapshot

    monkeypatch.setattr(snapshot, "row_state", lambda entry, digest=None: (
        ("current", None) if (snapshot.snapshot_dir() / entry.name / "run.json").exists() else ("missing", None)))
    out = tmp_path / "figures"
    _, page_path = report.write_snapshot_page(out)
    page = browser.load(page_path, width=1280, height=900, boxes=("#scorecard table",))
    _check_in_browser(page)
    assert page["height"] <= MAX_PAGE_HEIGHT, f"the report page is {page['height']} px tall at 1280 px wide"
    assert page["width"] <= 1280, f"the report page scrolls sideways ({page['width']} px wide)"
    shown = {Path(unquote(urlsplit(i["src"]).path)).parent.name for i in page["images"]}
    current = {r["name"] for r in snapshot.rows() if r["state"] == "current"
               and (snapshot.snapshot_dir() / r["name"] / f"{r['name']}.png").exists()}
    assert current and current <= shown, sorted(current - shown)
    wide = browser.load(page_path, width=1400, height=900, boxes=("#scorecard table",))
    card = wide["boxes"]["#scorecard table"]
    assert card is not None and card["bottom"] <= 900, f"the scorecard is not above the fold at 1400 × 900: {card}"


def test_a_share_of_cells_prints_its_interval_and_an_old_notebook_table_is_flagged(tmp_path):
    from dpmf_lib.report import _older_rules, _value
    from dpmf_lib.runner.hashing import judging_digest

    assert _value({"ours": 5 / 9, "lo": 1 / 3, "hi": 1.0, "n": 5, "asymmetric": True}) == "0.5556 [0.333, 1] (n=5)"
    assert _value({"ours": 0.5, "lo": 0.4, "hi": 0.6, "n": 5, "asymmetric": False}) == "0.5 ± 0.1 (n=5)"
    out = tmp_path / "x"
    out.mkdir()
    (out / "measurements.json").write_text(json.dumps([{"claim": "balu-3.5-blip-joint-beats-single"}]))
    (out / "run.json").write_text(json.dumps({"status": "ok"}))
    assert "did not record" in _older_rules(out)
    (out / "run.json").write_text(json.dumps({"status": "ok", "verdict_rules": "0" * 16}))
    assert "predates" in _older_rules(out)
    (out / "run.json").write_text(json.dumps({"status": "ok",
                                              "verdict_rules": judging_digest(["balu-3.5-blip-joint-beats-single"])}))
    assert _older_rules(out) == ""


# ---- the report's rows and claims on an empty or hand-made figures tree; the expected-verdicts guard ----

def test_report_has_a_row_per_registry_entry_and_claim(figures_tmp):
    md, html = write_report()
    _, entries = load_registry()
    text = md.read_text()
    for e in entries:
        assert f"| {e.name} |" in text
    _, rows, claims = collect()
    by_name = {e.name: e for e in entries}
    for r in rows:  # nothing has run in this empty directory
        e = by_name[r["name"]]
        expected = "not run" if e.implemented else ("not yet" if e.quantitative else "not applicable (diagram/summary)")
        assert r["status"] == expected, r
    assert all(c["verdict"] == "not yet measured" for c in claims)  # nothing has run in this empty directory
    assert "<table>" in html.read_text()


def test_failed_or_stale_runs_do_not_reach_the_report(figures_tmp):
    _, entries = load_registry()
    e = next(x for x in entries if x.name == "balu_table3_1")
    out = figures_tmp / e.name
    out.mkdir()
    m = {"claim": "balu-3.5-ml100k-cavg", "value": 106.04, "dataset": "ml-100k", "real": True, "profile": "ci",
         "values": [106.04], "guards": {}}
    (out / "measurements.json").write_text(json.dumps([m]))
    (out / "provenance.json").write_text("{}")
    (out / f"{e.name}.csv").write_text("dataset\n")
    digest = hashing.run_hash(e, "ci")

    def cavg():
        return next(c for c in collect()[2] if c["id"] == "balu-3.5-ml100k-cavg")

    (out / "run.json").write_text(json.dumps({"hash": digest, "status": "ok", "profile": "ci"}))
    assert cavg()["verdict"] == "reproduced"
    (out / "run.json").write_text(json.dumps({"hash": digest, "status": "failed", "profile": "ci"}))
    assert cavg()["verdict"] == "not yet measured"
    (out / "run.json").write_text(json.dumps({"hash": "older code", "status": "ok", "profile": "ci"}))
    assert cavg()["verdict"] == "not yet measured"
    row = next(r for r in collect()[1] if r["name"] == e.name)
    assert row["status"] == "stale" and "changed" in row["why"]


def test_verdict_regression_guard(tmp_path):
    path = tmp_path / "expected.yaml"
    write_expected({"a": "reproduced", "b": "inconclusive"}, path)
    expected = read_expected(path)
    assert verdict_changes({"a": "reproduced", "b": "inconclusive"}, expected) == []
    changes = verdict_changes({"a": "differs", "b": "inconclusive", "c": "reproduced"}, expected)
    assert changes == ["a: reproduced → differs", "c: new claim, verdict 'reproduced' not in the expected file"]
    path.write_text("verdicts:\n  a: [reproduced, inconclusive]\n")
    assert verdict_changes({"a": "inconclusive"}, read_expected(path)) == []


def test_committed_expected_verdicts_name_every_claim():
    """params/expected_verdicts.yaml must be updated with claims.yaml: a claim added or removed without it fails."""
    from dpmf_lib.claims import VERDICTS, load_claims

    expected = read_expected()
    assert set(expected) == {c.id for c in load_claims()}
    assert all(set(v) <= set(VERDICTS) for v in expected.values())
