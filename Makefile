# The set-up commands of the README: `make demo`, `make test` and `make e2e`. All create .venv if needed.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
E2E_STAMP := $(VENV)/.installed-e2e
CHROMIUM := /usr/bin/chromium
MARIADB := /usr/sbin/mariadbd
# the catalog lock's tests take the machine's PostgreSQL where pgserver has no wheel (Python 3.13+)
INITDB := $(firstword $(wildcard /usr/lib/postgresql/*/bin/initdb) debian-postgresql)
export LAKEHOUSE_WAREHOUSE ?= $(CURDIR)/warehouse
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home
# Python processes cache the bytecode they compile (__pycache__, ignored by git): the suite starts
# hundreds (Spark's workers, killed writers, spawned committers), each of which would otherwise
# compile the engine again (tests/faults took 203 s so, 163 s with the cache)
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo stream dev cluster-demo test e2e lint ci-engine ci-user debian-postgresql bench clean

DAGSTER_LIB := integrations/dagster-lakehouse

# The engine with every extra and the development tools, and the Dagster integration (its own
# distribution). Compat editable mode: the checkouts on sys.path, so Spark's lookup of installed
# data sources (pkgutil over sys.path) finds pyspark_paimon in every Python worker of this venv
$(STAMP): pyproject.toml $(DAGSTER_LIB)/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]' -e '$(DAGSTER_LIB)[pandas,polars,ui,dg]' \
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
# (unless $$LAKEHOUSE_SPARK names one: sc://host:port, spark://host:port or local[n]), and the
# warehouse served by a REST catalog server on loopback (port $(REST_PORT)), which the runs commit
# through with the token it makes (also in $(DAGSTER_HOME)/rest-catalog.token, for other clients);
# Ctrl-C stops all three.
REST_PORT ?= 8181
dev: $(STAMP)
	mkdir -p $(DAGSTER_HOME)
	test -f $(DAGSTER_HOME)/dagster.yaml || cp dagster.yaml $(DAGSTER_HOME)/
	$(VENV)/bin/lakehouse rest-catalog --warehouse $(LAKEHOUSE_WAREHOUSE) --port $(REST_PORT) \
		--token-file $(DAGSTER_HOME)/rest-catalog.token -- \
		$(PY) -m lakehouse.spark.connect -- $(VENV)/bin/dagster dev -w workspace.yaml

test: $(STAMP)
	$(PY) -m pytest

# The webserver and daemon driven through GraphQL, and headless Chromium on the asset graph
# (saves docs/asset-graph.png): Playwright from PyPI, Chromium from Debian; the cluster; the MySQL
# catalog lock on Debian's MariaDB.
e2e: $(E2E_STAMP) $(CHROMIUM) $(MARIADB)
	$(PY) -m pytest -m e2e

$(E2E_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,e2e]' -e '$(DAGSTER_LIB)[pandas,polars,ui,dg]' \
		--config-settings editable_mode=compat
	touch $(E2E_STAMP)

$(CHROMIUM):
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium > /dev/null

$(MARIADB):
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server > /dev/null

debian-postgresql:
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql > /dev/null

# CI's first lane: style, then types (mypy's settings in pyproject.toml)
lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

# CI's lanes on the newest releases (.ci/run; make test and make e2e are its oracle lane, on .venv
# pinned by pypaimon): each installs the project into a fresh venv of the newest Python as a user
# does (not editable), and runs its tests in a scratch directory that links the tests and the
# example code location but not the sources. With it on PYTHONPATH, every process (pytest, the
# processes tests start, Spark's Python workers) imports lakehouse and dagster_lakehouse from what
# pip installed, and the tests and the example from the checkout; --installed checks the first.
CI := $(CURDIR)/build/ci
SCRATCH_LINKS := $(addprefix $(CURDIR)/,tests assets resources pyproject.toml)

# $(call fresh_venv,lane): $(CI)/venv-<lane> and the scratch directory $(CI)/<lane>, both new
define fresh_venv
	rm -rf $(CI)/venv-$(1) $(CI)/$(1) build/lib $(DAGSTER_LIB)/build
	$$(.ci/newest-python) -m venv $(CI)/venv-$(1)
	$(CI)/venv-$(1)/bin/python -m pip install -qq --upgrade pip
	mkdir -p $(CI)/$(1) && ln -s $(SCRATCH_LINKS) $(CI)/$(1)/
endef

# $(call scratch,lane) command: the command in the lane's scratch directory, which is on PYTHONPATH
scratch = cd $(CI)/$(1) && PYTHONPATH=$(CI)/$(1)

# The engine alone (pip install . and the test runner): the engine's tests, the README quickstart
# among them. The venv must hold no extra's package; the directories of the parts' tests are not
# collected (their modules import the parts' packages at the top).
ENGINE_PY := $(CI)/venv-engine/bin/python
EXTRAS_PACKAGES := pyspark dagster dagster-lakehouse obstore psycopg pymysql moto pgserver pypaimon pandas polars starlette uvicorn
ci-engine:
	$(call fresh_venv,engine)
	$(ENGINE_PY) -m pip install -qq . pytest hypothesis
	! $(ENGINE_PY) -m pip show $(EXTRAS_PACKAGES) 2> /dev/null  # shows what the engine should not need
	$(call scratch,engine) $(ENGINE_PY) -m pytest --installed -m engine \
		$(addprefix --ignore=tests/,spark dagster e2e interop rest)

# What a user installs: the engine with its extras and the Dagster integration with its own, newest
# releases (no pypaimon): every test but the engine's (ci-engine runs those on the same releases),
# the oracle's and the end-to-end ones, then make demo's job on a new warehouse.
USER_PY := $(CI)/venv-user/bin/python
ci-user: $(INITDB)
	$(call fresh_venv,user)
	$(USER_PY) -m pip install -qq '.[s3,spark,postgres,mysql,rest,test]' './$(DAGSTER_LIB)[pandas,polars,ui,dg]'
	$(call scratch,user) $(USER_PY) -m pytest --installed -m 'not engine and not interop and not e2e' \
		--ignore=tests/interop
	$(call scratch,user) LAKEHOUSE_WAREHOUSE=$(CI)/user/warehouse DAGSTER_HOME=$(CI)/user/dagster_home \
		$(USER_PY) -m assets.demo

bench: $(STAMP)
	$(PY) bench/core.py

clean:
	rm -rf $(VENV) build warehouse .dagster_home .pytest_cache .ruff_cache .mypy_cache
