"""uvicorn's HTTP/1.1 protocol (h11) with the two limits it lacks (issue 24).

uvicorn times out a connection only between requests (`timeout_keep_alive`, cancelled by any
byte that arrives), so a client that sends its headers a byte at a time, or nothing at all,
holds a socket forever; a thousand of them use up the process's descriptors and nobody else
gets in. Here a connection that has no complete request head is *waiting*:
  - it is closed HEADER_SECONDS after it began to wait (a request head's deadline), and
  - past MAX_WAITING waiting connections, a new one closes the one waiting longest, once that
    one has waited MIN_WAIT (a burst of real clients, all new, is not cut off before its
    requests are even read; a crowd of idle sockets is).
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
        while len(WAITING) > MAX_WAITING:
            oldest, since = next(iter(WAITING.items()))
            if now - since < MIN_WAIT:
                break
            oldest._give_up()

    def _served(self) -> None:
        WAITING.pop(self, None)
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _give_up(self) -> None:
        self._served()
        if not self.transport.is_closing():
            self.transport.close()
