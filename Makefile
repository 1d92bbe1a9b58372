# Attention, derived. `make book` and `make test` are the whole set-up. Each target first makes
# sure the Debian packages it needs are installed (tools/require-system-packages: as root it
# installs the missing ones with apt-get; otherwise it prints the sudo command and stops before
# doing anything else), then sets up .venv from requirements.txt on first use (and again
# whenever requirements.txt or pyproject.toml changes).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
RUFF   := $(VENV)/bin/ruff
A      ?=
ARGS   ?=

# The Debian packages each target needs, listed here and nowhere else (a test extends a list
# on the command line, e.g. make book BOOK_PACKAGES="fonts-wqy-microhei some-absent-package").
# book: a CJK font, for the Chinese text of chapters 4 and 6 (their pages and figures).
BOOK_PACKAGES  = fonts-wqy-microhei
# grade and bench: bubblewrap, the sandbox that students' code runs in.
GRADE_PACKAGES = bubblewrap
# test: the book's and the grader's, plus Chromium for the browser tests.
TEST_PACKAGES  = $(BOOK_PACKAGES) chromium $(GRADE_PACKAGES)
# Every target that creates .venv: Debian ships its Python's venv module (ensurepip) apart.
# Asked only while .venv does not exist, and only if $(PYTHON) cannot import ensurepip.
VENV_PACKAGES  = $(if $(wildcard $(PY)),,$(shell $(PYTHON) -c 'import ensurepip' 2>/dev/null || echo python3-venv))
REQUIRE        = bash tools/require-system-packages

# One job at a time, prerequisites left to right, even under make -j: the system check runs
# first, then (for test) lint, then the rest.
.NOTPARALLEL:
.PHONY: venv book release grade test lint bench models clean system-packages \
        require-book require-test require-grade require-bench

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@$(REQUIRE) "make $(or $(MAKECMDGOALS),venv)" $(VENV_PACKAGES)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

require-book:  ; @$(REQUIRE) "make book" $(VENV_PACKAGES) $(BOOK_PACKAGES)
require-test:  ; @$(REQUIRE) "make test" $(VENV_PACKAGES) $(TEST_PACKAGES)
require-grade:
	@test -n "$(A)" || { echo "usage: make grade A=<assignment id>, e.g. A=ch1_pooling"; exit 2; }
	@$(REQUIRE) "make grade" $(VENV_PACKAGES) $(GRADE_PACKAGES)
require-bench: ; @$(REQUIRE) "make bench" $(VENV_PACKAGES) $(GRADE_PACKAGES)

## release: nbgrader generate_assignment for every chapter, plus their public-case data
release: $(STAMP)
	$(PY) -m autograder.course.release

## book: release the assignments, then build both editions: _build/html and _build/html/zh (offline, -W)
book: require-book release
	$(PY) tools/build_book.py

## models: retrain the models the pages read from their recipes (solutions/shipped.py) into
## solutions/weights/, with their sha256 in the manifest; make book then checks every claim
models: $(STAMP)
	$(PY) tools/train_models.py

## grade: grade every submission of one assignment, e.g. make grade A=ch5_multihead; the
## grader's options in ARGS, e.g. make grade A=ch5_multihead ARGS="--force --workers 4"
grade: require-grade $(STAMP)
	$(PY) -m autograder grade $(A) $(ARGS)

## lint: ruff check and ruff format --check over the whole tree; fails on any finding
lint: $(STAMP)
	@status=0; \
	$(RUFF) check --output-format concise . || status=1; \
	$(RUFF) format --check --output-format concise . || status=1; \
	if [ $$status -ne 0 ]; then \
	  echo "make lint failed. To fix it, run from the repository root:"; \
	  echo "    $(RUFF) check --fix .    # ruff's safe fixes (imports, f-strings, ...)"; \
	  echo "    $(RUFF) format .         # the formatting"; \
	  echo "then fix by hand what '$(RUFF) check .' still reports (it shows each finding in context)."; \
	fi; \
	exit $$status

## test: lint first, then the book (the browser tests read _build/html), then the whole suite
test: require-test lint book
	$(PY) -m pytest

## bench: the attention, grading and recording benchmarks, each printing ratios measured in
## one run, then the seed scan (an honest solution scores full marks on every seed tried)
bench: require-bench $(STAMP)
	$(PY) bench/attention.py
	$(PY) bench/grading.py
	$(PY) bench/recording.py
	$(PY) bench/seed_scan.py --seeds 200

## system-packages: print the Debian packages make test needs (.ci/run reads the list here)
system-packages:
	@echo $(TEST_PACKAGES)

clean:
	rm -rf _build autograder/release autograder/exchange autograder/autograded autograder/feedback autograder/gradebook.db
