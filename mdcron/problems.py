"""A problem found in a file: where it is, which key, what is wrong and how to fix it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
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
