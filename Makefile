# Two commands do everything on a fresh machine: `make run` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
PYTHON ?= python3

.PHONY: run test lint types unit bench demo clean chromium screenshots

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q -e '.[test]'
	touch $@ $(VENV)/.installed

## run: create the virtualenv, install, start the service on the embedded defaults
run: $(VENV)/.installed
	$(VENV)/bin/approvalbot serve

## demo: a simulated agent against the running service (start it first with `make run`)
demo: $(VENV)/.installed
	$(VENV)/bin/approvalbot demo

# Browser tests drive Debian's Chromium through playwright (never a browser download).
chromium:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)

## test: install what tests need, then lint, types and the whole suite
test: $(VENV)/.installed-test chromium lint types unit

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check approvalbot bot adapters store tests bench examples
	$(VENV)/bin/ruff format --check approvalbot bot adapters store tests bench examples

types: $(VENV)/.installed-test
	$(VENV)/bin/mypy

# pytest exits 5 when it collects nothing; that is not a failure of the project. Two workers
# (pytest-xdist), a test file each at a time: many tests wait on servers, browsers and clocks,
# so two cores finish the suite in about half the time of one process. Bytecode (pytest's
# rewritten tests too) is kept outside the tree, also where PYTHONDONTWRITEBYTECODE is set:
# compiling every module afresh in each worker and subprocess cost about a tenth of the run.
PYCACHE ?= $(or $(TMPDIR),/tmp)/approvalbot-pycache
unit: $(VENV)/.installed-test
	env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=$(PYCACHE) $(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder; rc=$$?; if [ $$rc -eq 5 ]; then exit 0; else exit $$rc; fi

## screenshots: the docs' images (docs/img/*.png), from a service with the demo's run, in Chromium
# (the only thing that writes them: tests never write into the working tree)
screenshots: $(VENV)/.installed-test chromium
	$(PY) bench/screenshots.py

bench: $(VENV)/.installed-test
	$(PIP) install -q -e '.[bench]'
	$(PY) bench/rules_bench.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
