# ruff: noqa: E501  (verbatim)
"""titan15's references: the `parsers.step_log` torchtitan lane as it was before titan15 (08d84af), verbatim:
`_titan_lane`, `_titan_steps` and `_titan_many` (each calling the reference `_titan_steps`). The helpers they
call are the module's own (unchanged)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import polars as pl

from forensics.schema import conform
from parsers import _step_grammars as g
from parsers.base import FileContext, ParseResult
from parsers.step_log import (
    _GATES,
    _LANE_MIN,
    _TITAN_BARE,
    _TITAN_LINE,
    _TITAN_LINE_LIT,
    _cut_last_line,
    _cut_text,
    _encode_by_null_pattern,
    _num,
    _parse,
    _rx,
)


def _titan_lane(lines: pl.Series, ctx: FileContext) -> ParseResult | None:
    """`_parse(lines, ctx)` of a log whose step lines are torchtitan's in the shape `_TITAN_LINE` (at least
    `_LANE_MIN` of them) while no other line holds a `_GATES` literal or an ANSI code; None otherwise.

    There the general reading makes one row of each such line and nothing else holds a row or event: the
    gates it finds are `step:` and `loss:`, which run the torchtitan grammar alone, on those lines alone
    (they are canonical: `_titan_values` reads their tokens); each fragment is a row of its own (one
    grammar, all anchors), whose stream is its `[rankN]:` envelope's rank (no host: the key `|N`; without
    an envelope no rank, the key `|`, unless a Composer banner gives one: then None) and whose own time is
    its `[titan]` date-time (`_TS_CANON`, `local_assumed_utc`); rows with a time inherit none, and step
    times are the timestamp deltas between consecutive rows of a rank (`_times`).

    The other lines are read by `_parse` with their own line numbers: what it understands of them
    (timestamped chatter, warnings, noise) does not depend on the step lines, which no rule spanning lines
    takes (a warning's source line is the next line, indented under its envelope). Its rows must be none
    (else None: the general reading of the whole decides). A step line whose date does not parse, whose rank
    or step is out of range or whose number reads infinite also sends the whole to the general reading.
    """
    text = lines.cast(pl.String)
    # (one line in 31 looked at first: a log with thousands of step lines has some there, unless they repeat
    # with a period that is a multiple of 31 lines; other logs pay that small scan, not one of every line; a
    # log whose step lines all miss the sample is read in full)
    if not text.gather_every(31).str.contains(_TITAN_LINE_LIT, literal=True).any():
        return None
    cand = text.str.contains(_TITAN_LINE_LIT, literal=True).fill_null(False)
    if int(cand.sum()) < _LANE_MIN:
        return None
    at = cand.arg_true()
    cand_text = text.gather(at)
    m = cand_text.str.extract_groups(_rx(_TITAN_LINE))
    miss = m.struct.field("2").is_null()
    if miss.any():  # (lines without an envelope; those with one fail that regex at their second character)
        bare = cand_text.str.extract_groups(_rx(_TITAN_BARE))
        m = pl.select(pl.when(miss).then(pl.lit(bare)).otherwise(pl.lit(m))).to_series()
        miss = m.struct.field("2").is_null()
    n_miss = int(miss.sum())
    if at.len() - n_miss < _LANE_MIN:
        return None
    if n_miss:  # (candidates of another shape: other lines)
        cand = cand.scatter(at.filter(miss), False)
        at, m = at.filter(~miss), m.filter(~miss)
    others = (~cand).arg_true()
    if others.len():
        rest_text = text.gather(others)
        bad = rest_text.str.contains_any([*_GATES, "\x1b"]) | rest_text.str.contains(_rx(g.ANSI_PASTED_RE))
        if bad.any():
            return None
    got = _titan_steps(m, pl.lit(at).cast(pl.Int64, strict=False) + ctx.first_line, None, ctx.path, ctx.node)
    if got is None:
        return None
    steps, bare = got
    if bare and others.len() and rest_text.str.contains("global rank", literal=True).any():
        return None  # (a line without an envelope takes the rank of a Composer banner above it)
    rest = None
    if others.len():
        rest = _parse(rest_text, ctx, numbers=others.cast(pl.Int64, strict=False) + ctx.first_line)
        if rest.tables["steps"].height or "events" in rest.tables:
            return None
    n_fast = at.len()
    return ParseResult(
        tables={"steps": steps},
        parsed=n_fast + (rest.parsed if rest else 0),
        unrecognized=rest.unrecognized if rest else 0,
        unrecognized_examples=rest.unrecognized_examples if rest else [],
        notes=rest.notes if rest else [],
        partial=_cut_last_line(pl.DataFrame({"text": text})),
        node=rest.node if rest else None,
    )


def _titan_steps(
    m: pl.Series, line: pl.Expr, fi: pl.Series | None, path: str | pl.Series, node: str | None | pl.Series
) -> tuple[pl.DataFrame, bool] | None:
    """The `steps` rows (conformed) of torchtitan step lines from their `_TITAN_LINE` groups `m` (the lines'
    numbers `line`), and whether some line has no envelope; None where a date does not parse, a rank or step
    is out of range or a number reads infinite. `fi`: for lines of several files, each line's file index
    (`path`, `node`: per file then), the streams being the ranks of each file."""
    f = pl.col("_m").struct.field
    floats = ("loss", "grad_norm", "memory_gib", "throughput", "tflops", "mfu_pct")
    frame = pl.DataFrame({"_m": m}) if fi is None else pl.DataFrame({"_m": m, "_fi": fi})
    v = frame.select(
        *([] if fi is None else ["_fi"]),
        line=line,
        rank=f("1").cast(pl.Int32, strict=False),
        _n=f("2").str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False, time_unit="us")
        + pl.duration(microseconds=f("3").cast(pl.Int64, strict=False) * 1000),
        step=f("4").cast(pl.Int64, strict=False),
        loss=f("5").cast(pl.Float64),
        grad_norm=f("6").cast(pl.Float64),
        memory_gib=f("7").cast(pl.Float64),
        throughput=_num(f("8")),
        tflops=f("9").cast(pl.Float64),
        mfu_pct=f("10").cast(pl.Float64),
    )
    ok = v.select(
        pl.all_horizontal(pl.col("_n", "step").null_count() == 0)
        & pl.all_horizontal(pl.col(*floats).is_infinite().any().not_())
        & (pl.col("rank").null_count() == pl.lit(m.struct.field("1").null_count(), dtype=pl.UInt32)),
        bare=pl.col("rank").is_null().any(),
    ).row(0)
    if not ok[0]:
        return None
    # step times: timestamp deltas between a rank's consecutive rows (in line order within each rank)
    grp = "rank" if fi is None else ["_fi", "rank"]
    d_ts = ((pl.col("ts") - pl.col("ts").shift(1)).dt.total_microseconds() / 1e6).over(grp)
    d_step = (pl.col("step") - pl.col("step").shift(1)).over(grp)
    v = v.with_columns(ts=pl.col("_n").dt.replace_time_zone("UTC")).with_columns(_dts=d_ts, _dst=d_step)
    from_ts = pl.when((pl.col("_dst") > 0) & (pl.col("_dts") > 0)).then(pl.col("_dts") / pl.col("_dst"))
    # (`_step_detail`: the object of the set fields, encoded once per pattern of set fields, here one or two)
    detail_fields = {c: pl.col(c) for c in ("grad_norm", "mfu_pct", "memory_gib")}
    if v.get_column("grad_norm").null_count() == 0:
        detail = v.select(pl.struct(**detail_fields).struct.json_encode()).to_series()
    else:
        detail = _encode_by_null_pattern(v, detail_fields).get_column("_enc")
    null_f, null_s = pl.lit(None, dtype=pl.Float64), pl.lit(None, dtype=pl.String)
    if fi is None:
        file_e, node_e = pl.lit(path, dtype=pl.String), pl.lit(node, dtype=pl.String)
    else:
        file_e, node_e = pl.lit(path).gather(pl.col("_fi")), pl.lit(node).gather(pl.col("_fi"))
    steps = v.select(
        "ts",
        ts_quality=pl.lit("local_assumed_utc"),
        node=node_e,
        rank=pl.col("rank"),
        step=pl.col("step"),
        step_time_s=from_ts,
        step_time_source=pl.when(from_ts.is_not_null()).then(pl.lit("ts_delta")),
        forward_s=null_f,
        backward_s=null_f,
        optimizer_s=null_f,
        comm_wait_s=null_f,
        data_s=null_f,
        throughput=pl.col("throughput"),
        throughput_unit=pl.lit("tokens/s/GPU"),
        tflops=pl.col("tflops"),
        loss=pl.col("loss"),
        phase_spread_s=null_f,
        phase_spread_name=null_s,
        framework=pl.lit("torchtitan"),
        detail=detail,
        file=file_e,
        line=pl.col("line"),
    )
    return conform(steps, "steps"), bool(ok[1])


def _titan_many(items: Sequence[tuple[pl.Series, FileContext]]) -> list[ParseResult] | None:
    """`[parse(lines, ctx) for lines, ctx in items]` when every line of every file is a torchtitan step line
    of the shape `_TITAN_LINE` (`_titan_lane` of each file, which there has no other line: one row a line,
    read off one regex capture over all the files' lines); None otherwise (or where `_titan_steps` hands a
    line back)."""
    sizes = [len(lines) for lines, _ in items]
    if not all(sizes):
        return None
    text = pl.concat([lines.cast(pl.String) for lines, _ in items], rechunk=True)
    m = text.str.extract_groups(_rx(_TITAN_LINE))
    miss = m.struct.field("2").is_null()
    if miss.any():  # (lines without an envelope; those with one fail that regex at their second character)
        bare = text.str.extract_groups(_rx(_TITAN_BARE))
        m = pl.select(pl.when(miss).then(pl.lit(bare)).otherwise(pl.lit(m))).to_series()
        if m.struct.field("2").null_count():
            return None
    k = len(items)
    spans = pl.DataFrame(
        {"s": [ctx.first_line for _, ctx in items], "n": sizes, "fi": range(k)},
        schema={"s": pl.Int64, "n": pl.Int64, "fi": pl.Int32},
    ).select(
        line=pl.int_ranges("s", pl.col("s") + pl.col("n"), dtype=pl.Int64),
        fi=pl.col("fi").repeat_by("n"),
    )
    got = _titan_steps(
        m,
        pl.lit(spans.get_column("line").explode()),
        spans.get_column("fi").explode(),
        pl.Series([ctx.path for _, ctx in items], dtype=pl.String),
        pl.Series([ctx.node for _, ctx in items], dtype=pl.String),
    )
    if got is None:
        return None
    steps = got[0]
    ends = list(itertools.accumulate(sizes))
    lasts = text.gather([e - 1 for e in ends]).to_list()
    return [
        ParseResult(
            tables={"steps": steps.slice(end - n, n)},
            parsed=n,
            unrecognized=0,
            partial=_cut_text(last),
        )
        for n, end, last in zip(sizes, ends, lasts, strict=True)
    ]
