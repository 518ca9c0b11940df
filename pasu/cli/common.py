"""What the command groups share: argument types, checks and defaults."""

import argparse
from pathlib import Path

from pasu.core.errors import PasuError
from pasu.core.paths import REPO_ROOT

SAMPLES = REPO_ROOT / "samples"
# What `add_subparsers` returns: each command group adds its sub-commands to it.
Commands = argparse._SubParsersAction

SHIPPED_MODEL_HELP = "device model directory (default: the shipped models/pretrained/pasu-base)"


def existing_path(path: str | None, what: str) -> Path | None:
    """A path the user named, checked before any long work starts."""
    if path is None:
        return None
    resolved = Path(path).expanduser()
    if not resolved.exists():
        raise PasuError(f"{what} not found: {resolved}")
    return resolved


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value
