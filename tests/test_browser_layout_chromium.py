"""The pages' layout as a researcher sees it: real headless Chromium over a prefix made by the real executor
(`tests/page_lab.py`: two versions of one experiment, a 100-file step, a training with two validation sets and a
mixture), geometry and colours read from the rendered page. Screenshots land in test-artifacts/browser/layout-*.

Each test names a defect the pages had: one evaluation set drawn in another colour on the next chart, every
series of a compared run in one colour, legends over the curves, charts a third of the page wide, markers
hiding each other, a 100-file manifest making the page 9,000 px tall, `weights: {2}`, versions told apart only
by a number, no way to compare two rows of the runs table, a blank accelerator row.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest
from starlette.testclient import TestClient

from marin.browser.app import create_app
from marin.browser.html import url_exp, url_step
from tests.browser_support import artifacts_dir, served_page
from tests.page_lab import SHARDS, page_lab


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("pages")
    with page_lab(root) as names:
        yield str(root), names


@pytest.fixture(scope="module")
def browser(lab):
    root, _ = lab
    with served_page([root], viewport=(1400, 1000)) as (url, page, errors):
        yield url, page, errors
    assert errors == []


MARKERS = """(css) => {
  const svg = document.querySelector('svg.' + css);
  const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  return [...svg.querySelectorAll('.marker')].map(m => ({series: m.dataset.series, fill: m.getAttribute('fill'),
    stroke: m.getAttribute('stroke'), shape: m.tagName, box: box(m)}));
}"""

CHART_BOXES = """(css) => {
  const svg = document.querySelector('svg.' + css);
  const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  return {svg: box(svg), plot: box(svg.querySelector('rect.bg')), main: box(document.querySelector('main')),
          legend: [...svg.querySelectorAll('.legend-item')].map(box),
          drawn: [...svg.querySelectorAll('.marker, polyline.line')].map(box)};
}"""


def _set(series: str) -> str:
    """`eval_web_loss (in-training eval, 8 batches)` -> `web`; `eval_bpb (...)` -> ``."""
    name = series.split(" ", 1)[0].removeprefix("eval").strip("_")
    return name.removesuffix("loss").removesuffix("bpb").strip("_")


def _overlap(a, b) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return max(0.0, w) * max(0.0, h)


def test_an_evaluation_set_keeps_its_colour_and_shape_on_every_chart_of_the_train_page(lab, browser):
    root, names = lab
    url, page, _ = browser
    page.goto(url + url_step(0, names["train"][0], exp=names["records"][0]))
    page.screenshot(path=str(artifacts_dir() / "layout-train.png"), full_page=True)
    styles: dict[str, set] = {}
    for css in ("loss-curve", "bpb-curve"):
        for m in page.evaluate(MARKERS, css):
            styles.setdefault(_set(m["series"]), set()).add((m["fill"], m["shape"]))
    assert set(styles) == {"", "web", "code"}, styles
    for name, seen in styles.items():
        assert len(seen) == 1, f"evaluation set {name!r} is drawn in {seen} across the two charts"
    assert len({next(iter(s)) for s in styles.values()}) == 3, f"two sets look alike: {styles}"


def test_markers_that_land_on_each_other_stay_visible(lab, browser):
    """The web and code sets end within 0.002 of each other: their final markers were one dot."""
    root, names = lab
    url, page, _ = browser
    page.goto(url + url_step(0, names["train"][0], exp=names["records"][0]))
    markers = page.evaluate(MARKERS, "loss-curve")
    last = {}
    for m in markers:
        last[_set(m["series"])] = m["box"]  # markers in step order: the last one wins
    web, code = last["web"], last["code"]
    area = (web[2] - web[0]) * (web[3] - web[1])
    assert _overlap(web, code) < 0.5 * area, f"the final web and code markers cover each other: {web} {code}"


def test_charts_fill_the_page_two_to_a_row_with_the_legend_below_the_plot(lab, browser):
    root, names = lab
    url, page, _ = browser
    page.goto(url + url_step(0, names["train"][0], exp=names["records"][0]))
    loss, bpb = page.evaluate(CHART_BOXES, "loss-curve"), page.evaluate(CHART_BOXES, "bpb-curve")
    main = loss["main"][2] - loss["main"][0]
    for g in (loss, bpb):
        assert g["svg"][2] - g["svg"][0] > 0.4 * main, f"a chart {g['svg']} in a page {main} px wide"
        assert g["legend"], "no legend"
        for item in g["legend"]:
            assert _overlap(item, g["plot"]) == 0, f"legend {item} over the plot {g['plot']}"
            for drawn in g["drawn"]:
                assert _overlap(item, drawn) == 0, f"legend {item} covers {drawn}"
    assert abs(loss["svg"][1] - bpb["svg"][1]) < 2 and bpb["svg"][0] > loss["svg"][2], "loss and bpb side by side"


def test_a_comparison_colours_series_by_what_they_measure_and_tells_the_runs_apart_by_line_and_fill(lab, browser):
    root, names = lab
    url, page, _ = browser
    a, b = names["train"]
    page.goto(f"{url}/compare/0?a={a}&b={b}")
    page.screenshot(path=str(artifacts_dir() / "layout-compare.png"), full_page=True)
    markers = page.evaluate(MARKERS, "loss-curve")
    by = {(m["series"][0], _set(m["series"].split(": ", 1)[1])): m for m in markers}
    for name in ("", "web", "code"):
        ma, mb = by[("A", name)], by[("B", name)]
        assert ma["fill"] == mb["stroke"] and ma["shape"] == mb["shape"], f"{name}: A {ma} B {mb}"
        assert mb["fill"] == "#fff", "B's markers are open"
    assert len({by[("A", n)]["fill"] for n in ("", "web", "code")}) == 3, "A's sets share one colour"
    dashes = page.evaluate(
        "[...document.querySelectorAll('svg.loss-curve polyline.line')].map(p => "
        "[p.dataset.series, p.getAttribute('stroke'), p.getAttribute('stroke-dasharray')])"
    )
    (sa, ca, da), (sb, cb, db) = sorted(dashes)
    assert (sa, sb) == ("A: loss", "B: loss") and ca == cb and da is None and db, dashes
    diff = page.inner_text("#cfgdiff")
    assert "lr" in diff and "weights.web" in diff
    assert "output_path" not in diff
    assert "left out: output_path" in page.inner_text("main")


def test_a_step_with_many_files_keeps_its_manifest_folded(lab, browser):
    root, names = lab
    url, page, _ = browser
    page.goto(url + url_step(0, names["shards"][0]))
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height < 2000, f"the page is {height} px tall"
    manifest = page.locator("details.section", has_text=f"Manifest ({SHARDS} files)")
    assert manifest.get_attribute("open") is None
    manifest.locator("summary").click()
    assert manifest.locator("table.manifest tbody tr").count() == SHARDS


def test_a_mixtures_weights_read_in_the_config(lab, browser):
    root, names = lab
    url, page, _ = browser
    page.goto(url + url_step(0, names["train"][0]))
    config = page.locator("details.section", has_text="Config").first.inner_text()
    assert "weights: {code: 0.3, web: 0.7}" in config, config


def test_versions_of_an_experiment_are_told_apart_by_the_settings_that_differ(lab, browser):
    root, names = lab
    url, page, _ = browser
    page.goto(url + "/")
    page.screenshot(path=str(artifacts_dir() / "layout-experiments.png"))
    differs = {}
    for row in page.locator("#exps tbody tr").all():
        text = row.inner_text()
        for k, rel in enumerate(names["records"]):
            if rel.removeprefix("experiments/") in text:
                differs[k] = row.locator(".differs").inner_text()
    assert differs[0] == "lr=0.003, weights.code=0.3, weights.web=0.7", differs
    assert differs[1] == "lr=0.01, weights.code=0.5, weights.web=0.5", differs


def test_the_runs_table_compares_the_two_runs_ticked(lab, browser):
    root, names = lab
    url, page, _ = browser
    page.goto(url + "/runs?step=train/mix")
    page.get_by_role("button", name="compare selected").click()
    assert "tick two runs to compare (0 ticked)" in page.inner_text(".compare-msg")
    boxes = page.locator("#runs tbody input[type=checkbox]")
    boxes.nth(0).check()
    boxes.nth(1).check()
    page.get_by_role("button", name="compare selected").click()
    page.wait_for_url("**/compare/0?**")
    query = parse_qs(urlparse(page.url).query)
    assert sorted(query["a"] + query["b"]) == sorted(names["train"])
    assert page.locator("h1").inner_text() == "Compare train/mix"


def test_the_runs_tables_form_compares_without_javascript(lab):
    root, names = lab
    a, b = names["train"]
    html = TestClient(create_app([root])).get(f"/compare/0?a={a}&a={b}").text
    assert "Compare <code>train/mix</code>" in html and "3 of 6 fields differ" in html


def test_the_accelerator_row_says_what_ran_where(lab, browser):
    root, names = lab
    url, page, _ = browser
    page.goto(url + url_exp(0, names["records"][0]))
    row = page.locator("table.kv tr", has_text="accelerator").inner_text()
    assert "none (CPU only) on" in row and "where the script ran" in row, row
    assert "train/mix trained on 1 × cpu (train_info.json)" in row, row
