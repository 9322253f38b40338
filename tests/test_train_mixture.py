"""A data mixture that changes within one run (Levanter's staged mixture weights), on real caches and a real run.

Two tokenized datasets (Shakespeare split in two, tests/training_fixtures.py). The mixture samples only
`plays_a` for the first steps and only `plays_b` from `start_step` on; which dataset a sequence came from is
read off by membership in each dataset's own (shuffled) sequence set.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from marin.training.config import TrainConfig
from marin.training.mixture import MixtureStage, block_size
from tests.training_fixtures import corpus, tiny_train_config

STEPS, SWITCH, BATCH = 12, 5, 8


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    return corpus(tmp_path_factory.getbasetemp() / "training" / "corpus")


def staged_config(output, data, **overrides) -> TrainConfig:
    return tiny_train_config(
        output if not isinstance(output, Path) else str(output),
        {"plays_a": str(data["plays_a"]), "plays_b": str(data["plays_b"])},
        mixture_stages=[
            MixtureStage(start_step=0, weights={"plays_a": 1.0}),
            MixtureStage(start_step=SWITCH, weights={"plays_b": 1.0}),
        ],
        num_train_steps=STEPS,
        train_batch_size=BATCH,
        **overrides,
    )


def sequences(dataset, start: int, stop: int) -> list[tuple]:
    import asyncio

    examples = asyncio.run(dataset.get_batch(list(range(start, stop))))
    return [tuple(int(t) for t in ex.tokens.array) for ex in examples]


def test_a_staged_mixture_samples_each_stage_from_its_own_datasets_and_is_a_function_of_the_index(data, tmp_path):
    import haliax as hax
    import jax
    from levanter.schedule import BatchSchedule

    from marin.training.train import levanter_data_config

    config = staged_config(tmp_path / "run", data)
    lev = levanter_data_config(config, str(data["tokenizer"]))
    assert lev.mixture_block_size == block_size(config.mixture_stages, BATCH) == 8
    pos = hax.Axis("position", config.model.seq_len)
    key = jax.random.PRNGKey(config.seed)
    mixed = lev.train_set(pos, BatchSchedule(BATCH), key=key)
    own = lev.train_sets(pos, key=jax.random.split(key)[1])
    a = set(sequences(own["plays_a"], 0, 200))
    b = set(sequences(own["plays_b"], 0, 200))
    boundary = SWITCH * BATCH
    first, second = sequences(mixed, 0, boundary), sequences(mixed, boundary, STEPS * BATCH)
    assert len(first) == boundary and len(second) == (STEPS - SWITCH) * BATCH
    assert all(s in a and s not in b for s in first)
    assert all(s in b and s not in a for s in second)
    # A run resumed mid-stage reads by index: a fresh dataset read from step 7 on gives what the first read did.
    again = levanter_data_config(config, str(data["tokenizer"])).train_set(pos, BatchSchedule(BATCH), key=key)
    assert sequences(again, 7 * BATCH, STEPS * BATCH) == second[(7 - SWITCH) * BATCH :]


def test_staged_mixture_config_errors_name_the_stage(data, tmp_path):
    with pytest.raises(ValueError, match=r"train.mixture_stages\[1\].start_step must be after"):
        tiny_train_config(
            str(tmp_path),
            {"plays_a": "a", "plays_b": "b"},
            mixture_stages=[
                MixtureStage(start_step=0, weights={"plays_a": 1}),
                MixtureStage(start_step=0, weights={"plays_b": 1}),
            ],
        ).validate()
    with pytest.raises(ValueError, match="train.weights and train.mixture_stages are both set"):
        tiny_train_config(
            str(tmp_path),
            {"plays_a": "a", "plays_b": "b"},
            weights={"plays_a": 1.0},
            mixture_stages=[MixtureStage(start_step=0, weights={"plays_a": 1})],
        ).validate()


def test_a_run_with_a_staged_mixture_trains_records_its_stages_and_shows_them(data, tmp_path):
    from starlette.testclient import TestClient

    from marin.browser.app import create_app
    from marin.execution import Executor, ExecutorStep, this_output_path
    from marin.tools.rebuild import rebuild_steps
    from marin.training.train import train

    config = staged_config(this_output_path(), data, wandb_mode="disabled", checkpoint_every_steps=6)
    step = ExecutorStep("train/staged", train, config)
    root = tmp_path / "lab"
    result = Executor(str(root), backend="local", experiment_name="staged").run([step])
    out = Path(result[step])
    info = json.loads((out / "train_info.json").read_text())
    assert info["mixture_stages"] == [
        {"start_step": 0, "weights": {"plays_a": 1.0, "plays_b": 0.0}},
        {"start_step": SWITCH, "weights": {"plays_a": 0.0, "plays_b": 1.0}},
    ]
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == list(range(STEPS))
    (rebuilt,) = rebuild_steps(json.loads(Path(result.record_path).read_text()), str(root))
    assert rebuilt.config.mixture_stages.value == config.mixture_stages  # a rerun gets MixtureStage objects back
    html = TestClient(create_app([str(root)])).get(f"/step/0/{out.relative_to(root)}").text
    table = html.split('data-kind="mixture"', 1)[1].split("</section>", 1)[0]
    assert "steps 0–4" in table and f"steps {SWITCH}–{STEPS - 1}" in table
    assert table.count("<tr>") == 3  # the header and one row per stage
