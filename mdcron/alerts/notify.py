"""Alerts: an outbox in SQLite, quiet hours, collapsing, delivery through apprise, heartbeats.

The tick calls `enqueue` for each alert as it happens (no network) and `flush` once at its end.

- **Destinations** are named apprise URLs (`notify.destinations`); an alert goes to its own
  destination when that name is configured, else to `notify.default`, else it is dropped.
  `${VAR}` in a URL is read from the environment only when sending. The expanded URL is a
  secret: messages name the destination key and show the scheme only (`tgram://…`).
- **Collapsing**: per (task, kind), the first alert opens a window of `collapse_window`; further
  alerts inside it only add to a counter. The first alert after the window carries
  "(+N similar alerts since HH:MM collapsed)" and opens the next window, so a task failing every
  minute sends one message per window. `suspended` is never collapsed. A recovery (`recovered`,
  `success`, `healed`) closes the task's other windows and reports what they collapsed, so a
  failure right after a recovery is never hidden.
- **Quiet hours** (wall time in the scheduler's zone) hold alerts that are not forced; forced
  kinds (suspended, duplicate_id, tick_crashed, timeout, or `forced=True`) go at once. The first
  flush after quiet hours sends what was held as one digest per destination (a single held
  message goes as itself); the held rows become `digested`.
- **Delivery**: a flush claims each due message by a check-and-set UPDATE that pushes its
  next_attempt_at forward by a lease, so two ticks never send one message twice (a tick killed
  mid-send leaves the message to be tried again when the lease ends). A failure retries after
  1, 2, 4 … minutes (capped at 60); after `max_attempts`, or at once for a permanent error (an
  unset ${VAR}, a URL apprise cannot use), the message is `dead` and kept. After one failure,
  the flushes of the same tick (each ladder's, then the tick's: they share `failing`) leave
  that destination's other messages for a later tick, so a dead endpoint costs one timeout per
  tick. Nothing in `flush` or `heartbeat` raises.

- **Deadline**: a message that has not gone within SEND_TIMEOUT (15 s) wall-clock fails with "no
  answer within 15 s" and is retried like any failure, however its destination paces its
  bytes: apprise runs in a child process (courier.py) that is killed at the deadline, so no
  abandoned thread keeps the tick alive after it (issue 22). Its log records never reach our
  loggers (failure reasons are taken from its captured logs, masked).

Lazy imports: apprise (hundreds of ms, its plugins) loads only in the courier child, when a
message is actually delivered; the heartbeat module only when a heartbeat is pinged from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..core.records import dataclass, field, replace
from ..settings.config import Config
from ..settings.notify import NotifyConfig, scheme_of
from ..state import outbox
from ..state.store import Store
from .courier import Courier, CourierTimeout
from .heartbeat import expand_vars, mask, missing_vars

FORCED_KINDS = frozenset({"suspended", "duplicate_id", "tick_crashed", "timeout", "lost"})
NEVER_COLLAPSED = frozenset({"suspended", "digest"})
RECOVERY_KINDS = frozenset({"recovered", "success", "healed"})
# apprise's NotifyType per alert kind, so chat apps colour a suspension unlike a recovery;
# anything else (a digest, a note) is "info"
FAILURE_KINDS = frozenset({"failure", "suspended", "tick_crashed", "crashed", "lost",
                           "task_file", "tasks_missing", "orphaned"})
WARNING_KINDS = frozenset({"timeout", "duplicate_id", "skipped", "clock_back",
                           "database_recreated"})
SEND_TIMEOUT = 15.0  # seconds for one message, wall-clock: the courier is killed then
LEASE = 300.0  # a claimed message is not tried by another flush for this long
BACKOFF_BASE = 60.0
BACKOFF_CAP = 3600.0
DIGEST_MAX_ITEMS = 40
MAX_REASON = 300


@dataclass(frozen=True, slots=True)
class Alert:
    kind: str  # failure success recovered suspended timeout duplicate_id tick_crashed healed ...
    task_id: str | None  # None for scheduler-level alerts
    title: str
    body: str
    forced: bool = False  # forced alerts ignore quiet hours; FORCED_KINDS are always forced
    destination: str | None = None  # a destination key (the task's notify_to); else the default

    @property
    def is_forced(self) -> bool:
        return self.forced or self.kind in FORCED_KINDS


@dataclass
class FlushReport:
    sent: list[int] = field(default_factory=list)  # outbox ids delivered
    retrying: list[int] = field(default_factory=list)  # failed, will be tried again
    dead: list[int] = field(default_factory=list)  # failed for good
    digests: list[int] = field(default_factory=list)  # digest messages created this flush
    errors: list[str] = field(default_factory=list)  # one line each, secrets masked

    @property
    def ok(self) -> bool:
        return not self.errors


class DeliveryError(Exception):
    """A message could not be delivered; `permanent` when trying again cannot help."""

    def __init__(self, message: str, permanent: bool = False):
        super().__init__(message)
        self.permanent = permanent


def settings(config: Config | NotifyConfig) -> NotifyConfig:
    """The notification settings of a Config (problems were reported when it was loaded)."""
    if isinstance(config, NotifyConfig):
        return config
    if config.notify.timezone == config.timezone:
        return config.notify
    return replace(config.notify, timezone=config.timezone)  # a Config built by hand (tests)


# ---------------------------------------------------------------- enqueue


def enqueue(store: Store, config: Config | NotifyConfig, alert: Alert,
            now: float | datetime) -> str:
    """Put an alert in the outbox. Returns "queued", "held" (quiet hours), "collapsed" (counted
    in its window instead) or "dropped" (no destination configured). No network."""
    cfg = settings(config)
    ts = _ts(now)
    destination = cfg.destination_for(alert.destination)
    if destination is None:
        return "dropped"
    zone = cfg.zone()
    task_key = alert.task_id or "*"
    notes: list[str] = []
    with store.write() as db:
        if cfg.collapse_window > 0 and alert.kind not in NEVER_COLLAPSED:
            window = outbox.window(db, task_key, alert.kind)
            # a clock that went back (a --now replay) opens a new window rather than a long one
            if window is not None and 0 <= ts - window.start < cfg.collapse_window:
                outbox.count_suppressed(db, task_key, alert.kind)
                return "collapsed"
            if window is not None and window.suppressed:
                notes.append(_collapsed_note(window.suppressed, "similar alerts", window.start,
                                             ts, zone))
            outbox.open_window(db, task_key, alert.kind, ts)
        if alert.kind in RECOVERY_KINDS and alert.task_id is not None:
            for closed in outbox.close_windows(db, task_key, keep=RECOVERY_KINDS):
                if closed.suppressed:
                    notes.append(_collapsed_note(closed.suppressed, f"{closed.kind} alerts",
                                                 closed.start, ts, zone))
        held = (
            not alert.is_forced
            and cfg.quiet_hours is not None
            and cfg.quiet_hours.contains(datetime.fromtimestamp(ts, zone))
        )
        body = "\n".join(notes) + "\n\n" + alert.body if notes else alert.body
        if store.url and store.host:  # issue 11: several hosts share the outbox: say which
            body += f"\n(host {store.host})"
        outbox.add_message(db, outbox.Message(ts, destination, alert.task_id, alert.kind,
                                              alert.is_forced, alert.title, body, held))
    return "held" if held else "queued"


def _collapsed_note(count: int, what: str, since: float, now: float, zone: Any) -> str:
    start = datetime.fromtimestamp(since, zone)
    fmt = "%H:%M" if now - since < 86400 else "%Y-%m-%d %H:%M"
    return f"(+{count} {what} since {start.strftime(fmt)} collapsed)"


# ---------------------------------------------------------------- flush


def flush(store: Store, config: Config | NotifyConfig, now: float | datetime,
          environ: Mapping[str, str], failing: set[str] | None = None) -> FlushReport:
    """Release held messages as digests when quiet hours are over, then send every pending
    message that is due. Never raises: problems come back in the report."""
    report = FlushReport()
    try:
        cfg = settings(config)
        ts = _ts(now)
        zone = cfg.zone()
        quiet = cfg.quiet_hours
        if quiet is None or not quiet.contains(datetime.fromtimestamp(ts, zone)):
            report.digests = _release_held(store, ts, zone)
        _send_due(store, cfg, ts, environ, report, failing)
    except Exception as exc:  # the database, most likely; alerts must not end the tick
        report.errors.append(f"notifications not flushed: {type(exc).__name__}: {exc}")
    return report


def _release_held(store: Store, ts: float, zone: Any) -> list[int]:
    digests: list[int] = []
    with store.write() as db:
        by_destination: dict[str, list[outbox.Held]] = {}
        for row in outbox.held(db):
            by_destination.setdefault(row.destination, []).append(row)
        for destination, items in by_destination.items():
            if len(items) == 1:
                outbox.release(db, items[0].id, ts)
                continue
            digests.append(outbox.add_digest(
                db, ts, destination, f"mdcron: {len(items)} notifications held during quiet"
                " hours", _digest_body(items, zone), [r.id for r in items]))
    return digests


def _digest_body(items: list[outbox.Held], zone: Any) -> str:
    lines = []
    for _id, created, _dest, title, body in items[:DIGEST_MAX_ITEMS]:
        when = datetime.fromtimestamp(created, zone).strftime("%H:%M")
        lines.append(f"• {when} {title}")
        first = next((s.strip() for s in str(body).splitlines() if s.strip()), "")
        if first:
            lines.append(f"  {first[:200]}")
    if len(items) > DIGEST_MAX_ITEMS:
        lines.append(f"… and {len(items) - DIGEST_MAX_ITEMS} more (kept in the outbox)")
    return "\n".join(lines)


def _send_due(store: Store, cfg: NotifyConfig, ts: float, environ: Mapping[str, str],
              report: FlushReport, failing: set[str] | None = None) -> None:
    """`failing`: destinations that failed earlier in this tick (shared by its flushes: each
    ladder's own, then the tick's), left alone now; this flush's failures are added."""
    due = store.due_messages(ts)
    failing = set() if failing is None else failing
    with Courier(SEND_TIMEOUT) as courier:  # its child starts with the first message sent
        for message_id, destination in due:
            if _send_one(store, cfg, ts, environ, report, courier, failing, message_id,
                         destination):
                failing.add(destination)


def notify_type(kind: str) -> str:
    """Pure: apprise's NotifyType value for an alert kind (failure, warning, success, info)."""
    if kind in FAILURE_KINDS:
        return "failure"
    if kind in WARNING_KINDS:
        return "warning"
    return "success" if kind in RECOVERY_KINDS else "info"


def _send_one(store: Store, cfg: NotifyConfig, ts: float, environ: Mapping[str, str],
              report: FlushReport, courier: Courier, failing: set[str], message_id: int,
              destination: str) -> bool:
    """Claim and send one message; True when it failed."""
    if destination in failing:
        return False  # one failure per destination per flush: a dead endpoint stalls once
    if store.url and destination not in cfg.destinations:
        return False  # issue 11: another host enqueued it for a destination it knows
    claimed = store.claim_message(message_id, ts, LEASE)
    if claimed is None:
        return False  # another flush has it
    title, body, attempts, kind = claimed
    try:
        send(cfg, destination, title, body, environ, courier, notify_type(kind))
    except DeliveryError as exc:
        _record_failure(store, cfg, message_id, destination, attempts, exc, ts, report)
        return True
    store.message_sent(message_id, ts)
    report.sent.append(message_id)
    return False


def _record_failure(store: Store, cfg: NotifyConfig, message_id: int, destination: str,
                    attempts: int, exc: DeliveryError, ts: float, report: FlushReport) -> None:
    template = cfg.destinations.get(destination, "")
    where = f"notification #{message_id} to {destination!r} ({scheme_of(template)})"
    next_at: float | None = None
    if exc.permanent or attempts >= cfg.max_attempts:
        why = "permanent error" if exc.permanent else f"{attempts} attempts"
        error = f"{where}: {exc}; gave up ({why}), kept as dead"
        status = "dead"
        report.dead.append(message_id)
    else:
        delay = backoff(attempts)
        error = (f"{where}: {exc}; attempt {attempts} of {cfg.max_attempts},"
                 f" next in {int(delay // 60)} min")
        status, next_at = "pending", ts + delay
        report.retrying.append(message_id)
    store.message_failed(message_id, status, next_at, str(exc))
    report.errors.append(error)


def backoff(attempts: int) -> float:
    """Seconds before the next try after `attempts` failed ones: 1, 2, 4 … minutes, capped."""
    return min(BACKOFF_CAP, BACKOFF_BASE * 2 ** max(0, attempts - 1))


# ---------------------------------------------------------------- delivery


def expand(template: str, environ: Mapping[str, str]) -> tuple[str, list[str]]:
    """The URL with ${VAR} replaced from `environ`, and the values substituted (to mask them).
    An unset variable is a permanent DeliveryError naming the variable, never its value."""
    missing = missing_vars(template, environ)
    if missing:
        names = ", ".join(f"${{{n}}}" for n in missing)
        raise DeliveryError(f"{names} not set in the scheduler's environment", permanent=True)
    return expand_vars(template, environ)


def send(cfg: NotifyConfig, destination: str, title: str, body: str,
         environ: Mapping[str, str], courier: Courier | None = None,
         kind: str = "info") -> None:
    """Deliver one message now through apprise (in `courier`'s child, or a child of its own);
    DeliveryError (masked) when it does not go within SEND_TIMEOUT."""
    template = cfg.destinations.get(destination)
    if template is None:
        known = ", ".join(sorted(cfg.destinations)) or "none"
        raise DeliveryError(f"no destination {destination!r} in notify.destinations (known:"
                            f" {known})", permanent=True)
    url, values = expand(template, environ)
    if courier is None:
        with Courier(SEND_TIMEOUT) as own:
            return send(cfg, destination, title, body, environ, own, kind)
    try:
        failure = courier.send(url, title, body, kind)
    except CourierTimeout:
        raise DeliveryError(f"no answer within {courier.timeout:g} s") from None
    except Exception as exc:  # starting the child failed (no fork, no memory): try later
        failure = (f"{type(exc).__name__}: {exc}", False)
    if failure is not None:
        reason, permanent = failure
        raise DeliveryError(mask(reason, url, values), permanent=permanent)


# ---------------------------------------------------------------- heartbeat


def heartbeat(config: Config | NotifyConfig, failed: bool,
              environ: Mapping[str, str]) -> str | None:
    """Ping `heartbeat_url` (with /fail appended when the tick failed). Returns an error line
    (URL masked) or None; None too when no heartbeat is configured. Never raises."""
    from .heartbeat import ping

    try:
        url = settings(config).heartbeat_url
    except Exception as exc:
        return f"heartbeat: {type(exc).__name__}"
    return ping(url, failed, environ) if url else None


# ---------------------------------------------------------------- helpers


def format_tail(text: str | None, max_lines: int = 15, max_chars: int = 1500) -> str:
    """The end of a run's output, bounded for a chat message."""
    if not text:
        return ""
    lines = text.rstrip().splitlines()[-max_lines:]
    tail = "\n".join(lines)
    return tail if len(tail) <= max_chars else "…" + tail[-(max_chars - 1):]


def _ts(now: float | datetime) -> float:
    return now.timestamp() if isinstance(now, datetime) else float(now)
