"""Subword tokenizer: a sentencepiece unigram model over SLURP's training sentences.

Id layout, shared by CTC and the attention decoder: 0 = `<blank>` (CTC blank, never emitted as
text), 1 = `<unk>`, 2 .. n-1 = subword pieces, n = `<sos/eos>` (one past sentencepiece's ids).
The device runtime only needs `Tokenizer` (sentencepiece, no torch).
"""

from collections.abc import Sequence
from pathlib import Path

import sentencepiece as spm

from pasu.core.errors import ConfigError

BLANK_ID = 0
UNK_ID = 1


class Tokenizer:
    """Text ↔ token ids for the device model."""

    def __init__(self, model_path: Path | str):
        model_path = Path(model_path)
        if not model_path.is_file():
            raise ConfigError(f"tokenizer model not found: {model_path}")
        self._sp = spm.SentencePieceProcessor(model_file=str(model_path))
        self.sos_eos_id = self._sp.get_piece_size()

    @property
    def vocab_size(self) -> int:
        """Output size of the CTC and decoder layers (pieces + `<sos/eos>`)."""
        return self.sos_eos_id + 1

    def encode(self, text: str) -> list[int]:
        return self._sp.encode(text.lower())

    def decode(self, ids: Sequence[int]) -> str:
        pieces = [int(i) for i in ids if BLANK_ID < int(i) < self.sos_eos_id]
        return self._sp.decode(pieces)

    def piece(self, token_id: int) -> str:
        if token_id == self.sos_eos_id:
            return "<sos/eos>"
        return self._sp.id_to_piece(int(token_id))


def train_tokenizer(sentences: Sequence[str], out_prefix: Path, vocab_size: int = 300) -> Path:
    """Train the unigram model on `sentences`; returns the `.model` path."""
    out_prefix.parent.mkdir(parents=True, exist_ok=True)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([s.lower() for s in sentences if s.strip()]),
        model_prefix=str(out_prefix),
        vocab_size=vocab_size,
        model_type="unigram",
        character_coverage=1.0,
        pad_id=BLANK_ID,
        pad_piece="<blank>",
        unk_id=UNK_ID,
        bos_id=-1,
        eos_id=-1,
        input_sentence_size=1_000_000,
        shuffle_input_sentence=False,
        num_threads=1,
        minloglevel=2,
    )
    return out_prefix.with_suffix(".model")
