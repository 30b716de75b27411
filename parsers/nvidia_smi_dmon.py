"""`nvidia-smi dmon` (any `-s` selection; `-o D`/`-o T`/`-o DT` date and time columns or none).

Two `#` header lines (names, then units) govern the whitespace-separated rows below them until the next
header (dmon repeats it). Columns: `gpu` -> gpu_index, `pwr` -> power_w, `gtemp` -> temperature_c,
`mtemp` -> mem_temperature_c, `sm` -> utilization_pct, `mem` -> mem_utilization_pct, `fb` ->
memory_used_mib, `mclk` -> mem_clock_mhz, `pclk` -> sm_clock_mhz (NOTE: dmon's processor clock is the
graphics clock, which equals the SM clock on datacenter GPUs), `sbecc`/`dbecc` -> volatile ECC
counts; the rest (enc, dec, jpg, ofa, pviol, tviol, rxpci, txpci, bar1, ...) go to `extra`. `-` = N/A.
Rows carry a time only with `-o DT` (local, 'local_assumed_utc'); with `-o T` alone the time of day is
kept in `extra` and ts stays null. dmon prints no bus id: gpu_bus_id stays null.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from itertools import accumulate

import polars as pl

from parsers import _nvsmi_fields as F
from parsers.base import MAX_EXAMPLES, FileContext, ParseResult

NAME = "nvidia-smi-dmon"
DESCRIPTION = "nvidia-smi dmon device monitoring rows (any -s selection, -o DT)"
TABLES = ("gpu_samples", "events")
FILENAME_HINTS = ("*dmon*",)
DETECTS = "a '# gpu  pwr  gtemp ...' (or '#Date Time gpu ...') header followed by a '# Idx  W  C ...' units line"
PRIORITY = 15

_MANY, _PROBE = 8192, 4096
"""Lines of a chunk from which a field list's `extra` fields may be encoded once per distinct value (when the
first _PROBE rows repeat them)."""

HEADER_RE = r"^#\s*(?:Date\s+)?(?:Time\s+)?gpu(?:\s+[A-Za-z][\w]*)*\s*$"
UNITS_RE = r"^#\s*(?:YYYYMMDD\s+)?(?:HH:MM:SS\s+)?Idx\b"
_MAP = {
    "pwr": "power_w",
    "gtemp": "temperature_c",
    "mtemp": "mem_temperature_c",
    "sm": "utilization_pct",
    "mem": "mem_utilization_pct",
    "fb": "memory_used_mib",
    "mclk": "mem_clock_mhz",
    "pclk": "sm_clock_mhz",
    "sbecc": "ecc_corrected_volatile",
    "dbecc": "ecc_uncorrected_volatile",
}


def sniff(head: bytes, name: str) -> float:
    """0.95 for a dmon names line followed by its units line."""
    if b"Idx" not in head or b"gpu" not in head:  # (literals of the units and names lines: no decode)
        return 0.0
    text = head.decode("utf-8", "replace")
    if re.search(HEADER_RE, text, re.M) and re.search(UNITS_RE, text, re.M):
        return 0.95
    return 0.0


def carry(lines: pl.Series) -> list[str]:
    """The header line in force at the end of `lines` ([] when none): a file parsed in chunks can prepend it
    to the next chunk, whose first rows it governs (it is then parsed, and counted, as a header line)."""
    text = lines.cast(pl.String).fill_null("")
    hpos = text.str.starts_with("#").arg_true()
    heads = hpos.filter(text.gather(hpos).str.contains(HEADER_RE))
    return [text[int(heads[-1])]] if len(heads) else []


def _val(e: pl.Expr) -> pl.Expr:
    return pl.when(e == "-").then(None).otherwise(e)


def _skip(fields: list[str] | tuple[str, ...]) -> set[str]:
    """The fields that are neither mapped nor `extra`."""
    return {"gpu", "date", "time"} if "date" in fields else {"gpu"}


@lru_cache(maxsize=256)
def _layout(fields: tuple[str, ...]) -> tuple[str, tuple[tuple[str, tuple[str, ...]], ...]] | None:
    """The row regex of a field list whose consecutive `extra` fields are captured as one run (a group per
    run of two or more, named r<i>; other fields f<i>), and the runs of `extra` fields (group, fields) in
    order; None when no run has two fields or a field repeats (then `extra` keeps each field's own cell)."""
    if len(set(fields)) != len(fields):
        return None
    skip = _skip(fields)
    is_rest = [f not in _MAP and f not in skip for f in fields]
    parts: list[str] = []
    runs: list[tuple[str, tuple[str, ...]]] = []
    i = 0
    while i < len(fields):
        j = i
        if is_rest[i]:
            while j + 1 < len(fields) and is_rest[j + 1]:
                j += 1
        if j > i:
            parts.append(f"(?P<r{i}>[^ ]+(?: +[^ ]+){{{j - i}}})")
            runs.append((f"r{i}", fields[i : j + 1]))
        else:
            parts.append(f"(?P<f{i}>[^ ]+)")
            if is_rest[i]:
                runs.append((f"f{i}", (fields[i],)))
        i = j + 1
    if all(len(fs) == 1 for _, fs in runs):
        return None
    return "^" + " +".join(parts) + "$", tuple(runs)


def _row_regex(fields: list[str]) -> str:
    return "^" + " +".join(f"(?P<f{i}>[^ ]+)" for i in range(len(fields))) + "$"


def _extra_per_value(runs: tuple[tuple[str, tuple[str, ...]], ...]) -> pl.Expr:
    """The `extra` JSON from the run cells, encoded once per distinct text of the runs and mapped back: the
    runs are split into the fields' cells again (tokens separated by spaces, as in the row regex), so each
    value is the one the per-field cells give."""
    runs_cells = [pl.col("cells").struct.field(g) for g, _ in runs]
    key = runs_cells[0] if len(runs_cells) == 1 else pl.concat_str(runs_cells, separator=" ")
    rest = [f for _, fs in runs for f in fs]
    rx = "^" + " +".join(f"(?P<g{k}>[^ ]+)" for k in range(len(rest))) + "$"
    u = key.unique(maintain_order=True)
    toks = u.str.extract_groups(rx)
    js = pl.struct(**{f: _val(toks.struct.field(f"g{k}")) for k, f in enumerate(rest)}).struct.json_encode()
    return key.replace_strict(u, js, default=None, return_dtype=pl.String)


def _group_frame(
    data: pl.LazyFrame,
    fields: list[str],
    runs: tuple[tuple[str, tuple[str, ...]], ...] | None = None,
    keep: tuple[str, ...] = ("line", "text"),
) -> pl.LazyFrame:
    """Typed columns of the data rows of one header field list (`cells`: struct of the row's tokens; with
    `runs`, the cells of `_layout`'s regex: `extra` encoded per distinct text of its runs; `keep`: the
    columns of `data` kept as they are)."""
    in_run = {f for _, fs in runs for f in fs} if runs else set()
    cell = {f: pl.col("cells").struct.field(f"f{i}") for i, f in enumerate(fields) if f not in in_run}
    exprs = {}
    for f, col in _MAP.items():
        if f in cell:
            v = cell[f].cast(pl.Float64, strict=False)  # (`-` does not parse either: null, as _val makes it)
            exprs[col] = v.cast(pl.Int64) if col in F.INT_COLUMNS else v
    if "date" in cell and "time" in cell:
        ts = pl.concat_str([cell["date"], cell["time"]], separator=" ").str.strptime(
            pl.Datetime("us"), "%Y%m%d %H:%M:%S", strict=False
        ).dt.replace_time_zone("UTC")
    else:
        ts = pl.lit(None, dtype=F.UTC)
    skip = _skip(fields)
    rest = {f: _val(e) for f, e in cell.items() if f not in _MAP and f not in skip}
    if runs:
        extra = _extra_per_value(runs)
    else:
        extra = pl.struct(**rest).struct.json_encode() if rest else pl.lit(None, dtype=pl.String)
    return data.select(
        *keep,
        ts=ts,
        gpu_index=cell["gpu"].cast(pl.Int32, strict=False) if "gpu" in cell else pl.lit(None, dtype=pl.Int32),
        extra=extra,
        **exprs,
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
    stripped = text.str.strip_chars()
    blank = stripped.str.len_bytes() == 0
    hpos = text.str.starts_with("#").arg_true()
    htext = text.gather(hpos)
    is_h = htext.str.contains(HEADER_RE)
    is_u = htext.str.contains(UNITS_RE)
    head_pos = hpos.filter(is_h)
    sigs: dict[tuple[str, ...], int] = {}
    # (dmon repeats its header every few rows: each distinct header text is split once)
    head_texts = htext.filter(is_h).to_list()
    sig_of_text = {
        t: sigs.setdefault(tuple(f.lower() for f in t.lstrip("#").split()), len(sigs))
        for t in dict.fromkeys(head_texts)
    }
    sig_of_header = [sig_of_text[t] for t in head_texts]
    marks = hpos.filter(is_h | is_u)
    pos = pl.int_range(0, n, dtype=pl.UInt32, eager=True)
    # index of the governing header (-1: none yet); header and units lines themselves are never data
    hi = head_pos.search_sorted(pos, side="right").cast(pl.Int64) - 1
    sig = pl.Series([None, *sig_of_header], dtype=pl.Int64).gather(hi + 1)
    mark = pl.repeat(False, n, dtype=pl.Boolean, eager=True)
    if len(marks):
        mark = mark.scatter(marks, True)
    frame = pl.DataFrame(
        {
            "line": pl.int_range(ctx.first_line, ctx.first_line + n, dtype=pl.Int64, eager=True),
            "text": text,
            "stripped": stripped,
            "sig": sig,
            "mark": mark,
        }
    )
    parts = []
    data_lines: list[pl.Series] = []
    for fields_t, s in sigs.items():
        fields = list(fields_t)
        rx = _row_regex(fields)
        # A long group whose `extra` fields repeat their values (idle encoders: `0 0 0 0`) captures each run
        # of `extra` fields as one cell (fewer captures) and encodes `extra` once per distinct run text.
        layout = _layout(fields_t) if n >= _MANY else None
        runs = None
        if layout is not None:
            probe = (
                frame.lazy()
                .filter((pl.col("sig") == s) & ~pl.col("mark"))
                .head(_PROBE)
                .select(cells=pl.col("stripped").str.extract_groups(layout[0]))
                .select(pl.concat_str([pl.col("cells").struct.field(g) for g, _ in layout[1]], separator=" "))
                .collect(engine="in-memory")
                .to_series()
            )
            if probe.len() and probe.n_unique() * 4 <= probe.len():
                rx, runs = layout
        # (the rows of the field list, their cells and typed columns in one query)
        data = (
            frame.lazy()
            .filter((pl.col("sig") == s) & ~pl.col("mark"))
            .with_columns(cells=pl.col("stripped").str.extract_groups(rx))
            .filter(pl.col("cells").struct.field(rx[rx.index("<") + 1 : rx.index(">")]).is_not_null())
        )
        part = _group_frame(data, fields, runs).collect(engine="in-memory")
        if part.height == 0:
            continue
        data_lines.append(part.get_column("line"))
        parts.append(part)
    ok = mark
    if data_lines:
        first = ctx.first_line
        ok = ok.scatter(pl.concat(data_lines) - first, True)
    bad = ~ok & ~blank
    unrecognized = int(bad.sum())
    parsed = n - unrecognized - int(blank.sum())
    bad_idx = bad.arg_true().head(MAX_EXAMPLES)
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


def parse_many(items: Sequence[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
    """`[parse(lines, ctx) for lines, ctx in items]` in one pass over the lines of all files: every line is
    governed by the last header above it in its own file, the rows of one field list are read in one query
    whatever file they are in, the accounting is counted per file from the flags of all lines, and the
    events are found per GPU of each file (`F.transition_events_many`). Files of `_MANY` lines or more (whose
    `extra` may be encoded per distinct value) are parsed alone."""
    out: list[ParseResult | None] = [None] * len(items)
    batch = [k for k, (lines, _ctx) in enumerate(items) if len(lines) < _MANY]
    if len(batch) < 2:
        batch = []
    alone = set(range(len(items))).difference(batch)
    for k in sorted(alone):
        out[k] = parse(*items[k])
    if batch:
        for k, result in zip(batch, _parse_batch([items[k] for k in batch]), strict=True):
            out[k] = result
    return out  # type: ignore[return-value]


def _parse_batch(items: Sequence[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
    """`parse_many` of files of fewer than `_MANY` lines each."""
    nf = len(items)
    sizes = [len(lines) for lines, _ in items]
    starts = list(accumulate(sizes, initial=0))
    n = starts[-1]
    text = pl.concat([lines.cast(pl.String) for lines, _ in items], how="vertical").fill_null("")
    stripped = text.str.strip_chars()
    blank = stripped.str.len_bytes() == 0
    pos = pl.int_range(0, n, dtype=pl.UInt32, eager=True)
    # the file of each line, and its line number there
    file_of = pl.Series(starts[1:], dtype=pl.UInt32).search_sorted(pos, side="right").cast(pl.Int64)
    line_off = pl.Series([ctx.first_line - starts[k] for k, (_l, ctx) in enumerate(items)], dtype=pl.Int64)
    hpos = text.str.starts_with("#").arg_true()
    htext = text.gather(hpos)
    is_h = htext.str.contains(HEADER_RE)
    is_u = htext.str.contains(UNITS_RE)
    head_pos = hpos.filter(is_h)
    sigs: dict[tuple[str, ...], int] = {}
    head_texts = htext.filter(is_h).to_list()
    sig_of_text = {
        t: sigs.setdefault(tuple(f.lower() for f in t.lstrip("#").split()), len(sigs))
        for t in dict.fromkeys(head_texts)
    }
    sig_of_header = [sig_of_text[t] for t in head_texts]
    marks = hpos.filter(is_h | is_u)
    # index of the governing header (-1: none yet): the last one above the line, when in the line's file
    hi = head_pos.search_sorted(pos, side="right").cast(pl.Int64)
    head_file = pl.Series([-1, *file_of.gather(head_pos).to_list()], dtype=pl.Int64)
    sig_s = pl.Series([None, *sig_of_header], dtype=pl.Int64)
    mark = pl.repeat(False, n, dtype=pl.Boolean, eager=True)
    if len(marks):
        mark = mark.scatter(marks, True)
    frame = pl.DataFrame(
        {"_pos": pos, "_f": file_of, "_hi": hi, "text": text, "stripped": stripped, "mark": mark}
    ).select(
        "_pos",
        "_f",
        line=pl.col("_pos").cast(pl.Int64) + pl.lit(line_off).gather(pl.col("_f")),
        text="text",
        stripped="stripped",
        sig=pl.when(pl.lit(head_file).gather(pl.col("_hi")) == pl.col("_f")).then(
            pl.lit(sig_s).gather(pl.col("_hi"))
        ),
        mark="mark",
    )
    parts = []
    data_pos: list[pl.Series] = []
    for fields_t, s in sigs.items():
        fields = list(fields_t)
        rx = _row_regex(fields)
        data = (
            frame.lazy()
            .filter((pl.col("sig") == s) & ~pl.col("mark"))
            .with_columns(cells=pl.col("stripped").str.extract_groups(rx))
            .filter(pl.col("cells").struct.field(rx[rx.index("<") + 1 : rx.index(">")]).is_not_null())
        )
        part = _group_frame(data, fields, None, ("_pos", "_f", "line", "text")).collect(engine="in-memory")
        if part.height == 0:
            continue
        data_pos.append(part.get_column("_pos"))
        parts.append(part)
    ok = mark
    if data_pos:
        ok = ok.scatter(pl.concat(data_pos), True)
    bad = ~ok & ~blank
    bad_pos = bad.arg_true()
    cut = pl.Series(starts, dtype=pl.UInt32)
    bad_at = bad_pos.search_sorted(cut).to_list()
    blank_at = blank.arg_true().search_sorted(cut).to_list()
    # examples: the first MAX_EXAMPLES bad lines of each file, read in one gather
    ex_pos = [bad_pos.slice(bad_at[k], min(MAX_EXAMPLES, bad_at[k + 1] - bad_at[k])) for k in range(nf)]
    ex_all = pl.concat(ex_pos)
    ex_text = text.gather(ex_all).to_list() if len(ex_all) else []
    ex_at = list(accumulate((len(e) for e in ex_pos), initial=0))
    ex_num = ex_all.to_list()

    samples_of: list[pl.DataFrame]
    events_of: list[pl.DataFrame]
    if parts:
        samples = pl.concat(parts, how="diagonal_relaxed").sort("_pos") if len(parts) > 1 else parts[0]
        nodes = pl.Series([ctx.node for _, ctx in items], dtype=pl.String)
        paths = pl.Series([ctx.path for _, ctx in items], dtype=pl.String)
        samples = samples.with_columns(
            node=pl.lit(nodes).gather(pl.col("_f")),
            file=pl.lit(paths).gather(pl.col("_f")),
            source=pl.lit("nvidia-smi-dmon"),
            ts_quality=pl.when(pl.col("ts").is_not_null()).then(pl.lit("local_assumed_utc")).otherwise(pl.lit("none")),
            gpu_bus_id=pl.lit(None, dtype=pl.String),
        )
        events_of = F.transition_events_many(samples, nf)
        fcol = samples.get_column("_f")
        at = fcol.search_sorted(pl.Series(range(nf + 1), dtype=fcol.dtype)).to_list()
        conformed = F.conform_known(samples, "gpu_samples")
        empty = F.conform_table(pl.DataFrame(), "gpu_samples")
        samples_of = [conformed.slice(a, b - a) if b > a else empty.clone() for a, b in zip(at, at[1:])]
    else:
        events_of = [F.conform_table(pl.DataFrame(), "events") for _ in range(nf)]
        samples_of = [F.conform_table(pl.DataFrame(), "gpu_samples") for _ in range(nf)]
    out = []
    for k, (_lines, ctx) in enumerate(items):
        unrecognized = bad_at[k + 1] - bad_at[k]
        examples = [
            (ctx.first_line + p - starts[k], str(t)[:500])
            for p, t in zip(ex_num[ex_at[k] : ex_at[k + 1]], ex_text[ex_at[k] : ex_at[k + 1]], strict=True)
        ]
        out.append(
            ParseResult(
                tables={"gpu_samples": samples_of[k], "events": events_of[k]},
                parsed=sizes[k] - unrecognized - (blank_at[k + 1] - blank_at[k]),
                unrecognized=unrecognized,
                unrecognized_examples=examples,
            )
        )
    return out
