"""`parsers._common.format_str`: `pl.format` as a `concat_str`, which polars 2.1's `format` is not on a column
holding an empty chunk (pola-rs/polars#25187: `assertion failed: i < self.len()`, a PanicException)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from parsers import nccl
from parsers._common import format_str, normalize_bus_id
from parsers.base import FileContext, lines_from_bytes

FIX = Path(__file__).parent.parent / "fixtures"


def _with_empty_chunks(a: str, b: str | None, c: str) -> pl.Series:
    """`[a, b, c]` in chunks of 2, 0 and 1 rows (a concatenation of files, filtered)."""
    parts = [pl.Series("t", x, dtype=pl.String) for x in ([a, b], ["drop"], [c], ["drop"])]
    s = pl.concat(parts, rechunk=False)
    s = s.filter(s.fill_null("") != "drop")
    assert [len(c) for c in s.get_chunks()] == [2, 0, 1, 0]
    return s


@pytest.mark.parametrize(
    ("template", "args"),
    [
        ("{}.{}", (pl.col("t"), pl.col("n") // 1000)),
        ("x{}y", (pl.col("n"),)),
        ("{}", (pl.col("t"),)),
        ("{}:00", (pl.col("t").str.slice(0, 2),)),
        ("{} ranks at operation {}", (pl.col("n"), pl.col("t"))),
    ],
)
def test_format_str_is_format(template: str, args: tuple[pl.Expr, ...]) -> None:
    df = pl.DataFrame({"t": ["a1", None, "b", ""], "n": [12020, 5, None, -3]})
    assert df.select(format_str(template, *args)).to_series().to_list() == (
        df.select(pl.format(template, *args)).to_series().to_list()
    )


def test_format_str_reads_a_column_with_empty_chunks() -> None:
    df = _with_empty_chunks("12020", None, "3").to_frame()
    assert df.select(format_str("<{}>", pl.col("t"))).to_series().to_list() == ["<12020>", None, "<3>"]
    bus = _with_empty_chunks("00000000:9B:00.0", None, "3b:00.0").to_frame()  # (as every parser normalises)
    assert bus.select(normalize_bus_id(pl.col("t"))).to_series().to_list() == ["0000:9b:00.0", None, "0000:3b:00.0"]


def test_format_str_refuses_other_templates() -> None:
    with pytest.raises(ValueError, match="needs 2 argument"):
        format_str("{}.{}", pl.col("a"))
    with pytest.raises(ValueError, match="no other brace"):
        format_str("{0}", pl.col("a"))


def test_the_family_grammar_reads_lines_in_several_chunks() -> None:
    """Two NCCL logs' lines concatenated as they were read (chunks of each file and of the blank line
    between): the grammar's `cudaDriverVersion` value (a `format` of the filtered rows) once panicked."""
    logs = [
        FIX / "nccl" / "nccl_2.13.4_info_debug_subsys_all_alloc.log",
        FIX / "nccl" / "nccl_2.19_srun_label_init_start_complete_commid_ib_error_peer.log",
    ]
    parts = [lines_from_bytes(p.read_bytes()) for p in logs]
    lines = pl.concat([parts[0], pl.Series([""]), parts[1], pl.Series([""])], rechunk=False)
    assert lines.n_chunks() > 1
    ctx = FileContext(path="x", node="n", year_hint=2024)
    got = nccl.parse_family(lines, ctx)
    want = nccl.parse_family(lines.rechunk(), ctx)
    assert (got.parsed, got.unrecognized) == (want.parsed, want.unrecognized)
    assert {k: v.height for k, v in got.tables.items()} == {k: v.height for k, v in want.tables.items()}
