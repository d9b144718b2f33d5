"""Readers for the dataset file formats, with errors that name the file, the line, the problem and the fix.

Formats (the ``format`` field of :mod:`data_fetch.registry`):

- ``tab``               ``user<TAB>item<TAB>rating[<TAB>timestamp]`` (ml-100k ``u.data``; EachMovie converted)
- ``double-colon``      ``user::item::rating::timestamp`` (ml-1m / ml-10m ``ratings.dat``)
- ``csv-header``        comma-separated with a header naming the user, item, rating (and timestamp) columns
- ``netflix-per-movie`` ``MovieID:`` then ``CustomerID,Rating,YYYY-MM-DD`` lines (``mv_*.txt``; a file may hold several
                        movies, as the Kaggle ``combined_data_*.txt`` do)
- ``kddcup-yahoo``      ``UserID|NumRatings`` then NumRatings lines ``ItemID<TAB>Score<TAB>Date<TAB>Time``
- ``binary-profiles``   ``user<TAB>item`` (or whitespace), one line per item in a user's profile; every value is 1
- ``fvecs``/``ivecs``/``bvecs``  TEXMEX vectors: each record is an int32 dimension then the components

Choices:
- Text is tokenised by numba kernels over the raw bytes (one pass, no Python per line) into float64 columns, then
  validated with numpy; a malformed line stops the kernel and is reported with its 1-based line number. Blank lines
  are skipped; ``\\r\\n`` endings, a UTF-8 byte-order mark and fields in double quotes (``"1","10","4"``) are accepted.
- Ids: float64 holds integers exactly only up to 2**53, so ids beyond it would silently merge (9007199254740993 and
  …992 become one user). The delimited formats (tab, ``::``, CSV, binary profiles) therefore also parse id fields as
  exact int64 when they are plain integers; an id that does not fit in int64, or that is ≥ 2**53 and not written as a
  plain integer (``1e20``), is a :class:`DataFormatError`. Formats read by their own tokeniser (Netflix, KDD Cup)
  refuse ids ≥ 2**53 the same way. A file with no ratings at all is an error, not an empty ``Ratings``.
- ``nan``/``inf`` are parsed as numbers so that :func:`~dpmf_lib.data.ratings.from_raw_ids` reports them as "not a
  finite number" rather than "non-numeric". Ratings outside the scale and duplicate (user, item) pairs are rejected by
  ``from_raw_ids``. Ids must be non-negative integers.
- Rows stay in FILE ORDER (the ml-100k folds depend on it); ids are renumbered to 0..n-1 in ascending raw-id order.
- Netflix dates become int64 days since 1970-01-01 (stored as seconds in ``timestamps``); KDD-Cup dates are kept as
  the file's day numbers plus seconds of day (``day * 86400 + seconds``) since the base date is not published.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

import numba
import numpy as np

from ..errors import DataFormatError
from .ratings import DataSource, Ratings, check_rating_scale, from_raw_ids

# error codes of the tokenisers
_OK, _TOO_FEW, _TOO_MANY, _NOT_NUMERIC, _NO_HEADER, _BAD_HEADER, _BAD_DATE, _COUNT_MISMATCH = range(8)


@numba.njit(cache=True, inline="always")
def _is_space(c):
    return c == 32 or c == 9 or c == 13


@numba.njit(cache=True)
def _trim(buf, a, b):
    """buf[a:b] without surrounding spaces and one pair of double quotes (CSV writers quote every field)."""
    while a < b and _is_space(buf[a]):
        a += 1
    while b > a and _is_space(buf[b - 1]):
        b -= 1
    if b - a >= 2 and buf[a] == 34 and buf[b - 1] == 34:  # "..."
        a += 1
        b -= 1
        while a < b and _is_space(buf[a]):
            a += 1
        while b > a and _is_space(buf[b - 1]):
            b -= 1
    return a, b


_INT64_MAX = np.int64(9223372036854775807)
_ID_EXACT, _ID_NOT_PLAIN, _ID_OVERFLOW = 0, 1, 2


@numba.njit(cache=True)
def _parse_int(buf, a, b):
    """buf[a:b] as an exact int64 when it is a plain integer literal (optional sign, digits; quotes/spaces trimmed).

    Returns (value, state): _ID_EXACT; _ID_NOT_PLAIN (e.g. "1e3", "1.5": the float parse decides); _ID_OVERFLOW
    (plain digits beyond int64).
    """
    a, b = _trim(buf, a, b)
    neg = False
    if a < b and (buf[a] == 45 or buf[a] == 43):
        neg = buf[a] == 45
        a += 1
    if a >= b:
        return np.int64(0), _ID_NOT_PLAIN
    v = np.int64(0)
    for i in range(a, b):
        c = np.int64(buf[i])
        if c < 48 or c > 57:
            return np.int64(0), _ID_NOT_PLAIN
        d = c - 48
        if v > (_INT64_MAX - d) // 10:
            return np.int64(0), _ID_OVERFLOW
        v = v * 10 + d
    return (-v if neg else v), _ID_EXACT


@numba.njit(cache=True)
def _parse_number(buf, a, b):
    """Parse buf[a:b] as a decimal number; returns (value, ok). Accepts sign, fraction, exponent, nan, inf."""
    a, b = _trim(buf, a, b)
    if a >= b:
        return 0.0, False
    sign = 1.0
    if buf[a] == 45 or buf[a] == 43:  # - +
        if buf[a] == 45:
            sign = -1.0
        a += 1
        if a >= b:
            return 0.0, False
    n = b - a
    c0 = buf[a] | 32  # lower case
    if n == 3 and c0 == 110 and (buf[a + 1] | 32) == 97 and (buf[a + 2] | 32) == 110:  # nan
        return np.nan, True
    if n == 3 and c0 == 105 and (buf[a + 1] | 32) == 110 and (buf[a + 2] | 32) == 102:  # inf
        return sign * np.inf, True
    mant = 0.0
    digits = 0
    i = a
    while i < b and 48 <= buf[i] <= 57:
        mant = mant * 10.0 + (buf[i] - 48)
        digits += 1
        i += 1
    scale = 0
    if i < b and buf[i] == 46:  # .
        i += 1
        while i < b and 48 <= buf[i] <= 57:
            mant = mant * 10.0 + (buf[i] - 48)
            scale -= 1
            digits += 1
            i += 1
    if digits == 0:
        return 0.0, False
    if i < b and (buf[i] | 32) == 101:  # e
        i += 1
        esign = 1
        if i < b and (buf[i] == 45 or buf[i] == 43):
            if buf[i] == 45:
                esign = -1
            i += 1
        e = 0
        ed = 0
        while i < b and 48 <= buf[i] <= 57:
            e = e * 10 + (buf[i] - 48)
            ed += 1
            i += 1
        if ed == 0:
            return 0.0, False
        scale += esign * e
    if i != b:
        return 0.0, False
    if scale < 0:
        return sign * mant / 10.0 ** (-scale), True
    return sign * mant * 10.0 ** scale, True


@numba.njit(cache=True)
def _tokenize(buf, delim, n_fields, skip_first, out, lines, id_slot, ids, id_state):
    """Split ``buf`` into lines and fields; parse every field as a number into ``out[row, field]``.

    ``delim`` is a 1- or 2-byte separator, or empty for runs of spaces/tabs. Field ``f`` with ``id_slot[f] = k ≥ 0``
    is also parsed exactly into ``ids[row, k]`` with its ``_parse_int`` state in ``id_state[row, k]``.
    Returns (rows, err_code, err_line, field).
    """
    n = len(buf)
    dlen = len(delim)
    pos = 0
    line = 0
    row = 0
    while pos < n:
        end = pos
        while end < n and buf[end] != 10:
            end += 1
        line += 1
        a, b = pos, end
        pos = end + 1
        if line == 1 and skip_first:
            continue
        while b > a and _is_space(buf[b - 1]):
            b -= 1
        s = a
        while s < b and _is_space(buf[s]):
            s += 1
        if s >= b:
            continue  # blank line
        if dlen == 0:
            a = s
        f = 0
        start = a
        i = a
        while True:
            at_end = i >= b
            is_sep = False
            if not at_end:
                if dlen == 0:
                    is_sep = buf[i] == 32 or buf[i] == 9
                elif dlen == 1:
                    is_sep = buf[i] == delim[0]
                else:
                    is_sep = i + 1 < b and buf[i] == delim[0] and buf[i + 1] == delim[1]
            if at_end or is_sep:
                if f >= n_fields:
                    return row, _TOO_MANY, line, f
                v, ok = _parse_number(buf, start, i)
                if not ok:
                    return row, _NOT_NUMERIC, line, f
                out[row, f] = v
                k = id_slot[f]
                if k >= 0:
                    iv, st = _parse_int(buf, start, i)
                    ids[row, k] = iv
                    id_state[row, k] = st
                f += 1
                if at_end:
                    break
                if dlen == 0:
                    while i < b and (buf[i] == 32 or buf[i] == 9):
                        i += 1
                    start = i
                    continue
                i += dlen
                start = i
                continue
            i += 1
        if f < n_fields:
            return row, _TOO_FEW, line, f
        lines[row] = line
        row += 1
    return row, _OK, 0, 0


@numba.njit(cache=True)
def _days_from_civil(y, m, d):
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm)."""
    y -= m <= 2
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    mp = (m + 9) % 12
    doy = (153 * mp + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


@numba.njit(cache=True)
def _parse_date(buf, a, b):
    """YYYY-MM-DD in buf[a:b] → (days since epoch, ok)."""
    while a < b and _is_space(buf[a]):
        a += 1
    while b > a and _is_space(buf[b - 1]):
        b -= 1
    if b - a != 10 or buf[a + 4] != 45 or buf[a + 7] != 45:
        return 0, False
    vals = np.zeros(3, np.int64)
    spans = ((0, 4), (5, 7), (8, 10))
    for k in range(3):
        s, e = spans[k]
        v = 0
        for i in range(a + s, a + e):
            c = buf[i]
            if c < 48 or c > 57:
                return 0, False
            v = v * 10 + (c - 48)
        vals[k] = v
    if vals[1] < 1 or vals[1] > 12 or vals[2] < 1 or vals[2] > 31:
        return 0, False
    return _days_from_civil(vals[0], vals[1], vals[2]), True


@numba.njit(cache=True)
def _tokenize_netflix(buf, users, items, values, days, lines):
    """Parse 'MovieID:' headers and 'user,rating,YYYY-MM-DD' rows. Returns (rows, err_code, err_line, field)."""
    n = len(buf)
    pos = 0
    line = 0
    row = 0
    movie = -1.0
    while pos < n:
        end = pos
        while end < n and buf[end] != 10:
            end += 1
        line += 1
        a, b = pos, end
        pos = end + 1
        while b > a and _is_space(buf[b - 1]):
            b -= 1
        while a < b and _is_space(buf[a]):
            a += 1
        if a >= b:
            continue
        if buf[b - 1] == 58:  # "123:"
            v, ok = _parse_number(buf, a, b - 1)
            if not ok or v < 0 or v != np.floor(v):
                return row, _BAD_HEADER, line, 0
            movie = v
            continue
        if movie < 0:
            return row, _NO_HEADER, line, 0
        c1 = -1
        c2 = -1
        ncomma = 0
        for i in range(a, b):
            if buf[i] == 44:
                ncomma += 1
                if c1 < 0:
                    c1 = i
                elif c2 < 0:
                    c2 = i
        if ncomma < 2:
            return row, _TOO_FEW, line, ncomma + 1
        if ncomma > 2:
            return row, _TOO_MANY, line, 3
        u, ok = _parse_number(buf, a, c1)
        if not ok:
            return row, _NOT_NUMERIC, line, 0
        r, ok = _parse_number(buf, c1 + 1, c2)
        if not ok:
            return row, _NOT_NUMERIC, line, 1
        dd, ok = _parse_date(buf, c2 + 1, b)
        if not ok:
            return row, _BAD_DATE, line, 2
        users[row] = u
        items[row] = movie
        values[row] = r
        days[row] = dd
        lines[row] = line
        row += 1
    return row, _OK, 0, 0


@numba.njit(cache=True)
def _tokenize_kddcup(buf, users, items, values, stamps, lines):
    """Parse 'UserID|N' headers each followed by N 'item<TAB>score<TAB>day<TAB>HH:MM:SS' lines."""
    n = len(buf)
    pos = 0
    line = 0
    row = 0
    user = -1.0
    remaining = 0
    header_line = 0
    while pos < n:
        end = pos
        while end < n and buf[end] != 10:
            end += 1
        line += 1
        a, b = pos, end
        pos = end + 1
        while b > a and _is_space(buf[b - 1]):
            b -= 1
        if a >= b:
            continue
        bar = -1
        for i in range(a, b):
            if buf[i] == 124:
                bar = i
                break
        if bar >= 0:
            if remaining != 0:
                return row, _COUNT_MISMATCH, header_line, 0
            u, ok = _parse_number(buf, a, bar)
            cnt, ok2 = _parse_number(buf, bar + 1, b)
            if not ok or not ok2 or cnt < 0:
                return row, _BAD_HEADER, line, 0
            user = u
            remaining = int(cnt)
            header_line = line
            continue
        if user < 0:
            return row, _NO_HEADER, line, 0
        if remaining == 0:
            return row, _COUNT_MISMATCH, header_line, 0
        # item \t score \t day \t time (time optional)
        tabs = np.full(3, -1, np.int64)
        nt = 0
        for i in range(a, b):
            if buf[i] == 9:
                if nt < 3:
                    tabs[nt] = i
                nt += 1
        if nt < 1:
            return row, _TOO_FEW, line, 1
        if nt > 3:
            return row, _TOO_MANY, line, 4
        e0 = tabs[0]
        it, ok = _parse_number(buf, a, e0)
        if not ok:
            return row, _NOT_NUMERIC, line, 0
        e1 = tabs[1] if nt >= 2 else b
        sc, ok = _parse_number(buf, e0 + 1, e1)
        if not ok:
            return row, _NOT_NUMERIC, line, 1
        st = 0.0
        if nt >= 2:
            e2 = tabs[2] if nt >= 3 else b
            day, ok = _parse_number(buf, e1 + 1, e2)
            if not ok:
                return row, _NOT_NUMERIC, line, 2
            st = day * 86400.0
            if nt >= 3:  # HH:MM:SS
                secs = 0.0
                part = 0.0
                good = True
                for i in range(e2 + 1, b):
                    c = buf[i]
                    if 48 <= c <= 57:
                        part = part * 10 + (c - 48)
                    elif c == 58:
                        secs = secs * 60 + part
                        part = 0.0
                    elif not _is_space(c):
                        good = False
                if not good:
                    return row, _BAD_DATE, line, 3
                st += secs * 60 + part
        users[row] = user
        items[row] = it
        values[row] = sc
        stamps[row] = st
        lines[row] = line
        row += 1
        remaining -= 1
    if remaining != 0:
        return row, _COUNT_MISMATCH, header_line, 0
    return row, _OK, 0, 0


# ---------------------------------------------------------------------------------------------------------------------
# helpers


_BOM = b"\xef\xbb\xbf"


def _unreadable(path, exc: OSError) -> DataFormatError:
    """A named error for a path that cannot be read (instead of a bare FileNotFoundError/IsADirectoryError)."""
    if isinstance(exc, FileNotFoundError):
        problem = "no such file"
    elif isinstance(exc, IsADirectoryError):
        problem = "is a directory, not a ratings file"
    elif isinstance(exc, PermissionError):
        problem = "cannot be read (permission denied)"
    else:
        problem = f"cannot be read ({exc.strerror or exc})"
    return DataFormatError(path, None, problem, "check the path; `python -m data_fetch ID` installs a dataset in "
                           "data/<id>/ (see `python -m data_fetch --list`)")


def _open(path):
    try:
        return open(path, "rb")
    except OSError as exc:
        raise _unreadable(path, exc) from None


def _read_bytes(path) -> np.ndarray:
    """The file's bytes, without a UTF-8 byte-order mark (spreadsheet exports write one; it would make the first
    field non-numeric or hide the first header name)."""
    with _open(path) as fh:
        data = fh.read()
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    return np.frombuffer(data, dtype=np.uint8)


def _line_text(buf: np.ndarray, line: int, limit: int = 80) -> str:
    """The text of 1-based ``line`` of ``buf`` for error messages (truncated)."""
    newlines = np.flatnonzero(buf == 10)
    if line - 1 > len(newlines):
        return ""
    start = 0 if line == 1 else int(newlines[line - 2]) + 1
    end = int(newlines[line - 1]) if line - 1 < len(newlines) else len(buf)
    text = buf[start:end].tobytes().decode("utf-8", "replace").rstrip("\r")
    return text if len(text) <= limit else text[:limit] + "…"


def _raise_token_error(path, buf, code, line, field, n_fields, layout):
    text = _line_text(buf, line)
    shown = f" ({text!r})" if text else ""
    if code == _TOO_FEW:
        problem = f"expected {n_fields} fields ({layout}) but found {field}{shown}"
        fix = "check the separator and that the file is not truncated"
    elif code == _TOO_MANY:
        problem = f"more than {n_fields} fields; expected {layout}{shown}"
        fix = "check the separator (is this the right format for the dataset?)"
    elif code == _NOT_NUMERIC:
        problem = f"field {field + 1} is not a number; expected {layout}{shown}"
        fix = "remove the header/comment line or fix the value"
    elif code == _NO_HEADER:
        problem = f"rating line before any header line{shown}"
        fix = "the file must start with the header line of its block"
    elif code == _BAD_HEADER:
        problem = f"malformed header line{shown}"
        fix = "header lines are 'MovieID:' (Netflix) or 'UserID|NumRatings' (KDD Cup)"
    elif code == _BAD_DATE:
        problem = f"field {field + 1} is not a valid date/time{shown}"
        fix = "dates are YYYY-MM-DD (Netflix) or day<TAB>HH:MM:SS (KDD Cup)"
    elif code == _COUNT_MISMATCH:
        problem = "the number of rating lines after this header differs from the count it announces"
        fix = "the file is truncated or corrupted; fetch it again"
    else:  # pragma: no cover
        problem, fix = f"unknown parse error {code}", None
    raise DataFormatError(path, int(line), problem, fix)


_EXACT_FLOAT_LIMIT = 2.0 ** 53  # float64 holds every integer below this exactly


def _check_ids(path, ids, lines, what, exact=None, state=None):
    """Raw ids as int64, refusing anything that is not a non-negative integer that can be held exactly.

    ``ids``: the float64 parse; ``exact``/``state``: the exact int64 parse of :func:`_parse_int` where the tokeniser
    made one (None: float only). Two ids above 2**53 that differ in the last digits parse to the same float, so a
    float-only id ≥ 2**53 is refused rather than merged.
    """
    ids = np.asarray(ids, dtype=np.float64)
    if state is None:
        state = np.full(len(ids), _ID_NOT_PLAIN, dtype=np.int8)
        exact = np.zeros(len(ids), dtype=np.int64)
    plain, over = state == _ID_EXACT, state == _ID_OVERFLOW
    by_float = ~plain & ~over
    with np.errstate(invalid="ignore"):
        not_int = by_float & (~np.isfinite(ids) | (ids < 0) | (ids != np.floor(ids)))
        inexact = by_float & ~not_int & (ids >= _EXACT_FLOAT_LIMIT)
    negative = plain & (exact < 0)
    bad = not_int | inexact | negative | over
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        if negative[k]:
            raise DataFormatError(path, int(lines[k]), f"{what} id {int(exact[k])} is not a non-negative integer",
                                  "ids must be whole numbers ≥ 0")
        if not_int[k]:
            raise DataFormatError(path, int(lines[k]), f"{what} id {float(ids[k]):g} is not a non-negative integer",
                                  "ids must be whole numbers ≥ 0")
        if over[k]:
            raise DataFormatError(path, int(lines[k]), f"{what} id {float(ids[k]):.6g} does not fit in a 64-bit "
                                  "integer (largest 9223372036854775807)",
                                  "renumber the ids (e.g. by rank) before loading; they are not merged silently")
        raise DataFormatError(path, int(lines[k]), f"{what} id {float(ids[k]):.17g} is ≥ 2**53 and was not read as "
                              "a plain integer, so it cannot be held exactly (nearby ids would merge)",
                              "write ids as plain integer digits below 2**63 (not 1e20 / 1.0), or renumber them")
    out = exact.copy()
    out[by_float] = ids[by_float].astype(np.int64)
    return out


def parse_columns(path, delimiter: str, n_fields: int, layout: str, skip_first: bool = False,
                  id_fields: tuple[int, ...] = ()):
    """Tokenise a delimited text file into a (rows, n_fields) float64 array and the 1-based line of each row.

    With ``id_fields`` (field positions), also returns ``(ids, id_state)``: the exact int64 parse of those fields
    (columns in ``id_fields`` order) and its :func:`_parse_int` state, for :func:`_check_ids`.
    """
    buf = _read_bytes(path)
    n_lines = int(np.count_nonzero(buf == 10)) + 1
    out = np.empty((n_lines, n_fields), dtype=np.float64)
    lines = np.empty(n_lines, dtype=np.int64)
    delim = np.frombuffer(delimiter.encode(), dtype=np.uint8)
    id_slot = np.full(n_fields, -1, dtype=np.int64)
    for k, f in enumerate(id_fields):
        id_slot[f] = k
    n_ids = max(1, len(id_fields))
    ids = np.empty((n_lines if id_fields else 1, n_ids), dtype=np.int64)
    id_state = np.empty((n_lines if id_fields else 1, n_ids), dtype=np.int8)
    rows, code, line, field = _tokenize(buf, delim, n_fields, skip_first, out, lines, id_slot, ids, id_state)
    if code != _OK:
        _raise_token_error(path, buf, code, line, field, n_fields, layout)
    if id_fields:
        return out[:rows], lines[:rows], (ids[:rows], id_state[:rows])
    return out[:rows], lines[:rows]


def _to_ratings(path, cols, lines, *, rating_scale, source, has_timestamp, timestamp_unit=1, exact=None,
                rating_step=None):
    """Validated ``Ratings`` from parsed columns (user, item, rating[, timestamp]); ``exact`` = (ids, state) of the
    user and item columns from :func:`parse_columns`."""
    ids, state = exact if exact is not None else (None, None)
    users = _check_ids(path, cols[:, 0], lines, "user", *((ids[:, 0], state[:, 0]) if ids is not None else ()))
    items = _check_ids(path, cols[:, 1], lines, "item", *((ids[:, 1], state[:, 1]) if ids is not None else ()))
    ts = None
    if has_timestamp:
        ts = (cols[:, 3] * timestamp_unit).astype(np.int64)
    return from_raw_ids(users, items, cols[:, 2], rating_scale=rating_scale, source=source, path=str(path),
                        timestamps=ts, line_numbers=lines, rating_step=rating_step)


def _default_source(path, dataset):
    return DataSource(dataset=dataset or Path(path).name, real=True, checksum=None, note=f"loaded from {path}")


def _no_ratings(path) -> DataFormatError:
    return DataFormatError(path, None, "no ratings in this file (it is empty, or holds only a header or blank "
                           "lines)", "check that the download or copy completed and that this is the ratings file")


# ---------------------------------------------------------------------------------------------------------------------
# public loaders
# Every loader: a missing/unreadable file, an empty file and a bad ``rating_scale`` are named errors before any work;
# ``rating_step`` (the registry's spacing of rating values, e.g. 0.5) is checked on every rating when given.


def load_tab(path, *, rating_scale, source: DataSource | None = None, dataset: str | None = None,
             with_timestamp: bool | None = None, rating_step: float | None = None) -> Ratings:
    """``user<TAB>item<TAB>rating[<TAB>timestamp]`` (ml-100k ``u.data``). ``with_timestamp=None`` detects it."""
    return _load_delimited(path, "\t", "<TAB>", rating_scale, source, dataset, with_timestamp, rating_step)


def load_double_colon(path, *, rating_scale, source: DataSource | None = None, dataset: str | None = None,
                      with_timestamp: bool | None = None, rating_step: float | None = None) -> Ratings:
    """``user::item::rating::timestamp`` (ml-1m / ml-10m ``ratings.dat``)."""
    return _load_delimited(path, "::", "::", rating_scale, source, dataset, with_timestamp, rating_step)


def _first_line(path) -> bytes | None:
    """The first non-blank line (stripped, without a byte-order mark), or None for a file with none."""
    with _open(path) as fh:
        first = True
        for raw in fh:
            if first and raw.startswith(_BOM):
                raw = raw[len(_BOM):]
            first = False
            line = raw.strip()
            if line:
                return line
    return None


def _load_delimited(path, delimiter, shown, rating_scale, source, dataset, with_timestamp, rating_step):
    check_rating_scale(rating_scale, rating_step)
    first = _first_line(path)
    if first is None:
        raise _no_ratings(path)
    if with_timestamp is None:
        with_timestamp = len(first.split(delimiter.encode())) >= 4
    names = ["user", "item", "rating"] + (["timestamp"] if with_timestamp else [])
    cols, lines, exact = parse_columns(path, delimiter, len(names), shown.join(names), id_fields=(0, 1))
    return _to_ratings(path, cols, lines, rating_scale=rating_scale, source=source or _default_source(path, dataset),
                       has_timestamp=with_timestamp, exact=exact, rating_step=rating_step)


_CSV_ROLES = {
    "user": ("userid", "user_id", "user", "customerid", "customer_id"),
    "item": ("movieid", "movie_id", "itemid", "item_id", "item", "movie"),
    "rating": ("rating", "score", "value"),
    "timestamp": ("timestamp", "time", "unixtime"),
}


def load_csv_header(path, *, rating_scale, source: DataSource | None = None, dataset: str | None = None,
                    rating_step: float | None = None) -> Ratings:
    """Comma-separated with a header line naming the user, item, rating (and optionally timestamp) columns.

    Header names are matched case-insensitively, quoted or not; a UTF-8 byte-order mark is ignored."""
    check_rating_scale(rating_scale, rating_step)
    with _open(path) as fh:
        header = fh.readline().decode("utf-8-sig", "replace").strip()
    if not header:
        raise _no_ratings(path)
    names = [h.strip().strip('"').strip().lower() for h in header.split(",")]
    where = {}
    for role, aliases in _CSV_ROLES.items():
        hits = [k for k, name in enumerate(names) if name in aliases]
        if hits:
            where[role] = hits[0]
        elif role != "timestamp":
            raise DataFormatError(path, 1, f"header {header!r} has no {role} column",
                                  f"name it one of {', '.join(aliases)}")
    cols, lines, (ids, state) = parse_columns(path, ",", len(names), ",".join(names), skip_first=True,
                                              id_fields=(where["user"], where["item"]))
    order = [where["user"], where["item"], where["rating"]] + ([where["timestamp"]] if "timestamp" in where else [])
    return _to_ratings(path, np.ascontiguousarray(cols[:, order]), lines, rating_scale=rating_scale,
                       source=source or _default_source(path, dataset), has_timestamp="timestamp" in where,
                       exact=(ids, state), rating_step=rating_step)


def load_binary_profiles(path, *, source: DataSource | None = None, dataset: str | None = None) -> Ratings:
    """``user<TAB>item`` lines (tabs or spaces): the items in each user's profile; every value is 1."""
    cols, lines, exact = parse_columns(path, "", 2, "user item", id_fields=(0, 1))
    cols = np.column_stack([cols, np.ones(len(cols))])
    return _to_ratings(path, cols, lines, rating_scale=(1.0, 1.0), source=source or _default_source(path, dataset),
                       has_timestamp=False, exact=exact)


def expand_paths(paths) -> list[str]:
    """A path, a glob pattern, alternatives separated by ``|``, or a list of those → sorted existing files."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out = []
    for p in paths:
        for alt in str(p).split("|"):
            hits = sorted(glob.glob(alt))
            if hits:
                out.extend(hits)
                break
    return out


def load_netflix(paths, *, rating_scale=(1.0, 5.0), source: DataSource | None = None,
                 progress: bool = False, rating_step: float | None = None) -> Ratings:
    """Netflix Prize per-movie files (``training_set/mv_*.txt``) or the Kaggle ``combined_data_*.txt``.

    ``paths``: a directory (reads ``training_set/mv_*.txt``, else ``combined_data_*.txt``), a glob, or a list of files.
    Rows keep file order (files sorted by name). Timestamps are the rating dates at 00:00 UTC, in seconds.
    """
    p = Path(paths) if isinstance(paths, (str, os.PathLike)) else None
    if p is not None and p.is_dir():
        root = glob.escape(str(p))
        files = expand_paths([f"{root}/training_set/mv_*.txt|{root}/combined_data_*.txt"])
    else:
        files = expand_paths(paths)
    if not files:
        raise DataFormatError(paths, None, "no Netflix rating files found",
                              "expected training_set/mv_*.txt or combined_data_*.txt")
    check_rating_scale(rating_scale, rating_step)
    parts = []
    it = files
    if progress:
        from tqdm import tqdm

        it = tqdm(files, desc="netflix files", unit="file")
    for f in it:
        buf = _read_bytes(f)
        n = int(np.count_nonzero(buf == 10)) + 1
        u = np.empty(n, np.float64)
        i = np.empty(n, np.float64)
        v = np.empty(n, np.float64)
        d = np.empty(n, np.int64)
        ln = np.empty(n, np.int64)
        rows, code, line, field = _tokenize_netflix(buf, u, i, v, d, ln)
        if code != _OK:
            _raise_token_error(f, buf, code, line, field, 3, "CustomerID,Rating,YYYY-MM-DD after a 'MovieID:' line")
        # ids are checked per file so an error names the file; ids ≥ 2**53 are refused (float parse, not exact)
        _check_ids(f, u[:rows], ln[:rows], "customer")
        parts.append((f, u[:rows], i[:rows], v[:rows], d[:rows], ln[:rows]))
    if not any(len(x[1]) for x in parts):
        raise _no_ratings(files[0] if len(files) == 1 else paths)
    users = np.concatenate([x[1] for x in parts])
    items = np.concatenate([x[2] for x in parts])
    values = np.concatenate([x[3] for x in parts])
    days = np.concatenate([x[4] for x in parts])
    lines = np.concatenate([x[5] for x in parts])
    bounds = np.cumsum([0] + [len(x[1]) for x in parts])

    def where(row):  # global row → (file, line)
        k = int(np.searchsorted(bounds, row, side="right") - 1)
        return parts[k][0], int(lines[row])

    raw_users = users.astype(np.int64)
    raw_items = items.astype(np.int64)
    try:
        return from_raw_ids(raw_users, raw_items, values, rating_scale=rating_scale,
                            source=source or _default_source(files[0], "netflix"), path="<netflix>",
                            timestamps=days * 86400, line_numbers=np.arange(1, len(values) + 1),
                            rating_step=rating_step)
    except DataFormatError as err:  # translate the global row number to the file and its line
        if err.line is None:
            raise
        row = err.line - 1
        f, line = where(row)
        problem, fix = err.problem, err.fix
        if problem.startswith("duplicate"):
            first = int(np.flatnonzero((raw_users == raw_users[row]) & (raw_items == raw_items[row]))[0])
            f0, line0 = where(first)
            problem = (f"duplicate (user, item) pair ({raw_users[row]}, {raw_items[row]}) — first seen in {f0}, "
                       f"line {line0}")
        raise DataFormatError(f, line, problem, fix) from None


def load_netflix_probe(path) -> np.ndarray:
    """Netflix Prize ``probe.txt`` ('MovieID:' lines, each followed by 'CustomerID' lines): the (customer, movie)
    pairs of the released validation set as an (n, 2) int64 array."""
    buf = bytes(_read_bytes(path))
    pairs, movie = [], None
    for k, raw in enumerate(buf.split(b"\n"), 1):
        line = raw.strip()
        if not line:
            continue
        try:
            if line.endswith(b":"):
                movie = int(line[:-1])
                continue
            if movie is None:
                raise DataFormatError(path, k, "a customer id before any 'MovieID:' line", "this is not probe.txt")
            pairs.append((int(line), movie))
        except ValueError:
            raise DataFormatError(path, k, f"{line[:40]!r} is neither 'MovieID:' nor a customer id",
                                  "this is not the Prize's probe.txt") from None
    if not pairs:
        raise _no_ratings(path)
    return np.asarray(pairs, dtype=np.int64)


def load_kddcup_yahoo(path, *, rating_scale=(0.0, 100.0), source: DataSource | None = None,
                      rating_step: float | None = None) -> Ratings:
    """Yahoo! Music KDD Cup 2011 ``trainIdx1.txt``-style file. Timestamps are ``day·86400 + seconds`` (file days)."""
    check_rating_scale(rating_scale, rating_step)
    buf = _read_bytes(path)
    n = int(np.count_nonzero(buf == 10)) + 1
    u, i, v, s = (np.empty(n, np.float64) for _ in range(4))
    ln = np.empty(n, np.int64)
    rows, code, line, field = _tokenize_kddcup(buf, u, i, v, s, ln)
    if code != _OK:
        _raise_token_error(path, buf, code, line, field, 4, "ItemID<TAB>Score<TAB>Day<TAB>HH:MM:SS after 'UserID|N'")
    ln = ln[:rows]
    users = _check_ids(path, u[:rows], ln, "user")
    items = _check_ids(path, i[:rows], ln, "item")
    return from_raw_ids(users, items, v[:rows], rating_scale=rating_scale,
                        source=source or _default_source(path, "yahoo-music"), path=str(path),
                        timestamps=s[:rows].astype(np.int64), line_numbers=ln, rating_step=rating_step)


_VEC_DTYPES = {"fvecs": np.float32, "ivecs": np.int32, "bvecs": np.uint8}


def read_vecs(path, kind: str | None = None, *, count: int | None = None) -> np.ndarray:
    """Read a TEXMEX ``.fvecs``/``.ivecs``/``.bvecs`` file into an (n, d) array (float32/int32/uint8).

    Checks that the file size is a multiple of the record size and that every record's dimension header equals the
    first. ``count`` reads only the first ``count`` records.
    """
    kind = kind or Path(path).suffix.lstrip(".")
    if kind not in _VEC_DTYPES:
        raise DataFormatError(path, None, f"unknown vector file kind {kind!r}", "use fvecs, ivecs or bvecs")
    dtype = np.dtype(_VEC_DTYPES[kind])
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise _unreadable(path, exc) from None
    if size < 4:
        raise DataFormatError(path, None, f"file has {size} bytes, too small for a dimension header",
                              "the file is empty or truncated; fetch it again")
    with _open(path) as fh:
        d = int(np.frombuffer(fh.read(4), dtype="<i4")[0])
        if d <= 0 or d > 1 << 20:
            raise DataFormatError(path, None, f"first dimension header is {d}", "this is not a TEXMEX vecs file")
        rec = 4 + d * dtype.itemsize
        if size % rec:
            raise DataFormatError(path, None, f"size {size} bytes is not a multiple of the record size {rec} "
                                  f"(4 + {d} × {dtype.itemsize})", "the file is truncated; fetch it again")
        n = size // rec if count is None else min(count, size // rec)
        fh.seek(0)
        raw = np.frombuffer(fh.read(n * rec), dtype=np.uint8).reshape(n, rec)
    heads = raw[:, :4].copy().view("<i4").ravel()
    bad = np.flatnonzero(heads != d)
    if len(bad):
        k = int(bad[0])
        raise DataFormatError(path, None, f"record {k} has dimension header {int(heads[k])}, record 0 has {d}",
                              "the file is corrupted or not a vecs file")
    return np.ascontiguousarray(raw[:, 4:]).view(dtype.newbyteorder("<")).astype(dtype, copy=False).reshape(n, d)


def write_vecs(path, array: np.ndarray) -> None:
    """Write an (n, d) array as fvecs/ivecs/bvecs according to its dtype (for tests and stand-ins)."""
    array = np.asarray(array)
    n, d = array.shape
    head = np.full((n, 1), d, dtype="<i4").view(np.uint8)
    body = np.ascontiguousarray(array).view(np.uint8).reshape(n, -1)
    with open(path, "wb") as fh:
        fh.write(np.hstack([head, body]).tobytes())


def load_format(fmt: str, path, *, rating_scale, source: DataSource | None = None,
                rating_step: float | None = None) -> Ratings:
    """Dispatch on a registry ``format`` name; ``rating_step`` is the registry's spacing of rating values."""
    kw = dict(rating_scale=rating_scale, source=source, rating_step=rating_step)
    if fmt == "tab":
        return load_tab(path, **kw)
    if fmt == "double-colon":
        return load_double_colon(path, **kw)
    if fmt == "csv-header":
        return load_csv_header(path, **kw)
    if fmt == "netflix-per-movie":
        return load_netflix(path, **kw)
    if fmt == "kddcup-yahoo":
        return load_kddcup_yahoo(path, **kw)
    if fmt == "binary-profiles":
        return load_binary_profiles(path, source=source)
    raise DataFormatError(path, None, f"format {fmt!r} does not hold ratings",
                          "use read_vecs for vector files; see data_fetch/registry.py for the formats")
