"""Balu (2016) thesis, Table 1 of the French summary ("Caractéristiques des jeux de données").

It prints the same numbers as Table 3.1 (Digg 531/331/200/1237/317/25.63 %, MovieLens 943/600/343/1682/106/6.30 %),
so this notebook reuses :mod:`dpmf_lib.experiments.balu.balu_table3_1` and only retitles the table.
"""

from __future__ import annotations

import pandas as pd

from . import balu_table3_1

run = balu_table3_1.run


def plot(df: pd.DataFrame, params: dict):
    fig = balu_table3_1.plot(df, params)
    ax = fig.axes[0]
    ax.set_title(ax.get_title().replace("Table 3.1: dataset characteristics",
                                        "Table 1 (résumé): caractéristiques des jeux de données (= Table 3.1)"),
                 fontsize="small")
    return fig
