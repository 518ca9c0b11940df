"""Writing results in SLURP's prediction format, so the official SLURP scorer reads our output."""

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Prediction:
    """What a system said about one recording."""

    file: str
    text: str
    intent: str | None
    entities: list[dict] = field(default_factory=list)

    def to_slurp(self) -> dict:
        """One line of SLURP's format: `{"file", "text", "scenario", "action", "entities"}`."""
        scenario, _, action = (self.intent or "_").partition("_")
        return {
            "file": self.file,
            "text": self.text,
            "scenario": scenario,
            "action": action,
            "entities": self.entities,
        }


def write_predictions(path: Path, predictions: Iterable[Prediction]) -> int:
    """Write one JSON object per line; returns how many were written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as out:
        for prediction in predictions:
            out.write(json.dumps(prediction.to_slurp(), ensure_ascii=False) + "\n")
            count += 1
    return count
