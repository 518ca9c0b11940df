"""The model card shipped in every device model directory: what the model is, how it was trained,
what it costs and how accurate it is, all from measurements of that model."""

import json
import platform
import time
from pathlib import Path

import torch

from pasu.core.modeldir import CARD_JSON_FILE, CARD_MARKDOWN_FILE
from pasu.models.checkpoints import load_checkpoint_model
from pasu.models.compute_cost import compute_cost


def _sizes(model_dir: Path) -> dict[str, float]:
    return {
        p.name: round(p.stat().st_size / 2**20, 2)
        for p in sorted(model_dir.iterdir())
        if p.is_file() and p.name not in (CARD_MARKDOWN_FILE, CARD_JSON_FILE)
    }


def write_model_card(
    model_dir: Path,
    checkpoint: Path,
    run_dir: Path,
    accuracy: list[dict],
    command: str,
    notes: str = "",
) -> dict:
    # best.pt keeps only weights; the training state lives in the run's latest checkpoint.
    latest = run_dir / "checkpoint.pt"
    state = (
        torch.load(latest, map_location="cpu", weights_only=True)["state"]
        if latest.is_file()
        else {}
    )
    train_config = json.loads((run_dir / "train_config.json").read_text())
    card = {
        "name": model_dir.name,
        "created": time.strftime("%Y-%m-%d"),
        "checkpoint": checkpoint.name,
        "training": {
            "data": f"SLURP-TTS train ({train_config['data_dir']}), train voices only",
            "steps": state.get("step"),
            "epochs_completed": state.get("epoch"),
            "train_hours_wall": round(state.get("train_seconds", 0) / 3600, 2),
            "threads": train_config["threads"],
            "history": state.get("history", []),
        },
        "cost": compute_cost(load_checkpoint_model(checkpoint)),
        "files_mb": _sizes(model_dir),
        "accuracy": accuracy,
        "machine": f"{platform.machine()}, {torch.get_num_threads()} torch threads",
        "command": command,
        "notes": notes,
    }
    (model_dir / CARD_JSON_FILE).write_text(json.dumps(card, indent=2) + "\n")
    (model_dir / CARD_MARKDOWN_FILE).write_text(_markdown(card))
    return card


def _markdown(card: dict) -> str:
    cost, training = card["cost"], card["training"]
    params = cost["parameters"]
    lines = [
        f"# {card['name']}",
        "",
        "Late-contextualization hybrid CTC/attention model for PASU's device path (see README).",
        "",
        f"Made with: `{card['command']}`",
        "",
        "## Training",
        "",
        f"- Data: {training['data']}.",
        f"- {training['steps']} steps, {training['epochs_completed']} full epochs, "
        f"{training['train_hours_wall']} h of training on {training['threads']} CPU threads.",
        "",
        "## Size and compute",
        "",
        "| part | parameters |",
        "| --- | --- |",
        *[f"| {k} | {v / 1e6:.2f} M |" for k, v in params.items()],
        "",
        f"GFLOPs per second of audio: {cost['gflops_per_audio_second']['during_ingestion']} "
        f"during ingestion, {cost['gflops_per_audio_second']['after_ingestion_encoder']} after "
        f"it ({100 * cost['gflops_per_audio_second']['streaming_share']:.0f} % streaming); "
        f"{cost['gflops_per_decoder_step_per_hypothesis']} per decoder step and hypothesis.",
        "",
        "Files (MB): "
        + ", ".join(f"{k} {v}" for k, v in card["files_mb"].items())
        + f"; total {sum(card['files_mb'].values()):.1f}.",
        "",
        "## Accuracy (full beam 5, CTC weight 0.3, no pilots)",
        "",
        "| split | recordings | WER | WER close | WER far | intent acc | intent acc close |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for a in card["accuracy"]:
        intent = f"{100 * a['intent_accuracy']:.1f} %" if a["intent_accuracy"] is not None else "-"
        close = (
            f"{100 * a['intent_accuracy_close']:.1f} %"
            if a["intent_accuracy_close"] is not None
            else "-"
        )
        lines.append(
            f"| {a['split']} | {a['recordings']} | {_pct(a['wer'])} | "
            f"{_pct(a['wer_close'])} | {_pct(a['wer_far'])} | {intent} | {close} |"
        )
    if card["notes"]:
        lines += ["", "## Notes", "", card["notes"]]
    return "\n".join(lines) + "\n"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"
