"""cli/fit.py and cli/timefmt.py (issue 25): tables that fit any width, never a zero-width
column; relative times and schedules in words. Pure functions, no subprocess."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

from mdcron.cli.fit import Column, layout, render
from mdcron.cli.timefmt import absolute, relative, span, words

COLUMNS = (Column("id", 0, least=12, most=32, first=True), Column("title", 3, least=10),
           Column("status", 0), Column("next run", 0, least=10), Column("last run", 0),
           Column("tags", 5, least=6), Column("fails", 4, right=True))
NOW = datetime(2026, 11, 23, 10, 0, tzinfo=UTC).timestamp()

text = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=0, max_size=70)


@given(st.lists(st.tuples(*[text] * len(COLUMNS)), min_size=1, max_size=8),
       st.integers(min_value=60, max_value=250))
def test_every_line_fits_and_no_column_is_empty(rows, width):
    lines = render(COLUMNS, rows, width)
    assert len(lines) == len(rows) + 1  # one line per row, never wrapped
    # the columns always shown, each at the least it may be cut to, fit: then every line does
    natural = [max([len(c.name)] + [len(r[i]) for r in rows]) for i, c in enumerate(COLUMNS)]
    least = sum(min(n, max(c.least, len(c.name))) if c.least else min(n, c.most or n)
                for n, c in zip(natural, COLUMNS, strict=True) if c.priority == 0)
    if least + 2 * 4 <= width:
        assert all(len(line) <= width for line in lines), lines
    for _, w in layout(COLUMNS, rows, width):
        assert w > 0


def test_a_long_id_is_cut_with_an_ellipsis_and_optional_columns_go_first():
    long_id = "x" * 64
    rows = [(long_id, "a title", "success", "in 4 min", "3 min ago", "ops", "2")]
    at_80 = render(COLUMNS, rows, 80)
    cell = at_80[1].split()[0]
    assert cell.endswith("…") and len(cell) >= 12 and len(at_80[1]) <= 80
    assert at_80[0].split()[:2] == ["id", "title"]  # room left for an optional column
    narrow = render(COLUMNS, rows, 60)
    assert "title" not in narrow[0] and "tags" not in narrow[0]
    assert all(len(line) <= 60 for line in narrow)
    wide = render(COLUMNS, rows, 60, wide=True)
    assert long_id in wide[1] and "tags" in wide[0]


def test_relative_times_and_spans():
    assert relative(NOW + 4 * 60 + 30, NOW) == "in 4 min"
    assert relative(NOW - 3 * 60, NOW) == "3 min ago"
    assert relative(NOW + 2 * 3600 + 5 * 60, NOW) == "in 2 h 5 min"
    assert relative(NOW - 3 * 86400 - 7200, NOW) == "3 days 2 h ago"
    assert relative(None, NOW) == "—" and relative(NOW, NOW) == "now"
    assert span(45) == "45 s" and span(86400) == "1 day" and span(10 * 86400) == "10 days"


def test_absolute_times_name_their_zone():
    riga = ZoneInfo("Europe/Riga")
    assert absolute(NOW, riga) == "2026-11-23 12:00 EET"
    assert absolute("2026-07-01T09:00:00+00:00", riga) == "2026-07-01 12:00 EEST"


def test_schedules_in_words():
    assert words("0 2 * * *") == "every day at 02:00"
    assert words("5 6 * * 1-5") == "on weekdays (Monday to Friday) at 06:05"
    assert words("*/15 8-18 * * 1-5") == ("every 15 minutes from 08:00 to 18:59 on weekdays"
                                          " (Monday to Friday)")
    assert words("0 7 * * 1") == "on Mondays at 07:00"
    assert words("30 * * * *") == "every hour at :30"
    assert words("0 */6 * * *") == "every 6 hours at :00"
    assert words("@daily") == "every day at midnight" and words("@every 90m") == "every 90m"
    assert words("0 9 1 * *") == "0 9 1 * *"  # not a common shape: the expression itself


cell = st.one_of(st.text(st.characters(min_codepoint=9, max_codepoint=0x2026), max_size=40),
                 st.none(), st.integers(-5, 500))


@given(st.lists(st.tuples(*[cell] * len(COLUMNS)), min_size=0, max_size=8),
       st.integers(min_value=20, max_value=250), st.booleans())
def test_a_table_without_colour_is_the_coloured_one_unpainted(rows, width, wide):
    """Without colour render() writes each row in one %-format, cutting only the columns
    narrower than their longest cell (issue 27); with a colour that paints nothing it pads and
    cuts cell by cell. Both give the same lines: spaces, tabs and newlines, None and numbers,
    right-aligned and last columns, any width."""
    assert render(COLUMNS, rows, width, wide) == render(COLUMNS, rows, width, wide,
                                                        lambda name, padded: padded)


def test_every_width_cuts_alike_without_colour():
    """Each width from 20 to 130 columns over one table: every amount a column is cut by."""
    rows = [("backup-postgres-nightly", "Nightly PostgreSQL dump", "failed", "in 4 min",
             "3 min ago", "ops, nightly", "12"),
            ("x", None, "never run", "—", "never", "", 0),
            ("a\tb", "two\nlines", "success", "due 6 min ago, not run", "1 h 6 min ago",
             "t" * 30, "")]
    for width in range(20, 131):
        for wide in (False, True):
            assert render(COLUMNS, rows, width, wide) == render(
                COLUMNS, rows, width, wide, lambda name, padded: padded), width
