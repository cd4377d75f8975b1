"""The folders are the architecture (issue 9): each folder's imports go only to the folders below
it in LAYERS, imports inside functions too (issue 27: a lazy import keeps a heavy library off a
path, it never reaches up a layer; what an upper layer must do, it passes down as a value or a
callable). Every folder says in its docstring what it owns and may import, and the pure modules
import no I/O. Imports under `if TYPE_CHECKING:` are for types only and left out.
"""

from __future__ import annotations

import ast

import pytest
from conftest import REPO
from test_import_graph import MODULES, imports

PACKAGE = REPO / "mdcron"

# Bottom to top: a module may import, at module level, only folders to its left.
LAYERS = ["core", "settings", "tasks", "state", "schedule", "alerts", "hosts", "claude", "run",
          "selfheal", "cli", "web"]

# Pure logic: no file, process, network or database module, and no mdcron module that has one.
PURE = ["mdcron.core.clock", "mdcron.core.units", "mdcron.core.problems", "mdcron.core.outcome",
        "mdcron.core.envref", "mdcron.core.urlscheme", "mdcron.core.cron", "mdcron.core.limits",
        "mdcron.core.wall_time", "mdcron.core.due", "mdcron.core.records", "mdcron.core.wall_steps",
        "mdcron.run.escalation_policy"]
IO_MODULES = {"sqlite3", "subprocess", "socket", "urllib", "http", "shutil", "fcntl",
              "portalocker", "psycopg", "anthropic", "apprise"}


def folder_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 else None


def test_every_module_lives_in_a_folder_and_every_folder_is_layered():
    loose = sorted(m for m in MODULES if m != "mdcron" and folder_of(m) is None
                   and MODULES[m].name != "__init__.py")
    assert loose == [], "put these modules in a folder (see LAYERS)"
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert folders == set(LAYERS)


@pytest.mark.parametrize("folder", LAYERS)
def test_each_folder_says_what_it_owns_and_may_import(folder):
    doc = ast.get_docstring(ast.parse((PACKAGE / folder / "__init__.py").read_text()))
    assert doc and len(doc) > 40, f"mdcron/{folder}/__init__.py: say what the folder owns"
    below = LAYERS[:LAYERS.index(folder)]
    if folder not in ("core", "web", "cli"):
        assert f"May import: {', '.join(below)}." in " ".join(doc.split()), doc


def test_module_level_imports_only_go_down_the_layers():
    assert upward_imports(module_level=True) == []


# Imports inside functions that still go up a layer: none are left (issue 27 item 6), and none may
# come back: move the piece to its layer, or pass it down from the caller.
KNOWN_UPWARD: set[str] = set()


def upward_imports(*, module_level: bool) -> list[str]:
    upward = []
    for module in MODULES:
        here = folder_of(module)
        if here is None:
            continue
        for target in imports(module, module_level=module_level):
            there = folder_of(target)
            if there and there != here and LAYERS.index(there) > LAYERS.index(here):
                upward.append(f"{module} -> {target}")
    return sorted(upward)


def test_every_import_goes_down_the_layers_even_inside_functions():
    upward = set(upward_imports(module_level=False))
    assert upward - KNOWN_UPWARD == set(), "move the piece to its layer, or pass it down"
    assert KNOWN_UPWARD - upward == set(), "an upward import is gone: remove it from KNOWN_UPWARD"


def test_the_layer_check_sees_an_upward_import():
    assert folder_of("mdcron.run.tick") == "run"
    assert "mdcron.state.store" in imports("mdcron.run.tick", module_level=True)
    assert LAYERS.index("state") < LAYERS.index("run")


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_import_no_io(module):
    tree = ast.parse(MODULES[module].read_text())
    stdlib = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            stdlib.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            stdlib.add(node.module.split(".")[0])
    assert stdlib & IO_MODULES == set()
    assert {m for m in imports(module, module_level=False) if m not in PURE} == set()
