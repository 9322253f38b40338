"""The research pages over a prefix the real executor made (tests/research_lab.py): leaderboard, runs, ladder.

The HTML checks go through starlette's test client; the walk at the end clicks through the same pages in
real headless Chromium and leaves screenshots in test-artifacts/browser/.
"""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect
from starlette.testclient import TestClient

from marin.browser.app import create_app
from marin.browser.charts import Chart, fmt_value, pareto_front
from tests.browser_support import artifacts_dir, served_page
from tests.research_lab import ISOFLOP_BUDGETS, LADDER_SIZES, SWEEP_LRS, TOKENS_PER_PARAM, research_prefix

ISOFLOP_RUNS = 5 * len(ISOFLOP_BUDGETS) + 1  # five sizes per budget, and the target


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("research")
    with research_prefix(root) as names:
        yield root, names


@pytest.fixture(scope="module")
def client(lab):
    root, _ = lab
    return TestClient(create_app([str(root)]))


def rows_of(html: str, table_id: str) -> list[str]:
    body = html.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0]
    return re.findall(r"<tr>(.*?)</tr>", body.split("<tbody>", 1)[1], re.S)


def cells(row: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]


def test_pareto_front_keeps_only_runs_no_cheaper_run_beats():
    points = [(1.0, 3.0), (2.0, 2.0), (2.0, 2.5), (4.0, 2.2), (8.0, 1.0), (0.5, 5.0)]
    assert pareto_front(points) == [5, 0, 1, 4]


def test_leaderboard_ranks_evaluations_by_bpb_and_stars_the_frontier(client):
    html = client.get("/leaderboard").text
    rows = [cells(r) for r in rows_of(html, "board")]
    assert len(rows) == len(LADDER_SIZES) + len(SWEEP_LRS) + ISOFLOP_RUNS
    bpbs = [float(r[4]) for r in rows]
    assert bpbs == sorted(bpbs)
    mine = [r for r in rows if r[2] in ("ladder", "sweep")]
    starred = {(r[2], r[5]) for r in mine if r[1] == "★"}
    # every ladder rung is on the frontier among the ladder and sweep runs, which share the lowest compute; the
    # sweep's runs share a rung's compute and do no better than it
    assert {name for name, _ in starred} == {"ladder"}
    assert 0 < len(starred) <= len(LADDER_SIZES)
    flops = [float(r[5]) for r in rows]
    front = [(float(r[5]), float(r[4])) for r in rows if r[1] == "★"]
    assert all(not any(f2 <= f and b2 < b for f2, b2 in zip(flops, bpbs, strict=True)) for f, b in front)
    assert html.count('class="marker frontier"') == len(front)
    assert 'class="line frontier-line"' in html


def test_leaderboard_x_axis_and_metric_follow_the_query_and_refuse_unknown_names(client):
    html = client.get("/leaderboard?x=tokens&metric=macro_loss").text
    assert "training tokens (log)" in html and "loss, nats per token (macro)" in html
    rows = [cells(r) for r in rows_of(html, "board")]
    losses = [float(r[4]) for r in rows]
    assert losses == sorted(losses)
    bad = client.get("/leaderboard?x=vibes")
    assert bad.status_code == 200 and "unknown x &#x27;vibes&#x27;" in bad.text and "training FLOPs" in bad.text


def test_experiments_list_shows_each_records_headline_result_newest_first(client, lab):
    _, names = lab
    html = client.get("/").text
    rows = rows_of(html, "exps")
    assert [re.search(r'class="exp-link"[^>]*>([^<]+)<', r)[1] for r in rows] == [
        "isoflop",
        "isoflop",
        "ladder",
        "sweep",
    ]
    assert "version 2 of 2" in rows[0] and "version 1 of 2" in rows[1]  # the newer record (with the check) first
    best_ladder = min(float(c) for c in re.findall(r"([\d.]+) bpb", rows[2]))
    board = [cells(r) for r in rows_of(client.get("/leaderboard").text, "board")]
    assert f"{best_ladder:.4f}" == min((r[4] for r in board if r[2] == "ladder"), key=float)
    assert "bpb" in rows[3] and "loss" in rows[3]


def test_runs_table_has_a_column_per_differing_field_and_each_runs_evaluation(client, lab):
    _, names = lab
    html = client.get("/runs?step=train/rung").text
    headers = re.findall(r"<th>(.*?)</th>", html.split('id="runs"', 1)[1].split("</thead>", 1)[0])
    assert headers[4] == "lr" and "parameters" not in headers  # shared by every sweep run: listed once below
    rows = [cells(r) for r in rows_of(html, "runs")]
    assert sorted(float(r[4]) for r in rows) == sorted(SWEEP_LRS)
    assert all(float(r[6]) > 0 for r in rows)  # each run's evaluation bpb is attached
    assert "fields every run shares" in html and "parameters" in html
    assert client.get("/runs?step=train/nothing").text.count("no training runs named") == 1


def test_ladder_page_draws_rungs_the_fitted_law_and_the_forecast(client, lab):
    _, names = lab
    html = client.get(f"/step/0/{names['forecast']}").text
    plot = html.split('class="plot ladder-plot"', 1)[1].split("</svg>", 1)[0]
    assert plot.count('class="marker rung"') == len(LADDER_SIZES)
    assert plot.count('class="marker forecast"') == 1
    assert 'class="line fit"' in plot
    for rel in names["ladder_eval"]:
        assert f'href="/step/0/{rel}"' in html
    assert re.search(r"forecast bpb at 1e16 FLOPs: <b>[\d.]+</b>", html)


def test_training_curves_take_tokens_or_flops_as_x_and_smooth_only_the_training_line(client, lab):
    _, names = lab
    rel = names["sweep_train"][0]
    plain = client.get(f"/step/0/{rel}").text
    assert 'class="plot loss-curve"' in plain and 'class="plot bpb-curve"' in plain
    assert plain.count('class="marker eval"') == 8  # eval_loss and eval_bpb at 4 steps each
    flops = client.get(f"/step/0/{rel}?x=flops&smooth=0.9").text
    assert "training FLOPs (6·N·tokens) (log)" in flops
    assert 'data-series="loss (raw)"' in flops and 'data-series="loss"' in flops
    last_tokens = 2_000_000 * TOKENS_PER_PARAM
    assert f"@ {fmt_value(6 * 2_000_000 * last_tokens)}" in flops  # the hover title of the last point


def test_research_pages_in_chromium(lab):
    root, names = lab
    shots = artifacts_dir()
    with served_page([str(root)]) as (base, page, errors):
        page.goto(base + "/")
        page.locator("nav.views a", has_text="leaderboard").click()
        expect(page.locator("table#board tbody tr")).to_have_count(len(LADDER_SIZES) + len(SWEEP_LRS) + ISOFLOP_RUNS)
        page.screenshot(path=str(shots / "research-1-leaderboard.png"), full_page=True)
        page.locator("svg.leaderboard-plot circle.marker.frontier").last.click()
        expect(page).to_have_url(re.compile(r"/exp/0/experiments/(ladder|isoflop)-"))
        page.goto(base + "/runs?step=train/rung")
        page.locator("table#runs th", has_text="lr").click()
        page.screenshot(path=str(shots / "research-2-runs.png"), full_page=True)
        page.goto(base + f"/step/0/{names['forecast']}")
        expect(page.locator("svg.ladder-plot circle.marker.rung")).to_have_count(len(LADDER_SIZES))
        page.locator("section.summary").first.screenshot(path=str(shots / "research-3-ladder.png"))
        page.goto(base + f"/step/0/{names['sweep_train'][0]}")
        page.locator(".plot-controls a", has_text="tokens seen").click()
        expect(page.locator("svg.loss-curve text.axis", has_text="tokens seen")).to_have_count(1)
        page.locator("section.summary").first.screenshot(path=str(shots / "research-4-curves.png"))
    assert not errors, errors


def test_isoflop_page_draws_each_budgets_curve_the_size_law_and_the_checked_target(client, lab):
    _, names = lab
    html = client.get(f"/step/0/{names['isoflop_forecast']}").text
    curves = html.split('class="plot isoflop-plot"', 1)[1].split("</svg>", 1)[0]
    assert curves.count('class="marker rung"') == 5 * len(ISOFLOP_BUDGETS)
    assert curves.count('class="marker optimum"') == len(ISOFLOP_BUDGETS)
    sizes = html.split('class="plot nopt-plot"', 1)[1].split("</svg>", 1)[0]
    assert sizes.count('class="marker forecast"') == 1 and "N_opt = " in sizes
    loss = html.split('class="plot ladder-plot"', 1)[1].split("</svg>", 1)[0]
    assert loss.count('class="marker measured"') == 1  # found through the check step that read this forecast
    assert re.search(r"checked: forecast loss [\d.]+ .*measured <b>[\d.]+</b>.*inside the interval", html)
    check = client.get(f"/step/0/{names['isoflop_check']}").text
    assert 'data-kind="check.json"' in check and "inside the interval" in check


def test_harness_scores_join_the_evaluation_of_the_same_checkpoint(client, lab):
    _, names = lab
    html = client.get("/leaderboard").text
    headers = re.findall(r"<th>(.*?)</th>", html.split('id="board"', 1)[1].split("</thead>", 1)[0])
    assert "next_line" in headers
    col = headers.index("next_line")
    scored = [cells(r) for r in rows_of(html, "board") if cells(r)[col] != "—"]
    assert [(r[2], r[7], r[col]) for r in scored] == [("ladder", "8e6", "0.625")]
    step = client.get(f"/step/0/{names['harness']}").text
    assert 'data-kind="metrics.json"' in step and "next_line" in step and "0.625" in step


def test_leaderboard_marks_the_run_whose_forecast_was_checked_with_its_error(client, lab):
    root, names = lab
    check = json.loads((root / names["isoflop_check"] / "check.json").read_text())
    assert check["preregistered"] is True and check["forecast_record"]["step"] == "isoflop/forecast"
    html = client.get("/leaderboard").text
    marked = [cells(r) for r in rows_of(html, "board") if 'class="forecast-checked"' in r]
    assert len(marked) == 1 and "isoflop-target" in marked[0][3]
    assert marked[0][-2].startswith("✓ " if check["within_interval"] else "✗ ")
    assert f"{check['error']:+.3f}" in marked[0][-2] and f"({100 * check['relative_error']:+.1f}%)" in marked[0][-2]


def test_leaderboard_log_axis_reads_in_powers_of_ten_and_its_legend_names_only_what_is_drawn(client):
    html = client.get("/leaderboard").text
    plot = html.split('class="plot leaderboard-plot"', 1)[1].split("</svg>", 1)[0]
    x_ticks = re.findall(r'<text class="tick" x="[\d.]+" y="[\d.]+" text-anchor="middle">([^<]*)</text>', plot)
    assert x_ticks and all(re.fullmatch(r"1e\d+", t) for t in x_ticks), x_ticks  # not 1e+14
    exponents = [int(t[2:]) for t in x_ticks]
    assert exponents == list(range(exponents[0], exponents[-1] + 1)), "a label every decade"
    assert plot.count('class="grid minor"') >= 8 * (len(x_ticks) - 1)  # 2..9 between the decades
    legend = re.findall(r'<text class="legend"[^>]*>([^<]*)</text>', plot)
    assert legend == ["runs", "Pareto frontier"], legend  # the frontier's staircase is not a second entry
    for name in legend:
        assert f'class="marker {"run" if name == "runs" else "frontier"}" data-series="{name}"' in plot


def test_a_chart_lists_no_series_without_points_in_its_legend():
    """The leaderboard's 'runs' when every run is on the frontier: an entry with nothing drawn misleads."""
    svg = Chart(log_x=True).points("runs", []).points("Pareto frontier", [(1e9, 1.2), (1e10, 1.1)]).render()
    assert re.findall(r'<text class="legend"[^>]*>([^<]*)</text>', svg) == ["Pareto frontier"]


def test_the_forecast_page_draws_log_log_on_request(client, lab):
    _, names = lab
    plain = client.get(f"/step/0/{names['forecast']}").text.split('class="plot ladder-plot"', 1)[1].split("</svg>")[0]
    loglog = client.get(f"/step/0/{names['forecast']}?loglog=1").text
    assert loglog.split('class="plot ladder-plot"', 1)[1].split("</svg>")[0] != plain
