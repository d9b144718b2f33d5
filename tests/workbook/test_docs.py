"""The front door and the documentation site: README.md stays short, its library example runs, its headline is the
committed scorecard's, its links resolve; docs/ builds as a site (mkdocs --strict) with every page in its nav."""

import os
import re
import subprocess
import sys

import pytest
import yaml

from dpmf_lib import snapshot
from tests.conftest import REPO, needs_ml100k

README = REPO / "README.md"
MAX_README_LINES = 150


def _readme() -> str:
    return README.read_text(encoding="utf-8")


def library_example(text: str) -> str:
    """The README's fenced ```python block (its one library example)."""
    blocks = re.findall(r"^```python\n(.*?)^```", text, re.M | re.S)
    assert len(blocks) == 1, f"expected one ```python block in README.md, found {len(blocks)}"
    return blocks[0]


def test_the_readme_is_a_short_front_door():
    text = _readme()
    assert len(text.splitlines()) <= MAX_README_LINES, \
        f"README.md has {len(text.splitlines())} lines (at most {MAX_README_LINES}): move material to docs/"
    for must in ("make figures", "make test", "make test-quick", "results/paper/SCORECARD.md", "docs/"):
        assert must in text, must
    assert len(library_example(text).strip().splitlines()) <= 10


def test_the_readme_headline_is_the_committed_scorecards():
    """The block between the markers is what `python -m dpmf_lib.snapshot --scorecard` writes from the committed
    results/paper/SCORECARD.md."""
    text = _readme()
    assert snapshot.README_BEGIN in text and snapshot.README_END in text
    block = text.split(snapshot.README_BEGIN + "\n", 1)[1].split(snapshot.README_END, 1)[0]
    scorecard = (REPO / "results" / "paper" / snapshot.SCORECARD).read_text(encoding="utf-8")
    assert block == snapshot.readme_headline(scorecard) + "\n", \
        "README.md's scorecard headline is not the committed scorecard's: run `python -m dpmf_lib.snapshot --scorecard`"
    total = re.search(r"^\| \*\*all\*\* \| (.*) \|$", block, re.M).group(1)
    from dpmf_lib.claims import load_claims
    assert "| **all** | " in scorecard and total.startswith(f"**{len(load_claims())}**"), \
        "the scorecard does not count every claim in params/claims.yaml: run `python -m dpmf_lib.snapshot`"


def test_readme_headline_reads_every_paper_row_and_the_snapshot_state():
    card = {"rows_text": "2 of 3 notebooks current; stale or missing (their claims are not judged): liu_fig4",
            "groups": [{"name": "Liu et al. 2015", "claims": 3, "judged": 2, "reproduced": 1,
                        "differs": {"data": 1}, "inconclusive": {}, "lean": {}, "needs data": 1,
                        "shown, not judged": 0, "stale": 1}],
            "reproduced": [], "differs": [], "inconclusive": [], "shown": [], "causes": {}}
    head = snapshot.readme_headline(snapshot.scorecard_markdown(card))
    assert "| Liu et al. 2015 (1 stale, not judged) | 3 | 2 | 1 | 1 | 0 | 1 | 0 |" in head
    assert "| **all** | **3** | **2** | **1** | **1** | **0** | **1** | **0** |" in head
    assert head.endswith("Snapshot: 2 of 3 notebooks current; stale or missing (their claims are not judged): liu_fig4.")


def test_write_readme_headline_replaces_only_the_marked_block(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# title\n\n{snapshot.README_BEGIN}\nold\n{snapshot.README_END}\n\nafter\n", encoding="utf-8")
    scorecard = (REPO / "results" / "paper" / snapshot.SCORECARD).read_text(encoding="utf-8")
    assert snapshot.write_readme_headline(readme, scorecard) == readme
    text = readme.read_text(encoding="utf-8")
    assert text.startswith(f"# title\n\n{snapshot.README_BEGIN}\n| paper |") and text.endswith(
        f"{snapshot.README_END}\n\nafter\n") and "old" not in text
    plain = tmp_path / "PLAIN.md"
    plain.write_text("no block\n", encoding="utf-8")
    assert snapshot.write_readme_headline(plain, scorecard) is None and plain.read_text() == "no block\n"


@pytest.mark.slow
@needs_ml100k
def test_the_readme_library_example_runs(tmp_path):
    """The README's ten lines, as a reader would paste them: C-SGD on ML-100K, a private release, its ε."""
    script = tmp_path / "example.py"
    script.write_text(library_example(_readme()), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    m = re.search(r"C-SGD test RMSE (\d\.\d+); release ε = (\S+)", done.stdout)
    assert m, done.stdout
    assert 0.85 < float(m.group(1)) < 1.05 and m.group(2) == "1.0"


def test_the_readmes_links_resolve():
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", _readme()):
        if "://" not in target:
            assert (REPO / target).exists(), f"README.md links to {target}, which does not exist"


def _nav_files(nav) -> set[str]:
    files = set()
    for item in nav:
        for value in (item.values() if isinstance(item, dict) else [item]):
            files |= _nav_files(value) if isinstance(value, list) else {value}
    return files


def test_every_docs_page_is_in_the_site_nav():
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    pages = {p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").rglob("*.md")}
    assert _nav_files(config["nav"]) == pages


def test_the_docs_site_builds_without_warnings(tmp_path):
    """What `make docs` runs (and CI after make test): a broken link or a page outside the nav fails it."""
    pytest.importorskip("mkdocs")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "WARNING" not in done.stderr and (tmp_path / "site" / "running" / "index.html").exists()
