"""How PASU installs: one name, `pasu`, whose sub-packages live in the card's folders; and the
offline install that a lent GPU machine (no registry) runs on its copy of the repository."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
OFFLINE_INSTALL = ["-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index"]
FOLDERS = {
    "pasu.device": "device",
    "pasu.cloud": "cloud",
    "pasu.offramp": "offramp",
    "pasu.models": "models",
    "pasu.eval.tts": "eval/tts",
    "pasu.core": "pasu/core",
}


@pytest.fixture
def source(tmp_path) -> Path:
    """The code and build files of the repository (no shipped models), so that building leaves
    nothing behind in the working tree."""
    copy = tmp_path / "source"
    ignore = shutil.ignore_patterns("__pycache__", "pretrained", "*.egg-info")
    for folder in ("pasu", "device", "cloud", "offramp", "models", "eval"):
        shutil.copytree(REPO / folder, copy / folder, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, copy / name)
    return copy


def _without_site_packages(code: str, cwd: Path) -> subprocess.CompletedProcess:
    """Python with no site-packages at all (-S), as on a machine where PASU is not installed."""
    return subprocess.run(
        [sys.executable, "-S", "-c", code], cwd=cwd, capture_output=True, text=True, check=False
    )


def test_offline_editable_install_maps_every_package(source, tmp_path):
    target = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, *OFFLINE_INSTALL, "--target", str(target), "-e", str(source)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    names = ", ".join(FOLDERS)
    probe = f"import {names}; print('|'.join(m.__path__[0] for m in ({names})))"
    before = _without_site_packages(probe, tmp_path)
    assert "ModuleNotFoundError" in before.stderr  # nothing but the install below provides them
    after = _without_site_packages(
        f"import site; site.addsitedir({str(target)!r}); {probe}", tmp_path
    )
    assert after.returncode == 0, after.stderr
    found = [Path(p) for p in after.stdout.strip().split("|")]
    assert found == [source / folder for folder in FOLDERS.values()]


def test_the_wheel_holds_only_pasu(source, tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(tmp_path),
            str(source),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = tmp_path.glob("pasu-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {
        "pasu",
        wheel.name.split("-py3")[0] + ".dist-info",
    }
    for module in ("pasu/device/engine.py", "pasu/models/train_gpu.py", "pasu/core/slurp.py",
                   "pasu/eval/tts/corpus.py", "pasu/api.py"):  # fmt: skip
        assert module in names
