# The set-up commands of the README: `make demo`, `make test` and `make e2e`. All create .venv if needed.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
E2E_STAMP := $(VENV)/.installed-e2e
CHROMIUM := /usr/bin/chromium
MARIADB := /usr/sbin/mariadbd
export LAKEHOUSE_WAREHOUSE ?= $(CURDIR)/warehouse
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home

.PHONY: demo stream dev cluster-demo test e2e lint bench clean

DAGSTER_LIB := integrations/dagster-lakehouse

# The engine with every extra and the development tools, and the Dagster integration (its own
# distribution). Compat editable mode: the checkouts on sys.path, so Spark's lookup of installed
# data sources (pkgutil over sys.path) finds pyspark_paimon in every Python worker of this venv
$(STAMP): pyproject.toml $(DAGSTER_LIB)/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]' -e '$(DAGSTER_LIB)[pandas,polars,ui]' \
		--config-settings editable_mode=compat
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m assets.demo

# The example run continuously: rounds of late events through the incremental tables, with the
# end-to-end freshness of each (after make demo)
stream: $(STAMP)
	$(PY) -m assets.streaming

# The example on a Spark standalone cluster (master + 2 workers) with its warehouse on S3 (moto),
# all on loopback
cluster-demo: $(STAMP)
	$(PY) -m assets.cluster_demo

# The Dagster UI and daemon, with a Spark Connect server on loopback that every run connects to
# (unless $$LAKEHOUSE_SPARK names one: sc://host:port, spark://host:port or local[n]); Ctrl-C stops both.
dev: $(STAMP)
	mkdir -p $(DAGSTER_HOME)
	test -f $(DAGSTER_HOME)/dagster.yaml || cp dagster.yaml $(DAGSTER_HOME)/
	$(PY) -m lakehouse.spark.connect -- $(VENV)/bin/dagster dev -w workspace.yaml

test: $(STAMP)
	$(PY) -m pytest

# The webserver and daemon driven through GraphQL, and headless Chromium on the asset graph
# (saves docs/asset-graph.png): Playwright from PyPI, Chromium from Debian; the cluster; the MySQL
# catalog lock on Debian's MariaDB.
e2e: $(E2E_STAMP) $(CHROMIUM) $(MARIADB)
	$(PY) -m pytest -m e2e

$(E2E_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,e2e]' -e '$(DAGSTER_LIB)[pandas,polars,ui]' \
		--config-settings editable_mode=compat
	touch $(E2E_STAMP)

$(CHROMIUM):
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium > /dev/null

$(MARIADB):
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server > /dev/null

lint: $(STAMP)
	$(PY) -m ruff check .

bench: $(STAMP)
	$(PY) bench/core.py

clean:
	rm -rf $(VENV) warehouse .dagster_home .pytest_cache .ruff_cache
