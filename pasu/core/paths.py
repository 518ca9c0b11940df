"""Where PASU finds its inputs and keeps its caches; every location can be overridden by env var."""

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    """Root of everything PASU caches outside git (corpora, features, checkpoints)."""
    return Path(os.environ.get("PASU_CACHE", Path.home() / ".cache" / "pasu")).expanduser()


def slurp_text_dir() -> Path:
    """Directory holding SLURP's text-only splits (test.jsonl, devel.jsonl, train_text.txt, each
    plain or xz-compressed); the repository carries its own copy."""
    default = REPO_ROOT / "data" / "slurp"
    return Path(os.environ.get("PASU_SLURP_TEXT", default)).expanduser()


def slurp_tts_dir() -> Path:
    """Default output directory of the synthesised SLURP-TTS corpus."""
    return cache_dir() / "slurp-tts"
