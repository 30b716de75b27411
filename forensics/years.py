"""Year reconciliation: year-less times (syslog, PyTorch c10 `MMDD`) moved to the year the bundle's dated lines say.

Parsers give year-less lines the year of FileContext.year_hint (the collection time: newest file mtime,
or `--year`). File mtimes lie (copied bundles, simulators, restored backups), so after ingest each
file's `year_inferred` rows are compared with the rows of the whole bundle that carry their own year
(ISO/offset times, `dmesg -T`, nvidia-smi timestamps): when shifting the file by whole years brings its
median time closer to the dated rows' median by more than half a year, the file is shifted. The
shift is per file, so a December→January roll inside a file is kept. The dated rows' median is bounded to
its middle hours in one scan, and read exactly (a second scan) only for a file so near where a shift takes
over that those hours do not decide.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import polars as pl

DATED = ("exact", "local_assumed_utc", "zone_inferred", "boot_anchored")
"""ts_quality values whose year came from the line itself."""
HALF_YEAR_US = 183 * 86400 * 1_000_000
TABLES = ("events", "steps", "gpu_samples")


def _empty(df: pl.DataFrame | pl.LazyFrame | None) -> bool:
    # a LazyFrame (a table too large to hold, see forensics.ingest) is never taken for empty
    return df is None or (isinstance(df, pl.DataFrame) and df.height == 0) or "ts_quality" not in df.collect_schema()


class Known(NamedTuple):
    """What is known of a table's rows without reading them (a large table's parts, from what their writers
    counted: `forensics.ingest.PartStats`), so that `reconcile` scans less of them."""

    inferred: pl.Expr | None
    """A filter that keeps every row with a year-inferred time (it may keep others); None: no row has one."""
    dated: pl.DataFrame
    """The rows with a time of its own year (`DATED`) counted by hour: `b` (t // BUCKET) and `n`, Int64."""


def reconcile(
    tables: dict[str, pl.DataFrame], known: Mapping[str, Known] | None = None
) -> tuple[dict[str, pl.DataFrame], list[str]]:
    """Shift year-inferred files by whole years towards the bundle's dated rows; return notes.

    A table may be a LazyFrame (the ingest's tables too large to hold): it is scanned for the small aggregates
    and returned lazy, with the shift as an expression. Nothing is scanned for the dated rows when no row is
    year-inferred. `known`: what is known of some tables' rows (`Known`); their scans for the year-inferred
    rows keep only the rows that may be, and their dated rows are counted already (the 6-hour bundle's 18 M
    rows in 400 parts: two scans, ~0.45 s of the parent's time after the workers).
    """
    known = known or {}
    inferred = pl.col("ts_quality") == "year_inferred"
    per_file = {}
    for t in TABLES:
        if _empty(tables.get(t)):
            continue
        lf = tables[t].lazy()
        k = known.get(t)
        if k is not None and k.inferred is None:
            per_file[t] = pl.DataFrame(schema={"file": pl.String, "med": pl.Float64})
            continue
        if k is not None:
            lf = lf.filter(k.inferred)
        per_file[t] = (
            lf.filter(inferred & pl.col("ts").is_not_null())
            .group_by("file")
            .agg(med=pl.col("ts").cast(pl.Int64).median())
            .collect()
        )
    if not any(df.height for df in per_file.values()):
        return tables, []
    dated = [
        tables[t].lazy().filter(pl.col("ts_quality").is_in(DATED) & pl.col("ts").is_not_null())
        .select(t=pl.col("ts").cast(pl.Int64))
        for t in per_file
    ]
    counts = _bucket_counts(
        [d for t, d in zip(per_file, dated, strict=True) if t not in known],
        [known[t].dated for t in per_file if t in known],
    )
    bounds = _median_bounds(counts)
    if bounds is None:
        return tables, []
    # (the median is needed only where a file's shift is not the same for every value it may take within the
    # bounds that one scan gives: its one or two middle hours)
    ref: float | None = None
    notes: list[str] = []
    out = dict(tables)
    for t, files in per_file.items():
        shifts = {}
        for file, med in files.iter_rows():
            if _same_shift(med, *bounds):
                best_k = _shift(med, bounds[0])
            else:
                if ref is None:
                    ref = median_of(dated, counts)
                    assert ref is not None  # (the bounds came from the same counts)
                best_k = _shift(med, ref)
            if best_k:
                shifts[file] = best_k
        if not shifts:
            continue
        k_col = pl.col("file").replace_strict(shifts, default=0, return_dtype=pl.Int32)
        # (`concat_str`, not `pl.format`: polars 2.1's panics on a column holding an empty chunk; see
        # `parsers._common.format_str`, which this module does not import: the parent of an ingest does not)
        years = pl.concat_str([k_col, pl.lit("y")])
        out[t] = tables[t].with_columns(
            ts=pl.when(inferred & (k_col != 0)).then(pl.col("ts").dt.offset_by(years)).otherwise(pl.col("ts"))
        )
        for file, k in sorted(shifts.items()):
            notes.append(f"{file}: year-less times moved {k:+d} year(s) to match the bundle's dated lines ({t})")
    return out, notes


BUCKET = 3600 * 1_000_000
"""`median_of`'s buckets of values (an hour of microseconds)."""


YEAR_US = 365.25 * 86400 * 1e6
SHIFTS = (0, -2, -1, 1, 2)
"""The whole years a file may move by (0 first: kept unless a shift is closer by more than half a year)."""


def _shift(med: float, ref: float) -> int:
    """How many years to move a file whose year-inferred times have median `med`, the dated rows' being
    `ref`: the shift that brings it closest, if closer by more than half a year than the one before it."""
    best_k = 0
    for k in SHIFTS[1:]:
        if _closer(med, k, best_k, ref):
            best_k = k
    return best_k


def _same_shift(med: float, lo: float, hi: float) -> bool:
    """Whether `_shift(med, ref)` is the same for every `ref` in [lo, hi]: `_shift` decides by comparisons
    `d_k < d_j - HALF_YEAR_US` (d_k = |med + k years - ref|) alone, and each `d_j - d_k` is monotone in `ref`
    (the difference of two distances to fixed points), so each comparison holds throughout the interval or
    nowhere in it when it holds at both ends or at neither."""
    for j in SHIFTS:
        for k in SHIFTS:
            if j != k and _closer(med, k, j, lo) != _closer(med, k, j, hi):
                return False
    return True


def _closer(med: float, k: int, j: int, ref: float) -> bool:
    """Whether moving by `k` years brings `med` closer to `ref` than moving by `j` by more than half a year
    (the one comparison `_shift` decides by)."""
    return abs(med + k * YEAR_US - ref) < abs(med + j * YEAR_US - ref) - HALF_YEAR_US


def _bucket_counts(columns: list[pl.LazyFrame], counted: list[pl.DataFrame] | tuple[()] = ()) -> pl.DataFrame:
    """The values of the Int64 column `t` of all `columns` counted by bucket (`b` = t // BUCKET, `n`), sorted:
    one scan; with the counts `counted` (of other values, the same shape) added."""
    bucket = pl.col("t") // BUCKET
    parts = [c.group_by(b=bucket).agg(n=pl.len().cast(pl.Int64)) for c in columns]
    parts += [c.lazy().select(pl.col("b").cast(pl.Int64), pl.col("n").cast(pl.Int64)) for c in counted]
    if not parts:
        return pl.DataFrame(schema={"b": pl.Int64, "n": pl.Int64})
    return pl.concat(parts).group_by("b").agg(pl.col("n").sum()).sort("b").collect()


def dated_counts(df: pl.DataFrame | pl.LazyFrame) -> pl.LazyFrame:
    """`Known.dated` of the rows of `df` (its `ts` and `ts_quality`), as a query."""
    return (
        df.lazy()
        .filter(pl.col("ts_quality").is_in(DATED) & pl.col("ts").is_not_null())
        .group_by(b=pl.col("ts").cast(pl.Int64) // BUCKET)
        .agg(n=pl.len().cast(pl.Int64))
    )


def _middle(counts: pl.DataFrame) -> tuple[int, int, int, int, int] | None:
    """The median's middle ranks (0-based; the same when the values are odd in number), the buckets holding
    them and the values below the first of those buckets; None when there is no value."""
    total = int(counts.get_column("n").sum())
    if total == 0:
        return None
    lo, hi = (total - 1) // 2, total // 2
    ends = counts.get_column("n").cum_sum()
    i, j = int(ends.search_sorted(lo, "right")), int(ends.search_sorted(hi, "right"))
    b = counts.get_column("b")
    return lo, hi, int(b[i]), int(b[j]), int(ends[i - 1]) if i else 0


def _median_bounds(counts: pl.DataFrame) -> tuple[float, float] | None:
    """[lo, hi] holding the median of the counted values, from their buckets alone (`_bucket_counts`)."""
    mid = _middle(counts)
    if mid is None:
        return None
    _, _, bi, bj, _ = mid
    return (bi + bj) * BUCKET / 2, ((bi + 1) * BUCKET - 1 + (bj + 1) * BUCKET - 1) / 2


def median_of(columns: list[pl.LazyFrame], counts: pl.DataFrame | None = None) -> float | None:
    """The median of the Int64 column `t` of all `columns` together (`pl.Series.median` of their
    concatenation; None when they hold no value), without holding them all: the values are counted by bucket
    (`t // BUCKET`) in one scan (or `counts`, `_bucket_counts` of the same columns), and the one or two
    buckets holding the middle ranks read in a second.

    The dated rows of a 1,000-node bundle are 18 M times: held, concatenated and their median taken, that
    was ~1.2 s of the parent's time after the workers had finished, most of it page faults (~110k) for
    three fresh copies of 146 MB. The second scan (~0.3 s there) is skipped by `reconcile` where the bounds
    of the first decide every file (`_same_shift`)."""
    mid = _middle(_bucket_counts(columns) if counts is None else counts)
    if mid is None:
        return None
    lo, hi, bi, bj, below = mid
    bucket = pl.col("t") // BUCKET
    held = (
        pl.concat([c.filter(bucket.is_in([bi, bj])).select("t") for c in columns])
        .collect()
        .get_column("t")
        .sort()
    )
    return pl.Series([held[lo - below], held[hi - below]], dtype=pl.Int64).median()
