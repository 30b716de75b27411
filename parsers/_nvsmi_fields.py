"""Shared vocabulary of the nvidia-smi parsers: one GPU snapshot -> inventory rows, a sample, events.

`nvidia-smi -q` (text), `-q -x` (XML), the default table and `--query-gpu` CSV name the same facts
differently. Each parser maps its own keys onto the canonical names below (schema column names for
telemetry, snake_case attribute names for inventory) and hands `GpuSnapshot`s to `snapshot_rows`,
which applies the one set of value rules and fault rules.

Fault rules (events, source 'nvidia-smi'):
- ecc_uncorrectable: volatile uncorrected ECC > 0 (high) or only aggregate > 0 (medium: lifetime count).
- row_remap_pending (medium: needs a GPU reset), row_remap_failure (high: RMA candidate),
  retired_pages_pending (medium, pre-Ampere page blacklist pending).
- pcie_link_degraded (medium): current link width below max at any time; current generation below
  max only when the GPU is busy (utilization > 0 and performance state P0 or not printed), since
  idle or power-saving GPUs (P1..P15) legitimately drop to Gen1/Gen2.
- thermal (code hw_slowdown / hw_thermal_slowdown / hw_power_brake_slowdown): an active HW clock
  event reason (high for HW thermal, medium otherwise). SW power cap / SW thermal are normal control.
- gpu_error (high): a value reading `Unknown Error`, `GPU requires reset`, `ERR!`; gpu_reset_required
  (high) when `Reset Required : Yes`; fabric (medium) when the NVLink fabric status is not Success.
"""

from __future__ import annotations

import gc
import json
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from itertools import accumulate
from typing import Any

import polars as pl

from parsers._common import normalize_bus_id, to_json

SOURCE = "nvidia-smi"

THROTTLE_COLUMNS = {
    # canonical suffix (CSV/XML spelling) -> gpu_samples column
    "gpu_idle": "throttle_gpu_idle",
    "idle": "throttle_gpu_idle",
    "applications_clocks_setting": "throttle_applications_clocks_setting",
    "sw_power_cap": "throttle_sw_power_cap",
    "hw_slowdown": "throttle_hw_slowdown",
    "hw_thermal_slowdown": "throttle_hw_thermal_slowdown",
    "hw_power_brake_slowdown": "throttle_hw_power_brake_slowdown",
    "sync_boost": "throttle_sync_boost",
    "sw_thermal_slowdown": "throttle_sw_thermal_slowdown",
    "display_clock_setting": "throttle_display_clock_setting",
    "display_clocks_setting": "throttle_display_clock_setting",
}

# clocks_event_reasons.active bit mask (FORMATS.md §3, nvml.h nvmlClocksEventReason*)
THROTTLE_BITS = {
    0x1: "throttle_gpu_idle",
    0x2: "throttle_applications_clocks_setting",
    0x4: "throttle_sw_power_cap",
    0x8: "throttle_hw_slowdown",
    0x10: "throttle_sync_boost",
    0x20: "throttle_sw_thermal_slowdown",
    0x40: "throttle_hw_thermal_slowdown",
    0x80: "throttle_hw_power_brake_slowdown",
    0x100: "throttle_display_clock_setting",
}

FLOAT_COLUMNS = (
    "utilization_pct",
    "mem_utilization_pct",
    "memory_used_mib",
    "memory_total_mib",
    "temperature_c",
    "mem_temperature_c",
    "power_w",
    "power_limit_w",
    "sm_clock_mhz",
    "mem_clock_mhz",
)
INT_COLUMNS = (
    "ecc_corrected_volatile",
    "ecc_uncorrected_volatile",
    "ecc_corrected_aggregate",
    "ecc_uncorrected_aggregate",
    "retired_pages_sbe",
    "retired_pages_dbe",
    "remapped_rows_correctable",
    "remapped_rows_uncorrectable",
    "pcie_gen",
    "pcie_width",
    "pcie_gen_max",
    "pcie_width_max",
)
BOOL_COLUMNS = (*dict.fromkeys(THROTTLE_COLUMNS.values()), "retired_pages_pending", "remap_pending", "remap_failure")

ERROR_MARKERS = ("Unknown Error", "GPU requires reset", "ERR!", "GPU is lost")

_MARKER_ALT = "|".join(re.escape(m) for m in ERROR_MARKERS)
_MARKER_RE = re.compile(_MARKER_ALT)
_NUM = re.compile(r"^\s*\[?\s*([-+]?\d+(?:\.\d+)?)")
_MISSING = re.compile(r"^\s*\[?\s*(N/A|Not Supported|Not Available|Unknown|Requested functionality|Insufficient)", re.I)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector (re-enabled after, if it was on). The Python walks of the -q text
    and XML parsers allocate a few small objects per line and none in cycles; the collector's repeated passes
    over them cost a quarter of a long parse."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@lru_cache(maxsize=1 << 16)
def num(value: str | None) -> float | None:
    """Leading number of a printed value (`81559 MiB`, `16x`, `36 C`, `[N/A]` -> None)."""
    if value is None or _MISSING.match(value):
        return None
    m = _NUM.match(value)
    return float(m.group(1)) if m else None


@lru_cache(maxsize=1 << 12)
def flag(value: str | None) -> bool | None:
    """`Active`/`Yes`/`Enabled`/`True`/`1` -> True; `Not Active`/`No`/... -> False; else None."""
    if value is None:
        return None
    v = value.strip().strip("[]").strip().lower()
    if v in ("active", "yes", "enabled", "true", "1", "pending"):
        return True
    if v in ("not active", "no", "disabled", "false", "0", "none"):
        return False
    return None


def parse_local_ts(text: str | None) -> datetime | None:
    """`Fri Jun 21 02:03:08 2024` (nvidia-smi Timestamp, local) or `2023/11/14 13:34:16.123` (CSV)."""
    if not text:
        return None
    t = " ".join(text.split())
    for fmt in ("%a %b %d %H:%M:%S %Y", "%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S", "%Y%m%d %H:%M:%S"):
        try:
            return datetime.strptime(t, fmt)
        except ValueError:
            continue
    return None


_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)
"""`to_json`'s encoder, made once (json.dumps makes one per call)."""


@dataclass
class Stated:
    """The inventory facts one file has stated so far (see `snapshot_rows`): raw keys of the rows built, and
    each GPU's last (attributes, values)."""

    keys: set[tuple[Any, ...]] = field(default_factory=set)
    last: dict[tuple[Any, ...], tuple[list[str], list[str]]] = field(default_factory=dict)


@dataclass
class GpuSnapshot:
    """What one dump says about one GPU: canonical name -> (raw value, line number)."""

    index: int | None
    bus_raw: str | None
    line: int
    inv: dict[str, tuple[str, int]] = field(default_factory=dict)
    sample: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # col -> (value, line, priority)
    parts: dict[str, list[tuple[str, int]]] = field(default_factory=dict)  # summed counters (ECC parts)
    totals: dict[str, tuple[str, int]] = field(default_factory=dict)  # printed totals win over parts
    extra: dict[str, str] = field(default_factory=dict)
    errors: list[tuple[str, int]] = field(default_factory=list)  # (value, line) carrying an error marker
    extra_lines: dict[str, int] = field(default_factory=dict)  # line of each `extra` value (evidence)
    extra_default_lines: dict[str, int] = field(default_factory=dict)  # (-q: line of an `extra` set if absent)

    def put_extra(self, key: str, value: str, line: int) -> None:
        if key not in self.extra:
            self.extra[key] = value.strip()
            self.extra_lines[key] = line

    def put_inv(self, attr: str, value: str, line: int) -> None:
        if attr not in self.inv and value != "":
            self.inv[attr] = (value, line)

    def put_sample(self, col: str, value: str, line: int, priority: int = 0) -> None:
        """Keep the value of the best (lowest) priority that is present (not N/A)."""
        old = self.sample.get(col)
        usable = num(value) is not None or flag(value) is not None
        if old is None or (usable and (priority < old[2] or (num(old[0]) is None and flag(old[0]) is None))):
            self.sample[col] = (value, line, priority)

    def note(self, value: str, line: int) -> None:
        if _MARKER_RE.search(value):
            self.errors.append((value, line))


def busy_pstate(pstate: str | None) -> bool:
    """True unless the GPU reports a power-saving performance state (P1..P15): only P0 (or no state
    printed) means the link should run at its max generation."""
    return pstate is None or pstate.strip() in ("P0", "", "N/A", "[N/A]")


def _counter(snap: GpuSnapshot, col: str) -> tuple[int | None, int | None]:
    """Value and evidence line of a (possibly summed) counter column."""
    if col in snap.totals:
        v, ln = snap.totals[col]
        n = num(v)
        if n is not None:
            return int(n), ln
    if col in snap.sample:
        v, ln, _ = snap.sample[col]
        n = num(v)
        return (int(n) if n is not None else None), ln
    parts = snap.parts.get(col, [])
    vals = [(num(v), ln) for v, ln in parts]
    got = [(int(n), ln) for n, ln in vals if n is not None]
    if not got:
        return None, (parts[0][1] if parts else None)
    nonzero = [ln for n, ln in got if n]
    return sum(n for n, _ in got), (nonzero[0] if nonzero else got[0][1])


def snapshot_rows(
    snap: GpuSnapshot,
    *,
    node: str,
    path: str,
    source: str,
    ts: datetime | None,
    text_of: Callable[[int], str],
    seen: Stated | None = None,
    tuples: bool = False,
    inventory: bool = True,
) -> tuple[list[Any], dict[str, Any], list[dict[str, Any]]]:
    """Return (inventory rows, the gpu_samples row, events) of one GPU snapshot (bus ids still raw).

    `seen`: the inventory facts returned so far for this file (kept up to date); a row repeating one is not
    built, as `frames` would drop it (repeated dumps restate the same facts). `tuples`: the inventory rows as
    tuples of the `INV_TUPLE` columns (for `frames(..., inv_tuples=True)`), not dicts. `inventory=False`: no
    inventory rows (the caller builds them).
    """
    base = {"node": node, "gpu_index": snap.index, "gpu_bus_id": snap.bus_raw}
    inv = []
    items = snap.inv.items()
    if not inventory:
        items = {}.items()
    elif seen is not None:
        # The same attributes and values as this GPU's previous snapshot: every row was stated already.
        gpu = (node, snap.bus_raw, snap.index)
        state = (list(snap.inv), [v for v, _ in snap.inv.values()])
        if seen.last.get(gpu) == state:
            items = {}.items()
        seen.last[gpu] = state
    index, bus = snap.index, snap.bus_raw
    keys = seen.keys if seen is not None else None
    for a, (v, ln) in items:
        vs = v.strip()
        if keys is not None:
            k = (node, "gpu", bus, index, None, a, vs)
            if k in keys:
                continue
            keys.add(k)
        if tuples:
            inv.append((node, index, bus, "gpu", a, vs, source, path, ln))  # (INV_TUPLE)
            continue
        inv.append(
            {
                "node": node,
                "gpu_index": index,
                "gpu_bus_id": bus,
                "component": "gpu",
                "attribute": a,
                "value": vs,
                "source": source,
                "file": path,
                "line": ln,
            }
        )
    q = "local_assumed_utc" if ts is not None else "none"
    row: dict[str, Any] = {**base, "ts": ts, "ts_quality": q, "source": source, "file": path, "line": snap.line}
    lines: dict[str, int] = {}
    sample, totals, parts = snap.sample, snap.totals, snap.parts
    for col in FLOAT_COLUMNS:
        got = sample.get(col)
        if got is not None:
            row[col] = num(got[0])
            lines[col] = got[1]
    for col in INT_COLUMNS:  # (= _counter, inlined)
        got = totals.get(col)
        if got is not None and (n := num(got[0])) is not None:
            row[col] = int(n)
            lines[col] = got[1]
            continue
        got = sample.get(col)
        if got is not None:
            n = num(got[0])
            row[col] = int(n) if n is not None else None
            lines[col] = got[1]
            continue
        ps = parts.get(col)
        if not ps:  # (never printed, or only a total without a number)
            row[col] = None
            continue
        total, first, nonzero = 0, None, None
        for v, ln in ps:
            n = num(v)
            if n is not None:
                i = int(n)
                total += i
                if first is None:
                    first = ln
                if i and nonzero is None:
                    nonzero = ln
        if first is None:
            row[col] = None
            lines[col] = ps[0][1]
        else:
            row[col] = total
            lines[col] = nonzero if nonzero is not None else first
    for col in BOOL_COLUMNS:
        got = sample.get(col)
        if got is not None:
            row[col] = flag(got[0])
            lines[col] = got[1]
    uuid = snap.inv.get("uuid")
    row["gpu_uuid"] = uuid[0].strip() if uuid else None
    row["extra"] = _JSON.encode(snap.extra) if snap.extra else None  # (= to_json)

    events: list[dict[str, Any]] = []

    def event(kind: str, code: str | None, severity: str, ln: int, detail: dict[str, Any]) -> None:
        events.append(
            {
                **base,
                "ts": ts,
                "ts_quality": q,
                "source": SOURCE,
                "kind": kind,
                "code": code,
                "severity": severity,
                "message": text_of(ln).strip(),
                "detail": to_json(detail),
                "file": path,
                "line": ln,
            }
        )

    uv, ua = row.get("ecc_uncorrected_volatile"), row.get("ecc_uncorrected_aggregate")
    if uv:
        event("ecc_uncorrectable", "volatile", "high", lines["ecc_uncorrected_volatile"], {"volatile": uv, "aggregate": ua})
    elif ua:
        event("ecc_uncorrectable", "aggregate", "medium", lines["ecc_uncorrected_aggregate"], {"aggregate": ua})
    if row.get("remap_failure"):
        event("row_remap_failure", None, "high", lines["remap_failure"], {"uncorrectable_rows": row.get("remapped_rows_uncorrectable")})
    if row.get("remap_pending"):
        event("row_remap_pending", None, "medium", lines["remap_pending"], {"uncorrectable_rows": row.get("remapped_rows_uncorrectable")})
    if row.get("retired_pages_pending"):
        event("retired_pages_pending", None, "medium", lines["retired_pages_pending"], {"dbe": row.get("retired_pages_dbe")})
    w, wm, g, gm = row.get("pcie_width"), row.get("pcie_width_max"), row.get("pcie_gen"), row.get("pcie_gen_max")
    util = row.get("utilization_pct")
    if w is not None and wm is not None and w < wm:
        event("pcie_link_degraded", "width", "medium", lines["pcie_width"], {"width": w, "width_max": wm, "gen": g, "gen_max": gm})
    elif g is not None and gm is not None and g < gm and util is not None and util > 0 and busy_pstate(snap.extra.get("pstate")):
        event("pcie_link_degraded", "gen", "medium", lines["pcie_gen"], {"gen": g, "gen_max": gm, "utilization_pct": util})
    for col, sev in (
        ("throttle_hw_thermal_slowdown", "high"),
        ("throttle_hw_power_brake_slowdown", "medium"),
        ("throttle_hw_slowdown", "medium"),
    ):
        if row.get(col) and not (
            col == "throttle_hw_slowdown"
            and (row.get("throttle_hw_thermal_slowdown") or row.get("throttle_hw_power_brake_slowdown"))
        ):
            event("thermal", col.removeprefix("throttle_"), sev, lines[col], {"temperature_c": row.get("temperature_c"), "power_w": row.get("power_w")})
    for v, ln in snap.errors[:5]:
        code = next(m for m in ERROR_MARKERS if m in v)
        event("gpu_error", code, "high", ln, {"value": v.strip()})
    rr = snap.inv.get("reset_required")
    if rr and flag(rr[0]):
        event("gpu_reset_required", None, "high", rr[1], {})
    dr = snap.inv.get("drain_and_reset_recommended")
    if dr and flag(dr[0]):
        event("gpu_reset_required", "drain_and_reset", "medium", dr[1], {})
    ra = snap.inv.get("gpu_recovery_action")
    if ra and ra[0].strip() not in ("None", "N/A", ""):
        event("gpu_recovery_action", ra[0].strip(), "high", ra[1], {})
    for key, kind, sev in (
        ("sram_threshold_exceeded", "ecc_sram_threshold", "high"),
        ("unrepairable_memory", "memory_unrepairable", "high"),
        ("channel_repair_pending", "memory_repair_pending", "medium"),
        ("tpc_repair_pending", "memory_repair_pending", "medium"),
    ):
        if flag(snap.extra.get(key)) and key in snap.extra_lines:
            event(kind, key, sev, snap.extra_lines[key], {})
    fs = snap.inv.get("fabric_status")
    if fs and fs[0].strip() not in ("Success", "N/A", ""):
        event("fabric", fs[0].strip(), "medium", fs[1], {"state": snap.inv.get("fabric_state", ("",))[0]})
    return inv, row, events


def node_rows(attrs: list[tuple[str, str, int]], *, node: str, path: str, source: str) -> list[dict[str, Any]]:
    """Inventory rows of component 'node' (driver_version, cuda_version, hostname, ...)."""
    return [
        {"node": node, "component": "node", "attribute": a, "value": v.strip(), "source": source, "file": path, "line": ln}
        for a, v, ln in attrs
        if v.strip()
    ]


def new_node_rows(
    attrs: list[tuple[str, str, int]], *, node: str, path: str, source: str, seen: Stated
) -> list[tuple[Any, ...]]:
    """`node_rows` as `INV_TUPLE` tuples, less the rows whose raw key (`INV_KEY`) `seen` holds, which it then
    holds too: with `snapshot_rows(..., seen=seen, tuples=True)` for the GPU rows, a file's inventory rows are
    unique on their raw key (`frames(..., inv_tuples=True)`)."""
    out = []
    for r in node_rows(attrs, node=node, path=path, source=source):
        k = (r["node"], "node", None, None, None, r["attribute"], r["value"])  # (= INV_KEY of the row)
        if k not in seen.keys:
            seen.keys.add(k)
            out.append((r["node"], None, None, "node", r["attribute"], r["value"], source, path, r["line"]))
    return out


def normalized_bus_ids(raw: pl.Series) -> pl.Series:
    """`normalize_bus_id` of a column, computed once per distinct value (a loop repeats a few bus ids)."""
    raw = raw.cast(pl.String)
    u = raw.unique(maintain_order=True).drop_nulls().to_list()
    norm = _bus_ids_cached(u)
    return raw.replace_strict(u, norm, default=None, return_dtype=pl.String)


def bus_id_map(raw: pl.Series) -> tuple[list[Any], list[Any] | None]:
    """The distinct raw bus ids of a String column and their `normalize_bus_id` (what normalized_bus_ids
    replaces them with), for a `replace_strict` folded into a select of the caller's."""
    u = raw.unique(maintain_order=True).drop_nulls().to_list()
    return u, _bus_ids_cached(u)


_BUS_NORM: dict[str, str | None] = {}
_EMPTY_TABLES: dict[str, pl.DataFrame] = {}


def _bus_ids_cached(values: list[Any]) -> list[Any] | None:
    """`normalize_bus_id` of raw bus-id strings, each distinct one computed once per process (the same few
    GPUs recur in every file); None when a value is no string (then the column is normalised in polars)."""
    if not all(v is None or isinstance(v, str) for v in values):
        return None
    new = [v for v in dict.fromkeys(values) if v is not None and v not in _BUS_NORM]
    if new:
        if len(_BUS_NORM) > 100_000:
            _BUS_NORM.clear()
        got = pl.select(normalize_bus_id(pl.lit(pl.Series(new, dtype=pl.String)))).to_series().to_list()
        _BUS_NORM.update(zip(new, got, strict=True))
    return [None if v is None else _BUS_NORM[v] for v in values]


_TABLE_NAMES = ("inventory", "gpu_samples", "events")
INV_KEY = ("node", "component", "gpu_bus_id", "gpu_index", "device", "attribute", "value")
INV_TUPLE = ("node", "gpu_index", "gpu_bus_id", "component", "attribute", "value", "source", "file", "line")
"""The inventory columns of a row given as a tuple (`snapshot_rows(..., tuples=True)`, `new_node_rows`)."""


def _empty_table(table: str) -> pl.DataFrame:
    from forensics.schema import TABLES, conform

    if table not in _EMPTY_TABLES:
        _EMPTY_TABLES[table] = conform(pl.DataFrame(schema=TABLES[table]), table)
    return _EMPTY_TABLES[table].clone()


def _new_facts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Inventory rows whose raw key does not repeat an earlier row's (repeated dumps restate the same facts;
    the normalised key is a function of the raw one, so the rows the frame's deduplication keeps survive)."""
    seen: set[tuple[Any, ...]] = set()
    kept = []
    for r in rows:
        k = tuple(map(r.get, INV_KEY))
        if k not in seen:
            seen.add(k)
            kept.append(r)
    return kept


def _table_frame(
    rows: list[Any], table: str, file_of: pl.Series | None = None, tuples: bool = False
) -> pl.DataFrame:
    """One table from its rows (not empty): one construction, bus ids replaced by their normal form, the
    inventory deduplicated on its normalised key (per file: `file_of`, the file number of each row, joins
    the key when the rows are several files'), to be conformed. With `file_of`, a `_f` column holds the file
    number of each row kept (before conforming, which drops it). `tuples`: the rows are `INV_TUPLE` tuples of
    str, int or None (one list per column; the table's other columns are added by conforming)."""
    from forensics.schema import TABLES

    schema = TABLES[table]
    if tuples:
        present = set(INV_TUPLE)
        cols = dict(zip(INV_TUPLE, map(list, zip(*rows, strict=True)), strict=True))
        bus = _bus_ids_cached(cols["gpu_bus_id"])
        if bus is not None:
            cols["gpu_bus_id"] = bus
        try:
            df = pl.DataFrame(cols, schema={c: schema[c] for c in INV_TUPLE}, strict=False)
        except pl.exceptions.ComputeError:  # a number its column cannot hold (a corrupt dump): null there
            cols = {c: _in_range(v, schema[c]) for c, v in cols.items()}
            df = pl.DataFrame(cols, schema={c: schema[c] for c in INV_TUPLE}, strict=False)
    else:
        present = set().union(*rows)
        bus = _bus_ids_cached([r.get("gpu_bus_id") for r in rows]) if "gpu_bus_id" in present else None
        # one construction from the rows (not one Series per column); bus ids replaced by their normal form
        # (every column of the table: absent ones come out null, in the table's order, as conform would make
        # them, and conform only validates)
        try:
            df = pl.from_dicts(rows, schema=schema, strict=False)
        except pl.exceptions.ComputeError:  # a number its column cannot hold (a corrupt dump): null there
            kept = {c: _in_range([r.get(c) for r in rows], schema[c]) for c in schema}
            df = pl.DataFrame(kept, schema=schema, strict=False)
        if bus is not None:
            df = df.with_columns(pl.Series("gpu_bus_id", bus, dtype=schema["gpu_bus_id"], strict=False))
    if "gpu_bus_id" in present and bus is None:
        df = df.with_columns(gpu_bus_id=normalize_bus_id(pl.col("gpu_bus_id")))
    if file_of is not None:
        df = df.with_columns(file_of.alias("_f"))
    if table == "inventory":
        key = [c for c in INV_KEY if c in present]
        df = df.unique([*key, "_f"] if file_of is not None else key, keep="first", maintain_order=True)
    return df


_INT_RANGE = {
    **{t: (-(2 ** (n - 1)), 2 ** (n - 1) - 1) for t, n in ((pl.Int8, 8), (pl.Int16, 16), (pl.Int32, 32))},
    pl.Int64: (-(2**63), 2**63 - 1),
    **{t: (0, 2**n - 1) for t, n in ((pl.UInt8, 8), (pl.UInt16, 16), (pl.UInt32, 32), (pl.UInt64, 64))},
}


def _in_range(values: list[Any], dtype: pl.DataType) -> list[Any]:
    """`values` with the integers a column of `dtype` cannot hold made None (a counter of 2**70, a PCIe
    generation of 99999999999: one corrupt value loses that value, not the file's tables)."""
    bounds = _INT_RANGE.get(dtype)  # type: ignore[call-overload]
    if bounds is None:
        return values
    lo, hi = bounds
    return [None if isinstance(v, int) and not lo <= v <= hi else v for v in values]


def frames(
    inv: list[dict[str, Any]],
    samples: list[dict[str, Any]],
    events: list[dict[str, Any]],
    inv_tuples: bool = False,
) -> dict[str, pl.DataFrame]:
    """Build the three tables, normalising bus ids and dropping repeated identical inventory facts
    (`inv_tuples`: the inventory rows are `INV_TUPLE` tuples, no two with the same raw key, as
    `snapshot_rows(..., seen=, tuples=True)` and `new_node_rows` of one `Stated` make them)."""
    from forensics.schema import conform

    out: dict[str, pl.DataFrame] = {}
    for table, rows in zip(_TABLE_NAMES, (inv, samples, events), strict=True):
        if not rows:
            out[table] = _empty_table(table)
            continue
        if table == "inventory" and not inv_tuples:
            rows = _new_facts(rows)
        out[table] = conform(_table_frame(rows, table, tuples=inv_tuples and table == "inventory"), table)
    return out


def frames_many(
    parts: Sequence[tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]],
    inv_tuples: bool = False,
) -> list[dict[str, pl.DataFrame]]:
    """`[frames(*p, inv_tuples) for p in parts]` (the rows of several files) in one construction per table:
    the rows of all files together, the inventory's deduplication keyed by file too, then cut back per file
    (each file's rows are contiguous and in their order)."""
    from forensics.schema import conform

    out: list[dict[str, pl.DataFrame]] = [{} for _ in parts]
    for t, table in enumerate(_TABLE_NAMES):
        per = [p[t] for p in parts]
        if table == "inventory" and not inv_tuples:
            per = [_new_facts(rows) if rows else rows for rows in per]
        counts = [len(rows) for rows in per]
        rows = [r for rs in per for r in rs]
        if not rows:
            for o in out:
                o[table] = _empty_table(table)
            continue
        file_of = None
        if table == "inventory":
            file_of = pl.Series("_f", [k for k, n in enumerate(counts) for _ in range(n)], dtype=pl.Int32)
        df = _table_frame(rows, table, file_of, tuples=inv_tuples and table == "inventory")
        if file_of is not None:
            if df.height < len(rows):  # (rows dropped: count each file's rows again)
                bounds = df.get_column("_f").search_sorted(pl.Series(range(len(parts) + 1), dtype=pl.Int32))
                counts = bounds.diff().drop_nulls().to_list()
            df = df.drop("_f")
        df = conform(df, table)
        offset = 0
        for o, n in zip(out, counts, strict=True):
            o[table] = df.slice(offset, n) if n else _empty_table(table)
            offset += n
    return out


# ----------------------------------------------------------------------------- vectorised (CSV, dmon, table)

UTC = pl.Datetime("us", "UTC")


def _schema(table: str) -> pl.Schema:
    from forensics.schema import TABLES

    return TABLES[table]


SAMPLE_SCHEMA = set(_schema("gpu_samples"))


def conform_table(df: pl.DataFrame, table: str) -> pl.DataFrame:
    """`forensics.schema.conform`, imported lazily (parsers stay importable on their own)."""
    from forensics.schema import conform, empty

    if df.width == 0:  # (built once per table, handed out as clones)
        if table not in _EMPTY:
            _EMPTY[table] = empty(table)
        return _EMPTY[table].clone()
    return conform(df, table)


_EMPTY: dict[str, pl.DataFrame] = {}


def conform_known(df: pl.DataFrame, table: str) -> pl.DataFrame:
    """`conform_table(df.select(<df's columns that the table has>), table)` in one select (small files paid
    the narrowing select apart: ~0.1-0.2 ms a table)."""
    from forensics.schema import conforming, get_schema, validate

    schema = get_schema(table)
    have = tuple((c, d) for c, d in df.schema.items() if c in schema)
    if not have:
        return conform_table(df.select([]), table)
    out = df.select(conforming(table, have))
    return validate(out, table, dict(out.schema))


def _gpu_keys(df: pl.DataFrame, key: pl.Expr) -> list[pl.Expr]:
    """The columns that group the samples by GPU as `node|key` does (`key`: the first of ident, bus id, index
    that is set), without building that string per row when one column decides for every row."""
    node = df.get_column("node")
    n = df.height
    # one node in every row (a file of one node, a range of it): it groups nothing, and a window over one
    # column (the GPU's) costs a third of one over two (~2.5 ms on 200k samples)
    one = n > 0 and node.null_count() == 0 and bool((node == node[0]).all())
    nodes = node.head(1) if one else node.unique()
    if nodes.null_count() or nodes.str.contains("|", literal=True).any():
        # `a|b` + `c` reads as `a` + `b|c`: keep the string
        return [pl.concat_str([pl.col("node"), key], separator="|")]
    by_node = [] if one else [pl.col("node")]
    nulls = {c: df.get_column(c).null_count() for c in ("ident", "gpu_bus_id")}
    if nulls["ident"] == 0:
        return [*by_node, pl.col("ident")]
    if nulls["ident"] == n and nulls["gpu_bus_id"] == 0:
        return [*by_node, pl.col("gpu_bus_id")]
    if nulls["ident"] == n and nulls["gpu_bus_id"] == n:
        return [*by_node, pl.col("gpu_index")]  # a null index is the '?' group (no index reads '?')
    return [*by_node, key]


def transition_events(samples: pl.DataFrame, ctx: Any) -> pl.DataFrame:
    """Fault events from a series of samples, one per onset (a fault that stays on is reported once).

    `samples` needs `line`, `text` (the verbatim row), `node`, `gpu_index`, `gpu_bus_id`, `ts`,
    `ts_quality` and whichever gpu_samples columns the source has; `ident` (bus id/UUID) keys GPUs.
    """
    events = _transitions(samples, pl.lit(ctx.path), None)
    if events is None:
        return conform_table(pl.DataFrame(), "events")
    return conform_table(events.sort("line"), "events")


def transition_events_many(samples: pl.DataFrame, files: int) -> list[pl.DataFrame]:
    """`transition_events` of the samples of several files at once: `samples` holds the rows of `files` files
    (`_f`: the file number, rows in (file, line) order; `file`: its path) and the list holds each file's
    events. A GPU's previous sample is looked for in its own file only. Where two events of a file share a
    line, their order is the one of `transition_events` (its sort by line need not keep ties in rule order),
    so such a file's events are computed by it."""
    empty = conform_table(pl.DataFrame(), "events")
    events = _transitions(samples, pl.col("file"), "_f")
    if events is None:
        return [empty.clone() for _ in range(files)]
    events = events.sort("_f", "line", maintain_order=True)
    fcol = events.get_column("_f")
    bounds = fcol.search_sorted(pl.Series(range(files + 1), dtype=fcol.dtype)).to_list()
    tied = set(events.filter(pl.struct("_f", "line").is_duplicated()).get_column("_f").unique().to_list())
    out = conform_table(events.drop("_f"), "events")
    result = []
    for k in range(files):
        if k in tied:
            mine = samples.filter(pl.col("_f") == k)
            result.append(transition_events(mine.drop("_f"), _Path(mine.get_column("file")[0])))
        else:
            size = bounds[k + 1] - bounds[k]
            result.append(out.slice(bounds[k], size) if size else empty.clone())
    return result


@dataclass(frozen=True)
class _Path:
    path: str


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
        t = pl.col(f"_t{i}")
        if i in rising_v:
            v, p = pl.col(f"_v{i}"), pl.col(prev_of[i]).gather(pl.col("_prev"))
            tests[f"_hit{i}"] = t & (p.is_null() | (v != p)).fill_null(True)
        else:  # (a Boolean trigger: gathered as UInt8, the same values and nulls, cheaper)
            p = pl.col(prev_of[i]).cast(pl.UInt8).gather(pl.col("_prev")).cast(pl.Boolean)
            tests[f"_hit{i}"] = t & ~p.fill_null(False)
    reads = {"ts", "ts_quality", "node", "gpu_index", "gpu_bus_id", "text", "line", *([by] if by else [])}
    reads.update(file.meta.root_names(), *(e.meta.root_names() for r in rules for e in (r[2], r[4])))
    hits = (
        df.lazy()
        # (row numbers of polars' index type, UInt32: the gathers by `_prev` take them as they are, where an
        # Int64 index is converted and bounds-checked first, ~60 instructions a row and rule)
        .with_columns(_i=pl.int_range(pl.len(), dtype=pl.UInt32))
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


# ----------------------------------------------------------------------------- tool-level failure lines

# nvidia-smi prints these (any output form, often on stderr merged into the capture) when a GPU or the
# driver is gone: each is a fault by itself.
FAILURE_LINES: tuple[tuple[str, str, str], ...] = (
    (
        "gpu_error",
        r"Unable to determine the device handle for (?:GPU\s*)?(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*:\s*(?P<code>.+?)\s*$",
        "high",
    ),
    ("driver_error", r"(?P<code>NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver)", "high"),
    ("driver_error", r"(?P<code>Failed to initialize NVML: .+?)\s*$", "high"),
    ("no_devices", r"^\s*(?P<code>No devices were found)\s*$", "high"),
)


FAILURE_LITERALS = ("device handle", "NVIDIA-SMI has failed", "Failed to initialize NVML", "No devices were found")
FAILURE_ALT = "|".join(re.escape(lit) for lit in FAILURE_LITERALS)
_FAILURE_RX = re.compile(FAILURE_ALT)
"""FAILURE_LITERALS as one regex alternation: the lines `str.contains_any` finds, ten times faster in polars."""


def failure_event(text: str, line: int, *, node: str, path: str) -> dict[str, Any] | None:
    """The event for an nvidia-smi failure line (see FAILURE_LINES), or None."""
    if _FAILURE_RX.search(text) is None:  # = no FAILURE_LITERALS in text, in one search
        return None
    for kind, pattern, sev in FAILURE_LINES:
        m = re.search(pattern, text)
        if m:
            gd = m.groupdict()
            return {
                "ts": None, "ts_quality": "none", "node": node, "gpu_index": None, "gpu_bus_id": gd.get("bus"),
                "source": SOURCE, "kind": kind, "code": gd.get("code"), "severity": sev, "message": text.strip(),
                "detail": None, "file": path, "line": line,
            }
    return None


def failure_events(frame: pl.DataFrame, ctx: Any) -> tuple[pl.Expr, pl.DataFrame]:
    """Vectorised FAILURE_LINES over a `numbered` frame: (is-failure-line expr, events frame)."""
    # Cheap literal triage first; the regexes then run on the few candidate lines only.
    cand = frame.filter(pl.col("text").str.contains(FAILURE_ALT)).select("line", "text")
    rows = [
        e for ln, t in cand.iter_rows() if (e := failure_event(t, ln, node=ctx.node, path=ctx.path)) is not None
    ]
    hit = pl.col("line").is_in([e["line"] for e in rows])
    if not rows:
        return hit, conform_table(pl.DataFrame(), "events")
    return hit, frames([], [], rows)["events"]


def batch_lines(items: Sequence[tuple[pl.Series, Any]]) -> tuple[pl.Series, list[str], list[bool], list[int]]:
    """The lines of a `parse_many` batch's files as one column, as strings (a null line: ""), their blank
    flags (`blank_flags`), and where each file starts in them (with the end last)."""
    text = pl.concat([lines.cast(pl.String) for lines, _ in items], how="vertical")
    texts: list[str] = text.fill_null("").to_list()
    return text, texts, blank_flags(text), list(accumulate((len(lines) for lines, _ in items), initial=0))


def blank_flags(lines: pl.Series) -> list[bool]:
    """Per line: blank by the accounting's own rule (polars whitespace, not Python's wider `str.strip`)."""
    return (lines.cast(pl.String).fill_null("").str.strip_chars().str.len_bytes() == 0).to_list()
