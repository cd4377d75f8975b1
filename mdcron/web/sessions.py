"""Who is logged in to the dashboard (issue 24): one-time login codes and the sessions they open.

The printed link carries a login code, good once and for CODE_TTL; exchanging it opens a
session whose random id sits in the cookie. The permanent token never goes in a cookie or a
URL: it is for scripts (`Authorization: Bearer`) and for the login form.

Sessions live in this process's memory only: a restart ends every one of them. Nothing of
them is written to disk; `scheduler.py web --revoke-sessions` reaches a running server
through a marker file in state/ (REVOKED): a server that sees the marker change drops every
session and every unused code. The marker holds no secret, only when it was written.

Expiry is decided on the boot-time clock (monotonic, and counting a suspended laptop's sleep:
a wall-clock jump neither revives nor kills a session, a night asleep still counts as idle);
the wall clock is kept only to show when a session began and was last seen.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading
import time
from collections.abc import Callable
from functools import wraps
from pathlib import Path

from ..core.records import dataclass
from ..core.safe_fs import replace_file

CODE_TTL = 300.0  # seconds a printed login code stays good (once)
IDLE = 12 * 3600.0  # a session unused this long ends
MAX_AGE = 7 * 86400.0  # and none lasts longer than this
MAX_SESSIONS = 50  # the oldest is dropped beyond this
MAX_CODES = 20
REVOKED = "web-sessions-revoked"  # in state/: `web --revoke-sessions` rewrites it


def boot_clock() -> float:
    """Seconds since boot, sleep included (CLOCK_BOOTTIME); monotonic where there is none."""
    try:
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    except (AttributeError, OSError):
        return time.monotonic()


def digest(secret: str) -> str:
    """What is kept of a code or a session id: its SHA-256, never the value."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class Session:
    key: str  # digest of the cookie's value
    label: str  # 8 hex digits, shown on Health and in the audit: not the secret
    csrf: str
    born: float  # monotonic
    seen: float  # monotonic
    born_at: float  # wall clock, for people
    seen_at: float
    remote: str
    agent: str


def _locked(method):
    """The event loop and the page threads both use the book: one at a time."""
    @wraps(method)
    def inner(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)
    return inner


class Sessions:
    """The codes and sessions of one server process."""

    def __init__(self, marker: Path, monotonic: Callable[[], float] = boot_clock,
                 wall: Callable[[], float] = time.time):
        self.marker = marker
        self.monotonic = monotonic
        self.wall = wall
        self._codes: dict[str, float] = {}  # digest -> monotonic expiry
        self._sessions: dict[str, Session] = {}
        self._mark = _signature(marker)
        self._lock = threading.RLock()

    # -- login codes

    @_locked
    def new_code(self) -> str:
        """A one-time code for the printed link."""
        self._revoked()
        now = self.monotonic()
        self._codes = {k: t for k, t in self._codes.items() if t > now}
        while len(self._codes) >= MAX_CODES:
            self._codes.pop(next(iter(self._codes)))
        code = secrets.token_urlsafe(18)
        self._codes[digest(code)] = now + CODE_TTL
        return code

    @_locked
    def redeem(self, code: str, remote: str, agent: str) -> tuple[str, Session] | None:
        """(cookie value, session) for a good code, which is then spent; None otherwise."""
        self._revoked()
        expiry = self._codes.pop(digest(code), None)
        if expiry is None or expiry <= self.monotonic():
            return None
        return self.open(remote, agent)

    @_locked
    def open(self, remote: str, agent: str) -> tuple[str, Session]:
        """A new session (after a good code, or the token in the login form)."""
        now, wall = self.monotonic(), self.wall()
        self._expire(now)
        while len(self._sessions) >= MAX_SESSIONS:
            oldest = min(self._sessions.values(), key=lambda s: s.seen)
            del self._sessions[oldest.key]
        sid = secrets.token_urlsafe(32)
        key = digest(sid)
        session = Session(key=key, label=key[:8], csrf=secrets.token_hex(32), born=now,
                          seen=now, born_at=wall, seen_at=wall, remote=remote[:64],
                          agent=agent[:120])
        self._sessions[key] = session
        return sid, session

    # -- sessions

    @_locked
    def find(self, sid: str) -> Session | None:
        """The live session of a cookie's value (its idle time restarts), or None."""
        if not sid:
            return None
        self._revoked()
        now = self.monotonic()
        session = self._sessions.get(digest(sid))
        if session is None or not hmac.compare_digest(session.key, digest(sid)):
            return None
        if _expired(session, now):
            del self._sessions[session.key]
            return None
        session.seen, session.seen_at = now, self.wall()
        return session

    @_locked
    def listing(self) -> list[Session]:
        """Live sessions, most recently used first."""
        self._revoked()
        self._expire(self.monotonic())
        return sorted(self._sessions.values(), key=lambda s: -s.seen)

    @_locked
    def revoke(self, label: str) -> bool:
        for session in list(self._sessions.values()):
            if session.label == label:
                del self._sessions[session.key]
                return True
        return False

    @_locked
    def revoke_all(self) -> None:
        self._sessions.clear()
        self._codes.clear()

    def _expire(self, now: float) -> None:
        for session in [s for s in self._sessions.values() if _expired(s, now)]:
            del self._sessions[session.key]

    def _revoked(self) -> None:
        """`web --revoke-sessions` rewrote the marker since we last looked: end everything."""
        mark = _signature(self.marker)
        if mark != self._mark:
            self._mark = mark
            self.revoke_all()


def _expired(session: Session, now: float) -> bool:
    return now - session.seen >= IDLE or now - session.born >= MAX_AGE


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def revoke_everywhere(state_dir: Path, home: Path, now: float) -> Path:
    """`scheduler.py web --revoke-sessions`: rewrite the marker every server of this home
    watches (a new inode each time, so even a same-nanosecond rewrite is seen)."""
    marker = state_dir / REVOKED
    replace_file(marker, f"{now:.6f} {os.getpid()}\n".encode(), root=home, create_dirs=True)
    return marker
