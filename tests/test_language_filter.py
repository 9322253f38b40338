"""The filter step's language filter: datatrove's LanguageFilter over the fastText model in a pinned wheel, offline."""

from __future__ import annotations

import dataclasses

import pytest

from marin.processing.filter import FilterConfig, LanguageConfig, filter_documents
from tests.data_docs import doc, read_shard, write_shard

TEXTS = {
    "en": [
        "The harbour was quiet in the early morning, and the fishermen mended their nets before the tide turned.",
        "She opened the letter slowly, read it twice, and then walked down to the village to tell her brother.",
        "Winter came late that year, so the farmers gathered the last apples while the valley was still green.",
    ],
    "fr": [
        "Le port était calme au petit matin, et les pêcheurs réparaient leurs filets avant la marée.",
        "Elle ouvrit la lettre lentement, la lut deux fois, puis descendit au village pour prévenir son frère.",
    ],
    "de": [
        "Der Hafen war am frühen Morgen ruhig, und die Fischer flickten ihre Netze, bevor die Flut kam.",
        "Sie öffnete den Brief langsam, las ihn zweimal und ging dann ins Dorf hinunter, um es ihrem Bruder zu sagen.",
    ],
    "es": [
        "El puerto estaba tranquilo por la mañana temprano, y los pescadores remendaban sus redes antes de la marea.",
    ],
}


def _corpus(root):
    docs = [doc(f"{lang}-{i}", text) for lang, texts in TEXTS.items() for i, text in enumerate(texts)]
    write_shard(root / "part-00000.jsonl.gz", docs[::2])
    write_shard(root / "part-00001.jsonl.gz", docs[1::2])


def _config(tmp_path, name: str, language: LanguageConfig) -> FilterConfig:
    return FilterConfig(
        input_path=str(tmp_path / "in"),
        output_path=str(tmp_path / name),
        language=language,
        gopher_quality=None,
        gopher_repetition=None,
    )


def test_language_filter_keeps_the_wanted_languages_labels_them_and_counts_the_rest(tmp_path):
    _corpus(tmp_path / "in")
    stats = filter_documents(_config(tmp_path, "en", LanguageConfig(languages=("en",))))
    assert stats["filters"] == ["language"] and stats["kept"] == 3
    assert stats["removed_by_filter"]["language"] == {
        "removed": 5,
        "reasons": {"lang_de": 2, "lang_es": 1, "lang_fr": 2},
    }
    kept = [d for p in sorted((tmp_path / "en").glob("part-*")) for d in read_shard(p)]
    assert sorted(d["id"] for d in kept) == ["en-0", "en-1", "en-2"]
    assert all(d["metadata"]["language"] == "en" and d["metadata"]["language_score"] > 0.65 for d in kept)

    stats = filter_documents(_config(tmp_path, "en_fr", LanguageConfig(languages=("en", "fr"))))
    assert stats["kept"] == 5 and stats["removed_by_filter"]["language"]["reasons"] == {"lang_de": 2, "lang_es": 1}


def test_a_wanted_language_below_the_threshold_is_removed_as_low_score(tmp_path):
    _corpus(tmp_path / "in")
    strict = _config(tmp_path, "strict", LanguageConfig(languages=("en",), threshold=0.9999))
    stats = filter_documents(dataclasses.replace(strict, min_kept_fraction=None))  # it may keep none: no guard
    assert stats["kept"] < 3
    assert stats["removed_by_filter"]["language"]["reasons"]["low_score_en"] == 3 - stats["kept"]


def test_bad_language_settings_fail_naming_the_field(tmp_path):
    _corpus(tmp_path / "in")
    with pytest.raises(ValueError, match=r"LanguageConfig.threshold must be in \[0, 1\)"):
        LanguageConfig(threshold=1.5)
    with pytest.raises(TypeError, match=r"LanguageConfig.languages: expected tuple\[str, ...\] \| None, got str 'en'"):
        LanguageConfig(languages="en")
    with pytest.raises(ValueError, match="LanguageConfig.languages must be a non-empty tuple"):
        LanguageConfig(languages=())
    with pytest.raises(ValueError, match=r"FilterConfig.language.languages: \['english'\] not among the 176"):
        filter_documents(_config(tmp_path, "bad", LanguageConfig(languages=("english",))))


def test_default_filter_hashes_the_language_filter_only_when_it_is_on(tmp_path):
    from experiments.defaults import default_download, default_filter, shakespeare_source
    from marin.execution import Executor

    raw = default_download("mini", shakespeare_source(plays=("macbeth",), num_shards=1))
    off, on, other = (
        default_filter("mini", raw),
        default_filter("mini", raw, language=LanguageConfig()),
        default_filter("mini", raw, language=LanguageConfig(languages=("fr",))),
    )
    planned = Executor(str(tmp_path / "lab"), backend="local").plan([off, on, other])
    assert len({planned[off], planned[on], planned[other]}) == 3
