"""Self-heal by Claude: the Healer the escalation ladder calls, budgets, probation and revert.

One heal is a bounded conversation: the prompt (prompts/self-heal.txt) describes the failure, the
model may read, list and edit files through the tools of selfheal/tools.py (whose guard rails decide
what it may touch), and ends with `finish(diagnosis)`. Bounds: `claude.max_tool_calls` tool calls
(past it every call is refused and the model is made to finish), `claude.max_heal_bytes` written,
and the ladder's deadline. A heal that does not finish (deadline, API error, the limit ignored)
has its changes rolled back; one killed half-way is rolled back by the next tick from its
journal (journal.py, unfinished.py). Every heal is a row in `heals` and a line in
logs/self-heal-audit.log; changed files are backed up first, so `revert_heal` can undo the last.

Budgets: at most `max_heals_per_tick` heals per healer instance (it lives for one tick) and
`claude.max_heals_per_day` per task over the last 24 hours (rows in `heals`).

Lazy imports: the path checks load only when a heal edits a file. Old backups are pruned with the
runs (run/retention.py).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..claude.client import NO_KEY, ClaudeError, ClaudeSession, api_key, append_jsonl, reply_text
from ..claude.templates import PLACEHOLDERS, TemplateError, check_template, render_template
from ..core import safe_fs
from ..core.clock import Clock
from ..core.outcome import RunResult
from ..run.heal_protocol import HealRecord
from ..run.retention import BACKUPS
from ..settings.config import Config
from ..state.store import Store
from ..tasks.task import Task
from .journal import HealJournal
from .tools import (
    ECHO_LIMIT,
    FILE_LIMIT,
    MANIFEST,
    TOOLS,
    Refused,
    Sandbox,
    atomic_write_bytes,
    sha256,
)

TEMPLATE = "self-heal.txt"
AUDIT_LOG = "self-heal-audit.log"
MAX_AUDITED_REFUSALS = 200
PROMPT_TEXT_LIMIT = 32 * 1024  # characters of the task file and output tail put in the prompt


class RevertError(Exception):
    """There is nothing to revert, or reverting would overwrite later edits (then `changed`
    fingerprints those files as they are now: revert_heal's `confirmed`)."""

    def __init__(self, message: str, changed: str | None = None):
        super().__init__(message)
        self.changed = changed


class _Incomplete(Exception):
    """The conversation ended without `finish`."""


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


class ClaudeHealer:
    """run.heal_protocol.Healer backed by the Claude API. Create one per tick; thread-safe."""

    def __init__(self, config: Config, environ: Mapping[str, str], store: Store, clock: Clock):
        self.config = config
        self.environ = environ
        self.db_path = store.path  # each heal opens its own connection (ladders run in threads)
        self.db_url, self.db_host = store.url, store.host
        self.cfg = config.claude
        self.clock = clock  # the tick's: budgets and records use the instant the tick uses
        self._lock = threading.Lock()
        self._used = 0  # heals started by this instance (this tick)

    def now(self) -> float:
        return self.clock.now()

    # -- the Healer protocol ---------------------------------------------------------------------

    def unavailable_reason(self, task: Task) -> str | None:
        if not task.self_heal:
            return "self_heal: false in the task file"
        if api_key(self.environ) is None:
            return f"{NO_KEY}: set ANTHROPIC_API_KEY to enable self-heal"
        with self._lock:
            used = self._used
        if used >= self.cfg.max_heals_per_tick:
            return (f"this tick's self-heal budget is used up ({used} heal(s); "
                    f"max_heals_per_tick: {self.cfg.max_heals_per_tick})")
        with Store(self.db_path, url=self.db_url, host=self.db_host) as store:
            today = heals_since(store, task.id, self.now() - 86400)
        if today >= self.cfg.max_heals_per_day:
            return (f"{task.id} was healed {today} time(s) in the last 24 h "
                    f"(claude.max_heals_per_day: {self.cfg.max_heals_per_day})")
        _source, broken = check_template(self.config, TEMPLATE)
        return broken

    def heal(
        self, task: Task, *, attempt: int, failure: RunResult, previous: HealRecord | None,
        deadline: float, run_id: int,
    ) -> HealRecord:
        started = self.now()
        reason = self.unavailable_reason(task)
        if reason is None:
            with self._lock:
                if self._used >= self.cfg.max_heals_per_tick:
                    reason = "this tick's self-heal budget is used up"
                else:
                    self._used += 1
        if reason is not None:
            record = HealRecord("refused", f"self-heal not attempted: {reason}")
            self._audit(task, run_id, attempt, record, started, None)
            return record
        sandbox: Sandbox | None = None
        backup_dir = self._backup_dir(task, attempt, started)
        # a heal killed half-way is settled by the next tick from this (selfheal/unfinished.py)
        journal = HealJournal.begin(self.config, task.id, task.path, run_id, attempt, started,
                                    backup_dir)
        try:
            sandbox = Sandbox(self.config, task, backup_dir, self.cfg.max_heal_bytes,
                              journal=journal)
            record = self._converse(task, attempt, failure, previous, deadline, sandbox)
        except Exception as exc:  # a bug of ours: undo, report, never raise into the ladder
            if sandbox is not None:
                _roll_back(sandbox)
            record = HealRecord("error", f"mdcron internal error during self-heal: {exc!r}")
        try:
            heal_id = self._insert(task, run_id, attempt, started, record)
            record.extra["heal_id"] = heal_id
        except Exception as exc:  # the database may be busy or broken; the audit still says it
            record.extra["record_error"] = repr(exc)
        self._audit(task, run_id, attempt, record, started, sandbox)
        try:
            journal.close()  # recorded: the next tick has nothing of this heal to settle
        except OSError as exc:  # left behind, it is closed then (the row is found)
            record.extra["journal_error"] = str(exc)
        return record

    # -- one heal ----------------------------------------------------------------------------------

    def _converse(self, task: Task, attempt: int, failure: RunResult,
                  previous: HealRecord | None, deadline: float, sandbox: Sandbox) -> HealRecord:
        extra: dict[str, Any] = {"failure": failure.fail_reason, "tool_calls": 0, "refused": [],
                                 "input_tokens": 0, "output_tokens": 0, "model": self.cfg.model}
        if sandbox.notes:
            extra["notes"] = list(sandbox.notes)
        try:
            prompt = render_template(self.config, TEMPLATE,
                                     self._values(task, attempt, failure, previous, sandbox))
        except TemplateError as exc:
            return HealRecord("error", str(exc), extra=extra)
        session = ClaudeSession(self.cfg, self.environ, deadline)
        try:
            with session:
                diagnosis = self._loop(session, prompt, sandbox, extra)
        except (ClaudeError, _Incomplete) as exc:
            undone = _roll_back(sandbox)
            extra.update(session.usage.as_extra())
            note = f"; its changes to {', '.join(undone)} were rolled back" if undone else ""
            return HealRecord("error", f"self-heal stopped: {exc}{note}", extra=extra,
                              backup_dir=sandbox.backup_dir if sandbox.originals else None)
        extra.update(session.usage.as_extra())
        changed = sandbox.changed()
        if not changed:
            return HealRecord("no_change", diagnosis, extra=extra)
        sandbox.write_manifest(str(sandbox.backup_dir.name))
        return HealRecord("changed", diagnosis, diff=sandbox.diff(), changed=tuple(changed),
                          backup_dir=sandbox.backup_dir, extra=extra)

    def _loop(self, session: ClaudeSession, prompt: str, sandbox: Sandbox,
              extra: dict[str, Any]) -> str:
        limit = self.cfg.max_tool_calls
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        forced = False
        while True:
            choice = {"tool_choice": {"type": "tool", "name": "finish"}} if forced else {}
            message = session.create(messages=messages, tools=TOOLS, **choice)
            uses = [b for b in message.content if getattr(b, "type", "") == "tool_use"]
            messages.append({"role": "assistant",
                             "content": [e for b in message.content if (e := _echo(b))]})
            if not uses:  # a plain answer ends the heal; its text is the diagnosis
                return reply_text(message).strip() or "(the model ended without a diagnosis)"
            diagnosis: str | None = None
            results = []
            for use in uses:
                extra["tool_calls"] += 1
                inputs = use.input if isinstance(use.input, dict) else {}
                try:
                    if diagnosis is not None:
                        raise Refused("finish was already called; this call was not run")
                    if use.name == "finish":
                        diagnosis = str(inputs.get("diagnosis") or "").strip() or "(none given)"
                        output = "finished"
                    elif extra["tool_calls"] > limit:
                        raise Refused(f"the limit of {limit} tool calls per heal is reached; "
                                      "call finish now")
                    else:
                        output = _dispatch(sandbox, use.name, inputs)
                    results.append(_result(use.id, output, False))
                except Refused as exc:
                    _note_refusal(extra, use.name, inputs, str(exc))
                    results.append(_result(use.id, str(exc), True))
            if diagnosis is not None:
                return diagnosis
            if extra["tool_calls"] >= limit:
                if forced:
                    raise _Incomplete(f"the model kept calling tools past the limit of {limit}")
                forced = True
            messages.append({"role": "user", "content": results})

    def _values(self, task: Task, attempt: int, failure: RunResult,
                previous: HealRecord | None, sandbox: Sandbox) -> dict[str, str]:
        from ..tasks.paths import PathError, task_cwd

        try:
            cwd = str(task_cwd(task, self.config))
        except PathError as exc:
            cwd = f"(unusable: {exc})"
        try:
            text = safe_fs.read_regular(task.path, 1 << 20).decode("utf-8", errors="replace")
        except OSError as exc:
            text = f"(cannot read the task file: {exc})"
        prev_extra = previous.extra if previous else {}
        return {
            "task_id": task.id,
            "title": task.title,
            "task_file": sandbox.rel(sandbox.task_file),
            "task_text": _clip(text),
            "run_as": task.run_as,
            "command": task.command or "(none: a Claude task; the prompt is in the task file)",
            "cwd": cwd,
            "exit_code": "none" if failure.exit_code is None else str(failure.exit_code),
            "outcome": failure.outcome.value,
            "error": failure.fail_reason or "(no reason recorded)",
            "output_tail": _clip(failure.output_tail) or "(no output)",
            "attempt": str(attempt),
            # empty on the first heal: the template's {{#previous_diagnosis}} section is left out
            "previous_diagnosis": (previous.diagnosis or "(none given)") if previous else "",
            "previous_diff": (previous.diff or "(no change)") if previous else "",
            "previous_error": str(prev_extra.get("failure") or "(not recorded)") if previous
            else "",
            "home": str(sandbox.home),
            "writable": sandbox.writable_summary(),
            "max_tool_calls": str(self.cfg.max_tool_calls),
            "now": _iso(self.now()),
        }

    # -- records -----------------------------------------------------------------------------------

    def _backup_dir(self, task: Task, attempt: int, started: float) -> Path:
        stamp = datetime.fromtimestamp(started, UTC).strftime("%Y%m%dT%H%M%SZ")
        base = self.config.logs_dir / BACKUPS / task.id
        path, n = base / f"{stamp}-{attempt}", 1
        while path.exists():
            n += 1
            path = base / f"{stamp}-{attempt}.{n}"
        return path

    def _insert(self, task: Task, run_id: int, attempt: int, started: float,
                record: HealRecord) -> int:
        backup = str(record.backup_dir) if record.backup_dir else None
        with Store(self.db_path, url=self.db_url, host=self.db_host) as store:
            return store.add_heal(task.id, run_id, attempt, started, record.diagnosis,
                                  record.diff, backup, record.outcome)

    def _audit(self, task: Task, run_id: int, attempt: int, record: HealRecord,
               started: float, sandbox: Sandbox | None) -> None:
        line = {
            "time": _iso(started), "task": task.id, "run_id": run_id, "attempt": attempt,
            "outcome": record.outcome, "diagnosis": record.diagnosis, "diff": record.diff,
            "changed": [sandbox.rel(p) for p in record.changed] if sandbox else [],
            "backup_dir": str(record.backup_dir) if record.backup_dir else None,
            **record.extra,
        }
        try:
            append_jsonl(self.config.logs_dir / AUDIT_LOG, line, root=self.config.home)
        except OSError as exc:
            record.extra["audit_error"] = str(exc)


_PLACEHOLDERS = PLACEHOLDERS[TEMPLATE]


def _dispatch(sandbox: Sandbox, name: str, inputs: dict[str, Any]) -> str:
    try:
        if name == "read_file":
            return sandbox.read_file(inputs.get("path"))
        if name == "list_dir":
            return sandbox.list_dir(inputs.get("path", "."))
        if name == "replace_in_file":
            return sandbox.replace_in_file(inputs.get("path"), inputs.get("old"),
                                           inputs.get("new"))
        if name == "write_file":
            return sandbox.write_file(inputs.get("path"), inputs.get("content"))
    except OSError as exc:  # permissions, a file vanishing: the model may try otherwise
        raise Refused(f"{name} failed: {exc.strerror or exc}") from None
    raise Refused(f"unknown tool {name!r}; use read_file, list_dir, replace_in_file, "
                  "write_file or finish")


def _result(tool_use_id: str, content: str, is_error: bool) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": content or "(empty)",
            "is_error": is_error}


def _note_refusal(extra: dict[str, Any], tool: str, inputs: dict[str, Any], reason: str) -> None:
    refused = extra["refused"]
    if len(refused) < MAX_AUDITED_REFUSALS:
        path = inputs.get("path")
        refused.append({"tool": tool, "path": path if isinstance(path, str) else None,
                        "reason": reason})
    else:
        extra["refused_not_listed"] = extra.get("refused_not_listed", 0) + 1


def _echo(block: Any) -> dict[str, Any] | None:
    """An assistant block as sent back in the next request; huge inputs are shortened."""
    kind = getattr(block, "type", "")
    if kind == "text":
        return {"type": "text", "text": block.text} if block.text else None
    if kind == "tool_use":
        inputs = block.input if isinstance(block.input, dict) else {}
        short = {k: f"[{len(v)} characters omitted by mdcron]"
                 if isinstance(v, str) and len(v) > ECHO_LIMIT else v for k, v in inputs.items()}
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": short}
    return None


def _clip(text: str) -> str:
    if len(text) <= PROMPT_TEXT_LIMIT:
        return text
    return "[... earlier part cut]\n" + text[-PROMPT_TEXT_LIMIT:]


def _roll_back(sandbox: Sandbox) -> list[str]:
    changed = [sandbox.rel(p) for p in sandbox.changed()]
    sandbox.roll_back()
    return changed


# --- budgets -----------------------------------------------------------------------------------


def heals_since(store: Store, task_id: str, since: float) -> int:
    return store.heals_since(task_id, since)


def heal_history(store: Store, task_id: str, limit: int = 10) -> list[dict[str, object]]:
    """The newest heals of a task (for `show` and `history`)."""
    return store.heal_history(task_id, limit)


# --- retention ------------------------------------------------------------------------------------


# --- revert --------------------------------------------------------------------------------------


def revert_heal(config: Config, store: Store, task_id: str, *, now: float,
                force: bool = False, confirmed: str | None = None) -> list[Path]:
    """Restore the files the task's latest applied heal changed (atomically), mark the heal
    `reverted` and audit it. RevertError when there is none, or when a file changed since the
    heal (someone edited it; `force` overwrites; so does `confirmed`, but only while it is the
    fingerprint of the changed files as they still are: the dashboard's confirm step)."""
    applied = store.last_applied_heal(task_id)
    if applied is None:
        raise RevertError(f"{task_id} has no applied heal to revert{_why_none(store, task_id)}")
    heal_id, backup = applied.id, Path(applied.backup_dir)
    if not backup.exists():
        raise RevertError(f"the backup of heal {heal_id} ({backup}) is gone: heal backups are"
                          f" kept for retention_days ({config.retention_days}), like runs")
    try:
        manifest = json.loads((backup / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RevertError(f"the backup of heal {heal_id} cannot be read ({backup}): {exc}") from exc
    home = Path(os.path.realpath(config.home))
    plan: list[tuple[Path, bytes | None]] = []
    conflicts = []
    for entry in manifest.get("files", []):
        rel = str(entry.get("path", ""))
        target = Path(os.path.realpath(home / rel))
        if not rel or rel.startswith("/") or not target.is_relative_to(home):
            raise RevertError(f"the backup of heal {heal_id} names {rel!r}, outside the home")
        data = (safe_fs.read_regular(backup / rel, FILE_LIMIT, root=config.home)
                if entry.get("existed") else None)
        try:  # never followed, never waited on (a FIFO there counts as changed)
            current: bytes | None = safe_fs.read_regular(target, FILE_LIMIT, root=home)
        except FileNotFoundError:
            current = None
        now_sha = sha256(current) if current is not None else None
        if now_sha != entry.get("after_sha256"):
            conflicts.append(f"{rel}\0{now_sha}")
        plan.append((target, data))
    changed = sha256(f"{heal_id}\0{chr(0).join(conflicts)}".encode()) if conflicts else None
    if conflicts and not force and confirmed != changed:
        names = ", ".join(c.partition("\0")[0] for c in conflicts)
        raise RevertError(f"{names} changed since heal {heal_id}; not reverting "
                          "(use --force to overwrite those edits)", changed)
    for target, data in plan:
        if data is None:
            try:
                target.unlink()
            except FileNotFoundError:
                pass
        else:
            atomic_write_bytes(target, data, root=home)
    store.mark_reverted(heal_id)
    append_jsonl(config.logs_dir / AUDIT_LOG, root=config.home, record={
        "time": _iso(now), "task": task_id,
        "event": "revert", "heal_id": heal_id, "backup_dir": str(backup),
        "restored": [str(t.relative_to(home)) for t, _ in plan],
        "forced": force or bool(conflicts),
    })
    return [t for t, _ in plan]


def _why_none(store: Store, task_id: str) -> str:
    """'; heal 4 was cut off and the next tick rolled it back' when that is the latest."""
    latest = store.heal_history(task_id, 1)
    if latest and latest[0].get("outcome") == "rolled_back":
        return (f"; heal {latest[0]['id']} was cut off before it finished and the next tick "
                "rolled its changes back")
    return ""
