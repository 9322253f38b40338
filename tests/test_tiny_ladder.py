"""experiments/tutorial/tiny_ladder.py end to end with its smallest rungs, on both backends and on buckets.

The local backend trains the rungs in threads of one process (they take turns) while the executor hashes
each finished rung's folder: W&B's live folder once made that race fail a rung (a link rewritten under
the manifest), and the forecast then DEP_FAILED. The Ray backend runs each step in a worker. One run
is on the S3 emulator and one on the GCS emulator, so train (its metrics.jsonl and W&B copy), evaluate
and the forecast are each exercised on both buckets.
"""

from __future__ import annotations

import json
import math

import pytest

from marin.execution import Executor
from marin.storage import join, list_dir, read_text

SMALL = {"sizes": (8, 12, 16), "tokens_per_param": 0.5, "plays": ("hamlet", "macbeth", "othello")}
"""Three rungs of 4, 7 and 10 steps: the fewest that the forecast's fit accepts."""


@pytest.mark.parametrize(("backend", "store"), [("local", "s3"), ("ray", "gcs")])
def test_tiny_ladder_trains_evaluates_and_forecasts_every_rung(backend, store, bucket_prefix, request):
    from experiments.tutorial.tiny_ladder import build

    if backend == "ray":
        request.getfixturevalue("ray_cluster")
    prefix = bucket_prefix(store)
    ladder = build(**SMALL)
    paths = Executor(prefix, backend=backend, experiment_name="tiny_ladder").run([ladder.forecast])

    assert set(paths.statuses().values()) == {"SUCCESS"}, paths.statuses()
    forecast = json.loads(read_text(join(paths[ladder.forecast], "forecast.json")))
    assert math.isfinite(forecast["prediction"]["loss"]) and len(forecast["rungs"]) == 3
    for trained in ladder.trains:
        out = paths[trained]
        lines = [json.loads(line) for line in read_text(join(out, "metrics.jsonl")).splitlines()]
        assert [line["step"] for line in lines] == list(range(trained.config.num_train_steps))
        assert all(math.isfinite(line["loss"]) for line in lines)
        wandb_runs = list_dir(join(out, "wandb", "wandb"))
        assert any("offline-run-" in name for name in wandb_runs), wandb_runs
        assert json.loads(read_text(join(out, "train_info.json")))["complete"]
