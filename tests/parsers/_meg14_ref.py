# ruff: noqa: E501  (verbatim)
"""meg14's references: the `parsers.step_log` code it changed, verbatim from the commit before (ce1119d):
`_lane_entries` and `_megatron_lane`. The helpers they call are the module's own (unchanged)."""

from __future__ import annotations

import polars as pl

from forensics.schema import UTC_US, conform
from parsers import _step_grammars as g
from parsers.base import FileContext, ParseResult
from parsers.step_log import (
    _BLOCK_ENTRY,
    _ENV_RE,
    _ENV_STACK,
    _FRAG,
    _GATES,
    _MEG_E_LIT,
    _MEG_I_LIT,
    _MEG_MIN,
    _SRUN,
    _TIMER,
    ATTACH_GAP,
    MegEntries,
    _cut_last_line,
    _finish,
    _meg_entries_heads,
    _meg_iterations,
    _megatron_frag,
    _parse,
    _rx,
    _strip_passes,
    _timer,
    _timer_lists,
    _unit_entries,
    other_lines,
)

_MEG_H_LIT = ": (min, max) time across ranks (ms):"
_MEG_H = r"^\s*([0-9]{1,9}): \(min, max\) time across ranks \(ms\):$"
"""(step_log's as they were: srun envelope required)"""


def _lane_entries(text: pl.Series) -> MegEntries:
    """`meg_entry_lines` of the String lines `text`, without the test."""
    ce = text.str.contains(_MEG_E_LIT, literal=True).arg_true()
    me, heads = _meg_entries_heads(text.gather(ce))
    ok_e = me.get_column("rank").is_not_null() & (me.get_column("rank") != -1)  # (-1 since: no srun envelope)
    return MegEntries(ce.filter(ok_e), me.filter(ok_e), heads)


def _megatron_lane(lines: pl.Series, ctx: FileContext, entries: MegEntries | None = None) -> ParseResult | None:
    """`_parse(lines, ctx)` of a Megatron log under `srun -l` whose iteration lines are each followed in their
    stream (srun rank) by a `(min, max) time across ranks` block (`_MEG_I`, `_MEG_H`, `_MEG_E`; at least
    `_MEG_MIN` such units); None otherwise (the caller reads the whole by `_parse`).

    A unit is an iteration line, the next line of its stream a header at most `ATTACH_GAP` lines below it,
    and the run of entry lines of the stream after that (or an iteration line that ends its stream): what
    the general reading makes one row of (the iteration fragment the anchor, the block attached to it). A
    line's stream is the rank of its innermost envelope (`_strip_passes` on the lines with one inside the
    srun one; one with a host is another stream; one the triage of `_prepare` leaves out is in none). The
    values come from `_megatron_frag` (the general code) on the iteration lines, the timers from the
    entries' groups, and `_finish` does the rest.

    The other lines are read by `_parse` with their own line numbers (as `_titan_lane`); the whole goes back
    to the general reading when they hold a row, a carriage return, an ANSI code or a Composer banner, when
    a line of a unit's stream at most `ATTACH_GAP` lines below its iteration line holds a gate literal (a
    breakdown that could attach to it), or when the line of its stream right after a unit is a timer entry
    (which would continue its block). `entries`: `meg_entry_lines(lines)` when the caller made it.
    """
    text = lines.cast(pl.String)
    if not text.gather_every(31).str.contains(_MEG_H_LIT, literal=True).any():
        return None
    n = text.len()
    ce, me = entries[:2] if entries is not None else _lane_entries(text)[:2]
    # (the iteration lines and headers looked for among the other lines: an entry line holds no `]` and ends
    # with `)`; most lines are entries)
    rest = other_lines(n, ce) if ce.len() else None
    r_text = text.gather(rest) if rest is not None else text
    ci = r_text.str.contains(_MEG_I_LIT, literal=True).arg_true()
    if rest is not None:
        ci = rest.gather(ci)
    if ci.len() < _MEG_MIN:
        return None
    ti = text.gather(ci)
    mi = _meg_iterations(ti)
    ok_i = mi.struct.field("1").is_not_null() & ~ti.str.contains("global rank", literal=True)
    ci, mi = ci.filter(ok_i), mi.filter(ok_i)
    if ci.len() < _MEG_MIN:
        return None
    ch = r_text.str.ends_with(_MEG_H_LIT).arg_true()
    if rest is not None:
        ch = rest.gather(ch)
    mh = text.gather(ch).str.extract(_rx(_MEG_H), 1)
    ch, mh = ch.filter(mh.is_not_null()), mh.drop_nulls()
    typ = pl.repeat(0, n, dtype=pl.Int8, eager=True)
    typ = typ.scatter(ci, 1).scatter(ch, 2).scatter(ce, 3)
    # the stream (srun rank) of each line: lane-shaped lines from their groups, the others from their envelope
    others = (typ == 0).arg_true()
    o_text = text.gather(others)
    # (the lane-shaped lines hold no carriage return or escape: their regexes do not take one)
    if o_text.str.contains_any(["\r", "\x1b", "global rank"]).any():
        return None
    if o_text.str.contains(_rx(g.ANSI_PASTED_RE)).any():
        return None
    pref = o_text.str.extract(_rx(_SRUN), 0)
    content = o_text.str.slice(pref.str.len_chars().fill_null(0))
    o_rank = pref.str.strip_chars().str.strip_suffix(":").cast(pl.Int32, strict=False)
    lane_ranks = mi.struct.field("1").cast(pl.Int32, strict=False).unique()
    nested = content.str.contains(_rx(_ENV_RE)).arg_true()
    if nested.len():  # (the innermost envelope's rank and host make the stream key: a host, another stream)
        inner = _strip_passes(pl.DataFrame({"rest": content.gather(nested)}))
        r_in = pl.select(
            pl.when(pl.lit(inner.get_column("host")).is_null()).then(
                pl.coalesce(pl.lit(inner.get_column("env_rank")), pl.lit(o_rank.gather(nested)))
            )
        ).to_series()
        o_rank = o_rank.scatter(nested, r_in)
    # (a line the triage of `_prepare` leaves out is in no stream: blank text, key `|`)
    triaged = (
        o_text.str.contains_any(list(g.TRIAGE_LITERALS))
        | o_text.str.contains(_rx(g.TRIAGE_DATE_RE))
        | o_text.str.strip_chars_end().str.ends_with(":")
    )
    o_rank = pl.select(pl.when(pl.lit(triaged)).then(pl.lit(o_rank))).to_series()
    rank = pl.repeat(None, n, dtype=pl.Int32, eager=True)
    rank = rank.scatter(others, o_rank).scatter(ci, mi.struct.field("1").cast(pl.Int32, strict=False))
    rank = rank.scatter(ch, mh.cast(pl.Int32, strict=False)).scatter(ce, me.get_column("rank"))
    # lines of the unit streams, in line order: which form units
    s = (
        pl.DataFrame({"pos": pl.int_range(n, dtype=pl.Int64, eager=True), "r": rank, "t": typ})
        .filter(pl.col("r").is_in(lane_ranks.implode()))
    )
    t, pos = pl.col("t"), pl.col("pos")

    def ov(e: pl.Expr) -> pl.Expr:  # (by stream; one stream, the usual case: no window)
        return e if lane_ranks.len() == 1 else e.over("r")

    s = s.with_columns(
        nt=ov(t.shift(-1)),
        npos=ov(pos.shift(-1)),
        pt=ov(t.shift(1)),
        ppos=ov(pos.shift(1)),
    )
    # (an iteration line that is the last line of its stream is a unit too: a row without timers)
    vi = (t == 1) & (((pl.col("nt") == 2) & ((pl.col("npos") - pos) <= ATTACH_GAP)) | pl.col("nt").is_null())
    vh = (t == 2) & (pl.col("pt") == 1) & ((pos - pl.col("ppos")) <= ATTACH_GAP)
    s = s.with_columns(vi=vi.fill_null(False), vh=vh.fill_null(False))
    head_h = ov(pl.when(t != 3).then(pl.col("vh")).forward_fill())
    s = s.with_columns(inu=pl.col("vi") | pl.col("vh") | ((t == 3) & head_h.fill_null(False)))
    # (`k`: the unit of a line, units numbered in line order of their iteration lines, over all streams: the
    # number of the unit's iteration line, then carried down its stream)
    s = s.with_columns(_u=pl.when(pl.col("vi")).then(pl.col("vi").cum_sum().cast(pl.Int64, strict=False) - 1))
    s = s.with_columns(
        last_i=ov(pl.when(pl.col("vi")).then(pos).forward_fill()),
        after_unit=(~pl.col("inu") & ov(pl.col("inu").shift(1))).fill_null(False),
        k=ov(pl.col("_u").forward_fill()),
    )
    n_units = int(s.get_column("vi").sum())
    if n_units < _MEG_MIN:
        return None
    # the other lines of the unit streams: near an iteration line (could attach) or right after a unit
    near = s.filter(~pl.col("inu") & ((pos - pl.col("last_i")) <= ATTACH_GAP)).get_column("pos")
    if near.len() and text.gather(near).str.contains_any(list(_GATES)).any():
        return None
    after = s.filter(pl.col("after_unit")).get_column("pos")
    if after.len():
        c = text.gather(after).str.replace(_rx(_ENV_STACK), "")
        if c.str.contains(_rx(_BLOCK_ENTRY)).any():
            return None
    inu = s.filter(pl.col("inu")).select("pos", "t", "k")
    i_pos = inu.filter(pl.col("t") == 1).get_column("pos")
    ent = inu.filter(pl.col("t") == 3)
    em = me.drop("rank")
    if ent.height < ce.len():  # (else the entries are all the lane-shaped ones, in the same order)
        em = _unit_entries(em, ce, ent.get_column("pos"), n)
    if em.get_column("name").is_in(list(g.NON_STEP_TIMERS)).any():
        return None
    tm = em.select(
        k=ent.get_column("k"),
        _t=_timer(name=pl.col("name"), min_ms=pl.col("min_ms"), max_ms=pl.col("max_ms")),
    )
    tl = _timer_lists(tm)
    # the iteration fragments, by the general code
    im = mi if i_pos.len() == ci.len() else mi.gather(ci.search_sorted(i_pos))
    base = pl.DataFrame({"m": im}).select(
        line=pl.lit(i_pos) + ctx.first_line,
        seg=pl.lit(0, dtype=pl.Int64),
        key=pl.lit("|") + pl.col("m").struct.field("1").cast(pl.Int32, strict=False).cast(pl.String),
        host=pl.lit(None, dtype=pl.String),
        rank=pl.col("m").struct.field("1").cast(pl.Int32, strict=False),
        ts=pl.col("m").struct.field("3").str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False, time_unit="us")
        .dt.replace_time_zone("UTC"),
        ts_quality=pl.lit("local_assumed_utc"),
        text=pl.col("m").struct.field("2"),
        m=pl.struct(step=pl.col("m").struct.field("4"), total=pl.col("m").struct.field("5")),
    )
    if base.get_column("ts").null_count():
        return None
    fr = _megatron_frag(base)
    if fr.select(pl.col("step_time_s").null_count() + pl.col("step").null_count()).item():
        return None
    skip = ("line", "seg", "key", "timers", "anchor", "standalone", "attach_line")
    value_cols = [c for c in _FRAG if c not in skip]
    fr = fr.drop("timers").with_columns(k=pl.int_range(fr.height, dtype=pl.Int64))
    if tl.height == fr.height and tl.get_column("k").equals(fr.get_column("k")):  # (every unit has timers)
        fr = fr.with_columns(timers=tl.get_column("timers"))
    else:
        fr = fr.join(tl, on="k", how="left", maintain_order="left")
    rows = fr.select(
        pl.int_range(1, fr.height + 1, dtype=pl.UInt32).alias("group"),
        "line",
        "key",
        *[c for c in value_cols if c != "rank"],
        orphan_group=pl.lit(False),
        rank=pl.col("rank"),
        timers=pl.col("timers").fill_null(pl.lit([], dtype=pl.List(_TIMER))),
    )
    if lane_ranks.len() > 1:  # (one stream: one key, the rows in line order already)
        rows = rows.sort("key", "line", maintain_order=True)
    # the other lines
    lane_pos = inu.get_column("pos").sort()
    # (blank lines, which count as neither, left out when every other line without an srun envelope is
    # blank too: then they alone make the stream without envelope, `|`, and no rule takes them; `_mixed`
    # blanks the lines it gives another parser, most of the others in a log with NCCL lines)
    blank = ~o_text.str.contains(_rx(r"\S"))
    drop = bool(blank.any()) and not bool((pref.is_null() & ~blank).any())
    rest_pos = (others.filter(~blank) if drop else others).cast(pl.Int64, strict=False)
    if others.len() + lane_pos.len() != n:  # (lane-shaped lines outside a unit: read with the others)
        outside = (typ.clone().scatter(lane_pos, 0) != 0).arg_true().cast(pl.Int64, strict=False)
        rest_pos = pl.concat([rest_pos, outside]).sort()
    rest = None
    if rest_pos.len():
        rest = _parse(text.gather(rest_pos), ctx, numbers=rest_pos + ctx.first_line)
        if rest.tables["steps"].height:
            return None
    stub = pl.DataFrame(schema={"key": pl.String, "line": pl.Int64, "ts": UTC_US})
    steps = _finish(rows, stub, pl.coalesce(pl.col("host"), pl.lit(ctx.node)), pl.lit(ctx.path), times=False)
    tables = {"steps": conform(steps, "steps")}
    if rest is not None and "events" in rest.tables:
        tables["events"] = rest.tables["events"]
    return ParseResult(
        tables=tables,
        parsed=lane_pos.len() + (rest.parsed if rest else 0),
        unrecognized=rest.unrecognized if rest else 0,
        unrecognized_examples=rest.unrecognized_examples if rest else [],
        notes=rest.notes if rest else [],
        partial=_cut_last_line(pl.DataFrame({"text": text})),
        node=rest.node if rest else None,
    )
