# The two commands of the README: `make run` and `make test`. Both create .venv when missing and
# install into it the exact versions of requirements.lock (torch's CPU build first, so nothing
# pulls a CUDA build), then the project itself without dependencies. Nothing compiles.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
LOCK := requirements.lock
PIP_VERSION := 26.3
PIP_TOOLS_VERSION := 7.6.2
TEST_WORKERS ?= 2
# Extra pip options for torch, e.g. TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu"
# where no CPU build of torch 2.13.0 is on pip's path (the lock pins 2.13.0+cpu).
TORCH_PIP_ARGS ?=

# Offline and quiet: no usage reports (Kedro, MLflow, BentoML, DVC's is off in .dvc/config), no model
# hub. The same settings reach every program of the venv, run with or without make, through
# scripts/ragfolio_offline.pth, which install copies into the venv's site-packages (a variable
# already set in the environment wins). scripts/ragfolio_numerics.pth likewise pins the numeric
# libraries to one instruction set (AVX2) so runs give the same bits on every x86-64 machine
# (src/ragfolio/numerics.py; RAGFOLIO_NATIVE_ISA=1 turns it off).
export KEDRO_DISABLE_TELEMETRY := true
export DO_NOT_TRACK := true
export MLFLOW_DISABLE_TELEMETRY := true
export BENTOML_DO_NOT_TRACK := true
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_HUB_DISABLE_TELEMETRY := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install run test lock clean-data

$(BIN)/.installed: pyproject.toml $(LOCK) scripts/ragfolio_offline.pth scripts/ragfolio_numerics.pth
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	cp scripts/ragfolio_offline.pth scripts/ragfolio_numerics.pth "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/"
	$(BIN)/python -m pip install --quiet pip==$(PIP_VERSION)
	$(BIN)/python -m pip install --quiet $(TORCH_PIP_ARGS) torch==2.13.0
	$(BIN)/python -m pip install --quiet -r $(LOCK)
	$(BIN)/python -m pip install --quiet --no-deps -e .
	$(BIN)/python -m pip check
	touch $@

install: $(BIN)/.installed

run: install
	$(BIN)/kedro run --pipelines=portfolio

# Lint (ruff) and types (mypy), then the whole suite; settings of all three are in pyproject.toml.
# The suite runs in TEST_WORKERS processes (pytest-xdist), a test file per process at a time: most
# of its time is pipelines run in subprocesses that keep one core busy each.
# scripts/ensure-chromium first installs Debian's chromium for the playground test when it is
# missing and this user is root (RAGFOLIO_INSTALL_CHROMIUM=0: never); otherwise that test skips, saying why.
test: install
	scripts/ensure-chromium
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/mypy
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

# Re-resolve requirements.lock from pyproject.toml's ranges (pip-tools; needs the package index).
lock: install
	$(BIN)/python -m pip install --quiet pip-tools==$(PIP_TOOLS_VERSION)
	$(BIN)/pip-compile --quiet --allow-unsafe --extra=dev --strip-extras --no-emit-index-url --no-emit-find-links \
		--output-file=$(LOCK) pyproject.toml

clean-data:
	find data/0[2-8]_* -mindepth 1 ! -name .gitkeep -exec rm -rf {} +
