"""What one run came to: an Outcome and a RunResult whose fail_reason feeds history and alerts."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path


class Outcome(StrEnum):
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    TIMEOUT = "timeout"
    SKIPPED = "skipped"
    CRASHED = "crashed"


@dataclass(frozen=True, slots=True)
class RunResult:
    outcome: Outcome
    exit_code: int | None = None
    fail_reason: str | None = None  # "exit 2", "timeout after 300 s", the error envelope's text
    duration: float = 0.0  # seconds, wall clock
    output_tail: str = ""  # last few KiB of stdout+stderr
    log_path: Path | None = None
    log_truncated: bool = False
    extra: dict[str, object] = field(default_factory=dict)  # e.g. tokens used by a Claude run

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.SUCCESS


MAX_REASON = 2000  # characters of fail_reason taken from a JSON error envelope


def envelope_error(line: str) -> str | None:
    """The core's error envelope: a last output line that is a JSON object with
    "status": "error" makes a run fail, with its "error" (or "message") as the reason."""
    text = line.strip()
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("status") != "error":
        return None
    for key in ("error", "message"):
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            text = value.strip()
            break
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"
