"""lm-eval-harness tasks scored during training, every N steps, into the run's `metrics.jsonl`.

Levanter's `train_lm.main` has one place for a harness in its loop: with `TrainLmConfig.eval_harness` set,
it adds the hook that `levanter.eval_harness.lm_eval_harness(...)` builds, every `eval_harness_steps`
steps (and once more at the end of training). That hook runs Levanter's own adapter, which scores
marin's BOS/EOS-adding tokenizers wrongly (docs/evaluation.md), so while a marin training with
`harness_tasks` runs, the function Levanter looks up is replaced by one building marin's hook: the same
`LevanterLM` and lm-eval evaluator as the harness step, on the model as the trainer evaluates it (cast to
the compute precision), offline. The replacement is scoped to the training (put back on exit); trainings
in one process take turns (`train._ONE_TRAINING_PER_PROCESS`), so no other training sees it.

Training does not import this module: `train_with_harness(config)` is the step function of a training that
scores tasks, and hands `harness_during_training` to `marin.training.train.train` as its `during_training`
callback, so the dependency runs one way only (evaluation on training).

Each metric is logged as `harness/<task>/<metric>` at the trainer's step; `metrics.jsonl` keeps them on
that step's line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging

from marin.training.config import TrainConfig
from marin.training.train import train

logger = logging.getLogger(__name__)


def _hook_factory(lev_model_config, tasks: list[str], limit: int | None, batch_size: int):
    """A stand-in for `levanter.eval_harness.lm_eval_harness` with its signature, building marin's hook."""

    def build(spec, tokenizer, EvalBatch, axis_resources, mp):  # noqa: N803 (Levanter's argument names)
        import haliax as hax
        import levanter.tracker

        from marin.evaluation.harness import HarnessConfig, load_tasks, offline_hub, run_tasks, summarize
        from marin.evaluation.harness_lm import LevanterLM

        settings = HarnessConfig(checkpoint="in-training", tasks=tasks, output_path="in-training", limit=limit)

        def hook(info, force: bool = False):
            if info.step == 0 and not force:
                return
            model = info.eval_model
            if mp is not None:
                model = mp.cast_to_compute(model)
            # the trainer runs hooks under its parameter mapping (embed -> data); the model's activations need
            # the compute mapping Levanter hands its harness hook (batch -> replica, data)
            with offline_hub(), hax.axis_mapping(axis_resources):
                task_dict = load_tasks(tasks, [], False, True)
                raw = run_tasks(LevanterLM(model, lev_model_config, tokenizer, batch_size), task_dict, settings)
            scores = {
                f"harness/{task}/{metric}": value
                for task, values in summarize(raw)["tasks"].items()
                for metric, value in values["metrics"].items()
            }
            logger.info("lm-eval at step %d: %s", info.step, scores)
            levanter.tracker.log(scores, step=info.step)

        return hook

    return build


@contextlib.contextmanager
def harness_during_training(config, lev_config):
    """Yields the `TrainLmConfig` to run: `lev_config` itself, or (with `config.harness_tasks`) one whose
    harness hook, every `config.harness_every_steps`, is marin's."""
    if not config.harness_tasks:
        yield lev_config
        return
    import levanter.eval_harness
    from levanter.eval_harness import LmEvalHarnessConfig

    spec = LmEvalHarnessConfig(task_spec=list(config.harness_tasks), max_examples=config.harness_limit)
    run = dataclasses.replace(lev_config, eval_harness=spec, eval_harness_steps=config.harness_every_steps)
    original = levanter.eval_harness.lm_eval_harness
    levanter.eval_harness.lm_eval_harness = _hook_factory(
        lev_config.model, list(config.harness_tasks), config.harness_limit, 16
    )
    try:
        yield run
    finally:
        levanter.eval_harness.lm_eval_harness = original


def train_with_harness(config: TrainConfig) -> None:
    """The train step, with `config.harness_tasks` scored every `config.harness_every_steps` steps."""
    train(config, during_training=harness_during_training)
