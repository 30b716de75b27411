# ruff: noqa: E501, F401
"""The code smi14 replaced in `parsers.nvidia_smi_dmon` and `parsers._nvsmi_fields`, kept verbatim as the reference
`test_smi14` compares the new code with: dmon's `parse` (smi14: the field lists' rows merged in line order by slicing
their runs, `_merged`, instead of a sort that gathers every column); `_fixed_width` (smi14: the most common row length
by `np.bincount`, rows' run numbers as UInt32 for the gathers); `transition_events` / `_transitions` (smi14: the row
numbers of the previous-sample window as UInt32, a trigger's previous value gathered as UInt8); the CSV parser's
`_distinct_values`, `_codes`, `_rows_by_tail` (smi14: the codes of the distinct cells as UInt32, Boolean columns
gathered as UInt8; the CSV `_stamps` is imported as `_csv_stamps`, the dmon one
holding the name here: the one word changed)."""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from parsers import _nvsmi_fields as F  # noqa: N812
from parsers._nvsmi_fields import _MARKER_ALT, ERROR_MARKERS, SOURCE, _gpu_keys, conform_table
from parsers.base import MAX_EXAMPLES, FileContext, ParseResult
from parsers.nvidia_smi_csv import _ENUM_MAX, _TAIL, _TAIL_PROBE, _Plan, _tail_of, _tail_places
from parsers.nvidia_smi_csv import _stamps as _csv_stamps
from parsers.nvidia_smi_dmon import (
    _BLOCK,
    _FAST_MIN,
    _MANY,
    _MAP,
    _PROBE,
    _group_frame,
    _headers,
    _layout,
    _numbers,
    _row_regex,
    _rows_bytes,
    _skip,
    _stamps,
    _token_ends,
    _val,
)


def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """Parse every header group; see the module docstring.

    Rows are tokens separated by spaces (of the line stripped of whitespace). Header and units lines
    start with `#`, so the regexes run on those few lines only; every row then takes the field list of
    the last header above it, and the rows of one field list (however often dmon repeated its header)
    are split into cells by one anchored regex that also checks the token count.
    """
    text = lines.cast(pl.String).fill_null("")
    n = len(text)
    head_pos, marks, sigs, sig_of_header = _headers(text)
    # the field list of the governing header (the last one above; null: none yet); header and units lines
    # themselves are never data
    sig = pl.repeat(None, n, dtype=pl.Int64, eager=True)
    if len(head_pos):
        sig = sig.scatter(head_pos, pl.Series(sig_of_header, dtype=pl.Int64)).forward_fill()
    mark = pl.repeat(False, n, dtype=pl.Boolean, eager=True)
    if len(marks):
        mark = mark.scatter(marks, True)
    frame = pl.DataFrame(
        {
            "line": pl.int_range(ctx.first_line, ctx.first_line + n, dtype=pl.Int64, eager=True),
            "text": text,
            "sig": sig,
            "mark": mark,
        }
    )
    parts = []
    data_lines: list[pl.Series] = []
    for fields_t, s in sigs.items():
        fields = list(fields_t)
        rx = _row_regex(fields)
        rows = frame.lazy().filter((pl.col("sig") == s) & ~pl.col("mark"))
        fast = None
        if n >= _MANY:
            # (a long group: its rows of dmon's fixed-width layout read as columns of bytes, the rest below)
            sel = (frame.get_column("sig") == s) & ~mark
            got = _fixed_width(frame.select("line", "text").filter(sel), fields)
            if got is not None:
                fast, slow = got
                rows = frame.lazy().filter(pl.col("line").is_in(slow.implode())) if len(slow) else None
        # A long group whose `extra` fields repeat their values (idle encoders: `0 0 0 0`) captures each run
        # of `extra` fields as one cell (fewer captures) and encodes `extra` once per distinct run text.
        layout = _layout(fields_t) if n >= _MANY and fast is None else None
        runs = None
        if layout is not None:
            probe = (
                frame.lazy()
                .filter((pl.col("sig") == s) & ~pl.col("mark"))
                .head(_PROBE)
                .select(cells=pl.col("text").str.strip_chars().str.extract_groups(layout[0]))
                .select(pl.concat_str([pl.col("cells").struct.field(g) for g, _ in layout[1]], separator=" "))
                .collect(engine="in-memory")
                .to_series()
            )
            if probe.len() and probe.n_unique() * 4 <= probe.len():
                rx, runs = layout
        if rows is not None:
            # (the rows of the field list, their cells and typed columns in one query)
            data = rows.with_columns(cells=pl.col("text").str.strip_chars().str.extract_groups(rx)).filter(
                pl.col("cells").struct.field(rx[rx.index("<") + 1 : rx.index(">")]).is_not_null()
            )
            part = _group_frame(data, fields, runs).collect(engine="in-memory")
            if fast is not None:
                part = pl.concat([fast, part], how="vertical").sort("line") if part.height else fast
        else:
            part = fast
        if part.height == 0:
            continue
        data_lines.append(part.get_column("line"))
        parts.append(part)
    ok = mark
    if data_lines:
        first = ctx.first_line
        ok = ok.scatter(pl.concat(data_lines) - first, True)
    # (blank lines are neither header, units nor data lines: looked for among the other lines only)
    rest = (~ok).arg_true()
    blank = text.gather(rest).str.strip_chars().str.len_bytes() == 0
    unrecognized = len(rest) - int(blank.sum())
    parsed = n - len(rest)
    bad_idx = rest.filter(~blank).head(MAX_EXAMPLES)
    examples = [
        (ctx.first_line + int(i), str(t)[:500])
        for i, t in zip(bad_idx.to_list(), text.gather(bad_idx).to_list(), strict=True)
    ]

    if parts:
        # (one field list's rows are in line order already)
        samples = pl.concat(parts, how="diagonal_relaxed").sort("line") if len(parts) > 1 else parts[0]
        samples = samples.with_columns(
            node=pl.lit(ctx.node),
            file=pl.lit(ctx.path),
            source=pl.lit("nvidia-smi-dmon"),
            ts_quality=pl.when(pl.col("ts").is_not_null()).then(pl.lit("local_assumed_utc")).otherwise(pl.lit("none")),
            gpu_bus_id=pl.lit(None, dtype=pl.String),
        )
        events = F.transition_events(samples, ctx)
        gpu_samples = F.conform_known(samples, "gpu_samples")
    else:
        events = F.conform_table(pl.DataFrame(), "events")
        gpu_samples = F.conform_table(pl.DataFrame(), "gpu_samples")
    return ParseResult(
        tables={"gpu_samples": gpu_samples, "events": events},
        parsed=parsed,
        unrecognized=unrecognized,
        unrecognized_examples=examples,
    )


def _fixed_width(rows: pl.DataFrame, fields: list[str]) -> tuple[pl.DataFrame, pl.Series] | None:
    """The columns `_group_frame` (runs None) gives the rows (`line`, `text`: the rows of one field list) that
    have dmon's layout, and the `line`s of the others (left to the row regex); None for a short group, a field
    list with a repeated field or no such layout.

    A row has the layout when it has the most common length, is printable ASCII, and its tokens (runs of
    non-spaces) end at the byte positions where a reference row's one token per field end (dmon right-aligns
    its columns): each field's bytes are then spaces and its token, the tokens the row regex gives. A numeric
    cell is read from its bytes when it is 1-8 digits or `-` (else the row is left to the regex): the value
    the cast of its text gives. Dates, times and `extra` cells are decoded once per run of rows with the same
    bytes there."""
    import numpy as np  # (here: a worker that reads no long dmon loop never imports it)

    u64 = np.uint64
    nf = len(fields)
    if rows.height < _FAST_MIN or len(set(fields)) != nf:
        return None
    lens = rows.get_column("text").str.len_bytes()
    width = int(lens.mode().min())  # type: ignore[arg-type]
    same = lens == width
    cand = rows.filter(same)
    m = cand.height
    if m < _FAST_MIN or width == 0:
        return None
    buf, pad = _rows_bytes(cand.get_column("text"), width)
    if buf.size != pad + m * width:
        return None
    mat = buf[pad:].reshape(m, width)
    ends: list[int] | None = None
    for r in range(min(m, 16)):
        found = [t.end() for t in re.finditer(rb"[^ ]+", mat[r].tobytes())]
        if len(found) == nf:
            ends = found
            break
    if ends is None:
        return None
    # tokens end where a non-space is followed by a space or the end of the row: at the reference's ends only
    ref = np.zeros((1, width), dtype=np.uint8)
    ref[0, [e - 1 for e in ends]] = 33
    ref_ends = _token_ends(ref)
    lo = dict(zip(fields, [0, *ends[:-1]], strict=True))
    hi = dict(zip(fields, ends, strict=True))

    def word(end: int) -> np.ndarray:
        """Bytes end-8 .. end-1 of every row as one little-endian uint64 (before the row: spaces)."""
        return np.ndarray((m,), dtype="<u8", buffer=buf, offset=pad + end - 8, strides=(width,)).copy()

    nums = [f for f in fields if f in _MAP or f == "gpu"]
    values: dict[str, pl.Series] = {}
    ok = np.empty(m, dtype=bool)
    num = np.empty((len(nums), m), dtype=np.float64)
    # (a block of rows at a time: its temporaries stay in the cache and are memory the allocator hands out
    # again, where arrays of a whole range's bytes are fresh pages each time, for the kernel to map and zero)
    for a in range(0, m, _BLOCK):
        b = min(m, a + _BLOCK)
        blk = mat[a:b]
        okb = (_token_ends(blk) == ref_ends).all(axis=1)
        if int(blk.min()) < 32 or int(blk.max()) > 126:
            okb &= (blk >= 32).all(axis=1) & (blk <= 126).all(axis=1)
        if nums:
            words = np.empty((len(nums), b - a), dtype=u64)  # (a field's cells contiguous)
            for k, f in enumerate(nums):
                w = words[k]
                at = pad + a * width + hi[f] - 8
                w[:] = np.ndarray((b - a,), dtype="<u8", buffer=buf, offset=at, strides=(width,))
                before = 8 - (hi[f] - lo[f])
                if before > 0:  # (the bytes of the fields before: spaces)
                    keep = u64((1 << (64 - 8 * before)) - 1) << u64(8 * before)
                    w &= keep
                    w |= u64(0x2020202020202020) & ~keep
                elif before < 0:  # (a wider field: its token is 8 bytes at most)
                    okb &= blk[:, hi[f] - 9] == 32
            nb, dash, good = _numbers(words)
            okb &= (good | dash).all(axis=0)
            num[:, a:b] = nb
        ok[a:b] = okb
    for k, f in enumerate(nums):
        values[f] = pl.Series(f, num[k], nan_to_null=True)

    def tokens(names: list[str]) -> tuple[dict[str, pl.Series], np.ndarray]:
        """The tokens of fields `names` once per run of rows with the same bytes there, and each row's run."""
        change = np.zeros(m, dtype=bool)
        change[0] = True
        for f in names:
            for e in range(min(hi[f], lo[f] + 8), hi[f] + 8, 8):
                end = min(e, hi[f])
                w = word(end)
                if end - 8 < lo[f]:  # (only the field's bytes)
                    w &= u64((1 << (64 - 8 * (lo[f] - end + 8))) - 1) << u64(8 * (lo[f] - end + 8))
                change[1:] |= w[1:] != w[:-1]
        first = np.flatnonzero(change)
        rows_first = mat[first]
        out = {}
        for f in names:
            part = np.concatenate(
                [rows_first[:, lo[f] : hi[f]], np.full((len(first), 1), 10, dtype=np.uint8)], axis=1
            )
            cells = pl.Series([part.tobytes().decode("latin-1")]).str.split("\n").explode().head(len(first))
            out[f] = cells.str.strip_chars(" ")
        return out, np.cumsum(change) - 1

    cols: dict[str, pl.Series] = {}
    stamps = None
    if "date" in lo and "time" in lo:
        stamps = _stamps(mat, lo["date"], hi["date"], lo["time"], hi["time"])
    if stamps is not None:
        cols["ts"] = stamps
    elif "date" in lo and "time" in lo:
        tok, run = tokens(["date", "time"])
        ts = pl.select(
            pl.concat_str([pl.lit(tok["date"]), pl.lit(tok["time"])], separator=" ")
            .str.strptime(pl.Datetime("us"), "%Y%m%d %H:%M:%S", strict=False)
            .dt.replace_time_zone("UTC")
        ).to_series()
        cols["ts"] = ts.gather(run)
    else:
        cols["ts"] = pl.repeat(None, m, dtype=F.UTC, eager=True)
    cols["gpu_index"] = (
        values["gpu"].cast(pl.Int32) if "gpu" in values else pl.repeat(None, m, dtype=pl.Int32, eager=True)
    )
    skip = _skip(fields)
    rest = [f for f in fields if f not in _MAP and f not in skip]
    if rest:
        tok, run = tokens(rest)
        encoded = pl.struct(**{f: _val(pl.lit(tok[f])) for f in rest}).struct.json_encode()
        extra = pl.select(encoded).to_series()
        cols["extra"] = extra.gather(run)
    else:
        cols["extra"] = pl.repeat(None, m, dtype=pl.String, eager=True)
    for f, col in _MAP.items():
        if f in values:
            cols[col] = values[f].cast(pl.Int64) if col in F.INT_COLUMNS else values[f]
    fast = pl.DataFrame(
        [cand.get_column("line"), cand.get_column("text"), *(v.alias(k) for k, v in cols.items())]
    )
    slow = rows.get_column("line").filter(~same)
    if not ok.all():
        keep = pl.Series("_ok", ok)
        fast = fast.filter(keep)
        slow = pl.concat([slow, cand.get_column("line").filter(~keep)])
    return fast, slow


def transition_events(samples: pl.DataFrame, ctx: Any) -> pl.DataFrame:
    """Fault events from a series of samples, one per onset (a fault that stays on is reported once).

    `samples` needs `line`, `text` (the verbatim row), `node`, `gpu_index`, `gpu_bus_id`, `ts`,
    `ts_quality` and whichever gpu_samples columns the source has; `ident` (bus id/UUID) keys GPUs.
    """
    events = _transitions(samples, pl.lit(ctx.path), None)
    if events is None:
        return conform_table(pl.DataFrame(), "events")
    return conform_table(events.sort("line"), "events")


def _transitions(samples: pl.DataFrame, file: pl.Expr, by: str | None) -> pl.DataFrame | None:
    """The events of `transition_events`, not yet sorted by line nor conformed (None: no event). `by`: the
    column numbering the files of a batch (it keys the GPUs too, and is kept in the events)."""
    cols = set(samples.columns)
    missing: dict[str, pl.DataType] = {}

    def c(name: str, dtype: pl.DataType = pl.Float64) -> pl.Expr:
        # a column the source lacks is added as nulls of its type (same values as a null literal)
        if name not in cols:
            missing.setdefault(name, dtype)
        return pl.col(name)

    key = pl.coalesce(
        c("ident", pl.String), c("gpu_bus_id", pl.String), c("gpu_index", pl.Int32).cast(pl.String), pl.lit("?")
    )

    # The previous sample of the same GPU: its row number, computed once (one window). A rule is a trigger
    # (the fault shows in this sample) and a test against the previous sample of the GPU (it did not show
    # there / the count changed); the test runs on the few triggered rows only.
    def onset(cond: pl.Expr) -> tuple[str, pl.Expr, pl.Expr | None]:
        return ("onset", cond.fill_null(False), None)

    def rising(v: pl.Expr, also: pl.Expr | None = None) -> tuple[str, pl.Expr, pl.Expr | None]:
        trig = (v > 0).fill_null(False)
        return ("rising", trig if also is None else trig & also, v)

    uv, ua = c("ecc_uncorrected_volatile", pl.Int64), c("ecc_uncorrected_aggregate", pl.Int64)
    w, wm, g, gm, util = c("pcie_width", pl.Int32), c("pcie_width_max", pl.Int32), c("pcie_gen", pl.Int32), c("pcie_gen_max", pl.Int32), c("utilization_pct")
    thermal, brake, hw = c("throttle_hw_thermal_slowdown", pl.Boolean), c("throttle_hw_power_brake_slowdown", pl.Boolean), c("throttle_hw_slowdown", pl.Boolean)
    ps = c("_pstate", pl.String).str.strip_chars()
    busy = ps.is_null() | ps.is_in(["P0", "", "N/A", "[N/A]"])
    # Error markers are rare: the extraction runs only when some row holds one (else no row does: null).
    # (`contains_any`: the markers are literals; twice as fast as their regex alternation)
    texts = samples.get_column("text")
    has_marker = bool(samples.height and texts.str.contains_any(list(ERROR_MARKERS)).any())
    if has_marker:
        marker = pl.col("text").str.extract("(" + _MARKER_ALT + ")", 1)
    else:
        marker = pl.repeat(None, pl.len(), dtype=pl.String)
    rules: list[tuple[str, tuple[str, pl.Expr, pl.Expr | None], pl.Expr, str, pl.Expr]] = [
        ("ecc_uncorrectable", rising(uv), pl.lit("volatile"), "high", pl.struct(volatile=uv, aggregate=ua)),
        ("ecc_uncorrectable", rising(ua, uv.fill_null(0) == 0), pl.lit("aggregate"), "medium",
         pl.struct(aggregate=ua)),
        ("row_remap_failure", onset(c("remap_failure", pl.Boolean)), pl.lit(None, dtype=pl.String), "high", pl.struct(uncorrectable_rows=c("remapped_rows_uncorrectable", pl.Int64))),
        ("row_remap_pending", onset(c("remap_pending", pl.Boolean)), pl.lit(None, dtype=pl.String), "medium", pl.struct(uncorrectable_rows=c("remapped_rows_uncorrectable", pl.Int64))),
        ("retired_pages_pending", onset(c("retired_pages_pending", pl.Boolean)), pl.lit(None, dtype=pl.String), "medium", pl.struct(dbe=c("retired_pages_dbe", pl.Int64))),
        ("pcie_link_degraded", onset(w < wm), pl.lit("width"), "medium", pl.struct(width=w, width_max=wm, gen=g, gen_max=gm)),
        ("pcie_link_degraded", onset((g < gm) & (util > 0) & busy & ~(w < wm).fill_null(False)), pl.lit("gen"), "medium", pl.struct(gen=g, gen_max=gm, utilization_pct=util)),
        ("thermal", onset(thermal), pl.lit("hw_thermal_slowdown"), "high", pl.struct(temperature_c=c("temperature_c"), power_w=c("power_w"))),
        ("thermal", onset(brake), pl.lit("hw_power_brake_slowdown"), "medium", pl.struct(temperature_c=c("temperature_c"), power_w=c("power_w"))),
        ("thermal", onset(hw & ~thermal.fill_null(False) & ~brake.fill_null(False)), pl.lit("hw_slowdown"), "medium", pl.struct(temperature_c=c("temperature_c"), power_w=c("power_w"))),
        ("gpu_error", onset(marker.is_not_null()), marker, "high", pl.struct(text=pl.lit(None, dtype=pl.String))),
    ]
    # A rule whose trigger column is absent, all null, never positive or never true cannot fire: it is left
    # out (no onset computed); none left, no window either.
    n = samples.height

    def present(name: str) -> bool:
        return name in cols and samples.get_column(name).null_count() < n

    def positive(name: str) -> bool:
        if not present(name):
            return False
        s = samples.get_column(name)
        return not s.dtype.is_integer() or (s.max() or 0) > 0  # type: ignore[operator]

    def some(name: str) -> bool:
        if not present(name):
            return False
        s = samples.get_column(name)
        return s.dtype != pl.Boolean or bool(s.any())

    possible = [
        positive("ecc_uncorrected_volatile"),
        positive("ecc_uncorrected_aggregate"),
        some("remap_failure"),
        some("remap_pending"),
        some("retired_pages_pending"),
        present("pcie_width") and present("pcie_width_max"),
        present("pcie_gen") and present("pcie_gen_max") and present("utilization_pct"),
        some("throttle_hw_thermal_slowdown"),
        some("throttle_hw_power_brake_slowdown"),
        some("throttle_hw_slowdown"),
        has_marker,
    ]
    rules = [r for r, p in zip(rules, possible, strict=True) if p]
    if not rules:
        return None
    line = samples.get_column("line")
    # (already in line order: no sort, which would copy every column; only strictly increasing lines are
    # taken as sorted, so that ties keep whatever order the sort gives them)
    if by is None:
        in_order = line.is_sorted() and (n < 2 or bool((line.diff().drop_nulls() > 0).all()))
        df = samples if in_order else samples.sort("line")
    else:  # (the caller's rows are in (file, line) order)
        df = samples
    if missing:
        df = df.with_columns(**{n: pl.lit(None, dtype=t) for n, t in missing.items()})
    keys = _gpu_keys(df, key)
    # One query over the samples: each GPU's previous sample (its row number, one window), every trigger (the
    # fault shows in this sample) and its test against the previous sample (it did not show there / the count
    # changed), and the few rows where one fires, of the columns read from here on (a loop's samples: a
    # counter stays up, so most rows may trigger a rising rule but few differ from their previous sample)
    rising_v = {i: r[1][2] for i, r in enumerate(rules) if r[1][0] == "rising"}
    prev_of = [f"_t{i}" if i not in rising_v else f"_v{i}" for i in range(len(rules))]
    tests = {}
    for i in range(len(rules)):
        t, p = pl.col(f"_t{i}"), pl.col(prev_of[i]).gather(pl.col("_prev"))
        if i in rising_v:
            v = pl.col(f"_v{i}")
            tests[f"_hit{i}"] = t & (p.is_null() | (v != p)).fill_null(True)
        else:
            tests[f"_hit{i}"] = t & ~p.fill_null(False)
    reads = {"ts", "ts_quality", "node", "gpu_index", "gpu_bus_id", "text", "line", *([by] if by else [])}
    reads.update(file.meta.root_names(), *(e.meta.root_names() for r in rules for e in (r[2], r[4])))
    hits = (
        df.lazy()
        .with_columns(_i=pl.int_range(pl.len(), dtype=pl.Int64))
        .with_columns(_prev=pl.col("_i").shift(1).over([*keys, pl.col(by)] if by else keys))
        .with_columns(
            **{f"_t{i}": r[1][1] for i, r in enumerate(rules)}, **{f"_v{i}": v for i, v in rising_v.items()}
        )
        .with_columns(**tests)
        .filter(pl.any_horizontal(*(pl.col(f"_hit{i}") for i in range(len(rules)))))
        .select(*(c for c in df.columns if c in reads), *tests)
        .collect(engine="in-memory")
    )
    out = []
    for i, (kind, _cond, code, sev, detail) in enumerate(rules):
        hit = hits.filter(pl.col(f"_hit{i}"))
        if hit.height:
            hit = hit.with_columns(_code=code.cast(pl.String), _detail=detail.struct.json_encode())
            out.append(
                hit.select(
                    "ts",
                    "ts_quality",
                    "node",
                    c("gpu_index", pl.Int32).cast(pl.Int32).alias("gpu_index"),
                    c("gpu_bus_id", pl.String).alias("gpu_bus_id"),
                    source=pl.lit(SOURCE),
                    kind=pl.lit(kind),
                    code=pl.col("_code"),
                    severity=pl.lit(sev),
                    message=pl.col("text").str.strip_chars(),
                    detail=pl.col("_detail"),
                    file=file,
                    line=pl.col("line"),
                    **({by: pl.col(by)} if by else {}),
                )
            )
    if not out:
        return None
    return pl.concat(out, how="diagonal_relaxed")


def _distinct_values(data: pl.DataFrame, plan: _Plan) -> pl.DataFrame:
    """`data` with the plan's columns converted per distinct cell: each cell column's distinct values found
    once and converted, then mapped back (the values of `_per_value` in the query, which, with common-
    subexpression elimination off, found the distinct values twice per conversion)."""
    if not plan.distinct and not plan.stamps:
        return data
    uniq: dict[str, tuple[pl.Series, pl.Series | None]] = {}
    cols = {}
    j = _tail_of(data)
    firsts: pl.Series | None = None  # (the first row of each tail)
    at: pl.Series | None = None  # (each row's place among them)
    for name, cell, fn, dtype in plan.distinct:
        if j is not None and int(cell[2:]) >= j:
            # a cell of the tail: converted on the first row of each tail, spread by the rows' tail numbers
            if firsts is None or at is None:
                firsts, at = _tail_places(data.get_column(f"{_TAIL}{j}"))
            u = data.get_column(cell).gather(firsts)
            cols[name] = pl.select(fn(pl.lit(u)).cast(dtype)).to_series().gather(at)
            continue
        if cell not in uniq:
            uniq[cell] = _codes(data.get_column(cell))
        u, code = uniq[cell]
        v = pl.select(fn(pl.lit(u))).to_series()
        if code is None:
            cols[name] = pl.col(cell).replace_strict(u, v, default=None, return_dtype=dtype)
        else:
            cols[name] = v.cast(dtype).gather(code)
    for name, cell in plan.stamps:
        cols[name] = _csv_stamps(data.get_column(cell))
    return data.with_columns(**cols)


def _codes(cells: pl.Series) -> tuple[pl.Series, pl.Series | None]:
    """The distinct cells (in order of appearance) and each cell's place among them (by a cast to the Enum of
    them: one lookup per cell, that a second conversion of the column shares; None for more than _ENUM_MAX
    distinct cells)."""
    u = cells.unique(maintain_order=True).drop_nulls()  # (a null cell: null either way)
    if len(u) > _ENUM_MAX:
        return u, None
    return u, cells.cast(pl.Enum(u.to_list())).to_physical()


def _rows_by_tail(sub: pl.DataFrame, n: int) -> pl.DataFrame | None:
    """`_data_rows`' rows of one field list of `n` fields (`sub`: its candidate lines) when the lines end in a
    few distinct tails of cells (a loop's clocks, flags, error counts, link state: one text for many rows):
    each line split once at its first commas, the tail split once per distinct text; None when the first
    _TAIL_PROBE lines show no such tail (of 3 fields or more). The same rows and cells as splitting each line
    whole: a line has `n` cells when it has the head's cells and its tail the rest. A 16 MB loop: ~27 -> ~17
    ms."""
    if n < 4:
        return None
    text = sub.get_column("text")
    probe = text.head(_TAIL_PROBE)
    counts = probe.to_frame("t").select(pl.col("t").str.split_exact(",", n - 1).struct.unnest().n_unique())
    counts = counts.row(0)
    j = n
    while j > 1 and counts[j - 1] * 16 <= probe.len():
        j -= 1
    if n - j < 3 or probe.str.splitn(",", j + 1).struct.field(f"field_{j}").n_unique() * 16 > probe.len():
        return None
    head = text.str.splitn(",", j + 1).struct.unnest()
    tail = head.get_column(f"field_{j}")
    distinct = tail.drop_nulls().unique()
    if distinct.len() * 4 > len(tail):
        return None
    cells = distinct.to_frame("t").select(pl.col("t").str.split_exact(",", n - j).struct.unnest())
    # (a line has n cells when it has a tail, and its tail n - j of them)
    ok = cells.get_column(f"field_{n - j - 1}").is_not_null() & cells.get_column(f"field_{n - j}").is_null()
    code = tail.cast(pl.Enum(distinct.to_list())).to_physical()
    keep = ok.gather(code).fill_null(False)
    return sub.hstack(
        [
            *(head.get_column(f"field_{i}").alias(f"_c{i}") for i in range(j)),
            *(cells.get_column(f"field_{k}").gather(code).alias(f"_c{j + k}") for k in range(n - j)),
            code.alias(f"{_TAIL}{j}"),
        ]
    ).filter(keep)
