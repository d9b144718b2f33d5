"""One module per notebook: ``run(params) -> pandas.DataFrame`` and ``plot(df, params) -> Figure``."""
