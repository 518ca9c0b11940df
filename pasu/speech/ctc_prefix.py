"""CTC prefix scoring in numpy, for the joint CTC/attention beam search.

For a prefix g the state holds the forward variables r[t] = (log r^n_t(g), log r^b_t(g)): the
probability of g over frames 0..t with the last frame emitting g's last token (n) or blank (b).
Extending g by token c gives the prefix probability psi(g+c); a beam search adds the increment
log psi(g+c) − log psi(g) to a hypothesis's score. Scored the way ESPnet's CTCPrefixScoreTH
does (docs/espnet-beam-search-spec.md), so that our decoder picks the same hypotheses.

Both recursions are linear in probability space,
    r^n_t(h) = (r^n_{t-1}(h) + phi_{t-1}) · p_t(c),
    r^b_t(h) = (r^b_{t-1}(h) + r^n_{t-1}(h)) · p_t(blank),
so each has a closed form with cumulative sums: with E_t = Σ_{u≤t} log p_u(c),
    log r^n_t = E_t + logcumsumexp_s (phi_{s-1} − E_{s-1}),
computed in float64 with `np.logaddexp.accumulate` instead of a Python loop over frames. The
work is proportional to the frames computed, which CTC leap (PASU Algorithm 1) shortens by
starting from forward variables a pilot already computed.
"""

import numpy as np

LOG_ZERO = np.float32(-1e10)
BLANK = 0


def _log_cumsum_exp(values: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.logaddexp.accumulate(values, axis=axis)


class CtcPrefixScorer:
    """Scores candidate extensions of prefixes against one utterance's CTC log-probabilities."""

    def __init__(self, ctc_log_probs: np.ndarray, eos_id: int):
        self.log_probs = np.ascontiguousarray(ctc_log_probs, dtype=np.float32)  # (T, V)
        self.num_frames, self.vocab_size = self.log_probs.shape
        self.eos_id = eos_id
        self.frame_updates = 0  # (candidate, frame) forward variables computed, for accounting
        self._blank_cumulative = np.cumsum(self.log_probs[:, BLANK], dtype=np.float64)

    def initial_state(self) -> np.ndarray:
        """Forward variables of the empty prefix (just `<sos>`): all blanks so far."""
        r = np.full((self.num_frames, 2), LOG_ZERO, np.float32)
        r[:, 1] = np.cumsum(self.log_probs[:, BLANK], dtype=np.float32)
        return r

    def score(
        self,
        states: np.ndarray,
        last_tokens: np.ndarray,
        candidates: np.ndarray,
        prefix_length: int,
        leaps: dict[tuple[int, int], np.ndarray] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Prefix log-probabilities of every candidate extension of N prefixes.

        states (N, T, 2), last_tokens (N,), candidates (N, K), prefix_length = tokens emitted
        so far (without sos). `leaps` maps (row, candidate slot) to forward variables of that
        extension already known for its first frames (CTC leap); only the later frames are
        computed. Returns log psi(g+c) (N, V) — LOG_ZERO for non-candidates and blank, `<eos>`
        always scored — and the candidates' forward variables (N, K, T, 2). The score
        increment is log psi(g+c) − log psi(g).
        """
        n, k = candidates.shape
        total = self.num_frames
        r_sum = np.logaddexp(states[:, :, 0], states[:, :, 1])  # (N, T)
        repeat = candidates == last_tokens[:, None]
        # A repeated label can only follow a path that ended in blank.
        log_phi = np.where(repeat[:, :, None], states[:, None, :, 1], r_sum[:, None, :])  # (N,K,T)
        emit = self.log_probs[:, candidates].transpose(1, 2, 0)  # (N, K, T)
        start = max(prefix_length, 1)
        r = np.full((n, k, total, 2), LOG_ZERO, np.float32)
        if prefix_length == 0:
            r[:, :, 0, 0] = emit[:, :, 0]
        groups: dict[int, list[tuple[int, int]]] = {}
        for (row, slot), known in (leaps or {}).items():
            frames = min(len(known), total)
            if frames > start:
                r[row, slot, :frames] = known[:frames]
                groups.setdefault(frames, []).append((row, slot))
        leapt = {pair for pairs in groups.values() for pair in pairs}
        regular = [(i, j) for i in range(n) for j in range(k) if (i, j) not in leapt]
        for first, pairs in [(start, regular), *groups.items()]:
            if pairs and first < total:
                rows, slots = (np.array(p) for p in zip(*pairs, strict=True))
                r[rows, slots, first:] = self._forward(
                    r[rows, slots, first - 1], log_phi[rows, slots], emit[rows, slots], first
                )
                self.frame_updates += len(pairs) * (total - first)
        paths = np.concatenate(
            [
                r[:, :, start - 1, 0][:, :, None],
                log_phi[:, :, start - 1 : total - 1] + emit[:, :, start:],
            ],
            axis=2,
        )
        log_psi_candidates = _logsumexp(paths, axis=2)  # (N, K)
        log_psi = np.full((n, self.vocab_size), LOG_ZERO, np.float32)
        np.put_along_axis(log_psi, candidates, log_psi_candidates, axis=1)
        log_psi[:, self.eos_id] = r_sum[:, -1]
        log_psi[:, BLANK] = LOG_ZERO
        return log_psi, r

    def _forward(
        self, before: np.ndarray, log_phi: np.ndarray, emit: np.ndarray, first: int
    ) -> np.ndarray:
        """Forward variables for frames first..T-1 of M extensions, from their values at frame
        first-1 (M, 2), log phi (M, T) and emission log-probs (M, T), in closed form."""
        emit = emit[:, first:].astype(np.float64)
        phi = log_phi[:, first - 1 : -1].astype(np.float64)
        cumulative_emit = np.cumsum(emit, axis=1)  # E_t relative to frame first-1
        shifted = np.concatenate([np.zeros((len(emit), 1)), cumulative_emit[:, :-1]], axis=1)
        terms = np.concatenate([before[:, :1].astype(np.float64), phi - shifted], axis=1)
        nonblank = cumulative_emit + _log_cumsum_exp(terms, axis=1)[:, 1:]
        blank = self._blank_cumulative[first:] - self._blank_cumulative[first - 1]  # B_t
        previous_nonblank = np.concatenate(
            [before[:, :1].astype(np.float64), nonblank[:, :-1]], axis=1
        )
        shifted_blank = np.concatenate([[0.0], blank[:-1]])
        blank_terms = np.concatenate(
            [before[:, 1:2].astype(np.float64), previous_nonblank - shifted_blank], axis=1
        )
        with_blank = blank + _log_cumsum_exp(blank_terms, axis=1)[:, 1:]
        out = np.stack([nonblank, with_blank], axis=-1)
        return np.maximum(out, LOG_ZERO).astype(np.float32)

    def end_score(self, state: np.ndarray) -> np.float32:
        """log psi of a complete hypothesis: all frames consumed."""
        return np.logaddexp(state[-1, 0], state[-1, 1])


def _logsumexp(values: np.ndarray, axis: int) -> np.ndarray:
    peak = values.max(axis=axis, keepdims=True)
    total = np.log(np.exp(values - peak).sum(axis=axis, keepdims=True, dtype=np.float32))
    return (peak + total).squeeze(axis).astype(np.float32)
