"""Checks the shape of the SDK: no import cycle between the modules of
src/muster, and no Python file of the package, its tests or its tools over
MAX_LINES lines.

Every import of a module of the package counts, wherever it stands: at the
top, inside a function (a deferred import is still a cycle at run time) and
under ``if TYPE_CHECKING:`` (a cycle of types is a cycle of design, and
farm-studio draws it too). Types a lower module needs of a higher one are
declared where they are used (a Protocol) instead.

usage: python tools/check_shape.py
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "muster"
MAX_LINES = 500


def imports(path: Path, modules: set[str]) -> set[str]:
    """The modules of the package that the module at path imports."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                base = node.module
            elif node.level == 0 and node.module and node.module.split(".")[0] == "muster":
                base = ".".join(node.module.split(".")[1:2]) or None
            else:
                continue
            if base is None:  # from . import a, b: submodules, or names of __init__
                out.update(a.name if a.name in modules else "__init__" for a in node.names)
            else:
                out.add(base.split(".")[0])
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "muster":
                    out.add(parts[1] if len(parts) > 1 else "__init__")
    out.discard(path.stem)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main() -> int:
    problems = []
    files = {p.stem: p for p in PACKAGE.glob("*.py")}
    graph = {name: imports(p, set(files)) for name, p in files.items()}
    for comp in cycles(graph):
        ties = [f"{a} -> {b}" for a in comp for b in sorted(graph[a]) if b in comp]
        problems.append("an import cycle: " + ", ".join(ties))
    for f in sorted([*PACKAGE.glob("*.py"), *(ROOT / "tests").glob("*.py"), *(ROOT / "tools").glob("*.py")]):
        n = len(f.read_text().splitlines())
        if n > MAX_LINES:
            problems.append(f"{f.relative_to(ROOT)} has {n} lines (at most {MAX_LINES})")
    for problem in problems:
        print("check_shape:", problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
