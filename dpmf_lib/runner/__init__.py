"""The notebook runner behind ``python -m dpmf_lib.reproduce`` and ``python -m dpmf_lib.snapshot``.

- :mod:`.hashing`: what a run depends on (the run hash; docs/staleness.md);
- :mod:`.staleness`: whether a run's outputs are current;
- :mod:`.execution`: one notebook, executed by papermill in its own process into a staging directory;
- :mod:`.distributed`: many notebooks, from local threads or as dask tasks;
- :mod:`.cli`: the ``reproduce`` command;
- :mod:`.canary`: canary revalidation of snapshot rows.
"""
