"""A problem found in a file: where it is, which key, what is wrong and how to fix it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from .records import dataclass

TYPE_CHECKING = False  # typing stays off the tick's path (issue 27: ~2.5 ms before a due task)
if TYPE_CHECKING:
    from typing import Literal

    Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class Problem:
    path: Path
    message: str  # what is wrong and what would be right, in one sentence
    key: str | None = None  # the frontmatter / config key concerned, if any
    line: int | None = None  # 1-based line in the file, if known
    severity: Severity = "error"

    def __str__(self) -> str:
        where = str(self.path) + (f":{self.line}" if self.line else "")
        named = self.key and not self.message.startswith(f"{self.key}:")
        key = f" [{self.key}]" if named else ""
        return f"{where}: {self.severity}{key}: {self.message}"

    def to_json(self) -> dict[str, object]:
        return {
            "file": str(self.path),
            "line": self.line,
            "key": self.key,
            "severity": self.severity,
            "message": self.message,
        }


def unknown_key(key: object, known: Iterable[str], under: str = "") -> str:
    """The message for a key nobody reads: "unknown key 'x' is ignored; did you mean 'y'?"
    (the known keys when nothing is close). `under` names the section, e.g. "claude"."""
    from difflib import get_close_matches  # lazy: difflib (~2 ms) only when a file has a typo

    names = sorted(known)
    near = get_close_matches(str(key), names, n=1, cutoff=0.6)
    hint = f"did you mean {near[0]!r}?" if near else "known keys: " + ", ".join(names)
    where = f" under {under}:" if under else ""
    return f"unknown key {key!r}{where} is ignored; {hint}"
