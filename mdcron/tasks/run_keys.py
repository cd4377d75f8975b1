"""Issue 26: the keys people bring from other schedulers, read and checked (taskfile.py calls
these; each raises ValueError whose text says what would be right), plus their pure maths.

    retry: 3                        # 0–10 reruns before a heal (true = 1, false = 0)
    retry_delay: 30s                # a fixed pause before each rerun, or
    retry_delay: exponential 10s..5m   # 10 s, 20 s, 40 s … capped at 5 min
    jitter: 2m                      # start a fixed offset (0 ≤ offset < 2 min) after the slot
    overlap: skip                   # skip | queue | replace | allow (Kubernetes' concurrencyPolicy)

The jitter offset is a stable hash of the host, the home and the task id (systemd's
RandomizedDelaySec with FixedRandomDelay=yes): the same for one task on one host every time,
different between hosts, so 200 hosts with `0 * * * *` do not all start at :00.
"""

from __future__ import annotations

import re

from ..core.units import DurationError, parse_duration
from ..settings.config import Config
from .task import Task

MAX_RETRIES = 10
MAX_RETRY_DELAY = 86400.0  # a day; longer waits are surely typos
MAX_JITTER = 86400.0
OVERLAP = ("skip", "queue", "replace", "allow")
_EXPONENTIAL = r"^\s*exponential\s+(\S+?)\s*\.\.\s*(\S+)\s*$"  # re caches it (see units.py)


def retry_count(value: object) -> int:
    """`retry:` as a number of reruns: true = 1, false = 0, or a whole number 0–10."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and 0 <= value <= MAX_RETRIES:
        return value
    raise ValueError(f"expected a number of retries from 0 to {MAX_RETRIES} (or true = 1, "
                     "false = 0), e.g. retry: 3")


def _delay(value: object) -> float:
    try:
        seconds = parse_duration(value)
    except (DurationError, OverflowError):
        raise ValueError("expected a duration like 30s or 5m, or exponential 10s..5m") from None
    if seconds > MAX_RETRY_DELAY:
        raise ValueError("expected at most 1d between retries")
    return seconds


def retry_delay(value: object) -> str:
    """`retry_delay:` normalised: "30s" or "exponential 10s..5m" (kept as text in the Task so
    that `show` prints it as written; backoff() reads it)."""
    if isinstance(value, str) and value.strip().startswith("exponential"):
        match = re.match(_EXPONENTIAL, value)
        if not match:
            raise ValueError("write the exponential form as exponential FIRST..MOST, "
                             "e.g. exponential 10s..5m")
        first, most = _delay(match[1]), _delay(match[2])
        if first <= 0 or most < first:
            raise ValueError("exponential FIRST..MOST needs 0 < FIRST <= MOST, "
                             "e.g. exponential 10s..5m")
        return f"exponential {_written(first)}..{_written(most)}"
    return _written(_delay(value))


def _written(seconds: float) -> str:
    """Seconds as a duration parse_duration reads back: 30s, 5m, 2h, 1.5s."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def backoff(text: str | None, retry: int) -> float:
    """Pure: seconds to wait before rerun number `retry` (1-based) under `retry_delay: text`.
    Exponential doubles from FIRST and stops at MOST."""
    if not text:
        return 0.0
    match = re.match(_EXPONENTIAL, text)
    if match is None:
        return parse_duration(text)
    first, most = parse_duration(match[1]), parse_duration(match[2])
    return min(most, first * 2 ** min(retry - 1, 60))


def jitter(value: object) -> float:
    try:
        seconds = parse_duration(value)
    except (DurationError, OverflowError):
        raise ValueError("expected a duration like 30s or 2m (the window after the slot "
                         "in which the task starts)") from None
    if seconds > MAX_JITTER:
        raise ValueError("expected at most 1d")
    return seconds


def overlap(value: object) -> str:
    if isinstance(value, str) and value in OVERLAP:
        return value
    raise ValueError(f"expected one of {', '.join(OVERLAP)} (what a slot does while the "
                     "previous run still runs)")


def jitter_offset(host: str, home: str, task_id: str, window: float) -> float:
    """Pure: the task's fixed offset in [0, window), to the millisecond: a stable hash of the
    host, the home and the id (as spread.rendezvous hashes host and id), so one task on one
    host always starts at the same offset and hosts differ."""
    millis = int(window * 1000)
    if millis <= 0:
        return 0.0
    import hashlib  # lazy: only for a task with jitter (OpenSSL's load is ~2 ms of a tick)

    digest = hashlib.sha256(f"{host}\0{home}\0{task_id}".encode()).digest()
    return (int.from_bytes(digest[:8], "big") % millis) / 1000


def start_offset(task: Task, config: Config) -> float:
    """Seconds after its slot at which `task` starts on this host (0 without `jitter:`)."""
    if not task.jitter:
        return 0.0
    return jitter_offset(config.host_name, str(config.home), task.id, task.jitter)


LOOKAHEAD = 60.0  # a tick claims a jittered slot whose start falls before the next tick


def decision_time(task: Task, config: Config, now: float) -> float:
    """The instant decide() judges a jittered task at (issue 26): a slot counts as due once its
    start (slot + offset) falls before the next tick, i.e. within LOOKAHEAD of now, and the
    ladder then waits for that start (ladder.climb). Never later than now: no future slot is
    claimed. Without `jitter:` it is now."""
    if not task.jitter:
        return now
    return min(now, now + LOOKAHEAD - start_offset(task, config))
