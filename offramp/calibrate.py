"""Choosing offload thresholds on devel.

Given each devel utterance's score (higher = less sure) and, for a WER target, the word errors
the device and the cloud make on it, pick the threshold that offloads a target share of
utterances, or the fewest utterances that bring the overall WER down to a target.
"""

from dataclasses import dataclass

import numpy as np

from pasu.core.errors import ConfigError


@dataclass(frozen=True)
class OffloadPoint:
    threshold: float
    offload_ratio: float
    wer: float | None


def threshold_for_offload_ratio(scores: np.ndarray, ratio: float) -> float:
    """Offloading every score above the returned threshold ships `ratio` of the utterances
    (up to ties)."""
    scores = np.asarray(scores, np.float64)
    if scores.size == 0:
        raise ConfigError("cannot calibrate on no scores")
    if not 0.0 <= ratio <= 1.0:
        raise ConfigError(f"target offload ratio must be in [0, 1], got {ratio}")
    ordered = np.sort(scores)[::-1]
    count = int(round(ratio * scores.size))
    if count == 0:
        return float(np.nextafter(ordered[0], np.inf))
    if count == scores.size:
        return float(np.nextafter(ordered[-1], -np.inf))
    return float((ordered[count - 1] + ordered[count]) / 2)


def offload_curve(
    scores: np.ndarray, device_errors: np.ndarray, cloud_errors: np.ndarray, words: np.ndarray
) -> list[OffloadPoint]:
    """Overall WER for every number of offloaded utterances, most-doubtful first."""
    scores = np.asarray(scores, np.float64)
    order = np.argsort(-scores, kind="stable")
    device = np.asarray(device_errors, np.float64)[order]
    cloud = np.asarray(cloud_errors, np.float64)[order]
    total_words = float(np.sum(words))
    if total_words <= 0:
        raise ConfigError("references have no words")
    # k offloaded: cloud errors of the first k, device errors of the rest
    errors = np.concatenate([[0.0], np.cumsum(cloud)]) + np.concatenate(
        [np.cumsum(device[::-1])[::-1], [0.0]]
    )
    ordered = scores[order]
    points = []
    for k in range(scores.size + 1):
        if k == 0:
            threshold = float(np.nextafter(ordered[0], np.inf))
        elif k == scores.size:
            threshold = float(np.nextafter(ordered[-1], -np.inf))
        else:
            threshold = float((ordered[k - 1] + ordered[k]) / 2)
        points.append(OffloadPoint(threshold, k / scores.size, float(errors[k] / total_words)))
    return points


def threshold_for_target_wer(
    scores: np.ndarray,
    device_errors: np.ndarray,
    cloud_errors: np.ndarray,
    words: np.ndarray,
    target_wer: float,
) -> OffloadPoint:
    """The least offloading whose overall WER is at or below the target (or, if none reaches
    it, the point with the lowest WER)."""
    points = offload_curve(scores, device_errors, cloud_errors, words)
    reaching = [p for p in points if p.wer <= target_wer]
    if reaching:
        return min(reaching, key=lambda p: p.offload_ratio)
    return min(points, key=lambda p: (p.wer, p.offload_ratio))
