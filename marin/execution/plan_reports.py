"""Further tables under `marin plan`'s, from layers the executor does not know.

The executor plans steps without knowing what any of them computes; what a step will cost is known only
to the library that defined it. A report is a function from the plan's decisions to lines of text,
registered once (the CLI and the experiment helpers register the cost report, `marin.tools.plan_cost`), and
`print_plan` prints every registered report's lines after its own table. A report that raises is named
in one line instead of failing the plan.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

PlanReport = Callable[[Sequence[Any]], list[str]]
"""Given the plan's `StepDecision`s (each with `.planned` and `.action`), the lines to print."""

_REPORTS: list[PlanReport] = []


def register_plan_report(report: PlanReport) -> None:
    """Adds `report` to what `marin plan` prints (once, however often it is registered)."""
    if report not in _REPORTS:
        _REPORTS.append(report)


def plan_report_lines(decisions: Sequence[Any]) -> list[str]:
    lines: list[str] = []
    for report in _REPORTS:
        try:
            lines += report(decisions)
        except Exception as e:  # a report must never break the plan it annotates
            lines.append(f"({getattr(report, '__qualname__', report)} failed: {type(e).__name__}: {e})")
    return lines
