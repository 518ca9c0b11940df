"""Confidence scores of a decode; higher means less sure, more reason to offload.

Both run on the device with numpy only: the perplexity needs no training, the BiLSTM's weights
(trained with torch by `offramp.train`) are stored as plain arrays.
"""

from pathlib import Path

import numpy as np

from pasu.core.errors import ConfigError
from pasu.offramp.features import FEATURE_DIM, OfframpFeatures

EMPTY_PERPLEXITY = 1e6  # nothing decoded: as unsure as it gets


def perplexity(features: OfframpFeatures) -> float:
    """exp(-mean log p) of the attention decoder's tokens."""
    if features.num_tokens == 0:
        return EMPTY_PERPLEXITY
    return float(np.exp(-np.mean(features.decoder_log_probs.astype(np.float64))))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


class BiLstmScorer:
    """P(device WER > 0.1) from the per-token features: one bidirectional LSTM layer (torch's
    gate order i, f, g, o), the last forward and first backward states, a linear layer."""

    PARAMETERS = (
        "forward_ih",
        "forward_hh",
        "forward_b",
        "backward_ih",
        "backward_hh",
        "backward_b",
        "head_w",
        "head_b",
        "feature_mean",
        "feature_std",
    )

    def __init__(self, weights: dict[str, np.ndarray]):
        missing = [name for name in self.PARAMETERS if name not in weights]
        if missing:
            raise ConfigError(f"BiLSTM weights lack {missing}")
        self.weights = {k: np.asarray(v, np.float32) for k, v in weights.items()}
        self.hidden = self.weights["forward_hh"].shape[1]
        if self.weights["forward_ih"].shape != (4 * self.hidden, FEATURE_DIM):
            raise ConfigError(f"BiLSTM input weights have shape {self.weights['forward_ih'].shape}")

    @property
    def num_parameters(self) -> int:
        return int(sum(v.size for k, v in self.weights.items() if not k.startswith("feature_")))

    def _run(self, inputs: np.ndarray, direction: str) -> np.ndarray:
        w_ih, w_hh = self.weights[f"{direction}_ih"], self.weights[f"{direction}_hh"]
        bias = self.weights[f"{direction}_b"]
        h = np.zeros(self.hidden, np.float32)
        c = np.zeros(self.hidden, np.float32)
        projected = inputs @ w_ih.T + bias
        for x in projected:
            gates = x + w_hh @ h
            i, f, g, o = np.split(gates, 4)
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
            h = _sigmoid(o) * np.tanh(c)
        return h

    def __call__(self, features: OfframpFeatures) -> float:
        inputs = (features.sequence() - self.weights["feature_mean"]) / self.weights["feature_std"]
        state = np.concatenate([self._run(inputs, "forward"), self._run(inputs[::-1], "backward")])
        logit = float(self.weights["head_w"] @ state + self.weights["head_b"][0])
        return float(_sigmoid(np.float64(logit)))

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, **self.weights)

    @classmethod
    def load(cls, path: Path) -> "BiLstmScorer":
        if not Path(path).is_file():
            raise ConfigError(f"BiLSTM offramp weights not found: {path}")
        with np.load(path, allow_pickle=False) as stored:
            return cls({k: stored[k] for k in stored.files})
