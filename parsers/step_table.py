"""Generic step tables: CSV/TSV or JSON Lines with a step column and a time or duration column → `steps`.

For anything the framework grammars of `step_log` do not know: exports from W&B or TensorBoard, or a
user's own logger. The accepted column names are listed in `COLUMNS` and documented in
`docs/step-logs.md` (matching ignores case, spaces, dashes and dots). A file qualifies when its header
(CSV) or its first JSON objects name a step column and at least one of: a step duration, a cumulative
runtime, or a timestamp. Step times are always seconds: `_ms` columns are divided by 1000; without a
duration the step time is derived from cumulative runtime deltas or timestamp deltas between consecutive
rows of the same rank/node (`step_time_source` says which).
"""

from __future__ import annotations

import csv
import json
import re

import polars as pl

from forensics.schema import UTC_US, conform, empty
from parsers._sniff import head_text
from parsers.base import FileContext, ParseResult, account, numbered

NAME = "step-table"
DESCRIPTION = "Generic step tables: CSV/TSV or JSON Lines with a step column and a time or duration column"
TABLES = ("steps",)
FILENAME_HINTS = ("*.csv", "*.tsv", "*.jsonl", "*.ndjson")
DETECTS = "a CSV/TSV header or JSON Lines objects naming a step column (step, iteration, global_step, …) and a time/duration column"
PRIORITY = 4

# canonical field → accepted names (normalised: lower case, spaces/dashes/dots → '_')
COLUMNS: dict[str, tuple[str, ...]] = {
    "step": ("step", "global_step", "iteration", "iter", "_step", "trainer/global_step", "train/global_step", "steps"),
    "step_time_s": (
        "step_time_s",
        "step_time",
        "step_time_sec",
        "iter_time_s",
        "iteration_time_s",
        "time_per_step",
        "time_per_step_s",
        "step_duration_s",
        "duration_s",
        "duration",
        "train_step_timing",
        "train_step_timing_in_s",
        "perf/step_time",
    ),
    "step_time_ms": (
        "step_time_ms",
        "iter_time_ms",
        "iteration_time_ms",
        "elapsed_time_per_iteration_ms",
        "duration_ms",
        "time_per_step_ms",
    ),
    "cum_time_s": ("_runtime", "runtime", "elapsed_s", "elapsed", "train_time_s", "wall_clock_s"),
    "ts": ("ts", "timestamp", "time", "wall_time", "walltime", "_timestamp", "datetime", "date_time"),
    "rank": ("rank", "global_rank"),
    "node": ("node", "host", "hostname"),
    "loss": ("loss", "train_loss", "train/loss", "lm_loss", "train/lm_loss"),
    "throughput": ("throughput",),
    "throughput_unit": ("throughput_unit",),
    "samples_per_s": ("samples_per_s", "samples_per_sec", "samples_per_second", "samples/s", "throughput/samples_per_sec"),
    "tokens_per_s": ("tokens_per_s", "tokens_per_sec", "tokens_per_second", "tps", "tokens/s"),
    "tflops": ("tflops", "tflops_per_gpu", "tflop/s/gpu"),
    "forward_s": ("forward_s",),
    "backward_s": ("backward_s",),
    "optimizer_s": ("optimizer_s",),
    "comm_wait_s": ("comm_wait_s",),
    "data_s": ("data_s",),
    "framework": ("framework",),
}
TIME_FIELDS = ("step_time_s", "step_time_ms", "cum_time_s", "ts")


_SEPS = re.compile(r"[\s.\-]+")


def _norm(name: str) -> str:
    return _SEPS.sub("_", name.strip().strip('"').strip("'").lower())


_ALIASES = {alias: field for field, names in COLUMNS.items() for alias in names}


def _fields(names: list[str]) -> dict[str, str]:
    """Map canonical fields to the first matching original column name."""
    out: dict[str, str] = {}
    normed = [_norm(name) for name in names]
    for name, key in zip(names, normed, strict=True):
        field = _ALIASES.get(key)
        if field and field not in out:
            out[field] = name
    # TensorBoard scalar export: `Wall time,Step,Value`
    if "ts" not in out:
        for name, key in zip(names, normed, strict=True):
            if key == "wall_time":
                out["ts"] = name
    return out


def _qualifies(fields: dict[str, str]) -> bool:
    return "step" in fields and any(f in fields for f in TIME_FIELDS)


def _first_lines(head: bytes) -> list[str]:
    """The head's first non-blank lines not opening with '#' (at least the first 5: all the sniff reads)."""
    text = head_text(head)
    if len(text) > 4096:
        # the lines of the first 4,096 characters but the last (maybe cut short) are the head's first lines
        got = [ln for ln in text[:4096].splitlines()[:-1] if ln.strip() and not ln.startswith("#")][:5]
        if len(got) == 5:
            return got
    return [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")][:20]


def _header(line: str) -> tuple[str, list[str]] | None:
    """(separator, column names) of a CSV/TSV header line, or None."""
    for sep in (",", "\t", ";"):
        if line.count(sep) >= 1:
            try:
                names = next(csv.reader([line], delimiter=sep))
            except csv.Error:  # a carriage return inside the line (a lone one is kept in a line): no header
                return None
            if len(names) >= 2:
                return sep, [n.strip() for n in names]
    return None


def _first_line(text: str) -> str | None:
    """The first of `_first_lines` (a non-blank line not opening with '#'), or None: looked for in the head's
    first 512 characters, then its first 4,096 (lines but the last, maybe cut short, of a prefix are lines of
    the head), then in all of it."""
    for size in (512, 4096):
        if len(text) <= size:
            break
        for ln in text[:size].splitlines()[:-1]:
            if ln.strip() and not ln.startswith("#"):
                return ln
    for ln in text.splitlines():
        if ln.strip() and not ln.startswith("#"):
            return ln
    return None


def sniff(head: bytes, name: str) -> float:
    """0.95 for a header/JSON object naming a step and a time column; 0 otherwise."""
    first = _first_line(head_text(head))
    if first is None:
        return 0.0
    if first.lstrip().startswith("{"):
        keys: list[str] = []
        for ln in _first_lines(head)[:5]:
            try:
                obj = json.loads(ln)
            except ValueError:
                continue
            if isinstance(obj, dict):
                keys += [k for k in obj if k not in keys]
        return 0.95 if _qualifies(_fields(keys)) else 0.0
    # a header qualifies only with a step column, whose name holds 'step' or 'iter' (every alias of `step`
    # does) once lower-cased (`_norm`: only the letters themselves lower-case to one of these, save 'İ', to an
    # 'i' and a combining dot) and freed of the quotes the csv reader drops: an exact shortcut
    low = first.replace('"', "").lower()
    if "step" not in low and "iter" not in low:
        return 0.0
    got = _header(first)
    if got is None:
        return 0.0
    return 0.95 if _qualifies(_fields(got[1])) else 0.0


def _parse_ts(raw: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """(UTC time, ts_quality) from epoch seconds/milliseconds or ISO text (offset → exact, none → local_assumed_utc)."""
    num = raw.cast(pl.Float64, strict=False)
    epoch_us = pl.when(num > 1e11).then(num * 1e3).otherwise(num * 1e6).cast(pl.Int64, strict=False)
    from_epoch = pl.when(num > 1e8).then(epoch_us.cast(pl.Datetime("us")).dt.replace_time_zone("UTC"))
    s = raw.cast(pl.String).str.strip_chars().str.replace(" ", "T", literal=True).str.replace(",", ".", literal=True)
    with_tz = (
        s.str.replace(r"Z$", "+00:00")
        .str.replace(r"([+-]\d\d)(\d\d)$", "$1:$2")
        .str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%:z", strict=False, time_unit="us")
        .dt.convert_time_zone("UTC")
    )
    naive = s.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", strict=False, time_unit="us").dt.replace_time_zone("UTC")
    ts = pl.coalesce(from_epoch, with_tz, naive)
    q = (
        pl.when(from_epoch.is_not_null() | with_tz.is_not_null())
        .then(pl.lit("exact"))
        .when(naive.is_not_null())
        .then(pl.lit("local_assumed_utc"))
        .otherwise(pl.lit("none"))
    )
    return ts, q


CARRY_TAIL = 0
"""`carry` picks the rows it hands on itself (the ingest's blind tail of lines would count a line not
understood as understood)."""
CARRY_ROWS = 64


def carry(lines: pl.Series) -> list[str]:
    """What the next chunk of a CSV longer than a chunk (a long run's W&B export) is parsed after: the header
    line in force (`parse` takes a chunk's first content line for its header), then those of the last
    `CARRY_ROWS` lines that make rows (whose runtimes and times the next chunk's first step times are deltas
    from). [] for JSON Lines or a table without a qualifying header."""
    text = lines.cast(pl.String).fill_null("")
    first = text.filter((text.str.strip_chars() != "") & ~text.str.starts_with("#")).head(1).to_list()
    if not first or first[0].lstrip().startswith("{"):
        return []
    got = _header(first[0])
    if got is None:
        return []
    sep, names = got
    fields = _fields(names)
    if not _qualifies(fields):
        return []
    tail = text.tail(CARRY_ROWS).to_frame("text")
    step = _cell(pl.col("text").str.split(sep), names, fields["step"]).cast(pl.Float64, strict=False)
    makes_row = step.cast(pl.Int64, strict=False).is_not_null() & (pl.col("text") != first[0])
    return [first[0], *tail.filter(makes_row).get_column("text").to_list()]


def _cell(parts: pl.Expr, names: list[str], column: str) -> pl.Expr:
    """The value of CSV `column` in the cells `parts` of a row (`names`: the header's), unquoted."""
    return parts.list.get(names.index(column), null_on_oob=True).str.strip_chars().str.strip_chars('"')


def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """Parse a CSV/TSV or JSON Lines step table."""
    frame = numbered(lines, ctx)
    content = frame.filter((pl.col("text").str.strip_chars() != "") & ~pl.col("text").str.starts_with("#"))
    if content.height == 0:
        parsed, unrec, ex = account(frame, pl.lit(False))
        return ParseResult(tables={"steps": empty("steps")}, parsed=parsed, unrecognized=unrec)
    first = content.get_column("text")[0]
    is_json = first.lstrip().startswith("{")
    values: dict[str, pl.Expr] = {}
    header_line: int | None = None
    if is_json:
        keys: list[str] = []
        for ln in content.get_column("text").head(50).to_list():
            try:
                obj = json.loads(ln)
            except ValueError:
                continue
            if isinstance(obj, dict):
                keys += [k for k in obj if k not in keys]
        fields = _fields(keys)
        for field, col in fields.items():
            values[field] = pl.col("text").str.json_path_match(f"$[{json.dumps(col)}]")
        rows_frame = frame
        row_ok = pl.col("text").str.strip_chars().str.starts_with("{") & pl.col("text").str.strip_chars().str.ends_with("}")
    else:
        got = _header(first) or (",", [first])
        sep, names = got
        fields = _fields(names)
        header_line = int(content.get_column("line")[0])
        parts = pl.col("text").str.split(sep)
        for field, col in fields.items():
            values[field] = _cell(parts, names, col)
        rows_frame = frame.filter(pl.col("line") > header_line)
        row_ok = pl.lit(True)
    if not _qualifies(fields):
        parsed, unrec, ex = account(frame, pl.lit(False))
        return ParseResult(
            tables={"steps": empty("steps")},
            parsed=parsed,
            unrecognized=unrec,
            unrecognized_examples=ex,
            notes=["no step column together with a time or duration column"],
        )
    num = {f: v.cast(pl.Float64, strict=False) for f, v in values.items() if f not in ("node", "framework", "throughput_unit", "ts")}
    null_f = pl.lit(None, dtype=pl.Float64)
    step = num["step"].cast(pl.Int64, strict=False)
    ts, ts_q = _parse_ts(values["ts"]) if "ts" in values else (pl.lit(None, dtype=UTC_US), pl.lit("none"))
    sps, tps = num.get("samples_per_s", null_f), num.get("tokens_per_s", null_f)
    throughput = pl.coalesce(num.get("throughput", null_f), sps, tps)
    unit = pl.coalesce(
        values.get("throughput_unit", pl.lit(None, dtype=pl.String)),
        pl.when(num.get("throughput", null_f).is_null() & sps.is_not_null()).then(pl.lit("samples/s")),
        pl.when(num.get("throughput", null_f).is_null() & tps.is_not_null()).then(pl.lit("tokens/s")),
    )
    duration = pl.coalesce(num.get("step_time_s", null_f), num.get("step_time_ms", null_f) / 1000.0)
    extra_value = None
    if not is_json:
        tb_value = [n for n in names if _norm(n) == "value"]
        if tb_value:
            extra_value = parts.list.get(names.index(tb_value[0]), null_on_oob=True).cast(pl.Float64, strict=False)
    rows = rows_frame.with_columns(
        step=step,
        ts=ts,
        ts_quality=ts_q,
        node=pl.coalesce(values.get("node", pl.lit(None, dtype=pl.String)), pl.lit(ctx.node)),
        rank=num.get("rank", null_f).cast(pl.Int32, strict=False),
        step_time_s=duration,
        step_time_source=pl.when(duration.is_not_null()).then(pl.lit("reported")),
        cum_time_s=num.get("cum_time_s", null_f),
        forward_s=num.get("forward_s", null_f),
        backward_s=num.get("backward_s", null_f),
        optimizer_s=num.get("optimizer_s", null_f),
        comm_wait_s=num.get("comm_wait_s", null_f),
        data_s=num.get("data_s", null_f),
        throughput=throughput,
        throughput_unit=unit,
        tflops=num.get("tflops", null_f),
        loss=num.get("loss", null_f),
        framework=values.get("framework", pl.lit("generic")).fill_null("generic"),
        detail=pl.struct(value=extra_value).struct.json_encode() if extra_value is not None else pl.lit(None, dtype=pl.String),
        ok=row_ok & step.is_not_null(),
    )
    understood = rows.filter("ok").select("line")
    if header_line is not None:
        understood = pl.concat([understood, pl.DataFrame({"line": [header_line]})])
    parsed, unrec, examples = account(frame, pl.col("line").is_in(understood.get_column("line").implode()))
    rows = rows.filter("ok").with_columns(rank_key=pl.col("rank").fill_null(-1)).sort("node", "rank_key", "line")
    grp = ["node", "rank_key"]
    d_step = (pl.col("step") - pl.col("step").shift(1)).over(grp)
    d_cum = (pl.col("cum_time_s") - pl.col("cum_time_s").shift(1)).over(grp)
    d_ts = ((pl.col("ts") - pl.col("ts").shift(1)).dt.total_microseconds() / 1e6).over(grp)
    from_cum = pl.when((d_step > 0) & (d_cum > 0)).then(d_cum / d_step)
    from_ts = pl.when((d_step > 0) & (d_ts > 0)).then(d_ts / d_step)
    rows = rows.with_columns(
        step_time_source=pl.when(pl.col("step_time_s").is_not_null())
        .then(pl.col("step_time_source"))
        .when(from_cum.is_not_null())
        .then(pl.lit("cumulative_delta"))
        .when(from_ts.is_not_null())
        .then(pl.lit("ts_delta")),
        step_time_s=pl.coalesce(pl.col("step_time_s"), from_cum, from_ts),
    ).sort("line")
    steps = rows.select(
        "ts",
        pl.when(pl.col("ts").is_null()).then(pl.lit("none")).otherwise(pl.col("ts_quality")).alias("ts_quality"),
        "node",
        "rank",
        "step",
        "step_time_s",
        "forward_s",
        "backward_s",
        "optimizer_s",
        "comm_wait_s",
        "data_s",
        "throughput",
        "throughput_unit",
        "tflops",
        "loss",
        "framework",
        "step_time_source",
        "detail",
        file=pl.lit(ctx.path),
        line=pl.col("line"),
    )
    return ParseResult(
        tables={"steps": conform(steps, "steps")}, parsed=parsed, unrecognized=unrec, unrecognized_examples=examples
    )
