"""Prompt templates: the shipped default, a home's override, and sections."""

from __future__ import annotations

import pytest
from conftest import REPO

from mdcron.claude.templates import (
    PLACEHOLDERS,
    SHIPPED_DIR,
    TemplateError,
    check_template,
    render_text,
    template_source,
)
from mdcron.settings.config import Config


def test_the_example_prompts_are_the_shipped_ones():
    # One source of truth: the package copy; the top-level prompts/ is its example copy.
    names = sorted(p.name for p in SHIPPED_DIR.glob("*.txt"))
    assert names == sorted(PLACEHOLDERS) == sorted(p.name for p in (REPO / "prompts").iterdir())
    for name in names:
        assert (REPO / "prompts" / name).read_bytes() == (SHIPPED_DIR / name).read_bytes(), name


@pytest.mark.parametrize("name", sorted(PLACEHOLDERS))
def test_shipped_templates_are_sound(tmp_path, name):
    source, broken = check_template(Config(home=tmp_path), name)
    assert broken is None and source.path == SHIPPED_DIR / name and not source.overridden


def test_a_home_override_wins_and_a_broken_one_is_reported(tmp_path):
    config = Config(home=tmp_path)
    (tmp_path / "prompts").mkdir()
    own = tmp_path / "prompts" / "self-heal.txt"
    own.write_text("Heal $task_id; $whatever\n")
    source, broken = check_template(config, "self-heal.txt")
    assert source.overridden and source.path == own and "the home’s own" in source.describe()
    assert broken is not None and "unknown placeholder $whatever" in broken
    assert str(own) in broken and "delete it to use the shipped default" in broken
    own.write_text("Heal $task_id\n")
    assert check_template(config, "self-heal.txt")[1] is None
    assert template_source(config, "check-comments.txt").overridden is False


def test_sections_keep_or_drop_their_lines():
    text = "a\n{{#prev}}\nprev: $prev\n\n{{/prev}}\nb $x\n"
    assert render_text(text, {"prev": "", "x": "1"}) == "a\nb 1\n"
    assert render_text(text, {"prev": "p", "x": "1"}) == "a\nprev: p\n\nb 1\n"
    for bad, why in (("{{#nope}}\n{{/nope}}\n", "unknown section"),
                     ("{{#prev}}\n", "never closed"),
                     ("{{/prev}}\n", "closes no open section"),
                     ("{{#prev}}\n{{#x}}\n{{/x}}\n{{/prev}}\n", "opened inside")):
        with pytest.raises(TemplateError, match=why):
            render_text(bad, {"prev": "p", "x": "1"})
