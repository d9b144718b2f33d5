"""Tiny files in each dataset's published layout (written by the tests, never real data), the test-only registry
override that lets them install through ``python -m data_fetch ID --from DIR``, and the subprocess that does it.

Layouts (as released): Netflix Prize ``training_set/mv_NNNNNNN.txt`` ("MovieID:" then "CustomerID,Rating,Date"),
``probe.txt`` ("MovieID:" then CustomerID), ``qualifying.txt`` ("MovieID:" then "CustomerID,Date"),
``movie_titles.txt``; Yahoo! Music KDD Cup 2011 track 1 ``trainIdx1.txt`` / ``validationIdx1.txt`` ("UserID|N" then
N "ItemID<TAB>Score<TAB>Day<TAB>HH:MM:SS", scores 0-100) and ``testIdx1.txt`` (no score); MovieLens 1M / 10M
``ratings.dat`` ("UserID::MovieID::Rating::Timestamp"), ``movies.dat``, ``users.dat`` / ``tags.dat``; EachMovie
``Vote.txt`` (Person_ID, Movie_ID, Score on 0..1 in steps of 0.2, Weight, Modified), ``Person.txt``, ``Movie.txt``;
SIFT1M ``sift_base.fvecs``, ``sift_query.fvecs``, ``sift_learn.fvecs``, ``sift_groundtruth.ivecs``; Digg (never
released) in the registry's ``profiles.tsv`` form.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent


def _pairs(rng, n_users, n_items, per_user):
    """Distinct (user, item) pairs: each user rates ``per_user`` items, popular items more often (a long tail)."""
    w = 1.0 / np.arange(1, n_items + 1) ** 0.8
    w /= w.sum()
    out = []
    for u in range(n_users):
        k = int(min(n_items, max(2, rng.poisson(per_user))))
        for i in rng.choice(n_items, size=k, replace=False, p=w):
            out.append((u, int(i)))
    return out


def _levels(rng, n, lo, hi, step):
    return lo + step * rng.integers(0, int(round((hi - lo) / step)) + 1, n)


def write_netflix(root: Path, *, n_users=80, n_items=40, per_user=15, seed=1) -> dict:
    rng = np.random.default_rng(seed)
    pairs = _pairs(rng, n_users, n_items, per_user)
    cust = 6 + 7 * np.arange(n_users) * 31  # sparse customer ids, as in the release
    ratings = _levels(rng, len(pairs), 1, 5, 1)
    (root / "training_set").mkdir(parents=True)
    by_movie: dict[int, list] = {}
    for (u, i), r in zip(pairs, ratings):
        by_movie.setdefault(i + 1, []).append((int(cust[u]), int(r)))
    probe, qual, titles = [], [], []
    for m in range(1, n_items + 1):
        rows = by_movie.get(m, [])
        lines = [f"{m}:"] + [f"{c},{r},2005-{1 + c % 12:02d}-{1 + c % 28:02d}" for c, r in rows]
        (root / "training_set" / f"mv_{m:07d}.txt").write_text("\n".join(lines) + "\n")
        probe += [f"{m}:"] + [str(c) for c, _ in rows[:2]]
        qual += [f"{m}:"] + [f"{int(cust[(m * 3) % n_users])},2005-12-{1 + m % 28:02d}"]
        titles.append(f"{m},{1990 + m % 15},Movie {m}")
    (root / "probe.txt").write_text("\n".join(probe) + "\n")
    (root / "qualifying.txt").write_text("\n".join(qual) + "\n")
    (root / "movie_titles.txt").write_text("\n".join(titles) + "\n", encoding="latin-1")
    return {"ratings": len(pairs)}


def write_yahoo(root: Path, *, n_users=80, n_items=60, per_user=20, seed=2) -> dict:
    rng = np.random.default_rng(seed)
    pairs = _pairs(rng, n_users, n_items, per_user)
    root.mkdir(parents=True, exist_ok=True)
    scores = 10 * rng.integers(0, 11, len(pairs))  # track 1 scores: 0-100 (mostly multiples of 10)
    by_user: dict[int, list] = {}
    for (u, i), s in zip(pairs, scores):
        by_user.setdefault(u, []).append((507 + 13 * i, int(s)))
    train, valid, test = [], [], []
    for u, rows in by_user.items():
        *tr, va = rows
        train += [f"{u}|{len(tr)}"] + [f"{i}\t{s}\t{3000 + k}\t{k % 24:02d}:{k % 60:02d}:00" for k, (i, s) in
                                       enumerate(tr)]
        valid += [f"{u}|1", f"{va[0]}\t{va[1]}\t3999\t12:00:00"]
        test += [f"{u}|1", f"{va[0] + 1}\t4000\t13:00:00"]
    for name, lines in (("trainIdx1.txt", train), ("validationIdx1.txt", valid), ("testIdx1.txt", test)):
        (root / name).write_text("\n".join(lines) + "\n")
    (root / "trackData1.txt").write_text("507|None|None|None\n")
    return {"ratings": len(train) - len(by_user)}


def write_movielens(root: Path, *, ten_m: bool, n_users=70, n_items=50, per_user=20, seed=3) -> dict:
    rng = np.random.default_rng(seed)
    pairs = _pairs(rng, n_users, n_items, per_user)
    values = _levels(rng, len(pairs), 0.5, 5, 0.5) if ten_m else _levels(rng, len(pairs), 1, 5, 1)
    root.mkdir(parents=True, exist_ok=True)
    lines = [f"{u + 1}::{i + 1}::{v:g}::{978300760 + k}" for k, ((u, i), v) in enumerate(zip(pairs, values))]
    (root / "ratings.dat").write_text("\n".join(lines) + "\n")
    (root / "movies.dat").write_text("\n".join(f"{i + 1}::Movie {i + 1} (1995)::Drama" for i in range(n_items)) + "\n",
                                     encoding="latin-1")
    if ten_m:
        (root / "tags.dat").write_text("1::1::fun::1138537770\n")
    else:
        (root / "users.dat").write_text("\n".join(f"{u + 1}::F::25::3::55455" for u in range(n_users)) + "\n")
        (root / "README").write_text("SUMMARY\n(test fixture in the MovieLens 1M layout)\n")
    return {"ratings": len(pairs)}


def write_eachmovie(root: Path, *, n_users=70, n_items=50, per_user=20, seed=4) -> dict:
    rng = np.random.default_rng(seed)
    pairs = _pairs(rng, n_users, n_items, per_user)
    root.mkdir(parents=True, exist_ok=True)
    scores = rng.integers(0, 6, len(pairs)) / 5  # 0, 0.2, …, 1
    lines = [f"{u + 1}\t{i + 1}\t{s:g}\t1\t1996-0{1 + k % 9}-11 12:3{k % 10}:00" for k, ((u, i), s)
             in enumerate(zip(pairs, scores))]
    (root / "Vote.txt").write_text("\n".join(lines) + "\n")
    (root / "Person.txt").write_text("\n".join(f"{u + 1}\t30\tM\t10010" for u in range(n_users)) + "\n")
    (root / "Movie.txt").write_text("\n".join(f"{i + 1}\tMovie {i + 1}\t1\t1\t1995" for i in range(n_items)) + "\n")
    return {"ratings": len(pairs)}


def write_sift(root: Path, *, n_base=3000, n_query=30, seed=5) -> dict:
    from dpmf_lib.data.loaders import write_vecs

    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    centres = np.abs(rng.normal(0, 40, (16, 128)))

    def draw(n):
        return np.rint(np.clip(centres[rng.integers(0, 16, n)] + rng.normal(0, 10, (n, 128)), 0, 255)).astype(np.float32)

    base, query = draw(n_base), draw(n_query)
    write_vecs(root / "sift_base.fvecs", base)
    write_vecs(root / "sift_query.fvecs", query)
    write_vecs(root / "sift_learn.fvecs", draw(100))
    d2 = ((query[:, None, :] - base[None, :, :]) ** 2).sum(-1)
    write_vecs(root / "sift_groundtruth.ivecs", np.argsort(d2, axis=1)[:, :100].astype(np.int32))
    return {"base": n_base, "query": n_query}


def write_digg(root: Path, *, n_users=40, n_items=60, per_user=15, seed=6) -> dict:
    """The thesis' Digg profiles were never released: the form the registry takes (user<TAB>item per item read)."""
    rng = np.random.default_rng(seed)
    pairs = _pairs(rng, n_users, n_items, per_user)
    root.mkdir(parents=True, exist_ok=True)
    (root / "profiles.tsv").write_text("".join(f"{u + 1}\t{i + 1}\n" for u, i in pairs))
    return {"ratings": len(pairs)}


WRITERS = {
    "netflix": write_netflix,
    "yahoo-music": write_yahoo,
    "ml-1m": lambda root: write_movielens(root, ten_m=False),
    "ml-10m": lambda root: write_movielens(root, ten_m=True),
    "eachmovie": write_eachmovie,
    "sift1m": write_sift,
    "digg": write_digg,
}

#: what a fixture cannot share with the release: its line counts and file sizes (the production registry keeps them)
OVERRIDE = {
    "ml-1m": {"files": {"ratings.dat": {"lines": None}}},
    "ml-10m": {"files": {"ratings.dat": {"lines": None}}},
    "sift1m": {"files": {name: {"size": None} for name in ("sift_base.fvecs", "sift_query.fvecs",
                                                            "sift_groundtruth.ivecs", "sift_learn.fvecs")}},
}


def write_override(path: Path) -> Path:
    path.write_text(json.dumps(OVERRIDE))
    return path


def install(dataset_id: str, source: Path, dest: Path, override: Path | None) -> subprocess.CompletedProcess:
    """``python -m data_fetch ID --from SOURCE --dest DEST`` in a subprocess (the real CLI), with the test override."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("DPMF_DATA_MIRROR", None)
    env.pop("DPMF_TEST_REGISTRY_OVERRIDE", None)
    if override is not None:
        env["DPMF_TEST_REGISTRY_OVERRIDE"] = str(override)
    return subprocess.run([sys.executable, "-m", "data_fetch", dataset_id, "--from", str(source), "--dest", str(dest),
                           "--quiet"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def pack_netflix_release(src: Path, out: Path) -> Path:
    """The Prize's own packing of a :func:`write_netflix` folder: ``nf_prize_dataset.tar.gz`` holding ``download/``
    with ``training_set.tar`` (the per-movie files), probe.txt, qualifying.txt and movie_titles.txt."""
    import tarfile

    inner = out.parent / "training_set.tar"
    with tarfile.open(inner, "w") as tf:
        tf.add(src / "training_set", arcname="training_set")
    with tarfile.open(out, "w:gz") as tf:
        tf.add(inner, arcname="download/training_set.tar")
        for name in ("probe.txt", "qualifying.txt", "movie_titles.txt"):
            tf.add(src / name, arcname=f"download/{name}")
    inner.unlink()
    return out


def pack_zip(src: Path, out: Path, top: str) -> Path:
    """A GroupLens-style zip: the folder's files under ``top/``."""
    import zipfile

    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(src.rglob("*")):
            if p.is_file():
                zf.write(p, f"{top}/{p.relative_to(src).as_posix()}")
    return out
