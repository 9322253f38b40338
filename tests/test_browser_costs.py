"""The browser shows what a run was estimated to cost beside what it took: on the step page and, added up, on
the experiment page.

The experiment is run by the real executor; its two steps write their `cost.json` with the step library's
own writer (`marin.training.cost.cost_record`) for a known model and known wall-clock seconds, so that every
figure on the pages can be checked (the real train and evaluate steps' records: tests/test_step_cost.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from starlette.testclient import TestClient

from marin.browser.app import create_app
from marin.execution import THIS_OUTPUT_PATH, Executor, ExecutorStep, versioned
from marin.training.config import LlamaModelConfig
from marin.training.cost import cost_record, evaluation_flops, training_flops, write_cost_record

MODEL = LlamaModelConfig(seq_len=64, hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=2, num_kv_heads=2)
TRAIN = training_flops(MODEL, 512, 20480)
EVAL = evaluation_flops(MODEL, 512, 4096)


@dataclass(frozen=True)
class CostedConfig:
    wall_seconds: float
    """The wall-clock seconds the step reports."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's folder."""


def train_costed(config: CostedConfig) -> None:
    record = cost_record(kind="train", work=TRAIN, resources={"cpu": 1}, wall_seconds=config.wall_seconds)
    write_cost_record(config.output_path, record)


def evaluate_costed(config: CostedConfig) -> None:
    record = cost_record(kind="evaluate", work=EVAL, resources={"cpu": 2}, wall_seconds=config.wall_seconds)
    write_cost_record(config.output_path, record)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    prefix = str(tmp_path_factory.mktemp("cost-lab"))
    train = ExecutorStep(name="checkpoints/tiny", fn=train_costed, config=CostedConfig(wall_seconds=versioned(3.0)))
    evaluate = ExecutorStep(
        name="evaluation/tiny", fn=evaluate_costed, config=CostedConfig(wall_seconds=versioned(0.5))
    )
    paths = Executor(prefix, backend="local", experiment_name="costed").run([train, evaluate])
    return prefix, {step.name: path for step, path in paths.items()}


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_the_step_page_sets_the_estimate_beside_the_measurement(lab):
    prefix, paths = lab
    rel = paths["checkpoints/tiny"][len(prefix) + 1 :]
    html = TestClient(create_app([prefix])).get(f"/step/0/{rel}").text
    section = html[html.index('data-kind="cost.json"') :]
    text = _text(section[: section.index("</section>")])
    estimated = TRAIN["flops"] / (5e10 * 0.4)
    assert f"device-seconds {estimated:.3g} s 3 s" in text, text
    assert f"measured / estimated ×{3.0 / estimated:.3g} (slower than estimated)" in text
    assert f"MFU 0.4 {TRAIN['flops'] / 3.0 / 5e10:.3g}" in text
    assert "1 × cpu-core" in text and f"{TRAIN['flops']:.3g} FLOPs" in text


def test_the_experiment_page_adds_up_estimate_and_measurement_over_its_steps(lab):
    prefix, _ = lab
    client = TestClient(create_app([prefix]))
    listing = client.get("/").text
    href = re.search(r'href="(/exp/0/experiments/costed-[0-9a-f]{8}\.json)"', listing)[1]
    html = client.get(href).text
    assert "<h2>Cost" in html
    train_s = TRAIN["flops"] / (5e10 * 0.4)
    eval_s = EVAL["flops"] / (2 * 5e10 * 0.4) * 2  # 2 cores: device-seconds are the work over one core's rate
    measured = 3.0 * 1 + 0.5 * 2
    text = _text(html[html.index("<h2>Cost") :])
    assert f"total over 2 steps: {TRAIN['flops'] + EVAL['flops']:.3g} FLOPs" in text, text
    assert (
        f"estimated {(train_s + eval_s) / 3600:.3g} device-hours, measured {measured / 3600:.3g} device-hours" in text
    )
    costs = html[html.index('class="data costs') :]
    rows = re.findall(r"<tr>.*?</tr>", costs[: costs.index("</table>")], re.S)
    assert len(rows) == 3  # the header and one row per step
    assert "2 cpu-core" in rows[2] and f"{0.5 * 2:.3g} s" in rows[2]
