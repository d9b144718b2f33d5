"""How a training run visits the ratings and on how many threads: :class:`Schedule`."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ParameterError


@dataclass(frozen=True)
class Schedule:
    """The visiting order, the threads and the prefetching of one run of :func:`dpmf_lib.mf.train_sgd`,
    :func:`dpmf_lib.mf.sample_sgld` or :func:`dpmf_lib.privacy.posterior_sampling.sample_private`.

    These settings decide how fast a run goes, and which of the possible orders of updates it takes. They do not
    decide what it samples or fits (step sizes, priors, noise and seeds stay the functions' own keywords). The defaults
    are those of the paper's C-SGD.

    - ``order``: ``"tiered"`` (C-SGD: user blocks, item tiers, users interleaved), ``"tiered-usermajor"`` or
      ``"naive"`` (a random permutation of all ratings); built by :func:`dpmf_lib.mf.csgd.make_layout`.
    - ``block_users``, ``tiers``: the tiered layout's users per block and item-tier bounds
      (:func:`dpmf_lib.mf.tiered_layout`).
    - ``prefetch_stride``: software prefetch of the user and item rows that many ratings ahead (0: off). It has no
      effect on results.
    - ``n_threads``: numba threads for the layout and the rounds (None: numba's current count). With more than one
      thread, C-SGD and lazy SGLD run Hogwild over the blocks. Then the results depend on the threads' timing.
    - ``hot_rows`` (``train_sgd`` only): ``"shared"`` (Hogwild on every item row, the paper's scheme) or
      ``"private"`` (per-thread copies of the top tier's item rows, :mod:`dpmf_lib.mf.hot_rows`). ``sample_sgld``
      refuses ``"private"``.

    A ``layout=`` passed to ``train_sgd`` / ``sample_sgld`` replaces ``order``, ``block_users`` and ``tiers``. In
    ``sample_private``, ``n_threads`` also sets the threads of exact Gibbs blocks.

    Callers: the three functions take ``schedule=Schedule(...)`` in place of the separate keywords ``order``,
    ``block_users``, ``tiers``, ``prefetch_stride``, ``n_threads`` and ``hot_rows``, which they no longer accept (a
    call with one of them raises ``TypeError``). Every caller in the workbook (experiments, bench, tests) was
    updated; none of them is run by a notebook directly. ``dataclasses.replace(schedule, n_threads=1)`` derives a
    variant. The fields are checked where they are used, with the same messages as before.
    """

    order: str = "tiered"
    block_users: int = 1000
    tiers: tuple = (500, 4000)
    prefetch_stride: int = 8
    n_threads: int | None = None
    hot_rows: str = "shared"


def check_schedule(schedule, where: str) -> Schedule:
    """``schedule`` itself if it is a :class:`Schedule` (``None`` → the default one), else a ``ParameterError``."""
    if schedule is None:
        return Schedule()
    if not isinstance(schedule, Schedule):
        raise ParameterError(f"schedule of {where} must be a dpmf_lib.mf.Schedule (order, block_users, tiers, "
                             f"prefetch_stride, n_threads, hot_rows), got {schedule!r}")
    return schedule
