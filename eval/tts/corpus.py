"""SLURP-TTS: SLURP's sentences rendered to 16 kHz speech, written as a SLURP-format corpus.

Plan, then render. The plan (voice, speed, pitch, room, noise of every clip) is a pure function
of the split's text and the seed, so a run can stop anywhere and a later run renders only the
clips whose FLAC is missing. The corpus is `OUT/<split>.jsonl` + `OUT/audio/*.flac`, read by
`eval.slurp` exactly like the real SLURP.
"""

import json
import multiprocessing
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
from tqdm import tqdm

from pasu.core.audio import write_flac
from pasu.core.errors import SynthesisError
from pasu.core.slurp import Sentence, load_sentences, unique_sentences

from . import effects, engines
from .rooms import Room, bank_size, room_bank
from .voices import (
    EXTRA_TRAIN_FAMILIES,
    EXTRA_TRAIN_FAMILY_WEIGHTS,
    TRAIN_FAMILIES,
    TRAIN_FAMILY_WEIGHTS,
    VOICE_GROUPS,
    Voice,
    group_of,
)

# Renditions 0-5 draw from the first train families; 6-7, added later, from the extra ones
# only, so that the first six keep their voices (and files) and a corpus grows by rendering
# the new clips alone.
FIRST_TRAIN_RENDITIONS = 6
TRAIN_RENDITIONS = 8
SPEED_RANGE = (0.85, 1.15)
PITCH_RANGE_SEMITONES = (-2.0, 2.0)
FAR_SNR_RANGE_DB = (5.0, 20.0)
CLOSE_SNR_RANGE_DB = (35.0, 50.0)
BATCH_SIZE = 16
_SPLIT_CODES = {"train": 0, "devel": 1, "test": 2}


@dataclass(frozen=True)
class ClipPlan:
    """Everything needed to render one recording, fixed before any rendering starts."""

    split: str
    sentence_index: int
    rendition: int
    text: str
    voice: Voice
    close_talk: bool
    speed: float
    pitch_semitones: float
    snr_db: float
    room_index: int
    seed: int

    @property
    def file_name(self) -> str:
        suffix = "-headset" if self.close_talk else ""
        return (
            f"tts-{self.split}-{self.sentence_index:05d}-{self.rendition}-"
            f"{self.voice.slug}{suffix}.flac"
        )

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(
            [self.seed, _SPLIT_CODES[self.split], self.sentence_index, self.rendition, 1]
        )


def _draw_train_voice(rng: np.random.Generator, rendition: int) -> Voice:
    if rendition < FIRST_TRAIN_RENDITIONS:
        by_family, weight_of = TRAIN_FAMILIES, TRAIN_FAMILY_WEIGHTS
    else:
        by_family, weight_of = EXTRA_TRAIN_FAMILIES, EXTRA_TRAIN_FAMILY_WEIGHTS
    families = list(weight_of)
    weights = np.array([weight_of[f] for f in families])
    family = by_family[families[rng.choice(len(families), p=weights / weights.sum())]]
    return family[rng.integers(len(family))]


def _clip(
    split: str, index: int, rendition: int, text: str, voice: Voice, close_talk: bool, seed: int
) -> ClipPlan:
    rng = np.random.default_rng([seed, _SPLIT_CODES[split], index, rendition, 0])
    snr_range = CLOSE_SNR_RANGE_DB if close_talk else FAR_SNR_RANGE_DB
    return ClipPlan(
        split=split,
        sentence_index=index,
        rendition=rendition,
        text=text,
        voice=voice,
        close_talk=close_talk,
        speed=round(float(rng.uniform(*SPEED_RANGE)), 4),
        pitch_semitones=round(float(rng.uniform(*PITCH_RANGE_SEMITONES)), 3),
        snr_db=round(float(rng.uniform(*snr_range)), 2),
        room_index=int(rng.integers(bank_size(split))),
        seed=seed,
    )


def plan_split(
    split: str, sentences: Sequence[Sentence], seed: int, voices: Sequence[Voice] | None = None
) -> list[ClipPlan]:
    """Every clip of a split: train = 8 renditions per sentence (odd ones far-field), drawn from
    the train voices (the last two from the extra families only); devel and test = one
    close-talk and one far-field clip per sentence with the group's voices taken round-robin (a
    different voice for each condition)."""
    group = VOICE_GROUPS[split]
    if voices:
        foreign = [v.slug for v in voices if v not in group]
        if foreign:
            raise SynthesisError(f"voices {', '.join(foreign)} do not belong to the {split} group")
    plans = []
    for index, sentence in enumerate(sentences):
        if split == "train":
            for rendition in range(TRAIN_RENDITIONS):
                rng = np.random.default_rng([seed, 0, index, rendition, 2])
                voice = (
                    voices[rng.integers(len(voices))]
                    if voices
                    else _draw_train_voice(rng, rendition)
                )
                plans.append(
                    _clip(
                        split,
                        index,
                        rendition,
                        sentence.text,
                        voice,
                        close_talk=rendition % 2 == 0,
                        seed=seed,
                    )
                )
        else:
            pool = list(voices or group)
            for rendition, close_talk in enumerate((True, False)):
                voice = pool[(index + rendition) % len(pool)]
                plans.append(_clip(split, index, rendition, sentence.text, voice, close_talk, seed))
    return plans


def render_clip(plan: ClipPlan, engine_wav: Path, rooms: Sequence[Room]) -> np.ndarray:
    """Turn an engine's raw output into the final 16 kHz recording of this rendition."""
    rng = plan.rng()
    speech = effects.resample_speed_pitch(engine_wav, plan.speed, plan.pitch_semitones)
    speech = effects.pad_silence(effects.trim_silence(speech), rng)
    if not plan.close_talk:
        speech = effects.reverberate(speech, rooms[plan.room_index])
    speech = effects.add_noise(speech, plan.snr_db, rng)
    return effects.set_peak_level(speech, rng)


_worker_rooms: list[Room] = []


def _init_worker(rooms: list[Room]) -> None:
    global _worker_rooms
    _worker_rooms = rooms


def _render_batch(args: tuple[list[ClipPlan], Path]) -> list[tuple[str, str | None]]:
    """Render one voice's batch; returns (file name, error or None) per clip."""
    batch, audio_dir = args
    results: list[tuple[str, str | None]] = []
    with tempfile.TemporaryDirectory(prefix="pasu-synth-") as tmp:
        raw = [(p.text, Path(tmp) / f"{i}.wav") for i, p in enumerate(batch)]
        try:
            engines.render(batch[0].voice, raw)
        except SynthesisError as error:
            if len(batch) == 1:
                return [(batch[0].file_name, str(error))]
            # One bad sentence must not sink its batch: retry clip by clip.
            return [r for p in batch for r in _render_batch(([p], audio_dir))]
        for plan, (_, wav) in zip(batch, raw, strict=True):
            try:
                write_flac(audio_dir / plan.file_name, render_clip(plan, wav, _worker_rooms))
                results.append((plan.file_name, None))
            except SynthesisError as error:
                results.append((plan.file_name, str(error)))
    return results


def _batches(plans: Sequence[ClipPlan]) -> list[list[ClipPlan]]:
    by_voice: dict[Voice, list[ClipPlan]] = {}
    for plan in plans:
        by_voice.setdefault(plan.voice, []).append(plan)
    return [
        clips[i : i + BATCH_SIZE]
        for clips in by_voice.values()
        for i in range(0, len(clips), BATCH_SIZE)
    ]


@dataclass
class SynthReport:
    """What a synthesis run did, written next to the corpus as `synth-<split>.json`."""

    split: str
    sentences: int
    clips_planned: int
    clips_rendered_now: int
    clips_skipped_existing: int
    failures: dict[str, str]
    wall_s: float
    audio_s: float
    engines: dict[str, int]
    voices: int

    def to_json(self) -> dict:
        return self.__dict__ | {"audio_h": round(self.audio_s / 3600, 3)}


def _recording_entry(plan: ClipPlan, audio_dir: Path, rooms: Sequence[Room]) -> dict:
    entry = {
        "file": plan.file_name,
        "voice": plan.voice.slug,
        "engine": plan.voice.engine,
        "speed": plan.speed,
        "pitch_semitones": plan.pitch_semitones,
        "snr_db": plan.snr_db,
        "duration_s": round(sf.info(audio_dir / plan.file_name).duration, 3),
    }
    if not plan.close_talk:
        room = rooms[plan.room_index]
        entry |= {
            "room": plan.room_index,
            "rt60_s": round(room.rt60_s, 3),
            "distance_m": round(room.distance_m, 2),
        }
    return entry


def write_split_jsonl(
    out_dir: Path,
    split: str,
    sentences: Sequence[Sentence],
    plans: Sequence[ClipPlan],
    rooms: Sequence[Room],
) -> float:
    """Write `<split>.jsonl` listing the clips that exist; returns their total duration (s)."""
    audio_dir = out_dir / "audio"
    by_sentence: dict[int, list[dict]] = {}
    for plan in plans:
        if (audio_dir / plan.file_name).is_file():
            entry = _recording_entry(plan, audio_dir, rooms)
            by_sentence.setdefault(plan.sentence_index, []).append(entry)
    partial = out_dir / f"{split}.jsonl.partial"
    with partial.open("w", encoding="utf-8") as out:
        for index, sentence in enumerate(sentences):
            if index not in by_sentence:
                continue
            record = dict(sentence.raw) or {
                "slurp_id": sentence.slurp_id,
                "sentence": sentence.text,
            }
            record["recordings"] = by_sentence[index]
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    partial.replace(out_dir / f"{split}.jsonl")
    return sum(e["duration_s"] for entries in by_sentence.values() for e in entries)


def synthesize_split(
    split: str,
    out_dir: Path,
    limit: int | None = None,
    workers: int = 2,
    seed: int = 0,
    voices: Sequence[Voice] | None = None,
    text_dir: Path | None = None,
    progress: bool = True,
) -> SynthReport:
    """Render (the first `limit` sentences of) a split into `out_dir`, resuming where it stopped."""
    started = time.perf_counter()
    sentences = load_sentences(split, text_dir)
    if split == "train":
        sentences = unique_sentences(sentences)
    sentences = sentences[:limit] if limit is not None else sentences
    plans = plan_split(split, sentences, seed, voices)
    for voice in {p.voice for p in plans}:
        if group_of(voice) != split:  # guards the held-out voices against any planning bug
            raise SynthesisError(f"voice {voice.slug} is not a {split} voice")
        if not engines.voice_available(voice):
            raise SynthesisError(
                f"voice {voice.slug} needs the {voice.engine} engine, which is not installed "
                "here (run scripts/install-system-deps.sh)"
            )
    audio_dir = out_dir / "audio"
    audio_dir.mkdir(parents=True, exist_ok=True)
    pending = [p for p in plans if not (audio_dir / p.file_name).is_file()]
    rooms = room_bank(split, seed, progress=progress)
    failures: dict[str, str] = {}
    with tqdm(total=len(pending), desc=f"synth {split}", unit="clip", disable=not progress) as bar:
        jobs = [(batch, audio_dir) for batch in _batches(pending)]
        if workers <= 1 or len(jobs) <= 1:
            _init_worker(rooms)
            outcomes = map(_render_batch, jobs)
            _drain(outcomes, failures, bar)
        else:
            context = multiprocessing.get_context("fork")
            with context.Pool(workers, initializer=_init_worker, initargs=(rooms,)) as pool:
                _drain(pool.imap_unordered(_render_batch, jobs), failures, bar)
    audio_s = write_split_jsonl(out_dir, split, sentences, plans, rooms)
    report = SynthReport(
        split=split,
        sentences=len(sentences),
        clips_planned=len(plans),
        clips_rendered_now=len(pending) - len(failures),
        clips_skipped_existing=len(plans) - len(pending),
        failures=failures,
        wall_s=round(time.perf_counter() - started, 2),
        audio_s=round(audio_s, 2),
        engines=dict(Counter(p.voice.engine for p in plans)),
        voices=len({p.voice for p in plans}),
    )
    (out_dir / f"synth-{split}.json").write_text(json.dumps(report.to_json(), indent=2) + "\n")
    return report


def _drain(outcomes, failures: dict[str, str], bar: tqdm) -> None:
    for results in outcomes:
        for file_name, error in results:
            if error is not None:
                failures[file_name] = error
        bar.update(len(results))
