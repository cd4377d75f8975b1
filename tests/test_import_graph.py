"""mdcron's own imports, read with `ast`: no import circle, counting the imports inside functions
too (issue 27: a circle through a function-level import is still a circle, only hidden from the
module-level test). Imports under `if TYPE_CHECKING:` are for types only and left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "mdcron"

# Modules still on a circle through a function-level import: to be broken, never added to. The
# test fails when one of them is off every circle too, so that this list only shrinks.
KNOWN_ON_CIRCLES: set[str] = set()  # none left: keep it so


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported(module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The mdcron modules an import statement loads (`from . import x` loads mdcron.x)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = node.module or ""
        if node.level:
            base = f"{package}.{base}" if base else package
        names = [base] + [f"{base}.{alias.name}" for alias in node.names]
    return {n for n in names if n in MODULES and n != module}


def is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING"))


def imports(module: str, *, module_level: bool) -> set[str]:
    out: set[str] = set()

    def walk(body: list[ast.stmt], top: bool) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                if top or not module_level:
                    out.update(imported(module, node))
                continue
            if is_type_checking(node):
                continue
            nested = top and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                   ast.ClassDef, ast.Lambda))
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    walk([child], nested)
                elif isinstance(child, ast.excepthandler):
                    walk(child.body, nested)

    walk(ast.parse(MODULES[module].read_text(encoding="utf-8")).body, True)
    return out


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_walker_sees_what_it_must():
    assert "mdcron.state.store" in imports("mdcron.run.tick", module_level=True)
    # inside run_tick:
    assert "mdcron.schedule.cache" not in imports("mdcron.run.tick", module_level=True)
    assert "mdcron.schedule.cache" in imports("mdcron.run.tick", module_level=False)
    # TYPE_CHECKING
    assert "mdcron.cli.crontab_line" not in imports("mdcron.cli.doctor", module_level=True)
    # in functions
    assert "mdcron.cli.crontab_line" in imports("mdcron.cli.doctor", module_level=False)
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_level_import_circle():
    graph = {m: imports(m, module_level=True) for m in MODULES}
    assert circles(graph) == []


def test_no_import_circle_even_inside_functions():
    graph = {m: imports(m, module_level=False) for m in MODULES}
    on_circles = {m for circle in circles(graph) for m in circle}
    assert on_circles - KNOWN_ON_CIRCLES == set(), "a new circle: move the piece where it belongs"
    assert KNOWN_ON_CIRCLES - on_circles == set(), "off every circle: remove from KNOWN_ON_CIRCLES"
