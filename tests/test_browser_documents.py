"""Documents in the browser: search, metadata filters and seeded samples of a shard; a dedup step's removed
documents beside the ones they duplicate, linked both ways. The dedup step is the real one, run by the
executor on a corpus made here.
"""

from __future__ import annotations

import json
import random
import re
from html import escape
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from marin.browser.app import create_app
from marin.execution import Executor, ExecutorStep, this_output_path
from marin.processing.dedup import DedupConfig, dedup_documents
from tests.data_docs import doc, english_doc, write_shard

KEEPERS = {"dup-0": "doc-003", "dup-1": "doc-011", "dup-2": "doc-011"}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("docs-lab")
    rng = random.Random(3)
    docs = [doc(f"doc-{i:03d}", english_doc(rng, 60), lang="en" if i % 3 else "fr", shard=i % 2) for i in range(24)]
    docs[5]["text"] += "\nA zebra walked in."
    docs[17]["text"] += "\nTwo zebras ran."
    by_id = {d["id"]: d for d in docs}
    copies = [doc(copy, by_id[keeper]["text"], lang="en", shard=1) for copy, keeper in KEEPERS.items()]
    corpus = root / "corpus"
    write_shard(corpus / "part-00000.jsonl.gz", docs[:12])
    write_shard(corpus / "part-00001.jsonl.gz", docs[12:] + copies)
    step = ExecutorStep(
        "dedup/corpus",
        dedup_documents,
        DedupConfig(input_path=str(corpus), output_path=this_output_path(), fuzzy=None),
    )
    result = Executor(str(root), backend="local", experiment_name="docs").run([step])
    rel = result[step][len(str(root)) + 1 :]
    yield root, rel, docs


@pytest.fixture(scope="module")
def client(lab):
    root, _, _ = lab
    return TestClient(create_app([str(root)]))


def ids_on(html: str) -> list[str]:
    return re.findall(r'<span class="txt">(doc-\d+|dup-\d)</span>', html)


def test_search_finds_only_documents_whose_text_contains_the_words(client, lab):
    html = client.get("/file/0/corpus/part-00001.jsonl.gz?q=ZEBRA").text
    assert ids_on(html) == ["doc-017"]
    both = client.get("/file/0/corpus/part-00000.jsonl.gz?q=zebra").text
    assert ids_on(both) == ["doc-005"] and "1 documents containing “zebra”" in both


def test_metadata_filters_combine_with_search(client, lab):
    _, _, docs = lab
    html = client.get("/file/0/corpus/part-00000.jsonl.gz", params={"where": "metadata.lang=fr"}).text
    assert ids_on(html) == [d["id"] for d in docs[:12] if d["metadata"]["lang"] == "fr"]
    none = client.get("/file/0/corpus/part-00000.jsonl.gz", params={"where": "metadata.lang=fr", "q": "zebra"}).text
    assert ids_on(none) == [] and "no matching documents" in none
    bad = client.get("/file/0/corpus/part-00000.jsonl.gz", params={"where": "lang"}).text
    assert "where: &#x27;lang&#x27; is not FIELD=VALUE" in bad


def test_a_sample_is_drawn_at_random_and_the_same_for_the_same_seed(client):
    url = "/file/0/corpus/part-00001.jsonl.gz?sample=4&seed={}"
    first, again, other = (ids_on(client.get(url.format(s)).text) for s in (1, 1, 2))
    assert len(first) == 4 and first == again and first != other
    assert "drawn at random (seed 1) from the whole shard" in client.get(url.format(1)).text


def test_duplicates_page_shows_each_removed_document_beside_the_one_it_duplicates(client, lab):
    root, rel, docs = lab
    removed = [json.loads(line) for line in (root / rel / "removed_ids.jsonl").read_text().splitlines()]
    assert {r["id"]: r["duplicate_of"] for r in removed} == KEEPERS
    html = client.get(f"/dups/0/{rel}").text
    pairs = html.split('<div class="pair">')[1:]
    assert len(pairs) == len(KEEPERS)
    texts = {d["id"]: d["text"] for d in docs}
    for pair in pairs:
        removed_id, kept_id = re.findall(r"<code>([\w-]+)</code>", pair)[:2]
        assert KEEPERS[removed_id] == kept_id
        shown = re.findall(r'<pre class="doc-text">(.*?)</pre>', pair, re.S)
        assert len(shown) == 2 and shown[0] == shown[1] and shown[1].startswith(texts[kept_id][:40])
    step_page = client.get(f"/step/0/{rel}").text
    assert f'href="/dups/0/{rel}"' in step_page


def test_duplicate_links_go_both_ways(client, lab):
    _, rel, _ = lab
    removed = client.get(f"/dups/0/{rel}?id=dup-2").text
    assert 'class="doc removed"' in removed and f'href="/dups/0/{rel}?id=doc-011"' in removed
    kept = client.get(f"/dups/0/{rel}?id=doc-011").text
    assert "2 removed as its duplicates" in kept
    for copy in ("dup-1", "dup-2"):
        assert f'href="/dups/0/{quote(rel)}?id={copy}"' in kept or f'href="/dups/0/{rel}?id={copy}"' in kept
    lonely = client.get(f"/dups/0/{rel}?id=doc-000").text
    assert "no duplicates removed" in lonely


def test_documents_in_chromium(lab):
    from playwright.sync_api import expect

    from tests.browser_support import artifacts_dir, served_page

    root, rel, _ = lab
    shots = artifacts_dir()
    with served_page([str(root)]) as (base, page, errors):
        page.goto(base + "/file/0/corpus/part-00000.jsonl.gz")
        page.fill('form.doc-search input[name="q"]', "zebra")
        page.click('form.doc-search button[type="submit"]:not([name])')
        expect(page.locator("table.jsonl tbody tr")).to_have_count(1)
        page.fill('form.doc-search input[name="n_sample"]', "5")
        page.click('form.doc-search button[name="mode"]')
        expect(page.locator("table.jsonl tbody tr")).to_have_count(5)
        page.screenshot(path=str(shots / "documents-1-sample.png"), full_page=True)
        page.goto(base + f"/step/0/{rel}")
        page.locator('a.btn[href^="/dups/"]').click()
        expect(page.locator("div.pair")).to_have_count(len(KEEPERS))
        page.screenshot(path=str(shots / "documents-2-duplicates.png"), full_page=True)
        page.locator("div.doc.kept a").first.click()
        expect(page.locator("div.doc.removed")).to_have_count(1)
    assert not errors, errors


@pytest.fixture(scope="module")
def parquet_lab(tmp_path_factory):
    """A real dedup step over Parquet shards with the text in `content` and no id column (ids derived)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path_factory.mktemp("parquet-docs-lab")
    rng = random.Random(4)
    texts = [english_doc(rng, 60) for _ in range(10)]
    shards = [texts[:5] + [texts[1]], texts[5:] + [texts[7], texts[2]]]
    corpus = root / "corpus"
    corpus.mkdir()
    for s, rows in enumerate(shards):
        table = pa.table({"content": rows, "url": [f"https://e.org/{s}/{i}" for i in range(len(rows))]})
        pq.write_table(table, corpus / f"part-{s:05d}.parquet", row_group_size=2)
    step = ExecutorStep(
        "dedup/parquet",
        dedup_documents,
        DedupConfig(
            input_path=str(corpus), output_path=this_output_path(), fuzzy=None, text_key="content", id_key=None
        ),
    )
    result = Executor(str(root), backend="local", experiment_name="docs").run([step])
    yield root, result[step][len(str(root)) + 1 :], shards


def test_duplicates_page_finds_texts_in_parquet_inputs_read_with_the_steps_keys(parquet_lab):
    root, rel, shards = parquet_lab
    removed = [json.loads(line) for line in (root / rel / "removed_ids.jsonl").read_text().splitlines()]
    keepers = {"part-00000/5": "part-00000/1", "part-00001/5": "part-00001/2", "part-00001/6": "part-00000/2"}
    assert {r["id"]: r["duplicate_of"] for r in removed} == keepers
    client = TestClient(create_app([str(root)]))
    html = client.get(f"/dups/0/{rel}").text
    pairs = html.split('<div class="pair">')[1:]
    assert len(pairs) == 3 and "not found in the input" not in html
    for pair in pairs:
        removed_id, kept_id = re.findall(r"<code>([\w/-]+)</code>", pair)[:2]
        assert keepers[removed_id] == kept_id
        shard, row = kept_id.split("/")
        shown = re.findall(r'<pre class="doc-text">(.*?)</pre>', pair, re.S)
        assert len(shown) == 2 and shown[0] == shown[1] == escape(shards[int(shard[-1])][int(row)])
    kept = client.get(f"/dups/0/{rel}", params={"id": "part-00000/2"}).text
    assert "1 removed as its duplicates" in kept and escape(shards[0][2]) in kept
