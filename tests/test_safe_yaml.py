"""core/safe_yaml.py: the limits sit exactly where the README says, and everything under them
reads as yaml.safe_load reads it (anchors, merge keys, dates)."""

from __future__ import annotations

import datetime as dt

import pytest
import yaml

from mdcron.core.safe_yaml import (
    MAX_ALIASES,
    MAX_BYTES,
    MAX_DEPTH,
    MAX_VALUES,
    YamlLimitError,
    load_yaml,
)

ORDINARY = """\
id: backup
schedule: "0 3 * * *"
base: &base {timeout: 10m, retry: true}
job:
  <<: *base
  tags: [a, b]
when: 2026-12-01
nested: [[1, 2], {k: [v]}]
text: |
  two
  lines
"""


def test_ordinary_yaml_reads_as_safe_load_reads_it():
    assert load_yaml(ORDINARY) == yaml.safe_load(ORDINARY)
    assert load_yaml(ORDINARY)["when"] == dt.date(2026, 12, 1)
    assert load_yaml("") is None


def nested(levels: int) -> str:
    """Lists in lists with a value in the middle: `levels` levels (the value is one)."""
    return "[" * (levels - 1) + "x" + "]" * (levels - 1)


@pytest.mark.parametrize("style", ["flow", "block"])
def test_nesting_up_to_the_limit_reads_and_one_more_is_refused(style):
    def text(levels: int) -> str:
        if style == "flow":
            return nested(levels)
        return "".join(f"{'  ' * i}k{i}:\n" for i in range(levels - 1)) + "  " * levels + "x"

    assert load_yaml(text(MAX_DEPTH)) is not None
    with pytest.raises(YamlLimitError, match=f"more than {MAX_DEPTH} levels"):
        load_yaml(text(MAX_DEPTH + 1))


def test_an_alias_that_deepens_past_the_limit_is_refused():
    text = f"a: &a {nested(MAX_DEPTH - 1)}\nb: [*a]\n"  # the mapping is a level too
    assert load_yaml(text.replace("[*a]", "*a"))
    with pytest.raises(YamlLimitError, match="nests the value more than"):
        load_yaml(text)


def test_aliases_up_to_the_limit_read_and_one_more_is_refused():
    def text(count: int) -> str:
        return "a: &a 1\nb: [" + ", ".join(["*a"] * count) + "]\n"

    assert len(load_yaml(text(MAX_ALIASES))["b"]) == MAX_ALIASES
    with pytest.raises(YamlLimitError, match=f"more than {MAX_ALIASES} aliases") as info:
        load_yaml(text(MAX_ALIASES + 1))
    assert info.value.problem_mark.line == 1


def test_values_are_counted_with_aliases_expanded():
    fifty = "[" + ", ".join(["x"] * 49) + "]"  # 50 values with the list itself
    text = f"a: &a {fifty}\nb: [" + ", ".join(["*a"] * 99) + "]\n"  # (1 + 99) * 50 + a few
    assert load_yaml(text.replace("*a", "1")) is not None
    with pytest.raises(YamlLimitError, match="once aliases are expanded"):
        load_yaml(text.replace(fifty, "[" + ", ".join(["x"] * (MAX_VALUES // 99)) + "]"))


def test_a_value_that_contains_itself_is_refused():
    with pytest.raises(YamlLimitError, match="inside the value it refers to"):
        load_yaml("a: &a [1, *a]\n")


def test_size_and_ordinary_errors():
    with pytest.raises(YamlLimitError, match="more than 1 MiB"):
        load_yaml("# " + "x" * MAX_BYTES)
    with pytest.raises(yaml.YAMLError, match="undefined alias"):
        load_yaml("a: *nowhere\n")
    with pytest.raises(yaml.YAMLError):
        load_yaml("a: [1,\n")
