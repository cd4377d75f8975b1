"""The dead man's switch: one GET of `heartbeat_url` at the end of every tick.

Standard library only, so the idle tick (state/idle.py) can ping without loading the notification
code; a plain http(s) URL is fetched over a socket directly (urllib.request alone costs more than
the idle tick), anything else (a proxy, a redirect, IPv6, user@host) through urllib.
`${VAR}` in the URL comes from the scheduler's environment; the expanded URL is a secret, so errors
show the scheme only and mask every substituted value.

The whole ping has one wall-clock deadline (DEADLINE), not a timeout per read: the socket's timeout
is recomputed from what is left before every connect, send and read, so a server sending one byte
a second cannot hold a tick (issue 22). The urllib path cannot be bounded that way (its reads are
inside http.client): it runs in a daemon thread that is given up at the deadline and dies with
the process.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from ..core.urlscheme import scheme_of

DEADLINE = 10.0  # seconds for the whole ping: connect, TLS, request, answer
NO_ANSWER = f"no answer within {DEADLINE:g} s"
STALE_TICK = 300.0  # seconds without a tick before `list` and `doctor` say cron has stopped
MAX_REASON = 300


_HOST_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-")


def missing_vars(template: str, environ: Mapping[str, str]) -> list[str]:
    if "${" not in template:  # the common case needs no `re` (envref.py)
        return []
    # lazy: envref loads re, which the idle tick's ping never needs
    from ..core.envref import ENV_REF

    return [n for n in dict.fromkeys(ENV_REF.findall(template)) if n not in environ]


def expand_vars(template: str, environ: Mapping[str, str]) -> tuple[str, list[str]]:
    """The text with ${VAR} replaced (every VAR must be set) and the values substituted."""
    if "${" not in template:
        return template, []
    # lazy: envref loads re, which the idle tick's ping never needs
    from ..core.envref import ENV_REF

    values = [environ[n] for n in ENV_REF.findall(template)]
    return ENV_REF.sub(lambda m: environ[m.group(1)], template), values


def mask(text: str, url: str, values: list[str]) -> str:
    """`text` without the URL, the substituted values, or any long piece of the URL."""
    import re  # lazy: only to mask an error message; the idle tick loads no re

    pieces = [url, *values]
    rest = url.split("://", 1)[-1]
    pieces += [p for p in re.split(r"[/:@?&=#,;+]+", rest) if len(p) >= 8]
    for piece in sorted({p for p in pieces if len(p) >= 4}, key=len, reverse=True):
        text = text.replace(piece, "…")
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")


def plain_url(url: str) -> tuple[str, str, str | None, str] | None:
    """(scheme, host, port, target) of a URL the direct GET takes: http(s), a host name or IPv4
    address, an optional port, a path or query of printable ASCII; else None (urllib takes it)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("http", "https"):
        return None
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, target = rest[:cut], rest[cut:]
    host, colon, port = authority.partition(":")
    if not host or not _HOST_CHARS.issuperset(host):
        return None
    if colon and not (0 < len(port) <= 5 and port.isascii() and port.isdigit()):
        return None
    if not all("!" <= c <= "~" for c in target):
        return None
    return scheme, host, port or None, target


def ping(template: str, failed: bool, environ: Mapping[str, str]) -> str | None:
    """GET the URL (with /fail appended to its path when the tick failed). Returns an error
    line with the URL masked, or None. Never raises."""
    where = f"heartbeat ({scheme_of(template)})"
    deadline = time.monotonic() + DEADLINE
    try:
        missing = missing_vars(template, environ)
        if missing:
            names = ", ".join(f"${{{n}}}" for n in missing)
            return f"{where}: {names} not set in the scheduler's environment"
        url, values = expand_vars(template, environ)
        if failed:
            url = with_fail(url)
        match = plain_url(url)
        if match is None or any(environ.get(v) or os.environ.get(v) for v in PROXY_VARS):
            return _urllib_get(url, values, where, deadline)  # proxies, IPv6, user@: urllib
        try:
            status = direct_get(*match, deadline=deadline)
        except TimeoutError:
            return f"{where}: {NO_ANSWER}"
        except OSError as exc:
            return f"{where}: {mask(str(exc), url, values)}"
        if 300 <= status < 400:
            return _urllib_get(url, values, where, deadline)  # a redirect: urllib follows it
        return None if status < 300 else f"{where}: HTTP {status}"
    except Exception as exc:
        return f"{where}: {type(exc).__name__}"


def with_fail(url: str) -> str:
    """The URL with /fail appended to its path (before any ?query or #fragment)."""
    cut = min((i for i in (url.find("?"), url.find("#")) if i >= 0), default=len(url))
    head, tail = url[:cut], url[cut:]
    scheme_end = head.find("://") + 3 if "://" in head else 0
    if "/" not in head[scheme_end:]:
        head += "/"
    return head.rstrip("/") + "/fail" + tail


def left(deadline: float) -> float:
    """Seconds until `deadline` (time.monotonic()); TimeoutError once it has passed."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError(NO_ANSWER)
    return remaining


def direct_get(scheme: str, host: str, port: str | None, target: str | None, *,
               deadline: float) -> int:
    """One GET: direct_request's status."""
    return direct_request(scheme, host, port, target, deadline=deadline)


def direct_request(scheme: str, host: str, port: str | None, target: str | None, *,
                   deadline: float, body: bytes | None = None) -> int:
    """One HTTP/1.1 GET (a POST with `body`: a task's ping, issue 26) over a socket (TLS for
    https, verified as urllib verifies it); the status code. TimeoutError once `deadline`
    (time.monotonic()) passes, however the server paces its bytes: every socket operation
    gets only the time that is left. Costs the import of socket (and ssl for https), not of
    urllib.request or http.client (~25 ms more on a 2-core machine: bench/README.md)."""
    import socket  # lazy: only to ping; every command imports this module (STALE_TICK)

    default = 443 if scheme == "https" else 80
    number = int(port) if port else default
    target = target or "/"
    if target.startswith("?"):
        target = "/" + target
    target = target.split("#", 1)[0]
    # bytes: a str host is encoded with the idna codec, whose import costs `re` (~4 ms)
    sock = socket.create_connection((host.encode("ascii"), number), timeout=left(deadline))
    try:
        if scheme == "https":
            import ssl  # lazy: ssl (~10 ms) only for an https URL

            # the handshake and sendall each count their timeout for the whole operation
            sock.settimeout(left(deadline))
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
        name = host if number == default else f"{host}:{number}"
        sock.settimeout(left(deadline))
        method = "GET" if body is None else "POST"
        sized = "" if body is None else (f"Content-Type: text/plain; charset=utf-8\r\n"
                                         f"Content-Length: {len(body)}\r\n")
        sock.sendall(f"{method} {target} HTTP/1.1\r\nHost: {name}\r\nUser-Agent: mdcron\r\n"
                     f"Accept: */*\r\n{sized}Connection: close\r\n\r\n".encode("ascii")
                     + (body or b""))
        head = b""
        while b"\r\n" not in head and len(head) < 4096:
            sock.settimeout(left(deadline))  # a total deadline, not one per read
            chunk = sock.recv(4096)
            if not chunk:
                break
            head += chunk
    finally:
        sock.close()
    parts = head.split(b"\r\n", 1)[0].split()
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        raise OSError("not an HTTP response")
    return int(parts[1])


def _urllib_get(url: str, values: list[str], where: str, deadline: float) -> str | None:
    """urllib's GET in a daemon thread, waited for until `deadline` (its reads happen inside
    http.client, out of reach of a per-read deadline); a thread still reading at the deadline
    is left behind and ends with the process."""
    import threading  # lazy: only for the rare URL the socket path refuses

    answer: list[str | None] = []
    done = threading.Event()

    def get() -> None:
        try:
            answer.append(_urllib_answer(url, values, where, deadline))
        finally:
            done.set()

    try:
        threading.Thread(target=get, name="heartbeat", daemon=True).start()
        finished = done.wait(left(deadline))
    except TimeoutError:
        finished = False
    return answer[0] if finished and answer else f"{where}: {NO_ANSWER}"


def _urllib_answer(url: str, values: list[str], where: str, deadline: float) -> str | None:
    # lazy: urllib.request (~25 ms: http.client, email) only for a URL the socket path refuses
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, headers={"User-Agent": "mdcron"})
    try:
        with urllib.request.urlopen(request, timeout=left(deadline)) as response:
            response.read(4096)
        return None
    except urllib.error.HTTPError as exc:
        return f"{where}: HTTP {exc.code}"
    except TimeoutError:
        return f"{where}: {NO_ANSWER}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError):
            return f"{where}: {NO_ANSWER}"
        return f"{where}: {mask(str(reason), url, values)}"
    except Exception as exc:  # a thread's exception would print a traceback: never
        return f"{where}: {type(exc).__name__}"
