"""The tables of DESIGN.md as polars schemas: the one contract between parsers, analysis and report.

Every table keeps `file` and `line` so evidence can be quoted verbatim. Times are UTC microseconds;
`ts_quality` says how a time was obtained (see `TsQuality`).
"""

from __future__ import annotations

import functools
from enum import Enum

import polars as pl

from forensics.errors import SchemaError

SCHEMA_VERSION = 1

UTC_US = pl.Datetime("us", "UTC")


class TsQuality(str, Enum):
    """How a row's `ts` was obtained."""

    EXACT = "exact"  # the line carries a zone or offset, or is epoch based
    LOCAL_ASSUMED_UTC = "local_assumed_utc"  # local wall time, zone unknown, taken as UTC
    ZONE_INFERRED = "zone_inferred"  # local wall time shifted by the offset measured on an offset-bearing copy
    YEAR_INFERRED = "year_inferred"  # syslog-style time without a year; year inferred from the bundle
    BOOT_ANCHORED = "boot_anchored"  # monotonic seconds since boot + a boot time found in the bundle
    UNANCHORED = "unanchored"  # monotonic seconds only; `uptime_s` kept, `ts` null
    INHERITED = "inherited"  # taken from a neighbouring timestamped line of the same file
    NONE = "none"  # no time at all


_PROVENANCE = {"file": pl.String, "line": pl.Int64}

TABLES: dict[str, pl.Schema] = {
    "files": pl.Schema(
        {
            "path": pl.String,
            "node": pl.String,
            "node_source": pl.String,  # path | content | unknown
            "format": pl.String,
            "parser": pl.String,
            "score": pl.Float64,
            "runner_up": pl.String,
            "bytes": pl.Int64,
            "lines": pl.Int64,
            "parsed": pl.Int64,
            "unrecognized": pl.Int64,
            "status": pl.String,  # ok | partial | skipped: reason | error: reason
            "sha256": pl.String,
        }
    ),
    "events": pl.Schema(
        {
            "ts": UTC_US,
            "ts_quality": pl.String,
            "uptime_s": pl.Float64,  # monotonic seconds since boot, where the line gave them
            "node": pl.String,
            "gpu_index": pl.Int32,
            "gpu_bus_id": pl.String,  # normalised 0000:3b:00.0
            "rank": pl.Int32,
            "source": pl.String,  # kernel, nccl, torch, nvidia-smi, ib, dcgm, ...
            "kind": pl.String,  # xid, sxid, pcie_aer, nic_link, ecc, thermal, nccl_warn, ...
            "code": pl.String,  # e.g. the XID number
            "severity": pl.String,  # critical | high | medium | low | info
            "message": pl.String,  # verbatim
            "detail": pl.String,  # JSON object of extra fields (pid, peer, link mask, ...)
            **_PROVENANCE,
        }
    ),
    "steps": pl.Schema(
        {
            "ts": UTC_US,
            "ts_quality": pl.String,
            "node": pl.String,
            "rank": pl.Int32,
            "step": pl.Int64,
            "step_time_s": pl.Float64,
            "forward_s": pl.Float64,
            "backward_s": pl.Float64,
            "optimizer_s": pl.Float64,
            "comm_wait_s": pl.Float64,
            "data_s": pl.Float64,
            "throughput": pl.Float64,
            "throughput_unit": pl.String,  # samples/s, tokens/s, it/s, TFLOP/s/GPU
            "tflops": pl.Float64,
            "loss": pl.Float64,
            "framework": pl.String,
            "step_time_source": pl.String,  # reported | tqdm_rate | rate | cumulative_delta | ts_delta | run_mean
            "phase_spread_s": pl.Float64,  # widest (max - min) across ranks of the step's timers (Megatron)
            "phase_spread_name": pl.String,  # the timer with that spread, e.g. forward-compute
            "detail": pl.String,  # JSON: timers [{name, ms|min_ms,max_ms[,min_rank,max_rank]}], lr, grad_norm, ...
            **_PROVENANCE,
        }
    ),
    "gpu_samples": pl.Schema(
        {
            "ts": UTC_US,
            "ts_quality": pl.String,
            "node": pl.String,
            "gpu_index": pl.Int32,
            "gpu_bus_id": pl.String,
            "gpu_uuid": pl.String,
            "utilization_pct": pl.Float64,
            "mem_utilization_pct": pl.Float64,
            "memory_used_mib": pl.Float64,
            "memory_total_mib": pl.Float64,
            "temperature_c": pl.Float64,
            "mem_temperature_c": pl.Float64,
            "power_w": pl.Float64,
            "power_limit_w": pl.Float64,
            "sm_clock_mhz": pl.Float64,
            "mem_clock_mhz": pl.Float64,
            "throttle_gpu_idle": pl.Boolean,
            "throttle_applications_clocks_setting": pl.Boolean,
            "throttle_sw_power_cap": pl.Boolean,
            "throttle_hw_slowdown": pl.Boolean,
            "throttle_hw_thermal_slowdown": pl.Boolean,
            "throttle_hw_power_brake_slowdown": pl.Boolean,
            "throttle_sync_boost": pl.Boolean,
            "throttle_sw_thermal_slowdown": pl.Boolean,
            "throttle_display_clock_setting": pl.Boolean,
            "ecc_corrected_volatile": pl.Int64,
            "ecc_uncorrected_volatile": pl.Int64,
            "ecc_corrected_aggregate": pl.Int64,
            "ecc_uncorrected_aggregate": pl.Int64,
            "retired_pages_sbe": pl.Int64,
            "retired_pages_dbe": pl.Int64,
            "retired_pages_pending": pl.Boolean,
            "remapped_rows_correctable": pl.Int64,
            "remapped_rows_uncorrectable": pl.Int64,
            "remap_pending": pl.Boolean,
            "remap_failure": pl.Boolean,
            "pcie_gen": pl.Int32,
            "pcie_width": pl.Int32,
            "pcie_gen_max": pl.Int32,
            "pcie_width_max": pl.Int32,
            "source": pl.String,  # nvidia-smi-q, nvidia-smi-xml, nvidia-smi-csv, dmon, ...
            "extra": pl.String,  # JSON object of fields we have no column for (kept, not dropped)
            **_PROVENANCE,
        }
    ),
    "inventory": pl.Schema(
        {
            "node": pl.String,
            "component": pl.String,  # node | gpu | nic | nvswitch | software
            "gpu_index": pl.Int32,
            "gpu_bus_id": pl.String,
            "device": pl.String,  # e.g. mlx5_0 for NICs
            "port": pl.Int32,  # NIC port number for per-port attributes (IB state, rate, ...); null otherwise
            "attribute": pl.String,  # name, serial, uuid, vbios, driver_version, cuda_version, ...
            "value": pl.String,
            "source": pl.String,
            **_PROVENANCE,
        }
    ),
    "comms": pl.Schema(
        {
            "record": pl.String,  # rank | nccl_test | nccl_test_summary | ib_counter | network
            "ts": UTC_US,
            "node": pl.String,
            "comm_id": pl.String,
            "rank": pl.Int32,
            "nranks": pl.Int32,
            "cuda_dev": pl.Int32,
            "gpu_bus_id": pl.String,
            "pid": pl.Int64,
            "nccl_version": pl.String,
            "test": pl.String,  # all_reduce_perf, ...
            "size_bytes": pl.Int64,
            "count": pl.Int64,
            "dtype": pl.String,
            "redop": pl.String,
            "placement": pl.String,  # out-of-place | in-place
            "time_us": pl.Float64,
            "algbw_gbps": pl.Float64,
            "busbw_gbps": pl.Float64,
            "wrong": pl.Int64,
            "nodes": pl.String,  # comma-separated node set of an nccl-tests run
            "device": pl.String,  # IB device, e.g. mlx5_0
            "port": pl.Int32,
            "counter": pl.String,
            "value": pl.Float64,
            "op": pl.String,  # collective of an NCCL COLL aggregate or Flight Recorder entry (AllReduce, nccl:all_reduce)
            "seq": pl.Int64,  # last NCCL opCount (COLL aggregate) or Flight Recorder collective_seq_id
            "detail": pl.String,
            **_PROVENANCE,
        }
    ),
    "anomalies": pl.Schema(
        {
            "kind": pl.String,  # straggler, step_regression, step_spike, hang, telemetry_outlier, ...
            "node": pl.String,
            "rank": pl.Int32,
            "gpu_index": pl.Int32,
            "metric": pl.String,
            "start": UTC_US,
            "end": UTC_US,
            "step_start": pl.Int64,
            "step_end": pl.Int64,
            "value": pl.Float64,
            "baseline": pl.Float64,
            "deviation": pl.Float64,  # robust z or ratio, as `detail` says
            "score": pl.Float64,
            "detail": pl.String,
        }
    ),
}

# Columns that must be non-null in every row of a table.
REQUIRED: dict[str, tuple[str, ...]] = {
    "files": ("path", "status"),
    "events": ("node", "source", "kind", "severity", "message", "file", "line"),
    "steps": ("node", "framework", "file", "line"),
    "gpu_samples": ("node", "source", "file"),
    "inventory": ("node", "component", "attribute", "value", "source", "file"),
    "comms": ("record", "file"),
    "anomalies": ("kind", "metric"),
}


def empty(table: str) -> pl.DataFrame:
    """Return an empty DataFrame of `table`."""
    return pl.DataFrame(schema=TABLES[table])


_PLAIN_DTYPES = frozenset(
    (pl.String, pl.Boolean, pl.Float64, pl.Float32, pl.Int64, pl.Int32, pl.Int16, pl.Int8,
     pl.UInt64, pl.UInt32, pl.UInt16, pl.UInt8, pl.Null)
)  # fmt: skip
"""dtype classes without parameters: two instances of one are equal."""


def frame_dtypes(df: pl.DataFrame) -> dict[str, pl.DataType]:
    """`dict(df.schema)` without building the Schema (which checks every dtype: ~65 µs for 44 columns, ~20
    this way; conforming small files' tables asks it several times a file)."""
    return dict(zip(df.columns, df.dtypes, strict=True))


def same_dtypes(a: list[pl.DataType], b: list[pl.DataType]) -> bool:
    """`a == b` for lists of dtypes: a pair of instances of one parameterless class is equal without polars'
    `DataType.__eq__` (~0.5 µs a call in Python); other pairs are compared by it."""
    if len(a) != len(b):
        return False
    plain = _PLAIN_DTYPES
    for x, y in zip(a, b, strict=True):
        t = type(x)
        if t is type(y) and t in plain:
            continue
        if x != y:
            return False
    return True


@functools.cache
def _layout(table: str) -> tuple[list[str], list[pl.DataType]]:
    schema = get_schema(table)
    return list(schema.keys()), list(schema.values())


def matches(table: str, have: dict[str, pl.DataType]) -> bool:
    """`list(have.items()) == list(get_schema(table).items())`: a frame of these columns (`frame_dtypes`) is
    the table's, its columns in the table's order."""
    names, dtypes = _layout(table)
    return list(have) == names and same_dtypes(list(have.values()), dtypes)


def conform(df: pl.DataFrame, table: str) -> pl.DataFrame:
    """Add the table's missing columns as nulls, cast and order them; then `validate`.

    Parsers build only the columns they know and call this once per table.
    """
    schema = get_schema(table)
    have = frame_dtypes(df)
    unknown = [c for c in have if c not in schema]
    if unknown:
        raise SchemaError(f"table '{table}' has no column(s) {', '.join(repr(c) for c in unknown)}")
    if matches(table, have):
        return validate(df, table, have)
    out = df.select(conforming(table, tuple(have.items())))
    return validate(out, table, frame_dtypes(out))


def conforms_later(df: pl.DataFrame, table: str, have: dict[str, pl.DataType]) -> bool:
    """Whether `conform(df, table)` is sure to succeed (`have` is `dict(df.schema)`): no column the table
    lacks, and each required column there, of the table's dtype, without a null (a cast or an added column
    could make nulls there). Then the frame may be conformed later, joined with others of its schema: one
    select for a batch of small files instead of one per file (~0.1 ms each)."""
    schema = get_schema(table)
    if any(c not in schema for c in have):
        return False
    return all(
        have.get(name) == schema[name] and df.get_column(name).null_count() == 0 for name in REQUIRED[table]
    )


def conform_all(frames: list[pl.DataFrame], table: str) -> pl.DataFrame:
    """`pl.concat([conform(df, table) for df in frames])` for frames `conforms_later` accepted, in one select
    when they share their schema (else one a run of frames of one schema).

    (`pl.concat` refuses frames of other column names or dtypes, except a column all null (dtype Null), which
    takes the others' dtype: nulls either way once cast to the table's.)"""
    if len(frames) == 1:
        return conform(frames[0], table)
    try:
        return conform(pl.concat(frames, how="vertical"), table)
    except (pl.exceptions.ShapeError, pl.exceptions.SchemaError):
        pass
    runs: list[pl.DataFrame] = []
    start = 0
    for i in range(1, len(frames) + 1):
        if i == len(frames) or frames[i].schema != frames[start].schema:
            run = frames[start:i]
            runs.append(conform(pl.concat(run, how="vertical") if len(run) > 1 else run[0], table))
            start = i
    return pl.concat(runs, how="vertical")


@functools.lru_cache(maxsize=512)
def conforming(table: str, have: tuple[tuple[str, pl.DataType], ...]) -> list[pl.Expr]:
    """The select that conforms a frame of columns `have` to `table` (present columns cast non-strictly when
    their dtype differs, absent ones null), built once per input schema (building ~20 expressions took about
    as long as running them on a small frame: ~0.3 ms per call)."""
    known = dict(have)
    exprs = []
    for name, dtype in get_schema(table).items():
        if name in known:
            col = pl.col(name)
            exprs.append(col if known[name] == dtype else col.cast(dtype, strict=False))
        else:
            exprs.append(pl.lit(None, dtype=dtype).alias(name))
    return exprs


WEIGHT = "weight"
"""A column of the events the analysis reads (`forensics.outputs.read_analysis_tables`), not of the table: how
many of the table's rows a row stands for (1; more where a flood was thinned: the row and the rows of its run
left out after it). Counts of events are sums of it."""


def with_weight(events: pl.DataFrame) -> pl.DataFrame:
    """`events` with `WEIGHT` (1 a row where it has none: events read whole, or made by a test)."""
    return events if WEIGHT in events.columns else events.with_columns(pl.lit(1, pl.UInt32).alias(WEIGHT))


def validate(df: pl.DataFrame, table: str, have: dict[str, pl.DataType] | None = None) -> pl.DataFrame:
    """Check `df` against `table`; return it with the table's column order.

    `have`: `dict(df.schema)` when the caller has it already.

    Raises:
        SchemaError: listing every missing column, wrong dtype and null in a required column at once.
    """
    schema = get_schema(table)
    have = frame_dtypes(df) if have is None else have
    problems: list[str] = []
    missing: list[str] = []
    if not matches(table, have):  # (else no column is missing or of another dtype)
        missing = [c for c in schema if c not in have]
        if missing:
            problems.append(
                f"{len(missing)} missing column(s) for table '{table}': "
                + ", ".join(repr(c) for c in missing)
            )
        for name, dtype in schema.items():
            if name in have and have[name] != dtype:
                problems.append(f" - '{name}', got: {have[name]}, expected: {dtype}")
    if not missing:
        for name in REQUIRED[table]:
            nulls = df.get_column(name).null_count()
            if nulls:
                problems.append(f" - '{name}' is required but has {nulls} null(s)")
    if problems:
        raise SchemaError(f"DataFrame does not match table '{table}':\n" + "\n".join(problems))
    return df if list(have) == list(schema) else df.select(list(schema))


def columns(table: str, *names: str) -> dict[str, pl.DataType]:
    """The dtypes of `names` in `table`, in the order given: the schema of a frame a parser builds with part
    of a table's columns (so it cannot drift from the table's)."""
    schema = get_schema(table)
    return {n: schema[n] for n in names}


def get_schema(table: str) -> pl.Schema:
    """Return the schema of `table`; raise SchemaError for an unknown table."""
    try:
        return TABLES[table]
    except KeyError:
        raise SchemaError(f"unknown table '{table}'; known: {', '.join(TABLES)}") from None
