"""The authoring API: what an experiment file uses to declare steps (docs/design.md, "The authoring API").

A step is a name, a function and a frozen dataclass config. Inside the config, three markers tell the
executor what to do with a field:

    versioned(1000)                  part of the step's identity (its hash)
    output_path_of(data, "x.jsonl")  an input: a dependency on another step, filled with its path
    this_output_path()               filled with this step's own output folder

In a config that declares its fields (a `marin.stepkit.config.StepConfig`, as every config of the step
library is), every field not declared unversioned is part of the hash without a marker, plain input
paths included; in any other dataclass, unmarked fields are passed through untouched and do not affect
the hash. Before calling `fn(config)` the executor replaces every marker by a plain value, so a step
function never sees these types and can be called without the executor at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from marin.stepkit.config import KEEP, OutputName, Placeholder, map_nodes
from marin.stepkit.sharding import ShardResources
from marin.storage.paths import join

T = TypeVar("T")


@dataclass(frozen=True)
class VersionedValue(Placeholder, Generic[T]):
    """A config value that takes part in the step's hash."""

    value: T

    def standin(self) -> T:
        return self.value


def versioned(value: T) -> T:
    """Marks `value` as part of the step's identity: changing it changes the output path."""
    if isinstance(value, VersionedValue | InputName | OutputName):
        raise TypeError(f"versioned() takes a plain value, not {type(value).__name__}")
    return VersionedValue(value)  # type: ignore[return-value]


@dataclass(frozen=True)
class InputName(Placeholder):
    """The output path of another step (or a file under it): a dependency."""

    step: ExecutorStep
    """The step whose output this refers to."""
    name: str | None = None
    """A sub-path under that step's output folder, or None for the folder itself."""
    block_on_step: bool = True
    """False: part of the hash, but this step does not wait for that one (e.g. eval while training)."""

    def nonblocking(self) -> InputName:
        """The same input without waiting for the step to finish."""
        return InputName(self.step, self.name, block_on_step=False)

    def cd(self, name: str) -> InputName:
        """A path further below this one."""
        sub = name if self.name is None else f"{self.name.rstrip('/')}/{name}"
        return InputName(self.step, sub, self.block_on_step)


def output_path_of(step: ExecutorStep, name: str | None = None) -> InputName:
    """The output folder of `step` (or `name` inside it); makes `step` a dependency."""
    if not isinstance(step, ExecutorStep):
        raise TypeError(f"output_path_of() takes an ExecutorStep, got {type(step).__name__}: {step!r:.80}")
    return InputName(step, name)


def this_output_path(name: str | None = None) -> Any:
    """Filled with the running step's output folder (or `name` inside it)."""
    return OutputName(name)


THIS_OUTPUT_PATH: Any = OutputName(None)
"""A default for `output_path` fields: `output_path: str = THIS_OUTPUT_PATH`."""


class ResolvedPath(str):
    """A marker's path as a plain str that remembers the folder it was joined to (`base`) and the sub-path
    (`name`): an attempt moves its own output and inputs read from elsewhere (`rebase`) without resolving
    the config again."""

    base: str
    name: str | None


def _resolved(base: str, name: str | None) -> ResolvedPath:
    path = ResolvedPath(join(base, name) if name else base)
    path.base, path.name = base, name
    return path


def resolve_markers(config: Any, input_path: Callable[[InputName], str], own_output: str) -> Any:
    """`config` with `versioned(x)` replaced by x, `output_path_of(step, sub)` by `input_path(marker)` joined
    with `sub`, and `this_output_path(sub)` by `own_output` joined with `sub` (paths as `ResolvedPath`s)."""

    def resolve(value: Any) -> Any:
        cls = type(value)
        if cls is VersionedValue:
            return value.value
        if cls is InputName:
            return _resolved(input_path(value), value.name)
        if cls is OutputName:
            return _resolved(own_output, value.name)
        return KEEP

    return map_nodes(config, resolve)


def rebase(config: Any, moves: dict[str, str], own_output: str) -> Any:
    """`config` with every path resolved from a folder in `moves` (a `ResolvedPath`) joined to the folder it
    maps to instead, as plain strs, and any `this_output_path()` marker left filled with `own_output`: an
    attempt's config, from the one its step was planned with."""

    def move(value: Any) -> Any:
        cls = type(value)
        if cls is ResolvedPath:
            base = moves.get(value.base, value.base)
            return join(base, value.name) if value.name else base
        if cls is OutputName:
            return join(own_output, value.name) if value.name else own_output
        return KEEP

    return map_nodes(config, move)


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
class ExecutorStep(Generic[T]):
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
