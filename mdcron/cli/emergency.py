"""Telling someone when the tick cannot run at all.

When the tick cannot use its own machinery (a config with errors, a state database it cannot
open or write), the outbox in that database cannot carry the alert. `config_error_alert` and
`store_error_alert` send a forced alert straight through apprise instead, at most once an hour
for the same problem (a small marker file in state/, when that folder is writable), using only
the parts of a broken config that still parse on their own. `tick_crashed`: the tick itself
failed; the alert goes through the database when it still takes one, else directly.

Lazy imports: yaml, the outbox and the state store only when an alert must go out (a config
error stops the tick before it opens the database).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ..core import safe_fs
from ..core.problems import Problem
from ..settings.config import CONFIG_NAME, Config
from ..settings.notify import NotifyConfig, parse_notify_config, scheme_of
from .doctor_state import database_check

Say = Callable[[str], None]

ALERT_EVERY = 3600.0  # the same emergency is alerted at most once an hour
MARKER = "emergency-alert.json"  # in state/: {what: {"digest": ..., "at": ...}}


def salvage_notify(home: Path, environ: Mapping[str, str]) -> NotifyConfig | None:
    """The notification settings of a config that may not load: the whole file if it parses,
    else each top-level block (`notify:`, `heartbeat_url:`, `timezone:`) parsed on its own, so
    a typo elsewhere still leaves the destinations usable. None when none can be read."""
    path = home / CONFIG_NAME
    # bounded: a hostile config must not crash the alert
    from ..core.safe_yaml import MAX_BYTES, load_yaml

    try:  # O_NONBLOCK, then fstat: a FIFO in its place is not waited on
        text = safe_fs.read_followed(path, MAX_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
    import yaml

    raw: dict[str, object] = {}
    try:
        data = load_yaml(text)
        if isinstance(data, dict):
            raw = data
    except (yaml.YAMLError, ValueError, RecursionError):
        for block in _top_level_blocks(text):
            try:
                data = load_yaml(block)
            except (yaml.YAMLError, ValueError, RecursionError):
                continue
            if isinstance(data, dict):
                raw.update((k, v) for k, v in data.items() if k in ("notify", "timezone"))
    try:
        cfg, _ = parse_notify_config(raw, path, environ)
    except Exception:
        return None
    return cfg if cfg.destinations else None


def _top_level_blocks(text: str) -> list[str]:
    """The file cut before each line that starts a new top-level key (column 0, not a comment)."""
    blocks: list[list[str]] = [[]]
    for line in text.splitlines(keepends=True):
        if line[:1] not in ("", " ", "\t", "#", "\n", "\r", "-") and blocks[-1]:
            blocks.append([])
        blocks[-1].append(line)
    return ["".join(b) for b in blocks if b]


def send_now(cfg: NotifyConfig, title: str, body: str,
             environ: Mapping[str, str]) -> list[str]:
    """A forced alert, sent at once to the default destination (to every destination when no
    default is set). Returns one line per destination saying what happened (secrets masked)."""
    from ..alerts.notify import DeliveryError, send

    targets = [cfg.default] if cfg.default else sorted(cfg.destinations)
    lines = []
    for name in targets:
        where = f"{name!r} ({scheme_of(cfg.destinations.get(name, ''))})"
        try:
            send(cfg, name, title, body, environ, kind="failure")
            lines.append(f"alert sent to {where}")
        except DeliveryError as exc:
            lines.append(f"alert to {where} failed: {exc}")
        except Exception as exc:  # never let the error path raise
            lines.append(f"alert to {where} failed: {type(exc).__name__}")
    return lines


def _due(state_dir: Path, what: str, body: str, now: float) -> bool:
    """Rate limit through a marker file in state/, or in logs/ when state/ cannot take it (a
    read-only state folder is one of the emergencies); True (send) when neither can."""
    digest = hashlib.sha256(body.encode()).hexdigest()
    folders = (state_dir, state_dir.parent / "logs")
    for folder in folders:
        last = _markers(folder).get(what)
        if (isinstance(last, dict) and last.get("digest") == digest
                and 0 <= now - float(last.get("at", 0)) < ALERT_EVERY):
            return False
    for folder in folders:
        seen = _markers(folder)
        seen[what] = {"digest": digest, "at": now}
        try:
            # walked from the home, made 0700, never through a symlink (core/safe_fs.py)
            safe_fs.replace_file(folder / MARKER, json.dumps(seen).encode("utf-8"),
                                 root=state_dir.parent, create_dirs=True)
            break
        except OSError:
            continue
    return True


def _markers(folder: Path) -> dict:
    try:
        seen = json.loads(safe_fs.read_regular(folder / MARKER, 1 << 20, root=folder.parent))
    except (OSError, ValueError):
        return {}
    return seen if isinstance(seen, dict) else {}


def config_error_alert(home: Path, problems: Sequence[Problem], environ: Mapping[str, str],
                       now: float) -> list[str]:
    """The config has errors, so the tick stops: a forced alert listing them, sent directly.
    Returns lines for stderr (what was sent, or why nobody could be told). Never raises."""
    try:
        body = ("The tick stopped before running anything: scheduler.yaml has errors.\n"
                + "\n".join(str(p) for p in problems if p.severity == "error")
                + "\nFix the file (`scheduler.py validate` shows the same); `scheduler.py"
                " doctor` checks the rest.")
        cfg = salvage_notify(home, environ)
        if cfg is None:
            return ["no destination could be read from the config: nobody was alerted"]
        if not _due(home / "state", "config", body, now):
            return ["alert already sent within the hour"]
        return send_now(cfg, "mdcron: config error, tasks are not running", body, environ)
    except Exception as exc:
        return [f"could not send the config-error alert: {type(exc).__name__}"]


def store_error_alert(config: Config, error: str, environ: Mapping[str, str],
                      now: float) -> list[str]:
    """The state database cannot be used, so nothing runs (and its outbox cannot hold an
    alert): a forced alert sent directly, and the heartbeat told the tick failed. Returns
    lines for stderr. Never raises."""
    lines = []
    try:
        from ..alerts.notify import heartbeat, settings

        body = (f"The tick stopped: {error}\n"  # maybe after tasks ran: the error says
                "Run `scheduler.py doctor` for what is wrong and how to recover.")
        cfg = settings(config)
        if not cfg.destinations:
            lines = ["no notification destination configured: nobody was alerted"]
        elif not _due(config.state_dir, "store", body, now):
            lines = ["alert already sent within the hour"]
        else:
            lines = send_now(cfg, "mdcron: state database unusable, tasks are not running",
                             body, environ)
        failed = heartbeat(config, True, environ)
        if failed:
            lines.append(failed)
    except Exception as exc:
        lines.append(f"could not send the database alert: {type(exc).__name__}")
    return lines



def tick_crashed(config: Config, error: str, now: float, environ: Mapping[str, str],
                 say: Say) -> None:
    """The tick itself failed: forced alert 'tick crashed, tasks are not running' and an
    incident, sent at once. Never raises (it is already the error path). When the database
    cannot take the alert (damaged, read-only: often why the tick crashed), it goes directly."""
    from ..alerts.after_run import finish_tick, scheduler_alert
    from ..run.incident_command import run_incident_command
    from ..state.store import state_store

    check = database_check(config.home)
    if check.status == "fail":  # say what is wrong with it and how to recover
        say(f"mdcron: {check.detail}; fix: {check.fix}")
        error = f"{error}\n{check.detail}\nfix: {check.fix}"
    recorded = False
    try:
        with state_store(config) as store:
            recorded = scheduler_alert(store, config, kind="tick_crashed",
                                       title="mdcron: tick crashed, tasks are not running",
                                       body=f"The tick failed with:\n{error[-3000:]}", now=now,
                                       environ=environ, say=say,
                                       incident_runner=run_incident_command)
            if recorded:
                finish_tick(store, config, now, True, environ, say)
    except Exception as exc:
        say(f"mdcron: could not record the crash alert: {exc!r}")
    if not recorded:
        problem = "the tick crashed and the state database could not record it"
        for line in store_error_alert(config, f"{problem}:\n{error[-2000:]}", environ, now):
            say(f"mdcron: {line}")
