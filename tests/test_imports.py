"""The drafting core imports without loops (function-level and type-only imports included)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "rest_core"
CORE = ("budget", "draft", "engine", "events", "retrieval", "sampling", "sources", "tree", "trie", "_jit", "config")


def import_graph() -> dict[str, set[str]]:
    """rest_core module -> the rest_core modules it imports anywhere in its file."""
    modules = {".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[name] |= {t for t in targets if t in modules and t != name and not t.endswith("__init__")}
    return graph


def reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = set(), list(graph[start])
    while todo:
        m = todo.pop()
        if m == goal:
            return True
        if m not in seen:
            seen.add(m)
            todo.extend(graph[m])
    return False


def test_no_import_loop_through_the_core():
    graph = import_graph()
    loops = [m for m in (f"rest_core.{c}" for c in CORE) if m in graph and reaches(graph, m, m)]
    assert loops == []
