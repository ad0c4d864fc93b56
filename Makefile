# The two commands a newcomer needs (see README.md):
#   make demo   set everything up and run the main job (the quickstart)
#   make test   set everything up and run the whole test suite (what CI runs)
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint lab setup clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)
	scripts/system-deps.sh graphviz

demo: setup
	$(PY) -m freshness_magic validate examples/quickstart.dot
	$(PY) -m freshness_magic run examples/quickstart.dot --workdir build/demo --auto-approve

lint: setup
	$(VENV)/bin/ruff check freshness_magic tests benchmarks
	$(VENV)/bin/mypy

test: setup
	scripts/system-deps.sh graphviz chromium xxhash
	$(MAKE) lint
	$(VENV)/bin/pytest -q

clean:
	rm -rf $(VENV) build .pytest_cache .mypy_cache .ruff_cache

lab: setup
	$(VENV)/bin/jupyter lab notebooks/
