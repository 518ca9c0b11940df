"""SLURP-format corpora: real SLURP and our synthesised SLURP-TTS read the same way.

A corpus directory DIR holds `DIR/<split>.jsonl` in SLURP's own line format (one sentence per
line, its audio in `recordings[].file`) and the audio under `DIR/audio/` (or another directory:
the real SLURP download keeps it in `slurp_real/`). Without a corpus directory, the text-only
splits come from `pasu.core.paths.slurp_text_dir()`.
"""

import json
import lzma
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from pasu.core.errors import DataError
from pasu.core.paths import slurp_text_dir

SPLITS = ("train", "devel", "test")


@dataclass(frozen=True)
class Sentence:
    """One SLURP sentence with its gold semantics (None where the split carries no intents)."""

    slurp_id: int | None
    text: str
    scenario: str | None
    action: str | None
    entities: tuple[dict, ...] = ()
    recordings: tuple[dict, ...] = ()
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def intent(self) -> str | None:
        """SLURP's intent label, `scenario_action`."""
        if self.scenario is None or self.action is None:
            return None
        return f"{self.scenario}_{self.action}"


@dataclass(frozen=True)
class Recording:
    """One audio recording of a sentence."""

    id: str
    audio_path: Path
    sentence: Sentence
    close_talk: bool
    # The speaker: a TTS voice slug in SLURP-TTS (None where the corpus does not say).
    voice: str | None = None

    @property
    def text(self) -> str:
        return self.sentence.text

    @property
    def scenario(self) -> str | None:
        return self.sentence.scenario

    @property
    def action(self) -> str | None:
        return self.sentence.action

    @property
    def intent(self) -> str | None:
        return self.sentence.intent

    @property
    def condition(self) -> str:
        return "close" if self.close_talk else "far"


def is_close_talk(file_name: str) -> bool:
    """SLURP names headset (close-talk) recordings `...-headset.flac`; the rest are far-field."""
    return "-headset" in Path(file_name).name


def _parse_sentence(record: dict, where: str) -> Sentence:
    text = record.get("sentence")
    if not isinstance(text, str):
        raise DataError(f"{where}: no 'sentence' string in this SLURP record")
    return Sentence(
        slurp_id=record.get("slurp_id"),
        text=text,
        scenario=record.get("scenario"),
        action=record.get("action"),
        entities=tuple(record.get("entities") or ()),
        recordings=tuple(record.get("recordings") or ()),
        raw=record,
    )


def _text_file(directory: Path, name: str) -> Path | None:
    """`name` in `directory`, plain or xz-compressed (`name.xz`, as the vendored copy)."""
    for candidate in (directory / name, directory / f"{name}.xz"):
        if candidate.is_file():
            return candidate
    return None


def _open_text(path: Path) -> TextIO:
    if path.suffix == ".xz":
        return lzma.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def read_jsonl(path: Path) -> list[Sentence]:
    """Parse a SLURP-format jsonl file (plain or `.xz`), with the line number in any error."""
    if not path.is_file():
        raise DataError(f"split file not found: {path}")
    sentences = []
    with _open_text(path) as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise DataError(f"{where}: not valid JSON ({error.msg})") from None
            if not isinstance(record, dict):
                raise DataError(f"{where}: expected a JSON object per line")
            sentences.append(_parse_sentence(record, where))
    return sentences


def load_sentences(split: str, text_dir: Path | None = None) -> list[Sentence]:
    """Text of a split: `<split>.jsonl`, or for train SLURP's `train_text.txt` (no intents)."""
    if split not in SPLITS:
        raise DataError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    directory = Path(text_dir) if text_dir else slurp_text_dir()
    jsonl = _text_file(directory, f"{split}.jsonl")
    if jsonl:
        return read_jsonl(jsonl)
    train_text = _text_file(directory, "train_text.txt") if split == "train" else None
    if train_text:
        with _open_text(train_text) as lines:
            return [Sentence(None, line.strip(), None, None) for line in lines if line.strip()]
    raise DataError(f"no text for split {split!r} in {directory} (set PASU_SLURP_TEXT?)")


def unique_sentences(sentences: list[Sentence]) -> list[Sentence]:
    """Drop repeated sentence texts, keeping the first occurrence (SLURP's train text repeats)."""
    seen: set[str] = set()
    kept = []
    for sentence in sentences:
        if sentence.text not in seen:
            seen.add(sentence.text)
            kept.append(sentence)
    return kept


def iter_recordings(
    data_dir: Path | str,
    split: str,
    audio_dir: Path | str | None = None,
    check_audio: bool = True,
) -> Iterator[Recording]:
    """Yield every recording of a split of the corpus in `data_dir`.

    With `check_audio`, a missing audio file is an error (listing how many are missing) rather
    than a surprise halfway through an evaluation.
    """
    data_dir = Path(data_dir)
    audio_root = Path(audio_dir) if audio_dir else data_dir / "audio"
    sentences = read_jsonl(data_dir / f"{split}.jsonl")
    recordings = [
        Recording(
            id=Path(entry["file"]).stem,
            audio_path=audio_root / entry["file"],
            sentence=sentence,
            close_talk=is_close_talk(entry["file"]),
            voice=entry.get("voice"),
        )
        for sentence in sentences
        for entry in sentence.recordings
        if isinstance(entry, dict) and "file" in entry
    ]
    if check_audio:
        missing = [r.audio_path for r in recordings if not r.audio_path.is_file()]
        if missing:
            raise DataError(
                f"{len(missing)} of {len(recordings)} audio files of {split} are missing under "
                f"{audio_root} (first: {missing[0].name}); pass --audio-dir if they live elsewhere"
            )
    yield from recordings


def load_recordings(
    data_dir: Path | str,
    split: str,
    audio_dir: Path | str | None = None,
    limit: int | None = None,
    condition: str | None = None,
) -> list[Recording]:
    """Recordings of a split, optionally only `close` or `far` ones, the first `limit` of them."""
    if condition not in (None, "close", "far"):
        raise DataError(f"unknown condition {condition!r}; expected 'close' or 'far'")
    recordings = [
        r
        for r in iter_recordings(data_dir, split, audio_dir)
        if condition is None or r.condition == condition
    ]
    return recordings[:limit] if limit is not None else recordings


def fixed_subset(recordings: list[Recording], size: int) -> list[Recording]:
    """Every k-th recording: both conditions and every voice, the same subset on every run."""
    if size >= len(recordings):
        return recordings
    step = len(recordings) / size
    return [recordings[int(i * step)] for i in range(size)]


def rendition_of(file_name: str) -> int | None:
    """The rendition index in a SLURP-TTS file name (`tts-train-00004-6-...`), else None."""
    match = re.match(r"tts-[a-z]+-\d+-(\d+)-", file_name)
    return int(match.group(1)) if match else None
