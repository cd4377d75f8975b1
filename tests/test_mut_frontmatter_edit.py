"""The byte-preserving editor, edge by edge (issue 28: tests that catch a wrong operator).

What a person sees: the exact bytes of their task file after an edit, and the one-line message
when an edit is refused (naming what is wrong and the fix)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import yaml

from mdcron.tasks.frontmatter_edit import (
    EditError,
    KeyLine,
    edit_task_file,
    find_frontmatter,
    frontmatter_text,
    key_lines,
    render_value,
    set_keys,
    split_lines,
    write_atomic,
)


def refused(text: str, updates: dict) -> str:
    with pytest.raises(EditError) as info:
        set_keys(text, updates)
    return str(info.value)


# ---------------------------------------------------------------- lines and delimiters


def test_split_lines_keeps_every_byte_and_the_last_line_without_a_newline() -> None:
    assert split_lines("a\nb") == ["a\n", "b"]
    assert split_lines("a\r\nb\n") == ["a\r\n", "b\n"]
    assert split_lines("") == []
    assert split_lines("\n\n") == ["\n", "\n"]
    for text in ("---\nid: t\n---\nbody", "x\r\n\r\ny", "only"):
        assert "".join(split_lines(text)) == text


def test_a_file_without_a_trailing_newline_keeps_its_last_line() -> None:
    text = "---\nid: t\nenabled: true\n---\nlast line"
    assert set_keys(text, {"enabled": False}) == "---\nid: t\nenabled: false\n---\nlast line"
    closing_last = "---\nid: t\nenabled: true\n---"
    assert set_keys(closing_last, {"enabled": False}) == "---\nid: t\nenabled: false\n---"
    assert set_keys(closing_last, {"retry": 2}) == "---\nid: t\nenabled: true\nretry: 2\n---"


def test_delimiters_may_have_trailing_blanks_and_a_byte_order_mark() -> None:
    text = "\ufeff--- \t\r\nid: t\r\nenabled: true\r\n---  \r\nbody\r\n"
    assert find_frontmatter(split_lines(text)) == (0, 3)
    assert set_keys(text, {"enabled": False}) == text.replace("true", "false")
    # a line that only starts with --- is not a delimiter
    assert find_frontmatter(split_lines("---\nid: t\n----\n--- x\n---\n")) == (0, 4)


def test_frontmatter_text_and_its_first_line_number() -> None:
    assert frontmatter_text("---\nid: t\nx: 1\n---\nbody\n") == ("id: t\nx: 1\n", 2)
    assert frontmatter_text("---\n---\n") == ("", 2)


def test_blank_lines_before_the_opening_line_are_named_with_their_count() -> None:
    message = refused("\n\n---\nid: t\n---\n", {"enabled": False})
    assert message == ("the frontmatter must start on line 1; remove the 2 blank line(s) "
                       "before the opening '---'")
    assert "remove the 1 blank line(s)" in refused(" \n---\nid: t\n---\n", {"x": 1})


def test_missing_frontmatter_says_what_a_task_file_looks_like() -> None:
    expected = ("no frontmatter: a task file starts with a line '---', then key: value lines "
                "(id, schedule, ...), then a closing '---'")
    assert refused("", {"x": 1}) == expected
    assert refused("\n\n", {"x": 1}) == expected
    assert refused("id: t\n---\n", {"x": 1}) == expected
    assert refused("\n\nid: t\n", {"x": 1}) == expected


def test_an_unclosed_frontmatter_says_where_to_close_it() -> None:
    assert refused("---\nid: t\n", {"x": 1}) == (
        "the frontmatter opened by '---' on line 1 is never closed; add a line '---' after "
        "the last key")
    assert "never closed" in refused("---\n", {"x": 1})


# ---------------------------------------------------------------- keys


def test_key_lines_spans_and_heads() -> None:
    lines = split_lines("---\nid: t\ntags:\n  - a\n\n# note\nx : 1\n---\n")
    assert key_lines(lines, 1, 7) == [
        KeyLine("id", 1, 2, "id:"), KeyLine("tags", 2, 4, "tags:"), KeyLine("x", 6, 7, "x :")]


def test_quoted_keys_are_unquoted() -> None:
    text = "---\n\"a\\\"b\": 1\n'it''s': 2\n\"back\\\\slash\": 3\n'q': 4\n---\n"
    keys = [k.key for k in key_lines(split_lines(text), 1, 5)]
    assert keys == ['a"b', "it's", "back\\slash", "q"]
    out = set_keys(text, {"it's": 5, 'a"b': 6, "back\\slash": 7, "q": 8})
    assert out == "---\n\"a\\\"b\": 6\n'it''s': 5\n\"back\\\\slash\": 7\n'q': 8\n---\n"


def test_a_one_character_quote_key_is_not_unquoted() -> None:
    # a lone quote is no quoted key: the line is not a key line at all
    assert key_lines(split_lines('---\n": 1\nx: 2\n---\n'), 1, 3) == [KeyLine("x", 2, 3, "x:")]


def test_continuation_lines_end_before_trailing_blanks_and_comments() -> None:
    text = "---\nenv:\n  A: 1\n\n  # indented comment\n  B: 2\n\n# top comment\n\nid: t\n---\n"
    out = set_keys(text, {"env": {"C": "3"}})
    assert out == '---\nenv: {C: "3"}\n\n# top comment\n\nid: t\n---\n'
    # the last key too: trailing blanks and comments before the closing line stay
    text = "---\nid: t\ntags:\n  - a\n\n# end\n---\n"
    assert set_keys(text, {"tags": None}) == "---\nid: t\n\n# end\n---\n"


def test_a_key_with_only_blank_lines_after_it_keeps_them() -> None:
    text = "---\nid: t\n\n\n---\n"
    assert set_keys(text, {"id": "u"}) == "---\nid: u\n\n\n---\n"
    assert set_keys(text, {"id": None}) == "---\n\n\n---\n"


def test_a_duplicated_key_names_its_lines() -> None:
    message = refused("---\nid: t\nenabled: true\nx: 1\nenabled: false\n---\n",
                      {"enabled": False})
    assert message == "key 'enabled' appears more than once (lines 3, 5); keep one"


def test_a_new_key_must_be_a_plain_name() -> None:
    for name in ("bad key", "1st", "a-b", "", "é"):
        assert refused("---\nid: t\n---\n", {name: 1}) == f"cannot add a key named {name!r}"
    assert set_keys("---\nid: t\n---\n", {"_x9": 1, "Ab": 2}) == "---\nid: t\n_x9: 1\nAb: 2\n---\n"


def test_removing_a_missing_key_with_a_bad_name_is_no_error() -> None:
    assert set_keys("---\nid: t\n---\n", {"bad key": None}) == "---\nid: t\n---\n"


def test_keys_added_to_an_empty_frontmatter_take_the_opening_line_ending() -> None:
    assert set_keys("---\r\n---\r\n", {"id": "t"}) == "---\r\nid: t\r\n---\r\n"
    assert set_keys("---\n---\n", {"id": "t"}) == "---\nid: t\n---\n"
    assert set_keys("---\r\nid: t\n---\n", {"x": 1}) == "---\r\nid: t\nx: 1\n---\n"


# ---------------------------------------------------------------- values and comments


@pytest.mark.parametrize(("line", "value", "new"), [
    ("x: 1", 2, "x: 2"),
    ("x:1", 2, None),  # not a key line: `x:1` is a plain scalar
    ("x:\t1\t# c", 2, "x:\t2\t# c"),
    ("x: 1#no", 2, "x: 2"),  # a # glued to text is not a comment
    ("x: a # b # c", 2, "x: 2 # b # c"),
    ("x: \"a\\\"# b\" # c", 2, "x: 2 # c"),  # an escaped quote inside quotes
    ("x: 'a''# b' # c", 2, "x: 2 # c"),
    ("x: [\"a # b\"] # c", 2, "x: 2 # c"),
    ("x: {k: 'a # b'} # c", 2, "x: 2 # c"),
    ("x: a'b # c", 2, "x: 2 # c"),  # a quote inside a word opens nothing
    ("x: a\"b # c", 2, "x: 2 # c"),
    ("x: #c", 2, "x: 2 #c"),
    ("x:   # c", 2, "x: 2   # c"),
    ("x:# c", 2, None),
    ("x:", 2, "x: 2"),
    ("x:   ", 2, "x:   2"),
    ("x: 1   ", 2, "x: 2"),
    ("x:  1  # c", 2, "x:  2  # c"),
])
def test_comments_and_spacing_after_a_value_are_kept(line: str, value: object,
                                                     new: str | None) -> None:
    text = f"---\nid: t\n{line}\n---\n"
    out = set_keys(text, {"x": value})
    if new is None:  # no `x:` key line: the key is added
        assert out == f"---\nid: t\n{line}\nx: {value}\n---\n"
    else:
        assert out == f"---\nid: t\n{new}\n---\n"
        if "\t" not in line:  # PyYAML takes no tab after a colon; the editor keeps it
            assert yaml.safe_load(out.split("---\n")[1])["x"] == value


def test_a_comment_only_value_keeps_its_comment_after_the_new_value() -> None:
    out = set_keys("---\nnotify_to:\t# nobody\r\n---\r\n", {"notify_to": "a@b.c"})
    assert out == "---\nnotify_to: a@b.c\t# nobody\r\n---\r\n"


@pytest.mark.parametrize(("value", "written"), [
    (float("nan"), ".nan"),
    (float("inf"), ".inf"),
    (float("-inf"), "-.inf"),
    (-3, "-3"),
    (0.1, "0.1"),
    (-2.5, "-2.5"),
    ((1, "a"), "[1, a]"),
    ([], "[]"),
    ({}, "{}"),
    ([None, True, 2, ["x"]], "[null, true, 2, [x]]"),
    ({"k": None, "n": 1.5}, "{k: null, n: 1.5}"),
    (["a,b", "c]", "d[", "{e", "f}"], '["a,b", "c]", "d[", "{e", "f}"]'),
    ({"a,b": "c"}, '{"a,b": c}'),
    ("a,b", "a,b"),
    ("tab\there", '"tab\\there"'),
    ("trailing ", '"trailing "'),
    ("~", '"~"'),
    ("- x", '"- x"'),
    ("[x", '"[x"'),
    ("x: y: z", '"x: y: z"'),
    ("naïve ☃", "naïve ☃"),
])
def test_more_values_render_as_yaml_that_reads_back(value: object, written: str) -> None:
    assert render_value(value) == written
    back = yaml.safe_load(f"k: {written}\n")["k"]
    if isinstance(value, float) and value != value:
        assert back != back
    else:
        assert back == (list(value) if isinstance(value, tuple) else value)


def test_a_value_that_cannot_be_written_is_named() -> None:
    with pytest.raises(EditError) as info:
        render_value({1, 2})
    assert str(info.value) == "cannot write a set into a task file"
    with pytest.raises(EditError, match="cannot write a NoneType into a task file"):
        render_value(None)
    with pytest.raises(EditError, match="cannot write a bytes into a task file"):
        set_keys("---\nid: t\n---\n", {"x": b"raw"})


# ---------------------------------------------------------------- files


def test_an_edit_that_would_break_the_file_names_it(tmp_path: Path) -> None:
    path = tmp_path / "t.md"
    # a quoted title's second line looks like a key line to the line editor
    text = '---\nid: t\ntitle: "a\nb: c"\n---\n'
    path.write_text(text)
    with pytest.raises(EditError) as info:
        edit_task_file(path, {"b": 2})
    assert str(info.value).startswith(f"the edit would break {path}: the frontmatter does not "
                                      "parse: ")
    assert path.read_text() == text


def test_an_edit_that_reads_back_wrong_names_the_keys(tmp_path: Path) -> None:
    path = tmp_path / "t.md"
    text = "---\n{id: t, enabled: true, n: 1}\n---\n"  # a flow mapping: no key lines to edit
    path.write_text(text)
    with pytest.raises(EditError) as info:
        edit_task_file(path, {"id": None, "enabled": None})
    assert str(info.value) == (f"the edit of {path} would not read back as intended "
                               "(keys ['enabled', 'id'])")
    assert path.read_text() == text


def test_edits_write_tuples_removals_and_additions(tmp_path: Path) -> None:
    path = tmp_path / "t.md"
    path.write_text("---\nid: t\ntags: [a]\nold: 1\n---\nbody\n")
    new = edit_task_file(path, {"tags": ("b", "c"), "old": None, "gone": None, "n": 3})
    assert new == "---\nid: t\ntags: [b, c]\nn: 3\n---\nbody\n"
    assert path.read_text() == new
    # an empty frontmatter is an empty mapping, and gets keys
    path.write_text("---\n---\nbody\n")
    assert edit_task_file(path, {"id": "t"}) == "---\nid: t\n---\nbody\n"


def test_a_frontmatter_that_is_not_a_mapping_is_not_edited(tmp_path: Path) -> None:
    path = tmp_path / "t.md"
    for text in ("---\n- a\n- b\n---\n", "---\njust words\n---\n"):
        path.write_text(text)
        with pytest.raises(EditError) as info:
            edit_task_file(path, {"enabled": False})
        assert str(info.value) == "the frontmatter is not a mapping of key: value"
        assert path.read_text() == text


def test_a_yaml_bomb_is_refused_as_too_complex(tmp_path: Path) -> None:
    path = tmp_path / "t.md"
    bomb = "---\na: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)) + "---\n"
    path.write_text(bomb)
    with pytest.raises(EditError) as info:
        edit_task_file(path, {"enabled": False})
    assert str(info.value).startswith("the frontmatter is too complex to edit safely: ")
    assert path.read_text() == bomb


def test_a_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "t.md"
    path.write_bytes(b"---\nid: caf\xe9\n---\n")
    with pytest.raises(EditError) as info:
        edit_task_file(path, {"enabled": False})
    assert str(info.value) == f"{path} is not UTF-8 text; not editing it"
    assert path.read_bytes() == b"---\nid: caf\xe9\n---\n"


def test_a_broken_file_is_refused_with_the_parse_error(tmp_path: Path) -> None:
    path = tmp_path / "t.md"
    path.write_text("---\nid: [t\n---\n")
    with pytest.raises(EditError) as info:
        edit_task_file(path, {"enabled": False})
    assert str(info.value).startswith("the frontmatter does not parse: ")
    path.write_text("no frontmatter\n")
    with pytest.raises(EditError, match="^no frontmatter: "):
        edit_task_file(path, {"enabled": False})


def test_a_file_over_the_read_limit_is_not_edited(tmp_path: Path) -> None:
    from mdcron.tasks.frontmatter_edit import READ_LIMIT

    path = tmp_path / "t.md"
    head = b"---\nid: t\n---\n"
    path.write_bytes(head + b"x" * (READ_LIMIT - len(head)))
    assert edit_task_file(path, {"n": 1}).startswith("---\nid: t\nn: 1\n---\n")
    path.write_bytes(head + b"x" * (READ_LIMIT + 1 - len(head)))
    before = path.read_bytes()
    with pytest.raises(EditError) as info:
        edit_task_file(path, {"n": 2})
    assert str(info.value) == f"{path} is larger than {READ_LIMIT} bytes; not editing it"
    assert path.read_bytes() == before


def test_a_fifo_in_the_files_place_is_refused_not_waited_on(tmp_path: Path) -> None:
    path = tmp_path / "t.md"
    os.mkfifo(path)
    with pytest.raises(EditError) as info:
        edit_task_file(path, {"enabled": False})
    assert str(info.value).startswith("not editing it: ")
    assert "FIFO" in str(info.value)


def test_with_root_a_symlink_in_the_files_place_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "tasks").mkdir(parents=True)
    outside = tmp_path / "outside.md"
    outside.write_text("---\nid: t\nenabled: true\n---\n")
    link = home / "tasks" / "t.md"
    link.symlink_to(outside)
    with pytest.raises(EditError, match="^not editing it: .*symlink"):
        edit_task_file(link, {"enabled": False}, root=home)
    assert outside.read_text() == "---\nid: t\nenabled: true\n---\n"
    # without root the link is followed: the target is edited and the link stays
    edit_task_file(link, {"enabled": False})
    assert link.is_symlink() and outside.read_text() == "---\nid: t\nenabled: false\n---\n"


def test_edit_with_root_writes_in_place_and_keeps_the_mode(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "tasks").mkdir(parents=True)
    path = home / "tasks" / "t.md"
    path.write_text("---\nid: t\nenabled: true\n---\n")
    os.chmod(path, 0o600)
    assert edit_task_file(path, {"enabled": False}, root=home) == (
        "---\nid: t\nenabled: false\n---\n")
    assert path.read_text() == "---\nid: t\nenabled: false\n---\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in (home / "tasks").iterdir()) == ["t.md"]


def test_write_atomic_with_root_replaces_a_symlink_and_makes_new_files_0644(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    outside = tmp_path / "outside"
    outside.write_text("keep")
    os.chmod(outside, 0o600)
    link = home / "t.md"
    link.symlink_to(outside)
    assert write_atomic(link, b"new", root=home) is True
    assert not link.is_symlink() and link.read_bytes() == b"new"
    assert stat.S_IMODE(link.stat().st_mode) == 0o644
    assert outside.read_text() == "keep"
    fresh = home / "fresh.md"
    assert write_atomic(fresh, "é") is True
    assert fresh.read_bytes() == "é".encode() and stat.S_IMODE(fresh.stat().st_mode) == 0o644


def test_write_atomic_keeps_the_owner(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("changing a file's owner needs root")
    path = tmp_path / "t.md"
    path.write_text("old")
    os.chown(path, 4321, 4322)
    os.chmod(path, 0o640)
    assert write_atomic(path, "new") is True
    info = path.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (4321, 4322, 0o640)


def test_write_atomic_unless_changed_leaves_a_newer_save(tmp_path: Path) -> None:
    path = tmp_path / "t.md"
    path.write_text("theirs")
    assert write_atomic(path, "ours", unless_changed=b"what we read") is False
    assert path.read_text() == "theirs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.md"]  # no temp file left
    assert write_atomic(path, "ours", unless_changed=b"theirs") is True
    assert path.read_text() == "ours"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.md"]
    with pytest.raises(OSError):
        write_atomic(tmp_path / "missing" / "t.md", "x", unless_changed=b"")
    gone = tmp_path / "gone.md"
    with pytest.raises(FileNotFoundError):  # nothing there to compare with
        write_atomic(gone, "ours", unless_changed=b"")
    assert not gone.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["t.md"]


# ---------------------------------------------------------------- edges the first pass missed


@pytest.mark.parametrize(("line", "new"), [
    ('x: "a\\" # b" # c', "x: 2 # c"),  # an escaped quote does not close the string
    ('x: "a\\\\" # c', "x: 2 # c"),  # an escaped backslash is one character
    ("x: 'a''' # c", "x: 2 # c"),  # '' then the closing quote
    ('x: X"a # b', "x: 2 # b"),  # a quote inside a word opens nothing
    ("x: a# b", "x: 2"),  # a # glued to the word before it is text
    ("x: aX#b # c", "x: 2 # c"),
    ("x: a\u3000 # c", "x: 2 # c"),  # an odd space is the old value's, not the gap's
    ("x: aX # c", "x: 2 # c"),
])
def test_where_a_comment_starts(line: str, new: str) -> None:
    text = f"---\nid: t\n{line}\n---\n"
    assert set_keys(text, {"x": 2}) == f"---\nid: t\n{new}\n---\n"


def test_only_blanks_tabs_and_line_ends_may_follow_a_delimiter() -> None:
    for odd in ("---X", "---XX \t", "---\x0c", "---\u00a0", "X---"):
        lines = split_lines(f"---\nid: t\n{odd}\n---\n")
        assert find_frontmatter(lines) == (0, 3), odd
    with pytest.raises(EditError, match="^no frontmatter"):
        find_frontmatter(split_lines("X---\nid: t\n---\n"))
    with pytest.raises(EditError, match="^no frontmatter"):
        find_frontmatter(split_lines("XX---\nid: t\n---\n"))


def test_key_lines_looks_only_between_start_and_stop() -> None:
    lines = split_lines("a: 1\nb: 2\nc: 3\nd: 4\n")
    assert [k.key for k in key_lines(lines, 1, 3)] == ["b", "c"]
    assert key_lines(lines, 1, 3)[-1] == KeyLine("c", 2, 3, "c:")


def test_a_key_line_in_the_body_is_not_the_frontmatters() -> None:
    text = "---\nid: t\nenabled: true\n---\nbody\nenabled: yes"
    assert set_keys(text, {"enabled": False}) == (
        "---\nid: t\nenabled: false\n---\nbody\nenabled: yes")


@pytest.mark.parametrize("key", ['""', "''"])
def test_an_empty_quoted_key_is_the_empty_name(key: str) -> None:
    text = f"---\nid: t\n{key}: 1\n---\n"
    assert [k.key for k in key_lines(split_lines(text), 1, 3)] == ["id", ""]
    assert set_keys(text, {"": 2}) == f"---\nid: t\n{key}: 2\n---\n"


def test_quoted_strings_keep_unicode_and_stay_on_one_line() -> None:
    assert render_value(" café") == '" café"'
    long = "a: " + "word " * 40 + "end"
    assert render_value(long) == f'"{long}"'
    assert set_keys("---\nid: t\n---\n", {"title": long}) == f'---\nid: t\ntitle: "{long}"\n---\n'


def test_flow_items_quote_only_for_flow_characters() -> None:
    assert render_value(["Xy", "aXb"]) == "[Xy, aXb]"
    assert render_value({"X": "X"}) == "{X: X}"


def test_with_root_a_symlinked_folder_on_the_way_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    text = "---\nid: t\nenabled: true\n---\n"
    (elsewhere / "t.md").write_text(text)
    (home / "tasks").symlink_to(elsewhere)
    with pytest.raises(EditError, match="^not editing it: .*symlink"):
        edit_task_file(home / "tasks" / "t.md", {"enabled": False}, root=home)
    assert (elsewhere / "t.md").read_text() == text


def test_with_root_a_link_to_another_task_file_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "tasks").mkdir(parents=True)
    other = home / "tasks" / "other.md"
    text = "---\nid: other\nenabled: true\n---\n"
    other.write_text(text)
    (home / "tasks" / "t.md").symlink_to(other)
    with pytest.raises(EditError, match="^not editing it: .*symlink"):
        edit_task_file(home / "tasks" / "t.md", {"enabled": False}, root=home)
    assert other.read_text() == text and (home / "tasks" / "t.md").is_symlink()


def test_write_atomic_with_root_refuses_a_path_outside_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    outside = tmp_path / "outside.md"
    outside.write_text("keep")
    with pytest.raises(OSError, match="outside"):
        write_atomic(outside, "new", root=home)
    assert outside.read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "outside.md"]


def test_a_file_that_never_stops_changing_is_given_up_on() -> None:
    # /proc/self/io counts the bytes this process has read: it differs at every read, as a file
    # an editor keeps saving would. It never parses, and it is never read the same twice.
    path = Path(f"/proc/{os.getpid()}/io")
    if not path.exists():
        pytest.skip("needs Linux /proc/<pid>/io")
    with pytest.raises(EditError) as info:
        edit_task_file(path, {"enabled": False})
    assert str(info.value) == f"{path} keeps changing while we edit it; try again"


def test_the_exchange_names_the_file_it_could_not_swap(tmp_path: Path) -> None:
    (tmp_path / "t.md").write_text("x")
    with pytest.raises(FileNotFoundError) as info:
        write_atomic(tmp_path / "gone.md", "ours", unless_changed=b"")
    assert str(info.value) == "[Errno 2] No such file or directory: 'gone.md'"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.md"]


# A kernel or filesystem without renameat2's RENAME_EXCHANGE (older kernels, some FUSE and
# network filesystems, sandboxes) answers EINVAL. A seccomp filter gives a real child process
# exactly that answer, so the editor's fallback (compare, then rename) runs for real.
_RENAMEAT2 = {"x86_64": (0xC000003E, 316), "aarch64": (0xC00000B7, 276)}
_NO_EXCHANGE = r"""
import ctypes, os, platform, struct, sys
from pathlib import Path
audit_arch, nr = {arch}[platform.machine()]
def insn(code, jt, jf, k):
    return struct.pack("HBBI", code, jt, jf, k)
EINVAL, RENAME_EXCHANGE = 22, 2
prog = b"".join([
    insn(0x20, 0, 0, 4),                    # A = arch
    insn(0x15, 0, 5, audit_arch),           # not ours: allow
    insn(0x20, 0, 0, 0),                    # A = syscall number
    insn(0x15, 0, 3, nr),                   # not renameat2: allow
    insn(0x20, 0, 0, 48),                   # A = low word of the flags argument
    insn(0x45, 0, 1, RENAME_EXCHANGE),      # flags & RENAME_EXCHANGE?
    insn(0x06, 0, 0, 0x00050000 | EINVAL),  # yes: EINVAL, as a filesystem without it
    insn(0x06, 0, 0, 0x7FFF0000),           # allow
])
buf = ctypes.create_string_buffer(prog)
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
fprog = Fprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
assert libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0, ctypes.get_errno()  # SECCOMP filter

from mdcron.tasks.frontmatter_edit import edit_task_file, write_atomic
folder = Path(sys.argv[1])
path = folder / "t.md"
path.write_text("---\nid: t\nenabled: true  # kept\n---\nbody\n")
(folder / "a").write_text("a")
swap = libc.renameat2(-100, str(folder / "a").encode(), -100, str(path).encode(), 2)
print(swap, ctypes.get_errno(), path.read_text()[:3])  # the exchange is refused here
(folder / "a").unlink()
wanted = "---\nid: t\nenabled: false  # kept\n---\nbody\n"
print(edit_task_file(path, {{"enabled": False}}) == wanted, path.read_text() == wanted)
print(write_atomic(path, "ours", unless_changed=b"an older read"), path.read_text()[:3])
print(write_atomic(path, "ours", unless_changed=path.read_bytes()), path.read_text())
print(sorted(p.name for p in folder.iterdir()))
"""


def test_without_an_atomic_exchange_the_editor_compares_then_renames(tmp_path: Path) -> None:
    import platform
    import subprocess
    import sys

    if platform.machine() not in _RENAMEAT2:
        pytest.skip(f"the seccomp filter knows renameat2's number on {list(_RENAMEAT2)} only")
    code = _NO_EXCHANGE.format(arch=_RENAMEAT2)
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "-1 22 ---", "True True", "False ---", "True ours", "['t.md']"]


def test_a_file_in_the_way_of_the_folder_is_named(tmp_path: Path) -> None:
    (tmp_path / "notes").write_text("a file, not a folder")
    with pytest.raises(NotADirectoryError) as info:
        write_atomic(tmp_path / "notes" / "t.md", "x")
    assert str(info.value) == f"[Errno 20] Not a directory: '{tmp_path / 'notes'}'"
    assert (tmp_path / "notes").read_text() == "a file, not a folder"
