# The two commands of the README: `make run` and `make test`. Both create .venv when missing and
# install the project into it (torch's CPU build first, so nothing pulls a CUDA build).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
# Extra pip options, e.g. TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu" where
# PyPI's torch 2.13.0 would be a CUDA build.
TORCH_PIP_ARGS ?=

export KEDRO_DISABLE_TELEMETRY := true
export DO_NOT_TRACK := 1
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install run test clean-data

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(TORCH_PIP_ARGS) torch==2.13.0
	$(BIN)/python -m pip install --quiet torch==2.13.0 -e ".[dev]"
	touch $@

install: $(BIN)/.installed

run: install
	$(BIN)/kedro run --pipeline=portfolio

test: install
	$(BIN)/python -m pytest

clean-data:
	find data/0[2-8]_* -mindepth 1 ! -name .gitkeep -exec rm -rf {} +
