"""Benchmark: our device decoder (onnxruntime + numpy) against ESPnet's BatchBeamSearch (torch).

Both decode the same utterances after ingestion with the same weights (the torch model's
weights rounded to float16, as the shipped graphs store them), beam 5, CTC weight 0.3, no PASU
optimisation. Reports how often the best hypotheses agree, each system's WER and intent
accuracy, and decode times (encoder + search, after the end of speech) side by side.
"""

import logging
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from pasu.core.audio import load_audio
from pasu.core.metrics import intent_accuracy, latency_percentiles, wer_by_condition
from pasu.core.slurp import fixed_subset, load_recordings
from pasu.device.encoder import StreamingEncoder
from pasu.device.model import DeviceModel
from pasu.eval.reports import pct, save_report
from pasu.models.baseline import EspnetBaseline
from pasu.models.checkpoints import load_checkpoint_model
from pasu.models.export import round_weights_to_float16
from pasu.speech.decoding import BeamSearch
from pasu.speech.frontend import compute_fbank
from pasu.speech.intent import load_intent_model


def run(
    model_dir: Path,
    checkpoint: Path,
    data_dir: Path,
    split: str = "test",
    limit: int = 300,
    intent_path: Path | None = None,
    threads: int = 1,
) -> dict:
    logging.disable(logging.WARNING)  # ESPnet logs every search at INFO
    torch.set_num_threads(threads)
    device = DeviceModel(model_dir, threads=threads)
    ours = BeamSearch(device.decoder_step, device.sos_eos_id)
    torch_model = load_checkpoint_model(checkpoint)
    round_weights_to_float16(torch_model)
    baseline = EspnetBaseline(torch_model)
    recordings = fixed_subset(load_recordings(data_dir, split), limit)
    rows = []
    for recording in tqdm(recordings, desc="decoders", unit="utt"):
        features = compute_fbank(load_audio(recording.audio_path), device.cmvn)

        started = time.perf_counter()
        reference = baseline.decode(features)
        baseline_s = time.perf_counter() - started

        started = time.perf_counter()
        encoder = StreamingEncoder(device)
        encoder.accept(features)
        encoded, ctc_log_probs = encoder.contextualize()
        result = ours.decode(device.decoder_memory(encoded), ctc_log_probs)
        ours_s = time.perf_counter() - started

        rows.append(
            {
                "id": recording.id,
                "condition": recording.condition,
                "reference": recording.text,
                "gold_intent": recording.intent,
                "espnet_text": device.tokenizer.decode(reference.token_ids),
                "ours_text": device.tokenizer.decode(result.token_ids),
                "same_hypothesis": reference.token_ids == result.token_ids,
                "espnet_ms": 1000 * baseline_s,
                "ours_ms": 1000 * ours_s,
                "ours_decoder_calls": result.num_decoder_calls,
            }
        )
    return summarise(rows, intent_path, model_dir, checkpoint, split, threads)


def summarise(
    rows: list[dict],
    intent_path: Path | None,
    model_dir: Path,
    checkpoint: Path,
    split: str,
    threads: int,
) -> dict:
    systems = {}
    classifier = load_intent_model(intent_path) if intent_path else None
    for system in ("espnet", "ours"):
        texts = [r[f"{system}_text"] for r in rows]
        entry = {
            **wer_by_condition(
                [r["reference"] for r in rows], texts, [r["condition"] == "close" for r in rows]
            ),
            "decode_ms": latency_percentiles([r[f"{system}_ms"] for r in rows]),
        }
        if classifier is not None:
            entry["intent_accuracy"] = intent_accuracy(
                [r["gold_intent"] for r in rows], [p.intent for p in classifier.predict(texts)]
            )
        systems[system] = entry
    return {
        "benchmark": "decoders",
        "utterances": len(rows),
        "split": split,
        "same_best_hypothesis": float(np.mean([r["same_hypothesis"] for r in rows])),
        "speedup_p50": systems["espnet"]["decode_ms"]["p50"] / systems["ours"]["decode_ms"]["p50"],
        "systems": systems,
        "model_dir": str(model_dir),
        "checkpoint": str(checkpoint),
        "threads": threads,
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}, {os.cpu_count()} cores",
        "rows": rows,
    }


def format_table(report: dict) -> str:
    lines = [
        f"decoders on {report['utterances']} {report['split']} utterances "
        f"({report['threads']} thread(s)); same best hypothesis: "
        f"{100 * report['same_best_hypothesis']:.1f} %",
        "| system | WER | WER close | WER far | intent acc | decode p50 ms | p90 ms | mean ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    names = {"espnet": "ESPnet BatchBeamSearch (torch)", "ours": "ours (onnxruntime + numpy)"}
    for key, name in names.items():
        s = report["systems"][key]
        intent = f"{100 * s['intent_accuracy']:.1f} %" if "intent_accuracy" in s else "-"
        lines.append(
            f"| {name} | {pct(s['wer'])} | {pct(s['wer_close'])} | {pct(s['wer_far'])} | "
            f"{intent} | {s['decode_ms']['p50']:.1f} | "
            f"{s['decode_ms']['p90']:.1f} | {s['decode_ms']['mean']:.1f} |"
        )
    lines.append(f"speed-up of ours at p50: {report['speedup_p50']:.2f}×")
    return "\n".join(lines)


def write_report(report: dict, json_path: Path | None) -> str:
    return save_report(report, format_table(report), json_path)
