"""The device's intent classifier in numpy: the TF-IDF + logistic-regression model trained with
scikit-learn (`models/intent.py`), exported to arrays (`export_numpy_intent`) and evaluated here
without importing scikit-learn, whose import alone costs the device ~115 MB of RSS.

It reproduces scikit-learn's analyzers (lower-casing; word 1–2-grams of `\\b\\w\\w+\\b` tokens;
`char_wb` n-grams of space-padded words), sublinear tf × idf with l2 row norms per vectorizer,
and the multinomial softmax of the logistic regression (weights in float16: probabilities
within 1e-3 of scikit-learn's).
"""

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pasu.core.errors import ConfigError
from pasu.core.text import normalize_for_wer

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


class _Vectorizer:
    """One TF-IDF vectorizer: its terms as sorted UTF-8 bytes (far smaller than a dict),
    looked up by binary search."""

    def __init__(self, analyzer: str, ngrams: tuple[int, int], terms: np.ndarray, idf):
        encoded = np.array([str(t).encode() for t in terms])
        order = np.argsort(encoded, kind="stable")
        self.analyzer = analyzer
        self.ngrams = ngrams
        self.sorted_terms = encoded[order]
        self.columns = order.astype(np.int32)  # column of each sorted term
        self.idf = np.asarray(idf, np.float32)

    def sparse_row(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """The l2-normalised sublinear TF-IDF features of `text`: (columns, values)."""
        counts = Counter(ANALYZERS[self.analyzer](text, *self.ngrams))
        width = self.sorted_terms.dtype.itemsize
        # a longer term would be truncated to the array's width and might match wrongly
        encoded = ((t.encode(), c) for t, c in counts.items())
        terms = [(t, c) for t, c in encoded if len(t) <= width]
        if not terms:
            return np.zeros(0, np.int32), np.zeros(0, np.float32)
        keys = np.array([t for t, _ in terms], dtype=self.sorted_terms.dtype)
        positions = np.searchsorted(self.sorted_terms, keys).clip(0, len(self.sorted_terms) - 1)
        known = self.sorted_terms[positions] == keys
        columns = self.columns[positions[known]]
        tf = 1.0 + np.log(np.array([c for _, c in terms], np.float32)[known])
        values = tf * self.idf[columns]
        norm = np.linalg.norm(values)
        return columns, values / norm if norm > 0 else values


class NumpyIntentModel:
    """Predicts SLURP intents from transcripts, as `IntentClassifier` does."""

    def __init__(self, vectorizers: list[_Vectorizer], coef, intercept, classes):
        self.vectorizers = vectorizers
        # float16, one row per feature: a transcript touches a few hundred rows of the largest
        # array (features × classes), which stays at a quarter of scikit-learn's float64 size;
        # probabilities stay within 1e-3 of scikit-learn's.
        self.coef_by_feature = np.ascontiguousarray(np.asarray(coef).T, np.float16)
        self.intercept = np.asarray(intercept, np.float32)
        self.classes = [str(c) for c in classes]
        self._offsets = np.cumsum([0] + [len(v.idf) for v in vectorizers])[:-1]

    @classmethod
    def load(cls, path: Path) -> "NumpyIntentModel":
        if not Path(path).is_file():
            raise ConfigError(f"intent model not found: {path}")
        with np.load(path) as arrays:
            vectorizers = [
                _Vectorizer(
                    str(arrays[f"v{i}_analyzer"]),
                    tuple(int(n) for n in arrays[f"v{i}_ngrams"]),
                    arrays[f"v{i}_terms"],
                    arrays[f"v{i}_idf"],
                )
                for i in range(int(arrays["vectorizers"]))
            ]
            return cls(vectorizers, arrays["coef"], arrays["intercept"], arrays["classes"])

    def _logits(self, text: str) -> np.ndarray:
        logits = self.intercept.copy()
        for offset, vectorizer in zip(self._offsets, self.vectorizers, strict=True):
            columns, values = vectorizer.sparse_row(text)
            logits += values @ self.coef_by_feature[offset + columns].astype(np.float32)
        return logits

    def probabilities(self, texts: Sequence[str]) -> np.ndarray:
        logits = np.array([self._logits(normalize_for_wer(t)) for t in texts], np.float32).reshape(
            len(texts), len(self.classes)
        )
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


def pseudo_labels(
    probabilities: np.ndarray, classes: Sequence[str], threshold: float
) -> tuple[np.ndarray, list[str]]:
    """Pseudo-labels: which unlabelled examples a model labels with confidence above the
    threshold (a mask), and those labels."""
    confident = probabilities.max(axis=1) > threshold
    labels = np.asarray(classes)[probabilities.argmax(axis=1)]
    return confident, [str(label) for label in labels[confident]]


class IntentClassifier:
    """Predicts SLURP intents from transcripts with the scikit-learn pipeline that
    `pasu.models.intent` trains (scikit-learn is imported only when one is loaded)."""

    def __init__(self, pipeline, info: dict):
        self.pipeline = pipeline
        self.info = info

    def predict(self, texts: Sequence[str]) -> list[IntentPrediction]:
        if not texts:
            return []
        probabilities = self.pipeline.predict_proba([normalize_for_wer(t) for t in texts])
        classes = self.pipeline.classes_
        return [
            IntentPrediction(str(classes[i]), float(p[i]))
            for p, i in zip(probabilities, probabilities.argmax(axis=1), strict=True)
        ]

    def save(self, path: Path) -> None:
        import joblib
        import sklearn

        path.parent.mkdir(parents=True, exist_ok=True)
        joblib.dump(
            {"pipeline": self.pipeline, "info": self.info, "sklearn_version": sklearn.__version__},
            path,
        )

    @classmethod
    def load(cls, path: Path) -> "IntentClassifier":
        if not Path(path).is_file():
            raise ConfigError(f"intent classifier not found: {path}")
        import joblib  # unpickling the pipeline imports scikit-learn
        import sklearn

        stored = joblib.load(path)
        if stored["sklearn_version"] != sklearn.__version__:
            raise ConfigError(
                f"{path} was saved with scikit-learn {stored['sklearn_version']} but "
                f"{sklearn.__version__} is installed; reinstall with scripts/setup.sh "
                "or retrain with `pasu train-intent`"
            )
        return cls(stored["pipeline"], stored["info"])


def load_intent_model(path: Path):
    """A `.npz` export runs in numpy; a `.joblib` pipeline needs scikit-learn (imported then)."""
    path = Path(path)
    if path.suffix == ".npz":
        return NumpyIntentModel.load(path)
    return IntentClassifier.load(path)
