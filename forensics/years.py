"""Year reconciliation: year-less times (syslog, PyTorch c10 `MMDD`) moved to the year the bundle's dated lines say.

Parsers give year-less lines the year of FileContext.year_hint (the collection time: newest file mtime,
or `--year`). File mtimes lie (copied bundles, simulators, restored backups), so after ingest each
file's `year_inferred` rows are compared with the rows of the whole bundle that carry their own year
(ISO/offset times, `dmesg -T`, nvidia-smi timestamps): when shifting the file by whole years brings its
median time closer to the dated rows' median by more than half a year, the file is shifted. The
shift is per file, so a December→January roll inside a file is kept.
"""

from __future__ import annotations

import polars as pl

DATED = ("exact", "local_assumed_utc", "zone_inferred", "boot_anchored")
"""ts_quality values whose year came from the line itself."""
HALF_YEAR_US = 183 * 86400 * 1_000_000
TABLES = ("events", "steps", "gpu_samples")


def _empty(df: pl.DataFrame | pl.LazyFrame | None) -> bool:
    # a LazyFrame (a table too large to hold, see forensics.ingest) is never taken for empty
    return df is None or (isinstance(df, pl.DataFrame) and df.height == 0) or "ts_quality" not in df.collect_schema()


def reconcile(tables: dict[str, pl.DataFrame]) -> tuple[dict[str, pl.DataFrame], list[str]]:
    """Shift year-inferred files by whole years towards the bundle's dated rows; return notes.

    A table may be a LazyFrame (the ingest's tables too large to hold): it is scanned for the two small
    aggregates and returned lazy, with the shift as an expression.
    """
    dated = [
        tables[t].lazy().filter(pl.col("ts_quality").is_in(DATED) & pl.col("ts").is_not_null()).select("ts")
        .collect().get_column("ts")
        for t in TABLES
        if not _empty(tables.get(t))
    ]
    dated = [d for d in dated if len(d)]
    if not dated:
        return tables, []
    # (one contiguous column: the dated rows come in thousands of chunks, one a part of a large table, whose
    # median took ~0.7 s of a 1,000-node bundle's 18 M rows, one that took ~0.1 s)
    ref = pl.concat(dated, rechunk=True).cast(pl.Int64).median()
    if ref is None:
        return tables, []
    notes: list[str] = []
    out = dict(tables)
    for t in TABLES:
        df = tables.get(t)
        if _empty(df):
            continue
        inferred = pl.col("ts_quality") == "year_inferred"
        per_file = (
            df.lazy()
            .filter(inferred & pl.col("ts").is_not_null())
            .group_by("file")
            .agg(med=pl.col("ts").cast(pl.Int64).median())
            .collect()
        )
        shifts = {}
        for file, med in per_file.iter_rows():
            best_k, best_d = 0, abs(med - ref)
            for k in (-2, -1, 1, 2):
                d = abs(med + k * 365.25 * 86400 * 1e6 - ref)
                if d < best_d - HALF_YEAR_US:
                    best_k, best_d = k, d
            if best_k:
                shifts[file] = best_k
        if not shifts:
            continue
        k_col = pl.col("file").replace_strict(shifts, default=0, return_dtype=pl.Int32)
        out[t] = df.with_columns(
            ts=pl.when(inferred & (k_col != 0)).then(pl.col("ts").dt.offset_by(pl.format("{}y", k_col))).otherwise(pl.col("ts"))
        )
        for file, k in sorted(shifts.items()):
            notes.append(f"{file}: year-less times moved {k:+d} year(s) to match the bundle's dated lines ({t})")
    return out, notes
