"""The Anthropic client, kept at arm's length: settings, one retrying call, `run_as: claude`.

`anthropic` is imported only inside `ClaudeSession.__enter__`, right before a call is made, so a
tick with nothing for Claude never loads it. The key comes from the scheduler's environment
(passed in as a mapping, never read from os.environ here), and `ANTHROPIC_BASE_URL` from the same
mapping is passed to the SDK explicitly.

Retries are ours, not the SDK's (`max_retries=0` on the client): transient answers (408, 409,
429, 5xx including 529 "overloaded") and connection errors are retried with exponential backoff
starting at `claude.retry_backoff`, honouring `retry-after` up to 60 s, but never past the
caller's deadline. The SDK's own loop would honour any `retry-after` (hours) and ignores deadlines.

Every request has a wall-clock deadline, `claude.timeout` or what is left of the caller's,
whichever is sooner: httpx's timeouts are per read, so deadline.py shuts the request's sockets
down when it passes (issue 22). A call cut by the caller's deadline raises ClaudeTimeout, and a
`run_as: claude` run is then recorded `timeout` at its `timeout`.

Also here, because self-heal and comments share them: owner-only files and JSON-line audit logs
(prompt templates are in templates.py).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.outcome import Outcome, RunResult, envelope_error
from ..core.private_files import append_private, write_private
from ..core.records import dataclass, field
from ..core.units import format_duration
from ..settings.claude import DEFAULT_MODEL as DEFAULT_MODEL  # re-exported
from ..settings.claude import ClaudeConfig as ClaudeConfig
from ..settings.claude import parse_claude_config as parse_claude_config
from ..settings.config import Config
from ..tasks.task import Task
from .templates import TemplateError as TemplateError  # re-exported: older imports
from .templates import render_template as render_template

DEFAULT_BASE_URL = "https://api.anthropic.com"
NO_KEY = "no ANTHROPIC_API_KEY in the scheduler's environment"
MAX_RETRY_AFTER = 60.0  # a longer retry-after is not waited for: the attempt fails
MAX_BACKOFF = 30.0
_TRANSIENT = frozenset({408, 409, 429})


def api_key(environ: Mapping[str, str]) -> str | None:
    key = (environ.get("ANTHROPIC_API_KEY") or "").strip()
    return key or None


# --- one conversation with the API -----------------------------------------------------------


class ClaudeError(Exception):
    """A call to Claude did not produce an answer; the message says why, in words."""


class ClaudeUnavailable(ClaudeError):
    """No call can be made (no key); nothing was sent."""


class ClaudeTimeout(ClaudeError):
    """The caller's deadline passed before Claude answered."""


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    model: str = ""

    def as_extra(self) -> dict[str, object]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "model": self.model}


@dataclass(slots=True)
class ClaudeSession:
    """`with ClaudeSession(cfg, environ, deadline) as s: s.create(...)`: a client for one job
    (a run, a heal, a comment check), its token count, and the retry policy."""

    cfg: ClaudeConfig
    environ: Mapping[str, str]
    deadline: float  # time.monotonic() by which every call must be over
    usage: Usage = field(default_factory=Usage)
    _client: Any = None
    _sdk: Any = None
    _watch: Any = None  # deadline.SocketDeadline of this session's client

    def __enter__(self) -> ClaudeSession:
        key = api_key(self.environ)
        if key is None:
            raise ClaudeUnavailable(f"{NO_KEY}: set ANTHROPIC_API_KEY to use Claude")
        import anthropic  # lazy: anthropic (~300 ms), only the moment a call is about to be made

        from .deadline import SocketDeadline  # lazy: threading, with anthropic

        self._sdk = anthropic
        self._watch = SocketDeadline()
        base_url = (self.environ.get("ANTHROPIC_BASE_URL") or "").strip() or DEFAULT_BASE_URL
        http = anthropic.DefaultHttpxClient(event_hooks={"request": [self._watch.on_request]})
        self._client = anthropic.Anthropic(
            api_key=key, base_url=base_url, max_retries=0, timeout=self.cfg.timeout,
            http_client=http,
        )
        return self

    def __exit__(self, *exc: object) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def create(self, **kwargs: Any) -> Any:
        """messages.create with our retries; returns the SDK's Message or raises ClaudeError."""
        sdk = self._sdk
        kwargs.setdefault("max_tokens", self.cfg.max_tokens)
        kwargs.setdefault("model", self.cfg.model)
        tries = 0
        while True:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0.5:
                raise ClaudeTimeout("the deadline passed before Claude answered")
            tries += 1
            limit = min(self.cfg.timeout, remaining)
            try:
                with self._watch.armed(limit):  # the whole request, not each read
                    message = self._client.messages.create(timeout=limit, **kwargs)
            except sdk.APIStatusError as exc:
                status = exc.status_code
                transient = status in _TRANSIENT or status >= 500
                problem = _describe_status(exc)
                wait = _retry_after(exc.response.headers)
            except sdk.APIConnectionError as exc:
                if self._watch.expired or isinstance(exc, sdk.APITimeoutError):
                    problem = f"the Claude API did not answer within {round(limit, 1):g} s"
                    if self.deadline - time.monotonic() <= 0.5:
                        raise ClaudeTimeout(problem) from None
                else:
                    problem = _describe_connection(exc, self)
                transient, wait = True, None
            except (sdk.AnthropicError, ValueError, TypeError) as exc:
                raise ClaudeError(f"Claude API call failed: {exc}") from exc
            else:
                self._count(message, kwargs["model"])
                return message
            if not transient or tries > self.cfg.max_retries:
                after = f" (gave up after {tries} tries)" if transient else ""
                raise ClaudeError(problem + after)
            if wait is None or wait > MAX_RETRY_AFTER:
                if wait is not None:
                    raise ClaudeError(f"{problem}; the API asks to wait {wait:.0f} s, too long")
                base = self.cfg.retry_backoff * (2 ** (tries - 1))
                wait = min(base, MAX_BACKOFF) * random.uniform(0.75, 1.0)
            if time.monotonic() + wait >= self.deadline - 0.5:
                raise ClaudeError(f"{problem}; no time left before the deadline to retry")
            time.sleep(wait)

    def _count(self, message: Any, model: str) -> None:
        usage = getattr(message, "usage", None)
        self.usage.calls += 1
        self.usage.input_tokens += int(getattr(usage, "input_tokens", 0) or 0)
        self.usage.output_tokens += int(getattr(usage, "output_tokens", 0) or 0)
        self.usage.model = str(getattr(message, "model", "") or model)


def _retry_after(headers: Any) -> float | None:
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name) if headers is not None else None
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue
        return seconds if seconds > 0 else None
    return None


def _describe_status(exc: Any) -> str:
    status = exc.status_code
    kind = getattr(exc, "type", None)
    text = getattr(exc, "api_message", None) or str(exc)
    hint = ""
    if status == 401:
        hint = "; check ANTHROPIC_API_KEY"
    elif status == 529:
        kind = kind or "overloaded"
    return f"Claude API error {status}{f' ({kind})' if kind else ''}: {text}{hint}"


def _describe_connection(exc: Any, session: ClaudeSession) -> str:
    cause = exc.__cause__ or exc
    return f"cannot reach the Claude API at {session._client.base_url}: {cause}"


def reply_text(message: Any) -> str:
    return "".join(b.text for b in message.content if getattr(b, "type", "") == "text")


# --- run_as: claude ---------------------------------------------------------------------------


def last_line_error(text: str) -> str | None:
    """The error envelope on the reply's last non-empty line, if any."""
    lines = [line for line in text.splitlines() if line.strip()]
    return envelope_error(lines[-1]) if lines else None


def run_claude_task(
    task: Task, config: Config, environ: Mapping[str, str], *, log_path: Path, deadline: float
) -> RunResult:
    """One `run_as: claude` run: the prompt (or the body) to the model, its reply as output.
    Never raises: every failure is a RunResult with a fail_reason."""
    start = time.monotonic()
    cfg = config.claude
    model = task.model or cfg.model
    extra: dict[str, object] = {"input_tokens": 0, "output_tokens": 0, "model": model}
    text, reason, outcome = "", None, Outcome.FAILED
    try:
        session = ClaudeSession(cfg, environ, min(deadline, start + task.timeout))
        with session:
            message = session.create(
                model=model, messages=[{"role": "user", "content": task.prompt or task.body}]
            )
        extra.update(session.usage.as_extra())
        extra["stop_reason"] = message.stop_reason
        text = reply_text(message)
        if not text.strip():
            reason = f"Claude returned an empty reply (stop_reason {message.stop_reason})"
        else:
            reason = last_line_error(text)
    except ClaudeTimeout as exc:
        text = f"[mdcron] {exc}\n"
        reason, outcome = f"timeout after {format_duration(task.timeout)}", Outcome.TIMEOUT
    except ClaudeError as exc:
        reason = str(exc)
    except Exception as exc:  # a bug of ours or the SDK's must not end the tick
        reason = f"mdcron internal error while calling Claude: {exc!r}"
    output = text if text.strip() else f"[mdcron] {reason}\n"
    if not output.endswith("\n"):
        output += "\n"
    log_error = None
    try:
        write_private(log_path, output.encode("utf-8"), root=config.home)
    except OSError as exc:
        log_error = f"[log write failed: {exc}]"
    tail = _tail(output, config.output_tail_bytes)
    return RunResult(
        outcome if reason else Outcome.SUCCESS,
        fail_reason=reason,
        duration=time.monotonic() - start,
        output_tail=tail + (f"\n{log_error}" if log_error else ""),
        log_path=log_path,
        log_truncated=log_error is not None,
        extra=extra,
    )


def _tail(text: str, size: int) -> str:
    data = text.encode("utf-8")[-size:] if size > 0 else b""
    return data.decode("utf-8", errors="ignore")


# --- templates (templates.py, re-exported) and files -------------------------------------------


def append_jsonl(path: Path, record: Mapping[str, object], *, root: Path) -> None:
    """Append one JSON line to an owner-only audit log under `root` (one write, O_APPEND)."""
    line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
    append_private(path, line.encode("utf-8"), root=root)
