"""Every dataset the four papers use: where it comes from, what its files look like, and its published shape.

One :class:`DatasetSpec` per dataset id. Facts are recorded only where we are sure of them:

- Archive checksums: the GroupLens ``.zip.md5`` sidecar values for ml-100k/1m/10m (the same values appear in many
  independent downloaders). SHA-256 of the archives is *not* recorded (no authoritative source); a fetch records the
  SHA-256 it observes in the dataset's ``.manifest.json`` and marks it as observed, not checked.
- Per-file SHA-256 for ml-100k: computed from the workbook's mirror ``../shared/data/ml-100k`` (the files of the official zip).
- Published shapes: the dataset documentation (users × items × ratings, rating scale). Where a paper reports a
  different shape (Balu's thesis Table 4.1 is after preprocessing) it is kept in ``paper_shapes``; for EachMovie the
  brief is to use the thesis numbers, so its ``shape`` *is* the thesis's (the original release is in paper_shapes).
- ``max_user_count`` / ``max_item_count`` (largest number of ratings of one user / one item) shape the synthetic
  stand-ins only (see :mod:`dpmf_lib.data.standin`). Netflix: 17,653 and 232,944 (published statistics of the
  training set). ml-100k: computed from the mirror (737, 583). ml-1m (2,314, 3,428) and ml-10m (7,359, 34,864): the
  commonly reported statistics of the released files, not re-verified here (no copy on this machine); they never enter
  a result on real data. Elsewhere ``None``.
- ``median_user_count`` / ``median_item_count`` (median number of ratings per user / per item) and
  ``min_user_count`` / ``min_item_count`` (the smallest such count, the stand-ins' floor) also shape the stand-ins only:
  with a median the stand-in curve is a Zipf–Mandelbrot law through (1, max) and (n/2, median) instead of a pure Zipf
  law. Netflix: per movie mean 5,654.5, median 561, min 3, max 232,944; per user mean 209.25, median 96, min 1,
  max 17,653 (published statistics of the Netflix Prize training set; the means are N/I and N/U of its shape).
  ml-100k: computed from the mirror's u.data (users: median 65, min 20; movies: median 27, min 1). ml-1m, ml-10m: no
  median recorded (not verifiable here, no copy on this machine). Elsewhere ``None``.
- ``mean_rating`` where known (Netflix ≈ 3.60, ml-100k 3.530 computed, ml-1m 3.58, ml-10m 3.51); else ``None`` and
  the stand-in states its assumption.

Datasets that cannot be downloaded (Netflix, Yahoo! Music, EachMovie, Digg) have ``available_for_download=False``, a
reason and ``manual`` instructions; experiments fall back to a labelled synthetic stand-in of the published shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dpmf_lib.errors import ParameterError

#: File formats understood by :mod:`dpmf_lib.data.loaders`.
FORMATS = ("tab", "double-colon", "csv-header", "netflix-per-movie", "kddcup-yahoo", "fvecs", "binary-profiles")


@dataclass(frozen=True)
class FileSpec:
    """One file of an extracted dataset, relative to ``data/<id>/``."""

    path: str
    sha256: str | None = None  # expected SHA-256, None when unknown
    size: int | None = None  # bytes, None when unknown
    lines: int | None = None  # text files: number of lines, where known
    required: bool = True  # the loaders need it


@dataclass(frozen=True)
class Shape:
    users: int
    items: int
    ratings: int

    def __str__(self) -> str:
        return f"{self.users:,} users × {self.items:,} items, {self.ratings:,} ratings"


@dataclass(frozen=True)
class DatasetSpec:
    id: str
    title: str
    kind: str  # "ratings" | "profiles" (binary user profiles) | "vectors" (ANN benchmark)
    format: str  # one of FORMATS
    homepage: str | None
    url: str | None  # archive to download, None when it cannot be downloaded
    archive_md5: str | None  # published checksum of the archive
    archive_size: int | None  # bytes, where known (informational: progress bars)
    archive_root: str | None  # top folder inside the archive ("ml-10M100K" for ml-10m)
    files: tuple[FileSpec, ...]  # expected files (required ones must be present)
    ratings_glob: str | None  # the file(s) holding the ratings/vectors, relative to data/<id>/
    rating_scale: tuple[float, float] | None
    rating_step: float | None  # spacing of the rating values (0.5 for half stars; None: binary/vectors)
    shape: Shape | None  # published shape (vectors: users = base vectors, items = dimension, ratings = queries)
    licence: str
    available_for_download: bool
    reason: str = ""  # why it cannot be downloaded
    archive_sha256: str | None = None  # preferred over archive_md5 when known (none is published for these datasets)
    # cap on the bytes an archive may expand to (its members' total): a corrupted or hostile archive cannot fill
    # the disk (a 1 MB zip can expand to GBs). Set from the known contents with head-room; None: the fetcher's default.
    max_extracted_bytes: int | None = None
    manual: str = ""  # how to obtain it by hand
    paper_shapes: dict = field(default_factory=dict)  # {"balu Table 4.1": Shape(...)}
    max_user_count: int | None = None
    max_item_count: int | None = None
    min_user_count: int | None = None
    min_item_count: int | None = None
    median_user_count: float | None = None  # a median of counts (x.5 possible when n is even)
    median_item_count: float | None = None
    mean_rating: float | None = None
    notes: str = ""
    # what an install from the user's own copy says when its counts differ from a paper's: which filtering we apply
    # (none unless stated) and why
    paper_shape_note: str = ""

    def install_text(self) -> str:
        """How a user installs it: the download command, or ``--from DIR`` with the files the directory must hold."""
        if self.available_for_download and self.url:
            return (f"`python -m data_fetch {self.id}` (downloads {self.url}), or your own copy: "
                    f"`python -m data_fetch {self.id} --from DIR`")
        return self.manual or f"`python -m data_fetch {self.id} --from DIR`"

    def describe(self) -> str:
        avail = "downloadable" if self.available_for_download else f"NOT downloadable ({self.reason})"
        if self.kind == "vectors":
            what = f"{self.shape.users:,} base × {self.shape.items} dims, {self.shape.ratings:,} queries"
        else:
            what = str(self.shape) + ("" if self.rating_scale is None else
                                      f", ratings {self.rating_scale[0]:g}–{self.rating_scale[1]:g}")
        return f"{self.id:12s} {self.title}: {what}; {avail}"


_GL = "https://files.grouplens.org/datasets/movielens"
_ML_LICENCE = ("GroupLens research licence: research use, no redistribution, cite Harper & Konstan (2015); "
               "see the dataset README")

_ML100K_FILES = (
    FileSpec("u.data", "06416e597f82b7342361e41163890c81036900f418ad91315590814211dca490", 1_979_173, 100_000),
    FileSpec("u.item", "553841ebc7de3a0fd0d6b62a204ea30c1e651aacfb2814c7a6584ac52f2c5701", 236_344, 1_682),
    FileSpec("u.user", "f120e114da2e8cf314fd28f99417c94ae9ddf1cb6db8ce0e4b5995d40e90e62c", 22_628, 943, required=False),
    FileSpec("u.info", "5b0a40b2e47a729ee6203063f6dcf8790c2e63f5a18663e6ee318a72c5f3c27b", 36, 3, required=False),
    FileSpec("u.genre", "9757e0d3e6b298159a80dd48eaf938114690e911e39af97a76949ef1663610bb", 202, required=False),
    FileSpec("u.occupation", "cd5fbec9afe345d993a62fc7817df1a4a9079c4feb267b3118763b8fd942137d", 193, required=False),
    FileSpec("README", "a68c4a0fd84c1ae002d5eaa9eceb9814223bdf5147f84efa46dfd1edc86ea25c", 6_403, required=False),
)

_NOT_REDISTRIBUTABLE_FALLBACK = ("Experiments fall back to a labelled synthetic stand-in of the published shape "
                                 "(dpmf_lib.data.standin); every output built from it says so.")

DATASETS: dict[str, DatasetSpec] = {}


def _add(spec: DatasetSpec) -> None:
    assert spec.format in FORMATS, spec.format
    DATASETS[spec.id] = spec


_add(DatasetSpec(
    id="ml-100k", title="MovieLens 100K", kind="ratings", format="tab",
    homepage="https://grouplens.org/datasets/movielens/100k/", url=f"{_GL}/ml-100k.zip",
    archive_md5="0e33842e24a9c977be4e0107933c0723", archive_size=4_924_029, archive_root="ml-100k",
    max_extracted_bytes=64 << 20,  # ~16 MB of files (u.data, the u1..u5/ua/ub splits, u.item, …)
    files=_ML100K_FILES, ratings_glob="u.data", rating_scale=(1.0, 5.0), rating_step=1.0,
    shape=Shape(943, 1_682, 100_000), licence=_ML_LICENCE, available_for_download=True,
    max_user_count=737, max_item_count=583, min_user_count=20, mean_rating=3.530,
    # computed from the mirror's u.data (facts of the real file): users ≥ 20 ratings, median 65; movies median 27, min 1
    median_user_count=65, median_item_count=27, min_item_count=1,
    notes="u.data: user<TAB>item<TAB>rating<TAB>timestamp, randomly ordered; every user has ≥ 20 ratings. "
          "The 5 folds u1..u5 are contiguous 20,000-line chunks of u.data (mku.sh), see dpmf_lib.data.splits.",
))

_add(DatasetSpec(
    id="ml-1m", title="MovieLens 1M", kind="ratings", format="double-colon",
    homepage="https://grouplens.org/datasets/movielens/1m/", url=f"{_GL}/ml-1m.zip",
    archive_md5="c4d9eecfca2ab87c1945afe126590906", archive_size=None, archive_root="ml-1m",
    max_extracted_bytes=128 << 20,  # ~25 MB (ratings.dat 24 MB, movies.dat, users.dat, README)
    files=(FileSpec("ratings.dat", lines=1_000_209), FileSpec("movies.dat", required=False),
           FileSpec("users.dat", required=False), FileSpec("README", required=False)),
    ratings_glob="ratings.dat", rating_scale=(1.0, 5.0), rating_step=1.0,
    shape=Shape(6_040, 3_706, 1_000_209), licence=_ML_LICENCE, available_for_download=True,
    paper_shapes={"balu Table 4.1": Shape(6_040, 3_952, 1_000_209),
                  "pnbm Section 5": Shape(6_040, 3_952, 1_000_000)},
    max_user_count=2_314, max_item_count=3_428, min_user_count=20, mean_rating=3.58,
    notes="ratings.dat: UserID::MovieID::Rating::Timestamp. Movie ids run to 3,952 but only 3,706 movies are rated; "
          "the papers quote 3,952 (the id range).",
    paper_shape_note="We apply no filtering: all 1,000,209 ratings. Balu's Table 4.1 and the PNBM paper quote 3,952 "
                     "items, the movie id range; 3,706 of them are rated, which is what an installed copy counts.",
))

_add(DatasetSpec(
    id="ml-10m", title="MovieLens 10M", kind="ratings", format="double-colon",
    homepage="https://grouplens.org/datasets/movielens/10m/", url=f"{_GL}/ml-10m.zip",
    archive_md5="ce571fd55effeba0271552578f2648bd", archive_size=65_566_137, archive_root="ml-10M100K",
    max_extracted_bytes=512 << 20,  # ~270 MB (ratings.dat ~260 MB for 10,000,054 lines, tags, movies, scripts)
    files=(FileSpec("ratings.dat", lines=10_000_054), FileSpec("movies.dat", required=False),
           FileSpec("tags.dat", required=False)),
    ratings_glob="ratings.dat", rating_scale=(0.5, 5.0), rating_step=0.5,
    shape=Shape(69_878, 10_677, 10_000_054), licence=_ML_LICENCE, available_for_download=True,
    paper_shapes={"balu Table 4.1": Shape(69_878, 10_677, 10_000_054)},
    max_user_count=7_359, max_item_count=34_864, min_user_count=20, mean_rating=3.51,
    notes="ratings.dat: UserID::MovieID::Rating::Timestamp, half-star ratings 0.5..5.",
))

_add(DatasetSpec(
    id="netflix", title="Netflix Prize", kind="ratings", format="netflix-per-movie",
    homepage="https://www.netflixprize.com/", url=None, archive_md5=None, archive_size=None, archive_root=None,
    max_extracted_bytes=6 << 30,  # nf_prize_dataset.tar.gz: training_set.tar (~2.1 GB) + probe/qualifying/titles
    files=(FileSpec("training_set/mv_*.txt", required=False), FileSpec("combined_data_*.txt", required=False),
           FileSpec("probe.txt", required=False), FileSpec("qualifying.txt", required=False),
           FileSpec("movie_titles.txt", required=False)),
    ratings_glob="training_set/mv_*.txt|combined_data_*.txt", rating_scale=(1.0, 5.0), rating_step=1.0,
    shape=Shape(480_189, 17_770, 100_480_507),
    licence="Netflix Prize rules: the data was licensed for the competition only; Netflix withdrew it in 2010.",
    available_for_download=False,
    reason="Netflix withdrew the Prize data in 2010; there is no legal public download.",
    manual="If you hold a copy, run `python -m data_fetch netflix --from DIR` with DIR a directory in the Prize's "
           "layout — training_set/mv_0000001.txt … mv_0017770.txt (or training_set.tar), probe.txt, qualifying.txt, "
           "movie_titles.txt — or holding the four combined_data_*.txt files of the Kaggle copy; or give the Prize's "
           "archive itself: `--from nf_prize_dataset.tar.gz`.",
    paper_shapes={"liu Section 6.2": Shape(480_000, 18_000, 99_000_000),
                  "balu Table 4.1": Shape(480_136, 17_167, 96_649_938)},
    max_user_count=17_653, max_item_count=232_944, mean_rating=3.60,
    # Published Netflix Prize training-set statistics: per movie mean 5,654.5, median 561, min 3, max 232,944; per user
    # mean 209.25, median 96, min 1, max 17,653 (the means equal ratings/items and ratings/users of `shape`).
    min_user_count=1, min_item_count=3, median_user_count=96, median_item_count=561,
    notes="Per-movie files: a 'MovieID:' line, then 'CustomerID,Rating,YYYY-MM-DD' lines. Hua et al. use 100 random "
          "movies of it (191,668 users); Liu et al. trim to τ = 100 ratings per user.",
    paper_shape_note="We apply no filtering: every rating of training_set/ is used (100,480,507 in the Prize release). "
                     "Balu's Table 4.1 counts 96,649,938 ratings of 480,136 users × 17,167 movies after a preprocessing "
                     "the thesis does not state, so balu-table4.1-ratings-netflix compares the whole release with it "
                     "(a 3.8 % difference, not a bug); Liu's 'training set of 99M ratings' is the release without "
                     "its probe.txt (100,480,507 − 1,408,395 = 99,072,112), the 'released validation set'.",
))

_add(DatasetSpec(
    id="yahoo-music", title="Yahoo! Music (KDD Cup 2011, track 1)", kind="ratings", format="kddcup-yahoo",
    homepage="https://webscope.sandbox.yahoo.com/catalog.php?datatype=c", url=None, archive_md5=None,
    archive_size=None, archive_root=None,
    max_extracted_bytes=16 << 30,  # track 1's text files: ~263 M lines of ratings
    files=(FileSpec("trainIdx1.txt"), FileSpec("validationIdx1.txt", required=False),
           FileSpec("testIdx1.txt", required=False)),
    ratings_glob="trainIdx1.txt", rating_scale=(0.0, 100.0), rating_step=1.0,
    shape=Shape(1_000_990, 624_961, 262_810_175),
    licence="Yahoo! Webscope data-sharing agreement (academic use, no redistribution).",
    available_for_download=False,
    reason="Yahoo! Webscope requires signing a licence agreement; the data cannot be fetched automatically.",
    manual="Request the KDD Cup 2011 track 1 data (Webscope C15, the set Liu et al. use) from Yahoo! Webscope, put "
           "its files as released (trainIdx1.txt, validationIdx1.txt, testIdx1.txt; trackData1.txt etc. may stay) in "
           "a directory DIR and run `python -m data_fetch yahoo-music --from DIR`. The R1/R2 Webscope sets are other "
           "data (user-artist / song ratings on other scales) and are not this dataset.",
    paper_shapes={"liu Section 6.2": Shape(1_000_000, 635_000, 263_000_000)},
    notes="trainIdx1.txt: 'UserID|NumRatings' header lines, each followed by NumRatings lines "
          "'ItemID<TAB>Score<TAB>Date<TAB>Time'. The published total 262,810,175 counts train+validation+test; "
          "Liu et al. rescale scores to 0..5.",
    paper_shape_note="We load trainIdx1.txt only (the training ratings); the published 262,810,175 and Liu's "
                     "'almost 263M' count train + validation + test, so the counts of an installed copy are lower "
                     "by the validation and test sets. Scores stay 0-100 in the data; the Liu figures rescale them to "
                     "0-5 (their dataset_settings), as Section 6.2 does.",
))

_add(DatasetSpec(
    id="eachmovie", title="EachMovie (Compaq/HP)", kind="ratings", format="tab",
    homepage=None, url=None, archive_md5=None, archive_size=None, archive_root=None,
    files=(FileSpec("ratings.tsv"),), ratings_glob="ratings.tsv", rating_scale=(1.0, 6.0), rating_step=1.0,
    shape=Shape(61_265, 1_623, 2_811_718),
    licence="EachMovie was distributed by Compaq/HP Research for research use; HP withdrew it in 2004.",
    available_for_download=False,
    reason="HP withdrew EachMovie in 2004; there is no public download.",
    manual="If you hold a copy, put the release's Vote.txt (Person_ID<TAB>Movie_ID<TAB>Score<TAB>Weight<TAB>"
           "Modified; Person.txt and Movie.txt may stay beside it) in a directory DIR and run "
           "`python -m data_fetch eachmovie --from DIR`: the install writes ratings.tsv from it with scores 0, 0.2, "
           "…, 1 mapped to 1..6 (rating = 5·score + 1). A ratings.tsv already converted that way is accepted too.",
    paper_shapes={"balu Table 4.1": Shape(61_265, 1_623, 2_811_718),
                  "original release": Shape(72_916, 1_628, 2_811_983)},
    notes="Shape from Balu's thesis Table 4.1 (after its preprocessing) with scale 1:6; the original release has "
          "72,916 users × 1,628 movies, 2,811,983 votes on 0..1 in 6 steps.",
    paper_shape_note="We apply no filtering beyond the score mapping: every vote of Vote.txt is used. The thesis' "
                     "Table 4.1 (61,265 users × 1,623 movies, 2,811,718 ratings) is after a preprocessing it does not "
                     "state, so the release's counts differ from it slightly.",
))

_add(DatasetSpec(
    id="digg", title="Digg news-reading profiles (Balu thesis §3.5)", kind="profiles", format="binary-profiles",
    homepage=None, url=None, archive_md5=None, archive_size=None, archive_root=None,
    files=(FileSpec("profiles.tsv"),), ratings_glob="profiles.tsv", rating_scale=(1.0, 1.0), rating_step=None,
    shape=Shape(531, 1_237, 531 * 317),
    licence="Collected by the authors of BLIP (Alaggan et al. 2012); never published as a dataset.",
    available_for_download=False,
    reason="the 531-user Digg profile set used in the thesis was never publicly released.",
    manual="The thesis' 531-user Digg set was never released; if you have it (or profiles of your own in that "
           "form), write one 'user<TAB>item' line per item a user read to DIR/profiles.tsv and run "
           "`python -m data_fetch digg --from DIR`.",
    paper_shapes={"balu Table 3.1": Shape(531, 1_237, 531 * 317)},
    notes="Thesis Table 3.1: 531 users (331 train / 200 test), N = 1,237 items, c_avg = 317 items per profile, "
          "25.63% occupancy. The rating count 531 × 317 = 168,327 is derived from the rounded c_avg.",
))

_add(DatasetSpec(
    id="sift1m", title="ANN_SIFT1M (TEXMEX corpus)", kind="vectors", format="fvecs",
    homepage="http://corpus-texmex.irisa.fr/", url="ftp://ftp.irisa.fr/local/texmex/corpus/sift.tar.gz",
    archive_md5=None, archive_size=None, archive_root="sift",
    max_extracted_bytes=768 << 20,  # the four .fvecs/.ivecs files: 576,800,000 bytes exactly (sizes below)
    files=(FileSpec("sift_base.fvecs", size=1_000_000 * (4 + 128 * 4)),
           FileSpec("sift_query.fvecs", size=10_000 * (4 + 128 * 4)),
           FileSpec("sift_groundtruth.ivecs", size=10_000 * (4 + 100 * 4), required=False),
           FileSpec("sift_learn.fvecs", size=100_000 * (4 + 128 * 4), required=False)),
    ratings_glob="sift_base.fvecs", rating_scale=None, rating_step=None,
    shape=Shape(1_000_000, 128, 10_000), licence="Public research corpus (Jégou, Douze, Schmid 2011); cite [JTDA11].",
    available_for_download=True,
    # No checksum of sift.tar.gz is published (the TEXMEX site gives none): a fetch records the archive's md5/sha256
    # as observed (trust on first use, `checked: null` in the manifest) and checks every file's exact size and
    # dimension headers; it says so when it runs.
    notes="shape: users = base vectors, items = dimension, ratings = query vectors. File sizes follow from the "
          "fvecs record size (4-byte dimension + 128 float32).",
))


def dataset_ids() -> list[str]:
    return list(DATASETS)


def get_spec(dataset_id: str) -> DatasetSpec:
    """The registry entry of ``dataset_id``; :class:`ParameterError` listing the valid ids otherwise."""
    try:
        spec = DATASETS[dataset_id]
    except KeyError:
        raise ParameterError(f"unknown dataset id {dataset_id!r}; valid ids: {', '.join(DATASETS)}") from None
    return _test_override(spec)


#: Tests only: a JSON file ``{id: {"files": {path: {"sha256"|"size"|"lines": value}}, "archive_md5": …}}`` replacing
#: the expected file facts of a dataset, so a tiny fixture written in the published layout installs through the real CLI (its size,
#: line count and checksum cannot be the release's). A fetch under it says so and its manifest records it.
TEST_OVERRIDE_ENV = "DPMF_TEST_REGISTRY_OVERRIDE"


def test_override_path() -> str | None:
    import os

    return os.environ.get(TEST_OVERRIDE_ENV) or None


def _test_override(spec: DatasetSpec) -> DatasetSpec:
    path = test_override_path()
    if path is None:
        return spec
    import json
    from dataclasses import replace

    try:
        table = json.loads(open(path, encoding="utf-8").read())
    except (OSError, ValueError) as exc:
        raise ParameterError(f"${TEST_OVERRIDE_ENV}={path}: cannot be read as JSON ({exc})") from None
    own = (table or {}).get(spec.id)
    if not own:
        return spec
    files = own.get("files") or {}
    unknown = set(files) - {fs.path for fs in spec.files}
    if unknown or set(own) - {"files", "archive_md5", "archive_sha256"}:
        raise ParameterError(f"${TEST_OVERRIDE_ENV}: {spec.id} has no file(s) {sorted(unknown)} (or a key other than "
                             "'files', 'archive_md5', 'archive_sha256')")
    new = tuple(replace(fs, **{k: v for k, v in files.get(fs.path, {}).items() if k in ("sha256", "size", "lines")})
                for fs in spec.files)
    return replace(spec, files=new, **{k: own[k] for k in ("archive_md5", "archive_sha256") if k in own})


def unavailable_message(spec: DatasetSpec, detail: str = "") -> str:
    """The message of :class:`DatasetUnavailable`: what it is, why not, how to provide it, what happens instead."""
    why = (detail or spec.reason or "it could not be fetched").rstrip(".")
    parts = [f"{spec.title} ({spec.id}; {spec.shape}) is not available: {why}."]
    if spec.manual:
        parts.append(spec.manual)
    elif spec.url:
        parts.append(f"Fetch it with `python -m data_fetch {spec.id}` when online (source {spec.url}), or put the "
                     f"extracted files in DIR and run `python -m data_fetch {spec.id} --from DIR`.")
    parts.append("A directory $DPMF_DATA_MIRROR/" + spec.id + "/ holding the files is copied instead when set.")
    parts.append(_NOT_REDISTRIBUTABLE_FALLBACK)
    return " ".join(parts)
