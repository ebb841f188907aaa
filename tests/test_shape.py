"""Files with one job and functions that fit on a screen: no module of rest_core (nor app.py and
the app's tab modules) over 600 lines, no function over 60 (from its `def` to its last line)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 60


def sources() -> list[Path]:
    return sorted((ROOT / "rest_core").rglob("*.py")) + sorted(ROOT.glob("*.py"))


def test_no_file_over_600_lines():
    long = {
        str(p.relative_to(ROOT)): n for p in sources() if (n := len(p.read_text("utf-8").splitlines())) > MAX_FILE_LINES
    }
    assert long == {}


def test_no_function_over_60_lines():
    long = {}
    for p in sources():
        for node in ast.walk(ast.parse(p.read_text("utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long[f"{p.relative_to(ROOT)}:{node.lineno} {node.name}"] = n
    assert long == {}
