"""Running the SLURP evaluation: every system's cached runs on a split, merged and
reported."""

import datetime
import json
from dataclasses import replace
from pathlib import Path

from pasu.core.errors import ConfigError
from pasu.core.modeldir import CONFIG_FILE, OFFRAMP_BILSTM_FILE, OFFRAMP_CONFIG_FILE
from pasu.device.engine import EngineConfig
from pasu.eval.slurp_eval.report import build_report
from pasu.eval.slurp_eval.systems import LINKS, Utterance, merge_runs, shipped_thresholds
from pasu.offramp.scores import BiLstmScorer


def _intents(classifier, texts: list[str]) -> list[str]:
    """The classifier's intent of each text; an empty text has none."""
    predictions = classifier.predict([t or "-" for t in texts])
    return [p.intent if t else "" for p, t in zip(predictions, texts, strict=True)]


def _pilot_variants(
    utterances, model_dir, data_dir, split, limit, cloud, device_classifier, cloud_intents,
    pilot_intervals,
) -> dict[str, list[Utterance]]:  # fmt: skip
    """The device without pilots and at each pilot interval, beside the default (Table 5)."""
    from pasu.eval.corpus_runs import device_runs

    default = EngineConfig()
    settings = {
        "none": replace(default, pilots=False),
        **{f"tau={t:g}s": replace(default, pilot_interval_s=t) for t in pilot_intervals},
        f"tau={default.pilot_interval_s:g}s (default)": default,
    }
    variants = {}
    for name, config in settings.items():
        if config == default:
            variants[name] = utterances
            continue
        rows = device_runs(model_dir, data_dir, split, limit, config)
        texts = [r["device_text"] for r in rows]
        variants[name] = merge_runs(rows, cloud, _intents(device_classifier, texts), cloud_intents)
    return variants


def _report_meta(
    model_dir: Path, data_dir: Path, split: str, limit: int | None, checkpoint: Path | None,
    cloud_model: str, cloud_intent: str,
) -> dict:  # fmt: skip
    from pasu.eval.corpus_runs import fingerprint
    from pasu.eval.reports import machine, software_versions

    return {
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
    from pasu.api import device_intent_model
    from pasu.cloud.pipeline import intent_model_of_kind
    from pasu.eval.corpus_runs import baseline_runs, cloud_runs, device_runs

    if link not in LINKS:
        raise ConfigError(f"unknown link {link!r}; expected one of {sorted(LINKS)}")
    device = device_runs(model_dir, data_dir, split, limit)
    cloud = cloud_runs(data_dir, split, limit, cloud_model)
    espnet = baseline_runs(checkpoint, model_dir, data_dir, split, limit) if checkpoint else None
    device_classifier = device_intent_model(model_dir)
    cloud_classifier = intent_model_of_kind(cloud_intent)
    cloud_intents = _intents(cloud_classifier, [r["cloud_text"] for r in cloud])
    utterances = merge_runs(
        device,
        cloud,
        _intents(device_classifier, [r["device_text"] for r in device]),
        cloud_intents,
        espnet,
        _intents(device_classifier, [r["espnet_text"] for r in espnet]) if espnet else None,
    )
    pilot_variants = _pilot_variants(
        utterances, model_dir, data_dir, split, limit, cloud, device_classifier, cloud_intents,
        pilot_intervals,
    )  # fmt: skip
    bilstm_path = model_dir / OFFRAMP_BILSTM_FILE
    bilstm = BiLstmScorer.load(bilstm_path) if bilstm_path.is_file() else None
    meta = _report_meta(model_dir, data_dir, split, limit, checkpoint, cloud_model, cloud_intent)
    thresholds = shipped_thresholds(model_dir)
    report = build_report(utterances, LINKS[link], bilstm, meta, thresholds, pilot_variants)
    return report, utterances
