PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# what is installed in the venv: the demo's extras, or everything with the test tools
DEMO_STAMP := $(VENV)/.installed-demo
STAMP := $(VENV)/.installed-test
# a venv with the test extras runs the demo too: `make demo` after `make test` installs nothing
DEMO_NEEDS := $(if $(wildcard $(STAMP)),$(STAMP),$(DEMO_STAMP))
# where `make test-fast` keeps the tests' files: memory (tmpfs) when the machine has it
FAST_TMP := $(if $(wildcard /dev/shm/.),/dev/shm,$(or $(TMPDIR),/tmp))

.PHONY: install test test-fast lint typecheck demo serve bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[agents]'
	touch $(DEMO_STAMP)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	@# the layering contracts of .importlinter: no cycles, dependencies point down (docs/architecture.md)
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

test: $(STAMP) lint typecheck
	@# the browser tests drive Debian's chromium, the cluster tests a real redis-server (they
	@# fail, never skip, without them): installed here when missing
	@missing="$$(for p in chromium redis-server; do command -v $$p >/dev/null || echo $$p; done)"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then (export DEBIAN_FRONTEND=noninteractive; apt-get update && apt-get install -y $$missing); \
	  else echo "make test: Debian's package(s) $$missing missing and this is not root;" \
	    "install them with 'sudo apt-get install -y $$missing' (tests/dashboard, tests/cluster need them)" >&2; fi; fi
	$(BIN)/pytest -q

test-fast: $(STAMP)
	@# every test but those marked slow (they start processes, drive Chromium or a redis-server,
	@# or fuzz), and the property tests at a tenth of their examples (hypothesis profile
	@# `fast`, tests/conftest.py), on every core (pytest-xdist): the quick lane while working;
	@# `make test` runs everything. Bytecode is cached (__pycache__, git-ignored) even where
	@# PYTHONDONTWRITEBYTECODE is set: each worker otherwise recompiles every module and
	@# re-rewrites every test module's asserts (a quarter of the lane's CPU here).
	@# The tests' files (each gateway's SQLite file, fsynced as it starts and stops) go to
	@# tmpfs where there is one, kept only for failed tests
	PYTHONDONTWRITEBYTECODE= TMPDIR=$(FAST_TMP) HYPOTHESIS_PROFILE=fast \
	  $(BIN)/pytest -q -m "not slow" -n auto -o tmp_path_retention_policy=failed

demo: $(DEMO_NEEDS)
	$(BIN)/hubbub demo

serve: $(DEMO_NEEDS)
	$(BIN)/hubbub serve

bench: $(STAMP)
	$(BIN)/python benchmarks/fanout.py

clean:
	rm -rf $(VENV) .hubbub .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
