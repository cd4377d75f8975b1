"""A scripted stand-in for the Anthropic Messages API on 127.0.0.1, for the real SDK to talk to.

Each test queues the replies it wants (`text`, `tools`, `error`, `disconnect`, or a callable that
builds a reply from the request), then runs the code under test with `fake.environ` (which holds
ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL). Every request body is kept in `fake.requests`, so a
test can assert what was sent: the prompt, the tool results and their is_error flags.

Use the `fake_claude` fixture (import it into a test module or conftest.py).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

_ids = itertools.count(1)


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    disconnect: bool = False


def message(content: list[dict], *, stop_reason: str = "end_turn", model: str = "",
            input_tokens: int = 11, output_tokens: int = 7) -> dict:
    return {
        "id": f"msg_fake_{next(_ids)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


def tool_use(name: str, **inputs: object) -> dict:
    return {"type": "tool_use", "id": f"toolu_fake_{next(_ids)}", "name": name, "input": inputs}


class FakeAnthropic:
    def __init__(self) -> None:
        self.replies: deque[Reply | Callable[[dict], Reply]] = deque()
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                reply = fake._next(self.path, body, dict(self.headers))
                if reply.disconnect:
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                payload = json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up (its timeout passed)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.environ = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": self.base_url}

    def _next(self, path: str, body: dict, headers: dict[str, str]) -> Reply:
        with self._lock:
            self.requests.append(body)
            self.headers.append({k.lower(): v for k, v in headers.items()})
            if path.split("?")[0] != "/v1/messages":
                return Reply(404, _error("not_found_error", f"fake: no route {path}"))
            item = self.replies.popleft() if self.replies else None
        if item is None:
            return Reply(400, _error("invalid_request_error", "fake: no scripted reply left"))
        reply = item(body) if callable(item) else item
        if reply.status == 200 and isinstance(reply.body, dict) and not reply.body.get("model"):
            reply.body["model"] = body.get("model", "")
        return reply

    # -- scripting --------------------------------------------------------------------------

    def text(self, text: str, **kw: Any) -> None:
        content = [{"type": "text", "text": text}] if text else []
        self.replies.append(Reply(body=message(content, **kw)))

    def tools(self, *uses: dict, text: str = "", **kw: Any) -> None:
        content = ([{"type": "text", "text": text}] if text else []) + list(uses)
        self.replies.append(Reply(body=message(content, stop_reason="tool_use", **kw)))

    def error(self, status: int, *, kind: str = "api_error", text: str = "scripted error",
              headers: dict[str, str] | None = None) -> None:
        self.replies.append(Reply(status, _error(kind, text), headers or {}))

    def disconnect(self) -> None:
        self.replies.append(Reply(disconnect=True))

    def dynamic(self, build: Callable[[dict], Reply]) -> None:
        self.replies.append(build)

    # -- reading what was sent ----------------------------------------------------------------

    def tool_results(self, request: int = -1) -> list[dict]:
        """The tool_result blocks of the last user turn of a request."""
        last = self.requests[request]["messages"][-1]
        content = last["content"] if isinstance(last["content"], list) else []
        return [b for b in content if b.get("type") == "tool_result"]

    def all_tool_results(self) -> list[dict]:
        seen: dict[str, dict] = {}
        for req in self.requests:
            for msg in req.get("messages", []):
                if msg["role"] == "user" and isinstance(msg["content"], list):
                    for b in msg["content"]:
                        if b.get("type") == "tool_result":
                            seen[b["tool_use_id"]] = b
        return list(seen.values())

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _error(kind: str, text: str) -> dict:
    return {"type": "error", "error": {"type": kind, "message": text}}


@pytest.fixture
def fake_claude() -> Iterator[FakeAnthropic]:
    fake = FakeAnthropic()
    try:
        yield fake
    finally:
        fake.close()
