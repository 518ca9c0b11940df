"""Benchmark: Whisper on a short encoder window (with hallucination guards and padded fallback)
against faster-whisper's standard 30 s padded run, on the same SLURP-TTS utterances.

Reports WER (all, close-talk, far-field), time per utterance, the speed-up and how often the
short window fell back. The short window is kept as the default only if its WER stays within
0.5 points of the padded run's.
"""

import os
import platform
import time
from collections import Counter
from pathlib import Path

import numpy as np
from tqdm import tqdm

from pasu.cloud.asr import WhisperOptions, WhisperRecognizer
from pasu.core.audio import load_audio
from pasu.core.metrics import latency_percentiles, wer_by_condition
from pasu.core.slurp import fixed_subset, load_recordings
from pasu.eval.reports import pct, save_report
from pasu.speech.whisper_checkpoints import resolve_checkpoint

WER_TOLERANCE = 0.005


def run(
    data_dir: Path,
    model: str = "whisper-base",
    split: str = "test",
    limit: int = 300,
    threads: int = 2,
    window_bucket_s: float | None = None,
) -> dict:
    options = WhisperOptions(cpu_threads=threads, short_window=True)
    if window_bucket_s is not None:
        options.window_bucket_s = window_bucket_s
    recognizer = WhisperRecognizer(resolve_checkpoint(model), options)
    recordings = fixed_subset(load_recordings(data_dir, split), limit)
    rows = []
    for recording in tqdm(recordings, desc="whisper windows", unit="utt"):
        audio = load_audio(recording.audio_path)
        started = time.perf_counter()
        padded = recognizer.transcribe_padded(audio)
        padded_ms = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        short = recognizer.transcribe(audio)
        short_ms = (time.perf_counter() - started) * 1000
        rows.append(
            {
                "id": recording.id,
                "condition": recording.condition,
                "duration_s": round(audio.size / 16_000, 3),
                "reference": recording.text,
                "padded_text": padded.text,
                "padded_ms": round(padded_ms, 1),
                "short_text": short.text,
                "short_ms": round(short_ms, 1),
                "short_window_s": short.window_s,
                "guard": short.guard,
            }
        )
    return summarise(rows, model, split, threads) | {"window_bucket_s": options.window_bucket_s}


def summarise(rows: list[dict], model: str, split: str, threads: int) -> dict:
    close = [r["condition"] == "close" for r in rows]
    references = [r["reference"] for r in rows]
    systems = {
        name: {
            **wer_by_condition(references, [r[f"{name}_text"] for r in rows], close),
            "ms": latency_percentiles([r[f"{name}_ms"] for r in rows]),
        }
        for name in ("padded", "short")
    }
    wer_change = systems["short"]["wer"] - systems["padded"]["wer"]
    return {
        "benchmark": "whisper-window",
        "model": model,
        "split": split,
        "utterances": len(rows),
        "mean_duration_s": float(np.mean([r["duration_s"] for r in rows])),
        "systems": systems,
        "speedup_mean": systems["padded"]["ms"]["mean"] / systems["short"]["ms"]["mean"],
        "wer_change": wer_change,
        "keep_short_window": wer_change <= WER_TOLERANCE,
        "fallbacks": dict(Counter(r["guard"] for r in rows if r["guard"])),
        "fallback_rate": float(np.mean([bool(r["guard"]) for r in rows])),
        "threads": threads,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "rows": rows,
    }


def format_table(report: dict) -> str:
    lines = [
        f"{report['model']} on {report['utterances']} {report['split']} utterances "
        f"(mean {report['mean_duration_s']:.2f} s, {report['threads']} threads); short windows "
        f"in {report.get('window_bucket_s', 2.0):g} s steps",
        "| window | WER | WER close | WER far | mean ms | p50 ms | p90 ms |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    names = {"padded": "30 s padded (faster-whisper)", "short": "short + guards + fallback"}
    for key, name in names.items():
        s = report["systems"][key]
        lines.append(
            f"| {name} | {pct(s['wer'])} | {pct(s['wer_close'])} | {pct(s['wer_far'])} | "
            f"{s['ms']['mean']:.0f} | {s['ms']['p50']:.0f} | {s['ms']['p90']:.0f} |"
        )
    lines.append(
        f"speed-up (mean): {report['speedup_mean']:.2f}×; WER change "
        f"{100 * report['wer_change']:+.2f} points; fell back on "
        f"{100 * report['fallback_rate']:.1f} % ({report['fallbacks']}); "
        f"keep short window: {report['keep_short_window']}"
    )
    return "\n".join(lines)


def write_report(report: dict, json_path: Path | None) -> str:
    return save_report(report, format_table(report), json_path)
