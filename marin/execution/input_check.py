"""Plain input paths are checked before anything runs, so a typo fails in seconds, not after training.

A config of the step library declares its inputs (`input_field`, marin.config.declarations). An input
that is another step's output is the executor's to produce; a plain path must already be there.
The walk that plans a step notes them (`ConfigScan.plain_inputs`); `check_inputs` looks at every plain
input of the steps a run is about to run (concurrently: one
existence check per path, a few more for `holds_any`), and raises one `MissingInputError` that
lists each bad input by step and field:

    step 'tokenized/web': input tokenizer (tokenizer folder) /data/tok does not exist

It reads storage, so it is not part of `Executor.plan`, which stays pure (versions and paths, no
I/O). `Executor.run` (a dry run too) and `marin plan` call it after reading the steps' states, for
the steps they would run; a step that already succeeded is not checked (its inputs are not read
again, and may be gone). Inputs given with a scheme the field leaves unchecked (a download's
https:// or hf:// source) are not checked: planning does not reach the outside world.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from marin.config.declarations import InputSpec
from marin.config.walk import scan
from marin.execution.planning import PlanError, PlannedStep
from marin.storage import exists, join, protocol_of


class MissingInputError(PlanError):
    """Plain input paths that are absent or not what their field needs; the message names each step and field."""


def plain_inputs(config: object) -> list[tuple[str, InputSpec, str]]:
    """(field path, spec, plain path) of every declared input of `config` that is not another step's output (in
    its fields and in those of every `StepConfig` held by one): what the walk over it notes. For a planned step,
    `planned.scan.plain_inputs` holds them already."""
    found = scan(config)
    if found.input_problem:
        raise PlanError(found.input_problem)
    return found.plain_inputs


def _problem(spec: InputSpec, path: str) -> str | None:
    if not path:
        return "is empty"
    try:
        if not exists(path):
            return "does not exist"
        if spec.holds_any and not any(exists(join(path, name)) for name in spec.holds_any):
            return f"holds none of {', '.join(spec.holds_any)}"
    except Exception as exc:
        return f"cannot be read ({type(exc).__name__}: {exc})"
    return None


def check_inputs(steps: Iterable[PlannedStep]) -> None:
    """Raise MissingInputError when a plain input of one of `steps` is absent or not what its field needs."""
    checks = []
    for planned in steps:
        if planned.scan.input_problem:
            raise PlanError(f"step {planned.name!r}: {planned.scan.input_problem}")
        for where, spec, path in planned.scan.plain_inputs:
            if protocol_of(path) not in spec.unchecked_schemes:
                checks.append((planned.name, where, spec, path))
    if not checks:
        return
    with ThreadPoolExecutor(max_workers=min(16, len(checks))) as pool:
        problems = list(pool.map(lambda c: _problem(c[2], c[3]), checks))
    bad = [
        f"step {name!r}: input {where} ({spec.what}) {path} {problem}"
        for (name, where, spec, path), problem in zip(checks, problems, strict=True)
        if problem is not None
    ]
    if bad:
        raise MissingInputError("; ".join(bad) if len(bad) == 1 else "missing inputs:\n  " + "\n  ".join(bad))
