"""Human output: JSON, and the small tables of `incidents` (fit.py lays them out to fit the
terminal; `list` and `history` have their own columns in tables.py)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import datetime

from ..core.clock import to_dt
from .fit import Column, render, terminal_width


def print_json(value: object) -> None:
    """Indented JSON; a list one element a line (json's C encoder: `indent` would take the
    pure-Python one, 1.4 s for `list --json` at 10,000 tasks), written at once."""
    if isinstance(value, list) and value:
        print_items(list(map(item_encoder(), value)))
    else:
        sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")


def print_items(items: list[str]) -> None:
    """A list whose items are JSON texts already (item_encoder's), as print_json writes it."""
    if not items:
        sys.stdout.write("[]\n")
        return
    write = sys.stdout.write  # three writes: no second copy of a 6 MB text (issue 27: ~3 ms)
    write("[\n  ")
    write(",\n  ".join(items))
    write("\n]\n")


def item_encoder():  # -> Callable[[object], str]
    """json.JSONEncoder(default=str).encode for the items of a list, its C encoder built once
    (encode() builds one per call: a tenth of `list --json` at 10,000 tasks, issue 27). A str
    item, which encode() writes without the C encoder, takes encode() itself."""
    encoder = json.JSONEncoder(default=str)
    c_make = json.encoder.c_make_encoder
    if c_make is None:
        return encoder.encode
    chunks = c_make({}, encoder.default, json.encoder.encode_basestring_ascii, None,
                    encoder.key_separator, encoder.item_separator, False, False, True)

    def encode(item: object) -> str:
        return encoder.encode(item) if isinstance(item, str) else "".join(chunks(item, 0))

    return encode


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[object]],
          keep: int = 4, flexible: Sequence[str] = ("title", "error")) -> None:
    """The first `keep` columns always, then the `flexible` ones (cut with `…` to fit), then
    the others left to right as the width allows."""
    cols = [Column(name, 0 if i < keep else 1 if name in flexible else i + 1,
                   least=12 if name in flexible else 0) for i, name in enumerate(columns)]
    if title:
        print(title)
    for line in render(cols, rows, terminal_width()):
        print(line)


def short_time(value: str | float | None, zone: object = None) -> str:
    """An ISO string or Unix seconds, shown in local (or the given) time, minute precision,
    the zone named."""
    if value is None:
        return "—"
    dt = to_dt(value) if isinstance(value, (int, float)) else datetime.fromisoformat(value)
    return dt.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")  # type: ignore[arg-type]
