"""The `notify:` section of scheduler.yaml and the top-level `heartbeat_url`, validated.

```yaml
notify:
  default: home                       # destination for alerts without notify_to
  destinations:                       # name: apprise URL; ${VAR} comes from the environment
    home: "tgram://${TELEGRAM_BOT_TOKEN}/${TELEGRAM_CHAT_ID}"
  quiet_hours: "22:00-07:00"          # wall time in the scheduler's zone; off when absent
  collapse_window: 1h                 # one message per (task, kind) per window; 0 = off
  max_attempts: 8                     # deliveries tried before a message is dead
heartbeat_url: "https://hc-ping.com/uuid"
```

Parsing never imports apprise and never expands a variable: URLs stay templates until a message
is sent, so the secrets they name are read only then, and never end up in a problem message.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import datetime, tzinfo
from pathlib import Path

from ..core.envref import ENV_REF, SCHEME
from ..core.problems import Problem, unknown_key
from ..core.records import dataclass, field
from ..core.units import DurationError, duration_between, whole_number
from ..core.urlscheme import scheme_of  # noqa: F401  (re-exported)

DEFAULT_COLLAPSE_WINDOW = 3600.0
DEFAULT_MAX_ATTEMPTS = 8  # with 1, 2, 4 … 60 minute backoff: about two hours of trying
_QUIET = r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*$"  # re caches it (units.py)
_KNOWN = ("default", "destinations", "quiet_hours", "collapse_window", "max_attempts")


@dataclass(frozen=True)
class QuietHours:
    """A daily span of wall time, in minutes after midnight; it may wrap past midnight."""

    start: int
    end: int

    def contains(self, when: datetime) -> bool:
        """Whether the aware `when`, read as wall time in its own zone, lies in the span."""
        minute = when.hour * 60 + when.minute
        if self.start < self.end:
            return self.start <= minute < self.end
        return minute >= self.start or minute < self.end

    def __str__(self) -> str:
        (h1, m1), (h2, m2) = divmod(self.start, 60), divmod(self.end, 60)
        return f"{h1:02d}:{m1:02d}-{h2:02d}:{m2:02d}"


@dataclass(frozen=True)
class NotifyConfig:
    destinations: dict[str, str] = field(default_factory=dict)  # name -> URL template
    default: str | None = None  # resolved: the configured default, or the only destination
    quiet_hours: QuietHours | None = None
    collapse_window: float = DEFAULT_COLLAPSE_WINDOW
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    heartbeat_url: str | None = None  # a template too: ${VAR} is expanded when pinging
    timezone: str | None = None  # the scheduler's zone (None: the system's)

    def zone(self) -> tzinfo:
        from ..core.cron import resolve_zone  # lazy: zoneinfo; `history` needs no schedule

        return resolve_zone(self.timezone)

    def destination_for(self, name: str | None) -> str | None:
        """The destination key an alert goes to: its own when configured, else the default."""
        if name and name in self.destinations:
            return name
        return self.default


def parse_quiet_hours(value: object) -> QuietHours:
    """ "22:00-07:00" -> QuietHours; ValueError with the fix otherwise."""
    match = re.match(_QUIET, value) if isinstance(value, str) else None
    if not match:
        raise ValueError(
            f'expected "HH:MM-HH:MM" in 24-hour time, e.g. "22:00-07:00", got {value!r}'
        )
    h1, m1, h2, m2 = (int(g) for g in match.groups())
    if h1 > 23 or h2 > 23 or m1 > 59 or m2 > 59:
        raise ValueError(f"hours go 00-23 and minutes 00-59, got {value!r}")
    start, end = h1 * 60 + m1, h2 * 60 + m2
    if start == end:
        raise ValueError(
            f"start and end are the same ({value!r}); remove quiet_hours to turn it off"
        )
    return QuietHours(start, end)


def parse_notify_config(
    raw: Mapping[str, object], path: Path, environ: Mapping[str, str] | None = None
) -> tuple[NotifyConfig, list[Problem]]:
    """Read `notify:` and `heartbeat_url` from the parsed scheduler.yaml (load_config builds
    `Config.notify` with it; doctor salvages a broken file's section with it too).

    Returns the settings and every problem found; a key with an error falls back to its default,
    so the settings are always usable. A ${VAR} not set in `environ` (default: os.environ) is a
    warning: cron's environment may differ from the shell that runs `validate`."""
    env = os.environ if environ is None else environ
    problems: list[Problem] = []

    def problem(key: str, message: str, severity: str = "error") -> None:
        # type: ignore[arg-type]
        problems.append(Problem(path, message, key=key, severity=severity))

    values: dict[str, object] = {}
    zone = raw.get("timezone")
    values["timezone"] = zone if isinstance(zone, str) else None
    heartbeat = raw.get("heartbeat_url")
    if heartbeat is not None:
        if not isinstance(heartbeat, str) or not re.match(r"^https?://", heartbeat.strip()):
            problem("heartbeat_url", "expected an http(s) URL, e.g. https://hc-ping.com/<uuid>")
        else:
            values["heartbeat_url"] = heartbeat.strip()
            _check_refs(heartbeat, "heartbeat_url", env, problem)

    section = raw.get("notify")
    if section is None:
        return NotifyConfig(**values), problems  # type: ignore[arg-type]
    if not isinstance(section, Mapping):
        problem("notify", "expected a mapping with destinations, default, quiet_hours, ...")
        return NotifyConfig(**values), problems  # type: ignore[arg-type]

    for key in section:
        if key not in _KNOWN:
            problem(f"notify.{key}", unknown_key(key, _KNOWN, under="notify"), "warning")

    destinations: dict[str, str] = {}
    raw_dests = section.get("destinations")
    if raw_dests is not None and not isinstance(raw_dests, Mapping):
        problem("notify.destinations", 'expected a mapping of name: URL, e.g. home: "tgram://…"')
    elif raw_dests:
        for name, url in raw_dests.items():
            key = f"notify.destinations.{name}"
            if not isinstance(url, str) or not url.strip():
                problem(key, f"expected an apprise URL string (quoted), got {type(url).__name__}")
            elif not SCHEME.match(url.strip()):
                problem(key, "expected an apprise URL like tgram://TOKEN/CHAT or json://host/path")
            else:
                destinations[str(name)] = url.strip()
                _check_refs(url, key, env, problem)
    values["destinations"] = destinations

    default = section.get("default")
    if default is not None:
        if not isinstance(default, str) or default not in destinations:
            known = ", ".join(sorted(destinations)) or "none configured"
            problem("notify.default",
                    f"unknown destination {default!r}; use one of notify.destinations ({known})")
        else:
            values["default"] = default
    elif len(destinations) == 1:
        values["default"] = next(iter(destinations))
    elif destinations:
        problem("notify.default", "no default destination: alerts of tasks without notify_to are"
                " dropped; set notify.default to one of " + ", ".join(sorted(destinations)),
                "warning")

    if section.get("quiet_hours") not in (None, ""):
        try:
            values["quiet_hours"] = parse_quiet_hours(section["quiet_hours"])
        except ValueError as exc:
            problem("notify.quiet_hours", str(exc))
    if "collapse_window" in section:
        try:
            values["collapse_window"] = duration_between(section["collapse_window"], 0, 86400)
        except DurationError as exc:
            problem("notify.collapse_window", f"{exc} (0 turns collapsing off)")
    if "max_attempts" in section:
        try:
            values["max_attempts"] = whole_number(section["max_attempts"], 1, 1000)
        except ValueError as exc:
            problem("notify.max_attempts", str(exc))
    return NotifyConfig(**values), problems  # type: ignore[arg-type]


# type: ignore[no-untyped-def]
def _check_refs(url: str, key: str, env: Mapping[str, str], problem) -> None:
    for name in dict.fromkeys(ENV_REF.findall(url)):
        if name not in env:
            problem(key, f"${{{name}}} is not set in this environment; set it where cron runs the"
                    " scheduler (e.g. in the crontab), or sending will fail", "warning")
