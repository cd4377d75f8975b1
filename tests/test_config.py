"""scheduler.yaml is read once into typed sections; the checks every section shares."""

from __future__ import annotations

from pathlib import Path

import pytest

from mdcron.core.problems import unknown_key
from mdcron.core.units import whole_number
from mdcron.run.ladder import reload_task
from mdcron.settings.claude import ClaudeConfig
from mdcron.settings.config import Config, ConfigError, load_config
from mdcron.settings.notify import NotifyConfig
from mdcron.tasks.taskfile import load_task_file


def write_config(home: Path, text: str) -> None:
    (home / "scheduler.yaml").write_text(text, encoding="utf-8")


def test_every_section_is_built_once_into_typed_values(home):
    write_config(home, """\
timezone: Europe/Riga
notify:
  destinations: {home: "json://127.0.0.1:9/${HOOK_TOKEN}"}
  quiet_hours: "22:00-07:00"
heartbeat_url: "https://hc.example/${PING_ID}"
incident_command: "  /usr/local/bin/page-me  "
claude: {model: claude-opus-4-8, max_heals_per_day: 2}
max_heals_per_tick: 2
probation: 3d
""")
    config, warnings = load_config(home, {"HOOK_TOKEN": "x", "PING_ID": "y"})
    assert warnings == []
    assert isinstance(config.notify, NotifyConfig) and isinstance(config.claude, ClaudeConfig)
    assert config.notify.default == "home" and str(config.notify.quiet_hours) == "22:00-07:00"
    assert config.notify.timezone == "Europe/Riga"  # the scheduler's zone, for quiet hours
    assert config.heartbeat_url == "https://hc.example/${PING_ID}"  # expanded only when sent
    assert config.incident_command == "/usr/local/bin/page-me"
    assert (config.claude.model, config.claude.max_heals_per_day) == ("claude-opus-4-8", 2)
    assert config.claude.max_heals_per_tick == 2 and config.probation == 3 * 86400
    assert {"HOOK_TOKEN", "PING_ID"} <= set(config.secret_names())
    assert not hasattr(config, "raw")
    with pytest.raises(AttributeError):
        config.probation = 1  # type: ignore[misc]  (frozen)


def test_max_heals_per_tick_zero_turns_healing_off_instead_of_stopping_the_tick(home):
    # One rule (>= 0, like claude.max_heals_per_day): config.py used to refuse 0 while the
    # Claude section accepted it, so `max_heals_per_tick: 0` stopped every tick.
    write_config(home, "max_heals_per_tick: 0\n")
    config, _ = load_config(home)
    assert config.claude.max_heals_per_tick == 0
    write_config(home, "max_heals_per_tick: -1\n")
    with pytest.raises(ConfigError, match=r"max_heals_per_tick.*whole number >= 0, got -1"):
        load_config(home)


def test_unknown_keys_say_what_was_meant_in_every_section(home):
    write_config(home, "timezon: UTC\nnotify: {quiet_hour: '22:00-07:00'}\n"
                 "claude: {modle: x}\nincident_command: [a]\n")
    _, warnings = load_config(home)
    messages = {w.key: w.message for w in warnings}
    assert "did you mean 'timezone'?" in messages["timezon"]
    assert "under notify: is ignored; did you mean 'quiet_hours'?" in messages["notify.quiet_hour"]
    assert "under claude: is ignored; did you mean 'model'?" in messages["claude.modle"]
    assert "expected a shell command" in messages["incident_command"]


def test_the_shared_helpers():
    assert unknown_key("zzz", ["alpha", "beta"]) == (
        "unknown key 'zzz' is ignored; known keys: alpha, beta")
    assert whole_number(0, 0) == 0
    for bad in (True, 1.5, "3", 0):
        with pytest.raises(ValueError, match="expected a whole number >= 1"):
            whole_number(bad, 1)


def test_reload_after_a_heal_uses_the_ticks_config_not_a_second_read(home, write_task):
    # The tick loaded scheduler.yaml once; an edit to it mid-tick (here: the cwd policy the
    # task uses disappears) must not change what the healed task file means in this tick.
    (home / "work").mkdir()
    write_config(home, "cwd_policies: {data: work}\n")
    config, _ = load_config(home)
    path = write_task("job", command="echo old", cwd_policy="data")
    task, problems = load_task_file(path, config)
    assert task is not None and not [p for p in problems if p.severity == "error"]
    path.write_text(path.read_text().replace("echo old", "echo healed"))  # the heal's edit
    write_config(home, "timezone: UTC\n")  # someone edits scheduler.yaml meanwhile
    fresh = reload_task(task, config)
    assert fresh.command == "echo healed"


def test_a_config_built_by_hand_still_has_every_section(tmp_path):
    config = Config(home=tmp_path)
    assert config.notify == NotifyConfig() and config.claude == ClaudeConfig()
    assert config.heartbeat_url is None and config.incident_command is None
