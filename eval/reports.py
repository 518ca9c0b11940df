"""Benchmark reports: JSON for machines, a Markdown table for people, both with the command and
date that produced them."""

import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

_PACKAGES = ("onnxruntime", "numpy", "faster-whisper", "ctranslate2", "torch", "espnet")


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f} %"


def command_line() -> str:
    """How this process was started, as a user would type it."""
    return "pasu " + shlex.join(sys.argv[1:])


def module_command(module: str, argv: list[str] | None) -> str:
    """The command line of a `python -m` tool: its arguments, or this process's."""
    return f"python -m {module} " + shlex.join(sys.argv[1:] if argv is None else argv)


def machine() -> str:
    """The machine a result was measured on: architecture, cores and CPU model."""
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.machine()}, {os.cpu_count()} cores, {cpu}"


def software_versions() -> dict[str, str | None]:
    """The code and libraries a result came from: the repository's commit (marked `+dirty`
    when the work tree has changes) and the versions of the packages that do the work."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
        except OSError:
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "--short", "HEAD")
    if commit and git("status", "--porcelain", "--untracked-files=no"):
        commit += "+dirty"
    found: dict[str, str | None] = {"pasu": commit}
    for package in _PACKAGES:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    return found


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
