# Two commands: `make figures` and `make test`. Both set themselves up (a .venv with the package and its extras,
# the data) on a fresh machine with Python >= 3.11 and access to PyPI.
PYTHON ?= python3
# An active conda env made from environment.yml is used as it is (the package installed into it with --no-deps);
# otherwise a .venv is built with requirements.lock as constraints (the versions this workbook was tested with).
ifeq ($(CONDA_DEFAULT_ENV),dpmf-workbook)
VENV   := $(CONDA_PREFIX)
INSTALL = $(PY) -m pip install --quiet --no-deps -e .
else
VENV   ?= .venv
INSTALL = $(PY) -m pip install --quiet -c requirements.lock -e '.[dev,peers]'
endif
PY     := $(VENV)/bin/python
PROFILE ?= ci
ONLY   ?=
JOBS   ?= 1
STAMP  := $(VENV)/.installed
# A local copy of the datasets beside the repository (the workbook's shared/ folder) is used when present;
# otherwise data_fetch downloads from the official sources. Set DPMF_DATA_MIRROR yourself to point elsewhere.
DPMF_DATA_MIRROR ?= $(wildcard $(abspath ../shared/data))
export DPMF_DATA_MIRROR

.PHONY: all figures test test-quick test-figures lab docs bench data venv clean clean-figures report list check-verdicts paper-snapshot lock

all: figures

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Reinstall when the package metadata changes; editable install so notebooks see library edits at once.
$(STAMP): pyproject.toml requirements.lock | $(PY)
	$(INSTALL)
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (dpmf workbook)" >/dev/null
	touch $(STAMP)

venv: $(STAMP)

# Re-pin requirements.lock from the current .venv after a deliberate upgrade (then run make test and commit both).
lock: $(STAMP)
	{ sed -n '1,3p' requirements.lock; $(PY) -m pip freeze --exclude-editable; } > requirements.lock.new
	mv requirements.lock.new requirements.lock

data: $(STAMP)
	$(PY) -m data_fetch ml-100k

figures: data
	$(PY) -m dpmf_lib.reproduce --profile $(PROFILE) --jobs $(JOBS) $(if $(ONLY),--only '$(ONLY)')

# The paper profile, each notebook within BUDGET minutes (stopped and recorded "over budget" beyond it); each
# successful run is kept in results/paper/<name>/ (committed) with its measured time and peak memory in run.json.
# The runner skips what is current, so an interrupted run resumes where it stopped.
BUDGET ?= 60
# REPRODUCE_ARGS: more options of the runner, e.g. '--backend dask --scheduler tcp://HOST:8786' (docs/distributed.md)
REPRODUCE_ARGS ?=
paper-snapshot: data
	$(PY) -m dpmf_lib.reproduce --profile paper --jobs $(JOBS) --timeout $(BUDGET) --snapshot \
	  $(if $(ONLY),--only '$(ONLY)') $(REPRODUCE_ARGS)

# The suite runs in TEST_JOBS processes (pytest-xdist; auto = one per core, 0 = all in this process); each test file
# stays on one worker (--dist loadfile), so its module fixtures are built once, and the files go out longest first by
# tests/durations.json (tests/conftest.py), so the workers end together. The checks of `make figures`' ci outputs
# (marker ci_figures) skip here: `make test-figures` runs them after `make figures` (.ci/run does both).
TEST_JOBS ?= auto
test: data
	$(PY) -m pytest -q -n $(TEST_JOBS) --dist loadfile

# The checks of the ci runs in the figures directory (tests marked ci_figures, tests/ci_phases.py), after
# `make figures PROFILE=ci`; each fails when the run it reads is missing, failed or not at ci.
test-figures: $(STAMP)
	DPMF_CI_FIGURES="$${DPMF_CI_FIGURES:-$$($(PY) -c 'from dpmf_lib.paths import figures_dir; print(figures_dir())')}" \
	  $(PY) -m pytest -q -n $(TEST_JOBS) --dist loadfile -m ci_figures

# The tests a change can break, in ≤ 3 min on two cores (tests/select_changed.py says which and why): the test files
# whose static import closure holds a file changed since the merge base with QUICK_BASE (committed, uncommitted or
# untracked), nearest the change first — its own tests, then those of the modules it feeds directly — taken while
# their durations recorded in tests/durations.json sum to ≤ QUICK_BUDGET seconds, plus a few sentinels; tests marked
# slow (the notebook executions among them) are left out. A central module (mf/csgd.py, validate.py) is in most of
# the suite's closure: the budget, not the closure, bounds its run. CHANGED='dpmf_lib/x.py …' names the changed files
# instead of git. `make test` stays the full check.
QUICK_BASE ?= main
QUICK_BUDGET ?= 120
CHANGED ?=
test-quick: data
	@files="$$($(PY) tests/select_changed.py --explain --base $(QUICK_BASE) --budget $(QUICK_BUDGET) $(CHANGED))" && \
	$(PY) -m pytest -q -n $(TEST_JOBS) --dist loadfile -m "not slow and not ci_figures" $$files

# Lab's root is the repository (notebooks/, the executed copies in figures/, params/ all reachable); it opens in notebooks/.
# LAB_ARGS go to jupyter lab as they are: `make lab LAB_ARGS=--allow-root` (as root), `LAB_ARGS='--no-browser --port 8890'`.
LAB_ARGS ?=
lab: data
	$(VENV)/bin/jupyter lab --ServerApp.root_dir='$(CURDIR)' --LabApp.default_url=/lab/tree/notebooks $(LAB_ARGS)

# The documentation site (mkdocs.yml, docs/) into site/; --strict: a warning (a broken link, a page missing from the
# nav) fails the build.
docs: $(STAMP)
	$(PY) -m mkdocs build --strict --site-dir site

bench: $(STAMP)
	mkdir -p bench-results
	for s in machine mf sketch attacks lsh pnbm paper; do \
	  $(PY) -m dpmf_lib.bench $$s --profile $(if $(filter paper,$(PROFILE)),paper,quick) --out bench-results/$$s.json || exit 1; \
	done

list: $(STAMP)
	$(PY) -m dpmf_lib.reproduce --list

report: $(STAMP)
	$(PY) -m dpmf_lib.report

# The verdicts at `ci` must match params/expected_verdicts.yaml (accept a deliberate change with
# `$(PY) -m dpmf_lib.report --accept-verdicts` and commit the file with it).
check-verdicts: $(STAMP)
	$(PY) -m dpmf_lib.report --check-verdicts

# The result cache (dpmf_lib.cache) goes too: figures/.cache, or $DPMF_CACHE_DIR, and the caches of earlier versions.
clean-figures:
	if [ -x $(PY) ]; then $(PY) -m dpmf_lib.cache --clear; fi
	find figures -mindepth 1 -not -name .gitkeep -delete

clean: clean-figures
	rm -rf $(VENV) build site *.egg-info
