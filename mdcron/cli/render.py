"""Human output: rich tables (imported only by the commands that print them) and plain lines."""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Sequence
from datetime import datetime

from ..core.clock import to_dt


def print_json(value: object) -> None:
    """Indented JSON; a list one element a line (json's C encoder: `indent` would take the
    pure-Python one, 1.4 s for `list --json` at 10,000 tasks), written at once."""
    if isinstance(value, list) and value:
        items = ",\n".join("  " + json.dumps(item, default=str) for item in value)
        sys.stdout.write(f"[\n{items}\n]\n")
    else:
        sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")


LIGHT_ROWS = 300  # issue 27: above this many rows, plain columns (rich: ~3 ms a row)
_MARKUP = re.compile(r"\[/?(?:red|green|yellow|magenta|cyan|bold|dim)\]")


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    if len(rows) > LIGHT_ROWS:
        plain_table(title, columns, rows)
        return
    # lazy: rich (~40 ms) only for a table
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title, show_lines=False, header_style="bold")
    for col in columns:
        t.add_column(col, overflow="fold", no_wrap=col in ("id", "task", "run", "status"))
    for row in rows:
        t.add_row(*("" if v is None else str(v) for v in row))
    # Piped output (no terminal) gets a generous width rather than rich's 80 columns.
    Console(width=shutil.get_terminal_size((160, 24)).columns).print(t)


def plain_table(title: str | None, columns: Sequence[str],
                rows: Sequence[Sequence[object]]) -> None:
    """The same columns as plain aligned text, no colour: 10,000 rows in milliseconds, and
    one task a line for grep. The last column is not padded."""
    cells = [[_MARKUP.sub("", "" if v is None else str(v)).replace("\n", " ") for v in row]
             for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = [title] if title else []
    for row in [list(columns), ["-" * w for w in widths], *cells]:
        lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    sys.stdout.write("\n".join(lines) + "\n")


def short_time(value: str | float | None, zone: object = None) -> str:
    """An ISO string or Unix seconds, shown in local (or the given) time, minute precision."""
    if value is None:
        return "—"
    dt = to_dt(value) if isinstance(value, (int, float)) else datetime.fromisoformat(value)
    return dt.astimezone(zone).strftime("%Y-%m-%d %H:%M")  # type: ignore[arg-type]


def status_style(status: object) -> str:
    colours = {"success": "green", "failed": "red", "timeout": "red", "crashed": "magenta",
               "lost": "magenta", "skipped": "yellow", "running": "cyan"}
    s = str(status) if status else "—"
    colour = colours.get(s)
    return f"[{colour}]{s}[/{colour}]" if colour else s
