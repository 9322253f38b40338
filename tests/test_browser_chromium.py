"""A researcher's walk through the browser in real headless Chromium, over a local prefix and a GCS emulator root.

The prefix is written per docs/records.md (tests/browser_prefix.py). Screenshots land in
test-artifacts/browser/ for people to look at.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from browser_prefix import build_prefix
from browser_support import CHROMIUM_ARGS, ServerThread, artifacts_dir, chromium_path, fake_gcs_server, upload_tree
from playwright.sync_api import expect, sync_playwright

from marin.browser.app import create_app


@pytest.fixture(scope="module")
def prefix(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("lab")
    return root, build_prefix(root)


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
    workdir = tmp_path_factory.mktemp("gcs")
    with fake_gcs_server(workdir) as url:
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


def walk(browser, base: str, names: dict, shots: Path, tag: str) -> None:
    page = browser.new_page(viewport={"width": 1360, "height": 900})
    page.set_default_timeout(10_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

    page.goto(base + "/")
    rows = page.locator("table#exps tbody tr")
    expect(rows).to_have_count(4)  # hello_world, two tiny_lm versions, one broken record
    expect(page.locator("table#exps")).to_contain_text("not valid JSON")
    page.screenshot(path=str(shots / f"{tag}-1-experiments.png"), full_page=True)
    page.fill("input.search", "hello")
    expect(page.locator("table#exps tbody tr:visible")).to_have_count(1)
    page.fill("input.search", "")
    page.locator("table#exps th", has_text="experiment").click()  # sorting does not lose rows
    expect(rows).to_have_count(4)

    page.get_by_role("link", name="hello_world").click()
    expect(page.locator("h1")).to_have_text("hello_world")
    expect(page.locator("svg.dag a.node")).to_have_count(2)
    expect(page.locator("svg.dag a.node.st-success")).to_have_count(2)
    expect(page.locator("table#steps")).to_contain_text("2.1 s")
    page.screenshot(path=str(shots / f"{tag}-2-experiment.png"), full_page=True)

    page.locator('svg.dag a.node[data-step="hello/data"]').click()
    expect(page.locator("h1")).to_contain_text("hello/data")
    expect(page.locator("h1 .badge")).to_have_text("success")
    expect(page.locator("table.manifest")).to_contain_text("docs.jsonl.gz")
    page.screenshot(path=str(shots / f"{tag}-3-step.png"), full_page=True)

    page.locator("table.listing a", has_text="docs.jsonl.gz").click()
    expect(page.locator("table.jsonl tbody tr")).to_have_count(50)
    expect(page.locator("table.jsonl")).to_contain_text("doc-00000")
    page.screenshot(path=str(shots / f"{tag}-4-jsonl.png"), full_page=False)
    page.locator("a.next").first.click()
    expect(page.locator("table.jsonl tbody tr").first).to_contain_text("doc-00050")
    page.locator("a.next").first.click()
    expect(page.locator("table.jsonl tbody tr")).to_have_count(20)
    expect(page.locator("a.next")).to_have_count(0)

    page.locator("nav.crumbs a", has_text=names["data"].split("/")[1]).click()  # the step folder's listing
    page.locator("table.listing a", has_text="table/").click()
    page.locator("table.listing a", has_text="part-00000.parquet").click()
    expect(page.locator(".cards")).to_contain_text("300 rows")
    expect(page.locator("details.section table")).to_contain_text("tokens")
    expect(page.locator(".preview table.data").last.locator("tbody tr")).to_have_count(50)
    page.locator("a.next").first.click()
    expect(page.locator(".preview table.data").last.locator("tbody tr").first).to_contain_text("row-00050")
    page.screenshot(path=str(shots / f"{tag}-5-parquet.png"), full_page=False)

    page.goto(base + "/")
    page.locator("table#exps tr", has_text="data to forecast").locator("a.exp-link").click()
    expect(page.locator("svg.dag a.node")).to_have_count(8)
    for state, n in (("success", 4), ("running", 1), ("failed", 1), ("dep_failed", 1), ("not_started", 1)):
        expect(page.locator(f"svg.dag a.node.st-{state}")).to_have_count(n)
    page.screenshot(path=str(shots / f"{tag}-6-dag.png"), full_page=True)

    page.locator('svg.dag a.node[data-step="train/tiny"]').click()
    expect(page.locator("h1 .badge")).to_have_text("running")
    curve = page.locator('svg.loss-curve polyline.line[data-series="loss"]')
    expect(curve.first).to_be_visible()
    points = curve.first.get_attribute("points").split()
    assert len(points) == 120, len(points)
    ys = [float(p.split(",")[1]) for p in points]
    assert ys[-1] > ys[0]  # loss falls, so the line rises in SVG coordinates (y grows downwards)
    expect(page.locator("pre.log")).to_contain_text("step 119 loss 2.3")
    page.locator("section.summary").first.screenshot(path=str(shots / f"{tag}-7-loss-curve.png"))
    page.screenshot(path=str(shots / f"{tag}-8-train-step.png"), full_page=True)

    page.locator("a.btn", has_text="compare with").click()
    expect(page.locator("table#cfgdiff")).to_contain_text("lr")
    expect(page.locator("table#cfgdiff tbody tr:visible")).to_have_count(3)  # lr, steps, output_path
    expect(page.locator("svg.loss-curve polyline.line")).to_have_count(4)
    page.screenshot(path=str(shots / f"{tag}-9-compare.png"), full_page=True)
    assert not errors, errors
    page.close()


def test_researcher_walks_local_prefix_in_chromium(prefix, chromium):
    root, names = prefix
    with ServerThread(create_app([str(root)])) as server:
        walk(chromium, server.url, names, artifacts_dir(), "local")


def test_researcher_walks_gcs_emulator_root_in_chromium(prefix, chromium, gcs_root):
    _, names = prefix
    url, options = gcs_root
    with ServerThread(create_app([url], storage_options=options)) as server:
        walk(chromium, server.url, names, artifacts_dir(), "gcs")


def test_running_step_log_follows_appended_lines_in_chromium(prefix, chromium):
    root, names = prefix
    log = root / names["train"] / ".executor_logs" / "001.log"
    with ServerThread(create_app([str(root)])) as server:
        page = chromium.new_page()
        page.goto(f"{server.url}/step/0/{names['train']}")
        expect(page.locator("pre.log")).to_contain_text("step 119")
        with log.open("a") as f:
            f.write("step 120 loss 2.29 (appended while the page was open)\n")
        expect(page.locator("pre.log")).to_contain_text("appended while the page was open", timeout=10_000)
        (root / names["train"] / ".executor_status").write_text("SUCCESS")
        try:
            expect(page.locator(".note", has_text=re.compile("now SUCCESS"))).to_be_visible(timeout=10_000)
        finally:
            (root / names["train"] / ".executor_status").write_text("RUNNING")
        page.close()
