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
from marin.browser.html import fmt_duration
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
    assert "1 × cpu-core" in text
    assert f"{TRAIN['flops']:.3g} FLOPs (model), {TRAIN['flops_6nd']:.3g} FLOPs (6·N·D), over" in text, text


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
    assert f"total over 2 steps: {TRAIN['flops'] + EVAL['flops']:.3g} FLOPs (model)" in text, text
    words = text.replace(" ,", ",")
    assert f"device time estimated {fmt_duration(train_s + eval_s)}, measured {fmt_duration(measured)} (" in words
    assert "device-hours" not in text
    costs = html[html.index('class="data costs') :]
    rows = re.findall(r"<tr>.*?</tr>", costs[: costs.index("</table>")], re.S)
    assert len(rows) == 3  # the header and one row per step
    assert "2 cpu-core" in rows[2] and f"{0.5 * 2:.3g} s" in rows[2]


def test_plan_step_pages_and_leaderboard_label_the_two_flop_counts_alike(lab, tmp_path):
    """`FLOPs (model)` and `FLOPs (6·N·D)` mean one thing each wherever a count is shown: the plan's cost table,
    a step's cost section, the experiment's cost table, and the leaderboard (whose x axis is 6·N·D)."""
    from marin.browser.costs import MODEL_FLOPS, SIX_ND_FLOPS
    from marin.browser.results import X_AXES
    from marin.tools import plan_cost

    assert (plan_cost.MODEL_FLOPS, plan_cost.SIX_ND_FLOPS) == (MODEL_FLOPS, SIX_ND_FLOPS)
    prefix, paths = lab
    client = TestClient(create_app([prefix]))
    rel = paths["checkpoints/tiny"][len(prefix) + 1 :]
    step = _text(client.get(f"/step/0/{rel}").text)
    assert MODEL_FLOPS in step and SIX_ND_FLOPS in step
    listing = client.get("/").text
    href = re.search(r'href="(/exp/0/experiments/costed-[0-9a-f]{8}\.json)"', listing)[1]
    costs = client.get(href).text
    costs = costs[costs.index('class="data costs') :]
    headers = [_text(h).strip() for h in re.findall(r"<th[^>]*>(.*?)</th>", costs[: costs.index("</tr>")], re.S)]
    assert MODEL_FLOPS in headers and "FLOPs" not in headers, headers
    assert SIX_ND_FLOPS.removeprefix("FLOPs ") in X_AXES["flops"]
    evaluation = paths["evaluation/tiny"]
    with open(f"{evaluation}/results.json", "w") as f:
        f.write('{"macro_bpb": 2.0, "macro_loss": 3.0, "flops": 1e12, "tokens": 1e6, "parameter_count": 1e5}')
    board = client.get("/leaderboard").text
    head = board[board.index('class="data') :]
    headers = [_text(h).strip() for h in re.findall(r"<th[^>]*>(.*?)</th>", head[: head.index("</tr>")], re.S)]
    assert SIX_ND_FLOPS in headers and "FLOPs" not in headers, headers
