# gpuledger: `make demo` and `make test` work on a fresh machine (they run `make setup` first).
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV := .venv
BIN := $(VENV)/bin
# uv from PATH, else the copy `make setup` installs with pip (run as a module)
UV = $(shell command -v uv 2>/dev/null || echo "python3 -m uv")
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export DO_NOT_TRACK := 1

.PHONY: help setup install demo test test-fast lint serve bench bands clean

help:
	@echo "make demo    set up, run the demo LoRA grid then the same points by ASHA locally, write their ROI reports"
	@echo "make test    set up, run the test suite (and ruff): tests/unit and tests/integration"
	@echo "make install the gpuledger tool (uv tool, uv.lock's versions) with prefect, sky and duckdb on PATH"
	@echo "make test-fast  the unit tests only (tests/unit: no server, browser, cluster or real sweep)"
	@echo "make serve   local Prefect server + worker + deployments (Ctrl-C stops)"
	@echo "make bench   run the benchmarks (ratios measured side by side)"
	@echo "make bands   recompute the estimate bands' table and the accuracy gate's record (after a model change)"

# Idempotent: installs uv if missing, then the locked environment into .venv.
# Where PYTHONDONTWRITEBYTECODE is set (CI, containers, this project's own machines) Python writes no .pyc, so
# every process (each test worker, CLI and trial subprocess, the Prefect server) compiled every module it
# imported again (`import prefect` 3.6 s of CPU instead of 1.6 s; `gpuledger validate` 1.2-1.5 s instead of
# 0.35 s). There the environment is compiled once after each sync (.venv/.bytecode, ~1 min on 2 cores) and
# the project's own modules at every setup (compileall skips what is current); elsewhere Python writes the
# .pyc of what it imports on first use, which costs less than compiling every installed module.
ifneq ($(strip $(PYTHONDONTWRITEBYTECODE)),)
BYTECODE := $(VENV)/.bytecode
COMPILE_OWN := $(BIN)/python -m compileall -q -j 0 gpuledger tests/helpers >/dev/null
UV_COMPILE := UV_COMPILE_BYTECODE=1
else
COMPILE_OWN := true
endif
setup: $(BIN)/gpuledger $(BYTECODE)
	@$(COMPILE_OWN)
$(BIN)/gpuledger: pyproject.toml uv.lock
	@command -v uv >/dev/null 2>&1 || python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --frozen
	@touch $@
$(VENV)/.bytecode: $(BIN)/gpuledger
	@echo "compiling .venv's modules to bytecode (PYTHONDONTWRITEBYTECODE is set; once per sync)"
	@$(BIN)/python -m compileall -q -j 0 $(VENV)/lib >/dev/null 2>&1 || true
	@touch $@

# The installed tool at uv.lock's versions, with the prefect, sky and duckdb commands beside gpuledger,
# compiled to bytecode at install (every command starts from .pyc files, PYTHONDONTWRITEBYTECODE or not).
install:
	$(UV) export --frozen --no-dev --no-emit-project --no-hashes -o .gpuledger-constraints.txt
	$(UV) tool install --force --compile-bytecode . -c .gpuledger-constraints.txt --with-executables-from prefect,skypilot,duckdb-cli
	@rm -f .gpuledger-constraints.txt

demo: setup
	$(BIN)/gpuledger demo

# Two test files at a time (pytest-xdist, one per core of the 2-core CI machine); each file stays on one
# worker (--dist loadfile), so a module's fixtures (a Prefect harness, a PostgreSQL cluster, the
# installed-wheel venv) start once; the files run costliest first (tests/conftest.py, tests/file_seconds.json:
# xdist's own reorder, by number of tests, would leave the one-test end-to-end files for last).
# `pytest` alone runs the same suite in one process.
test: setup lint torch-cpu
	GPULEDGER_TEST_UV="$(UV)" $(BIN)/pytest -n 2 --dist loadfile --no-loadscope-reorder

# The CPU torch (and Transformers, PEFT, TRL) the Trainer-integration tests run a tiny random-weight model with:
# installed from the local wheel folder when the machine has one (CI does), else those tests skip and say so.
# `uv sync` leaves torch out (it would fetch a CUDA build of several GB).
WHEELS := /opt/wheels
TORCH_CPU := torch==2.13.0+cpu transformers peft trl
torch-cpu: setup
	@if [ -d $(WHEELS) ] && ! $(BIN)/python -c "import torch, transformers, peft, trl" 2>/dev/null; then \
	  $(UV_COMPILE) $(UV) pip install --quiet --python $(BIN)/python --find-links $(WHEELS) $(TORCH_CPU); fi

# The edit loop: tests/unit only (fast, pure; tests/integration holds real processes, servers, browsers).
test-fast: setup
	$(BIN)/pytest tests/unit -m "not slow" -q -n 2 --dist loadfile

lint: setup
	$(BIN)/ruff check .

serve: setup
	$(BIN)/gpuledger serve

bench: setup
	$(BIN)/python benchmarks/estimator_accuracy.py
	$(BIN)/python benchmarks/plan_scale.py
	$(BIN)/python benchmarks/ingest.py
	$(BIN)/python benchmarks/flow_overhead.py
	$(BIN)/python benchmarks/spec_inputs.py

# After any change to the time or memory model or to the public rows: the bands' table
# (gpuledger/estimate/data/band_rows.json) and the accuracy gate's record
# (benchmarks/results/accuracy_cells.json); commit both with the change (tests/unit/test_band_table.py).
bands: setup
	$(BIN)/python benchmarks/band_table.py --write

clean:
	rm -rf reports/sweeps reports/weekly reports/capacity .gpuledger .pytest_cache
