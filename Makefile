# Two entry points: `make demo` (the main job) and `make test`. Both set up .venv first.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.linkscope-installed

.PHONY: setup demo test bench-scripts clean

$(STAMP): pyproject.toml scripts/setup.sh
	bash scripts/setup.sh

setup: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/linkscope demo

# The linter and the type checker run first: a finding fails the tests like a failing test does.
# Tests run on one worker per core (at most 4): most of the slow ones wait on ranks that hang or die on purpose.
test: $(STAMP)
	$(PY) -m ruff check linkscope tests benchmarks
	$(PY) -m mypy
	$(PY) -m pytest -q -n auto --maxprocesses=4

clean:
	rm -rf $(VENV) build *.egg-info
