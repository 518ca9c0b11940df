"""Accuracy of a device model on a SLURP-format corpus: WER (close-talk, far-field, overall) and
intent accuracy, decoding each recording with the streaming engine."""

from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from pasu.core.metrics import intent_accuracy, wer_by_condition
from pasu.core.slurp import fixed_subset, load_recordings
from pasu.device.engine import PLAIN, Engine, EngineConfig
from pasu.speech.intent import load_intent_model


@dataclass(frozen=True)
class Accuracy:
    split: str
    recordings: int
    wer: float
    wer_close: float | None
    wer_far: float | None
    intent_accuracy: float | None
    intent_accuracy_close: float | None

    def to_dict(self) -> dict:
        return self.__dict__.copy()


def evaluate(
    model_dir: Path,
    data_dir: Path,
    split: str,
    limit: int | None = None,
    intent_path: Path | None = None,
    config: EngineConfig = PLAIN,
    progress: bool = True,
) -> Accuracy:
    engine = Engine(model_dir, config)
    recordings = load_recordings(data_dir, split)
    if limit is not None:
        recordings = fixed_subset(recordings, limit)
    texts = [
        engine.transcribe(r.audio_path).text
        for r in tqdm(recordings, desc=f"decode {split}", unit="utt", disable=not progress)
    ]
    engine.close()
    close = [i for i, r in enumerate(recordings) if r.close_talk]
    wers = wer_by_condition([r.text for r in recordings], texts, [r.close_talk for r in recordings])

    intents = intents_close = None
    if intent_path is not None and recordings[0].intent is not None:
        predicted = [p.intent for p in load_intent_model(intent_path).predict(texts)]
        intents = intent_accuracy([r.intent for r in recordings], predicted)
        if close:
            intents_close = intent_accuracy(
                [recordings[i].intent for i in close], [predicted[i] for i in close]
            )
    return Accuracy(
        split,
        len(recordings),
        wers["wer"],
        wers["wer_close"],
        wers["wer_far"],
        intents,
        intents_close,
    )
