# ruff: noqa: E501  (verbatim)
"""meg11's references: the `parsers._mixed` and `parsers.step_log` code it changed, verbatim from the commit
before (53b04f7): `_mixed.parse` and what it called (`_mixes`, `_family`, `_both`: every line scanned for the
NCCL/PyTorch lines' literals, then the step-log parser finding the Megatron timer entries again), and
`step_log._meg_entries` (the entries cut by `str.splitn`, the heads' values joined), `step_log._phases`
(the timers' lengths taken out of the frame first) and `step_log._rows_gathered` (every column gathered for
the rows of single fragments). The helpers they call are the modules' own (unchanged)."""

from __future__ import annotations

from types import ModuleType

import polars as pl

from parsers import _step_grammars as g
from parsers import nccl, step_log
from parsers import torch_distributed as td
from parsers._mixed import (  # noqa: F401
    _EDGES,
    _FAMILY_ANY,
    _MARKS_ANY,
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
    _candidate_reach,
    _false,
    _holds_any,
    _marked_any,
    _sources,
    _sparse_reach,
    _whole,
    _windows,
    has_step_lines,
)
from parsers.base import FileContext, ParseResult
from parsers.step_log import (
    _MEG_E_TAIL,
    _PROGRESS,
    _ROW_COLS,
    _TIMER,
    _group_rows,
    _grouped,
    _kept,
    _phases_all,
    _rows_of_singles,
    _rx,
    _sort_frags,
    _sort_rows,
    _with_timers,
)

_MEG_E_HEAD = r"^\s*([0-9]{1,9}):  +([A-Za-z0-9_][A-Za-z0-9_/-]*) \.\.+$"
"""(step_log's regex as it was: srun envelope required)"""

def parse(parser: ModuleType, lines: pl.Series, ctx: FileContext) -> ParseResult:
    """`parser.parse(lines, ctx)`, or both grammars when a training-stdout chunk mixes them."""
    both, lit = _mixes(parser, lines)
    return _both(lines, ctx, lit) if both else parser.parse(lines, ctx)


def _mixes(parser: ModuleType, lines: pl.Series) -> tuple[bool, pl.Series | None]:
    """Whether `lines` of `parser`'s format also hold the other grammar of training stdout (and, for a
    training log, which lines hold a family literal, for `_both`)."""
    if parser is step_log:
        if len(lines) <= SMALL_LINES and not lines.null_count():
            # a small chunk: the marks looked for in its text (an automaton of all the literals costs more)
            text = "\n".join(lines.to_list())
            if not any(mark in text for mark in FAMILY_MARKS):
                return False, None
        # `has_family_lines`, over the lines holding a family literal only (each line with a mark is one)
        lit = _holds_any(lines, FAMILY_LITERALS, _FAMILY_ANY).fill_null(False)
        at = lit.arg_true()
        return _marked_any(lines, at), lit
    if parser is nccl or (parser is td and td._dump_span(lines) is None):
        return has_step_lines(lines), None
    return False, None


def _family(
    lines: pl.Series, ctx: FileContext, lit: pl.Series | None = None, ascii: bool = False
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
    the lines around them only (`_sparse_reach`), not over the whole chunk.
    """
    text = pl.col("text")
    n = len(lines)
    rx = g.ascii_classes if ascii else str  # (`ascii`: the lines hold no non-ASCII character)
    if lit is None:  # (`lit`: the `FAMILY_LITERALS` test of each line, when the caller made it)
        lit = _holds_any(lines, FAMILY_LITERALS, _FAMILY_ANY).fill_null(False)
    c = (lit | _sources(lines, rx) | lines.str.contains(rx(_EDGES))).fill_null(False)
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


def _both(lines: pl.Series, ctx: FileContext, lit: pl.Series | None = None) -> ParseResult:
    # (ASCII lines: the regexes run with ASCII classes, here and in the step-log parser: `step_log._ascii`)
    ascii = step_log.is_ascii(lines)
    family, n_family = _family(lines, ctx, lit, ascii)
    with step_log.ascii_scope(ascii):
        if n_family == 0:
            return step_log.parse(lines, ctx)
        # the family's lines blanked (written in place in a copy: a select over every line costs ~8x more)
        blanked = lines.clone().scatter(family.understood.fill_null(False).arg_true(), "").alias("literal")
        rest = step_log.parse(blanked, ctx)
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


def _meg_entries(text: pl.Series) -> pl.DataFrame:
    """The groups of `_MEG_E` on each line of `text` (columns `rank` Int32, `name`, `min_ms`, `max_ms`
    Float64, all null where it does not match), as `text.str.extract_groups(_MEG_E)` and the casts.

    A line `_MEG_E` matches holds `: (` first right after the dots (the blanks after the srun rank's `:` and
    the name hold none), so it is the part before its first `: (` matching `_MEG_E_HEAD`, then `: (`, then
    the part after matching `_MEG_E_TAIL`, and conversely; the groups are the same. The parts before are a
    few distinct texts (rank and name, padded), which the regex reads once each; the parts after are short.
    """
    cut = pl.DataFrame({"_p": text.str.splitn(": (", 2)}).unnest("_p")
    head, tail = cut.get_column("field_0"), cut.get_column("field_1")
    heads = pl.DataFrame({"h": head.unique()})
    heads = heads.with_columns(m=pl.col("h").str.extract_groups(_rx(_MEG_E_HEAD)))
    heads = heads.select(
        "h", rank=pl.col("m").struct.field("1").cast(pl.Int32, strict=False),
        name=pl.col("m").struct.field("2"),
    )
    hv = pl.DataFrame({"h": head}).join(heads, on="h", how="left", maintain_order="left")
    tv = tail.str.extract_groups(_rx(_MEG_E_TAIL))
    ok = hv.get_column("rank").is_not_null() & tv.struct.field("1").is_not_null()
    out = pl.DataFrame({"rank": hv.get_column("rank"), "name": hv.get_column("name"), "tv": tv, "ok": ok})
    if ok.all():  # (the usual case: no value to blank)
        return out.select(
            "rank",
            "name",
            min_ms=pl.col("tv").struct.field("1").cast(pl.Float64),
            max_ms=pl.col("tv").struct.field("2").cast(pl.Float64),
        )
    return out.select(
        pl.when("ok").then("rank").alias("rank"),
        pl.when("ok").then("name").alias("name"),
        pl.when("ok").then(pl.col("tv").struct.field("1").cast(pl.Float64)).alias("min_ms"),
        pl.when("ok").then(pl.col("tv").struct.field("2").cast(pl.Float64)).alias("max_ms"),
    )


def _phases(rows: pl.DataFrame) -> pl.DataFrame:
    """Phase columns and the widest (min, max) spread from the attached timers.

    Only rows with timers are evaluated (list evals are the slow part); the others keep their phase
    columns and get no spread, which is what the evaluation gives them.
    """
    none = {"phase_spread_s": pl.lit(None, dtype=pl.Float64), "phase_spread_name": pl.lit(None, dtype=pl.String)}
    if rows.height == 0:
        return rows.with_columns(**none)
    has = (rows.get_column("timers").list.len().fill_null(0) > 0).arg_true()
    if len(has) == 0:
        return rows.with_columns(**none)
    if len(has) == rows.height or len(has) < 2:
        # NOTE: polars divides a one-row frame by a literal exactly but longer ones by its reciprocal (last
        # digit may differ), so a one-row subset of a longer frame is evaluated with the whole frame
        return _phases_all(rows)
    sub = _phases_all(rows[has])
    out = rows.with_columns(**none)
    return out.with_columns(
        **{c: out.get_column(c).scatter(has, sub.get_column(c)) for c in [*g.PHASES, *none]}
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
    # (no fragment with timers, neither a list nor a one-line timer text to read them from: every row's are
    # an empty list, what `_rows_of_singles` and `_group_rows` give them; the column is left out of the
    # gathers, aggregations and sorts, where its lists of structs are slow, and put back at the end)
    tt = frags.get_column("_ttext") if "_ttext" in frags.columns else None
    no_timers = frags.get_column("timers").null_count() == n and (tt is None or tt.null_count() == n)
    if no_timers:
        slim = slim.drop("timers", *(["_ttext"] if tt is not None else []))
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
    if no_timers:
        out = out.with_columns(timers=pl.lit([], dtype=pl.List(_TIMER)))
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
