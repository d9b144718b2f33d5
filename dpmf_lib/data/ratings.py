"""The ratings container every kernel and experiment consumes.

Ratings are three parallel contiguous arrays — ``users`` (int32), ``items`` (int32), ``values`` (float32) — with ids
renumbered to ``0..n_users-1`` / ``0..n_items-1``. The original ids are kept (``user_ids[k]`` is the raw id of user ``k``)
so results can be mapped back to the source file. ``source`` says where the data came from: a real dataset with its
checksum, or a synthetic stand-in; every output built from a ``Ratings`` carries that label.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import DataFormatError, ParameterError


@dataclass(frozen=True)
class DataSource:
    """Provenance of a ratings set: what it is, and whether it is real."""

    dataset: str  # registry id, e.g. "ml-100k" or "netflix"
    real: bool  # False for a synthetic stand-in
    checksum: str | None = None  # sha256 of the source files (real data) or of the generator parameters (stand-in)
    note: str = ""  # e.g. "synthetic stand-in for Netflix (480,189 x 17,770), seed 0, scale 1.0"

    @property
    def label(self) -> str:
        """Short label for titles and CSV columns: ``ml-100k`` or ``netflix [synthetic stand-in]``."""
        return self.dataset if self.real else f"{self.dataset} [synthetic stand-in]"

    def as_dict(self) -> dict:
        return {"dataset": self.dataset, "real": self.real, "checksum": self.checksum, "note": self.note,
                "label": self.label}


@dataclass(frozen=True)
class Ratings:
    users: np.ndarray  # int32, contiguous ids 0..n_users-1
    items: np.ndarray  # int32, contiguous ids 0..n_items-1
    values: np.ndarray  # float32
    n_users: int
    n_items: int
    rating_scale: tuple[float, float]  # (r_min, r_max) of the dataset
    source: DataSource
    user_ids: np.ndarray | None = None  # raw id of each contiguous user id (None: identity)
    item_ids: np.ndarray | None = None
    timestamps: np.ndarray | None = None  # int64 seconds, where the format has them
    extra: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        for name, dtype in (("users", np.int32), ("items", np.int32), ("values", np.float32)):
            arr = getattr(self, name)
            if not (isinstance(arr, np.ndarray) and arr.dtype == dtype and arr.ndim == 1 and arr.flags.c_contiguous):
                object.__setattr__(self, name, np.ascontiguousarray(arr, dtype=dtype))
        n = len(self.users)
        if len(self.items) != n or len(self.values) != n:
            raise ValueError(f"users/items/values lengths differ: {n}, {len(self.items)}, {len(self.values)}")
        if n:
            if self.users.min() < 0 or self.users.max() >= self.n_users:
                raise ValueError(f"user ids must lie in [0, {self.n_users}); got [{self.users.min()}, {self.users.max()}]")
            if self.items.min() < 0 or self.items.max() >= self.n_items:
                raise ValueError(f"item ids must lie in [0, {self.n_items}); got [{self.items.min()}, {self.items.max()}]")

    def __len__(self) -> int:
        return len(self.values)

    @property
    def n_ratings(self) -> int:
        return len(self.values)

    def subset(self, index: np.ndarray, note: str | None = None) -> "Ratings":
        """Rows ``index`` (boolean mask or integer positions), keeping the id space and the source label."""
        ts = None if self.timestamps is None else np.ascontiguousarray(self.timestamps[index])
        src = self.source if note is None else replace(self.source, note=(self.source.note + "; " + note).strip("; "))
        return replace(self, users=np.ascontiguousarray(self.users[index]), items=np.ascontiguousarray(self.items[index]),
                       values=np.ascontiguousarray(self.values[index]), timestamps=ts, source=src)

    def item_counts(self) -> np.ndarray:
        """Number of ratings of each item (int64, length ``n_items``)."""
        return np.bincount(self.items, minlength=self.n_items)

    def user_counts(self) -> np.ndarray:
        return np.bincount(self.users, minlength=self.n_users)

    def user_csr(self) -> "CSR":
        """User-major compressed rows: the ratings of user ``u`` are ``indptr[u]:indptr[u+1]``, items ascending."""
        return CSR.from_coo(self.users, self.items, self.values, self.n_users)

    def item_csr(self) -> "CSR":
        return CSR.from_coo(self.items, self.users, self.values, self.n_items)

    def describe(self) -> dict:
        """Shape statistics: the columns of the papers' dataset tables."""
        n = self.n_ratings
        return {"dataset": self.source.label, "real": self.source.real, "users": self.n_users, "items": self.n_items,
                "ratings": n, "density": n / max(1, self.n_users * self.n_items),
                "rating_min": float(self.rating_scale[0]), "rating_max": float(self.rating_scale[1]),
                "mean_rating": float(self.values.mean()) if n else float("nan")}


@dataclass(frozen=True)
class CSR:
    """Compressed sparse rows with int64 offsets, int32 columns and float32 values, all contiguous (numba-friendly)."""

    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    n_rows: int

    @classmethod
    def from_coo(cls, rows: np.ndarray, cols: np.ndarray, values: np.ndarray, n_rows: int) -> "CSR":
        order = np.lexsort((cols, rows))  # stable: row-major, columns ascending within a row
        counts = np.bincount(rows, minlength=n_rows)
        indptr = np.zeros(n_rows + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return cls(indptr, np.ascontiguousarray(cols[order], dtype=np.int32),
                   np.ascontiguousarray(values[order], dtype=np.float32), int(n_rows))

    def row(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = self.indptr[r], self.indptr[r + 1]
        return self.indices[a:b], self.values[a:b]


def check_rating_scale(rating_scale, rating_step=None) -> tuple[tuple[float, float], float | None]:
    """``(rmin, rmax)`` and the step between rating values, validated: a :class:`ParameterError` naming the parameter.

    An inverted scale would otherwise report every rating of a good file as "outside the scale" — a misleading
    error about the data when the mistake is in the call (or in ``data_fetch/registry.py``).
    """
    try:
        lo, hi = (float(x) for x in rating_scale)
    except (TypeError, ValueError):
        raise ParameterError(f"rating_scale must be a pair (rmin, rmax) of numbers, got {rating_scale!r}") from None
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ParameterError(f"rating_scale must hold finite numbers, got {rating_scale!r}")
    if lo > hi:
        raise ParameterError(f"rating_scale {rating_scale!r} is inverted: write it (rmin, rmax) = ({hi:g}, {lo:g})")
    if rating_step is not None:
        if isinstance(rating_step, bool) or not isinstance(rating_step, (int, float, np.floating, np.integer)) \
                or not np.isfinite(rating_step) or rating_step <= 0:
            raise ParameterError(f"rating_step must be a finite number > 0 (or None: any value), got {rating_step!r}")
        rating_step = float(rating_step)
        n = (hi - lo) / rating_step
        if abs(n - round(n)) > 1e-9:
            raise ParameterError(f"rating_step {rating_step:g} does not divide the rating_scale [{lo:g}, {hi:g}]: "
                                 "fix the step or the scale")
    return (lo, hi), rating_step


def require_ratings(r, name: str = "train", who: str = "this trainer") -> None:
    """Refuse an empty ratings set at the top of a trainer, naming the parameter (an empty set otherwise surfaces as a
    ZeroDivisionError or an empty-array reduction deep inside a kernel)."""
    if r is None or len(r) == 0:
        raise ParameterError(f"{who}: `{name}` holds no ratings — pass a non-empty ratings set (did a split, trim or "
                             "filter remove every rating?)")


def from_raw_ids(raw_users: np.ndarray, raw_items: np.ndarray, values: np.ndarray, *, rating_scale: tuple[float, float],
                 source: DataSource, path: str = "<memory>", timestamps: np.ndarray | None = None,
                 line_numbers: np.ndarray | None = None, rating_step: float | None = None) -> Ratings:
    """Validate raw triples and renumber ids to contiguous ranges.

    Raises :class:`DataFormatError` naming ``path`` and the offending line for no ratings at all, NaN/inf ratings,
    ratings outside ``rating_scale``, ratings off the ``rating_step`` grid (when given: e.g. 0.5 for half stars) and
    duplicate (user, item) pairs; :class:`ParameterError` for an invalid ``rating_scale``/``rating_step``.
    ``line_numbers[k]`` is the 1-based line of row ``k`` in ``path`` (defaults to ``k + 1``).
    """
    (lo, hi), rating_step = check_rating_scale(rating_scale, rating_step)
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        # An empty Ratings would load "fine" and fail later as a ZeroDivisionError in a trainer.
        raise DataFormatError(path, None, "no ratings in this file (it is empty, or holds only a header or blank "
                              "lines)", "check that the download or copy completed and that this is the ratings file")
    lines = (np.arange(1, len(values) + 1) if line_numbers is None else np.asarray(line_numbers))
    bad = ~np.isfinite(values)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise DataFormatError(path, int(lines[k]), f"rating is {values[k]} (not a finite number)",
                              "remove or fix the line; the workbook never imputes ratings")
    out = (values < lo) | (values > hi)
    if out.any():
        k = int(np.flatnonzero(out)[0])
        raise DataFormatError(path, int(lines[k]), f"rating {values[k]:g} is outside the dataset's scale [{lo:g}, {hi:g}]",
                              "check that the file belongs to this dataset, or fix the rating scale in data_fetch/registry.py")
    if rating_step is not None:
        q = (values - lo) / rating_step
        off = np.abs(q - np.rint(q)) > 1e-6
        if off.any():
            k = int(np.flatnonzero(off)[0])
            raise DataFormatError(path, int(lines[k]), f"rating {values[k]:g} is not on the dataset's grid "
                                  f"{lo:g}, {lo + rating_step:g}, …, {hi:g} (step {rating_step:g})",
                                  "check that the file belongs to this dataset, or fix rating_step in "
                                  "data_fetch/registry.py")
    user_ids, users = np.unique(np.asarray(raw_users), return_inverse=True)
    item_ids, items = np.unique(np.asarray(raw_items), return_inverse=True)
    users = users.astype(np.int32)
    items = items.astype(np.int32)
    key = users.astype(np.int64) * len(item_ids) + items
    order = np.argsort(key, kind="stable")
    dup = np.flatnonzero(key[order][1:] == key[order][:-1])
    if len(dup):
        first, second = sorted((int(order[dup[0]]), int(order[dup[0] + 1])))
        raise DataFormatError(path, int(lines[second]),
                              f"duplicate (user, item) pair ({raw_users[second]}, {raw_items[second]}) — first seen on line "
                              f"{int(lines[first])}", "keep one rating per (user, item) pair")
    return Ratings(users=users, items=items, values=values.astype(np.float32), n_users=len(user_ids),
                   n_items=len(item_ids), rating_scale=(float(lo), float(hi)), source=source, user_ids=user_ids,
                   item_ids=item_ids, timestamps=None if timestamps is None else np.asarray(timestamps, dtype=np.int64))
