"""A flat scheduler.yaml read without PyYAML (issue 27, cli/config_data.py): only for a text
PyYAML was seen to read alike, only under that text's key, and only the key is kept."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO
from conftest import age_cache as age

from mdcron.cli.config_data import flat

PROBE = """
import sys
from mdcron.cli.main import main
code = main(["--home", sys.argv[1], "tick", "--now", sys.argv[2]])
print("EXIT", code, "YAML", "yaml" in sys.modules)
"""


def _tick(home, minute: int) -> str:
    out = subprocess.run([sys.executable, "-c", PROBE, str(home),
                          f"2026-11-23T10:{minute:02d}:00+00:00"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    return out.stdout.strip().splitlines()[-1] + out.stderr


def test_a_flat_config_is_read_without_yaml_once_checked_and_its_text_is_not_kept(home,
                                                                                  write_task):
    (home / "scheduler.yaml").write_text("timezone: UTC  # the zone\nmax_parallel: 2\n",
                                         encoding="utf-8")
    write_task("plain", command="true")
    assert _tick(home, 0) == "EXIT 0 YAML True"  # the first tick creates state/
    assert _tick(home, 1) == "EXIT 0 YAML True"  # both parsers, the key written
    checked = (home / "state" / "config-checked").read_text(encoding="ascii")
    assert re.fullmatch(r"[0-9a-f]{64}\n", checked)
    age(home)  # the task file's row trusted: a file read again would import yaml for itself
    assert _tick(home, 2) == "EXIT 0 YAML False"
    assert _tick(home, 3) == "EXIT 0 YAML False"


def test_a_config_yaml_reads_differently_is_never_taken_flat(home, write_task):
    """`0x2` is 2 to PyYAML (YAML 1.1) and text to flat(): the key is never written, and
    every tick reads the config with PyYAML (taken flat, max_parallel would be refused)."""
    (home / "scheduler.yaml").write_text("max_parallel: 0x2\n", encoding="utf-8")
    write_task("plain", command="true")
    for minute in range(3):
        assert _tick(home, minute) == "EXIT 0 YAML True"
        age(home)
    assert not (home / "state" / "config-checked").exists()


def test_a_config_changed_after_its_check_is_checked_again(home, write_task):
    (home / "scheduler.yaml").write_text("max_parallel: 2\n", encoding="utf-8")
    write_task("plain", command="true")
    _tick(home, 0)  # the first tick creates state/
    assert _tick(home, 1) == "EXIT 0 YAML True"
    age(home)
    assert _tick(home, 2) == "EXIT 0 YAML False"
    (home / "scheduler.yaml").write_text("max_parallel: 0x2\n", encoding="utf-8")
    assert _tick(home, 3) == "EXIT 0 YAML True"  # not the old key: PyYAML, and 2 it is


def test_flat_reads_key_value_lines_and_gives_up_on_anything_else():
    assert flat("# comment\n\ntimezone: UTC\nmax_parallel: 4  # four\ncatchup: 2h\n") == {
        "timezone": "UTC", "max_parallel": 4, "catchup": "2h"}
    assert flat("a: true\nb: null\nc: -1\nd: 1.5\ne:\n") == {
        "a": True, "b": None, "c": -1, "d": 1.5, "e": None}
    for text in ("notify:\n  - mail\n", "a: 'quoted'\n", "a: [1]\n", "a: &x 1\n", "a: 1\na: 2\n",
                 "a: b: c\n", "  a: 1\n", "a: |\n  text\n", "- a\n", "a: *x\n"):
        assert flat(text) is None, text


_OLD_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):(?:[ \t]+(.*?))?[ \t]*(?:[ \t]#.*)?")
_OLD_PLAIN = re.compile(r"[A-Za-z0-9_./+@=:-][A-Za-z0-9_./+@=: -]*")


def _old_flat(text: str) -> dict | None:
    """flat() as it was before simple_line: every line through the patterns."""
    data: dict = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _OLD_LINE.fullmatch(line)
        if match is None or match.group(1) in data:
            return None
        value = match.group(2)
        if value is None:
            data[match.group(1)] = None
            continue
        if not _OLD_PLAIN.fullmatch(value) or ": " in value:
            return None
        lower = value.lower()
        data[match.group(1)] = (
            lower == "true" if lower in ("true", "false") else None if lower in ("null", "~")
            else int(value) if re.fullmatch(r"[-+]?(?:0|[1-9][0-9]*)", value)
            else float(value) if re.fullmatch(r"[-+]?[0-9]+\.[0-9]+", value) else value)
    return data


def test_flat_reads_every_line_as_the_patterns_do():
    """Issue 27: a plain `key: value` line is read without the patterns (config_data.simple_
    line, _scalar by str methods); on random lines of keys, values, signs, dots, spaces, tabs,
    colons, comments and non-ASCII digits flat() gives what the patterns alone gave."""
    import random

    rnd = random.Random(27)
    pieces = ["a", "b_1", "_k", "1", "0", "00", "12", "-", "+", ".", "5.", ".5", "1.5", ":", " ",
              "  ", "\t", "#", " #", "x y", "true", "Null", "~", "@", "=", "/", "'", "[", "&",
              "\u0663", "\u00b2", "é", "-0", "+7", "1e3"]
    for _ in range(6000):
        lines = ["".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 6)))
                 for _ in range(rnd.randint(1, 3))]
        if rnd.random() < 0.7:
            lines = [f"{rnd.choice(['a', 'k_2', 'x'])}:{line}" for line in lines]
        if rnd.random() < 0.5:  # the plain shape: `key: value`, values built of number-ish bits
            lines.append("k: " + "".join(rnd.choice(["0", "00", "1", "9", "-", "+", ".", "e",
                                                     "x", "_"]) for _ in range(rnd.randint(1, 4))))
        text = "\n".join(lines) + "\n"
        old, new = _old_flat(text), flat(text)
        assert old == new and [type(v) for v in (old or {}).values()] == [
            type(v) for v in (new or {}).values()], text


def test_a_plain_config_compiles_no_pattern():
    probe = ("import re\nfrom mdcron.cli import config_data as c\n"
             "data = c.flat('timezone: UTC\\nmax_parallel: 4\\ncatchup: 2h\\nx:\\n')\n"
             "texts = {getattr(p, 'pattern', p) for p in (c._LINE, c._PLAIN)}\n"
             "print(data, sorted(k[1] for k in re._cache if k[1] in texts))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.strip().endswith("'x': None} []"), out.stdout + out.stderr


def test_a_symlinked_config_checked_is_never_written_through(home, write_task, tmp_path):
    """state/config-checked swapped for a link to a file of the user's: the tick replaces the
    link with its own file and leaves the target as it was."""
    (home / "scheduler.yaml").write_text("timezone: UTC\nmax_parallel: 2\n", encoding="utf-8")
    write_task("plain", command="true")
    assert _tick(home, 0) == "EXIT 0 YAML True"  # the first tick creates state/
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    link = home / "state" / "config-checked"
    link.unlink(missing_ok=True)
    link.symlink_to(victim)
    assert _tick(home, 1) == "EXIT 0 YAML True"  # both parsers: the key written
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert not link.is_symlink() and re.fullmatch(r"[0-9a-f]{64}\n", link.read_text("ascii"))


ZONE_PROBE = """
import sys
at_start = []
sys.addaudithook(lambda e, a: at_start.append("zoneinfo" in sys.modules)
                 if e == "subprocess.Popen" and not at_start else None)
from mdcron.cli.main import main
code = main(["--home", sys.argv[1], "tick", "--now", sys.argv[2]])
print("EXIT", code, "ZONEINFO BEFORE THE TASK", at_start[:1])
"""


def _zone_tick(home, minute: int) -> str:
    out = subprocess.run([sys.executable, "-c", ZONE_PROBE, str(home),
                          f"2026-11-23T10:{minute:02d}:00+00:00"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    return out.stdout.strip().splitlines()[-1] + out.stderr


def test_a_checked_zone_is_not_resolved_again_while_its_file_is_unchanged(home, write_task):
    """Issue 27: importing zoneinfo to resolve `timezone:` cost each tick ~2.4 ms before its
    task; state/zone-checked names the file ZoneInfo read and its stat. (UTC needs none:
    test_a_utc_tick_never_imports_zoneinfo.)"""
    (home / "scheduler.yaml").write_text("timezone: Europe/Riga\n", encoding="utf-8")
    write_task("plain", command="true")
    for minute in range(3):  # state/ made, the key written, the zone noted
        _zone_tick(home, minute)
        age(home)
    record = (home / "state" / "zone-checked").read_text(encoding="ascii")
    assert record.startswith("Europe/Riga\t")
    assert _zone_tick(home, 3) == "EXIT 0 ZONEINFO BEFORE THE TASK [False]"
    # the file's stat no longer what was noted (its inode): resolved again, and noted again
    (home / "state" / "zone-checked").write_text(record.rsplit(":", 1)[0] + ":1\n",
                                                 encoding="ascii")
    assert _zone_tick(home, 4) == "EXIT 0 ZONEINFO BEFORE THE TASK [True]"
    assert (home / "state" / "zone-checked").read_text(encoding="ascii") == record
    assert _zone_tick(home, 5) == "EXIT 0 ZONEINFO BEFORE THE TASK [False]"


def test_a_zone_record_that_is_a_symlink_is_not_trusted_nor_written_through(home, write_task,
                                                                            tmp_path):
    """The symlink in place of a file: state/zone-checked pointing at a record elsewhere
    (the very record a tick would write) is not read, the zone is resolved again, and the
    record written anew replaces the link, never the file it points at."""
    (home / "scheduler.yaml").write_text("timezone: Europe/Riga\n", encoding="utf-8")
    write_task("plain", command="true")
    for minute in range(3):
        _zone_tick(home, minute)
        age(home)
    noted = home / "state" / "zone-checked"
    record = noted.read_text(encoding="ascii")
    elsewhere = tmp_path / "planted"
    elsewhere.write_text(record, encoding="ascii")
    noted.unlink()
    noted.symlink_to(elsewhere)
    assert _zone_tick(home, 3) == "EXIT 0 ZONEINFO BEFORE THE TASK [True]"
    assert not noted.is_symlink() and noted.read_text(encoding="ascii") == record
    assert elsewhere.read_text(encoding="ascii") == record


def test_an_unknown_zone_is_refused_by_every_tick_and_never_noted(home, write_task):
    (home / "scheduler.yaml").write_text("timezone: Mars/Olympus\n", encoding="utf-8")
    write_task("plain", command="true")
    (home / "state").mkdir()
    for minute in range(3):
        out = _zone_tick(home, minute)
        assert out.startswith("EXIT 2 ZONEINFO BEFORE THE TASK []"), out  # nothing ran
        assert "unknown time zone 'Mars/Olympus'" in out
        age(home)
    assert not (home / "state" / "zone-checked").exists()
