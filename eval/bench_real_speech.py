"""Real human speech (`data/real-speech`, 11 recordings, 96 words): WER of each system on voices
that no part of PASU was trained on, read sentences and short commands apart.

SLURP-TTS flatters a model that learnt its synthetic voices; these recordings do not. They are
also the forgetting check of a fine-tuned Whisper: it must not do worse here than the original.

Systems:
- `device`: the shipped device model (`models/pretrained/pasu-base`), our engine, full beam;
- `whisper-tiny.en-ct2`: faster-whisper (CTranslate2 int8), beam 1, 30 s padding (the
  reference the device model v2 is measured against);
- `whisper-tiny.en-torch-padded` / `-unpadded`: the same weights in our torch Whisper
  (`pasu.models.whisper`), greedy, on features padded to 30 s, or on the clip plus 1 s of
  silence; token cap 4 tokens a second + 10 (unpadded Whisper often never ends its text), and
  with `+repetition-stop` the text ends where it starts looping (`pasu.speech.stopping`).
"""

import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pasu.core.audio import SAMPLE_RATE_HZ, load_audio
from pasu.core.metrics import word_errors
from pasu.core.paths import REPO_ROOT
from pasu.eval.reports import machine, save_report

REAL_SPEECH_DIR = REPO_ROOT / "data" / "real-speech"
Recognizer = Callable[[np.ndarray], str]


def load_real_speech(directory: Path = REAL_SPEECH_DIR) -> list[dict]:
    rows = [json.loads(line) for line in (directory / "transcripts.jsonl").read_text().splitlines()]
    return [{**row, "audio": load_audio(directory / row["file"])} for row in rows]


def _device() -> Recognizer:
    from pasu.core.modeldir import DEFAULT_MODEL_DIR
    from pasu.device.engine import PLAIN, Engine

    engine = Engine(DEFAULT_MODEL_DIR, PLAIN)
    return lambda audio: engine.transcribe(audio).text


def _faster_whisper() -> Recognizer:
    from pasu.cloud.asr import WhisperOptions, WhisperRecognizer
    from pasu.speech.whisper_checkpoints import whisper_tiny_en

    recognizer = WhisperRecognizer(whisper_tiny_en(), WhisperOptions(beam_size=1))
    return lambda audio: recognizer.transcribe(audio).text


def _torch_whisper(padded: bool, repetition_stop: bool = False) -> Recognizer:
    import torch

    from pasu.models.whisper import whisper_from_ct2
    from pasu.speech.ct2_weights import read_ct2_model
    from pasu.speech.stopping import token_budget
    from pasu.speech.whisper_checkpoints import whisper_tiny_en
    from pasu.speech.whisper_frontend import whisper_log_mel
    from pasu.speech.whisper_tokens import END_OF_TEXT, TRANSCRIBE_PROMPT, WhisperTokenText

    model = whisper_from_ct2(read_ct2_model(whisper_tiny_en().path))
    text_of = WhisperTokenText.load(whisper_tiny_en().path)

    def recognize(audio: np.ndarray) -> str:
        pad_s = 30.0 - len(audio) / SAMPLE_RATE_HZ if padded else 1.0
        samples = np.pad(audio, (0, max(int(pad_s * SAMPLE_RATE_HZ), 0)))
        mel = torch.from_numpy(whisper_log_mel(samples).T[None, :, :3000].copy())
        cap = token_budget(len(audio) / SAMPLE_RATE_HZ)
        tokens = model.greedy(mel, TRANSCRIBE_PROMPT, END_OF_TEXT, cap, repetition_stop)
        return text_of(tokens)

    return recognize


SYSTEMS: dict[str, Callable[[], Recognizer]] = {
    "device": _device,
    "whisper-tiny.en-ct2": _faster_whisper,
    "whisper-tiny.en-torch-padded": lambda: _torch_whisper(padded=True),
    "whisper-tiny.en-torch-unpadded": lambda: _torch_whisper(padded=False),
    "whisper-tiny.en-torch-unpadded+repetition-stop": lambda: _torch_whisper(False, True),
}


def _scores(rows: list[dict], texts: list[str]) -> dict:
    scores = {}
    for kind in ("read", "command", "all"):
        chosen = [
            (r["text"], t) for r, t in zip(rows, texts, strict=True) if kind in ("all", r["kind"])
        ]
        errors = word_errors([r for r, _ in chosen], [t for _, t in chosen])
        scores[kind] = {"wer": round(errors.wer, 4), "errors": errors.errors,
                        "words": errors.reference_words}  # fmt: skip
    return scores


def run(systems: list[str] | None = None) -> dict:
    rows = load_real_speech()
    report = {
        "benchmark": "real-speech",
        "recordings": len(rows),
        "machine": machine(),
        "systems": {},
    }
    for name in systems or list(SYSTEMS):
        recognize = SYSTEMS[name]()
        started = time.perf_counter()
        texts = [recognize(row["audio"]) for row in rows]
        seconds = time.perf_counter() - started
        report["systems"][name] = {
            **_scores(rows, texts),
            "seconds": round(seconds, 2),
            "transcripts": {row["file"]: text for row, text in zip(rows, texts, strict=True)},
        }
    return report


def format_report(report: dict) -> str:
    lines = [
        f"Real speech: {report['recordings']} recordings (data/real-speech), WER",
        "",
        "| system | read (5) | commands (6) | all | errors / words | seconds |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, s in report["systems"].items():
        lines.append(
            f"| {name} | {100 * s['read']['wer']:.1f} % | {100 * s['command']['wer']:.1f} % | "
            f"{100 * s['all']['wer']:.1f} % | {s['all']['errors']} / {s['all']['words']} | "
            f"{s['seconds']:.1f} |"
        )
    return "\n".join(lines)


def write_report(report: dict, json_path: Path | None, command: str | None = None) -> str:
    return save_report(report, format_report(report), json_path, command)
