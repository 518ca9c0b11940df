"""Scores: WER after spoken-form normalisation, intent accuracy, offload ratio, latencies."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import jiwer
import numpy as np

from pasu.core.errors import DataError
from pasu.core.text import normalize_for_wer


@dataclass(frozen=True)
class WordErrors:
    """Edit operations between normalised references and hypotheses, summed over a corpus."""

    substitutions: int
    deletions: int
    insertions: int
    reference_words: int

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    @property
    def wer(self) -> float:
        """Word error rate as a fraction (0.1 = 10 %); insertions against empty references count."""
        if self.reference_words == 0:
            return 0.0 if self.errors == 0 else float("inf")
        return self.errors / self.reference_words


def word_errors(references: Sequence[str], hypotheses: Sequence[str]) -> WordErrors:
    """Count word edits after `normalize_for_wer` on both sides."""
    if len(references) != len(hypotheses):
        raise DataError(f"{len(references)} references but {len(hypotheses)} hypotheses")
    refs = [normalize_for_wer(r) for r in references]
    hyps = [normalize_for_wer(h) for h in hypotheses]
    scored = [(r, h) for r, h in zip(refs, hyps, strict=True) if r]
    # jiwer rejects empty references: every hypothesis word against one is an insertion.
    empty_ref_insertions = sum(len(h.split()) for r, h in zip(refs, hyps, strict=True) if not r)
    if not scored:
        return WordErrors(0, 0, empty_ref_insertions, 0)
    out = jiwer.process_words([r for r, _ in scored], [h for _, h in scored])
    return WordErrors(
        substitutions=out.substitutions,
        deletions=out.deletions,
        insertions=out.insertions + empty_ref_insertions,
        reference_words=sum(len(r.split()) for r, _ in scored),
    )


def wer(references: Sequence[str], hypotheses: Sequence[str]) -> float:
    """Corpus word error rate (total edits / total reference words) as a fraction."""
    return word_errors(references, hypotheses).wer


def wer_by_condition(
    references: Sequence[str], hypotheses: Sequence[str], close_talk: Sequence[bool]
) -> dict[str, float | None]:
    """WER over all recordings, close-talk only and far-field only (None where there are none)."""

    def subset(keep: bool | None) -> float | None:
        chosen = [i for i, c in enumerate(close_talk) if keep is None or c == keep]
        if not chosen:
            return None
        return wer([references[i] for i in chosen], [hypotheses[i] for i in chosen])

    return {"wer": subset(None), "wer_close": subset(True), "wer_far": subset(False)}


def utterance_wer(reference: str, hypothesis: str) -> float:
    """WER of one utterance, e.g. to label whether the device got it wrong."""
    return word_errors([reference], [hypothesis]).wer


def intent_accuracy(gold: Sequence[str | None], predicted: Sequence[str | None]) -> float:
    """Share of recordings whose predicted `scenario_action` equals the gold one."""
    if len(gold) != len(predicted):
        raise DataError(f"{len(gold)} gold intents but {len(predicted)} predictions")
    if not gold:
        raise DataError("intent accuracy of an empty set is undefined")
    if any(g is None for g in gold):
        raise DataError("gold intents are missing (text-only split?)")
    return sum(g == p for g, p in zip(gold, predicted, strict=True)) / len(gold)


def offload_ratio(routes: Sequence[str]) -> float:
    """Share of recordings answered by the cloud (route `cloud`)."""
    if not routes:
        raise DataError("offload ratio of an empty set is undefined")
    return sum(route == "cloud" for route in routes) / len(routes)


def latency_percentiles(
    latencies_ms: Iterable[float], percentiles: Sequence[float] = (50, 90, 99)
) -> dict[str, float]:
    """Mean and percentiles of latencies, keyed `mean`, `p50`, `p90`, ... (milliseconds)."""
    values = np.asarray(list(latencies_ms), dtype=np.float64)
    if values.size == 0:
        raise DataError("latency percentiles of an empty set are undefined")
    if not np.all(np.isfinite(values)):
        raise DataError("latencies must be finite numbers")
    stats = {"mean": float(values.mean())}
    stats.update({f"p{p:g}": float(np.percentile(values, p)) for p in percentiles})
    return stats
