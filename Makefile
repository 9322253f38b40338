# marin: `make run` and `make test` are the only two commands a new user needs.
SHELL := /bin/bash
PY := .venv/bin/python
UV := $(shell command -v uv 2>/dev/null || echo "python3 -m uv")

.PHONY: setup run test lint format bench browser-deps clean

setup: .venv/.marin-setup

.venv/.marin-setup: pyproject.toml uv.lock
	@command -v uv >/dev/null 2>&1 || python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install -q "uv==0.13.8"
	$(UV) sync --frozen
	@touch $@

browser-deps:
	@scripts/ensure_chromium.sh
	@scripts/ensure_graphviz.sh

# graphviz draws the browser's DAGs; without it (no root to install it) the browser falls back to its own layout
run: setup
	@scripts/ensure_graphviz.sh || echo "continuing without graphviz: marin browse draws DAGs with its own layout"
	$(PY) experiments/tutorial/tiny_lm.py

test: setup browser-deps
	$(PY) -m pytest -q -ra $(PYTEST_ARGS)

lint: setup
	.venv/bin/ruff check marin experiments tests benchmarks scripts
	.venv/bin/ruff format --check marin experiments tests benchmarks scripts
	.venv/bin/lint-imports

format: setup
	.venv/bin/ruff format marin experiments tests benchmarks scripts
	.venv/bin/ruff check --fix marin experiments tests benchmarks scripts

bench: setup
	benchmarks/executor_bench.sh
	PYTHONPATH=. $(PY) benchmarks/browser_bench.py
	PYTHONPATH=. $(PY) benchmarks/bucket_bench.py
	PYTHONPATH=. $(PY) benchmarks/data_bench.py
	PYTHONPATH=. $(PY) benchmarks/train_bench.py
	rm -rf /tmp/marin-ladder-bench && time $(PY) experiments/tutorial/tiny_ladder.py --prefix /tmp/marin-ladder-bench --backend local
	PYTHONPATH=. $(PY) benchmarks/gang_preemption.py

clean:
	rm -rf .venv local_store
