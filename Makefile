# Infilling studio: `make run` starts the app on the bundled models, `make test` runs the tests.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-slow e2e lint bench data demo clean

$(STAMP): requirements.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/python -m app

demo: $(STAMP)
	$(BIN)/python -m engine infill --sampler assd-pipelined "The old man walked to the [MASK:12] and looked at the sea."

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

e2e: $(STAMP)
	$(BIN)/python -m pytest -q -m e2e

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP)
	$(BIN)/python -m engine bench assd --samples 8

data: $(STAMP)
	$(BIN)/python -m engine data fetch all

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
