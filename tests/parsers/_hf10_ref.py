# ruff: noqa: E501, N806  (verbatim)
"""hf10's references: the step_log functions it changed, verbatim from the commit before (patched into
`parsers.step_log` by tests/parsers/test_hf10.py)."""

from __future__ import annotations

import polars as pl

from parsers import _step_grammars as g
from parsers._common import is_ascii
from parsers.base import FileContext, numbered
from parsers.step_log import (  # noqa: F401
    _BASE,
    _EMPTY_STEPS,
    _FRAG,
    _GATES,
    _HF_KEY_LITS,
    _LANE_MIN,
    _POST_GATE,
    _PROGRESS,
    _ROW_COLS,
    _STEP_REACH,
    _TAIL_GATES,
    _TIMER,
    _TQDM_FIELDS,
    _TQDM_HEAD_DIGITS,
    _TQDM_TAIL_START,
    INHERIT_GAP,
    UTC_US,
    _ascii,
    _Batch,
    _block_fragments,
    _derived_step_time,
    _events,
    _f,
    _finish,
    _frag,
    _grouped,
    _kept,
    _key,
    _match,
    _megatron_frag,
    _minmax_pre,
    _noise_lines,
    _nulls,
    _num,
    _own_time,
    _prepare_small,
    _rows,
    _rx,
    _sort_frags,
    _sort_rows,
    _strip_envelopes,
    _titan_canon,
    _titan_pre,
    _titan_values,
    _warning_lines,
    _with_banner,
    _with_timers,
    ascii_scope,
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


def _tqdm_match(seg: pl.DataFrame) -> pl.DataFrame:
    """`_match(seg, g.TQDM_RE, …)` with the groups the bar fragments read (desc, n, total, rate, unit,
    post).

    Split lane for `_TQDM_CANON` bars: there the lazy `desc` of `TQDM_RE` ends at the first digit (it holds
    none) or, past 999 %, where three digits are left before the `%` (`_TQDM_HEAD_DIGITS`), the percentage
    and bar end at the first two `|`, `n`/`total` lie around the next `/` and end at the `[`, the rate follows
    the first `,` (the times hold none) and ends at the unit, its first `s` or `i`; `post` is the rest. Other
    bars take the regex.
    """
    txt = pl.col("text")
    if seg.height < _LANE_MIN:  # (every group of the regex, as before)
        return _match(seg, g.TQDM_RE, txt.str.contains("%|", literal=True))
    bars = seg.filter(txt.str.contains("%|", literal=True))
    # one split at the first two `|` (`_TQDM_CANON` is the part before them, any text without `|` between
    # them, and the part after: the regexes of the parts skip the bar's many block characters); in the rest
    # (ASCII up to the unit, so byte offsets are character offsets) the fields are cut at the offsets of
    # `/`, `[`, `,` and the unit
    cut = bars.select(_s=txt.str.splitn("|", 3)).unnest("_s")
    canon = cut.select(
        (
            pl.col("field_0").str.contains(_rx(_TQDM_HEAD_DIGITS))
            & pl.col("field_2").str.contains(_rx(_TQDM_TAIL_START))
            & ~pl.col("field_2").str.contains("\n", literal=True)
        )
        .fill_null(False)
    ).to_series()
    n_canon = int(canon.sum())
    fast = bars.filter(canon) if n_canon < bars.height else bars
    cut = cut.filter(canon) if n_canon < bars.height else cut
    # (the description: the head less its `%` and its digits, but the first of more than three: `TQDM_RE`'s
    # `pct` takes the last three; the digits stripped are ASCII, one byte each)
    h = pl.col("field_0").str.strip_suffix("%")
    parts = cut.select(_h=h, _d=h.str.strip_chars_end("0123456789"), _r=pl.col("field_2"))
    long = (pl.col("_h").str.len_bytes() - pl.col("_d").str.len_bytes()) > 3
    if parts.select(long.any()).item():
        parts = parts.with_columns(_d=pl.when(long).then(pl.col("_h").str.head(-3)).otherwise(pl.col("_d")))
    parts = parts.drop("_h")
    r = pl.col("_r")
    parts = parts.with_columns(
        _sl=r.str.find("/", literal=True),
        _lb=r.str.find("[", literal=True),
        _c=r.str.find(",", literal=True),
        _at=r.str.find(_rx("[si]")),
    )
    sl, lb, c, at, lt = pl.col("_sl"), pl.col("_lb"), pl.col("_c"), pl.col("_at"), pl.col("_lt")
    # (a negative remaining time: the character after the first `<`, which the rate's bars hold a digit,
    # `:`, `?` or `,` at; worked out once, as a column, for the three fields that read it)
    parts = parts.with_columns(_lt=r.str.find("<", literal=True))
    parts = parts.with_columns(_neg=r.str.slice(lt + 1, 1) == "-")
    neg = pl.col("_neg")
    fast = pl.concat([fast, parts], how="horizontal").with_columns(
        m=pl.struct(
            desc="_d",
            n=r.str.slice(0, sl).str.strip_chars(),
            total=r.str.slice(sl + 1, lb - sl - 1).str.strip_chars(),
            rate=pl.when(~neg).then(r.str.slice(c + 1, at - c - 1).str.strip_chars()),
            unit=pl.when(~neg).then(r.str.slice(at, 4)),
            post=pl.when(neg).then(r.str.slice(lt + 1)).otherwise(r.str.slice(at + 4)),
        )
    ).drop("_d", "_r", "_sl", "_lb", "_c", "_at", "_lt", "_neg")
    if n_canon == bars.height:
        return fast
    slow = _match(bars.filter(~canon), g.TQDM_RE)
    slow = slow.with_columns(m=pl.struct(*(pl.col("m").struct.field(f) for f in _TQDM_FIELDS.to_schema())))
    return pl.concat([fast, slow]).sort("line", "seg")


def _bar_fragments(
    seg: pl.DataFrame, present: frozenset[str], batch: _Batch | None = None
) -> tuple[list[pl.DataFrame], pl.DataFrame]:
    """tqdm and rich progress bars; returns (fragments, lines understood). (`batch`: the lines of several
    files, see `parse_many`: a file's `Total optimization steps` select its own bars.)"""
    out: list[pl.DataFrame] = []
    txt = pl.col("text")
    m = _tqdm_match(seg) if "%|" in present else seg.clear()
    seen = [m.select("line")]
    if m.height:
        # (the bars' fragments read their base columns and groups only: the texts are not carried through the
        # filters and joins below)
        m = m.select(*_BASE, "m")
        totals = seg.filter(txt.str.contains("Total optimization steps = ", literal=True)).select(
            "line",
            n=txt.str.extract(_rx(g.HF_TOTAL_STEPS_RE), 1)
            .str.replace_all(",", "")
            .cast(pl.Int64, strict=False),
        )
        hf_total = totals.get_column("n").drop_nulls()
        by_file = batch is not None and hf_total.len() > 0
        if by_file:  # (`parse_many`: each file's bars are checked against its own totals, if it has any)
            assert batch is not None
            fi = batch.file_of(pl.col("line"))
            pairs = totals.filter(pl.col("n").is_not_null()).select(
                fi=fi, p=pl.concat_str(fi.cast(pl.String), pl.lit(":"), pl.col("n").cast(pl.String))
            )
            with_total = pairs.get_column("fi").unique().implode()
            in_file_total = ~fi.is_in(with_total) | pl.concat_str(
                fi.cast(pl.String), pl.lit(":"), _f("total").cast(pl.Int64, strict=False).cast(pl.String)
            ).is_in(pairs.get_column("p").implode())
        desc = _f("desc")
        post = _f("post")
        k = {name: _key(post, pat) for name, pat in g.TQDM_POST_KEYS.items()}
        tt = desc.str.extract_groups(_rx(g.TORCHTUNE_DESC_RE))
        rate = _num(_f("rate"))
        it_s = pl.when(_f("unit").str.starts_with("s")).then(1.0 / rate).otherwise(rate)
        # a rate in other units (`examples/s`, `B/s`) marks a data bar, not a training loop
        units_ok = _f("unit").is_not_null() | _f("rate").is_null()
        keep = (_f("n").cast(pl.Int64, strict=False) > 0) & ~desc.str.contains(_rx(g.EVAL_DESC_RE)) & units_ok
        if by_file:
            keep = keep & in_file_total
        elif hf_total.len() > 0:
            keep = keep & _f("total").cast(pl.Int64, strict=False).is_in(hf_total.implode())
        # (unlabelled bars of one file, many: `_unlabelled_bars`, one filter for the two below)
        one_file = hf_total.len() == 0 and not by_file and m.height >= _LANE_MIN
        bars = _unlabelled_bars(m, keep) if one_file else m.filter(keep)
        if (hf_total.len() == 0 or by_file) and bars.height and not one_file:
            # unlabelled bars of several lengths (HF evaluation inside training): keep the stream's main loop,
            # the total with the most distinct positions
            bars = bars.with_columns(
                _total=_f("total").cast(pl.Int64, strict=False),
                _n=_f("n").cast(pl.Int64, strict=False),
                _blank=desc.str.strip_chars() == "",
            )
            best = (
                bars.filter(pl.col("_blank") & ~fi.is_in(with_total) if by_file else pl.col("_blank"))
                .group_by("key", "_total")
                .agg(_k=pl.col("_n").n_unique())
                .sort("_k", "_total", descending=True)
                .group_by("key", maintain_order=True)
                .agg(_best=pl.col("_total").first())
            )
            bars = (
                bars.join(best, on="key", how="left")
                .filter(~pl.col("_blank") | pl.col("_best").is_null() | (pl.col("_total") == pl.col("_best")))
                .drop("_total", "_n", "_blank", "_best")
            )
        if bars.height:
            # values read off the description and the postfix (regexes), each a function of that text alone
            dv = {
                "_tt_has": tt.struct.field("step").is_not_null(),
                "_tt_step": tt.struct.field("step").cast(pl.Int64, strict=False),
                "_tt_loss": _num(tt.struct.field("loss")),
                "_tt_epoch": _num(tt.struct.field("epoch")),
                "_ep_hit": desc.str.contains(_rx(r"Epoch \d+")),
                "_ep": _num(desc.str.extract(_rx(r"Epoch (\d+)"), 1)),
            }
            if bars.height < _LANE_MIN:
                v = dv | {f"_k_{name}": e for name, e in k.items()}
            else:  # worked out once per distinct description and postfix (a few per file), joined to the bars
                bars = bars.with_columns(_desc=desc, _post=post)
                # (the expressions read `m`'s struct: the distinct texts are put back in one)
                by_desc = (
                    bars.select(pl.col("_desc").unique())
                    .with_columns(m=pl.struct(desc=pl.col("_desc")))
                    .select("_desc", **dv)
                )
                # (only postfixes holding a literal one of the key regexes needs are read: the others, most
                # of them, get nulls, what the regexes give them; none such, no join)
                posts = bars.select(pl.col("_post"))
                if _POST_GATE is not None:
                    posts = posts.filter(pl.col("_post").str.contains_any(_POST_GATE).fill_null(False))
                by_post = (
                    posts.select(pl.col("_post").unique())
                    .with_columns(m=pl.struct(post=pl.col("_post")))
                    .select("_post", **{f"_k_{name}": e for name, e in k.items()})
                )
                bars = bars.join(by_desc, on="_desc", how="left", nulls_equal=True, maintain_order="left")
                if by_post.height:
                    bars = bars.join(by_post, on="_post", how="left", nulls_equal=True, maintain_order="left")
                else:
                    bars = bars.with_columns(
                        pl.lit(None, dtype=t).alias(c) for c, t in by_post.schema.items() if c != "_post"
                    )
                v = {c: pl.col(c) for c in dv} | {f"_k_{name}": pl.col(f"_k_{name}") for name in k}
            kv = {name: v[f"_k_{name}"] for name in k}
            fw = (
                pl.when(v["_tt_has"])
                .then(pl.lit("torchtune"))
                .when(kv["global_step"].is_not_null() | kv["consumed_samples"].is_not_null())
                .then(pl.lit("nemo"))
                .when(v["_ep_hit"])
                .then(pl.lit("lightning"))
                .otherwise(pl.lit("tqdm"))
            )
            out.append(
                _frag(
                    bars,
                    kind=pl.lit("tqdm"),
                    framework=fw,
                    prio=pl.lit(3),
                    anchor=pl.lit(True),
                    step=pl.coalesce(v["_tt_step"], _f("n").cast(pl.Int64, strict=False)),
                    total_steps=_f("total").cast(pl.Int64, strict=False),
                    loss=pl.coalesce(v["_tt_loss"], kv["loss"], kv["reduced_loss"]),
                    step_time_s=pl.coalesce(kv["step_s"], 1.0 / it_s),
                    step_time_source=pl.when(kv["step_s"].is_not_null())
                    .then(pl.lit("reported"))
                    .when(it_s > 0)
                    .then(pl.lit("tqdm_rate")),
                    throughput=it_s,
                    throughput_unit=pl.when(it_s.is_not_null()).then(pl.lit("it/s")),
                    global_step=kv["global_step"],
                    consumed_samples=kv["consumed_samples"],
                    epoch=pl.coalesce(v["_tt_epoch"], v["_ep"]),
                )
            )
    m = _match(seg, g.RICH_BAR_RE, txt.str.starts_with("Epoch "), gate=("Epoch ",), present=present)
    seen.append(m.select("line"))
    if m.height:
        rate = _num(_f("rate"))
        it_s = pl.when(_f("unit") == "s/it").then(1.0 / rate).otherwise(rate)
        out.append(
            _frag(
                m.filter(_f("n").cast(pl.Int64, strict=False) > 0),
                kind=pl.lit("rich_bar"),
                framework=pl.lit("lightning"),
                prio=pl.lit(3),
                anchor=pl.lit(True),
                step=_f("n").cast(pl.Int64, strict=False),
                total_steps=_f("total").cast(pl.Int64, strict=False),
                epoch=_num(_f("epoch")),
                step_time_s=1.0 / it_s,
                step_time_source=pl.when(it_s > 0).then(pl.lit("tqdm_rate")),
                throughput=it_s,
                throughput_unit=pl.lit("it/s"),
                loss=_key(_f("post"), rf"(?:^|\s)(?:train_)?loss(?:_step)?: (?P<v>{g.NUM})"),
            )
        )
    return out, pl.concat(seen)


def _times_general(rows: pl.DataFrame, seg: pl.DataFrame) -> pl.DataFrame:
    """`_times` by sorts and joins of the whole frame."""
    rows = rows.with_columns(ts_quality=pl.when(pl.col("ts").is_not_null()).then(pl.col("ts_quality")))
    stamped = seg.filter(pl.col("ts").is_not_null()).select(
        "key", src_line=pl.col("line"), src_ts=pl.col("ts")
    ).unique(["key", "src_line"], keep="first", maintain_order=True).sort("key", "src_line")
    rows = rows.with_columns(prev_row_line=pl.col("line").shift(1).over("key")).sort("line")
    if stamped.height and rows.height:
        j = rows.sort("line").join_asof(
            stamped.sort("src_line"),
            left_on="line",
            right_on="src_line",
            by="key",
            strategy="backward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
        ok = (
            pl.col("ts").is_null()
            & ~pl.col("kind").is_in(["tqdm", "rich_bar"])  # a bar is redrawn long after the line above it
            & pl.col("src_ts").is_not_null()
            & ((pl.col("line") - pl.col("src_line")) <= INHERIT_GAP)
            & (pl.col("prev_row_line").is_null() | (pl.col("src_line") > pl.col("prev_row_line")))
        )
        rows = j.with_columns(
            ts=pl.when(ok).then(pl.col("src_ts")).otherwise(pl.col("ts")),
            ts_quality=pl.when(ok).then(pl.lit("inherited")).otherwise(pl.col("ts_quality")),
        ).drop("src_line", "src_ts")
    rows = rows.with_columns(ts_quality=pl.col("ts_quality").fill_null("none"))
    rows = _sort_stable(rows, ("key", "framework", "line"))

    grp = ["key", "framework"]
    has_step = pl.col("step").is_not_null()
    # cumulative training time (composer wall_clock/train, modded-nanogpt train_time)
    cum = rows.filter(has_step & pl.col("cum_time_s").is_not_null()).select(
        "key",
        "framework",
        "line",
        d_cum=(pl.col("cum_time_s") - pl.col("cum_time_s").shift(1)).over(grp),
        d_step=(pl.col("step") - pl.col("step").shift(1)).over(grp),
    )
    # timestamp deltas, own (not inherited) times only
    own = rows.filter(has_step & pl.col("ts_quality").is_in(["exact", "local_assumed_utc", "year_inferred"])).select(
        "key",
        "framework",
        "line",
        d_ts=((pl.col("ts") - pl.col("ts").shift(1)).dt.total_microseconds() / 1e6).over(grp),
        d_step_ts=(pl.col("step") - pl.col("step").shift(1)).over(grp),
    )
    # (a left join with no row on the right adds null columns; the rows stay as they are)
    for part in (cum, own):
        if part.height:
            rows = rows.join(part, on=["key", "framework", "line"], how="left")
        else:
            added = {c: t for c, t in part.schema.items() if c not in (*grp, "line")}
            rows = rows.with_columns(pl.lit(None, dtype=t).alias(c) for c, t in added.items())
    return _derived_step_time(rows, "prev_row_line")


def _sort_stable(df: pl.DataFrame, by: tuple[str, ...]) -> pl.DataFrame:
    """`df.sort(*by, maintain_order=True)`; on big frames without nulls in `by`, by one packed integer key:
    the rank of each row's value in each column (strings: among the distinct values, in sort order;
    integers: the value less the least) and its position, when they fit in 62 bits (one order only)."""
    n = df.height
    if n < _LANE_MIN or any(df.get_column(c).null_count() for c in by):
        return df.sort(*by, maintain_order=True)
    ranks: list[tuple[pl.Series, int]] = []
    for c in by:
        col = df.get_column(c)
        if col.dtype == pl.String:
            uniq = col.unique().sort()
            if uniq.len() == 1:  # (one value: every rank 0, no join)
                ranks.append((pl.zeros(n, dtype=pl.Int64, eager=True), 1))
                continue
            table = pl.DataFrame({c: uniq, "_r": pl.int_range(uniq.len(), eager=True, dtype=pl.Int64)})
            r = df.select(c).join(table, on=c, how="left", maintain_order="left").get_column("_r")
            ranks.append((r, uniq.len()))
        elif col.dtype.is_integer():
            lo, hi = int(col.min()), int(col.max())  # type: ignore[arg-type]
            ranks.append((col.cast(pl.Int64) - lo, hi - lo + 1))
        else:
            return df.sort(*by, maintain_order=True)
    bits = [(size - 1).bit_length() for _, size in ranks]
    pb = (n - 1).bit_length()
    if sum(bits) + pb > 62:
        return df.sort(*by, maintain_order=True)
    packed = pl.int_range(n, dtype=pl.Int64, eager=True)
    shift = pb
    for (r, _), b in zip(reversed(ranks), reversed(bits)):
        packed = packed + r * (1 << shift)
        shift += b
    if bool((packed.diff().drop_nulls() > 0).all()):  # (in that order already)
        return df.rechunk()
    return df.with_columns(_sk=packed).sort("_sk").drop("_sk")


def _unlabelled_bars(m: pl.DataFrame, keep: pl.Expr) -> pl.DataFrame:
    """`m.filter(keep)` less the blank-description bars whose total is not their stream's main loop (the total
    with the most distinct positions among the kept blank ones), as `_bar_fragments` does for bars of one file
    without a `Total optimization steps` line: the totals worked out on a narrow frame of the kept bars, `m`
    filtered once (one stream: its total broadcast, no join)."""
    desc = _f("desc")
    narrow = m.select(
        "key",
        _keep=keep,
        _total=_f("total").cast(pl.Int64, strict=False),
        _n=_f("n").cast(pl.Int64, strict=False),
        _blank=desc.str.strip_chars() == "",
    )
    kept = narrow.filter(pl.col("_keep"))
    if kept.height == 0:
        return m.filter(keep)
    best = (
        kept.filter(pl.col("_blank"))
        .group_by("key", "_total")
        .agg(_k=pl.col("_n").n_unique())
        .sort("_k", "_total", descending=True)
        .group_by("key", maintain_order=True)
        .agg(_best=pl.col("_total").first())
    )
    key = pl.col("key")
    one_key = bool(narrow.select(key.is_not_null().all() & (key == key.first()).all()).item())
    if best.height == 0:  # (no blank bar kept: the join's nulls keep every kept bar)
        return m.filter(keep)
    if one_key and best.height == 1 and best.get_column("key")[0] == narrow.get_column("key")[0]:
        joined = narrow.with_columns(_best=pl.lit(best.get_column("_best")[0], dtype=best.schema["_best"]))
    else:
        joined = narrow.join(best, on="key", how="left", maintain_order="left")
    stay = joined.select(
        pl.col("_keep")
        & (~pl.col("_blank") | pl.col("_best").is_null() | (pl.col("_total") == pl.col("_best")))
    ).to_series()
    return m.filter(stay)


def _step_fragments(
    seg: pl.DataFrame, present: frozenset[str], pre: tuple[pl.Series, pl.DataFrame] | None = None
) -> list[pl.DataFrame]:
    """Fragments of the one-line step grammars (`pre`: `_titan_pre` of `seg`, when the caller has it)."""
    out: list[pl.DataFrame] = []
    txt = pl.col("text")

    # Megatron family
    m = _match(
        seg,
        g.MEGATRON_ITER_RE,
        txt.str.contains("iteration", literal=True),
        gate=("iteration",),
        present=present,
        must="step",
    )
    if m.height:
        out.append(_megatron_frag(m))

    m = _match(seg, g.DS_PIPE_RE, txt.str.contains("iter time (s)", literal=True), gate=("iter time (s)",), present=present)
    if m.height:
        out.append(
            _frag(
                m,
                kind=pl.lit("deepspeed_pipe"),
                framework=pl.lit("deepspeed"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                loss=_num(_f("loss")),
                step_time_s=_num(_f("t")),
                step_time_source=pl.lit("reported"),
                throughput=_num(_f("sps")),
                throughput_unit=pl.lit("samples/s"),
            )
        )

    m = _match(seg, g.DS_STEP_RE, txt.str.contains("step=", literal=True), gate=("step=",), present=present)
    if m.height:
        out.append(
            _frag(
                m,
                kind=pl.lit("deepspeed_step"),
                framework=pl.lit("deepspeed"),
                prio=pl.lit(2),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                skipped_iterations=_f("skipped").cast(pl.Int64, strict=False),
                lr=_num(_f("lr")),
            )
        )

    for pattern, new in ((g.DS_TPUT_NEW_RE, True), (g.DS_TPUT_OLD_RE, False)):
        m = _match(seg, pattern, txt.str.contains("SamplesPerSec=", literal=True), gate=("SamplesPerSec=",), present=present)
        if m.height == 0:
            continue
        if not new:
            m = m.filter(~txt.str.contains("RunningAvgSamplesPerSec", literal=True))
        cols: dict[str, pl.Expr] = {
            "kind": pl.lit("deepspeed_throughput"),
            "framework": pl.lit("deepspeed"),
            "prio": pl.lit(1),
            "anchor": pl.lit(True),
            "step": _f("step").cast(pl.Int64, strict=False),
            "epoch": _num(_f("epoch")),
            "running_avg_samples_per_s": _num(_f("avg")),
        }
        if new:
            cols |= {"throughput": _num(_f("cur")), "throughput_unit": pl.lit("samples/s")}
        out.append(_frag(m, **cols))

    m = seg.clear()
    titan_vals = None
    if "step:" in present and "loss:" in present:
        titan = txt.str.contains("loss:", literal=True) & txt.str.contains(_rx(g.TITAN_RE))
        if seg.height < _LANE_MIN:
            m = seg.filter(txt.str.contains("step:", literal=True) & titan)
        else:  # (the regexes only on the lines with the literal; a `_TITAN_CANON` line matches `TITAN_RE`)
            m = seg.filter(txt.str.contains("step:", literal=True)) if pre is None else seg[pre[0]]
            if m.height >= _LANE_MIN:
                cf = _titan_canon(m.get_column("text")) if pre is None else pre[1]
                canon = cf.get_column("_canon")
                rest = (~canon).arg_true()
                if rest.len():
                    hit = m[rest].select(titan).to_series()
                    keep = canon.clone().scatter(rest, hit)
                    m, cf = m.filter(keep), cf.filter(keep)
                titan_vals = _titan_values(m.get_column("text"), cf)
            else:
                m = m.filter(titan)
    if m.height:
        if titan_vals is None:
            titan_vals = _titan_values(m.get_column("text"))
        m = m.with_columns(titan_vals)
        k = {name: pl.col(f"_k_{name}") for name in g.TITAN_KEYS}
        loss = pl.col("_loss").cast(pl.Float64, strict=False)  # (a `NUM` group: no separator to drop)
        out.append(
            _frag(
                m,
                kind=pl.lit("torchtitan"),
                framework=pl.lit("torchtitan"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=pl.col("_step").cast(pl.Int64, strict=False),
                loss=pl.when(loss != -1.0).then(loss),  # -1.0: pipeline ranks without the loss
                grad_norm=k["grad_norm"],
                memory_gib=k["memory_gib"],
                throughput=k["tps"],
                throughput_unit=pl.when(k["tps"].is_not_null()).then(pl.lit("tokens/s/GPU")),
                tflops=k["tflops"],
                mfu_pct=k["mfu_pct"],
            )
        )

    m = _match(seg, g.NANOGPT_RE, txt.str.contains("iter ", literal=True), gate=("iter ",), present=present)
    if m.height:
        mfu = _num(_f("mfu"))
        out.append(
            _frag(
                m,
                kind=pl.lit("nanogpt"),
                framework=pl.lit("nanogpt"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                loss=_num(_f("loss")),
                step_time_s=_num(_f("ms")) / 1000.0,
                step_time_source=pl.lit("reported"),
                mfu_pct=pl.when(mfu > -100.0).then(mfu),  # -100.00%: EMA not initialised yet
            )
        )

    m = _match(seg, g.NANOCHAT_RE, txt.str.contains("dt: ", literal=True), gate=("dt: ",), present=present)
    if m.height:
        tps = _num(_f("tps"))
        out.append(
            _frag(
                m,
                kind=pl.lit("nanochat"),
                framework=pl.lit("nanochat"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                total_steps=_f("total").cast(pl.Int64, strict=False),
                loss=_num(_f("loss")),
                step_time_s=_num(_f("ms")) / 1000.0,
                step_time_source=pl.lit("reported"),
                throughput=tps,
                throughput_unit=pl.when(tps.is_not_null()).then(pl.lit("tokens/s")),
                mfu_pct=_num(_f("mfu")),
            )
        )

    m = _match(seg, g.MODDED_RE, txt.str.contains("train_time:", literal=True), gate=("train_time:",), present=present)
    if m.height:
        out.append(
            _frag(
                m,
                kind=pl.lit("modded_nanogpt"),
                framework=pl.lit("modded-nanogpt"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                total_steps=_f("total").cast(pl.Int64, strict=False),
                loss=_num(_f("loss")),
                cum_time_s=_num(_f("cum_ms")) / 1000.0,
                interval_avg_step_s=_num(_f("avg")) / 1000.0,
            )
        )

    m = _match(seg, g.LITGPT_RE, txt.str.contains("iter time:", literal=True), gate=("iter time:",), present=present)
    if m.height:
        out.append(
            _frag(
                m,
                kind=pl.lit("litgpt"),
                framework=pl.lit("litgpt"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                global_step=_num(_f("ostep")),
                loss=_num(_f("loss")),
                step_time_s=_num(_f("ms")) / 1000.0,
                step_time_source=pl.lit("reported"),
            )
        )

    m = _match(seg, g.LLMC_RE, txt.str.contains("tok/s)", literal=True), gate=("tok/s)",), present=present)
    if m.height:
        out.append(
            _frag(
                m,
                kind=pl.lit("llmc"),
                framework=pl.lit("llm.c"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                total_steps=_f("total").cast(pl.Int64, strict=False),
                loss=_num(_f("loss")),
                step_time_s=_num(_f("ms")) / 1000.0,
                step_time_source=pl.lit("reported"),
                throughput=_num(_f("tps")),
                throughput_unit=pl.lit("tokens/s"),
            )
        )

    m = _match(seg, g.MLLOG_RE, txt.str.contains(":::MLLOG", literal=True), gate=(":::MLLOG",), present=present)
    if m.height:
        js = _f("json")
        m = m.with_columns(
            _key=js.str.json_path_match("$.key"),
            _step=js.str.json_path_match("$.metadata.step")
            .cast(pl.Float64, strict=False)
            .cast(pl.Int64, strict=False),
        ).filter((pl.col("_key") == "tracked_stats") & pl.col("_step").is_not_null())
        tput = _num(js.str.json_path_match("$.value.throughput"))
        out.append(
            _frag(
                m,
                kind=pl.lit("mllog"),
                framework=pl.lit("mlperf"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=pl.col("_step"),
                throughput=tput,
                throughput_unit=pl.when(tput.is_not_null()).then(pl.lit("samples/s")),
                loss=_num(js.str.json_path_match("$.value.train_loss")),
            )
        )

    m = _match(seg, g.MAXTEXT_RE, txt.str.contains("completed step:", literal=True), gate=("completed step:",), present=present)
    if m.height:
        tps = _num(_f("tps"))
        out.append(
            _frag(
                m,
                kind=pl.lit("maxtext"),
                framework=pl.lit("maxtext"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                step_time_s=_num(_f("s")),
                step_time_source=pl.lit("reported"),
                tflops=_num(_f("tflops")),
                throughput=pl.coalesce(tps, _num(_f("tflops"))),
                throughput_unit=pl.when(tps.is_not_null()).then(pl.lit("tokens/s/GPU")).otherwise(pl.lit("TFLOP/s/GPU")),
                loss=_num(_f("loss")),
            )
        )

    m = _match(seg, g.NEMO2_RE, txt.str.contains("Training epoch", literal=True), gate=("Training epoch",), present=present)
    if m.height:
        r = _f("rest")
        k = {name: _key(r, pat) for name, pat in g.NEMO2_KEYS.items()}
        out.append(
            _frag(
                m,
                kind=pl.lit("nemo2"),
                framework=pl.lit("nemo"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=pl.coalesce(
                    k["global_step"].cast(pl.Int64, strict=False), _f("step").cast(pl.Int64, strict=False)
                ),
                total_steps=_f("total").cast(pl.Int64, strict=False),
                epoch=_num(_f("epoch")),
                loss=k["loss"],
                step_time_s=k["step_s"],
                step_time_source=pl.when(k["step_s"].is_not_null()).then(pl.lit("reported")),
                consumed_samples=k["consumed_samples"],
                lr=k["lr"],
            )
        )

    m = _match(seg, g.AUTOMODEL_RE, txt.str.contains("| epoch ", literal=True), gate=("| epoch ",), present=present)
    if m.height:
        r = _f("rest")
        k = {name: _key(r, pat) for name, pat in g.AUTOMODEL_KEYS.items()}
        out.append(
            _frag(
                m,
                kind=pl.lit("automodel"),
                framework=pl.lit("nemo-automodel"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                epoch=_num(_f("epoch")),
                loss=_num(_f("loss")),
                grad_norm=k["grad_norm"],
                lr=k["lr"],
                memory_gib=k["memory_gib"],
                throughput=pl.coalesce(k["tps_gpu"], k["tps"]),
                throughput_unit=pl.when(k["tps_gpu"].is_not_null())
                .then(pl.lit("tokens/s/GPU"))
                .when(k["tps"].is_not_null())
                .then(pl.lit("tokens/s")),
                tokens_per_s=k["tps"],
            )
        )

    m = _match(seg, g.TORCHTUNE_RE, txt.str.starts_with("Step "), gate=("Step ",), present=present)
    if m.height:
        r = _f("rest")
        k = {name: _key(r, pat) for name, pat in g.TORCHTUNE_KEYS.items()}
        m = m.filter(pl.any_horizontal(*(v.is_not_null() for v in k.values())))
        out.append(
            _frag(
                m,
                kind=pl.lit("torchtune"),
                framework=pl.lit("torchtune"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                loss=k["loss"],
                lr=k["lr"],
                grad_norm=k["grad_norm"],
                throughput=k["tps_gpu"],
                throughput_unit=pl.when(k["tps_gpu"].is_not_null()).then(pl.lit("tokens/s/GPU")),
            )
        )

    # HF Trainer dicts
    m = seg.filter(txt.str.contains(_rx(g.HF_DICT_RE))) if "{" in present else seg.clear()
    if m.height:
        k = {name: _key(txt, pat) for name, pat in g.HF_KEYS.items()}
        if m.height >= _LANE_MIN:
            # each key's regex read once, as a column, not once per use; a key none of whose required literals
            # occurs in any of the lines matches none of them: nulls, what the regex gives
            # (ASCII lines, as dicts mostly are in a log whose bars are not: the regexes with ASCII classes)
            text = m.get_column("text")
            with ascii_scope(_ascii or is_ascii(text)):
                k = {name: _key(txt, pat) for name, pat in g.HF_KEYS.items()}
                m = m.with_columns(
                    **{
                        f"_hk_{name}": e
                        if _HF_KEY_LITS[name] is None or text.str.contains_any(list(_HF_KEY_LITS[name])).any()
                        else pl.lit(None, dtype=pl.Float64)
                        for name, e in k.items()
                    }
                )
            k = {name: pl.col(f"_hk_{name}") for name in k}
        summary = k["train_runtime"].is_not_null()
        train = k["loss"].is_not_null() | k["step_runtime"].is_not_null() | k["grad_norm"].is_not_null()
        logged = m.filter(~summary & train & ~txt.str.contains("'eval_", literal=True))
        if logged.height:
            out.append(
                _frag(
                    logged,
                    kind=pl.lit("hf_dict"),
                    framework=pl.lit("hf-trainer"),
                    prio=pl.lit(0),
                    anchor=k["step"].is_not_null(),
                    step=k["step"].cast(pl.Int64, strict=False),
                    loss=k["loss"],
                    grad_norm=k["grad_norm"],
                    lr=k["lr"],
                    epoch=k["epoch"],
                    step_time_s=k["step_runtime"],
                    step_time_source=pl.when(k["step_runtime"].is_not_null()).then(pl.lit("reported")),
                    throughput=k["step_sps"],
                    throughput_unit=pl.when(k["step_sps"].is_not_null()).then(pl.lit("samples/s")),
                    attach_line=pl.col("line"),
                )
            )
        summ = m.filter(summary)
        if summ.height:
            out.append(
                _frag(
                    summ,
                    kind=pl.lit("hf_summary"),
                    framework=pl.lit("hf-trainer"),
                    prio=pl.lit(0),
                    anchor=pl.lit(True),
                    standalone=pl.lit(True),
                    step_time_s=1.0 / k["train_steps_ps"],
                    step_time_source=pl.when(k["train_steps_ps"] > 0).then(pl.lit("run_mean")),
                    throughput=k["train_sps"],
                    throughput_unit=pl.when(k["train_sps"].is_not_null()).then(pl.lit("samples/s")),
                    loss=k["train_loss"],
                    epoch=k["epoch"],
                    train_runtime_s=k["train_runtime"],
                )
            )
    return out


def _read(
    seg: pl.DataFrame, node: pl.Expr, path: pl.Expr, batch: _Batch | None = None
) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series]:
    """The `steps` and `events` rows (not conformed) of the prepared lines `seg` and the lines understood
    (distinct). `node`, `path`: a row's `node` and `file` (over a row's `host` and `line`). `batch`: see
    `parse_many`."""
    titan = _titan_pre(seg)
    minmax = _minmax_pre(seg)
    present = _present(seg, titan, minmax)
    if not present:
        # no grammar runs (each match holds a gate): no fragment, bar, block line or event; the lines
        # understood are the noise and the warnings, the rows none (the callers conform them)
        none = pl.Series("line", [], dtype=pl.Int64)
        understood = pl.concat([_noise_lines(seg, none), _warning_lines(seg)]).unique()
        return pl.DataFrame(schema=_EMPTY_STEPS), pl.DataFrame(), understood
    frags = _step_fragments(seg, present, titan)
    bars, bar_lines = _bar_fragments(seg, present, batch)
    blocks, block_lines, nv = _block_fragments(seg, present, minmax)
    frags += bars + blocks
    events, event_lines = _events(seg, nv, node, path, present)

    understood_lines = pl.concat(
        [f.select("line") for f in frags] + [bar_lines, block_lines, event_lines], how="vertical_relaxed"
    ).get_column("line")
    understood_lines = pl.concat(
        [understood_lines, _noise_lines(seg, understood_lines), _warning_lines(seg)]
    ).unique()
    if batch is None and not any(f.height for f in frags):
        # no fragment (grammars whose gates are there but match nothing: the lines a lane leaves to `_parse`):
        # no row, as when no grammar runs (`_rows` and `_finish` of no fragment cost ~8 ms of fixed stages)
        return pl.DataFrame(schema=_EMPTY_STEPS), events, understood_lines

    if frags:
        if any("_ttext" in f.columns for f in frags):  # (timers read later, see `_block_fragments`)
            no_text = pl.lit(None, dtype=pl.String).alias("_ttext")
            frags = [f if "_ttext" in f.columns else f.with_columns(no_text) for f in frags]
        all_frags = pl.concat(frags, how="vertical_relaxed")
        if batch is not None:
            batch.note_single_divisions(all_frags)
        rows = _rows(all_frags)
    else:
        rows = pl.DataFrame(schema=_FRAG).drop("seg").with_columns(orphan_group=pl.lit(None, dtype=pl.Boolean))
    if batch is not None:
        batch.note_single_phases(rows)
    return _finish(rows, seg, node, path), events, understood_lines


def _present(
    seg: pl.DataFrame,
    titan: tuple[pl.Series, pl.DataFrame] | None = None,
    minmax: tuple[pl.DataFrame, pl.Series] | None = None,
) -> frozenset[str]:
    """The `_GATES` that occur in the cleaned text of `seg` (one Aho-Corasick pass over the column).

    `titan` (`_titan_pre`): a canonical torchtitan line is scanned up to its first `step:` alone; its tail
    (`_TITAN_TAIL`) holds `loss:` and no other gate, and no gate runs from the head into it (`_TAIL_GATES`).
    `minmax` (`_minmax_pre`): a Megatron `(min, max)` timer entry is scanned up to its first `(`, once per
    distinct text there (timer names repeat); what follows it holds no gate (`_MINMAX_TAIL_CHARS`). (The
    heads scanned are those `_minmax_pre` found: each one with its `(` is a prefix of a line, which is either
    scanned in full or a timer entry scanned that far.)
    """
    if seg.height == 0:
        return frozenset()
    text = seg.get_column("text")
    other: pl.Series | None = None
    heads: list[pl.Series] = []
    got: frozenset[str] = frozenset()
    if titan is not None:
        idx, cf = titan
        canon = cf.get_column("_canon")
        if canon.any():
            other = pl.repeat(True, seg.height, dtype=pl.Boolean, eager=True)
            other = other.scatter(idx.filter(canon), False)
            # (a gate in `_h0` + `step:` lies in `_h0` or ends in that `step:`, and then lies in the last
            # `_STEP_REACH` characters of `_h0` and the `step:`: those ends are few distinct texts)
            h0 = cf.filter(canon).get_column("_h0")
            heads += [h0, (h0.str.slice(-_STEP_REACH).unique() + "step:")]
            got = _TAIL_GATES
    if minmax is not None and minmax[0].get_column("_mm").any():
        mm = minmax[0].get_column("_mm")
        other = ~mm if other is None else other & ~mm
        heads.append(minmax[1] + "(")
    if other is not None:
        text = pl.concat([text.filter(other), *heads])
    found = text.str.extract_many(list(_GATES), overlapping=True).explode().drop_nulls().unique()
    return got | frozenset(found.to_list())
