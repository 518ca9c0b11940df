"""Model weights in fp16 shards small enough to come back from a lent GPU machine (16 MiB a
file), and loading them (or a training checkpoint) into a model on the CPU."""

from pathlib import Path

import torch

SHARD_BYTES = 14 * 1024 * 1024


def save_shards(state: dict[str, torch.Tensor], out_dir: Path) -> list[Path]:
    """fp16 copies of the weights in files of ≤ SHARD_BYTES (what a device call returns)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name, tensor in state.items():
        tensor = tensor.detach().cpu()
        if tensor.is_floating_point():
            tensor = tensor.half()
        nbytes = tensor.numel() * tensor.element_size()
        if size + nbytes > SHARD_BYTES and shards[-1]:
            shards.append({})
            size = 0
        shards[-1][name] = tensor
        size += nbytes
    paths = []
    for index, shard in enumerate(shards):
        path = out_dir / f"weights-{index}.pt"
        torch.save(shard, path)
        paths.append(path)
    return paths


def load_shards(directory: Path) -> dict[str, torch.Tensor]:
    state: dict[str, torch.Tensor] = {}
    for path in sorted(Path(directory).glob("weights-*.pt")):
        state.update(torch.load(path, weights_only=True))
    if not state:
        raise FileNotFoundError(f"no weights-*.pt in {directory}")
    return {k: v.float() if v.is_floating_point() else v for k, v in state.items()}


def load_weights(source: Path) -> dict[str, torch.Tensor]:
    """Weights from a folder of shards, a `pasu train` checkpoint / best.pt file, or a shipped
    model directory (rebuilt from its graphs: calibrate its BatchNorms before training, see
    `models.onnx_import.calibrate_batchnorms`)."""
    from pasu.core.modeldir import is_model_dir
    from pasu.models.onnx_import import model_from_model_dir

    source = Path(source)
    if is_model_dir(source):
        return model_from_model_dir(source).state_dict()
    if source.is_dir():
        return load_shards(source)
    return torch.load(source, weights_only=True)["model"]
