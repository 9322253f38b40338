"""What the browser's pages say, and how its previews read files, over a prefix made by the real executor.

These go through starlette's TestClient (no socket): the Chromium tests cover the real
server; here the interest is in content, bad input and how much of a file is read. Each test
gets its own copy of the prefix (records keep the original absolute paths, so every page
here also proves that the browser re-roots them).
"""

from __future__ import annotations

import gzip
import io
import json
import re
import shutil

import pyarrow.parquet as pq
import pytest
import zstandard
from starlette.testclient import TestClient

from marin.browser.app import create_app
from marin.browser.previews import read_jsonl_page
from marin.browser.svg import DAG_BOX_H, DAG_BOX_W, dag_svg, layout
from tests.browser_pipeline import lab_prefix


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("built") / "lab"
    with lab_prefix(root) as names:
        yield root, names


@pytest.fixture()
def lab(built, tmp_path):
    original, names = built
    root = tmp_path / "copy"
    shutil.copytree(original, root, symlinks=True, ignore=shutil.ignore_patterns(".tmp-*"))
    return root, names


@pytest.fixture()
def client(lab):
    root, _ = lab
    return TestClient(create_app([str(root)]), raise_server_exceptions=False)


def errors_in(html: str) -> list[str]:
    boxes = re.findall(r'class="error" role="alert"><b>Error:</b> (.*?)</div>', html)
    return boxes + re.findall(r'<span class="bad">(.*?)</span>', html)


def test_experiment_list_counts_steps_by_state(client, lab):
    _, names = lab
    html = client.get("/").text
    assert 'data-autorefresh="15" checked' in html  # a step is running: the page reloads itself
    row = next(r for r in html.split("<tr>") if names["tiny_record"].split("/")[1] in r)
    for state, n in (("success", 4), ("running", 1), ("failed", 1), ("dep_failed", 1), ("not_started", 1)):
        assert f'<span class="cnt st-{state}" title="' in row and re.search(rf'st-{state}" title="[^"]+">{n}<', row), (
            state
        )


def test_step_without_folder_shows_not_started_with_the_record_config(client, lab):
    _, names = lab
    html = client.get(f"/step/0/{names['ladder']}", params={"exp": names["tiny_record"]}).text
    assert "has not started" in html and 'st-not_started">not started' in html
    assert "results.json" in html and not errors_in(html)


def test_durations_come_from_runs_jsonl_and_running_steps_from_the_lease(client, lab):
    _, names = lab

    def row_of(html: str, step: str) -> str:
        return next(r for r in html.split("<tr>") if f">{step}</a>" in r)

    first = client.get(f"/exp/0/{names['first_record']}").text
    assert re.search(r">\d+(\.\d)? m?s<", row_of(first, "raw/corpus")) and "FAILED" in row_of(first, "dedup/corpus")
    tiny = client.get(f"/exp/0/{names['tiny_record']}").text  # still running: no runs line of its own yet
    assert re.search(r">\d+(\.\d)? m?s<", row_of(tiny, "raw/corpus"))  # from the run of the first record
    assert re.search(r"running \d+(\.\d)? m?s", row_of(tiny, "train/tiny"))  # from the lease


def test_malformed_records_and_files_show_an_error_never_a_500(client, lab):
    root, names = lab
    (root / names["stats"] / "stats.json").write_text("{oops")
    (running_outputs,) = (root / names["train"]).glob(".executor_attempt.*")  # the step still runs
    (running_outputs / "metrics.jsonl").write_text('{"step": 0, "loss": 3.0}\nnot json\n{"step": 1, "loss": 2.5}\n')
    (root / names["eval"] / ".executor_info").write_text("[1, 2")
    (root / names["eval"] / ".executor_lease").write_text("{")
    (root / "experiments" / "broken-00000000.json").write_text('{"format": "marin.experiment/1", "steps": [')
    (root / names["data"] / "broken.jsonl.gz").write_bytes(b"\x1f\x8b not really gzip")
    (root / names["data"] / "broken.parquet").write_bytes(b"PAR1 nonsense")
    (root / names["data"] / ".executor_manifest.json").write_text('{"files": 3}')
    runs = root / names["first_record"].replace(".json", ".runs.jsonl")
    runs.write_text(runs.read_text() + "{truncated\n")
    expect = {
        "/": "broken-00000000.json: not valid JSON",
        "/exp/0/experiments/broken-00000000.json": "not valid JSON",
        f"/exp/0/{names['first_record']}": "1 line(s) are not valid JSON",
        f"/step/0/{names['stats']}": "stats.json: not valid JSON",
        f"/step/0/{names['train']}": "metrics.jsonl: 1 line(s)",
        f"/step/0/{names['eval']}": ".executor_info: not valid JSON",
        f"/file/0/{names['data']}/broken.jsonl.gz": "cannot preview as jsonl",
        f"/file/0/{names['data']}/broken.parquet": "cannot preview as parquet",
        f"/step/0/{names['data']}": "field &#x27;files&#x27; is missing or not a list",
    }
    for url, message in expect.items():
        r = client.get(url)
        assert r.status_code == 200, (url, r.status_code)
        assert "Traceback" not in r.text
        assert any(message in e for e in errors_in(r.text)), (url, errors_in(r.text))
    assert "loss" in client.get(f"/step/0/{names['train']}").text  # the good rows are still plotted
    assert client.get("/exp/0/experiments/nope.json").status_code == 404


def _jsonl(n: int) -> bytes:
    return b"".join(json.dumps({"id": i, "text": f"line {i}"}).encode() + b"\n" for i in range(n))


@pytest.mark.parametrize("suffix", ["", ".gz", ".zst"])
def test_jsonl_pages_chain_by_offset_and_cover_every_line_once(tmp_path, suffix):
    import fsspec

    data = _jsonl(237)
    if suffix == ".gz":
        data = gzip.compress(data)
    elif suffix == ".zst":
        data = zstandard.ZstdCompressor().compress(data)
    path = tmp_path / f"docs.jsonl{suffix}"
    path.write_bytes(data)
    fs = fsspec.filesystem("file")
    seen, offset, at_end = [], 0, False
    while not at_end:
        lines, offset, at_end = read_jsonl_page(fs, str(path), offset, 50)
        seen.extend(obj["id"] for _, obj, err in lines if err is None)
    assert seen == list(range(237))


def test_first_jsonl_page_reads_a_small_part_of_a_large_file(tmp_path, monkeypatch):
    import fsspec

    path = tmp_path / "big.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=1) as f:
        for i in range(40):
            f.write(
                b"".join(
                    json.dumps({"id": i * 5000 + j, "text": (b"%08x" % (i * j)).decode() * 40}).encode() + b"\n"
                    for j in range(5000)
                )
            )
    size = path.stat().st_size
    fs = fsspec.filesystem("file")
    read = []
    orig_open = fs.open

    def counting_open(*a, **k):
        f = orig_open(*a, **k)
        raw_read = f.read

        def rd(n=-1):
            out = raw_read(n)
            read.append(len(out))
            return out

        f.read = rd
        return f

    monkeypatch.setattr(fs, "open", counting_open)
    lines, _, at_end = read_jsonl_page(fs, str(path), 0, 50)
    assert [obj["id"] for _, obj, _ in lines] == list(range(50)) and not at_end
    assert sum(read) < 2 << 20 < size, (sum(read), size)


def test_parquet_page_reads_only_the_row_groups_it_shows(client, lab, monkeypatch):
    _, names = lab
    groups = []
    orig = pq.ParquetFile.read_row_group

    def spy(self, i, *a, **k):
        groups.append(i)
        return orig(self, i, *a, **k)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", spy)
    html = client.get(f"/file/0/{names['corpus']}/table/part-00000.parquet", params={"offset": 150}).text
    assert groups == [1]  # rows 150..199 live in the second of three 100-row groups
    assert "row-00150" in html and "row-00199" in html and "row-00200" not in html
    assert "<b>300</b> rows" in html and "<b>3</b> row groups" in html


def test_previews_of_json_text_and_images(client, lab):
    root, names = lab
    png = io.BytesIO()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.figure(figsize=(2, 1))
    plt.plot([1, 2], [3, 1])
    plt.savefig(png, format="png")
    plt.close("all")
    (root / names["eval"] / "forecast.png").write_bytes(png.getvalue())
    (root / names["eval"] / "notes.txt").write_text("<script>alert(1)</script> plain text")
    html = client.get(f"/file/0/{names['eval']}/results.json").text
    assert 'class="jt"' in html and "shakespeare_val" in html
    html = client.get(f"/file/0/{names['eval']}/notes.txt").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html
    r = client.get(f"/raw/0/{names['eval']}/forecast.png")
    assert r.headers["content-type"] == "image/png" and r.content == png.getvalue()
    assert "sandbox" in r.headers["content-security-policy"]
    html = client.get(f"/step/0/{names['eval']}").text
    assert "Forecast plot" in html and "shakespeare_val" in html and "1.12" in html  # results table


def test_step_summaries_per_kind(client, lab):
    _, names = lab
    html = client.get(f"/step/0/{names['filter']}").text
    assert "Filter counts" in html and "removed.gopher_short_doc" in html and "117" in html
    html = client.get(f"/step/0/{names['corpus']}").text
    assert "Download" in html and "file:///corpus/plays" in html and "docs.jsonl.gz" in html
    html = client.get(f"/step/0/{names['train']}").text
    assert 'class="plot loss-curve"' in html and "245,760" in html  # tokens seen at the last row
    html = client.get(f"/step/0/{names['dedup']}").text
    assert "ValueError: dedup threshold must be &lt; 1" in html and 'st-failed">failed' in html


def test_compare_shows_config_differences_and_both_loss_curves(client, lab):
    _, names = lab
    html = client.get("/compare/0", params={"a": names["train"], "b": names["train_old"]}).text
    assert "3 of 4 fields differ" in html  # lr, steps and hold; not the data, nor each one's output_path
    assert "left out: output_path" in html
    assert html.count('<polyline class="line train run-') == 2  # each version's training loss, as a line
    assert 'data-series="A: eval/loss (in-training eval)"' in html  # evaluations as points, never a line
    assert 'class="marker eval run-B" data-series="B: eval/loss (in-training eval)"' in html
    assert 'polyline class="line train" data-series="A: eval/loss' not in html


def test_log_api_returns_appended_text_from_an_offset(client, lab):
    root, names = lab
    log_rel = f"{names['train']}/.executor_logs/001.log"
    first = client.get(f"/api/log/0/{log_rel}", params={"offset": 0}).json()
    assert first["state"] == "RUNNING" and "holding" in first["text"]
    with (root / log_rel).open("a") as f:
        f.write("step 120\n")
    more = client.get(f"/api/log/0/{log_rel}", params={"offset": first["offset"]}).json()
    assert more["text"] == "step 120\n"


def test_dag_layout_puts_each_step_right_of_its_dependencies():
    nodes = ["a", "b", "c", "d", "e"]
    deps = {"b": ["a"], "c": ["a"], "d": ["b", "c"], "e": []}
    pos = layout(nodes, deps)
    assert pos["a"][0] == 0 and pos["b"][0] == pos["c"][0] == 1 and pos["d"][0] == 2 and pos["e"][0] == 0
    assert len({pos[n] for n in nodes}) == len(nodes)


def test_the_same_pages_work_on_an_s3_root(lab):
    """A real S3 protocol server (moto's, on 127.0.0.1) through s3fs: list, experiment, step, previews, refusals."""
    import s3fs
    from moto.server import ThreadedMotoServer

    from tests.browser_support import free_port, upload_tree

    root, names = lab
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        opts = {"endpoint_url": f"http://127.0.0.1:{port}", "key": "testing", "secret": "testing"}
        fs = s3fs.S3FileSystem(**opts)
        fs.mkdir("lab-bucket")
        upload_tree(fs, root, "lab-bucket/lab")
        client = TestClient(create_app(["s3://lab-bucket/lab"], storage_options={"s3": opts}))
        html = client.get("/").text
        assert "Tiny LM: data to forecast" in html and "hello_world" in html
        html = client.get(f"/exp/0/{names['tiny_record']}").text
        assert html.count('class="node st-') == 8 and 'class="node st-running"' in html
        html = client.get(f"/step/0/{names['train']}").text
        assert 'class="plot loss-curve"' in html and "holding" in html
        assert "doc-00049" in client.get(f"/file/0/{names['corpus']}/docs.jsonl.gz").text
        assert "row-00150" in client.get(f"/file/0/{names['corpus']}/table/part-00000.parquet?offset=150").text
        assert client.get("/raw/0/%2e%2e/other-bucket/x").status_code == 403
    finally:
        server.stop()


def test_several_roots_are_listed_together_and_a_root_without_records_says_so(lab, tmp_path):
    root, names = lab
    empty = tmp_path / "not-a-prefix"
    empty.mkdir()
    client = TestClient(create_app([str(root), str(empty)]))
    html = client.get("/").text
    assert "no experiments/ folder" in html and "<th>lab</th>" in html
    assert html.count('class="exp-link"') == 3
    assert client.get(f"/step/1/{names['train']}").status_code == 404  # not under the second root


def test_odd_file_names_are_linked_and_previewed(client, lab):
    root, names = lab
    (root / names["eval"] / "notes #1 & ü?.txt").write_text("odd but fine")
    html = client.get(f"/step/0/{names['eval']}").text
    href = re.search(r'<a class="file" href="([^"]*notes[^"]*)"', html).group(1)
    assert "#" not in href and "?" not in href and " " not in href
    assert "odd but fine" in client.get(href.replace("&amp;", "&")).text


def _edge_samples(d: str, n: int = 24) -> list[tuple[float, float]]:
    """Points along an SVG path of M, L and C commands (as dag_svg writes them)."""
    tokens = re.findall(r"[MLC]|-?\d+(?:\.\d+)?", d)
    points, here, i = [], (0.0, 0.0), 0
    while i < len(tokens):
        cmd = tokens[i]
        if cmd == "M":
            here = (float(tokens[i + 1]), float(tokens[i + 2]))
            i += 3
        elif cmd == "L":
            end = (float(tokens[i + 1]), float(tokens[i + 2]))
            points += [(here[0] + (end[0] - here[0]) * t / n, here[1] + (end[1] - here[1]) * t / n) for t in range(n)]
            here, i = end, i + 3
        else:
            c1, c2, end = [(float(tokens[i + k]), float(tokens[i + k + 1])) for k in (1, 3, 5)]
            for t in (k / n for k in range(n)):
                u = 1 - t
                points.append(
                    tuple(
                        u**3 * p0 + 3 * u * u * t * p1 + 3 * u * t * t * p2 + t**3 * p3
                        for p0, p1, p2, p3 in zip(here, c1, c2, end, strict=True)
                    )
                )
            here, i = end, i + 7
    return points


@pytest.mark.parametrize("engine", ["dot", "layered"])
@pytest.mark.parametrize("chain", [4, 12])
def test_dag_edges_never_pass_through_a_step_and_long_dags_fit_the_box(chain, engine, monkeypatch):
    """b -> d skips c's layer: drawn straight along the row, that edge crossed c (deduped -> tokenized did).

    'layered' is the drawing where Graphviz is missing (no `dot` on PATH): the page is still served.
    """
    from marin.browser.svg import dot_layout

    if engine == "layered":
        monkeypatch.setenv("PATH", "")
    dot_layout.cache_clear()
    names = [f"s{i}" for i in range(chain)]
    steps = [
        {"id": n, "label": n, "sub": "", "state": "SUCCESS", "href": "#", "deps": [], "pseudo_deps": []} for n in names
    ]
    for i in range(1, chain):
        steps[i]["deps"].append(names[i - 1])
    steps[-1]["deps"].append(names[1])  # skips every layer in between
    steps.append(
        {
            "id": "side",
            "label": "side",
            "sub": "",
            "state": "SUCCESS",
            "href": "#",
            "deps": [names[0]],
            "pseudo_deps": [],
        }
    )
    svg = dag_svg(steps)
    width, height = map(float, re.search(r'width="(\d+)" height="(\d+)"', svg).groups())
    assert height <= DAG_BOX_H or engine == "layered"  # the fallback may scroll
    # wider than the box of a 1,400 px window: the page shrinks it to the box (CSS), never below readable
    min_width = float(re.search(r"min-width: (\d+)px", svg).group(1))
    assert "max-width: 100%" in svg and (width <= DAG_BOX_W or min_width <= DAG_BOX_W or engine == "layered")
    assert f'data-engine="{engine}"' in svg
    rects = [
        tuple(map(float, m)) for m in re.findall(r'<rect x="([\d.]+)" y="([\d.]+)" width="(\d+)" height="(\d+)"', svg)
    ]
    assert len(rects) == len(steps)
    paths = re.findall(r'<path class="edge \w+" d="([^"]+)"', svg)
    assert len(paths) == chain + 1
    for d in paths:
        for x, y in _edge_samples(d)[3:-3]:
            inside = [r for r in rects if r[0] + 2 < x < r[0] + r[2] - 2 and r[1] + 2 < y < r[1] + r[3] - 2]
            assert not inside, f"edge {d[:40]}… passes through a node at ({x:.0f}, {y:.0f})"
