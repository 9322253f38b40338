"""The forecast chart as a researcher sees it: real headless Chromium, geometry read from the rendered page.

The forecast is the tutorial ladder's unconstrained one (four rungs between 3.9 and 4.7 nats, a forecast of
3.56 whose 95 % interval runs to 342): a y-axis spanning the interval would lay the rungs flat on the floor.
The page must instead fit the y-range to the rungs, the forecast and the measured target, clip the interval
to it and mark the clipping, keep the legend off what is drawn, and draw log-log on `?loglog=1`. Element
boxes come from `getBoundingClientRect`; screenshots land in test-artifacts/browser/forecast-*.png.
"""

from __future__ import annotations

import json
import math
import os

import pytest

from marin.browser.charts import fmt_value
from marin.browser.html import url_step
from marin.evaluation.forecast import fit_law, target_cost
from tests.browser_support import artifacts_dir, served_page

STEP = "forecast/tiny-ladder-1a2b3c4d"
RUNGS = [(3e11, 4.62), (6e11, 4.41), (1.2e12, 4.17), (2.5e12, 3.93)]
TARGET = 2.5e13


def unconstrained_forecast() -> dict:
    """The forecast step's own fit of the rungs (its c lands on the bound 0), with the interval the tutorial
    ladder's forecast once had (up to 342 nats: the fit's covariance allowed almost any curve)."""
    fit = fit_law([f for f, _ in RUNGS], [v for _, v in RUNGS])
    predicted = float(fit.predict(TARGET))
    return {
        "metric": "loss",
        "law": "loss(C) = a * C^(-b) + c, C = 6 * N * D FLOPs",
        "fit": {"a": fit.a, "b": fit.b, "c": fit.c, "reference_flops": fit.reference_flops},
        "rungs": [
            {"flops": f, "loss": v, "evaluation": f"../../evaluation/rung-{i}"} for i, (f, v) in enumerate(RUNGS)
        ],
        "prediction": {
            "flops": TARGET,
            "loss": predicted,
            "interval": [predicted - 0.03, 342.0],
            "confidence": 0.95,
            "cost": target_cost(TARGET),
        },
        "measured": {"flops": TARGET, "loss": predicted + 0.06},
        "constrained": False,
        "notes": [f"UNCONSTRAINED: the irreducible loss c = {fit.c:.3g} sits on its bound (0)"],
    }


FORECAST = unconstrained_forecast()

GEOMETRY = """() => {
  const svg = document.querySelector('svg.ladder-plot');
  const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const mid = e => { const r = e.getBoundingClientRect(); return (r.top + r.bottom) / 2; };
  const markers = c => [...svg.querySelectorAll('circle.marker.' + c)].map(box);
  return {
    plot: box(svg.querySelector('rect.bg')),
    yticks: [...svg.querySelectorAll('text.tick[text-anchor="end"]')].map(t => [Number(t.textContent), mid(t)]),
    rungs: markers('rung'), forecast: markers('forecast'), measured: markers('measured'),
    clip: markers('clip-mark'),
    band: [...svg.querySelectorAll('polygon.band')].map(box),
    legend: [...svg.querySelectorAll('text.legend')].map(t => ({text: t.textContent, box: box(t)})),
    law: [...svg.querySelectorAll('polyline.line.fit')].map(p => {
      const m = p.getScreenCTM();
      return [...p.points].map(q => [m.a * q.x + m.c * q.y + m.e, m.b * q.x + m.d * q.y + m.f]);
    }),
    cost: (document.querySelector('.forecast-line.cost') || {}).textContent || '',
  };
}"""


def _inside(inner, outer, slack=0.5) -> bool:
    return (
        inner[0] >= outer[0] - slack
        and inner[1] >= outer[1] - slack
        and inner[2] <= outer[2] + slack
        and inner[3] <= outer[3] + slack
    )


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _center_y(box) -> float:
    return (box[1] + box[3]) / 2


@pytest.fixture(scope="module")
def forecast_lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("forecast-lab")
    step = root / STEP
    step.mkdir(parents=True)
    (step / "forecast.json").write_text(json.dumps(FORECAST, indent=2))
    return str(root)


@pytest.fixture(scope="module")
def shots(forecast_lab):
    """(linear geometry, log-log geometry), each read after its screenshot was taken."""
    out = artifacts_dir()
    taken = {}
    with served_page([forecast_lab], viewport=(1400, 1000)) as (url, page, errors):
        for name, query in (("linear", ""), ("loglog", "?loglog=1")):
            page.goto(url + url_step(0, STEP) + query)
            chart = page.locator("svg.ladder-plot")
            chart.wait_for()
            chart.scroll_into_view_if_needed()
            chart.screenshot(path=str(out / f"forecast-{name}.png"))
            page.screenshot(path=str(out / f"forecast-{name}-page.png"), full_page=True)
            taken[name] = page.evaluate(GEOMETRY)
        assert errors == []
    assert os.path.getsize(out / "forecast-linear.png") > 5_000
    return taken


def _y_of_value(g, value: float, log: bool) -> float:
    """The pixel row of `value` on the y-axis, interpolated from two rendered tick labels."""
    (v0, y0), (v1, y1) = g["yticks"][0], g["yticks"][-1]
    f = math.log10 if log else float
    return y0 + (f(value) - f(v0)) / (f(v1) - f(v0)) * (y1 - y0)


def test_the_y_range_follows_the_rungs_forecast_and_measurement_not_the_interval(shots):
    g = shots["linear"]
    plot_h = g["plot"][3] - g["plot"][1]
    ticks = [v for v, _ in g["yticks"]]
    assert ticks and 2.5 < min(ticks) and max(ticks) <= 5.0, f"the y-axis reads {ticks}"
    assert all(round(t * 4) == t * 4 for t in ticks), f"round tick values: {ticks}"
    assert len(g["rungs"]) == 4 and len(g["forecast"]) == 1 and len(g["measured"]) == 1
    for marker in g["rungs"] + g["forecast"] + g["measured"]:
        assert _inside(marker, g["plot"]), f"a point outside the plot: {marker} vs {g['plot']}"
    rows = [_center_y(r) for r in g["rungs"]]
    assert max(rows) - min(rows) > 0.25 * plot_h, f"the rungs lie flat: {rows} in a plot {plot_h:.0f} px high"
    assert rows == sorted(rows), "a falling loss draws lower (larger y) to the right"
    for (flops, value), row in zip(RUNGS, rows, strict=True):
        assert abs(_y_of_value(g, value, log=False) - row) < 1.5, f"rung {flops:g} is drawn at the wrong height"


def test_the_interval_off_the_range_is_clipped_to_the_plot_and_marked_at_its_edge(shots):
    g = shots["linear"]
    (band,) = g["band"]
    assert _inside(band, g["plot"]), f"the interval leaves the plot: {band} vs {g['plot']}"
    (mark,) = g["clip"]
    assert abs(_center_y(mark) - band[1]) < 1.5, "the clip mark sits on the band's clipped (upper) edge"
    assert _inside(mark, g["plot"], slack=5)
    assert band[3] > _center_y(g["forecast"][0]), "the band still reaches below the forecast (its low end, 3.51)"
    legend = [item["text"] for item in g["legend"]]
    low = fmt_value(FORECAST["prediction"]["interval"][0])
    assert f"95% interval (clipped; full {low} – 342)" in legend and "interval runs off the chart" in legend


def test_the_fitted_law_is_drawn_inside_the_plot_through_the_rungs_to_the_target(shots):
    for name, g in shots.items():
        (law,) = g["law"]
        plot = g["plot"]
        assert all(plot[0] - 0.5 <= x <= plot[2] + 0.5 and plot[1] - 0.5 <= y <= plot[3] + 0.5 for x, y in law)
        for rung in g["rungs"]:
            cx, cy = (rung[0] + rung[2]) / 2, _center_y(rung)
            near = min(law, key=lambda p: abs(p[0] - cx))
            assert abs(near[1] - cy) < 8, f"{name}: the law passes {abs(near[1] - cy):.1f} px from a rung"
        (forecast,) = g["forecast"]
        assert abs(law[-1][0] - (forecast[0] + forecast[2]) / 2) < 1.5, f"{name}: the law stops short of the target"
        assert abs(law[-1][1] - _center_y(forecast)) < 1.5, f"{name}: the law does not reach the forecast"


def test_the_legend_covers_nothing_that_is_drawn(shots):
    for name, g in shots.items():
        drawn = g["rungs"] + g["forecast"] + g["measured"] + g["clip"] + g["band"]
        for item in g["legend"]:
            for box in drawn:
                assert not _overlap(item["box"], box), f"{name}: the legend {item['text']!r} covers {box}"
            assert not _overlap(item["box"], g["plot"]), f"{name}: the legend {item['text']!r} is over the plot"


def test_log_log_on_request_places_the_points_on_logarithmic_axes(shots):
    g, linear = shots["loglog"], shots["linear"]
    ticks = g["yticks"]
    assert len(ticks) >= 2 and ticks != linear["yticks"]
    assert all(round(v * 10) == v * 10 for v, _ in ticks), f"round tick values on the log axis: {ticks}"
    assert len(g["rungs"]) == 4
    rows = [_center_y(r) for r in g["rungs"]]
    for (_, value), row in zip(RUNGS, rows, strict=True):
        assert abs(_y_of_value(g, value, log=True) - row) < 1.5, "the rungs sit where a log y-axis puts them"
    spread_log = max(rows) - min(rows)
    plot_h = g["plot"][3] - g["plot"][1]
    assert spread_log > 0.25 * plot_h, "log-log also fits the range to the points"
    for marker in g["rungs"] + g["forecast"] + g["measured"]:
        assert _inside(marker, g["plot"])


def test_the_page_states_the_targets_estimated_cost(shots):
    cost = FORECAST["prediction"]["cost"]
    text = shots["linear"]["cost"]
    assert "the target's estimated cost: 2.5e13 FLOPs (6·N·D)" in text, text
    for device, hours in cost["device_hours"].items():
        assert f"{fmt_value(hours)} device-hours on one {device}" in text, text
    assert text.endswith("at an assumed MFU of 0.4")
