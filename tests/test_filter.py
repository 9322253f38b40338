"""The filter step: datatrove quality filters over shards, counted removals, determinism, resume, bad input."""

from __future__ import annotations

import dataclasses
import gzip
import json
import logging
import random

import pytest

from marin.processing.documents import BadDocumentError, EmptyInputError
from marin.processing.filter import FilterConfig, FilterWipeoutError, GopherQualityConfig, filter_documents
from tests.data_docs import doc, english_doc, read_shard, tree_bytes, write_shard


def _corpus(root, n_shards=3, good_per_shard=4):
    """Good prose plus, in every shard, one short doc, one repetitive doc and one digits-only doc."""
    rng = random.Random(0)
    planted = {}
    for s in range(n_shards):
        docs = [doc(f"good-{s}-{i}", english_doc(rng, 120)) for i in range(good_per_shard)]
        docs.append(doc(f"short-{s}", "A short note. It says very little."))
        docs.append(
            doc(
                f"repeat-{s}",
                "\n".join(
                    ["the keeper of the light went to the harbour and back with the news that the storm had passed."]
                    * 30
                ),
            )
        )
        docs.append(doc(f"digits-{s}", " ".join(str(rng.randint(0, 10**6)) for _ in range(120))))
        planted.update({f"short-{s}": 1, f"repeat-{s}": 1, f"digits-{s}": 1})
        write_shard(root / f"part-{s:05d}.jsonl.gz", docs)
    return planted


def test_filter_removes_low_quality_docs_and_counts_them_by_filter_and_reason(tmp_path):
    planted = _corpus(tmp_path / "in")
    stats = filter_documents(FilterConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / "out")))

    kept = [d["id"] for i in range(3) for d in read_shard(tmp_path / "out" / f"part-{i:05d}.jsonl.gz")]
    assert kept == [f"good-{s}-{i}" for s in range(3) for i in range(4)]
    assert stats["documents"] == 21 and stats["kept"] == 12 and stats["removed"] == 9
    gq = stats["removed_by_filter"]["gopher_quality"]
    assert gq["reasons"]["gopher_short_doc"] == 3
    assert gq["reasons"]["gopher_below_alpha_threshold"] == 3
    assert stats["removed_by_filter"]["gopher_repetition"]["removed"] == 3
    assert sum(f["removed"] for f in stats["removed_by_filter"].values()) == 9
    assert json.loads((tmp_path / "out" / "stats.json").read_text()) == stats
    sample = read_shard(tmp_path / "out" / "removed_sample.jsonl.gz")
    assert {d["id"] for d in sample} == set(planted)
    assert all(d["metadata"]["filter_reason"].startswith("gopher_") for d in sample)


def test_a_threshold_set_to_none_turns_that_check_off(tmp_path):
    _corpus(tmp_path / "in", n_shards=1)
    cfg = FilterConfig(
        input_path=str(tmp_path / "in"),
        output_path=str(tmp_path / "out"),
        gopher_quality=GopherQualityConfig(min_doc_words=None, min_stop_words=None, max_non_alpha_words_ratio=None),
        gopher_repetition=None,
    )
    stats = filter_documents(cfg)
    kept = {d["id"] for d in read_shard(tmp_path / "out" / "part-00000.jsonl.gz")}
    assert {"short-0", "repeat-0"} <= kept
    assert stats["filters"] == ["gopher_quality"]


def test_filter_output_bytes_identical_across_one_and_two_workers_and_reruns(tmp_path):
    _corpus(tmp_path / "in")
    outs = []
    for name, workers in [("a", 1), ("b", 2), ("c", 1)]:
        filter_documents(
            FilterConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / name), workers=workers)
        )
        outs.append(tree_bytes(tmp_path / name))
    assert outs[0] == outs[1] == outs[2]
    assert "part-00002.jsonl.gz" in outs[0]


def test_a_crash_after_k_shards_resumes_redoing_only_the_missing_ones(tmp_path, caplog):
    _corpus(tmp_path / "in", n_shards=4)
    good_shard = (tmp_path / "in" / "part-00002.jsonl.gz").read_bytes()
    bad = gzip.compress(gzip.decompress(good_shard) + b'{"id": "x", "text": "\xff\xfe broken"}\n', mtime=0)
    (tmp_path / "in" / "part-00002.jsonl.gz").write_bytes(bad)
    cfg = FilterConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / "out"))
    with pytest.raises(BadDocumentError, match=r"part-00002\.jsonl\.gz:8: not_utf8"):
        filter_documents(cfg)
    out = tmp_path / "out"
    assert sorted(p.name for p in out.glob("part-*")) == ["part-00000.jsonl.gz", "part-00001.jsonl.gz"]
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("part-*")}

    (tmp_path / "in" / "part-00002.jsonl.gz").write_bytes(good_shard)
    caplog.set_level(logging.INFO, logger="marin.processing.filter")
    caplog.clear()  # only the rerun's records (an earlier test may have left the logger at INFO)
    filter_documents(cfg)
    written = [r.getMessage().split()[2] for r in caplog.records if r.getMessage().startswith("wrote shard")]
    assert written == ["part-00002.jsonl.gz", "part-00003.jsonl.gz"]
    assert {p: (out / p).stat().st_mtime_ns for p in before} == before

    filter_documents(FilterConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / "fresh")))
    assert tree_bytes(out) == tree_bytes(tmp_path / "fresh")


def test_bad_lines_are_counted_when_skipping_is_asked_for(tmp_path):
    rng = random.Random(1)
    write_shard(
        tmp_path / "in" / "part-00000.jsonl.gz",
        [doc("a", english_doc(rng, 100))],
        raw_lines=[b'{"id": "no-text", "body": "x"}\n', b'{"id": "bytes", "text": "\xff"}\n', b"not json\n"],
    )
    cfg = FilterConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / "out"), skip_bad_documents=True)
    stats = filter_documents(cfg)
    assert stats["documents"] == 1 and stats["kept"] == 1
    assert stats["skipped_bad_documents"] == {"bad_json": 1, "missing_text": 1, "not_utf8": 1}


def test_a_missing_text_field_fails_naming_the_file_and_line(tmp_path):
    write_shard(tmp_path / "in" / "part-00000.jsonl.gz", [doc("a", "fine"), {"id": "b", "content": "no text"}])
    with pytest.raises(BadDocumentError, match=r"part-00000\.jsonl\.gz:2: missing_text"):
        filter_documents(FilterConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / "out")))


def test_empty_input_fails_with_a_clear_error(tmp_path):
    (tmp_path / "none").mkdir()
    with pytest.raises(EmptyInputError, match="no document shards"):
        filter_documents(FilterConfig(input_path=str(tmp_path / "none"), output_path=str(tmp_path / "out")))
    write_shard(tmp_path / "empty" / "part-00000.jsonl.gz", [])
    with pytest.raises(EmptyInputError, match="no documents in input path"):
        filter_documents(FilterConfig(input_path=str(tmp_path / "empty"), output_path=str(tmp_path / "out2")))


def _short_docs(prefix: str, n: int, source: str) -> list[dict]:
    return [{**doc(f"{prefix}-{i}", f"Note {i}: too short to keep."), "source": source} for i in range(n)]


def test_a_filter_that_keeps_nothing_fails_naming_the_source_and_the_filter_and_publishes_no_stats(tmp_path):
    write_shard(tmp_path / "in" / "part-00000.jsonl.gz", _short_docs("web", 310, "web"))
    cfg = FilterConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / "out"))
    with pytest.raises(FilterWipeoutError) as err:
        filter_documents(cfg)
    message = str(err.value)
    assert "source 'web' would keep 0.0% of its documents (0 of 310)" in message
    assert "gopher_quality removed most of it (310 documents, mostly gopher_short_doc)" in message
    assert "'web-0' (gopher_quality/gopher_short_doc): 'Note 0: too short to keep.'" in message
    assert "min_kept_fraction=0.05" in message and "--force_run_failed" in message
    report = json.loads((tmp_path / "out" / "filter_guard.json").read_text())
    assert report["under_the_limit"] == ["web"]
    assert report["sources"]["web"]["removed"] == {"gopher_quality/gopher_short_doc": 310}
    assert not (tmp_path / "out" / "stats.json").exists()


def test_a_source_kept_at_one_percent_fails_while_the_others_are_fine_and_none_turns_the_guard_off(tmp_path):
    rng = random.Random(0)
    good = [doc(f"book-{i}", english_doc(rng, 120)) for i in range(30)]
    web = _short_docs("web", 198, "web") + [
        {**doc(f"web-ok-{i}", english_doc(rng, 120)), "source": "web"} for i in range(2)
    ]
    write_shard(tmp_path / "in" / "part-00000.jsonl.gz", [{**d, "source": "books"} for d in good] + web[:100])
    write_shard(tmp_path / "in" / "part-00001.jsonl.gz", web[100:])
    cfg = FilterConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / "out"))
    with pytest.raises(FilterWipeoutError, match=r"source 'web' would keep 1\.0% of its documents \(2 of 200\)"):
        filter_documents(cfg)

    stats = filter_documents(dataclasses.replace(cfg, min_kept_fraction=None))
    assert stats["kept"] == 32
    assert stats["sources"] == {
        "books": {"documents": 30, "kept": 30, "kept_fraction": 1.0},
        "web": {"documents": 200, "kept": 2, "kept_fraction": 0.01},
    }
    assert not (tmp_path / "out" / "filter_guard.json").exists()


def test_a_small_source_is_not_judged_alone_but_a_step_keeping_nothing_is(tmp_path):
    rng = random.Random(4)
    write_shard(
        tmp_path / "in" / "part-00000.jsonl.gz",
        [doc(f"good-{i}", english_doc(rng, 120)) for i in range(25)] + _short_docs("tiny", 3, "tiny"),
    )
    stats = filter_documents(FilterConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / "out")))
    assert stats["sources"]["tiny"] == {"documents": 3, "kept": 0, "kept_fraction": 0.0}
    write_shard(tmp_path / "few" / "part-00000.jsonl.gz", _short_docs("tiny", 3, "tiny"))
    with pytest.raises(FilterWipeoutError, match=r"source 'tiny' would keep 0\.0% of its documents \(0 of 3\)"):
        filter_documents(FilterConfig(input_path=str(tmp_path / "few"), output_path=str(tmp_path / "out2")))


def test_the_run_summary_shows_what_the_filter_kept_and_a_wiped_out_filter_fails_itself_not_dedup(tmp_path, capsys):
    from marin.execution import Executor, ExecutorRunError, ExecutorStep, output_path_of, this_output_path
    from marin.processing.dedup import DedupConfig, dedup_documents

    _corpus(tmp_path / "in")
    write_shard(tmp_path / "web" / "part-00000.jsonl.gz", _short_docs("web", 310, "web"))

    def steps(corpus: str, name: str):
        cfg = FilterConfig(input_path=corpus, output_path=this_output_path())
        kept = ExecutorStep(f"filtered/{name}", filter_documents, cfg)
        return ExecutorStep(
            f"deduped/{name}",
            dedup_documents,
            DedupConfig(input_path=output_path_of(kept), output_path=this_output_path(), fuzzy=None),
        )

    executor = Executor(str(tmp_path / "lab"), backend="local", experiment_name="summary")
    executor.run([steps(str(tmp_path / "in"), "good")])
    out = capsys.readouterr().out
    assert "filtered/good-" in out and "kept 12 of 21 documents (9 removed)" in out
    assert "kept 12 of 12 documents (0 removed)" in out  # dedup's line

    with pytest.raises(ExecutorRunError):
        executor.run([steps(str(tmp_path / "web"), "web")])
    out = capsys.readouterr().out
    failed = next(line for line in out.splitlines() if "filtered/web-" in line and "FAILED" in line)
    assert "FilterWipeoutError: filter: source 'web' would keep 0.0% of its documents (0 of 310)" in failed
    assert next(line for line in out.splitlines() if "deduped/web-" in line).split()[0] == "DEP_FAILED"
    assert "EmptyInputError" not in out
