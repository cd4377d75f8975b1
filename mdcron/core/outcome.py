"""What one run came to: an Outcome and a RunResult whose fail_reason feeds history and alerts."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path

from .clock import to_dt
from .records import dataclass, field


class Outcome(StrEnum):
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    TIMEOUT = "timeout"
    SKIPPED = "skipped"
    CRASHED = "crashed"
    LOST = "lost"  # issue 23: its host stopped renewing the lease; another host took the task


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


def late_note(host: str | None, result: RunResult, ended_at: float) -> str:
    """Pure: what a host whose lease was lost reports of its run afterwards (issue 23), kept
    as a note beside the row another host closed `lost`: what the task really did."""
    detail = f" ({result.fail_reason})" if result.fail_reason and not result.ok else ""
    when = to_dt(ended_at)
    return (f"late result from host {host or '?'}: {result.outcome.value}{detail} after"
            f" {result.duration:.1f} s, ended {when:%Y-%m-%d %H:%M:%S} UTC (reported after its"
            " lease was lost; the row's status stays)")


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
