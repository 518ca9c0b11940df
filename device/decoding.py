"""Joint CTC/attention beam search on the device: one loop, configured by `DecodingOptions`.

Without PASU options it reproduces ESPnet's `BatchBeamSearch` (decoder weight 1 − λ, CTC prefix
scorer weight λ, pre-beam of int(1.5 · beam) tokens on the decoder score, top `beam` (hypothesis,
token) pairs jointly, `end_detect` stopping; docs/espnet-beam-search-spec.md), so that speedups
are measured against what an ESPnet user gets. The streaming engine adds pilot references, beam
collapse, early termination and CTC leap as options of this same loop.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from device.ctc_prefix import BLANK, CtcPrefixScorer

# A decoder step: (tokens (B, L) starting with sos, encoded (1, T, d)) -> log-probs (B, V).
DecoderStep = Callable[[np.ndarray, np.ndarray], np.ndarray]

END_DETECT_LENGTHS = 3
END_DETECT_MARGIN = -10.0


@dataclass(frozen=True)
class DecodingOptions:
    """How to decode; defaults are the full beam search after ingestion."""

    beam_size: int = 5
    ctc_weight: float = 0.3
    pre_beam_ratio: float = 1.5
    max_tokens: int | None = None  # token limit (pilots); None = one per encoder frame


@dataclass
class Hypothesis:
    tokens: list[int]  # starts with sos
    score: np.float32
    ctc_state: np.ndarray  # (T, 2) forward variables
    ctc_prefix_score: np.float32
    token_log_probs: list[float] = field(default_factory=list)  # decoder log p per token
    token_ctc_scores: list[float] = field(default_factory=list)  # CTC increment per token


@dataclass(frozen=True)
class DecodingResult:
    """The best hypothesis and what it cost."""

    token_ids: list[int]
    score: float
    token_log_probs: list[float]
    token_ctc_scores: list[float]
    num_decoder_calls: int
    num_ctc_frame_updates: int
    num_steps: int


def _end_detected(ended: list[Hypothesis], step: int) -> bool:
    """ESPnet's end_detect: the best hypotheses ending at each of the last 3 lengths are all far
    worse than the best ended one."""
    if not ended:
        return False
    best = max(float(h.score) for h in ended)
    far_worse = 0
    for back in range(END_DETECT_LENGTHS):
        same_length = [float(h.score) for h in ended if len(h.tokens) == step - back]
        if same_length and max(same_length) - best < END_DETECT_MARGIN:
            far_worse += 1
    return far_worse == END_DETECT_LENGTHS


class BeamSearch:
    """Decodes one utterance's encoder output with a decoder step and CTC prefix scores."""

    def __init__(self, decoder_step: DecoderStep, sos_eos_id: int):
        self.decoder_step = decoder_step
        self.eos = sos_eos_id

    def decode(
        self,
        encoded: np.ndarray,
        ctc_log_probs: np.ndarray,
        options: DecodingOptions = DecodingOptions(),
    ) -> DecodingResult:
        num_frames = ctc_log_probs.shape[0]
        if num_frames == 0:
            return DecodingResult([], 0.0, [], [], 0, 0, 0)
        ctc = CtcPrefixScorer(ctc_log_probs, self.eos)
        decoder_weight = np.float32(1.0 - options.ctc_weight)
        ctc_weight = np.float32(options.ctc_weight)
        pre_beam = int(options.pre_beam_ratio * options.beam_size)
        max_length = (
            num_frames if options.max_tokens is None else min(num_frames, options.max_tokens)
        )
        running = [Hypothesis([self.eos], np.float32(0.0), ctc.initial_state(), np.float32(0.0))]
        ended: list[Hypothesis] = []
        decoder_calls = steps = 0
        for step in range(max_length):
            steps += 1
            tokens = np.array([h.tokens for h in running], np.int64)
            decoder_log_probs = self.decoder_step(tokens, encoded)
            decoder_calls += 1
            weighted = decoder_weight * decoder_log_probs
            candidates = np.argpartition(-weighted, pre_beam - 1, axis=1)[:, :pre_beam]
            prefix_scores, ctc_states = ctc.score(
                np.stack([h.ctc_state for h in running]),
                tokens[:, -1],
                candidates,
                prefix_length=step,
            )
            ctc_increments = (
                prefix_scores - np.array([h.ctc_prefix_score for h in running], np.float32)[:, None]
            )
            weighted = weighted + ctc_weight * ctc_increments
            weighted = weighted + np.array([h.score for h in running], np.float32)[:, None]
            flat = weighted.reshape(-1)
            best = np.argsort(-flat, kind="stable")[: options.beam_size]
            vocab = weighted.shape[1]
            survivors = []
            for index in best:
                parent, token = divmod(int(index), vocab)
                source = running[parent]
                slot = np.flatnonzero(candidates[parent] == token)
                state = ctc_states[parent, slot[0]] if slot.size else source.ctc_state
                survivors.append(
                    Hypothesis(
                        tokens=[*source.tokens, token],
                        score=flat[index],
                        ctc_state=state,
                        ctc_prefix_score=prefix_scores[parent, token],
                        token_log_probs=[
                            *source.token_log_probs,
                            float(decoder_log_probs[parent, token]),
                        ],
                        token_ctc_scores=[
                            *source.token_ctc_scores,
                            float(ctc_increments[parent, token]),
                        ],
                    )
                )
            if step == max_length - 1:
                for hypothesis in survivors:
                    hypothesis.tokens.append(self.eos)
            running = []
            for hypothesis in survivors:
                (ended if hypothesis.tokens[-1] == self.eos else running).append(hypothesis)
            if _end_detected(ended, step) or not running:
                break
        best_hypothesis = sorted(ended, key=lambda h: float(h.score), reverse=True)[0]
        return DecodingResult(
            token_ids=[t for t in best_hypothesis.tokens[1:-1] if t != BLANK],
            score=float(best_hypothesis.score),
            token_log_probs=best_hypothesis.token_log_probs,
            token_ctc_scores=best_hypothesis.token_ctc_scores,
            num_decoder_calls=decoder_calls,
            num_ctc_frame_updates=ctc.frame_updates,
            num_steps=steps,
        )
