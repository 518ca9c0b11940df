"""Torch weights in and out: a training checkpoint, a float16 state file or a shipped model
directory (rebuilt from its graphs) becomes a torch model; a checkpoint becomes a model
directory or a float16 state file."""

from pathlib import Path

import torch

from pasu.core.modeldir import CMVN_FILE, TOKENIZER_FILE, is_model_dir
from pasu.models.asr_model import LateContextModel, ModelConfig
from pasu.models.export import write_model_dir
from pasu.models.onnx_import import model_from_model_dir


def load_checkpoint_model(checkpoint: Path) -> LateContextModel:
    """The torch model of a training checkpoint, a float16 state file or a shipped model
    directory (rebuilt from its graphs, `models.onnx_import`)."""
    if is_model_dir(checkpoint):
        return model_from_model_dir(checkpoint)
    saved = torch.load(checkpoint, map_location="cpu", weights_only=True)
    model = LateContextModel(ModelConfig(**saved["model_config"]))
    model.load_state_dict(saved["model"])
    return model.eval()


def export_model_dir(
    checkpoint: Path, run_dir: Path, out_dir: Path, extra: dict | None = None
) -> Path:
    """A device model directory from a training checkpoint and its run directory; config.json
    records which checkpoint and how far training had got."""
    model = load_checkpoint_model(checkpoint)
    state = torch.load(checkpoint, map_location="cpu", weights_only=True).get("state", {})
    history = state.get("history") or [{}]
    training = {
        "run": run_dir.name,
        "checkpoint": checkpoint.name,
        "epoch": state.get("epoch"),
        "step": state.get("step"),
        "train_hours": round(state.get("train_seconds", 0.0) / 3600, 3),
        "last_validation": history[-1],
    }
    extra = {"training": training, **(extra or {})}
    return write_model_dir(model, run_dir / TOKENIZER_FILE, run_dir / CMVN_FILE, out_dir, extra)


def save_float16_state(checkpoint: Path, out_path: Path) -> Path:
    """The model's weights in float16 with its config: what the torch baseline needs, at half
    the size of a training checkpoint and without optimizer state."""
    model = load_checkpoint_model(checkpoint)
    state = {k: v.half() if v.is_floating_point() else v for k, v in model.state_dict().items()}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model": state, "model_config": model.config.to_dict()}, out_path)
    return out_path
