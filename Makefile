# Attention, derived: every target sets up .venv from requirements.txt on first use
# (and again whenever requirements.txt or pyproject.toml changes).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
A      ?=

.PHONY: venv book release grade test bench clean

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

## release: nbgrader generate_assignment for all five chapters, plus their public-case data
release: $(STAMP)
	$(PY) -m autograder.release

## book: release the assignments, then build the site into _build/html (offline, -W)
book: release
	$(VENV)/bin/jupyter-book build . --warningiserror --keep-going --nitpick

## grade: grade every submission of one assignment, e.g. make grade A=ch5_multihead
grade: $(STAMP)
	@test -n "$(A)" || { echo "usage: make grade A=<assignment id>, e.g. A=ch1_pooling"; exit 2; }
	$(PY) -m autograder grade $(A)

## test: the whole suite (builds the site first: the browser tests read _build/html)
test: book
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) bench/attention.py
	$(PY) bench/grading.py

clean:
	rm -rf _build autograder/release autograder/autograded autograder/feedback autograder/gradebook.db
