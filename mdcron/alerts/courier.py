"""Apprise delivery in a child process that is killed at the deadline (issue 22).

apprise does its own HTTP (requests, per-read timeouts) and gives up on a slow service by
abandoning the worker thread, which the interpreter then joins at exit: a destination that
trickles one byte a second kept the tick alive long after "did not finish". A thread cannot be
stopped; a process can. So each flush sends through one child (`Courier`), started on the first
message and reused for the next: one JSON line per message on its stdin (the expanded URL is a
secret: never in argv or the environment), one JSON line back. When no answer has come
`timeout` seconds after a message went, the child is killed and the message fails with "no
answer within 15 s" (retried like any failure); the next message gets a new child.

The child stays in the tick's process group (whoever kills the tick's group kills it too) and
bounds itself: SIGALRM at the deadline plus SELF_BOUND_SLACK before every send, so even a tick
killed alone mid-flush leaves no courier behind for longer than that.

Lazy imports: the child imports apprise (the parent never does); subprocess, select and json load
only when a message is actually sent.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

SELF_BOUND_SLACK = 5  # seconds the child outlives a send's deadline at most, orphaned or not
_ROOT = str(Path(__file__).resolve().parent.parent.parent)  # the folder holding `mdcron`
_CHILD = (f"import sys; sys.path.insert(0, {_ROOT!r});"
          " from mdcron.alerts.courier import serve; serve()")


class CourierTimeout(Exception):
    """The child gave no answer in time; it has been killed."""


class Courier:
    """`with Courier(timeout) as c: c.send(url, title, body)` -> None when delivered, else
    (reason, permanent). Raises CourierTimeout when the child took longer than `timeout`."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self._child: Any = None
        self._buffer = b""

    def __enter__(self) -> Courier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, url: str, title: str, body: str,
             kind: str = "info") -> tuple[str, bool] | None:
        """`kind`: apprise's notify type (info, success, warning, failure)."""
        import json  # lazy: only when a message is sent

        deadline = time.monotonic() + self.timeout
        request = {"url": url, "title": title, "body": body, "timeout": self.timeout,
                   "type": kind}
        try:
            child = self._start()
            child.stdin.write(json.dumps(request).encode() + b"\n")
            child.stdin.flush()
            line = self._read_line(deadline)
        except CourierTimeout:
            self._kill()
            raise
        except OSError as exc:  # the child died (a broken pipe): the next send starts another
            self._kill()
            return f"the delivery process failed: {exc}", False
        if line is None:
            code = self._kill()
            return f"the delivery process ended without an answer (exit {code})", False
        try:
            answer = json.loads(line)
        except ValueError:
            self._kill()
            return "the delivery process answered nonsense", False
        if answer.get("ok"):
            return None
        return str(answer.get("reason") or "apprise failed"), bool(answer.get("permanent"))

    def close(self) -> None:
        """End the child: EOF on its stdin, a short wait, then the kill."""
        child = self._child
        if child is None:
            return
        try:
            child.stdin.close()
            child.wait(1.0)
        except Exception:  # a stuck child (TimeoutExpired) or a pipe already gone
            pass
        self._kill()

    def _start(self) -> Any:
        if self._child is not None and self._child.poll() is None:
            return self._child
        import subprocess  # lazy: only when a message is sent

        self._buffer = b""
        self._child = subprocess.Popen(
            [sys.executable, "-P", "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        return self._child

    def _read_line(self, deadline: float) -> bytes | None:
        """The child's next line, or None at EOF; CourierTimeout at the deadline."""
        import select  # lazy: only when a message is sent

        fd = self._child.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CourierTimeout()
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _kill(self) -> int | None:
        """Kill the child and reap it; its exit code."""
        child, self._child = self._child, None
        if child is None:
            return None
        child.kill()  # a no-op once it has been reaped
        for stream in (child.stdin, child.stdout):
            try:
                stream.close()
            except OSError:
                pass
        return child.wait()


# ---------------------------------------------------------------- the child


def serve() -> None:
    """The child's loop: a JSON request per stdin line, a JSON answer per stdout line."""
    import json  # lazy: the child's own, like every import below
    import signal

    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        try:
            request = json.loads(line)
            signal.alarm(int(float(request["timeout"])) + SELF_BOUND_SLACK)
            answer = deliver(str(request["url"]), str(request["title"]), str(request["body"]),
                             str(request.get("type") or "info"))
        except Exception as exc:  # never a traceback: the parent reports the reason
            answer = {"ok": False, "reason": f"{type(exc).__name__}: {exc}"}
        signal.alarm(0)
        out.write(json.dumps(answer).encode() + b"\n")
        out.flush()


def deliver(url: str, title: str, body: str, kind: str = "info") -> dict[str, object]:
    """One apprise notification; {"ok": True} or {"ok": False, "reason", "permanent"}. The reason
    is unmasked (the parent masks it)."""
    import logging  # lazy: in the child only

    import apprise  # lazy: hundreds of ms and its plugins, in the child only

    # apprise (and urllib3 under it, at DEBUG) log through `logging`; their records hold URLs.
    # Failure reasons come from the call's own capture instead.
    for name in ("apprise", "urllib3"):
        logging.getLogger(name).propagate = False
    app = apprise.Apprise()
    if not app.add(url):
        return {"ok": False, "permanent": True,
                "reason": "apprise cannot use this URL (unknown scheme or malformed token);"
                          " check it with `apprise -vv URL`"}
    try:
        notify_type = apprise.NotifyType(kind)
    except ValueError:
        notify_type = apprise.NotifyType.INFO
    with app.notify(title=title, body=body, notify_type=notify_type) as result:
        if result:
            return {"ok": True}
        reasons = [e.message for e in result.logs() if e.level in ("WARNING", "ERROR")]
        return {"ok": False, "permanent": False,
                "reason": reasons[-1] if reasons else f"apprise status {result.status.name}"}
