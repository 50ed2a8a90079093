# Infilling studio: `make run` starts the app on the bundled models, `make test` runs the tests.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-slow e2e lint bench data demo clean models models-gpu mutation domains gpu-campaign gpu-campaign-pack gpu-loan gpu-loan-back gpu-campaign-rehearse ptp-head

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

# Browser tests: Playwright's Python driver with Debian's Chromium (never `playwright install`).
e2e: $(STAMP)
	$(BIN)/python -m pip install -q playwright==1.65.2
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium) \
	  || (echo "e2e: Debian's chromium could not be installed" >&2; exit 1)
	$(BIN)/python -m pytest -q -m e2e

# Mutation testing (mutmut, requirements-dev.txt; slow, so not part of `make test`): each module of
# tests/mutation/run.py against its own fast tests, in a scratch copy (.mutation/). MODULES="engine/samplers/acceptance.py"
# runs one. Prints killed / total and the survivors per module; last line: unexplained survivors: N of M mutants.
MODULES ?=
mutation: $(STAMP)
	$(BIN)/python -m pip install -q -r requirements-dev.txt
	nice $(BIN)/python tests/mutation/run.py $(MODULES)

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP)
	$(BIN)/python -m engine bench assd --samples 8

data: $(STAMP)
	$(BIN)/python -m engine data fetch all
	$(BIN)/python -m engine data tokenize all

# The domain registry (engine/inputs/domains.py): each domain's [MASK] length, tokenizer, quality measure and models.
domains: $(STAMP)
	$(BIN)/python -m engine domains

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mutation

# A CPU-only recipe (one thread each; minutes cap the wall time): the smaller checkpoints bundled
# before 2026-11-23. The bundled ones now come from `make models-gpu` (see each model card).
# Needs `make data` first. Each run saves a complete checkpoint every few minutes.
# WARNING: it writes into assets/models/ and so replaces the bundled GPU-trained checkpoints.
TRAIN := $(BIN)/python -m engine train --threads 1 --save-minutes 8
BIG := --hidden 256 --layers 4 --heads 4 --ffn 768 --seq-len 256 --batch 8
SMALL := --hidden 192 --layers 3 --heads 4 --ffn 576 --seq-len 256 --batch 8
models: $(STAMP)
	$(TRAIN) --kind asarm  --domain text    --out assets/models/text-asarm     $(BIG) --minutes 50
	$(TRAIN) --kind hybrid --domain text    --out assets/models/text-hybrid    $(BIG) --minutes 40
	$(TRAIN) --kind judge  --domain text    --out assets/models/text-judge     $(SMALL) --minutes 8
	$(TRAIN) --kind asarm  --domain code    --out assets/models/code-asarm     $(BIG) --minutes 22
	$(TRAIN) --kind hybrid --domain code    --out assets/models/code-hybrid    $(BIG) --minutes 22
	$(TRAIN) --kind judge  --domain code    --out assets/models/code-judge     $(SMALL) --minutes 7
	$(TRAIN) --kind asarm  --domain protein --out assets/models/protein-asarm  $(BIG) --minutes 22
	$(TRAIN) --kind hybrid --domain protein --out assets/models/protein-hybrid $(BIG) --minutes 22
	$(TRAIN) --kind judge  --domain protein --out assets/models/protein-judge  $(SMALL) --minutes 5

# The nine at once on one GPU, GPU_MINUTES of wall time each (bf16 autocast + TF32; each run's cosine
# horizon follows from its measured step rate). Writes runs/models-gpu/<name>; adopt after `engine eval`.
GPU_MINUTES ?= 15
models-gpu: $(STAMP)
	MINUTES=$(GPU_MINUTES) PY=$(BIN)/python lab/train_all_gpu.sh

# The lent-GPU campaign (docs/TRAINING.md): the speed table, then ONE text AS-ARM sized on the GPU, in one
# command of at most 9.5 minutes, every result written to $OUT at once (CAMPAIGN_ARGS="--plan full": all domains). No venv and no pip (the GPU
# machine has no network): that machine's own python3 holds torch, transformers and accelerate.
CAMPAIGN_PY ?= python3
CAMPAIGN_ARGS ?=
gpu-campaign:
	$(CAMPAIGN_PY) -m lab.campaign run --out "$${OUT:-runs/campaign-out}" $(CAMPAIGN_ARGS)

# The moment a GPU is lent, on a clean clone (docs/TRAINING.md, "A loan in three commands"): fetch and
# tokenize the text corpus only, pack it beside the bundled text AS-ARM and PTP head, leave the bundled
# models out of the tree that travels (sparse checkout), check it all fits, print the device call.
# PLAN=ptp: the loan trains a PTP head alone against its bundled AS-ARM (better drafts); DOMAIN=code: the code head.
PLAN ?= text
DOMAIN ?= text
gpu-loan: $(STAMP)
	$(BIN)/python -m engine data fetch $(DOMAIN)
	$(BIN)/python -m engine data tokenize $(DOMAIN)
	$(BIN)/python -m lab.campaign pack --out data/travel --plan $(PLAN) --ptp-domain $(DOMAIN)
	git sparse-checkout set --no-cone '/*' '!/assets/models/' '!/docs/img/' '!/docs/figures/'
	$(BIN)/python -m lab.campaign check --travel data/travel
	$(BIN)/python -m lab.campaign loan-command --plan $(PLAN) --ptp-domain $(DOMAIN)

# After the loan: FILES=<the call's files_at>. The whole tree back, the returned models unpacked.
FILES ?=
gpu-loan-back: $(STAMP)
	git sparse-checkout disable
	$(BIN)/python -m lab.campaign unpack-returned $(FILES)/*.tar.xz* --dest runs/campaign-returned

# The loan's predicted timeline from costs measured here at its real shapes (one JSON line).
gpu-campaign-rehearse: $(STAMP)
	$(BIN)/python -m lab.campaign rehearse --travel data/travel

# After a loan, on the CPU: a one-pass PTP head for the returned text AS-ARM (40 minutes on 2 cores).
TEACHER ?= runs/campaign-returned/text-asarm
ptp-head: $(STAMP)
	$(BIN)/python -m lab.campaign ptp-head --teacher $(TEACHER)

# Before the loan, here: pack what travels (bundled models and token shards, ranked, within 64 MiB
# with the code tree) into data/travel/, the folder the `run` call carries.
gpu-campaign-pack: $(STAMP)
	$(BIN)/python -m lab.campaign pack --out data/travel
