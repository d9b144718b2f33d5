"""The Hua result cache's code part (hua_common._code_version) is the one code digest over the closure of the cached
computation (hua_common and everything it imports: load_data, the simulations, the seed policy, the loaders)."""

from pathlib import Path

from dpmf_lib.experiments.hua import hua_common as hc

PKG = Path(hc.__file__).resolve().parents[2]


def test_the_key_covers_the_import_closure_of_the_cached_computation():
    """The code part of the key is the one code digest over hua_common's closure: the simulations, the seed policy
    and the data loaders are in it, so a change to any of them retires the entries."""
    from dpmf_lib.cache import code_version
    from dpmf_lib.dependencies import code_digest, module_closure

    closure = {f.resolve() for f in module_closure("dpmf_lib.experiments.hua.hua_common")}
    for f in (PKG / "privacy" / "common.py", PKG / "objpert" / "mf.py", PKG / "data" / "standin.py",
              PKG.parent / "data_fetch" / "registry.py"):
        assert f in closure
    assert hc._code_version() == code_version("dpmf_lib.experiments.hua.hua_common") \
        == code_digest("dpmf_lib.experiments.hua.hua_common")[:16]