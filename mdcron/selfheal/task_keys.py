"""Which frontmatter keys a heal may change, and which ones an edit changed.

A heal may change the task's prose and the keys of HEAL_KEYS. Everything else in the
frontmatter decides what runs, when, where, as whom, who hears of it, or what a heal may touch,
and stays the person's: an edit that adds, removes or changes any other key (unknown keys too:
a later version may give them a meaning) is refused (tools.Sandbox._check_task_text).
"""

from __future__ import annotations

import json

from ..tasks.frontmatter_edit import frontmatter_text

# The frontmatter keys a heal may change: a job that got slower may need a longer `timeout`
# (the ladder's deadline still bounds the rerun), and `title`/`tags` are words for people. Every
# other key decides what runs, when, where, as whom, who hears of it or what a heal may touch.
HEAL_KEYS = ("timeout", "title", "tags")


_MISSING = object()


def changed_keys(before: str, after: str) -> list[str] | None:
    """Pure: the frontmatter keys whose value differs between two texts of a task file (added,
    removed or changed; compared as YAML values, so a comment or quoting change is no change).
    None when `after` has no readable frontmatter (validating it says why)."""
    new = _mapping(after)
    if new is None:
        return None
    old = _mapping(before) or {}  # an unreadable "before": every key counts as changed
    keys = [*old, *(k for k in new if k not in old)]
    return [str(k) for k in keys if _canon(old.get(k, _MISSING)) != _canon(new.get(k, _MISSING))]


def _mapping(text: str) -> dict | None:
    import frontmatter  # lazy: python-frontmatter + yaml, only when a heal edits a task file

    try:
        data = frontmatter.YAMLHandler().load(frontmatter_text(text)[0])
    except Exception:  # EditError (no frontmatter), YAMLError, absurd numbers
        return None
    if data is None:
        return {}
    return data if isinstance(data, dict) else None


CANON_NODES = 10_000  # a value bigger than this (an alias bomb?) counts as changed


class _TooBig(Exception):
    pass


def _canon(value: object) -> str:
    """Equal values of equal types compare equal (`1` is not `true`, `"60"` is not `60`).
    Bounded: YAML aliases can make a small text a huge value."""
    if value is _MISSING:
        return "(absent)"
    budget = [CANON_NODES]

    def walk(v: object) -> object:
        budget[0] -= 1
        if budget[0] < 0:
            raise _TooBig
        if isinstance(v, dict):
            return ["map", sorted(([repr(k), walk(x)] for k, x in v.items()), key=repr)]
        if isinstance(v, (list, tuple)):
            return ["seq", [walk(x) for x in v]]
        return [type(v).__name__, repr(v)]

    try:
        return json.dumps(walk(value))
    except (_TooBig, RecursionError):
        return f"(too big to compare: {id(value)})"  # never equal to the other side
