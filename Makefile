PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint typecheck demo serve bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

test: $(STAMP) lint typecheck
	$(BIN)/pytest -q

demo: $(STAMP)
	$(BIN)/hubbub demo

serve: $(STAMP)
	$(BIN)/hubbub serve

bench: $(STAMP)
	$(BIN)/python benchmarks/fanout.py

clean:
	rm -rf $(VENV) .hubbub .pytest_cache .mypy_cache .ruff_cache
