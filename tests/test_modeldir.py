import shutil

import pytest

from pasu.core.errors import ConfigError
from pasu.core.modeldir import (
    DECODING_FILES,
    DEFAULT_MODEL_DIR,
    TEXT_INTENT_JOBLIB,
    TEXT_INTENT_NPZ,
    TOKENIZER_FILE,
    intent_candidates,
    is_model_dir,
    require_model_dir,
)


def test_the_shipped_model_fulfils_the_contract():
    assert is_model_dir(DEFAULT_MODEL_DIR)
    assert require_model_dir(DEFAULT_MODEL_DIR) == DEFAULT_MODEL_DIR


def test_a_directory_without_its_tokenizer_is_refused_by_name(tmp_path):
    for name in DECODING_FILES:
        if name != TOKENIZER_FILE:
            shutil.copy(DEFAULT_MODEL_DIR / name, tmp_path / name)
    assert is_model_dir(tmp_path)  # graphs and config: torch weights can be rebuilt
    with pytest.raises(ConfigError, match=rf"lacks {TOKENIZER_FILE}$"):
        require_model_dir(tmp_path)  # but it cannot decode


def test_the_device_model_names_what_a_directory_lacks(tmp_path):
    from pasu.device.model import DeviceModel

    with pytest.raises(ConfigError, match="conv_stack.onnx, .*config.json"):
        DeviceModel(tmp_path)


def test_a_model_s_own_intent_classifier_comes_before_the_shared_one(tmp_path):
    assert intent_candidates(tmp_path) == [
        tmp_path / "intent.npz",
        tmp_path / "intent.joblib",
        TEXT_INTENT_NPZ,
        TEXT_INTENT_JOBLIB,
    ]
    assert TEXT_INTENT_NPZ.is_file() and TEXT_INTENT_JOBLIB.is_file()
