"""The markers: values in a config that stand for what is known only when the executor plans the step.

    versioned(1000)                  the value 1000, part of the step's identity (its hash)
    output_path_of(data, "x.jsonl")  an input: another step's output folder (or a path in it)
    this_output_path()               this step's own output folder (or a path in it)

A marker is a `Placeholder`: a config holding one is not instantiated yet (a `StepConfig` runs its
`validate()` only without them). When a step is planned, every marker is replaced by a plain value; a
path marker becomes a `ResolvedPath`, a str that remembers the folder it was joined to, so an attempt
moves its paths to its own folder without resolving the config again.

A marker refers to a step without knowing what a step is: the executor's `ExecutorStep` is a `StepNode`,
which a config may only hold through `output_path_of`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from marin.storage.paths import join

T = TypeVar("T")


class Placeholder:
    """Base of the markers: not a plain value yet."""

    __slots__ = ()

    def standin(self) -> Any:
        """A plain value of what the marker becomes, for type checks (a path marker: a str)."""
        return ""


class StepNode:
    """Base of the executor's steps. A config never holds a step itself: it names one with an `InputName`."""

    __slots__ = ()


@dataclass(frozen=True)
class VersionedValue(Placeholder, Generic[T]):
    """A config value that takes part in the step's hash."""

    value: T

    def standin(self) -> T:
        return self.value


@dataclass(frozen=True)
class InputName(Placeholder):
    """The output path of another step (or a file under it): a dependency."""

    step: Any
    """The step whose output this refers to (an `ExecutorStep`)."""
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


@dataclass(frozen=True)
class OutputName(Placeholder):
    """This step's own output folder (or a path inside it): `this_output_path()`, and the default of an
    `output_field()`."""

    name: str | None = None
    """A sub-path under this step's output folder, or None for the folder itself."""


def versioned(value: T) -> T:
    """Marks `value` as part of the step's identity: changing it changes the output path."""
    if isinstance(value, Placeholder):
        raise TypeError(f"versioned() takes a plain value, not {type(value).__name__}")
    return VersionedValue(value)  # type: ignore[return-value]


def this_output_path(name: str | None = None) -> Any:
    """Filled with the running step's output folder (or `name` inside it)."""
    return OutputName(name)


THIS_OUTPUT_PATH: Any = OutputName(None)
"""A default for `output_path` fields: `output_path: str = THIS_OUTPUT_PATH`."""


class ResolvedPath(str):
    """A marker's path as a plain str that remembers the folder it was joined to (`base`) and the sub-path
    (`name`)."""

    base: str
    name: str | None


def resolved_path(base: str, name: str | None) -> ResolvedPath:
    """`base` joined with `name` (when given), remembering both."""
    path = ResolvedPath(join(base, name) if name else base)
    path.base, path.name = base, name
    return path
