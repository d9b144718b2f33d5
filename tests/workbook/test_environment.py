"""The locked environment (#17): requirements.lock pins every dependency at a version its floor allows, the floors
are what was tested, and environment.yml asks for the same packages."""

import re
import subprocess
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]  # tests/workbook/ -> the repository


def _declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in ("dev", "peers"):
        reqs += project["optional-dependencies"][extra]
    return [Requirement(r) for r in reqs]


def _locked() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"requirements.lock: '{line}' is not an exact pin"
            pins[canonicalize_name(name)] = version
    return pins


def test_every_dependency_is_pinned_within_its_floor():
    pins = _locked()
    for req in _declared():
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is declared in pyproject.toml but not pinned in requirements.lock (make lock)"
        assert req.specifier.contains(pins[name], prereleases=True), f"{req.name}=={pins[name]} is below {req}"


def test_floors_are_the_tested_versions():
    """A floor below the locked major.minor would claim support for versions nothing here ever ran."""
    pins = _locked()
    for req in _declared():
        floor = next((s.version for s in req.specifier if s.operator == ">="), None)
        assert floor is not None, f"{req} has no floor"
        locked = pins[canonicalize_name(req.name)].split(".")
        assert floor.split(".")[:2] == locked[:2], f"{req.name}: floor {floor} but tested {'.'.join(locked)}"


def test_environment_yml_asks_for_the_same_packages_and_floors():
    text = (ROOT / "environment.yml").read_text()
    conda = {canonicalize_name(m.group(1)): m.group(2) for m in re.finditer(r"-\s+([A-Za-z0-9_.\-]+)>=([0-9.]+)", text)}
    for req in _declared():
        names = ["dask", "distributed"] if req.name == "dask" else [req.name]
        for n in names:
            floor = next(s.version for s in req.specifier if s.operator == ">=")
            assert conda.get(canonicalize_name(n)) == floor, f"environment.yml: {n}>={floor} expected"


def test_make_installs_with_the_lock_or_into_an_active_conda_env():
    plain = subprocess.run(["make", "-n", "-B", "venv"], cwd=ROOT, capture_output=True, text=True).stdout
    assert "-c requirements.lock" in plain
    conda = subprocess.run(["make", "-n", "-B", "venv", "CONDA_DEFAULT_ENV=dpmf-workbook", "CONDA_PREFIX=/x/env"],
                           cwd=ROOT, capture_output=True, text=True).stdout
    assert "/x/env/bin/python -m pip install --quiet --no-deps -e ." in conda and ".venv" not in conda
