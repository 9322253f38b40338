"""A researcher's walk through the browser in real headless Chromium, over a local prefix and a GCS emulator root.

The prefix is made by the real executor (tests/browser_pipeline.py: hello world, and a tiny
pipeline with one training step held RUNNING). Screenshots land in test-artifacts/browser/.
"""

from __future__ import annotations

import os
import re

import pytest
from playwright.sync_api import expect, sync_playwright

from marin.browser.app import create_app
from tests.browser_pipeline import lab_prefix
from tests.browser_support import (
    CHROMIUM_ARGS,
    ServerThread,
    artifacts_dir,
    chromium_path,
    fake_gcs_server,
    upload_tree,
)


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    root = tmp_path_factory.mktemp("lab")
    with lab_prefix(root) as names:
        (root / "experiments" / "broken-00000000.json").write_text('{"format": "marin.experiment/1", "steps": [')
        yield root, names


@pytest.fixture(scope="module")
def chromium():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def gcs_root(prefix, tmp_path_factory):
    import gcsfs

    local, _ = prefix
    with fake_gcs_server(tmp_path_factory.mktemp("gcs")) as url:
        old = os.environ.get("STORAGE_EMULATOR_HOST")
        os.environ["STORAGE_EMULATOR_HOST"] = url
        try:
            fs = gcsfs.GCSFileSystem(token="anon", endpoint_url=url)
            fs.mkdir("lab-bucket")
            upload_tree(fs, local, "lab-bucket/lab")
            yield "gs://lab-bucket/lab", {"gs": {"token": "anon", "endpoint_url": url}}
        finally:
            if old is None:
                os.environ.pop("STORAGE_EMULATOR_HOST", None)
            else:
                os.environ["STORAGE_EMULATOR_HOST"] = old


def new_page(browser):
    page = browser.new_page(viewport={"width": 1360, "height": 900})
    page.set_default_timeout(10_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    return page, errors


def walk(browser, base: str, names: dict, tag: str) -> None:
    shots = artifacts_dir()
    page, errors = new_page(browser)

    page.goto(base + "/")
    rows = page.locator("table#exps tbody tr")
    expect(rows).to_have_count(4)  # hello_world, two versions of tiny_lm, one broken record
    expect(page.locator("table#exps")).to_contain_text("not valid JSON")
    page.screenshot(path=str(shots / f"{tag}-1-experiments.png"), full_page=True)
    page.fill("input.search", "hello")
    expect(page.locator("table#exps tbody tr:visible")).to_have_count(1)
    page.fill("input.search", "")
    page.locator("table#exps th", has_text="experiment").click()
    expect(rows).to_have_count(4)

    page.get_by_role("link", name="hello_world").click()
    expect(page.locator("h1")).to_have_text("hello_world")
    expect(page.locator("svg.dag a.node")).to_have_count(2)
    expect(page.locator("svg.dag a.node.st-success")).to_have_count(2)
    expect(page.locator("table#steps tbody tr").first).to_contain_text(re.compile(r"\d+(\.\d)? m?s"))
    page.screenshot(path=str(shots / f"{tag}-2-experiment.png"), full_page=True)

    page.locator('svg.dag a.node[data-step="hello/data"]').click()
    expect(page.locator("h1")).to_contain_text("hello/data")
    expect(page.locator("h1 .badge")).to_have_text("success")
    expect(page.locator("table.manifest")).to_contain_text("docs.jsonl")
    page.screenshot(path=str(shots / f"{tag}-3-step.png"), full_page=True)
    page.locator("table.listing a", has_text="docs.jsonl").click()
    expect(page.locator("table.jsonl tbody tr")).to_have_count(50)
    expect(page.locator("table.jsonl tbody tr").first).to_contain_text("doc-0")
    page.locator("a.next").first.click()
    expect(page.locator("table.jsonl tbody tr").first).to_contain_text("doc-50")

    page.goto(base + "/")
    page.locator("table#exps tr", has_text="data to forecast").locator("a.exp-link").click()
    expect(page.locator("svg.dag a.node")).to_have_count(8)
    for state, n in (("success", 4), ("running", 1), ("failed", 1), ("dep_failed", 1), ("not_started", 1)):
        expect(page.locator(f"svg.dag a.node.st-{state}")).to_have_count(n)
    page.screenshot(path=str(shots / f"{tag}-4-dag.png"), full_page=True)
    experiment_url = page.url

    page.locator('svg.dag a.node[data-step="raw/corpus"]').click()
    expect(page.locator("section.summary h3").first).to_contain_text("Download")
    page.locator("table.listing a", has_text="docs.jsonl.gz").click()
    expect(page.locator("table.jsonl tbody tr")).to_have_count(50)
    expect(page.locator("table.jsonl")).to_contain_text("doc-00000")
    page.screenshot(path=str(shots / f"{tag}-5-jsonl-gz.png"), full_page=False)
    page.locator("a.next").first.click()
    expect(page.locator("table.jsonl tbody tr").first).to_contain_text("doc-00050")
    page.locator("a.next").first.click()
    expect(page.locator("table.jsonl tbody tr")).to_have_count(20)
    expect(page.locator("a.next")).to_have_count(0)

    page.locator("nav.crumbs a", has_text=names["corpus"].split("/")[1]).click()  # the step folder's listing
    page.locator("table.listing a", has_text="table/").click()
    page.locator("table.listing a", has_text="part-00000.parquet").click()
    expect(page.locator(".cards")).to_contain_text("300 rows")
    expect(page.locator("details.section table")).to_contain_text("tokens")
    data_rows = page.locator(".preview table.data").last.locator("tbody tr")
    expect(data_rows).to_have_count(50)
    page.locator("a.next").first.click()
    expect(data_rows.first).to_contain_text("row-00050")
    page.screenshot(path=str(shots / f"{tag}-6-parquet.png"), full_page=False)

    page.goto(experiment_url)
    page.locator('svg.dag a.node[data-step="train/tiny"]').click()
    expect(page.locator("h1 .badge")).to_have_text("running")
    curve = page.locator('svg.loss-curve polyline.line[data-series="loss"]')
    expect(curve).to_be_visible()
    points = curve.get_attribute("points").split()
    assert len(points) == 120, len(points)
    ys = [float(p.split(",")[1]) for p in points]
    assert ys[-1] > ys[0]  # the loss falls, so the line rises in SVG coordinates (y grows downwards)
    expect(page.locator("pre.log")).to_contain_text("holding")
    page.locator("section.summary").first.screenshot(path=str(shots / f"{tag}-7-loss-curve.png"))
    page.screenshot(path=str(shots / f"{tag}-8-train-step.png"), full_page=True)

    page.locator("a.btn", has_text="compare with").click()
    expect(page.locator("h2", has_text="Config")).to_contain_text("3 of 4 fields differ")  # lr, steps, hold
    expect(page.locator("table#cfgdiff tbody tr:visible")).to_have_count(3)  # not each version's output_path
    expect(page.locator("svg.loss-curve polyline.line")).to_have_count(2)  # training losses; evaluations are points
    expect(
        page.locator('svg.loss-curve .marker.eval[data-series="A: eval/loss (in-training eval)"]')
    ).not_to_have_count(0)
    page.screenshot(path=str(shots / f"{tag}-9-compare.png"), full_page=True)
    assert not errors, errors
    page.close()


def test_researcher_walks_local_prefix_in_chromium(prefix, chromium):
    root, names = prefix
    with ServerThread(create_app([str(root)])) as server:
        walk(chromium, server.url, names, "local")


def test_researcher_walks_gcs_emulator_root_in_chromium(prefix, chromium, gcs_root):
    _, names = prefix
    url, options = gcs_root
    with ServerThread(create_app([url], storage_options=options)) as server:
        walk(chromium, server.url, names, "gcs")
