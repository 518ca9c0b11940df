"""Torch weights back from a shipped model directory's ONNX graphs.

A model directory (`models/pretrained/<name>`) holds only the device's ONNX graphs, yet the
ESPnet baseline, the model card, the voice study and further training all need the same model
in torch. Shipping a second copy of the weights would double the directory, so this rebuilds
the torch model from the graphs instead.

The exporter renames and reshapes weights on the way (linear weights become transposed MatMul
constants; each BatchNorm is folded into the convolution before it), so the map from ONNX
initializers to torch tensors is learnt, not written down: a probe model of the same config,
whose every tensor holds distinct random values and whose BatchNorms are identities, is
exported with the same code, and each of its initializers is found among the probe's tensors
(as is, or transposed). The shipped graphs, exported by that code from the real weights, are then
read through that map. The rebuilt model keeps identity BatchNorms with the folded convolutions,
which computes the same function in eval mode; weights come back as the float16 values the
device runs (see `models.export.store_weights_as_float16`).
"""

import json
import tempfile
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from pasu.core.modeldir import CONFIG_FILE, GRAPHS, graph_file, is_model_dir
from pasu.models.asr_model import LateContextModel, ModelConfig

FP16_SUFFIX = "__fp16"
# Batches of training data that set a rebuilt model's BatchNorm statistics before training.
CALIBRATION_BATCHES = 16


class GraphMismatch(ValueError):
    """The graphs were not written by this version of `models.export` for this config."""


def model_from_model_dir(model_dir: Path) -> LateContextModel:
    """The torch model whose export is `model_dir`'s graphs (eval mode, float32 tensors)."""
    model_dir = Path(model_dir)
    if not is_model_dir(model_dir):
        raise FileNotFoundError(
            f"{model_dir} is not a model directory (config.json and {', '.join(GRAPHS)}.onnx)"
        )
    config = ModelConfig(**json.loads((model_dir / CONFIG_FILE).read_text())["model"])
    model = LateContextModel(config).eval()
    _make_batchnorms_identity(model)
    sources, constants = _initializer_sources(config)
    state = model.state_dict()
    found: dict[str, np.ndarray] = {}
    for graph in GRAPHS:
        for name, array in _initializers(
            onnx.load(str(model_dir / graph_file(graph))).graph
        ).items():
            source = sources.get((graph, name))
            if source is None:
                _check_constant(graph, name, array, constants)
                continue
            tensor_name, transposed = source
            array = array.T if transposed else array
            if tuple(array.shape) != tuple(state[tensor_name].shape):
                raise GraphMismatch(f"{graph}.onnx {name}: shape {array.shape} ≠ {tensor_name}")
            if tensor_name in found and not np.array_equal(found[tensor_name], array):
                raise GraphMismatch(f"{tensor_name} read twice with different values ({name})")
            found[tensor_name] = array
            state[tensor_name] = torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))
    missing = [name for name in _learnable(model) if name not in found]
    if missing:
        raise GraphMismatch(f"{model_dir}: no weights found for {missing[:5]} ...")
    model.load_state_dict(state)
    return model.eval()


def _learnable(model: torch.nn.Module) -> list[str]:
    """Tensors the graphs must supply: all but BatchNorm's (folded into the convolutions)."""
    batchnorms = {
        name for name, module in model.named_modules() if isinstance(module, torch.nn.BatchNorm1d)
    }
    return [
        name
        for name, tensor in model.state_dict().items()
        if tensor.is_floating_point() and name.rsplit(".", 1)[0] not in batchnorms
    ]


def _make_batchnorms_identity(model: torch.nn.Module) -> None:
    """Eval-mode BatchNorms that pass their input through unchanged (up to float rounding)."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm1d):
                module.weight.fill_(1.0)
                module.bias.zero_()
                module.running_mean.zero_()
                module.running_var.fill_(1.0 - module.eps)


def _initializers(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    """Float initializers of a graph by their exported name, the float16 storage undone. The
    exporter merges initializers with equal values (as untrained LayerNorms have) and gives the
    merged names back through Identity nodes: those names are kept too."""
    arrays = {}
    for initializer in graph.initializer:
        values = numpy_helper.to_array(initializer)
        if np.issubdtype(values.dtype, np.floating):
            arrays[initializer.name.removesuffix(FP16_SUFFIX)] = values.astype(np.float32)
    for node in graph.node:
        if node.op_type == "Identity" and node.input[0] in arrays:
            arrays[node.output[0]] = arrays[node.input[0]]
    return arrays


def _initializer_sources(
    config: ModelConfig,
) -> tuple[dict[tuple[str, str], tuple[str, bool]], dict[tuple[str, str], np.ndarray]]:
    """From a tagged probe: (graph, initializer name) → (torch tensor name, transposed?), and
    the initializers that are no weight (positional tables, scales) with their values."""
    from pasu.models.export import export_graphs

    probe = LateContextModel(config).eval()
    _make_batchnorms_identity(probe)
    generator = torch.Generator().manual_seed(0)
    learnable = _learnable(probe)
    with torch.no_grad():
        state = probe.state_dict()
        for name in learnable:
            state[name].copy_(torch.randn(state[name].shape, generator=generator))
    tagged = {name: state[name].numpy() for name in learnable}
    by_size: dict[int, list[str]] = {}
    for name, values in tagged.items():
        by_size.setdefault(values.size, []).append(name)
    sources, constants = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        export_graphs(probe, Path(tmp), float16_weights=False)
        for graph in GRAPHS:
            exported = onnx.load(str(Path(tmp) / graph_file(graph))).graph
            for name, values in _initializers(exported).items():
                match = _find(values, by_size.get(values.size, []), tagged)
                if match is not None:
                    sources[(graph, name)] = match
                else:
                    constants[(graph, name)] = values
    return sources, constants


def _check_constant(
    graph: str, name: str, array: np.ndarray, constants: dict[tuple[str, str], np.ndarray]
) -> None:
    """A shipped initializer that is no weight must be the probe's constant of that name: the
    exporter's anonymous names (`onnx::MatMul_82`) follow its trace, and a graph written by
    other code or another exporter would otherwise have its weights read from the wrong names
    without a word."""
    expected = constants.get((graph, name))
    if expected is None or expected.shape != array.shape:
        raise GraphMismatch(
            f"{graph}.onnx {name} is neither a weight nor a constant of this export code "
            "(graphs written by another models.export or torch version?)"
        )
    # float16 storage rounds large constants to ~1e-3 relative
    if not np.allclose(array, expected, rtol=2e-3, atol=1e-6):
        raise GraphMismatch(f"{graph}.onnx {name}: constant differs from this export code's")


def _find(
    values: np.ndarray, candidates: list[str], tagged: dict[str, np.ndarray]
) -> tuple[str, bool] | None:
    for name in candidates:
        original = tagged[name]
        if values.shape == original.shape and np.allclose(values, original, rtol=1e-6, atol=0):
            return name, False
        transposable = values.ndim == 2 and values.shape == original.T.shape
        if transposable and np.allclose(values, original.T, rtol=1e-6, atol=0):
            return name, True
    return None


@torch.no_grad()
def calibrate_batchnorms(
    model: LateContextModel, batches: list[tuple[torch.Tensor, torch.Tensor]]
) -> int:
    """Give a rebuilt model's identity BatchNorms statistics from real (features, lengths)
    batches, keeping the eval-mode function: each gets running mean μ and variance σ² of its
    input, weight √(σ² + ε) and bias μ, so it still maps x to x in eval mode, while in training
    mode, which normalises by the batch's own statistics, it now gives about x too instead of a
    unit-variance x. Needed before training a rebuilt model; returns the calibrated count."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm1d)]
    sums = {id(m): [0.0, 0.0, 0] for m in norms}

    def record(module, inputs):
        x = inputs[0].transpose(0, 1).reshape(module.num_features, -1).double()
        stats = sums[id(module)]
        stats[0] = stats[0] + x.sum(1)
        stats[1] = stats[1] + (x * x).sum(1)
        stats[2] += x.shape[1]

    was_training = model.training
    model.eval()
    hooks = [m.register_forward_pre_hook(record) for m in norms]
    try:
        for features, lengths in batches:
            model.encode(features, lengths)
    finally:
        for hook in hooks:
            hook.remove()
    for module in norms:
        total, squares, count = sums[id(module)]
        if not count:
            continue
        mean = total / count
        var = (squares / count - mean * mean).clamp(min=0.0)
        module.running_mean.copy_(mean.float())
        module.running_var.copy_(var.float())
        module.weight.copy_((var + module.eps).sqrt().float())
        module.bias.copy_(mean.float())
    model.train(was_training)
    return len(norms)
