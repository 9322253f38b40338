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
