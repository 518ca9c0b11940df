"""SLURP evaluation (PASU §7): WER and intent accuracy against offload ratio and latency.

Every system answers the same recordings, from cached per-recording runs (`eval.corpus_runs`):
- OnDevice: ESPnet's search after ingestion (needs the torch checkpoint);
- Ours-OnDevice: our engine (pilots, beam collapse, early termination, CTC leap), never offloading;
- AllOffload: every recording to the cloud;
- NaiveHybrid: offload at random with probability α;
- Ours-PPL / Ours-LSTM: the offramp scores of the last pilot output, thresholds swept;
- Ours-after-full-decode (PPL / LSTM): the same scores on the full decode's output.

Latency of an offloaded recording = the device's work before offloading + the upload of the FLAC
waveform over the link + the link's round trip + the cloud's measured compute.
"""

import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from pasu.core.errors import ConfigError
from pasu.core.metrics import intent_accuracy
from pasu.core.modeldir import CONFIG_FILE, OFFRAMP_BILSTM_FILE, OFFRAMP_CONFIG_FILE
from pasu.device.engine import EngineConfig
from pasu.eval.predictions import Prediction, write_predictions
from pasu.eval.reports import pct
from pasu.offramp.calibrate import offload_curve
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


def _point(
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
        points.append(_point(system, utterances, offloaded, link, after_full, threshold, True))
    return points


def naive_sweep(utterances, link, steps=20, seed=0) -> list[OperatingPoint]:
    draws = np.random.default_rng(seed).random(len(utterances))
    return [
        _point("NaiveHybrid", utterances, draws < step / steps, link, False, step / steps)
        for step in range(steps + 1)
    ]


def _scores(utterances, scorer, use_full: bool) -> np.ndarray:
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
        _point("Ours-OnDevice", utterances, none, link, False),
        _point("AllOffload", utterances, every, link, False),
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
        fixed.insert(0, _point("OnDevice (ESPnet)", espnet_view, none, link, False))
    scorers = {"PPL": perplexity}
    if bilstm is not None:
        scorers["LSTM"] = bilstm
    sweeps = {"NaiveHybrid": naive_sweep(utterances, link, steps)}
    for name, scorer in scorers.items():
        scores = _scores(utterances, scorer, False)
        sweeps[f"Ours-{name}"] = score_sweep(f"Ours-{name}", utterances, scores, link, False, steps)
        threshold = (thresholds or {}).get(name.lower())
        if threshold is not None:
            system = f"Ours-{name} (shipped threshold)"
            offloaded = scores > threshold
            fixed.append(_point(system, utterances, offloaded, link, False, threshold, True))
        sweeps[f"Ours-after-full-decode-{name}"] = score_sweep(
            f"Ours-after-full-decode-{name}",
            utterances,
            _scores(utterances, scorer, True),
            link,
            True,
            steps,
        )
    return {"fixed": fixed, "sweeps": sweeps}


def wer_targets(result: dict, count: int = 4) -> list[float]:
    """Overall WER targets that bracket the device's and the cloud's WER."""
    fixed = {p.system: p for p in result["fixed"]}
    best = min(p.wer for points in result["sweeps"].values() for p in points)
    device = fixed["Ours-OnDevice"].wer
    if device <= best:
        return [device]
    return [float(v) for v in np.linspace(device, best, count + 1)[1:]]


def cheapest_meeting(points: list[OperatingPoint], target: float) -> OperatingPoint | None:
    meeting = [p for p in points if p.wer <= target + 1e-12]
    return min(meeting, key=lambda p: p.offload_ratio) if meeting else None


def pilot_variant_row(
    name: str,
    utterances: list[Utterance],
    link: Link,
    scorer,
    targets: list[float],
    steps: int = 20,
) -> dict:
    """One Table-5 row: a pilot setting's device-only point, and the least offloading (by the
    offramp `scorer`) that reaches each overall WER target, with how many of the offloaded
    recordings were targets (the cloud does better) and non-targets. Without pilots the
    offramp can only judge the full decode, after it."""
    after_full = all(u.pilot is None for u in utterances)
    scores = _scores(utterances, scorer, after_full)
    points = score_sweep(name, utterances, scores, link, after_full, steps)
    none = np.zeros(len(utterances), bool)
    row = {
        "variant": name,
        "offramp_after_full_decode": after_full,
        "ondevice": _point(name, utterances, none, link, False).__dict__,
        "offload": [],
    }
    for target in targets:
        point = cheapest_meeting(points, target)
        entry: dict = {"target_wer": target, "point": point.__dict__ if point else None}
        if point is not None:
            offloaded, _ = most_doubtful(scores, point.offload_ratio)
            chosen = [u for u, o in zip(utterances, offloaded, strict=True) if o]
            entry |= target_counts(chosen)
        row["offload"].append(entry)
    return row


def naive_share(device_wer: float, cloud_wer: float, target: float) -> float | None:
    """The share random offloading needs to reach `target` in expectation (the paper's
    NaiveHybrid line: WER falls linearly from the device's to the cloud's); None below the
    cloud's WER."""
    if target >= device_wer:
        return 0.0
    if target < cloud_wer:
        return None
    return (device_wer - target) / (device_wer - cloud_wer)


def least_share(utterances: list[Utterance], scores: np.ndarray, target: float) -> float | None:
    """The smallest share of recordings that, offloaded most doubtful first, brings the overall
    WER to `target` (exact, at one-recording steps rather than the sweep's 5 % steps)."""
    curve = offload_curve(
        scores,
        np.array([u.device_errors for u in utterances]),
        np.array([u.cloud_errors for u in utterances]),
        np.array([u.words for u in utterances]),
    )
    return next((p.offload_ratio for p in curve if p.wer <= target + 1e-12), None)


def paper_targets(
    utterances: list[Utterance], link: Link, bilstm: BiLstmScorer | None, steps: int = 3
) -> dict:
    """The issue's three targets from the paper, checked on these recordings:
    1. at the same overall WER, each offramp offloads ≤ 0.5 × NaiveHybrid's share (WER targets
       at 1/4, 2/4, 3/4 of the way from the device's WER to the cloud's);
    2. within 1 % absolute WER of AllOffload while offloading ≤ 50 %, at a lower mean latency
       than AllOffload (on the `wifi` link);
    3. Ours-OnDevice's mean latency ≤ 0.5 × OnDevice (ESPnet)'s at equal WER (± 0.5 %)."""
    none, every = np.zeros(len(utterances), bool), np.ones(len(utterances), bool)
    device = _point("Ours-OnDevice", utterances, none, link, False)
    cloud = _point("AllOffload", utterances, every, link, False)
    scorers = {"Ours-PPL": perplexity} | ({"Ours-LSTM": bilstm} if bilstm is not None else {})
    scores = {name: _scores(utterances, scorer, False) for name, scorer in scorers.items()}

    same_wer = []
    for step in range(1, steps + 1):
        target = device.wer + (cloud.wer - device.wer) * step / (steps + 1)
        naive = naive_share(device.wer, cloud.wer, target)
        row = {"target_wer": target, "NaiveHybrid": naive}
        for name in scorers:
            share = least_share(utterances, scores[name], target)
            row[name] = share
            row[f"{name} / NaiveHybrid"] = share / naive if share is not None and naive else None
        same_wer.append(row)
    near_cloud: dict = {
        "target_wer": cloud.wer + 0.01,
        "alloffload_latency_mean_ms": cloud.latency_mean_ms,
        "link": link.name,
    }
    for name in scorers:
        share = least_share(utterances, scores[name], cloud.wer + 0.01)
        point = None
        if share is not None:
            offloaded, _ = most_doubtful(scores[name], share)
            point = _point(name, utterances, offloaded, link, False, offramp=True)
        near_cloud[name] = point.__dict__ if point else None

    def beats_naive(name: str) -> bool:
        ratios = [row[f"{name} / NaiveHybrid"] for row in same_wer]
        return all(r is not None and r <= 0.5 for r in ratios)

    def near_and_fast(name: str) -> bool:
        point = near_cloud[name]
        return (
            point is not None
            and point["offload_ratio"] <= 0.5
            and point["latency_mean_ms"] < cloud.latency_mean_ms
        )

    checks = {
        "offload_vs_naive": {"rows": same_wer, "met": {n: beats_naive(n) for n in scorers}},
        "near_alloffload": near_cloud | {"met": {n: near_and_fast(n) for n in scorers}},
    }
    if all(u.espnet_ms is not None for u in utterances):
        espnet_ms = float(np.mean([u.espnet_ms for u in utterances]))
        words = max(sum(u.words for u in utterances), 1)
        espnet_wer = sum(u.espnet_errors for u in utterances) / words
        checks["ondevice_latency"] = {
            "latency_ratio": device.latency_mean_ms / espnet_ms,
            "wer_difference": device.wer - espnet_wer,
            "met": device.latency_mean_ms <= 0.5 * espnet_ms
            and abs(device.wer - espnet_wer) <= 0.005,
        }
    return checks


def target_counts(utterances: list[Utterance]) -> dict:
    """Recordings where the cloud beats the device (targets) and where it does not."""
    targets = sum(u.cloud_errors < u.device_errors for u in utterances)
    return {"targets": targets, "non_targets": len(utterances) - targets}


def shipped_thresholds(model_dir: Path) -> dict[str, float]:
    """The offramp thresholds a model directory ships (offramp.json), keyed `ppl`/`lstm`."""
    return load_config(model_dir).get("thresholds") or {}


def _device_answer(u: Utterance) -> tuple[str, str]:
    return u.device_text, u.device_intent


def _cloud_answer(u: Utterance) -> tuple[str, str]:
    return u.cloud_text, u.cloud_intent


def write_system_predictions(
    out_dir: Path, utterances: list[Utterance], model_dir: Path | None = None
) -> list[str]:
    """SLURP-format predictions of the fixed systems, for the official scorer; with `model_dir`,
    also of its offramps at their shipped thresholds (an offloaded recording gets the cloud's
    answer)."""

    chosen = {
        "ours-ondevice": [_device_answer(u) for u in utterances],
        "alloffload": [_cloud_answer(u) for u in utterances],
    }
    if all(u.espnet_text is not None for u in utterances):
        chosen["ondevice-espnet"] = [(u.espnet_text, u.espnet_intent) for u in utterances]
    if model_dir is not None:
        bilstm_path = model_dir / OFFRAMP_BILSTM_FILE
        scorers = {"ppl": perplexity}
        if bilstm_path.is_file():
            scorers["lstm"] = BiLstmScorer.load(bilstm_path)
        for name, threshold in shipped_thresholds(model_dir).items():
            if name in scorers:
                offloaded = _scores(utterances, scorers[name], False) > threshold
                chosen[f"ours-{name}-shipped"] = [
                    _cloud_answer(u) if o else _device_answer(u)
                    for u, o in zip(utterances, offloaded, strict=True)
                ]
    written = []
    for name, answers in chosen.items():
        path = out_dir / f"predictions-{name}.jsonl"
        write_predictions(
            path,
            (Prediction(u.id, *answer) for u, answer in zip(utterances, answers, strict=True)),
        )
        written.append(str(path))
    return written


def _condition_wers(utterances: list[Utterance], errors_of) -> dict[str, float | None]:
    def wer(keep) -> float | None:
        chosen = [u for u in utterances if keep(u)]
        if not chosen:
            return None
        return sum(errors_of(u) for u in chosen) / max(sum(u.words for u in chosen), 1)

    return {
        "wer": wer(lambda u: True),
        "wer_close": wer(lambda u: u.condition == "close"),
        "wer_far": wer(lambda u: u.condition == "far"),
    }


def wers_by_voice(utterances: list[Utterance], errors_of) -> dict[str, float]:
    """WER per (voice, condition): which speakers the device model fails on."""
    errors: dict[str, list[int]] = {}
    for u in utterances:
        if u.voice is None:
            continue
        counts = errors.setdefault(f"{u.voice}/{u.condition}", [0, 0])
        counts[0] += errors_of(u)
        counts[1] += u.words
    return {key: e / max(words, 1) for key, (e, words) in sorted(errors.items())}


def build_report(
    utterances: list[Utterance],
    link: Link,
    bilstm: BiLstmScorer | None,
    meta: dict,
    thresholds: dict[str, float] | None = None,
    pilot_variants: dict[str, list[Utterance]] | None = None,
) -> dict:
    """`pilot_variants`: the same recordings decoded under other pilot settings (Table 5)."""
    result = evaluate(utterances, link, bilstm, thresholds=thresholds)
    by_condition = {
        "Ours-OnDevice": _condition_wers(utterances, lambda u: u.device_errors),
        "AllOffload": _condition_wers(utterances, lambda u: u.cloud_errors),
    }
    if utterances and utterances[0].espnet_errors is not None:
        by_condition["OnDevice (ESPnet)"] = _condition_wers(utterances, lambda u: u.espnet_errors)
    by_voice = {
        name: wers_by_voice(utterances, errors_of)
        for name, errors_of in (
            ("OnDevice (ESPnet)", lambda u: u.espnet_errors),
            ("Ours-OnDevice", lambda u: u.device_errors),
            ("AllOffload", lambda u: u.cloud_errors),
        )
        if name in by_condition
    }
    targets = wer_targets(result)
    table6 = []
    for target in targets:
        row = {"target_wer": target}
        for name, points in result["sweeps"].items():
            point = cheapest_meeting(points, target)
            row[name] = point.__dict__ if point else None
        table6.append(row)
    scorer = bilstm if bilstm is not None else perplexity
    policy = "Ours-LSTM" if bilstm is not None else "Ours-PPL"
    table5_targets = targets[1:3] if len(targets) >= 3 else targets
    table5 = [
        pilot_variant_row(name, variant, link, scorer, table5_targets)
        for name, variant in (pilot_variants or {}).items()
    ]
    return {
        "benchmark": "slurp-eval",
        "utterances": len(utterances),
        "link": link.__dict__ | {"uplink_mbps": str(link.uplink_mbps)},
        "fixed": [p.__dict__ for p in result["fixed"]],
        "by_condition": by_condition,
        "by_voice": by_voice,
        "sweeps": {k: [p.__dict__ for p in v] for k, v in result["sweeps"].items()},
        "table6": table6,
        "table5": {"policy": policy, "rows": table5},
        "target_counts": target_counts(utterances),
        "paper_targets": paper_targets(utterances, link, bilstm),
        **meta,
    }


def format_report(report: dict) -> str:
    link = report["link"]
    lines = [
        f"SLURP evaluation on {report['utterances']} recordings; link `{link['name']}` "
        f"(RTT {link['rtt_ms']:g} ms, uplink {link['uplink_mbps']} Mbps)",
        "",
        "| system | WER | WER close | WER far | intent acc | offload | mean ms | p90 ms | RTF |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for point in report["fixed"]:
        wers = report["by_condition"].get(point["system"], {})
        lines.append(
            f"| {point['system']} | {pct(point['wer'])} | {pct(wers.get('wer_close'))} | "
            f"{pct(wers.get('wer_far'))} | {pct(point['intent_accuracy'])} | "
            f"{100 * point['offload_ratio']:.0f} % | {point['latency_mean_ms']:.0f} | "
            f"{point['latency_p90_ms']:.0f} | {point['rtf']:.3f} |"
        )
    policies = list(report["sweeps"])
    lines += [
        "",
        "Least offloading that reaches each overall WER target (Table 6 style): "
        "offload % / mean ms / p90 ms",
        "",
        "| target WER | " + " | ".join(policies) + " |",
        "| --- | " + " | ".join("---" for _ in policies) + " |",
    ]
    for row in report["table6"]:
        cells = []
        for name in policies:
            point = row[name]
            cells.append(
                "not reached"
                if point is None
                else f"{100 * point['offload_ratio']:.0f} % / {point['latency_mean_ms']:.0f} / "
                f"{point['latency_p90_ms']:.0f}"
            )
        lines.append(f"| {pct(row['target_wer'])} | " + " | ".join(cells) + " |")
    lines += _format_by_voice(report.get("by_voice"))
    lines += _format_table5(report.get("table5"))
    lines += _format_paper_targets(report.get("paper_targets"))
    counts = report["target_counts"]
    lines += [
        "",
        f"Targets (the cloud makes fewer word errors than the device): {counts['targets']}; "
        f"non-targets: {counts['non_targets']}.",
    ]
    return "\n".join(lines)


def _format_by_voice(by_voice: dict | None) -> list[str]:
    if not by_voice or not any(by_voice.values()):
        return []
    systems = list(by_voice)
    lines = [
        "",
        "WER by voice and condition (every voice is held out from training)",
        "",
        "| voice | " + " | ".join(systems) + " |",
        "| --- |" + " --- |" * len(systems),
    ]
    for key in by_voice[systems[0]]:
        lines.append(f"| {key} | " + " | ".join(pct(by_voice[s].get(key)) for s in systems) + " |")
    return lines


def _yes(met: bool) -> str:
    return "**met**" if met else "missed"


def _format_paper_targets(checks: dict | None) -> list[str]:
    """The paper's targets, each with what was measured and whether it is met."""
    if not checks:
        return []
    lines = [
        "",
        "The paper's targets, checked",
        "",
        "| target | measured | |",
        "| --- | --- | --- |",
    ]
    naive, near = checks["offload_vs_naive"], checks["near_alloffload"]
    for name in naive["met"]:
        cells = [
            f"WER {pct(row['target_wer'])}: {_share(row[name])} vs {_share(row['NaiveHybrid'])}"
            + (f" ({row[f'{name} / NaiveHybrid']:.2f} ×)" if row[f"{name} / NaiveHybrid"] else "")
            for row in naive["rows"]
        ]
        lines.append(
            f"| {name} offloads ≤ 0.5 × NaiveHybrid's share at the same WER | "
            + "; ".join(cells)
            + f" | {_yes(naive['met'][name])} |"
        )
    for name in near["met"]:
        point = near[name]
        measured = (
            "not reached"
            if point is None
            else f"{_share(point['offload_ratio'])} offloaded, {point['latency_mean_ms']:.0f} ms"
        )
        lines.append(
            f"| {name} within 1 % of AllOffload (WER ≤ {pct(near['target_wer'])}) offloading "
            f"≤ 50 %, faster than AllOffload ({near['alloffload_latency_mean_ms']:.0f} ms, "
            f"`{near['link']}` link) | {measured} | {_yes(near['met'][name])} |"
        )
    local = checks.get("ondevice_latency")
    if local:
        lines.append(
            "| Ours-OnDevice mean latency ≤ 0.5 × OnDevice (ESPnet) at equal WER (± 0.5 %) | "
            f"{local['latency_ratio']:.2f} ×, WER {100 * local['wer_difference']:+.2f} % | "
            f"{_yes(local['met'])} |"
        )
    return lines


def _share(value: float | None) -> str:
    return "not reached" if value is None else f"{100 * value:.1f} %"


def _format_table5(table5: dict | None) -> list[str]:
    """Pilot settings side by side (PASU Table 5): device only, and offloading to WER targets."""
    if not table5 or not table5["rows"]:
        return []
    targets = [entry["target_wer"] for entry in table5["rows"][0]["offload"]]
    lines = [
        "",
        f"Pilot settings (Table 5 style), offramp {table5['policy']}: device only, and the least "
        "offloading that reaches each overall WER target (offload % / RTF / mean ms / "
        "offloaded targets / non-targets)",
        "",
        "| pilots | device WER | device RTF | device mean ms | "
        + " | ".join(f"WER ≤ {pct(t)}" for t in targets)
        + " |",
        "| --- | --- | --- | --- | " + " | ".join("---" for _ in targets) + " |",
    ]
    for row in table5["rows"]:
        local = row["ondevice"]
        cells = []
        for entry in row["offload"]:
            point = entry["point"]
            cells.append(
                "not reached"
                if point is None
                else f"{100 * point['offload_ratio']:.0f} % / {point['rtf']:.3f} / "
                f"{point['latency_mean_ms']:.0f} / {entry['targets']} / {entry['non_targets']}"
            )
        name = row["variant"] + (
            " (offramp after full decode)" if row["offramp_after_full_decode"] else ""
        )
        lines.append(
            f"| {name} | {pct(local['wer'])} | {local['rtf']:.3f} | "
            f"{local['latency_mean_ms']:.0f} | " + " | ".join(cells) + " |"
        )
    return lines


def _plot(report: dict, x, y, labels: tuple[str, str, str], path: Path) -> str:
    """One figure: a line per swept policy, a marker per fixed system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4.5))
    for name, points in report["sweeps"].items():
        axis.plot(
            [x(p) for p in points],
            [y(p) for p in points],
            marker=".",
            label=name,
            linestyle="--" if name == "NaiveHybrid" else "-",
        )
    # Random offloading's expectation is linear in α in both WER and latency, so the paper's
    # NaiveHybrid line is the segment between never and always offloading.
    fixed = {point["system"]: point for point in report["fixed"]}
    ends = [fixed["Ours-OnDevice"], fixed["AllOffload"]]
    axis.plot(
        [x(p) for p in ends],
        [y(p) for p in ends],
        color="grey",
        linestyle=":",
        label="NaiveHybrid, expected (paper's line)",
    )
    for point in report["fixed"]:
        axis.scatter(x(point), y(point), s=60, zorder=3, label=point["system"])
    axis.set(xlabel=labels[0], ylabel=labels[1], title=labels[2])
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return str(path)


def write_plots(report: dict, out_dir: Path) -> list[str]:
    """WER vs offload ratio, and latency vs WER (PASU Figure 4), as PNG."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return [
        _plot(
            report,
            lambda p: 100 * p["offload_ratio"],
            lambda p: 100 * p["wer"],
            ("offloaded recordings (%)", "overall WER (%)", "WER vs offload ratio"),
            out_dir / "wer-vs-offload.png",
        ),
        _plot(
            report,
            lambda p: 100 * p["wer"],
            lambda p: p["latency_mean_ms"],
            (
                "overall WER (%)",
                "mean latency after end of speech (ms)",
                f"latency vs WER ({report['link']['name']} link)",
            ),
            out_dir / "latency-vs-wer.png",
        ),
    ]


def run(
    model_dir: Path,
    data_dir: Path,
    split: str = "test",
    limit: int | None = None,
    checkpoint: Path | None = None,
    link: str = "wifi",
    cloud_model: str = "whisper-base",
    cloud_intent: str = "minilm",
    pilot_intervals: tuple[float, ...] = (2.0, 1.0),
) -> tuple[dict, list[Utterance]]:
    """Run (or load from the cache) every system on the split and build the report; the device
    also runs without pilots and at each of `pilot_intervals` (beside the default 0.5 s), for
    the Table-5 rows."""
    import datetime

    from pasu.api import Understander
    from pasu.cloud.understanding import load_intent_model
    from pasu.eval.corpus_runs import baseline_runs, cloud_runs, device_runs, fingerprint
    from pasu.eval.reports import machine, software_versions

    if link not in LINKS:
        raise ConfigError(f"unknown link {link!r}; expected one of {sorted(LINKS)}")
    device = device_runs(model_dir, data_dir, split, limit)
    cloud = cloud_runs(data_dir, split, limit, cloud_model)
    espnet = baseline_runs(checkpoint, model_dir, data_dir, split, limit) if checkpoint else None
    device_classifier = Understander._intent_model(model_dir, None)
    cloud_classifier = load_intent_model(cloud_intent)

    def intents(classifier, texts: list[str]) -> list[str]:
        predictions = classifier.predict([t or "-" for t in texts])
        return [p.intent if t else "" for p, t in zip(predictions, texts, strict=True)]

    cloud_intents = intents(cloud_classifier, [r["cloud_text"] for r in cloud])
    utterances = merge_runs(
        device,
        cloud,
        intents(device_classifier, [r["device_text"] for r in device]),
        cloud_intents,
        espnet,
        intents(device_classifier, [r["espnet_text"] for r in espnet]) if espnet else None,
    )
    default = EngineConfig()
    settings = {
        "none": replace(default, pilots=False),
        **{f"tau={t:g}s": replace(default, pilot_interval_s=t) for t in pilot_intervals},
        f"tau={default.pilot_interval_s:g}s (default)": default,
    }
    pilot_variants = {}
    for name, config in settings.items():
        if config == default:
            pilot_variants[name] = utterances
            continue
        rows = device_runs(model_dir, data_dir, split, limit, config)
        texts = [r["device_text"] for r in rows]
        pilot_variants[name] = merge_runs(
            rows, cloud, intents(device_classifier, texts), cloud_intents
        )
    bilstm_path = model_dir / OFFRAMP_BILSTM_FILE
    bilstm = BiLstmScorer.load(bilstm_path) if bilstm_path.is_file() else None
    meta = {
        "split": split,
        "limit": limit,
        "data_dir": str(data_dir),
        "model_dir": str(model_dir),
        "model_version": {"name": model_dir.resolve().name}
        | json.loads((model_dir / CONFIG_FILE).read_text()).get("training", {}),
        "checkpoint": str(checkpoint) if checkpoint else None,
        "cloud_model": cloud_model,
        "cloud_intent": cloud_intent,
        "model_fingerprint": fingerprint(model_dir),
        # The decoding fingerprint keys the run caches; the offramp files change the report only.
        "offramp_fingerprint": fingerprint(
            *(
                (name, (model_dir / name).read_bytes())
                for name in (OFFRAMP_CONFIG_FILE, OFFRAMP_BILSTM_FILE)
                if (model_dir / name).is_file()
            )
        ),
        "versions": software_versions(),
        "machine": machine(),
        "date": datetime.date.today().isoformat(),
    }
    thresholds = shipped_thresholds(model_dir)
    report = build_report(utterances, LINKS[link], bilstm, meta, thresholds, pilot_variants)
    return report, utterances
