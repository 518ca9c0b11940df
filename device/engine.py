"""The streaming engine: `engine.stream()`, `session.feed(pcm)`, `session.finish()`.

`feed` computes features and the convolution blocks for the new audio only and returns at once.
Once `first_pilot_s` of audio has arrived, and every `pilot_interval_s` after that, a *pilot*
decodes the input so far on a worker thread (attention blocks + CTC, narrow beam, token limit,
each pilot following the previous pilot's output). A pilot that is due while the previous one is
still running is skipped, so the engine never falls behind real time. `finish` runs the
attention blocks over the whole input and the full decode, which follows the last pilot's
output (beam collapse, early termination, CTC leap; PASU §4).
"""

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import soxr

from pasu.core.audio import SAMPLE_RATE_HZ, AudioSource, load_audio
from pasu.core.errors import AudioError, ConfigError, PasuError
from pasu.device.encoder import StreamingEncoder
from pasu.device.model import DeviceModel
from pasu.speech.decoding import BeamSearch, DecodingOptions, DecodingResult, PilotReference
from pasu.speech.frontend import StreamingFbank

ENCODER_FRAME_S = 0.04  # one encoder frame after 4× subsampling of 10 ms frames


def split_audio(samples: np.ndarray, chunk_s: float) -> list[np.ndarray]:
    """Consecutive `chunk_s` pieces of 16 kHz audio, as a microphone would deliver them."""
    step = max(int(chunk_s * SAMPLE_RATE_HZ), 1)
    return [samples[i : i + step] for i in range(0, len(samples), step)]


# The engine's decoding: every PASU optimisation on. (DecodingOptions' own defaults are ESPnet's
# plain search.)
ENGINE_DECODING = DecodingOptions(
    beam_collapse=True,
    collapse_margin=2.0,  # nats; tuned on devel (results/device.md)
    early_termination=True,
    score_bound=True,
    ctc_leap=True,
)


@dataclass(frozen=True)
class EngineConfig:
    """Everything that shapes decoding: when pilots run and how they search, and the full
    decode's `DecodingOptions`; each PASU optimisation can be switched off."""

    pilots: bool = True
    first_pilot_s: float = 1.5
    pilot_interval_s: float = 0.5
    pilot_beam: int = 3
    pilot_max_tokens: int = 15
    incremental_pilots: bool = True  # each pilot follows the previous pilot's output
    decoding: DecodingOptions = ENGINE_DECODING
    draft_check: bool = True  # beam collapse reads the decoder's rows along the pilot at once
    min_speech_s: float = 0.3
    max_utterance_s: float = 30.0  # audio beyond this is not ingested (bounded memory)
    threads: int = 1

    def __post_init__(self):
        decoding = self.decoding
        problems = [
            message
            for failed, message in (
                (self.pilot_interval_s <= 0, "pilot_interval_s must be positive"),
                (self.first_pilot_s < 0, "first_pilot_s must not be negative"),
                (decoding.beam_size < 1 or self.pilot_beam < 1, "beams must be at least 1"),
                (self.pilot_max_tokens < 1, "pilot_max_tokens must be at least 1"),
                (not 0.0 <= decoding.ctc_weight <= 1.0, "ctc_weight must be in [0, 1]"),
                (not 0.0 < decoding.ctc_leap_ratio <= 1.0, "ctc_leap_ratio must be in (0, 1]"),
                (decoding.reference is not None, "the reference comes from the pilots"),
                (self.max_utterance_s <= 0, "max_utterance_s must be positive"),
                (self.threads < 1, "threads must be at least 1"),
            )
            if failed
        ]
        if problems:
            raise ConfigError("invalid engine configuration: " + "; ".join(problems))

    def with_decoding(self, **changes) -> "EngineConfig":
        """This configuration with some decoding options changed."""
        return replace(self, decoding=replace(self.decoding, **changes))

    def full_options(self, reference: PilotReference | None) -> DecodingOptions:
        return replace(self.decoding, reference=reference)

    def pilot_options(self, reference: PilotReference | None) -> DecodingOptions:
        return replace(
            self.full_options(reference if self.incremental_pilots else None),
            beam_size=self.pilot_beam,
            max_tokens=self.pilot_max_tokens,
        )


# Full beam search after ingestion, no pilots, no PASU optimisation: the reference behaviour.
PLAIN = EngineConfig(pilots=False).with_decoding(
    beam_collapse=False, early_termination=False, ctc_leap=False, score_bound=False
)


@dataclass(frozen=True)
class PilotRecord:
    """One pilot: when it started (seconds of audio), what it cost, what it produced."""

    audio_s: float
    compute_s: float
    result: DecodingResult


@dataclass(frozen=True)
class Transcript:
    """The result of one utterance."""

    text: str
    token_ids: list[int]
    audio_s: float
    finish_compute_s: float  # compute after the end of speech
    decode: DecodingResult | None
    last_pilot: PilotRecord | None
    pilots_run: int
    pilots_skipped: int
    truncated: bool = False
    note: str = ""


@dataclass(frozen=True)
class EndOfSpeech:
    """The state at the end of speech, before the full decode."""

    last_pilot: PilotRecord | None
    pilots_run: int
    pilots_skipped: int
    compute_s: float  # settling: flushing the resampler, waiting for a running pilot


# Runs one pilot given the previous pilot's reference; None when overtaken by the end of speech.
PilotJob = Callable[[PilotReference | None], "PilotRecord | None"]


class ThreadedPilots:
    """Live scheduling: pilots run on the engine's worker thread; a pilot that is due while the
    previous one still runs is skipped, so ingestion never waits and never falls behind."""

    def __init__(self, pool: ThreadPoolExecutor):
        self._pool = pool
        self._lock = threading.Lock()
        self.last: PilotRecord | None = None
        self.run = self.skipped = 0
        self.errors: list[str] = []  # pilots that raised: reported by finish(), never lost
        self.in_flight: Future | None = None

    def due(self, job: PilotJob) -> None:
        with self._lock:
            if self.in_flight is not None and not self.in_flight.done():
                self.skipped += 1
                return
            reference = self.last.result.reference if self.last else None
            self.in_flight = self._pool.submit(self._run, job, reference)

    def _run(self, job: PilotJob, reference: PilotReference | None) -> None:
        try:
            record = job(reference)
        except Exception as error:  # a failed pilot must not go unnoticed
            with self._lock:
                self.errors.append(f"{type(error).__name__}: {error}")
            return
        if record is None:
            return
        with self._lock:
            self.last, self.run = record, self.run + 1

    def settle(self) -> tuple[PilotRecord | None, int, int]:
        """At the end of speech: the last finished pilot (one still running is not waited for)."""
        with self._lock:
            return self.last, self.run, self.skipped


class Session:
    """One utterance being spoken. Cheap to create; not shared between threads."""

    def __init__(self, engine: "Engine", pilots=None):
        self._engine = engine
        self._config = engine.config
        self._fbank = StreamingFbank(engine.model.cmvn)
        self._encoder = StreamingEncoder(engine.model)
        self._rate_hz: int | None = None
        self._resampler: soxr.ResampleStream | None = None
        self._samples = 0
        self._next_pilot_s = self._config.first_pilot_s
        self._pilots = pilots if pilots is not None else ThreadedPilots(engine.pilot_pool)
        self._result: Transcript | None = None
        self._end_of_speech = threading.Event()  # cancels a pilot still running at finish()
        self._settled: EndOfSpeech | None = None
        self._audio: list[np.ndarray] = []  # 16 kHz samples heard, kept for offloading
        self.truncated = False

    @property
    def audio_s(self) -> float:
        return self._samples / SAMPLE_RATE_HZ

    def feed(self, pcm: np.ndarray, sample_rate_hz: int = SAMPLE_RATE_HZ) -> None:
        """Accept the next piece of audio: mono int16 or float samples at one rate per session."""
        if self._result is not None:
            raise PasuError("feed() after finish(): start a new session for the next utterance")
        self._ingest(self._to_float(pcm, sample_rate_hz))
        self._maybe_start_pilot()

    def _ingest(self, samples: np.ndarray) -> None:
        """Features and convolution blocks for new 16 kHz samples, up to `max_utterance_s`."""
        room = int(self._config.max_utterance_s * SAMPLE_RATE_HZ) - self._samples
        if len(samples) > room:
            samples, self.truncated = samples[: max(room, 0)], True
        if len(samples):
            self._samples += len(samples)
            self._audio.append(samples)
            self._encoder.accept(self._fbank.accept(samples))

    def _to_float(self, pcm: np.ndarray, sample_rate_hz: int) -> np.ndarray:
        samples = np.asarray(pcm)
        if samples.ndim == 2 and 1 in samples.shape:
            samples = samples.reshape(-1)
        if samples.ndim != 1:
            raise AudioError(f"expected mono samples (n,), got shape {samples.shape}")
        if samples.dtype == np.int16:
            samples = samples.astype(np.float32) / 32768.0
        elif samples.dtype.kind == "f":
            samples = samples.astype(np.float32, copy=False)
        else:
            raise AudioError(f"expected int16 or float samples, got {samples.dtype}")
        if not np.all(np.isfinite(samples)):
            raise AudioError("audio contains NaN or infinite samples")
        if self._rate_hz is None:
            if not 1000 <= sample_rate_hz <= 384_000:
                raise AudioError(f"unsupported sample rate {sample_rate_hz} Hz")
            self._rate_hz = sample_rate_hz
            if sample_rate_hz != SAMPLE_RATE_HZ:
                self._resampler = soxr.ResampleStream(
                    sample_rate_hz, SAMPLE_RATE_HZ, 1, dtype="float32"
                )
        elif sample_rate_hz != self._rate_hz:
            raise AudioError(
                f"sample rate changed from {self._rate_hz} to {sample_rate_hz} Hz "
                "within one session"
            )
        if self._resampler is not None:
            samples = self._resampler.resample_chunk(samples)
        return np.clip(samples, -1.0, 1.0)

    def _flush_resampler(self) -> None:
        """A resampler holds back a few milliseconds until it knows the stream has ended."""
        if self._resampler is not None:
            tail = self._resampler.resample_chunk(np.zeros(0, np.float32), last=True)
            self._ingest(np.clip(tail, -1.0, 1.0))

    def _maybe_start_pilot(self) -> None:
        if not self._config.pilots or self.audio_s < self._next_pilot_s:
            return
        while self._next_pilot_s <= self.audio_s:
            self._next_pilot_s += self._config.pilot_interval_s
        frames, audio_s = self._encoder.frames.copy(), self.audio_s
        self._pilots.due(lambda reference: self._run_pilot(frames, audio_s, reference))

    def _run_pilot(
        self, frames: np.ndarray, audio_s: float, reference: PilotReference | None
    ) -> PilotRecord | None:
        started = time.perf_counter()
        encoded, ctc_log_probs = self._engine.model.encoder_top(frames)
        if self._end_of_speech.is_set():
            return None
        options = self._config.pilot_options(reference)
        result = self._engine.decode(encoded, ctc_log_probs, options, self._end_of_speech)
        if self._end_of_speech.is_set():
            return None  # cut short: never a reference
        return PilotRecord(audio_s, time.perf_counter() - started, result)

    def _note(self) -> str:
        notes = [f"truncated to {self._config.max_utterance_s:g} s"] if self.truncated else []
        errors = getattr(self._pilots, "errors", [])
        if errors:
            notes.append(f"{len(errors)} pilot(s) failed: {errors[0]}")
        return "; ".join(notes)

    def audio(self) -> np.ndarray:
        """The 16 kHz mono samples heard so far (what an offload ships)."""
        return np.concatenate(self._audio) if self._audio else np.zeros(0, np.float32)

    def end_of_speech(self) -> EndOfSpeech:
        """Stop ingesting and settle the pilots: the last pilot output is what the offramp
        judges before any full decode. Idempotent; `finish` calls it too."""
        if self._settled is None:
            started = time.perf_counter()
            self._end_of_speech.set()
            self._flush_resampler()
            last, run, skipped = self._pilots.settle()
            self._settled = EndOfSpeech(last, run, skipped, time.perf_counter() - started)
        return self._settled

    def finish(self) -> Transcript:
        """End of speech: decode everything heard, following the last pilot's output."""
        if self._result is not None:
            return self._result
        started = time.perf_counter()  # settling counts here unless end_of_speech() ran before
        end = self.end_of_speech()
        last, run, skipped = end.last_pilot, end.pilots_run, end.pilots_skipped
        if self.audio_s < self._config.min_speech_s or self._encoder.num_frames == 0:
            self._result = Transcript(
                "",
                [],
                self.audio_s,
                time.perf_counter() - started,
                None,
                last,
                run,
                skipped,
                self.truncated,
                note=f"shorter than {self._config.min_speech_s} s",
            )
            return self._result
        encoded, ctc_log_probs = self._encoder.contextualize()
        reference = last.result.reference if last else None
        decode = self._engine.decode(encoded, ctc_log_probs, self._config.full_options(reference))
        text = self._engine.model.tokenizer.decode(decode.token_ids)
        self._result = Transcript(
            text,
            decode.token_ids,
            self.audio_s,
            time.perf_counter() - started,
            decode,
            last,
            run,
            skipped,
            self.truncated,
            note=self._note(),
        )
        return self._result


class Engine:
    """Loads a device model once; hands out cheap per-utterance sessions."""

    def __init__(self, model_dir: Path | str, config: EngineConfig = EngineConfig()):
        self.config = config
        self.model = DeviceModel(model_dir, threads=config.threads)
        self.search = BeamSearch(
            self.model.decoder_step,
            self.model.sos_eos_id,
            self.model.config.get("max_decoder_tokens"),
            self.model.decoder_draft if config.draft_check else None,
        )
        max_frames = self.model.config.get("max_encoder_frames")
        if max_frames is not None and config.max_utterance_s / ENCODER_FRAME_S > max_frames:
            raise ConfigError(
                f"max_utterance_s={config.max_utterance_s} exceeds what this model encodes "
                f"({max_frames * ENCODER_FRAME_S:.0f} s)"
            )
        # One pilot worker per engine (one core): with several live sessions, a session's pilot
        # that is due while another session's runs is skipped like its own busy pilot.
        self.pilot_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pasu-pilot")

    def decode(
        self,
        encoded: np.ndarray,
        ctc_log_probs: np.ndarray,
        options: DecodingOptions,
        cancel: threading.Event | None = None,
    ) -> DecodingResult:
        """Beam search over one encoder output: cross-attention memory once, then the steps."""
        return self.search.decode(
            self.model.decoder_memory(encoded), ctc_log_probs, options, cancel
        )

    def stream(self, pilots=None) -> Session:
        """A new utterance; `pilots` replaces the live pilot scheduler (virtual-clock replay)."""
        return Session(self, pilots)

    def transcribe(self, utterance: AudioSource, chunk_s: float = 0.1) -> Transcript:
        """Replay a whole utterance through a session in `chunk_s` pieces, as fast as possible."""
        samples = utterance if isinstance(utterance, np.ndarray) else load_audio(utterance)
        session = self.stream()
        for piece in split_audio(samples, chunk_s):
            session.feed(piece)
        return session.finish()

    def close(self) -> None:
        self.pilot_pool.shutdown(wait=True)

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
