"""`state copy` writes mdcron's tables only where nothing else lives (issue 22 item 10): a
database that holds another application's tables is refused before anything is created in it,
unless `--schema` gives mdcron a schema of its own, whose URL every host then uses."""

from __future__ import annotations

import json

from faultlib import BEFORE, NOW, run_cli
from pg_server import database_url

from mdcron.settings.state_url import mask
from mdcron.state.copy import with_schema


def _tables(url: str, schema: str) -> list[str]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return [r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s"
            " ORDER BY 1", (schema,))]


def test_a_database_of_another_application_is_refused_untouched(pg_url, home, write_task):
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE users (id int PRIMARY KEY, name text)")
        conn.execute("INSERT INTO users VALUES (1, 'ada')")
    write_task("ok", schedule="* * * * *", command="echo fine")
    run_cli(home, "tick", "--now", BEFORE)
    run_cli(home, "tick", "--now", NOW)
    before = json.loads(run_cli(home, "history", "--json").stdout)
    assert before

    refused = run_cli(home, "state", "copy", "--to", pg_url)
    assert refused.returncode == 2, refused
    assert "tables mdcron did not create" in refused.stderr and "users" in refused.stderr
    assert "--schema" in refused.stderr and "Traceback" not in refused.stderr
    assert _tables(pg_url, "public") == ["users"]  # nothing of mdcron's was created

    copied = run_cli(home, "state", "copy", "--to", pg_url, "--schema", "mdcron")
    assert copied.returncode == 0, copied.stderr
    assert _tables(pg_url, "public") == ["users"]
    assert "runs" in _tables(pg_url, "mdcron") and "meta" in _tables(pg_url, "mdcron")
    url = with_schema(pg_url, "mdcron")
    assert f"set state_url: {mask(url)} in" in copied.stdout  # the URL every host now uses
    history = run_cli(home, "history", "--json", env={"MDCRON_STATE_URL": url})
    assert history.returncode == 0, history.stderr
    assert [(r["run_id"], r["status"]) for r in json.loads(history.stdout)] == \
        [(r["run_id"], r["status"]) for r in before]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT name FROM users").fetchall() == [("ada",)]


def test_a_schema_name_that_is_not_an_identifier_is_refused(pg_url, home):
    out = run_cli(home, "state", "copy", "--to", pg_url, "--schema", 'x"; DROP TABLE users; --')
    assert out.returncode == 2 and "--schema" in out.stderr, out


def test_the_target_can_come_from_a_file_and_a_password_in_argv_is_warned_of(
        pg_url, home, write_task, tmp_path):
    """Issue 23 item 7b: `state copy --to postgresql://user:PW@…` shows PW in `ps`."""
    write_task("ok", schedule="* * * * *", command="echo fine")
    run_cli(home, "tick", "--now", BEFORE)
    with_password = f"{pg_url}&password=lit9pw"  # the test server trusts its socket
    warned = run_cli(home, "state", "copy", "--to", with_password)
    assert warned.returncode == 0, warned.stderr
    assert "the password is on the command line" in warned.stderr and "--to-file" in warned.stderr
    assert "lit9pw" not in warned.stdout + warned.stderr

    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE DATABASE second_copy")
    target = tmp_path / "url"
    target.write_text(database_url(pg_url, "second_copy") + "&password=lit9pw\n")
    quiet = run_cli(home, "state", "copy", "--to-file", str(target))
    assert quiet.returncode == 0, quiet.stderr
    assert "command line" not in quiet.stderr and "lit9pw" not in quiet.stdout + quiet.stderr
