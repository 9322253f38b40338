"""What `Executor.run` returns: every step's output path, and what this run did with each step.

A `RunResult` belongs to one run (a second `run` on the same executor returns its own). It is the
mapping step -> output path that docs/design.md promises (`paths = executor.run(steps); paths[step]`),
with the record and the outcomes beside it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from marin.execution.authoring import ExecutorStep
from marin.execution.status import Outcome, StepOutcome


@dataclass(frozen=True, eq=False)
class RunResult(Mapping[ExecutorStep, str]):
    """One run of an experiment: a mapping step -> output path, plus its record and outcomes.

    It compares equal to any mapping with the same steps and paths (a plain dict included).
    """

    output_paths: dict[ExecutorStep, str]
    """Every reachable step's output folder."""
    record_path: str | None = None
    """The experiment record this run appended its line to (None for a dry run)."""
    outcomes: dict[ExecutorStep, StepOutcome] = field(default_factory=dict)
    """What happened to each selected step (SUCCESS, SKIPPED, FAILED, ...); empty for a dry run."""

    def __getitem__(self, step: ExecutorStep) -> str:
        return self.output_paths[step]

    def __iter__(self) -> Iterator[ExecutorStep]:
        return iter(self.output_paths)

    def __len__(self) -> int:
        return len(self.output_paths)

    @property
    def ok(self) -> bool:
        """True when every selected step succeeded, was skipped or ran elsewhere."""
        return all(o.ok for o in self.outcomes.values())

    def statuses(self) -> dict[str, Outcome]:
        """Step name -> outcome status, for printing and tests."""
        return {step.name: outcome.status for step, outcome in self.outcomes.items()}
