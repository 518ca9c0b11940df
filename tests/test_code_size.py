"""Files and functions a reader can hold: no source file over 400 lines, no function over 80
(ruff has no file-length rule, and PLR0915 counts statements, not lines)."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE_DIRS = ["pasu", "device", "cloud", "offramp", "models", "eval", "tests"]
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 80


def _sources() -> list[Path]:
    return sorted(p for d in SOURCE_DIRS for p in (REPO / d).rglob("*.py"))


def _long_functions(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = node.end_lineno - first + 1
            if length > MAX_FUNCTION_LINES:
                where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
                found.append(f"{where}:{node.lineno} {node.name}: {length} lines")
    return found


def test_no_source_file_is_over_400_lines():
    long = [
        f"{p.relative_to(REPO)}: {n} lines"
        for p in _sources()
        if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES
    ]
    assert long == []


def test_no_function_is_over_80_lines():
    assert [f for p in _sources() for f in _long_functions(p)] == []


def test_the_function_check_counts_decorators_and_bodies(tmp_path):
    probe = tmp_path / "probe.py"
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    probe.write_text(f"import functools\n\n\n@functools.cache\ndef long():\n{body}\n")
    assert [f.split(" ", 1)[1] for f in _long_functions(probe)] == ["long: 82 lines"]
