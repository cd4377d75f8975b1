"""The daemon's rough edges from issue 25 item 13, with the real daemon: its first tick (started
mid-minute) is not called late, and `doctor` tells a daemon's user where the API key goes (not
"at the top of the crontab")."""

from __future__ import annotations

from test_daemon import _doctor, _lock_holder, events, start_daemon, stop, wait_for


def test_daemon_start_line_and_doctor_api_key_fix(home, tmp_path):
    proc = start_daemon(home)
    try:
        wait_for(lambda: _lock_holder(home).get("last_tick"), 30, "a tick")
        found = _doctor(home, tmp_path)
        assert found["daemon"]["status"] == "ok", found["daemon"]
        key = found["api key"]
        assert key["status"] == "warn" and "crontab" not in key["fix"], key
        assert "daemon's environment" in key["fix"], key
    finally:
        out = stop(proc)
    [first] = [e for e in events(out) if e["event"] == "tick started"][:1]
    assert first["reason"] == "start" and "late" not in first, first
