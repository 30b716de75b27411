"""The default `nvidia-smi` table: a last-resort snapshot (79-column ≤ 525 and 89-column ≥ 535 layouts).

Cells are found by splitting on `|` (widths change between drivers). Per GPU three rows: `idx name
Persistence-M | Bus-Id Disp.A | Volatile Uncorr. ECC`, `Fan Temp Perf Pwr:Usage/Cap | Memory-Usage |
GPU-Util Compute M.`, then `MIG M.`. Yields inventory (name as printed — possibly cut to `NVIDIA
GeForce ...` —, bus id, persistence/compute/MIG mode, power cap, memory total), one gpu_samples row per
GPU at the table's optional first-line local time, the processes into that row's `extra`
(`processes`: [{pid, type, name, memory}]), and events for `ERR!` cells and uncorrectable ECC > 0.
Several tables in one file (`watch`/`-l` captures) each give their own snapshot.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import polars as pl

from parsers import _nvsmi_fields as F
from parsers.base import FileContext, ParseResult, Tally

NAME = "nvidia-smi-table"
DESCRIPTION = "default nvidia-smi table (GPU rows and processes), 525 and 535+ layouts"
TABLES = ("inventory", "gpu_samples", "events")
FILENAME_HINTS = ("nvidia-smi*", "nvidia_smi*")
DETECTS = "a '| NVIDIA-SMI <ver>  Driver Version: <ver>' banner row"
PRIORITY = 20
INVENTORY_KEY = F.INV_KEY
"""A file's inventory rows are unique on these columns (`_nvsmi_fields.frames`: repeated snapshots restate
the same facts); the ingest keeps them so across the chunks of a large file."""


def record_start(window: bytes) -> int:
    """Where in `window` the last snapshot of an `nvidia-smi` (or `nvidia-smi -l N`) loop starts, or -1: its
    `| NVIDIA-SMI` header row, the border line above it and the time line above that, if any. A large file is
    read in chunks that end before one (`forensics.bundle.ChunkReader`), never inside a snapshot."""

    def line_start(at: int) -> int:
        return max(window.rfind(b"\n", 0, at), window.rfind(b"\r", 0, at)) + 1

    end = len(window)
    for _ in range(64):
        i = window.rfind(b"| NVIDIA-SMI ", 0, end)
        if i <= 0:
            return -1
        end = i
        if line_start(i) != i or i < 2:
            continue
        border = line_start(i - 1)
        if not window.startswith(b"+-", border) or border < 2:
            continue
        above = line_start(border - 1)
        dated = above > 0 and _TIME.match(window[above : border - 1].decode("utf-8", "replace").rstrip("\r"))
        return above if dated else border
    return -1

_BANNER = re.compile(r"NVIDIA-SMI\s+(?P<smi>\S+)\s+Driver Version:\s*(?P<drv>\S+)(?:\s+CUDA Version:\s*(?P<cuda>\S+))?")
_TIME = re.compile(r"^\s*[A-Z][a-z]{2} [A-Z][a-z]{2}\s+\d{1,2} \d\d:\d\d:\d\d \d{4}\s*$")
_SEP = re.compile(r"^\s*[+|][-=+| ]*[+|]\s*$")
_R1A = re.compile(r"^\s*(?P<idx>\d+)\s+(?P<name>.+?)\s+(?P<pm>On|Off|N/A|ERR!)\s*$")
_R1B = re.compile(r"^\s*(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s+(?P<disp>\S+)\s*$")
_R2A = re.compile(r"^\s*(?P<fan>\S+)\s+(?P<temp>\S+)\s+(?P<perf>\S+)\s+(?P<pwr>\S+)\s*/\s*(?P<cap>\S+)\s*$")
_R2B = re.compile(r"^\s*(?P<used>\S+)\s*/\s*(?P<total>\S+)\s*$")
_R2C = re.compile(r"^\s*(?P<util>\S+)\s+(?P<mode>.+?)\s*$")
_PROC = re.compile(
    r"^\s*\|\s+(?P<gpu>\d+|N/A)\s+(?P<gi>\S+)\s+(?P<ci>\S+)\s+(?P<pid>\d+)\s+(?P<type>\S+)\s+(?P<name>.+?)\s+(?P<mem>\d+MiB|N/A)\s*\|$"
)
_HEADINGS = (
    "Persistence-M",
    "Pwr:Usage/Cap",
    "MIG M.",
    "Processes:",
    "Process name",
    "Usage",
    "No running processes found",
    "No MIG devices found",
    "MIG devices:",
    "GPU  GI  CI",
    "SM     Unc|",
)

_HEADING = re.compile("|".join(re.escape(h) for h in _HEADINGS))


def sniff(head: bytes, name: str) -> float:
    """1.0 on the `| NVIDIA-SMI x  Driver Version: y` banner row near the top, 0.9 anywhere in the head."""
    if b"NVIDIA-SMI" not in head:  # (the banner's literal: most heads of a bundle end here, no decode)
        return 0.0
    text = head.decode("utf-8", "replace")
    m = re.search(r"^[ \t]*\|\s*NVIDIA-SMI \S+\s+Driver Version:", text, re.M)
    if not m:
        return 0.0
    return 1.0 if text[: m.start()].count("\n") < 8 else 0.9


def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """Parse every table in the file; see the module docstring."""
    if len(lines) >= LANE_MIN_LINES and (done := _lane(lines, ctx)) is not None:
        return done
    texts: list[str] = [t if t is not None else "" for t in lines.cast(pl.String).to_list()]
    rows, result = _parse(texts, F.blank_flags(lines), set(_failure_candidates(lines)), ctx)
    return ParseResult(tables=F.frames(*rows), **result)


def _failure_candidates(lines: pl.Series) -> list[int]:
    """Positions of the lines holding one of `F.FAILURE_LITERALS`."""
    return lines.cast(pl.String).str.contains_any(list(F.FAILURE_LITERALS)).arg_true().to_list()


def parse_many(items: Sequence[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
    """`[parse(lines, ctx) for lines, ctx in items]`: the lines of all files read in one pass (strings, blank
    flags), each file walked on its own, the tables of all files built by `F.frames_many`."""
    if not items:
        return []
    text, texts, blank, starts = F.batch_lines(items)
    cand: list[set[int]] = [set() for _ in items]
    for i in _failure_candidates(text):
        k = bisect_right(starts, i) - 1
        cand[k].add(i - starts[k])
    rows, results = [], []
    for k, (_lines, ctx) in enumerate(items):
        a, b = starts[k], starts[k + 1]
        r, result = _parse(texts[a:b], blank[a:b], cand[k], ctx)
        rows.append(r)
        results.append(result)
    return [ParseResult(tables=t, **r) for t, r in zip(F.frames_many(rows), results, strict=True)]


def _parse(
    texts: list[str], blank: list[bool], maybe_failure: set[int], ctx: FileContext
) -> tuple[tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]], dict[str, Any]]:
    """The rows of the three tables and the other `ParseResult` fields of one file (`maybe_failure`: the
    positions of its lines holding a failure literal)."""
    first = ctx.first_line
    tally = Tally()
    inv: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    tables: list[dict[str, Any]] = []  # {"ts", "gpus": {idx: snap}, "procs": {idx: [...]}}
    cur: dict[str, Any] | None = None
    pending_ts: datetime | None = None
    snap: F.GpuSnapshot | None = None
    row = 0  # which of the 3 GPU rows comes next
    in_mig = False

    def new_table() -> dict[str, Any]:
        t: dict[str, Any] = {"ts": pending_ts, "gpus": {}, "procs": {}, "node": []}
        tables.append(t)
        return t

    # lines that may be nvidia-smi failure lines (one literal scan; `failure_event` needs one of these)
    for i, raw in enumerate(texts):
        ln = first + i
        text = raw.rstrip()
        if blank[i]:
            continue
        ok = True
        cells = text.split("|")
        if i in maybe_failure and (fe := F.failure_event(text, ln, node=ctx.node, path=ctx.path)) is not None:
            events.append(fe)
        elif _TIME.match(text):
            pending_ts = F.parse_local_ts(text.strip())
            cur = None
        elif "NVIDIA-SMI" in text and (m := _BANNER.search(text)) is not None:
            cur = new_table()
            pending_ts = None
            cur["node"] = [("driver_version", m.group("drv"), ln)]
            if m.group("cuda"):
                cur["node"].append(("cuda_version", m.group("cuda"), ln))
            snap, row, in_mig = None, 0, False
        elif _SEP.match(text):
            row = 0 if row == 3 else row
            if snap is not None and row == 0:
                snap = None
        elif "MIG devices:" in text:
            in_mig = True
        elif "Processes:" in text:
            in_mig = False
        elif _HEADING.search(text):
            pass
        elif (pm := _PROC.match(text)) is not None and cur is not None:
            gi = pm.group("gpu")
            cur["procs"].setdefault(gi, []).append(
                {"pid": int(pm.group("pid")), "type": pm.group("type"), "name": pm.group("name"), "memory": pm.group("mem")}
            )
        elif cur is not None and len(cells) >= 5 and text.lstrip().startswith("|"):
            a, b, c = cells[1], cells[2], cells[3]
            m1a, m1b = _R1A.match(a), _R1B.match(b)
            if m1a and m1b and not in_mig:
                idx = int(m1a.group("idx"))
                snap = F.GpuSnapshot(index=idx, bus_raw=m1b.group("bus"), line=ln)
                cur["gpus"][idx] = snap
                snap.put_inv("name", m1a.group("name"), ln)
                snap.put_inv("bus_id", m1b.group("bus"), ln)
                snap.put_inv("persistence_mode", m1a.group("pm"), ln)
                snap.totals["ecc_uncorrected_volatile"] = (c.strip(), ln)
                snap.extra["display_active"] = m1b.group("disp")
                for v in (a, b, c):
                    snap.note(v, ln)
                row = 2
            elif snap is not None and row == 2 and (m2a := _R2A.match(a)) and (m2b := _R2B.match(b)):
                m2c = _R2C.match(c)
                snap.extra["fan_speed"] = m2a.group("fan")
                snap.extra["pstate"] = m2a.group("perf")
                snap.put_sample("temperature_c", m2a.group("temp"), ln)
                snap.put_sample("power_w", m2a.group("pwr"), ln)
                snap.put_sample("power_limit_w", m2a.group("cap"), ln)
                snap.put_inv("power_limit", m2a.group("cap"), ln)
                snap.put_sample("memory_used_mib", m2b.group("used"), ln)
                snap.put_sample("memory_total_mib", m2b.group("total"), ln)
                snap.put_inv("memory_total", m2b.group("total"), ln)
                if m2c:
                    snap.put_sample("utilization_pct", m2c.group("util"), ln)
                    snap.put_inv("compute_mode", m2c.group("mode"), ln)
                for v in (a, b, c):
                    snap.note(v, ln)
                row = 3
            elif snap is not None and row == 3 and not a.strip() and c.strip():
                snap.put_inv("mig_mode", c.strip(), ln)
            elif in_mig:
                pass  # MIG device rows: understood as table rows, not modelled
            else:
                ok = False
        else:
            ok = False
        tally.count(ok, ln, raw)

    def text_of(line: int) -> str:
        return texts[line - first]

    for t in tables:
        inv += F.node_rows(t["node"], node=ctx.node, path=ctx.path, source="nvidia-smi-table")
        for idx, s in sorted(t["gpus"].items()):
            procs = t["procs"].get(str(idx))
            if procs:
                s.extra["processes"] = procs  # type: ignore[assignment]
            gi, r, ev = F.snapshot_rows(s, node=ctx.node, path=ctx.path, source="nvidia-smi-table", ts=t["ts"], text_of=text_of)
            inv += gi
            samples.append(r)
            events += ev
    partial = bool(tables) and texts and not texts[-1].strip().startswith("+") and not texts[-1].strip().endswith("|")
    return (inv, samples, events), {
        "parsed": tally.parsed,
        "unrecognized": tally.unrecognized,
        "unrecognized_examples": tally.examples,
        "partial": bool(partial),
    }


# ----------------------------------------------------------------------------- vectorised lane (long loops)

LANE_MIN_LINES = 2000
"""`parse` tries `_lane` on chunks of at least this many lines (an `nvidia-smi -l` capture); smaller ones
(and any chunk `_lane` declines) go through the Python walk `_parse`, which is the reference."""

# A chunk the lane declines at once: a byte outside printable ASCII (tabs, other whitespace, non-ASCII: the
# Python and polars regex classes then agree and `str.strip` = stripping spaces), a quote or backslash
# (escaped by JSON), a run of 16 digits (numbers past float/int64 precision), MIG device blocks, failure
# lines.
_LANE_REJECT = r'[^ -~]|["\\]|[0-9]{16}|MIG devices:|' + F.FAILURE_ALT
_L_TIME = r"^ *([A-Z][a-z]{2}) ([A-Z][a-z]{2}) +([0-9]{1,2}) ([0-9]{2}):([0-9]{2}):([0-9]{2}) ([0-9]{4})$"
_L_BANNER = r"NVIDIA-SMI +([^ ]+) +Driver Version: *([^ ]+)(?: +CUDA Version: *([^ ]+))?"
_L_SEP = r"^ *[+|][-=+| ]*[+|]$"
_L_HEAD = "Processes:|" + "|".join(re.escape(h) for h in _HEADINGS)
_L_PROC = r"^ *\| +([0-9]+|N/A) +([^ ]+) +([^ ]+) +([0-9]+) +([^ ]+) +(.+?) +([0-9]+MiB|N/A) *\|$"
_L_CELLS = r"^ *\|([^|]*)\|([^|]*)\|([^|]*)\|"
_L_R1A = r"^ *([0-9]+) +(.+?) +(On|Off|N/A|ERR!) *$"
_L_R1B = r"^ *([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]) +([^ ]+) *$"
_L_R2A = r"^ *([^ ]+) +([^ ]+) +([^ ]+) +([^ ]+) */ *([^ ]+) *$"
_L_R2B = r"^ *([^ ]+) */ *([^ ]+) *$"
_L_R2C = r"^ *([^ ]+) +(.+?) *$"
_L_NUM = r"^ *\[? *([-+]?[0-9]+(?:\.[0-9]+)?)"
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _num(e: pl.Expr) -> pl.Expr:
    """`F.num` of a column of printed values (ASCII, no tab): the leading number, else null."""
    return e.str.extract(_L_NUM, 1).cast(pl.Float64)


def _lane(lines: pl.Series, ctx: FileContext) -> ParseResult | None:
    """`parse(lines, ctx)` by polars expressions over the column of lines, for a chunk of canonical snapshots
    (79- and 89-column tables, GPU rows in pairs or triples, time lines, process tables); None for a chunk
    holding anything else (then `_parse` reads it). Same rows, accounting and order as `_parse`."""
    s = lines.cast(pl.String).fill_null("")
    if s.str.contains(_LANE_REJECT).any():
        return None
    c = pl.col
    t = c("t")
    df = pl.DataFrame({"t": s.str.strip_chars_end(" ")}).with_row_index("i")
    df = (
        df.with_columns(
            blank=t == "",
            T=t.str.contains(_L_TIME),
        )
        .with_columns(
            B=~c("T") & t.str.contains("NVIDIA-SMI", literal=True) & t.str.contains(_L_BANNER),
        )
        .with_columns(
            S=~c("T") & ~c("B") & t.str.contains(_L_SEP),
        )
        .with_columns(
            H=~c("T") & ~c("B") & ~c("S") & t.str.contains(_L_HEAD),
        )
    )
    rest = ~(c("blank") | c("T") | c("B") | c("S") | c("H"))
    df = df.with_columns(
        mark=pl.when(c("T")).then(1).when(c("B")).then(2).forward_fill(),
        tab=c("B").cast(pl.Int32).cum_sum(),
        P=rest & t.str.contains(_L_PROC),
    ).with_columns(
        G=rest & ~c("P") & t.str.contains(_L_CELLS),
    )
    if not df.get_column("B").any():
        return None
    # every other line is unrecognized by `_parse`; process and GPU rows need a table (a banner since the
    # last time line)
    bad = df.select(
        (rest & ~c("P") & ~c("G")).any() | ((c("P") | c("G")) & c("mark").ne_missing(2)).any()
    ).item()
    if bad:
        return None
    g = (
        df.filter(c("G"))
        .select("i", "tab", t.str.extract_groups(_L_CELLS).struct.rename_fields(["a", "b", "c"]).alias("x"))
        .unnest("x")
    )
    g = g.with_columns(
        r1a=c("a").str.extract_groups(_L_R1A).struct.rename_fields(["idx", "name", "pm"]),
        r1b=c("b").str.extract_groups(_L_R1B).struct.rename_fields(["bus", "disp"]),
    ).unnest("r1a", "r1b")
    g = g.with_columns(r1=c("idx").is_not_null() & c("bus").is_not_null())
    g = g.with_columns(
        r2a=pl.when(~c("r1"))
        .then(c("a").str.extract_groups(_L_R2A))
        .struct.rename_fields(["fan", "temp", "perf", "pwr", "cap"]),
        r2b=pl.when(~c("r1")).then(c("b").str.extract_groups(_L_R2B)).struct.rename_fields(["used", "total"]),
    ).unnest("r2a", "r2b")
    g = g.with_columns(r2=~c("r1") & c("fan").is_not_null() & c("used").is_not_null())
    g = g.with_columns(
        r3=~c("r1") & ~c("r2") & (c("a").str.strip_chars(" ") == "") & (c("c").str.strip_chars(" ") != ""),
    )
    prev = pl.when(c("r1")).then(1).when(c("r2")).then(2).when(c("r3")).then(3).otherwise(0)
    g = g.with_columns(role=prev, prev_i=c("i").shift(1), next_i=c("i").shift(-1))
    g = g.with_columns(prev_role=c("role").shift(1), next_role=c("role").shift(-1))
    ok = g.select(
        (
            (c("role") == 0)
            | ((c("role") == 2) & ((c("prev_role") != 1) | (c("prev_i") != c("i") - 1)).fill_null(True))
            | ((c("role") == 3) & ((c("prev_role") != 2) | (c("prev_i") != c("i") - 1)).fill_null(True))
            | ((c("role") == 1) & (c("idx").str.len_bytes() > 9))
        ).any()
    ).item()
    if ok:
        return None
    # one row per GPU: its first row (line 1), the next two joined by position
    nxt = (c("next_i") == c("i") + 1).fill_null(False)
    g = g.with_columns(
        has2=nxt & (c("next_role") == 2),
    ).with_columns(
        has3=c("has2")
        & (c("role").shift(-2) == 3).fill_null(False)
        & (c("i").shift(-2) == c("i") + 2).fill_null(False),
        fan2=c("fan").shift(-1),
        temp2=c("temp").shift(-1),
        perf2=c("perf").shift(-1),
        pwr2=c("pwr").shift(-1),
        cap2=c("cap").shift(-1),
        used2=c("used").shift(-1),
        total2=c("total").shift(-1),
        a2=c("a").shift(-1),
        b2=c("b").shift(-1),
        c2=c("c").shift(-1),
        c3=c("c").shift(-2),
    )
    snap = g.filter(c("r1")).with_columns(
        c("idx").cast(pl.Int64),
        ln=c("i") + ctx.first_line,
        **{
            k: pl.when(c("has2")).then(c(k))
            for k in ("fan2", "temp2", "perf2", "pwr2", "cap2", "used2", "total2", "a2", "b2", "c2")
        },
        mig=pl.when(c("has3")).then(c("c3").str.strip_chars(" ")),
    )
    if snap.select(c("tab"), c("idx")).is_duplicated().any():
        return None  # (a GPU twice in one table: `_parse` keeps the last)
    m2c = pl.when(c("has2")).then(c("c2").str.extract_groups(_L_R2C)).struct.rename_fields(["util", "mode"])
    snap = snap.with_columns(m2c=m2c).unnest("m2c")

    # tables: banner values and the time line above each (a time line since the previous banner)
    b = (
        df.filter(c("B") | c("T"))
        .select(
            "i",
            "tab",
            "B",
            "T",
            bn=pl.when(c("B"))
            .then(t.str.extract_groups(_L_BANNER))
            .struct.rename_fields(["smi", "drv", "cuda"]),
            tm=pl.when(c("T"))
            .then(t.str.extract_groups(_L_TIME))
            .struct.rename_fields(["wd", "mo", "d", "H", "M", "S", "Y"]),
        )
        .unnest("bn", "tm")
    )
    b = b.with_columns(
        ts=pl.when(
            c("wd").is_in(_WEEKDAYS)
            & c("mo").is_in(_MONTHS)
            & c("H").cast(pl.Int32).lt(24)
            & c("M").cast(pl.Int32).lt(60)
            & c("S").cast(pl.Int32).lt(60)
            & c("Y").cast(pl.Int32).gt(0)
        ).then(
            pl.concat_str(
                c("Y"),
                pl.lit("-"),
                c("mo").replace_strict(_MONTHS, [f"{k:02d}" for k in range(1, 13)], default=None),
                pl.lit("-"),
                c("d").str.zfill(2),
                pl.lit(" "),
                c("H"),
                pl.lit(":"),
                c("M"),
                pl.lit(":"),
                c("S"),
            ).str.strptime(pl.Datetime("us"), "%Y-%m-%d %H:%M:%S", strict=False)
        )
    )
    b = (
        b.with_columns(ts=pl.when(c("B") & c("T").shift(1, fill_value=False)).then(c("ts").shift(1)))
        .filter(c("B"))
        .select("i", "tab", "drv", "cuda", "ts")
    )
    node, path = ctx.node, ctx.path

    # processes: {pid, type, name, memory} per (table, printed GPU)
    procs = (
        df.filter(c("P"))
        .select(
            "tab",
            t.str.extract_groups(_L_PROC)
            .struct.rename_fields(["gpu", "gi", "ci", "pid", "type", "name", "mem"])
            .alias("p"),
        )
        .unnest("p")
    )
    snap = snap.with_columns(gkey=c("idx").cast(pl.String))
    if procs.height:
        pj = (
            procs.select(
                "tab",
                gkey=c("gpu"),
                js=pl.concat_str(
                    pl.lit('{"memory":"'),
                    c("mem"),
                    pl.lit('","name":"'),
                    c("name"),
                    pl.lit('","pid":'),
                    c("pid").cast(pl.Int64).cast(pl.String),
                    pl.lit(',"type":"'),
                    c("type"),
                    pl.lit('"}'),
                ),
            )
            .group_by("tab", "gkey", maintain_order=True)
            .agg(pj=c("js").str.join(","))
        )
        snap = snap.join(pj, on=["tab", "gkey"], how="left", maintain_order="left")
    else:
        snap = snap.with_columns(pj=pl.lit(None, pl.String))
    snap = snap.join(b.select("tab", "ts"), on="tab", how="left", maintain_order="left")
    snap = snap.sort("tab", "idx", maintain_order=True)
    extra = pl.concat_str(
        pl.lit('{"display_active":"'),
        c("disp"),
        pl.lit('"'),
        pl.when(c("has2"))
        .then(pl.concat_str(pl.lit(',"fan_speed":"'), c("fan2"), pl.lit('"')))
        .otherwise(pl.lit("")),
        pl.when(c("pj").is_not_null())
        .then(pl.concat_str(pl.lit(',"processes":['), c("pj"), pl.lit("]")))
        .otherwise(pl.lit("")),
        pl.when(c("has2"))
        .then(pl.concat_str(pl.lit(',"pstate":"'), c("perf2"), pl.lit('"')))
        .otherwise(pl.lit("")),
        pl.lit("}"),
    )
    ecc = _num(c("c").str.strip_chars(" ")).cast(pl.Int64)
    samples = snap.select(
        node=pl.lit(node, pl.String),
        gpu_index=c("idx"),
        gpu_bus_id=c("bus"),
        ts=c("ts"),
        ts_quality=pl.when(c("ts").is_not_null()).then(pl.lit("local_assumed_utc")).otherwise(pl.lit("none")),
        source=pl.lit("nvidia-smi-table"),
        file=pl.lit(path, pl.String),
        line=c("ln"),
        utilization_pct=_num(c("util")),
        memory_used_mib=_num(c("used2")),
        memory_total_mib=_num(c("total2")),
        temperature_c=_num(c("temp2")),
        power_w=_num(c("pwr2")),
        power_limit_w=_num(c("cap2")),
        ecc_uncorrected_volatile=ecc,
        extra=extra,
    )
    samples = samples.with_columns(gpu_bus_id=F.normalized_bus_ids(samples.get_column("gpu_bus_id")))

    # inventory: node rows of each banner, then each GPU's facts, first statements only (`F.frames`)
    parts = [
        b.select(
            tab="tab",
            o=pl.lit(0),
            idx=pl.lit(None, pl.Int64),
            a=pl.lit(0),
            bus=pl.lit(None, pl.String),
            attr=pl.lit("driver_version"),
            v="drv",
            ln=c("i") + ctx.first_line,
        ),
        b.filter(c("cuda").is_not_null()).select(
            tab="tab",
            o=pl.lit(0),
            idx=pl.lit(None, pl.Int64),
            a=pl.lit(1),
            bus=pl.lit(None, pl.String),
            attr=pl.lit("cuda_version"),
            v="cuda",
            ln=c("i") + ctx.first_line,
        ),
    ]
    for k, (attr, col, off) in enumerate(
        (
            ("name", "name", 0),
            ("bus_id", "bus", 0),
            ("persistence_mode", "pm", 0),
            ("power_limit", "cap2", 1),
            ("memory_total", "total2", 1),
            ("compute_mode", "mode", 1),
            ("mig_mode", "mig", 2),
        )
    ):
        parts.append(
            snap.filter(c(col).is_not_null()).select(
                tab="tab",
                o=pl.lit(1),
                idx="idx",
                a=pl.lit(k),
                bus="bus",
                attr=pl.lit(attr),
                v=col,
                ln=c("ln") + off,
            )
        )
    parts = [p.unique(["idx", "bus", "attr", "v"], keep="first", maintain_order=True) for p in parts]
    inv = pl.concat(parts).sort("tab", "o", "idx", "a", maintain_order=True)
    inv_rows = [
        (node, idx, bus, "gpu" if o else "node", attr, v, "nvidia-smi-table", path, ln)
        for _tab, o, idx, _a, bus, attr, v, ln in inv.iter_rows()
    ]
    events = _lane_events(snap, node, path, df.get_column("t"), ctx.first_line)
    tables = F.frames(inv_rows, [], events, inv_tuples=True)
    tables["gpu_samples"] = F.conform_table(samples, "gpu_samples")
    last = s[-1].strip()
    return ParseResult(
        tables=tables,
        parsed=int(df.height - df.get_column("blank").sum()),
        unrecognized=0,
        unrecognized_examples=[],
        partial=not last.startswith("+") and not last.endswith("|"),
    )


def _lane_events(
    snap: pl.DataFrame, node: str, path: str, text: pl.Series, first: int
) -> list[dict[str, Any]]:
    """The events `F.snapshot_rows` makes of the lane's GPUs (sorted as `snap`): uncorrectable volatile ECC,
    then the cells of the first two rows holding an error marker (five at most), on the few GPUs with one."""
    c = pl.col
    cells = ("a", "b", "c", "a2", "b2", "c2")
    marked = pl.any_horizontal([c(x).str.contains(F._MARKER_ALT).fill_null(False) for x in cells])
    ecc = _num(c("c").str.strip_chars(" ")).cast(pl.Int64)
    hit = snap.select("idx", "bus", "ts", "ln", *cells, ecc=ecc, has2="has2").filter(
        marked | (c("ecc").fill_null(0) != 0)
    )
    events: list[dict[str, Any]] = []
    for idx, bus, ts, ln, a, bb, cc, a2, b2, c2, uv, has2 in hit.iter_rows():
        q = "local_assumed_utc" if ts is not None else "none"

        def event(kind: str, code: str | None, severity: str, at: int, detail: dict[str, Any]) -> None:
            events.append(
                {
                    "node": node,
                    "gpu_index": idx,
                    "gpu_bus_id": bus,
                    "ts": ts,
                    "ts_quality": q,  # noqa: B023
                    "source": F.SOURCE,
                    "kind": kind,
                    "code": code,
                    "severity": severity,
                    "message": text[at - first].strip(),
                    "detail": F.to_json(detail),
                    "file": path,
                    "line": at,
                }
            )

        if uv:
            event("ecc_uncorrectable", "volatile", "high", ln, {"volatile": uv, "aggregate": None})
        vals = [(a, ln), (bb, ln), (cc, ln)] + ([(a2, ln + 1), (b2, ln + 1), (c2, ln + 1)] if has2 else [])
        errs = [(v, at) for v, at in vals if F._MARKER_RE.search(v)]
        for v, at in errs[:5]:
            code = next(m for m in F.ERROR_MARKERS if m in v)
            event("gpu_error", code, "high", at, {"value": v.strip()})
    return events
