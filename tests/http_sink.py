"""A tiny HTTP server on 127.0.0.1 for tests: records every request and answers a scripted status.

Real clients (apprise's json://, urllib) talk to it over a real socket. The fixture is named
`http_sink` (import `http_sink_fixture` into a conftest or test module to make it available);
`sink.json_url("/hook")` is an apprise destination, `sink.url("/ping")` a plain URL.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    status: int  # what the sink answered
    received_at: float = field(default_factory=time.time)  # wall time the request arrived

    @property
    def json(self) -> object:
        try:
            return json.loads(self.body)
        except ValueError:
            return None


@dataclass
class HttpSink:
    host: str = "127.0.0.1"
    port: int = 0
    requests: list[Request] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)  # answers for the next requests, in order
    default_status: int = 200
    delay: float = 0.0  # seconds to wait before answering (to widen races in tests)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str = "/") -> str:
        return f"http://{self.host}:{self.port}{path}"

    def json_url(self, path: str = "/hook") -> str:
        """An apprise json:// destination posting to this sink."""
        return f"json://{self.host}:{self.port}{path}"

    def fail_next(self, count: int, status: int = 500) -> None:
        with self.lock:
            self.statuses.extend([status] * count)

    def bodies(self) -> list[object]:
        with self.lock:
            return [r.json for r in self.requests]

    def _answer(self) -> int:
        with self.lock:
            return self.statuses.pop(0) if self.statuses else self.default_status

    def _record(self, request: Request) -> None:
        with self.lock:
            self.requests.append(request)


def _handler(sink: HttpSink) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            status = sink._answer()
            if sink.delay:
                time.sleep(sink.delay)
            sink._record(Request(self.command, self.path, dict(self.headers.items()), body,
                                 status))
            reply = b"{}" if status < 400 else b'{"error": "scripted failure"}'
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(reply)

        do_GET = do_POST = do_PUT = do_HEAD = _handle  # noqa: N815

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass  # keep test output clean

    return Handler


@pytest.fixture(name="http_sink")
def http_sink_fixture() -> Iterator[HttpSink]:
    sink = HttpSink()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(sink))
    server.daemon_threads = True
    sink.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield sink
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
