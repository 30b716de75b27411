# ruff: noqa: E501  (verbatim)
"""hf12's references: the `parsers.step_log` code it changed, verbatim from the commit before (3cdd8b4):
`_strip_envelopes` (each line's stack of envelopes found by one `_ENV_STACK` extract, a regex of its own that
costs ~9 ms to compile on non-ASCII lines, again on every range: polars keeps 32 compiled regexes per thread
and a range's reading uses ~80) and `_segments` (the five flags read by a pass each over the lines). The
helpers they call are the module's own (unchanged)."""

from __future__ import annotations

import polars as pl

from parsers import _step_grammars as g
from parsers.base import FileContext
from parsers.step_log import (  # noqa: F401
    _ENV_STACK,
    _LANE_MIN,
    _Batch,
    _nulls,
    _rx,
    _strip_passes,
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
