"""Parameters and FLOPs of the device model, split as in PASU's Table 4: what runs during
ingestion (subsampling + convolution blocks, per audio segment) and what must run after the
end of speech (attention blocks + CTC over the whole input, and each decoder step)."""

import torch
from torch.utils.flop_counter import FlopCounterMode

from pasu.models.asr_model import LateContextModel, subsampled_length

FRAMES_PER_SECOND = 100


def _flops(function, *args) -> int:
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        function(*args)
    return counter.get_total_flops()


def compute_cost(model: LateContextModel, seconds: float = 4.0, tokens: int = 12) -> dict:
    """GFLOPs per second of audio for a `seconds`-long utterance, and per decoder step."""
    model = model.eval()
    num_frames = int(seconds * FRAMES_PER_SECOND) + 3
    features = torch.randn(1, num_frames, model.config.num_mel_bins)
    ingestion = _flops(model.ingest_chunk, features, model.initial_caches())
    encoder_frames = subsampled_length(num_frames)
    ingested = torch.randn(1, encoder_frames, model.config.d_model)
    attention = _flops(model.contextualize, ingested, torch.tensor([encoder_frames]))
    attention += _flops(model.ctc.log_softmax, ingested)
    # The device's decoder graphs: keys/values projected once, then a step per token.
    from pasu.models.export import DecoderMemoryGraph, DecoderStepGraph

    history = torch.full((5, tokens), model.sos, dtype=torch.long)
    with torch.no_grad():
        keys, values = DecoderMemoryGraph(model)(ingested)
    decoder_memory = _flops(DecoderMemoryGraph(model), ingested)
    newest = torch.tensor([tokens - 1])
    decoder_step = _flops(DecoderStepGraph(model), history, newest, keys, values) / 5
    giga = 1e9
    return {
        "parameters": model.parameter_counts(),
        "utterance_seconds": seconds,
        "gflops_per_audio_second": {
            "during_ingestion": round(ingestion / seconds / giga, 3),
            "after_ingestion_encoder": round(attention / seconds / giga, 3),
            "streaming_share": round(ingestion / (ingestion + attention), 3),
        },
        "gflops_per_decoder_step_per_hypothesis": round(decoder_step / giga, 4),
        "gflops_decoder_memory_per_decode": round(decoder_memory / giga, 4),
    }
