#!/usr/bin/env python3
"""Side-by-side DAG-executor benchmark harness -- baseline: Marin's executor.

Run with the interpreter of the environment that holds the implementation
under test, e.g.

    $BENCH_VENV/bin/python bench/marin_baseline.py

Every measurement runs in a FRESH worker process (this same file with
``--worker PHASE``), so cold import, peak RSS and hash stability across
processes (different PYTHONHASHSEEDs) are measured honestly.

For each case (layered DAG of N steps, width 100, fan-in 2; pure chain of
depth D) and each repetition, with a fresh empty prefix directory:

  plan   : import, build the DAG objects, hash/plan all steps (no I/O), then the
           implementation's own dry run (fresh executor object).
  run    : first full run, every step executes (writes one small file).
  rerun  : no-op rerun, every step already SUCCESS, nothing executes
           (verified: no out.txt is rewritten).

Results: a human table on stderr and one JSON line on stdout (also written to
--out).  The implementation is selected with ``--adapter`` (a module name in
this directory or a path to a .py file); see docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)


# ----------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------


def load_adapter(spec: str):
    if spec.endswith(".py") or os.sep in spec:
        path = os.path.abspath(spec)
        name = os.path.splitext(os.path.basename(path))[0]
        mod_spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(mod_spec)
        mod_spec.loader.exec_module(mod)
        return mod
    return importlib.import_module(spec)


def proc_status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def out_files(paths):
    from dag import OUT_FILE  # noqa: PLC0415

    return [os.path.join(p, OUT_FILE) for p in paths]


def mtimes(paths):
    res = {}
    for f in out_files(paths):
        try:
            res[f] = os.stat(f).st_mtime_ns
        except FileNotFoundError:
            res[f] = None
    return res


# ----------------------------------------------------------------------------
# worker (one phase in a fresh process)
# ----------------------------------------------------------------------------


def worker(args) -> dict:
    import logging  # noqa: PLC0415

    logging.basicConfig(
        level=args.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    adapter = load_adapter(args.adapter)

    r: dict = {"phase": args.worker, "shape": args.shape, "n": args.n, "pid": os.getpid()}
    t0 = time.perf_counter()
    api = adapter.import_api()
    r["import_s"] = time.perf_counter() - t0
    r["rss_after_import_kb"] = proc_status_kb("VmRSS")
    if hasattr(adapter, "set_log_level"):
        adapter.set_log_level(args.log_level)
    if args.worker == "import":
        r["peak_rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return r

    import dag  # noqa: PLC0415

    t0 = time.perf_counter()
    steps = dag.build(api, args.shape, args.n, width=args.width, salt=args.salt)
    r["build_s"] = time.perf_counter() - t0
    roots = dag.sinks(steps, args.shape, args.width) if args.roots == "sinks" else steps
    prefix = args.prefix

    if args.worker == "plan":
        t0 = time.perf_counter()
        mapping = adapter.plan(api, roots, prefix)
        r["plan_s"] = time.perf_counter() - t0
        paths = [mapping[s] for s in steps]
        t0 = time.perf_counter()
        dmap = adapter.dry_run(api, roots, prefix)
        r["dry_run_s"] = time.perf_counter() - t0
        dpaths = [dmap[s] for s in steps]
        r["dry_run_paths_match_plan"] = dpaths == paths
        r["sample_paths"] = [os.path.relpath(p, prefix) for p in (paths[0], paths[len(paths) // 2], paths[-1])]
        # plan + dry run must not write anything at all under the (empty) prefix
        r["prefix_untouched"] = not os.path.exists(prefix) or not any(os.scandir(prefix))
    elif args.worker == "run":
        t0 = time.perf_counter()
        mapping = adapter.run(api, roots, prefix, max_concurrent=args.max_concurrent)
        r["run_s"] = time.perf_counter() - t0
        paths = [mapping[s] for s in steps]
        mt = mtimes(paths)
        r["outputs_present"] = sum(v is not None for v in mt.values())
        r["outputs_expected"] = len(paths)
    elif args.worker == "rerun":
        # paths come from a (cheap, untimed) plan so we can snapshot mtimes first
        pre_map = adapter.plan(api, roots, prefix)
        pre_paths = [pre_map[s] for s in steps]
        before = mtimes(pre_paths)
        t0 = time.perf_counter()
        mapping = adapter.run(api, roots, prefix, max_concurrent=args.max_concurrent)
        r["rerun_s"] = time.perf_counter() - t0
        paths = [mapping[s] for s in steps]
        after = mtimes(paths)
        r["steps_reexecuted"] = sum(1 for k, v in after.items() if before.get(k) != v)
        r["outputs_present"] = sum(v is not None for v in after.values())
    else:
        raise SystemExit(f"unknown phase {args.worker}")

    r["n_steps"] = len(paths)
    r["n_unique_paths"] = len(set(paths))
    r["paths_digest"] = dag.paths_digest(paths, prefix)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    r["peak_rss_kb"] = ru.ru_maxrss
    r["cpu_user_s"], r["cpu_sys_s"] = ru.ru_utime, ru.ru_stime
    r["loadavg_1m_end"] = os.getloadavg()[0]  # >~2 on this 2-core box means something else was running
    r["threads_at_end"] = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else None
    return r


# ----------------------------------------------------------------------------
# orchestrator
# ----------------------------------------------------------------------------


def spawn(args, phase, shape=None, n=None, prefix=None, logdir=None, tag="") -> dict:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        phase,
        "--adapter",
        args.adapter,
        "--width",
        str(args.width),
        "--salt",
        args.salt,
        "--roots",
        args.roots,
        "--log-level",
        args.log_level,
    ]
    if shape:
        cmd += ["--shape", shape, "--n", str(n), "--prefix", prefix]
    if args.max_concurrent:
        cmd += ["--max-concurrent", str(args.max_concurrent)]
    env = dict(os.environ)
    # Local runs: pin the storage prefix so nothing probes cloud metadata.
    env["MARIN_PREFIX"] = prefix or os.path.join(args.workdir, "prefix-unused")
    env.pop("PYTHONHASHSEED", None)  # each process gets a random str-hash seed
    log_path = os.path.join(logdir or args.workdir, f"{tag or phase}.log")
    t0 = time.perf_counter()
    with open(log_path, "w") as logf:
        try:
            p = subprocess.run(
                cmd, stdout=subprocess.PIPE, stderr=logf, text=True, env=env, cwd=args.workdir, timeout=args.timeout
            )
        except subprocess.TimeoutExpired:
            return {
                "phase": phase,
                "shape": shape,
                "n": n,
                "error": f"timeout>{args.timeout}s",
                "proc_wall_s": time.perf_counter() - t0,
                "log": log_path,
            }
    wall = time.perf_counter() - t0
    res = None
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[len("RESULT ") :])
    if p.returncode != 0 or res is None:
        tail = open(log_path).read()[-1500:]
        return {
            "phase": phase,
            "shape": shape,
            "n": n,
            "error": f"rc={p.returncode}",
            "log": log_path,
            "stderr_tail": tail,
            "proc_wall_s": wall,
        }
    res["proc_wall_s"] = wall
    res["log"] = log_path
    return res


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def machine_info() -> dict:
    info = {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["mem_total_kb"] = int(f.readline().split()[1])
    except OSError:
        pass
    return info


def orchestrate(args) -> dict:
    os.makedirs(args.workdir, exist_ok=True)
    adapter = load_adapter(args.adapter)
    out: dict = {
        "adapter": getattr(adapter, "NAME", args.adapter),
        "machine": machine_info(),
        "settings": {
            "width": args.width,
            "fanin": 2,
            "reps": args.reps,
            "roots": args.roots,
            "log_level": args.log_level,
            "max_concurrent": args.max_concurrent,
            "timeout_s": args.timeout,
            "salt": args.salt,
        },
        "import": {},
        "cases": [],
    }
    logdir = os.path.join(args.workdir, "logs")
    os.makedirs(logdir, exist_ok=True)

    # --- cold import --------------------------------------------------------
    imps = [spawn(args, "import", logdir=logdir, tag=f"import{i}") for i in range(args.import_reps)]
    ok = [r for r in imps if "error" not in r]
    out["import"] = {
        "import_s_each": [round(r["import_s"], 3) for r in ok],
        "import_s_median": med([r["import_s"] for r in ok]),
        "proc_wall_s_median": med([r["proc_wall_s"] for r in ok]),
        "rss_after_import_kb_median": med([r["rss_after_import_kb"] for r in ok]),
        "errors": [r for r in imps if "error" in r],
    }
    if hasattr(adapter, "describe"):
        try:
            out["impl"] = json.loads(
                subprocess.run(
                    [
                        sys.executable,
                        "-c",
                        f"import sys,json; sys.path.insert(0,{HERE!r}); "
                        f"from marin_baseline import load_adapter; print(json.dumps(load_adapter({args.adapter!r}).describe()))",
                    ],
                    capture_output=True,
                    text=True,
                    cwd=args.workdir,
                )
                .stdout.strip()
                .splitlines()[-1]
            )
        except Exception as e:  # noqa: BLE001
            out["impl"] = {"error": repr(e)}
    log(f"import: {out['import']['import_s_each']} s  (median {out['import']['import_s_median']:.3f}s)")

    # --- cases ----------------------------------------------------------------
    cases = [("layered", n) for n in args.sizes] + [("chain", d) for d in args.chain_depths]
    dead_shapes: set[str] = set()
    for shape, n in cases:
        if shape in dead_shapes:
            out["cases"].append({"shape": shape, "n": n, "skipped": "smaller size of this shape timed out/failed"})
            log(f"{shape} n={n}: SKIPPED (smaller size timed out/failed)")
            continue
        reps = []
        case_failed = False
        for rep in range(args.reps):
            prefix = os.path.join(args.workdir, f"{shape}-{n}-rep{rep}")
            shutil.rmtree(prefix, ignore_errors=True)
            os.makedirs(prefix)
            rr = {}
            for phase in ("plan", "run", "rerun"):
                r = spawn(args, phase, shape, n, prefix, logdir, tag=f"{shape}-{n}-rep{rep}-{phase}")
                rr[phase] = r
                msg = {
                    k: (round(v, 3) if isinstance(v, float) else v)
                    for k, v in r.items()
                    if k.endswith("_s") or k in ("error", "steps_reexecuted", "outputs_present", "peak_rss_kb")
                }
                log(f"{shape} n={n} rep={rep} {phase}: {msg}")
                if "error" in r:
                    case_failed = True
                    break
            reps.append(rr)
            if not args.keep:
                shutil.rmtree(prefix, ignore_errors=True)
            if case_failed:
                break
        out["cases"].append(summarize(shape, n, reps))
        if case_failed:
            dead_shapes.add(shape)
    return out


def summarize(shape, n, reps) -> dict:
    def col(phase, key):
        return [rr[phase].get(key) for rr in reps if phase in rr and "error" not in rr[phase]]

    digests = set()
    for rr in reps:
        for r in rr.values():
            if "paths_digest" in r:
                digests.add(r["paths_digest"])
    errors = [r for rr in reps for r in rr.values() if "error" in r]
    s = {
        "shape": shape,
        "n": n,
        "reps_completed": sum(
            1 for rr in reps if all(p in rr and "error" not in rr[p] for p in ("plan", "run", "rerun"))
        ),
        "build_s": med(col("plan", "build_s")),
        "plan_hash_s": med(col("plan", "plan_s")),
        "dry_run_s": med(col("plan", "dry_run_s")),
        "first_run_s": med(col("run", "run_s")),
        "noop_rerun_s": med(col("rerun", "rerun_s")),
        "first_run_each_s": col("run", "run_s"),
        "noop_rerun_each_s": col("rerun", "rerun_s"),
        "plan_hash_each_s": col("plan", "plan_s"),
        "proc_wall_run_s": med(col("run", "proc_wall_s")),
        "peak_rss_mb": {
            ph: (round(med(col(ph, "peak_rss_kb")) / 1024, 1) if col(ph, "peak_rss_kb") else None)
            for ph in ("plan", "run", "rerun")
        },
        "rss_after_import_mb": round(med(col("plan", "rss_after_import_kb")) / 1024, 1)
        if col("plan", "rss_after_import_kb")
        else None,
        "steps_reexecuted_on_rerun": col("rerun", "steps_reexecuted"),
        "outputs_present_after_run": col("run", "outputs_present"),
        "n_unique_paths": med(col("plan", "n_unique_paths")),
        "dry_run_paths_match_plan": col("plan", "dry_run_paths_match_plan"),
        "prefix_untouched_by_plan": col("plan", "prefix_untouched"),
        "hash_stable_across_processes": len(digests) == 1,
        "paths_digests": sorted(digests),
        "n_processes_compared": sum(1 for rr in reps for r in rr.values() if "paths_digest" in r),
        "sample_paths": (col("plan", "sample_paths") or [None])[0],
        "loadavg_1m_end_run": col("run", "loadavg_1m_end"),
        "cpu_s_run": [
            round(u + s_, 2) for u, s_ in zip(col("run", "cpu_user_s"), col("run", "cpu_sys_s"), strict=True)
        ],
        "errors": errors,
    }
    return s


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def fmt(x, nd=3):
    return "-" if x is None else (f"{x:.{nd}f}" if isinstance(x, float) else str(x))


def print_table(out):
    lines = [
        "",
        f"adapter={out['adapter']}  cpus={out['machine'].get('cpus')}  python={out['machine'].get('python')}",
        f"cold import: median {fmt(out['import']['import_s_median'])} s  each={out['import']['import_s_each']}",
        "| shape | N | build s | plan/hash s | dry-run s | first run s | no-op rerun s | peak RSS MB (plan/run/rerun) | hash stable | reruns exec'd |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in out["cases"]:
        if "skipped" in c:
            lines.append(f"| {c['shape']} | {c['n']} | skipped: {c['skipped']} |||||||| ")
            continue
        rss = c["peak_rss_mb"]
        lines.append(
            f"| {c['shape']} | {c['n']} | {fmt(c['build_s'])} | {fmt(c['plan_hash_s'])} | {fmt(c['dry_run_s'])} | "
            f"{fmt(c['first_run_s'])} | {fmt(c['noop_rerun_s'])} | {rss['plan']}/{rss['run']}/{rss['rerun']} | "
            f"{c['hash_stable_across_processes']} ({c['n_processes_compared']} procs) | {c['steps_reexecuted_on_rerun']} |"
        )
        if c["errors"]:
            lines.append(f"|  errors: {[e.get('error') for e in c['errors']]} (see {c['errors'][0].get('log')}) |")
    print("\n".join(lines), file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--adapter", default="marin_adapter", help="adapter module name (in bench dir) or .py path")
    ap.add_argument("--sizes", default="100,1000,10000", help="layered DAG sizes N (multiples of --width)")
    ap.add_argument("--chain-depths", default="200", help="pure-chain depths ('' to skip)")
    ap.add_argument("--width", type=int, default=100)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--import-reps", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=300.0, help="per worker process, seconds")
    ap.add_argument("--workdir", default=os.path.join(os.environ.get("BENCH_WORK", tempfile.gettempdir()), "runs"))
    ap.add_argument("--out", default=None, help="also write the JSON result here")
    ap.add_argument(
        "--roots",
        choices=["all", "sinks"],
        default="all",
        help="pass every step to the executor (topo order) or only the sinks",
    )
    ap.add_argument("--max-concurrent", type=int, default=None, help="executor concurrency (None = impl default)")
    ap.add_argument("--log-level", default="WARNING")
    ap.add_argument("--salt", default="v0")
    ap.add_argument("--keep", action="store_true", help="keep prefix dirs after each rep")
    # worker-only
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--shape", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--prefix", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        res = worker(args)
        print("RESULT " + json.dumps(res), flush=True)
        return

    args.sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    args.chain_depths = [int(x) for x in args.chain_depths.split(",") if x.strip()]
    args.workdir = os.path.abspath(args.workdir)
    t0 = time.perf_counter()
    out = orchestrate(args)
    out["total_wall_s"] = time.perf_counter() - t0
    print_table(out)
    line = json.dumps(out)
    if args.out:
        with open(args.out, "w") as f:
            f.write(line + "\n")
    print(line, flush=True)


if __name__ == "__main__":
    main()
