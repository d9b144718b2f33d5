"""``python -m dpmf_lib.reproduce``: run the registered notebooks, skip what is current, build the report.

The runner lives in :mod:`dpmf_lib.runner`: :mod:`~dpmf_lib.runner.hashing` (what a run depends on),
:mod:`~dpmf_lib.runner.staleness` (whether outputs are current), :mod:`~dpmf_lib.runner.execution` (one notebook in
its own process, swapped into place whole), :mod:`~dpmf_lib.runner.distributed` (many at once, locally or on dask),
:mod:`~dpmf_lib.runner.cli` (this command's options). ``python -m dpmf_lib.reproduce --help`` lists the options.
"""

import sys

from .runner.cli import main

if __name__ == "__main__":
    sys.exit(main())
