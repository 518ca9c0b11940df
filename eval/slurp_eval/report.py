"""The SLURP evaluation's report: predictions in SLURP's format, WER by condition
and voice, the report dictionary and its Markdown."""

from pathlib import Path

from pasu.core.modeldir import OFFRAMP_BILSTM_FILE
from pasu.eval.predictions import Prediction, write_predictions
from pasu.eval.reports import pct
from pasu.eval.slurp_eval.systems import (
    Link,
    Utterance,
    evaluate,
    offramp_scores,
    shipped_thresholds,
)
from pasu.eval.slurp_eval.targets import (
    cheapest_meeting,
    paper_targets,
    pilot_variant_row,
    target_counts,
    wer_targets,
)
from pasu.offramp.scores import BiLstmScorer, perplexity


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
                offloaded = offramp_scores(utterances, scorers[name], False) > threshold
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
