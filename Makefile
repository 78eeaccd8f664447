# attention-step-by-step: every task a learner or maintainer runs, in one place.
# `make lab` opens the notebooks; `make test` runs everything CI runs.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LAB_ARGS ?=
# JupyterLab refuses to start as root (containers, CI) unless told it is meant.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)
NOTEBOOKS := $(sort $(wildcard notebooks/[0-9][0-9]_*.ipynb))
# Chapter 13's full configuration wants a GPU: CI runs it in quick mode, comparing only the
# cells marked NBVAL_CHECK_OUTPUT (its stored outputs come from the full GPU run).
GPU_NOTEBOOKS := $(wildcard notebooks/13_*.ipynb)
# The next version of chapter 13, edited and waiting for a GPU run to store its outputs
# (scripts/gpu_run.sh runs it there); until then CI runs it in quick mode, as chapter 13.
NEXT_NOTEBOOKS := $(wildcard notebooks/next/*.ipynb)
QUICK_NOTEBOOKS := $(strip $(GPU_NOTEBOOKS) $(NEXT_NOTEBOOKS))
CPU_NOTEBOOKS := $(filter-out $(GPU_NOTEBOOKS),$(NOTEBOOKS))
NBVAL_ARGS := --nbval --nbval-sanitize-with notebooks/nbval_sanitize.cfg --nbval-current-env \
	--nbval-cell-timeout=900
# Trained numbers depend on the CPU kernels torch, MKL and oneDNN pick for the machine (AVX2,
# AVX-512, ...). Stored outputs are made, and compared by strict nbval, with one pinned set, so
# that they reproduce on any x86-64 machine with AVX2; CONTRIBUTING.md says why. This is the one place.
# MKL's branch is COMPATIBLE: on AMD processors MKL ignores MKL_CBWR=AVX2 and runs its own
# dispatch (MKL_VERBOSE says CNR:AUTO), and only COMPATIBLE is the same on every maker's CPU.
PINNED_KERNELS := ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=COMPATIBLE ONEDNN_MAX_CPU_ISA=AVX2
# `make portability` runs the chapters that train under kernel sets other than the pinned one,
# stand-ins for a learner's laptop: OTHER_KERNELS (ATen's, MKL's and oneDNN's oldest branches),
# ATEN_DEFAULT_KERNELS (ATen's plain kernels, MKL and oneDNN left to choose their own, as on a
# CPU that ATen has no special kernels for) and the machine's own. Strict nbval: a compared cell
# whose output changes there prints a trained or kernel-dependent number, which is a defect.
OTHER_KERNELS := ATEN_CPU_CAPABILITY=default MKL_CBWR=SSE4_2 ONEDNN_MAX_CPU_ISA=SSE41
ATEN_DEFAULT_KERNELS := ATEN_CPU_CAPABILITY=default
TRAINING_NOTEBOOKS := $(filter $(addprefix notebooks/,03_% 04_% 05_% 08_% 10_% 12_% 14_% 16_% 17_% 19_%),$(CPU_NOTEBOOKS))
# The pip mirrors of some machines print one warning per package; keep the log readable.
QUIET_PIP := grep -v "^WARNING: Location" || true

.PHONY: help venv install lab test unit lint notebooks portability strict-training book book-check browser outputs \
	benchmark gpu-bundle gpu-rehearsal clean

help:
	@echo "make lab        open the notebooks in JupyterLab (creates $(VENV) if missing)"
	@echo "make test       unit tests, lint, notebooks (nbval), output freshness, the book"
	@echo "make portability  the chapters that train, strict nbval, under three other CPU kernel sets"
	@echo "make outputs    re-execute every notebook top to bottom and store its outputs"
	@echo "make book       build the Jupyter Book into _build/html (offline, warnings as errors)"
	@echo "make benchmark  time the attention paths (benchmarks/attention.py)"
	@echo "make gpu-bundle  what chapter 13's GPU run carries (scripts/gpu_run.sh)"
	@echo "make gpu-rehearsal  chapter 13's GPU-only code paths on the CPU, a tiny model (8 min)"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip 2>&1 | $(QUIET_PIP)

venv: $(BIN)/python

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[notebooks,test,book]" 2>&1 | $(QUIET_PIP)
	$(BIN)/python -c "import attnlib, torch, jupyterlab, nbval, playwright"
	touch $(STAMP)

install: $(STAMP)

lab: $(STAMP)
	@echo "Starting JupyterLab on notebooks/ (stop it with Ctrl-C, twice, or 'jupyter lab stop')."
	$(BIN)/jupyter lab --notebook-dir=notebooks $(ROOT_FLAG) $(LAB_ARGS)

# The Node tools, ESLint and wabt's wat2wasm: exactly the versions of package-lock.json.
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

lint: $(STAMP) node_modules/.installed
	$(BIN)/ruff check attnlib tests benchmarks scripts notebooks/conftest.py
	$(BIN)/ruff format --check attnlib tests benchmarks scripts notebooks/conftest.py
	node_modules/.bin/eslint attnlib/live book_static

unit: $(STAMP)
	$(BIN)/python -m pytest tests --ignore=tests/book --ignore=tests/browser -q

# --durations lists the slowest cells (and, below, browser tests): CI is kept near 30 minutes.
notebooks: $(STAMP)
	$(PINNED_KERNELS) $(BIN)/python -m pytest $(NBVAL_ARGS) -n 2 --dist loadscope $(CPU_NOTEBOOKS) -q \
		--durations=10
	$(if $(QUICK_NOTEBOOKS),ATTNLIB_QUICK=1 $(BIN)/python -m pytest $(NBVAL_ARGS) --nbval-lax $(QUICK_NOTEBOOKS) -q)

# Strict nbval runs every cell, its asserts and its comparisons; chapter 13 lax in quick mode, as
# in `make notebooks` (its stored outputs come from a GPU).
portability: $(STAMP)
	@echo "== CPU kernels: $(OTHER_KERNELS)"
	$(OTHER_KERNELS) $(MAKE) --no-print-directory strict-training
	@echo "== CPU kernels: $(ATEN_DEFAULT_KERNELS)"
	$(ATEN_DEFAULT_KERNELS) $(MAKE) --no-print-directory strict-training
	@echo "== CPU kernels: the machine's own"
	$(MAKE) --no-print-directory strict-training

strict-training: $(STAMP)
	$(BIN)/python -c "import torch; print('torch dispatches to', torch.backends.cpu.get_cpu_capability())"
	$(BIN)/python -m pytest $(NBVAL_ARGS) -n 2 --dist loadscope $(TRAINING_NOTEBOOKS) -q
	$(if $(QUICK_NOTEBOOKS),ATTNLIB_QUICK=1 $(BIN)/python -m pytest $(NBVAL_ARGS) --nbval-lax $(QUICK_NOTEBOOKS) -q)

book: $(STAMP)
	$(BIN)/python scripts/fetch_book_assets.py
	$(BIN)/jupyter-book build . --config book.yml --toc notebooks/_toc.yml -W -n --keep-going

book-check: book
	$(BIN)/python -m pytest tests/book -q

# The book and JupyterLab in a real (headless) Chromium: Debian's chromium package, or the
# Chromium or Chrome executable the environment variable CHROMIUM names (as in the GitHub workflow).
CHROMIUM ?= /usr/bin/chromium
browser: book
	@if [ -x "$(CHROMIUM)" ]; then CHROMIUM="$(CHROMIUM)" $(BIN)/python -m pytest tests/browser -q --durations=15; \
	else echo "browser tests skipped: $(CHROMIUM) not found (apt-get install -y chromium, or set CHROMIUM)"; fi

test: lint unit notebooks book-check browser

# Chapter 13 is left out: its stored outputs come from a run on a GPU (see CONTRIBUTING.md).
outputs: $(STAMP)
	$(PINNED_KERNELS) $(BIN)/python scripts/execute_notebooks.py $(CPU_NOTEBOOKS)

benchmark: $(STAMP)
	$(BIN)/python benchmarks/attention.py

# What chapter 13's GPU run carries (scripts/gpu_run.sh says how): wheels for the machine's
# Python 3.12 in .whl/, and IMDB's cache in data_cache/ (built from $$ATTNLIB_DATA or the web).
# GPU_PYTHON=3.11 fetches wheels for this machine's Python instead, for a CPU rehearsal.
GPU_PYTHON ?= 3.12
GPU_PLATFORMS := $(foreach p,manylinux_2_28 manylinux_2_27 manylinux_2_26 manylinux_2_17 manylinux2014 manylinux1 manylinux_2_5,--platform $(p)_x86_64)
gpu-bundle: $(STAMP)
	rm -rf .whl && mkdir -p .whl data_cache
	$(BIN)/python -m pip download -q --no-deps --only-binary=:all: --python-version $(GPU_PYTHON) \
		--implementation cp $(GPU_PLATFORMS) -d .whl $$(grep -v '^#' scripts/gpu_wheels.txt) 2>&1 | $(QUIET_PIP)
	ATTNLIB_CACHE=$(CURDIR)/data_cache $(BIN)/python -c "from attnlib.data.imdb import load_imdb; load_imdb()"
	@du -sh .whl data_cache

# Before a GPU run: the paths only a GPU takes (tokenizer training, the full test set, saving
# the model, the seed budget), on the CPU with a tiny model, in a copy of the working tree.
gpu-rehearsal: $(STAMP)
	$(BIN)/python scripts/rehearse_gpu_run.py

clean:
	rm -rf _build .pytest_cache .ruff_cache
