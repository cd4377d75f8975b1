"""A real PostgreSQL for the tests that need one (issue 11): pgserver starts a throwaway cluster
once per session; every test gets its own fresh database. Without pgserver those tests skip,
saying how to install it."""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

INSTALL = "PostgreSQL tests need pgserver: pip install -r requirements-dev.txt"
_names = itertools.count(1)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The server's admin URL (database `postgres`)."""
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp())  # platformdirs warns else
    try:
        import pgserver
        import psycopg  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"{INSTALL} ({exc})")
    folder = tempfile.mkdtemp(prefix="mdcron-pg-")  # /tmp: the server's own user can reach it
    try:
        server = pgserver.get_server(folder, cleanup_mode="delete")
        uri = server.get_uri()
    except Exception as exc:  # no binaries for this platform, no shared memory, ...
        pytest.skip(f"{INSTALL}; pgserver could not start PostgreSQL here: {exc}")
    _throwaway(uri)
    try:
        yield uri
    finally:
        server.cleanup()


def _throwaway(uri: str) -> None:
    """A test cluster need not survive a power cut: without fsync its shutdown checkpoint (the
    session's teardown, ~50-90 s here after a suite's worth of databases) takes seconds, and
    every commit is cheaper. Crash-safety tests stop the server cleanly or kill clients, never
    the machine, so they keep their meaning."""
    import psycopg

    with psycopg.connect(uri, autocommit=True) as conn:
        for name in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(f"ALTER SYSTEM SET {name} = off")
        conn.execute("SELECT pg_reload_conf()")


def database_url(admin_url: str, name: str) -> str:
    parts = urlsplit(admin_url)
    return urlunsplit(parts._replace(path="/" + name))


@pytest.fixture
def pg_url(pg_server: str) -> str:
    """A new, empty database on the session's server, as a state_url."""
    import psycopg

    name = f"mdcron_t{next(_names)}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    return database_url(pg_server, name)


@pytest.fixture(params=["sqlite", "postgresql"])
def state_url(request) -> str | None:
    """Run a test on both state back ends: None (SQLite) or a fresh PostgreSQL database."""
    return None if request.param == "sqlite" else request.getfixturevalue("pg_url")


@pytest.fixture
def state_url_env(state_url: str | None, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """The test on both state back ends, through MDCRON_STATE_URL as cron's tick would read it
    (use with `pytestmark = pytest.mark.usefixtures("state_url_env")`)."""
    if state_url:
        monkeypatch.setenv("MDCRON_STATE_URL", state_url)
    else:
        monkeypatch.delenv("MDCRON_STATE_URL", raising=False)
    return state_url
