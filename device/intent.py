"""The device's intent classifier in numpy: the TF-IDF + logistic-regression model trained with
scikit-learn (`models/intent.py`), exported to arrays (`export_numpy_intent`) and evaluated here
without importing scikit-learn, whose import alone costs the device ~115 MB of RSS.

It reproduces scikit-learn's analyzers (lower-casing; word 1–2-grams of `\\b\\w\\w+\\b` tokens;
`char_wb` n-grams of space-padded words), sublinear tf × idf with l2 row norms per vectorizer,
and the multinomial softmax of the logistic regression.
"""

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models.text import normalize_for_wer
from pasu.errors import ConfigError

_TOKEN = re.compile(r"(?u)\b\w\w+\b")
_WHITESPACE_RUN = re.compile(r"\s\s+")


class IntentParts:
    """`scenario` and `action` of a SLURP intent label (`scenario_action`)."""

    intent: str

    @property
    def scenario(self) -> str:
        return self.intent.partition("_")[0]

    @property
    def action(self) -> str:
        return self.intent.partition("_")[2]


@dataclass(frozen=True)
class IntentPrediction(IntentParts):
    intent: str
    confidence: float


def word_ngrams(text: str, low: int, high: int) -> Iterator[str]:
    tokens = _TOKEN.findall(text.lower())
    for n in range(low, high + 1):
        for start in range(len(tokens) - n + 1):
            yield " ".join(tokens[start : start + n])


def char_wb_ngrams(text: str, low: int, high: int) -> Iterator[str]:
    for word in _WHITESPACE_RUN.sub(" ", text.lower()).split():
        padded = f" {word} "
        for n in range(low, high + 1):
            if len(padded) <= n:  # a word no longer than n counts once, whole
                yield padded
                break
            for start in range(len(padded) - n + 1):
                yield padded[start : start + n]


ANALYZERS = {"word": word_ngrams, "char_wb": char_wb_ngrams}


@dataclass
class _Vectorizer:
    analyzer: str
    ngrams: tuple[int, int]
    index: dict[str, int]
    idf: np.ndarray

    def transform(self, texts: Sequence[str]) -> np.ndarray:
        rows = np.zeros((len(texts), len(self.idf)), np.float32)
        for row, text in enumerate(texts):
            counts = Counter(ANALYZERS[self.analyzer](text, *self.ngrams))
            for term, count in counts.items():
                column = self.index.get(term)
                if column is not None:
                    rows[row, column] = 1.0 + np.log(count)
        rows *= self.idf
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return rows / np.where(norms > 0, norms, 1.0)


class NumpyIntentModel:
    """Predicts SLURP intents from transcripts, as `models.intent.IntentClassifier` does."""

    def __init__(self, vectorizers, coef, intercept, classes):
        self.vectorizers = vectorizers
        # float32 keeps the largest array (classes × features) at half the size; probabilities
        # stay within 1e-6 of scikit-learn's float64 ones.
        self.coef = np.asarray(coef, np.float32)
        self.intercept = np.asarray(intercept, np.float32)
        self.classes = [str(c) for c in classes]

    @classmethod
    def load(cls, path: Path) -> "NumpyIntentModel":
        if not Path(path).is_file():
            raise ConfigError(f"intent model not found: {path}")
        with np.load(path) as arrays:
            vectorizers = [
                _Vectorizer(
                    str(arrays[f"v{i}_analyzer"]),
                    tuple(int(n) for n in arrays[f"v{i}_ngrams"]),
                    {str(t): j for j, t in enumerate(arrays[f"v{i}_terms"])},
                    arrays[f"v{i}_idf"].astype(np.float32),
                )
                for i in range(int(arrays["vectorizers"]))
            ]
            return cls(vectorizers, arrays["coef"], arrays["intercept"], arrays["classes"])

    def probabilities(self, texts: Sequence[str]) -> np.ndarray:
        normalised = [normalize_for_wer(t) for t in texts]
        features = np.hstack([v.transform(normalised) for v in self.vectorizers])
        logits = features @ self.coef.T + self.intercept
        logits -= logits.max(axis=1, keepdims=True)
        exp = np.exp(logits)
        return exp / exp.sum(axis=1, keepdims=True)

    def predict(self, texts: Sequence[str]) -> list[IntentPrediction]:
        if not texts:
            return []
        probabilities = self.probabilities(texts)
        return [
            IntentPrediction(self.classes[i], float(p[i]))
            for p, i in zip(probabilities, probabilities.argmax(axis=1), strict=True)
        ]


def load_intent_model(path: Path):
    """A `.npz` export runs in numpy; a `.joblib` pipeline needs scikit-learn (imported then)."""
    path = Path(path)
    if path.suffix == ".npz":
        return NumpyIntentModel.load(path)
    from models.intent import IntentClassifier

    return IntentClassifier.load(path)
