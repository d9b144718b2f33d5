"""Numbers a notebook's prose quotes from its paper row, checked against another version of that row.

When a paper row is re-taken with results that moved (other draws of the same law, a fixed bug), the notebook's
markdown may still quote the old row. This lists, per notebook, the numbers of its markdown cells that match the row
at git revision ``REV`` (``results/paper/<name>/``: tables and ``measurements.json``) but no longer match the
working tree's row — the quotes to re-read and update::

    python -m dpmf_lib.quoted_numbers REV NAME [NAME ...]

A quote *matches* a row when some number in the row's files, rounded to the quote's decimals (also ×100 for a
percentage, and with either sign), equals it. A heuristic by design: a quote that matches the new row by coincidence
is missed, and a number the prose derives (a difference of two cells, a ratio) is not checked. Markdown is not in a
row's run hash, so fixing a quote never stales the row.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

from .paths import REPO_ROOT

#: a decimal number with at least one digit after the point (integers are too often counts, years, figure numbers)
_NUMBER = re.compile(r"(?<![\w.])[-−+]?\d+\.\d+(?:[eE][-+]?\d+)?")
_ROW_FILES = (".csv", ".csv.gz", ".json")


def numbers_in(text: str) -> list[str]:
    """The decimal numbers of ``text`` as written (unicode minus kept), in order of first appearance, once each."""
    seen: dict[str, None] = {}
    for m in _NUMBER.finditer(text):
        seen.setdefault(m.group(), None)
    return list(seen)


def values_in(texts) -> list[float]:
    """Every decimal number in ``texts`` (the row's files as text), as floats."""
    return [float(q.replace("−", "-")) for t in texts for q in (m.group() for m in _NUMBER.finditer(t))]


def matches(quote: str, values) -> bool:
    """Whether ``quote`` equals some value rounded to the quote's decimals (or the value ×100, either sign)."""
    s = quote.replace("−", "-").lstrip("+")
    mantissa, *exponent = re.split("[eE]", s)
    decimals = len(mantissa.split(".")[1]) - (int(exponent[0]) if exponent else 0)  # 1.5e-3 has 4 decimals
    x = float(s)
    return any(round(w, decimals) == x for v in values for w in (v, -v, 100 * v, -100 * v))


def _decode(name: str, data: bytes) -> str:
    return (gzip.decompress(data) if name.endswith(".gz") else data).decode("utf-8", errors="ignore")


def row_texts(name: str, rev: str | None = None, root: Path = REPO_ROOT) -> list[str]:
    """The text of ``results/paper/<name>/``'s tables and JSON files, in the working tree or at git revision ``rev``."""
    folder = f"results/paper/{name}"
    if rev is None:
        return [_decode(p.name, p.read_bytes()) for p in sorted((root / folder).glob("*")) if p.name.endswith(_ROW_FILES)]
    listing = subprocess.run(["git", "-C", str(root), "ls-tree", "--name-only", f"{rev}:{folder}"],
                             capture_output=True, text=True, check=True).stdout.split()
    return [_decode(n, subprocess.run(["git", "-C", str(root), "show", f"{rev}:{folder}/{n}"], capture_output=True,
                                      check=True).stdout) for n in listing if n.endswith(_ROW_FILES)]


def markdown_of(name: str, root: Path = REPO_ROOT) -> str:
    nb = json.loads((root / "notebooks" / f"{name}.ipynb").read_text())
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def moved_quotes(quotes, old_values, new_values) -> list[str]:
    """The quotes that match the old row and not the new one."""
    return [q for q in quotes if matches(q, old_values) and not matches(q, new_values)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dpmf_lib.quoted_numbers", description=__doc__.split("\n\n")[0])
    ap.add_argument("rev", help="git revision holding the previous rows (e.g. HEAD before the re-take)")
    ap.add_argument("names", nargs="+", help="notebook names")
    args = ap.parse_args(argv)
    stale = 0
    for name in args.names:
        quotes = numbers_in(markdown_of(name))
        old, new = values_in(row_texts(name, args.rev)), values_in(row_texts(name))
        in_old = [q for q in quotes if matches(q, old)]
        moved = moved_quotes(quotes, old, new)
        stale += len(moved)
        print(f"{name}: {len(quotes)} numbers quoted, {len(in_old)} match the row at {args.rev}; "
              f"no longer in the current row: {', '.join(moved) if moved else 'none'}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
