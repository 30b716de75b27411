# ruff: noqa: E501, N806  (verbatim)
"""hf10's references: the step_log functions it changed, verbatim from the commit before (patched into
`parsers.step_log` by tests/parsers/test_hf10.py)."""

from __future__ import annotations

import polars as pl

from parsers.step_log import (  # noqa: F401
    _PROGRESS,
    _ROW_COLS,
    _TIMER,
    _grouped,
    _kept,
    _sort_frags,
    _sort_rows,
    _with_timers,
)


def _rows_of_singles(singles: pl.DataFrame, vals: list[str]) -> pl.DataFrame:
    """Fragments that make a row each (with their `group`, `orphan` and `timers`) as rows: `vals` the value
    columns other than `rank`, timers without null entries, no timers an empty list."""
    timers = pl.col("timers")
    # (`list.drop_nulls` is slow on lists of structs: taken only when some list holds a null timer; a list
    # without one it leaves as it is, so the kept rows decide)
    tm = singles.get_column("timers")
    empty = singles.select((timers.is_null() | (timers.list.len() == 0)).sum()).item()
    if tm.explode().null_count() > empty:
        timers = timers.list.drop_nulls()
    return singles.select(
        "group",
        "line",
        "key",
        pl.col("orphan").alias("orphan_group"),
        "rank",
        *vals,
        timers.fill_null(pl.lit([], dtype=pl.List(_TIMER))),
    )


def _rows_gathered(frags: pl.DataFrame, value_cols: list[str]) -> pl.DataFrame:
    """`_rows` on many fragments: the order and the groups worked out on the few columns they read, then only
    the fragments that make rows gathered from the wide frame (a row of a single fragment without progress
    of its own, an orphan, is left out: most of the one-line timers of other ranks in DeepSpeed logs), in the
    order the sorts gave them (same rows, same order)."""
    narrow = frags.select(
        "key", "line", "seg", "kind", "step", "anchor", "standalone", "attach_line", *_PROGRESS
    ).with_row_index("_i")
    key = pl.col("key")
    one_run = narrow.height > 0 and bool(
        narrow.select(key.is_not_null().all() & (key == key.first()).all()).item()
    )
    f = _grouped(_sort_frags(narrow).lazy(), over_key=False, one_run=one_run)
    # a group is a run of fragments; one of a single fragment is that fragment as it is (what the aggregation
    # gives it), so only the others are sorted and aggregated
    start = pl.col("_start")
    f = f.select(
        "_i",
        "group",
        "orphan",
        _single=start & start.shift(-1).fill_null(True),
        _keep=~pl.col("orphan") | pl.any_horizontal(pl.col(c).is_not_null() for c in _PROGRESS),
    ).collect()
    single = f.get_column("_single")
    n_single = int(single.sum())
    n = f.height
    if n_single == 0:
        multi, kept = f, f.clear()
    else:
        kept = f.filter(pl.col("_single") & pl.col("_keep"))
        multi = f.filter(~pl.col("_single")) if n_single < n else f.clear()
    # (a column null in every fragment is null in every row, `drop_nulls().first()` of a group too: such
    # columns are left out of the gathers, aggregations and sorts and put back as nulls at the end)
    nulls = {
        c: t for c, t in frags.schema.items() if c not in _ROW_COLS and frags.get_column(c).null_count() == n
    }
    slim = frags.drop(list(nulls)) if nulls else frags
    vals = [c for c in value_cols if c not in nulls and c != "rank"]
    rows = []
    if n_single:
        singles = _with_timers(slim[kept.get_column("_i")].with_columns(kept.select("group", "orphan")))
        rows.append(_rows_of_singles(singles, vals))
    if n_single < n:
        m = _with_timers(slim[multi.get_column("_i")].with_columns(multi.select("group", "orphan")))
        rows.append(_group_rows(m, ["rank", *vals]).filter(_kept("orphan_group")))
    if n_single == n:  # (in (key, line) order already: one chunk, as the sort would give it)
        out = rows[0].rechunk()
    else:
        out = _sort_rows(rows[0] if len(rows) == 1 else pl.concat(rows))
    if not nulls:
        return out
    return out.select(
        "group",
        "line",
        "key",
        "orphan_group",
        "rank",
        *(pl.lit(None, dtype=nulls[c]).alias(c) if c in nulls else c for c in value_cols if c != "rank"),
        "timers",
    )


def _group_rows(f: pl.DataFrame, value_cols: list[str]) -> pl.DataFrame:
    """One row per group of fragments (groups of two or more; see `_rows`)."""
    if "orphan_group" not in f.columns:
        f = f.with_columns(orphan_group=pl.col("orphan").all().over("group"))
    return (
        f.rechunk()
        .sort("group", "prio", "line", "seg", maintain_order=True)
        .group_by("group", maintain_order=True)
        .agg(
            pl.col("line").first(),
            pl.col("key").first(),
            pl.col("orphan_group").first(),
            pl.col("rank").first(),  # the best fragment's own rank: a DeepSpeed `[Rank 0]` beside it may be another writer
            *[pl.col(c).drop_nulls().first() for c in value_cols if c != "rank"],
            timers=pl.col("timers").explode().drop_nulls(),
        )
    )
