"""The authoring API: what an experiment file uses to declare steps (docs/design.md, "The authoring API").

A step is a name, a function and a frozen dataclass config. Inside the config, three markers tell the
executor what to do with a field:

    versioned(1000)                  part of the step's identity (its hash)
    output_path_of(data, "x.jsonl")  an input: a dependency on another step, filled with its path
    this_output_path()               filled with this step's own output folder

In a config that declares its fields (a `marin.config.StepConfig`, as every config of the step
library is), every field not declared unversioned is part of the hash without a marker, plain input
paths included; in any other dataclass, unmarked fields are passed through untouched and do not affect
the hash. Before calling `fn(config)` the executor replaces every marker by a plain value, so a step
function never sees these types and can be called without the executor at all.

What a config is (its parts, the markers, which values are versioned, its canonical form and typed
encoding) is `marin.config`'s; this module adds the step and its resources, and re-exports the markers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from marin.config.markers import (
    THIS_OUTPUT_PATH,
    InputName,
    OutputName,
    ResolvedPath,
    StepNode,
    VersionedValue,
    this_output_path,
    versioned,
)
from marin.config.walk import rebase
from marin.stepkit.sharding import ShardResources

T = TypeVar("T")


def output_path_of(step: ExecutorStep, name: str | None = None) -> InputName:
    """The output folder of `step` (or `name` inside it); makes `step` a dependency."""
    if not isinstance(step, ExecutorStep):
        raise TypeError(f"output_path_of() takes an ExecutorStep, got {type(step).__name__}: {step!r:.80}")
    return InputName(step, name)


PLACEMENTS = ("SPREAD", "STRICT_SPREAD", "PACK", "STRICT_PACK")


@dataclass(frozen=True, kw_only=True)
class ResourceConfig(ShardResources):
    """What one run of a step needs; mapped onto a Ray task's options (`cpu`, `memory_gb` and `custom` as
    for a shard)."""

    gpu: float = 0
    """GPUs (Ray `num_gpus`)."""
    tpu: float | None = None
    """TPU chips (Ray custom resource `TPU`), or None."""
    accelerator_type: str | None = None
    """A Ray accelerator type label, e.g. 'A100' or 'TPU-V4', or None for any."""
    retries: int = 0
    """How often an exception raised by the step itself is retried (system failures always are)."""
    hosts: int = 1
    """Processes of one gang, one per host, each with the resources above (Ray backend only): > 1 starts them
    together, host 0 the coordinator, and restarts them together when one dies (docs/cluster.md)."""
    placement: str = "SPREAD"
    """How a gang's hosts are placed on nodes (a Ray placement strategy): SPREAD (over nodes, packing when
    there are too few), STRICT_SPREAD (one node each), PACK or STRICT_PACK."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment variables of the step's processes (Ray `runtime_env`), e.g. {'XLA_FLAGS': ...}."""

    def __post_init__(self):
        super().__post_init__()
        if not isinstance(self.gpu, int | float) or self.gpu < 0:
            raise ValueError(f"ResourceConfig.gpu must be a number >= 0, got {self.gpu!r}")
        if self.retries < 0:
            raise ValueError(f"ResourceConfig.retries must be >= 0, got {self.retries!r}")
        if not isinstance(self.hosts, int) or isinstance(self.hosts, bool) or self.hosts < 1:
            raise ValueError(f"ResourceConfig.hosts must be an integer >= 1, got {self.hosts!r}")
        if self.placement not in PLACEMENTS:
            raise ValueError(f"ResourceConfig.placement must be one of {PLACEMENTS}, got {self.placement!r}")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in self.env.items()):
            raise ValueError(f"ResourceConfig.env must map names to strings, got {self.env!r}")

    def ray_options(self) -> dict:
        opts = {**super().ray_options(), "num_gpus": self.gpu}
        custom = {**self.custom, **({"TPU": self.tpu} if self.tpu else {})}
        if custom:
            opts["resources"] = custom
        if self.accelerator_type:
            opts["accelerator_type"] = canonical_accelerator(self.accelerator_type)
        return opts


def canonical_accelerator(name: str) -> str:
    """Ray's spelling of an accelerator type ('a100' -> 'A100', 'tpu-v4' -> 'TPU-V4'); others unchanged.

    Ray labels each node with a resource `accelerator_type:<name>` (detected for GPUs and TPUs, or
    given with `ray start --resources`); a task asking for `accelerator_type` needs 0.001 of it.
    """
    from ray.util.accelerators import accelerators

    known = {v.upper(): v for k, v in vars(accelerators).items() if k.isupper() and isinstance(v, str)}
    return known.get(name.upper(), name)


@dataclass(frozen=True, eq=False)
class ExecutorStep(StepNode, Generic[T]):
    """One node of an experiment: `fn(config)` writes into this step's output folder.

    Steps compare by identity; two steps with equal versions are merged by the executor.
    """

    name: str
    """A slash-separated name, e.g. 'tokenized/tiny'; the output folder is '<prefix>/<name>-<hash8>'."""
    fn: Any
    """The function to call with the instantiated config."""
    config: T
    """A frozen dataclass (may contain versioned(), output_path_of() and this_output_path() markers), or None:
    then `fn(None)` is called and the step's version is its name and nothing else."""
    description: str | None = None
    """A line for people: shown by `marin plan` and the browser."""
    resources: ResourceConfig | None = None
    """What the step needs to run (Ray backend); None for one CPU."""
    override_output_path: str | None = None
    """A fixed output path (relative to the prefix, or absolute) instead of '<name>-<hash8>'."""

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name or self.name.startswith("/") or ".." in self.name.split("/"):
            raise ValueError(f"ExecutorStep.name must be a relative slash-separated name, got {self.name!r}")
        if not callable(self.fn):
            raise TypeError(f"step {self.name!r}: fn must be callable, got {type(self.fn).__name__}")

    def cd(self, name: str) -> InputName:
        """`output_path_of(self, name)`."""
        return output_path_of(self, name)

    def __repr__(self) -> str:
        return f"ExecutorStep({self.name!r})"


__all__ = [
    "THIS_OUTPUT_PATH",
    "ExecutorStep",
    "InputName",
    "OutputName",
    "ResolvedPath",
    "ResourceConfig",
    "VersionedValue",
    "canonical_accelerator",
    "output_path_of",
    "rebase",
    "this_output_path",
    "versioned",
]
