"""The `marin` command: run, plan, explain, status, rerun, verify, lineage, browse, submit.

marin run experiments/tutorial/hello_world.py          # or --prefix DIR, gs://bucket/path, s3://bucket/path
marin plan experiments/tutorial/tiny_lm.py
marin explain experiments/tutorial/tiny_lm.py tokenized/shakespeare
marin status local_store
marin rerun local_store/experiments/tiny_lm-*.json --prefix again/
marin verify local_store/experiments/tiny_lm-*.json again/experiments/tiny_lm-*.json
marin lineage local_store/tokenized/shakespeare-* --prefix local_store --prefix gs://other-lab/prefix
marin browse local_store
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys


def _run_script(script: str, args: list[str]) -> None:
    if not os.path.exists(script):
        raise SystemExit(f"error: no such experiment script: {script}")
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")


def _with_steps(script: str, args: list[str], action) -> int:
    """Runs the script with executor_main captured, so `action(steps, description, cfg, experiment_name)` sees
    its DAG (`experiment_name`: what the script passes to executor_main, which names its record; None: the
    script's own name).

    The script sees the same flags (`--prefix` above all), so one that reads them in its own `main`
    (the ladders look up their forecast under the prefix) plans what a run with them would run."""
    from marin.execution.main import capture_steps, configure_logging, parse_main_args

    cfg = parse_main_args(args)
    configure_logging()
    result: dict = {}

    def hook(steps, description, experiment_name=None):
        result["rc"] = action(steps, description, cfg, experiment_name)
        return {}

    previous = capture_steps(hook)
    exited: SystemExit | None = None
    try:
        _run_script(script, args)
    except SystemExit as exc:
        exited = exc
    finally:
        capture_steps(previous)
    if "rc" not in result:
        how = f" (it exited with status {exited.code!r} first)" if exited is not None else ""
        raise SystemExit(
            f"error: {script} did not call executor_main(steps=...){how}: marin plan and explain read an "
            "experiment's steps from its call under `if __name__ == '__main__':`"
        )
    return result["rc"]


def _reported(action):
    """`action` with a bad plan (a PlanError: unknown step, a --run_only that matches nothing, a cycle)
    reported as one `error:` line and exit status 2, as `marin run` does, instead of a traceback."""

    def run(steps, description, cfg, experiment_name=None):
        from marin.execution.planning import PlanError

        try:
            return action(steps, description, cfg, experiment_name)
        except PlanError as exc:
            if cfg.traceback:
                import traceback

                traceback.print_exc()
            print(f"error: {exc}", file=sys.stderr)
            return 2

    return run


def cmd_run(ns) -> int:
    _run_script(ns.script, ns.args)
    return 0


def cmd_plan(ns) -> int:
    from marin.execution.executor import Executor, print_plan, steps_to_run
    from marin.execution.input_check import check_inputs
    from marin.execution.main import cache_from_of, resolve_prefix
    from marin.storage import exists
    from marin.tools.plan_cost import register

    register()

    def action(steps, description, cfg, experiment_name):
        executor = Executor(
            resolve_prefix(cfg.prefix),
            backend="local",
            cache_from=cache_from_of(cfg),
            experiment_name=experiment_name,
        )
        plan = executor.plan_dag(steps)
        decisions = executor.decide(
            plan, cfg.run_only, cfg.force_run_failed, cfg.rerun_code_changed, check_code=True, explain_new=True
        )
        check_inputs(steps_to_run(decisions))
        print_plan(decisions, executor.prefix)
        record = executor.record_path(plan)
        if exists(record):
            print(f"record: {record}")
        else:
            print(f"record: none yet (a run writes {record})")
        return 0

    return _with_steps(ns.script, ns.args, _reported(action))


def cmd_explain(ns) -> int:
    from marin.execution.main import resolve_prefix
    from marin.execution.planning import plan_steps
    from marin.tools.explain import explain_step

    def action(steps, description, cfg, experiment_name):
        prefix = resolve_prefix(cfg.prefix)
        if "://" not in prefix:
            prefix = os.path.abspath(prefix)
        plan = plan_steps(steps, prefix)
        print(explain_step(plan.find(ns.step), prefix))
        return 0

    return _with_steps(ns.script, ns.args, _reported(action))


def cmd_status(ns) -> int:
    from marin.tools.inspect_prefix import print_status

    return print_status(ns.prefix)


def cmd_rerun(ns) -> int:
    from marin.tools.rerun import rerun_main

    return rerun_main(ns.record, ns.prefix, ns.args, code=ns.code)


def cmd_verify(ns) -> int:
    from marin.tools.verify import verify_main

    return verify_main(
        ns.a,
        ns.b,
        ns.steps,
        rehash=not ns.manifests_only,
        rtol=ns.rtol,
        atol=ns.atol,
        show_volatile=ns.show_volatile,
    )


def cmd_lineage(ns) -> int:
    from marin.browser.lineage import lineage_main

    def full(p: str) -> str:
        return p if "://" in p else os.path.abspath(p)

    return lineage_main(full(ns.path), [full(p) for p in ns.prefix or []])


def cmd_browse(ns) -> int:
    from marin.browser.app import serve

    try:
        serve(ns.roots, host=ns.host, port=ns.port, allow_remote=ns.allow_remote, extra_hosts=ns.allowed_host)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    return 0


def cmd_submit(ns) -> int:
    from marin.tools.submit import submit_main

    return submit_main(ns.address, ns.job, wait=ns.wait)


def _flags_epilog(title: str, after: str = "SCRIPT") -> str:
    from marin.execution.main import run_flags_help

    return f"{title}, after {after}:\n{run_flags_help()}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="marin", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "run",
        help="run an experiment script (same as `python SCRIPT ...`)",
        epilog=_flags_epilog("the experiment's flags"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("script")
    p.set_defaults(fn=cmd_run, args=[])

    p = sub.add_parser(
        "plan",
        help="what would run, and why",
        epilog=_flags_epilog(
            "the experiment's flags (plan reads --prefix, --run_only, --force_run_failed, --rerun_code_changed, "
            "--cache_from, --cache_mode and --cache_code_changed)"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("script")
    p.set_defaults(fn=cmd_plan, args=[])

    p = sub.add_parser(
        "explain",
        help="why a step's hash is what it is",
        epilog=_flags_epilog("the experiment's flags (explain reads --prefix)"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("script")
    p.add_argument("step", help="a step name, e.g. tokenized/shakespeare in experiments/tutorial/tiny_lm.py")
    p.set_defaults(fn=cmd_explain, args=[])

    p = sub.add_parser(
        "status",
        help="the experiments under a prefix and their steps' states",
        description="List the experiment records under PREFIX and, for each, how many of its steps are SUCCESS, "
        "FAILED, RUNNING or not run yet, then each step's state and output folder. Reads only; writes nothing.",
    )
    p.add_argument("prefix", help="a folder, gs://bucket/path or s3://bucket/path (the --prefix of the runs)")
    p.set_defaults(fn=cmd_status)

    p = sub.add_parser(
        "rerun",
        help="rerun an experiment from its record into another prefix",
        description="Rebuild every step of an experiment record (fn by import or script path, config by its "
        "dataclass type) and run it into another prefix, with the record's hashes. It warns before running "
        "anything when the code or packages here differ from the record's.",
        epilog=_flags_epilog("the executor's flags (all but --prefix)", after="RECORD"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("record", help="path or URL of <prefix>/experiments/<name>-<hash>.json")
    p.add_argument("--prefix", required=True, help="where the rerun's outputs and record go")
    p.add_argument(
        "--code",
        choices=("recorded", "checkout"),
        default="recorded",
        help="recorded (default): run the record's code; when this checkout differs from it and the record "
        "stored a patch, run from a copy of the recorded commit with the stored patch applied. "
        "checkout: run this checkout's code as it is (warning when it differs)",
    )
    p.set_defaults(fn=cmd_rerun, args=[])

    p = sub.add_parser(
        "verify",
        help="compare two runs of one experiment, step by step",
        description="Compare two runs step by step, file by file. By default every file of both runs is hashed "
        "again and checked against its own step's manifest (a file changed after SUCCESS is named).",
    )
    p.add_argument("a", help="a record, or a prefix")
    p.add_argument("b", help="a record, or a prefix")
    p.add_argument("--steps", default=None, help="only steps whose names match this regex")
    p.add_argument(
        "--manifests_only",
        action="store_true",
        help="compare the manifests without hashing the files again (fast; trusts that nothing changed since)",
    )
    from marin.tools.verify_values import DEFAULT_ATOL, DEFAULT_RTOL

    p.add_argument(
        "--rtol",
        type=float,
        default=DEFAULT_RTOL,
        help="tensors, metrics and JSON numbers this close (relative) are 'close', not 'differs' "
        "(exit 3 when nothing else differs; 0 compares bits)",
    )
    p.add_argument("--atol", type=float, default=DEFAULT_ATOL, help="the absolute part of that tolerance")
    p.add_argument(
        "-v",
        "--show_volatile",
        "--show-volatile",
        action="store_true",
        help="list, under each step, the volatile files (timings, ledgers) that are not compared byte for byte, "
        "and whether their bytes differ",
    )
    p.set_defaults(fn=cmd_verify)

    p = sub.add_parser(
        "lineage",
        help="what a step output was made from, and what used it",
        description="Walk a step output's inputs down to its downloads (source, revision, manifest digests, and "
        "where a reused output was verified from), then list every step of the experiment records under the "
        "prefixes given that consumed it, directly or downstream.",
    )
    p.add_argument("path", help="a step's output folder, e.g. local_store/tokenized/shakespeare-1a2b3c4d")
    p.add_argument(
        "--prefix",
        action="append",
        default=None,
        help="a lab's prefix to search for users (repeatable; default: the output's own prefix)",
    )
    p.set_defaults(fn=cmd_lineage)

    p = sub.add_parser(
        "browse",
        help="a read-only web page over outputs",
        description="Serve a read-only web browser over the experiments, steps, files and logs under ROOTS (local "
        "folders, gs:// or s3:// prefixes). It binds 127.0.0.1 and answers only requests addressed to the names "
        "it binds (127.0.0.1, localhost, --host, --allowed_host).",
    )
    p.add_argument("roots", nargs="+", metavar="ROOT", help="a local folder or a gs:// / s3:// prefix")
    p.add_argument("--host", default="127.0.0.1", help="the address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="the port to bind (default: 8765; 0 picks a free one)")
    p.add_argument("--allow-remote", action="store_true", help="allow binding to a non-loopback host")
    p.add_argument(
        "--allowed_host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests whose Host header names NAME (e.g. a tunnel's or a proxy's name); repeatable",
    )
    p.set_defaults(fn=cmd_browse)

    p = sub.add_parser("submit", help="submit an experiment to a Ray cluster as a job")
    p.add_argument("--address", required=True, help="the Ray dashboard address, e.g. http://127.0.0.1:8265")
    p.add_argument("--wait", action="store_true", help="follow the job's logs until it ends")
    p.add_argument("job", nargs=argparse.REMAINDER, help="-- python experiments/x.py [flags]")
    p.set_defaults(fn=cmd_submit)
    return parser


PASS_THROUGH = ("run", "plan", "explain", "rerun")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if argv and argv[0] in PASS_THROUGH:
        ns, extra = parser.parse_known_args(argv)
        ns.args = [a for a in extra if a != "--"]
    else:
        ns = parser.parse_args(argv)
    if getattr(ns, "job", None) and ns.job[:1] == ["--"]:
        ns.job = ns.job[1:]
    from marin.stepkit.errors import ConfigError, report

    try:
        return ns.fn(ns) or 0
    except KeyboardInterrupt:
        from marin.execution.interrupts import interrupted_exit_code

        return interrupted_exit_code()
    except ConfigError as exc:
        report(exc)
        return 2


if __name__ == "__main__":
    sys.exit(main())
