import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pasu.device.encoder import StreamingEncoder  # noqa: E402
from pasu.device.model import DeviceModel  # noqa: E402
from pasu.models.asr_model import LateContextModel  # noqa: E402
from pasu.models.export import round_weights_to_float16, write_model_dir  # noqa: E402
from pasu.speech.frontend import NUM_MEL_BINS, GlobalCmvn  # noqa: E402
from pasu.speech.tokenizer import train_tokenizer  # noqa: E402

from .test_asr_model import TINY  # noqa: E402
from .test_tokenizer import SENTENCES  # noqa: E402


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A tiny random model, exported the way shipped models are."""
    root = tmp_path_factory.mktemp("model")
    torch.manual_seed(0)
    tokenizer = train_tokenizer(SENTENCES, root / "sp", 38)  # 38 pieces + sos/eos = 39 < 40
    GlobalCmvn(np.zeros(NUM_MEL_BINS), np.ones(NUM_MEL_BINS)).save(root / "cmvn.npz")
    model = LateContextModel(TINY).eval()
    # The graphs store weights as float16: compare with a torch model rounded the same way.
    round_weights_to_float16(model, min_elements=1024)
    write_model_dir(model, tokenizer, root / "cmvn.npz", root / "dir")
    return model, DeviceModel(root / "dir")


def test_streamed_onnx_encoder_matches_torch_whole_utterance(exported):
    model, device = exported
    features = np.random.default_rng(0).standard_normal((333, NUM_MEL_BINS)).astype(np.float32)
    encoder = StreamingEncoder(device)
    for chunk in np.array_split(features, [10, 13, 60, 61, 200]):
        encoder.accept(chunk)
    encoded, ctc_log_probs = encoder.contextualize()
    with torch.no_grad():
        expected, lengths = model.encode(torch.from_numpy(features)[None], torch.tensor([333]))
        expected_ctc = model.ctc.log_softmax(expected)
    assert encoded.shape == tuple(expected.shape) and int(lengths[0]) == encoder.num_frames
    assert np.abs(encoded - expected.numpy()).max() < 1e-4
    assert np.abs(ctc_log_probs - expected_ctc[0].numpy()).max() < 1e-4


def test_onnx_decoder_step_matches_torch_for_any_batch_and_length(exported):
    model, device = exported
    encoded = np.random.default_rng(1).standard_normal((1, 21, TINY.d_model)).astype(np.float32)
    sos = TINY.vocab_size - 1
    for batch, length in ((1, 1), (5, 7)):
        tokens = np.random.default_rng(batch).integers(2, 38, (batch, length))
        tokens[:, 0] = sos
        log_probs = device.decoder_step(tokens, device.decoder_memory(encoded))
        with torch.no_grad():
            memory = torch.from_numpy(encoded).expand(batch, -1, -1)
            expected, _ = model.decoder.batch_score(
                torch.from_numpy(tokens), [None] * batch, memory
            )
        assert log_probs.shape == (batch, TINY.vocab_size)
        assert np.abs(log_probs - expected.numpy()).max() < 1e-4


def test_onnx_draft_check_equals_one_step_per_prefix(exported):
    _, device = exported
    encoded = np.random.default_rng(2).standard_normal((1, 17, TINY.d_model)).astype(np.float32)
    memory = device.decoder_memory(encoded)
    tokens = np.random.default_rng(3).integers(2, 38, 9)
    tokens[0] = TINY.vocab_size - 1
    draft = device.decoder_draft(tokens, memory)
    steps = np.stack([device.decoder_step(tokens[None, :n], memory)[0] for n in range(1, 10)])
    assert draft.shape == (9, TINY.vocab_size)
    assert np.abs(draft - steps).max() < 1e-4


def test_export_leaves_the_model_in_eval_mode(exported):
    model, _ = exported
    assert not any(module.training for module in model.modules())


def test_graphs_store_large_weights_as_float16(exported):
    import onnx

    _, device = exported
    graph = onnx.load(str(device.directory / "encoder_top.onnx")).graph
    kinds = {i.data_type for i in graph.initializer if i.name.endswith("__fp16")}
    assert kinds == {onnx.TensorProto.FLOAT16}
    assert device.config["weights_stored_as"] == "float16"
