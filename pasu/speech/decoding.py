"""Joint CTC/attention beam search on the device: one loop, configured by `DecodingOptions`.

With default options it reproduces ESPnet's `BatchBeamSearch` (decoder weight 1 − λ, CTC
prefix scorer weight λ, pre-beam of int(1.5 · beam) tokens on the decoder score, top `beam`
(hypothesis, token) pairs jointly, `end_detect` stopping; docs/espnet-beam-search-spec.md), so
that speedups are measured against what an ESPnet user gets. Given a pilot's output as
`reference`, PASU's optimisations (§4.2) are parts of this same loop, each switched by an option:

- beam collapse: while the best hypothesis's newest token agrees with the reference, keep only
  it (plus finished hypotheses); on divergence the next step expands the full beam again.
  Optionally (`realign_lookahead` > 0, off by default) a mismatch looks a few positions around
  for the token, as Whisper-T does (the pilot may have dropped or added one), and realigns
  there, collapsing again only once a later token confirms it.
- early termination: stop once the predicted length (frames_full / frames_pilot) · n_pilot + C
  is reached and a hypothesis has finished.
  Given a `draft` function, the decoder's outputs along the whole reference are computed in
  one call before the first step, and a step whose hypothesis is a prefix of the reference
  takes its row from there instead of running the decoder: the same numbers, one call instead
  of one per collapsed step (speculative decoding with the pilot as the draft).
- CTC leap (Algorithm 1): extending a prefix that equals the reference's, reuse the pilot's CTC
  forward variables for the first ⌊T_pilot · q⌋ frames and compute only the rest.

One more stopping rule needs no reference (`score_bound`): every step adds a decoder log-prob
and a CTC prefix-probability ratio, both ≤ 0, so a hypothesis's score never rises. Once the best
finished hypothesis scores at least as well as every running one, nothing can overtake it and the
search stops, with the answer an unbounded search would give. (CTC leap breaks the premise right
after a leap, since the pilot's forward variables come from other posteriors: the bound then
waits until no running hypothesis can leap any more.) ESPnet's end detection instead
waits until three lengths in a row have ended far (10 nats) below the best, which costs several
full-beam steps after the answer is known.
"""

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pasu.speech.ctc_prefix import BLANK, CtcPrefixScorer

# A decoder step: (tokens (B, L) starting with sos, memory) -> log-probs (B, V), where memory
# is whatever the step needs from the encoder output (the device: cross-attention keys, values).
DecoderStep = Callable[[np.ndarray, object], np.ndarray]
# A draft check: (tokens (L,) starting with sos, memory) -> log-probs (L, V) after each prefix.
DecoderDraft = Callable[[np.ndarray, object], np.ndarray]

END_DETECT_LENGTHS = 3
END_DETECT_MARGIN = -10.0


@dataclass(frozen=True)
class PilotReference:
    """What a pilot decode leaves for the next decode: its best tokens, the CTC forward
    variables of each of their prefixes, and how many encoder frames it saw."""

    tokens: tuple[int, ...]
    ctc_states: tuple[np.ndarray, ...]  # ctc_states[j]: (T_pilot, 2) for tokens[: j + 1]
    num_frames: int


@dataclass(frozen=True)
class DecodingOptions:
    """How to decode; the defaults are ESPnet's full beam search after ingestion."""

    beam_size: int = 5
    ctc_weight: float = 0.3
    pre_beam_ratio: float = 1.5
    max_tokens: int | None = None  # token limit (pilots); None = one per encoder frame
    reference: PilotReference | None = None
    beam_collapse: bool = False
    collapse_margin: float = 0.0  # collapse only when the best leads the runner-up by this much
    realign_lookahead: int = 0  # positions searched on a mismatch to realign (Whisper-T)
    early_termination: bool = False
    length_slack: int = 5  # C in the predicted length
    ctc_leap: bool = False
    ctc_leap_ratio: float = 0.8  # q: share of the pilot's frames whose CTC variables are reused
    score_bound: bool = False  # stop once no running hypothesis can overtake the best finished


@dataclass
class Hypothesis:
    tokens: list[int]  # starts with sos
    score: np.float32
    ctc_state: np.ndarray  # (T, 2) forward variables of this prefix
    ctc_prefix_score: np.float32
    ctc_history: tuple[np.ndarray, ...] = ()  # forward variables of each prefix, in order
    token_log_probs: list[float] = field(default_factory=list)  # decoder log p per token
    token_ctc_scores: list[float] = field(default_factory=list)  # CTC increment per token


@dataclass(frozen=True)
class DecodingResult:
    """The best hypothesis, what it cost, and the reference it leaves for the next decode."""

    token_ids: list[int]
    score: float
    token_log_probs: list[float]
    token_ctc_scores: list[float]
    num_decoder_calls: int
    num_ctc_frame_updates: int
    num_steps: int
    num_hypothesis_evaluations: int = 0  # decoder rows computed (NFE): beam collapse cuts these
    collapsed_steps: int = 0
    reference: PilotReference | None = None


def _is_prefix(tokens: list[int] | tuple[int, ...], of: tuple[int, ...]) -> bool:
    """Whether `tokens` begin `of` (False when longer)."""
    return tuple(tokens) == of[: len(tokens)]


class ReferenceTracker:
    """Decides whether the best hypothesis still follows the pilot reference.

    Strictly (lookahead 0), its whole token history must equal the reference's beginning: after
    a divergence the beam holds other prefixes, and one whose newest token merely coincides with
    the reference must not win the collapse. With `lookahead` > 0 (Whisper-T's realignment), the
    alignment may shift by up to that many positions when the pilot dropped or added a token;
    the beam collapses only when the newest two tokens match consecutive reference positions.
    """

    def __init__(self, tokens: tuple[int, ...], lookahead: int):
        self.tokens = tokens
        self.lookahead = lookahead
        self.offset = 0

    def agrees(self, history: list[int]) -> bool:
        """`history`: the best hypothesis's tokens without sos."""
        if self.lookahead == 0:
            return _is_prefix(history, self.tokens)
        newest = len(history) - 1 + self.offset
        if self._at(newest) == history[-1]:
            return len(history) == 1 or self._at(newest - 1) == history[-2]
        for distance in range(1, self.lookahead + 1):
            for index in (newest + distance, newest - distance):
                if self._at(index) == history[-1]:
                    self.offset = index - (len(history) - 1)
                    return False  # realigned; a later consecutive match collapses
        return False

    def _at(self, index: int) -> int | None:
        return self.tokens[index] if 0 <= index < len(self.tokens) else None


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


def _leads(survivors: list[Hypothesis], margin: float) -> bool:
    """Whether the best survivor leads the runner-up by at least `margin` (nats)."""
    return len(survivors) < 2 or float(survivors[0].score - survivors[1].score) >= margin


def _settled(ended: list[Hypothesis], running: list[Hypothesis]) -> bool:
    """Whether the best finished hypothesis can no longer be overtaken: scores never rise."""
    return bool(ended) and max(float(h.score) for h in ended) >= max(
        (float(h.score) for h in running), default=-math.inf
    )


def _may_leap(running: list[Hypothesis], options: DecodingOptions) -> bool:
    """Whether a running hypothesis can still have descendants scored from the pilot's CTC
    variables. Those come from the pilot's posteriors, not the full input's, so a score may rise
    right after a leap, and the score bound must wait until no such descendant is possible."""
    reference = options.reference
    if not (options.ctc_leap and reference):
        return False
    leap_steps = len(reference.ctc_states)
    return any(
        len(h.tokens) - 1 <= leap_steps and _is_prefix(h.tokens[1:], reference.tokens)
        for h in running
    )


def predicted_length(reference: PilotReference, num_frames: int, slack: int) -> int:
    """PASU's early-termination length: the pilot's token rate scaled to the full input, + C."""
    return math.ceil(num_frames / max(reference.num_frames, 1) * len(reference.tokens)) + slack


@dataclass(frozen=True)
class Draft:
    """The decoder's log-probs after each prefix of `tokens` (sos + the pilot's reference)."""

    tokens: tuple[int, ...]
    log_probs: np.ndarray  # (len(tokens), V)

    def row_for(self, hypothesis_tokens: list[int]) -> np.ndarray | None:
        if _is_prefix(hypothesis_tokens, self.tokens):
            return self.log_probs[len(hypothesis_tokens) - 1]
        return None


class BeamSearch:
    """Decodes one utterance: a decoder step over its `memory` plus CTC prefix scores."""

    def __init__(
        self,
        decoder_step: DecoderStep,
        sos_eos_id: int,
        max_positions: int | None = None,
        decoder_draft: DecoderDraft | None = None,
    ):
        """`max_positions`: the longest token history (with sos) the decoder step accepts;
        `decoder_draft`: checks a whole reference in one call (used with beam collapse)."""
        self.decoder_step = decoder_step
        self.eos = sos_eos_id
        self.max_positions = max_positions
        self.decoder_draft = decoder_draft

    def decode(
        self,
        memory: object,
        ctc_log_probs: np.ndarray,
        options: DecodingOptions = DecodingOptions(),
        cancel: threading.Event | None = None,
    ) -> DecodingResult:
        num_frames = ctc_log_probs.shape[0]
        if num_frames == 0:
            return DecodingResult([], 0.0, [], [], 0, 0, 0)
        ctc = CtcPrefixScorer(ctc_log_probs, self.eos)
        reference = options.reference
        tracker = (
            ReferenceTracker(reference.tokens, options.realign_lookahead)
            if reference and options.beam_collapse
            else None
        )
        stop_length = (
            predicted_length(reference, num_frames, options.length_slack)
            if reference and options.early_termination
            else None
        )
        max_length = (
            num_frames if options.max_tokens is None else min(num_frames, options.max_tokens)
        )
        if self.max_positions is not None:
            max_length = min(max_length, self.max_positions - 1)
        running = [Hypothesis([self.eos], np.float32(0.0), ctc.initial_state(), np.float32(0.0))]
        ended: list[Hypothesis] = []
        decoder_calls = steps = collapsed = evaluations = 0
        draft = self._draft(memory, options, max_length)
        if draft is not None:
            decoder_calls, evaluations = 1, len(draft.tokens)
        for step in range(max_length):
            if cancel is not None and cancel.is_set():
                break  # a pilot overtaken by the end of speech: its result will not be used
            steps += 1
            survivors, computed = self._expand(running, memory, ctc, step, options, draft)
            evaluations += computed
            decoder_calls += computed > 0
            if step == max_length - 1:
                for hypothesis in survivors:
                    if hypothesis.tokens[-1] != self.eos:  # never a second <eos>
                        hypothesis.tokens.append(self.eos)
            running = [h for h in survivors if h.tokens[-1] != self.eos]
            ended += [h for h in survivors if h.tokens[-1] == self.eos]
            # The tracker sees every best history (realignment keeps state), then the margin.
            agrees = bool(
                tracker
                and running
                and survivors[0] is running[0]
                and tracker.agrees(running[0].tokens[1:])
                and _leads(survivors, options.collapse_margin)
            )
            if agrees:
                running = running[:1]
                collapsed += 1
            # While collapsed, finished hypotheses come from one parent only; ESPnet's end
            # detection would then stop before the path that agrees with the pilot finishes.
            if not running or (not agrees and _end_detected(ended, step)):
                break
            if stop_length is not None and step + 1 >= stop_length and ended:
                break
            if options.score_bound and _settled(ended, running) and not _may_leap(running, options):
                break
        best = sorted(ended, key=lambda h: float(h.score), reverse=True)[0] if ended else running[0]
        body = best.tokens[1:-1] if best.tokens[-1] == self.eos else best.tokens[1:]
        return DecodingResult(
            token_ids=[t for t in body if t != BLANK],
            score=float(best.score),
            token_log_probs=best.token_log_probs,
            token_ctc_scores=best.token_ctc_scores,
            num_decoder_calls=decoder_calls,
            num_ctc_frame_updates=ctc.frame_updates,
            num_steps=steps,
            num_hypothesis_evaluations=evaluations,
            collapsed_steps=collapsed,
            reference=PilotReference(tuple(body), best.ctc_history[: len(body)], num_frames),
        )

    def _draft(self, memory: object, options: DecodingOptions, max_length: int) -> Draft | None:
        """The decoder's outputs along the reference, when beam collapse will follow it."""
        reference = options.reference
        if not (self.decoder_draft and options.beam_collapse and reference and reference.tokens):
            return None
        # the longest history a step can send has max_length tokens, sos included
        tokens = (self.eos, *reference.tokens[: max_length - 1])
        return Draft(tokens, self.decoder_draft(np.array(tokens, np.int64), memory))

    def _decoder_rows(
        self, running: list[Hypothesis], tokens: np.ndarray, memory: object, draft: Draft | None
    ) -> tuple[np.ndarray, int]:
        """Decoder log-probs (N, V) of the running hypotheses, and how many were computed now
        (a hypothesis on the draft reads its row from there)."""
        if draft is None:
            return self.decoder_step(tokens, memory), len(running)
        known = [draft.row_for(h.tokens) for h in running]
        missing = [i for i, row in enumerate(known) if row is None]
        if len(missing) == len(running):
            return self.decoder_step(tokens, memory), len(running)
        rows = np.empty((len(running), draft.log_probs.shape[1]), np.float32)
        for i, row in enumerate(known):
            if row is not None:
                rows[i] = row
        if missing:
            rows[missing] = self.decoder_step(tokens[missing], memory)
        return rows, len(missing)

    def _expand(
        self,
        running: list[Hypothesis],
        memory: object,
        ctc: CtcPrefixScorer,
        step: int,
        options: DecodingOptions,
        draft: Draft | None = None,
    ) -> tuple[list[Hypothesis], int]:
        """One step: the top `beam` extensions of the running hypotheses, best first, and how
        many decoder rows it computed."""
        tokens = np.array([h.tokens for h in running], np.int64)
        decoder_log_probs, computed = self._decoder_rows(running, tokens, memory, draft)
        weighted = np.float32(1.0 - options.ctc_weight) * decoder_log_probs
        pre_beam = int(options.pre_beam_ratio * options.beam_size)
        candidates = np.argpartition(-weighted, pre_beam - 1, axis=1)[:, :pre_beam]
        prefix_scores, ctc_states = ctc.score(
            np.stack([h.ctc_state for h in running]),
            tokens[:, -1],
            candidates,
            prefix_length=step,
            leaps=self._leaps(running, candidates, step, options),
        )
        previous = np.array([h.ctc_prefix_score for h in running], np.float32)[:, None]
        ctc_increments = prefix_scores - previous
        weighted = weighted + np.float32(options.ctc_weight) * ctc_increments
        weighted = weighted + np.array([h.score for h in running], np.float32)[:, None]
        flat = weighted.reshape(-1)
        vocab = weighted.shape[1]
        survivors = []
        for index in np.argsort(-flat, kind="stable")[: options.beam_size]:
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
                    ctc_history=(*source.ctc_history, state),
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
        return survivors, computed

    @staticmethod
    def _leaps(
        running: list[Hypothesis], candidates: np.ndarray, step: int, options: DecodingOptions
    ) -> dict[tuple[int, int], np.ndarray] | None:
        """CTC forward variables the pilot already has for extensions along its reference."""
        reference = options.reference
        if not (options.ctc_leap and reference and step < len(reference.ctc_states)):
            return None
        reused_frames = int(reference.num_frames * options.ctc_leap_ratio)
        leaps = {}
        for row, hypothesis in enumerate(running):
            if not _is_prefix(hypothesis.tokens[1:], reference.tokens):
                continue
            for slot in np.flatnonzero(candidates[row] == reference.tokens[step]):
                leaps[(row, int(slot))] = reference.ctc_states[step][:reused_frames]
        return leaps
