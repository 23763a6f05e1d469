# Every target creates .venv on first use (Python 3.11 or newer as $(PYTHON)) and installs
# the project into it, editable: with its development and documentation extras for every
# target but demo, which needs the package alone (its one run-time dependency, icontract).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEMO_STAMP := $(VENV)/.installed-demo-stamp

.PHONY: install services demo test lint typecheck pytest docs sync spec bench proofs mutate clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,docs]'
	touch $(STAMP)

install: $(STAMP)

# The package alone, unless the development install is already there (it includes it).
$(DEMO_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	test -f $(STAMP) || $(BIN)/python -m pip install --quiet --disable-pip-version-check -e .
	touch $(DEMO_STAMP)

## demo: on the embedded SQLite store, the tool runs once, the POST fails, the host
## restarts, and recovery delivers the stored result without running the tool again
demo: $(DEMO_STAMP)
	$(BIN)/python -m tool_execution_checkpoint demo

## test: ruff, mypy --strict, the whole pytest suite and the documentation site (PostgreSQL
## and Redis are installed from Debian's packages when missing, and the tests start their
## own servers on loopback)
test: services lint typecheck pytest docs

services:
	bash scripts/install-services.sh

lint: $(STAMP)
	$(BIN)/ruff check src tests examples benchmarks proofs tools
	$(BIN)/ruff format --check src tests examples benchmarks proofs tools
	$(BIN)/python tools/async_to_sync.py --check

typecheck: $(STAMP)
	$(BIN)/mypy --strict

pytest: $(STAMP)
	$(BIN)/pytest

## docs: the documentation site from docs/ (MkDocs, Material, mkdocstrings), built strict
## into site/: a broken link, anchor, include or API reference fails; nothing is fetched
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

## sync: regenerate the sync modules from the written asyncio ones (tools/async_to_sync.py)
sync: $(STAMP)
	$(BIN)/python tools/async_to_sync.py

## spec: regenerate docs/spec.md, docs/troubleshooting.md, spec/record.schema.json and the
## state diagram docs/assets/states.svg (redrawing it needs Graphviz's dot)
spec: $(STAMP)
	$(BIN)/python -m tool_execution_checkpoint.rendering --write

## proofs: the explorer (core contracts on) and CrossHair at the thorough bounds of docs/proofs.md
## (make test runs them at their fast bounds, in tests/test_proofs.py)
proofs: $(STAMP)
	TOOL_CHECKPOINT_CONTRACTS=1 $(BIN)/python proofs/explore.py --workers 2 --depth 14 \
		--json proofs/results-explore-2.json
	TOOL_CHECKPOINT_CONTRACTS=1 $(BIN)/python proofs/explore.py --workers 3 --depth 10 \
		--json proofs/results-explore-3.json
	TOOL_CHECKPOINT_CONTRACTS=1 $(BIN)/python proofs/explore.py --workers 2 --depth 12 --racing \
		--json proofs/results-explore-racing.json
	TOOL_CHECKPOINT_CONTRACTS=1 $(BIN)/python proofs/explore.py --hand-back --workers 2 --depth 14 \
		--json proofs/results-explore-hand-back-2.json
	TOOL_CHECKPOINT_CONTRACTS=1 $(BIN)/python proofs/explore.py --hand-back --workers 3 --depth 10 \
		--json proofs/results-explore-hand-back-3.json
	$(BIN)/python proofs/crosshair_check.py --timeout 60 --json proofs/results-crosshair.json
	$(BIN)/pytest -q -p no:cacheprovider --hypothesis-profile=crosshair tests/test_validation.py \
		-k "$(CROSSHAIR_BACKEND_TESTS)"

# The core's property tests that also run with Hypothesis's CrossHair backend.
CROSSHAIR_BACKEND_TESTS := any_json_value_is_kept_exactly or json_values_under_small_limits \
	or any_non_control_identifier or any_control_character or calendar_dates_are_checked \
	or binding_conflict_for_every_differing_field

## mutate: mutation testing of the core modules (mutmut; slow, not part of CI)
mutate: $(STAMP)
	$(BIN)/mutmut run --max-children 2
	$(BIN)/python proofs/mutation_report.py > proofs/results-mutmut.txt

## bench: every measured cost as a ratio to a baseline run in the same command, printed
## as one table and written to benchmarks/results.json (throwaway PostgreSQL and Redis
## servers on loopback; the peers from the bench extra). BENCH_FLAGS=--quick: a smoke run
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	$(BIN)/python benchmarks/run_all.py --json benchmarks/results.json $(BENCH_FLAGS)

clean:
	rm -rf $(VENV) build dist site .mypy_cache .pytest_cache .ruff_cache .hypothesis
