"""Notifications for real: apprise posting to a local HTTP sink, SQLite on disk, injected time."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from conftest import REPO
from http_sink import HttpSink, http_sink_fixture  # noqa: F401  (the `http_sink` fixture)

from mdcron.alerts.notify import Alert, backoff, enqueue, flush, heartbeat, mask
from mdcron.settings.config import load_config
from mdcron.settings.notify import NotifyConfig, QuietHours, parse_notify_config
from mdcron.state.store import Store

ZONE = ZoneInfo("Europe/Riga")
SECRET = "s3cr3t-Token-0123456789"
PATH = Path("scheduler.yaml")


def at(hour: int, minute: int = 0, day: int = 23) -> float:
    """Wall time in Riga (winter, UTC+2) on a November day of 2026, as Unix seconds."""
    return datetime(2026, 11, day, hour, minute, tzinfo=ZONE).timestamp()


def make_cfg(extra: dict | None = None, **notify: object) -> NotifyConfig:
    raw: dict = {"timezone": "Europe/Riga", "notify": notify, **(extra or {})}
    cfg, problems = parse_notify_config(raw, PATH, environ={})
    assert not [p for p in problems if p.severity == "error"], problems
    return cfg


@pytest.fixture
def store(tmp_path: Path, state_url: str | None):  # both back ends (issue 11)
    with Store(tmp_path / "state" / "mdcron.db", url=state_url) as s:
        yield s


def fail(task: str = "backup", kind: str = "failure", **kw: object) -> Alert:
    # type: ignore[arg-type]
    return Alert(kind, task, f"{task}: {kind}", f"{task} went wrong\nexit 2", **kw)


def rows(store: Store) -> list[dict]:
    return store._rows("SELECT * FROM outbox ORDER BY id", ())


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- config


def test_parse_full_config_and_defaults():
    raw = {
        "timezone": "Europe/Riga",
        "heartbeat_url": "https://hc-ping.com/${HC_UUID}",
        "notify": {
            "default": "home",
            "destinations": {"home": "tgram://${TG_TOKEN}/${TG_CHAT}", "ops": "json://h/x"},
            "quiet_hours": "22:00-07:00", "collapse_window": "30m", "max_attempts": 3,
        },
    }
    cfg, problems = parse_notify_config(raw, PATH, environ={"TG_TOKEN": "x", "TG_CHAT": "1",
                                                            "HC_UUID": "u"})
    assert problems == []
    assert cfg.default == "home" and cfg.quiet_hours == QuietHours(22 * 60, 7 * 60)
    assert (cfg.collapse_window, cfg.max_attempts, cfg.timezone) == (1800, 3, "Europe/Riga")
    empty, problems = parse_notify_config({}, PATH)
    assert problems == [] and empty.default is None and empty.max_attempts == 8
    one, _ = parse_notify_config({"notify": {"destinations": {"only": "json://h/x"}}}, PATH)
    assert one.default == "only"  # the only destination is the default


def test_parse_config_problems_name_key_and_fix():
    raw = {
        "heartbeat_url": "hc-ping.com/x",
        "notify": {
            "default": "pager",
            "destinations": {"home": "tgram://${NOPE_TOKEN}/1", "bad": 42, "plain": "no-scheme"},
            "quiet_hours": "22-07", "collapse_window": "soon", "max_attempts": 0,
            "quiet_hour": "x",
        },
    }
    cfg, problems = parse_notify_config(raw, PATH, environ={})
    found = {(p.key, p.severity) for p in problems}
    assert found == {
        ("heartbeat_url", "error"), ("notify.default", "error"),
        ("notify.destinations.bad", "error"), ("notify.destinations.plain", "error"),
        ("notify.destinations.home", "warning"), ("notify.quiet_hours", "error"),
        ("notify.collapse_window", "error"), ("notify.max_attempts", "error"),
        ("notify.quiet_hour", "warning"),
    }
    text = "\n".join(str(p) for p in problems)
    assert "did you mean 'quiet_hours'" in text and '"22:00-07:00"' in text
    assert "${NOPE_TOKEN} is not set" in text and "use one of notify.destinations (home)" in text
    # every broken key falls back to its default: the settings stay usable
    assert cfg.quiet_hours is None and cfg.collapse_window == 3600 and cfg.default is None


def test_import_does_not_load_apprise():
    probe = ("import sys, mdcron.alerts.notify, mdcron.settings.notify, mdcron.alerts.incidents;"
             " print('apprise' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


# ---------------------------------------------------------------- delivery


def test_message_delivered_through_apprise(store, http_sink: HttpSink):
    cfg = make_cfg(destinations={"ops": http_sink.json_url("/hook")})
    assert enqueue(store, cfg, fail(), at(10)) == "queued"
    report = flush(store, cfg, at(10), {})
    assert report.ok and len(report.sent) == 1
    [request] = http_sink.requests
    assert (request.method, request.path) == ("POST", "/hook")
    assert request.json["title"] == "backup: failure"
    assert "exit 2" in request.json["message"]
    [row] = rows(store)
    assert (row["status"], row["attempts"], row["sent_at"]) == ("sent", 1, at(10))
    assert flush(store, cfg, at(11), {}).sent == []  # sent once only


def test_works_from_a_loaded_config(tmp_path: Path, http_sink: HttpSink):
    home = tmp_path / "home"
    home.mkdir()
    (home / "scheduler.yaml").write_text(
        f'timezone: Europe/Riga\nnotify:\n  destinations:\n    ops: "{http_sink.json_url()}"\n'
        '  quiet_hours: "22:00-07:00"\n'
    )
    config, _ = load_config(home)
    with Store(config.db_path) as store:
        assert enqueue(store, config, fail(), at(23)) == "held"
        assert enqueue(store, config, fail(destination="ops"), at(12, day=24)) == "queued"
        assert flush(store, config, at(12, day=24), {}).sent == [1, 2]  # quiet hours are over


def test_no_destination_drops_unknown_falls_back(store, http_sink: HttpSink):
    assert enqueue(store, make_cfg(), fail(), at(10)) == "dropped"
    two = make_cfg(destinations={"a": http_sink.json_url("/a"), "b": http_sink.json_url("/b")})
    assert enqueue(store, two, fail(), at(10)) == "dropped"  # no default among two
    assert enqueue(store, two, fail(destination="b"), at(10)) == "queued"
    one = make_cfg(default="a", destinations={"a": http_sink.json_url("/a")})
    assert enqueue(store, one, fail("other", destination="gone"), at(10)) == "queued"
    flush(store, two, at(10), {})
    flush(store, one, at(10), {})
    assert sorted(r.path for r in http_sink.requests) == ["/a", "/b"]


def test_env_expansion_and_secret_never_shown(store, http_sink: HttpSink, caplog, capsys):
    url = f"json://127.0.0.1:{http_sink.port}/hook?+X-Token=${{SINK_TOKEN}}"
    cfg = make_cfg(destinations={"ops": url})
    env = {"SINK_TOKEN": SECRET}
    enqueue(store, cfg, fail(), at(10))
    assert flush(store, cfg, at(10), env).ok
    assert http_sink.requests[0].headers["X-Token"] == SECRET  # expanded at send time

    http_sink.fail_next(1)
    enqueue(store, cfg, fail("other"), at(10))
    report = flush(store, cfg, at(10), env)
    assert report.retrying and "'ops' (json://…)" in report.errors[0]
    # a secret in the path: apprise's own messages would name it
    path_cfg = make_cfg(destinations={"ops": f"json://127.0.0.1:{closed_port()}/${{SINK_TOKEN}}"})
    enqueue(store, path_cfg, fail("third"), at(10))
    report2 = flush(store, path_cfg, at(10), env)
    assert report2.errors
    shown = [*report.errors, *report2.errors, *(str(r["last_error"]) for r in rows(store)),
             caplog.text, *capsys.readouterr()]
    assert not [s for s in shown if SECRET in s]


def test_unset_variable_is_a_permanent_error_naming_it(store):
    cfg = make_cfg(destinations={"home": "tgram://${TG_TOKEN}/${TG_CHAT}"})
    enqueue(store, cfg, fail(), at(10))
    report = flush(store, cfg, at(10), {"TG_TOKEN": SECRET})
    assert report.dead == [1]
    assert "${TG_CHAT} not set" in report.errors[0] and "tgram://…" in report.errors[0]
    assert SECRET not in report.errors[0]


def test_mask_hides_url_values_and_url_pieces():
    url = f"tgram://{SECRET}/-100123456789"
    text = f"failed posting to https://api.telegram.org/bot{SECRET}/send chat -100123456789"
    masked = mask(text, url, [SECRET])
    assert SECRET not in masked and "100123456789" not in masked
    assert masked.startswith("failed posting to")


def test_apprise_logs_never_reach_configured_logging(tmp_path: Path, http_sink: HttpSink):
    """Even with root logging at DEBUG (someone else's basicConfig), nothing apprise logs is
    printed: a secret URL stays out of the tick's output."""
    script = f"""
import logging, sys
logging.basicConfig(level=logging.DEBUG)
from pathlib import Path
from mdcron.alerts.notify import Alert, enqueue, flush
from mdcron.settings.notify import parse_notify_config
from mdcron.state.store import Store
url = "json://127.0.0.1:{http_sink.port}/${{SINK_TOKEN}}/hook"
cfg, _ = parse_notify_config({{"notify": {{"destinations": {{"ops": url}}}}}}, Path("x"), {{}})
with Store(Path(sys.argv[1])) as store:
    enqueue(store, cfg, Alert("failure", "t", "title", "body"), 1e9)
    print(flush(store, cfg, 1e9, {{"SINK_TOKEN": "{SECRET}"}}))
"""
    http_sink.fail_next(1)
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "db")], cwd=REPO,
                         capture_output=True, text=True)
    assert "retrying=[1]" in out.stdout, out.stdout + out.stderr
    assert SECRET not in out.stdout + out.stderr
    assert http_sink.requests[0].path == f"/{SECRET}/hook"


# ---------------------------------------------------------------- quiet hours


def test_quiet_hours_hold_then_one_digest_per_destination(store, http_sink: HttpSink):
    cfg = make_cfg(default="home", quiet_hours="22:00-07:00",
                   destinations={"home": http_sink.json_url("/home"),
                                 "ops": http_sink.json_url("/ops")})
    assert enqueue(store, cfg, fail("a"), at(23)) == "held"
    assert enqueue(store, cfg, fail("b"), at(1, day=24)) == "held"
    assert enqueue(store, cfg, fail("c", kind="success"), at(6, 59, day=24)) == "held"
    assert enqueue(store, cfg, fail("d", destination="ops"), at(2, day=24)) == "held"
    for when in (at(23), at(3, day=24), at(6, 59, day=24)):
        assert flush(store, cfg, when, {}).sent == []
    assert http_sink.requests == []

    report = flush(store, cfg, at(7, 1, day=24), {})
    assert report.ok and len(report.digests) == 1 and len(report.sent) == 2
    by_path = {r.path: r.json for r in http_sink.requests}
    digest = by_path["/home"]
    assert digest["title"] == "mdcron: 3 notifications held during quiet hours"
    assert [line for line in digest["message"].splitlines() if line.startswith("•")] == [
        "• 23:00 a: failure", "• 01:00 b: failure", "• 06:59 c: success"]
    assert by_path["/ops"]["title"] == "d: failure"  # a single held message goes as itself
    assert flush(store, cfg, at(7, 2, day=24), {}).sent == []
    assert len(http_sink.requests) == 2
    statuses = [r["status"] for r in rows(store)]
    assert statuses == ["digested", "digested", "digested", "sent", "sent"]


def test_forced_alert_goes_during_quiet_hours(store, http_sink: HttpSink):
    cfg = make_cfg(quiet_hours="22:00-07:00", destinations={"home": http_sink.json_url()})
    assert enqueue(store, cfg, fail(kind="suspended"), at(23)) == "queued"
    assert enqueue(store, cfg, fail("x", forced=True), at(23)) == "queued"
    assert enqueue(store, cfg, fail("y"), at(23)) == "held"
    assert len(flush(store, cfg, at(23), {}).sent) == 2
    assert len(http_sink.requests) == 2


# ---------------------------------------------------------------- collapsing


def test_sixty_failures_in_an_hour_send_one_message_then_the_count(store, http_sink: HttpSink):
    cfg = make_cfg(collapse_window="1h", destinations={"home": http_sink.json_url()})
    outcomes = []
    for minute in range(60):
        outcomes.append(enqueue(store, cfg, fail(), at(10, minute)))
        flush(store, cfg, at(10, minute), {})
    assert outcomes == ["queued"] + ["collapsed"] * 59
    assert len(http_sink.requests) == 1
    assert enqueue(store, cfg, fail(), at(11)) == "queued"
    flush(store, cfg, at(11), {})
    assert len(http_sink.requests) == 2
    assert http_sink.requests[1].json["message"].startswith(
        "(+59 similar alerts since 10:00 collapsed)")
    assert enqueue(store, cfg, fail(), at(11, 1)) == "collapsed"  # a new window began at 11:00


def test_collapse_rules_per_kind(store, http_sink: HttpSink):
    cfg = make_cfg(destinations={"home": http_sink.json_url()})
    assert enqueue(store, cfg, fail(kind="timeout"), at(10)) == "queued"
    assert enqueue(store, cfg, fail(kind="timeout"), at(10, 5)) == "collapsed"  # forced too
    assert enqueue(store, cfg, fail(kind="suspended"), at(10, 6)) == "queued"
    assert enqueue(store, cfg, fail(kind="suspended"), at(10, 7)) == "queued"  # never collapsed
    assert enqueue(store, cfg, fail("other"), at(10, 7)) == "queued"  # per task
    # a recovery reports what was collapsed and reopens failures: the next one is not hidden
    assert enqueue(store, cfg, fail(kind="failure"), at(10, 8)) == "queued"
    assert enqueue(store, cfg, fail(kind="failure"), at(10, 9)) == "collapsed"
    assert enqueue(store, cfg, fail(kind="recovered"), at(10, 10)) == "queued"
    assert enqueue(store, cfg, fail(kind="failure"), at(10, 11)) == "queued"
    recovered = [r for r in rows(store) if r["kind"] == "recovered"][0]
    assert "(+1 failure alerts since 10:08 collapsed)" in recovered["body"]
    assert "(+1 timeout alerts since 10:00 collapsed)" in recovered["body"]


def test_zero_window_turns_collapsing_off(store, http_sink: HttpSink):
    cfg = make_cfg(collapse_window=0, destinations={"home": http_sink.json_url()})
    assert [enqueue(store, cfg, fail(), at(10)) for _ in range(3)] == ["queued"] * 3


# ---------------------------------------------------------------- failures


def test_failing_endpoint_retries_with_backoff_then_dead(store, http_sink: HttpSink):
    cfg = make_cfg(max_attempts=3, destinations={"home": http_sink.json_url()})
    http_sink.fail_next(100)
    enqueue(store, cfg, fail(), at(10))
    t0 = at(10)
    first = flush(store, cfg, t0, {})
    assert first.retrying == [1] and "attempt 1 of 3, next in 1 min" in first.errors[0]
    assert "Internal" in first.errors[0] or "500" in first.errors[0]
    assert flush(store, cfg, t0 + 30, {}).errors == []  # not due yet
    assert flush(store, cfg, t0 + 60, {}).retrying == [1]
    assert rows(store)[0]["next_attempt_at"] == t0 + 60 + 120
    assert flush(store, cfg, t0 + 150, {}).errors == []
    last = flush(store, cfg, t0 + 180, {})
    assert last.dead == [1] and "gave up (3 attempts)" in last.errors[0]
    assert flush(store, cfg, t0 + 3600, {}).errors == []
    assert len(http_sink.requests) == 3
    [row] = rows(store)
    assert (row["status"], row["attempts"]) == ("dead", 3) and row["last_error"]
    assert [backoff(n) for n in (1, 2, 3, 4, 10)] == [60, 120, 240, 480, 3600]


def test_closed_port_fails_once_per_destination_per_flush(store, http_sink: HttpSink):
    cfg = make_cfg(destinations={"dead": f"json://127.0.0.1:{closed_port()}/x",
                                 "live": http_sink.json_url()})
    for task in ("a", "b", "c"):
        enqueue(store, cfg, fail(task, destination="dead"), at(10))
    enqueue(store, cfg, fail("d", destination="live"), at(10))
    report = flush(store, cfg, at(10), {})
    assert report.retrying == [1] and report.sent == [4]
    assert "'dead' (json://…)" in report.errors[0]
    assert [r["attempts"] for r in rows(store)] == [1, 0, 0, 1]  # b, c wait for the next flush


def test_flush_never_raises_on_a_broken_database(tmp_path: Path):
    db = tmp_path / "not-a-db"
    db.write_bytes(b"garbage" * 100)
    report = flush(Store(db), make_cfg(destinations={"x": "json://h/x"}), at(10), {})
    assert report.errors and "not flushed" in report.errors[0]


def test_two_concurrent_flushes_never_send_a_message_twice(tmp_path: Path, http_sink: HttpSink):
    db = tmp_path / "mdcron.db"
    cfg = make_cfg(collapse_window=0, destinations={"home": http_sink.json_url()})
    with Store(db) as s:
        for i in range(20):
            enqueue(s, cfg, Alert("failure", f"t{i}", f"message {i}", "body"), at(10))
    http_sink.delay = 0.01
    barrier = threading.Barrier(2)
    reports = []

    def worker() -> None:
        with Store(db) as s:
            barrier.wait()
            reports.append(flush(s, cfg, at(10), {}))

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    titles = [b["title"] for b in http_sink.bodies()]
    assert sorted(titles) == sorted(f"message {i}" for i in range(20))
    sent = [set(r.sent) for r in reports]
    assert not (sent[0] & sent[1]) and len(sent[0] | sent[1]) == 20


# ---------------------------------------------------------------- heartbeat


def test_heartbeat_pings_and_reports_failures(http_sink: HttpSink):
    cfg = make_cfg(extra={"heartbeat_url": http_sink.url("/ping/${HC_UUID}")})
    env = {"HC_UUID": SECRET}
    assert heartbeat(cfg, False, env) is None
    assert heartbeat(cfg, True, env) is None
    assert [(r.method, r.path) for r in http_sink.requests] == [
        ("GET", f"/ping/{SECRET}"), ("GET", f"/ping/{SECRET}/fail")]
    http_sink.fail_next(1)
    error = heartbeat(cfg, False, env)
    assert error == "heartbeat (http://…): HTTP 500"
    closed = make_cfg(extra={"heartbeat_url": f"http://127.0.0.1:{closed_port()}/${{HC_UUID}}"})
    error = heartbeat(closed, True, env)
    assert error and error.startswith("heartbeat (http://…):") and SECRET not in error
    assert "${HC_UUID} not set" in (heartbeat(cfg, False, {}) or "")
    assert heartbeat(make_cfg(), False, env) is None  # none configured


def test_enqueue_records_forced_and_kind(store, http_sink: HttpSink):
    cfg = make_cfg(destinations={"home": http_sink.json_url()})
    enqueue(store, cfg, Alert("tick_crashed", None, "tick crashed", "trace"), at(10))
    [row] = rows(store)
    assert (row["kind"], row["forced"], row["task_id"], row["destination"]) == (
        "tick_crashed", 1, None, "home")
    assert json.loads(json.dumps(row))  # plain values only
