"""dpmf_lib.quoted_numbers: which numbers of a notebook's prose came from the previous paper row and left the new one."""

import gzip
import json
import subprocess

from dpmf_lib import quoted_numbers as qn


def test_numbers_in_keeps_the_written_form_once_and_skips_integers():
    text = "RMSE 0.142 [0.137, 0.148] at ε = 1; gap −0.0045 (Fig. 4.3, 5 seeds, 0.142 again), +1.5e-3"
    assert qn.numbers_in(text) == ["0.142", "0.137", "0.148", "−0.0045", "4.3", "+1.5e-3"]


def test_matches_rounds_to_the_quotes_decimals_with_percent_and_sign():
    assert qn.matches("0.142", [0.14213])
    assert not qn.matches("0.142", [0.1426])
    assert qn.matches("14.2", [0.1421])  # a percentage of a fraction
    assert qn.matches("−0.0045", [-0.00449])
    assert qn.matches("0.0045", [-0.00449])  # prose often drops the sign of a gap
    assert qn.matches("1.5e-3", [0.0015])
    assert not qn.matches("0.9", [])


def test_moved_quotes_are_those_of_the_old_row_only():
    quotes = ["0.142", "0.951", "3.5"]
    assert qn.moved_quotes(quotes, old_values=[0.1421, 0.9512, 3.5], new_values=[0.1433, 0.9512, 3.5]) == ["0.142"]
    assert qn.moved_quotes(quotes, old_values=[0.2], new_values=[0.3]) == []  # never in the row: not a quote of it


def test_main_compares_a_git_revision_with_the_working_tree(tmp_path, capsys):
    root = tmp_path
    (root / "notebooks").mkdir()
    (root / "results/paper/toy").mkdir(parents=True)
    md = {"cell_type": "markdown", "metadata": {}, "source": ["Test RMSE 0.952 (was quoted), a gap of 12.5 %."]}
    (root / "notebooks/toy.ipynb").write_text(json.dumps({"cells": [md], "metadata": {}, "nbformat": 4,
                                                          "nbformat_minor": 5}))
    (root / "results/paper/toy/toy.csv").write_text("rmse,gap\n0.95213,0.125\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "old row"], check=True)
    (root / "results/paper/toy/toy.csv").unlink()
    (root / "results/paper/toy/toy.csv.gz").write_bytes(gzip.compress(b"rmse,gap\n0.95341,0.125\n"))
    old = qn.values_in(qn.row_texts("toy", "HEAD", root))
    new = qn.values_in(qn.row_texts("toy", None, root))
    assert old == [0.95213, 0.125] and new == [0.95341, 0.125]
    assert qn.moved_quotes(qn.numbers_in(qn.markdown_of("toy", root)), old, new) == ["0.952"]
