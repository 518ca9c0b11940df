"""Text intent classifier: `scenario_action` from a transcript (word + character n-gram TF-IDF,
logistic regression), trained on SLURP devel gold text plus the unlabelled SLURP train sentences
labelled either by itself (self-training) or by a stronger teacher (the cloud's MiniLM
classifier: distillation). Input goes through `normalize_for_wer`, so written forms
("Wake me at 8 a.m.") and SLURP's spoken forms meet in the same features."""

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline, make_pipeline, make_union

from pasu.core.text import normalize_for_wer
from pasu.speech.intent import IntentClassifier, IntentPrediction, pseudo_labels

WORD_FEATURES = 20_000
CHARACTER_FEATURES = 30_000


def _pipeline(regularisation: float) -> Pipeline:
    return make_pipeline(
        make_union(
            TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, max_features=WORD_FEATURES),
            TfidfVectorizer(
                analyzer="char_wb",
                ngram_range=(2, 5),
                sublinear_tf=True,
                min_df=2,
                max_features=CHARACTER_FEATURES,
            ),
        ),
        LogisticRegression(C=regularisation, max_iter=3000),
    )


def _compact(pipeline: Pipeline) -> None:
    """Keep only what prediction needs: scikit-learn also pickles the terms cut by max_features
    (`stop_words_`, documented as safe to drop), and float32 coefficients suffice."""
    for _, vectorizer in pipeline[0].transformer_list:
        vectorizer.stop_words_ = None
    classifier = pipeline[-1]
    classifier.coef_ = classifier.coef_.astype(np.float32)
    classifier.intercept_ = classifier.intercept_.astype(np.float32)


class IntentTeacher(Protocol):
    """Any intent model that can label unlabelled sentences (e.g. the cloud's MiniLM one)."""

    def predict(self, texts: Sequence[str]) -> list[IntentPrediction]: ...


def teacher_labels(
    teacher: IntentTeacher, texts: Sequence[str], threshold: float
) -> tuple[list[str], list[str]]:
    """The texts the teacher labels with confidence above the threshold, and its labels."""
    kept = [
        (text, prediction.intent)
        for text, prediction in zip(texts, teacher.predict(texts), strict=True)
        if prediction.confidence > threshold
    ]
    return [text for text, _ in kept], [label for _, label in kept]


def train_intent_classifier(
    texts: Sequence[str],
    intents: Sequence[str],
    unlabelled: Sequence[str] = (),
    regularisation: float = 50.0,
    self_training_threshold: float = 0.5,
    teacher: IntentTeacher | None = None,
) -> IntentClassifier:
    """Fit on gold (text, intent) pairs. With `unlabelled` texts, add those labelled with
    confidence above the threshold, by the `teacher` if one is given (distillation), else by a
    first fit on the gold pairs (one round of self-training), and fit again."""
    started = time.perf_counter()
    gold = [normalize_for_wer(t) for t in texts]
    extra = [normalize_for_wer(t) for t in unlabelled]
    pseudo_texts: list[str] = []
    pseudo: list[str] = []
    if extra and teacher is not None:
        pseudo_texts, pseudo = teacher_labels(teacher, extra, self_training_threshold)
    elif extra:
        first = _pipeline(regularisation).fit(gold, list(intents))
        confident, pseudo = pseudo_labels(
            first.predict_proba(extra), first.classes_, self_training_threshold
        )
        pseudo_texts = [t for t, keep in zip(extra, confident, strict=True) if keep]
    pipeline = _pipeline(regularisation).fit(gold + pseudo_texts, list(intents) + pseudo)
    _compact(pipeline)
    info = {
        "gold_examples": len(gold),
        "pseudo_labelled": len(pseudo),
        "pseudo_labels_from": ("teacher" if teacher is not None else "self") if extra else None,
        "classes": len(pipeline.classes_),
        "regularisation": regularisation,
        "train_seconds": round(time.perf_counter() - started, 1),
    }
    return IntentClassifier(pipeline, info)


def accuracy(classifier: IntentClassifier, texts: Sequence[str], intents: Sequence[str]) -> float:
    predicted = [p.intent for p in classifier.predict(texts)]
    return float(np.mean([p == g for p, g in zip(predicted, intents, strict=True)]))


def export_numpy_intent(classifier: IntentClassifier, path: Path) -> Path:
    """The classifier as arrays for `device.intent.NumpyIntentModel` (no scikit-learn there)."""
    vectorizers = [v for _, v in classifier.pipeline[0].transformer_list]
    regression = classifier.pipeline[-1]
    arrays = {
        "vectorizers": np.array(len(vectorizers)),
        # the device keeps the coefficients in float16 (`NumpyIntentModel`); so does the file
        "coef": regression.coef_.astype(np.float16),
        "intercept": regression.intercept_.astype(np.float32),
        "classes": np.array([str(c) for c in regression.classes_]),
    }
    for i, vectorizer in enumerate(vectorizers):
        terms = sorted(vectorizer.vocabulary_, key=vectorizer.vocabulary_.get)
        arrays[f"v{i}_analyzer"] = np.array(vectorizer.analyzer)
        arrays[f"v{i}_ngrams"] = np.array(vectorizer.ngram_range)
        arrays[f"v{i}_terms"] = np.array(terms)
        arrays[f"v{i}_idf"] = vectorizer.idf_.astype(np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)
    return path
