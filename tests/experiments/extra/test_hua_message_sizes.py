"""Hua et al. Sec. 5 byte counts: exact formulas (the claims are judged on them, as analytic, not on a stand-in)."""

from dpmf_lib.experiments.extra.extra_hua_message_sizes import CLAIMS, paper_minimal_sizes


def test_paper_minimal_sizes_are_the_papers_numbers_at_d50():
    s = paper_minimal_sizes(50)
    assert s["user_down_20_items"] == 12_000  # 20 items × (v_j, psi, tau_hat) × 50 × 4 B: the paper's "12KB"
    assert s["user_up_20_items"] == 4_000
    assert s["tp_to_recommender_10000_pairs"] == 2_000_000  # 10^4 pairs × 50 × 4 B
    assert set(CLAIMS) == set(s)  # every claim is wired to one of these formulas
