"""The package's layers: every module imports, no import loops, and imports point down the layers only.

The graph is read from the source (function-level and type-only imports included), so a lazy
import that reaches up a layer counts as much as a top-level one.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "rest_core"

# Bottom to top. A module may import its own layer and the layers below it, never above.
LAYERS: tuple[tuple[str, ...], ...] = (
    # leaves: the numba switch, the draft-source table, cores, the device kind
    ("rest_core._jit", "rest_core.sources", "rest_core.cpus", "rest_core.devices"),
    ("rest_core.config", "rest_core.knobs"),  # validated settings and the knob schema
    ("rest_core.store",),  # corpora, the on-disk datastore format, building, uploads
    ("rest_core.drafting",),  # draft sources, trie, tree layout, one step's draft
    ("rest_core.budget",),  # acceptance model, cost curve, selection, auto budget
    ("rest_core.decode",),  # models, events, sampling, masks, KV cache, the engine
    ("rest_core.serve",),  # REST as a vLLM speculative proposer, its launcher and bench worker
    ("rest_core.bench",),  # suites, runners, the benchmark loop, reports, ablations
    ("rest_core.ui",),  # what the app's sessions share and hold (no Gradio)
    ("rest_core.commands", "rest_core.cli", "rest_core.__main__", "rest_core"),  # the CLI
)


def modules() -> dict[str, Path]:
    out = {}
    for p in PACKAGE.rglob("*.py"):
        parts = p.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def import_graph() -> dict[str, set[str]]:
    """rest_core module -> the rest_core modules it imports anywhere in its file."""
    mods = modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods else node.module for a in node.names
                ]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[name] |= {t for t in targets if t in mods and t != name}
    return graph


def layer_of(module: str) -> int:
    best, rank = -1, None
    for i, layer in enumerate(LAYERS):
        for prefix in layer:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), i
    assert rank is not None, f"{module} belongs to no layer: add it to LAYERS"
    return rank


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


def test_every_module_has_a_layer_and_imports_point_down():
    graph = import_graph()
    upward = [(m, t) for m, targets in graph.items() for t in targets if layer_of(t) > layer_of(m)]
    assert upward == []


def test_no_import_loops():
    graph = import_graph()
    assert [m for m in graph if reaches(graph, m, m)] == []


def test_the_layer_test_sees_an_upward_import(tmp_path):
    """The check itself can fail: a drafting module that imports the UI is reported."""
    fake = tmp_path / "rest_core"
    (fake / "drafting").mkdir(parents=True)
    (fake / "ui").mkdir()
    (fake / "drafting" / "trie.py").write_text("def f():\n    from rest_core.ui.style import esc\n")
    (fake / "ui" / "style.py").write_text("esc = 1\n")
    globals()["PACKAGE"], saved = fake, PACKAGE
    try:
        graph = import_graph()
    finally:
        globals()["PACKAGE"] = saved
    assert [(m, t) for m, ts in graph.items() for t in ts if layer_of(t) > layer_of(m)] == [
        ("rest_core.drafting.trie", "rest_core.ui.style")
    ]


@pytest.mark.parametrize("module", sorted(modules()))
def test_every_module_imports(module):
    importlib.import_module(module)
