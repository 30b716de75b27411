"""`nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]` output, with or without `-l`/`-lms` loops.

Any field list in any order: each header line (`name, pci.bus_id, temperature.gpu, power.draw [W], ...`)
governs the data lines below it until the next header (loops and concatenated runs repeat it). Header
names are mapped (units in brackets dropped, aliases such as `gpu_bus_id`, `clocks.sm`,
`clocks_event_reasons.*`/`clocks_throttle_reasons.*` accepted) onto gpu_samples columns and inventory
attributes; fields we have no column for go, verbatim, into the `extra` JSON column. `[N/A]`,
`[Not Supported]` and other bracketed states become nulls (a `[GPU requires reset]`/`[Unknown Error]`
becomes a gpu_error event). Values with units (`81559 MiB`) and without (`nounits`) both parse.

Rows before any header (`noheader`): the field list is unknown and no default order can be assumed
(the query list is whatever the collector asked for), so they are counted unrecognized with a note.

gpu_index is the `index` field when queried; else GPUs are numbered by first appearance of their bus
id / UUID / serial (nvidia-smi prints them in index order). gpu_bus_id is set when `pci.bus_id` is queried.
Events are emitted on transitions only (the first sample of a run of a fault), see `_nvsmi_fields`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from typing import Any

import polars as pl

from parsers import _nvsmi_fields as F
from parsers._common import repeated
from parsers._sniff import head_text
from parsers.base import MAX_EXAMPLES, FileContext, ParseResult, compiled

NAME = "nvidia-smi-csv"
DESCRIPTION = "nvidia-smi --query-gpu CSV (any fields, units or not, looping, repeated headers)"
TABLES = ("inventory", "gpu_samples", "events")
FILENAME_HINTS = ("*.csv", "nvidia-smi*", "nvidia_smi*", "*query*gpu*")
DETECTS = "a header line of --query-gpu field names (e.g. 'timestamp, index, name, pci.bus_id, utilization.gpu [%]')"
PRIORITY = 15

_TOKEN = r"[A-Za-z][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*(?: \[[^\]]*\])?"
HEADER_RE = rf"^\s*{_TOKEN}(?:\s*,\s*{_TOKEN})*\s*,?\s*$"

_ALIASES = {
    "gpu_name": "name",
    "gpu_serial": "serial",
    "gpu_uuid": "uuid",
    "gpu_bus_id": "pci.bus_id",
    "clocks.gr": "clocks.current.graphics",
    "clocks.sm": "clocks.current.sm",
    "clocks.mem": "clocks.current.memory",
    "clocks.video": "clocks.current.video",
    "inforom.image": "inforom.img",
    "inforom.power": "inforom.pwr",
    "retired_pages.sbe": "retired_pages.single_bit_ecc.count",
    "retired_pages.dbe": "retired_pages.double_bit.count",
    "pcie.link.gen.gpucurrent": "pcie.link.gen.current",
    "pcie.link.gen.gpumax": "pcie.link.gen.max",
}

# query field -> (gpu_samples column, priority)
_SAMPLE = {
    "utilization.gpu": ("utilization_pct", 0),
    "utilization.memory": ("mem_utilization_pct", 0),
    "memory.used": ("memory_used_mib", 0),
    "memory.total": ("memory_total_mib", 0),
    "temperature.gpu": ("temperature_c", 0),
    "temperature.memory": ("mem_temperature_c", 0),
    "power.draw.instant": ("power_w", 0),
    "power.draw": ("power_w", 1),
    "power.draw.average": ("power_w", 2),
    "enforced.power.limit": ("power_limit_w", 0),
    "power.limit": ("power_limit_w", 1),
    "clocks.current.sm": ("sm_clock_mhz", 0),
    "clocks.current.memory": ("mem_clock_mhz", 0),
    "ecc.errors.corrected.volatile.total": ("ecc_corrected_volatile", 0),
    "ecc.errors.uncorrected.volatile.total": ("ecc_uncorrected_volatile", 0),
    "ecc.errors.corrected.aggregate.total": ("ecc_corrected_aggregate", 0),
    "ecc.errors.uncorrected.aggregate.total": ("ecc_uncorrected_aggregate", 0),
    "retired_pages.single_bit_ecc.count": ("retired_pages_sbe", 0),
    "retired_pages.double_bit.count": ("retired_pages_dbe", 0),
    "retired_pages.pending": ("retired_pages_pending", 0),
    "remapped_rows.correctable": ("remapped_rows_correctable", 0),
    "remapped_rows.uncorrectable": ("remapped_rows_uncorrectable", 0),
    "remapped_rows.pending": ("remap_pending", 0),
    "remapped_rows.failure": ("remap_failure", 0),
    "pcie.link.gen.current": ("pcie_gen", 0),
    "pcie.link.gen.max": ("pcie_gen_max", 0),
    "pcie.link.width.current": ("pcie_width", 0),
    "pcie.link.width.max": ("pcie_width_max", 0),
}

_INV = {
    "name": "name",
    "serial": "serial",
    "uuid": "uuid",
    "pci.bus_id": "bus_id",
    "vbios_version": "vbios",
    "pcie.link.gen.max": "pcie_gen_max",
    "pcie.link.width.max": "pcie_width_max",
    "ecc.mode.current": "ecc_mode",
    "ecc.mode.pending": "ecc_mode_pending",
    "enforced.power.limit": "power_limit",
    "power.limit": "power_limit",
    "power.default_limit": "default_power_limit",
    "power.max_limit": "max_power_limit",
    "persistence_mode": "persistence_mode",
    "mig.mode.current": "mig_mode",
    "mig.mode.pending": "mig_mode_pending",
    "compute_mode": "compute_mode",
    "inforom.img": "inforom_image",
    "inforom.oem": "inforom_oem",
    "inforom.ecc": "inforom_ecc",
    "inforom.pwr": "inforom_pwr",
    "memory.total": "memory_total",
    "pci.device_id": "pci_device_id",
    "pci.sub_device_id": "pci_sub_system_id",
    "module_id": "module_id",
    "gpu_module_id": "module_id",
    "fabric.state": "fabric_state",
    "fabric.status": "fabric_status",
    "clocks.max.sm": "max_sm_clock",
    "clocks.max.memory": "max_mem_clock",
}
_NODE = {"driver_version": "driver_version", "cuda_version": "cuda_version"}
_IDENTITY = ("pci.bus_id", "uuid", "serial")
PDSH_RE = r"^(?P<host>(?:\d{1,3}\.){3}\d{1,3}|[A-Za-z][\w-]*\d[\w.-]*): (?P<rest>.*)$"


@lru_cache(maxsize=4096)
def canonical(field: str) -> str:
    """`power.draw [W]` -> `power.draw`; aliases resolved; throttle families unified."""
    f = re.sub(r"\s*\[.*\]\s*$", "", field.strip()).strip().lower()
    f = f.replace("clocks_event_reasons.", "clocks_throttle_reasons.")
    return _ALIASES.get(f, f)


def _known(fields: list[str]) -> set[str]:
    """The query-field names among `fields` that we know."""
    canon = {canonical(f) for f in fields}
    known = canon & (set(_SAMPLE) | set(_INV) | set(_NODE) | {"timestamp", "index", "pid", "process_name"})
    return known | {f for f in canon if f.startswith("clocks_throttle_reasons.")}


_SNIFF_PDSH = re.compile(PDSH_RE)
_SNIFF_HEADER = re.compile(HEADER_RE)
_SNIFF_ROWLIKE = re.compile(
    r"(^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3},|, GPU-[0-9a-f]{8}-|, [0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.\d)"
)
"""What `sniff` matches lines with, compiled once (`re.match(PDSH_RE, ln)` looked the pattern up in `re`'s
cache per line). A line `_SNIFF_ROWLIKE` finds something in has '/' at index 4 (`^` then four `\\d`, one
character each) or holds ', ' (both other branches open with it): `sniff` searches only such lines (a step
log's five lines cost ~15 us of searching each, for nothing)."""


def sniff(head: bytes, name: str) -> float:
    """0.95 for a --query-gpu header in the first lines; 0.4 for header-less rows that look like it."""
    if b"," not in head:  # (both need commas: no decode for a head without one)
        return 0.0
    text = head_text(head)
    # (what follows reads the first 5 counted lines among the first 30 (and whether there is one): from the
    # lines of the first 4,096 characters but the last, maybe cut short, when they settle it)
    raw = text[:4096].splitlines()[:-1] if len(text) > 4096 else None
    if raw is not None and len(raw) < 30:
        raw = raw if sum(1 for ln in raw if ln.strip() and not ln.startswith("#")) >= 5 else None
    raw = (text.splitlines() if raw is None else raw)[:30]
    lines = [ln for ln in raw if ln.strip() and not ln.startswith("#")]
    lines = [m.group("rest") if (m := _SNIFF_PDSH.match(ln)) else ln for ln in lines[:5]]
    for ln in lines[:5]:
        if "," in ln and _SNIFF_HEADER.match(ln):
            fields = ln.split(",")
            known = _known(fields)
            if known and len(known) >= min(2, len(fields)):
                return 0.95
    if (
        lines
        and all(ln.count(",") >= 2 for ln in lines[:5])
        and any((ln[4:5] == "/" or ", " in ln) and _SNIFF_ROWLIKE.search(ln) for ln in lines[:5])
    ):
        return 0.4
    return 0.0


def _hosts_and_headers(frame: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """`frame` (columns text, host) with pdsh/clush prefixes split off into `host` when most lines have one,
    and the distinct header lines. Used by `parse` and `carry` alike."""
    # pdsh/clush captures (`node01: index, name, ...`): every host prints its own header and rows.
    text = frame.get_column("text")
    # A prefixed line contains ': ': when too few lines do, the file is no capture (no regex pass needed;
    # none at all, no count of the non-blank lines either).
    prefixed = int(text.str.contains(": ", literal=True).sum())
    nonblank = int((text.str.strip_chars() != "").sum()) if prefixed else 0
    maybe = nonblank and prefixed * 2 >= nonblank
    env = frame.select(g=pl.col("text").str.extract_groups(PDSH_RE)).unnest("g") if maybe else None
    if env is not None and env.get_column("host").is_not_null().sum() * 2 >= nonblank:
        frame = frame.with_columns(
            host=env.get_column("host").str.split(".").list.first(),
            text=pl.coalesce(env.get_column("rest"), pl.col("text")),
        )
    # (the comma test on the lines of the header's shape only: they are few)
    text = frame.get_column("text")
    shaped = text.filter(_may_be_header(text))
    shaped = shaped.filter(shaped.str.contains(HEADER_RE))
    # A header names at least one known field (data rows such as `P0, Enabled` also fit the token shape).
    cands = shaped.filter(shaped.str.contains(",", literal=True)).unique().to_list()
    return frame, [t for t in cands if _known(t.split(","))]


def _may_be_header(text: pl.Series) -> pl.Series:
    """False for the lines that start with a digit (a loop's rows: its timestamps, its indices), which
    `HEADER_RE` (a field name first) cannot match; one comparison instead of the regex on every line."""
    return ~((text >= "0") & (text < ":")).fill_null(False)


def carry(lines: pl.Series) -> list[str]:
    """The header lines in force at the end of `lines` (the last one of each pdsh host, as printed; [] when
    none): a file parsed in chunks can prepend them to the next chunk, whose first rows they govern (they are
    then parsed, and counted, as header lines). Same header rules as `parse`."""
    text = lines.cast(pl.String).fill_null("")
    if not text.str.contains(": ", literal=True).any():
        # No line can carry a pdsh prefix (see _hosts_and_headers): the last known header line, if any.
        rows = text.filter(_may_be_header(text))
        rows = rows.filter(rows.str.contains(HEADER_RE))
        rows = rows.filter(rows.str.contains(",", literal=True))  # (on the few lines of the header's shape)
        known = {t for t in rows.unique().to_list() if _known(t.split(","))}
        return next(([t] for t in reversed(rows.to_list()) if t in known), [])
    frame = pl.DataFrame({"i": pl.int_range(0, len(text), eager=True), "raw": text, "text": text}).with_columns(
        host=pl.lit(None, dtype=pl.String)
    )
    frame, headers_ok = _hosts_and_headers(frame)
    last = (
        frame.filter(pl.col("text").is_in(headers_ok))
        .group_by("host", maintain_order=True)
        .agg(pl.col("i").last(), pl.col("raw").last())
        .sort("i")
    )
    return last.get_column("raw").to_list()


def _value(col: pl.Expr) -> pl.Expr:
    """Cell text with nulls for empty / bracketed states (`[N/A]`, `[Not Supported]`, `N/A`)."""
    v = col.str.strip_chars()
    return pl.when(v.str.starts_with("[") | (v == "N/A") | (v == "")).then(None).otherwise(v)


def _number(col: pl.Expr) -> pl.Expr:
    """Leading number of a cell (`612.34 W`, `98 %`, `16`); states and text give null."""
    return col.str.strip_chars().str.split(" ").list.first().cast(pl.Float64, strict=False)


_FLAGS = {
    **dict.fromkeys(["active", "yes", "enabled", "true", "1"], True),
    **dict.fromkeys(["not active", "no", "disabled", "false", "0"], False),
}


def _flag(col: pl.Expr) -> pl.Expr:
    """`Active`/`Yes`/... -> True, `Not Active`/`No`/... -> False, anything else (states, `[N/A]`) -> null."""
    v = col.str.strip_chars().str.to_lowercase()
    return v.replace_strict(_FLAGS, default=None, return_dtype=pl.Boolean)


def _strip(col: pl.Expr) -> pl.Expr:
    return col.str.strip_chars()


def _index(col: pl.Expr) -> pl.Expr:
    return _number(col).cast(pl.Int32, strict=False)  # (a number the column cannot hold: null)


def _int_number(col: pl.Expr) -> pl.Expr:
    return _number(col).cast(pl.Int64, strict=False)  # (a number the column cannot hold: null)


def _mask_value(col: pl.Expr) -> pl.Expr:
    """`clocks_event_reasons.active` (`0x0000000000000088`) as an integer; states give null."""
    return _value(col).str.strip_prefix("0x").str.strip_prefix("0X").str.to_integer(base=16, strict=False)


def _timestamp(col: pl.Expr) -> pl.Expr:
    # = `_value(col)` parsed: the states it nulls (`[...]`, `N/A`, empty) do not parse either
    ts = col.str.strip_chars().str.strptime(pl.Datetime("us"), "%Y/%m/%d %H:%M:%S%.f", strict=False)
    return ts.dt.replace_time_zone("UTC")


_NO_CSE = pl.QueryOptFlags(comm_subexpr_elim=False)
"""The queries of a field list's columns run without common-subexpression elimination: with a column converted
per distinct cell (`_per_value`: the distinct cells appear several times in the expression), polars 2.1
panicked on some long groups (`assertion left == right failed`)."""

_MANY, _PROBE = 8192, 4096
"""Rows of one field list from which a repetitive column (percentages, clocks, flags) is converted once per
distinct cell and mapped back, instead of once per row (when the first _PROBE rows repeat its cells)."""
_ALONE = 2
"""A field list of a file parsed alone (`parse`) takes the long-group paths from _MANY // _ALONE rows: its
columns probed for repetitive cells (`_repetitive`), its lines split by their tails (`_rows_by_tail`).
Converting per distinct cell and per tail pays from a few thousand rows (a 4,848-row loop of 8 GPUs,
whole ingest: ~210M instructions a file before csv15, per row; ~159M so); the same values either way.
`parse_many` batches files of fewer than _MANY lines and takes them from _MANY rows, as before."""


def _per_value(
    e: pl.Expr, fn: Callable[[pl.Expr], pl.Expr], dtype: pl.DataType, distinct: bool, runs: bool = False
) -> pl.Expr:
    """`fn(e)` (an elementwise conversion); when `runs`, computed on the first cell of each run of equal
    cells and spread over the run (a column that seldom changes: clocks, flags, link state); when `distinct`,
    computed on the distinct values of `e` (in order of appearance), mapped back."""
    if runs:
        rid = e.rle_id()
        return fn(e.filter(rid.diff().fill_null(1) != 0)).gather(rid)
    if not distinct:
        return fn(e)
    u = e.unique(maintain_order=True)
    return e.replace_strict(u, fn(u), default=None, return_dtype=dtype)


@lru_cache(maxsize=1024)
def _canon_list(fields: tuple[str, ...]) -> list[str]:
    return [canonical(f) for f in fields]


@dataclass(frozen=True)
class _Plan:
    """The expressions that turn the cells (`_c0`, `_c1`, ...) of one field list into samples, inventory."""

    mask: pl.Expr | None
    part: tuple[pl.Expr, ...]
    first: pl.Expr | None
    wide: tuple[pl.Expr, ...]
    key_order: pl.Expr | None
    distinct: tuple[tuple[str, str, Callable[[pl.Expr], pl.Expr], pl.DataType], ...] = ()
    stamps: tuple[tuple[str, str], ...] = ()
    """The timestamp columns `_distinct_values` adds (`_stamps` of a cell column): (column, cell column)."""
    """The columns converted once per distinct cell, which `_distinct_values` adds to the rows before the
    plan's queries read them: (column, cell column, conversion, dtype)."""


def _distinct_values(
    data: pl.DataFrame, plan: _Plan, uniq: dict[str, pl.Series] | None = None
) -> pl.DataFrame:
    """`data` with the plan's columns converted per distinct cell: each cell column's distinct values found
    once and converted, then mapped back (the values of `_per_value` in the query, which, with common-
    subexpression elimination off, found the distinct values twice per conversion). The cells of the rows'
    tail are converted on the first row of each tail (`_tail_values`), the others on their distinct cells
    (`_head_values`): a few queries for all columns, not a few calls per column. Rows whose cells are
    numbered (`uniq`: each cell column's distinct cells, `_rows_coded`) are converted on those, timestamps
    too."""
    if not plan.distinct and not plan.stamps:
        return data
    if uniq:
        cols = _head_values(data, list(plan.distinct), uniq) if plan.distinct else {}
        for name, cell in plan.stamps:
            if cell in uniq:
                cols[name] = _stamps(uniq[cell]).gather(data.get_column(_CODE + cell[2:]))
            else:
                cols[name] = _stamps(data.get_column(cell))
        names = [c for c, *_ in plan.distinct] + [c for c, _ in plan.stamps]
        return data.with_columns(**{c: cols[c] for c in names})
    j = _tail_of(data)
    in_tail = [d for d in plan.distinct if j is not None and int(d[1][2:]) >= j]
    values: dict[str, pl.Series | pl.Expr] = {}
    if in_tail:
        values |= _tail_values(data, f"{_TAIL}{j}", in_tail)
    if len(in_tail) < len(plan.distinct):
        values |= _head_values(data, [d for d in plan.distinct if d not in in_tail])
    cols = {name: values[name] for name, _cell, _fn, _dtype in plan.distinct}  # (in the plan's order)
    for name, cell in plan.stamps:
        cols[name] = _stamps(data.get_column(cell))
    return data.with_columns(**cols)


_Conversion = tuple[str, str, Callable[[pl.Expr], pl.Expr], pl.DataType]


@lru_cache(maxsize=1024)
def _conversion(conv: _Conversion, cast: bool) -> pl.Expr:
    """`fn(cell)` of a `_Plan.distinct` entry named for its column, cast to its dtype when `cast` (a Boolean
    then as UInt8, for the gathers, which cast it back: the same values and nulls, and a gather of bits costs
    several times one of bytes); built once (`_flag`'s mapping is a Series made per call)."""
    name, cell, fn, dtype = conv
    e = fn(pl.col(cell))
    if cast:
        e = e.cast(dtype)
        if dtype == pl.Boolean:
            e = e.cast(pl.UInt8)
    return e.alias(name)


def _tail_values(data: pl.DataFrame, tail: str, convs: list[_Conversion]) -> dict[str, pl.Series]:
    """The columns of `convs` (cells of the rows' tail: `tail` numbers it) converted on the first row of each
    tail, spread by the rows' tail numbers: one query for all conversions, one gather of all columns. The same
    values as each converted and gathered alone (the conversions are elementwise; a Boolean gathered as UInt8
    and cast back: `_conversion`)."""
    firsts, at = _tail_places(data.get_column(tail))
    cells = list(dict.fromkeys(cell for _name, cell, _fn, _dtype in convs))
    small = data.select(cells).gather(firsts)
    conv = small.select(_conversion(c, True) for c in convs).gather(at)  # (eager: no optimizer, no CSE)
    return {
        name: conv.get_column(name).cast(pl.Boolean) if dtype == pl.Boolean else conv.get_column(name)
        for name, _cell, _fn, dtype in convs
    }


def _head_values(
    data: pl.DataFrame, convs: list[_Conversion], uniq: dict[str, pl.Series] | None = None
) -> dict[str, pl.Series | pl.Expr]:
    """The columns of `convs` converted on the distinct cells of their cell columns and mapped back (the same
    values as converting every cell), in three queries whatever the number of columns: the distinct cells of
    every cell column (in order of appearance, nulls dropped); the conversions of all of them (each cell
    column's distinct cells padded with nulls to the longest: the conversions are elementwise, the padding is
    sliced off); the gathers by the cells' places among their distinct cells (a cast to their Enum, once per
    cell column: one lookup per cell, shared by the cell column's conversions). A cell column of more than
    _ENUM_MAX distinct cells is mapped back by `replace_strict`. Rows whose cells are numbered (`uniq`: the
    distinct cells of each cell column, by number: `_rows_coded`) are placed by their numbers (`_k<i>`)."""
    cells = list(dict.fromkeys(cell for _name, cell, _fn, _dtype in convs))
    index = pl.get_index_type()
    if uniq:
        uniq = {c: uniq[c] for c in cells}
        enum = dict.fromkeys(cells, True)
        places = {c: pl.col(_CODE + c[2:]).cast(index) for c in cells}
    else:
        found = data.lazy().select(
            pl.col(c).unique(maintain_order=True).drop_nulls().implode() for c in cells
        )
        uniq = {c: s.item() for c, s in zip(cells, found.collect().get_columns(), strict=True)}
        enum = {c: len(uniq[c]) <= _ENUM_MAX for c in cells}
        places = {c: pl.col(c).cast(pl.Enum(uniq[c])).to_physical().cast(index) for c in cells if enum[c]}
    longest = max(len(u) for u in uniq.values())
    padded = pl.DataFrame([u.extend_constant(None, longest - len(u)).alias(c) for c, u in uniq.items()])
    conv = padded.select(_conversion(c, enum[c[1]]) for c in convs)
    out: dict[str, pl.Series | pl.Expr] = {}
    gathers = []
    for name, cell, _fn, dtype in convs:
        v = conv.get_column(name).head(len(uniq[cell]))
        if not enum[cell]:
            out[name] = pl.col(cell).replace_strict(uniq[cell], v, default=None, return_dtype=dtype)
            continue
        g = pl.lit(v).gather(pl.col(cell))
        gathers.append(g.cast(pl.Boolean).alias(name) if dtype == pl.Boolean else g.alias(name))
    if gathers:
        spread = data.select(**places).select(gathers)
        out |= {s.name: s for s in spread.get_columns()}
    return out


_ENUM_MAX = 4096
"""Distinct cells of a column up to which `_head_values` places each cell among them by a cast to their
Enum."""


def _index_type(code: pl.Series) -> pl.Series:
    """An Enum's physical codes (UInt8/UInt16/UInt32) as polars' index type (UInt32; the same numbers and
    nulls): a gather by another integer type converts and bounds-checks the index first, every time (~60
    instructions a row; a column's codes serve several gathers)."""
    return code.cast(pl.get_index_type())


def _tail_places(tail: pl.Series) -> tuple[pl.Series, pl.Series]:
    """The first row of each tail number in `tail` (in order of appearance), each row's place among them."""
    firsts = tail.arg_unique()
    place = repeated(0, int(tail.max()) + 1, pl.UInt32)  # type: ignore[arg-type]
    place = place.scatter(tail.gather(firsts), pl.int_range(len(firsts), dtype=pl.UInt32, eager=True))
    return firsts, place.gather(tail)


def _tail_of(data: pl.DataFrame) -> int | None:
    """The first cell of the rows' tail, when `_rows_by_tail` read them (their tail numbered), else None."""
    return next((int(c[len(_TAIL) :]) for c in data.columns if c.startswith(_TAIL)), None)


def _tail_fields(data: pl.DataFrame, canon: list[str]) -> frozenset[str]:
    """The fields (canonical names) of the rows' tail (`_rows_by_tail`): converted once per tail."""
    j = _tail_of(data)
    return frozenset() if j is None else frozenset(canon[j:])


_DIGIT_AT = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18, 20, 21, 22]
_DAYS_IN = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _stamps(cells: pl.Series) -> pl.Series:
    """`_timestamp` of the cells: those of the form the loops print (`YYYY/MM/DD HH:MM:SS.fff`, a date of
    1970-2200 that exists and a time of day without leap second) computed from their bytes, the others (and
    nulls) parsed by `_timestamp` itself."""
    import numpy as np  # (here: a worker that reads no long CSV loop never imports it)

    usual = (cells.str.len_bytes() == 23).fill_null(False)
    at = usual.arg_true()
    micros = repeated(None, len(cells), pl.Int64)
    fast = pl.Series([], dtype=pl.UInt32)
    if len(at):
        # (the cells' bytes read by polars into an array of 23 bytes a row, which numpy reads in place: no
        # joined copy in a Python `bytes`)
        m = len(at)
        b = cells.gather(at).cast(pl.Binary).bin.reinterpret(dtype=pl.Array(pl.UInt8, 23)).to_numpy()
        raw = b.reshape(-1)
        b = raw.reshape(m, 23)
        # The date and time of day (the first 19 bytes) are read once per run of rows that repeat them (a loop
        # prints a second's rows, one per GPU, with the same second), the milliseconds per row: 11 -> ~2 ms on
        # a 16 MB chunk.

        def word(offset: int) -> np.ndarray:
            return np.ndarray((m,), dtype="<u8", buffer=raw, offset=offset, strides=(23,))

        change = np.ones(m, dtype=bool)
        w0, w8, w11 = word(0), word(8), word(11)  # (bytes 0-18)
        change[1:] = (w0[1:] != w0[:-1]) | (w8[1:] != w8[:-1]) | (w11[1:] != w11[:-1])
        first = np.flatnonzero(change)
        run = np.cumsum(change) - 1
        d = b[first, :19].astype(np.int64) - 48
        ok = (d[:, 4] == -1) & (d[:, 7] == -1) & (d[:, 10] == -16) & (d[:, 13] == 10) & (d[:, 16] == 10)
        ok &= ((d[:, _DIGIT_AT[:-3]] >= 0) & (d[:, _DIGIT_AT[:-3]] <= 9)).all(axis=1)
        year = d[:, 0] * 1000 + d[:, 1] * 100 + d[:, 2] * 10 + d[:, 3]
        month, day = d[:, 5] * 10 + d[:, 6], d[:, 8] * 10 + d[:, 9]
        hour, minute, sec = d[:, 11] * 10 + d[:, 12], d[:, 14] * 10 + d[:, 15], d[:, 17] * 10 + d[:, 18]
        leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
        last = np.array(_DAYS_IN)[np.clip(month, 0, 12)] + ((month == 2) & leap)
        ok &= (year >= 1970) & (year <= 2200) & (month >= 1) & (month <= 12) & (day >= 1) & (day <= last)
        ok &= (hour <= 23) & (minute <= 59) & (sec <= 59)
        # days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil)
        y = year - (month <= 2)
        era = y // 400
        yoe = y - era * 400
        doy = (153 * ((month + 9) % 12) + 2) // 5 + day - 1
        days = era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468
        seconds = days * 86400 + hour * 3600 + minute * 60 + sec
        ms = b[:, 20:23].astype(np.int64) - 48
        row_ok = ok[run] & (b[:, 19] == 46) & ((ms >= 0) & (ms <= 9)).all(axis=1)
        value = (seconds[run] * 1000 + (ms[:, 0] * 100 + ms[:, 1] * 10 + ms[:, 2])) * 1000
        fast = at.filter(pl.Series(row_ok))
        micros = micros.scatter(fast, pl.Series(value[row_ok]))
    ts = micros.cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    if len(fast) < len(cells):
        rest = repeated(True, len(cells), pl.Boolean)
        rest = (rest.scatter(fast, False) if len(fast) else rest).arg_true()
        ts = ts.scatter(rest, pl.select(_timestamp(pl.lit(cells.gather(rest)))).to_series())
    return ts


@lru_cache(maxsize=256)
def _group_plan(
    fields: tuple[str, ...],
    many: frozenset[str],
    runs: frozenset[str] = frozenset(),
    long: bool = False,
    coded: frozenset[int] = frozenset(),
) -> _Plan:
    """The plan of a field list (built once: a loop's files repeat their header); `many`: the fields whose
    cells are converted once per distinct cell; `runs`: once per run of equal cells; `coded`: the cells
    numbered (`_rows_coded`: `_k<i>`, equal where the cells are, no cells), which are among `many` (a
    timestamp: among the stamps, converted on its distinct cells too)."""
    canon = _canon_list(fields)
    cell = {c: pl.col(f"{_CODE if i in coded else '_c'}{i}") for i, c in enumerate(canon)}
    at = {c: i for i, c in enumerate(canon)}
    distinct: dict[str, tuple[str, str, Callable[[pl.Expr], pl.Expr], pl.DataType]] = {}

    stamps: dict[str, tuple[str, str]] = {}

    def conv(c: str, fn: Callable[[pl.Expr], pl.Expr], dtype: pl.DataType) -> pl.Expr:
        if long and fn is _timestamp and c not in many and c not in runs:  # (added by `_distinct_values`)
            stamps.setdefault(f"_s{at[c]}", (f"_s{at[c]}", f"_c{at[c]}"))
            return pl.col(f"_s{at[c]}")
        if c in many and c not in runs:  # (added by `_distinct_values`)
            name = f"_d{at[c]}{fn.__name__}"
            distinct.setdefault(name, (name, f"_c{at[c]}", fn, dtype))
            return pl.col(name)
        return _per_value(cell[c], fn, dtype, c in many, c in runs)

    exprs: dict[str, pl.Expr] = {}
    best: dict[str, int] = {}
    for c in cell:
        if c in _SAMPLE:
            col, pri = _SAMPLE[c]
            if col in best and best[col] <= pri:
                continue
            best[col] = pri
            if col in F.BOOL_COLUMNS:
                exprs[col] = conv(c, _flag, pl.Boolean)
            elif col in F.INT_COLUMNS:
                exprs[col] = conv(c, _int_number, pl.Int64)
            else:
                exprs[col] = conv(c, _number, pl.Float64)
        elif c.startswith("clocks_throttle_reasons."):
            k = c.split(".", 1)[1]
            if k in F.THROTTLE_COLUMNS:
                exprs[F.THROTTLE_COLUMNS[k]] = conv(c, _flag, pl.Boolean)
    mask = None
    if "clocks_throttle_reasons.active" in cell:
        mask = conv("clocks_throttle_reasons.active", _mask_value, pl.Int64)
        for bit, col in F.THROTTLE_BITS.items():
            exprs.setdefault(col, (pl.col("_mask") & bit) > 0)
    ts = conv("timestamp", _timestamp, F.UTC) if "timestamp" in cell else pl.lit(None, dtype=F.UTC)
    bus = conv("pci.bus_id", _value, pl.String) if "pci.bus_id" in cell else pl.lit(None, dtype=pl.String)
    uuid = conv("uuid", _value, pl.String) if "uuid" in cell else pl.lit(None, dtype=pl.String)
    ident_c = next((c for c in _IDENTITY if c in cell), None)
    ident = conv(ident_c, _strip, pl.String) if ident_c is not None else pl.lit(None, dtype=pl.String)
    gpu_index = conv("index", _index, pl.Int32) if "index" in cell else pl.lit(None, dtype=pl.Int32)
    used = set(_SAMPLE) | {"timestamp", "index", "pci.bus_id", "uuid", "clocks_throttle_reasons.active"}
    used |= {
        c
        for c in canon
        if c.startswith("clocks_throttle_reasons.") and c.split(".", 1)[1] in F.THROTTLE_COLUMNS
    }
    shown = {canonical(f): re.sub(r"\s*\[.*\]\s*$", "", f.strip()) for f in fields}
    extra_fields = {
        shown[c]: conv(c, _strip, pl.String)
        for c in cell
        if c not in used and c not in _INV and c not in _NODE
    }
    extra = pl.struct(**extra_fields).struct.json_encode() if extra_fields else pl.lit(None, dtype=pl.String)
    pstate = conv("pstate", _value, pl.String) if "pstate" in cell else pl.lit(None, dtype=pl.String)
    part = (
        pl.col("line"),
        pl.col("host"),
        pl.col("raw").alias("text"),
        ts.alias("ts"),
        gpu_index.alias("gpu_index"),
        ident.alias("ident"),
        bus.alias("gpu_bus_id"),
        uuid.alias("gpu_uuid"),
        extra.alias("extra"),
        pstate.alias("_pstate"),
        *(e.alias(k) for k, e in exprs.items()),
    )
    inv_cells = [c for c in _INV if c in cell]
    node_cells = [c for c in _NODE if c in cell]
    if not inv_cells and not node_cells:
        return _Plan(mask, part, None, (), None, tuple(distinct.values()), tuple(stamps.values()))
    keyed = [c for c in dict.fromkeys([*inv_cells, *node_cells, "index", ident_c, "pci.bus_id"]) if c]
    first = pl.struct("host", "header", *(cell[c] for c in keyed if c in cell)).is_first_distinct()
    values = {f"gpu:{_INV[c]}": conv(c, _value, pl.String) for c in inv_cells}
    values |= {f"node:{_NODE[c]}": conv(c, _value, pl.String) for c in node_cells}
    wide = (
        pl.col("line"),
        pl.col("host"),
        pl.col("header"),
        ident.alias("ident"),
        gpu_index.alias("gpu_index"),
        bus.alias("gpu_bus_id"),
        *(e.alias(k) for k, e in values.items()),
    )
    key_order = pl.col("key").replace_strict({k: i for i, k in enumerate(values)}, return_dtype=pl.Int64)
    return _Plan(mask, part, first, wide, key_order, tuple(distinct.values()), tuple(stamps.values()))


def _coded(data: pl.DataFrame, n: int) -> frozenset[int]:
    """The cells of `data` (rows of a field list of `n` fields) that `_rows_coded` numbered (`_k<i>`)."""
    return frozenset(i for i in range(n) if f"{_CODE}{i}" in data.columns)


def _repetitive(data: pl.DataFrame, canon: list[str]) -> tuple[frozenset[str], frozenset[str]]:
    """The fields (canonical names) of a long group whose cells repeat in its first _PROBE rows (converted
    once per distinct cell), and those whose cells seldom change from one row to the next (few runs of
    equal cells: converted once per run). The fields of the rows' tail (`_tail_fields`) are converted once
    per tail, so among the first and not the second whatever their cells: their cells are not probed (nor
    those of a head cell of the same field)."""
    coded = _coded(data, len(canon))
    if coded:
        # Numbered cells (`_rows_coded`) are converted once per distinct cell whatever their number (the
        # conversions of the distinct cells, a gather by number), the timestamps too (`_distinct_values`);
        # the others (mostly distinct) once per cell.
        at = {c: i for i, c in enumerate(canon)}  # (a field twice: its last cell, as `_group_plan` reads)
        return frozenset(c for c, i in at.items() if i in coded) - {"timestamp"}, frozenset()
    tail = _tail_fields(data, canon)
    probed = [i for i, c in enumerate(canon) if c not in tail]
    k = len(probed)
    probe = (
        data.head(_PROBE)
        .select(
            *(pl.col(f"_c{i}").n_unique() for i in probed),
            *(pl.col(f"_c{i}").rle_id().max().alias(f"_r{i}") for i in probed),
        )
        .row(0)
        if probed
        else ()
    )
    many = frozenset(canon[i] for i, n_u in zip(probed, probe[:k], strict=True) if n_u * 4 <= _PROBE)
    runs = frozenset(canon[i] for i, r in zip(probed, probe[k:], strict=True) if (r + 1) * 16 <= _PROBE)
    return many | tail, runs


def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """Parse every header group of the file; see the module docstring."""
    text = lines.cast(pl.String).fill_null("")
    n_lines = len(text)
    frame = pl.DataFrame(
        {
            "line": pl.int_range(ctx.first_line, ctx.first_line + n_lines, dtype=pl.Int64, eager=True),
            "text": text,
            "raw": text,
            "host": repeated(None, n_lines, pl.String),
        }
    )  # (= numbered(lines, ctx) with text nulls as "", raw = text, host null: one frame, no with_columns)
    frame, headers_ok = _hosts_and_headers(frame)
    is_header = pl.col("text").is_in(headers_ok)
    headers = frame.filter(is_header).select("line", "text")
    header_fields = {int(ln): [f.strip() for f in t.rstrip(", ").split(",")] for ln, t in headers.iter_rows()}
    # Headers repeated by loops and restarts share one field list: their rows are handled together (one
    # filter per distinct field list, not one full-frame filter per header line).
    sig_of: dict[int, int] = {}
    sigs: dict[tuple[str, ...], int] = {}
    for hline, fields in header_fields.items():
        sig_of[hline] = sigs.setdefault(tuple(fields), len(sigs))
    fail_hit, fail_events = F.failure_events(frame, ctx)
    # Each line's field list: its header's. One field list (a loop's file): every line under a header has it
    # (the headers are the lines `sig_of` numbers), the others none; no mapping of header lines to look up.
    sig = pl.col("header").replace_strict(sig_of, default=None, return_dtype=pl.Int64)
    if len(sigs) == 1:
        sig = pl.when(pl.col("header").is_not_null()).then(pl.lit(0, dtype=pl.Int64))
    # (header, flags and field list of every line in one query)
    frame = (
        frame.lazy()
        .with_columns(
            header=pl.when(is_header).then(pl.col("line")).otherwise(None).forward_fill().over("host"),
            is_header=is_header,
            is_fail=fail_hit,
        )
        .with_columns(sig=sig)
        .collect(engine="in-memory")
    )
    groups, data_lines = _data_rows(frame, sigs, "line", _MANY // _ALONE)
    ok = frame.get_column("is_header") | frame.get_column("is_fail")
    if data_lines:
        ok = ok.scatter(pl.concat(data_lines) - ctx.first_line, True)
    # (= base.account, and the count of orphan rows, in one select; the examples only when there are some)
    blank = ~pl.col("text").str.contains(r"\S")
    orphan = pl.col("header").is_null() & ~pl.col("is_fail") & (pl.col("text").str.strip_chars() != "")
    okf = ok.fill_null(False)
    if all(len(f) >= 2 for f in sigs):
        # Understood lines are never blank then (header and data lines hold a comma, failure lines their
        # words) and orphans are not understood: the tests run on the other lines only (few).
        rest = frame.select("line", "text", "header", "is_fail").filter(~okf)
        unrecognized, n_orphan = rest.select(unrecognized=(~blank).sum(), orphan=orphan.sum()).row(0)
        parsed = len(okf) - rest.height
        bad = rest.filter(~blank) if unrecognized else None
    else:
        parsed, unrecognized, n_orphan = (
            frame.select("text", "header", "is_fail")
            .with_columns(ok=okf)
            .select(
                parsed=(pl.col("ok") & ~blank).sum(),
                unrecognized=(~pl.col("ok") & ~blank).sum(),
                orphan=orphan.sum(),
            )
            .row(0)
        )
        bad = None
        if unrecognized:
            bad = frame.select("line", "text").with_columns(ok=okf).filter(~pl.col("ok") & ~blank)
    examples: list[tuple[int, str]] = []
    if bad is not None:
        bad = bad.head(MAX_EXAMPLES).select("line", "text")
        examples = [(int(n), str(t)[:500]) for n, t in bad.iter_rows()]
    notes: list[str] = []
    if n_orphan:
        notes.append(
            f"{n_orphan} line(s) before any CSV header (noheader output?): field list unknown,"
            " left unrecognized"
        )

    samples_parts: list[pl.DataFrame] = []
    inv_parts: list[pl.DataFrame] = []
    pid_headers = [h for h, fields in header_fields.items() if "pid" in _canon_list(tuple(fields))]
    with_data: set[int] = set()
    if pid_headers and groups:  # (which headers have rows: asked only when one is a per-process query)
        with_data = set(pl.concat([g.get_column("header").unique() for _, g, _u in groups]).to_list())
    # --query-compute-apps / --query-accounted-apps: one row per process, no GPU telemetry.
    notes.extend(
        f"header at line {hline}: per-process query (pid), rows understood, no GPU samples"
        for hline in pid_headers
        if hline in with_data
    )
    for fields, data, uniq in groups:
        canon = _canon_list(tuple(fields))
        if "pid" in canon:
            continue
        # Columns whose cells repeat (a probe of the first rows says so) are converted per distinct cell.
        # Columns that seldom change from one row to the next (few runs of equal cells) are converted once
        # per run.
        many: frozenset[str] = frozenset()
        runs: frozenset[str] = frozenset()
        long = data.height >= _MANY // _ALONE or bool(uniq)
        if long:
            many, runs = _repetitive(data, canon)
        plan = _group_plan(tuple(fields), many, runs, long, _coded(data, len(fields)))
        data = _distinct_values(data, plan, uniq)
        q = data.lazy()
        if plan.mask is not None:
            q = q.with_columns(_mask=plan.mask)  # parsed once, not once per bit
        samples_parts.append(q.select(plan.part).collect(engine="in-memory", optimizations=_NO_CSE))
        if plan.wide:
            # Rows repeating an earlier row of the same header in every cell the inventory reads give rows
            # the deduplication below drops anyway (same key, later line): they are dropped first.
            # (a small group is not worth the extra operation: the deduplication below does it all)
            q = data.lazy().filter(plan.first) if data.height >= _MANY or uniq else data.lazy()
            inv_parts.append(_inventory_long(q, plan))

    if samples_parts:
        samples = samples_parts[0]
        if len(samples_parts) > 1:
            samples = pl.concat(samples_parts, how="diagonal_relaxed")
        if len(samples_parts) > 1 or not samples.get_column("line").is_sorted():
            samples = samples.sort("line")  # (one field list's rows are in line order already)
        # gpu_index from first appearance of the GPU's identity when `index` was not queried.
        if samples.get_column("gpu_index").null_count():  # (every row has its `index`: nothing to number)
            order = (
                samples.filter(pl.col("ident").is_not_null())
                .group_by("host", "ident")
                .agg(first=pl.col("line").min())
                .sort("first")
                .select("host", "ident", ord=pl.int_range(pl.len()).over("host").cast(pl.Int32))
            )
            samples = samples.join(order, on=["host", "ident"], how="left", nulls_equal=True).with_columns(
                gpu_index=pl.coalesce("gpu_index", "ord"),
            )
        # (bus ids normalised once per distinct value, in this select; the inventory's are among them)
        bus_u, bus_norm = F.bus_id_map(samples.get_column("gpu_bus_id"))
        samples = samples.with_columns(
            gpu_bus_id=pl.col("gpu_bus_id").replace_strict(
                bus_u, bus_norm, default=None, return_dtype=pl.String
            ),
            node=pl.coalesce(pl.col("host"), pl.lit(ctx.node)),
            file=pl.lit(ctx.path),
            source=pl.lit("nvidia-smi-csv"),
            ts_quality=pl.when(pl.col("ts").is_not_null()).then(pl.lit("local_assumed_utc")).otherwise(pl.lit("none")),
        )
        # Bus ids and UUIDs may be queried only on some rows' headers: fill per identity.
        events = F.transition_events(samples, ctx)
        gpu_samples = F.conform_known(samples, "gpu_samples")
    else:
        samples = None
        events = F.conform_table(pl.DataFrame(), "events")
        gpu_samples = F.conform_table(pl.DataFrame(), "gpu_samples")

    if inv_parts:
        # In the order of one part per header line (header, then field, then row), as the rows are
        # deduplicated keeping the first. Rows repeating an earlier row's raw values (same host, field,
        # index, identity, bus id, value) are dropped first: the final key is a function of these, so the
        # same rows survive.
        long = (
            pl.concat(inv_parts, how="diagonal_relaxed")
            .lazy()
            .sort("header", "_k", "line", maintain_order=True)
            .unique(
                ["host", "key", "gpu_index", "ident", "gpu_bus_id", "value"], keep="first", maintain_order=True
            )
            .collect(engine="in-memory")
        )
        if samples is not None and long.get_column("gpu_index").null_count():
            # (of a long loop, the sample rows of the inventory's lines only: a small join)
            rel = samples
            if samples.height >= _MANY:
                rel = samples.filter(pl.col("line").is_in(long.get_column("line").implode()))
            idx = rel.select("line", gi=pl.col("gpu_index"))
            long = long.join(idx, on="line", how="left", maintain_order="left").with_columns(
                gpu_index=pl.coalesce("gpu_index", "gi")
            )
        comp = pl.col("key").str.split(":").list.first()
        inventory = long.select(
            node=pl.coalesce(pl.col("host"), pl.lit(ctx.node)),
            component=comp,
            gpu_index=pl.when(comp == "gpu").then(pl.col("gpu_index")).otherwise(None).cast(pl.Int32),
            gpu_bus_id=pl.when(comp == "gpu")
            .then(pl.col("gpu_bus_id").replace_strict(bus_u, bus_norm, default=None, return_dtype=pl.String))
            .otherwise(None),
            attribute=pl.col("key").str.split(":").list.last(),
            value=pl.col("value"),
            source=pl.lit("nvidia-smi-csv"),
            file=pl.lit(ctx.path),
            line=pl.col("line"),
        ).unique(["node", "component", "gpu_index", "gpu_bus_id", "attribute", "value"], keep="first", maintain_order=True)
        inventory = F.conform_table(inventory, "inventory")
    else:
        inventory = F.conform_table(pl.DataFrame(), "inventory")
    if fail_events.height:
        events = pl.concat([events, fail_events], how="vertical").sort("line")
    host_col = frame.get_column("host")
    hosts = host_col.drop_nulls().unique() if host_col.null_count() < len(host_col) else host_col.head(0)
    return ParseResult(
        node=hosts[0] if len(hosts) == 1 else None,
        tables={"inventory": inventory, "gpu_samples": gpu_samples, "events": events},
        parsed=parsed,
        unrecognized=unrecognized,
        unrecognized_examples=examples,
        notes=notes,
    )


def parse_many(items: Sequence[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
    """`[parse(lines, ctx) for lines, ctx in items]` in one pass over the lines of all files (see
    `_parse_batch`). Files of `_MANY` lines or more (whose columns may be converted per distinct cell or run)
    and files that may be pdsh/clush captures (half their lines hold ': ') are parsed alone."""
    out: list[ParseResult | None] = [None] * len(items)
    batch = [k for k, (lines, _ctx) in enumerate(items) if len(lines) < _MANY]
    if len(batch) >= 2:
        text = pl.concat([items[k][0].cast(pl.String) for k in batch], how="vertical").fill_null("")
        starts = list(accumulate((len(items[k][0]) for k in batch), initial=0))
        prefixed = _per_file(text.str.contains(": ", literal=True), starts)
        if any(prefixed):
            # = the test of `_hosts_and_headers`: half the non-blank lines hold ': ' and have a host prefix
            nonblank = _per_file(text.str.strip_chars() != "", starts)
            hosted = _per_file(text.str.contains(PDSH_RE), starts)
            capture = {
                batch[i]
                for i, (p, nb, h) in enumerate(zip(prefixed, nonblank, hosted, strict=True))
                if nb and p * 2 >= nb and h * 2 >= nb
            }
            if capture:
                batch = [k for k in batch if k not in capture]
                text = None  # (the lines are concatenated again without these files)
        if len(batch) >= 2:
            for k, result in zip(batch, _parse_batch([items[k] for k in batch], text), strict=True):
                out[k] = result
        else:
            batch = []
    for k, (lines, ctx) in enumerate(items):
        if out[k] is None:
            out[k] = parse(lines, ctx)
    return out  # type: ignore[return-value]


def _per_file(flags: pl.Series, starts: list[int]) -> list[int]:
    """How many of each file's lines are flagged (`starts`: the first line of each file, then the end)."""
    at = flags.arg_true().search_sorted(pl.Series(starts, dtype=pl.UInt32)).to_list()
    return [b - a for a, b in zip(at, at[1:])]


def _parse_batch(items: Sequence[tuple[pl.Series, FileContext]], text: pl.Series | None) -> list[ParseResult]:
    """`parse` of several files (none a pdsh capture, each of fewer than `_MANY` lines) in one pass: every
    line is governed by the last header above it in its own file (`_f`, the file number, partitions the
    forward fill, the GPU numbering, the deduplication and the transitions), the rows of one field list are
    read in one query whatever file they are in, then everything is cut back per file."""
    nf = len(items)
    starts = list(accumulate((len(lines) for lines, _ in items), initial=0))
    n = starts[-1]
    if text is None:
        text = pl.concat([lines.cast(pl.String) for lines, _ in items], how="vertical").fill_null("")
    pos = pl.int_range(0, n, dtype=pl.UInt32, eager=True)
    file_of = pl.Series(starts[1:], dtype=pl.UInt32).search_sorted(pos, side="right").cast(pl.Int64)
    line_off = pl.Series([ctx.first_line - starts[k] for k, (_l, ctx) in enumerate(items)], dtype=pl.Int64)
    nodes = pl.Series([ctx.node for _, ctx in items], dtype=pl.String)
    paths = pl.Series([ctx.path for _, ctx in items], dtype=pl.String)
    frame = pl.DataFrame({"_pos": pos, "_f": file_of, "text": text}).select(
        "_pos",
        "_f",
        line=pl.col("_pos").cast(pl.Int64) + pl.lit(line_off).gather(pl.col("_f")),
        text="text",
        raw="text",
        host=pl.lit(None, dtype=pl.String),
    )
    # (no file is a capture, so neither is the batch: the hosts stay null; a header is known by its text)
    frame, headers_ok = _hosts_and_headers(frame)
    is_header = pl.col("text").is_in(headers_ok)
    headers = frame.filter(is_header).select("_pos", "_f", "line", "text")
    header_fields: dict[int, tuple[int, int, list[str]]] = {
        int(p): (int(f), int(ln), [x.strip() for x in t.rstrip(", ").split(",")])
        for p, f, ln, t in headers.iter_rows()
    }
    sig_of: dict[int, int] = {}
    sigs: dict[tuple[str, ...], int] = {}
    for hpos, (_f, _ln, fields) in header_fields.items():
        sig_of[hpos] = sigs.setdefault(tuple(fields), len(sigs))
    # failure lines (F.failure_events per file)
    fail_cand = frame.filter(pl.col("text").str.contains(F.FAILURE_ALT)).select("_pos", "_f", "line", "text")
    fail_rows: list[list[dict[str, Any]]] = [[] for _ in range(nf)]
    fail_pos = []
    for p, f, ln, t in fail_cand.iter_rows():
        ctx = items[f][1]
        e = F.failure_event(t, ln, node=ctx.node, path=ctx.path)
        if e is not None:
            fail_rows[f].append(e)
            fail_pos.append(p)
    frame = (
        frame.lazy()
        .with_columns(
            _hp=pl.when(is_header).then(pl.col("_pos")).otherwise(None).forward_fill().over("_f"),
            is_header=is_header,
            is_fail=pl.col("_pos").is_in(pl.Series(fail_pos, dtype=pl.UInt32).implode()),
        )
        .with_columns(
            header=pl.col("_hp").cast(pl.Int64) + pl.lit(line_off).gather(pl.col("_f")),
            sig=pl.col("_hp").replace_strict(sig_of, default=None, return_dtype=pl.Int64),
        )
        .collect(engine="in-memory")
    )
    groups, data_pos = _data_rows(frame, sigs, "_pos")
    ok = frame.get_column("is_header") | frame.get_column("is_fail")
    if data_pos:
        ok = ok.scatter(pl.concat(data_pos), True)
    # (= base.account and the orphan rows, per file)
    blank = ~pl.col("text").str.contains(r"\S")
    orphan = pl.col("header").is_null() & ~pl.col("is_fail") & (pl.col("text").str.strip_chars() != "")
    flags = frame.select("_f", "line", "text", bad=~ok.fill_null(False) & ~blank, orphan=orphan)
    counts = flags.group_by("_f").agg(bad=pl.col("bad").sum(), orphan=pl.col("orphan").sum())
    by_file = {int(f): (int(b), int(o)) for f, b, o in counts.iter_rows()}
    n_blank = _per_file(frame.select(blank).to_series(), starts)
    examples: list[list[tuple[int, str]]] = [[] for _ in range(nf)]
    if any(b for b, _o in by_file.values()):
        bad = flags.filter(pl.col("bad")).filter(pl.int_range(pl.len()).over("_f") < MAX_EXAMPLES)
        for f, ln, t in bad.select("_f", "line", "text").iter_rows():
            examples[f].append((int(ln), str(t)[:500]))
    notes: list[list[str]] = [[] for _ in range(nf)]
    for f in range(nf):
        n_orphan = by_file.get(f, (0, 0))[1]
        if n_orphan:
            notes[f].append(
                f"{n_orphan} line(s) before any CSV header (noheader output?): field list unknown,"
                " left unrecognized"
            )
    pid_headers = [h for h, (_f, _ln, fields) in header_fields.items() if "pid" in _canon_list(tuple(fields))]
    with_data: set[int] = set()
    if pid_headers and groups:
        with_data = set(pl.concat([g.get_column("_hp").unique() for _, g, _u in groups]).to_list())
    for h in pid_headers:
        if h in with_data:
            f, ln, _fields = header_fields[h]
            notes[f].append(f"header at line {ln}: per-process query (pid), rows understood, no GPU samples")

    samples_parts: list[pl.DataFrame] = []
    inv_parts: list[pl.DataFrame] = []
    for fields, data, uniq in groups:
        if "pid" in _canon_list(tuple(fields)):
            continue
        # Columns whose cells repeat in the rows of all files are converted per distinct cell or per run of
        # equal cells, as `parse` does for a long group (the same values: the conversions are elementwise).
        many: frozenset[str] = frozenset()
        runs: frozenset[str] = frozenset()
        long = data.height >= _MANY or bool(uniq)
        if long:
            many, runs = _repetitive(data, _canon_list(tuple(fields)))
        plan = _group_plan(tuple(fields), many, runs, long, _coded(data, len(fields)))
        data = _distinct_values(data, plan, uniq)
        q = data.lazy()
        if plan.mask is not None:
            q = q.with_columns(_mask=plan.mask)
        part = q.select(*plan.part, pl.col("_f"))
        samples_parts.append(part.collect(engine="in-memory", optimizations=_NO_CSE))
        if plan.wide:
            # Rows repeating an earlier row of their file in every cell the inventory reads are dropped first,
            # as `parse` drops them (their rows are those the deduplication below drops: the same file, key
            # and values, a later line). A batch of seven 6-hour loops: 81k long rows sorted and deduplicated
            # for 56 kept, ~13 of its ~79 ms of CPU.
            q = data.lazy().filter(plan.first.over("_f")) if long else data.lazy()
            inv_parts.append(_inventory_long(q, plan, "_f"))

    empty_events = F.conform_table(pl.DataFrame(), "events")
    samples = None
    if samples_parts:
        samples = samples_parts[0]
        if len(samples_parts) > 1:
            samples = pl.concat(samples_parts, how="diagonal_relaxed").sort("_f", "line")
        if samples.get_column("gpu_index").null_count():
            order = (
                samples.filter(pl.col("ident").is_not_null())
                .group_by("_f", "host", "ident")
                .agg(first=pl.col("line").min())
                .sort("_f", "first")
                .select("_f", "host", "ident", ord=pl.int_range(pl.len()).over("_f", "host").cast(pl.Int32))
            )
            samples = samples.join(
                order, on=["_f", "host", "ident"], how="left", nulls_equal=True, maintain_order="left"
            ).with_columns(gpu_index=pl.coalesce("gpu_index", "ord"))
        bus_u, bus_norm = F.bus_id_map(samples.get_column("gpu_bus_id"))
        samples = samples.with_columns(
            gpu_bus_id=pl.col("gpu_bus_id").replace_strict(
                bus_u, bus_norm, default=None, return_dtype=pl.String
            ),
            node=pl.coalesce(pl.col("host"), pl.lit(nodes).gather(pl.col("_f"))),
            file=pl.lit(paths).gather(pl.col("_f")),
            source=pl.lit("nvidia-smi-csv"),
            ts_quality=pl.when(pl.col("ts").is_not_null()).then(pl.lit("local_assumed_utc")).otherwise(pl.lit("none")),
        )
        events_of = F.transition_events_many(samples, nf)
        samples_of = _cut(F.conform_known(samples, "gpu_samples"), samples.get_column("_f"), nf)
    else:
        events_of = [empty_events.clone() for _ in range(nf)]
        samples_of = [F.conform_table(pl.DataFrame(), "gpu_samples") for _ in range(nf)]

    if inv_parts:
        long = (
            pl.concat(inv_parts, how="diagonal_relaxed")
            .lazy()
            .sort("_f", "header", "_k", "line", maintain_order=True)
            .unique(
                ["_f", "host", "key", "gpu_index", "ident", "gpu_bus_id", "value"],
                keep="first",
                maintain_order=True,
            )
            .collect(engine="in-memory")
        )
        if samples is not None and long.get_column("gpu_index").null_count():
            idx = samples.select("_f", "line", gi=pl.col("gpu_index"))
            long = long.join(idx, on=["_f", "line"], how="left", maintain_order="left").with_columns(
                gpu_index=pl.coalesce("gpu_index", "gi")
            )
        comp = pl.col("key").str.split(":").list.first()
        inventory = long.select(
            "_f",
            node=pl.coalesce(pl.col("host"), pl.lit(nodes).gather(pl.col("_f"))),
            component=comp,
            gpu_index=pl.when(comp == "gpu").then(pl.col("gpu_index")).otherwise(None).cast(pl.Int32),
            gpu_bus_id=pl.when(comp == "gpu")
            .then(pl.col("gpu_bus_id").replace_strict(bus_u, bus_norm, default=None, return_dtype=pl.String))
            .otherwise(None),
            attribute=pl.col("key").str.split(":").list.last(),
            value=pl.col("value"),
            source=pl.lit("nvidia-smi-csv"),
            file=pl.lit(paths).gather(pl.col("_f")),
            line=pl.col("line"),
        ).unique(
            ["_f", "node", "component", "gpu_index", "gpu_bus_id", "attribute", "value"],
            keep="first",
            maintain_order=True,
        )
        inv_f = inventory.get_column("_f")
        inventory_of = _cut(F.conform_table(inventory.drop("_f"), "inventory"), inv_f, nf)
    else:
        inventory_of = [F.conform_table(pl.DataFrame(), "inventory") for _ in range(nf)]

    out = []
    for f in range(nf):
        events = events_of[f]
        if fail_rows[f]:
            fail_events = F.frames([], [], fail_rows[f])["events"]
            events = pl.concat([events, fail_events], how="vertical").sort("line")
        bad_n = by_file.get(f, (0, 0))[0]
        size = starts[f + 1] - starts[f]
        out.append(
            ParseResult(
                node=None,
                tables={"inventory": inventory_of[f], "gpu_samples": samples_of[f], "events": events},
                parsed=size - bad_n - n_blank[f],
                unrecognized=bad_n,
                unrecognized_examples=examples[f],
                notes=notes[f],
            )
        )
    return out


def _cut(df: pl.DataFrame, file_of: pl.Series, files: int) -> list[pl.DataFrame]:
    """`df` (a conformed table, rows in file order; `file_of`: their file numbers) cut into each file's rows
    (a file without rows gets an empty frame of the table, as `F.conform_table` makes it)."""
    at = file_of.search_sorted(pl.Series(range(files + 1), dtype=file_of.dtype)).to_list()
    return [df.slice(a, b - a) if b > a else df.clear() for a, b in zip(at, at[1:], strict=False)]


_Group = tuple[list[str], pl.DataFrame, dict[str, pl.Series]]
"""A field list, its data rows (cells `_c0`...) and, where the rows' cells are numbered (`_rows_coded`: codes
`_k0`...), each cell column's distinct cells by number."""


def _data_rows(
    frame: pl.DataFrame, sigs: dict[tuple[str, ...], int], at: str, by_tail: int | None = None
) -> tuple[list[_Group], list[pl.Series]]:
    """Per field list (`sigs`: field list -> its `sig`), the rows of `frame` that are its data rows, split
    into their cells `_c0`...; and their `at` column (which lines they are).

    A data row has as many cells as its header has fields: split into one more than that, the last cell must
    exist and the one after it must not (no separate count of the commas). One field list (the usual case):
    its rows filtered, split and checked in one query. Of a field list of `by_tail` rows or more, the lines
    are cut and their cells numbered by the compiled scanner (`_rows_coded`), or, where it is not built,
    split by their tails when they have few (`_rows_by_tail`; `by_tail`: _MANY when None, read at the
    call: tests set _MANY)."""
    by_tail = _MANY if by_tail is None else by_tail
    is_cand = pl.col("sig").is_not_null() & ~pl.col("is_header") & ~pl.col("is_fail")
    cand = frame.filter(is_cand).lazy() if len(sigs) > 1 else frame.lazy().filter(is_cand)
    groups: list[_Group] = []
    found: list[pl.Series] = []
    for fields_t, sig in sigs.items():
        n = len(fields_t)
        names = [f"_c{i}" for i in range(n + 1)]
        cells = pl.col("text").str.split_exact(",", n).struct.rename_fields(names)
        sub = cand.filter(pl.col("sig") == sig) if len(sigs) > 1 else cand
        rows = None
        uniq: dict[str, pl.Series] = {}
        if frame.height >= by_tail:
            sub = sub.collect(engine="in-memory")
            if sub.height >= by_tail:
                coded = _rows_coded(sub, n)
                rows, uniq = coded if coded is not None else (_rows_by_tail(sub, n), {})
            sub = sub.lazy()
        if rows is None:
            rows = (
                sub.with_columns(cells.alias("_cells"))
                .unnest("_cells")
                .filter(pl.col(f"_c{n - 1}").is_not_null() & pl.col(f"_c{n}").is_null())
                .drop(f"_c{n}")
                .collect(engine="in-memory")
            )
        if rows.height == 0:
            continue
        found.append(rows.get_column(at))
        groups.append((list(fields_t), rows, uniq))
    return groups, found


_CODE = "_k"
"""The columns `_rows_coded` adds: `_k<i>`, the number of each row's cell `_c<i>` among the column's distinct
cells (in order of appearance), by which `_repetitive` and `_distinct_values` read the cells."""


def _rows_coded(sub: pl.DataFrame, n: int) -> tuple[pl.DataFrame, dict[str, pl.Series]] | None:
    """`_data_rows`' rows of one field list of `n` fields (`sub`: its candidate lines) cut by the compiled
    scanner (`parsers._fastscan.csv_cells`: each line cut at every comma, as `str.split_exact` cuts it, its
    cells numbered per column): the rows with their cells' numbers (`_k<i>`), and each numbered column's
    distinct cells (`_c<i>`: its cells in order of appearance, cell `_c<i>` of a row that of its number).
    A column whose first _RAW_PROBE rows hold more distinct cells than half their number (milliseconds,
    power draw: a number would be one more lookup a row in a table out of cache) comes as its cells
    (`_c<i>`, each a slice of its line). None where the scanner is not built. The same rows as splitting
    each line, whose cells the numbers give; the numbered columns are then converted once per distinct
    cell (`_repetitive`, `_distinct_values`) and nothing reads their cells. A batch of seven 6-hour loops
    (40k rows of 22 cells): the cut and numbers ~10 ms, against ~20 for `_rows_by_tail`; the whole parse
    ~8 -> ~6 ms a file."""
    scan = compiled("csv_cells")
    text = sub.get_column("text")
    if scan is None or text.null_count():
        return None
    import numpy as np  # (here: a worker that reads no long CSV loop never imports it)

    m = text.len()
    raw = None
    if m > _RAW_PROBE:
        codes, ok = np.empty(n * _RAW_PROBE, dtype=np.uint32), np.empty(_RAW_PROBE, dtype=np.uint8)
        distinct = scan(text.head(_RAW_PROBE).__arrow_c_stream__(), _RAW_PROBE, n, codes, ok)
        rows_ok = int(ok.sum())
        raw = bytes(len(d) * 2 > rows_ok for d in distinct) if rows_ok else None
    codes, ok = np.empty(n * m, dtype=np.uint32), np.empty(m, dtype=np.uint8)
    lens = np.empty(n * m, dtype=np.uint32) if raw and any(raw) else None
    distinct = scan(text.__arrow_c_stream__(), m, n, codes, ok, *((raw, lens) if lens is not None else ()))
    keep = pl.Series(ok).cast(pl.Boolean)
    rows = sub if keep.all() else sub.filter(keep)
    unnumbered = [i for i in range(n) if raw[i]] if lens is not None else []  # type: ignore[index]
    uniq = {
        f"_c{i}": pl.Series(f"_c{i}", distinct[i], dtype=pl.String) for i in range(n) if i not in unnumbered
    }
    # (a numbered column's codes; an unnumbered one's offsets in the lines, and their lengths)
    cols = [pl.Series(f"{_CODE}{i}", codes[i * m : (i + 1) * m]) for i in range(n)]
    sizes = [pl.Series(lens[i * m : (i + 1) * m]) for i in unnumbered]  # type: ignore[index]
    if rows.height < m:
        cols, sizes = [c.filter(keep) for c in cols], [c.filter(keep) for c in sizes]
    if unnumbered:
        cells = rows.select(
            pl.col("text").str.slice(pl.lit(cols[i]), pl.lit(size)).alias(f"_c{i}")
            for i, size in zip(unnumbered, sizes, strict=True)
        )
        for i in unnumbered:
            cols[i] = cells.get_column(f"_c{i}")
    return rows.hstack(cols), uniq


_RAW_PROBE = 4096
"""Rows whose distinct cells `_rows_coded` counts first, to leave unnumbered the columns of mostly distinct
cells."""


_TAIL_PROBE = 1024
"""Lines `_rows_by_tail` reads first to find the fields of a tail (each field, and the tails: few texts)."""
_TAIL = "_tail_from_"
"""The column `_rows_by_tail` adds, named for the first cell of the tail (`_tail_from_<j>`): each row's tail
(a number), by which the tail's cells are converted once per tail (`_distinct_values`)."""


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
    if n - j < 3:
        return None
    head = text.str.splitn(",", j + 1).struct.unnest()
    tail = head.get_column(f"field_{j}")
    # (the probe's tails as the split of all lines has them, the split being line by line: the same texts as a
    # split of the probe alone, whose cost a loop, which has its tails, saves; a file without few tails pays
    # the split of all lines, then split whole)
    if tail.head(_TAIL_PROBE).n_unique() * 16 > probe.len():
        return None
    distinct = tail.drop_nulls().unique()
    if distinct.len() * 4 > len(tail):
        return None
    cells = distinct.to_frame("t").select(pl.col("t").str.split_exact(",", n - j).struct.unnest())
    # (a line has n cells when it has a tail, and its tail n - j of them)
    ok = cells.get_column(f"field_{n - j - 1}").is_not_null() & cells.get_column(f"field_{n - j}").is_null()
    code = _index_type(tail.cast(pl.Enum(distinct.to_list())).to_physical())
    rows = sub.hstack(
        [
            *(head.get_column(f"field_{i}").alias(f"_c{i}") for i in range(j)),
            *(cells.get_column(f"field_{k}").gather(code).alias(f"_c{j + k}") for k in range(n - j)),
            code.alias(f"{_TAIL}{j}"),
        ]
    )
    if ok.all() and not code.has_nulls():
        return rows  # (every line has its n cells: the filter would keep every row)
    return rows.filter(ok.gather(code).fill_null(False))


def _inventory_long(q: pl.LazyFrame, plan: _Plan, *keep: str) -> pl.DataFrame:
    """The inventory cells of the rows of `q` (`plan.wide`, and the `keep` columns), one row per set cell:
    its `key`, `value` and `_k` (`plan.key_order`)."""
    return (
        q.select(*plan.wide, *keep)
        .unpivot(
            index=[*keep, "line", "host", "header", "ident", "gpu_index", "gpu_bus_id"],
            variable_name="key",
            value_name="value",
        )
        .with_columns(_k=plan.key_order)
        .drop_nulls("value")
        .collect(engine="in-memory", optimizations=_NO_CSE)
    )
