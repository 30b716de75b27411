# ruff: noqa: E501, N806  (verbatim)
"""hf10's references: the step_log functions it changed, verbatim from the commit before (patched into
`parsers.step_log` by tests/parsers/test_hf10.py)."""

from __future__ import annotations

import polars as pl

from parsers import _step_grammars as g
from parsers.base import FileContext, numbered
from parsers.step_log import (  # noqa: F401
    _LANE_MIN,
    _PROGRESS,
    _ROW_COLS,
    _TIMER,
    UTC_US,
    _Batch,
    _grouped,
    _kept,
    _nulls,
    _own_time,
    _prepare_small,
    _rx,
    _sort_frags,
    _sort_rows,
    _strip_envelopes,
    _with_banner,
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


def _segments(
    lines: pl.Series, ctx: FileContext, batch: _Batch | None = None, numbers: pl.Series | None = None
) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, bool], bool, pl.Expr]:
    """What both preparations start with: the numbered lines, their `\\r` segments (`seg`), which cleaning
    and prefix steps can change any line (`on`), whether ANSI codes are removed from inside lines (`dirty`),
    and the text with them removed (`clean`).

    Cheap checks skip the steps that cannot change any line (same result, fewer passes and collects). The
    literal checks run once over the raw lines: every later step works on a suffix of the raw line (prefixes
    stripped) unless ANSI codes are removed from its middle (`dirty`: then every step runs). The anchored
    prefixes are checked where they are stripped, on the text they are stripped from.
    """
    if numbers is not None:  # (lines of a file with others left out between them, see `_titan_lane`)
        frame = pl.DataFrame({"line": numbers.cast(pl.Int64, strict=False), "text": lines.cast(pl.String)})
    else:
        frame = numbered(lines, ctx) if batch is None else batch.frame
    seg = frame
    if frame.height and bool(frame.get_column("text").str.contains("\r", literal=True).any()):
        # segment numbers exploded with the segments (what a window `int_range().over("line")` gave, cheaper)
        parts = pl.col("text").str.split("\r")
        seg = frame.with_columns(parts, seg=pl.int_ranges(0, parts.list.len(), dtype=pl.Int64))
        seg = seg.explode("text", "seg")
    else:
        seg = seg.with_columns(seg=pl.lit(0, dtype=pl.Int64))
    text = pl.col("text")
    # (the flags read off the lines, not their segments: same bytes in fewer rows; none of the literals holds
    # a `\r`, nor can a match of the unanchored `ANSI_PASTED_RE`, so a line holds one iff one of its segments
    # does)
    flags = frame.select(
        esc=text.str.contains("\x1b", literal=True).any(),
        pasted=text.str.contains(_rx(g.ANSI_PASTED_RE)).any(),
        banner=text.str.contains("global rank", literal=True).any(),
        msg=text.str.contains("[Rank ", literal=True).any(),
        mllog=text.str.contains(":::MLLOG", literal=True).any(),
    ).row(0, named=True)
    dirty = bool(flags["esc"] or flags["pasted"])
    on = {k: bool(v) or dirty for k, v in flags.items()}
    clean = text.str.replace_all(_rx(g.ANSI_RE), "") if flags["esc"] else text
    if dirty:
        pasted = clean.str.contains(_rx(g.ANSI_PASTED_RE))
        clean = pl.when(pasted).then(clean.str.replace_all(_rx(g.ANSI_PASTED_RE), "")).otherwise(clean)
    return frame, seg, on, dirty, clean


def _prepare(
    lines: pl.Series, ctx: FileContext, batch: _Batch | None = None, numbers: pl.Series | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return (physical lines frame, segment frame with cleaned text, stream key, rank, host, own time).

    `batch`: `lines` are the lines of several files (`parse_many`), numbered by `batch.frame`; the stream key
    does not yet hold the file (the caller adds it). `numbers`: the line numbers of `lines` (ascending), when
    they are not `ctx.first_line` onwards."""
    parts = _segments(lines, ctx, batch, numbers)
    if parts[1].height < _LANE_MIN:  # (few segments: few lines, and no long `\r` redraws, as in tqdm logs)
        return _prepare_small(lines, ctx, batch, numbers, parts)
    frame, seg, on, dirty, clean = parts
    text = pl.col("text")
    triage = text.str.contains_any(list(g.TRIAGE_LITERALS)) | text.str.strip_chars_end().str.ends_with(":")
    frame_seg = seg
    seg = seg.with_columns(raw=text, _date=text.str.contains(_rx(g.TRIAGE_DATE_RE)))
    # a dated line is triaged: the literal tests run on the others (all of them when most lines have no date)
    date = seg.get_column("_date")
    undated = (~date).arg_true()
    dots = None
    if undated.len() > seg.height // 2:
        # (`..`, a triage literal, is in most lines of Megatron logs, whose timer entries and arguments hold
        # it: where it is, the other literal tests are spared)
        dots = seg.get_column("text").str.contains("..", literal=True) | date
        if int(dots.sum()) < seg.height // 2:
            dots = None
    if dots is not None:
        rest_i = (~dots).arg_true()
        rest = seg.select(pl.col("text").gather(rest_i)).select(triage).to_series()
        seg = seg.with_columns(triage=dots.scatter(rest_i, rest))
    elif undated.len() > seg.height // 2:
        seg = seg.with_columns(triage=triage | pl.col("_date"))
    elif undated.len() == 0:
        seg = seg.with_columns(triage=pl.col("_date"))
    else:
        rest = seg.select(pl.col("text").gather(undated)).select(triage).to_series()
        seg = seg.with_columns(triage=date.clone().scatter(undated, rest))
    n_all = seg.height
    tri = seg.get_column("triage").arg_true()
    # When the triage leaves out few lines (1-3 % on big training logs), all the lines are read and those few
    # blanked at the end, which costs less than filtering every column and scattering them back. A line left
    # out changes no other line's reading: it is no banner (their `-----` is a triage literal), and the steps
    # it may turn on (a collector time, a logging prefix, a month-day time) change only the lines they match.
    whole = 0 < n_all - tri.len() and (n_all - tri.len()) * 16 <= n_all
    seg = (seg if whole else seg.filter(pl.col("triage"))).with_columns(clean=clean)
    if seg.get_column("clean").str.contains(_rx(g.COLLECTOR_RE)).any():
        seg = seg.with_columns(
            coll_ts=pl.col("clean").str.extract(_rx(g.COLLECTOR_RE), 1),
            clean=pl.col("clean").str.replace(_rx(g.COLLECTOR_RE), ""),
        )
    else:
        seg = seg.with_columns(coll_ts=pl.lit(None, dtype=pl.String))
    seg = _strip_envelopes(seg.with_columns(rest=pl.col("clean")))
    # Steps that change or read only a few lines run on those alone (a literal or anchored test finds them;
    # the others keep their text and get null)
    rest_s = seg.get_column("rest")
    pylog = rest_s.str.contains(_rx(g.PYLOG_PREFIX_RE))
    on["pylog"] = bool(pylog.any())
    if on["pylog"]:
        i = pylog.arg_true()
        rest_s = rest_s.clone().scatter(i, rest_s.gather(i).str.replace(_rx(g.PYLOG_PREFIX_RE), ""))
    # (the c10 time is looked for after the logging prefix is stripped)
    mmdd_hit = rest_s.str.contains(_rx(g.MMDD_TS_RE))
    on["mmdd"] = bool(mmdd_hit.any())
    msg = _nulls("msg_rank", seg.height, pl.Int32)
    if on["msg"]:
        i = rest_s.str.contains("[Rank ", literal=True).arg_true()
        msg = msg.scatter(i, rest_s.gather(i).str.extract(_rx(g.MSG_RANK_RE), 1).cast(pl.Int32, strict=False))
    seg = seg.with_columns(rest=rest_s, msg_rank=msg)
    lf = seg.lazy()
    lf = _with_banner(lf, on["banner"], batch)
    stream_rank = pl.coalesce(pl.col("env_rank"), pl.col("banner_rank"))
    key = pl.concat_str([pl.col("host").fill_null(""), stream_rank.cast(pl.String).fill_null("")], separator="|")
    if "_key" in seg.columns and not on["banner"]:  # (the stream rank is the envelope's: the key per prefix)
        key = pl.col("_key")
    lf = lf.with_columns(key=key, rank=pl.coalesce(stream_rank, pl.col("msg_rank")), text=pl.col("rest"))
    seg = lf.collect()
    # own timestamp (a collector's clock, being exact, wins over the framework's local one), worked out on the
    # lines that can hold one: a collector time, a date (the raw line holds the text's unless ANSI codes were
    # cut from its middle), an absl/c10 month-day time, an MLPerf record
    year = ctx.year_hint or (ctx.collected_at.year if ctx.collected_at else None)
    mmdd_on = on["mmdd"] and year is not None
    text_s = seg.get_column("text")
    need = seg.get_column("coll_ts").is_not_null() | (
        text_s.str.contains(_rx(g.TRIAGE_DATE_RE)) if dirty else seg.get_column("_date")
    )
    if mmdd_on:
        need = need | mmdd_hit
    if on["mllog"]:
        need = need | text_s.str.contains(":::MLLOG", literal=True)
    n_need = int(need.sum())
    if n_need == seg.height:
        seg = seg.with_columns(_own_time(seg.select("text", "coll_ts"), year, mmdd_on, on["mllog"]))
    elif n_need * 4 >= seg.height * 3:
        # (most lines: read all, which costs less than gathering them; a line without any of the above has no
        # own time, so the others are nulled; `_own_time` reads each line on its own)
        own = _own_time(seg.select("text", "coll_ts"), year, mmdd_on, on["mllog"])
        seg = seg.with_columns(
            ts=pl.when(need).then(own.get_column("ts")),
            ts_quality=pl.when(need).then(own.get_column("ts_quality")),
        )
    else:
        i = need.arg_true()
        own = _own_time(seg.select("text", "coll_ts")[i], year, mmdd_on, on["mllog"])
        seg = seg.with_columns(
            ts=_nulls("", seg.height, UTC_US).scatter(i, own.get_column("ts")),
            ts_quality=_nulls("", seg.height, pl.String).scatter(
                i, own.get_column("ts_quality")
            ),
        )
    cols = ["line", "seg", "raw", "text", "key", "host", "rank", "banner", "ts", "ts_quality"]
    if whole:  # the lines the triage left out get blank text and no stream
        t = pl.col("triage")
        seg = seg.select(
            "line",
            "seg",
            "raw",
            text=pl.when(t).then(pl.col("text")).otherwise(pl.lit("")),
            key=pl.when(t).then(pl.col("key")).otherwise(pl.lit("|")),
            **{c: pl.when(t).then(pl.col(c)) for c in ("host", "rank")},
            banner=pl.when(t).then(pl.col("banner")).otherwise(pl.lit(False)),
            **{c: pl.when(t).then(pl.col(c)) for c in ("ts", "ts_quality")},
        )
        return frame, seg.rechunk()
    seg = seg.select(cols)
    if seg.height == n_all:  # every line triaged: `seg` is in (line, seg) order (filters keep the order)
        return frame, seg.rechunk()
    # the lines the triage left out get blank text and no stream (in place: the frame is in (line, seg) order)
    full = frame_seg.select(
        "line",
        "seg",
        raw=pl.col("text"),
        text=pl.lit(""),
        key=pl.lit("|"),
        host=pl.lit(None, dtype=pl.String),
        rank=pl.lit(None, dtype=pl.Int32),
        banner=pl.lit(False),
        ts=pl.lit(None, dtype=UTC_US),
        ts_quality=pl.lit(None, dtype=pl.String),
    )
    if seg.height == 0:
        return frame, full
    return frame, full.with_columns(full.get_column(c).scatter(tri, seg.get_column(c)) for c in cols[3:])
