"""The look of the chapter-5 encoders in the figures: the thesis's qoLSH in the paper's role, the LSH variants it is
compared with in the compared roles (:data:`dpmf_lib.plotting.ROLES`), anti-sparse codes grey and the exhaustive
optimal quantizer (a bound, not a rival) black dotted."""

from __future__ import annotations

from ...plotting import ROLES

LOOKS = {"qoLSH": ROLES["paper"], "LSH": ROLES["compared"], "LSH (Gaussian)": ROLES["compared"],
         "LSH+frame": ROLES["compared-alt"],
         "Anti-sparse": {"color": "#777777", "marker": "D", "ls": "-.", "mfc": "white"},
         "Optimal": {"color": "#000000", "marker": "v", "ls": ":"}}


def look(method: str) -> dict:
    """Colour, marker and line style of an encoder (a purple dash-dot for one not listed)."""
    return dict(LOOKS.get(method, ROLES["ours-alt"]))
