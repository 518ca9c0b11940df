"""Per-utterance runs over a SLURP-format split, cached so that offramp training, calibration and
the evaluation share them.

- `device_runs`: every recording through the streaming engine (virtual 1× replay, pilots on the
  simulated timeline), keeping the device's text, the last pilot's offramp features, the full
  decode's features, and the latency breakdown.
- `cloud_runs`: every recording through the cloud recogniser (Whisper), keeping its text and time.

Results are appended to a JSONL file per (model, configuration, split, subset) under
~/.cache/pasu/runs-cache, so an interrupted run resumes where it stopped.
"""

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from tqdm import tqdm

from pasu.core.audio import load_audio
from pasu.core.metrics import word_errors
from pasu.core.modeldir import CMVN_FILE, CONFIG_FILE, TOKENIZER_FILE
from pasu.core.paths import cache_dir
from pasu.core.slurp import Recording, fixed_subset, load_recordings
from pasu.device.engine import Engine, EngineConfig
from pasu.device.latency import replay_virtual
from pasu.device.offload import encode_flac
from pasu.offramp.features import OfframpFeatures

# What a device run depends on in a model directory (not its offramp, which is fit on the runs).
_DECODING_FILES = (CONFIG_FILE, TOKENIZER_FILE, CMVN_FILE)


def fingerprint(*parts: object) -> str:
    digest = hashlib.sha1()
    for part in parts:
        if isinstance(part, Path) and part.is_dir():
            for file in sorted(part.iterdir()):
                if file.suffix == ".onnx" or file.name in _DECODING_FILES:
                    digest.update(file.name.encode())
                    digest.update(file.read_bytes())
        else:
            digest.update(repr(part).encode())
    return digest.hexdigest()[:12]


def _recordings(data_dir: Path, split: str, limit: int | None) -> list[Recording]:
    recordings = load_recordings(data_dir, split)
    return fixed_subset(recordings, limit) if limit else recordings


def audio_hash(recording: Recording) -> str:
    return hashlib.sha1(recording.audio_path.read_bytes()).hexdigest()


def _cached_rows(
    path: Path,
    recordings: list[Recording],
    run_one: Callable[[Recording], dict],
    desc: str,
    key: Callable[[Recording], str] = lambda recording: recording.id,
) -> list[dict]:
    """Rows for `recordings`, computing (and appending) only those whose key is not cached."""
    path.parent.mkdir(parents=True, exist_ok=True)
    done: dict[str, dict] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by an interruption
            done[row["key"]] = row
    keys = [key(r) for r in recordings]
    missing = [(r, k) for r, k in zip(recordings, keys, strict=True) if k not in done]
    with path.open("a") as out:
        for recording, row_key in tqdm(missing, desc=desc, unit="utt", disable=not missing):
            row = run_one(recording) | {"key": row_key}
            out.write(json.dumps(row) + "\n")
            out.flush()
            done[row_key] = row
    # a cached row may come from another recording with the same audio: give it this one's id
    return [done[k] | _base_row(r) for r, k in zip(recordings, keys, strict=True)]


def _base_row(recording: Recording) -> dict:
    return {
        "id": recording.id,
        "condition": recording.condition,
        "voice": recording.voice,
        "reference": recording.text,
        "gold_intent": recording.intent,
    }


def _scored(row: dict, text_key: str) -> dict:
    errors = word_errors([row["reference"]], [row[text_key]])
    row[f"{text_key}_errors"] = errors.errors
    row["reference_words"] = errors.reference_words
    return row


def device_runs(
    model_dir: Path,
    data_dir: Path,
    split: str,
    limit: int | None = None,
    config: EngineConfig | None = None,
) -> list[dict]:
    config = config or EngineConfig()
    key = fingerprint(model_dir, config, split, limit, data_dir.resolve())
    path = cache_dir() / "runs-cache" / f"device-{split}-{key}.jsonl"
    engine = Engine(model_dir, config)

    def run_one(recording: Recording) -> dict:
        samples = load_audio(recording.audio_path)
        transcript, latency = replay_virtual(engine, samples)
        pilot = transcript.last_pilot
        row = _base_row(recording) | {
            "audio_s": round(transcript.audio_s, 3),
            "device_text": transcript.text,
            "pilot_features": OfframpFeatures.from_decoding(
                pilot.result, transcript.audio_s
            ).to_json()
            if pilot
            else None,
            "pilot_audio_s": pilot.audio_s if pilot else None,
            "full_features": OfframpFeatures.from_decoding(
                transcript.decode, transcript.audio_s
            ).to_json()
            if transcript.decode
            else None,
            "latency": asdict(latency),
        }
        return _scored(row, "device_text")

    try:
        return _cached_rows(path, _recordings(data_dir, split, limit), run_one, f"device {split}")
    finally:
        engine.close()


def cloud_runs(
    data_dir: Path,
    split: str,
    limit: int | None = None,
    model: str = "whisper-base",
    threads: int = 2,
) -> list[dict]:
    from pasu.cloud.asr import WhisperOptions, WhisperRecognizer
    from pasu.speech.whisper_checkpoints import resolve_checkpoint

    # cached by (model, audio hash), whatever split or subset asks
    path = cache_dir() / "runs-cache" / f"cloud-{fingerprint(model, 'padded')}.jsonl"
    recognizer = None

    def run_one(recording: Recording) -> dict:
        nonlocal recognizer
        if recognizer is None:
            recognizer = WhisperRecognizer(
                resolve_checkpoint(model), WhisperOptions(cpu_threads=threads)
            )
        audio = load_audio(recording.audio_path)
        started = time.perf_counter()
        transcript = recognizer.transcribe(audio)
        row = _base_row(recording) | {
            "cloud_text": transcript.text,
            "cloud_ms": round((time.perf_counter() - started) * 1000, 1),
            "upload_bytes": len(encode_flac(audio)),
        }
        return row

    rows = _cached_rows(
        path, _recordings(data_dir, split, limit), run_one, f"cloud {split}", key=audio_hash
    )
    return [_scored(row, "cloud_text") for row in rows]


def baseline_runs(
    checkpoint: Path, model_dir: Path, data_dir: Path, split: str, limit: int | None = None
) -> list[dict]:
    """ESPnet's BatchBeamSearch on the torch weights (the OnDevice baseline): features while
    speaking, the whole encoder and the beam search after the end of speech. `checkpoint` is a
    torch weights file or a model directory (the model rebuilt from its graphs)."""
    from pasu.core.modeldir import is_model_dir

    if checkpoint.is_dir() and not is_model_dir(checkpoint):
        raise ValueError(f"{checkpoint} is neither a weights file nor a model directory")
    weights = checkpoint if checkpoint.is_dir() else checkpoint.read_bytes()[: 1 << 20]
    key = fingerprint(weights, model_dir, split, limit)
    path = cache_dir() / "runs-cache" / f"espnet-{split}-{key}.jsonl"
    decoder = None

    def run_one(recording: Recording) -> dict:
        nonlocal decoder
        if decoder is None:
            decoder = EspnetDecoder(checkpoint, model_dir)
        text, after_s, audio_s = decoder(recording.audio_path)
        row = _base_row(recording) | {
            "espnet_text": text,
            "latency_ms": round(after_s * 1000, 2),
            "audio_s": round(audio_s, 3),
        }
        return _scored(row, "espnet_text")

    return _cached_rows(path, _recordings(data_dir, split, limit), run_one, f"espnet {split}")


class EspnetDecoder:
    """Decodes a file with ESPnet's search (float16-rounded weights, as the device ships them);
    returns (text, seconds after the end of speech, audio seconds)."""

    def __init__(self, checkpoint: Path, model_dir: Path, threads: int = 1):
        import torch

        from pasu.models.baseline import EspnetBaseline
        from pasu.models.checkpoints import load_checkpoint_model
        from pasu.models.export import round_weights_to_float16
        from pasu.speech.frontend import GlobalCmvn
        from pasu.speech.tokenizer import Tokenizer

        torch.set_num_threads(threads)
        model = load_checkpoint_model(checkpoint)
        round_weights_to_float16(model)
        self.baseline = EspnetBaseline(model)
        self.cmvn = GlobalCmvn.load(model_dir / CMVN_FILE)
        self.tokenizer = Tokenizer(model_dir / TOKENIZER_FILE)

    def __call__(self, audio_path: Path) -> tuple[str, float, float]:
        from pasu.speech.frontend import compute_fbank

        samples = load_audio(audio_path)
        features = compute_fbank(samples, self.cmvn)  # streamable: not counted after speech
        started = time.perf_counter()
        result = self.baseline.decode(features)
        after_s = time.perf_counter() - started
        return self.tokenizer.decode(result.token_ids), after_s, len(samples) / 16_000
