"""`scheduler.py web` as a real subprocess on a free 127.0.0.1 port, for the web tests."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import SCHEDULER


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class WebServer:
    proc: subprocess.Popen
    base: str
    code: str  # the one-time login code of the printed link
    token: str  # read from the token file: the server never prints it

    output: list[str] = field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1])

    @property
    def login_url(self) -> str:
        return f"{self.base}/login?code={self.code}"

    def bearer(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def login(self, client) -> None:
        """Spend the printed code in an httpx client: it then holds the session cookie."""
        r = client.get(f"/login?code={self.code}", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/", r.text

    def drain(self) -> None:
        for line in self.proc.stdout or ():
            self.output.append(line)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _listening(pid: int, port: int) -> bool:
    """Whether process `pid` itself holds a socket listening on `port`: a connection alone may
    reach another process that took the port between free_port() and the server's bind."""
    inodes = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
        rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return False
    for fd in fds:
        try:
            inodes.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    for row in rows:  # sl local_address rem_address st ... inode
        fields = row.split()
        if (fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port
                and f"socket:[{fields[9]}]" in inodes):
            return True
    return False


def start_web(home: Path, *extra: str, token_file: Path | None = None,
              preexec_fn=None) -> WebServer:
    for _ in range(5):  # a port free when chosen may be taken before the server binds it
        server = _start_web_on(free_port(), home, *extra, token_file=token_file,
                               preexec_fn=preexec_fn)
        if server is not None:
            return server
    raise AssertionError("web server: every port chosen was taken before it could bind it")


def _start_web_on(port: int, home: Path, *extra: str, token_file: Path | None,
                  preexec_fn) -> WebServer | None:
    """The server on `port`; None when that port was in use by then."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    more = ["--token-file", str(token_file)] if token_file else []
    proc = subprocess.Popen([sys.executable, str(SCHEDULER), "--home", str(home), "web",
                             "--port", str(port), *more, *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env,
                            preexec_fn=preexec_fn)
    line = proc.stdout.readline() if proc.stdout else ""
    match = re.search(r"(http://\S+?)/login\?code=(\S+)", line)
    assert match, line + (proc.stdout.read() if proc.poll() is not None and proc.stdout else "")
    token = (token_file or home / "state" / "web-token").read_text().strip()
    server = WebServer(proc, match.group(1), match.group(2), token)
    # the banner's second line (how scripts authenticate) is read here too: a test reading
    # `output` right after the start must not race the drain thread for it
    server.output += [line, proc.stdout.readline() if proc.stdout else ""]
    drain = threading.Thread(target=server.drain, daemon=True)  # a full pipe would block it
    drain.start()
    deadline = time.monotonic() + 60  # uvicorn binds after the banner (a loaded machine: s)
    while not _listening(proc.pid, port):
        if proc.poll() is not None:
            drain.join(10)
            said = "".join(server.output)
            if "address already in use" in said:
                return None
            raise AssertionError(f"web server did not start:\n{said}")
        if time.monotonic() > deadline:
            server.stop()
            raise AssertionError("web server did not start:\n" + "".join(server.output))
        time.sleep(0.05)
    return server


@pytest.fixture(name="server")
def server_fixture(home):
    """The real `scheduler.py web` on the test's home, stopped after the test."""
    s = start_web(home)
    yield s
    s.stop()


@pytest.fixture(name="client")
def bearer_client_fixture(server):
    """An httpx client of `server` with the token, as a script would call the API."""
    import httpx

    with httpx.Client(base_url=server.base, timeout=30, headers=server.bearer()) as c:
        yield c
