"""nccl-tests output (`all_reduce_perf`, `all_gather_perf`, `alltoall_perf`, ...): FORMATS.md §7.

What comes out (table `comms`, plus `inventory` and `events`):
- record `rank`: one per device line `#  Rank  0 Group  0 Pid 895544 on h100-2 device  0 [0002:00:01] NAME`
  (node = the host the line names, rank, cuda_dev, gpu_bus_id, pid; `[0x00]` = unknown bus id -> null).
- record `nccl_test`: two per size row, `placement` out-of-place then in-place (size_bytes, count, dtype, redop,
  time_us, algbw_gbps, busbw_gbps, wrong). `#wrong` `N/A` -> null; the old `error` column (a max relative
  error such as `1e-06`, not a count) goes to `detail.max_error` and leaves `wrong` null.
- record `nccl_test_run`: one per `# nThread ...` header: detail = its parameters (ngpus, min/max bytes, iters, ...),
  the number of size rows and `concluded` (false: the run printed no 'Avg bus bandwidth': crashed, hung, cut).
- record `nccl_test_summary`: one per `# Avg bus bandwidth` line: value = avg busbw (GB/s), wrong = the
  preceding `Out of bounds values` count.
Every record carries the run's `test` (from `# Collective test starting:`, the JSON or the command line),
`nodes` (comma-separated sorted hosts of the run's device lines) and `nranks` (device lines in the run), so a
file holding several runs over different node sets keeps them apart. A run starts at each `nThread` header.

Columns are mapped by the run's column header (`size count type redop root time algbw busbw #wrong ...`), so
the no-root, `error`, `#bitdiff`, per-iteration and timestamp variants all parse; rows before any header fall
back to a layout chosen by their number of fields. Headers whose `#` was eaten (pasted markdown) parse too.
The one-line `--json` output of nccl-tests PR 318 is read with regexes (a cut line yields its complete sizes);
the `-J <file>` JSON report (version 3: devices, results, summary) is read with `json` (a cut one: its complete
objects, partial).
A collector's ISO time prefix (`kubectl logs --timestamps`) is stripped and kept as the rows' `ts`.

NOTE: NCCL debug lines (`host:pid:tid [d] NCCL INFO ...`) interleaved in the output are counted as
*unrecognized* here: this parser extracts nothing from them (a note says how many there were), and the sniffer
scores low when they dominate the head so the NCCL parser takes such files. A bare `NCCL version X` line is
understood (it gives the NCCL version).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

import polars as pl

from forensics.schema import columns
from parsers._common import _ANY_ENVELOPE, ENVELOPES, format_str, normalize_bus_id, split_envelopes
from parsers._common import json_detail as _json_detail
from parsers._small import FallbackError, account_texts, attempt, json_object, small_texts
from parsers._small import parse_many as small_parse_many
from parsers._sniff import cheap_requirements, has, head_text, holds, required_literals
from parsers.base import FileContext, ParseResult, account, numbered

NAME = "nccl-tests"
DESCRIPTION = (
    "nccl-tests results (all_reduce_perf, all_gather_perf, alltoall_perf, ...): devices, size rows, summary"
)
TABLES = ("comms", "inventory", "events")
FILENAME_HINTS = (
    "*nccl*test*",
    "*_perf*",
    "*all_reduce*",
    "*allreduce*",
    "*alltoall*",
    "*all_gather*",
    "*busbw*",
)
DETECTS = "the '# nThread N nGpus N minBytes' header, the 'size count type' column header, 'Avg bus bandwidth', or nccl-tests JSON"
PRIORITY = 20

# ----------------------------------------------------------------------------- grammar (on the line with the
# launcher envelope, leading blanks and one leading '#' removed)

COLLECTIVES = (
    r"(?:all_reduce|all_gather|alltoallv?|reduce_scatter|sendrecv|broadcast|reduce|gather|scatter|hypercube)"
)
NTHREAD_RE = r"^nThread\s+(?P<nthread>\d+)\s+nGpus\s+(?P<ngpus>\d+)\s+minBytes\s+(?P<min>\d+)\s+maxBytes\s+(?P<max>\d+)"
NTHREAD_FULL_RE = (
    NTHREAD_RE
    + r"(?:\s+step:\s*(?P<step>\S+))?(?:\s+warmup iters:\s*(?P<warmup>\d+))?(?:\s+iters:\s*(?P<iters>\d+))?"
    r"(?:\s+agg iters:\s*(?P<agg>\d+))?(?:\s+validation:\s*(?P<validation>\d+))?(?:\s+graph:\s*(?P<graph>\d+))?"
)
VERSION_RE = r"^nccl-tests version\s+(?P<ver>\S+)(?:\s+\([^)]*\))?(?:\s+nccl-headers=(?P<hdr>\d+))?(?:\s+nccl-library=(?P<lib>\d+))?"
COLL_RE = r"^Collective test (?:starting|concluded):\s*(?:\S*/)?(?:nccl_)?(?P<test>\S+?)(?:_mpi)?\s*$"
DEVICE_RE = (
    r"^Rank\s+(?P<rank>\d+)(?:\s+Group\s+(?P<group>\d+))?\s+Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)\s+"
    r"device\s+(?P<dev>\d+)\s+\[(?P<bus>[^\]]*)\]\s*(?P<name>.*?)\s*$"
)
COLHDR_RE = r"^(?:size\s+count|bytes\s+N)\s+"
PLACEHDR_RE = r"^out-of-place\b"
UNITS_RE = r"^\(B\)\s+\(elements\)"
ROW_RE = r"^\d+\s+\d+\s+[A-Za-z]\w*\s+\S"
OOB_RE = r"^Out of bounds values\s*:\s*(?P<n>\d+)\s*(?P<status>OK|FAILED)?"
AVG_RE = r"^Avg bus bandwidth\s*:\s*(?P<bw>\S+)\s*(?P<status>OK|FAILED)?"
OTHER_RE = (
    r"^(?:Bitwise mismatches?|GPU memory usage|error:|Writing JSON output to|skipping json output|Blocking Enabled"
    r"|Per-Iteration Report|Parallel Init Enabled|Bitwise Repeatability|Using devices\s*$)"
)
CMD_RE = r"(?:^|[\s/=])(?:nccl_)?(?P<test>" + COLLECTIVES + r"_perf)(?:_mpi)?(?:\s|$)"
FAIL_RE = (
    r"^\s*(?:\.\.\s*)?(?:(?P<host>[\w.-]+)(?:\s+pid\s+(?P<pid>\d+))?:\s*)?Test (?:(?P<what>NCCL|CUDA|\w+) )?failure"
    r"\s+(?P<where>\S+)\s*(?P<reason>.*)$"
)
NCCL_VERSION_RE = r"^NCCL version\s+(?P<ver>\d+(?:\.\d+)*)"  # `2.18.5+cuda12.0` -> 2.18.5
JSON_ID = '"nccl-tests structured output"'
NCCL_DEBUG_RE = r"^\s*\S+:\d+:\d+ \[\d+\] NCCL (?:INFO|WARN|TRACE|ABORT)"

# Default column layouts (by number of fields) for rows seen before any column header.
DEFAULT_HEADERS = {
    13: "size count type redop root time algbw busbw #wrong time algbw busbw #wrong",
    12: "size count type redop time algbw busbw #wrong time algbw busbw #wrong",
    11: "size count type time algbw busbw #wrong time algbw busbw #wrong",
}

_SNIFF_STRONG_ALTERNATIVES = (
    r"nThread\s+\d+\s+nGpus\s+\d+",
    r"\bsize\s+count\s+type\s",
    r"Avg bus bandwidth\s*:",
    r"nccl-tests version",
    r"Collective test starting:",
    r"\"nccl-tests structured output\"",
)
_SNIFF_STRONG = re.compile("|".join(_SNIFF_STRONG_ALTERNATIVES))
_SNIFF_STRONG_EACH = tuple(
    (re.compile(a), (required_literals(a),) if "size" not in a else (("size",), ("count",), ("type",)))
    for a in _SNIFF_STRONG_ALTERNATIVES
)
"""The alternatives apart, each searched only where all its literal groups are: `_SNIFF_STRONG` matches
somewhere iff one of them does, and one alternation over a 16 KiB head holding `count` cost ~0.36 ms."""
_SNIFF_DEVICE = re.compile(r"Rank\s+\d+(?:\s+Group\s+\d+)?\s+Pid\s+\d+\s+on\s+\S+\s+device\s+\d+\s+\[")
_SNIFF_ROW = re.compile(
    r"(?m)(?:^|: ?)\s*\d+\s+\d+\s+(?:float|half|double|bfloat16|u?int(?:8|32|64)|fp8\w*)\s+\w+\s"
)
_SNIFF_JSON_FILE = re.compile(r'(?m)^\s*\{[\s\S]*"nccl_version"\s*:\s*\d+')
_SNIFF_NCCL = re.compile(r"(?m)^\S*?\S+:\d+:\d+ \[\d+\] NCCL ")
_SNIFF_NCCL_FAST = re.compile(r"(?m)^\S+:\d+:\d+ \[\d+\] NCCL ")
r"""Counts what `_SNIFF_NCCL` counts (`\S*?\S+` and `\S+` accept the same names; a match is one line, one
per line start) in linear time: `\S*?\S+` is quadratic on a long run of non-blanks."""
_SNIFF_DEVICE_LITS = required_literals(_SNIFF_DEVICE)
_SNIFF_ROW_LITS = ("bfloat16", "double", "float", "fp8", "half", "int8", "int32", "int64")
"""Every `_SNIFF_ROW` match holds one of these (its type word; `required_literals` names `int` for
`u?int(?:8|32|64)`, which most heads hold)."""
_SNIFF_JSON_LITS = required_literals(_SNIFF_JSON_FILE)
# the same gates, each as several requirements tested cheapest first (`parsers._sniff.cheap_requirements`:
# single characters by memchr, longer needles only where their rarest character is)
_SNIFF_STRONG_REQS = tuple((r, cheap_requirements(r)) for r, _need in _SNIFF_STRONG_EACH)
_SNIFF_DEVICE_REQS = cheap_requirements(_SNIFF_DEVICE)
_SNIFF_ROW_HINTS = tuple(
    re.compile(p)
    for p in (
        r"f(?:loat(?:16)?|p8\w*)\s+\w+\s",  # ('float' and 'fp8' in one scan for their 'f')
        r"half\s+\w+\s",
        r"double\s+\w+\s",
        r"int(?:8|32|64)\s+\w+\s",
    )
)
"""Every `_SNIFF_ROW` match holds one of these (its type word, 'bfloat16' and 'uint8' included, and the blanks
and word after it): each opens with a literal, which the regex engine finds by a fast scan."""
_SNIFF_ROW_HINT_LITS = (None, "half", "double", None)
"""A literal each of `_SNIFF_ROW_HINTS` needs (the hint opens with it), or None: `lit in text` is checked
before the hint's search. A scan with `in` costs ~40 % of the instructions of the regex engine's over a 16 KiB
head (~33-41 K against ~83 K); 'float'/'fp8' (two scans) and 'int' (in most heads) would not pay."""
_SNIFF_JSON_REQS = cheap_requirements(_SNIFF_JSON_FILE)


def _two(rx: re.Pattern[str], text: str) -> int:
    """The number of `rx.findall(text)` matches, counted up to 2."""
    n = 0
    for _ in rx.finditer(text):
        n += 1
        if n == 2:
            break
    return n


def sniff(head: bytes, name: str) -> float:
    """Score nccl-tests markers in the head; low when NCCL debug lines dominate (the NCCL parser's file)."""
    text = head_text(head)
    # each regex runs only when a literal it needs is in the head (parsers._sniff): same scores, and the
    # multi-line ones (`^\s*` spanning blank lines, `[\s\S]*`) never run over text they cannot match
    if '"' in text and ('"minimum_bytes"' in text or '"results"' in text) and holds(_SNIFF_JSON_REQS, text):
        if _SNIFF_JSON_FILE.search(text) and any(ln.strip() and not ln.startswith("#SOURCE") for ln in text.splitlines()):
            return 0.95
    strong = any(holds(reqs, text) and r.search(text) for r, reqs in _SNIFF_STRONG_REQS)
    # (the score only asks whether there are none, one or more device lines and rows, and not at all when a
    # strong marker is there or there are two device lines: counting stops where the score is settled)
    devices = rows = 0
    if not strong:
        devices = _two(_SNIFF_DEVICE, text) if holds(_SNIFF_DEVICE_REQS, text) else 0
        if devices < 2:
            hinted = any(
                (lit is None or has(text, lit)) and h.search(text)
                for h, lit in zip(_SNIFF_ROW_HINTS, _SNIFF_ROW_HINT_LITS, strict=True)
            )
            rows = _two(_SNIFF_ROW, text) if hinted else 0
    if not (strong or devices or rows):
        return 0.0
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#SOURCE")]
    if not lines:
        return 0.0
    nccl_share = (len(_SNIFF_NCCL_FAST.findall(text)) if "] NCCL " in text else 0) / len(lines)
    if strong or devices >= 2 or rows >= 2:
        return 0.95 if nccl_share < 0.5 else 0.45
    if devices == 1 or rows == 1:
        return 0.6 if nccl_share < 0.5 else 0.2
    return 0.0


# ----------------------------------------------------------------------------- column layouts


COLLECTOR_TIME_RE = r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)):? "


def collector_time(text: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """Split a collector's ISO time prefix (`kubectl logs --timestamps`, fluent-bit: `2025-06-14T10:00:00.123Z `).

    Returns (the line without the prefix, the prefix as UTC time or null). Only prefixes with a zone are taken.
    """
    raw = text.str.extract(COLLECTOR_TIME_RE, 1)
    norm = raw.str.replace(",", ".").str.replace(r"Z$", "+00:00").str.replace(r"([+-]\d\d)(\d\d)$", "$1:$2")
    ts = norm.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%:z", strict=False, time_unit="us").dt.convert_time_zone(
        "UTC"
    )
    rest = pl.when(raw.is_not_null()).then(text.str.replace(COLLECTOR_TIME_RE, "")).otherwise(text)
    return rest, ts


def json_detail(**fields: pl.Expr) -> pl.Expr:
    """JSON object of the non-null fields (null when all are null)."""
    js = _json_detail(**fields).str.replace_all(r'"[^"]+":null,?', "").str.replace(r",\}$", "}")
    return pl.when(js != "{}").then(js)


# nccl-tests 1.x printed `bytes N type op ... res` (res = max error, like the later `error` column)
_HEADER_ALIASES = {"bytes": "size", "N": "count", "op": "redop"}


def _layout(header: str) -> dict[str, int | str | None]:
    """Map a column header (space-joined tokens) to token indices of a size row."""
    toks = [_HEADER_ALIASES.get(t, t) for t in header.split()]
    out: dict[str, int | str | None] = {"key": header}
    for name in ("size", "count", "type", "redop", "root"):
        out[f"i_{name}"] = toks.index(name) if name in toks else None
    times = [i for i, t in enumerate(toks) if t in ("time", "cputime")]
    for place, pre in zip(times[:2], ("o", "p"), strict=False):
        out[f"i_{pre}time"] = place
        # the three columns after time are algbw, busbw and #wrong/error
        for off, col in ((1, "algbw"), (2, "busbw"), (3, "wrong")):
            j = place + off
            out[f"i_{pre}{col}"] = j if j < len(toks) else None
        w = toks[place + 3] if place + 3 < len(toks) else None
        out[f"{pre}_errkind"] = "error" if w in ("error", "res") else "wrong"
    for pre in ("o", "p"):
        for col in ("time", "algbw", "busbw", "wrong"):
            out.setdefault(f"i_{pre}{col}", None)
        out.setdefault(f"{pre}_errkind", "wrong")
    idx = [v for k, v in out.items() if k.startswith("i_") and isinstance(v, int)]
    out["need"] = max(idx) + 1 if idx else 99
    return out


_LAYOUT_SCHEMA = {
    "key": pl.String,
    **{f"i_{n}": pl.Int64 for n in ("size", "count", "type", "redop", "root")},
    **{f"i_{p}{c}": pl.Int64 for p in ("o", "p") for c in ("time", "algbw", "busbw", "wrong")},
    "o_errkind": pl.String,
    "p_errkind": pl.String,
    "need": pl.Int64,
}


def _layouts(keys: list[str]) -> pl.DataFrame:
    return pl.DataFrame([_layout(k) for k in keys], schema=_LAYOUT_SCHEMA)


def _nccl_code_version(code: pl.Expr) -> pl.Expr:
    """NCCL_VERSION_CODE (22203 -> 2.22.3; pre-2.9 codes 2708 -> 2.7.8) as a dotted string."""
    c = code.cast(pl.Int64, strict=False)
    new = format_str("{}.{}.{}", c // 10000, (c // 100) % 100, c % 100)
    old = format_str("{}.{}.{}", c // 1000, (c // 100) % 10, c % 100)
    return pl.when(c >= 10000).then(new).when(c.is_not_null()).then(old)


# ----------------------------------------------------------------------------- parse


def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """Parse nccl-tests text (and one-line JSON) output into comms rank/result/summary rows."""
    texts = small_texts(lines, SMALL_LINES)
    small = _parse_small(texts, ctx) if texts is not None else None
    return small if small is not None else _parse_frames(lines, ctx)


def _parse_frames(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """`parse` with polars expressions over the column of lines (any input)."""
    frame = numbered(lines, ctx)
    as_json = _json_file(frame, ctx)
    if as_json is not None:
        return as_json
    no_time, line_ts = collector_time(pl.col("text"))
    frame = frame.with_columns(ts=line_ts, _rest=no_time)
    env = split_envelopes(pl.col("_rest"))
    f = frame.with_columns(body=env["rest"].str.strip_chars_end(), env_host=env["host"]).with_columns(
        h=pl.col("body").str.strip_chars_start().str.replace(r"^#\s*", "")
    )
    h = pl.col("h")
    f = f.with_columns(
        k_nthread=h.str.contains(NTHREAD_RE),
        k_version=h.str.contains(VERSION_RE),
        k_coll=h.str.contains(COLL_RE),
        k_device=h.str.contains(DEVICE_RE),
        k_colhdr=h.str.contains(COLHDR_RE),
        k_row=h.str.contains(ROW_RE),
        k_oob=h.str.contains(OOB_RE),
        k_avg=h.str.contains(AVG_RE),
        k_json=pl.col("body").str.contains(JSON_ID, literal=True),
        k_fail=pl.col("body").str.contains("failure", literal=True) & pl.col("body").str.contains(FAIL_RE),
        k_ncclver=h.str.contains(NCCL_VERSION_RE),
        k_minor=h.str.contains(PLACEHDR_RE)
        | h.str.contains(UNITS_RE)
        | h.str.contains(OTHER_RE)
        | pl.col("body").str.contains(r"^\s*#?\s*$"),
        k_nccldebug=pl.col("body").str.contains(NCCL_DEBUG_RE),
    )
    f = f.with_columns(
        k_cmd=~pl.col("k_nccldebug")
        & ~pl.col("k_coll")
        & ~pl.col("k_json")
        & pl.col("body").str.contains("_perf", literal=True)
        & pl.col("body").str.contains(CMD_RE),
        run=(pl.col("k_nthread") | pl.col("k_json")).cum_sum(),
    )
    # test name, NCCL version and column header carried forward
    test_here = (
        pl.when(pl.col("k_coll"))
        .then(h.str.extract(COLL_RE, 1))
        .when(pl.col("k_cmd"))
        .then(pl.col("body").str.extract(CMD_RE, 1))
    )
    ver_here = (
        pl.when(pl.col("k_version"))
        .then(_nccl_code_version(h.str.extract(VERSION_RE, 3)))
        .when(pl.col("k_ncclver"))
        .then(h.str.extract(NCCL_VERSION_RE, 1))
        .when(pl.col("k_json"))
        .then(pl.col("body").str.extract(r'"version"\s*:\s*"([^"]+)"', 1))
    )
    hdr_here = pl.when(pl.col("k_colhdr")).then(h.str.extract_all(r"\S+").list.join(" "))
    f = f.with_columns(
        test=test_here.forward_fill(),
        nccl_version=ver_here.forward_fill(),
        header=hdr_here.forward_fill().over("run"),
    )

    # ---- device lines -> rank records
    dev = (
        f.filter(pl.col("k_device"))
        .with_columns(d=h.str.extract_groups(DEVICE_RE))
        .unnest("d")
        .with_columns(host=pl.col("host").str.split(".").list.first())
    )
    runs = dev.group_by("run").agg(
        nodes=pl.col("host").unique().sort().str.join(","),
        nranks=pl.len().cast(pl.Int32),
        printer=pl.col("host").sort_by(pl.col("rank").cast(pl.Int64, strict=False)).first(),
        dup_ranks=pl.col("rank").is_duplicated().sum(),
    )
    bus_raw = pl.col("bus").str.strip_chars()
    bus_norm = (
        pl.when(bus_raw.str.contains(r"(?i)^0x0*$"))
        .then(pl.lit(None, dtype=pl.String))
        .when(bus_raw.str.contains(r"(?i)^0x[0-9a-f]{1,2}$"))
        .then(normalize_bus_id(format_str("{}:00", bus_raw.str.slice(2))))
        .otherwise(normalize_bus_id(bus_raw))
    )
    dev = dev.join(runs, on="run", how="left").with_columns(bus_id=bus_norm)
    rank_rows = dev.select(
        record=pl.lit("rank"),
        ts="ts",
        node=pl.col("host"),
        rank=pl.col("rank").cast(pl.Int32, strict=False),
        nranks="nranks",
        cuda_dev=pl.col("dev").cast(pl.Int32, strict=False),
        gpu_bus_id="bus_id",
        pid=pl.col("pid").cast(pl.Int64, strict=False),
        nccl_version="nccl_version",
        test="test",
        nodes="nodes",
        detail=json_detail(
            group=pl.col("group").cast(pl.Int64, strict=False),
            gpu_name=pl.col("name"),
            bus_raw=pl.col("bus"),
            run=pl.col("run"),
        ),
        file=pl.lit(ctx.path),
        line="line",
    )
    inventory = (
        dev.filter(pl.col("name").str.len_chars() > 0)
        .select(
            node=pl.col("host"),
            component=pl.lit("gpu"),
            gpu_bus_id="bus_id",
            attribute=pl.lit("name"),
            value="name",
            source=pl.lit(NAME),
            file=pl.lit(ctx.path),
            line="line",
        )
        .unique(subset=["node", "gpu_bus_id", "value"], keep="first", maintain_order=True)
    )

    # ---- size rows, mapped by the run's column header (or a default layout by field count)
    rows = f.filter(pl.col("k_row")).with_columns(tok=h.str.extract_all(r"\S+"))
    rows = rows.with_columns(ntok=pl.col("tok").list.len())
    keys = rows.get_column("header").drop_nulls().unique().to_list()
    layouts = _layouts(sorted(set(keys) | set(DEFAULT_HEADERS.values())))
    default_key = pl.col("ntok").replace_strict(DEFAULT_HEADERS, default=None, return_dtype=pl.String)
    rows = rows.join(layouts, left_on="header", right_on="key", how="left")
    usable = pl.col("need").is_not_null() & (pl.col("ntok") >= pl.col("need"))
    rows_hdr = rows.filter(usable)
    rows_def = (
        rows.filter(~usable)
        .select(pl.exclude(list(_LAYOUT_SCHEMA)))
        .with_columns(dkey=default_key)
        .join(layouts, left_on="dkey", right_on="key", how="inner")
        .drop("dkey")
        .filter(pl.col("ntok") >= pl.col("need"))
    )
    cols = rows_hdr.select(pl.exclude(list(_LAYOUT_SCHEMA))).columns + [
        c for c in _LAYOUT_SCHEMA if c != "key"
    ]
    rows = pl.concat([rows_hdr.select(cols), rows_def.select(cols)]).sort("line")

    def tok(i: str) -> pl.Expr:
        return pl.col("tok").list.get(pl.col(i), null_on_oob=True)

    rows = rows.with_columns(
        size_bytes=tok("i_size").cast(pl.Int64, strict=False),
        count=tok("i_count").cast(pl.Int64, strict=False),
        dtype=tok("i_type"),
        redop=tok("i_redop"),
        root=tok("i_root"),
    ).filter(pl.col("size_bytes").is_not_null() & pl.col("count").is_not_null())
    parsed_row_lines = rows.select("line")
    f = f.join(parsed_row_lines.with_columns(ok_row_pre=pl.lit(1)), on="line", how="left").with_columns(
        pl.col("ok_row_pre").fill_null(0)
    )
    rows = rows.join(runs, on="run", how="left")
    placed = []
    for pre, placement in (("o", "out-of-place"), ("p", "in-place")):
        wtok = tok(f"i_{pre}wrong")
        wnum = wtok.cast(pl.Float64, strict=False)
        is_err = pl.col(f"{pre}_errkind") == "error"
        wrong = pl.when(~is_err & (wnum == wnum.floor())).then(wnum.cast(pl.Int64, strict=False))
        placed.append(
            rows.filter(pl.col(f"i_{pre}time").is_not_null()).select(
                record=pl.lit("nccl_test"),
                ts="ts",
                node=pl.coalesce("printer", pl.lit(ctx.node)),
                nranks="nranks",
                nccl_version="nccl_version",
                test="test",
                size_bytes="size_bytes",
                count="count",
                dtype="dtype",
                redop="redop",
                placement=pl.lit(placement),
                time_us=tok(f"i_{pre}time").cast(pl.Float64, strict=False),
                algbw_gbps=tok(f"i_{pre}algbw").cast(pl.Float64, strict=False),
                busbw_gbps=tok(f"i_{pre}busbw").cast(pl.Float64, strict=False),
                wrong=wrong,
                nodes="nodes",
                detail=json_detail(
                    root=pl.col("root").cast(pl.Int64, strict=False),
                    max_error=pl.when(is_err).then(wtok),
                    run=pl.col("run"),
                ),
                file=pl.lit(ctx.path),
                line="line",
            )
        )
    result_rows = pl.concat(placed)

    # ---- summaries: 'Avg bus bandwidth' with the run's preceding 'Out of bounds values'
    summ = f.filter(pl.col("k_oob") | pl.col("k_avg")).with_columns(
        oob=pl.when(pl.col("k_oob")).then(h.str.extract(OOB_RE, 1).cast(pl.Int64, strict=False)),
        oob_status=pl.when(pl.col("k_oob")).then(h.str.extract(OOB_RE, 2)),
    )
    summ = summ.with_columns(
        oob=pl.col("oob").forward_fill().over("run"),
        oob_status=pl.col("oob_status").forward_fill().over("run"),
    )
    summ = summ.join(runs, on="run", how="left")
    summary_rows = summ.filter(pl.col("k_avg")).select(
        record=pl.lit("nccl_test_summary"),
        ts="ts",
        node=pl.coalesce("printer", pl.lit(ctx.node)),
        nranks="nranks",
        nccl_version="nccl_version",
        test="test",
        wrong="oob",
        nodes="nodes",
        counter=pl.lit("avg_busbw_gbps"),
        value=h.str.extract(AVG_RE, 1).cast(pl.Float64, strict=False),
        detail=json_detail(
            out_of_bounds=pl.col("oob_status"), check=h.str.extract(AVG_RE, 2), run=pl.col("run")
        ),
        file=pl.lit(ctx.path),
        line="line",
    )

    # ---- one-line JSON output (nccl-tests PR 318)
    json_rows, json_cut = _json_rows(f.filter(pl.col("k_json")), runs, ctx)

    # ---- one record per run header: its parameters, and whether the run concluded (an 'Avg bus bandwidth' line)
    concluded = f.group_by("run").agg(concluded=pl.col("k_avg").any(), sizes=pl.col("ok_row_pre").sum())
    hdr = (
        f.filter(pl.col("k_nthread"))
        .with_columns(g=h.str.extract_groups(NTHREAD_FULL_RE))
        .unnest("g")
        .join(runs, on="run", how="left")
        .join(concluded, on="run", how="left")
    )
    run_rows = hdr.select(
        record=pl.lit("nccl_test_run"),
        ts="ts",
        node=pl.coalesce("printer", pl.lit(ctx.node)),
        nranks="nranks",
        nccl_version="nccl_version",
        test="test",
        nodes="nodes",
        detail=json_detail(
            run=pl.col("run"),
            nthread=pl.col("nthread").cast(pl.Int64, strict=False),
            ngpus=pl.col("ngpus").cast(pl.Int64, strict=False),
            min_bytes=pl.col("min").cast(pl.Int64, strict=False),
            max_bytes=pl.col("max").cast(pl.Int64, strict=False),
            step=pl.col("step"),
            warmup_iters=pl.col("warmup").cast(pl.Int64, strict=False),
            iters=pl.col("iters").cast(pl.Int64, strict=False),
            agg_iters=pl.col("agg").cast(pl.Int64, strict=False),
            validation=pl.col("validation").cast(pl.Int64, strict=False),
            graph=pl.col("graph").cast(pl.Int64, strict=False),
            size_rows=pl.col("sizes").cast(pl.Int64, strict=False),
            concluded=pl.col("concluded"),
        ),
        file=pl.lit(ctx.path),
        line="line",
    )

    comms = pl.concat(
        [run_rows, rank_rows, result_rows, summary_rows, json_rows], how="diagonal_relaxed"
    ).sort("line", maintain_order=True)

    # ---- events: test failures, wrong values, duplicate ranks (mis-launched test)
    fails = f.filter(pl.col("k_fail")).with_columns(g=pl.col("body").str.extract_groups(FAIL_RE)).unnest("g")
    ev_fail = fails.select(
        ts="ts",
        ts_quality=pl.when(pl.col("ts").is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("none")),
        node=pl.coalesce(pl.col("host"), pl.col("env_host"), pl.lit(ctx.node)).str.split(".").list.first(),
        source=pl.lit(NAME),
        kind=pl.lit("nccl_test_failure"),
        code=pl.col("what"),
        severity=pl.lit("high"),
        message=pl.col("text"),
        detail=json_detail(
            pid=pl.col("pid").cast(pl.Int64, strict=False),
            where=pl.col("where"),
            reason=pl.col("reason").str.strip_chars("' ").replace("", None),
        ),
        file=pl.lit(ctx.path),
        line="line",
    )
    bad = summ.filter(pl.col("k_oob") & (pl.col("oob") > 0)).select(
        ts="ts",
        ts_quality=pl.when(pl.col("ts").is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("none")),
        node=pl.coalesce("printer", pl.lit(ctx.node)),
        source=pl.lit(NAME),
        kind=pl.lit("nccl_test_wrong_values"),
        code=pl.col("oob").cast(pl.String),
        severity=pl.lit("high"),
        message=pl.col("text"),
        detail=json_detail(test=pl.col("test"), nodes=pl.col("nodes")),
        file=pl.lit(ctx.path),
        line="line",
    )
    dup = (
        dev.filter(pl.col("rank").is_duplicated().over("run"))
        .group_by("run")
        .agg(pl.col("line").min(), pl.col("text").first(), pl.col("host").first(), pl.len().alias("n"))
        .select(
            ts_quality=pl.lit("none"),
            node=pl.col("host"),
            source=pl.lit(NAME),
            kind=pl.lit("nccl_test_duplicate_rank"),
            severity=pl.lit("medium"),
            message=pl.col("text"),
            detail=json_detail(lines_with_duplicate_rank=pl.col("n")),
            file=pl.lit(ctx.path),
            line="line",
        )
    )
    events = pl.concat([ev_fail, bad, dup], how="diagonal_relaxed").sort("line")

    # ---- accounting
    row_ok = f.select("line").join(parsed_row_lines.with_columns(ok_row=pl.lit(True)), on="line", how="left")
    f = f.with_columns(ok_row=row_ok.get_column("ok_row").fill_null(False))
    understood = (
        pl.col("k_nthread")
        | pl.col("k_version")
        | pl.col("k_coll")
        | pl.col("k_device")
        | pl.col("k_colhdr")
        | pl.col("ok_row")
        | pl.col("k_oob")
        | pl.col("k_avg")
        | pl.col("k_json")
        | pl.col("k_fail")
        | pl.col("k_ncclver")
        | pl.col("k_minor")
        | pl.col("k_cmd")
    ) & ~pl.col("k_nccldebug")
    parsed, unrecognized, examples = account(f.select("line", "text", understood.alias("ok")), pl.col("ok"))

    notes = []
    n_debug = int(f.get_column("k_nccldebug").sum())
    if n_debug:
        notes.append(f"{n_debug} NCCL debug line(s) left to the NCCL parser (counted unrecognized here)")
    partial = json_cut or _ended_early(f)
    hosts = dev.get_column("host").unique()
    return ParseResult(
        tables={"comms": comms, "inventory": inventory, "events": events},
        parsed=parsed,
        unrecognized=unrecognized,
        unrecognized_examples=examples,
        notes=notes,
        partial=partial,
        node=hosts[0] if len(hosts) == 1 else None,
    )


def _ended_early(f: pl.DataFrame) -> bool:
    """True when the last run printed a column header or rows but no 'Avg bus bandwidth' line, or the last
    non-blank line is a cut size row (the file ended before the test concluded)."""
    last = f.filter(pl.col("text").str.strip_chars().str.len_bytes() > 0).tail(1)
    if (
        last.height
        and bool(last.get_column("h").str.contains(r"^\d+\s+\d+").item())
        and not bool(last.get_column("ok_row").item())
    ):
        return True
    if not f.height:
        return False
    last_run = f.get_column("run").max()
    tail = f.filter(pl.col("run") == last_run)
    started = bool(
        (
            tail.get_column("k_nthread")
            | tail.get_column("k_device")
            | tail.get_column("k_colhdr")
            | tail.get_column("ok_row")
        ).any()
    )
    return started and not bool(tail.get_column("k_avg").any())


_JSON_FIELDS = ("count", "type", "redop", "root", "oop_time", "oop_algbw", "oop_busbw", "oop_error",
                "ip_time", "ip_algbw", "ip_busbw", "ip_error")  # fmt: skip


def _json_rows(js: pl.DataFrame, runs: pl.DataFrame, ctx: FileContext) -> tuple[pl.DataFrame, bool]:
    """Rows of the one-line `{"identifier": "nccl-tests structured output", ..., "benchmark": [...]}` output."""
    if js.height == 0:
        return pl.DataFrame(), False
    cut = bool((~js.get_column("body").str.strip_chars().str.ends_with("}")).any())
    ent = (
        js.select(
            "line",
            "run",
            "test",
            "nccl_version",
            "ts",
            e=pl.col("body").str.extract_all(r'"\d+"\s*:\s*\{[^{}]*\}'),
        )
        .explode("e")
        .drop_nulls("e")
        .with_columns(size_bytes=pl.col("e").str.extract(r'^"(\d+)"', 1).cast(pl.Int64, strict=False))
    )
    ent = ent.with_columns(
        **{k: pl.col("e").str.extract(rf'"{k}"\s*:\s*"?([^",}}]*)"?', 1) for k in _JSON_FIELDS}
    ).join(runs, on="run", how="left")
    out = []
    for pre, placement in (("oop", "out-of-place"), ("ip", "in-place")):
        err = pl.col(f"{pre}_error").cast(pl.Float64, strict=False)
        out.append(
            ent.select(
                record=pl.lit("nccl_test"),
                ts="ts",
                node=pl.coalesce("printer", pl.lit(ctx.node)),
                nranks="nranks",
                nccl_version="nccl_version",
                test="test",
                size_bytes="size_bytes",
                count=pl.col("count").cast(pl.Int64, strict=False),
                dtype="type",
                redop="redop",
                placement=pl.lit(placement),
                time_us=pl.col(f"{pre}_time").cast(pl.Float64, strict=False),
                algbw_gbps=pl.col(f"{pre}_algbw").cast(pl.Float64, strict=False),
                busbw_gbps=pl.col(f"{pre}_busbw").cast(pl.Float64, strict=False),
                wrong=pl.when(err == err.floor()).then(err.cast(pl.Int64, strict=False)),
                nodes="nodes",
                detail=json_detail(root=pl.col("root").cast(pl.Int64, strict=False), format=pl.lit("json")),
                file=pl.lit(ctx.path),
                line="line",
            )
        )
    return pl.concat(out), cut


# ----------------------------------------------------------------------------- JSON report file (`-J file`)


def _json_file(frame: pl.DataFrame, ctx: FileContext) -> ParseResult | None:
    """Parse the JSON report nccl-tests writes with `-J <file>` (JSON_FILE_VERSION 3), or None if not one.

    The document is one line (or pretty-printed over many): `{"version":3,"start_time":..,"args":[..],
    "nccl_version":22703,"config":{..,"devices":[{rank,group,pid,hostname,device,device_hex,device_info}]},
    "results":[{size,count,type,redop,root,"out_of_place":{time,alg_bw,bus_bw,nwrong},"in_place":{..}}],
    "out_of_bounds":{count,okay},"average_bus_bandwidth":{bandwidth,okay},...}`. Rows point at the first line.
    A cut document yields its complete result objects and is marked partial.
    """
    text = frame.get_column("text")
    nonblank = frame.filter(text.str.strip_chars().str.len_bytes() > 0)
    # the document starts at the first line opening with '{' (a prompt, `cat` line or note may precede it)
    starts = (
        nonblank.with_row_index("i")
        .filter(pl.col("text").str.strip_chars_start().str.starts_with("{"))
        .head(1)
    )
    if starts.height == 0 or int(starts.item(0, "i")) > 5:
        return None
    before = nonblank.head(int(starts.item(0, "i")))
    nonblank = nonblank.slice(int(starts.item(0, "i")))
    doc_text = "\n".join(nonblank.get_column("text").to_list())
    if '"results"' not in doc_text or '"nccl_version"' not in doc_text:
        return None
    first = int(nonblank.item(0, "line"))
    partial = False
    try:
        doc: dict[str, Any] = json.loads(doc_text)
    except ValueError:
        partial = True
        doc = {
            "results": _raw_objects(doc_text, "size"),
            "config": {"devices": _raw_objects(doc_text, "rank")},
        }
        code = re.search(r'"nccl_version"\s*:\s*(\d+)', doc_text)
        doc["nccl_version"] = int(code.group(1)) if code else None
        args = re.search(r'"args"\s*:\s*\[\s*"([^"]*)"', doc_text)
        doc["args"] = [args.group(1)] if args else []
    if not isinstance(doc, dict):
        return None
    config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    devs = config.get("devices")
    devices = [d for d in devs if isinstance(d, dict)] if isinstance(devs, list) else []
    args = doc.get("args") if isinstance(doc.get("args"), list) else []
    prog = str(args[0]).replace("\\/", "/").rsplit("/", 1)[-1] if args else ""
    test_m = re.search(r"(?:nccl_)?(" + COLLECTIVES + r"_perf)", prog)
    test = test_m.group(1) if test_m else None
    code = doc.get("nccl_version")
    version = None
    if isinstance(code, int):
        version = (
            f"{code // 10000}.{code // 100 % 100}.{code % 100}"
            if code >= 10000
            else f"{code // 1000}.{code // 100 % 10}.{code % 100}"
        )
    hosts = sorted({str(d.get("hostname", "")).split(".")[0] for d in devices if d.get("hostname")})
    nodes = ",".join(hosts) or None
    printer = next(
        (
            str(d["hostname"]).split(".")[0]
            for d in sorted(devices, key=lambda d: _int(d.get("rank")) or 0)
            if d.get("hostname")
        ),
        ctx.node,
    )
    base = {
        "nccl_version": version,
        "test": test,
        "nodes": nodes,
        "nranks": min(len(devices), 2**31 - 1) or None,
        "file": ctx.path,
        "line": first,
    }
    recs: list[dict[str, Any]] = []
    for d in devices:
        recs.append({**base, "record": "rank", "node": str(d.get("hostname") or ctx.node).split(".")[0], "rank": _int(d.get("rank"), 31),
                     "cuda_dev": _int(d.get("device"), 31), "pid": _int(d.get("pid")), "bus_raw": _str(d.get("device_hex")),
                     "detail": _dumps({"group": _int(d.get("group")), "gpu_name": _str(d.get("device_info")), "format": "json"})})  # fmt: skip
    results = doc.get("results")
    for r in results if isinstance(results, list) else []:
        if not isinstance(r, dict):
            continue
        for key, placement in (("out_of_place", "out-of-place"), ("in_place", "in-place")):
            o = r.get(key)
            if not isinstance(o, dict):
                continue
            wrong = o.get("nwrong")
            recs.append({**base, "record": "nccl_test", "node": printer, "size_bytes": _int(r.get("size")), "count": _int(r.get("count")),
                         "dtype": _str(r.get("type")), "redop": _str(r.get("redop")), "placement": placement,
                         "time_us": _num(o.get("time", o.get("cpu_time"))), "algbw_gbps": _num(o.get("alg_bw")),
                         "busbw_gbps": _num(o.get("bus_bw")),
                         "wrong": _whole(wrong),
                         "detail": _dumps({"root": _int(r.get("root")), "format": "json"})})  # fmt: skip
    avg = doc.get("average_bus_bandwidth")
    if isinstance(avg, dict):
        oob = doc.get("out_of_bounds") if isinstance(doc.get("out_of_bounds"), dict) else {}
        recs.append({**base, "record": "nccl_test_summary", "node": printer, "counter": "avg_busbw_gbps",
                     "value": _num(avg.get("bandwidth")), "wrong": _int(oob.get("count")),
                     "detail": _dumps({"check": _str(avg.get("okay")), "format": "json"})})  # fmt: skip
    schema = {"record": pl.String, "node": pl.String, "rank": pl.Int32, "nranks": pl.Int32, "cuda_dev": pl.Int32,
              "pid": pl.Int64, "bus_raw": pl.String, "nccl_version": pl.String, "test": pl.String, "size_bytes": pl.Int64,
              "count": pl.Int64, "dtype": pl.String, "redop": pl.String, "placement": pl.String, "time_us": pl.Float64,
              "algbw_gbps": pl.Float64, "busbw_gbps": pl.Float64, "wrong": pl.Int64, "nodes": pl.String,
              "counter": pl.String, "value": pl.Float64, "detail": pl.String, "file": pl.String, "line": pl.Int64}  # fmt: skip
    df = pl.DataFrame([{k: rec.get(k) for k in schema} for rec in recs], schema=schema)
    bus = pl.col("bus_raw").str.strip_chars()
    comms = df.with_columns(
        gpu_bus_id=pl.when(bus.str.contains(r"(?i)^0x0*$"))
        .then(pl.lit(None, dtype=pl.String))
        .when(bus.str.contains(r"(?i)^0x[0-9a-f]{1,2}$"))
        .then(normalize_bus_id(format_str("{}:00", bus.str.slice(2))))
        .otherwise(normalize_bus_id(bus))
    ).drop("bus_raw")
    cmd = before.get_column("text").str.contains(CMD_RE) | before.get_column("text").str.contains(
        r"^\s*\$?\s*cat\s"
    )
    examples = [(int(n), str(t)[:500]) for n, t in before.filter(~cmd).select("line", "text").iter_rows()]
    return ParseResult(
        tables={"comms": comms},
        parsed=nonblank.height + int(cmd.sum()),
        unrecognized=len(examples),
        unrecognized_examples=examples,
        partial=partial,
        node=hosts[0] if len(hosts) == 1 else None,
    )


def _raw_objects(text: str, key: str) -> list[Any]:
    """Decode every complete JSON object whose first key is `key` (used on a cut document)."""
    dec = json.JSONDecoder()
    out = []
    for m in re.finditer(r'\{\s*"' + key + '"', text):
        try:
            out.append(dec.raw_decode(text, m.start())[0])
        except ValueError:
            break
    return out


def _int(v: Any, bits: int = 63) -> int | None:
    """An integer of at most `bits` bits (else None) from a JSON value."""
    try:
        i = int(str(v).strip()) if v is not None and not isinstance(v, bool) else None
    except ValueError:
        return None
    return i if i is not None and -(2**bits) <= i < 2**bits else None


def _str(v: Any) -> str | None:
    return None if v is None or isinstance(v, (dict, list)) else str(v)


def _num(v: Any) -> float | None:
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return None
    try:
        return float(v)
    except OverflowError:  # (an integer beyond any float)
        return None


def _whole(v: Any) -> int | None:
    """A JSON number that is a whole number Int64 holds (else None: a corrupt 2**70 loses that value only)."""
    if not isinstance(v, (int, float)):
        return None
    try:
        if not float(v).is_integer():
            return None
    except OverflowError:
        return None
    i = int(v)
    return i if -(2**63) <= i < 2**63 else None


def _dumps(d: dict[str, Any]) -> str | None:
    kept = {k: v for k, v in d.items() if v is not None}
    return json.dumps(kept, separators=(",", ":")) if kept else None


# ----------------------------------------------------------------------------- small files: plain Python

# A result file of a few dozen lines costs ~70 eager polars operations and the compiles of ~25 regexes (polars
# keeps ~32 per thread; the other formats' files evict these) on the vectorised path: 10-15 ms whatever its
# size. `_parse_small` reads the plain text form line by line with Python's `re` (compiled once) and gives the
# same ParseResult. Anything it does not promise to reproduce exactly returns None and goes the vectorised
# way: a collector time prefix, a launcher prefix, JSON (one-line or a report), `Test failure` lines,
# non-ASCII or control characters, numbers polars would read differently (NaN/inf words), strings the JSON
# detail would escape. ASCII only: there Python's and the regex crate's `\s`, `\d`, `\w`, `\b`, case folding
# and `str.strip` / `strip_chars` agree (no \x1c-\x1f, \v, \f).

SMALL_LINES = 1500
"""At most this many lines (and 256 KiB) take the plain-Python path (about where the two cost the same)."""

_RX = {
    k: re.compile(v)
    for k, v in {
        "nthread": NTHREAD_RE, "version": VERSION_RE, "coll": COLL_RE, "device": DEVICE_RE,
        "colhdr": COLHDR_RE, "row": ROW_RE, "oob": OOB_RE, "avg": AVG_RE, "ncclver": NCCL_VERSION_RE,
        "place": PLACEHDR_RE, "units": UNITS_RE, "other": OTHER_RE, "blankish": r"^\s*#?\s*$",
        "debug": NCCL_DEBUG_RE, "cmd": CMD_RE, "full": NTHREAD_FULL_RE, "cut_row": r"^\d+\s+\d+",
    }.items()
}  # fmt: skip
_OTHER_FIRST = frozenset("BGeWsPU")
"""The characters OTHER_RE's alternatives open with."""
_ANY_ENV_LINE = re.compile(_ANY_ENVELOPE)
_ANY_ENV_TEXT = re.compile(_ANY_ENVELOPE, re.MULTILINE)  # no match in the text: no line opens with one
_ENVS = tuple(re.compile(p.replace("(?<", "(?P<")) for _, p in ENVELOPES)


def _strip_envelopes(text: str) -> str:
    """`split_envelopes(...)["rest"]` of one ASCII line: three rounds of every envelope, outermost first."""
    if not _ANY_ENV_LINE.search(text):
        return text
    for _ in range(3):
        for p in _ENVS:
            if p.search(text):
                text = p.sub("", text, count=1)
    return text
_COLLECTOR_NEED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
_BUS_NULL = re.compile(r"(?i)^0x0*$")
_BUS_SHORT = re.compile(r"(?i)^0x[0-9a-f]{1,2}$")
_BDF = re.compile(r"(?i)^(?:PCI:)?(?:([0-9a-f]{4,8}):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})(?:\.([0-7]))?$")
_INT_TOK = re.compile(r"^[+-]?\d+$")
_FLOAT_TOK = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
_I32 = 2**31
_I64 = 2**63

COMMS_SCHEMA = columns(
    "comms",
    "record", "ts", "node", "nranks", "nccl_version", "test", "nodes", "detail", "file", "line", "rank",
    "cuda_dev", "gpu_bus_id", "pid", "size_bytes", "count", "dtype", "redop", "placement", "time_us",
    "algbw_gbps", "busbw_gbps", "wrong", "counter", "value",
)
INVENTORY_SCHEMA = columns(
    "inventory",
    "node", "component", "gpu_bus_id", "attribute", "value", "source", "file", "line",
)
EVENTS_SCHEMA = columns(
    "events",
    "ts", "ts_quality", "node", "source", "kind", "code", "severity", "message", "detail", "file",
    "line",
)



def _to_int(tok: str | None, bits: int = 64) -> int | None:
    """`cast(pl.Int64/Int32, strict=False)` of one ASCII token."""
    if tok is None or not (tok.isdigit() or _INT_TOK.search(tok)):  # (ASCII digits: `_INT_TOK` matches)
        return None
    v = int(tok)
    lim = 2 ** (bits - 1)
    return v if -lim <= v < lim else None


def _digits_int(tok: str | None, bits: int = 64) -> int | None:
    """`cast(pl.Int64/Int32, strict=False)` of digits a regex group matched: None where too large for the
    column (a corrupt value loses that value only)."""
    if tok is None:
        return None
    v = int(tok)
    return v if v < 2 ** (bits - 1) else None


def _to_float(tok: str | None) -> float | None:
    """`cast(pl.Float64, strict=False)` of one ASCII token (NaN/inf words and other odd forms: fall back)."""
    if tok is None:
        return None
    if tok.replace(".", "", 1).isdigit() or _FLOAT_TOK.search(tok):  # (ASCII digits, one dot: it matches)
        return float(tok)
    low = tok.lower()
    if any(c.isdigit() for c in tok) or "nan" in low or "inf" in low:
        raise FallbackError
    return None


def _bus_id(s: str) -> str | None:
    """`normalize_bus_id` of one ASCII string."""
    m = _BDF.search(s.strip())
    if m is None:
        return None
    dom, bus, dev, fn = m.groups()
    return f"{int(dom or '0', 16) & 0xFFFF:04x}:{int(bus, 16):02x}:{int(dev, 16):02x}.{fn or '0'}"


def _parse_small(texts: list[str], ctx: FileContext) -> ParseResult | None:
    """`parse` in plain Python for a small plain-text result file, or None (see above)."""
    return attempt(
        texts,
        lambda joined: _small(texts, ctx, envelopes=_ANY_ENV_TEXT.search(joined) is not None),
        _COLLECTOR_NEED.search,
        lambda joined: JSON_ID in joined or "failure" in joined,
        lambda _: any(t.lstrip().startswith("{") for t in texts),
    )


def _small(texts: list[str], ctx: FileContext, *, envelopes: bool = True) -> ParseResult:
    return _results([_small_rows(texts, ctx, envelopes=envelopes)])[0]


def _parse_small_many(files: list[tuple[list[str], FileContext]]) -> list[ParseResult | None]:
    """`_parse_small` of each file, each table built once for all the files it reads and cut per file."""
    rows = [
        attempt(  # (hands back what its reader returns: the file's rows here)
            texts,
            lambda joined, texts=texts, ctx=ctx: _small_rows(
                texts, ctx, envelopes=_ANY_ENV_TEXT.search(joined) is not None
            ),
            _COLLECTOR_NEED.search,
            lambda joined: JSON_ID in joined or "failure" in joined,
            lambda _, texts=texts: any(t.lstrip().startswith("{") for t in texts),
        )
        for texts, ctx in files
    ]
    read = iter(_results([r for r in rows if r is not None]))
    return [next(read) if r is not None else None for r in rows]


def parse_many(items: Sequence[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
    """`[parse(lines, ctx) for lines, ctx in items]`: the small files the plain-Python path reads are read
    together (each table built once for all of them, then cut per file); the others are parsed one by one."""
    return small_parse_many(items, SMALL_LINES, _parse_small_many, _parse_frames)


def _results(files: list[tuple]) -> list[ParseResult]:
    """ParseResults of files read by `_small_rows`: each table one frame for all of them, sliced per file."""
    comms_cols: dict[str, list] = {c: [] for c in COMMS_SCHEMA}
    inv_cols: dict[str, list] = {c: [] for c in INVENTORY_SCHEMA}
    ev_cols: dict[str, list] = {c: [] for c in EVENTS_SCHEMA}
    spans = []
    for comms, inv, ev, *_ in files:
        start = [len(comms_cols["line"]), len(inv_cols["line"]), len(ev_cols["line"])]
        for whole, part in ((comms_cols, comms), (inv_cols, inv), (ev_cols, ev)):
            for c, vals in part.items():
                whole[c].extend(vals)
        spans.append((start, [len(comms["line"]), len(inv["line"]), len(ev["line"])]))
    frames = (
        pl.DataFrame(comms_cols, schema=COMMS_SCHEMA),
        pl.DataFrame(inv_cols, schema=INVENTORY_SCHEMA),
        pl.DataFrame(ev_cols, schema=EVENTS_SCHEMA),
    )
    out = []
    for (start, count), (_, _, _, parsed, unrecognized, examples, notes, partial, node) in zip(spans, files):
        comms, inventory, ev = (fr.slice(s, n) for fr, s, n in zip(frames, start, count))
        out.append(
            ParseResult(
                tables={"comms": comms, "inventory": inventory, "events": ev},
                parsed=parsed,
                unrecognized=unrecognized,
                unrecognized_examples=examples,
                notes=notes,
                partial=partial,
                node=node,
            )
        )
    return out


def _small_rows(texts: list[str], ctx: FileContext, *, envelopes: bool = True) -> tuple:  # noqa: C901, PLR0912, PLR0915
    """One file read line by line: (comms, inventory and events columns as lists, parsed, unrecognized,
    examples, notes, partial, node)."""
    rx = _RX
    first, path = ctx.first_line, ctx.path
    n = len(texts)
    run = 0
    test = version = None
    header: str | None = None  # forward-filled within the run
    runs_of: list[int] = [0] * n
    okl: list[bool] = [True] * n
    flags: list[tuple] = [()] * n  # (nthread, device, colhdr, avg) per line, for the run records
    devs: list[tuple] = []  # (i, run, rank, group, pid, host, dev, bus, name, test, version)
    rows: list[tuple] = []  # (i, run, tokens, header, test, version)
    summ: list[tuple] = []  # (i, run, is_oob, match, test, version)
    nthreads: list[tuple] = []  # (i, run, match, test, version)
    hs: list[str] = [""] * n
    debug: list[bool] = [False] * n
    n_debug = 0
    for i, text in enumerate(texts):
        body = (_strip_envelopes(text) if envelopes else text).rstrip()
        hb = body.lstrip()
        h = hb[1:].lstrip() if hb.startswith("#") else hb
        hs[i] = h
        m_nthread = rx["nthread"].search(h) if "nThread" in h else None
        if m_nthread:
            run += 1
            header = None
        runs_of[i] = run
        m_version = rx["version"].search(h) if h.startswith("nccl-tests") else None
        m_coll = rx["coll"].search(h) if h.startswith("Collective") else None
        m_device = rx["device"].search(h) if h.startswith("Rank") else None
        # (each `^`-anchored regex only where the line opens with what it needs: a digit, a word, `(B)`)
        k_colhdr = h.startswith(("size", "bytes")) and bool(rx["colhdr"].search(h))
        k_row = h[:1].isdigit() and bool(rx["row"].search(h))
        m_oob = rx["oob"].search(h) if h.startswith("Out of") else None
        m_avg = rx["avg"].search(h) if h.startswith("Avg") else None
        m_ncclver = rx["ncclver"].search(h) if h.startswith("NCCL version") else None
        k_minor = bool(
            not h  # (`^\s*#?\s*$` on the body: nothing is left of it once blanks and one `#` are cut)
            or (h.startswith("out-of-place") and rx["place"].search(h))
            or (h.startswith("(B)") and rx["units"].search(h))
            or (h[:1] in _OTHER_FIRST and rx["other"].search(h))
        )  # fmt: skip
        k_debug = " NCCL " in body and bool(rx["debug"].search(body))
        m_cmd = (
            rx["cmd"].search(body) if not k_debug and not m_coll and "_perf" in body else None
        )
        # context carried forward
        t_here = m_coll.group(1) if m_coll else m_cmd.group(1) if m_cmd else None
        if t_here is not None:
            test = t_here
        if m_version:
            code = _to_int(m_version.group(3))
            if code is not None:
                version = (
                    f"{code // 10000}.{code // 100 % 100}.{code % 100}"
                    if code >= 10000
                    else f"{code // 1000}.{code // 100 % 10}.{code % 100}"
                )
        elif m_ncclver:
            version = m_ncclver.group(1)
        if k_colhdr:
            header = " ".join(h.split())
        if m_nthread:
            nthreads.append((i, run, rx["full"].search(h), test, version))
        if m_device:
            g = m_device.groupdict()
            devs.append((i, run, g["rank"], g["group"], g["pid"], g["host"].split(".")[0], g["dev"], g["bus"],
                         g["name"], test, version))  # fmt: skip
        if k_row:
            rows.append((i, run, h.split(), header, test, version))
        if m_oob or m_avg:
            summ.append((i, run, bool(m_oob), m_oob or m_avg, test, version))
        if k_debug:
            n_debug += 1
            debug[i] = True
        flags[i] = (bool(m_nthread), bool(m_device), k_colhdr, bool(m_avg))
        okl[i] = not k_debug and bool(
            m_nthread or m_version or m_coll or m_device or k_colhdr or m_oob or m_avg or m_ncclver or k_minor
            or m_cmd
        )  # fmt: skip

    # ---- runs: their device lines (nodes, nranks, printer: host of the lowest rank)
    by_run: dict[int, list[tuple]] = {}
    for d in devs:
        by_run.setdefault(d[1], []).append(d)
    runs: dict[int, tuple[str, int, str]] = {}
    for r, ds in by_run.items():
        hosts = sorted({d[5] for d in ds})
        # (first of equal ranks, as a stable sort_by; a rank Int64 cannot hold is null there: sorted first)
        low = min(ds, key=lambda d: (1, v) if (v := _digits_int(d[2])) is not None else (0, 0))
        runs[r] = (",".join(hosts), min(len(ds), _I32 - 1), low[5])

    def run_info(r: int) -> tuple[str | None, int | None, str]:
        got = runs.get(r)
        return (got[0], got[1], got[2]) if got else (None, None, ctx.node)

    recs: list[tuple] = []  # (line index, order, record dict)
    # ---- run headers
    sizes: dict[int, int] = {}
    # (size rows first: the run records count them)
    layouts: dict[str, dict] = {}

    def layout(key: str) -> dict:
        if key not in layouts:
            layouts[key] = _layout(key)
        return layouts[key]

    placed: list[tuple] = []
    for i, r, tok, hdr, t, v in rows:
        ntok = len(tok)
        lay = layout(hdr) if hdr is not None else None
        if lay is None or ntok < lay["need"]:
            dk = DEFAULT_HEADERS.get(ntok)
            lay = layout(dk) if dk is not None else None
            if lay is None or ntok < lay["need"]:
                continue

        def get(name: str, tok: list[str] = tok, lay: dict = lay) -> str | None:
            j = lay[name]
            return tok[j] if j is not None and j < len(tok) else None

        size_b, count = _to_int(get("i_size")), _to_int(get("i_count"))
        if size_b is None or count is None:
            continue
        sizes[r] = sizes.get(r, 0) + 1
        placed.append((i, r, t, v, size_b, count, get, lay))
    row_ok = {p[0] for p in placed}
    concluded_runs = {runs_of[j] for j in range(n) if flags[j][3]}
    for i, r, m, t, v in nthreads:
        nodes, nranks, printer = run_info(r)
        g = m.groupdict()
        concluded = r in concluded_runs
        detail = json_object(
            ("run", r), ("nthread", _digits_int(g["nthread"])), ("ngpus", _digits_int(g["ngpus"])),
            ("min_bytes", _digits_int(g["min"])), ("max_bytes", _digits_int(g["max"])), ("step", g["step"]),
            ("warmup_iters", _digits_int(g["warmup"])), ("iters", _digits_int(g["iters"])),
            ("agg_iters", _digits_int(g["agg"])), ("validation", _digits_int(g["validation"])),
            ("graph", _digits_int(g["graph"])), ("size_rows", sizes.get(r, 0)), ("concluded", concluded),
        )  # fmt: skip
        recs.append((i, 0, {"record": "nccl_test_run", "node": printer, "nranks": nranks, "nccl_version": v,
                            "test": t, "nodes": nodes, "detail": detail}))  # fmt: skip
    # ---- device lines -> rank records and GPU names
    inv: list[tuple] = []
    seen: set[tuple] = set()
    for i, r, rank, group, pid, host, dev, bus, name, t, v in devs:
        nodes, nranks, _ = run_info(r)
        braw = bus.strip()
        if _BUS_NULL.search(braw):
            bus_id = None
        elif _BUS_SHORT.search(braw):
            bus_id = _bus_id(f"{braw[2:]}:00")
        else:
            bus_id = _bus_id(braw)
        recs.append((i, 1, {"record": "rank", "node": host, "rank": _digits_int(rank, 32), "nranks": nranks,
                            "cuda_dev": _digits_int(dev, 32), "gpu_bus_id": bus_id, "pid": _digits_int(pid),
                            "nccl_version": v, "test": t, "nodes": nodes,
                            "detail": json_object(("group", _digits_int(group)), ("gpu_name", name), ("bus_raw", bus),
                                          ("run", r))}))  # fmt: skip
        if name and (host, bus_id, name) not in seen:
            seen.add((host, bus_id, name))
            inv.append((host, bus_id, name, first + i))
    # ---- size rows: out-of-place then in-place
    for order, (pre, placement) in ((2, ("o", "out-of-place")), (3, ("p", "in-place"))):
        for i, r, t, v, size_b, count, get, lay in placed:
            if lay[f"i_{pre}time"] is None:
                continue
            nodes, nranks, printer = run_info(r)
            wtok = get(f"i_{pre}wrong")
            is_err = lay[f"{pre}_errkind"] == "error"
            wrong = None
            if not is_err:
                wnum = _to_float(wtok)
                if wnum is not None and wnum == math.floor(wnum) and -_I64 <= wnum < _I64:
                    wrong = int(wnum)
            max_error = wtok if is_err else None
            detail = json_object(("root", _to_int(get("i_root"))), ("max_error", max_error), ("run", r))
            rec = {
                "record": "nccl_test", "node": printer, "nranks": nranks, "nccl_version": v, "test": t,
                "size_bytes": size_b, "count": count, "dtype": get("i_type"), "redop": get("i_redop"),
                "placement": placement, "time_us": _to_float(get(f"i_{pre}time")),
                "algbw_gbps": _to_float(get(f"i_{pre}algbw")), "busbw_gbps": _to_float(get(f"i_{pre}busbw")),
                "wrong": wrong, "nodes": nodes, "detail": detail,
            }  # fmt: skip
            recs.append((i, order, rec))
    # ---- summaries and wrong-value events
    events: list[tuple] = []
    last_oob: dict[int, tuple[int | None, str | None]] = {}
    for i, r, is_oob, m, t, v in summ:
        nodes, nranks, printer = run_info(r)
        oob, status = last_oob.get(r, (None, None))
        if is_oob:
            got_oob, got_status = _digits_int(m.group(1)), m.group(2)
            oob = got_oob if got_oob is not None else oob
            status = got_status if got_status is not None else status
            last_oob[r] = (oob, status)
            if oob is not None and oob > 0:
                events.append((i, printer, "nccl_test_wrong_values", str(oob), "high", texts[i],
                               json_object(("test", t), ("nodes", nodes))))  # fmt: skip
            continue
        rec = {
            "record": "nccl_test_summary", "node": printer, "nranks": nranks, "nccl_version": v, "test": t,
            "wrong": oob, "nodes": nodes, "counter": "avg_busbw_gbps", "value": _to_float(m.group(1)),
            "detail": json_object(("out_of_bounds", status), ("check", m.group(2)), ("run", r)),
        }  # fmt: skip
        recs.append((i, 4, rec))
    # ---- duplicate ranks in a run (mis-launched test)
    for r, ds in by_run.items():
        cnt: dict[str, int] = {}
        for d in ds:
            cnt[d[2]] = cnt.get(d[2], 0) + 1
        dup = [d for d in ds if cnt[d[2]] > 1]
        if dup:
            events.append((dup[0][0], dup[0][5], "nccl_test_duplicate_rank", None, "medium", texts[dup[0][0]],
                           json_object(("lines_with_duplicate_rank", len(dup)))))  # fmt: skip
    recs.sort(key=lambda x: (x[0], x[1]))
    dicts = [rec for _, _, rec in recs]
    comms: dict[str, list] = {c: [d.get(c) for d in dicts] for c in COMMS_SCHEMA}
    comms["file"] = [path] * len(recs)
    comms["line"] = [first + i for i, _, _ in recs]
    inventory = {
        "node": [x[0] for x in inv], "component": ["gpu"] * len(inv), "gpu_bus_id": [x[1] for x in inv],
        "attribute": ["name"] * len(inv), "value": [x[2] for x in inv], "source": [NAME] * len(inv),
        "file": [path] * len(inv), "line": [x[3] for x in inv],
    }  # fmt: skip
    events.sort(key=lambda e: e[0])
    ne = len(events)
    ev = {
        "ts": [None] * ne, "ts_quality": ["none"] * ne, "node": [e[1] for e in events],
        "source": [NAME] * ne, "kind": [e[2] for e in events], "code": [e[3] for e in events],
        "severity": [e[4] for e in events], "message": [e[5] for e in events],
        "detail": [e[6] for e in events], "file": [path] * ne, "line": [first + e[0] for e in events],
    }  # fmt: skip
    # ---- accounting
    oks = [okl[i] or (i in row_ok and not debug[i]) for i in range(len(texts))]
    parsed, unrecognized, examples, last = account_texts(texts, oks, first)
    partial = False
    if last is not None and rx["cut_row"].search(hs[last]) and last not in row_ok:
        partial = True
    elif n:
        tail = [j for j in range(n) if runs_of[j] == run]
        started = any(flags[j][0] or flags[j][1] or flags[j][2] or j in row_ok for j in tail)
        partial = started and not any(flags[j][3] for j in tail)
    hosts = {d[5] for d in devs}
    notes = []
    if n_debug:
        notes.append(f"{n_debug} NCCL debug line(s) left to the NCCL parser (counted unrecognized here)")
    node = next(iter(hosts)) if len(hosts) == 1 else None
    return comms, inventory, ev, parsed, unrecognized, examples, notes, partial, node

