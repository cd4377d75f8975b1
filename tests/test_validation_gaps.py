"""Issue 25 item 5: validation catches what fails later, and cosmetic mistakes do not disable a
task. Parsing through parse_task_text; the CLI (validate, tick, why) as a real subprocess."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

from mdcron.core.units import parse_duration
from mdcron.settings.config import Config
from mdcron.tasks.taskfile import parse_task_text

NOW = "2026-12-01T06:00:00+00:00"


@pytest.fixture
def config(home: Path) -> Config:
    return Config(home=home.resolve(), timezone="UTC")


def parse(config: Config, *lines: str, command: str | None = 'command: "true"'):
    text = "\n".join(["---", "id: t", 'schedule: "@daily"', *lines,
                      *([command] if command else []), "---", ""])
    task, problems = parse_task_text(text, config.home / "tasks" / "t.md", config)
    return task, [(p.severity, p.line, p.message) for p in problems]


def messages(problems) -> str:
    return "\n".join(m for _, _, m in problems)


# --- cosmetic keys and values: accepted, or a did-you-mean -------------------------------------


def test_tags_as_a_single_text_is_read_as_a_list_with_a_warning(config) -> None:
    task, problems = parse(config, "tags: backup")
    assert task is not None and task.tags == ("backup",)
    assert problems == [("warning", 4, "tags: a single text, read as [backup]; write tags:"
                                       " [backup]")]
    task, _ = parse(config, "tags: backup, nightly")
    assert task is not None and task.tags == ("backup", "nightly")


def test_a_title_that_is_not_text_does_not_disable_the_task(config) -> None:
    task, problems = parse(config, "title: 2026")
    assert task is not None and task.title == "2026"
    assert [s for s, _, _ in problems] == ["warning"]
    task, problems = parse(config, "title: [a, b]")
    assert task is not None and task.title == "t" and "the id is shown" in messages(problems)


def test_an_invalid_choice_gets_a_did_you_mean(config) -> None:
    task, problems = parse(config, "notify_on: failures")
    assert task is None
    assert "did you mean failure?" in messages(problems)
    assert "did you mean script?" in messages(parse(config, "run_as: scirpt")[1])


def test_one_and_a_half_hours_is_a_duration(config) -> None:
    assert parse_duration("1h30m") == 5400
    assert parse_duration("2d 12h") == 216000
    task, problems = parse(config, "timeout: 1h30m")
    assert task is not None and task.timeout == 5400 and problems == []


@pytest.mark.parametrize("command, written", [
    ("command: echo a: b", "command: 'echo a: b'"),
    ("command: echo 'it is: ok'", "command: 'echo ''it is: ok'''"),
])
def test_a_yaml_error_in_the_command_says_to_quote_it(config, command, written) -> None:
    task, problems = parse(config, command=command)
    assert task is None
    assert written in messages(problems) and "in quotes" in messages(problems), problems


def test_a_command_starting_with_a_hash_says_yaml_read_a_comment(config) -> None:
    task, problems = parse(config, command="command: #!/bin/sh -c true")
    assert task is None
    assert "YAML reads ' #' and what follows as a comment" in messages(problems), problems
    assert "command: '#!/bin/sh -c true'" in messages(problems)


# --- time zones -------------------------------------------------------------------------------


def test_a_zone_abbreviation_is_warned_about_with_the_region(config) -> None:
    task, problems = parse(config, "timezone: EST")
    assert task is not None  # EST is a valid zone name: it runs, a fixed UTC-5
    assert [s for s, _, _ in problems] == ["warning"]
    assert "e.g. America/New_York" in messages(problems)
    _, problems = parse(config, "timezone: PST")  # not a zone name at all: an error
    assert "unknown time zone 'PST'; did you mean America/Los_Angeles?" in messages(problems)


def test_a_zone_typo_suggests_the_nearest_name(config) -> None:
    task, problems = parse(config, "timezone: Amerca/New_York")
    assert task is None
    assert "did you mean America/New_York?" in messages(problems), problems
    assert "did you mean Europe/Riga?" in messages(parse(config, "timezone: Europe/Riaga")[1])


def test_the_configs_zone_gets_the_same_hints(home: Path) -> None:
    (home / "scheduler.yaml").write_text("timezone: Europe/Berln\n", encoding="utf-8")
    out = run_cli(home, "validate")
    assert out.returncode == 2 and "did you mean Europe/Berlin?" in out.stderr, out.stderr
    (home / "scheduler.yaml").write_text("timezone: EST\n", encoding="utf-8")
    out = run_cli(home, "validate")
    assert out.returncode == 0 and "e.g. America/New_York" in out.stdout, out.stdout


# --- scripts: what validate says is what the run does ------------------------------------------


def _script(path: Path, text: str, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)


def test_a_tilde_script_path_runs_where_validate_found_it(home: Path, write_task,
                                                          tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    _script(home / "bin" / "x.sh", f"#!/bin/sh\necho ok > {marker}\n", 0o755)
    write_task("tilde", run_as="script", command="~/home/bin/x.sh")
    write_task("in-tilde", command=f"pwd > {tmp_path / 'where'}", cwd="~/home/bin")
    env = {"HOME": str(tmp_path)}  # ~ is tmp_path: the script is home/bin/x.sh
    checked = run_cli(home, "validate", env=env)
    assert checked.returncode == 0 and "0 warning(s)" in checked.stdout, checked.stdout
    out = run_cli(home, "tick", "--now", NOW, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert marker.read_text() == "ok\n"
    assert (tmp_path / "where").read_text().strip() == str((home / "bin").resolve())


def test_validate_reports_a_script_that_cannot_start(home: Path, write_task) -> None:
    _script(home / "bin" / "plain.sh", "#!/bin/sh\ntrue\n", 0o644)
    _script(home / "bin" / "nobang.sh", "echo no interpreter line\n", 0o755)
    write_task("plain", run_as="script", command="bin/plain.sh")
    write_task("nobang", run_as="script", command="bin/nobang.sh --flag")
    out = run_cli(home, "validate", "--json")
    found = {Path(p["file"]).stem: p["message"] for p in json.loads(out.stdout)["problems"]}
    assert "is not executable, so runs will fail; fix: chmod +x" in found["plain"], found
    assert "has no '#!' line" in found["nobang"] and "#!/bin/sh" in found["nobang"], found


# --- @at in the past; duplicate ids -------------------------------------------------------------


def test_an_at_in_the_past_is_warned_about(home: Path, write_task) -> None:
    write_task("once", schedule="@at 2020-01-01T09:00", command="true")
    write_task("later", schedule="@at 8000-01-01T09:00", command="true")
    out = run_cli(home, "validate")
    assert out.returncode == 0
    assert "once.md" in out.stdout and "is in the past (2020-01-01 09:00" in out.stdout
    assert "later.md" not in out.stdout


def test_duplicate_ids_name_both_files_at_their_lines_and_why_refuses(home: Path) -> None:
    (home / "tasks" / "a.md").write_text('---\nid: same\nschedule: "@daily"\ncommand: "true"\n'
                                         "---\n", encoding="utf-8")
    (home / "tasks" / "b.md").write_text('---\n# the copy\nschedule: "@daily"\nid: same\n'
                                         'command: "true"\n---\n', encoding="utf-8")
    a, b = home / "tasks" / "a.md", home / "tasks" / "b.md"
    out = run_cli(home, "validate")
    assert f"{a}:2: error [id]: duplicate id 'same' (also in {b}:4)" in out.stderr, out.stderr
    assert f"{b}:4: error [id]: duplicate id 'same' (also in {a}:2)" in out.stderr
    out = run_cli(home, "tick", "--now", NOW)
    assert out.returncode == 2 and f"{a}:2 and {b}:4" in out.stderr, out.stderr
    out = run_cli(home, "why", "same", "--at", NOW)
    assert out.returncode == 2, out.stdout
    assert f"duplicate id 'same' in {a}:2 and {b}:4" in out.stderr, out.stderr
    out = run_cli(home, "doctor", "--json")
    found = next(c for c in json.loads(out.stdout) if c["check"] == "task files")
    assert found["status"] == "fail" and f"'same' in {a}:2 and {b}:4" in found["detail"]
