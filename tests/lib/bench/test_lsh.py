"""The lsh bench's tie-tolerant comparison with faiss (:func:`dpmf_lib.bench.lsh.knn_equivalent`): equal up to the
order of tied rows at the k-th distance, and nothing looser."""

import numpy as np

from dpmf_lib import lsh
from dpmf_lib.bench.lsh import knn_equivalent


def _case():
    # distances to the query: row0 0, row1 1, row2 0, row3 1, row4 2, row5 1
    B = np.array([[1, 1, 1, 1], [1, 1, 1, -1], [1, 1, 1, 1], [-1, 1, 1, 1], [-1, -1, 1, 1], [1, -1, 1, 1]], np.int8)
    return lsh.pack_codes(B[:1]), lsh.pack_codes(B)


def test_equivalent_up_to_tie_order_at_the_kth_distance():
    Q, D = _case()
    oi, od = lsh.hamming_knn(Q, D, 4, n_bits=4)
    assert oi.tolist() == [[0, 2, 1, 3]] and od.tolist() == [[0, 0, 1, 1]]
    assert knn_equivalent(Q, D, oi, od, oi, od)
    assert knn_equivalent(Q, D, oi, od, np.array([[2, 0, 5, 1]]), od)  # other tied rows at the k-th distance
    assert knn_equivalent(Q, D, oi, od, np.array([[2, 0, 3, 5]]), od)


def test_not_equivalent_when_wrong():
    Q, D = _case()
    oi, od = lsh.hamming_knn(Q, D, 4, n_bits=4)
    assert not knn_equivalent(Q, D, oi, od, np.array([[0, 2, 1, 4]]), od)  # row 4 is at distance 2, not 1
    assert not knn_equivalent(Q, D, oi, od, oi, np.array([[0, 0, 1, 2]], np.int32))  # distances differ
    assert not knn_equivalent(Q, D, oi, od, np.array([[0, 1, 2, 3]]), np.array([[0, 1, 0, 1]], np.int32))
    assert not knn_equivalent(Q, D, oi, od, oi[:, :3], od[:, :3])
    assert not knn_equivalent(Q, D, oi, od, np.array([[0, 0, 1, 3]]), od)  # row 0 twice: row 2 missing below k-th
    assert not knn_equivalent(Q, D, oi, od, np.array([[0, 2, 1, 1]]), od)  # row 1 twice at the k-th distance
