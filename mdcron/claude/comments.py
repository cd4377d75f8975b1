"""Comments on tasks, read by Claude before a run: run, skip, pause, or update a few settings.

`check_comments` asks the model (prompts/check-comments.txt, one forced tool `decide`) what to do
about a task's unread comments. Its answer is checked in code before anything happens: a known
action, updates only to UPDATABLE keys, and an edited file that still validates. A refused
decision becomes `run`, with the refusal as the reply. The comments are then marked read with
the reply and the action, and the decision is appended to logs/comments-audit.log.

Without an API key, or when the API fails, nothing is decided: the task runs and the comments
stay unread for a later tick. Model misbehaviour never raises. The check has its own wall-clock
bound, CHECK_BOUND (60 s), or `claude.timeout` × (max_retries + 1) + 5 s when that is less: a
slow API delays the run by that much at most (issue 22).

Lazy imports: the task-file parser (yaml) loads only when a reply changes a field of the task
file.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ..core import safe_fs
from ..core.records import dataclass, field
from ..settings.config import Config
from ..state.store import Store
from ..tasks.frontmatter_edit import EditError, edit_task_file, set_keys
from ..tasks.task import NOTIFY_ON, Task
from .client import NO_KEY, ClaudeError, ClaudeSession, api_key, append_jsonl
from .templates import TemplateError, render_template

TEMPLATE = "check-comments.txt"
AUDIT_LOG = "comments-audit.log"
ACTIONS = ("run", "skip", "pause", "update")
UPDATABLE = ("schedule", "timeout", "retry", "notify_on", "notify_to", "tags", "title")
MAX_COMMENT_CHARS = 8000
UNREAD = "comments left unread: "  # a run decision that read nothing starts so
CHECK_BOUND = 60.0  # seconds the check may delay a run, retries included
TASK_TEXT_LIMIT = 1 << 20  # a task file's own bound (taskfile.MAX_BYTES)

DECIDE_TOOL: dict[str, Any] = {
    "name": "decide",
    "description": "Say what to do about the comments before this run.",
    "input_schema": {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": list(ACTIONS)},
            "reason": {"type": "string", "description": "the reply to the commenter"},
            "updates": {
                "type": "object",
                "description": "for action update only: the keys to change",
                "properties": {
                    "schedule": {"type": "string"},
                    "timeout": {"type": ["string", "integer"]},
                    "retry": {"type": "boolean"},
                    "notify_on": {"type": "string", "enum": list(NOTIFY_ON)},
                    "notify_to": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "title": {"type": "string"},
                },
                "additionalProperties": False,
            },
        },
        "required": ["action", "reason"],
    },
}


@dataclass(frozen=True, slots=True)
class CommentDecision:
    action: str  # run | skip | pause | update ("update" has been applied; the task still runs)
    reason: str
    applied_updates: dict[str, object] = field(default_factory=dict)


# --- the thread ---------------------------------------------------------------------------------


def add_comment(store: Store, task_id: str, author: str, text: str, now: float) -> int:
    return store.add_comment(task_id, author, text, now)


def thread(store: Store, task_id: str) -> list[dict[str, object]]:
    """Every comment of a task, oldest first, each with the scheduler's reply and action."""
    return store.comments(task_id)


def unread(store: Store, task_id: str) -> list[dict[str, object]]:
    return store.comments(task_id, unread_only=True)


# --- the decision -------------------------------------------------------------------------------


def check_comments(
    task: Task, config: Config, environ: Mapping[str, str], store: Store, now: float,
    *, deadline: float | None = None,
) -> CommentDecision:
    """Decide about the task's unread comments before it runs (see the module docstring)."""
    pending = unread(store, task.id)
    if not pending:
        return CommentDecision("run", "no unread comments")
    if api_key(environ) is None:
        return CommentDecision("run", f"{UNREAD}{NO_KEY}")
    cfg = config.claude
    if deadline is None:
        deadline = time.monotonic() + min(CHECK_BOUND,
                                          cfg.timeout * (cfg.max_retries + 1) + 5)
    try:
        text = _task_text(task, config)
        prompt = render_template(config, TEMPLATE, {
            "task_id": task.id, "task_file": _rel(task, config), "task_text": text,
            "comments": _format(pending), "now": _iso(now),
        })
        session = ClaudeSession(cfg, environ, deadline)
        with session:
            message = session.create(
                messages=[{"role": "user", "content": prompt}], tools=[DECIDE_TOOL],
                tool_choice={"type": "tool", "name": "decide"},
            )
    except (ClaudeError, TemplateError, OSError) as exc:
        return CommentDecision("run", f"{UNREAD}{exc}")
    except Exception as exc:  # a bug of ours or the SDK's: the task still runs
        return CommentDecision("run", f"{UNREAD}mdcron internal error {exc!r}")
    requested = next((b.input for b in message.content if getattr(b, "type", "") == "tool_use"
                      and b.name == "decide"), None)
    decision, refusal = _apply(task, config, requested)
    reply = decision.reason if refusal is None else f"refused: {refusal}; running as usual"
    ids = [int(str(c["id"])) for c in pending]
    store.answer_comments(ids, now, reply, decision.action)
    record = {
        "time": _iso(now), "task": task.id, "comments": ids, "requested": requested,
        "action": decision.action, "reason": decision.reason, "refused": refusal,
        "applied_updates": decision.applied_updates, **session.usage.as_extra(),
    }
    try:
        append_jsonl(config.logs_dir / AUDIT_LOG, record, root=config.home)
    except OSError:
        pass  # the decision is in the database; a full disk must not stop the run
    if refusal is not None:
        return CommentDecision("run", reply)
    return decision


def _apply(task: Task, config: Config, requested: object) -> tuple[CommentDecision, str | None]:
    """Validate the model's decision and carry it out. (decision, None) or (run, refusal)."""
    run = CommentDecision("run", "")
    if not isinstance(requested, dict):
        return run, "the model did not call the decide tool"
    action, reason = requested.get("action"), requested.get("reason")
    reason = reason.strip() if isinstance(reason, str) and reason.strip() else "(no reason given)"
    if action not in ACTIONS:
        return run, f"unknown action {action!r} (expected one of {', '.join(ACTIONS)})"
    if action in ("run", "skip"):
        return CommentDecision(action, reason), None
    if action == "pause":
        try:
            edit_task_file(task.path, {"enabled": False, "disabled_reason": "paused"},
                           root=config.home)
        except (EditError, OSError) as exc:
            return run, f"cannot pause: {exc}"
        return CommentDecision("pause", reason), None
    updates = requested.get("updates")
    if not isinstance(updates, dict) or not updates:
        return run, "action update needs the keys to change in `updates`"
    outside = sorted(str(k) for k in updates if k not in UPDATABLE)
    if outside:
        return run, (f"{', '.join(outside)} may not be changed by a comment "
                     f"(allowed: {', '.join(UPDATABLE)})")
    if any(v is None for v in updates.values()):
        return run, "updates need values (null would remove a key)"
    from ..tasks.taskfile import parse_task_text

    try:
        current = _task_text(task, config)
        edited, problems = parse_task_text(set_keys(current, updates), task.path, config)
        if edited is None:
            errors = "; ".join(p.message for p in problems if p.severity == "error")
            return run, f"the update would not validate: {errors}"
        edit_task_file(task.path, updates, root=config.home)
    except (EditError, OSError, UnicodeDecodeError) as exc:
        return run, f"the update cannot be applied: {exc}"
    return CommentDecision("update", reason, dict(updates)), None


def _format(comments: list[dict[str, object]]) -> str:
    parts = []
    for c in comments:
        body = str(c["body"])
        if len(body) > MAX_COMMENT_CHARS:
            body = body[:MAX_COMMENT_CHARS] + " [... cut]"
        parts.append(f"[{_iso(float(str(c['created_at'])))}] {c['author']}: {body}")
    return "\n\n".join(parts)


def _task_text(task: Task, config: Config) -> str:
    """The task file as it is now; a FIFO or a symlink swapped in is refused (OSError)."""
    return safe_fs.read_regular(task.path, TASK_TEXT_LIMIT, root=config.home).decode("utf-8")


def _rel(task: Task, config: Config) -> str:
    try:
        return task.path.resolve().relative_to(config.home.resolve()).as_posix()
    except ValueError:
        return str(task.path)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")
