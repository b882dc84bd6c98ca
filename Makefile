# The two set-up commands of the README: `make demo` and `make test`. Both create .venv if needed.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export LAKEHOUSE_WAREHOUSE ?= $(CURDIR)/warehouse

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m lakehouse.demo

test: $(STAMP)
	$(PY) -m pytest

lint: $(STAMP)
	$(PY) -m ruff check .

bench: $(STAMP)
	$(PY) bench/core.py

clean:
	rm -rf $(VENV) warehouse .pytest_cache .ruff_cache
