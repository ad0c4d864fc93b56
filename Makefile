# The two commands a newcomer needs (see README.md):
#   make demo   set everything up and run the main job (the quickstart)
#   make test   set everything up and run the whole test suite (what CI runs)
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# The extras `make test` needs; a branch that adds an extra appends it here (comma-separated).
INSTALL_EXTRAS := test,browser,dev,docs
# pytest workers for `make test` (pytest-xdist; tests/conftest.py says what shares a worker).
# Two: a third (the browser tests' worker mostly waits) was faster once, but the extra load made
# a kernel-interrupt test miss its deadline.
TEST_WORKERS ?= 2

.PHONY: demo test lint docs lab pictures setup clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	@# Through uv when pip can install it (a third of pip's time or less), else through pip alone.
	$(PY) scripts/venv-install.py -e '.[$(INSTALL_EXTRAS)]'
	touch $(STAMP)

setup: $(STAMP)
	scripts/system-deps.sh graphviz

demo: setup
	$(PY) -m freshness_magic.notebook.demo

lint: setup
	$(VENV)/bin/ruff check freshness_magic tests benchmarks
	$(VENV)/bin/ruff format --check freshness_magic tests benchmarks
	$(VENV)/bin/mypy

docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir build/site

test: setup
	scripts/system-deps.sh graphviz xxhash
	scripts/system-deps.sh chromium || { [ "$${CI:-}" != true ] \
	  && echo "chromium could not be installed: the browser tests will be skipped"; }
	@# No `make docs` here: tests/test_docs.py builds the same site with --strict and checks it.
	@# `make lint` runs beside pytest, niced: it uses CPU the browser tests leave idle while they
	@# wait. Its output is kept in build/lint.log and shown after the tests' only if it fails.
	@# The hundreds of interpreters the tests start reuse the bytecode the first one writes (and
	@# pytest its rewritten test modules), even where the environment says not to write it.
	@mkdir -p build; echo "make lint runs beside the tests (build/lint.log)"; \
	nice -n 10 $(MAKE) -s lint > build/lint.log 2>&1 & lint=$$!; \
	env -u PYTHONDONTWRITEBYTECODE $(VENV)/bin/pytest -q -n $(TEST_WORKERS) --dist loadgroup \
	  tests notebooks --nbval --nbval-sanitize-with notebooks/sanitize.cfg; tests=$$?; \
	if ! wait $$lint; then cat build/lint.log; echo "make lint failed (output above)"; exit 1; fi; \
	exit $$tests

pictures: setup
	scripts/system-deps.sh graphviz chromium
	FM_UPDATE_PICTURES=1 $(VENV)/bin/pytest -q tests/browser/test_docs_pictures.py \
	  tests/browser/test_view.py::test_the_legend_draws_stale_and_outdated_as_the_nodes_are

clean:
	rm -rf $(VENV) build .pytest_cache .mypy_cache .ruff_cache

lab: setup
	$(VENV)/bin/jupyter lab notebooks/
