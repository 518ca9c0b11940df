"""CTC prefix scoring in numpy (float32), for the joint CTC/attention beam search.

For a prefix g the state holds the forward variables r[t] = (log r^n_t(g), log r^b_t(g)): the
probability of g over frames 0..t with the last frame emitting g's last token (n) or blank (b).
Extending g by token c gives the prefix probability psi(g+c); a beam search adds the increment
log psi(g+c) − log psi(g) to a hypothesis's score. Scored the way ESPnet's CTCPrefixScoreTH
does (docs/espnet-beam-search-spec.md), so that our decoder picks the same hypotheses.
"""

import numpy as np

LOG_ZERO = np.float32(-1e10)
BLANK = 0


class CtcPrefixScorer:
    """Scores candidate extensions of prefixes against one utterance's CTC log-probabilities."""

    def __init__(self, ctc_log_probs: np.ndarray, eos_id: int):
        self.log_probs = np.ascontiguousarray(ctc_log_probs, dtype=np.float32)  # (T, V)
        self.num_frames, self.vocab_size = self.log_probs.shape
        self.eos_id = eos_id
        self.frame_updates = 0  # forward-variable frames computed, for cost accounting

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
    ) -> tuple[np.ndarray, np.ndarray]:
        """Prefix log-probabilities of every candidate extension of N prefixes.

        states (N, T, 2), last_tokens (N,), candidates (N, K),
        prefix_length = tokens emitted so far (without sos). Returns log psi(g+c) (N, V) —
        LOG_ZERO for non-candidates and blank, `<eos>` always scored — and the candidates'
        forward variables (N, K, T, 2). The score increment is log psi(g+c) − log psi(g).
        """
        n, k = candidates.shape
        t_total = self.num_frames
        x = self.log_probs
        r_sum = np.logaddexp(states[:, :, 0], states[:, :, 1])  # (N, T)
        repeat = candidates == last_tokens[:, None]  # (N, K)
        # A repeated label can only follow a path that ended in blank.
        log_phi = np.where(repeat[:, :, None], states[:, None, :, 1], r_sum[:, None, :])  # (N,K,T)
        emit = x[:, candidates].transpose(1, 2, 0)  # (N, K, T)
        r = np.full((n, k, t_total, 2), LOG_ZERO, np.float32)
        if prefix_length == 0:
            r[:, :, 0, 0] = emit[:, :, 0]
        start = max(prefix_length, 1)
        blank = x[:, BLANK]
        for t in range(start, t_total):
            r[:, :, t, 0] = np.logaddexp(r[:, :, t - 1, 0], log_phi[:, :, t - 1]) + emit[:, :, t]
            r[:, :, t, 1] = np.logaddexp(r[:, :, t - 1, 0], r[:, :, t - 1, 1]) + blank[t]
        self.frame_updates += n * k * max(t_total - start, 0)
        paths = np.concatenate(
            [
                r[:, :, start - 1, 0][:, :, None],
                log_phi[:, :, start - 1 : t_total - 1] + emit[:, :, start:],
            ],
            axis=2,
        )
        log_psi_candidates = _logsumexp(paths, axis=2)  # (N, K)
        log_psi = np.full((n, self.vocab_size), LOG_ZERO, np.float32)
        np.put_along_axis(log_psi, candidates, log_psi_candidates, axis=1)
        log_psi[:, self.eos_id] = r_sum[:, -1]
        log_psi[:, BLANK] = LOG_ZERO
        return log_psi, r

    def end_score(self, state: np.ndarray) -> np.float32:
        """log psi of a complete hypothesis: all frames consumed."""
        return np.logaddexp(state[-1, 0], state[-1, 1])


def _logsumexp(values: np.ndarray, axis: int) -> np.ndarray:
    peak = values.max(axis=axis, keepdims=True)
    total = np.log(np.exp(values - peak).sum(axis=axis, keepdims=True, dtype=np.float32))
    return (peak + total).squeeze(axis).astype(np.float32)
