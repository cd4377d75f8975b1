"""Maintenance mode and timed pauses as the state folder holds them (issue 28: pause.py had no
test reaching it in-process): what each marker says, what an unusable marker means (never a
traceback, never a wait on a FIFO, never a symlink followed), and when the idle tick must hand
over to the full tick."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO

from mdcron.core.safe_fs import UnsafePath
from mdcron.schedule.pause import (
    end_maintenance,
    idle_blocked,
    maintenance,
    pauses,
    set_pause,
    start_maintenance,
)


def marker(home, name="maintenance.json"):
    return home / "state" / name


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_maintenance_is_on_from_start_to_end(home):
    assert maintenance(str(home)) is None
    assert not end_maintenance(str(home))  # no state folder yet: nothing to end
    start_maintenance(str(home), "2026-11-25T10:00:00+00:00", "ann")  # creates state/
    assert maintenance(str(home)) == {"since": "2026-11-25T10:00:00+00:00", "by": "ann"}
    # a small JSON file a person can read (and the idle tick finds with one stat)
    assert marker(home).read_text() == (
        '{\n "by": "ann",\n "since": "2026-11-25T10:00:00+00:00"\n}')
    assert marker(home).stat().st_mode & 0o777 == 0o600
    fds = open_fds()
    assert end_maintenance(str(home)) is True
    assert maintenance(str(home)) is None and not marker(home).exists()
    assert end_maintenance(str(home)) is False  # already ended
    assert open_fds() == fds  # the state folder's descriptor is closed both ways


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '"on"', ""])
def test_an_unreadable_maintenance_marker_still_means_maintenance(home, text):
    marker(home).parent.mkdir()
    marker(home).write_text(text)
    assert maintenance(str(home)) == {}


def test_a_maintenance_marker_over_a_mebibyte_is_not_read(home):
    marker(home).parent.mkdir()
    big = json.dumps({"since": "x", "by": "b" * (1 << 20)})
    marker(home).write_text(big)
    assert maintenance(str(home)) == {}
    marker(home).write_text(json.dumps({"since": "x", "by": "b" * ((1 << 20) - 40)}))
    assert maintenance(str(home))["since"] == "x"  # just under the bound: read


def test_a_fifo_or_a_symlink_marker_is_not_waited_on_nor_followed(home, tmp_path):
    marker(home).parent.mkdir()
    os.mkfifo(marker(home))
    assert maintenance(str(home)) == {}  # returns at once: a FIFO is never opened to wait
    os.unlink(marker(home))
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"since": "s", "by": "mallory"}))
    marker(home).symlink_to(elsewhere)
    assert maintenance(str(home)) == {}
    os.unlink(marker(home))
    pause_file = tmp_path / "pauses.json"
    pause_file.write_text(json.dumps({"a": {"until": 1.0, "path": "/x"}}))
    marker(home, "paused_until.json").symlink_to(pause_file)
    assert pauses(str(home)) == {}


def test_a_state_folder_that_is_a_symlink_is_not_walked(home, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "paused_until.json").write_text(json.dumps({"a": {"until": 1.0, "path": "/x"}}))
    (other / "maintenance.json").write_text(json.dumps({"since": "s", "by": "mallory"}))
    (home / "state").symlink_to(other)
    assert pauses(str(home)) == {}
    assert maintenance(str(home)) == {}  # the marker's name is there: maintenance, unread
    with pytest.raises(UnsafePath):
        set_pause(str(home), "b", 2.0, "/t/b.md")
    with pytest.raises(UnsafePath):
        start_maintenance(str(home), "s", "ann")
    with pytest.raises(UnsafePath):
        end_maintenance(str(home))
    assert (other / "maintenance.json").exists()  # nothing written or removed over there
    assert json.loads((other / "paused_until.json").read_text()) == {
        "a": {"until": 1.0, "path": "/x"}}


def test_timed_pauses_are_recorded_and_forgotten(home):
    assert pauses(str(home)) == {}
    set_pause(str(home), "gone", None)  # forgetting an unknown pause writes nothing
    assert not marker(home, "paused_until.json").exists()
    set_pause(str(home), "a", 1_800_000_000.0, "/t/a.md")
    set_pause(str(home), "b", 1_800_000_060, "/t/b.md")
    assert pauses(str(home)) == {"a": {"until": 1_800_000_000.0, "path": "/t/a.md"},
                                 "b": {"until": 1_800_000_060, "path": "/t/b.md"}}
    assert marker(home, "paused_until.json").read_text() == (
        '{\n "a": {\n  "path": "/t/a.md",\n  "until": 1800000000.0\n },\n'
        ' "b": {\n  "path": "/t/b.md",\n  "until": 1800000060\n }\n}')
    before = marker(home, "paused_until.json").stat().st_mtime_ns
    set_pause(str(home), "gone", None)
    assert marker(home, "paused_until.json").stat().st_mtime_ns == before  # not rewritten
    set_pause(str(home), "a", None)
    assert pauses(str(home)) == {"b": {"until": 1_800_000_060, "path": "/t/b.md"}}
    set_pause(str(home), "b", None)
    assert pauses(str(home)) == {}
    assert json.loads(marker(home, "paused_until.json").read_text()) == {}


def test_pauses_keeps_only_entries_with_a_numeric_until(home):
    marker(home).parent.mkdir()
    marker(home, "paused_until.json").write_text(json.dumps({
        "ok": {"until": 5, "path": "/t/ok.md"}, "float": {"until": 5.5},
        "text": {"until": "tomorrow"}, "none": {"until": None}, "missing": {"path": "/t/m.md"},
        "flat": 5, "list": [5]}))
    assert pauses(str(home)) == {"ok": {"until": 5, "path": "/t/ok.md"}, "float": {"until": 5.5}}
    for text in ("[]", "not json", '"x"'):
        marker(home, "paused_until.json").write_text(text)
        assert pauses(str(home)) == {}
    # a broken file is replaced by the next pause, not a reason to fail
    set_pause(str(home), "c", 9.0, "/t/c.md")
    assert pauses(str(home)) == {"c": {"until": 9.0, "path": "/t/c.md"}}


def test_the_fast_path_hands_over_for_maintenance_or_a_pause_that_is_over(home):
    """(Not named after the idle tick: mutmut's run leaves such tests out.)"""
    now = 1_800_000_000.0
    assert not idle_blocked(str(home), now)  # no state folder: idle
    set_pause(str(home), "a", now + 60, "/t/a.md")
    assert not idle_blocked(str(home), now)  # a pause still running: nothing to do
    assert not idle_blocked(str(home), now + 59.9)
    assert idle_blocked(str(home), now + 60)  # its end has come: the full tick enables it
    assert idle_blocked(str(home), now + 3600)
    set_pause(str(home), "a", None)
    assert not idle_blocked(str(home), now + 3600)  # the file is there, but empty
    start_maintenance(str(home), "s", "ann")
    assert idle_blocked(str(home), now)  # the full tick reports maintenance mode
    end_maintenance(str(home))
    marker(home, "paused_until.json").write_text("not json")
    assert not idle_blocked(str(home), now)  # an unreadable pause file has nothing due


def test_a_home_reached_through_a_symlinked_folder_keeps_its_markers(tmp_path):
    """Only the home's own tree is walked without following symlinks: a home under a symlinked
    folder (/home -> /data/home, say) pauses and resumes as any other."""
    (tmp_path / "real" / "home").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    home = str(tmp_path / "link" / "home")
    start_maintenance(home, "s", "ann")
    assert maintenance(home) == {"since": "s", "by": "ann"}
    assert end_maintenance(home) is True
    set_pause(home, "a", 5.0, "/t/a.md")
    assert pauses(home) == {"a": {"until": 5.0, "path": "/t/a.md"}}
    assert idle_blocked(home, 5.0)
    assert (tmp_path / "real" / "home" / "state" / "paused_until.json").exists()


def test_pause_check_with_no_pause_file_imports_no_json(home):
    """The idle tick's check is two stats when neither marker is there, even with a state
    folder: json (and re) stay unloaded (README: the idle tick stays cheap). (Named with
    "import": mutmut's trampolines load json, so its runs leave this test out.)"""
    (home / "state").mkdir()
    code = ("import sys; from mdcron.schedule.pause import idle_blocked;"
            f" print(idle_blocked({str(home)!r}, 1e10), 'json' in sys.modules,"
            " 're' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.split() == ["False", "False", "False"], out.stdout + out.stderr
