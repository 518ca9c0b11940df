"""What the offramp looks at: the last pilot output, taken at the end of speech before any full
decode (PASU §5). Per token, the attention decoder's log-probability and the CTC prefix
log-probability increment; per utterance, the number of tokens and the audio length."""

from dataclasses import dataclass

import numpy as np

from pasu.speech.decoding import DecodingResult

# Per-token input of the BiLSTM: decoder log p, CTC log p, tokens / 20, audio seconds / 10.
FEATURE_DIM = 4
LOG_PROB_FLOOR = -30.0  # CTC increments can be -1e10 (impossible prefixes); keep them finite


@dataclass(frozen=True)
class OfframpFeatures:
    """Confidence inputs of one decode (a pilot's, or the full decode's for comparison)."""

    decoder_log_probs: np.ndarray  # (tokens,) float32
    ctc_log_probs: np.ndarray  # (tokens,) float32
    audio_s: float

    @property
    def num_tokens(self) -> int:
        return int(self.decoder_log_probs.size)

    @classmethod
    def from_decoding(cls, result: DecodingResult, audio_s: float) -> "OfframpFeatures":
        return cls(
            np.clip(np.asarray(result.token_log_probs, np.float32), LOG_PROB_FLOOR, 0.0),
            np.clip(np.asarray(result.token_ctc_scores, np.float32), LOG_PROB_FLOOR, 0.0),
            float(audio_s),
        )

    def sequence(self) -> np.ndarray:
        """(max(tokens, 1), FEATURE_DIM) float32: the BiLSTM's input. An empty output becomes
        one all-floor step, so "heard nothing" is an input like any other."""
        if self.num_tokens == 0:
            steps = np.array([[LOG_PROB_FLOOR, LOG_PROB_FLOOR]], np.float32)
        else:
            steps = np.stack([self.decoder_log_probs, self.ctc_log_probs], axis=1)
        lengths = np.tile(
            np.array([[self.num_tokens / 20.0, self.audio_s / 10.0]], np.float32),
            (steps.shape[0], 1),
        )
        return np.concatenate([steps, lengths], axis=1).astype(np.float32)

    def to_json(self) -> dict:
        return {
            "decoder_log_probs": [round(float(v), 4) for v in self.decoder_log_probs],
            "ctc_log_probs": [round(float(v), 4) for v in self.ctc_log_probs],
            "audio_s": round(self.audio_s, 3),
        }

    @classmethod
    def from_json(cls, data: dict) -> "OfframpFeatures":
        return cls(
            np.asarray(data["decoder_log_probs"], np.float32),
            np.asarray(data["ctc_log_probs"], np.float32),
            float(data["audio_s"]),
        )
