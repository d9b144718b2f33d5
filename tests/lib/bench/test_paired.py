"""Paired, interleaved repeats (dpmf_lib.bench.paired): ratios formed within a repeat survive a drifting machine."""

import math

import numpy as np

import pytest

from dpmf_lib.bench.__main__ import table
from dpmf_lib.bench.paired import interleave, median_record, paired_ratio


def test_interleave_reverses_the_order_every_other_repeat():
    calls = []
    group = {k: (lambda k=k: calls.append(k) or len(calls)) for k in "abc"}
    values = interleave(group, 4)
    assert calls == list("abc" "cba" "abc" "cba")  # neighbours stay neighbours, each side of a pair goes first
    assert values["a"].tolist() == [1, 6, 7, 12]  # the call index at which each of a's values was taken


def test_interleave_keeps_tuples_as_columns():
    values = interleave({"x": lambda: (1.0, 2.0, 3.0)}, 3)
    assert values["x"].shape == (3, 3) and values["x"][:, 1].tolist() == [2.0, 2.0, 2.0]


def test_a_paired_ratio_cancels_a_drift_that_a_ratio_of_medians_does_not():
    # the machine slows down 2x over the run (a co-tenant arriving); configuration a is always 2x as fast as b
    clock = {"t": 0}

    def speed(base):
        def measure():
            clock["t"] += 1
            return base / (1.0 + 0.1 * clock["t"])
        return measure

    values = interleave({"a": speed(2.0), "b": speed(1.0)}, 5)
    r = paired_ratio("a_over_b", values["a"], values["b"], ">= 1.9")
    # each repeat measures a and b one step apart, in alternating order: the per-repeat ratios straddle 2 (one
    # step of drift each way) and their median is 2 within 10 %
    assert r["low"] < 2.0 < r["high"] and r["value"] == pytest.approx(2.0, rel=0.1)
    assert r["met"] and r["repeats"] == 5
    # (the same ten timings taken as five of a, then five of b, give 2·1.8/1.3 ≈ 2.8 on this drift)


def test_pairs_placed_apart_in_a_group_still_share_their_repeat():
    # a slow machine in repeat 2 only: every ratio formed within a repeat is exact, however far apart its sides sit
    repeat = {"k": 0, "calls": 0}

    def make(base):
        def measure():
            repeat["calls"] += 1
            k = (repeat["calls"] - 1) // 4  # four measurements per repeat
            return base / (3.0 if k == 2 else 1.0)
        return measure

    values = interleave({"a": make(4.0), "x": make(1.0), "y": make(1.0), "b": make(2.0)}, 5)
    r = paired_ratio("a_over_b", values["a"], values["b"], None)
    assert (r["low"], r["value"], r["high"]) == (2.0, 2.0, 2.0)


def test_paired_ratio_counts_the_repeats_that_meet_the_target_alone():
    r = paired_ratio("x", [3.2, 2.9, 3.4, 3.1, 2.5], [1, 1, 1, 1, 1], ">= 3")
    assert r["value"] == pytest.approx(3.1) and r["met"] is True
    assert r["repeats_meeting"] == 3 and (r["low"], r["high"]) == (2.5, 3.4)
    no_target = paired_ratio("y", [1, 2], [1, 1], None)
    assert no_target["met"] is None and "repeats_meeting" not in no_target


def test_paired_ratio_refuses_unpaired_measurements():
    with pytest.raises(ValueError, match="same, non-zero number of repeats"):
        paired_ratio("x", [1, 2, 3], [1, 2], ">= 1")


def test_a_repeat_without_a_positive_denominator_is_left_out_not_counted_as_meeting():
    # a denominator below the clock's resolution (0) or a difference of readings that came out negative: divided by
    # them the ratios were inf and -40, and -40 met "<= 1"; they are not measurements of the ratio
    r = paired_ratio("setup_over_rounds", [1.2, 0.4, 0.4, 1.1], [1.0, 0.0, -0.01, 1.0], "<= 1")
    assert r["repeats"] == 2 and r["repeats_left_out"] == 2 and "2 of 4 repeats left out" in r["note"]
    assert paired_ratio("z", [1.0, -0.5, 1.0], [1.0, 1.0, 1.0], "<= 1")["repeats_left_out"] == 1  # a negative time
    assert r["value"] == pytest.approx(1.15) and r["met"] is False and r["repeats_meeting"] == 0
    assert (r["low"], r["high"]) == (pytest.approx(1.1), pytest.approx(1.2))
    assert "repeats_left_out" not in paired_ratio("x", [1.0, 2.0], [1.0, 1.0], "<= 1")
    nothing = paired_ratio("y", [0.3, float("nan")], [0.0, 1.0], "<= 1")
    assert math.isnan(nothing["value"]) and nothing["met"] is None and nothing["repeats"] == 0
    assert nothing["target"] == "<= 1" and "not measured" in nothing["note"] and nothing["repeats_meeting"] == 0
    doc = {"suite": "mf", "profile": "tiny", "wall_time_s": 1.0, "finished_utc": "t", "records": [],
           "ratios": [r, nothing]}
    rows = {x.split()[0]: x for x in table(doc).splitlines() if x.startswith(("setup_over_rounds", "y "))}
    assert "NOT met (alone in 0 of 2 repeats) (2 of 4 repeats left out" in rows["setup_over_rounds"]
    assert "nan" in rows["y"] and "—" in rows["y"] and "not measured" in rows["y"]


def test_median_record_keeps_its_spread_out_of_the_compared_params():
    rec = median_record("csgd", "updates_per_s", [3.0, 1.0, 2.0], "updates/s", d=128)
    assert rec["value"] == 2.0 and rec["params"] == {"d": 128}
    assert (rec["repeats"], rec["low"], rec["high"]) == (3, 1.0, 3.0)


def test_the_table_shows_the_range_and_how_many_repeats_meet():
    doc = {"suite": "mf", "profile": "quick", "wall_time_s": 1.0, "finished_utc": "t",
           "records": [median_record("csgd", "updates_per_s", [3e6, 1e6, 2e6], "updates/s", d=128)],
           "ratios": [paired_ratio("csgd_over_naive", [3.2, 2.9, 3.4], [1, 1, 1], ">= 3")]}
    text = table(doc)
    row = next(x for x in text.splitlines() if x.startswith("csgd_over_naive"))
    assert "[2.9, 3.4] ×3" in row and "met (alone in 2 of 3 repeats)" in row
    rec = next(x for x in text.splitlines() if x.startswith("csgd · updates_per_s"))
    assert "2e+06 [1e+06, 3e+06] ×3" in rec


def test_best_times_reverses_the_order_so_no_call_always_follows_the_heavy_one(monkeypatch):
    import time

    from dpmf_lib.bench.paired import best_times

    clock, order = {"t": 0.0}, []
    monkeypatch.setattr(time, "perf_counter", lambda: clock["t"])  # a fake clock the calls advance

    def make(name, cost):
        def fn():
            # a call straight after "heavy" costs 3x (as the lsh suite's did after qoLSH)
            clock["t"] += cost * (3 if order and order[-1] == "heavy" else 1)
            order.append(name)
        return fn

    t_heavy, t_ours, t_theirs = best_times([make("heavy", 4.0), make("ours", 1.0), make("theirs", 1.0)], 4)
    assert order[:6] == ["heavy", "ours", "theirs", "theirs", "ours", "heavy"]
    # ours followed heavy in the forward repeats only: its best time is the unpenalised one (a fixed order: 3.0)
    assert (t_heavy, t_ours, t_theirs) == (4.0, 1.0, 1.0)


def test_repeats_a_guard_excludes_are_left_out_and_named():
    num, den = np.array([3.0, 1.0, 3.2, 0.0]), np.array([2.0, 2.0, 2.0, 0.0])
    r = paired_ratio("scaling", num, den, ">= 1.5", exclude=[False, True, False, False],
                     exclude_reason="in which the host ran both threads on one core")
    assert r["repeats"] == 2 and r["repeats_left_out"] == 2
    assert r["value"] == pytest.approx(1.55) and r["low"] == pytest.approx(1.5) and r["repeats_meeting"] == 2
    assert "2 of 4 repeats left out" in r["note"]
    assert "1 in which the host ran both threads on one core" in r["note"] and "1 with a denominator" in r["note"]
    # a repeat the clock already left out is not counted twice
    both = paired_ratio("scaling", num, den, ">= 1.5", exclude=[False, False, False, True],
                        exclude_reason="GUARD-REASON")
    assert both["repeats_left_out"] == 1 and "GUARD-REASON" not in both["note"]
    with pytest.raises(ValueError, match="one flag per repeat"):
        paired_ratio("scaling", num, den, None, exclude=[True])
    none = paired_ratio("scaling", num[:2], den[:2], ">= 1.5", exclude=[True, True], exclude_reason="on one core")
    assert np.isnan(none["value"]) and "2 on one core" in none["note"]
    assert none["repeats_left_out"] == 2 and none["met"] is None and none["repeats_meeting"] == 0


def test_no_verdict_rests_on_fewer_than_half_of_the_repeats():
    num, den = np.full(5, 2.0), np.ones(5)
    three = paired_ratio("scaling", num, den, ">= 1.6", exclude=[True, True, False, False, False],
                         exclude_reason="on one core")
    assert three["met"] is True and three["repeats"] == 3
    half = paired_ratio("scaling", num[:4], den[:4], ">= 1.6", exclude=[True, True, False, False],
                        exclude_reason="on one core")
    assert half["met"] is True and half["repeats"] == 2  # exactly half left: still a verdict
    two = paired_ratio("scaling", num, den, ">= 1.6", exclude=[True, True, True, False, False],
                       exclude_reason="on one core")
    assert two["met"] is None and two["value"] == 2.0 and two["repeats_meeting"] == 2
    assert "too few repeats left for a verdict" in two["note"]
