"""Benchmark suites: ``python -m dpmf_lib.bench SUITE --profile quick|paper --out FILE``.

A suite is a module ``dpmf_lib.bench.<suite>`` with ``run(profile) -> {"records": [...], "ratios": [...]}``.
Records are ``{"name", "params", "metric", "value", "unit"}``; ratios ``{"name", "value", "target"}`` are computed
from records of the same run (absolute times drift on shared machines; ratios taken together do not).
"""

SUITES = ("machine", "mf", "sketch", "attacks", "lsh", "pnbm", "paper")
BENCH_PROFILES = ("quick", "paper")


def record(name: str, metric: str, value: float, unit: str, **params) -> dict:
    return {"name": name, "params": params, "metric": metric, "value": float(value), "unit": unit}


def ratio(name: str, value: float, target: str | None) -> dict:
    """``target`` is a readable condition such as ``">= 3"``; ``met`` says whether ``value`` satisfies it.

    ``None``: a ratio worth reporting that no issue or paper sets a target for (``met`` is then ``None``) — better
    than inventing a target the value cannot miss.
    """
    if target is None:
        return {"name": name, "value": float(value), "target": None, "met": None}
    op, _, num = target.partition(" ")
    bound = float(num)
    value = float(value)  # a numpy scalar would give a numpy bool, which the JSON writer turned into "False"
    met = {">=": value >= bound, "<=": value <= bound, ">": value > bound, "<": value < bound}.get(op)
    return {"name": name, "value": value, "target": target, "met": met}
