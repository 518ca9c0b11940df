"""The systems of the SLURP evaluation and how their answers and latencies are
computed from the cached per-recording runs: links, utterances, offload operating points and
threshold sweeps."""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pasu.core.metrics import intent_accuracy
from pasu.offramp.features import OfframpFeatures
from pasu.offramp.policy import load_config
from pasu.offramp.scores import BiLstmScorer, perplexity


@dataclass(frozen=True)
class Link:
    name: str
    rtt_ms: float
    uplink_mbps: float
    source: str

    def transfer_ms(self, upload_bytes: int) -> float:
        if self.uplink_mbps == float("inf"):
            return self.rtt_ms
        return self.rtt_ms + upload_bytes * 8 / (self.uplink_mbps * 1e6) * 1000


LINKS = {
    "none": Link("none", 0.0, float("inf"), "no network: the cloud's compute only"),
    "wifi": Link(
        "wifi",
        10.0,
        100.0,
        "PASU §7.1: enterprise WiFi to a same-coast Azure region, 'bandwidth in 100s of Mb and "
        "RTT in ms'",
    ),
    "5g": Link(
        "5g",
        35.0,
        13.0,
        "uplink: Opensignal 5G Experience Report, Oct 2021 (US carriers 9.7-16.1 Mbps); RTT: our "
        "assumption, below LTE's",
    ),
    "lte": Link(
        "lte",
        55.0,
        6.3,
        "Opensignal State of Mobile USA, May 2019: LTE upload 6.3 Mbps, latency 44-66 ms",
    ),
}


@dataclass(frozen=True)
class Utterance:
    """One recording as every system saw it."""

    id: str
    condition: str
    words: int
    audio_s: float
    gold_intent: str | None
    device_errors: int
    device_text: str
    device_intent: str
    device_ms: float  # Ours-OnDevice: end of speech → result
    device_catch_up_ms: float  # ingestion still running at the end of speech
    device_compute_ms: float
    cloud_errors: int
    cloud_text: str
    cloud_intent: str
    cloud_compute_ms: float
    upload_bytes: int
    pilot: OfframpFeatures | None
    full: OfframpFeatures | None
    espnet_errors: int | None = None
    espnet_text: str | None = None
    espnet_intent: str | None = None
    espnet_ms: float | None = None
    voice: str | None = None


def merge_runs(
    device_rows, cloud_rows, device_intents, cloud_intents, espnet_rows=None, espnet_intents=None
) -> list[Utterance]:
    cloud_by_id = {r["id"]: (r, i) for r, i in zip(cloud_rows, cloud_intents, strict=True)}
    espnet_by_id = (
        {r["id"]: (r, i) for r, i in zip(espnet_rows, espnet_intents, strict=True)}
        if espnet_rows
        else {}
    )
    merged = []
    for row, intent in zip(device_rows, device_intents, strict=True):
        cloud, cloud_intent = cloud_by_id[row["id"]]
        espnet, espnet_intent = espnet_by_id.get(row["id"], (None, None))
        latency = row["latency"]
        merged.append(
            Utterance(
                id=row["id"],
                condition=row["condition"],
                words=row["reference_words"],
                audio_s=row["audio_s"],
                gold_intent=row["gold_intent"],
                device_errors=row["device_text_errors"],
                device_text=row["device_text"],
                device_intent=intent,
                device_ms=latency["total_ms"],
                device_catch_up_ms=latency["waiting_for_ingestion_ms"],
                device_compute_ms=latency["ingestion_compute_ms"]
                + latency["pilot_compute_ms"]
                + latency["finish_compute_ms"],
                cloud_errors=cloud["cloud_text_errors"],
                cloud_text=cloud["cloud_text"],
                cloud_intent=cloud_intent,
                cloud_compute_ms=cloud["cloud_ms"],
                upload_bytes=cloud["upload_bytes"],
                pilot=OfframpFeatures.from_json(row["pilot_features"])
                if row["pilot_features"]
                else None,
                full=OfframpFeatures.from_json(row["full_features"])
                if row["full_features"]
                else None,
                espnet_errors=espnet["espnet_text_errors"] if espnet else None,
                espnet_text=espnet["espnet_text"] if espnet else None,
                espnet_intent=espnet_intent,
                espnet_ms=espnet["latency_ms"] if espnet else None,
                voice=row.get("voice"),
            )
        )
    return merged


def offload_ms(u: Utterance, link: Link, after_full_decode: bool) -> float:
    """End of speech → the cloud's answer on the device."""
    before = u.device_ms if after_full_decode else u.device_catch_up_ms
    return before + link.transfer_ms(u.upload_bytes) + u.cloud_compute_ms


def _judged_after_full_decode(u: Utterance, after_full: bool, offramp: bool) -> bool:
    """An offramp with no pilot output to judge (speech shorter than the first pilot) judges
    the full decode, as the device does: that decode comes before the offload."""
    return after_full or (offramp and u.pilot is None)


@dataclass(frozen=True)
class OperatingPoint:
    """One policy at one threshold (or α): what users get."""

    system: str
    offload_ratio: float
    wer: float
    intent_accuracy: float | None
    latency_mean_ms: float
    latency_p90_ms: float
    rtf: float  # device + cloud compute per second of audio
    threshold: float | None = None


def operating_point(
    system, utterances, offloaded, link, after_full, threshold=None, offramp=False
) -> OperatingPoint:
    """`offramp`: the offload decisions come from an offramp score (not chance, not always)."""
    offloaded = np.asarray(offloaded, bool)
    full_first = [_judged_after_full_decode(u, after_full, offramp) for u in utterances]
    words = sum(u.words for u in utterances)
    errors = sum(
        u.cloud_errors if o else u.device_errors for u, o in zip(utterances, offloaded, strict=True)
    )
    latencies = [
        offload_ms(u, link, full) if o else u.device_ms
        for u, o, full in zip(utterances, offloaded, full_first, strict=True)
    ]
    compute = sum(
        (u.cloud_compute_ms + (u.device_compute_ms if full else 0.0)) if o else u.device_compute_ms
        for u, o, full in zip(utterances, offloaded, full_first, strict=True)
    )
    intents = None
    if all(u.gold_intent is not None for u in utterances):
        intents = intent_accuracy(
            [u.gold_intent for u in utterances],
            [
                u.cloud_intent if o else u.device_intent
                for u, o in zip(utterances, offloaded, strict=True)
            ],
        )
    return OperatingPoint(
        system,
        float(offloaded.mean()),
        errors / max(words, 1),
        intents,
        float(np.mean(latencies)),
        float(np.percentile(latencies, 90)),
        compute / 1000 / sum(u.audio_s for u in utterances),
        threshold,
    )


def most_doubtful(scores: np.ndarray, ratio: float) -> tuple[np.ndarray, float | None]:
    """The `ratio` share of recordings with the highest scores, and the threshold that takes
    them."""
    order = np.argsort(-np.asarray(scores, np.float64), kind="stable")
    count = round(ratio * len(order))
    offloaded = np.zeros(len(order), bool)
    offloaded[order[:count]] = True
    return offloaded, float(scores[order[count - 1]]) if count else None


def score_sweep(system, utterances, scores, link, after_full, steps=20) -> list[OperatingPoint]:
    """Offload the most doubtful k recordings, for k at `steps` + 1 evenly spaced ratios."""
    points = []
    for step in range(steps + 1):
        offloaded, threshold = most_doubtful(scores, step / steps)
        points.append(
            operating_point(system, utterances, offloaded, link, after_full, threshold, True)
        )
    return points


def naive_sweep(utterances, link, steps=20, seed=0) -> list[OperatingPoint]:
    draws = np.random.default_rng(seed).random(len(utterances))
    return [
        operating_point("NaiveHybrid", utterances, draws < step / steps, link, False, step / steps)
        for step in range(steps + 1)
    ]


def offramp_scores(utterances, scorer, use_full: bool) -> np.ndarray:
    values = []
    for u in utterances:
        features = (u.full if use_full else u.pilot) or u.full
        values.append(np.inf if features is None else float(scorer(features)))
    finite = np.array(values)
    return np.where(np.isfinite(finite), finite, np.finfo(np.float64).max)


def evaluate(
    utterances: list[Utterance],
    link: Link,
    bilstm: BiLstmScorer | None,
    steps: int = 20,
    thresholds: dict[str, float] | None = None,
) -> dict:
    """Every system's operating points on these utterances; `thresholds` (the model's shipped
    offramp.json, keyed `ppl`/`lstm`) adds the point each shipped policy actually runs at."""
    none, every = np.zeros(len(utterances), bool), np.ones(len(utterances), bool)
    fixed = [
        operating_point("Ours-OnDevice", utterances, none, link, False),
        operating_point("AllOffload", utterances, every, link, False),
    ]
    if all(u.espnet_errors is not None for u in utterances):
        espnet_view = [
            Utterance(
                **{
                    **u.__dict__,
                    "device_errors": u.espnet_errors,
                    "device_intent": u.espnet_intent,
                    "device_ms": u.espnet_ms,
                }
            )
            for u in utterances
        ]
        fixed.insert(0, operating_point("OnDevice (ESPnet)", espnet_view, none, link, False))
    scorers = {"PPL": perplexity}
    if bilstm is not None:
        scorers["LSTM"] = bilstm
    sweeps = {"NaiveHybrid": naive_sweep(utterances, link, steps)}
    for name, scorer in scorers.items():
        scores = offramp_scores(utterances, scorer, False)
        sweeps[f"Ours-{name}"] = score_sweep(f"Ours-{name}", utterances, scores, link, False, steps)
        threshold = (thresholds or {}).get(name.lower())
        if threshold is not None:
            system = f"Ours-{name} (shipped threshold)"
            offloaded = scores > threshold
            fixed.append(
                operating_point(system, utterances, offloaded, link, False, threshold, True)
            )
        sweeps[f"Ours-after-full-decode-{name}"] = score_sweep(
            f"Ours-after-full-decode-{name}",
            utterances,
            offramp_scores(utterances, scorer, True),
            link,
            True,
            steps,
        )
    return {"fixed": fixed, "sweeps": sweeps}


def shipped_thresholds(model_dir: Path) -> dict[str, float]:
    """The offramp thresholds a model directory ships (offramp.json), keyed `ppl`/`lstm`."""
    return load_config(model_dir).get("thresholds") or {}
