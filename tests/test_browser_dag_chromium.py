"""The tutorial's DAGs as a researcher sees them: real headless Chromium at 1400x1000, geometry asserted.

The records are the ones the executor writes for `tiny_lm.py` (8 steps) and `tiny_ladder.py` (23 steps,
eight rungs): planned by the real executor, nothing run (every step reads "not started"), which is all the
DAG needs. Screenshots land in test-artifacts/browser/dag-*.png.
"""

from __future__ import annotations

import os
import runpy
import sys
import uuid
from pathlib import Path

import pytest

from marin.execution import Executor
from marin.execution.main import capture_steps
from marin.execution.planning import plan_steps
from marin.execution.records import run_provenance, utc_now
from tests.browser_support import artifacts_dir, served_page

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = {"tiny_lm": 8, "tiny_ladder": 23}


def write_planned_record(script: Path, prefix: str) -> None:
    """The experiment record `script` would write on its first run, written without running a step."""
    captured: dict = {}

    def hook(steps, description):
        captured.update(steps=steps, description=description)
        return {}

    previous, argv = capture_steps(hook), sys.argv
    sys.argv = [str(script), "--prefix", prefix]
    try:
        runpy.run_path(str(script), run_name="__main__")
    finally:
        capture_steps(previous)
        sys.argv = argv
    executor = Executor(prefix, backend="local", experiment_name=script.stem, description=captured["description"])
    plan = plan_steps(captured["steps"], executor.prefix)
    run = run_provenance(plan, utc_now(), uuid.uuid4().hex, store=False)
    executor._write_record(plan, executor.record_path(plan), run)


@pytest.fixture(scope="module")
def tutorial_lab(tmp_path_factory):
    prefix = str(tmp_path_factory.mktemp("dag-lab"))
    for stem in SCRIPTS:
        write_planned_record(REPO / "experiments" / "tutorial" / f"{stem}.py", prefix)
    return prefix


GEOMETRY = """() => {
  const box = document.querySelector('.dagbox'), svg = box.querySelector('svg.dag');
  const b = box.getBoundingClientRect(), s = svg.getBoundingClientRect();
  const nodes = [...svg.querySelectorAll('a.node')].map(a => {
    const r = a.querySelector('rect').getBoundingClientRect();
    const texts = [...a.querySelectorAll('text')];
    return {label: texts[0].textContent, rect: [r.left, r.top, r.right, r.bottom],
            text: texts.map(t => { const q = t.getBoundingClientRect(); return [q.left, q.right]; })};
  });
  const edges = [...svg.querySelectorAll('path.edge')].map(p => {
    const r = p.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom];
  });
  return {box: [b.left, b.top, b.right, b.bottom], scroll: [box.scrollWidth, box.clientWidth,
          box.scrollHeight, box.clientHeight], svg: [s.left, s.top, s.right, s.bottom],
          engine: svg.dataset.engine, nodes, edges, viewport: [innerWidth, innerHeight]};
}"""


def _inside(inner, outer, slack=1.0) -> bool:
    return (
        inner[0] >= outer[0] - slack
        and inner[1] >= outer[1] - slack
        and inner[2] <= outer[2] + slack
        and inner[3] <= outer[3] + slack
    )


def test_tutorial_dags_fit_their_box_with_distinct_readable_names(tutorial_lab):
    shots = artifacts_dir()
    with served_page([tutorial_lab], viewport=(1400, 1000)) as (url, page, errors):
        page.goto(url + "/")
        for stem, count in SCRIPTS.items():
            page.goto(url + "/")
            page.locator("a.exp-link", has_text=stem).first.click()
            page.locator("svg.dag").wait_for()
            page.locator(".dagbox").scroll_into_view_if_needed()
            page.screenshot(path=str(shots / f"dag-{stem}.png"))
            g = page.evaluate(GEOMETRY)
            assert g["engine"] == "dot"
            labels = [n["label"] for n in g["nodes"]]
            assert len(labels) == count
            assert len(set(labels)) == count, f"{stem}: two nodes read the same: {sorted(labels)}"
            assert not any("…" in label and label.startswith("tokenizers/shakespeare-…") for label in labels)
            sw, cw, sh, ch = g["scroll"]
            assert sw <= cw and sh <= ch, f"{stem}: the DAG box scrolls ({sw}x{sh} in {cw}x{ch})"
            assert _inside(g["svg"], g["box"]), f"{stem}: the drawing leaves its box"
            assert g["box"][2] <= g["viewport"][0], f"{stem}: the box is wider than the window"
            for n in g["nodes"]:
                assert _inside(n["rect"], g["box"]), f"{stem}: node {n['label']} outside the box"
                for left, right in n["text"]:
                    assert n["rect"][0] <= left and right <= n["rect"][2] + 0.5, (
                        f"{stem}: the text of {n['label']} overflows its node"
                    )
            assert len(g["edges"]) >= count - 1
            for e in g["edges"]:
                assert _inside(e, g["svg"]), f"{stem}: an edge leaves the drawing: {e} vs {g['svg']}"
        assert errors == []
    assert os.path.getsize(shots / "dag-tiny_ladder.png") > 10_000


def test_a_wide_dag_uses_a_wide_window(tutorial_lab):
    """The ladder's DAG is wider than the box of a 1,400 px window at full size: there it is drawn scaled to the
    box, and a 1,900 px window draws it wider, at a larger scale (up to what fits the box's height), still
    inside its box without scrolling."""
    widths = {}
    for width in (1400, 1900):
        with served_page([tutorial_lab], viewport=(width, 1000)) as (url, page, errors):
            page.goto(url + "/")
            page.locator("a.exp-link", has_text="tiny_ladder").first.click()
            page.locator("svg.dag").wait_for()
            g = page.evaluate(GEOMETRY)
            natural = float(page.evaluate("document.querySelector('svg.dag').viewBox.baseVal.width"))
            sw, cw, sh, ch = g["scroll"]
            assert sw <= cw and sh <= ch, f"{width}: the DAG box scrolls ({sw}x{sh} in {cw}x{ch})"
            assert _inside(g["svg"], g["box"])
            widths[width] = (g["svg"][2] - g["svg"][0], g["box"][2] - g["box"][0], natural)
            assert errors == []
    drawn_small, box_small, natural = widths[1400]
    drawn_wide, box_wide, _ = widths[1900]
    assert natural > box_small and drawn_small >= box_small - 12, widths  # scaled down to fill the narrow box
    assert drawn_wide > 1.15 * drawn_small, widths  # the wide window draws it larger (before: 1,340 px in both)
