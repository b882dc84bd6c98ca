# The two set-up commands of the README: `make demo` and `make test`. Both create .venv if needed.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export LAKEHOUSE_WAREHOUSE ?= $(CURDIR)/warehouse
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home

.PHONY: demo dev test lint bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m assets.demo

dev: $(STAMP)
	mkdir -p $(DAGSTER_HOME)
	$(VENV)/bin/dagster dev -w workspace.yaml

test: $(STAMP)
	$(PY) -m pytest

lint: $(STAMP)
	$(PY) -m ruff check .

bench: $(STAMP)
	$(PY) bench/core.py

clean:
	rm -rf $(VENV) warehouse .dagster_home .pytest_cache .ruff_cache
