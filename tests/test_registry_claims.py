import re

import pytest

from dpmf_lib.claims import (DIFFERS, NOT_MEASURED, REPRODUCED, STANDIN_ONLY, Claim, Measurement, load_claims,
                             verdict)
from dpmf_lib.paths import papers_dir
from dpmf_lib.registry import load_registry, select, unregistered_notebooks

CAPTION = re.compile(r"^(?:<\|[^|]*\|>)?\s*(Figure|Table) (\d+(?:\.\d+)?):")
PNBM_CAPTION = re.compile(r"^Fig\. (\d+)\.\s*$")


def paper_items(paper_file: str) -> set[tuple[str, str]]:
    items = set()
    for line in (papers_dir() / paper_file).read_text(encoding="utf-8").splitlines():
        m = CAPTION.match(line)
        if m:
            items.add(("figure" if m.group(1) == "Figure" else "table", m.group(2)))
        m = PNBM_CAPTION.match(line)
        if m:
            items.add(("figure", m.group(1)))
    return items


def test_registry_loads_and_names_follow_the_convention():
    papers, entries = load_registry()
    assert {e.paper for e in entries} <= set(papers)
    assert len({e.name for e in entries}) == len(entries)


@pytest.mark.skipif(not papers_dir().exists(), reason="papers not beside the repository")
def test_every_figure_and_table_of_the_papers_has_a_row():
    papers, entries = load_registry()
    have = {(e.paper, e.kind, e.number) for e in entries}
    missing = []
    for key, meta in papers.items():
        if not meta.get("file"):
            continue
        for kind, number in paper_items(meta["file"]):
            if (key, kind, number) not in have:
                missing.append((key, kind, number))
    # Liu et al.'s Figure 6 has no caption line in the text file (only "in Figure 6" in prose): checked separately.
    assert ("liu", "figure", "6") in have
    assert not missing, f"figures/tables without a registry row: {missing}"


def test_implemented_notebooks_have_params_and_nothing_is_unregistered():
    _, entries = load_registry()
    for e in select(entries, None):
        assert e.params_file.exists(), f"{e.name}: notebook without params/{e.name}.yaml"
    assert unregistered_notebooks(entries) == []


def test_select_by_pattern():
    _, entries = load_registry()
    chosen = select(entries, "balu_fig3_*", implemented_only=False)
    assert chosen and all(e.name.startswith("balu_fig3_") for e in chosen)
    assert {e.name for e in select(entries, "liu_fig1,hua_fig7", implemented_only=False)} == {"liu_fig1", "hua_fig7"}


def test_claims_load_and_point_at_registered_notebooks():
    _, entries = load_registry()
    names = {e.name for e in entries}
    for c in load_claims():
        assert c.notebook in names, f"claim {c.id}: notebook {c.notebook} is not in the registry"


def _claim(**kw):
    base = dict(id="c", paper="liu", where="s", quote="q", dataset="netflix", reference=0.44, unit="u",
                measures="m", notebook="liu_fig1", tolerance=0.02)
    base.update(kw)
    return Claim(**base)


def test_verdicts_on_hand_made_measurements():
    c = _claim()
    real_close = Measurement("c", 0.45, "netflix", True).as_dict()
    real_far = Measurement("c", 0.30, "netflix", True).as_dict()
    standin = Measurement("c", 0.44, "netflix [synthetic stand-in]", False).as_dict()
    other = Measurement("c", 0.2, "ml-100k", True).as_dict()
    assert verdict(c, []) == (NOT_MEASURED, None)
    assert verdict(c, [other])[0] == NOT_MEASURED  # a real value on another dataset does not judge this claim
    assert verdict(c, [standin])[0] == STANDIN_ONLY  # even when it matches the paper exactly
    assert verdict(c, [standin, real_close])[0] == REPRODUCED
    assert verdict(c, [real_far])[0] == DIFFERS
    assert _claim(tolerance=None, direction="greater", reference=1.0).judge(1.44) == REPRODUCED
    assert _claim(tolerance=None, relative_tolerance=0.1, reference=10.0).judge(11.5) == DIFFERS
