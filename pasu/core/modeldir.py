"""The model-directory contract: what a device model directory holds, and where the shipped
models live. Every tool takes these file names and defaults from here.

A device model directory (`models/pretrained/<name>`, written by `pasu export`) holds the four
ONNX graphs, the tokenizer, the CMVN statistics and `config.json`; optionally its own intent
classifier, its fitted offramp and its model card.
"""

from pathlib import Path

from pasu.core.errors import ConfigError
from pasu.core.paths import REPO_ROOT

PRETRAINED_DIR = REPO_ROOT / "models" / "pretrained"
DEFAULT_MODEL_NAME = "pasu-base"
DEFAULT_MODEL_DIR = PRETRAINED_DIR / DEFAULT_MODEL_NAME
# The text intent classifier for models that ship none of their own: the numpy export runs on
# the device without scikit-learn; the scikit-learn pipeline is what it was exported from.
TEXT_INTENT_NPZ = PRETRAINED_DIR / "intent-text.npz"
TEXT_INTENT_JOBLIB = PRETRAINED_DIR / "intent-text.joblib"
# The cloud's MiniLM intent classifier; it also teaches the device's text classifier.
CLOUD_INTENT_PATH = PRETRAINED_DIR / "cloud-intent" / "minilm-lr.npz"

GRAPHS = ("conv_stack", "encoder_top", "decoder_memory", "decoder_step")
CONFIG_FILE = "config.json"
TOKENIZER_FILE = "tokenizer.model"
CMVN_FILE = "cmvn.npz"
INTENT_FILES = ("intent.npz", "intent.joblib")
OFFRAMP_CONFIG_FILE = "offramp.json"
OFFRAMP_BILSTM_FILE = "offramp-bilstm.npz"
CARD_MARKDOWN_FILE = "MODEL_CARD.md"
CARD_JSON_FILE = "card.json"


def graph_file(graph: str) -> str:
    return f"{graph}.onnx"


# What decoding reads: a change to any of these is a different model.
DECODING_FILES = (*(graph_file(g) for g in GRAPHS), TOKENIZER_FILE, CMVN_FILE, CONFIG_FILE)


def is_model_dir(path: Path | str) -> bool:
    """Whether `path` holds a model's graphs and config (torch can be rebuilt from them)."""
    path = Path(path)
    return (path / CONFIG_FILE).is_file() and all((path / graph_file(g)).is_file() for g in GRAPHS)


def require_model_dir(path: Path | str) -> Path:
    """`path`, if it holds everything decoding needs; otherwise a clear error."""
    path = Path(path)
    missing = [name for name in DECODING_FILES if not (path / name).is_file()]
    if missing:
        raise ConfigError(f"model directory {path} lacks {', '.join(missing)}")
    return path


def intent_candidates(model_dir: Path) -> list[Path]:
    """Where a model's intent classifier is looked for, in order: its own, then the shared one."""
    own = [Path(model_dir) / name for name in INTENT_FILES]
    return [*own, TEXT_INTENT_NPZ, TEXT_INTENT_JOBLIB]
