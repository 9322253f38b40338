"""Quality filtering with datatrove's heuristic filters, every threshold a config field.

The step runs datatrove's own filter classes (language, Gopher quality, Gopher repetition, C4,
FineWeb quality) over each shard, in that order; a document is removed by the first filter that
rejects it, and the removal is counted under that filter and datatrove's reason
(`gopher_quality/gopher_short_doc`, `language/lang_fr`). A filter set to `None` is off. The language
filter is datatrove's LanguageFilter over the fastText lid.176 model shipped in a pinned wheel, so it
runs offline (`language_id.py`); it labels kept documents with `metadata.language` and
`metadata.language_score`. A document with more words than Gopher quality's `max_doc_words` is
removed as `gopher_long_doc` from a count of its first words, the filter's own answer without its
list of every word (`_more_words_than_allowed`). Note that datatrove's C4 filter edits the documents it keeps (it drops
citation markers and lines that fail its line rules); the others only decide.

Output, under `output_path`: `part-0000i.jsonl.gz` for input shard i (kept documents, input order),
`stats.json` (documents in, kept, removed per filter and reason, bad lines skipped), and
`removed_sample.jsonl.gz` (the first `removed_sample_size` removed documents in shard order, each with
`metadata.filter_reason`). Shards run through `marin.stepkit.sharding.run_shards` (Ray tasks on a cluster, a
local pool of `workers` otherwise); each finished shard's counts sit in its ledger under
`.shards/filter/`, so a resumed run redoes only unfinished shards and still totals them all.

A guard, as dedup has one: before `stats.json` is written, the kept fraction of each source (the `source`
field, else the input shard's file name) is checked against `min_kept_fraction` (default 5%). A source of at
least `GUARD_MIN_DOCUMENTS` documents that keeps less, or a step that keeps no document at all, fails the step
with `FilterWipeoutError`, naming the source, the filter that removed most of it and removed examples, and
leaves every source's counts and examples in `filter_guard.json`: a filter that wipes a source out is almost
always a wrong setting (a language code, a text field, a threshold), seen here rather than one step later.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from dataclasses import asdict, dataclass

from marin.processing.documents import (
    EmptyInputError,
    ReadReport,
    check_keys,
    encode_documents,
    list_shards,
    shard_name,
    step_documents,
    write_json,
)
from marin.stepkit.config import (
    StepConfig,
    input_field,
    output_field,
    unversioned,
    versioned_unless_default,
)
from marin.stepkit.sharding import LEDGERS, ShardResources, run_shards
from marin.storage import delete, join, write_bytes, write_volatile_list

logger = logging.getLogger(__name__)

_DATATROVE_TOKENIZERS = threading.Lock()
"""datatrove's filters share one spaCy word tokenizer per language in the process (`load_word_tokenizer` is
cached), and spaCy is not thread-safe: two filter steps in threads of one process (the local backend) failed
with `[E109] Component 'sentencizer' could not be run`. Filter calls take turns (they hold the GIL anyway)."""


GUARD_REPORT = "filter_guard.json"
"""Written into the output folder when the guard refuses: per source, kept, removed by filter and reason, examples."""
GUARD_MIN_DOCUMENTS = 20
"""Sources with fewer documents are not judged on their own (a few removed documents say little); a step that
keeps nothing at all is refused whatever its size."""
GUARD_EXAMPLES = 3
"""Removed documents kept per source and shard as the guard's examples."""
EXAMPLE_CHARS = 300
"""Characters of each example's text in the guard's report."""


class FilterWipeoutError(ValueError):
    """The filters would keep less than `min_kept_fraction` of a source's documents; the step does not publish."""


@dataclass(frozen=True, kw_only=True)
class GopherQualityConfig:
    """Thresholds of datatrove's GopherQualityFilter (None turns one check off)."""

    min_doc_words: int | None = 50
    """Fewer words than this: removed (`gopher_short_doc`)."""
    max_doc_words: int | None = 100_000
    """More words than this: removed (`gopher_long_doc`)."""
    min_avg_word_length: int | None = 3
    """Mean word length in characters below this: removed."""
    max_avg_word_length: int | None = 10
    """Mean word length in characters above this: removed."""
    max_symbol_word_ratio: float | None = 0.1
    """Ratio of '#' and '...' to words above this: removed."""
    max_bullet_lines_ratio: float | None = 0.9
    """Fraction of lines starting with a bullet above this: removed."""
    max_ellipsis_lines_ratio: float | None = 0.3
    """Fraction of lines ending with an ellipsis above this: removed."""
    max_non_alpha_words_ratio: float | None = 0.8
    """Fraction of words with at least one letter below this: removed (datatrove's name, kept)."""
    min_stop_words: int | None = 2
    """Fewer English stop words than this: removed."""


@dataclass(frozen=True, kw_only=True)
class GopherRepetitionConfig:
    """Thresholds of datatrove's GopherRepetitionFilter (fractions in [0, 1]; None turns one off)."""

    dup_line_frac: float | None = 0.3
    """Fraction of lines that are duplicates above this: removed."""
    dup_para_frac: float | None = 0.3
    """Fraction of paragraphs that are duplicates above this: removed."""
    dup_line_char_frac: float | None = 0.2
    """Fraction of characters in duplicate lines above this: removed."""
    dup_para_char_frac: float | None = 0.2
    """Fraction of characters in duplicate paragraphs above this: removed."""
    top_n_grams: tuple[tuple[int, float], ...] = ((2, 0.2), (3, 0.18), (4, 0.16))
    """(n, max fraction of characters in the most frequent n-gram)."""
    dup_n_grams: tuple[tuple[int, float], ...] = ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10))
    """(n, max fraction of characters in duplicated n-grams)."""


@dataclass(frozen=True, kw_only=True)
class C4QualityConfig:
    """Options of datatrove's C4QualityFilter (line rules edit kept documents; -1 turns a count off)."""

    split_paragraph: bool = True
    """Split into lines on newlines (True) or into sentences (False)."""
    remove_citations: bool = True
    """Strip wikipedia-style citation markers like [1] from kept text."""
    filter_no_terminal_punct: bool = True
    """Drop lines that do not end in terminal punctuation."""
    min_num_sentences: int = 5
    """Fewer sentences than this after line rules: removed."""
    min_words_per_line: int = 3
    """Drop lines with fewer words than this."""
    max_word_length: int = 1000
    """Drop lines with a word longer than this many characters."""
    filter_lorem_ipsum: bool = True
    """Remove documents containing 'lorem ipsum'."""
    filter_javascript: bool = True
    """Drop lines that mention javascript."""
    filter_curly_bracket: bool = True
    """Remove documents containing a curly bracket."""
    filter_policy: bool = True
    """Drop lines with cookie/terms-of-use boilerplate."""


@dataclass(frozen=True, kw_only=True)
class FineWebQualityConfig:
    """Thresholds of datatrove's FineWebQualityFilter."""

    line_punct_thr: float = 0.12
    """Fraction of lines ending in punctuation below this: removed."""
    line_punct_exclude_zero: bool = False
    """Do not remove documents where no line ends in punctuation."""
    short_line_thr: float = 0.67
    """Fraction of short lines above this: removed."""
    short_line_length: int = 30
    """A line shorter than this many characters is short."""
    char_duplicates_ratio: float = 0.01
    """Fraction of characters in duplicated lines above this: removed."""
    new_line_ratio: float = 0.3
    """Newlines per word above this: removed."""


@dataclass(frozen=True, kw_only=True)
class LanguageConfig(StepConfig):
    """Datatrove's LanguageFilter with the bundled fastText lid.176 model."""

    languages: tuple[str, ...] | None = ("en",)
    """ISO 639 codes to keep (fastText labels: en, fr, de, ...); None keeps any confidently identified language."""
    threshold: float = 0.65
    """A document is kept when a wanted language scores above this."""

    def validate(self) -> None:
        if not 0.0 <= self.threshold < 1.0:
            raise ValueError(f"LanguageConfig.threshold must be in [0, 1), got {self.threshold}")
        if self.languages is not None and (isinstance(self.languages, str) or not self.languages):
            raise ValueError(
                f"LanguageConfig.languages must be a non-empty tuple of codes or None, got {self.languages!r}"
            )


@dataclass(frozen=True, kw_only=True)
class FilterConfig(StepConfig):
    """Filter every shard under `input_path` into `output_path`."""

    input_path: str = input_field("documents")
    """Folder of document shards (every file below it is read: Parquet or JSON lines, plain or compressed), or one file."""
    output_path: str = output_field()
    """Folder to write kept shards, stats.json and removed_sample.jsonl.gz into."""
    language: LanguageConfig | None = versioned_unless_default(None)
    """Language identification (fastText lid.176, offline); None: off (and then not in the hash, as before
    the language filter existed)."""
    gopher_quality: GopherQualityConfig | None = GopherQualityConfig()
    """Gopher quality heuristics; None: off."""
    gopher_repetition: GopherRepetitionConfig | None = GopherRepetitionConfig()
    """Gopher repetition heuristics; None: off."""
    c4_quality: C4QualityConfig | None = None
    """C4 heuristics (edit kept text); None: off."""
    fineweb_quality: FineWebQualityConfig | None = None
    """FineWeb heuristics; None: off."""
    min_kept_fraction: float | None = unversioned(0.05)
    """The guard: the step fails, publishing nothing, when the filters would keep less than this fraction of one
    source's documents (the `source` field, else the input shard's file name; sources of at least
    GUARD_MIN_DOCUMENTS documents), or no document at all; None: no guard. It decides only whether the output is
    published, never its bytes, so it is not in the hash (after a refusal, rerun with `--force_run_failed`: the
    finished shards are not redone)."""
    removed_sample_size: int = versioned_unless_default(20)
    """How many removed documents to keep in removed_sample.jsonl.gz."""
    skip_bad_documents: bool = False
    """Skip and count lines that are not valid documents instead of failing on the first."""
    text_key: str = versioned_unless_default("text")
    """Field (JSON lines) or column (Parquet) holding each document's text."""
    id_key: str | None = versioned_unless_default("id")
    """Field or column holding each document's id; None: the corpus has none, ids are `<shard>/<row>`."""
    workers: int = unversioned(1)
    """Processes to filter shards with when Ray is absent; the output does not depend on it."""
    shard_resources: ShardResources = unversioned(ShardResources())
    """What each shard asks of a Ray cluster when the step runs on one."""

    def validate(self) -> None:
        check_keys("FilterConfig", self.text_key, self.id_key)
        if self.removed_sample_size < 0:
            raise ValueError(f"FilterConfig.removed_sample_size must be >= 0, got {self.removed_sample_size}")
        if self.workers < 1:
            raise ValueError(f"FilterConfig.workers must be >= 1, got {self.workers}")
        if self.min_kept_fraction is not None and not 0.0 < self.min_kept_fraction <= 1.0:
            raise ValueError(f"FilterConfig.min_kept_fraction must be in (0, 1] or None, got {self.min_kept_fraction}")


def _build_filters(config: FilterConfig) -> list[tuple[str, object]]:
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )

    filters = []
    if config.language is not None:
        from marin.processing.language_id import offline_language_filter

        filters.append(("language", offline_language_filter(config.language.languages, config.language.threshold)))
    if config.gopher_quality is not None:
        filters.append(("gopher_quality", GopherQualityFilter(**asdict(config.gopher_quality))))
    if config.gopher_repetition is not None:
        filters.append(("gopher_repetition", GopherRepetitionFilter(**asdict(config.gopher_repetition))))
    if config.c4_quality is not None:
        filters.append(("c4_quality", C4QualityFilter(**asdict(config.c4_quality))))
    if config.fineweb_quality is not None:
        filters.append(("fineweb_quality", FineWebQualityFilter(**asdict(config.fineweb_quality))))
    return filters


def _more_words_than_allowed(text: str, quality: GopherQualityConfig) -> bool:
    """Whether datatrove's GopherQualityFilter is sure to remove `text` as `gopher_long_doc`, decided from
    the first `max_doc_words` words only.

    The filter counts the words of NLTK's tokenizer that hold a character outside datatrove's
    PUNCTUATION_SET. The tokenizer only cuts within and between whitespace-separated pieces and keeps
    every such character, so each piece holding one gives at least one counted word: the pieces are a
    lower bound of the filter's count. Once they exceed `max_doc_words` (and reach `min_doc_words`, whose
    check comes first), the filter's answer is `gopher_long_doc`, without its tokenizing a text of any
    length into a list of every word (~50 bytes per character of text, minutes for a 50 MB document).
    """
    limit = quality.max_doc_words
    if not limit or len(text) <= limit:
        return False
    from datatrove.utils.text import PUNCTUATION_SET

    need = max(limit + 1, quality.min_doc_words or 0)
    count = 0
    for piece in _WHITESPACE_PIECE.finditer(text):
        if not PUNCTUATION_SET.issuperset(piece.group()):
            count += 1
            if count >= need:
                return True
    return False


_WHITESPACE_PIECE = re.compile(r"\S+")


@dataclass(frozen=True)
class FilterShard:
    """Input shard `index` (at `input_path`) becomes output shard `index`."""

    index: int
    input_path: str


def filter_shard(config: FilterConfig, shard: FilterShard) -> dict:
    """Filter one input shard into its output shard; returns its counts and removed sample."""
    from datatrove.data import Document

    in_path, index = shard.input_path, shard.index

    filters = _build_filters(config)
    report = ReadReport()
    kept, sample = [], []
    removed: Counter = Counter()
    sources: dict[str, dict] = {}
    for doc in step_documents(config, in_path, report):
        source = sources.setdefault(
            doc.get("source") or in_path.rsplit("/", 1)[-1], {"documents": 0, "kept": 0, "removed": {}, "examples": []}
        )
        source["documents"] += 1
        dt_doc = Document(text=doc["text"], id=doc["id"], metadata=dict(doc["metadata"]))
        reason = None
        for name, flt in filters:
            if name == "gopher_quality" and _more_words_than_allowed(dt_doc.text, config.gopher_quality):
                reason = f"{name}/gopher_long_doc"
                break
            with _DATATROVE_TOKENIZERS:
                result = flt.filter(dt_doc)
            ok, why = result if isinstance(result, tuple) else (result, None)
            if not ok:
                reason = f"{name}/{why or 'rejected'}"
                break
        if reason is None:
            kept.append({**doc, "text": dt_doc.text, "metadata": dt_doc.metadata})
            source["kept"] += 1
        else:
            removed[reason] += 1
            source["removed"][reason] = source["removed"].get(reason, 0) + 1
            if len(source["examples"]) < GUARD_EXAMPLES:
                source["examples"].append({"id": doc["id"], "reason": reason, "text": doc["text"][:EXAMPLE_CHARS]})
            if len(sample) < config.removed_sample_size:
                sample.append({**doc, "metadata": {**doc["metadata"], "filter_reason": reason}})
    stats = {
        "input": in_path.rsplit("/", 1)[-1],
        "documents": report.documents,
        "kept": len(kept),
        "removed": dict(sorted(removed.items())),
        "skipped_bad_documents": dict(sorted(report.skipped.items())),
        "removed_sample": sample,
        "sources": sources,
    }
    write_bytes(join(config.output_path, shard_name(index)), encode_documents(kept))
    logger.info("wrote shard %s (%d of %d kept)", shard_name(index), len(kept), report.documents)
    return stats


def filter_documents(config: FilterConfig) -> dict:
    """Run the filter step; returns the totals also written to stats.json."""
    shards = list_shards(config.input_path)
    logger.info("filtering %d shards from %s into %s", len(shards), config.input_path, config.output_path)
    per_shard = run_shards(
        filter_shard,
        config,
        [FilterShard(i, path) for i, path in enumerate(shards)],
        desc="filter",
        ledger_dir=join(config.output_path, LEDGERS, "filter"),
        workers=config.workers,
        resources=config.shard_resources,
    )
    write_volatile_list(config.output_path, [LEDGERS + "/"])
    return _write_totals(config, per_shard)


def _write_totals(config: FilterConfig, per_shard: list[dict]) -> dict:
    documents = sum(s["documents"] for s in per_shard)
    if documents == 0:
        raise EmptyInputError(f"filter: no documents in input path {config.input_path}")
    by_filter: dict[str, dict] = {}
    skipped: Counter = Counter()
    for s in per_shard:
        skipped.update(s["skipped_bad_documents"])
        for reason, n in s["removed"].items():
            name, why = reason.split("/", 1)
            entry = by_filter.setdefault(name, {"removed": 0, "reasons": {}})
            entry["removed"] += n
            entry["reasons"][why] = entry["reasons"].get(why, 0) + n
    enabled = [name for name in ("language", "gopher_quality", "gopher_repetition", "c4_quality", "fineweb_quality")]
    enabled = [n for n in enabled if getattr(config, n) is not None]
    stats = {
        "shards": len(per_shard),
        "documents": documents,
        "kept": sum(s["kept"] for s in per_shard),
        "removed": documents - sum(s["kept"] for s in per_shard),
        "filters": enabled,
        "removed_by_filter": {n: by_filter.get(n, {"removed": 0, "reasons": {}}) for n in enabled},
        "skipped_bad_documents": dict(sorted(skipped.items())),
    }
    sources = _sources(per_shard)
    stats["sources"] = {
        name: {k: src[k] for k in ("documents", "kept", "kept_fraction")} for name, src in sources.items()
    }
    _guard(config, stats, sources)
    sample = [d for s in per_shard for d in s["removed_sample"]][: config.removed_sample_size]
    write_bytes(join(config.output_path, "removed_sample.jsonl.gz"), encode_documents(sample))
    write_json(join(config.output_path, "stats.json"), stats)
    logger.info("filter: kept %d of %d documents -> %s", stats["kept"], documents, config.output_path)
    return stats


def _sources(per_shard: list[dict]) -> dict[str, dict]:
    """Per source, over every shard: documents, kept, the kept fraction, removals by filter/reason, examples."""
    out: dict[str, dict] = {}
    for s in per_shard:
        for name, src in s.get("sources", {}).items():
            total = out.setdefault(name, {"documents": 0, "kept": 0, "removed": Counter(), "examples": []})
            total["documents"] += src["documents"]
            total["kept"] += src["kept"]
            total["removed"].update(src["removed"])
            total["examples"] += src["examples"][: GUARD_EXAMPLES - len(total["examples"])]
    for src in out.values():
        src["kept_fraction"] = round(src["kept"] / src["documents"], 6) if src["documents"] else 0.0
        src["removed"] = dict(sorted(src["removed"].items()))
    return dict(sorted(out.items()))


def _most_removed_by(src: dict) -> tuple[str, int, str]:
    """(filter, documents it removed, its most frequent reason) of the filter that removed most of a source."""
    by_filter: Counter = Counter()
    for reason, n in src["removed"].items():
        by_filter[reason.split("/", 1)[0]] += n
    name, n = max(by_filter.items(), key=lambda item: (item[1], item[0]))
    reasons = {r.split("/", 1)[1]: c for r, c in src["removed"].items() if r.split("/", 1)[0] == name}
    return name, n, max(reasons.items(), key=lambda item: (item[1], item[0]))[0]


def _guard(config: FilterConfig, stats: dict, sources: dict[str, dict]) -> None:
    """Refuse to publish when a source keeps less than `min_kept_fraction` (or nothing is kept), with the evidence."""
    where = join(config.output_path, GUARD_REPORT)
    limit = config.min_kept_fraction
    if limit is None:
        delete(where)
        return
    over = {
        name: src
        for name, src in sources.items()
        if src["kept"] < limit * src["documents"] and (src["documents"] >= GUARD_MIN_DOCUMENTS or stats["kept"] == 0)
    }
    if not over:
        delete(where)  # a refused earlier attempt's report, now answered
        return
    write_json(where, {"min_kept_fraction": limit, "sources": sources, "under_the_limit": sorted(over)})
    for name, src in over.items():
        for ex in src["examples"]:
            logger.error("filter guard: source %r: removed %s (%s): %r", name, ex["id"], ex["reason"], ex["text"][:200])
    name, src = min(over.items(), key=lambda item: (item[1]["kept_fraction"], item[0]))
    flt, n, why = _most_removed_by(src)
    examples = "; ".join(f"{ex['id']!r} ({ex['reason']}): {ex['text'][:80]!r}" for ex in src["examples"])
    raise FilterWipeoutError(
        f"filter: source {name!r} would keep {src['kept_fraction']:.1%} of its documents ({src['kept']} of "
        f"{src['documents']}), under FilterConfig.min_kept_fraction={limit}"
        + (f" (and {len(over) - 1} more source(s))" if len(over) > 1 else "")
        + f"; {flt} removed most of it ({n} documents, mostly {why}). Removed, for example: {examples}. "
        f"Nothing is published; every source's counts and examples are in {where}. If this is intended, lower "
        "min_kept_fraction (or set it to None) and rerun with --force_run_failed."
    )
