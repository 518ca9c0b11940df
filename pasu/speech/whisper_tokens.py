"""Whisper token ids to text with a plain table (no `tokenizers`, whose loading of Whisper's
`tokenizer.json` alone costs ~23 MB of RSS).

Whisper's vocabulary is GPT-2's byte-level BPE: each token is a string over GPT-2's printable
stand-ins for the 256 byte values. CTranslate2's `vocabulary.txt` lists the tokens by id; text
is the concatenation of a sequence's tokens mapped back to bytes, decoded as UTF-8. Ids from
`<|endoftext|>` on are special tokens and produce no text.
"""

from pathlib import Path

import numpy as np

from pasu.core.errors import ConfigError

# Whisper tiny.en's special tokens (English-only vocabulary of 51,864).
END_OF_TEXT = 50256
START_OF_TRANSCRIPT = 50257
NO_TIMESTAMPS = 50362
# What a transcription without timestamps starts from.
TRANSCRIBE_PROMPT = [START_OF_TRANSCRIPT, NO_TIMESTAMPS]


def _byte_stand_ins() -> dict[str, int]:
    """GPT-2's map from the printable character that stands for each byte back to the byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]  # fmt: skip
    stand_ins, shifted = {}, 0
    for byte in range(256):
        if byte in printable:
            stand_ins[chr(byte)] = byte
        else:
            stand_ins[chr(256 + shifted)] = byte
            shifted += 1
    return stand_ins


class WhisperTokenText:
    def __init__(self, tokens: list[str]):
        stand_ins = _byte_stand_ins()
        self._bytes = [
            bytes(stand_ins[c] for c in token) if i < END_OF_TEXT else b""
            for i, token in enumerate(tokens)
        ]

    @classmethod
    def load(cls, directory: Path) -> "WhisperTokenText":
        path = Path(directory) / "vocabulary.txt"
        if not path.is_file():
            raise ConfigError(f"Whisper vocabulary not found: {path}")
        return cls(path.read_text(encoding="utf-8").split("\n")[:-1])

    def __call__(self, ids: list[int] | np.ndarray) -> str:
        return b"".join(self._bytes[int(i)] for i in ids).decode("utf-8", "replace").strip()
