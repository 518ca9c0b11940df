"""The architecture as a contract: every module's imports (read from its source, AST) point
only down the layer table, sibling layers never import each other, no two modules import each
other in a circle, and the device runtime loads no training or cloud libraries."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Where each installed package's source lives (pyproject's package-dir).
PACKAGE_DIRS = {
    "pasu": REPO / "pasu",
    "pasu.device": REPO / "device",
    "pasu.cloud": REPO / "cloud",
    "pasu.offramp": REPO / "offramp",
    "pasu.models": REPO / "models",
    "pasu.eval": REPO / "eval",
}
# Bottom to top. A module may import its own group and any group of a lower layer; groups that
# share a layer are siblings and never import each other.
LAYERS = [
    ["pasu.core"],  # numpy foundation: errors, paths, audio input, text, metrics, SLURP data
    ["pasu.speech"],  # shared by device, cloud and training: frontend, tokenizer, decoding, intent
    ["pasu.offramp"],  # confidence scores and offload policies
    ["pasu.device", "pasu.cloud", "pasu.models"],  # runtime, service, torch training
    ["pasu.embedded_cloud"],  # the only place where a device meets an in-process cloud
    ["pasu.api"],  # understand(), Understander
    ["pasu.eval"],  # corpora, benchmarks, the SLURP evaluation (which scores the API itself)
    ["pasu.cli", "pasu"],  # the command line; `pasu` itself re-exports the API
]
LAYER_OF = {group: level for level, groups in enumerate(LAYERS) for group in groups}
# The offramp's trainers need torch; the device only loads fitted scorers.
OFFRAMP_TRAINING = {"pasu.offramp.fit", "pasu.offramp.train"}
HEAVY_LIBRARIES = ["torch", "sklearn", "faster_whisper", "ctranslate2", "espnet"]


def _modules() -> dict[str, Path]:
    modules = {}
    for package, directory in PACKAGE_DIRS.items():
        for path in directory.rglob("*.py"):
            parts = path.relative_to(directory).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join((package, *parts))
            modules.setdefault(name, path)  # pasu/core/... is found once, under "pasu"
    return modules


def _imports(name: str, path: Path) -> set[str]:
    """Every pasu module named by an import statement anywhere in the file, lazy ones too."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {module for module in found if module == "pasu" or module.startswith("pasu.")}


def _group(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


MODULES = _modules()
IMPORTS = {name: _imports(name, path) & MODULES.keys() for name, path in MODULES.items()}


def test_every_module_belongs_to_a_layer():
    assert sorted(n for n in MODULES if _group(n) not in LAYER_OF) == []


def test_imports_only_point_down_the_layers():
    upward = [
        f"{name} -> {target}"
        for name, targets in IMPORTS.items()
        for target in targets
        if _group(target) != _group(name) and LAYER_OF[_group(target)] >= LAYER_OF[_group(name)]
    ]
    assert sorted(upward) == []


def test_no_modules_import_each_other_in_a_circle():
    def reaches(start: str, goal: str) -> bool:
        seen, stack = set(), [start]
        while stack:
            module = stack.pop()
            if module == goal:
                return True
            if module not in seen:
                seen.add(module)
                stack.extend(IMPORTS.get(module, ()) - {module})
        return False

    packages = {n for n, p in MODULES.items() if p.name == "__init__.py"}
    circles = sorted(
        f"{a} <-> {b}"
        for a, targets in IMPORTS.items()
        for b in targets - packages
        if a < b and a not in packages and reaches(b, a)
    )
    assert circles == []


def test_the_layer_check_sees_an_upward_import(tmp_path):
    upward = tmp_path / "probe.py"
    upward.write_text("def f():\n    from pasu.device.engine import Engine\n")
    found = _imports("pasu.core.probe", upward)
    assert "pasu.device.engine" in found
    assert LAYER_OF[_group("pasu.device.engine")] > LAYER_OF[_group("pasu.core.probe")]


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, check=False
    )


def test_the_device_path_loads_no_training_or_cloud_library():
    device_path = sorted(
        name
        for name in MODULES
        if _group(name) in {"pasu.core", "pasu.speech", "pasu.offramp", "pasu.device"}
        and name not in OFFRAMP_TRAINING
    ) + ["pasu.api", "pasu.embedded_cloud"]
    code = (
        f"import sys; import {', '.join(device_path)}; "
        f"print(','.join(m for m in {HEAVY_LIBRARIES!r} if m in sys.modules))"
    )
    done = _run(code, REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"the device path imported {done.stdout.strip()}"


@pytest.mark.parametrize("name", ["device", "cloud", "offramp", "models", "eval"])
def test_only_pasu_is_installed(name, tmp_path):
    done = _run(f"import {name}", tmp_path)  # outside the repository root
    assert "ModuleNotFoundError" in done.stderr, f"`import {name}` works outside the repository"
