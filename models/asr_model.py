"""The device model: a hybrid CTC/attention encoder-decoder with late contextualization (torch).

PASU §6: convolution subsampling (×4), then `num_conv_blocks` convolution-only blocks that run
on each new audio segment while the user speaks (causal depthwise convolutions that carry a
small cache between segments), then `num_attention_blocks` Conformer blocks with full
self-attention over the whole utterance, a CTC head and a 1-layer transformer decoder.

Built from ESPnet's modules where they fit: `PositionwiseFeedForward`, the causal
`ConformerConvolution` (with cache) of its transducer encoder, Conformer `EncoderLayer`, `CTC`,
`TransformerDecoder` and `LabelSmoothingLoss`. Training, export and the ESPnet baseline import
this module; the device runtime never does.
"""

from dataclasses import asdict, dataclass

import torch
from espnet.nets.pytorch_backend.conformer.convolution import ConvolutionModule
from espnet.nets.pytorch_backend.conformer.encoder_layer import EncoderLayer
from espnet.nets.pytorch_backend.nets_utils import make_pad_mask
from espnet.nets.pytorch_backend.transformer.add_sos_eos import add_sos_eos
from espnet.nets.pytorch_backend.transformer.attention import MultiHeadedAttention
from espnet.nets.pytorch_backend.transformer.embedding import PositionalEncoding
from espnet.nets.pytorch_backend.transformer.label_smoothing_loss import LabelSmoothingLoss
from espnet.nets.pytorch_backend.transformer.layer_norm import LayerNorm
from espnet.nets.pytorch_backend.transformer.positionwise_feed_forward import (
    PositionwiseFeedForward,
)
from espnet2.asr.ctc import CTC
from espnet2.asr.decoder.transformer_decoder import TransformerDecoder
from espnet2.asr_transducer.encoder.modules.convolution import ConformerConvolution

from pasu.speech.subsampling import subsampled_length

IGNORE_ID = -1


@dataclass(frozen=True)
class ModelConfig:
    """Sizes of the device model; stored with every checkpoint and shipped model."""

    vocab_size: int
    num_mel_bins: int = 80
    subsampling_channels: int = 128
    d_model: int = 256
    attention_heads: int = 4
    ffn_units: int = 1024
    num_conv_blocks: int = 6
    num_attention_blocks: int = 3
    conv_kernel: int = 15
    decoder_ffn_units: int = 1024
    dropout: float = 0.1
    ctc_weight: float = 0.3
    label_smoothing: float = 0.1

    def to_dict(self) -> dict:
        return asdict(self)


class ConvSubsampling(torch.nn.Module):
    """Two 3×3 stride-2 convolutions over (time, mel) and a projection: 4× fewer frames.

    The layout of ESPnet's `Conv2dSubsampling`, with its own channel count: ESPnet ties the
    channels to d_model, and at 256 channels the second convolution alone costs ~0.8 GMAC per
    3 s of audio, half of the training compute.
    """

    def __init__(self, num_mel_bins: int, channels: int, d_model: int):
        super().__init__()
        self.conv = torch.nn.Sequential(
            torch.nn.Conv2d(1, channels, 3, 2),
            torch.nn.ReLU(),
            torch.nn.Conv2d(channels, channels, 3, 2),
            torch.nn.ReLU(),
        )
        self.out = torch.nn.Linear(channels * subsampled_length(num_mel_bins), d_model)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        x = self.conv(features.unsqueeze(1))  # (B, C, T', F')
        b, c, t, f = x.size()
        return self.out(x.transpose(1, 2).reshape(b, t, c * f))


class ConvBlock(torch.nn.Module):
    """Convolution-only encoder block: causal convolution module between two half-step FFNs."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        d = config.d_model
        self.ffn_in = PositionwiseFeedForward(d, config.ffn_units, config.dropout, torch.nn.SiLU())
        self.conv = ConformerConvolution(d, config.conv_kernel, torch.nn.SiLU(), causal=True)
        self.ffn_out = PositionwiseFeedForward(d, config.ffn_units, config.dropout, torch.nn.SiLU())
        self.norm_ffn_in, self.norm_conv, self.norm_ffn_out, self.norm_final = (
            LayerNorm(d) for _ in range(4)
        )
        self.dropout = torch.nn.Dropout(config.dropout)

    @property
    def cache_frames(self) -> int:
        return self.conv.lorder

    def forward(
        self, x: torch.Tensor, pad_mask: torch.Tensor | None, cache: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        x = x + 0.5 * self.dropout(self.ffn_in(self.norm_ffn_in(x)))
        conv_out, cache = self.conv(self.norm_conv(x), mask=pad_mask, cache=cache)
        x = x + self.dropout(conv_out)
        x = x + 0.5 * self.dropout(self.ffn_out(self.norm_ffn_out(x)))
        return self.norm_final(x), cache


class LateContextModel(torch.nn.Module):
    """Hybrid CTC/attention model whose bottom runs during ingestion and top after it."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        d = config.d_model
        self.subsample = ConvSubsampling(config.num_mel_bins, config.subsampling_channels, d)
        self.conv_blocks = torch.nn.ModuleList(
            ConvBlock(config) for _ in range(config.num_conv_blocks)
        )
        self.position = PositionalEncoding(d, config.dropout)
        self.attention_blocks = torch.nn.ModuleList(
            EncoderLayer(
                d,
                MultiHeadedAttention(config.attention_heads, d, config.dropout),
                PositionwiseFeedForward(d, config.ffn_units, config.dropout, torch.nn.SiLU()),
                PositionwiseFeedForward(d, config.ffn_units, config.dropout, torch.nn.SiLU()),
                ConvolutionModule(d, config.conv_kernel, torch.nn.SiLU()),
                config.dropout,
                normalize_before=True,
            )
            for _ in range(config.num_attention_blocks)
        )
        self.after_norm = LayerNorm(d)
        self.ctc = CTC(config.vocab_size, d, dropout_rate=0.0, reduce=True)
        self.decoder = TransformerDecoder(
            config.vocab_size,
            d,
            attention_heads=config.attention_heads,
            linear_units=config.decoder_ffn_units,
            num_blocks=1,
            dropout_rate=config.dropout,
            positional_dropout_rate=config.dropout,
            self_attention_dropout_rate=config.dropout,
            src_attention_dropout_rate=config.dropout,
        )
        self.sos = self.eos = config.vocab_size - 1
        self.attention_loss = LabelSmoothingLoss(
            config.vocab_size, IGNORE_ID, config.label_smoothing, normalize_length=False
        )

    # --- encoder, in the two halves that run at different times ------------------------------

    def ingest(
        self, features: torch.Tensor, lengths: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Subsampling + convolution blocks over whole (padded) utterances."""
        x = self.subsample(features)
        # Exact lengths (ESPnet's subsampled mask would count one frame that reads padding).
        out_lengths = torch.div(
            torch.div(lengths - 1, 2, rounding_mode="floor") - 1, 2, rounding_mode="floor"
        ).clamp(min=0)
        pad_mask = make_pad_mask(out_lengths, maxlen=x.size(1)).to(x.device)
        for block in self.conv_blocks:
            x, _ = block(x, pad_mask, None)
        return x, out_lengths

    def ingest_chunk(
        self, features: torch.Tensor, caches: list[torch.Tensor]
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """One streaming step for a single utterance: `features` (1, F, mel) holds the frames
        not yet consumed; returns m = subsampled_length(F) new frames and the convolution caches
        to carry. The caller keeps the last F − 4m input frames for the next step."""
        x = self.subsample(features)
        new_caches = []
        for block, cache in zip(self.conv_blocks, caches, strict=True):
            x, cache = block(x, None, cache)
            new_caches.append(cache)
        return x, new_caches

    def initial_caches(self) -> list[torch.Tensor]:
        d = self.config.d_model
        return [torch.zeros(1, d, block.cache_frames) for block in self.conv_blocks]

    def contextualize(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Attention blocks over the whole ingested input; returns the encoder output."""
        mask = ~make_pad_mask(lengths, maxlen=x.size(1)).unsqueeze(1).to(x.device)
        x = self.position(x)
        for block in self.attention_blocks:
            x, mask = block(x, mask)
        return self.after_norm(x)

    def encode(
        self, features: torch.Tensor, lengths: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        ingested, out_lengths = self.ingest(features, lengths)
        return self.contextualize(ingested, out_lengths), out_lengths

    # --- training ---------------------------------------------------------------------------

    def forward(
        self,
        features: torch.Tensor,
        feature_lengths: torch.Tensor,
        tokens: torch.Tensor,
        token_lengths: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        """Hybrid loss: ctc_weight · CTC + (1 − ctc_weight) · label-smoothed attention CE.

        `tokens` is padded with IGNORE_ID. Both losses are averaged over the batch (by ESPnet's
        CTC and LabelSmoothingLoss), as ESPnet reports them.
        """
        encoded, encoded_lengths = self.encode(features, feature_lengths)
        ctc_loss = self.ctc(encoded, encoded_lengths, tokens, token_lengths)
        ys_in, ys_out = add_sos_eos(tokens, self.sos, self.eos, IGNORE_ID)
        logits, _ = self.decoder(encoded, encoded_lengths, ys_in, token_lengths + 1)
        attention_loss = self.attention_loss(logits, ys_out)
        valid = ys_out != IGNORE_ID
        accuracy = (logits.argmax(-1)[valid] == ys_out[valid]).float().mean()
        weight = self.config.ctc_weight
        return {
            "loss": weight * ctc_loss + (1 - weight) * attention_loss,
            "ctc": ctc_loss.detach(),
            "attention": attention_loss.detach(),
            "accuracy": accuracy.detach(),
        }

    def parameter_counts(self) -> dict[str, int]:
        """Parameters of each part, for the model card."""

        def count(*modules: torch.nn.Module) -> int:
            return sum(p.numel() for m in modules for p in m.parameters())

        return {
            "subsampling": count(self.subsample),
            "conv_blocks": count(self.conv_blocks),
            "attention_blocks": count(self.attention_blocks, self.after_norm),
            "ctc": count(self.ctc),
            "decoder": count(self.decoder),
            "total": count(self),
        }
