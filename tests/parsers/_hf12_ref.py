# ruff: noqa: E501  (verbatim)
"""hf12's references: the `parsers.step_log` code it changed, verbatim from the commit before (3cdd8b4):
`_strip_envelopes` (each line's stack of envelopes found by one `_ENV_STACK` extract, a regex of its own that
costs ~9 ms to compile on non-ASCII lines, again on every range: polars keeps 32 compiled regexes per thread
and a range's reading uses ~80) and `_segments` (the five flags read by a pass each over the lines);
`_prepare`, `_noise_lines` and `_warning_lines` (the regexes run on a few gathered lines with the chunk's
regex classes: Unicode ones on the non-ASCII lines of a log with tqdm bars, each compiled again on every range).
`_mixed._step_chunk`, `_mixed._both` and `step_log.parse` (which worked out `is_ascii` of the lines again, a
pass over the whole chunk, where they are not ASCII). The helpers they call are the modules' own (unchanged)."""

from __future__ import annotations

import polars as pl

from forensics.schema import UTC_US
from parsers import _step_grammars as g
from parsers import step_log
from parsers._mixed import _entry_lines, _family, _mixes
from parsers.base import FileContext, ParseResult
from parsers.step_log import (  # noqa: F401
    _ENV_STACK,
    _LANE_MIN,
    _NOISE_ANY,
    _NOISE_LITS,
    _PYWARN_LIT,
    _PYWARN_RE,
    MegEntries,
    _ascii,
    _Batch,
    _megatron_lane,
    _nulls,
    _own_time,
    _parse,
    _prepare_small,
    _rx,
    _strip_passes,
    _titan_lane,
    _triage,
    _with_banner,
    ascii_scope,
    is_ascii,
    numbered,
)


def _strip_envelopes(seg: pl.DataFrame) -> pl.DataFrame:
    """`_strip_passes(seg)`, with the rank and host worked out once per distinct prefix (and, on big inputs
    that have one, column `_key`: the stream key of that rank and host, see `_prepare`).

    One capture-free replace strips the stack of envelopes from each line that opens with one (the passes
    strip the leftmost-first match of the alternation up to three times, which is the greedy `{1,3}` of
    it: nothing after a match constrains it). The stripped prefixes are few (one per launcher rank or
    host); the passes run on them alone (envelopes hold no anchors but `^`, so a prefix alone is stripped
    as it was in its line) and their rank and host are mapped back to the lines.
    """
    if seg.height < _LANE_MIN:
        return _strip_passes(seg)
    rest = seg.get_column("rest")
    prefix = rest.str.extract(_rx(_ENV_STACK), 0)  # (null where no envelope opens the line)
    if prefix.null_count() == seg.height:
        return seg.with_columns(env_rank=pl.lit(None, dtype=pl.Int32), host=pl.lit(None, dtype=pl.String))
    uniq = prefix.drop_nulls().unique(maintain_order=True)
    meta = _strip_passes(pl.DataFrame({"rest": uniq}))
    if not (meta.get_column("rest") == "").all():  # (cannot happen; the passes, line by line, decide then)
        return _strip_passes(seg)
    # (`_key`: the stream key `_prepare` builds from the host and envelope rank, per distinct prefix too)
    keys = meta.select(
        pl.concat_str(
            [pl.col("host").fill_null(""), pl.col("env_rank").cast(pl.String).fill_null("")], separator="|"
        )
    ).to_series()
    # the rank, host and key of each line's prefix by one join (the prefixes in `uniq` are distinct; a line
    # without one matches none and gets nulls, the key `|`)
    table = pl.DataFrame(
        {
            "_p": uniq,
            "env_rank": meta.get_column("env_rank").cast(pl.Int32, strict=False),
            "host": meta.get_column("host").cast(pl.String),
            "_key": keys,
        }
    )
    n_pre = seg.height - prefix.null_count()
    if n_pre * 4 < seg.height:
        # (few lines open with an envelope, as in Hugging Face logs whose bars have none: only those are cut
        # and joined, their values put back by position; the others keep their text, get nulls and key `|`)
        i = prefix.is_not_null().arg_true()
        p = prefix.gather(i)
        got = pl.DataFrame({"_p": p}).join(table, on="_p", how="left", maintain_order="left")
        rest_s = seg.get_column("rest")
        return seg.with_columns(
            rest=rest_s.scatter(i, rest_s.gather(i).str.slice(p.str.len_chars())),
            env_rank=_nulls("env_rank", seg.height, pl.Int32).scatter(i, got.get_column("env_rank")),
            host=_nulls("host", seg.height, pl.String).scatter(i, got.get_column("host")),
            _key=pl.repeat("|", seg.height, dtype=pl.String, eager=True).scatter(
                i, got.get_column("_key").fill_null("|")
            ),
        )
    got = pl.DataFrame({"_p": prefix}).join(table, on="_p", how="left", maintain_order="left")
    return seg.with_columns(
        rest=pl.col("rest").str.slice(prefix.str.len_chars().fill_null(0)),
        env_rank=got.get_column("env_rank"),
        host=got.get_column("host"),
        _key=got.get_column("_key").fill_null("|"),
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
        # (the split once, as a column: an expression used twice in an eager `with_columns` runs twice)
        parts = frame.get_column("text").str.split("\r")
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
    frame_seg = seg
    seg = seg.with_columns(raw=text, _date=text.str.contains(_rx(g.TRIAGE_DATE_RE)))
    # a dated line is triaged: the literal tests run on the others (all of them when most lines have no date)
    date = seg.get_column("_date")
    undated = (~date).arg_true()
    dots = None
    text_s = seg.get_column("text")
    # (tried when a quarter of the first lines hold it: either way gives the same triage)
    head = text_s.head(_LANE_MIN)
    if undated.len() > seg.height // 2 and int(head.str.contains("..", literal=True).sum()) * 4 >= head.len():
        # (`..`, a triage literal, is in most lines of Megatron logs, whose timer entries and arguments hold
        # it: where it is, the other literal tests are spared)
        dots = text_s.str.contains("..", literal=True) | date
        if int(dots.sum()) < seg.height // 2:
            dots = None
    if dots is not None:
        rest_i = (~dots).arg_true()
        rest = _triage(text_s.gather(rest_i))
        seg = seg.with_columns(triage=dots.scatter(rest_i, rest))
    elif undated.len() > seg.height // 2:
        seg = seg.with_columns(triage=_triage(text_s, date))
    elif undated.len() == 0:
        seg = seg.with_columns(triage=pl.col("_date"))
    else:
        rest = _triage(text_s.gather(undated))
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
    key = pl.concat_str(
        [pl.col("host").fill_null(""), stream_rank.cast(pl.String).fill_null("")], separator="|"
    )
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
            ts_quality=_nulls("", seg.height, pl.String).scatter(i, own.get_column("ts_quality")),
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
    # (a column whose triaged values are all the blank's (no stream, no time: most of them in logs without
    # envelopes) is left as it is; one with a few others gets those alone)
    # (the tests cost no string pass where every value differs from the blank's: no null, or a key other than
    # `|` in each of the first lines)
    put = {}
    for c in cols[3:]:
        col = seg.get_column(c)
        if c == "key":
            other = None if col.head(1024).ne_missing("|").all() else col.ne_missing("|")
        elif c == "banner":
            other = col.ne_missing(False)
        else:
            other = None if c == "text" or col.null_count() == 0 else col.is_not_null()
        n_other = col.len() if other is None else int(other.sum())
        if n_other == col.len():
            put[c] = full.get_column(c).scatter(tri, col)
        elif n_other:
            at = other.arg_true()  # type: ignore[union-attr]
            put[c] = full.get_column(c).scatter(tri.gather(at), col.gather(at))
    return frame, full.with_columns(**put)


def _noise_lines(seg: pl.DataFrame, understood: pl.Series) -> pl.Series:
    """Lines understood without a row: own timestamp, composer banner, `_NOISE_ANY`.

    On big inputs only the lines not `understood` already are looked at (what is returned goes into that set),
    and the regex runs only on those of them without a time or banner that hold one of `_NOISE_LITS`."""
    txt = pl.col("text")
    known = pl.col("ts").is_not_null() | pl.col("banner")
    if _NOISE_LITS is None or seg.height < _LANE_MIN:
        return seg.filter(known | txt.str.contains(_rx(_NOISE_ANY))).get_column("line")
    rest = seg.filter(~pl.col("line").is_in(understood.implode()))
    flags = rest.select(known=known, cand=~known & txt.str.contains_any(list(_NOISE_LITS)))
    hit = flags.get_column("known").fill_null(False)
    i = flags.get_column("cand").fill_null(False).arg_true()
    if i.len():
        got = rest.get_column("text").gather(i).str.contains(_rx(_NOISE_ANY)).fill_null(False)
        hit = hit.clone().scatter(i, got)
    return rest.filter(hit).get_column("line")


def _warning_lines(seg: pl.DataFrame) -> pl.Series:
    """Lines understood without a row: Python warnings, and the source line Python prints under one (two
    spaces, then the code: `  warnings.warn(`) when it is the next line and has the same prefix. Training
    logs hold thousands (deprecations, graph breaks, scaling recipes); they say nothing about step times."""
    raw = seg.get_column("raw")
    at = raw.str.contains(_PYWARN_LIT, literal=True).arg_true()
    none = pl.Series("line", [], dtype=pl.Int64)
    if at.len() == 0:
        return none
    heads = seg.select(
        pl.col("line").gather(at), env=pl.col("raw").gather(at).str.extract(_rx(_PYWARN_RE), 1)
    )
    heads = heads.filter(pl.col("env").is_not_null())
    if heads.height == 0:
        return none
    # the next line's first segment (`seg` is in (line, seg) order)
    lines = seg.get_column("line")
    after = heads.get_column("line") + 1
    pos = lines.search_sorted(after, side="left").clip(0, seg.height - 1)
    nxt = pl.DataFrame(
        {"line": after, "env": heads.get_column("env"), "at": lines.gather(pos), "raw": raw.gather(pos)}
    )
    indent = pl.concat_str(pl.col("env"), pl.lit("  "))
    source = nxt.filter(
        (pl.col("at") == pl.col("line"))
        & pl.col("raw").str.starts_with(indent)
        & pl.col("raw").str.slice(indent.str.len_chars(), 1).str.contains(_rx(r"^\S"))
    )
    return pl.concat([heads.get_column("line"), source.get_column("line")])


def _step_chunk(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """`parse(step_log, lines, ctx)` of a big chunk: where it may be a Megatron log the lane takes, its timer
    entries are found first (`step_log.meg_entry_lines`), handed to the lane and left out of the scans for
    the NCCL/PyTorch lines (`_entry_lines`: none of them is such a line)."""
    ascii = step_log.is_ascii(lines)
    with step_log.ascii_scope(ascii):
        entries = step_log.meg_entry_lines(lines)
    skip = _entry_lines(entries, g.ascii_classes if ascii else str)
    both, lit = _mixes(step_log, lines, skip)
    if both:
        return _both(lines, ctx, lit, ascii, entries, skip)
    with step_log.ascii_scope(ascii):  # (`parse` works out `is_ascii` again where it is off)
        return step_log.parse(lines, ctx, entries)


def _both(
    lines: pl.Series,
    ctx: FileContext,
    lit: pl.Series | None = None,
    ascii: bool | None = None,
    entries: step_log.MegEntries | None = None,
    skip: pl.Series | None = None,
) -> ParseResult:
    """Both grammars on `lines` (`ascii`: `step_log.is_ascii(lines)`, `entries`: `step_log.meg_entry_lines`,
    `skip`: `_entry_lines`, when the caller made them)."""
    # (ASCII lines: the regexes run with ASCII classes, here and in the step-log parser: `step_log._ascii`)
    if ascii is None:
        ascii = step_log.is_ascii(lines)
    family, n_family = _family(lines, ctx, lit, ascii, skip)
    with step_log.ascii_scope(ascii):
        if n_family == 0:
            return step_log.parse(lines, ctx, entries)
        # the family's lines blanked (written in place in a copy: a select over every line costs ~8x more)
        known = family.understood.fill_null(False)
        blanked = lines.clone().scatter(known.arg_true(), "").alias("literal")
        rest = step_log.parse(blanked, ctx, entries.without(known) if entries is not None else None)
    tables = dict(family.tables)
    for name, df in rest.tables.items():
        if df.height:
            tables[name] = pl.concat([tables[name], df], how="diagonal_relaxed") if name in tables else df
    node = family.hosts[0] if len(family.hosts) == 1 else rest.node
    return ParseResult(
        tables=tables,
        parsed=n_family + rest.parsed,
        unrecognized=rest.unrecognized,
        unrecognized_examples=rest.unrecognized_examples,
        notes=[
            *family.notes,
            *rest.notes,
            f"mixed log: {n_family} NCCL/PyTorch line(s) and {rest.parsed} other "
            "line(s) read by the step-log grammar",
        ],
        partial=rest.partial,
        node=node,
    )


def parse(lines: pl.Series, ctx: FileContext, entries: MegEntries | None = None) -> ParseResult:
    """Parse a training log into `steps` rows and straggler `events` (see the module docstring). `entries`:
    `meg_entry_lines(lines)`, when the caller made it (`_mixed`)."""
    with ascii_scope(_ascii or is_ascii(lines)):
        if len(lines) >= _LANE_MIN:
            got = _titan_lane(lines, ctx)
            if got is None:
                got = _megatron_lane(lines, ctx, entries)
            if got is not None:
                return got
        return _parse(lines, ctx)
