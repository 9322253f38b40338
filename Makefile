# marin: `make run` and `make test` are the only two commands a new user needs.
SHELL := /bin/bash
PY := .venv/bin/python
UV := $(shell command -v uv 2>/dev/null || echo "python3 -m uv")

.PHONY: setup run test test-fast test-slow lint format bench browser-deps clean

# Bytecode is written at set-up (the installed packages) and before each run (this tree's own modules, only
# those changed): where PYTHONDONTWRITEBYTECODE is set, every process would otherwise compile jax, levanter
# and ray from source (importing them took 21 s here instead of 9 s; docs/testing.md).
setup: .venv/.marin-setup
	@$(PY) -m compileall -q -j 0 marin experiments tests benchmarks scripts >/dev/null

.venv/.marin-setup: pyproject.toml uv.lock
	@command -v uv >/dev/null 2>&1 || python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install -q "uv==0.13.8"
	$(UV) sync --frozen --compile-bytecode
	@touch $@

CHROMIUM := scripts/ensure_apt_package.sh chromium chromium "the browser tests"
GRAPHVIZ := scripts/ensure_apt_package.sh graphviz dot "the browser's graph layouts"

browser-deps:
	@$(CHROMIUM)
	@$(GRAPHVIZ)

# graphviz draws the browser's DAGs; without it (no root to install it) the browser falls back to its own layout
run: setup
	@$(GRAPHVIZ) || echo "continuing without graphviz: marin browse draws DAGs with its own layout"
	$(PY) experiments/tutorial/tiny_lm.py

test: setup browser-deps
	$(PY) -m pytest -q -ra -n 2 --dist loadfile --no-loadscope-reorder -m "not slow" --durations=25 $(PYTEST_ARGS)

# Tests too long for `make test` (tests marked slow; docs/testing.md names them).
test-slow: setup browser-deps
	$(PY) -m pytest -q -ra -m slow $(PYTEST_ARGS)

lint: setup
	.venv/bin/ruff check marin experiments tests benchmarks scripts
	.venv/bin/ruff format --check marin experiments tests benchmarks scripts
	.venv/bin/lint-imports

format: setup
	.venv/bin/ruff format marin experiments tests benchmarks scripts
	.venv/bin/ruff check --fix marin experiments tests benchmarks scripts

bench: setup
	benchmarks/executor_bench.sh
	if [ -n "$$MARIN_VENV" ]; then benchmarks/executor_vs_marin.sh 1; fi
	PYTHONPATH=. $(PY) benchmarks/browser_bench.py
	PYTHONPATH=. $(PY) benchmarks/bucket_bench.py
	PYTHONPATH=. $(PY) benchmarks/data_bench.py
	PYTHONPATH=. $(PY) benchmarks/tokenize_memory.py --workdir /tmp/marin-data-bench --shards 2,6 --layout one-shard
	PYTHONPATH=. $(PY) benchmarks/train_bench.py
	rm -rf /tmp/marin-ladder-bench && time $(PY) experiments/tutorial/tiny_ladder.py --prefix /tmp/marin-ladder-bench --backend local
	PYTHONPATH=. $(PY) benchmarks/gang_preemption.py

clean:
	rm -rf .venv local_store

# The edit loop's tier: every test that neither trains a model, starts a Ray cluster (the `ray` marker,
# set by tests/conftest.py) nor runs a ladder or the tutorial, and not the storage layer's race and fault
# tests; on 2 pytest-xdist workers, a file to a worker (docs/testing.md). `make test` runs them all.
FAST_IGNORE := $(addprefix --ignore=tests/,test_storage_buckets.py test_gang.py test_isoflop_ladder.py test_tiny_ladder.py \
	test_readme_commands.py test_mesh_layouts.py test_executor_buckets.py test_tutorial.py \
	test_tutorial_summary.py test_executor_train_resume.py test_cluster.py test_rerun_chain.py \
	test_train.py test_train_settled.py test_train_mixture.py test_train_logging.py test_eval.py \
	test_eval_log.py test_reuse_tutorial.py test_browser_train_page_trained.py test_executor_interrupt.py test_executor_leases.py \
	test_backend_auto.py test_shard_resume.py test_browser_research.py test_quality_experiment.py \
	test_levanter_process.py test_clean_exit.py test_plan_cost.py test_executor_run.py \
	test_isoflop.py test_harness.py test_checkpoints.py test_train_accelerator.py test_wandb_sync.py \
	test_adoption_by_copy.py test_executor_concurrency.py test_marin_executor_port.py \
	test_step_provenance.py test_verify_bytes.py test_step_cost.py test_leftovers_after_kill9.py \
	test_your_own_data.py test_ladder_broken_runs.py test_executor_fencing.py test_umask.py test_rerun_verify.py \
	test_tokenizer.py)

test-fast: setup browser-deps
	$(PY) -m pytest -q -x -n 2 --dist loadfile --no-loadscope-reorder -m "not slow and not ray" $(FAST_IGNORE) $(PYTEST_ARGS)
