"""The browser's modules import each other without a cycle, late (in-function) imports included."""

from __future__ import annotations

import ast
from pathlib import Path

BROWSER = Path(__file__).resolve().parent.parent / "marin" / "browser"


def browser_imports() -> dict[str, set[str]]:
    """Module name -> the marin.browser modules it imports anywhere in its source."""
    graph: dict[str, set[str]] = {}
    for path in sorted(BROWSER.glob("*.py")):
        name = f"marin.browser.{path.stem}"
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            found |= {t for t in targets if t.startswith("marin.browser.") and (BROWSER / f"{t[14:]}.py").exists()}
        graph[name] = found - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m) :] + [m]
            if m not in state and (cycle := visit(m)):
                return cycle
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (cycle := visit(n)):
            return cycle
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_in_the_browser():
    graph = browser_imports()
    assert "marin.browser.step_pages" in graph["marin.browser.compare"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))
