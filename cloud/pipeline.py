"""Cloud speech understanding: audio → Whisper transcript → intent, with per-stage timings.

This is what the HTTP service runs for each request, and what the device embeds in-process
when no cloud URL is configured.
"""

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from pasu.cloud.asr import SpeechRecognizer, WhisperOptions, WhisperRecognizer
from pasu.core.errors import ConfigError
from pasu.core.modeldir import CLOUD_INTENT_PATH, TEXT_INTENT_JOBLIB
from pasu.speech.intent import IntentParts, IntentPrediction
from pasu.speech.whisper_checkpoints import resolve_checkpoint


class IntentModel(Protocol):
    def predict(self, texts: list[str]) -> list[IntentPrediction]: ...


@dataclass(frozen=True)
class CloudResult(IntentParts):
    """The answer for one utterance; `to_json()` is the HTTP response body."""

    text: str
    intent: str
    confidence: float
    duration_s: float
    model: str
    window_s: float
    fell_back: bool
    timings_ms: dict[str, float]

    def to_json(self) -> dict:
        body = asdict(self)
        body["timings"] = body.pop("timings_ms")
        body.update(scenario=self.scenario, action=self.action)
        return body


class CloudPipeline:
    """Speech recogniser plus intent classifier."""

    def __init__(self, recognizer: SpeechRecognizer, intent_model: IntentModel):
        self.recognizer = recognizer
        self.intent_model = intent_model

    def warm_up(self) -> None:
        """Load everything lazy (the sentence encoder, CTranslate2's buffers) before serving,
        so the first request is not the slow one."""
        noise = np.random.default_rng(0).normal(0, 0.01, 16_000).astype(np.float32)
        self.recognizer.transcribe(noise)
        self.intent_model.predict(["hello"])

    def run(self, audio: np.ndarray) -> CloudResult:
        started = time.perf_counter()
        transcript = self.recognizer.transcribe(audio)
        recognised = time.perf_counter()
        prediction = (
            self.intent_model.predict([transcript.text])[0]
            if transcript.text
            else IntentPrediction("", 0.0)
        )
        finished = time.perf_counter()
        return CloudResult(
            text=transcript.text,
            intent=prediction.intent,
            confidence=round(prediction.confidence, 4),
            duration_s=round(transcript.duration_s, 3),
            model=self.recognizer.name,
            window_s=transcript.window_s,
            fell_back=transcript.fell_back,
            timings_ms={
                "asr": round((recognised - started) * 1000, 1),
                "intent": round((finished - recognised) * 1000, 1),
            },
        )


def intent_model_of_kind(kind: str, path: Path | None = None) -> IntentModel:
    """`minilm` (the stronger cloud classifier) or `text` (the device's TF-IDF classifier),
    from `path` or the shipped file of that kind."""
    from pasu.cloud.intent import load_intent_file

    shipped = {"minilm": CLOUD_INTENT_PATH, "text": TEXT_INTENT_JOBLIB}
    if kind not in shipped:
        raise ConfigError(f"unknown intent model {kind!r}; expected 'minilm' or 'text'")
    return load_intent_file(path or shipped[kind])


def build_pipeline(
    model: str = "whisper-base",
    intent: str = "minilm",
    intent_path: Path | None = None,
    options: WhisperOptions | None = None,
) -> CloudPipeline:
    """The default cloud pipeline, or a variant of it."""
    intent_model = intent_model_of_kind(intent, intent_path)  # fail fast, before loading Whisper
    return CloudPipeline(WhisperRecognizer(resolve_checkpoint(model), options), intent_model)
