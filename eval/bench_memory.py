"""Benchmark of the device runtime's memory: peak RSS while decoding (issue #3's ≤ 150 MB).

Each configuration runs in a fresh process (spawned, so nothing of this one is inherited) and
reports its peak RSS after the imports, after loading the model, and after decoding the
recordings with the streaming engine (all PASU optimisations on); `with intent` also loads the
device's scikit-learn intent classifier and classifies each transcript, as `understand()` does.
"""

import resource
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from pasu.core.slurp import fixed_subset, load_recordings
from pasu.eval.reports import save_report


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _measure(model_dir: Path, audio_paths: list[Path], intent_path: Path | None) -> dict:
    from pasu.device.engine import Engine, EngineConfig

    after_import = _peak_mb()
    engine = Engine(model_dir, EngineConfig())
    classifier = None
    if intent_path is not None:
        from pasu.speech.intent import load_intent_model

        classifier = load_intent_model(intent_path)
    after_load = _peak_mb()
    for path in audio_paths:
        text = engine.transcribe(path).text
        if classifier is not None:
            classifier.predict([text or "-"])
    engine.close()
    return {
        "after_import_mb": round(after_import, 1),
        "after_load_mb": round(after_load, 1),
        "peak_mb": round(_peak_mb(), 1),
    }


def run(model_dir: Path, data_dir: Path, split: str, limit: int, intent_path: Path | None) -> dict:
    recordings = fixed_subset(load_recordings(data_dir, split), limit)
    paths = [r.audio_path for r in recordings]
    rows = []
    for name, intent in (("device runtime", None), ("device runtime with intent", intent_path)):
        if name.endswith("intent") and intent is None:
            continue
        with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
            measured = pool.submit(_measure, model_dir, paths, intent).result()
        rows.append({"system": name, **measured})
    return {
        "benchmark": "device-memory",
        "model_dir": str(model_dir),
        "split": split,
        "recordings": len(paths),
        "rows": rows,
    }


def format_report(report: dict) -> str:
    lines = [
        f"device runtime peak RSS, {report['recordings']} {report['split']} recordings decoded "
        "in one fresh process each (all PASU optimisations on)",
        "| system | after imports MB | after loading MB | peak while decoding MB |",
        "| --- | --- | --- | --- |",
    ]
    for row in report["rows"]:
        lines.append(
            f"| {row['system']} | {row['after_import_mb']:.0f} | {row['after_load_mb']:.0f} | "
            f"{row['peak_mb']:.0f} |"
        )
    return "\n".join(lines)


def write_report(report: dict, json_path: Path | None) -> str:
    return save_report(report, format_report(report), json_path)
