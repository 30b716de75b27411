"""The step-log functions steplog9 replaced, verbatim (references for test_steplog9): they run with
`parsers.step_log`'s names (helpers, constants) as their globals."""

# ruff: noqa: E501, F821, C901, N806, N812

from __future__ import annotations

import polars as pl

from parsers import step_log as _S

globals().update({k: v for k, v in vars(_S).items() if not k.startswith("__")})


def _prepare(
    lines: pl.Series, ctx: FileContext, batch: _Batch | None = None, numbers: pl.Series | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return (physical lines frame, segment frame with cleaned text, stream key, rank, host, own time).

    `batch`: `lines` are the lines of several files (`parse_many`), numbered by `batch.frame`; the stream key
    does not yet hold the file (the caller adds it). `numbers`: the line numbers of `lines` (ascending), when
    they are not `ctx.first_line` onwards."""
    if lines.len() < _LANE_MIN:
        return _prepare_small(lines, ctx, batch, numbers)
    frame, seg, on, dirty, clean = _segments(lines, ctx, batch, numbers)
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
