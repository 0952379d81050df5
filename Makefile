# Set up a virtual environment and run the demo, the tests or the benchmark.
#   make demo    compile the static kernels once, generate TPC-H (SF 0.1) if missing; run the primer query, Q1 and Q6
#   make test    the test suite on cpu and cuda-sim (and cuda where a GPU is present);
#                ends with the 25 slowest tests, every failure and error, and the reason of every skip
#   make test-fast  the cpu cases only: no cuda-sim/cuda cases, no Spark (a few minutes)
#   make bench   time the engine against DuckDB and Polars (SF 1); see bench/README.md
#   make lock    re-pin constraints.txt: install '.[dev]' unpinned into a throwaway venv and freeze it
# Pass options through DEMO_ARGS, PYTEST_ARGS, BENCH_ARGS, e.g.
#   make demo DEMO_ARGS="--sf 1 --device cpu"

PYTHON ?= python3
VENV := .venv
VENV_PYTHON := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
# The pinned versions every install here uses (pyproject.toml only has lower bounds); `make lock` refreshes them.
CONSTRAINTS := constraints.txt
LOCK_VENV := $(or $(TMPDIR),/tmp)/gpu-engine-lock-venv

DEMO_ARGS ?=
PYTEST_ARGS ?=
BENCH_ARGS ?=

.PHONY: demo test test-fast bench venv lock

venv: $(INSTALLED)

$(VENV_PYTHON):
	$(PYTHON) -m venv $(VENV)

# Reinstall only when pyproject.toml or the pinned versions changed since the last install.
$(INSTALLED): pyproject.toml $(CONSTRAINTS) | $(VENV_PYTHON)
	$(VENV_PYTHON) -m pip install -c $(CONSTRAINTS) -e '.[dev]'
	touch $(INSTALLED)

# Re-pin on purpose (newer DuckDB, numba, ...): the newest versions pip picks for '.[dev]' in a fresh venv,
# frozen without the editable gpu-engine; the comment lines at the top of constraints.txt are kept.
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install -q -e '.[dev]'
	{ grep '^#' $(CONSTRAINTS) || true; $(LOCK_VENV)/bin/python -m pip freeze --exclude-editable; } > $(CONSTRAINTS).new
	mv $(CONSTRAINTS).new $(CONSTRAINTS)
	rm -rf $(LOCK_VENV)

# Set-up compiles the static kernels (query-independent: joins, grouping, sorting, decoding) once per machine, and
# again only when their sources change; queries' generated kernels compile in the background as queries run.
PRECOMPILED := $(VENV)/.static-kernels-compiled
$(PRECOMPILED): $(INSTALLED) $(wildcard kernels/*.py) gpu_engine/codegen/static_kernels.py \
		gpu_engine/exec/dynamic_filters.py
	$(VENV_PYTHON) -m gpu_engine precompile
	touch $(PRECOMPILED)

demo: $(INSTALLED) $(PRECOMPILED)
	$(VENV_PYTHON) -m gpu_engine demo $(DEMO_ARGS)

# What every pytest run here reports: the slowest tests, which tests failed or errored, and why each skipped.
PYTEST_REPORT := --durations=25 -rfEs
# Test processes (pytest-xdist); Spark tests share one (tests/conftest.py). PYTEST_WORKERS=0 runs in-process.
# Two on the 2-core CI machine: three were tried (a clean clone: pytest 1253 s against 1273 s with two, within
# noise) and only add contention for the tests that bound a timeout or a signal's effect.
PYTEST_WORKERS ?= 2
PYTEST_PARALLEL := -n $(PYTEST_WORKERS) --dist loadgroup

# pytest exits 5 when it collects no test; that is not a failure here.
test: $(INSTALLED)
	$(VENV_PYTHON) -m pytest -q $(PYTEST_PARALLEL) $(PYTEST_REPORT) $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests"; exit 0; fi; exit $$status

# --fast (tests/conftest.py) deselects the cuda-sim and cuda cases and the spark and slow tests.
test-fast: $(INSTALLED)
	$(VENV_PYTHON) -m pytest -q --fast $(PYTEST_PARALLEL) $(PYTEST_REPORT) $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests"; exit 0; fi; exit $$status

bench: $(INSTALLED)
	$(VENV_PYTHON) -m bench.run_bench $(BENCH_ARGS)
