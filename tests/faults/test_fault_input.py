"""Hostile input: fuzzed and malformed task files, ids that try to escape, working folders and
scripts outside the home, a config with errors. Each bad file gets a clear error of its own and
every other task still runs."""

from __future__ import annotations

import json
import os
import string
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from faultlib import BEFORE, NOW, render_task, run_cli, runs, write_tasks
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mdcron.cli.emergency import config_error_alert
from mdcron.schedule.cache import task_from_json, task_to_json
from mdcron.settings.config import ConfigError, load_config
from mdcron.tasks.not_tasks import NOT_A_TASK
from mdcron.tasks.taskfile import KNOWN_KEYS, load_task_file

FUZZ_EXAMPLES = 1000

# --------------------------------------------------------------------------- fuzzing

_odd_text = st.sampled_from([
    "* * * * *", "@every 0s", "@every 1000000d", "@at 1970-01-01T00:00", "60 25 * * *",
    "@reboot", "../x", "/etc/passwd", "\x00", "é" * 5, "~", "${ANTHROPIC_API_KEY}", "-1",
    "1e309", "9" * 5000, "\u202e", "\ud7ff", "true", "null", "&a", "*a",
    "!!python/object:os.system",
    "Europe/Riga", "Mars/Olympus", "../../etc/shadow", "claude", "script", "always", "never",
    "x" * 70000,
])
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=10**18, max_value=10**80),
    st.floats(), st.text(max_size=30), _odd_text, st.dates(), st.datetimes(),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.text(string.ascii_letters + "_", max_size=8) | st.integers(), inner, max_size=4),
    max_leaves=12,
)
_keys = st.sampled_from(sorted(KNOWN_KEYS) + ["scheduel", "ID", "√", "x" * 300, "<<"])


@st.composite
def task_files(draw) -> bytes:
    """Bytes of a would-be task file: mostly a valid task with some keys given odd values,
    then damaged in one of several ways; or plain random text; or random bytes."""
    kind = draw(st.sampled_from(["keys", "keys", "keys", "damaged", "text", "bytes"]))
    if kind == "text":
        return draw(st.text(max_size=300)).encode("utf-8", "surrogatepass")
    if kind == "bytes":
        return draw(st.binary(max_size=300))
    data: dict[object, object] = {"id": "fz", "schedule": "* * * * *", "command": "true"}
    data.update(draw(st.dictionaries(_keys, _values, max_size=5)))
    for key in draw(st.lists(st.sampled_from(["id", "schedule", "command"]), max_size=2)):
        data.pop(key, None)
    try:
        front = yaml.safe_dump(data, allow_unicode=True, sort_keys=False)
    except (yaml.YAMLError, ValueError, OverflowError):
        front = "id: fz\n"
    body = draw(st.text(max_size=60))
    text = f"---\n{front}---\n{body}"
    if kind == "damaged":
        how = draw(st.sampled_from(["cut", "no-close", "junk-line", "tab", "dup", "bom", "crlf",
                                    "nul", "latin1"]))
        if how == "cut":
            text = text[: draw(st.integers(0, len(text)))]
        elif how == "no-close":
            text = f"---\n{front}{body}"
        elif how == "junk-line":
            lines = text.split("\n")
            at = draw(st.integers(0, len(lines)))
            lines.insert(at, draw(st.text(alphabet=":-[]{}#&*!|>'\"%@` \t", max_size=12)))
            text = "\n".join(lines)
        elif how == "tab":
            text = text.replace("\n", "\n\t", 1)
        elif how == "dup":
            text = text.replace("---\n", "---\nid: other\n", 1)
        elif how == "bom":
            text = "\ufeff" + text
        elif how == "crlf":
            text = text.replace("\n", "\r\n")
        elif how == "nul":
            text = text.replace(":", ":\x00", 1)
        elif how == "latin1":
            return text.encode("utf-8", "surrogatepass") + "é".encode("latin-1")
    return text.encode("utf-8", "surrogatepass")


def check_one(path: Path, config) -> bool | None:
    """load_task_file on one file: never raises, never an internal error, errors are about
    this file and bounded, a valid task survives the cache's JSON. True when it was valid, None
    when it is no task at all (no frontmatter: ignored with a warning)."""
    task, problems = load_task_file(path, config)
    for p in problems:
        assert p.path == path.absolute()
        assert "internal error" not in p.message, p
        assert 0 < len(p.message) < 3000, p
    if task is None:
        if not any(p.severity == "error" for p in problems):  # issue 25: text, not a task
            assert [p.message for p in problems] == [NOT_A_TASK], problems
            return None
        return False
    assert task_from_json(task_to_json(task)) == task
    return True


def test_fuzzed_task_files_never_break_loading_or_the_tick(home, tmp_path):
    config, _ = load_config(home)
    scratch = tmp_path / "scratch.md"
    corpus = home / "tasks"
    tried = valid = 0

    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(task_files())
    def check(data: bytes) -> None:
        nonlocal tried, valid
        tried += 1
        scratch.write_bytes(data)
        found = check_one(scratch, config)
        if found:
            valid += 1
        elif found is False and tried % 5 == 0:  # keep every fifth bad file for the real tick below
            (corpus / f"fuzz-{tried:05d}.md").write_bytes(data)

    check()
    print(f"fuzz: {tried} task files tried, {valid} valid, {tried - valid} refused")
    assert tried >= FUZZ_EXAMPLES * 0.9
    marks = home / "marks"
    marks.mkdir()
    good = write_tasks(home, 3, prefix="good", command=f"echo ok >> {marks}/{{id}}")
    bad = len(list(corpus.glob("fuzz-*.md")))
    assert bad > 100
    run_cli(home, "tick", "--now", BEFORE)
    out = run_cli(home, "tick", "--now", NOW)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert all((marks / g).read_text() == "ok\nok\n" for g in good)
    checked = run_cli(home, "validate", "--json")
    report = json.loads(checked.stdout)
    named = {Path(p["file"]).name for p in report["problems"] if p["severity"] == "error"}
    assert named == {p.name for p in corpus.glob("fuzz-*.md")}
    assert report["tasks"] == 3


def hostile_files(home: Path, outside: Path) -> dict[str, str]:
    """Bad files written into tasks/, each with a word its error message must contain."""
    tasks = home / "tasks"
    ok = "---\nid: {}\nschedule: '* * * * *'\ncommand: echo hi\n---\n"
    (tasks / "no-close.md").write_text("---\nid: nc\nschedule: '* * * * *'\ncommand: true\n")
    with open(tasks / "huge.md", "wb") as f:  # 50 MB, real bytes
        f.write(ok.format("huge").encode())
        chunk = b"a" * (1 << 20)
        for _ in range(50):
            f.write(chunk)
    (tasks / "binary.md").write_bytes(bytes(range(256)) * 16)
    (tasks / "nul.md").write_text(ok.format("nul").replace("echo hi", "echo \x00hi"))
    (tasks / "latin1.md").write_bytes(ok.format("lat").encode() + "café".encode("latin-1"))
    (tasks / "deep.md").write_text("---\nid: deep\ntags: " + "[" * 20000 + "\n---\n")
    laughs = "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 12))
    (tasks / "laughs.md").write_text(f"---\nid: laughs\nl0: &l0 lol\n{laughs}tags: *l11\n---\n")
    (tasks / "huge-int.md").write_text(
        "---\nid: hint\nschedule: '* * * * *'\ncommand: true\ntimeout: 1" + "0" * 5000 + "\n---\n")
    (tasks / "huge-timeout.md").write_text(
        "---\nid: htime\nschedule: '* * * * *'\ncommand: true\ntimeout: 1e308\n---\n")
    (tasks / "empty.md").write_text("")
    (tasks / "list.md").write_text("---\n- id: x\n---\n")
    (tasks / "dup-key.md").write_text(ok.format("dup").replace("command:", "id: dup2\ncommand:"))
    (tasks / "emoji-id.md").write_text(ok.format("'🙂'"))
    (tasks / "bad-cron.md").write_text(ok.format("cron").replace("* * * * *", "61 * * * *"))
    os.mkfifo(tasks / "fifo.md")
    (tasks / "dir.md").mkdir()
    (tasks / "zero.md").symlink_to("/dev/zero")
    (tasks / "dangling.md").symlink_to(outside / "nothing-here.md")
    return {
        "no-close.md": "never closed", "huge.md": "too large", "binary.md": "NUL",
        "nul.md": "NUL", "latin1.md": "UTF-8", "deep.md": "", "laughs.md": "alias",
        "huge-int.md": "", "huge-timeout.md": "timeout", "empty.md": "no frontmatter",
        "list.md": "not a mapping", "dup-key.md": "appears on lines", "emoji-id.md": "id",
        "bad-cron.md": "schedule", "fifo.md": "regular file", "dir.md": "regular file",
        "zero.md": "regular file", "dangling.md": "cannot read",
    }


def test_hostile_task_files_each_get_their_own_error_and_the_rest_run(home, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    expected = hostile_files(home, outside)
    marks = home / "marks"
    marks.mkdir()
    write_tasks(home, 2, prefix="good", command=f"echo ok >> {marks}/{{id}}")
    (home / "tasks" / "unicode.md").write_text(render_task(
        "uni", title="Ünïcödé ✓ 日本語 \u202e", command=f"echo ✓ >> {marks}/uni"))
    (home / "tasks" / "huge-arg.md").write_text(render_task(
        "hugearg", command="echo " + "x" * 200_000))  # valid, but too long for exec
    out = run_cli(home, "tick", "--now", NOW, timeout=120)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-3000:]
    errors = [line for line in out.stderr.splitlines() if ": error" in line]
    for name, word in expected.items():
        mine = [e for e in errors if f"/{name}" in e]
        assert mine, f"no error for {name}: {out.stderr[-2000:]}"
        assert all(len(e) < 1500 for e in mine)
        assert any(word in e for e in mine), (name, mine)
    assert (marks / "good000").read_text() == "ok\n" and (marks / "uni").read_text() == "✓\n"
    [row] = runs(home, "hugearg")
    assert row[3] == "failed" and "argument list too long" in row[4]


# --------------------------------------------------------------------------- escaping ids

ESCAPING_IDS = ["../x", "/etc/passwd", "a/b", ".", "", "x" * 1000, "..", "a\nb", "-rf", "~x",
                "a\\b", "x.." + "/"]


def test_ids_that_try_to_escape_are_refused_and_touch_nothing(home, tmp_path):
    for n, bad in enumerate(ESCAPING_IDS):
        (home / "tasks" / f"bad{n}.md").write_text(render_task(bad, command="true"))
    marks = home / "marks"
    marks.mkdir()
    write_tasks(home, 1, prefix="good", command=f"echo ok >> {marks}/good")
    before = set(tmp_path.rglob("*"))
    out = run_cli(home, "tick", "--now", NOW)
    assert out.returncode == 1
    for n in range(len(ESCAPING_IDS)):
        assert any(f"/bad{n}.md:" in line and ": error" in line
                   for line in out.stderr.splitlines()), out.stderr
    assert (marks / "good").read_text() == "ok\n"
    created = {p.relative_to(tmp_path) for p in set(tmp_path.rglob("*")) - before}
    allowed = ("home/state", "home/logs", "home/marks/")
    assert all(str(p).startswith(allowed) for p in created), created
    assert sorted(p.name for p in (home / "state" / "locks").iterdir()) == ["good000.lock"]
    assert [p.name for p in (home / "logs" / "runs").iterdir()] == ["good000"]
    assert not Path("/etc/passwd.lock").exists()
    for bad in ("../x", "/etc/passwd", "a/b", "."):
        for command in (["run", bad], ["show", bad], ["disable", bad], ["logs", bad],
                        ["why", bad]):
            res = run_cli(home, *command)
            assert res.returncode in (1, 2) and "Traceback" not in res.stderr, (command, res)
    # SQLite's own companions of the database (a read-only reader of the task cache leaves
    # them for the next writer to remove) are not something the commands wrote
    after = {p.relative_to(tmp_path) for p in set(tmp_path.rglob("*")) - before
             if not p.name.endswith(("-wal", "-shm"))}
    assert after == {p for p in created if not p.name.endswith(("-wal", "-shm"))}


# --------------------------------------------------------------------------- outside the home


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    script = folder / "run.sh"
    script.write_text(f"#!/bin/sh\necho ran > {folder}/script-ran\n")
    script.chmod(0o755)
    return folder


@pytest.mark.parametrize("allowed", [False, True])
def test_cwd_and_scripts_outside_the_home_are_refused_unless_allowed(home, outside, allowed):
    if allowed:
        (home / "scheduler.yaml").write_text(f"allow_outside_home: [{outside}]\n")
    (home / "link").symlink_to(outside)
    (home / "scripts").mkdir()
    (home / "scripts" / "run.sh").symlink_to(outside / "run.sh")
    tasks = {
        "abs": dict(cwd=str(outside), command=f"pwd > {home}/marks/abs"),
        "dotdot": dict(cwd="../outside", command=f"pwd > {home}/marks/dotdot"),
        "viasym": dict(cwd="link", command=f"pwd > {home}/marks/viasym"),
        "script": dict(run_as="script", command="scripts/run.sh"),
    }
    (home / "marks").mkdir()
    for task_id, fields in tasks.items():
        (home / "tasks" / f"{task_id}.md").write_text(render_task(task_id, **fields))
    out = run_cli(home, "tick", "--now", NOW)
    ran = {p.name for p in (home / "marks").iterdir()}
    if allowed:
        assert out.returncode == 0, out.stderr
        assert ran == {"abs", "dotdot", "viasym"} and (outside / "script-ran").exists()
    else:
        assert out.returncode == 1
        assert ran == set() and not (outside / "script-ran").exists()
        for task_id in tasks:
            assert f"{task_id}.md" in out.stderr and "escapes the home" in out.stderr
        assert "allow_outside_home" in out.stderr


def test_a_folder_swapped_for_a_link_outside_after_validation_is_refused(home, outside):
    (home / "work").mkdir()
    (home / "tasks" / "w.md").write_text(render_task("w", cwd="work", command="pwd > here"))
    assert run_cli(home, "tick", "--now", BEFORE).returncode == 0
    assert (home / "work" / "here").exists()
    (home / "work" / "here").unlink()
    (home / "work").rmdir()
    (home / "work").symlink_to(outside)  # the folder becomes a way out
    out = run_cli(home, "tick", "--now", NOW)
    assert out.returncode == 1 and "escapes the home" in out.stderr, out.stdout + out.stderr
    assert not (outside / "here").exists()


# --------------------------------------------------------------------------- config errors

BROKEN_CONFIGS = {
    "yaml": "max_parallel: [1,\n",
    "type": "max_parallel: -3\n",
    "zone": "timezone: Mars/Olympus\n",
    "duration": "kill_grace: soon\n",
    "notify": "notify:\n  quiet_hours: all day\n",
}


def sink_config(sink, broken: str) -> str:
    return f"notify:\n  destinations:\n    ops: \"{sink.json_url()}\"\n" + (
        broken if not broken.startswith("notify:") else broken.replace("notify:\n", ""))


@pytest.mark.parametrize("broken", sorted(BROKEN_CONFIGS))
def test_a_config_with_errors_stops_the_tick_before_anything_runs(home, write_task, broken,
                                                                  http_sink):
    (home / "scheduler.yaml").write_text(sink_config(http_sink, BROKEN_CONFIGS[broken]))
    write_task("t", command=f"touch {home}/ran")
    out = run_cli(home, "tick", "--now", NOW)
    assert out.returncode == 2 and "nothing was run" in out.stderr, out.stderr
    assert "scheduler.yaml" in out.stderr and "Traceback" not in out.stderr
    assert not (home / "ran").exists()
    # the tick sent the alert directly (the database is not needed for it), once an hour
    [body] = http_sink.bodies()
    assert "config error" in body["title"] and "scheduler.yaml" in body["message"]
    with pytest.raises(ConfigError) as caught:
        load_config(home)
    # within the hour of the tick's own instant (--now), not of the wall clock
    at = datetime.fromisoformat(NOW).timestamp()
    assert config_error_alert(home, caught.value.problems, {}, at + 3000) == [
        "alert already sent within the hour"]
    assert len(http_sink.bodies()) == 1


def test_the_tick_itself_sends_the_config_error_alert(home, write_task, http_sink):
    (home / "scheduler.yaml").write_text(sink_config(http_sink, BROKEN_CONFIGS["yaml"]))
    write_task("t", command="true")
    out = run_cli(home, "tick", "--now", NOW)
    assert out.returncode == 2
    assert any("config error" in b["title"] for b in http_sink.bodies()), out.stderr


def test_an_unreadable_config_with_no_destination_says_nobody_was_told(home):
    (home / "scheduler.yaml").write_text("notify: [\n")
    with pytest.raises(ConfigError) as caught:
        load_config(home)
    assert config_error_alert(home, caught.value.problems, {}, 0.0) == [
        "no destination could be read from the config: nobody was alerted"]
