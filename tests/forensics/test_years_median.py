"""`years.median_of` (counted by bucket, the middle buckets read) is the median of the columns
concatenated, and `reconcile` asks for it only when some row is year-inferred."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics import years

_HOUR = years.BUCKET
_VALUES = st.one_of(
    st.integers(-(2**40), 2**40),  # (around the epoch, both signs)
    st.integers(1_700_000_000_000_000 - 3 * _HOUR, 1_700_000_000_000_000 + 3 * _HOUR),  # (a few buckets)
    st.sampled_from([0, _HOUR - 1, _HOUR, -1, -_HOUR, 1_744_127_466_301_000]),  # (bucket edges, a repeat)
)


@settings(max_examples=300)
@given(st.lists(st.lists(_VALUES, max_size=40), min_size=1, max_size=5))
def test_median_of_is_the_median_of_the_concatenation(columns: list[list[int]]) -> None:
    frames = [pl.LazyFrame({"t": c}, schema={"t": pl.Int64}) for c in columns]
    want = pl.concat([pl.Series(c, dtype=pl.Int64) for c in columns]).median()
    assert years.median_of(frames) == want


def _table(quality: str, ts: list[datetime], file: str) -> pl.DataFrame:
    return pl.DataFrame(
        {"ts": ts, "ts_quality": [quality] * len(ts), "file": [file] * len(ts)},
        schema={"ts": pl.Datetime("us", "UTC"), "ts_quality": pl.String, "file": pl.String},
    )


def test_reconcile_shifts_a_year_less_file_and_scans_nothing_dated_without_one(monkeypatch) -> None:  # noqa: ANN001
    dated = _table("exact", [datetime(2025, 3, d, tzinfo=UTC) for d in range(1, 28)], "dmesg-T.log")
    yearless = _table("year_inferred", [datetime(2026, 3, 5, tzinfo=UTC)], "syslog")
    tables, notes = years.reconcile({"events": pl.concat([dated, yearless]), "steps": dated.lazy()})
    assert notes == ["syslog: year-less times moved -1 year(s) to match the bundle's dated lines (events)"]
    shifted = tables["events"].filter(pl.col("file") == "syslog").get_column("ts").to_list()
    assert shifted == [datetime(2025, 3, 5, tzinfo=UTC)]

    def never(columns: list[pl.LazyFrame]) -> float | None:
        raise AssertionError("the dated rows were scanned with no year-inferred row")

    monkeypatch.setattr(years, "median_of", never)
    tables2, notes2 = years.reconcile({"events": dated, "steps": dated.lazy()})
    assert notes2 == [] and tables2["events"] is dated
