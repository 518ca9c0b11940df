"""Export a trained device model to the four ONNX graphs the device runtime runs.

- `conv_stack.onnx`: one ingestion step. `features` (1, F, 80), F ≥ 7, are the CMVN-normalised
  frames not yet consumed (the runtime keeps the F − 4m frames the next step still needs) and
  `caches` (blocks, 1, d, kernel-1) the causal-convolution state;
  returns m new `frames` (1, m, d) and the new `caches`. Runs while the user speaks.
- `encoder_top.onnx`: attention blocks + CTC over all ingested `frames` (1, T, d); returns
  `encoded` (1, T, d) and `ctc_log_probs` (1, T, vocab). Runs per pilot and after the end.
- `decoder_memory.onnx`: the cross-attention keys and values of the decoder (layers, 1, heads,
  T, d_k) from `encoded`, once per decode (per step they cost about as much as the rest of the step:
  see models/compute_cost.py).
- `decoder_step.onnx`: the transformer decoder for a batch of hypotheses `tokens` (B, L)
  (starting with `<sos>`) against those `keys` and `values`; returns the next-token
  `log_probs` (B, Q, vocab) after each of the Q `positions` asked: the newest one for a beam
  step, all of them to check a pilot's draft in one call. No self-attention cache: at command
  lengths (L ≤ ~30, one layer) recomputing the history's keys and values is cheap; everything
  else runs on the asked positions only.

A model directory also holds the tokenizer, CMVN and `config.json`, and is all the device needs.
"""

import copy
import json
import math
import shutil
from pathlib import Path

import numpy as np
import onnx
import torch
from espnet.nets.pytorch_backend.transformer.mask import subsequent_mask
from onnx import TensorProto, helper, numpy_helper

from pasu.core.modeldir import CMVN_FILE, CONFIG_FILE, TOKENIZER_FILE, graph_file
from pasu.models.asr_model import LateContextModel

OPSET = 17
# Positional-encoding tables are traced in as constants: keep what the device can use.
MAX_ENCODER_FRAMES = 1500  # 60 s at 40 ms per frame; the engine caps utterances below that
MAX_DECODER_TOKENS = 256


class ConvStackGraph(torch.nn.Module):
    def __init__(self, model: LateContextModel):
        super().__init__()
        self.model = model

    def forward(self, features: torch.Tensor, caches: torch.Tensor):
        frames, new_caches = self.model.ingest_chunk(features, list(caches.unbind(0)))
        return frames, torch.stack(new_caches, 0)


class EncoderTopGraph(torch.nn.Module):
    def __init__(self, model: LateContextModel):
        super().__init__()
        self.model = model

    def forward(self, frames: torch.Tensor):
        x = self.model.position(frames)
        for block in self.model.attention_blocks:
            x, _ = block(x, None)
        encoded = self.model.after_norm(x)
        return encoded, self.model.ctc.log_softmax(encoded)


class DecoderMemoryGraph(torch.nn.Module):
    """Cross-attention keys and values of every decoder layer, computed once per decode."""

    def __init__(self, model: LateContextModel):
        super().__init__()
        self.layers = model.decoder.decoders

    def forward(self, encoded: torch.Tensor):
        keys, values = [], []
        for layer in self.layers:
            attention = layer.src_attn
            _, k, v = attention.forward_qkv(encoded[:, :1], encoded, encoded)
            keys.append(k)
            values.append(v)
        return torch.stack(keys), torch.stack(values)  # (layers, 1, heads, T, d_k)


class DecoderStepGraph(torch.nn.Module):
    """Next-token log-probs of B hypotheses at the asked `positions`, against precomputed
    cross-attention memory.

    A beam step asks for the newest position only; a pilot's draft is checked by asking for
    every position of it at once (each position sees only the tokens up to it). In the last
    layer, self-attention takes its queries from those positions (keys and values from the whole
    history), and cross-attention, the feed-forward and the output layer run on them alone, not
    on all L positions. Layers below the last, if any, compute every position."""

    def __init__(self, model: LateContextModel):
        super().__init__()
        self.decoder = model.decoder

    def forward(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
    ):
        decoder = self.decoder
        layers = list(decoder.decoders)
        length = tokens.size(1)
        x = decoder.embed(tokens)
        for index, layer in enumerate(layers):
            t = layer.norm1(x)
            if index == len(layers) - 1:
                visible = torch.arange(length, device=tokens.device)[None] <= positions[:, None]
                x = x[:, positions] + layer.self_attn(t[:, positions], t, t, visible[None])
            else:
                mask = subsequent_mask(length, device=tokens.device).unsqueeze(0)
                x = x + layer.self_attn(t, t, t, mask)
            x = x + self._cross_attention(
                layer.src_attn, layer.norm2(x), keys[index], values[index]
            )
            x = x + layer.feed_forward(layer.norm3(x))
        return torch.log_softmax(decoder.output_layer(decoder.after_norm(x)), dim=-1)

    @staticmethod
    def _cross_attention(attention, query, keys, values):
        batch = query.size(0)
        q = attention.linear_q(query).view(batch, -1, attention.h, attention.d_k).transpose(1, 2)
        q = attention.q_norm(q)
        scores = torch.matmul(q, keys.transpose(-2, -1)) / math.sqrt(attention.d_k)
        context = torch.matmul(torch.softmax(scores, dim=-1), values)  # keys broadcast over B
        context = context.transpose(1, 2).reshape(batch, -1, attention.h * attention.d_k)
        return attention.linear_out(context)


def _export(module: torch.nn.Module, args: tuple, path: Path, inputs: dict, outputs: dict) -> None:
    # The exporter restores the wrapper's mode afterwards, recursively: it must be eval too.
    module.eval()
    torch.onnx.export(
        module,
        args,
        str(path),
        dynamo=False,
        opset_version=OPSET,
        input_names=list(inputs),
        output_names=list(outputs),
        dynamic_axes={
            **{k: v for k, v in inputs.items() if v},
            **{k: v for k, v in outputs.items() if v},
        },
        do_constant_folding=True,
    )


def store_weights_as_float16(path: Path, min_elements: int = 1024) -> None:
    """Halve a graph's size: large float32 initializers are stored as float16, each followed by
    a Cast back to float32. onnxruntime folds the casts when it loads the graph, so the device
    computes in float32 with weights rounded to float16 (the WER effect is benchmarked)."""
    graph_model = onnx.load(str(path))
    graph = graph_model.graph
    casts = []
    for initializer in graph.initializer:
        if initializer.data_type != TensorProto.FLOAT:
            continue
        values = numpy_helper.to_array(initializer)
        if values.size < min_elements:
            continue
        name = initializer.name
        initializer.CopyFrom(numpy_helper.from_array(values.astype(np.float16), f"{name}__fp16"))
        casts.append(helper.make_node("Cast", [f"{name}__fp16"], [name], to=TensorProto.FLOAT))
    nodes = [*casts, *graph.node]
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.checker.check_model(graph_model)
    onnx.save(graph_model, str(path))


def round_weights_to_float16(model: torch.nn.Module, min_elements: int = 1024) -> None:
    """The torch twin of `store_weights_as_float16`, for parity checks and the baseline."""
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            if tensor.is_floating_point() and tensor.numel() >= min_elements:
                tensor.copy_(tensor.half().float())


def export_graphs(model: LateContextModel, out_dir: Path, float16_weights: bool = True) -> None:
    """Write the four ONNX graphs of (a copy of) `model` into `out_dir`."""
    model = copy.deepcopy(model).eval()
    model.position.pe = model.position.pe[:, :MAX_ENCODER_FRAMES]
    model.decoder.embed[1].pe = model.decoder.embed[1].pe[:, :MAX_DECODER_TOKENS]
    config = model.config
    out_dir.mkdir(parents=True, exist_ok=True)
    cache_frames = model.conv_blocks[0].cache_frames
    with torch.no_grad():
        _export(
            ConvStackGraph(model),
            (
                torch.randn(1, 4 * 12 + 3, config.num_mel_bins),
                torch.zeros(config.num_conv_blocks, 1, config.d_model, cache_frames),
            ),
            out_dir / graph_file("conv_stack"),
            {"features": {1: "input_frames"}, "caches": None},
            {"frames": {1: "new_frames"}, "new_caches": None},
        )
        _export(
            EncoderTopGraph(model),
            (torch.randn(1, 40, config.d_model),),
            out_dir / graph_file("encoder_top"),
            {"frames": {1: "frames"}},
            {"encoded": {1: "frames"}, "ctc_log_probs": {1: "frames"}},
        )
        keys, values = DecoderMemoryGraph(model)(torch.randn(1, 40, config.d_model))
        _export(
            DecoderMemoryGraph(model),
            (torch.randn(1, 40, config.d_model),),
            out_dir / graph_file("decoder_memory"),
            {"encoded": {1: "frames"}},
            {"keys": {3: "frames"}, "values": {3: "frames"}},
        )
        _export(
            DecoderStepGraph(model),
            (
                torch.full((3, 4), config.vocab_size - 1, dtype=torch.long),
                torch.tensor([1, 3]),
                keys,
                values,
            ),
            out_dir / graph_file("decoder_step"),
            {
                "tokens": {0: "hypotheses", 1: "length"},
                "positions": {0: "positions"},
                "keys": {3: "frames"},
                "values": {3: "frames"},
            },
            {"log_probs": {0: "hypotheses", 1: "positions"}},
        )
    if float16_weights:
        for name in ("conv_stack", "encoder_top", "decoder_memory", "decoder_step"):
            store_weights_as_float16(out_dir / graph_file(name))


def write_model_dir(
    model: LateContextModel,
    tokenizer_path: Path,
    cmvn_path: Path,
    out_dir: Path,
    extra: dict | None = None,
    float16_weights: bool = True,
) -> Path:
    """A complete device model directory: graphs, tokenizer, CMVN and `config.json`."""
    export_graphs(model, out_dir, float16_weights)
    shutil.copy(tokenizer_path, out_dir / TOKENIZER_FILE)
    shutil.copy(cmvn_path, out_dir / CMVN_FILE)
    config = model.config
    description = {
        "model": config.to_dict(),
        "conv_cache_frames": model.conv_blocks[0].cache_frames,
        "subsampling": {"factor": 4, "context_frames": 7},
        "weights_stored_as": "float16" if float16_weights else "float32",
        "max_encoder_frames": MAX_ENCODER_FRAMES,
        "max_decoder_tokens": MAX_DECODER_TOKENS,
        "frontend": {
            "num_mel_bins": config.num_mel_bins,
            "frame_shift_ms": 10,
            "frame_length_ms": 25,
        },
        **(extra or {}),
    }
    (out_dir / CONFIG_FILE).write_text(json.dumps(description, indent=2) + "\n")
    return out_dir
