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
# the exact versions the suite last passed with, which every install here takes (pyproject.toml
# keeps the compatible ranges for those who pip install hubbub): `make lock` refreshes it,
# `make test-latest` tries the newest versions the ranges allow
CONSTRAINTS := requirements/constraints.txt
PIN := -c $(CONSTRAINTS)
LOCK = $(BIN)/uv pip compile pyproject.toml requirements/tools.in --extra test --universal \
  --python-version 3.11 --quiet
# the biggest file `make lint` lets into the tree
MAX_FILE_BYTES := 1048576

.PHONY: install test test-fast test-latest lint lock lock-check typecheck demo serve bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade $(PIN) pip

# pip shows what it installs, with a progress bar on a terminal (the first run takes a minute)
$(DEMO_STAMP): pyproject.toml $(CONSTRAINTS) | $(BIN)/python
	@echo "installing hubbub and its agents extra (the model providers, MCP) into $(VENV):"
	$(BIN)/pip install --progress-bar on $(PIN) -e '.[agents]'
	touch $(DEMO_STAMP)

$(STAMP): pyproject.toml $(CONSTRAINTS) | $(BIN)/python
	@echo "installing hubbub with every extra and the test tools into $(VENV):"
	$(BIN)/pip install --progress-bar on $(PIN) -e '.[test]' $(if $(PIN),uv)
	touch $(STAMP)

install: $(STAMP)

lock: | $(BIN)/python
	@# the newest versions within pyproject.toml's ranges into $(CONSTRAINTS): run it after
	@# changing a range or adding a dependency, or to take new releases; then `make test`
	@# and commit the file with the change
	$(BIN)/pip install --quiet $(if $(wildcard $(CONSTRAINTS)),$(PIN)) uv
	$(LOCK) --upgrade -o $(CONSTRAINTS)
	$(BIN)/pip install --quiet $(PIN) -e '.[test]' uv
	touch $(STAMP)

lock-check: $(STAMP)
	@# $(CONSTRAINTS) still resolves pyproject.toml as it is (no dependency added without
	@# `make lock`): compiled again with the file's own pins preferred, it must come out the same
	@cp $(CONSTRAINTS) $(VENV)/constraints.check
	@$(LOCK) -o $(VENV)/constraints.check || { echo "make lint: uv could not resolve" \
	  "pyproject.toml's dependencies (is the package index reachable?)" >&2; exit 1; }
	@grep -v '^#' $(CONSTRAINTS) > $(VENV)/constraints.want
	@grep -v '^#' $(VENV)/constraints.check > $(VENV)/constraints.got
	@diff -u $(VENV)/constraints.want $(VENV)/constraints.got >&2 || { echo "make lint:" \
	  "$(CONSTRAINTS) does not match pyproject.toml; run 'make lock' and commit it" >&2; exit 1; }

lint: $(STAMP) $(if $(PIN),lock-check)
	@# nothing over 1 MB in the tree, tracked or about to be (a wheel, a capture, a database)
	@big="$$(git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c '%s %n' \
	  2>/dev/null | awk -v max=$(MAX_FILE_BYTES) '$$1 > max {print $$2 " (" $$1 " bytes)"}')"; \
	if [ -n "$$big" ]; then echo "make lint: files over $(MAX_FILE_BYTES) bytes in the tree:" \
	  "$$big; git rm them and fetch them in the step that needs them" >&2; exit 1; fi
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

test-latest:
	@# the newest versions pyproject.toml's ranges allow, in a venv of their own (.venv-latest),
	@# then all of `make test` on it: a release that breaks hubbub shows here before a user
	@# installs it. Not in CI (what it found: docs/dependencies.md)
	@test -x .venv-latest/bin/python || $(PYTHON) -m venv .venv-latest
	.venv-latest/bin/pip install --quiet --upgrade pip
	.venv-latest/bin/pip install --quiet --upgrade --upgrade-strategy eager -e '.[test]'
	.venv-latest/bin/pip freeze --exclude-editable > .venv-latest/versions.txt
	touch .venv-latest/.installed-test
	@# what is newer than the lock (names as pip normalises them)
	@awk -F'==' 'function key(n) { n = tolower(n); gsub(/[_.]/, "-", n); return n } \
	  FNR == NR { if ($$0 ~ /^[A-Za-z0-9].*==/) { sub(/ *;.*/, "", $$2); locked[key($$1)] = $$2 }; next } \
	  { k = key($$1); if (locked[k] != $$2) { print "  newer than the lock: " $$1 " " \
	    (k in locked ? locked[k] : "(not locked)") " -> " $$2; n++ } } \
	  END { if (!n) print "  nothing newer than $(CONSTRAINTS)" }' $(CONSTRAINTS) .venv-latest/versions.txt
	HUBBUB_UNPINNED=1 $(MAKE) VENV=.venv-latest PIN= test

demo: $(DEMO_NEEDS)
	$(BIN)/hubbub demo

serve: $(DEMO_NEEDS)
	$(BIN)/hubbub serve

bench: $(STAMP)
	$(BIN)/python benchmarks/fanout.py

clean:
	rm -rf $(VENV) .venv-latest .hubbub .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
