"""Benchmark reports: JSON for machines, a Markdown table for people, both with the command and
date that produced them."""

import datetime
import json
import shlex
import sys
from pathlib import Path


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f} %"


def command_line() -> str:
    """How this process was started, as a user would type it."""
    return "pasu " + shlex.join(sys.argv[1:])


def save_report(
    report: dict, table: str, json_path: Path | None, command: str | None = None
) -> str:
    """Write `report` (JSON) and `table` (Markdown, beside it) when a path is given; return the
    table for printing."""
    if json_path:
        command = command or command_line()
        stamped = report | {"command": command, "date": datetime.date.today().isoformat()}
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(stamped, indent=2) + "\n")
        json_path.with_suffix(".md").write_text(f"`{command}`\n\n{table}\n")
    return table
