"""A device model directory loaded into onnxruntime: its four graphs, tokenizer and CMVN."""

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort

from pasu.core.modeldir import (
    CMVN_FILE,
    CONFIG_FILE,
    GRAPHS,
    TOKENIZER_FILE,
    graph_file,
    require_model_dir,
)
from pasu.speech.frontend import GlobalCmvn
from pasu.speech.tokenizer import Tokenizer


@dataclass(frozen=True)
class ModelInfo:
    """What the runtime needs to know about a model's shapes."""

    d_model: int
    num_conv_blocks: int
    conv_cache_frames: int
    vocab_size: int


class DeviceModel:
    """Loads once per engine; sessions are shared by every stream of that engine."""

    def __init__(self, model_dir: Path | str, threads: int = 1):
        model_dir = require_model_dir(model_dir)
        self.directory = model_dir
        self.config = json.loads((model_dir / CONFIG_FILE).read_text())
        model = self.config["model"]
        self.info = ModelInfo(
            model["d_model"],
            model["num_conv_blocks"],
            self.config["conv_cache_frames"],
            model["vocab_size"],
        )
        self.tokenizer = Tokenizer(model_dir / TOKENIZER_FILE)
        self.cmvn = GlobalCmvn.load(model_dir / CMVN_FILE)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._sessions = {
            g: ort.InferenceSession(
                str(model_dir / graph_file(g)), options, providers=["CPUExecutionProvider"]
            )
            for g in GRAPHS
        }

    @property
    def sos_eos_id(self) -> int:
        return self.tokenizer.sos_eos_id

    def initial_caches(self) -> np.ndarray:
        i = self.info
        return np.zeros((i.num_conv_blocks, 1, i.d_model, i.conv_cache_frames), np.float32)

    def conv_stack(self, features: np.ndarray, caches: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        frames, caches = self._sessions["conv_stack"].run(
            None, {"features": features[None].astype(np.float32, copy=False), "caches": caches}
        )
        return frames[0], caches

    def encoder_top(self, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(T, d) ingested frames → encoder output (1, T, d) and CTC log-probs (T, vocab)."""
        encoded, ctc_log_probs = self._sessions["encoder_top"].run(
            None, {"frames": frames[None].astype(np.float32, copy=False)}
        )
        return encoded, ctc_log_probs[0]

    def decoder_memory(self, encoded: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cross-attention keys and values for one utterance, computed once per decode."""
        keys, values = self._sessions["decoder_memory"].run(None, {"encoded": encoded})
        return keys, values

    def decoder_step(self, tokens: np.ndarray, memory: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """Next-token log-probs (B, vocab) for B hypotheses `tokens` (B, L) starting with sos."""
        last = np.array([tokens.shape[1] - 1], np.int64)
        return self._decoder(tokens, last, memory)[:, 0]

    def decoder_draft(
        self, tokens: np.ndarray, memory: tuple[np.ndarray, np.ndarray]
    ) -> np.ndarray:
        """Log-probs (L, vocab) after every prefix of one token sequence (L,) starting with sos:
        what L beam steps along it would compute, in one call."""
        positions = np.arange(len(tokens), dtype=np.int64)
        return self._decoder(np.asarray(tokens)[None], positions, memory)[0]

    def _decoder(self, tokens: np.ndarray, positions: np.ndarray, memory) -> np.ndarray:
        (log_probs,) = self._sessions["decoder_step"].run(
            None,
            {
                "tokens": tokens.astype(np.int64, copy=False),
                "positions": positions,
                "keys": memory[0],
                "values": memory[1],
            },
        )
        return log_probs
