"""What a notebook's result depends on: the code it imports and the data files it read.

The runner skips a notebook only when neither changed since its last good run, so this decides which results are
current. Code: the notebook's experiment module and, transitively, every module of ``dpmf_lib`` and ``data_fetch``
it imports (found statically with :mod:`ast`, imports inside functions included; a package import includes its
``__init__``). Data: for every dataset a run read, the state it is in now — ``real:<sha256>`` of the ratings file(s)
(from the fetched manifest, or hashed in the mirror; for a user's dataset, of its file) or ``absent`` — so a stand-in
result goes stale the moment the real data appears, and a real result goes stale when the file changes.
"""

from __future__ import annotations

import ast
import hashlib
from functools import lru_cache
from pathlib import Path

from .paths import REPO_ROOT

LOCAL_PACKAGES = ("dpmf_lib", "data_fetch")
#: Modules a run's code imports that are nevertheless not inputs of the run: they only judge saved measurements and are
#: applied anew at every report and claims table (:mod:`dpmf_lib.verdicts`). Left out of every closure, so a change of
#: a judging rule re-judges the snapshot instead of making every row stale. A module may be listed only if nothing it
#: returns is saved by a run (tested). The runner records a digest of its bytes in ``run.json`` (the run record, not
#: a result: :func:`dpmf_lib.runner.hashing.judging_digest`) so the report can flag notebooks judged under older rules.
NOT_RUN_INPUTS = frozenset({"dpmf_lib.verdicts"})


def _module_path(module: str) -> Path | None:
    base = REPO_ROOT.joinpath(*module.split("."))
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def _imports(path: Path, module: str, locate=_module_path) -> set[str]:
    """Local modules imported anywhere in ``path`` (module name ``module``); ``locate`` finds a module's file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for name in _imported_names(path.read_text(encoding="utf-8"), str(path), package):
        if name.split(".")[0] not in LOCAL_PACKAGES:
            continue
        parts = name.split(".")
        for k in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ too
            prefix = ".".join(parts[:k])
            if locate(prefix) is not None:
                out.add(prefix)
    return out


@lru_cache(maxsize=None)
def _imported_names(source: str, filename: str, package: str) -> frozenset[str]:
    """Every name an import statement of ``source`` may bind a module to (``from pkg import name`` gives ``pkg`` and
    ``pkg.name``). Cached on the source text, so an edited file is parsed again: the report and the paper snapshot
    hash all 47 notebooks' closures, and parsing every file once per closure (~1,600 parses) took a minute there."""
    found = set()
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                anchor = ".".join(parts[:len(parts) - node.level + 1])
                base = f"{anchor}.{node.module}" if node.module else anchor
            else:
                base = node.module or ""
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)  # `from pkg import module`
    return frozenset(found)


@lru_cache(maxsize=None)
def module_closure(module: str) -> tuple[Path, ...]:
    """The files of ``module`` and of every local module it imports, transitively (sorted), except
    :data:`NOT_RUN_INPUTS`."""
    parts = module.split(".")
    todo, seen = [".".join(parts[:k]) for k in range(1, len(parts) + 1)], {}  # importing a.b.c runs a/__init__ too
    located = {}

    def locate(name):  # each name's file looked up once per closure, not once per file that imports it
        if name not in located:
            located[name] = _module_path(name)
        return located[name]

    while todo:
        name = todo.pop()
        if name in seen or name in NOT_RUN_INPUTS:
            continue
        path = locate(name)
        if path is None:
            continue
        seen[name] = path
        todo.extend(_imports(path, name, locate) - set(seen))
    return tuple(sorted(set(seen.values())))


def _canonical(node) -> str:
    """A text form of an AST node that is the same on every Python this workbook supports: the node's type and its
    fields by name, leaving out positions, ``ctx`` and fields that are None or empty (newer Pythons add fields, e.g.
    ``type_params``, that old code leaves empty)."""
    if isinstance(node, ast.AST):
        parts = []
        for name in node._fields:
            if name == "ctx":
                continue
            value = getattr(node, name, None)
            if value is None or value == []:
                continue
            parts.append(f"{name}={_canonical(value)}")
        return f"{type(node).__name__}({','.join(parts)})"
    if isinstance(node, list):
        return "[" + ",".join(_canonical(v) for v in node) + "]"
    return f"{type(node).__name__}:{node!r}"


def _drop_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                node.body = node.body[1:]
    return tree


@lru_cache(maxsize=None)
def source_digest(source: str, filename: str = "<source>") -> str:
    """Digest of what Python code does: its AST without docstrings (comments are not in the AST), so editing prose
    changes no digest and changing code changes it. :func:`_canonical` keeps it stable across Python versions."""
    return hashlib.sha256(_canonical(_drop_docstrings(ast.parse(source, filename))).encode()).hexdigest()


def file_digest(path: Path) -> str:
    """:func:`source_digest` of a ``.py`` file, sha256 of the bytes of any other file."""
    if path.suffix == ".py":
        return source_digest(path.read_text(encoding="utf-8"), str(path))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def modules_closure(modules) -> tuple[Path, ...]:
    """The union of :func:`module_closure` over ``modules`` (sorted)."""
    return tuple(sorted({p for m in modules for p in module_closure(m)}))


def code_digest(*modules: str) -> str:
    """Digest of the behaviour of ``modules`` and everything local they import: each file of their closure by its
    repository path and :func:`file_digest`. The one code digest of the workbook: the runner's run hash and the
    result cache's keys (:func:`dpmf_lib.cache.cached_call` with ``code_of``) both use it."""
    h = hashlib.sha256()
    for p in modules_closure(modules):
        h.update(p.relative_to(REPO_ROOT).as_posix().encode())
        h.update(file_digest(p).encode())
    return h.hexdigest()


def cell_code(source: str) -> str:
    """What a notebook code cell runs, for hashing: its AST without docstrings (:func:`source_digest`'s form), or —
    for a cell Python cannot parse (an IPython magic) — its tokens without comments and blank lines."""
    import io
    import tokenize

    try:
        return _canonical(_drop_docstrings(ast.parse(source)))
    except SyntaxError:
        pass
    try:
        toks = [(t.type, t.string) for t in tokenize.generate_tokens(io.StringIO(source).readline)
                if t.type not in (tokenize.COMMENT, tokenize.NL)]
    except (tokenize.TokenError, SyntaxError):
        return source
    return repr(toks)


def notebook_code(path: Path) -> list[dict]:
    """The code cells of notebook ``path`` as they run: :func:`cell_code` and the cell's tags (the ``parameters``
    tag decides where papermill injects). Markdown and comments are left out: editing them changes no result."""
    import json

    nb = json.loads(path.read_text(encoding="utf-8"))
    return [{"code": cell_code("".join(c.get("source", ""))), "tags": c.get("metadata", {}).get("tags", [])}
            for c in nb.get("cells", []) if c.get("cell_type") == "code"]


def notebook_imports(path: Path) -> tuple[str, ...]:
    """The local modules (:data:`LOCAL_PACKAGES`) the code cells of notebook ``path`` import, found statically."""
    import json

    nb = json.loads(path.read_text(encoding="utf-8"))
    found = set()
    for c in nb.get("cells", []):
        if c.get("cell_type") != "code":
            continue
        try:
            names = _imported_names("".join(c.get("source", "")), str(path), "")
        except SyntaxError:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] in LOCAL_PACKAGES:
                found.update(".".join(parts[:k]) for k in range(1, len(parts) + 1)
                             if _module_path(".".join(parts[:k])) is not None)
    return tuple(sorted(found))


_claims_read: tuple | None = None


def current_claims() -> list:
    """:func:`dpmf_lib.claims.load_claims` of the claims file as it is now, parsed once per version of the file.

    Every run hash and staleness check reads the claims (the seed rules of a notebook's claims are a run input), and
    the report and the paper snapshot check all 47 notebooks, twice over: parsing ``claims.yaml`` each time (~1 s) was
    most of a report's two minutes. Kept while the file's bytes, its path and the loader are the ones it was read
    with (a test's patched ``claims_path`` or ``load_claims`` misses it). It assumes what ``load_claims`` returns
    depends only on those bytes (true of its code: a patched ``read_yaml`` or ``Claim`` would not be seen); a
    claim's fields are scalars or tuples (frozen), so callers share them safely."""
    global _claims_read
    from . import claims

    path, loader = claims.claims_path(), claims.load_claims
    try:
        digest = hashlib.sha256(path.read_bytes()).digest()
    except OSError:
        return loader()  # let the loader say what is wrong with the file
    kept = _claims_read
    if kept is not None and kept[0] == path and kept[1] is loader and kept[2] == digest:
        return list(kept[3])
    found = loader()
    try:
        unchanged = hashlib.sha256(path.read_bytes()).digest() == digest
    except OSError:
        unchanged = False
    if unchanged:  # not kept if the file changed while it was read
        _claims_read = (path, loader, digest, tuple(found))
    return list(found)


def dataset_state(dataset_id: str) -> str:
    """``real:<checksum>`` when the real dataset can be loaded now, ``damaged: …`` when it is there but fails its
    checks, else ``absent``. The checksum is the one ``load_ratings`` records in ``DataSource.checksum``."""
    from .data.datasets import real_checksum
    from .errors import WorkbookError

    if not _registered(dataset_id):
        return "unknown"
    try:
        checksum = real_checksum(dataset_id)
    except WorkbookError as exc:
        return f"damaged: {str(exc)[:200]}"
    return "absent" if checksum is None else f"real:{checksum}"


def data_states(sources: list[dict]) -> dict:
    """The state each dataset of a run's provenance sources has *now* (see :func:`dataset_state`)."""
    ids = sorted({s["dataset"] for s in sources if s.get("dataset")})
    return {d: dataset_state(d) for d in ids}


def _registered(dataset_id) -> bool:
    """A built-in dataset id, or a user's dataset known here (registered, or an inline spec of this process)."""
    from data_fetch.registry import get_spec

    from .data.user import lookup
    from .errors import WorkbookError

    try:
        get_spec(dataset_id)
    except WorkbookError:
        try:
            return lookup(dataset_id) is not None
        except WorkbookError:
            return False
    return True


def states_of_run(sources: list[dict]) -> dict:
    """The state each registered dataset was in *when the run read it* (from its provenance sources); data made by
    the experiment itself (a synthetic sphere, sklearn's digits) has no state to go stale."""
    out = {}
    from .data.user import NOTE_PREFIX

    for s in sources:
        d = s.get("dataset")
        # a user's dataset is recorded even where its inline spec is not known (a worker process of the runner)
        if not d or not (_registered(d) or (s.get("note") or "").startswith(NOTE_PREFIX)):
            continue
        out[d] = f"real:{s.get('checksum')}" if s.get("real") else "absent"
    return dict(sorted(out.items()))
