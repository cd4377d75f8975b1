"""All SQL behind the state interface (issue 9): a module outside mdcron/state/ that holds a
string starting with an SQL statement fails this test, unless it is one of the exceptions
below, each with its reason. The list may only shrink: an exception that no longer holds SQL
fails too, so it is removed with the SQL."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "mdcron"
SQL = re.compile(r"\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|PRAGMA)\s")

ALLOWED: dict[str, str] = {}  # module -> why it may hold SQL (none left)


def sql_strings(path: Path) -> list[int]:
    """Line numbers of the string constants (f-strings by their literal start) that begin
    with an SQL statement."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        text = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr) and node.values:
            first = node.values[0]
            text = first.value if isinstance(first, ast.Constant) else None
        if text is not None and SQL.match(text):
            lines.append(node.lineno)
    return sorted(set(lines))


def holders() -> dict[str, list[int]]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "state":
            continue
        lines = sql_strings(path)
        if lines:
            out[rel.as_posix()] = lines
    return out


def test_sql_lives_in_the_state_package():
    stray = {m: lines for m, lines in holders().items() if m not in ALLOWED}
    assert not stray, ("SQL outside mdcron/state/ (module: lines); add a typed operation to"
                       f" the table's module in mdcron/state/ instead: {stray}")


def test_every_exception_still_holds_sql():
    found = holders()
    stale = sorted(set(ALLOWED) - set(found))
    assert not stale, f"no SQL left in {stale}: remove them from ALLOWED"


def test_the_scan_finds_sql(tmp_path):
    """The detector itself: statements are found, prose and identifiers are not."""
    sample = tmp_path / "m.py"
    sample.write_text('A = "SELECT 1"\nB = ("UPDATE t SET"\n     " x = 1")\n'
                      'C = f"DELETE FROM {t}"\nD = "Update the file"\nE = "SELECTED"\n',
                      encoding="utf-8")
    assert sql_strings(sample) == [1, 2, 4]
