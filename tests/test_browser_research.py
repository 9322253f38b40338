"""The research pages over a prefix the real executor made (tests/research_lab.py): leaderboard, runs, ladder.

The HTML checks go through starlette's test client; the walk at the end clicks through the same pages in
real headless Chromium and leaves screenshots in test-artifacts/browser/.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect, sync_playwright
from starlette.testclient import TestClient

from marin.browser.app import create_app
from marin.browser.charts import pareto_front
from tests.browser_support import CHROMIUM_ARGS, ServerThread, artifacts_dir, chromium_path
from tests.research_lab import LADDER_SIZES, SWEEP_LRS, TOKENS_PER_PARAM, research_prefix


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
    assert len(rows) == len(LADDER_SIZES) + len(SWEEP_LRS)
    bpbs = [float(r[4]) for r in rows]
    assert bpbs == sorted(bpbs)
    starred = {(r[2], float(r[5].replace("e+", "e"))) for r in rows if r[1] == "★"}
    # every ladder rung is on the frontier; the sweep's runs share a rung's compute and do no better than it
    assert {name for name, _ in starred} == {"ladder"}
    assert len(starred) == len(LADDER_SIZES)
    assert html.count('class="marker frontier"') == len(LADDER_SIZES)
    assert 'class="line frontier-line"' in html
    assert rows[0][2] == "ladder" and rows[0][7] == "8e+06"  # the biggest rung is best


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
    assert [re.search(r'class="exp-link"[^>]*>([^<]+)<', r)[1] for r in rows] == ["ladder", "sweep"]
    best_ladder = min(float(c) for c in re.findall(r"([\d.]+) bpb", rows[0]))
    board = [cells(r) for r in rows_of(client.get("/leaderboard").text, "board")]
    assert f"{best_ladder:.4f}" == board[0][4]
    assert "bpb" in rows[1] and "loss" in rows[1]


def test_runs_table_has_a_column_per_differing_field_and_each_runs_evaluation(client, lab):
    _, names = lab
    html = client.get("/runs?step=train/rung").text
    headers = re.findall(r"<th>(.*?)</th>", html.split('id="runs"', 1)[1].split("</thead>", 1)[0])
    assert headers[3] == "lr" and "parameters" not in headers  # shared by every sweep run: listed once below
    rows = [cells(r) for r in rows_of(html, "runs")]
    assert sorted(float(r[3]) for r in rows) == sorted(SWEEP_LRS)
    assert all(float(r[5]) > 0 for r in rows)  # each run's evaluation bpb is attached
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
    assert re.search(r"forecast bpb at 1e\+16 FLOPs: <b>[\d.]+</b>", html)


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
    assert f"@ {6 * 2_000_000 * last_tokens:.3g}" in flops  # the hover title of the last point


def test_research_pages_in_chromium(lab):
    root, names = lab
    shots = artifacts_dir()
    with ServerThread(create_app([str(root)])) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1360, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(server.url + "/")
        page.locator("nav.views a", has_text="leaderboard").click()
        expect(page.locator("table#board tbody tr")).to_have_count(len(LADDER_SIZES) + len(SWEEP_LRS))
        page.screenshot(path=str(shots / "research-1-leaderboard.png"), full_page=True)
        page.locator("svg.leaderboard-plot circle.marker.frontier").last.click()
        expect(page).to_have_url(re.compile(r"/exp/0/experiments/ladder-"))
        page.goto(server.url + "/runs?step=train/rung")
        page.locator("table#runs th", has_text="lr").click()
        page.screenshot(path=str(shots / "research-2-runs.png"), full_page=True)
        page.goto(server.url + f"/step/0/{names['forecast']}")
        expect(page.locator("svg.ladder-plot circle.marker.rung")).to_have_count(len(LADDER_SIZES))
        page.locator("section.summary").first.screenshot(path=str(shots / "research-3-ladder.png"))
        page.goto(server.url + f"/step/0/{names['sweep_train'][0]}")
        page.locator(".plot-controls a", has_text="tokens seen").click()
        expect(page.locator("svg.loss-curve text.axis", has_text="tokens seen")).to_have_count(1)
        page.locator("section.summary").first.screenshot(path=str(shots / "research-4-curves.png"))
        browser.close()
    assert not errors, errors
