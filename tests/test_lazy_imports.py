"""Imports inside functions, read with `ast` (issue 9 item 5): each one says why it is there.

An import belongs at the top of its module unless it keeps something slow off a path that does
not need it (the idle tick, a command that prints no table, a tick with no Claude task). Such an
import carries its reason: a comment on its own line, or on the comment line just above it (or
above the block of imports it opens), or a paragraph starting "Lazy imports:" in the module's
docstring for a module whose lazy imports all share one reason (commands.py: each command loads
only what it needs). A bare `# noqa: ...` or `# type: ignore` is no reason. Imports under
`if TYPE_CHECKING:` are for types only and left out.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

from conftest import REPO

PACKAGE = REPO / "mdcron"

# Modules that still have imports inside functions without a reason: to be given reasons (or
# hoisted), never added to. This set may only shrink: the last test fails when a module listed
# here no longer needs to be, so remove it then.
KNOWN_WITHOUT_REASONS: set[str] = set()

_PRAGMA = re.compile(r"noqa(:\s*[A-Z]+[0-9]+(\s*,\s*[A-Z]+[0-9]+)*)?|type:\s*ignore(\[[^\]]*\])?")


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING"))


def _lazy_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import inside a function (at any depth), outside `if TYPE_CHECKING:`."""
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)) and in_function:
                found.append(child)
            walk(child, in_function or isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    walk(tree, False)
    return found


def _comments(source: str) -> dict[int, str]:
    """Line number -> the text of the comment on that line (pragmas removed)."""
    out: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            out[token.start[0]] = _PRAGMA.sub("", token.string.lstrip("#")).strip(" ()")
    return out


def bare_lazy_imports(source: str) -> list[int]:
    """The line numbers of the imports inside functions that give no reason."""
    tree = ast.parse(source)
    doc = ast.get_docstring(tree) or ""
    if any(p.strip().startswith("Lazy imports:") for p in doc.split("\n\n")):
        return []
    comments = _comments(source)
    lines = source.splitlines()
    import_lines = {n for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                    for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)}
    bare = []
    for node in _lazy_imports(tree):
        own = range(node.lineno, (node.end_lineno or node.lineno) + 1)
        if any(comments.get(n) for n in own):
            continue
        above = node.lineno - 1
        while above in import_lines:
            above -= 1
        if above >= 1 and lines[above - 1].lstrip().startswith("#") and comments.get(above):
            continue
        bare.append(node.lineno)
    return bare


def _bare_by_module() -> dict[str, list[int]]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        bare = bare_lazy_imports(path.read_text(encoding="utf-8"))
        if bare:
            found[path.relative_to(PACKAGE).as_posix()] = bare
    return found


def test_the_checker_finds_a_bare_lazy_import():
    source = '''"""A module."""

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def f():
    import json
    import croniter  # noqa: F401
    import yaml  # lazy: yaml only here
    # lazy: rich only for tables
    from rich.console import Console
    from rich.table import Table
    if TYPE_CHECKING:
        import pathlib
    return json, yaml, Console, Table, croniter, pathlib


import os
'''
    assert bare_lazy_imports(source) == [9, 10]
    paragraph = source.replace('"""A module."""', '"""A module.\n\nLazy imports: all slow."""')
    assert bare_lazy_imports(paragraph) == []


def test_every_lazy_import_has_a_reason():
    found = {m: lines for m, lines in _bare_by_module().items() if m not in KNOWN_WITHOUT_REASONS}
    assert found == {}, ("an import inside a function needs a reason (`# lazy: <what> (~N ms)"
                         " only for ...`) or belongs at the top of its module")


def test_the_known_list_only_shrinks():
    gone = KNOWN_WITHOUT_REASONS - set(_bare_by_module())
    assert gone == set(), "these modules give every reason now: remove them from the list"
