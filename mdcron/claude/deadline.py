"""A wall-clock deadline for one HTTP call of the Anthropic SDK, whatever the server's pace.

httpx's timeouts are per phase and per read: a server that sends a byte every second never
trips a 120 s read timeout, so a claude task with `timeout: 15s` ran as long as the server
liked (issue 22). `SocketDeadline` keeps the sockets the session's client opens (httpcore's
documented `trace` request extension reports every connection it makes, set on each request by
an httpx `request` event hook) and, when an armed call's time is up, shuts them down from a
timer thread. A read blocked in the calling thread then returns at once, the SDK raises a
connection error, and the session reports "did not answer within N s". Nothing is left running:
no worker thread, no socket.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_CONNECTED = ("connect_tcp.complete", "connect_unix_socket.complete", "start_tls.complete")


class SocketDeadline:
    """Give `on_request` to the httpx client's `request` event hooks; wrap each call in
    `with deadline.armed(seconds):`; `expired` says whether the last armed call ran out."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.expired = False

    def on_request(self, request: Any) -> None:
        """httpx event hook: ask httpcore to report the connections this request makes."""
        request.extensions = {**request.extensions, "trace": self._trace}

    def _trace(self, event: str, info: dict[str, Any]) -> None:
        if not event.endswith(_CONNECTED):
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if not isinstance(sock, socket.socket):
            return
        with self._lock:
            self._sockets = [s for s in self._sockets if s.fileno() != -1]  # closed: forget
            self._sockets.append(sock)
            if self.expired:  # connected after the deadline: not one read more
                _shut(sock)

    @contextmanager
    def armed(self, seconds: float) -> Iterator[None]:
        """Shut the client's sockets down if the body still runs `seconds` from now."""
        with self._lock:
            self.expired = False
        timer = threading.Timer(max(0.0, seconds), self._expire)
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    """Wake every read and write on the socket (a blocked recv returns, later ones fail). The
    plain socket's shutdown, also for TLS: SSLSocket's own would drop its SSL object under the
    reading thread."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass  # already closed or never connected
