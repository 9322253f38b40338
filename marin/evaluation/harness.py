"""The harness step: downstream tasks of lm-eval-harness scored on one checkpoint of a train step.

Held-out loss says how well a model predicts text; downstream tasks say what it can do (choose the
right answer, complete a line). The step runs the pinned `lm-eval` package's own evaluator on marin's
adapter (`marin.evaluation.harness_lm.LevanterLM`), so task definitions, prompts and metrics are
exactly lm-eval's, and a task's score can be compared with any other run of the same task version.

Tasks are looked up in marin's shipped folder (`marin/evaluation/tasks/`: small Shakespeare tasks
whose data live beside their YAML files), in `task_paths`, and, with `include_default_tasks`, in lm-eval's
own registry (whose data come from the Hugging Face hub: docs/evaluation.md says how to use them where
the hub is reachable). The step runs offline unless `offline=False`: a task whose data would come from the
hub fails at once, naming the task, instead of trying the network.

Output, in the step's folder:
    metrics.json         per task: its metrics (and their stderr when bootstrap_iters > 0), its version,
                         the number of documents and shots; the checkpoint, its step, tokens and FLOPs
    samples/<task>.jsonl one line per document: the document, the requests' arguments, the model's
                         responses (log-likelihoods or generations) and the per-document metrics
    task_configs.json    each task's full lm-eval config, as run
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from dataclasses import dataclass

from marin.evaluation.tasks import SHIPPED
from marin.stepkit.config import StepConfig, input_field, output_field, unversioned, versioned_unless_default
from marin.storage import join, open_write, write_text

logger = logging.getLogger(__name__)

OFFLINE_ENV = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
"""Set while the step runs offline (and for anything it starts)."""


@dataclass(frozen=True, kw_only=True)
class HarnessConfig(StepConfig):
    """Run lm-eval-harness tasks on one checkpoint of a train step."""

    checkpoint: str = input_field("train output or checkpoint")
    """A train step's output (its latest complete checkpoint is used) or one `checkpoints/step-N` folder."""
    tasks: list[str]
    """lm-eval task, group or tag names (e.g. `marin_shakespeare`, `shakespeare_next_line`)."""
    output_path: str = output_field()
    """This step's folder: `metrics.json`, `samples/<task>.jsonl`, `task_configs.json`."""
    task_paths: list[str] = input_field("folder of lm-eval task YAML files", default_factory=list)
    """Further folders of task YAML files, searched after marin's shipped tasks."""
    include_default_tasks: bool = versioned_unless_default(False)
    """Also search lm-eval's own task registry (thousands of tasks; their data come from the hub)."""
    num_fewshot: int | None = versioned_unless_default(None)
    """Shots per document for every task; None: each task's own setting."""
    limit: int | None = versioned_unless_default(None)
    """Score at most this many documents per task (the first ones); None: all."""
    bootstrap_iters: int = versioned_unless_default(0)
    """Bootstrap resamples for each metric's standard error; 0: no stderr."""
    seed: int = versioned_unless_default(0)
    """Seed of the few-shot sampling."""
    batch_size: int = versioned_unless_default(16)
    """Rows of `seq_len` tokens per forward pass."""
    offline: bool = unversioned(True)
    """Refuse to reach the Hugging Face hub (tasks must have local data)."""

    def validate(self) -> None:
        if not self.tasks:
            raise ValueError("harness.tasks must name at least one lm-eval task")
        if self.batch_size <= 0:
            raise ValueError(f"harness.batch_size must be > 0, got {self.batch_size}")
        if self.limit is not None and self.limit <= 0:
            raise ValueError(f"harness.limit must be > 0 or None, got {self.limit}")
        if self.num_fewshot is not None and self.num_fewshot < 0:
            raise ValueError(f"harness.num_fewshot must be >= 0 or None, got {self.num_fewshot}")


@contextlib.contextmanager
def offline_hub(enabled: bool = True):
    """No Hugging Face hub access while inside: the environment variables for anything started from here,
    and the flags `huggingface_hub` and `datasets` read at import time, for this process."""
    if not enabled:
        yield
        return
    import datasets.config
    import huggingface_hub.constants

    saved_env = {k: os.environ.get(k) for k in OFFLINE_ENV}
    saved = (huggingface_hub.constants.HF_HUB_OFFLINE, datasets.config.HF_HUB_OFFLINE)
    os.environ.update(OFFLINE_ENV)
    huggingface_hub.constants.HF_HUB_OFFLINE = True
    datasets.config.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        huggingface_hub.constants.HF_HUB_OFFLINE, datasets.config.HF_HUB_OFFLINE = saved
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def load_tasks(names: list[str], task_paths: list[str], include_defaults: bool, offline: bool) -> dict:
    """lm-eval's task dict for `names` (shipped tasks first, then `task_paths`), data loaded."""
    from lm_eval.tasks import TaskManager, get_task_dict

    manager = TaskManager(include_path=[SHIPPED, *task_paths], include_defaults=include_defaults)
    unknown = [n for n in names if n not in manager.all_subtasks and n not in manager.all_groups + manager.all_tags]
    if unknown:
        raise ValueError(
            f"harness.tasks: {unknown} not found in {[SHIPPED, *task_paths]}"
            + ("" if include_defaults else " (lm-eval's own tasks need include_default_tasks=True)")
        )
    tasks = {}
    for name in names:
        try:
            tasks.update(get_task_dict([name], manager))
        except Exception as exc:
            if offline and _is_offline_error(exc):
                raise RuntimeError(
                    f"harness.tasks: {name!r} reads its data from the Hugging Face hub, and this step runs "
                    "offline (harness.offline=True): give the task local data, or run with offline=False "
                    "where the hub is reachable"
                ) from exc
            raise
    return tasks


def _is_offline_error(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        text = f"{type(seen).__name__}: {seen}"
        if "offline" in text.lower() or "LocalEntryNotFound" in text or "Couldn't reach" in text:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _leaf_tasks(task_dict: dict) -> dict:
    out = {}
    for value in task_dict.values():
        if isinstance(value, dict):
            out.update(_leaf_tasks(value))
        else:
            out[value.config.task] = value
    return out


def run_tasks(lm, task_dict: dict, config: HarnessConfig) -> dict:
    """lm-eval's `evaluate` on `lm` with the step's settings; returns its raw output (samples included)."""
    import random

    import numpy as np
    from lm_eval import evaluator

    for task in _leaf_tasks(task_dict).values():
        task.set_fewshot_seed(seed=config.seed)
        if config.num_fewshot is not None:
            task.set_config(key="num_fewshot", value=config.num_fewshot)
    random.seed(config.seed)
    np.random.seed(config.seed)
    return evaluator.evaluate(
        lm,
        task_dict,
        limit=config.limit,
        bootstrap_iters=config.bootstrap_iters,
        log_samples=True,
        verbosity="WARNING",
    )


def _plain(value):
    """JSON for lm-eval's outputs: functions by name (never their addresses), arrays and numbers as values."""
    import numpy as np

    if callable(value):
        return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', type(value).__name__)}"
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def _dumps(obj, **kwargs) -> str:
    return json.dumps(obj, default=_plain, sort_keys=True, ensure_ascii=False, **kwargs)


def summarize(raw: dict) -> dict:
    """Per task: metrics (lm-eval's `metric,filter` keys as `metric` when the filter is `none`), version,
    documents and shots; groups' aggregate metrics under `groups`."""

    def metrics(values: dict) -> dict:
        out = {}
        for key, value in values.items():
            if key in ("alias", "name", "sample_len") or not isinstance(value, int | float):
                continue
            metric, _, filt = key.partition(",")
            out[metric if filt in ("none", "") else f"{metric},{filt}"] = value
        return out

    tasks = {}
    for name, values in raw["results"].items():
        if name in raw.get("n-samples", {}):
            tasks[name] = {
                "metrics": metrics(values),
                "version": raw["versions"].get(name),
                "documents": raw["n-samples"][name]["effective"],
                "num_fewshot": raw.get("n-shot", {}).get(name),
                "higher_is_better": raw.get("higher_is_better", {}).get(name),
            }
    groups = {name: metrics(values) for name, values in raw.get("groups", {}).items()}
    return {"tasks": tasks, "groups": groups}


def _portable_configs(configs: dict) -> dict:
    """Task configs with a shipped task's YAML named relative to marin's task folder (not this machine's path)."""
    out = {}
    for name, task_config in configs.items():
        metadata = dict(task_config.get("metadata") or {})
        source = metadata.get("config_source")
        if isinstance(source, str) and source.startswith(SHIPPED + os.sep):
            metadata["config_source"] = "marin/evaluation/tasks/" + os.path.relpath(source, SHIPPED)
        out[name] = {**task_config, "metadata": metadata}
    return out


def write_outputs(out: str, summary: dict, raw: dict) -> None:
    write_text(join(out, "metrics.json"), _dumps(summary, indent=2) + "\n")
    write_text(join(out, "task_configs.json"), _dumps(_portable_configs(raw.get("configs", {})), indent=2) + "\n")
    for task, samples in sorted(raw.get("samples", {}).items()):
        with open_write(join(out, "samples", f"{task}.jsonl"), "w") as f:
            for sample in sorted(samples, key=lambda s: s["doc_id"]):
                f.write(_dumps(sample) + "\n")


def harness(config: HarnessConfig) -> dict:
    """Score the checkpoint on the tasks; write `metrics.json`, `samples/`, `task_configs.json`."""
    import lm_eval
    from levanter.compat.hf_checkpoints import load_tokenizer

    from marin.evaluation.evaluate import find_checkpoint
    from marin.storage.paths import portable_path
    from marin.training.checkpoints import checkpoint_step, train_output_of
    from marin.training.config import LlamaModelConfig
    from marin.training.model_io import device_mesh, levanter_llama, load_model, read_train_info

    with offline_hub(config.offline):
        task_dict = load_tasks(config.tasks, config.task_paths, config.include_default_tasks, config.offline)
        checkpoint = find_checkpoint(config.checkpoint, 0.0)
        train_output = train_output_of(checkpoint)
        info = read_train_info(train_output)
        step = checkpoint_step(checkpoint)
        model_config = LlamaModelConfig(**info["model"])
        logger.info("lm-eval %s on %s (step %d): %s", lm_eval.__version__, checkpoint, step, config.tasks)
        with device_mesh():
            from marin.evaluation.harness_lm import LevanterLM

            model = load_model(checkpoint, model_config, info["tokenizer"])
            lm = LevanterLM(
                model,
                levanter_llama(model_config, info["tokenizer"]),
                load_tokenizer(info["tokenizer"]),
                config.batch_size,
            )
            raw = run_tasks(lm, task_dict, config)
    tokens = (step + 1) * info["train_batch_size"] * model_config.seq_len
    summary = {
        "checkpoint": portable_path(checkpoint, config.output_path),
        "step": step,
        "train_output": portable_path(train_output, config.output_path),
        "parameter_count": info["parameter_count"],
        "tokens": tokens,
        "flops": 6 * info["parameter_count"] * tokens,
        "lm_eval_version": lm_eval.__version__,
        **summarize(raw),
    }
    write_outputs(config.output_path, summary, raw)
    for name, task in summary["tasks"].items():
        logger.info("%s (v%s, %d documents): %s", name, task["version"], task["documents"], task["metrics"])
    return summary
