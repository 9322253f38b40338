"""Configs of the train step: the model, the optimizer and the run, as frozen dataclasses.

They hold plain values only (no Levanter objects), so that an experiment can hash them and a record can
rebuild them, and they are checked when built: a model whose heads do not divide its width fails here,
naming the field, before any tokenizer is read or any array is allocated. `marin.training.train` turns
them into Levanter's `TrainLmConfig` at run time.

Example: `TrainConfig(data={"shakespeare": "/lab/tokenized/tiny-1a2b3c4d"}, output_path=...,
model=LlamaModelConfig(hidden_dim=64, num_heads=4), train_batch_size=16, num_train_steps=200)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from marin.stepkit.config import StepConfig, input_field, output_field, unversioned, versioned_unless_default
from marin.training.mixture import MixtureStage, check_stages

_LR_SCHEDULES = ("constant", "cosine", "linear", "inv_sqrt")
_PRECISIONS = ("f32", "bf16")
_WANDB_MODES = ("offline", "online", "disabled")
LLAMA_AXES = ("embed", "mlp", "heads", "kv_head", "q_heads_per_group", "head_size", "vocab", "layer")
"""The named axes of a Levanter Llama's parameters: what `MeshConfig` may shard."""


def _positive(owner: str, **values: int | float) -> None:
    for name, value in values.items():
        if value <= 0:
            raise ValueError(f"{owner}.{name} must be > 0, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class LlamaModelConfig(StepConfig):
    """A Llama-family decoder (Levanter's `LlamaConfig`), sized by the fields below."""

    seq_len: int = 128
    """Tokens per training example (context length)."""
    hidden_dim: int = 64
    """Width of the residual stream."""
    intermediate_dim: int = 128
    """Width of the SwiGLU MLP."""
    num_layers: int = 2
    """Number of transformer blocks."""
    num_heads: int = 4
    """Attention heads; must divide `hidden_dim`."""
    num_kv_heads: int = 4
    """Key/value heads (grouped-query attention); must divide `num_heads`."""
    tie_word_embeddings: bool = False
    """Share the input embedding with the output head."""
    rope_theta: float = 10000.0
    """Base of the rotary position embedding."""

    def validate(self) -> None:
        _positive(
            "model",
            seq_len=self.seq_len,
            hidden_dim=self.hidden_dim,
            intermediate_dim=self.intermediate_dim,
            num_layers=self.num_layers,
            num_heads=self.num_heads,
            num_kv_heads=self.num_kv_heads,
            rope_theta=self.rope_theta,
        )
        if self.hidden_dim % self.num_heads:
            raise ValueError(
                f"model.num_heads={self.num_heads} does not divide model.hidden_dim={self.hidden_dim}: "
                "choose num_heads so that hidden_dim / num_heads is a whole head size"
            )
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"model.num_kv_heads={self.num_kv_heads} does not divide model.num_heads={self.num_heads}")
        if (self.hidden_dim // self.num_heads) % 2:
            raise ValueError(
                f"model head size hidden_dim/num_heads = {self.hidden_dim // self.num_heads} is odd; "
                "rotary embeddings need an even head size (change model.num_heads or model.hidden_dim)"
            )

    @property
    def head_dim(self) -> int:
        return self.hidden_dim // self.num_heads

    def axis_sizes(self) -> dict[str, int]:
        """The sizes of the model's named axes (all but `vocab`, known once the tokenizer is)."""
        return {
            "embed": self.hidden_dim,
            "mlp": self.intermediate_dim,
            "heads": self.num_heads,
            "kv_head": self.num_kv_heads,
            "q_heads_per_group": self.num_heads // self.num_kv_heads,
            "head_size": self.head_dim,
            "layer": self.num_layers,
        }

    def parameter_count(self, vocab_size: int) -> int:
        """Trainable parameters with a vocabulary of `vocab_size` (equals Levanter's count)."""
        h, m, hd = self.hidden_dim, self.intermediate_dim, self.head_dim
        attention = h * self.num_heads * hd * 2 + h * self.num_kv_heads * hd * 2
        block = attention + 3 * h * m + 2 * h
        embeddings = vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return self.num_layers * block + h + embeddings


@dataclass(frozen=True, kw_only=True)
class OptimizerConfig(StepConfig):
    """AdamW with a warmup, then a decay to `min_lr_ratio` of the peak (Levanter's `AdamConfig`)."""

    learning_rate: float = 3e-3
    """Peak learning rate."""
    weight_decay: float = 0.1
    """Decoupled weight decay (not applied to norms and embeddings)."""
    beta1: float = 0.9
    """Adam first-moment decay."""
    beta2: float = 0.95
    """Adam second-moment decay."""
    epsilon: float = 1e-8
    """Adam epsilon."""
    max_grad_norm: float | None = 1.0
    """Clip the global gradient norm to this; None disables clipping."""
    warmup: float = 0.1
    """Warmup length: a fraction of the steps if < 1, else a number of steps."""
    lr_schedule: str = "cosine"
    """Decay after warmup: one of constant, cosine, linear, inv_sqrt."""
    min_lr_ratio: float = 0.1
    """Final learning rate as a fraction of the peak."""

    def validate(self) -> None:
        _positive("optimizer", learning_rate=self.learning_rate)
        if self.lr_schedule not in _LR_SCHEDULES:
            raise ValueError(f"optimizer.lr_schedule must be one of {_LR_SCHEDULES}, got {self.lr_schedule!r}")
        if self.warmup < 0:
            raise ValueError(f"optimizer.warmup must be >= 0, got {self.warmup!r}")
        if not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"optimizer.min_lr_ratio must be in [0, 1], got {self.min_lr_ratio!r}")


@dataclass(frozen=True, kw_only=True)
class MeshConfig(StepConfig):
    """How a run lays its arrays over the step's devices: Levanter's mesh of replica × data × model axes.

    The `data` axis is whatever the other two leave (devices / (replica_axis_size × model_axis_size)).
    The batch is split over replica × data; parameters and optimizer state are sharded over `data` along
    `fsdp_axes` (FSDP) and over `model` along `tensor_parallel_axes`. The default is pure FSDP over all
    devices of the step. A layout is not versioned: it changes how a run computes, not what it computes
    (results agree within the tolerance of docs/training.md), so a run may resume on another layout.
    """

    model_axis_size: int = 1
    """Devices per tensor-parallel group (the mesh's `model` axis); must divide the devices."""
    tensor_parallel_axes: tuple[str, ...] | None = None
    """Model axes split over the `model` axis; None: ("mlp", "heads", "kv_head") when model_axis_size > 1."""
    replica_axis_size: int = 1
    """Data-parallel replicas within a slice: each holds the parameters sharded over its own `data` devices."""
    replica_slices: int = 1
    """Slices (TPU multislice, over DCN) that replicate each other; the other slices extend the `data` axis."""
    fsdp_axes: tuple[str, ...] = ("embed",)
    """Model axes whose parameters and optimizer state are sharded over `data` (FSDP); (): replicated
    (plain data parallelism)."""

    def validate(self) -> None:
        _positive(
            "mesh",
            model_axis_size=self.model_axis_size,
            replica_axis_size=self.replica_axis_size,
            replica_slices=self.replica_slices,
        )
        for name in ("tensor_parallel_axes", "fsdp_axes"):
            unknown = sorted(set(getattr(self, name) or ()) - set(LLAMA_AXES))
            if unknown:
                raise ValueError(f"mesh.{name} names {unknown}, which are not axes of the model {LLAMA_AXES}")
        both = sorted(set(self.tp_axes) & set(self.fsdp_axes))
        if both:
            raise ValueError(
                f"mesh.tensor_parallel_axes and mesh.fsdp_axes both name {both}: an axis is split over one of them"
            )

    @property
    def tp_axes(self) -> tuple[str, ...]:
        """The tensor-parallel axes in effect (the default ones when `tensor_parallel_axes` is None)."""
        if self.tensor_parallel_axes is not None:
            return tuple(self.tensor_parallel_axes)
        return ("mlp", "heads", "kv_head") if self.model_axis_size > 1 else ()


@dataclass(frozen=True, kw_only=True)
class TrainConfig(StepConfig):
    """One training run (or one phase of a multi-phase run) of a Llama model on tokenized data."""

    data: dict[str, str] = input_field("tokenized dataset", holds_any=("train", "validation"))
    """Tokenized datasets by name: each value is a tokenize step's output (holding `train/`, `validation/`)."""
    output_path: str = output_field()
    """This step's folder: `checkpoints/`, `hf/`, `metrics.jsonl`, `wandb/`, `train_info.json`, `phase.json`."""
    weights: dict[str, float] | None = versioned_unless_default(None)
    """Mixture weights by dataset name (normalised); None means one dataset, or equal weights."""
    mixture_stages: list[MixtureStage] | None = versioned_unless_default(None)
    """A mixture that changes within the run: stages of weights, each from its `start_step` (the first at 0);
    replaces `weights`. None: the fixed mixture of `weights`."""
    tokenizer: str | None = input_field(
        "tokenizer folder", holds_any=("tokenizer.json", "tokenizer_config.json"), default=None
    )
    """Tokenizer folder; None reads it from the first dataset's `tokenize_info.json`."""
    model: LlamaModelConfig = field(default_factory=LlamaModelConfig)
    """The model."""
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    """The optimizer and learning-rate schedule."""
    train_batch_size: int = 16
    """Sequences per optimizer step (tokens per step = train_batch_size * model.seq_len)."""
    num_train_steps: int = 100
    """Optimizer steps of this run (of this phase, for a phase)."""
    seed: int = 0
    """Seed of the model initialisation, the data order and the mixture."""
    epochs: int = versioned_unless_default(0)
    """One dataset: 0 allows a single pass (too little data is an error before training); k > 0 allows up to
    k passes. A mixture restarts exhausted datasets and ignores this."""
    initialize_from: str | None = input_field("train output", default=None)
    """A previous train step's output: start from its final parameters with a fresh optimizer and schedule."""
    checkpoint_every_steps: int = versioned_unless_default(1000)
    """Keep a checkpoint every this many steps (the final step is always kept)."""
    checkpoint_every_minutes: float = unversioned(10.0)
    """Also write a temporary checkpoint (replaced by the next one) after this many minutes."""
    steps_per_eval: int = versioned_unless_default(0)
    """Evaluate on the validation splits every this many steps (logged to metrics.jsonl); 0: never."""
    max_eval_batches: int | None = versioned_unless_default(8)
    """Batches per validation set at each in-training evaluation; None: the whole set."""
    per_device_parallelism: int = versioned_unless_default(-1)
    """Sequences per device per forward pass (gradient accumulation when smaller); -1: the whole batch."""
    mesh: MeshConfig = unversioned(default_factory=MeshConfig)
    """The device layout (FSDP, tensor parallelism, replicas); default: FSDP over all devices of the step."""
    precision: str = versioned_unless_default("f32")
    """f32, or bf16 (parameters in f32, compute in bfloat16)."""
    hf_export: bool = versioned_unless_default(True)
    """Write the final model as a Hugging Face checkpoint under `hf/step-<N>/`."""
    harness_tasks: list[str] = versioned_unless_default(default_factory=list)
    """lm-eval tasks scored every `harness_every_steps` during training, into metrics.jsonl; empty: none."""
    harness_every_steps: int = versioned_unless_default(0)
    """Steps between in-training lm-eval scores (and once at the end)."""
    harness_limit: int | None = versioned_unless_default(None)
    """Documents per task at each in-training score; None: all."""
    watch_forecast: str | None = input_field(
        "forecast output", holds_any=("forecast.json",), default=None, unless_default=True
    )
    """A forecast step's output whose predicted curve (`prediction.curve`) this run is watched against while it
    trains (marin.training.forecast_watch); None: not watched."""
    stop_off_forecast: bool = versioned_unless_default(False)
    """Stop the run (the step fails, naming the compute saved) once it has left the forecast's band for
    `forecast_patience` comparisons in a row; False: flag it and train on."""
    forecast_patience: int = versioned_unless_default(3)
    """Comparisons in a row outside the band that flag the run."""
    forecast_check_every: int = versioned_unless_default(0)
    """Steps between comparisons with the band (each of the mean training loss since the last); 0: every 5 %
    of the run."""
    wandb_mode: str = unversioned("offline")
    """offline (run folder under `wandb/` in the output), online (needs credentials) or disabled."""
    wandb_project: str = unversioned("marin")
    """W&B project."""
    wandb_entity: str | None = unversioned(None)
    """W&B entity (user or team); None: the default of the credentials."""
    require_accelerator: bool = unversioned(False)
    """Fail instead of training on the CPU when no GPU/TPU is visible."""

    def validate(self) -> None:
        if not self.data:
            raise ValueError("train.data must name at least one tokenized dataset")
        _positive(
            "train",
            train_batch_size=self.train_batch_size,
            num_train_steps=self.num_train_steps,
            checkpoint_every_steps=self.checkpoint_every_steps,
            checkpoint_every_minutes=self.checkpoint_every_minutes,
        )
        if self.num_train_steps < 2:
            raise ValueError(
                f"train.num_train_steps must be >= 2, got {self.num_train_steps} (Levanter never checkpoints step 0)"
            )
        if self.epochs < 0:
            raise ValueError(f"train.epochs must be >= 0, got {self.epochs}")
        if self.steps_per_eval < 0:
            raise ValueError(f"train.steps_per_eval must be >= 0, got {self.steps_per_eval}")
        if self.weights is not None:
            unknown = sorted(set(self.weights) - set(self.data))
            if unknown:
                raise ValueError(f"train.weights names {unknown}, which are not in train.data {sorted(self.data)}")
            if any(w < 0 for w in self.weights.values()) or sum(self.weights.values()) <= 0:
                raise ValueError(f"train.weights must be >= 0 with a positive sum, got {self.weights}")
        if self.mixture_stages is not None:
            check_stages(self.mixture_stages, self.data, self.num_train_steps, self.weights)
        if self.precision not in _PRECISIONS:
            raise ValueError(f"train.precision must be one of {_PRECISIONS}, got {self.precision!r}")
        if self.wandb_mode not in _WANDB_MODES:
            raise ValueError(f"train.wandb_mode must be one of {_WANDB_MODES}, got {self.wandb_mode!r}")
        if self.harness_tasks and self.harness_every_steps <= 0:
            raise ValueError(
                f"train.harness_every_steps must be > 0 with harness_tasks, got {self.harness_every_steps}"
            )
        if self.stop_off_forecast and self.watch_forecast is None:
            raise ValueError(
                "train.stop_off_forecast needs train.watch_forecast (the forecast to watch the run against)"
            )
        if self.forecast_patience < 1 or self.forecast_check_every < 0:
            raise ValueError(
                f"train.forecast_patience must be >= 1 and train.forecast_check_every >= 0, got "
                f"{self.forecast_patience} and {self.forecast_check_every}"
            )
        if self.per_device_parallelism != -1 and self.per_device_parallelism <= 0:
            raise ValueError(f"train.per_device_parallelism must be -1 or > 0, got {self.per_device_parallelism}")
        sizes = self.model.axis_sizes()
        for axis in self.mesh.tp_axes:
            if axis in sizes and sizes[axis] % self.mesh.model_axis_size:
                raise ValueError(
                    f"train.mesh.model_axis_size={self.mesh.model_axis_size} does not divide the model's {axis!r} "
                    f"axis ({sizes[axis]}), which mesh.tensor_parallel_axes splits over it"
                )

    @property
    def tokens_per_step(self) -> int:
        return self.train_batch_size * self.model.seq_len
