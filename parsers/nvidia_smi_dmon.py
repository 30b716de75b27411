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

import polars as pl

from parsers import _nvsmi_fields as F
from parsers.base import FileContext, ParseResult, account, numbered

NAME = "nvidia-smi-dmon"
DESCRIPTION = "nvidia-smi dmon device monitoring rows (any -s selection, -o DT)"
TABLES = ("gpu_samples", "events")
FILENAME_HINTS = ("*dmon*",)
DETECTS = "a '# gpu  pwr  gtemp ...' (or '#Date Time gpu ...') header followed by a '# Idx  W  C ...' units line"
PRIORITY = 15

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
    text = head.decode("utf-8", "replace")
    if re.search(HEADER_RE, text, re.M) and re.search(UNITS_RE, text, re.M):
        return 0.95
    return 0.0


def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """Parse every header group; see the module docstring."""
    frame = numbered(lines, ctx).with_columns(text=pl.col("text").fill_null(""))
    is_header = pl.col("text").str.contains(HEADER_RE)
    is_units = pl.col("text").str.contains(UNITS_RE)
    frame = frame.with_columns(
        is_header=is_header,
        is_units=is_units,
        header=pl.when(is_header).then(pl.col("line")).otherwise(None).forward_fill(),
        cells=pl.col("text").str.strip_chars().str.split(" ").list.eval(pl.element().filter(pl.element() != "")),
    )
    header_fields = {
        int(ln): [f.lower() for f in t.lstrip("#").split()]
        for ln, t in frame.filter(pl.col("is_header")).select("line", "text").iter_rows()
    }
    frame = frame.with_columns(
        nfields=pl.col("header").replace_strict({k: len(v) for k, v in header_fields.items()}, default=None, return_dtype=pl.Int64)
    )
    data_ok = ~pl.col("is_header") & ~pl.col("is_units") & (pl.col("cells").list.len() == pl.col("nfields"))
    parsed, unrecognized, examples = account(frame.select("line", "text", ok=pl.col("is_header") | pl.col("is_units") | data_ok), pl.col("ok"))

    parts = []
    for hline, fields in header_fields.items():
        data = frame.filter((pl.col("header") == hline) & data_ok)
        if data.height == 0:
            continue
        cell = {f: pl.col("cells").list.get(i) for i, f in enumerate(fields)}

        def val(e: pl.Expr) -> pl.Expr:
            return pl.when(e == "-").then(None).otherwise(e)

        exprs = {}
        for f, col in _MAP.items():
            if f in cell:
                v = val(cell[f]).cast(pl.Float64, strict=False)
                exprs[col] = v.cast(pl.Int64) if col in F.INT_COLUMNS else v
        if "date" in cell and "time" in cell:
            ts = pl.concat_str([cell["date"], cell["time"]], separator=" ").str.strptime(
                pl.Datetime("us"), "%Y%m%d %H:%M:%S", strict=False
            ).dt.replace_time_zone("UTC")
        else:
            ts = pl.lit(None, dtype=F.UTC)
        skip = {"gpu", "date", "time"} if "date" in cell else {"gpu"}
        rest = {f: val(e) for f, e in cell.items() if f not in _MAP and f not in skip}
        parts.append(
            data.select(
                "line",
                "text",
                ts=ts,
                gpu_index=cell["gpu"].cast(pl.Int32, strict=False) if "gpu" in cell else pl.lit(None, dtype=pl.Int32),
                extra=pl.struct(**rest).struct.json_encode() if rest else pl.lit(None, dtype=pl.String),
                **exprs,
            )
        )
    if parts:
        samples = pl.concat(parts, how="diagonal_relaxed").sort("line").with_columns(
            node=pl.lit(ctx.node),
            file=pl.lit(ctx.path),
            source=pl.lit("nvidia-smi-dmon"),
            ts_quality=pl.when(pl.col("ts").is_not_null()).then(pl.lit("local_assumed_utc")).otherwise(pl.lit("none")),
            gpu_bus_id=pl.lit(None, dtype=pl.String),
        )
        events = F.transition_events(samples, ctx)
        gpu_samples = F.conform_table(samples.select([c for c in samples.columns if c in F.SAMPLE_SCHEMA]), "gpu_samples")
    else:
        events = F.conform_table(pl.DataFrame(), "events")
        gpu_samples = F.conform_table(pl.DataFrame(), "gpu_samples")
    return ParseResult(
        tables={"gpu_samples": gpu_samples, "events": events},
        parsed=parsed,
        unrecognized=unrecognized,
        unrecognized_examples=examples,
    )
