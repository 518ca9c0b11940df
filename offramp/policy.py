"""Offload decisions: which utterances leave the device.

A policy sees the offramp features of the last pilot output at the end of speech and answers
with a `Decision`. `ppl` and `lstm` compare a confidence score to a calibrated threshold;
`never`/`always` are the pure device and pure cloud systems; `NaiveHybrid` offloads at random
with probability α (the paper's baseline). Thresholds ship in the model directory
(`offramp.json`), written by `pasu offramp calibrate`.
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from pasu.core.errors import ConfigError
from pasu.core.modeldir import OFFRAMP_BILSTM_FILE, OFFRAMP_CONFIG_FILE
from pasu.offramp.features import OfframpFeatures
from pasu.offramp.scores import BiLstmScorer, perplexity

POLICIES = ("ppl", "lstm", "never", "always")


@dataclass(frozen=True)
class Decision:
    offload: bool
    score: float | None
    reason: str


class Policy(Protocol):
    name: str

    def decide(self, features: OfframpFeatures | None) -> Decision: ...


@dataclass
class ThresholdPolicy:
    """Offload when the score is above the threshold."""

    name: str
    score: object  # OfframpFeatures -> float
    threshold: float

    def decide(self, features: OfframpFeatures | None) -> Decision:
        if features is None:
            return Decision(True, None, "no pilot output to judge")
        value = float(self.score(features))
        if value > self.threshold:
            return Decision(True, value, f"{self.name} {value:.3g} > {self.threshold:.3g}")
        return Decision(False, value, f"{self.name} {value:.3g} <= {self.threshold:.3g}")


@dataclass
class FixedPolicy:
    name: str
    offload: bool

    def decide(self, features: OfframpFeatures | None) -> Decision:
        return Decision(self.offload, None, f"policy {self.name}")


class NaiveHybrid:
    """Offload each utterance with probability α, whatever it sounds like."""

    def __init__(self, alpha: float, seed: int = 0):
        if not 0.0 <= alpha <= 1.0:
            raise ConfigError(f"alpha must be in [0, 1], got {alpha}")
        self.name = f"naive-{alpha:g}"
        self.alpha = alpha
        self._random = np.random.default_rng(seed)

    def decide(self, features: OfframpFeatures | None) -> Decision:
        draw = float(self._random.random())
        return Decision(draw < self.alpha, draw, f"random draw {draw:.3f} vs α={self.alpha:g}")


def load_config(model_dir: Path) -> dict:
    """A model directory's offramp.json (default policy, thresholds); empty when it has none."""
    path = Path(model_dir) / OFFRAMP_CONFIG_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def load_policy(model_dir: Path, name: str | None = None) -> Policy:
    """The policy `name` (default: the one the model directory's offramp.json names)."""
    config_path = Path(model_dir) / OFFRAMP_CONFIG_FILE
    config = load_config(model_dir)
    name = name or config.get("default_policy", "never")
    if name not in POLICIES:
        raise ConfigError(f"unknown offload policy {name!r}; expected one of {POLICIES}")
    if name in ("never", "always"):
        return FixedPolicy(name, name == "always")
    thresholds = config.get("thresholds", {})
    if name not in thresholds:
        raise ConfigError(
            f"{config_path} has no {name} threshold; run `pasu offramp calibrate` first"
        )
    if name == "ppl":
        return ThresholdPolicy("ppl", perplexity, float(thresholds["ppl"]))
    return ThresholdPolicy(
        "lstm", BiLstmScorer.load(Path(model_dir) / OFFRAMP_BILSTM_FILE), float(thresholds["lstm"])
    )
