"""Benchmark of the device path (PASU Figure 5 and Table 5): accuracy, latency, cost, memory.

Systems, all on the same recordings with the same weights:
- `espnet`: the OnDevice baseline, ESPnet's BatchBeamSearch in torch after ingestion (the whole
  encoder runs after the end of speech; features are computed while speaking);
- `ours-no-pilot`: our runtime, convolution blocks while speaking, no pilots, and the same search
  as ESPnet's (end detection): what the PASU optimisations are measured against;
- `ours-no-pilot+score-bound`: the same with the search's exact stopping rule (stop once no
  running hypothesis can overtake the best finished one), which needs no pilot;
- one row per PASU optimisation alone (pilots every 0.5 s + that optimisation), all together
  (with the score bound), and all together at pilot intervals τ = 2, 1 and 0.5 s.

Latency is end of speech → result, from the virtual-clock replay (`device.latency`), one
compute thread per stage. Each system runs in a fresh process, so its peak RSS is its own.
"""

import platform
import resource
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from multiprocessing import get_context
from pathlib import Path

import numpy as np
from tqdm import tqdm

from pasu.core.metrics import intent_accuracy, latency_percentiles, wer_by_condition
from pasu.core.slurp import fixed_subset, load_recordings
from pasu.device.engine import PLAIN, EngineConfig
from pasu.eval.reports import pct, save_report

_OFF = replace(PLAIN, pilots=True)  # pilots that nothing uses yet
SYSTEMS: dict[str, EngineConfig | None] = {
    "espnet": None,
    "ours-no-pilot": replace(_OFF, pilots=False),
    "ours-no-pilot+score-bound": replace(_OFF, pilots=False).with_decoding(score_bound=True),
    "pilots+early-termination": _OFF.with_decoding(early_termination=True),
    "pilots+beam-collapse": _OFF.with_decoding(beam_collapse=True),
    "pilots+ctc-leap": _OFF.with_decoding(ctc_leap=True),
    "all, tau=2s": EngineConfig(pilot_interval_s=2.0),
    "all, tau=1s": EngineConfig(pilot_interval_s=1.0),
    "all, tau=0.5s": EngineConfig(pilot_interval_s=0.5),
}


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _run_espnet(checkpoint: Path, model_dir: Path, items: list[dict]) -> list[dict]:
    from pasu.eval.corpus_runs import EspnetDecoder

    decode = EspnetDecoder(checkpoint, model_dir)
    rows = []
    for item in tqdm(items, desc="espnet", unit="utt"):
        text, after_s, audio_s = decode(Path(item["path"]))
        rows.append(
            {
                "text": text,
                "latency_ms": 1000 * after_s,
                "compute_ms": 1000 * after_s,
                "audio_s": audio_s,
                "nfe": None,
                "pilot_nfe": 0,
                "pilots_run": 0,
                "pilots_skipped": 0,
            }
        )
    return rows


def _run_ours(config: EngineConfig, model_dir: Path, items: list[dict], name: str) -> list[dict]:
    from pasu.core.audio import load_audio
    from pasu.device.engine import Engine
    from pasu.device.latency import replay_virtual

    engine = Engine(model_dir, config)
    rows = []
    for item in tqdm(items, desc=name, unit="utt"):
        samples = load_audio(item["path"])
        result, latency = replay_virtual(engine, samples)
        pilot = result.last_pilot
        rows.append(
            {
                "text": result.text,
                "latency_ms": latency.total_ms,
                "compute_ms": latency.device_compute_ms,
                "audio_s": result.audio_s,
                "nfe": result.decode.num_hypothesis_evaluations if result.decode else 0,
                "pilot_nfe": pilot.result.num_hypothesis_evaluations if pilot else 0,
                "pilots_run": latency.pilots_run,
                "pilots_skipped": latency.pilots_skipped,
            }
        )
    engine.close()
    return rows


def _run_system(name: str, model_dir: str, checkpoint: str | None, items: list[dict]) -> dict:
    """Runs in a fresh process."""
    config = SYSTEMS[name]
    if config is None:
        if checkpoint is None:
            raise ValueError("the espnet system needs the torch checkpoint")
        rows = _run_espnet(Path(checkpoint), Path(model_dir), items)
    else:
        rows = _run_ours(config, Path(model_dir), items, name)
    return {"rows": rows, "peak_rss_mb": _peak_rss_mb()}


def summarise(
    name: str, items: list[dict], outcome: dict, intents: list[str | None] | None
) -> dict:
    rows = outcome["rows"]
    refs = [i["text"] for i in items]
    hyps = [r["text"] for r in rows]
    latencies = latency_percentiles([r["latency_ms"] for r in rows])
    summary = {
        "system": name,
        **wer_by_condition(refs, hyps, [i["close_talk"] for i in items]),
        "latency_ms": latencies,
        "rtf": float(
            np.sum([r["compute_ms"] for r in rows]) / 1000 / np.sum([r["audio_s"] for r in rows])
        ),
        "mean_nfe": float(np.mean([r["nfe"] for r in rows]))
        if rows[0]["nfe"] is not None
        else None,
        "mean_pilot_nfe": float(np.mean([r["pilot_nfe"] for r in rows])),
        "pilots_skipped_share": _share(
            [r["pilots_skipped"] for r in rows], [r["pilots_run"] for r in rows]
        ),
        "peak_rss_mb": outcome["peak_rss_mb"],
    }
    if intents is not None:
        summary["intent_accuracy"] = intent_accuracy([i["intent"] for i in items], intents)
    return summary


def _share(skipped: list[int], run: list[int]) -> float:
    total = sum(skipped) + sum(run)
    return sum(skipped) / total if total else 0.0


def run(
    model_dir: Path,
    checkpoint: Path | None,
    data_dir: Path,
    split: str = "test",
    limit: int = 500,
    systems: list[str] | None = None,
    intent_path: Path | None = None,
) -> dict:
    recordings = fixed_subset(load_recordings(data_dir, split), limit)
    items = [
        {
            "path": str(r.audio_path),
            "text": r.text,
            "close_talk": r.close_talk,
            "intent": r.intent,
            "id": r.id,
        }
        for r in recordings
    ]
    names = systems or [n for n in SYSTEMS if n != "espnet" or checkpoint is not None]
    classifier = None
    if intent_path is not None:
        from pasu.speech.intent import load_intent_model

        classifier = load_intent_model(intent_path)
    results = []
    for name in names:
        with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
            outcome = pool.submit(
                _run_system, name, str(model_dir), str(checkpoint) if checkpoint else None, items
            ).result()
        intents = (
            [p.intent for p in classifier.predict([r["text"] for r in outcome["rows"]])]
            if classifier
            else None
        )
        results.append(summarise(name, items, outcome, intents))
    return {
        "benchmark": "device",
        "split": split,
        "utterances": len(items),
        "model_dir": str(model_dir),
        "machine": f"{platform.machine()}, {platform.processor()}",
        "systems": results,
    }


def format_table(report: dict) -> str:
    systems = {s["system"]: s for s in report["systems"]}
    base = systems.get("espnet")
    ours = systems.get("ours-no-pilot")
    lines = [
        f"device benchmark on {report['utterances']} {report['split']} utterances "
        "(virtual-clock latency, 1 thread per stage)",
        "| system | WER | WER close | WER far | intent | p50 ms | p90 ms | p50 vs ESPnet "
        "| p50 vs no-pilot | RTF | NFE | pilot NFE | skipped | peak RSS MB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]

    for s in report["systems"]:
        p50 = s["latency_ms"]["p50"]
        vs_base = f"{p50 / base['latency_ms']['p50']:.2f}×" if base else "-"
        vs_ours = f"{p50 / ours['latency_ms']['p50']:.2f}×" if ours else "-"
        nfe = "-" if s["mean_nfe"] is None else f"{s['mean_nfe']:.1f}"
        lines.append(
            f"| {s['system']} | {pct(s['wer'])} | {pct(s['wer_close'])} | {pct(s['wer_far'])} | "
            f"{pct(s.get('intent_accuracy'))} | {p50:.0f} | {s['latency_ms']['p90']:.0f} | "
            f"{vs_base} | {vs_ours} | {s['rtf']:.3f} | {nfe} | {s['mean_pilot_nfe']:.1f} | "
            f"{100 * s['pilots_skipped_share']:.0f} % | {s['peak_rss_mb']:.0f} |"
        )
    return "\n".join(lines)


def write_report(report: dict, json_path: Path | None, command: str) -> str:
    return save_report(report, format_table(report), json_path, command)
