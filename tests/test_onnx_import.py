"""Rebuilding the torch model from a model directory's ONNX graphs (`models.onnx_import`)."""

import json
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pasu.models.asr_model import LateContextModel  # noqa: E402
from pasu.models.checkpoints import load_checkpoint_model  # noqa: E402
from pasu.models.export import round_weights_to_float16, write_model_dir  # noqa: E402
from pasu.models.onnx_import import (  # noqa: E402
    GraphMismatch,
    calibrate_batchnorms,
    model_from_model_dir,
)
from pasu.models.weights import load_weights  # noqa: E402
from pasu.speech.frontend import NUM_MEL_BINS, GlobalCmvn  # noqa: E402
from pasu.speech.tokenizer import train_tokenizer  # noqa: E402

from .test_asr_model import TINY  # noqa: E402
from .test_tokenizer import SENTENCES  # noqa: E402


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """A tiny trained-looking model (BatchNorms with real statistics) and its model directory."""
    root = tmp_path_factory.mktemp("model")
    torch.manual_seed(0)
    tokenizer = train_tokenizer(SENTENCES, root / "sp", 38)
    GlobalCmvn(np.zeros(NUM_MEL_BINS), np.ones(NUM_MEL_BINS)).save(root / "cmvn.npz")
    model = LateContextModel(TINY).eval()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm1d):
                module.running_mean.normal_(0.0, 0.5)
                module.running_var.uniform_(0.5, 2.0)
                module.weight.uniform_(0.5, 1.5)
                module.bias.normal_(0.0, 0.3)
    round_weights_to_float16(model, min_elements=1024)
    write_model_dir(model, tokenizer, root / "cmvn.npz", root / "dir")
    return model, root / "dir"


def _features(seed: int, frames: int = 150) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    return torch.from_numpy(rng.standard_normal((1, frames, NUM_MEL_BINS)).astype(np.float32))


def _outputs(model: LateContextModel, features: torch.Tensor):
    with torch.no_grad():
        encoded, lengths = model.encode(features, torch.tensor([features.shape[1]]))
        tokens = torch.tensor([[TINY.vocab_size - 1, 5, 9, 3]])
        scores, _ = model.decoder.batch_score(tokens, [None], encoded)
    return encoded, model.ctc.log_softmax(encoded), scores


def test_rebuilt_model_computes_what_the_original_computes(shipped):
    original, model_dir = shipped
    rebuilt = model_from_model_dir(model_dir)
    assert not rebuilt.training
    for seed in (0, 1):
        for ours, theirs in zip(
            _outputs(rebuilt, _features(seed)), _outputs(original, _features(seed)), strict=True
        ):
            assert ours.shape == theirs.shape
            assert float((ours - theirs).abs().max()) < 1e-4
    # the tools that take a checkpoint take the model directory too
    same = load_checkpoint_model(model_dir)
    assert torch.equal(_outputs(same, _features(2))[0], _outputs(rebuilt, _features(2))[0])
    assert set(load_weights(model_dir)) == set(original.state_dict())


def test_calibrated_batchnorms_keep_eval_and_make_training_mode_agree(shipped):
    original, model_dir = shipped
    rebuilt = model_from_model_dir(model_dir)
    batches = [(_features(seed, 120).repeat(4, 1, 1), torch.full((4,), 120)) for seed in (3, 4)]
    before = _outputs(rebuilt, _features(5))[0]
    assert calibrate_batchnorms(rebuilt, batches) == 3  # one per convolution module
    assert not rebuilt.training
    after = _outputs(rebuilt, _features(5))[0]
    assert float((after - before).abs().max()) < 1e-4
    # In training mode a BatchNorm normalises by the batch's statistics: without calibration an
    # identity BatchNorm turns its input into unit-variance output; calibrated, it passes it on.
    norm = next(m for m in rebuilt.modules() if isinstance(m, torch.nn.BatchNorm1d))
    inputs = []
    hook = norm.register_forward_pre_hook(lambda _m, args: inputs.append(args[0]))
    _outputs(rebuilt, batches[0][0][:1])
    hook.remove()
    x = inputs[0]
    norm.train()
    with torch.no_grad():
        trained_mode = norm(x)
    norm.eval()
    assert float((trained_mode - x).abs().mean()) < 0.2 * float(x.abs().mean())


def test_graphs_of_another_config_are_refused(shipped, tmp_path):
    _, model_dir = shipped
    other = tmp_path / "other"
    shutil.copytree(model_dir, other)
    config = json.loads((other / "config.json").read_text())
    config["model"]["ffn_units"] *= 2
    (other / "config.json").write_text(json.dumps(config))
    with pytest.raises(GraphMismatch):
        model_from_model_dir(other)
    with pytest.raises(FileNotFoundError, match="not a model directory"):
        model_from_model_dir(tmp_path)


def test_an_initializer_this_export_code_does_not_write_is_refused(shipped, tmp_path):
    """Weights are read by the exporter's (partly anonymous) names: a graph from other export
    code must fail loudly, not load weights from the wrong names."""
    import onnx
    from onnx import numpy_helper

    _, model_dir = shipped
    other = tmp_path / "other"
    shutil.copytree(model_dir, other)
    graph_model = onnx.load(str(other / "encoder_top.onnx"))
    extra = np.ones((4, 4), np.float32)
    graph_model.graph.initializer.append(numpy_helper.from_array(extra, "onnx::MatMul_9999"))
    onnx.save(graph_model, str(other / "encoder_top.onnx"))
    with pytest.raises(GraphMismatch, match="onnx::MatMul_9999"):
        model_from_model_dir(other)


def test_the_shipped_model_rebuilt_matches_its_graphs_on_a_sample():
    from pasu.core.audio import load_audio
    from pasu.core.paths import REPO_ROOT
    from pasu.device.encoder import StreamingEncoder
    from pasu.device.model import DeviceModel
    from pasu.speech.frontend import compute_fbank

    model_dir = REPO_ROOT / "models" / "pretrained" / "pasu-base"
    if not model_dir.is_dir():
        pytest.skip("no shipped device model")
    device = DeviceModel(model_dir)
    features = compute_fbank(
        load_audio(REPO_ROOT / "samples" / "01-email_sendemail-close.wav"),
        GlobalCmvn.load(model_dir / "cmvn.npz"),
    )
    encoder = StreamingEncoder(device)
    encoder.accept(features)
    _, ctc_log_probs = encoder.contextualize()
    rebuilt = model_from_model_dir(model_dir)
    with torch.no_grad():
        encoded, _ = rebuilt.encode(torch.from_numpy(features)[None], torch.tensor([len(features)]))
        expected = rebuilt.ctc.log_softmax(encoded)[0].numpy()
    assert ctc_log_probs.shape == expected.shape
    assert np.abs(ctc_log_probs - expected).max() < 1e-3
    assert (ctc_log_probs.argmax(-1) == expected.argmax(-1)).all()
