# ruff: noqa: E501, F401  (verbatim)
"""fam14's references: the code it changed, verbatim from the commit before (ce1119d).

`parsers._mixed`: `parse`, `_step_chunk`, `_mixes`, `_on_others`, `_sparse_reach`, `_family` (and `_candidate_reach`,
`_whole`, `_both`, unchanged, so that they call the references). `parsers.nccl`: `family_rows`, `family_rows_frame`,
`_family_rows_frame`, `prepare`, `_prepare_frame`. The helpers they call are the modules' own (unchanged); `nccl`
below is the module with these references in place of its own, for the `_mixed` references' `nccl.` calls."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType, SimpleNamespace

import polars as pl

from parsers import _common, step_log
from parsers import _step_grammars as g
from parsers import nccl as _nccl
from parsers import torch_distributed as td
from parsers._common import _ANY_ENVELOPE, arx
from parsers._mixed import (
    _EDGES,
    _FAMILY_ANY,
    BLOCK_HEAD,
    BLOCK_KV,
    BLOCK_REACH,
    FAMILY_LITERALS,
    FAMILY_MARKS,
    SMALL_LINES,
    SUBSET_ROWS,
    SUBSET_SHARE,
    WRAP_HEAD,
    WRAP_REACH,
    _entry_lines,
    _false,
    _holds_any,
    _marked_any,
    _sources,
    _windows,
    has_step_lines,
)
from parsers._mixed import (
    _both as _unused_both,
)
from parsers.base import FileContext, ParseResult, numbered
from parsers.nccl import (
    _AUTOLINK,
    _COLLECTOR_TS,
    _UNDERSTOOD,
    _UNDERSTOOD_RAS,
    ALIGNED,
    COLL_GROUPS,
    FAST_LANE,
    GLOBAL_RANK_ENVELOPES,
    NCCL_START,
    FamilyRows,
    FastLane,
    _ascii_lines,
    _coll_groups,
    _CollCands,
    _CollJoinedError,
    _drop_fast,
    _empty_lane,
    _envelopes,
    _fast_lane,
    _full_frame,
    _may,
    _may_wrap,
    _nccl_rows,
    _pre_ts,
    _torch_may_hold,
    has_ras,
    join_wrapped,
    nccl_understood,
)


def family_rows(lines: pl.Series, ctx: FileContext) -> FamilyRows:
    """Read the NCCL and PyTorch-distributed lines of a column of lines, whatever else the file holds.

    This is the shared core of both parsers, and the hook for other parsers of mixed training logs (e.g.
    step logs with NCCL WARNs and watchdog timeouts): call it on the file's lines, keep the tables, and
    count a line as parsed when `understood` is true for it or your own grammar knows it.

    The plain NCCL records (most of a debug log) go through `_fast_lane`; every other line through the full
    path (`prepare`, the grammars' line-start patterns, wrap joining, torchrun blocks, PyTorch events). The
    steps that look across lines (wrap joining, torchrun blocks, `Last error:` quotes) run over every line as
    before whenever the file holds what they look for, and a fast-lane line a wrap is joined onto goes back to
    the full path.
    """
    return family_rows_frame(numbered(lines, ctx), ctx)


def family_rows_frame(
    base: pl.DataFrame, ctx: FileContext, wrap_width: Callable[[], int | None] | None = None
) -> FamilyRows:
    """`family_rows` over a frame of `line`, `text` in line order whose numbers need not follow one another:
    some of a file's lines, those in between left out (the caller makes sure that what the grammar reads
    across lines sees the same neighbours; `wrap_width` gives the whole file's wrap width).

    Lines without a non-ASCII character are read with ASCII-class regexes (`_common.arx`: the same matches,
    compiled 5-15x faster). A COLL-heavy chunk's lines holding `: opCount ` are grouped first (`_coll_groups`,
    whose regexes have no class that `arx` rewrites), which says which of them are ASCII (`_ascii_lines`)."""
    cg = _coll_groups(base) if FAST_LANE and COLL_GROUPS else None
    with _common.ascii_scope(_common._ascii or _ascii_lines(base, cg)):
        try:
            return _family_rows_frame(base, ctx, wrap_width, FAST_LANE, cg)
        except _CollJoinedError:
            return _family_rows_frame(base, ctx, wrap_width, False)


def _family_rows_frame(
    base: pl.DataFrame,
    ctx: FileContext,
    wrap_width: Callable[[], int | None] | None,
    lane: bool,
    cg: _CollCands | None = None,
) -> FamilyRows:
    fast = _fast_lane(base, ctx, cg) if lane else _empty_lane(base.height, ctx.first_line)
    nfast = fast.n
    slow = _prepare_frame(base.filter(~fast.mask) if nfast else base)
    # a line that is nothing but a paste artefact (`> ` quote) is understood as such
    artefact = (pl.col("body").str.strip_chars() == "") & (pl.col("text").str.strip_chars() != "")
    ras = has_ras(slow)
    # NCCL lines (the bulk of a debug log) are known by their prefix; the other grammars only run on the rest
    bodies = slow.get_column("body")
    slow = slow.with_columns(
        _nccl=pl.col("body").str.contains(arx(NCCL_START)).fill_null(False)
        if _may(bodies, NCCL_START)
        else pl.lit(False)
    )
    rest = slow.filter(~pl.col("_nccl"))
    if rest.height:
        understood = _UNDERSTOOD_RAS if ras else _UNDERSTOOD
        k = td.torch_understood(pl.col("body")) | artefact
        if _may(rest.get_column("body"), understood):
            k = nccl_understood(pl.col("body"), ras) | k
        if ALIGNED and rest.height == slow.height:
            # (no NCCL-prefixed line: the rest is every line, in order; nothing to join back)
            slow = slow.with_columns(known=pl.col("_nccl") | k.fill_null(False))
        else:
            rest = rest.select("line", _k=k.fill_null(False))
            slow = (
                slow.join(rest, on="line", how="left", maintain_order="left")
                .with_columns(known=pl.col("_nccl") | pl.col("_k").fill_null(False))
                .drop("_k")
            )
    else:
        slow = slow.with_columns(known=pl.col("_nccl"))
    full: pl.DataFrame | None = None
    continued = None
    if _may_wrap(slow, fast):
        full = join_wrapped(_full_frame(slow, fast), wrap_width)
        if nfast:
            # a fast-lane record a wrapped tail was joined onto is read by the full path
            joined = full.filter(fast.mask & (pl.col("body") != pl.col("_fbody"))).get_column("line")
            if len(joined):
                fast = _drop_fast(fast, joined, base.get_column("line"))
        full = full.drop("_fbody")
        slow = full.filter(~fast.mask) if nfast else full
        continued = slow.filter(pl.col("cont")).get_column("line")
    else:
        slow = slow.with_columns(cont=pl.lit(False))
    fast_hits = fast.hits
    body = pl.col("body")
    root_cause = (
        body.str.contains(arx(td.ROOT_CAUSE_RE))
        if _may(slow.get_column("body"), td.ROOT_CAUSE_RE)
        else pl.lit(False)
    )
    blocks = bool(
        slow.select(
            (
                body.str.contains(td.RESULT_HEAD_TEXT, literal=True)
                | body.str.contains("launch configs:", literal=True)
                | root_cause
            ).any()
        ).item()
    ) or bool(
        fast_hits.select(
            (
                pl.col("text").str.contains(td.RESULT_HEAD_TEXT, literal=True)
                | pl.col("text").str.contains("launch configs:", literal=True)
            ).any()
        ).item()
    )
    last_err = bool(slow.select(body.str.contains(td.LAST_ERROR_TEXT, literal=True).any()).item()) or bool(
        fast_hits.select(pl.col("text").str.contains(td.LAST_ERROR_TEXT, literal=True).any()).item()
    )
    td_frame = slow
    last_rows = None
    if blocks or last_err:
        if full is None:
            full = _full_frame(slow, fast).drop("_fbody").with_columns(cont=pl.lit(False))
        if blocks:
            # torchrun/ChildFailedError blocks: runs over every line (an NCCL line ends a run)
            full = td.mark_blocks(full)
        if last_err:
            full = full.with_columns(_last_err=td.after_last_error(full))
            last_rows = full.filter(pl.col("_last_err"))
        keep = ~fast.mask
        if blocks:
            keep = keep | full.get_column("_block").is_not_null()
        td_frame = full.filter(keep) if nfast else full
        slow = full.filter(~fast.mask) if nfast else full
    if not last_err:
        slow = slow.with_columns(_last_err=pl.lit(False))
    parts, notes, hosts, nccl_lines, _keyed = _nccl_rows(slow, fast, ctx, ras)
    if _torch_may_hold(td_frame, blocks):
        torch_ev, torch_ok = td.torch_events(td_frame, ctx)
        if torch_ev.height:
            parts["events"].append(torch_ev)
    else:
        torch_ok = pl.repeat(False, td_frame.height, dtype=pl.Boolean, eager=True).alias("_ok")
    if last_rows is not None:
        last = td.last_error_events(last_rows, ctx)
        if last is not None:
            parts["events"].append(last)
    if ALIGNED and (nfast == 0 or not (blocks or last_err)):
        # (the PyTorch grammar read the lines of `slow`, in order: its result is per line of `slow`)
        with_ok = slow.with_columns(_ok=torch_ok)
    else:
        ok = td_frame.select("line", _ok=torch_ok)
        with_ok = slow.join(ok, on="line", how="left", maintain_order="left")
    slow_ok = (
        with_ok.select(
            pl.col("known")
            | pl.col("cont")
            | pl.col("_ok").fill_null(False)
            | pl.col("_last_err")
            | pl.col("line").is_in(nccl_lines.implode())
        )
        .to_series()
    )
    if nfast:
        understood = pl.repeat(True, base.height, dtype=pl.Boolean, eager=True).alias("known")
        understood = understood.scatter((~fast.mask).arg_true(), slow_ok) if len(slow_ok) else understood
    else:
        understood = slow_ok
    tables: dict[str, pl.DataFrame] = {}
    for name, dfs in parts.items():
        dfs = [d for d in dfs if d.height]
        if not dfs:
            continue
        df = pl.concat(dfs, how="diagonal_relaxed")
        if name == "inventory":
            df = df.unique(
                subset=["node", "component", "device", "attribute", "value"],
                keep="first",
                maintain_order=True,
            )
        tables[name] = df
    return FamilyRows(
        tables=tables,
        understood=understood.fill_null(False).alias("known"),
        notes=notes,
        hosts=hosts,
        fast=fast.mask if fast.n else None,
        whole=ras,
        continued=continued,
    )


def prepare(lines: pl.Series, ctx: FileContext) -> pl.DataFrame:
    """Number the lines and strip paste artefacts, collector timestamps and launcher envelopes.

    Returns a frame with line, text (verbatim), body (what the grammars read), env_rank, env_rank_source,
    env_host, env_pid, pre_ts, pre_ts_quality, known (set later), cont (False until `join_wrapped`).
    """
    return _prepare_frame(numbered(lines, ctx))


def _prepare_frame(frame: pl.DataFrame) -> pl.DataFrame:
    """`prepare` on a frame of line, text (a subset of a file's lines keeps its line numbers). Steps that
    cannot change any line (no link, quote or collector timestamp; no envelope host) are skipped."""
    texts = frame.get_column("text")
    t = pl.col("text").fill_null("")
    if texts.str.contains("](http", literal=True).any():
        t = (
            pl.when(t.str.contains("](http", literal=True))
            .then(t.str.replace_all(arx(_AUTOLINK), "$1"))
            .otherwise(t)
        )
    frame = frame.with_columns(_b=t)
    if frame.get_column("_b").str.starts_with(">").any():
        frame = frame.with_columns(_b=pl.col("_b").str.replace(arx(r"^> ?"), ""))
    ts = _may(frame.get_column("_b"), _COLLECTOR_TS) and bool(
        frame.select(pl.col("_b").str.contains(arx(_COLLECTOR_TS)).any()).item()
    )
    if ts:
        ts_raw = pl.col("_b").str.extract_groups(arx(_COLLECTOR_TS))
        frame = frame.with_columns(_tsg=ts_raw).with_columns(
            _b=pl.when(pl.col("_tsg").struct.field("ts").is_not_null())
            .then(pl.col("_b").str.replace(arx(_COLLECTOR_TS), ""))
            .otherwise(pl.col("_b"))
        )
    if not _may(frame.get_column("_b"), _ANY_ENVELOPE):
        # no line can open with a launcher envelope: what `envelope_struct` gives for such lines
        frame = frame.with_columns(
            body=pl.col("_b"),
            env_rank=pl.lit(None, dtype=pl.Int32),
            env_rank_source=pl.lit(None, dtype=pl.String),
            env_host=pl.lit(None, dtype=pl.String),
            env_pid=pl.lit(None, dtype=pl.Int64),
            env_global_rank=pl.lit(None, dtype=pl.Int32),
        )
        if not ts:
            return frame.drop("_b").with_columns(
                pre_ts=pl.lit(None, dtype=pl.Datetime("us", "UTC")),
                pre_ts_quality=pl.lit(None, dtype=pl.String),
            )
        return _pre_ts(frame)
    frame = frame.with_columns(_env=_envelopes(frame.get_column("_b")))
    env = {name: pl.col("_env").struct.field(name) for name in ("rest", "rank", "rank_source", "host", "pid")}
    if frame.select(env["host"].is_not_null().any()).item():
        is_ip = env["host"].str.contains(arx(r"^(?:\d{1,3}\.){3}\d{1,3}$"))
        # short host names as NCCL prints them; IPs (pdsh) stay whole
        env_host = pl.when(is_ip).then(env["host"]).otherwise(env["host"].str.split(".").list.first())
    else:
        env_host = pl.lit(None, dtype=pl.String)
    frame = frame.with_columns(
        body=env["rest"],
        env_rank=env["rank"],
        env_rank_source=env["rank_source"],
        env_host=env_host,
        env_pid=env["pid"],
    ).drop("_env")
    # ranks that prefixes state globally (c10 `[rankN]:`, Open MPI, Lightning); torchrun `[defaultN]:` is local
    frame = frame.with_columns(
        env_global_rank=pl.when(pl.col("env_rank_source").is_in(list(GLOBAL_RANK_ENVELOPES))).then(
            pl.col("env_rank")
        )
    )
    if not ts:
        return frame.drop("_b").with_columns(
            pre_ts=pl.lit(None, dtype=pl.Datetime("us", "UTC")), pre_ts_quality=pl.lit(None, dtype=pl.String)
        )
    return _pre_ts(frame)



nccl = SimpleNamespace(**{**vars(_nccl), 'family_rows': family_rows, 'family_rows_frame': family_rows_frame})
"""`parsers.nccl` with the references above in its place."""


def parse(parser: ModuleType, lines: pl.Series, ctx: FileContext) -> ParseResult:
    """`parser.parse(lines, ctx)`, or both grammars when a training-stdout chunk mixes them."""
    if parser is step_log and len(lines) >= step_log._MEG_MIN:
        return _step_chunk(lines, ctx)
    both, lit = _mixes(parser, lines)
    return _both(lines, ctx, lit) if both else parser.parse(lines, ctx)


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


def _mixes(
    parser: ModuleType, lines: pl.Series, skip: pl.Series | None = None
) -> tuple[bool, pl.Series | None]:
    """Whether `lines` of `parser`'s format also hold the other grammar of training stdout (and, for a
    training log, which lines hold a family literal, for `_both`; `skip`: lines known to hold none)."""
    if parser is step_log:
        if len(lines) <= SMALL_LINES and not lines.null_count():
            # a small chunk: the marks looked for in its text (an automaton of all the literals costs more)
            text = "\n".join(lines.to_list())
            if not any(mark in text for mark in FAMILY_MARKS):
                return False, None
        # `has_family_lines`, over the lines holding a family literal only (each line with a mark is one)
        lit = _on_others(lines, skip, lambda x: _holds_any(x, FAMILY_LITERALS, _FAMILY_ANY).fill_null(False))
        at = lit.arg_true()
        return _marked_any(lines, at), lit
    if parser is nccl or (parser is td and td._dump_span(lines) is None):
        return has_step_lines(lines), None
    return False, None


def _on_others(lines: pl.Series, skip: pl.Series | None, test: Callable[[pl.Series], pl.Series]) -> pl.Series:
    """`test(lines)` (a Boolean per line, no null), worked out on the lines not in `skip` (ascending line
    numbers, or None) only: False on those."""
    if skip is None or not skip.len():
        return test(lines)
    n = len(lines)
    others = step_log.other_lines(n, skip)
    return _false(n).scatter(others, test(lines.gather(others)))


def _candidate_reach(at: pl.Series, start: pl.Series, carry: pl.Series) -> pl.Series:
    """`_sparse_reach(.., start, carry)`'s closure (no limit) over a whole chunk, when every start and every
    carrying line is one of the lines `at`
    (ascending; `start`, `carry`: their values, not null): the line numbers it reaches (the last may be the
    line after the chunk). A chain runs over consecutive lines of `at`, then reaches one line more when its
    last line carries."""
    got, _ = _sparse_reach(at, start, carry)
    on = at.filter(carry)
    return pl.concat([got, got.filter(got.is_in(on.implode())) + 1])


def _sparse_reach(
    pos: pl.Series, start: pl.Series, carry: pl.Series, limit: int | None = None
) -> tuple[pl.Series, pl.Series]:
    """The closure `x[j] = start[j] or (x[j-1] and carry[j-1])`, at most `limit` lines after its latest start,
    over the lines `pos` only (ascending line numbers; `start`, `carry`: their values; a null `carry`
    carries but cuts nothing): (the line numbers it reaches; those where the limit cuts it short). Exact
    when `pos` holds every start and, for every line it reaches, each line from its latest start to it
    (`_windows` of the starts): a gap in `pos` breaks the closure, as a line of the gap would (checked
    against the closure over every line in tests/parsers/test_mixed_fam_reach.py)."""
    i = pl.col("pos")
    step = (i - i.shift(1)) == 1
    last = pl.when("start").then(i).forward_fill()
    run = pl.when(~(pl.col("carry").shift(1).fill_null(True) & step).fill_null(False)).then(i).forward_fill()
    inside = (last >= run).fill_null(False)
    if limit is None:
        cut = pl.lit(False)
    else:
        cut = inside & (i - last == limit) & pl.col("carry").fill_null(False)
        inside = inside & (i - last <= limit)
    f = pl.DataFrame({"pos": pos.cast(pl.Int64), "start": start, "carry": carry})
    f = f.select(k=inside, cut=cut, pos=i)
    return f.filter("k").get_column("pos"), f.filter("cut").get_column("pos")


def _family(
    lines: pl.Series,
    ctx: FileContext,
    lit: pl.Series | None = None,
    ascii: bool = False,
    skip: pl.Series | None = None,
) -> tuple[nccl.FamilyRows, int]:
    """`nccl.family_rows(lines, ctx)` and the number of non-blank lines it understood, at a cost that follows
    the number of family lines.

    The grammar reads the candidate lines (`FAMILY_LITERALS`, `FAMILY_SOURCES`, `FAMILY_ENDS`,
    `ONLY_PREFIXES`: every line it reads on its own is one) and the lines it may read with them, transitively:
    after a line a wrap may be joined to (`WRAP_HEAD`), up to `WRAP_REACH` lines that follow one of at least
    80 characters (the shortest a wrap joins); after a `File "` traceback line, its source line, the NCCL
    records before it included (the PyTorch grammar looks back past those). Each run of left-out lines is
    replaced by one blank line (its last): a blank line starts no wrap and is no traceback line, as none of
    the left-out lines is to the grammar. The wrap width is the whole chunk's. When the candidates hold a
    record read across more lines (torchrun block, `Last error:` quote, ncclras or torchfrtrace report), or
    are most of the chunk, the grammar reads every line. What is read with the candidates is worked out on
    the lines around them only (`_sparse_reach`), not over the whole chunk. `skip`: lines that are no
    candidate (`_entry_lines`), left out of the scans.
    """
    text = pl.col("text")
    n = len(lines)
    rx = g.ascii_classes if ascii else str  # (`ascii`: the lines hold no non-ASCII character)
    if lit is None:  # (`lit`: the `FAMILY_LITERALS` test of each line, when the caller made it)
        lit = _on_others(lines, skip, lambda x: _holds_any(x, FAMILY_LITERALS, _FAMILY_ANY).fill_null(False))
    c = lit | _on_others(lines, skip, lambda x: _sources(x, rx) | x.str.contains(rx(_EDGES)).fill_null(False))
    n_cand = int(c.sum())
    if n_cand == 0:  # no line the grammar reads
        return nccl.FamilyRows(tables={}, understood=c.alias("c"), notes=[], hosts=[]), 0
    if n_cand > SUBSET_SHARE * n:
        # (the choice of the path, a cost rule, follows the parser's: `SUBSET_ROWS`, added since)
        runs = int((~c & c.shift(1, fill_value=True)).sum())
        if n_cand + runs > SUBSET_ROWS * n:
            return _whole(lines, ctx)
    at = c.arg_true().cast(pl.Int64)
    kinds = (
        lines.gather(at)
        .to_frame("text")
        .with_columns(
            at=at,
            wrap=text.str.contains(rx(WRAP_HEAD)).fill_null(False),
            tb=text.str.contains('File "', literal=True).fill_null(False),
            le=text.str.contains(td.LAST_ERROR_TEXT, literal=True).fill_null(False),
            bh=text.str.contains(rx(BLOCK_HEAD)).fill_null(False),
        )
    )
    # (a kind no candidate line is reaches no line: its closure is empty, not worked out)
    has = kinds.select(pl.exclude("at", "text").any()).row(0, named=True)
    kept = [at]
    empty = at.clear()
    wrap_cut, block_cut = empty, empty
    if has["wrap"]:
        heads = kinds.filter("wrap").get_column("at")
        pos = _windows(heads, n, WRAP_REACH)
        carry = lines.gather(pos).str.len_chars() >= 80
        got, wrap_cut = _sparse_reach(pos, pos.is_in(heads.implode()), carry, WRAP_REACH)
        kept.append(got)
    if has["tb"]:
        # a carrying line (a `File "` or ` NCCL ` line) holds a family literal: it is a candidate
        carry = kinds.select(pl.col("tb") | text.str.contains(" NCCL ", literal=True).fill_null(False))
        kept.append(_candidate_reach(at, kinds.get_column("tb"), carry.to_series()))
    if has["le"]:
        le = kinds.filter("le").get_column("at")
        kept += [le, le + 1]
    if has["bh"]:
        heads = kinds.filter("bh").get_column("at")
        pos = _windows(heads, n, BLOCK_REACH)
        bh = pos.is_in(heads.implode())
        kv = lines.gather(pos).str.contains(rx(BLOCK_KV)).fill_null(False)
        got, block_cut = _sparse_reach(pos, bh, bh | kv, BLOCK_REACH)
        kept.append(got)
    keep = pl.concat(kept).unique().sort() if len(kept) > 1 else at
    keep = keep.filter(keep < n)
    # each kept line and the line before it (a blank line standing for a run of left-out lines)
    rows = pl.concat([keep, keep - 1]).unique().sort()
    rows = rows.filter(rows >= 0)
    base = pl.DataFrame(
        {
            "line": rows + ctx.first_line,
            "text": lines.cast(pl.String).gather(rows),
            "_k": rows.is_in(keep.implode()),
        }
    )
    base = base.select("line", text=pl.when("_k").then(text).otherwise(pl.lit("")))
    if base.select(text.str.contains("Not all ranks joining collective", literal=True).any()).item():
        return _whole(lines, ctx)
    fam = nccl.family_rows_frame(base, ctx, wrap_width=lambda: nccl._wrap_width(lines, ascii))
    if fam.whole:
        return _whole(lines, ctx)
    if fam.continued is not None and len(fam.continued) and len(wrap_cut):
        if (wrap_cut + ctx.first_line).is_in(fam.continued.implode()).any():
            return _whole(lines, ctx)  # a wrapped record may go on past the lines read
    understood = _false(n).alias("known").scatter(rows, fam.understood.fill_null(False))
    if len(block_cut) and understood.gather(block_cut).any():
        return _whole(lines, ctx)  # a block may go on past the lines read
    texts = base.get_column("text")
    n_family = int((fam.understood.fill_null(False) & (texts.str.strip_chars().str.len_bytes() > 0)).sum())
    family = nccl.FamilyRows(tables=fam.tables, understood=understood, notes=fam.notes, hosts=fam.hosts)
    return family, n_family


def _whole(lines: pl.Series, ctx: FileContext) -> tuple[nccl.FamilyRows, int]:
    family = nccl.family_rows(lines, ctx)
    understood = family.understood.fill_null(False)
    return family, int((understood & (lines.str.strip_chars().str.len_bytes() > 0)).sum())


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

