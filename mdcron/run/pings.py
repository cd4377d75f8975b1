"""Issue 26: a task's `ping_url`, pinged as healthchecks.io expects: `<url>/start` when its
ladder starts, then the bare URL on success, or `<url>/<exit code>` (`/fail` without one: a
timeout, a crash) on failure, that POST carrying the last 10 KiB of the run's output with the
scheduler's secrets masked.

A ping never holds a run or a tick: each one is a daemon thread with one wall-clock deadline
(DEADLINE, counted from when it is sent; heartbeat.direct_request gives every socket operation
only what is left), never retried. The end ping waits for its /start first (within its own
deadline), so the two arrive in order. The tick (and `run`) waits for pings still in flight
until their deadlines at its end (wait_all), so a process does not exit with an unsent ping;
one that never answers costs the tick at most DEADLINE after its last run, and is said.

Lazy imports: threading and the HTTP code of alerts/heartbeat.py (stdlib only) load only for a
task with `ping_url`; the notification layer is not touched.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence

from ..core.outcome import Outcome, RunResult
from ..core.records import dataclass, field
from ..tasks.task import Task

TYPE_CHECKING = False  # typing stays off the tick's path (issue 27: ~2.5 ms before a due task)
if TYPE_CHECKING:
    import threading
    from typing import Any

DEADLINE = 5.0  # seconds for one ping: connect, TLS, request, answer
BODY_BYTES = 10 * 1024  # the output's tail sent with the end ping
MASK = "[masked]"

_FLIGHTS: list[Flight] = []  # pings of this process not yet waited for


@dataclass(slots=True)
class Flight:
    task_id: str
    url: str
    deadline: float  # time.monotonic()
    thread: threading.Thread | None = None
    done: Any = None  # threading.Event, set when the ping ended (answered or not)
    after: Flight | None = field(default=None, repr=False)  # the /start to wait for first
    error: str | None = None  # set by its thread: what went wrong


def target(url: str, result: RunResult | None) -> str:
    """Pure: the URL for one ping: /start (result None), bare for a success, /<exit code>
    for a failed exit 1-255, else /fail. Any ?query stays at the end."""
    if result is None:
        suffix = "/start"
    elif result.ok:
        return url
    elif (result.outcome is Outcome.FAILED and result.exit_code is not None
          and 0 < result.exit_code <= 255):
        suffix = f"/{result.exit_code}"
    else:
        suffix = "/fail"
    cut = min((i for i in (url.find("?"), url.find("#")) if i >= 0), default=len(url))
    return url[:cut].rstrip("/") + suffix + url[cut:].split("#", 1)[0]


def masked(text: str, secrets: Sequence[str]) -> str:
    """Pure: `text` with every secret value (4+ characters), longest first, replaced."""
    for value in sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text


def secret_values(environ: Mapping[str, str], secret_names: Sequence[str]) -> list[str]:
    from ..settings.config import is_secret  # lazy: only for a task with ping_url

    return [v for k, v in environ.items() if v and is_secret(k, secret_names)]


def output_tail(result: RunResult, limit: int = BODY_BYTES) -> bytes:
    """The last `limit` bytes of the run's log (never following a symlink, never waiting on a
    FIFO), else of the tail the result kept."""
    if result.log_path is not None:
        try:
            fd = os.open(result.log_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            fd = None
        if fd is not None:
            try:
                info = os.fstat(fd)
                if (info.st_mode & 0o170000) == 0o100000:
                    os.lseek(fd, max(0, info.st_size - limit), os.SEEK_SET)
                    return os.read(fd, limit)
            except OSError:
                pass
            finally:
                os.close(fd)
    return result.output_tail.encode("utf-8", errors="replace")[-limit:]


def start(task: Task) -> Flight | None:
    """`/start`, sent in the background; None for a task without ping_url."""
    if not task.ping_url:
        return None
    return _send(task.id, target(task.ping_url, None), None, None)


def finish(task: Task, result: RunResult, started: Flight | None, environ: Mapping[str, str],
           secret_names: Sequence[str]) -> Flight | None:
    """The end ping with the output's tail, masked, sent in the background after /start."""
    if not task.ping_url:
        return None
    tail = output_tail(result)[-BODY_BYTES:].decode("utf-8", errors="replace")
    body = masked(tail, secret_values(environ, secret_names)).encode("utf-8")
    return _send(task.id, target(task.ping_url, result), body, started)


def _send(task_id: str, url: str, body: bytes | None, after: Flight | None) -> Flight:
    import threading  # lazy: only for a task with ping_url

    flight = Flight(task_id, url, time.monotonic() + DEADLINE, done=threading.Event(),
                    after=after)
    flight.thread = threading.Thread(target=_fly, args=(flight, body), daemon=True,
                                     name=f"ping-{task_id}")
    _FLIGHTS.append(flight)
    flight.thread.start()
    return flight


def _fly(flight: Flight, body: bytes | None) -> None:
    error: str | None
    try:
        if flight.after is not None and flight.after.done is not None:
            flight.after.done.wait(max(0.0, flight.deadline - time.monotonic()))
        error = request(flight.url, body, flight.deadline)
    except Exception as exc:  # a thread's exception would print a traceback: never
        error = type(exc).__name__
    flight.error = error
    flight.done.set()


def request(url: str, body: bytes | None, deadline: float) -> str | None:
    """One GET (or POST with `body`) by `deadline`; an error line without the URL, or None."""
    # lazy: the socket client of the heartbeat (stdlib only), only to ping
    from ..alerts.heartbeat import PROXY_VARS, direct_request, plain_url

    match = plain_url(url)
    if match is None or any(os.environ.get(v) for v in PROXY_VARS):
        return _urllib(url, body, deadline)
    try:
        status = direct_request(*match, deadline=deadline, body=body)
    except TimeoutError:
        return f"no answer within {DEADLINE:g} s"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None if status < 400 else f"HTTP {status}"


def _urllib(url: str, body: bytes | None, deadline: float) -> str | None:
    """Proxies, IPv6 literals, user@host: urllib, in this (daemon) thread, which wait_all
    gives up at the deadline."""
    import urllib.error  # lazy: only for a URL the socket client refuses
    import urllib.request

    req = urllib.request.Request(url, data=body, headers={"User-Agent": "mdcron"})
    try:
        with urllib.request.urlopen(req, timeout=max(0.1, deadline - time.monotonic())) as r:
            r.read(4096)
        return None
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return type(getattr(exc, "reason", exc)).__name__


def _shown(url: str) -> str:
    """Scheme and host of a ping URL, never its path (the check's key)."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0].rsplit('@', 1)[-1]}/…"


def wait_all(say: Callable[[str], None] | None = None) -> None:
    """Wait for this process's pings until each one's deadline; say what went wrong."""
    while _FLIGHTS:
        flight = _FLIGHTS.pop(0)
        if flight.thread is not None:
            flight.thread.join(max(0.0, flight.deadline - time.monotonic()))
        error = flight.error if flight.done.is_set() else f"no answer within {DEADLINE:g} s"
        if error is not None and say is not None:
            say(f"mdcron: {flight.task_id}: ping {_shown(flight.url)}: {error}")
