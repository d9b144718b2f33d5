"""dpmf_lib — kernels and experiments of the private-recommender reproduction workbook.

Layout (one concept per module):
- ``dpmf_lib.data``        ratings container, file loaders, folds/splits/trimming, synthetic stand-ins, dataset access
- ``dpmf_lib.params``      per-notebook parameter files with smoke/ci/paper profiles
- ``dpmf_lib.registry``    every figure and table of the papers, mapped to notebooks
- ``dpmf_lib.claims``      the papers' quantitative claims and our measured values (what a run saves)
- ``dpmf_lib.verdicts``    how saved measurements are judged (applied at report time; not a run input)
- ``dpmf_lib.outputs``     what a notebook writes: png/svg/csv/provenance/measurements
- ``dpmf_lib.plotting``    the shared figure style
- ``dpmf_lib.sweep``       parameter grids mapped with joblib or dask
- ``dpmf_lib.reproduce``   papermill runner, caching, report
- ``dpmf_lib.bench``       ``python -m dpmf_lib.bench SUITE`` benchmark suites
- ``dpmf_lib.experiments`` one module per notebook: ``run(params) -> pandas.DataFrame``
"""

__version__ = "0.1.0"
