# ruff: noqa: E501  (verbatim)
"""hf14's references: the `parsers.step_log` code it changed, verbatim from the commit before (ce1119d):
`_tqdm_lane` (the postfixes of the canonical bars made distinct before `_present` scans them: a hash of each,
where the bars past their total, with a negative remaining time, all have a postfix of their own) and `_read`
(the lines understood gathered with the bars' fragments' lines, each of which is a line of the bars matched
already); `_rows_gathered` (without timers, the rows of the single fragments gathered from the wide fragments,
then concatenated with the groups' rows and sorted by `_sort_rows`: two gathers of the wide columns);
`_sort_frags`, `_sort_rows`, `_sort_stable` (the distinct keys found by a hash of each, where there is one
key). The helpers they call are the module's own (unchanged)."""

from __future__ import annotations

import polars as pl

from parsers import _step_grammars as g
from parsers.step_log import (  # noqa: F401
    _BASE,
    _EMPTY_STEPS,
    _FRAG,
    _LANE_MIN,
    _PROGRESS,
    _ROW_COLS,
    _TIMER,
    _TQDM_FIELDS,
    _TQDM_HEAD_DIGITS,
    _TQDM_TAIL_START,
    _bar_fragments,
    _Batch,
    _block_fragments,
    _events,
    _finish,
    _group_rows,
    _grouped,
    _kept,
    _key_ranks,
    _match,
    _minmax_pre,
    _noise_lines,
    _present,
    _rows,
    _rows_of_singles,
    _rx,
    _step_fragments,
    _titan_pre,
    _warning_lines,
    _with_timers,
)


def _tqdm_lane(seg: pl.DataFrame) -> tuple[pl.DataFrame, tuple[pl.Series, list[pl.Series]] | None]:
    """`_tqdm_match(seg)` and, on big inputs, the positions in `seg` of the bars of `_TQDM_CANON` shape with
    the texts that hold every `_GATES` literal in them (what `_present` scans instead of those bars):
    `%|`, the distinct descriptions, bars (between their two `|`, with them) and postfixes.

    (No gate starts in the rest of such a bar, nor spans from one of those parts into the next: the rest is
    the percentage's digits and `%`, then after the second `|` blanks, digits, `/`, `[`, `:`, `<`, `?`, `,`,
    `.` and the unit `s/it` or `it/s` up to the postfix, which starts with `]` or `,`, or with the `-` of a
    negative remaining time after the first `<`; gates hold no digit, the two that hold a `|` are `%|` and
    `| epoch `, and none starts with any of those characters but `%|`, `[batch=`, `/Rank: `, `/Rnk: `,
    `:::MLLOG`, `step…`, `iter…`, `time (ms)`, `tok/s)`, `train_time:`, which the characters after them
    there rule out.)

    Split lane for `_TQDM_CANON` bars: there the lazy `desc` of `TQDM_RE` ends at the first digit (it holds
    none) or, past 999 %, where three digits are left before the `%` (`_TQDM_HEAD_DIGITS`), the percentage
    and bar end at the first two `|`, `n`/`total` lie around the next `/` and end at the `[`, the rate follows
    the first `,` (the times hold none) and ends at the unit, its first `s` or `i`; `post` is the rest. Other
    bars take the regex.
    """
    txt = pl.col("text")
    if seg.height < _LANE_MIN:  # (every group of the regex, as before)
        return _match(seg, g.TQDM_RE, txt.str.contains("%|", literal=True)), None
    hit = seg.get_column("text").str.contains("%|", literal=True).fill_null(False)
    bars = seg.filter(hit)
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
        ).fill_null(False)
    ).to_series()
    n_canon = int(canon.sum())
    fast = bars.filter(canon) if n_canon < bars.height else bars
    cut = cut.filter(canon) if n_canon < bars.height else cut
    # (the description: the head less its `%` and its digits, but the first of more than three: `TQDM_RE`'s
    # `pct` takes the last three; the digits stripped are ASCII, one byte each)
    # (one strip of the `%` and the digits: the description holds neither, so it stops there)
    h = pl.col("field_0")
    parts = cut.select(_h=h, _d=h.str.strip_chars_end("%0123456789"), _r=pl.col("field_2"))
    long = (pl.col("_h").str.len_bytes() - pl.col("_d").str.len_bytes()) > 4
    if parts.select(long.any()).item():
        parts = parts.with_columns(_d=pl.when(long).then(pl.col("_h").str.head(-4)).otherwise(pl.col("_d")))
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
    # (the character after the first `<` is a `-` iff the first `<-` is there: one search, no slice)
    parts = parts.with_columns(_neg=r.str.find("<-", literal=True).eq_missing(lt))
    neg = pl.col("_neg")
    fast = (
        pl.concat([fast, parts], how="horizontal")
        .with_columns(
            m=pl.struct(
                desc="_d",
                n=r.str.slice(0, sl).str.strip_chars(),
                total=r.str.slice(sl + 1, lb - sl - 1).str.strip_chars(),
                rate=pl.when(~neg).then(r.str.slice(c + 1, at - c - 1).str.strip_chars()),
                unit=pl.when(~neg).then(r.str.slice(at, 4)),
                post=r.str.slice(pl.when(neg).then(lt + 1).otherwise(at + 4)),  # (one slice, from either)
            )
        )
        .drop("_d", "_r", "_sl", "_lb", "_c", "_at", "_lt", "_neg")
    )
    at = hit.arg_true()
    gates = None
    if n_canon:
        parts = fast.select(_d=pl.col("m").struct.field("desc"), _p=pl.col("m").struct.field("post"))
        bar = cut.select(pl.concat_str(pl.lit("|"), pl.col("field_1").unique(), pl.lit("|"))).to_series()
        texts = [pl.Series(["%|"]), parts.get_column("_d").unique(), bar, parts.get_column("_p").unique()]
        gates = (at if n_canon == bars.height else at.filter(canon), texts)
    if n_canon == bars.height:
        return fast, gates
    slow = _match(bars.filter(~canon), g.TQDM_RE)
    slow = slow.with_columns(m=pl.struct(*(pl.col("m").struct.field(f) for f in _TQDM_FIELDS.to_schema())))
    return pl.concat([fast, slow]).sort("line", "seg"), gates


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
        # (without timers, `_rows_of_singles` reads these columns only: the others are not gathered)
        part = slim.select("line", "key", "rank", *vals) if no_timers else slim
        singles = _with_timers(part[kept.get_column("_i")].with_columns(kept.select("group", "orphan")))
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


def _sort_rows(rows: pl.DataFrame) -> pl.DataFrame:
    """`rows.sort("group").sort("key", "line", maintain_order=True)` (`group` distinct: one order only, that
    of (key, line, group)); by one packed integer key where the key ranks, lines and groups fit in 62 bits."""
    line, group = pl.col("line"), pl.col("group")
    if rows.height < 2:
        return rows.sort("group").sort("key", "line", maintain_order=True)
    st = rows.select(
        n=pl.col("key").null_count() + line.null_count() + group.null_count(),
        lo=line.min(),
        hl=line.max(),
        hg=group.max(),
    ).row(0, named=True)
    keys = rows.get_column("key").unique().sort()
    kb, lb = (keys.len() - 1).bit_length(), int(st["hl"] or 0).bit_length()
    gb = int(st["hg"] or 0).bit_length()
    if st["n"] or st["lo"] < 0 or kb + lb + gb > 62:
        return rows.sort("group").sort("key", "line", maintain_order=True)
    packed = (
        _key_ranks(rows.select("key", "line", "group"), keys)
        .select((pl.col("_kr") * (1 << (lb + gb))) + (line * (1 << gb)) + group.cast(pl.Int64))
        .to_series()
    )
    if bool((packed.diff().drop_nulls() > 0).all()):  # (in that order already)
        return rows.rechunk()
    return rows.with_columns(_sk=packed).sort("_sk").drop("_sk")


def _sort_frags(frags: pl.DataFrame) -> pl.DataFrame:
    """`frags.sort("key", "line", "seg")`; on many fragments whose (key, line, seg) are all distinct (one order
    only), by one integer sort key: the key's rank among the distinct keys, the line and the segment packed in
    63 bits (a sort by the three columns costs several times more)."""
    if frags.height < _LANE_MIN:
        return frags.sort("key", "line", "seg", maintain_order=True)
    line, seg = pl.col("line"), pl.col("seg")
    st = frags.select(
        n=pl.col("key").null_count() + line.null_count() + seg.null_count(),
        lo=pl.min_horizontal(line.min(), seg.min()),
        hl=line.max(),
        hs=seg.max(),
    ).row(0, named=True)
    keys = frags.get_column("key").unique().sort()
    if st["n"] or st["lo"] < 0 or st["hl"] >= 1 << 36 or st["hs"] >= 1 << 16 or keys.len() >= 1 << 11:
        return frags.sort("key", "line", "seg", maintain_order=True)
    packed = (
        _key_ranks(frags.select("key", "line", "seg"), keys)
        .select((pl.col("_kr") * (1 << 52)) + (line * (1 << 16)) + seg)
        .to_series()
    )
    if any(isinstance(t, pl.List) for t in frags.schema.values()):
        if not bool((packed.sort().diff().drop_nulls() > 0).all()):  # (a repeated triple: ties)
            return frags.sort("key", "line", "seg", maintain_order=True)
        # (the frame's own sort: a gather by index is slow on the list-of-struct timers)
        return frags.with_columns(_sk=packed).sort("_sk").drop("_sk")
    # (no list column, as `_rows_gathered`'s narrow frame: one sort of the keys, the frame gathered in that
    # order; the keys distinct, that is the one order the sort gives)
    order = packed.arg_sort()
    if not bool((packed.gather(order).diff().drop_nulls() > 0).all()):  # (a repeated triple: ties)
        return frags.sort("key", "line", "seg", maintain_order=True)
    return frags[order]


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
            if uniq.len() <= 4:  # (a few values: the rank is how many of the others sort below it, no join)
                r = pl.select(pl.sum_horizontal(pl.lit(col) > u for u in uniq[:-1].to_list())).to_series()
                ranks.append((r.cast(pl.Int64), uniq.len()))
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
    # (in order by the last columns already, the first ones of few values, as rows of one stream in line order
    # with two frameworks: the rows of each value of the first in turn, as they are, filtered, not gathered)
    for j in range(1, len(ranks)):
        low = sum(bits[j:]) + pb
        if not bool(((packed % (1 << low)).diff().drop_nulls() > 0).all()):
            continue
        lead = packed // (1 << low)
        vals = lead.unique().sort()
        if vals.len() <= 4:
            return pl.concat([df.filter(lead == v) for v in vals.to_list()]).rechunk()
        break
    return df.with_columns(_sk=packed).sort("_sk").drop("_sk")


def _read(
    seg: pl.DataFrame, node: pl.Expr, path: pl.Expr, batch: _Batch | None = None
) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series]:
    """The `steps` and `events` rows (not conformed) of the prepared lines `seg` and the lines understood
    (distinct). `node`, `path`: a row's `node` and `file` (over a row's `host` and `line`). `batch`: see
    `parse_many`."""
    titan = _titan_pre(seg)
    minmax = _minmax_pre(seg)
    # (bars redrawn with `\r`, as tqdm's are: matched before the gates are looked for, which then skip those
    # of the canonical shape; a log without `\r` has none of those in its many lines, most likely)
    tqdm, bar_gates = None, None
    if seg.height >= _LANE_MIN and seg.get_column("seg").max() > 0:  # type: ignore[operator]
        tqdm, bar_gates = _tqdm_lane(seg.select(*_BASE, "text"))
    present = _present(seg, titan, minmax, bar_gates)
    if not present:
        # no grammar runs (each match holds a gate): no fragment, bar, block line or event; the lines
        # understood are the noise and the warnings, the rows none (the callers conform them)
        none = pl.Series("line", [], dtype=pl.Int64)
        understood = pl.concat([_noise_lines(seg, none), _warning_lines(seg)]).unique()
        return pl.DataFrame(schema=_EMPTY_STEPS), pl.DataFrame(), understood
    frags = _step_fragments(seg, present, titan)
    bars, bar_lines = _bar_fragments(seg, present, batch, tqdm)
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
        rows = (
            pl.DataFrame(schema=_FRAG).drop("seg").with_columns(orphan_group=pl.lit(None, dtype=pl.Boolean))
        )
    if batch is not None:
        batch.note_single_phases(rows)
    return _finish(rows, seg, node, path), events, understood_lines
