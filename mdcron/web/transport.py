"""uvicorn's HTTP/1.1 protocol (h11) with the two limits it lacks (issue 24).

uvicorn times out a connection only between requests (`timeout_keep_alive`, cancelled by any
byte that arrives), so a client that sends its headers a byte at a time, or nothing at all,
holds a socket forever; a thousand of them use up the process's descriptors and nobody else
gets in. Here a connection that has no complete request head is *waiting*:
  - it is closed HEADER_SECONDS after it began to wait (a request head's deadline), and
  - past MAX_WAITING waiting connections, the ones waiting longest are closed once they have
    waited MIN_WAIT (a burst of real clients, all new, is not cut off before its requests are
    even read; a crowd of idle sockets is, even one that took every descriptor, when no new
    connection can be accepted to notice it: a timer trims).
A connection whose request head has arrived is served as uvicorn serves it; its body has its
own deadline and size limit in security.Guard; the number of requests served at once is
uvicorn's `limit_concurrency` (server.py).
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_SECONDS = 10.0
MAX_WAITING = 64
MIN_WAIT = 1.0
WAITING: dict[BoundedH11, float] = {}  # -> when it began to wait; the first waited longest
_trimming: list[asyncio.TimerHandle] = []  # the one pending trim, if any


class BoundedH11(H11Protocol):
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._wait()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._served()  # the request head is in: no longer waiting

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing():
            self._served()
        elif self.conn.their_state is h11.IDLE:
            self._wait()  # idle between requests: the same deadline as a new connection

    def connection_lost(self, exc: Exception | None) -> None:
        self._served()
        super().connection_lost(exc)

    def _wait(self) -> None:
        self._served()
        now = self.loop.time()
        WAITING[self] = now
        self._deadline = self.loop.call_later(HEADER_SECONDS, self._give_up)
        _trim(self.loop)

    def _served(self) -> None:
        WAITING.pop(self, None)
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _give_up(self) -> None:
        self._served()
        if not self.transport.is_closing():
            self.transport.close()


def _trim(loop: asyncio.AbstractEventLoop) -> None:
    """Close the longest-waiting connections past MAX_WAITING that waited MIN_WAIT; if fresh
    ones keep the count over, look again when the oldest of them comes of age."""
    if _trimming:
        return  # one is pending; it looks at everything
    now = loop.time()
    while len(WAITING) > MAX_WAITING:
        oldest, since = next(iter(WAITING.items()))
        if now - since < MIN_WAIT:
            _trimming.append(loop.call_at(since + MIN_WAIT, _trimmed, loop))
            return
        oldest._give_up()


def _trimmed(loop: asyncio.AbstractEventLoop) -> None:
    _trimming.clear()
    _trim(loop)
