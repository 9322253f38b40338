"""What a run leaves beside its outputs: the experiment record, each step's record, the run log.

The experiment record (`<prefix>/experiments/<script>-<hash8>.json`) is what `marin rerun` rebuilds
an experiment from and what the browser draws: every step's function and config type by import
path, its instantiated config, version and output path, and the environment (git commit, python,
packages, lock file) that produced it. Its name hashes the identities of the DAG's steps, so the same
experiment has the same record in every prefix. It is written once; every run appends a line to the
`.runs.jsonl` beside it. The formats are described field by field in docs/records.md.

This module is the schema side: what a record holds, built through the typed views of
`marin.storage.layout` (`ExperimentRecord`, `StepRecord`; the executor writes `RunLine`), so that a
field the readers do not know cannot be written by accident. Probing the machine for the provenance
(git, packages, who ran it) is `provenance.py`.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib

from marin.config.canonical import canonical_json
from marin.config.values import encode
from marin.execution.credential_check import strip_userinfo
from marin.execution.planning import Plan, PlannedStep, instantiate_config
from marin.execution.provenance import dump_json, run_provenance, who
from marin.provenance.probe import environment
from marin.provenance.references import code_fingerprint, reference_of
from marin.storage.layout import RECORD_FORMAT, ExperimentRecord, StepRecord


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def step_record(planned: PlannedStep, plan: Plan) -> dict:
    """The record of one step: also the content of its `.executor_info`. Its config keeps no URL user-info
    (`credential_check`): the step runs with the config as written, the record holds what may be published."""
    cached = plan.step_records.get(planned)
    if cached is not None:
        return cached
    config = instantiate_config(planned, plan)
    types: dict[str, str] = {}
    config_json = encode(config, types_out=types)
    record = plan.step_records[planned] = StepRecord(
        name=planned.name,
        hash=planned.hash,
        output_path=planned.output_path,
        relative_output_path=planned.relative_output_path,
        fn=reference_of(planned.step.fn),
        config_type=reference_of(type(config)) if config is not None else None,
        config_types=types,
        config=strip_userinfo(config_json),
        version=planned.version,
        dependencies=[d.output_path for d in planned.dependencies],
        pseudo_dependencies=[d.output_path for d in planned.pseudo_dependencies],
        description=planned.step.description,
        resources=dataclasses.asdict(planned.step.resources) if planned.step.resources is not None else None,
        code_fingerprint=code_fingerprint(planned.step.fn),
        prefix=plan.prefix,
    ).to_json()
    return record


@dataclasses.dataclass
class StepInfo(StepRecord):
    """A step's `.executor_info`: its `StepRecord`, the run that wrote it, where a reused output came from."""

    run: dict | None = None
    """The run that wrote it (`run_provenance`); None (left out) for a step marked DEP_FAILED."""
    reused_from: dict | None = None
    """Where a reused output came from (`--cache_from`, docs/records.md); None (left out) otherwise."""

    def to_json(self) -> dict:
        out = super().to_json()
        for name in ("run", "reused_from"):
            if out[name] is None:
                del out[name]
        return out


def step_info(planned: PlannedStep, plan: Plan, run: dict | None = None) -> StepInfo:
    """What the runner of `planned` writes to its `.executor_info` (`run`: the run writing it). The fields are
    taken as `step_record` built them, unchecked: a config of another shape than a dataclass stays as it is."""
    record = dict(step_record(planned, plan))
    fields = {f.name: record.pop(f.name) for f in dataclasses.fields(StepRecord) if f.name in record}
    return StepInfo(**fields, run=run, extra=record)


def experiment_hash(plan: Plan) -> str:
    identities = sorted(p.identity for p in plan.steps)
    return hashlib.sha256(canonical_json(identities).encode()).hexdigest()[:8]


def experiment_record(
    plan: Plan, name: str, script: str | None, description: str | None, run: dict | None = None
) -> dict:
    """The experiment record; `run` (from `run_provenance`) gives its git state and stored scripts."""
    identity = who()
    del identity["pid"]
    run = run or run_provenance(plan, utc_now(), "", store=False)
    return ExperimentRecord(
        format=RECORD_FORMAT,
        name=name,
        hash=experiment_hash(plan),
        script=script,
        description=description,
        prefix=plan.prefix,
        created=utc_now(),
        **identity,
        git=run["git"],
        scripts=run["scripts"],
        environment=environment(),
        steps=[step_record(p, plan) for p in plan.steps],
    ).to_json()


__all__ = ["StepInfo", "dump_json", "experiment_hash", "experiment_record", "step_info", "step_record", "utc_now"]
