"""Byte-preserving edits: only the intended bytes change, and files are replaced atomically."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import yaml

from mdcron.tasks.frontmatter_edit import (
    EditError,
    edit_task_file,
    render_value,
    set_keys,
    write_atomic,
)

MESSY = """\
---
# Nightly backup.   Edited by hand; keep these comments!
id:   backup-db     # the id never changes
title: 'Back up: the "main" database'
schedule: "30 3 * * *"

enabled:    true   # flipped by the scheduler on suspension
tags:
  - db
  - nightly   # the important one
# a comment between keys
timeout: 10m
prompt: |
  Check the dump.
  ---
  Then report.
---

Body text.
---
Not frontmatter: enabled: true
"""


def test_disabling_changes_only_the_enabled_value() -> None:
    out = set_keys(MESSY, {"enabled": False})
    assert out == MESSY.replace(
        "enabled:    true   # flipped", "enabled:    false   # flipped"
    )


def test_adding_a_key_goes_right_before_the_closing_line() -> None:
    out = set_keys(MESSY, {"enabled": False, "disabled_reason": "auto_suspended"})
    expected = MESSY.replace("enabled:    true   #", "enabled:    false   #").replace(
        "  Then report.\n---\n", "  Then report.\ndisabled_reason: auto_suspended\n---\n"
    )
    assert out == expected


def test_round_trip_restores_the_original_bytes() -> None:
    off = set_keys(MESSY, {"enabled": False, "disabled_reason": "auto_suspended"})
    assert set_keys(off, {"enabled": True, "disabled_reason": None}) == MESSY
    assert set_keys(set_keys(MESSY, {"enabled": False}), {"enabled": True}) == MESSY


def test_crlf_endings_are_kept() -> None:
    text = MESSY.replace("\n", "\r\n")
    out = set_keys(text, {"enabled": False, "retry": True})
    expected = (
        text.replace("enabled:    true", "enabled:    false")
        .replace("  Then report.\r\n---\r\n", "  Then report.\r\nretry: true\r\n---\r\n")
    )
    assert out == expected


def test_a_block_value_is_replaced_with_its_continuation_lines() -> None:
    out = set_keys(MESSY, {"tags": ["db", "weekly, big"]})
    assert out == MESSY.replace(
        "tags:\n  - db\n  - nightly   # the important one\n",
        'tags: [db, "weekly, big"]\n',
    )
    out = set_keys(MESSY, {"prompt": "Short now."})
    assert out == MESSY.replace(
        "prompt: |\n  Check the dump.\n  ---\n  Then report.\n", "prompt: Short now.\n"
    )


def test_removing_a_key_keeps_the_comment_after_it() -> None:
    out = set_keys(MESSY, {"tags": None})
    assert out == MESSY.replace("tags:\n  - db\n  - nightly   # the important one\n", "")
    assert "# a comment between keys\n" in out


def test_zero_indented_list_and_quoted_key() -> None:
    text = '---\nid: t\n"enabled" : yes\nsecrets:\n- A\n- B\n\nschedule: x\n---\n'
    out = set_keys(text, {"enabled": False, "secrets": ["C"]})
    assert out == '---\nid: t\n"enabled" : false\nsecrets: [C]\n\nschedule: x\n---\n'


def test_empty_value_with_a_comment() -> None:
    text = "---\nid: t\nnotify_to:   # nobody yet\n---\n"
    out = set_keys(text, {"notify_to": "ops@example.com"})
    assert out == "---\nid: t\nnotify_to: ops@example.com   # nobody yet\n---\n"


def test_a_hash_inside_quotes_is_not_a_comment() -> None:
    text = "---\ntitle: \"a # b\"  # real\nx: 'it''s # not' # real\n---\n"
    out = set_keys(text, {"title": "c", "x": "d"})
    assert out == "---\ntitle: c  # real\nx: d # real\n---\n"


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (True, "true"),
        (False, "false"),
        (600, "600"),
        (1.5, "1.5"),
        ("paused", "paused"),
        ("", '""'),
        ("yes", '"yes"'),
        ("null", '"null"'),
        ("123", '"123"'),
        ("2026-12-01", '"2026-12-01"'),
        ("@daily", '"@daily"'),
        ("*/5 * * * *", '"*/5 * * * *"'),
        ("a: b", '"a: b"'),
        ("a #b", '"a #b"'),
        ("two\nlines", '"two\\nlines"'),
        (" padded", '" padded"'),
        ("café", "café"),
        (["a", "b c", "d,e", "true"], '[a, b c, "d,e", "true"]'),
        ({"LANG": "C"}, "{LANG: C}"),
    ],
)
def test_values_render_as_yaml_that_reads_back(value: object, written: str) -> None:
    assert render_value(value) == written
    assert yaml.safe_load(f"k: {written}\n") == {"k": value}


def test_no_frontmatter_is_an_error() -> None:
    with pytest.raises(EditError, match="no frontmatter"):
        set_keys("just text\n", {"enabled": False})
    with pytest.raises(EditError, match="never closed"):
        set_keys("---\nid: t\n", {"enabled": False})


def test_a_duplicated_key_is_refused() -> None:
    with pytest.raises(EditError, match="appears more than once"):
        set_keys("---\nenabled: true\nenabled: false\n---\n", {"enabled": False})


def test_removing_a_missing_key_changes_nothing() -> None:
    assert set_keys(MESSY, {"disabled_reason": None}) == MESSY


# --- files ----------------------------------------------------------------------------------------


def test_edit_task_file_writes_and_keeps_the_mode(tmp_path: Path) -> None:
    path = tmp_path / "t.md"
    path.write_bytes(MESSY.encode())
    os.chmod(path, 0o640)
    new = edit_task_file(path, {"enabled": False, "disabled_reason": "paused"})
    assert path.read_bytes() == new.encode()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert "enabled:    false   # flipped" in new and "disabled_reason: paused\n---\n" in new
    assert [p.name for p in tmp_path.iterdir()] == ["t.md"]  # no temp file left


def test_a_persons_newer_edit_wins(tmp_path: Path) -> None:
    path = tmp_path / "t.md"
    # the caller read "---\nid: t\nenabled: true\n---\n"; a person added a line since
    path.write_text("---\nid: t\ntimeout: 5m  # edited meanwhile\nenabled: true\n---\n")
    new = edit_task_file(path, {"enabled": False})
    assert new == "---\nid: t\ntimeout: 5m  # edited meanwhile\nenabled: false\n---\n"


def test_an_edit_that_would_not_read_back_leaves_the_file(tmp_path: Path) -> None:
    path = tmp_path / "t.md"
    text = "---\n{id: t, enabled: true}\n---\n"  # a flow mapping: no key lines to edit
    path.write_text(text)
    with pytest.raises(EditError):
        edit_task_file(path, {"enabled": False})
    assert path.read_text() == text


def test_broken_yaml_is_not_edited(tmp_path: Path) -> None:
    path = tmp_path / "t.md"
    path.write_text("---\nid: [t\n---\n")
    with pytest.raises(EditError, match="does not parse"):
        edit_task_file(path, {"enabled": False})


def test_unchanged_file_is_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "t.md"
    path.write_text("---\nid: t\nenabled: true\n---\n")
    before = path.stat().st_ino
    edit_task_file(path, {"enabled": True})
    assert path.stat().st_ino == before


def test_write_atomic_follows_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real.md"
    real.write_text("old")
    link = tmp_path / "link.md"
    link.symlink_to(real)
    write_atomic(link, "new\r\n")
    assert link.is_symlink() and real.read_bytes() == b"new\r\n"
