import pytest

torch = pytest.importorskip("torch")

from pasu.models.asr_model import IGNORE_ID, LateContextModel, subsampled_length  # noqa: E402

from .conftest import tiny_model_config  # noqa: E402

TINY = tiny_model_config()


@pytest.fixture
def model() -> LateContextModel:
    torch.manual_seed(0)
    return LateContextModel(TINY).eval()


def test_incremental_conv_stack_equals_whole_utterance(model):
    features = torch.randn(1, 257, TINY.num_mel_bins)
    with torch.no_grad():
        whole, lengths = model.ingest(features, torch.tensor([257]))
        caches, pending, outputs = model.initial_caches(), features[:, :0], []
        for size in [5, 1, 30, 7, 64, 3, 100, 47]:  # sums to 257
            pending = torch.cat([pending, features[:, :size]], 1)
            features = features[:, size:]
            new = subsampled_length(pending.size(1))
            if new:
                out, caches = model.ingest_chunk(pending, caches)
                outputs.append(out)
                pending = pending[:, 4 * new :]
    incremental = torch.cat(outputs, 1)
    assert incremental.shape == whole.shape == (1, int(lengths[0]), TINY.d_model)
    assert torch.allclose(incremental, whole, atol=1e-4)


def test_padding_does_not_change_the_ingested_frames(model):
    # The attention blocks' convolution (ESPnet's ConformerConvolution) sees padding in batched
    # training as in ESPnet; the device runs one utterance at a time, without padding.
    features = torch.randn(1, 120, TINY.num_mel_bins)
    padded = torch.cat([features, torch.randn(1, 40, TINY.num_mel_bins)], 1)
    with torch.no_grad():
        alone, alone_lengths = model.ingest(features, torch.tensor([120]))
        batched, lengths = model.ingest(padded, torch.tensor([120]))
    assert int(lengths[0]) == int(alone_lengths[0]) == subsampled_length(120) == alone.size(1)
    assert torch.allclose(alone, batched[:, : int(lengths[0])], atol=1e-5)


def test_hybrid_loss_trains(model):
    model.train()
    torch.manual_seed(1)
    features = torch.randn(2, 150, TINY.num_mel_bins)
    tokens = torch.tensor([[5, 6, 7, 8], [9, 10, IGNORE_ID, IGNORE_ID]])
    lengths, token_lengths = torch.tensor([150, 120]), torch.tensor([4, 2])
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    first = None
    for _ in range(15):
        out = model(features, lengths, tokens, token_lengths)
        optimizer.zero_grad()
        out["loss"].backward()
        optimizer.step()
        first = first if first is not None else float(out["loss"].detach())
    assert float(out["loss"]) < 0.5 * first
    assert set(out) == {"loss", "ctc", "attention", "accuracy"}


def test_compute_cost_splits_ingestion_from_what_runs_after(model):
    from pasu.models.compute_cost import compute_cost

    cost = compute_cost(model, seconds=2.0)
    per_second = cost["gflops_per_audio_second"]
    assert per_second["during_ingestion"] > 0 and per_second["after_ingestion_encoder"] > 0
    assert 0 < per_second["streaming_share"] < 1
    assert cost["parameters"]["total"] == sum(p.numel() for p in model.parameters())
