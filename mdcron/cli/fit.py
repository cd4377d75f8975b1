"""Tables that fit the terminal (issue 25): plain columns, two spaces apart, like
`systemctl list-timers`.

Each column has a priority: the narrowest terminal shows the first few, a wider one adds more,
`--wide` shows them all at full length. A column is shown whole or not at all (never at zero
width); a long cell is cut with `…` down to the column's `least` width, never below. Pure: the
caller passes the width (`terminal_width()` reads it). Colour only for a terminal that wants it.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from operator import itemgetter

from ..core.records import dataclass

GAP = 2
ELLIPSIS = "…"


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    priority: int = 0  # lower shows first; 0 always
    least: int = 0  # may be cut down to this many characters (0: never cut)
    most: int = 0  # never wider than this unless --wide (0: no cap)
    right: bool = False  # numbers
    first: bool = False  # among the columns always shown, cut this one first (an id)


def terminal_width() -> int:
    """$COLUMNS, else the terminal's width, else 160 for piped output (as before: a file or a
    pipe gets long lines)."""
    return max(20, shutil.get_terminal_size((160, 24)).columns)


def cut(text: str, width: int) -> str:
    """`text` in at most `width` characters, ending in `…` when shortened."""
    if len(text) <= width:
        return text
    return text[: max(0, width - 1)] + ELLIPSIS if width > 0 else ""


def one_line(value: object) -> str:
    """A cell's text: None as empty, newlines and tabs as spaces (one line per row)."""
    if value is None:
        return ""
    text = value if type(value) is str else str(value)
    return " ".join(text.split()) if "\n" in text or "\r" in text or "\t" in text else text


def layout(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int,
           wide: bool = False) -> list[tuple[int, int]]:
    """The shown columns as (index, width), in the columns' own order."""
    return _layout(columns, rows, width, wide)[0]


def _layout(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int,
            wide: bool) -> tuple[list[tuple[int, int]], list[int]]:
    """layout(), and each column's natural width (its longest cell or its name)."""
    natural = [max(len(c.name), max(map(len, col), default=0))
               for c, col in zip(columns, zip(*rows, strict=False), strict=False)]
    natural += [len(c.name) for c in columns[len(natural):]]  # no rows: the names
    if wide or sum(natural) + GAP * (len(columns) - 1) <= width:
        return list(enumerate(natural)), natural  # everything fits whole
    want = [min(n, c.most) if c.most else n for n, c in zip(natural, columns, strict=True)]
    floor = [min(w, max(c.least, len(c.name))) if c.least else w
             for w, c in zip(want, columns, strict=True)]
    chosen: list[int] = []
    for i in sorted(range(len(columns)), key=lambda i: columns[i].priority):
        if columns[i].priority and not any(r[i] for r in rows):
            continue  # an optional column with nothing in it
        used = sum(want[j] for j in chosen) + GAP * len(chosen)
        if columns[i].priority == 0 or used + floor[i] <= width:
            chosen.append(i)
    chosen.sort()
    widths = {i: natural[i] for i in chosen}
    over = sum(widths.values()) + GAP * (len(chosen) - 1) - width
    while over > 0:  # a character at a time: what is over its `most`, the optional columns,
        cuttable = [i for i in chosen if widths[i] > floor[i]]  # the id, then the widest
        if not cuttable:
            break
        widths[max(cuttable, key=lambda i: (widths[i] > want[i], columns[i].priority,
                                            columns[i].first, widths[i]))] -= 1
        over -= 1
    return [(i, widths[i]) for i in chosen], natural


def render(columns: Sequence[Column], rows: Sequence[Sequence[object]], width: int,
           wide: bool = False, colour=None) -> list[str]:
    """The header and one line per row. `colour(column name, cell text) -> str` may wrap a
    padded cell in escape codes (the width is measured before)."""
    cells = _one_line_rows(rows)
    shown, natural = _layout(columns, cells, width, wide)
    if colour is None:  # issue 27: one %-format a row, for 10,000 rows
        return _plain_lines(columns, shown, natural, cells)
    # per shown column: (index, width, right-aligned, last, name), looked up once, not per
    # cell (issue 27: 10,000 rows)
    spec = [(i, w, columns[i].right, n == len(shown) - 1, columns[i].name)
            for n, (i, w) in enumerate(shown)]
    sep = " " * GAP

    def line(values: Sequence[str], paint: bool) -> str:
        parts = []
        for i, w, right, last, name in spec:
            text = values[i]
            if len(text) > w:
                text = cut(text, w)
            pad = text.rjust(w) if right else (text if last else text.ljust(w))
            parts.append(colour(name, pad) if paint and colour else pad)
        return sep.join(parts).rstrip()

    return [line([c.name for c in columns], False), *(line(r, True) for r in cells)]


def _plain_lines(columns: Sequence[Column], shown: list[tuple[int, int]], natural: list[int],
                 cells: Sequence[Sequence[str]]) -> list[str]:
    """render's lines without colour: each row's shown cells in one %-format (padded as
    rjust/ljust pad, the last column left as it is), cut first in the columns narrower than
    their longest cell."""
    fmt = (" " * GAP).join(f"%{w}s" if columns[i].right else
                           "%s" if n == len(shown) - 1 else f"%-{w}s"
                           for n, (i, w) in enumerate(shown))
    pick = itemgetter(*[i for i, _ in shown]) if len(shown) > 1 else None
    narrow = [(n, w) for n, (i, w) in enumerate(shown) if natural[i] > w]
    lines = []
    for values in ([c.name for c in columns], *cells):
        texts = pick(values) if pick is not None else (values[shown[0][0]],)
        if narrow:
            texts = list(texts)
            for n, w in narrow:
                if len(texts[n]) > w:
                    texts[n] = cut(texts[n], w)
            texts = tuple(texts)
        lines.append((fmt % texts).rstrip())
    return lines


def _one_line_rows(rows: Sequence[Sequence[object]]) -> Sequence[Sequence[str]]:
    """one_line() of each cell; rows of plain one-line text are checked once, all together."""
    try:
        joined = "".join(map("".join, rows))  # type: ignore[arg-type]  (TypeError: not text)
    except TypeError:
        joined = "\n"
    if "\n" in joined or "\r" in joined or "\t" in joined:
        return [[one_line(v) for v in row] for row in rows]
    return rows  # type: ignore[return-value]


def wants_colour() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR") and \
        os.environ.get("TERM") != "dumb"


_ANSI = {"green": "32", "red": "31", "magenta": "35", "yellow": "33", "cyan": "36"}


def paint(text: str, colour: str | None) -> str:
    return f"\x1b[{_ANSI[colour]}m{text}\x1b[0m" if colour in _ANSI else text
