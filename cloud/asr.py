"""The cloud's speech recogniser: Whisper via faster-whisper, behind a small interface.

Whisper pads every input to a 30 s window. Voice commands last 2-6 s, so the encoder can run
on a shorter window (the audio plus a margin, rounded up to a 10 s bucket), which is about
three times cheaper. Whisper never saw short windows in training and can hallucinate on them,
so every short-window result passes guards (end of text reached, no repetition, plausible
speaking rate, confident decode); a result that fails falls back to the standard padded run.
Off by default: on SLURP-TTS test it cost 1.0 WER point against the padded run, more than the
0.5 we accept (results/whisper-window.md).
"""

import math
import threading
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from faster_whisper.transcribe import get_compression_ratio

from pasu.core.audio import SAMPLE_RATE_HZ
from pasu.speech.whisper_checkpoints import WhisperCheckpoint

FULL_WINDOW_S = 30.0
FRAMES_PER_SECOND = 100  # Whisper's mel hop is 10 ms


@dataclass(frozen=True)
class WhisperTranscript:
    """What the recogniser heard, with the decode statistics the guards use."""

    text: str
    duration_s: float
    avg_logprob: float
    no_speech_prob: float
    window_s: float  # encoder window actually used: short, or 30 s for the padded run
    fell_back: bool = False  # a short-window result failed a guard and was redone padded
    guard: str = ""  # which guard failed, when one did


class SpeechRecognizer(Protocol):
    """Anything that turns 16 kHz mono float32 audio into a transcript."""

    name: str

    def transcribe(self, audio: np.ndarray) -> WhisperTranscript: ...


@dataclass(frozen=True)
class ShortWindowGuards:
    """Limits a short-window decode must meet to be trusted (Whisper's own fallback thresholds
    plus a speaking-rate check against the hallucinated runs short windows cause)."""

    max_compression_ratio: float = 2.4
    min_avg_logprob: float = -1.0
    max_chars_per_second: float = 30.0
    max_no_speech_prob: float = 0.6

    def failure(
        self,
        text: str,
        tokens: int,
        max_tokens: int,
        avg_logprob: float,
        no_speech_prob: float,
        duration_s: float,
    ) -> str:
        """Name of the first guard the decode fails, or "" when it passes."""
        if tokens >= max_tokens:
            return "no end of text"
        if text and get_compression_ratio(text) > self.max_compression_ratio:
            return "repetition"
        if avg_logprob < self.min_avg_logprob:
            return "low confidence"
        if len(text) > self.max_chars_per_second * max(duration_s, 1.0):
            return "too much text for the audio"
        if not text and no_speech_prob < self.max_no_speech_prob:
            return "no text although speech was detected"
        return ""

    def is_silence(self, avg_logprob: float, no_speech_prob: float) -> bool:
        """Whisper's own rule for windows without speech."""
        return no_speech_prob > self.max_no_speech_prob and avg_logprob < self.min_avg_logprob


@dataclass
class WhisperOptions:
    """How the Whisper recogniser decodes."""

    short_window: bool = False
    window_margin_s: float = 1.0  # trailing silence that lets Whisper end the text
    # Windows come in 10 s steps: 4-6 s windows made Whisper base repeat itself and lose
    # 11 WER points on SLURP-TTS test (results/whisper-window-4s.md); 10 s kept its WER.
    window_bucket_s: float = 10.0
    beam_size: int = 5
    cpu_threads: int = 2
    concurrent_requests: int = 1  # CTranslate2 model replicas sharing the weights
    guards: ShortWindowGuards = field(default_factory=ShortWindowGuards)

    def window_seconds(self, duration_s: float) -> float:
        """Encoder window for an utterance: audio plus margin, rounded up to the bucket size."""
        wanted = duration_s + self.window_margin_s
        return min(FULL_WINDOW_S, math.ceil(wanted / self.window_bucket_s) * self.window_bucket_s)


class WhisperRecognizer:
    """Whisper (CTranslate2, int8) in English transcription mode."""

    def __init__(self, checkpoint: WhisperCheckpoint, options: WhisperOptions | None = None):
        from faster_whisper import WhisperModel
        from faster_whisper.tokenizer import Tokenizer
        from faster_whisper.transcribe import get_suppressed_tokens

        self.options = options or WhisperOptions()
        self.name = checkpoint.name
        self._model = WhisperModel(
            str(checkpoint.path),
            device="cpu",
            compute_type="int8",
            cpu_threads=self.options.cpu_threads,
            num_workers=self.options.concurrent_requests,
        )
        multilingual = self._model.model.is_multilingual
        self._tokenizer = Tokenizer(
            self._model.hf_tokenizer,
            multilingual,
            task="transcribe",
            language="en" if multilingual else None,
        )
        self._suppressed = get_suppressed_tokens(self._tokenizer, [-1])
        self._prompt = [*self._tokenizer.sot_sequence, self._tokenizer.no_timestamps]
        self._feature_lock = threading.Lock()  # the feature extractor keeps per-call state

    def transcribe(self, audio: np.ndarray) -> WhisperTranscript:
        duration_s = audio.size / SAMPLE_RATE_HZ
        if not self.options.short_window or duration_s + self.options.window_margin_s > 29.0:
            return self.transcribe_padded(audio)
        transcript, guard = self._transcribe_short(audio, duration_s)
        if guard:
            padded = self.transcribe_padded(audio)
            return WhisperTranscript(**{**padded.__dict__, "fell_back": True, "guard": guard})
        return transcript

    def transcribe_padded(self, audio: np.ndarray) -> WhisperTranscript:
        """faster-whisper's standard transcription: 30 s windows, temperature fallback."""
        segments, _ = self._model.transcribe(
            audio,
            language="en" if self._model.model.is_multilingual else None,
            beam_size=self.options.beam_size,
            without_timestamps=True,
        )
        segments = list(segments)
        text = " ".join(s.text.strip() for s in segments).strip()
        return WhisperTranscript(
            text=text,
            duration_s=audio.size / SAMPLE_RATE_HZ,
            avg_logprob=float(np.mean([s.avg_logprob for s in segments])) if segments else 0.0,
            no_speech_prob=float(np.mean([s.no_speech_prob for s in segments]))
            if segments
            else 1.0,
            window_s=FULL_WINDOW_S,
        )

    def _transcribe_short(
        self, audio: np.ndarray, duration_s: float
    ) -> tuple[WhisperTranscript, str]:
        import ctranslate2

        window_s = self.options.window_seconds(duration_s)
        frames = int(round(window_s * FRAMES_PER_SECOND))
        with self._feature_lock:
            features = self._model.feature_extractor(audio)[:, :-1]
        features = np.pad(features[:, :frames], ((0, 0), (0, max(0, frames - features.shape[1]))))
        encoded = self._model.model.encode(
            ctranslate2.StorageView.from_array(np.ascontiguousarray(features[None]))
        )
        max_tokens = min(224, 16 + int(duration_s * 12))
        result = self._model.model.generate(
            encoded,
            [self._prompt],
            beam_size=self.options.beam_size,
            max_length=len(self._prompt) + max_tokens,
            return_scores=True,
            return_no_speech_prob=True,
            suppress_blank=True,
            suppress_tokens=self._suppressed,
        )[0]
        tokens = result.sequences_ids[0]
        text = self._tokenizer.decode(tokens).strip()
        # CTranslate2 returns the length-normalised score; undo it as faster-whisper does
        avg_logprob = result.scores[0] * len(tokens) / (len(tokens) + 1)
        silent = self.options.guards.is_silence(avg_logprob, result.no_speech_prob)
        transcript = WhisperTranscript(
            text="" if silent else text,
            duration_s=duration_s,
            avg_logprob=float(avg_logprob),
            no_speech_prob=float(result.no_speech_prob),
            window_s=window_s,
        )
        if silent:
            return transcript, ""
        guard = self.options.guards.failure(
            text, len(tokens), max_tokens, avg_logprob, result.no_speech_prob, duration_s
        )
        return transcript, guard
