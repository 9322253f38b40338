"""The forecast chart reads: its y-range follows the rungs, the forecast and the measurement; an interval off
that range is clipped and marked; an unconstrained fit's notes are on the page; log-log on request."""

from __future__ import annotations

import re

from marin.browser.ladder import ladder_chart, ladder_summary

UNCONSTRAINED = {
    "metric": "loss",
    "fit": {"a": 40.0, "b": 0.1, "c": 6.3e-23},
    "rungs": [
        {"flops": 3e11, "loss": 4.62},
        {"flops": 6e11, "loss": 4.41},
        {"flops": 1.2e12, "loss": 4.17},
        {"flops": 2.5e12, "loss": 3.93},
    ],
    "prediction": {"flops": 2.5e13, "loss": 3.56, "interval": [3.51, 342.0], "confidence": 0.95},
    "notes": ["UNCONSTRAINED: the irreducible loss c = 6.3e-23 sits on its bound (0)"],
}


def _ticks(svg: str) -> list[float]:
    return [
        float(t)
        for t in re.findall(r'<text class="tick" x="6\d(?:\.\d)?" y="[\d.]+" text-anchor="end">([\d.]+)</text>', svg)
    ]


def test_the_y_range_follows_rungs_and_forecast_and_the_interval_is_clipped_and_marked():
    svg = ladder_chart(UNCONSTRAINED, [{"measured_flops": 2.5e13, "measured": 3.6}])
    ticks = _ticks(svg)
    assert ticks and max(ticks) < 5.0 and min(ticks) > 3.0, ticks
    assert "95% interval (clipped; full 3.51 – 342)" in svg
    assert svg.count('class="marker clip-mark"') == 1 and "the interval runs on to 342" in svg


def test_an_interval_inside_the_range_is_drawn_whole():
    fine = {**UNCONSTRAINED, "prediction": {**UNCONSTRAINED["prediction"], "interval": [3.5, 3.62]}}
    svg = ladder_chart(fine)
    assert "clipped" not in svg and "clip-mark" not in svg and 'class="band interval"' in svg


def test_the_page_says_an_unconstrained_fit_loudly_and_draws_log_log_on_request():
    html = ladder_summary(UNCONSTRAINED, 0, "forecast/x")
    assert '<div class="note unconstrained"><b>UNCONSTRAINED: the irreducible loss c' in html
    linear, loglog = ladder_chart(UNCONSTRAINED), ladder_chart(UNCONSTRAINED, log_y=True)
    assert linear != loglog and _ticks(loglog)


def test_an_isoflop_forecasts_loss_interval_off_the_range_is_clipped_and_its_legends_sit_under_the_plots():
    from marin.browser.ladder import isoflop_charts

    budgets = [
        {"flops": f, "usable": True, "params_opt": p, "loss_opt": v, "rungs": []}
        for f, p, v in ((1e10, 2e4, 4.8), (3e10, 3.5e4, 4.5), (1e11, 6e4, 4.2))
    ]
    forecast = {
        "kind": "isoflop",
        "budgets": budgets,
        "laws": {
            "params_opt": {"k": 0.5, "exponent": 0.45},
            "loss_opt": {"kind": "a*C^-b+c", "a": 60, "b": 0.11, "c": 0},
        },
        "prediction": {"flops": 1e12, "params": 1.4e5, "loss": 3.6, "interval": {"loss": [3.5, 300.0]}},
    }
    svg = isoflop_charts(forecast, [])
    loss = svg[svg.index('class="plot ladder-plot"') :]
    assert "interval (clipped; full 3.5 – 300)" in loss and loss.count('class="marker clip-mark"') == 1
    heights = [int(h) for h in re.findall(r'<svg class="plot[^"]*"[^>]* height="(\d+)"', svg)]
    assert len(heights) == 3 and heights[0] > 320 and heights[1] > 280, "each legend adds rows under its plot"


def test_a_flagged_rung_is_named_on_the_page_drawn_apart_and_the_forecast_with_it_given_beside():
    reason = "off the law: held-out loss 3.2295 against 2.8353 predicted by the other rungs (+0.39, +21 noise units)"
    rungs = [dict(r, flags=[]) for r in UNCONSTRAINED["rungs"]]
    rungs.insert(2, {"flops": 9e11, "loss": 4.9, "evaluation": "../../evaluation/d48", "flags": [reason]})
    flagged = {
        **UNCONSTRAINED,
        "rungs": rungs,
        "notes": [],
        "flagged_rungs": [{"evaluation": "../../evaluation/d48", "flops": 9e11, "reasons": [reason]}],
        "prediction_other": {"rungs": "every rung, the flagged included", "loss": 3.71, "interval": [3.6, 3.8]},
    }
    html = ladder_summary(flagged, 0, "forecast/x")
    assert f'<div class="note flagged-rung"><b>FLAGGED rung ../../evaluation/d48: {reason}' in html
    assert "with every rung, the flagged included: 3.71 (3.6 – 3.8)" in html
    svg = ladder_chart(flagged)
    assert svg.count("<title>flagged rung @ 9e11 FLOPs") == 1 and "flagged rungs (off their family)" in svg
    assert "flagged" not in ladder_chart(UNCONSTRAINED)
