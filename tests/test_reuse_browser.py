"""Several labs in one browser: the lab column, versions counted by record, evaluations told apart, lineage.

Lab A runs a two-run learning-rate sweep (the tiny train/eval steps of tests/research_lab.py); lab B runs
the same sweep with `cache_from` lab A (every step REUSED, the same record), then a three-run sweep that
reuses A's two runs and trains one more. The pages are read through starlette's TestClient.
"""

from __future__ import annotations

import contextlib
import io
import re

import pytest
from starlette.testclient import TestClient

from marin.browser.app import create_app
from marin.execution import Executor
from marin.execution.reuse import CacheFrom
from tests.research_lab import rung


def sweep(lrs):
    return [rung("rung", 2_000_000, lr=lr) for lr in lrs]


@pytest.fixture(scope="module")
def labs(tmp_path_factory):
    base = tmp_path_factory.mktemp("labs")
    a, b = base / "lab-a", base / "lab-b"
    with contextlib.redirect_stdout(io.StringIO()):
        two = sweep((1e-3, 3e-3))
        first = Executor(str(a), backend="local", experiment_name="sweep").run([e for _, e in two])
        cache = CacheFrom(sources=(str(a),))
        same = Executor(str(b), backend="local", experiment_name="sweep", cache_from=cache).run(
            [e for _, e in sweep((1e-3, 3e-3))]
        )
        three = sweep((1e-3, 3e-3, 1e-2))
        bigger = Executor(str(b), backend="local", experiment_name="sweep", cache_from=cache).run([e for _, e in three])
    assert {o.status for o in same.outcomes.values()} == {"REUSED"}
    statuses = sorted(o.status for o in bigger.outcomes.values())
    assert statuses == ["SKIPPED"] * 4 + ["SUCCESS"] * 2, "lab B already holds the reused runs"
    return {"a": a, "b": b, "first": first, "bigger": bigger, "three": three}


@pytest.fixture(scope="module")
def client(labs):
    return TestClient(create_app([str(labs["a"]), str(labs["b"])]))


def rows_of(html: str, tid: str) -> list[str]:
    body = html.split(f'id="{tid}"', 1)[1].split("</table>", 1)[0]
    return re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)[1:]


def test_experiment_list_has_a_lab_column_and_counts_versions_by_record(labs, client):
    html = client.get("/").text
    assert "<th" in html and ">lab<" in html
    rows = rows_of(html, "exps")
    assert len(rows) == 3
    record_a = labs["first"].record_path.rsplit("/", 1)[-1].removesuffix(".json")
    same_record = [r for r in rows if record_a in r]
    assert len(same_record) == 2, "the same record under two labs"
    for row in same_record:
        assert "version 1 of 2" in row, row
    labs_shown = sorted(re.search(r'class="lab"[^>]*>([^<]+)<', r).group(1) for r in same_record)
    assert labs_shown == ["lab-a", "lab-b"]
    assert any("also in lab-b" in r for r in same_record) and any("also in lab-a" in r for r in same_record)
    assert sum("version 2 of 2" in r for r in rows) == 1


def test_leaderboard_and_runs_table_tell_same_named_evaluations_apart(client):
    board = client.get("/leaderboard").text
    rows = rows_of(board, "board")
    assert len(rows) == 5, "two evaluations in lab A, three in lab B"
    hashes = [re.search(r'<code class="hash">([0-9a-f]{8})</code>', r).group(1) for r in rows]
    assert len(set(hashes)) == 3
    assert all(re.search(r"lr=0\.0[0-9]+|lr=1", r) for r in rows), "the differing hyperparameter is shown"
    assert all('class="lab"' in r for r in rows)
    runs = client.get("/runs?step=train/rung").text
    run_rows = rows_of(runs, "runs")
    assert len(run_rows) == 5 and all('class="lab"' in r for r in run_rows)


def test_step_page_shows_made_from_and_used_by_with_links_across_labs(labs, client):
    train_b = labs["bigger"][labs["three"][0][0]]
    rel = train_b.removeprefix(str(labs["b"]) + "/")
    html = client.get(f"/step/1/{rel}").text
    assert "Made from" in html and "Used by" in html
    assert f'reused (copy) from <a href="/step/0/{rel}">' in html, "the link follows reuse into lab A"
    used = html.split("Used by", 1)[1]
    assert "eval/rung-" in used and "lab-a" in used and "lab-b" in used and "directly" in used


def test_marin_lineage_walks_reuse_and_finds_users_in_both_labs(labs, capsys):
    from marin.cli import main

    eval_b = labs["bigger"][labs["three"][0][1]]
    assert main(["lineage", eval_b, "--prefix", str(labs["a"]), "--prefix", str(labs["b"])]) == 0
    out = capsys.readouterr().out
    assert "made from:" in out and "train/rung-" in out and f"reused (copy) from {labs['a']}/train/rung-" in out
    train_b = labs["bigger"][labs["three"][0][0]]
    assert main(["lineage", train_b, "--prefix", str(labs["a"]), "--prefix", str(labs["b"])]) == 0
    out = capsys.readouterr().out
    users = out.split("used by", 1)[1]
    assert users.count("eval/rung-") == 3, "lab A's record and lab B's two records"
