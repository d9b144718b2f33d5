"""A notebook's parameters: what papermill injected, the names a params file declares, and where a run writes.

Kept apart from :mod:`dpmf_lib.outputs` (what a run saves) so the runner can read a notebook's parameters without the
saving machinery."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .paths import figures_dir


RUN_DIR_VAR = "DPMF_RUN_DIR"  # set by the runner: the staging directory of a canonical run
RUN_NOTEBOOK_VAR = "DPMF_RUN_NOTEBOOK"  # ... and the notebook it is for


def params_digest(name: str, params: dict) -> str:
    return hashlib.sha256(json.dumps([name, params], sort_keys=True, default=str).encode()).hexdigest()[:12]


def scratch_dir(name: str, params: dict) -> Path:
    """Where a run that is not the runner's canonical one writes: ``figures/_runs/<name>-<profile>-<hash>/``."""
    return figures_dir() / "_runs" / f"{name}-{params['profile']}-{params_digest(name, params)}"


#: The first line of the cell papermill injects after the ``parameters`` cell (``papermill.translators``).
PAPERMILL_INJECTED_HEADER = "# Parameters"


def injected_names(namespace: dict) -> set[str]:
    """The names papermill assigned in its ``injected-parameters`` cell, read from IPython's input history (``In``,
    in the notebook's ``globals()``): the last executed cell whose first line is papermill's ``# Parameters``.
    Empty outside IPython or when no parameters were injected (a run in Lab, a call from Python)."""
    import ast

    history = namespace.get("In")
    if not isinstance(history, list):
        return set()
    for src in reversed(history):
        if isinstance(src, str) and src.split("\n", 1)[0].strip() == PAPERMILL_INJECTED_HEADER:
            try:
                tree = ast.parse(src)
            except SyntaxError:
                return set()
            return {t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                    for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                    if isinstance(t, ast.Name)}
    return set()


def parameter_names(name: str) -> list[str]:
    """The top-level parameters of ``params/<name>.yaml`` (its ``defaults``), in file order."""
    from .params import params_path, read_yaml

    doc = read_yaml(params_path(name))
    return list((doc or {}).get("defaults") or {})


def merge_named_parameters(name: str, namespace: dict, overrides: dict | None = None) -> dict:
    """``overrides`` plus every parameter of ``params/<name>.yaml`` that ``namespace`` (a notebook's ``globals()``)
    holds with a value other than None — what ``papermill -p seed 1`` sets.

    Raises :class:`~dpmf_lib.errors.ParameterError` for a name papermill injected that is not a parameter of the file
    (papermill itself only warns "Passed unknown parameter" and runs on with the profile's value), and for a
    parameter given both by name and in ``overrides`` with different values.
    """
    from .errors import ParameterError
    from .params import params_path
    from .params import _unknown

    known = parameter_names(name)
    unknown = injected_names(namespace) - set(known) - {"profile", "overrides"}
    if unknown:
        err = _unknown(unknown, known, f"papermill parameters for notebooks/{name}.ipynb")
        raise ParameterError(f"{err} (the parameters of {params_path(name).name}, plus `profile` and "
                             "`overrides`; see `papermill --help-notebook notebooks/" + name + ".ipynb`)")
    merged = dict(overrides or {})
    for k in known:
        v = namespace.get(k)
        if v is None:
            continue
        if k in merged and merged[k] != v:
            raise ParameterError(f"parameter '{k}' is given twice, as `{k} = {v!r}` and in overrides as "
                                 f"{merged[k]!r}: keep one")
        merged[k] = v
    return merged
