# Two commands a newcomer needs: `make demo` and `make test`. Each sets itself up.
# The interpreter .venv is made with: the first Python 3.12 or newer found (on PATH, or
# installed by pyenv), else python3. The suite measures coverage as it runs, and from 3.12
# coverage follows lines through sys.monitoring, which leaves SQLAlchemy's and the drivers'
# code untraced; on 3.11 every line of every module pays a trace call, and the suite's CPU
# in the test processes nearly doubles (docs/contributing.md#coverage).
PYTHON ?= $(shell for p in python3.12 python3.13 $$(pyenv root 2>/dev/null)/versions/3.1[23]*/bin/python3; do \
	"$$p" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && { echo "$$p"; exit; }; done; \
	echo python3)
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint docs check clean bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed-app: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e . --group dev
	touch $@ $(VENV)/.installed-app

## Run the demo shop for 20 seconds on a SQLite file, its executions shown live.
demo: $(VENV)/.installed-app
	$(BIN)/sqla-scheduler demo --duration 20

# Test processes: each pytest-xdist worker starts a PostgreSQL of its own. Four keep two
# cores busy while tests wait on databases and child processes (docs/contributing.md).
TEST_WORKERS ?= 4
# The coverage floor: the total the suite reached when the floor was set, rounded down,
# less a point: timing decides a few branches, and totals of 91.98-92.09% were seen.
COVERAGE_FLOOR ?= 91

## Run the whole test suite in parallel (starts its own PostgreSQL, MariaDB, PgBouncer),
## measuring coverage and failing under the floor: CI runs it once.
# PYTHONDONTWRITEBYTECODE emptied: with it set, every command and worker process the tests
# start compiles the package from source again (0.4 s of CPU each), and pytest rewrites
# every test module's asserts anew in each worker.
test: $(VENV)/.installed-dev
	PYTHONDONTWRITEBYTECODE= COVERAGE_CORE=$$($(BIN)/python -c 'import sys; print("sysmon" if sys.version_info >= (3, 12) else "ctrace")') \
		$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup \
		--cov --cov-report=term:skip-covered --cov-fail-under=$(COVERAGE_FLOOR)

## Lint, format check and strict type check.
lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict sqla_scheduler sqla_scheduler_pytest.py
	$(BIN)/mypy --strict tests/typing
	$(BIN)/mypy --explicit-package-bases --exclude 'tests/docs_fixtures/' tests
	$(BIN)/mypy --explicit-package-bases bench

## Build the documentation site into site/; any warning fails the build.
docs: $(VENV)/.installed-dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

check: test lint docs

## Measure throughput and latency against raw-SQL floors (starts its own PostgreSQL).
bench: $(VENV)/.installed-dev
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) site .pytest_cache .mypy_cache .ruff_cache .hypothesis
