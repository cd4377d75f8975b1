"""A server on 127.0.0.1 that never finishes answering: it accepts, reads what the client sends,
then sends one byte every `interval` seconds for ever (an HTTP status line that never ends, so
no client sees a complete line). A per-read timeout never fires against it; only a wall-clock
deadline for the whole call does.

Use the `trickle` fixture (import `trickle_fixture` into a test module); `trickle.url("/ping")`
is a plain URL, `trickle.json_url()` an apprise destination, `trickle.base_url` an
ANTHROPIC_BASE_URL. `trickle.connections` counts the connections accepted, `trickle.hung_up`
those the client closed (seen at the next byte sent: within about two intervals).
"""

from __future__ import annotations

import itertools
import socket
import threading
from collections.abc import Iterator

import pytest

PREFIX = b"HTTP/1.1 200 OK"  # then "x" for ever: the line never ends


class TrickleServer:
    def __init__(self, interval: float = 1.0) -> None:
        self.interval = interval
        self.connections = 0
        self.hung_up = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port = self._listener.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def url(self, path: str = "/") -> str:
        return f"{self.base_url}{path}"

    def json_url(self, path: str = "/hook") -> str:
        return f"json://127.0.0.1:{self.port}{path}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
            thread = threading.Thread(target=self._trickle, args=(conn,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _trickle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(0.2)
            try:
                conn.recv(65536)  # the request (or its start): whatever came first
            except OSError:
                pass
            for byte in itertools.chain(PREFIX, itertools.repeat(ord("x"))):
                if self._stop.wait(self.interval):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:  # the client gave up: what a deadline should make it do
                    with self._lock:
                        self.hung_up += 1
                    return

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        self._accepting.join(5)
        for thread in self._threads:
            thread.join(5)


@pytest.fixture(name="trickle")
def trickle_fixture() -> Iterator[TrickleServer]:
    server = TrickleServer()
    try:
        yield server
    finally:
        server.close()
