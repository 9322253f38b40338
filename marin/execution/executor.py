"""The executor: plan an experiment, decide what must run, run it, and record what happened.

    Executor(prefix).run([stats])

plans every step reachable from `stats` (no I/O), reads each step's state (one read per step,
concurrently on buckets), checks that the plain input paths of the steps it will run exist, writes the experiment record once, runs what is missing as soon as its
dependencies succeeded, marks everything downstream of a failure DEP_FAILED while independent
branches go on, appends one line to the record's `.runs.jsonl`, and prints a summary table. A step
already SUCCESS is never run again; one FAILED is rerun only with `force_run_failed`.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from marin.execution.authoring import ExecutorStep
from marin.execution.input_check import check_inputs
from marin.execution.planning import Plan, PlannedStep, instantiate_config, paused_gc, plan_steps
from marin.execution.status import Action, Outcome, action_for, read_infos, read_statuses
from marin.storage import append_line, create_if_absent, exists, join
from marin.storage.layout import RunLine, State, lease_heartbeat_s, lease_timeout_s, runs_file

if TYPE_CHECKING:
    from marin.execution.reuse import CacheFrom
    from marin.execution.run_result import RunResult
    from marin.execution.status import StepOutcome
    from marin.execution.step_runner import StepTask

# What only a run needs (records, provenance, leases, attempts, the step runner) is imported where it is used:
# `Executor.plan` and a dry run load none of it (a plan of 1,000 steps took longer to import it than to plan).

logger = logging.getLogger(__name__)

PROGRESS_EVERY_S = 30.0
"""While steps run, say which ones every this many seconds (the wait returns at once when one finishes)."""


class ExecutorRunError(RuntimeError):
    """Some steps failed; `result` is the run's `RunResult` (its outcomes say which)."""

    def __init__(self, message: str, result: RunResult):
        super().__init__(message)
        self.result = result

    @property
    def outcomes(self) -> dict[ExecutorStep, StepOutcome]:
        return self.result.outcomes


@dataclass
class StepDecision:
    """What a run will do with a step, and why (what `marin plan` prints)."""

    planned: PlannedStep
    state: str | None
    action: Action
    reason: str
    code_changed: bool = False
    """Succeeded before, and the code fingerprint in its `.executor_info` differs from the code's now."""
    reuse_from: str | None = None
    """action 'reuse': the source folder that passed the checks made without reading its files."""
    reuse_bytes: int = 0
    """action 'reuse': the bytes its manifest lists (copied, or hashed in place by reference)."""


def _reason(state: str | None, action: Action, code_changed: bool, new_reason: str | None) -> str:
    if state == State.SUCCESS:
        if action is Action.RUN:
            return "code changed (--rerun_code_changed)"
        return "succeeded; WARNING: code changed since" if code_changed else "succeeded"
    if action is Action.FAIL:
        return "failed before (use --force_run_failed)"
    if action is Action.WAIT:
        return "running elsewhere (or its runner died)"
    if state is None:
        return f"new hash: {new_reason or 'no output yet'}"
    return "failed before; --force_run_failed" if state == State.FAILED else f"was {state}"


class Executor:
    """Runs experiments under one prefix (a local folder, gs://bucket/path or s3://bucket/path)."""

    def __init__(
        self,
        prefix: str,
        backend: str = "auto",
        max_concurrent: int | None = None,
        ray_address: str | None = None,
        description: str | None = None,
        experiment_name: str | None = None,
        script: str | None = None,
        record_extra: dict | None = None,
        cache_from: CacheFrom | None = None,
        allow_credentials_in_patch: bool = False,
    ):
        if not prefix:
            raise ValueError("Executor needs a prefix (a folder or a gs:// / s3:// URL)")
        if backend not in ("auto", "ray", "local"):
            raise ValueError(f"unknown backend {backend!r}: use 'auto', 'ray' or 'local'")
        if max_concurrent is not None and max_concurrent < 1:
            raise ValueError(f"max_concurrent must be >= 1 (or None for no limit), got {max_concurrent}")
        if "://" not in prefix:
            prefix = os.path.abspath(prefix)
        self.prefix = prefix.rstrip("/")
        self.backend_kind = backend
        self.max_concurrent = max_concurrent
        self.ray_address = ray_address
        self.description = description
        main_file = getattr(sys.modules.get("__main__"), "__file__", None)
        stem = os.path.splitext(os.path.basename(main_file))[0] if main_file else "experiment"
        self.experiment_name = experiment_name or stem
        self._script = script
        self._script_of_main = script is None and bool(main_file)
        self.record_extra = record_extra or {}
        self.cache_from = cache_from
        self.allow_credentials_in_patch = allow_credentials_in_patch

    @property
    def script(self) -> str | None:
        """The experiment script as the record names it (by default `__main__`'s, found when first needed)."""
        if self._script_of_main:
            from marin.provenance.references import script_path

            self._script, self._script_of_main = script_path("__main__"), False
        return self._script

    def plan(self, steps: Sequence[ExecutorStep]) -> dict[ExecutorStep, str]:
        """Every reachable step's output path. No I/O: configs are instantiated and validated (a bad value
        is a PlanError naming the step), input paths are not read (`check_inputs` and `run` do that)."""
        return plan_steps(steps, self.prefix).output_paths()

    def check_inputs(self, steps: Sequence[ExecutorStep], run_only: Sequence[str] | None = None) -> None:
        """Raises MissingInputError naming the step and field when a plain input path of a step that would run
        is absent or not what its field needs. Reads storage (the steps' states, then the inputs)."""
        plan = plan_steps(steps, self.prefix)
        check_inputs(steps_to_run(self.decide(plan, run_only)))

    def plan_dag(self, steps: Sequence[ExecutorStep]) -> Plan:
        return plan_steps(steps, self.prefix)

    def record_path(self, plan: Plan) -> str:
        from marin.execution.records import experiment_hash

        return join(self.prefix, "experiments", f"{self.experiment_name}-{experiment_hash(plan)}.json")

    def decide(
        self,
        plan: Plan,
        run_only: Sequence[str] | None = None,
        force_run_failed: bool = False,
        rerun_code_changed: bool = False,
        check_code: bool | str = False,
        explain_new: bool = False,
    ) -> list[StepDecision]:
        """What a run would do with each selected step, and why.

        Statuses decide (one read per step). `check_code` compares the code fingerprint recorded in each
        succeeded step's `.executor_info` with the code's now: True or "every" reads every such record
        (`marin plan`, and always with `rerun_code_changed`); "sample" (a run) reads one per step function
        and the rest of a function's only when that one changed (`recorded_fingerprints`).
        With `explain_new` (`marin plan`, `--dry_run`), a step with no output yet is compared with the most
        recent earlier output of its name under the prefix, and its reason names the field that changed.
        """
        selected = plan.select(run_only)
        states = read_statuses([p.output_path for p in selected])
        new_reasons: dict[PlannedStep, str] = {}
        if explain_new:
            from marin.execution.earlier_outputs import new_hash_reasons

            new_reasons = new_hash_reasons([p for p, s in zip(selected, states, strict=True) if s is None], self.prefix)
        fingerprints: dict[PlannedStep, str | None] = {}
        if check_code or rerun_code_changed:
            from marin.provenance.references import code_fingerprint

            done = [p for p, s in zip(selected, states, strict=True) if s == State.SUCCESS]
            fingerprints = recorded_fingerprints(done, every=rerun_code_changed or check_code == "every")

        def act(d: StepDecision, reusable: bool = False) -> Action:
            rerun = d.code_changed and rerun_code_changed
            return action_for(d.state, force_run_failed=force_run_failed, rerun_succeeded=rerun, reusable=reusable)

        decisions = []
        for planned, state in zip(selected, states, strict=True):
            fingerprint = fingerprints.get(planned)
            changed = fingerprint is not None and fingerprint != code_fingerprint(planned.step.fn)
            d = StepDecision(planned, state, Action.RUN, "", changed)
            d.action = act(d)
            d.reason = _reason(state, d.action, d.code_changed, new_reasons.get(planned))
            decisions.append(d)
        if self.cache_from is not None:
            from marin.execution.reuse import plan_reuse

            candidates = [d for d in decisions if act(d, reusable=True) is Action.REUSE]
            reusable = plan_reuse(candidates, plan, self.cache_from)
            for d in candidates:
                d.action = act(d, reusable=d.planned in reusable)
        return decisions

    def run(
        self,
        steps: Sequence[ExecutorStep],
        dry_run: bool = False,
        run_only: Sequence[str] | None = None,
        force_run_failed: bool = False,
        rerun_code_changed: bool = False,
    ) -> RunResult:
        """Runs what is missing; returns every step's output path, the record and the outcomes; raises on failures."""
        import uuid

        from marin.execution.attempts import sweep_dead_runs
        from marin.execution.interrupts import sigterm_interrupts_the_run
        from marin.execution.provenance import run_provenance
        from marin.execution.records import utc_now
        from marin.execution.run_result import RunResult

        lease_heartbeat_s(), lease_timeout_s()  # a bad MARIN_LEASE_* setting fails before the run
        with paused_gc():
            plan = plan_steps(steps, self.prefix)
            decisions = self.decide(
                plan,
                run_only,
                force_run_failed,
                rerun_code_changed,
                check_code="every" if dry_run else "sample",
                explain_new=dry_run,
            )
            check_inputs(steps_to_run(decisions))
            if dry_run:
                print_plan(decisions, self.prefix)
                return RunResult(plan.output_paths())
        changed = [d.planned.name for d in decisions if d.code_changed and d.action is Action.SKIP]
        if changed:
            logger.warning(
                "the code behind %d succeeded step(s) changed since they ran (kept; --rerun_code_changed "
                "reruns them): %s",
                len(changed),
                _listed(changed, 10),
            )
        record_path = self.record_path(plan)
        started = utc_now()
        record_exists = exists(record_path)
        store = any(d.action is not Action.SKIP for d in decisions) or not record_exists
        run = run_provenance(
            plan, started, uuid.uuid4().hex, store=store, allow_credentials_in_patch=self.allow_credentials_in_patch
        )
        if not record_exists:
            self._write_record(plan, record_path, run)
        sweep_dead_runs(self.prefix, run["run_id"])
        with sigterm_interrupts_the_run():
            outcomes, interrupted = self._execute(plan, decisions, force_run_failed, run)
        with _ctrl_c_deferred(interrupted):
            self._append_run(record_path, plan, outcomes, started, run)
        if interrupted:
            left = [
                d.planned.relative_output_path
                for d in decisions
                if outcomes[d.planned].status in (Outcome.INTERRUPTED, Outcome.NOT_RUN)
            ]
            print(
                f"interrupted: {len(left)} step(s) left unfinished ({_listed(left, 5)}); "
                "run the same command again to resume",
                file=sys.stderr,
                flush=True,
            )
            raise KeyboardInterrupt
        result = RunResult(
            plan.output_paths(),
            record_path,
            {step: outcomes[p] for step, p in plan.by_step.items() if p in outcomes},
        )
        print_summary(plan, decisions, outcomes, record_path)
        failed = [d.planned for d in decisions if not outcomes[d.planned].ok]
        if failed:
            names = _listed([p.name for p in failed], 10)
            raise ExecutorRunError(f"{len(failed)} step(s) did not succeed: {names}", result)
        return result

    def _write_record(self, plan: Plan, record_path: str, run: dict) -> None:
        """Writes the experiment record unless another runner wrote it first (it is never rewritten)."""
        from marin.execution.provenance import dump_json
        from marin.execution.records import experiment_record

        record = experiment_record(plan, self.experiment_name, self.script, self.description, run)
        record.update(self.record_extra)
        if create_if_absent(record_path, dump_json(record)) is not None:
            logger.info("experiment record: %s", record_path)

    def _append_run(self, record_path: str, plan: Plan, outcomes: dict, started: str, run: dict) -> None:
        from marin.execution.provenance import who
        from marin.execution.records import utc_now

        identity = who()
        line = RunLine(
            run_id=run["run_id"],
            user=identity["user"],
            host=identity["host"],
            command=identity["command"],
            redacted=identity["redacted"],
            started=started,
            ended=utc_now(),
            git=run["git"],
            prefix=self.prefix,
            backend=self.backend_kind,
            steps={
                p.identity: {
                    "outcome": outcomes[p].status,
                    "started": outcomes[p].started,
                    "ended": outcomes[p].ended,
                    "duration_s": outcomes[p].duration_s,
                    "error": outcomes[p].error,
                    **({"reused_from": outcomes[p].extra["reused_from"]} if "reused_from" in outcomes[p].extra else {}),
                }
                for p in plan.steps
                if p in outcomes
            },
            extra=dict(self.record_extra),
        )
        external = {
            p.identity: {k: o.extra["reused_from"][k] for k in ("path", "manifest_sha256")}
            for p, o in outcomes.items()
            if o.extra.get("reused_from", {}).get("mode") == "reference"
        }
        if external:
            line.extra["external_inputs"] = external
        append_line(runs_file(record_path), _redacted_json_line(line.to_json()))

    def _execute(
        self, plan: Plan, decisions: list[StepDecision], force_run_failed: bool, run: dict
    ) -> tuple[dict[PlannedStep, StepOutcome], bool]:
        """Every selected step's outcome, and whether Ctrl-C stopped the run."""
        from marin.execution.failure_logs import latest_log
        from marin.execution.status import StepOutcome

        outcomes: dict[PlannedStep, StepOutcome] = {}
        pending: list[PlannedStep] = []
        for d in decisions:
            if d.action is Action.SKIP:
                outcomes[d.planned] = StepOutcome(Outcome.SKIPPED)
            elif d.action is Action.FAIL:
                log = latest_log(d.planned.output_path)
                outcomes[d.planned] = StepOutcome(
                    Outcome.FAILED, error="failed in an earlier run; --force_run_failed reruns it", log_path=log
                )
            else:
                pending.append(d.planned)
        if not pending:
            return outcomes, False
        from marin.execution.attempts import RunMarker, finish_cleanups, sweep_dead_runs
        from marin.execution.interrupts import LEFT_FOR_RERUN, ctrl_c_guarded_submissions
        from marin.execution.reuse import read_references

        inputs = {dep for p in pending for dep in p.dependencies}
        references = read_references([d.planned for d in decisions if d.action is Action.SKIP and d.planned in inputs])
        tasks = {d.planned: (d.action, d.state == State.SUCCESS) for d in decisions if d.planned not in outcomes}
        dependents: dict[PlannedStep, list[PlannedStep]] = {}
        for p in pending:
            for dep in p.dependencies:
                dependents.setdefault(dep, []).append(p)
        waiting_on = {
            p: sum(1 for dep in p.dependencies if not (dep in outcomes and outcomes[dep].ok)) for p in pending
        }
        for failed, outcome in list(outcomes.items()):
            if outcome.status is Outcome.FAILED:
                self._fail_downstream(failed, dependents, outcomes, plan)

        from marin.execution.backends import Backend

        backend = Backend(self.backend_kind, self.ray_address, self.max_concurrent)
        marker = RunMarker.begin(self.prefix, run["run_id"], [p.output_path for p in pending])
        in_flight: dict = {}
        interrupted, t_start, done = False, time.monotonic(), 0
        with ctrl_c_guarded_submissions() as guard:
            try:
                for p in pending:
                    backend.check_resources(p.name, p.step.resources)
                ready = collections.deque(p for p in pending if waiting_on[p] == 0 and p not in outcomes)
                limit = self.max_concurrent or len(pending)
                while ready or in_flight:
                    while ready and len(in_flight) < limit:
                        p = ready.popleft()
                        action, rerun = tasks[p]
                        task = self._task(p, plan, force_run_failed, rerun, run, action is Action.REUSE, references)
                        with guard.handing_over():
                            in_flight[backend.submit(task, p.step.resources)] = p
                    finished = backend.wait_any(list(in_flight), timeout=PROGRESS_EVERY_S)
                    if not finished:
                        running = sorted(p.relative_output_path for p in in_flight.values())
                        logger.info(
                            "[%d/%d %.0fs] running: %s",
                            done,
                            len(pending),
                            time.monotonic() - t_start,
                            _listed(running, 5),
                        )
                    for handle, outcome in finished:
                        p = in_flight.pop(handle)
                        outcomes[p] = outcome
                        origin = outcome.extra.get("reused_from") or {}
                        if origin.get("mode") == "reference":
                            references[p.step] = (origin["path"], outcome.extra.get("reference") or {})
                        done += 1
                        self._progress(p, outcome, done, len(pending), t_start)
                        if not outcome.ok:
                            self._fail_downstream(p, dependents, outcomes, plan)
                            continue
                        for child in dependents.get(p, []):
                            waiting_on[child] -= 1
                            if waiting_on[child] == 0 and child not in outcomes:
                                ready.append(child)
            except KeyboardInterrupt:
                interrupted = True
                logger.warning("Ctrl-C: stopping %d running step(s)", len(in_flight))
                for handle, outcome in backend.interrupt(list(in_flight)):
                    outcomes[in_flight.pop(handle)] = outcome
                for p in in_flight.values():
                    outcomes[p] = StepOutcome(Outcome.INTERRUPTED, error=LEFT_FOR_RERUN)
            finally:
                if not interrupted:
                    backend.shutdown()
                finish_cleanups()
                marker.end()
                sweep_dead_runs(self.prefix, run["run_id"])
        for p in pending:
            outcomes.setdefault(p, StepOutcome(Outcome.NOT_RUN))
        return outcomes, interrupted

    def _fail_downstream(self, failed: PlannedStep, dependents: dict, outcomes: dict, plan: Plan) -> None:
        from marin.execution.records import step_info
        from marin.execution.step_runner import StepOutcome, mark_dep_failed

        stack = list(dependents.get(failed, []))
        while stack:
            child = stack.pop()
            if child in outcomes:
                continue
            outcomes[child] = StepOutcome(Outcome.DEP_FAILED, error="a dependency failed")
            try:
                mark_dep_failed(child.output_path, step_info(child, plan))
            except Exception as exc:
                logger.warning("could not mark %s DEP_FAILED: %s", child.output_path, exc)
            stack.extend(dependents.get(child, []))

    def _task(
        self, p: PlannedStep, plan: Plan, force_run_failed: bool, rerun: bool, run: dict, reuse: bool, references: dict
    ) -> StepTask:
        from marin.execution.input_fingerprints import with_input_fingerprints
        from marin.execution.records import step_info
        from marin.execution.step_runner import StepTask

        resources = p.step.resources
        referenced = {d.output_path: references[d.step] for d in p.dependencies if d.step in references}
        config = instantiate_config(p, plan)
        return StepTask(
            name=p.name,
            output_path=p.output_path,
            fn=p.step.fn,
            config=config,
            info=with_input_fingerprints(step_info(p, plan, run), config),
            force_run_failed=force_run_failed,
            retries=resources.retries if resources else 0,
            rerun_succeeded=rerun,
            reuse=self.cache_from if reuse else None,
            references=[v for v in referenced.values() if v[1]],
            inputs_from={path: v[0] for path, v in referenced.items()},
        )

    def _progress(self, p: PlannedStep, outcome: StepOutcome, done: int, total: int, t_start: float) -> None:
        level = logging.INFO if outcome.ok else logging.ERROR
        detail = f" ({outcome.error})" if outcome.error else ""
        if total <= 50 or not outcome.ok or done == total or done % max(1, total // 20) == 0:
            logger.log(
                level,
                "[%d/%d %.1fs] %s %s%s",
                done,
                total,
                time.monotonic() - t_start,
                outcome.status,
                p.relative_output_path,
                detail,
            )


def recorded_fingerprints(done: list[PlannedStep], every: bool) -> dict[PlannedStep, str | None]:
    """The code fingerprints recorded in the `.executor_info` of succeeded steps (None where absent).

    With `every`, each step's record is read. Otherwise one step per step function is read first, and the
    other steps of a function only when that one's fingerprint differs from the code's now: a run of 10,000
    succeeded steps of one function reads one record, not 10,000 (on a bucket, one request each). What
    this can miss: steps of one function that ran with different code, the one read matching today's;
    `marin plan` and `--rerun_code_changed` read them all.
    """
    from marin.provenance.references import code_fingerprint

    if every:
        groups = [[p] for p in done]
    else:
        by_fn: dict = {}
        for p in done:
            by_fn.setdefault(_fn_key(p.step.fn), []).append(p)
        groups = list(by_fn.values())
    found: dict[PlannedStep, str | None] = {}
    changed: list[PlannedStep] = []
    for group, info in zip(groups, read_infos([g[0].output_path for g in groups]), strict=True):
        found[group[0]] = recorded = (info or {}).get("code_fingerprint")
        if len(group) > 1 and recorded is not None and recorded != code_fingerprint(group[0].step.fn):
            changed += group[1:]
    for p, info in zip(changed, read_infos([p.output_path for p in changed]), strict=True):
        found[p] = (info or {}).get("code_fingerprint")
    return found


def _redacted_json_line(body: dict) -> str:
    """`_json_line(body)` redacted as records are (`redaction.redacted_json`)."""
    from marin.provenance.redaction import redacted_json

    return redacted_json(body, _json_line)


def _json_line(body: dict) -> str:
    """One key-sorted JSON line (orjson: a run of 10,000 steps logs 10,000 outcomes)."""
    import orjson

    try:
        return orjson.dumps(body, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return json.dumps(body, sort_keys=True)


def _fn_key(fn) -> object:
    try:
        hash(fn)
    except TypeError:
        return id(fn)
    return fn


def _listed(names: list[str], limit: int) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def steps_to_run(decisions: list[StepDecision]) -> list[PlannedStep]:
    """The steps a run would run (or wait for): those whose plain inputs are checked before it starts."""
    return [d.planned for d in decisions if d.action in (Action.RUN, Action.WAIT)]


@contextlib.contextmanager
def _ctrl_c_deferred(defer: bool):
    """After a Ctrl-C, another one does not cut the run's line in `.runs.jsonl` short (main thread only)."""
    if not defer or threading.current_thread() is not threading.main_thread():
        yield
        return
    import signal

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def print_plan(decisions: list[StepDecision], prefix: str, file=None) -> None:
    """The dry run's table: every step, what would happen, and why."""
    from marin.execution.input_fingerprints import changed_input_lines
    from marin.execution.plan_reports import plan_report_lines

    file = file or sys.stdout
    if len(decisions) <= 200:
        width = max((len(d.planned.relative_output_path) for d in decisions), default=10)
        for d in decisions:
            print(f"  {d.action:<5} {d.planned.relative_output_path:<{width}}  {d.reason}", file=file)
    counts = Counter(d.action for d in decisions)
    summary = ", ".join(f"{n} {a}" for a, n in sorted(counts.items()))
    print(f"plan under {prefix}: {len(decisions)} steps ({summary})", file=file)
    reused = [d for d in decisions if d.action is Action.REUSE]
    if reused:
        sources = sorted({d.reuse_from[: -len(d.planned.relative_output_path) - 1] for d in reused if d.reuse_from})
        total = sum(d.reuse_bytes for d in reused)
        print(f"reuse: {len(reused)} steps, {total:,} bytes to verify and copy, from {', '.join(sources)}", file=file)
    for line in changed_input_lines(decisions) + plan_report_lines(decisions):
        print(line, file=file)


def print_summary(plan: Plan, decisions: list[StepDecision], outcomes: dict, record_path: str, file=None) -> None:
    """The end-of-run table: outcome, duration and output of each step, then where the record is."""
    from marin.execution.document_counts import kept_removed_notes

    file = file or sys.stdout
    counts = Counter(outcomes[d.planned].status for d in decisions)
    show = (
        [d for d in decisions if outcomes[d.planned].status is not Outcome.SKIPPED]
        if len(decisions) > 40
        else decisions
    )
    if show and len(show) <= 200:
        width = max(len(d.planned.relative_output_path) for d in show)
        ran = [d.planned.output_path for d in show if outcomes[d.planned].status is Outcome.SUCCESS]
        documents = kept_removed_notes(ran)
        print(f"  {'outcome':<13} {'time':>8}  {'step output':<{width}}", file=file)
        for d in show:
            o = outcomes[d.planned]
            took = f"{o.duration_s:.1f}s" if o.duration_s is not None else "-"
            err = f"  {o.error}" if o.error and o.status is not Outcome.DEP_FAILED else ""
            if o.status is Outcome.REUSED:
                err = f"  from {o.extra['reused_from']['path']}"
            note = documents.get(d.planned.output_path, "")
            print(f"  {o.status:<13} {took:>8}  {d.planned.relative_output_path:<{width}}{err}{note}", file=file)
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    print(f"{len(decisions)} steps: {summary}", file=file)
    if counts.keys() <= {Outcome.SKIPPED}:
        print("nothing to run: every step already succeeded", file=file)
    print_failures([(d.planned, outcomes[d.planned]) for d in decisions], file)
    print(f"record: {record_path}", file=file)


def print_failures(outcomes: list[tuple[PlannedStep, StepOutcome]], file=None, limit: int = 10) -> None:
    """For each FAILED step: its log and the log's last error line (what to read first, and where)."""
    from marin.execution.failure_logs import last_error_line, latest_log

    file = file or sys.stdout
    failed = [(p, o) for p, o in outcomes if o.status == Outcome.FAILED]
    for p, o in failed[:limit]:
        log = o.log_path or latest_log(p.output_path)
        print(f"FAILED {p.relative_output_path}", file=file)
        print(f"  log:        {log or '(none: it failed before its log was opened)'}", file=file)
        line = last_error_line(log)
        if line:
            print(f"  last error: {line}", file=file)
    if len(failed) > limit:
        print(f"... and {len(failed) - limit} more failed step(s)", file=file)
