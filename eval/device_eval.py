"""Accuracy of a device model on a SLURP-format corpus: WER (close-talk, far-field, overall) and
intent accuracy, decoding each recording with the streaming engine."""

from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from device.engine import Engine, EngineConfig
from eval.metrics import intent_accuracy, wer
from eval.slurp import fixed_subset, load_recordings
from models.intent import IntentClassifier

# Full beam search after ingestion, no pilots: the model's own accuracy.
PLAIN = EngineConfig(pilots=False, beam_collapse=False, early_termination=False, ctc_leap=False)


@dataclass(frozen=True)
class Accuracy:
    split: str
    recordings: int
    wer: float
    wer_close: float
    wer_far: float
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
        engine.understand_audio(r.audio_path).text
        for r in tqdm(recordings, desc=f"decode {split}", unit="utt", disable=not progress)
    ]
    engine.close()
    close = [i for i, r in enumerate(recordings) if r.close_talk]
    far = [i for i, r in enumerate(recordings) if not r.close_talk]

    def subset_wer(indices: list[int]) -> float:
        return (
            wer([recordings[i].text for i in indices], [texts[i] for i in indices])
            if indices
            else float("nan")
        )

    intents = intents_close = None
    if intent_path is not None and recordings[0].intent is not None:
        predicted = [p.intent for p in IntentClassifier.load(intent_path).predict(texts)]
        intents = intent_accuracy([r.intent for r in recordings], predicted)
        if close:
            intents_close = intent_accuracy(
                [recordings[i].intent for i in close], [predicted[i] for i in close]
            )
    return Accuracy(
        split,
        len(recordings),
        subset_wer(list(range(len(texts)))),
        subset_wer(close),
        subset_wer(far),
        intents,
        intents_close,
    )
