"""step_log's Megatron lane reads its `(min, max)` timer entries by cutting them at `: (` (`_meg_entries`):
the same groups as `_MEG_E`'s capture on each line (rank `_NO_SRUN` for an entry without srun envelope), on
entry lines with and without the envelope and their mutations."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import step_log as S  # noqa: N812

_GOOD = (
    " 3:     forward-backward ................................: (3464.57, 3542.27)",
    "15:     optimizer-copy-main-to-model-params .............: (270.60, 275.77)",
    "0:  a/b-c ..: (1, 2)",
    "    forward-backward ................................: (3464.57, 3542.27)",
    " a ..: (1, 2)",
)
_ODD = (
    "3: a ..: (1, 2)",
    "3:  a .: (1, 2)",
    "3:  a ..: (1., 2)",
    "3:  a.b ..: (1, 2)",
    "\u2003 3:  a ..: (1, 2)",
    "\u00e93:  a ..: (1, 2)",
    "3:  \u00e9 ..: (1, 2)",
    "3:  a ..: (1, 2)x",
    "3:  a ..: (1,  2)",
    "3:  a ..: (1, 2)\n",
    "3:  a ..: (1, 2)\r",
    "3:  a ..: (1, 2): (3, 4)",
    "3:  a ..: ((1, 2)",
    "1234567890:  a ..: (1, 2)",
    "3:  -a ..: (1, 2)",
    "3:   a   ..: (1, 2)",
    "3:  a ..: (1.5e3, 2)",
    "3:  a ..: (.1, 2)",
    "3:  a ..: (1,2)",
    "3:  a: ..: (1, 2)",
    "3:  a (..: (1, 2)",
    "3:\n a ..: (1, 2)",
    "\t3:  a ..: (99999999999999999999, 2)",
    "",
    None,
    "a ..: (1, 2)",
    "\t a ..: (1, 2)",
    "  3 ..: (1, 2)",
    "  a ..: (1, 2) ",
    ":  a ..: (1, 2)",
)


def _want(text: pl.Series) -> pl.DataFrame:
    m = text.str.extract_groups(S._MEG_E).struct.unnest()
    return m.select(
        rank=pl.when(pl.col("2").is_not_null()).then(pl.col("1").cast(pl.Int32).fill_null(S._NO_SRUN)),
        name=pl.col("2"),
        min_ms=pl.col("3").cast(pl.Float64),
        max_ms=pl.col("4").cast(pl.Float64),
    )


def _same(lines: list[str | None]) -> None:
    text = pl.Series("t", lines, dtype=pl.String)
    got = S._meg_entries(text)
    want = _want(text)
    assert got.schema == want.schema
    assert got.equals(want, null_equal=True), [
        (x, a, b) for x, a, b in zip(lines, got.iter_rows(), want.iter_rows(), strict=True) if a != b
    ]


def test_entries_as_the_capture() -> None:
    _same(list(_GOOD + _ODD))


_ALPHABET = " .:()0123456789,ab-_/\u2003\u00e9\t\r\n"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(_GOOD), st.integers(0, 80), st.integers(0, 3), st.text(_ALPHABET, max_size=3)
        )
    )
)
def test_entries_as_the_capture_on_mutations(edits: list[tuple[str, int, int, str]]) -> None:
    """Each line an entry with a span replaced by a few characters (dots, blanks, digits, `:`, `(`...)."""
    lines: list[str | None] = []
    for line, at, cut, put in edits:
        at = min(at, len(line))
        lines.append(line[:at] + put + line[at + cut :])
    _same(lines + list(_GOOD))


_ITER = (
    "31:  [2025-03-16 13:59:00] iteration   327476/  500000 | consumed samples:    335335424 | "
    "elapsed time per iteration (ms): 3725.3 | lm loss: 2.018012E+00 | loss scale: 1.0 |"
)
_ITER_ODD = (
    "\u2003 3: [2025-03-16 13:59:00] iteration 1/ 2 |x",
    "3: [2025-03-16 13:59:00] iteration 1/ 2 |",
    "3: [2025-03-16 13:59:00] iteration 1/ 2 ",
    "3: [2025-03-16 13:59:00] iteration 1/ 2 |a|b[",
    "\r3: [2025-03-16 13:59:00] iteration 1/2 |a\n",
    "3: [2025-03-16 13:59:00] iteration 1/2 |a\r",
    "3: [2025-03-16 13:59:60] iteration 1/2 |a",
    " [2025-03-16 13:59:00] iteration 1/ 2 |a",
    "[2025-03-16 13:59:00] iteration 1/ 2 |",
    "\t[2025-03-16 13:59:00] iteration 1/ 2 |",
    "",
    None,
)


def _same_iterations(lines: list[str | None]) -> None:
    text = pl.Series("t", lines, dtype=pl.String)
    got = S._meg_iterations(text).struct.unnest()
    want = text.str.extract_groups(S._MEG_I).struct.unnest()
    assert got.schema == want.schema
    assert got.equals(want, null_equal=True), [
        (x, a, b) for x, a, b in zip(lines, got.iter_rows(), want.iter_rows(), strict=True) if a != b
    ]


def test_iterations_as_the_capture() -> None:
    _same_iterations([_ITER, *_ITER_ODD])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 140), st.integers(0, 3), st.text(" |[]\r\x1b\n:0123456789/-\u2003", max_size=3)
        )
    )
)
def test_iterations_as_the_capture_on_mutations(edits: list[tuple[int, int, str]]) -> None:
    """Each line an iteration line with a span replaced by a few characters (`|`, `[`, blanks, digits...)."""
    _same_iterations([_ITER[:at] + put + _ITER[at + cut :] for at, cut, put in edits] + [_ITER])
