"""The train step: Levanter's `train_lm` on tokenized data, with everything inside the step's folder.

`train(config)` checks its inputs (the config, every dataset's cache, the tokenizer, the parent phase)
before anything heavy runs, then builds Levanter's `TrainLmConfig` and calls `levanter.main.train_lm.main`
itself, so marin trains exactly as Levanter does. What it adds is the layout of the output:

    <output>/checkpoints/step-<N>/   Levanter checkpoints (a run killed and rerun resumes from the latest)
    <output>/hf/step-<N>/            the final model as a Hugging Face checkpoint
    <output>/metrics.jsonl           step, loss, lr, tokens, throughput (see marin.training.metrics)
    <output>/wandb/                  the W&B run folder (offline unless the config says online), copied there
                                     at each checkpoint and at the end (see marin.training.wandb_sync)
    <output>/train_info.json         what was trained: model, data, parameter count, tokens, final checkpoint
    <output>/phase.json              for a phase started from a previous run: that run and its checkpoint
    <output>/cost.json               the estimate for this training beside the device-seconds it took
                                     (see marin.training.cost)

A phase (`initialize_from=<previous train output>`) starts from the previous run's final parameters, loaded
from its HF export, with a fresh optimizer, step counter and data order, so that its mixture, schedule and
length can all change. Levanter never starts a Ray cluster here, and no accelerator is required unless the
step's resources (`ResourceConfig(gpu=...)`, `tpu=...`) or the config ask for one: then the step fails
before reading any data when jax sees none (marin.training.accelerator).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import posixpath
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any

from marin.stepkit.context import running_step_resources
from marin.storage import exists, makedirs, open_read, write_text
from marin.training import distributed, forecast_watch, mixture
from marin.training.accelerator import check_accelerator
from marin.training.checkpoints import discard_checkpoints_after, discard_incomplete_checkpoints, list_checkpoints
from marin.training.config import TrainConfig
from marin.training.cost import CostSettings
from marin.training.levanter_process import live_checkpointers, prepare_levanter_process, wait_for_checkpointers
from marin.training.model_io import export_hf, levanter_llama
from marin.training.stop_on_request import checkpoint_and_stop_on_request
from marin.training.wandb_sync import WandbSync, live_wandb_dir

logger = logging.getLogger(__name__)

VOLATILE = ["metrics.jsonl", "wandb/", "checkpoints/*/metadata.json", "train_info.json", "phase.json", "cost.json"]
"""Output files whose bytes may differ between two identical runs: timings (the metrics, the measured cost),
the W&B run, checkpoint timestamps, and the two records that hold absolute paths. Parameters, optimizer state and the HF export
do not (`marin verify` compares those)."""

_ONE_TRAINING_PER_PROCESS = threading.Lock()
"""Levanter keeps global state (the tracker, logging, jax config): trainings in one process (the executor's
local backend runs steps in threads) take turns."""


def _read_json(path: str) -> dict:
    with open_read(path, "r") as f:
        return json.load(f)


def _write_json(path: str, obj: dict) -> None:
    """Published atomically (a reader never sees half a train_info.json)."""
    write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def tokenizer_of(tokenized_path: str) -> str:
    """The tokenizer folder a tokenize step's output names in its `tokenize_info.json`."""
    info_path = posixpath.join(tokenized_path, "tokenize_info.json")
    if not exists(info_path):
        raise FileNotFoundError(f"{info_path} is missing: pass the tokenizer folder explicitly (config.tokenizer)")
    info = _read_json(info_path)
    for key in ("tokenizer", "tokenizer_path"):
        if info.get(key):
            return _resolve_relative(info[key], tokenized_path)
    raise ValueError(f"{info_path} names no tokenizer (expected a 'tokenizer' field)")


def _resolve_relative(path: str, base: str) -> str:
    """A path written relative to `base` (the data steps write portable paths) made absolute."""
    if "://" in path or path.startswith("/"):
        return path
    protocol, _, rest = base.rpartition("://")
    joined = posixpath.normpath(posixpath.join(rest if protocol else os.path.abspath(base), path))
    return f"{protocol}://{joined}" if protocol else joined


def resolve_tokenizer(config: TrainConfig) -> str:
    return config.tokenizer or tokenizer_of(next(iter(config.data.values())))


def mixture_weights(config: TrainConfig) -> dict[str, float]:
    weights = config.weights or {name: 1.0 for name in config.data}
    total = sum(weights.values())
    return {name: weights.get(name, 0.0) / total for name in config.data}


def check_inputs(config: TrainConfig) -> dict:
    """Everything that can be wrong before compute: raises naming the field or path. Returns the parent."""
    weights = mixture_weights(config)
    sampled = mixture.active_datasets(config.mixture_stages, config.data) if config.mixture_stages else None
    for name, path in config.data.items():
        if (weights[name] > 0 if sampled is None else name in sampled) and not exists(
            posixpath.join(path, "train", "shard_ledger.json")
        ):
            raise FileNotFoundError(
                f"train.data[{name!r}]: {path}/train is not a finished tokenized cache (no shard_ledger.json)"
            )
    tokenizer = resolve_tokenizer(config)
    if not exists(posixpath.join(tokenizer, "tokenizer_config.json")):
        raise FileNotFoundError(f"train.tokenizer: {tokenizer} is not a tokenizer folder (no tokenizer_config.json)")
    if len(config.data) == 1:
        _check_enough_data(config)
    if config.initialize_from is None:
        return {}
    info_path = posixpath.join(config.initialize_from, "train_info.json")
    if not exists(info_path):
        raise FileNotFoundError(f"train.initialize_from: {info_path} is missing (is it a finished train step?)")
    parent = _read_json(info_path)
    if not parent.get("complete"):
        raise ValueError(f"train.initialize_from: {config.initialize_from} has not finished training")
    if not parent.get("hf_export"):
        raise ValueError(f"train.initialize_from: {config.initialize_from} has no HF export to start from")
    if parent["model"] != _model_dict(config, parent_model=parent["model"]):
        raise ValueError(
            f"train.model differs from the parent's model ({config.initialize_from}) in more than seq_len: "
            f"{parent['model']} vs {dataclasses.asdict(config.model)}"
        )
    return parent


def _check_enough_data(config: TrainConfig) -> None:
    from levanter.data.text import cached_token_count

    ((name, path),) = config.data.items()
    sequences = cached_token_count(posixpath.join(path, "train")) // config.model.seq_len
    needed = config.num_train_steps * config.train_batch_size
    passes = max(config.epochs, 1)
    if sequences * passes < needed:
        raise ValueError(
            f"train.data[{name!r}] holds {sequences} sequences of {config.model.seq_len} tokens, but "
            f"{config.num_train_steps} steps of {config.train_batch_size} need {needed}: "
            f"raise train.epochs to {-(-needed // max(sequences, 1))} or train fewer steps"
        )


def _model_dict(config: TrainConfig, parent_model: dict | None = None) -> dict:
    model = dataclasses.asdict(config.model)
    if parent_model is not None:
        model["seq_len"] = parent_model["seq_len"]
    return model


def levanter_data_config(config: TrainConfig, tokenizer: str):
    from levanter.data.text import LMMixtureDatasetConfig, UrlDatasetSourceConfig, UrlSingleDatasetLMConfig

    if len(config.data) == 1:
        (path,) = config.data.values()
        return UrlSingleDatasetLMConfig(cache_dir=path, tokenizer=tokenizer, shuffle=True, permutation_type="feistel")
    stages = config.mixture_stages
    return LMMixtureDatasetConfig(
        cache_dir=None,
        configs={name: UrlDatasetSourceConfig(cache_dir=path) for name, path in config.data.items()},
        train_weights=mixture.schedule(stages, config.data) if stages else mixture_weights(config),
        mixture_block_size=mixture.block_size(stages, config.train_batch_size)
        if stages
        else mixture.DEFAULT_BLOCK_SIZE,
        tokenizer=tokenizer,
        shuffle=True,
        permutation_type="feistel",
    )


def levanter_config(config: TrainConfig, tokenizer: str, parent: dict, run_id: str):
    """The `TrainLmConfig` marin runs; the benchmark runs the same object through `train_lm` directly."""
    import jmp
    from levanter.callbacks.watch import WatchConfig
    from levanter.checkpoint import CheckpointerConfig
    from levanter.distributed import RayConfig
    from levanter.main.train_lm import TrainLmConfig
    from levanter.optim import AdamConfig
    from levanter.tracker.wandb import WandbConfig

    from marin.training.mesh import checked_trainer_config
    from marin.training.metrics import MetricsJsonlConfig

    out = config.output_path
    o = config.optimizer
    trackers = [MetricsJsonlConfig(path=posixpath.join(out, "metrics.jsonl"), tokens_per_step=config.tokens_per_step)]
    if config.wandb_mode != "disabled":
        trackers.append(
            WandbConfig(
                project=config.wandb_project,
                entity=config.wandb_entity,
                id=run_id,
                name=run_id,
                mode=config.wandb_mode,
                resume="allow",
                save_code=False,
            )
        )
    policy = "f32" if config.precision == "f32" else "p=f32,c=bfloat16"
    trainer = checked_trainer_config(
        config,
        seed=config.seed,
        mp=jmp.get_policy(policy),
        id=run_id,
        tracker=tuple(trackers),
        log_dir=_local_log_dir(),
        log_jaxprs=False,
        log_xla_hlo=False,
        train_batch_size=config.train_batch_size,
        per_device_parallelism=config.per_device_parallelism,
        num_train_steps=config.num_train_steps,
        steps_per_eval=config.steps_per_eval or config.num_train_steps + 1,
        max_eval_batches=config.max_eval_batches,
        checkpointer=CheckpointerConfig(
            base_path=posixpath.join(out, "checkpoints"),
            save_interval=timedelta(minutes=config.checkpoint_every_minutes),
            keep=_keep_policy(config),
            append_run_id_to_base_path=False,
        ),
        ray=RayConfig(auto_start_cluster=False),
        distributed=distributed.levanter_distributed_config(),
        require_accelerator=config.require_accelerator,
        watch=WatchConfig(watch_targets=["grads", "params"], include_per_parameter_norms=False, interval=1),
    )
    optimizer = AdamConfig(
        learning_rate=o.learning_rate,
        weight_decay=o.weight_decay,
        beta1=o.beta1,
        beta2=o.beta2,
        epsilon=o.epsilon,
        max_grad_norm=o.max_grad_norm,
        warmup=o.warmup,
        lr_schedule=o.lr_schedule,
        min_lr_ratio=o.min_lr_ratio,
    )
    return TrainLmConfig(
        data=levanter_data_config(config, tokenizer),
        trainer=trainer,
        model=levanter_llama(config.model, tokenizer, parent["hf_export"] if parent else None),
        optimizer=optimizer,
        initialize_from_hf=parent["hf_export"] if parent else False,
        epoch=config.epochs if len(config.data) == 1 else 0,
    )


def _keep_policy(config: TrainConfig) -> list[dict]:
    """Keep every `checkpoint_every_steps`, and always the last step (Levanter's forced save at the end
    does not reach its checkpointer, so the last step gets a policy of its own)."""
    last = config.num_train_steps - 1
    return [dict(every=config.checkpoint_every_steps, until=last - 1), dict(every=last, until=None)]


def _local_log_dir():
    from pathlib import Path

    return Path(tempfile.gettempdir()) / "marin-levanter-logs"


def run_id_of(output_path: str) -> str:
    """A stable id for Levanter and W&B: the step folder's name (`<name>-<hash8>`), made id-safe."""
    from marin.storage.staging import published_path

    base = posixpath.basename(published_path(output_path).rstrip("/")) or "run"
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in base)[:120]


@contextlib.contextmanager
def _environment(overrides: dict[str, str]):
    saved = {k: os.environ.get(k) for k in overrides}
    os.environ.update(overrides)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def _root_logging_restored():
    """Levanter's `init_logging` swaps the root logger's handlers for a console and a file handler of its
    own (`basicConfig(force=True)`). Left in place, every later log line of the process is written twice
    into the step that logs it (once by the executor's step-log handler, once through Levanter's console
    handler, whose stream the executor routes to the same log), so the handlers are put back as found."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
            handler.close()
        for handler in handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(level)


def _stop_wandb(wandb_dir: str) -> None:
    """Stops W&B before the step returns, so that nothing writes into its output once it has.

    Finishing the run (Levanter does, at the end of `train_lm.main`) is not enough: W&B's service process
    lives as long as the process and keeps the run's debug-internal.log open; a second `wandb.init` Levanter
    makes leaves a log handler on the run's debug.log that W&B's exit hook appends to; the service writes
    debug-core.log (outside, in ~/.cache/wandb, linked from the run's folder) all its life; and W&B keeps
    the settings, WANDB_DIR included, of its first run, so the next training of the process would write
    its run into this output. `wandb.teardown()` stops the service and waits for it (it would also finish
    any other W&B run the process has open: trainings take turns, so none of theirs is); what is left is
    to close the leftover handlers. (`wandb_dir` is W&B's live folder, outside the step: see wandb_sync.)
    """
    import wandb

    try:
        wandb.teardown()
    except SystemExit as exc:  # W&B exits the caller when its service exited with an error
        logger.warning("W&B's service ended with exit code %s", exc.code)
    wandb_logger = logging.getLogger("wandb")
    for handler in list(wandb_logger.handlers):
        if isinstance(handler, logging.FileHandler) and _is_under(handler.baseFilename, wandb_dir):
            wandb_logger.removeHandler(handler)
            handler.close()


def _is_under(path: str, folder: str) -> bool:
    return os.path.realpath(path).startswith(os.path.realpath(folder) + os.sep)


DuringTraining = Callable[[TrainConfig, Any], AbstractContextManager[Any]]
"""What runs around Levanter's loop: given the config and the `TrainLmConfig` built from it, a context that
yields the `TrainLmConfig` to run (the same, or one with a hook added) and undoes whatever it set up on
exit. The in-training lm-eval scorer is one (`marin.evaluation.harness_hook.train_with_harness` passes it)."""


def train(config: TrainConfig, *, during_training: DuringTraining | None = None) -> None:
    """Train (or resume training) the model of `config`, writing into `config.output_path`.

    In a gang every host runs this; host 0 alone writes what is not written collectively (distributed.py).
    `during_training` wraps Levanter's loop (see `DuringTraining`); a config with `harness_tasks` needs one
    that scores them, so it fails here, before anything runs, without.
    """
    if config.harness_tasks and during_training is None:
        raise ValueError(
            f"train.harness_tasks {list(config.harness_tasks)} are scored by a hook this function is not given: "
            "run the step with fn=marin.evaluation.harness_hook.train_with_harness (default_train does)"
        )
    started = time.monotonic()
    cost_settings = CostSettings.from_env()  # a malformed MARIN_MFU fails here, not after the training
    distributed.initialize()  # before anything asks jax for its devices (the accelerator check does)
    primary = distributed.is_primary()
    check_accelerator(
        f"train step {run_id_of(config.output_path)}", running_step_resources(), config.require_accelerator
    )
    prepare_levanter_process()
    parent = check_inputs(config)
    watch = forecast_watch.watch_for(config, write=primary)  # the band is read (and checked) before training
    tokenizer = resolve_tokenizer(config)
    out = config.output_path
    makedirs(out)
    if parent and primary:
        _write_json(
            posixpath.join(out, "phase.json"),
            {
                "parent": config.initialize_from,
                "parent_checkpoint": parent["final_checkpoint"],
                "parent_hf_export": parent["hf_export"],
                "parent_step": parent["final_step"],
            },
        )
    if primary:
        _write_train_info(config, tokenizer, parent, None, None)
    from marin.storage import write_volatile_list

    if primary:
        write_volatile_list(out, VOLATILE)
    for incomplete in discard_incomplete_checkpoints(out) if primary else []:
        logger.warning("discarded the incomplete checkpoint %s left by an interrupted run", incomplete)
    from marin.training.metrics import last_logged_step

    logged = last_logged_step(posixpath.join(out, "metrics.jsonl")) if primary else None
    for ahead in discard_checkpoints_after(out, logged) if logged is not None else []:
        logger.warning("discarded the checkpoint %s: its step's metrics were never written (resuming earlier)", ahead)
    distributed.barrier("train-prepared")
    resumed = list_checkpoints(out)
    logger.info(
        "training %s: %d steps of %d tokens%s -> %s",
        run_id_of(out),
        config.num_train_steps,
        config.tokens_per_step,
        f", resuming from {resumed[-1][1]}" if resumed else "",
        out,
    )
    run_id = run_id_of(out)
    env = {"WANDB_SILENT": "true"}
    last = config.num_train_steps - 1
    if resumed and resumed[-1][0] >= last:
        logger.info("%s already holds the final checkpoint (step %d): not training again", out, resumed[-1][0])
    else:
        from levanter.main import train_lm

        if _ONE_TRAINING_PER_PROCESS.locked():
            logger.info("another training runs in this process: %s waits for it", run_id)
        wandb_sync = None
        if config.wandb_mode != "disabled":
            env["WANDB_DIR"] = live_wandb_dir()
            if primary:  # another host's W&B stays in its temporary folder
                wandb_sync = WandbSync(env["WANDB_DIR"], posixpath.join(out, "wandb"), out).start()
        with _ONE_TRAINING_PER_PROCESS, _environment(env), _root_logging_restored():
            try:
                lev_config = forecast_watch.watched(levanter_config(config, tokenizer, parent, run_id), watch)
                around = during_training(config, lev_config) if during_training else contextlib.nullcontext(lev_config)
                earlier = live_checkpointers()
                with around as run_config, checkpoint_and_stop_on_request(earlier):
                    train_lm.main(run_config)
                wait_for_checkpointers(exclude=earlier)
            finally:
                if config.wandb_mode != "disabled":
                    _stop_wandb(env["WANDB_DIR"])
                if wandb_sync is not None:
                    wandb_sync.close()
    final_checkpoint = _wait_for_checkpoint(out, last)
    hf_path = posixpath.join(out, "hf", f"step-{last}")
    export = config.hf_export and not exists(posixpath.join(hf_path, "config.json"))
    distributed.barrier("train-export")  # every host decided before any writes: a gang exports together
    if export:
        export_hf(final_checkpoint, config.model, tokenizer, hf_path)
    if not primary:
        return
    vocab_size = _write_train_info(config, tokenizer, parent, final_checkpoint, hf_path if config.hf_export else None)
    first = resumed[-1][0] + 1 if resumed else 0
    _write_cost(config, vocab_size, first, time.monotonic() - started, cost_settings)


def _write_cost(
    config: TrainConfig, vocab_size: int, first_step: int, wall_seconds: float, settings: CostSettings | None = None
) -> None:
    """`cost.json`: the estimate for the steps this attempt trained (from `first_step`) and what they took."""
    from marin.training.cost import cost_record, training_flops, write_cost_record

    steps_run = max(config.num_train_steps - first_step, 0)
    work = training_flops(config.model, vocab_size, steps_run * config.tokens_per_step)
    step_seconds = 0.0
    metrics = posixpath.join(config.output_path, "metrics.jsonl")
    if exists(metrics):
        with open_read(metrics, "r") as f:
            for line in f:
                row = json.loads(line) if line.strip() else {}
                if row.get("step", -1) >= first_step and isinstance(row.get("duration_s"), int | float):
                    step_seconds += row["duration_s"]
    record = cost_record(
        kind="train",
        work=work,
        resources=running_step_resources(),
        wall_seconds=wall_seconds,
        settings=settings,
        step_seconds=step_seconds or None,
        extra={"num_train_steps": config.num_train_steps, "first_step": first_step, "steps_run": steps_run},
    )
    write_cost_record(config.output_path, record)
    m = record["measured"]
    logger.info(
        "cost: %.3g FLOPs in %.1f s on %g %s (estimated %.1f s at MFU %.2f; realised MFU %.3g)",
        work["flops"],
        wall_seconds,
        m["devices"],
        record["estimate"]["device"],
        record["estimate"]["device_seconds"] / max(m["devices"], 1e-9),
        record["estimate"]["mfu"],
        m["realised_mfu"] or 0.0,
    )


def _wait_for_checkpoint(out: str, step: int, timeout_s: float = 120.0) -> str:
    """Levanter commits checkpoints asynchronously: wait for the final one's metadata.json."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = dict(list_checkpoints(out))
        if step in found:
            return found[step]
        if time.monotonic() > deadline:
            raise RuntimeError(f"training ended but {out}/checkpoints/step-{step} was never completed")
        time.sleep(0.2)


def _write_train_info(
    config: TrainConfig, tokenizer: str, parent: dict, final_checkpoint: str | None, hf_path: str | None
) -> int:
    """`train_info.json`: written when training starts (`complete: false`, so an evaluation of a running
    run knows the model) and again at the end with the final checkpoint and HF export. Returns the
    tokenizer's vocabulary size."""
    from levanter.compat.hf_checkpoints import load_tokenizer

    from marin.storage.staging import published_path

    out = config.output_path
    vocab_size = len(load_tokenizer(tokenizer))
    n_params = config.model.parameter_count(vocab_size)
    tokens = config.num_train_steps * config.tokens_per_step
    _write_json(
        posixpath.join(out, "train_info.json"),
        {
            "model": dataclasses.asdict(config.model),
            "data": dict(config.data),
            "weights": mixture_weights(config),
            "mixture_stages": [
                {"start_step": step, "weights": weights}
                for step, weights in mixture.schedule(config.mixture_stages, config.data)
            ]
            if config.mixture_stages
            else None,
            "tokenizer": tokenizer,
            "vocab_size": vocab_size,
            "parameter_count": n_params,
            "num_train_steps": config.num_train_steps,
            "train_batch_size": config.train_batch_size,
            "tokens": tokens,
            "flops": 6 * n_params * tokens,
            "complete": final_checkpoint is not None,
            "final_step": config.num_train_steps - 1,
            "final_checkpoint": published_path(final_checkpoint) if final_checkpoint else None,
            "hf_export": published_path(hf_path) if hf_path else None,
            "parent": config.initialize_from,
            "total_tokens_including_parents": tokens
            + (parent.get("total_tokens_including_parents", 0) if parent else 0),
            **_device_info(config, vocab_size),
        },
    )
    return vocab_size


def _device_info(config: TrainConfig, vocab_size: int) -> dict:
    """What the browser needs for MFU: the devices the run trains on, their peak bf16 FLOP/s when the table
    of marin.training.cost names them (None on a CPU, whose peak is not known), and the model FLOPs of one
    training token (3 forward passes, counted as cost.py counts them)."""
    import jax

    from marin.training.cost import peak_flops_of_device_kind, training_flops

    kind = jax.devices()[0].device_kind
    name, peak = peak_flops_of_device_kind(kind)
    return {
        "device_kind": kind,
        "device_count": jax.device_count(),
        "device_name": name,
        "device_peak_flops_per_s": peak,
        "model_flops_per_token": training_flops(config.model, vocab_size, 1)["flops_per_token"],
    }
