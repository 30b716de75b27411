"""Round 10 (kernel logs): the fast paths against the code they replace.

- `kernel_log._syslog_times_by_run` works out its runs' first rows in Python (`_py_syslog_times`, up to
  `RUN_ROWS` runs): compared with `_syslog_times_rows` over every row (the reference the runs stand for) and
  with the polars runs (RUN_ROWS = 0), on seeded random frames with month wraps, unknown and non-ASCII month
  names, invalid dates and times, missing values and other styles.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

import polars as pl
import pytest

from parsers import kernel_log
from parsers.base import FileContext

UTC_US = pl.Datetime("us", "UTC")

_MONTHS = ["Jan", "Feb", "Mar", "Nov", "Dec", "dec", "Sept", "Foo", "Mär", None]
_HMS = ["00:00:00", "12:34:56", "23:59:59", "24:00:00", "12:00:60", "1:2:3", "99:99:99", "ab:cd:ef", None]
_STYLES = ["syslog", "syslog", "syslog", "dmesg_reltime", "dmesg_raw", None]


def _frame(rng: random.Random, n_runs: int, odd: float, ascii_only: bool) -> pl.DataFrame:
    """Rows in runs of 1-11 alike; `odd`: the share of runs whose time of day is not a plain one."""
    names = [m for m in _MONTHS if m is None or m.isascii()] if ascii_only else _MONTHS
    rows = []
    month = rng.randrange(12)
    for _ in range(n_runs):
        style = rng.choice(_STYLES)
        if rng.random() < 0.7:
            mon = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"][month]
            if rng.random() < 0.05:
                month = (month + rng.choice([1, 1, 1, 11])) % 12  # (forward, or a wrap backwards)
        else:
            mon = rng.choice(names)
        day = rng.choice([1, 2, 15, 28, 29, 30, 31, None])
        hms = f"{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}"
        if rng.random() < odd:
            hms = rng.choice(_HMS)
        rows += [(style, mon, day, hms)] * rng.randrange(1, 12)
    n = len(rows)
    return pl.DataFrame(
        [
            pl.Series("line", range(1, n + 1), dtype=pl.Int64),
            pl.Series("style", [r[0] for r in rows], dtype=pl.String),
            pl.Series("ts", [None] * n, dtype=UTC_US),
            pl.Series("ts_quality", ["none" if r[0] else None for r in rows], dtype=pl.String),
            pl.Series("uptime_s", [None] * n, dtype=pl.Float64),
            pl.Series("mon_raw", [r[1] for r in rows], dtype=pl.String),
            pl.Series("day", [r[2] for r in rows], dtype=pl.Int32),
            pl.Series("hms", [r[3] for r in rows], dtype=pl.String),
        ]
    )


_CTXS = [
    FileContext(path="n/syslog", node="n", year_hint=2026),
    FileContext(path="n/syslog", node="n", year_hint=None, collected_at=datetime(2026, 3, 2, tzinfo=UTC)),
    FileContext(path="n/syslog", node="n", year_hint=2025, collected_at=datetime(2026, 3, 2, tzinfo=UTC)),
    FileContext(path="n/syslog", node="n"),
    FileContext(path="n/syslog", node="n", year_hint=9999),
]


@pytest.mark.parametrize("seed", range(40))
def test_syslog_times_by_run_equals_rows(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    odd = [0.0, 0.0, 0.002, 0.2][seed % 4]
    out = _frame(rng, rng.choice([300, 1200, 1600, 2500]), odd, seed % 3 != 2)
    if seed % 5 == 0:  # (every row a known month: the calendar path)
        known = pl.col("mon_raw").fill_null("Jan").replace({"Foo": "Feb", "Mär": "Mar"})
        out = out.with_columns(mon_raw=known)
    ctx = _CTXS[seed % len(_CTXS)]
    ref = kernel_log._syslog_times_rows(out, ctx)
    got = kernel_log._syslog_times_by_run(out, ctx)
    monkeypatch.setattr(kernel_log, "RUN_ROWS", 0)
    polars_runs = kernel_log._syslog_times_by_run(out, ctx)
    if got is None:
        assert polars_runs is None
        return
    for other in (got, polars_runs):
        assert other[1] == ref[1]
        assert other[0].equals(ref[0]), seed
