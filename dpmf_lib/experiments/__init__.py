"""One module per notebook, grouped by paper: ``dpmf_lib.experiments.<paper>.<notebook>`` with
``run(params) -> pandas.DataFrame`` and ``plot(df, params) -> Figure`` (``liu``, ``balu``, ``pnbm``, ``hua``, and
``extra`` for what goes beyond the papers). Shared pieces of a paper live beside its notebooks' modules."""

PAPERS = ("liu", "balu", "pnbm", "hua", "extra")


def module_name(notebook: str) -> str:
    """The experiment module of notebook ``notebook`` (its name starts with its paper: ``liu_fig7`` →
    ``dpmf_lib.experiments.liu.liu_fig7``)."""
    paper = notebook.lstrip("_").split("_", 1)[0]
    if paper not in PAPERS:
        raise ValueError(f"notebook {notebook!r} does not start with a paper of {PAPERS}")
    return f"dpmf_lib.experiments.{paper}.{notebook}"
