"""What a run was estimated to cost beside what it took: a step's `cost.json`, and an experiment's totals.

A train or evaluate step writes `cost.json` when it finishes: the estimate for the work it did (FLOPs from
the model config, device-seconds at an assumed MFU of the named device's peak, as `marin plan` prints it)
and what it measured (the step's wall-clock seconds times the devices it asked for, the FLOP/s and MFU
that realises, measured over estimated). The step page shows both side by side; the experiment page adds
the steps up, so a lab sees whether its assumed MFU holds before it plans the big run with it. Only the
record's train and evaluate steps that finished are read (one small file each).
"""

from __future__ import annotations

import json
from typing import Any

from marin.browser.html import error_box, esc, fmt_duration, kv_table, note, table, url_step

COST_FILE = "cost.json"
MAX_COST_BYTES = 1 << 20
MODEL_FLOPS = "FLOPs (model)"
"""`cost.json`'s `flops`: the model's own count (3x the forward pass for training), as `marin plan` labels it."""
SIX_ND_FLOPS = "FLOPs (6·N·D)"
"""`cost.json`'s `flops_6nd` (and an evaluation's `results.json` `flops`), labelled as the leaderboard labels it."""


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _g(v: Any, unit: str = "") -> str:
    n = _num(v)
    return "—" if n is None else f"{n:.3g}{unit}"


def _ratio(v: Any) -> str:
    n = _num(v)
    if n is None:
        return "—"
    word = "slower" if n > 1 else "faster"
    return f'×{n:.3g} <span class="muted">({word} than estimated)</span>' if n != 1 else "×1"


def read_cost(fs, path: str) -> dict | None:
    """The cost record at `path`, None when there is none; a malformed one raises ValueError naming the file."""
    try:
        raw = fs.cat_file(path, start=0, end=MAX_COST_BYTES)
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise ValueError(f"{COST_FILE}: not JSON ({e})") from e
    if not isinstance(data, dict) or not isinstance(data.get("estimate"), dict):
        raise ValueError(f"{COST_FILE}: expected an object with 'estimate' and 'measured'")
    return data


def cost_summary(fs, full: str, size: int) -> str:
    """The step page's section: estimate and measurement of one train or evaluate step."""
    cost = read_cost(fs, full)
    if cost is None:
        return note("no cost recorded")
    est = cost.get("estimate") or {}
    got = cost.get("measured") if isinstance(cost.get("measured"), dict) else {}
    device = f"{_g(est.get('devices'))} × {esc(est.get('device'))}"
    rows = [
        ["device-seconds", _g(est.get("device_seconds"), " s"), _g(got.get("device_seconds"), " s")],
        [
            "wall clock",
            fmt_duration(_num(est.get("wall_hours")) * 3600 if _num(est.get("wall_hours")) is not None else None),
            fmt_duration(_num(got.get("wall_seconds"))),
        ],
        [
            "FLOP/s per device",
            f"{_g((_num(est.get('peak_flops_per_s')) or 0) * (_num(est.get('mfu')) or 0))} "
            f'<span class="muted">(peak {_g(est.get("peak_flops_per_s"))} × MFU {_g(est.get("mfu"))})</span>',
            _g(got.get("realised_flops_per_s")),
        ],
        ["MFU", _g(est.get("mfu")), _g(got.get("realised_mfu"))],
    ]
    if _num(got.get("step_seconds")) is not None:
        rows.append(
            [
                "training steps alone",
                "",
                f"{fmt_duration(got['step_seconds'])}: {_g(got.get('step_tokens_per_s'))} tokens/s, "
                f"MFU {_g(got.get('step_mfu'))}",
            ]
        )
    work = (
        f"{_g(est.get('flops'))} {MODEL_FLOPS}, {_g(est.get('flops_6nd'))} {SIX_ND_FLOPS}, "
        f"over {_g(est.get('tokens'))} tokens"
    )
    head = [("work", work), ("devices", device), ("measured / estimated", _ratio(got.get("estimate_ratio")))]
    if cost.get("kind") == "train" and _num(cost.get("steps_run")) is not None:
        head.append(("steps run", f"{cost['steps_run']:g} of {_g(cost.get('num_train_steps'))} (this attempt)"))
    return kv_table(head) + table(["", "estimate", "measured"], rows, cls="data cost", sortable=False)


def is_costed(record: dict) -> bool:
    """Whether a step (its record entry) is a train or evaluate step, the steps that write `cost.json`."""
    fn = str(record.get("fn") or "")
    return "train" in fn or "evaluat" in fn


def experiment_costs(root, index: int, exp_rel: str, steps) -> str:
    """The experiment page's cost table: each finished train/evaluate step's estimate against its measurement,
    and the totals."""
    rows, totals, errors = [], {"estimate": 0.0, "measured": 0.0, "flops": 0.0}, []
    for s in steps:
        if s.state != "SUCCESS" or not is_costed(s.record):
            continue
        try:
            cost = read_cost(root.fs, root.join(f"{s.rel}/{COST_FILE}"))
        except ValueError as e:
            errors.append(f"{s.name}: {e}")
            continue
        if cost is None:
            continue
        est, got = cost["estimate"], cost.get("measured") or {}
        e_s, m_s = _num(est.get("device_seconds")), _num(got.get("device_seconds"))
        totals["estimate"] += e_s or 0.0
        totals["measured"] += m_s or 0.0
        totals["flops"] += _num(est.get("flops")) or 0.0
        rows.append(
            [
                (f'<a href="{esc(url_step(index, s.rel, exp=exp_rel))}">{esc(s.name)}</a>', s.name),
                esc(cost.get("kind")),
                (_g(est.get("flops")), _num(est.get("flops")) or 0),
                f"{_g(est.get('devices'))} {esc(est.get('device'))}",
                (_g(e_s, " s"), e_s or 0),
                (_g(m_s, " s"), m_s or 0),
                (_ratio(got.get("estimate_ratio")), _num(got.get("estimate_ratio")) or 0),
                (_g(got.get("realised_mfu")), _num(got.get("realised_mfu")) or 0),
            ]
        )
    if not rows and not errors:
        return ""
    ratio = totals["measured"] / totals["estimate"] if totals["estimate"] > 0 else None
    summary = (
        f'<div class="cost-total">total over {len(rows)} steps: {totals["flops"]:.3g} {MODEL_FLOPS}, device '
        f"time estimated <b>{fmt_duration(totals['estimate'])}</b>, measured <b>{fmt_duration(totals['measured'])}</b> "
        f"({_ratio(ratio)})</div>"
    )
    return (
        '<h2>Cost <span class="muted">estimate against measured</span></h2>'
        + "".join(error_box(e) for e in errors)
        + summary
        + table(
            ["step", "kind", MODEL_FLOPS, "devices", "est. device-s", "measured device-s", "measured / est.", "MFU"],
            rows,
            cls="data costs",
        )
    )
