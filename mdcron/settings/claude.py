"""The `claude:` section of scheduler.yaml and the top-level `max_heals_per_tick`, validated.

Pure and cheap (no SDK, no I/O): config.py builds it once into `Config.claude`; claude.py,
selfheal/healer.py and comments.py read that value.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..core.problems import Problem, unknown_key
from ..core.records import dataclass
from ..core.units import DurationError, duration_between, whole_number

TYPE_CHECKING = False  # typing stays off the tick's path (issue 27: ~2.5 ms before a due task)
if TYPE_CHECKING:
    from typing import Any

DEFAULT_MODEL = "claude-sonnet-5-5"


@dataclass(frozen=True)
class ClaudeConfig:
    model: str = DEFAULT_MODEL
    max_tokens: int = 4096
    timeout: float = 120.0  # one HTTP request, seconds
    max_retries: int = 3  # further tries after a transient error
    retry_backoff: float = 1.0  # first wait between tries; doubles, at most 30 s
    max_heals_per_day: int = 4  # per task, over the last 24 h
    max_tool_calls: int = 25  # per heal
    max_heal_bytes: int = 256 * 1024  # bytes written per heal
    max_heals_per_tick: int = 3  # top-level key; 0 turns self-heal off, like max_heals_per_day


_INT_KEYS = {  # key: (minimum, maximum); README, "Configuration"
    "max_tokens": (1, 1_000_000), "max_retries": (0, 100), "max_heals_per_day": (0, 1000),
    "max_tool_calls": (1, 10_000), "max_heal_bytes": (1, 2**30),
}
_DURATION_KEYS = {"timeout": (0.0, 86400.0), "retry_backoff": (0.0, 3600.0)}  # seconds
CLAUDE_KEYS = frozenset({"model", *_INT_KEYS, *_DURATION_KEYS})


def parse_claude_config(
    raw: Mapping[str, object], path: Path | None
) -> tuple[ClaudeConfig, list[Problem]]:
    """The `claude:` section plus the top-level `max_heals_per_tick` key of a parsed
    scheduler.yaml. A bad value is an error Problem and its default is used; an unknown key
    under `claude:` is a warning."""
    where = path or Path("scheduler.yaml")
    problems: list[Problem] = []
    values: dict[str, Any] = {}

    def err(key: str, message: str) -> None:
        problems.append(Problem(where, message, key=key))

    section = raw.get("claude")
    if section is None:
        section = {}
    if not isinstance(section, Mapping):
        err("claude", "expected a mapping, e.g. claude: {model: claude-sonnet-5-5}")
        section = {}
    for key in section:
        if key not in CLAUDE_KEYS:
            problems.append(Problem(where, unknown_key(key, CLAUDE_KEYS, under="claude"),
                                    key=f"claude.{key}", severity="warning"))
    if "model" in section:
        model = section["model"]
        if isinstance(model, str) and model.strip():
            values["model"] = model.strip()
        else:
            err("claude.model", f"expected a model id such as {DEFAULT_MODEL}, got {model!r}")
    for key, (low, high) in _INT_KEYS.items():
        if key in section:
            try:
                values[key] = whole_number(section[key], low, high)
            except ValueError as exc:
                err(f"claude.{key}", str(exc))
    for key, (shortest, longest) in _DURATION_KEYS.items():
        if key in section:
            try:
                values[key] = duration_between(section[key], shortest, longest)
            except DurationError as exc:
                err(f"claude.{key}", str(exc))
            else:
                if key == "timeout" and values[key] <= 0:
                    err("claude.timeout", "expected more than 0 seconds, e.g. 120s")
                    del values[key]
    if "max_heals_per_tick" in raw:
        try:
            values["max_heals_per_tick"] = whole_number(raw["max_heals_per_tick"], 0, 1000)
        except ValueError as exc:
            err("max_heals_per_tick", str(exc))
    return ClaudeConfig(**values), problems
