import pytest

from pasu.core.errors import ConfigError
from pasu.speech.tokenizer import BLANK_ID, UNK_ID, Tokenizer, train_tokenizer

SENTENCES = [
    "wake me up at eight am",
    "play some jazz music",
    "what is the weather like today",
    "turn off the kitchen lights",
    "set an alarm for tomorrow morning",
] * 20


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> Tokenizer:
    return Tokenizer(train_tokenizer(SENTENCES, tmp_path_factory.mktemp("tok") / "sp", 40))


def test_round_trip_and_id_layout(tokenizer):
    ids = tokenizer.encode("Play some JAZZ")
    assert all(UNK_ID < i < tokenizer.sos_eos_id for i in ids)
    assert tokenizer.decode(ids) == "play some jazz"
    assert tokenizer.piece(BLANK_ID) == "<blank>" and tokenizer.piece(UNK_ID) == "<unk>"
    assert tokenizer.vocab_size == tokenizer.sos_eos_id + 1


def test_decode_drops_blank_and_sos_eos(tokenizer):
    ids = tokenizer.encode("turn off")
    assert tokenizer.decode([BLANK_ID, *ids, tokenizer.sos_eos_id]) == "turn off"


def test_missing_model_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="tokenizer model not found"):
        Tokenizer(tmp_path / "none.model")
