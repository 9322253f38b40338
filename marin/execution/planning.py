"""Planning: from the steps an experiment names to every step's version, hash and output path.

Planning does no I/O. It walks each step's config once (`marin.config.walk.scan`), collecting the
versioned fields (by dotted path) and the inputs (`output_path_of`), and computes, dependencies first,

    version = {"name": "tokenized/tiny",
               "config": {"tokenizer.vocab_size": 1024, "input_path": "DEP[0]/docs"},
               "dependencies": ["raw/tiny-1a2b3c4d"]}
    hash    = sha256(canonical_json(version))[:8]        ->  <prefix>/tokenized/tiny-<hash>

so a step's hash changes exactly when one of its versioned fields or one of its upstream hashes
changes, and never with the prefix. Nonblocking inputs appear as "PSEUDO_DEP[j]" and in
"pseudo_dependencies". Two step objects with equal versions are one step; two different steps with
one output path, a cycle, or a config that is neither a dataclass nor None are errors naming the step
and field.

Which fields are versioned is `marin.config`'s rule: in a `StepConfig`, every field its class does not
declare otherwise, plain input paths included; in any other dataclass, only `versioned(...)` fields and
`output_path_of(...)` inputs (Marin's rule). Planning also instantiates each `StepConfig` (markers
replaced by plain values, following the routes the walk found), which runs its `validate()`: a bad value
is a PlanError naming the step. Other configs are instantiated when they are first needed (a record, a
run): a plan that only hashes does not copy them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from marin.config.canonical import hash8
from marin.config.declarations import StepConfig
from marin.config.parts import RECORD, kind
from marin.config.walk import ConfigScan, ScanError, resolve, scan
from marin.execution.authoring import ExecutorStep
from marin.execution.credential_check import checked_scan
from marin.storage.paths import join, protocol_of

logger = logging.getLogger(__name__)


class PlanError(ValueError):
    """The DAG cannot be planned; the message names the step and the field."""


@dataclasses.dataclass(eq=False)
class PlannedStep:
    """A step with its identity resolved. Steps merged by dedup share one PlannedStep."""

    step: ExecutorStep
    name: str
    version: dict
    hash: str
    output_path: str
    relative_output_path: str
    dependencies: list[PlannedStep]
    pseudo_dependencies: list[PlannedStep]
    config: Any = None
    """The instantiated config (every marker a plain value): built and validated when planning a
    `StepConfig`, else on first use (`instantiate_config`)."""
    scan: ConfigScan = dataclasses.field(default_factory=ConfigScan, repr=False)
    """What the walk over its config found: its marker routes (for `instantiate_config`) and plain inputs
    (checked before a run)."""

    identity: str = dataclasses.field(init=False, default="")
    """'<name>-<hash>'."""

    def __post_init__(self) -> None:
        self.identity = f"{self.name}-{self.hash}"

    def __repr__(self) -> str:
        return f"PlannedStep({self.relative_output_path!r})"


@dataclasses.dataclass
class Plan:
    """Every step reachable from the requested ones, in topological order (dependencies first)."""

    prefix: str
    steps: list[PlannedStep]
    by_step: dict[ExecutorStep, PlannedStep]
    step_records: dict[PlannedStep, dict] = dataclasses.field(default_factory=dict)
    """Memo of each step's record (records.step_record), computed at most once per plan."""
    roots: list[PlannedStep] | None = None
    """The steps the experiment named (None: every step is one)."""

    def __getitem__(self, step: ExecutorStep) -> PlannedStep:
        return self.by_step[step]

    def output_paths(self) -> dict[ExecutorStep, str]:
        return {step: planned.output_path for step, planned in self.by_step.items()}

    def find(self, name: str) -> PlannedStep:
        """The step called `name` (or whose '<name>-<hash>' is `name`); a PlanError lists the names."""
        for planned in self.steps:
            if name in (planned.name, planned.identity, planned.relative_output_path):
                return planned
        names = ", ".join(p.name for p in self.steps)
        raise PlanError(f"no step named {name!r} in this experiment (steps: {names})")

    def select(self, run_only: Sequence[str] | None) -> list[PlannedStep]:
        """The steps matching any `run_only` regex (default: the steps the experiment named), plus everything
        they block on. A step reached only through nonblocking inputs is hashed but not run (as in Marin):
        name it, or block on it from another step, to run it."""
        if not run_only:
            if self.roots is None:
                return list(self.steps)
            wanted = {p for p in self.roots}
        else:
            patterns = [re.compile(p) for p in run_only]
            wanted = {p for p in self.steps if any(pat.search(p.name) for pat in patterns)}
            if not wanted:
                raise PlanError(f"--run_only {list(run_only)} matches no step")
        stack = [p for p in self.steps if p in wanted]
        while stack:
            for dep in stack.pop().dependencies:
                if dep not in wanted:
                    wanted.add(dep)
                    stack.append(dep)
        return [p for p in self.steps if p in wanted]


def _scan(step: ExecutorStep) -> ConfigScan:
    """The one walk over the step's config (marin.config.walk): versioned values, inputs, marker routes."""
    config = step.config
    if config is not None and kind(type(config)) != RECORD:
        raise PlanError(f"step {step.name!r}: config must be a dataclass instance or None, got {type(config).__name__}")
    try:
        found = scan(config)
    except ScanError as exc:
        raise PlanError(f"step {step.name!r}: {exc}") from None
    for path in found.unversioned_settings:
        logger.warning(
            "step %r: config field %s is not versioned (a plain dataclass versions only versioned(...) "
            "fields): changing it reuses the existing output; wrap it in versioned(...), or declare it "
            "unversioned(...) (marin.config) when it cannot change the output",
            step.name,
            path,
        )
    return found


_BAD_CHARACTER = re.compile(r"[\x00-\x1f\x7f\\]")


def _path_problem(text: str, absolute_ok: bool) -> str | None:
    """Why `text` cannot name a folder under the prefix, or None."""
    bad = _BAD_CHARACTER.search(text)
    if bad:
        return f"holds the character {bad.group()!r}"
    body = text.split("://", 1)[1] if absolute_ok and protocol_of(text) else text
    body = body.rstrip("/") if absolute_ok else body
    if absolute_ok and body.startswith("/"):
        body = body[1:]
    padded = f"/{body}/"
    if "//" in padded or "/./" in padded or "/../" in padded:
        return "has an empty, '.' or '..' part (it must stay inside its folder)"
    return None


def _resolve_output(prefix: str, step: ExecutorStep, digest: str) -> tuple[str, str]:
    problem = _path_problem(step.name, absolute_ok=False)
    if problem:
        raise PlanError(f"step {step.name!r}: the name {problem}")
    override = step.override_output_path
    if override is not None and (problem := _path_problem(override, absolute_ok=True)):
        raise PlanError(f"step {step.name!r}: override_output_path {override!r} {problem}")
    if override is None:
        rel = f"{step.name}-{digest}"
        return join(prefix, rel), rel
    if protocol_of(override) or override.startswith("/"):
        base = prefix.rstrip("/") + "/"
        return override, override[len(base) :] if override.startswith(base) else override
    return join(prefix, override), override.strip("/")


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector paused: planning and deciding make no reference cycles, but they make
    many objects (a few per step), and each collection these trigger walks every object of the experiment
    again: half the time of a 10,000-step plan, and of its dry run, went to it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def plan_steps(steps: Iterable[ExecutorStep], prefix: str) -> Plan:
    """Versions, hashes and output paths of every step reachable from `steps` (no I/O), the garbage
    collector paused (`paused_gc`)."""
    with paused_gc():
        return _plan_steps(steps, prefix)


def _plan_steps(steps: Iterable[ExecutorStep], prefix: str) -> Plan:
    by_step: dict[ExecutorStep, PlannedStep] = {}
    by_identity: dict[tuple[str, str], PlannedStep] = {}
    by_path: dict[str, PlannedStep] = {}
    order: list[PlannedStep] = []
    scans: dict[ExecutorStep, ConfigScan] = {}
    visiting: set[ExecutorStep] = set()

    steps = list(steps)
    for root in steps:
        if not isinstance(root, ExecutorStep):
            raise PlanError(f"steps must be ExecutorSteps, got {type(root).__name__}: {root!r:.80}")
        if root in by_step:
            continue
        stack: list[tuple[ExecutorStep, int]] = [(root, 0)]
        visiting.add(root)
        while stack:
            step, next_input = stack[-1]
            found = scans.get(step)
            if found is None:
                found = scans[step] = checked_scan(step, _scan(step), PlanError)
            inputs = found.inputs
            while next_input < len(inputs):
                dep_step = inputs[next_input][1].step
                next_input += 1
                if dep_step in by_step:
                    continue
                if dep_step in visiting:
                    cycle = [s.name for s, _ in stack] + [dep_step.name]
                    start = cycle.index(dep_step.name)
                    raise PlanError("cycle in the DAG: " + " -> ".join(cycle[start:]))
                stack[-1] = (step, next_input)
                stack.append((dep_step, 0))
                visiting.add(dep_step)
                break
            else:
                stack.pop()
                visiting.discard(step)
                planned = _plan_one(step, found, by_step, prefix)
                key = (planned.name, planned.hash)
                existing = by_identity.get(key)
                if existing is not None and step.override_output_path == existing.step.override_output_path:
                    by_step[step] = existing
                    continue
                other = by_path.get(planned.output_path)
                if other is not None:
                    raise PlanError(
                        f"steps {other.name!r} and {planned.name!r} differ but share the output path "
                        f"{planned.output_path!r}"
                    )
                by_identity[key] = by_path[planned.output_path] = by_step[step] = planned
                if isinstance(step.config, StepConfig):
                    try:
                        planned.config = _resolve(planned, by_step)
                    except (ValueError, TypeError) as exc:
                        raise PlanError(f"step {planned.name!r}: invalid config: {exc}") from None
                order.append(planned)
                continue
    roots = list({id(by_step[s]): by_step[s] for s in steps}.values())
    return Plan(prefix=prefix, steps=order, by_step=by_step, roots=roots)


def _plan_one(step: ExecutorStep, found: ConfigScan, by_step: dict, prefix: str) -> PlannedStep:
    config = found.versioned.copy()
    deps: list[PlannedStep] = []
    pseudo: list[PlannedStep] = []
    for path, inp in found.inputs:
        dep = by_step[inp.step]
        group, tag = (deps, "DEP") if inp.block_on_step else (pseudo, "PSEUDO_DEP")
        for i, seen in enumerate(group):
            if seen is dep:
                index = i
                break
        else:
            index = len(group)
            group.append(dep)
        config[path] = f"{tag}[{index}]/{inp.name.strip('/')}" if inp.name else f"{tag}[{index}]"
    version: dict = {"name": step.name, "config": config, "dependencies": [d.identity for d in deps]}
    if pseudo:
        version["pseudo_dependencies"] = [d.identity for d in pseudo]
    digest = hash8(version, floats=found.floats)
    output_path, rel = _resolve_output(prefix, step, digest)
    return PlannedStep(step, step.name, version, digest, output_path, rel, deps, pseudo, scan=found)


def instantiate_config(planned: PlannedStep, plan: Plan) -> Any:
    """The step's config with every marker replaced by a plain value (paths as `ResolvedPath`s); built once,
    for its record and for every attempt of it (`rebase` moves the paths to the attempt's folder)."""
    if planned.config is None and planned.step.config is not None:
        planned.config = _resolve(planned, plan.by_step)
    return planned.config


def _resolve(planned: PlannedStep, by_step: dict) -> Any:
    return resolve(
        planned.step.config, planned.scan.routes, lambda inp: by_step[inp.step].output_path, planned.output_path
    )
