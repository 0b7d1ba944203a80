# Two entry points for a fresh clone: `make demo` (the main job) and `make test`.
# Both create .venv and install cardloop with its dev tools from the package index first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test lint bench bytecode

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(MAKE) --no-print-directory bytecode
	touch $(STAMP)

# The editable install's own modules, compiled ahead: with PYTHONDONTWRITEBYTECODE set (as on CI
# machines and in many containers) Python would compile them again in every process, about 0.4 s
# of every CLI command's start. A stale file is only recompiled in memory, never wrong.
bytecode:
	$(BIN)/python -m compileall -q -j 0 cardloop prompts activities workflows > /dev/null

demo: setup
	$(BIN)/cardloop demo

lint: setup
	$(BIN)/ruff check .

# Three worker processes on two cores, each test file on one of them (module fixtures start once):
# the stack tests spend most of their time waiting on Temporal, subprocesses and timers (with two
# workers a full run kept 1.4 of the 2 cores busy). `pytest` alone still runs serially.
# Files go out heaviest first (tests/conftest.py), not by their number of tests.
test: lint bytecode
	$(BIN)/pytest -n 3 --dist loadfile --no-loadscope-reorder --durations=15

bench: setup
	$(BIN)/python bench/assemble.py
	$(BIN)/python bench/assemble_memory.py
	$(BIN)/python bench/redaction.py
	-$(BIN)/python bench/caching.py
