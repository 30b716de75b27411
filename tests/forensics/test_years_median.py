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


def _shift_by_the_median(med: float, ref: float) -> int:
    """The shift as `reconcile` decided it from the exact median before it looked at bounds first."""
    best_k, best_d = 0, abs(med - ref)
    for k in (-2, -1, 1, 2):
        d = abs(med + k * 365.25 * 86400 * 1e6 - ref)
        if d < best_d - years.HALF_YEAR_US:
            best_k, best_d = k, d
    return best_k


_DAY = 86_400 * 1_000_000
_BASE = 1_700_000_000_000_000
_NEAR_EDGES = st.one_of(
    st.integers(-3 * 366 * _DAY, 3 * 366 * _DAY),
    # (a file's median within an hour or two of where a shift takes over: (k years + half a year) / 2 away)
    st.sampled_from([int((k * 365.25 * _DAY + years.HALF_YEAR_US) / 2) for k in (1, 2, 3)]).flatmap(
        lambda edge: st.integers(-2 * _HOUR, 2 * _HOUR).map(lambda e: edge + e)
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(-5 * _HOUR, 5 * _HOUR), min_size=1, max_size=30),
    st.lists(st.tuples(_NEAR_EDGES, st.booleans()), min_size=1, max_size=4),
)
def test_reconcile_shifts_as_the_exact_median_does(
    dated_at: list[int], files: list[tuple[int, bool]]
) -> None:
    """The shifts come from the bounds of the median's middle hours where those decide every file, else from
    the median itself: the same as deciding from the exact median everywhere."""
    dated = pl.DataFrame(
        {"ts": [_BASE + d for d in dated_at], "ts_quality": "exact", "file": "dmesg-T.log"},
        schema={"ts": pl.Int64, "ts_quality": pl.String, "file": pl.String},
    )
    ref = dated.get_column("ts").median()
    rows = []
    for i, (offset, sign) in enumerate(files):
        med = ref + (offset if sign else -offset)
        rows.append({"ts": int(med), "ts_quality": "year_inferred", "file": f"syslog-{i}"})
    yearless = pl.DataFrame(rows, schema=dated.schema)
    events = pl.concat([dated, yearless]).with_columns(pl.col("ts").cast(pl.Datetime("us", "UTC")))
    _, notes = years.reconcile({"events": events})
    want = []
    for r in sorted(rows, key=lambda r: r["file"]):
        k = _shift_by_the_median(float(r["ts"]), ref)
        if k:
            moved = f"year-less times moved {k:+d} year(s) to match the bundle's dated lines (events)"
            want.append(f"{r['file']}: {moved}")
    assert notes == want


def test_the_second_scan_only_where_the_bounds_do_not_decide(monkeypatch) -> None:  # noqa: ANN001
    dated = _table("exact", [datetime(2025, 3, d, 12, tzinfo=UTC) for d in range(1, 28)], "dmesg-T.log")
    far = _table("year_inferred", [datetime(2026, 3, 5, tzinfo=UTC)], "syslog")
    calls = []
    real = years.median_of

    def counted(columns, counts=None):  # noqa: ANN001, ANN202
        calls.append(1)
        return real(columns, counts)

    monkeypatch.setattr(years, "median_of", counted)
    _, notes = years.reconcile({"events": pl.concat([dated, far])})
    assert len(notes) == 1 and calls == []  # (a year away: its middle hours decide)
    # a file whose median lies ~30 minutes past (a year + half a year) / 2 after the dated rows' median (on
    # the hour: its middle hour's first instant), where moving it back a year takes over: within the bounds
    # (that hour), the shift changes
    ref = dated.get_column("ts").cast(pl.Int64).median()
    at = int(ref + (365.25 * _DAY + years.HALF_YEAR_US) / 2 + 30 * 60 * 1_000_000)
    edge = _table("year_inferred", [datetime.fromtimestamp(at / 1e6, UTC)], "edge.log")
    _, notes = years.reconcile({"events": pl.concat([dated, far, edge])})
    assert calls == [1]
    assert notes == [
        "edge.log: year-less times moved -1 year(s) to match the bundle's dated lines (events)",
        "syslog: year-less times moved -1 year(s) to match the bundle's dated lines (events)",
    ]
