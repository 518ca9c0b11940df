"""Fitting a model's offramp on devel runs: train the BiLSTM, then calibrate both scores'
thresholds to a target, and write them beside the device model (`offramp.json`,
`offramp-bilstm.npz`), where `understand()` finds them."""

import json
from pathlib import Path

import numpy as np

from pasu.core.errors import ConfigError
from pasu.core.modeldir import OFFRAMP_BILSTM_FILE, OFFRAMP_CONFIG_FILE
from pasu.offramp.calibrate import threshold_for_offload_ratio, threshold_for_target_wer
from pasu.offramp.features import OfframpFeatures
from pasu.offramp.policy import load_config
from pasu.offramp.scores import BiLstmScorer, perplexity

WRONG_WER = 0.1  # the BiLSTM predicts P(device WER > 0.1), as in the paper


def judged_features(row: dict) -> OfframpFeatures | None:
    """What the offramp sees for a run: the last pilot output, or for an utterance too short
    for a pilot the full decode (as `Understander` does)."""
    data = row.get("pilot_features") or row.get("full_features")
    return OfframpFeatures.from_json(data) if data else None


def device_wrong(row: dict) -> bool:
    words = max(row["reference_words"], 1)
    return row["device_text_errors"] / words > WRONG_WER


def scores(rows: list[dict], score) -> np.ndarray:
    """Score every run; a run with nothing to judge gets +inf (always offloaded)."""
    values = []
    for row in rows:
        features = judged_features(row)
        values.append(np.inf if features is None else float(score(features)))
    return np.array(values)


def _write_config(model_dir: Path, config: dict) -> None:
    (model_dir / OFFRAMP_CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")


def train_offramp(model_dir: Path, rows: list[dict], seed: int = 0) -> dict:
    from pasu.offramp.train import train_bilstm

    usable = [r for r in rows if judged_features(r) is not None]
    if len(usable) < 50:
        raise ConfigError(f"only {len(usable)} devel runs to train the offramp on; need 50+")
    features = [judged_features(r) for r in usable]
    labels = np.array([device_wrong(r) for r in usable])
    scorer, metrics = train_bilstm(features, labels, seed=seed)
    scorer.save(model_dir / OFFRAMP_BILSTM_FILE)
    config = load_config(model_dir)
    config["bilstm"] = metrics
    _write_config(model_dir, config)
    return metrics


def calibrate(
    model_dir: Path,
    rows: list[dict],
    target_offload: float | None = None,
    target_wer: float | None = None,
    cloud_rows: list[dict] | None = None,
    default_policy: str = "lstm",
) -> dict:
    """Thresholds for `ppl` and `lstm` meeting one target on these devel runs."""
    if (target_offload is None) == (target_wer is None):
        raise ConfigError("give exactly one of a target offload ratio and a target WER")
    scorers = {"ppl": perplexity}
    bilstm_path = model_dir / OFFRAMP_BILSTM_FILE
    if bilstm_path.is_file():
        scorers["lstm"] = BiLstmScorer.load(bilstm_path)
    elif default_policy == "lstm":
        default_policy = "ppl"
    words = np.array([r["reference_words"] for r in rows])
    device_errors = np.array([r["device_text_errors"] for r in rows])
    cloud_errors = None
    if cloud_rows is not None:
        by_id = {r["id"]: r for r in cloud_rows}
        cloud_errors = np.array([by_id[r["id"]]["cloud_text_errors"] for r in rows])
    thresholds, outcome = {}, {}
    for name, scorer in scorers.items():
        values = scores(rows, scorer)
        finite = np.where(np.isfinite(values), values, np.finfo(np.float64).max)
        if target_offload is not None:
            threshold = threshold_for_offload_ratio(finite, target_offload)
        else:
            if cloud_errors is None:
                raise ConfigError("a WER target needs the cloud's devel transcripts")
            threshold = threshold_for_target_wer(
                finite, device_errors, cloud_errors, words, target_wer
            ).threshold
        offloaded = finite > threshold
        entry = {"offload_ratio": float(offloaded.mean())}
        entry["device_wer_kept"] = float(
            device_errors[~offloaded].sum() / max(words[~offloaded].sum(), 1)
        )
        if cloud_errors is not None:
            mixed = np.where(offloaded, cloud_errors, device_errors)
            entry["overall_wer"] = float(mixed.sum() / words.sum())
        thresholds[name], outcome[name] = float(threshold), entry
    config = load_config(model_dir)
    config.update(
        default_policy=default_policy,
        target={"offload_ratio": target_offload, "wer": target_wer},
        thresholds=thresholds,
        devel=outcome
        | {"utterances": len(rows), "device_wer": float(device_errors.sum() / words.sum())},
    )
    _write_config(model_dir, config)
    return config
