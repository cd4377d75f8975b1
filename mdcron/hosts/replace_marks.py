"""Issue 26, `overlap: replace` across hosts: the two marks it leaves in the shared meta table.

- `replace_request:<task id>` = why ("replaced by slot …"): a later slot, on a host that found
  the task's lease held by another host, asks the holder to stop its run. The holder's lease
  renewal thread (lease.py) takes the mark (check-and-set: one taker) and stops the run.
- `replaced:<task id>` = "<row id>\\t<why>": that row's ladder stops at its next step (no rerun,
  no heal, no failure counted; run/overlap.py, run/ladder.py).
"""

from __future__ import annotations

REPLACE_REQUEST = "replace_request:"
REPLACED = "replaced:"


def replaced_mark(row: int, why: str) -> str:
    return f"{row}\t{why}"


def marked_row(mark: str | None) -> tuple[str, str] | None:
    """Pure: (row id, why) from a `replaced:` mark."""
    if not mark:
        return None
    row, _, why = mark.partition("\t")
    return row, why
