"""The default `nvidia-smi` table: a last-resort snapshot (79-column ≤ 525 and 89-column ≥ 535 layouts).

Cells are found by splitting on `|` (widths change between drivers). Per GPU three rows: `idx name
Persistence-M | Bus-Id Disp.A | Volatile Uncorr. ECC`, `Fan Temp Perf Pwr:Usage/Cap | Memory-Usage |
GPU-Util Compute M.`, then `MIG M.`. Yields inventory (name as printed — possibly cut to `NVIDIA
GeForce ...` —, bus id, persistence/compute/MIG mode, power cap, memory total), one gpu_samples row per
GPU at the table's optional first-line local time, the processes into that row's `extra`
(`processes`: [{pid, type, name, memory}]), and events for `ERR!` cells and uncorrectable ECC > 0.
Several tables in one file (`watch`/`-l` captures) each give their own snapshot.

A long chunk (`nvidia-smi -l` loops, `LANE_MIN_LINES`) is read by `_lane`, polars expressions over its
distinct lines, when every line has one of the canonical shapes; any other chunk by the Python walk `_parse`
(the reference: tests/parsers/test_table10.py compares the two).
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
    """Parse every table in the file; see the module docstring (long canonical chunks: `_lane`)."""
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

# The lane declines a chunk with a line holding a byte outside printable ASCII (tabs, other whitespace,
# non-ASCII: the Python and polars regex classes then agree and `str.strip` = stripping spaces), a quote or
# backslash (escaped by JSON), a run of 16 digits (numbers past float/int64 precision), a MIG device block or
# a failure literal (looked for among the distinct lines).
_LANE_REJECT = r"[^ !#-\[\]-~]|[0-9]{16}|MIG devices:|" + F.FAILURE_ALT
_L_TIME = r"^ *([A-Z][a-z]{2}) ([A-Z][a-z]{2}) +([0-9]{1,2}) ([0-9]{2}):([0-9]{2}):([0-9]{2}) ([0-9]{4})$"
_L_BANNER = r"NVIDIA-SMI +([^ ]+) +Driver Version: *([^ ]+)(?: +CUDA Version: *([^ ]+))?"
_L_SEP = r"^ *[+|][-=+| ]*[+|]$"
_L_HEAD = "Processes:|" + "|".join(re.escape(h) for h in _HEADINGS)
_L_PROC = r"^ *\| +([0-9]+|N/A) +([^ ]+) +([^ ]+) +([0-9]+) +([^ ]+) +(.+?) +([0-9]+MiB|N/A) *\|$"
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
    holding anything else (then `_parse` reads it). Same rows, accounting and order as `_parse`.

    A loop repeats most of its lines (headings, borders, the GPUs' first and third rows): each distinct line
    is classified and its values extracted once, then looked up per line by its position among them."""
    s = lines.cast(pl.String).fill_null("")
    c = pl.col
    t = c("t")
    stripped = s.str.strip_chars_end(" ")
    code = stripped.hash()
    first = code.is_first_distinct()
    ucode = code.filter(first)
    pos = code.replace_strict(ucode, pl.Series(range(len(ucode)), dtype=pl.UInt32), return_dtype=pl.UInt32)
    ut = stripped.filter(first)
    if stripped.n_unique() != len(ut) or ut.str.contains(_LANE_REJECT).any():
        return None  # (two lines of one hash; a line the lane declines)
    u = (
        pl.DataFrame({"t": ut})
        .with_columns(blank=t == "", T=t.str.contains(_L_TIME))
        .with_columns(B=~c("T") & t.str.contains("NVIDIA-SMI", literal=True) & t.str.contains(_L_BANNER))
        .with_columns(S=~c("T") & ~c("B") & t.str.contains(_L_SEP))
    )
    u = u.with_columns(H=~c("T") & ~c("B") & ~c("S") & t.str.contains(_L_HEAD))
    rest = ~(c("blank") | c("T") | c("B") | c("S") | c("H"))
    u = u.with_columns(P=rest & t.str.contains(_L_PROC))
    # (`_parse`'s test for a row of cells: `len(text.split("|")) >= 5 and text.lstrip().startswith("|")`)
    u = u.with_columns(
        G=rest
        & ~c("P")
        & (t.str.count_matches("|", literal=True) >= 4)
        & t.str.contains(r"^ *\|")
    )
    u = u.with_columns(
        kind=pl.when(c("blank"))
        .then(0)
        .when(c("T"))
        .then(1)
        .when(c("B"))
        .then(2)
        .when(c("S") | c("H"))
        .then(3)
        .when(c("P"))
        .then(5)
        .when(c("G"))
        .then(6)
        .otherwise(7)
        .cast(pl.Int8)
    )
    ukind = u.get_column("kind")
    if (ukind == 7).any() or not (ukind == 2).any():
        return None  # (a line `_parse` leaves unrecognized; no table at all)
    # GPU rows among the distinct lines: cells, the three row shapes (`_parse`'s order of trial)
    ug = u.filter(c("G")).select(x=t.str.split("|"))
    ug = (
        ug.select(a=c("x").list.get(1), b=c("x").list.get(2), c=c("x").list.get(3))
        .with_columns(
            r1a=c("a").str.extract_groups(_L_R1A).struct.rename_fields(["idx", "name", "pm"]),
            r1b=c("b").str.extract_groups(_L_R1B).struct.rename_fields(["bus", "disp"]),
        )
        .unnest("r1a", "r1b")
    )
    ug = (
        ug.with_columns(r1=c("idx").is_not_null() & c("bus").is_not_null())
        .with_columns(
            r2a=c("a").str.extract_groups(_L_R2A).struct.rename_fields(["fan", "temp", "perf", "pwr", "cap"]),
            r2b=c("b").str.extract_groups(_L_R2B).struct.rename_fields(["used", "total"]),
            r2c=c("c").str.extract_groups(_L_R2C).struct.rename_fields(["util", "mode"]),
        )
        .unnest("r2a", "r2b", "r2c")
    )
    ug = ug.with_columns(r2=~c("r1") & c("fan").is_not_null() & c("used").is_not_null())
    ug = ug.with_columns(
        role=pl.when(c("r1"))
        .then(1)
        .when(c("r2"))
        .then(2)
        .when((c("a").str.strip_chars(" ") == "") & (c("c").str.strip_chars(" ") != ""))
        .then(3)
        .otherwise(0)
        .cast(pl.Int8),
        mig=c("c").str.strip_chars(" "),
        mk=pl.any_horizontal(c(x).str.contains(F._MARKER_ALT) for x in ("a", "b", "c")),
        ecc=_num(c("c").str.strip_chars(" ")).cast(pl.Int64),
    )
    if ug.select(((c("role") == 0) | (c("r1") & (c("idx").str.len_bytes() > 9))).any()).item():
        return None
    gat = u.get_column("G").arg_true()
    urole = pl.Series([0] * len(u), dtype=pl.Int8).scatter(gat, ug.get_column("role"))
    ugi = pl.Series([0] * len(u), dtype=pl.UInt32).scatter(gat, pl.Series(range(len(gat)), dtype=pl.UInt32))

    # per line: kind, the table (banners so far), whether a banner came after the last time line
    df = (
        pl.DataFrame({"pos": pos})
        .with_row_index("i")
        .with_columns(kind=ukind.gather(pos), role=urole.gather(pos))
        .with_columns(
            mark=pl.when(c("kind") == 1).then(1).when(c("kind") == 2).then(2).forward_fill(),
            tab=(c("kind") == 2).cast(pl.Int32).cum_sum(),
        )
    )
    if df.select(((c("kind") >= 5) & c("mark").ne_missing(2)).any()).item():
        return None  # (process or GPU rows outside a table: unrecognized)
    g = df.filter(c("kind") == 6).select("i", "tab", "pos", "role")
    g = g.with_columns(
        prev_role=c("role").shift(1),
        prev_i=c("i").shift(1),
        next_role=c("role").shift(-1),
        next_i=c("i").shift(-1),
        role2=c("role").shift(-2),
        i2=c("i").shift(-2),
        pos2=c("pos").shift(-1),
        pos3=c("pos").shift(-2),
    )
    seq_bad = g.select(
        (
            ((c("role") == 2) & ((c("prev_role") != 1) | (c("prev_i") != c("i") - 1)).fill_null(True))
            | ((c("role") == 3) & ((c("prev_role") != 2) | (c("prev_i") != c("i") - 1)).fill_null(True))
        ).any()
    ).item()
    if seq_bad:
        return None
    g = (
        g.filter(c("role") == 1)
        .with_columns(has2=((c("next_i") == c("i") + 1) & (c("next_role") == 2)).fill_null(False))
        .with_columns(has3=c("has2") & ((c("i2") == c("i") + 2) & (c("role2") == 3)).fill_null(False))
    )
    gi = ugi.gather(g.get_column("pos"))
    f1 = ug.select("a", "b", "c", "idx", "name", "pm", "bus", "disp", mk1="mk", ecc1="ecc").gather(gi)
    has2, has3 = g.get_column("has2"), g.get_column("has3")
    f2 = ug.select(
        a2="a",
        b2="b",
        c2="c",
        fan2="fan",
        temp2="temp",
        perf2="perf",
        pwr2="pwr",
        cap2="cap",
        used2="used",
        total2="total",
        util="util",
        mode="mode",
        mk2="mk",
    ).gather(ugi.gather(g.get_column("pos2").fill_null(0)))
    f2 = f2.select(pl.when(has2).then(pl.col(x)).alias(x) for x in f2.columns)
    f3 = ug.select("mig").gather(ugi.gather(g.get_column("pos3").fill_null(0)))
    f3 = f3.select(pl.when(has3).then(c("mig")).alias("mig"))
    snap = pl.concat([g.select("i", "tab", "has2"), f1, f2, f3], how="horizontal").with_columns(
        c("idx").cast(pl.Int64), ln=c("i") + ctx.first_line
    )
    if snap.select(c("tab"), c("idx")).is_duplicated().any():
        return None  # (a GPU twice in one table: `_parse` keeps the last)

    # tables: banner values and the time line above each (a time line since the previous banner)
    ub = (
        u.with_row_index("pos")
        .filter(c("B") | c("T"))
        .select(
            "pos",
            bn=pl.when(c("B"))
            .then(t.str.extract_groups(_L_BANNER))
            .struct.rename_fields(["smi", "drv", "cuda"]),
            tm=pl.when(c("T"))
            .then(t.str.extract_groups(_L_TIME))
            .struct.rename_fields(["wd", "mo", "d", "H", "M", "S", "Y"]),
        )
        .unnest("bn", "tm")
    )
    ub = ub.select(
        "pos",
        "drv",
        "cuda",
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
        ),
    )
    b = df.filter((c("kind") == 1) | (c("kind") == 2)).select("i", "tab", "pos", "kind")
    b = b.join(ub, on="pos", how="left", maintain_order="left")
    b = b.with_columns(ts=pl.when((c("kind") == 2) & (c("kind").shift(1) == 1)).then(c("ts").shift(1)))
    b = b.filter(c("kind") == 2).select("i", "tab", "drv", "cuda", "ts")

    # processes: {pid, type, name, memory} per (table, printed GPU)
    snap = snap.with_columns(gkey=c("idx").cast(pl.String))
    pl_rows = df.filter(c("kind") == 5).select("tab", "pos")
    if pl_rows.height:
        up = (
            u.with_row_index("pos")
            .filter(c("P"))
            .select(
                "pos",
                p=t.str.extract_groups(_L_PROC).struct.rename_fields(
                    ["gpu", "gi", "ci", "pid", "type", "name", "mem"]
                ),
            )
            .unnest("p")
            .select(
                "pos",
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
        )
        pj = pl_rows.join(up, on="pos", how="left", maintain_order="left")
        if pj.select(c("tab"), c("gkey")).is_duplicated().any():  # (one row per GPU: the row itself)
            pj = pj.group_by("tab", "gkey", maintain_order=True).agg(c("js").str.join(","))
        pj = pj.select("tab", "gkey", pj="js")
        snap = snap.join(pj, on=["tab", "gkey"], how="left", maintain_order="left")
    else:
        snap = snap.with_columns(pj=pl.lit(None, pl.String))
    snap = snap.join(b.select("tab", "ts"), on="tab", how="left", maintain_order="left")
    snap = snap.sort("tab", "idx", maintain_order=True)
    return _lane_result(snap, b, df, s, ctx)


def _lane_result(
    snap: pl.DataFrame, b: pl.DataFrame, df: pl.DataFrame, s: pl.Series, ctx: FileContext
) -> ParseResult:
    """The `ParseResult` of the lane's GPUs (`snap`, sorted by table and index) and banners (`b`)."""
    c = pl.col
    node, path = ctx.node, ctx.path
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
        ecc_uncorrected_volatile=c("ecc1"),
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
    events = _lane_events(snap, node, path, s, ctx.first_line)
    tables = F.frames(inv_rows, [], events, inv_tuples=True)
    tables["gpu_samples"] = F.conform_table(samples, "gpu_samples")
    last = s[-1].strip()
    return ParseResult(
        tables=tables,
        parsed=int((df.get_column("kind") != 0).sum()),
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
    marked = c("mk1") | (c("has2") & c("mk2")).fill_null(False)
    hit = snap.filter(marked | (c("ecc1").fill_null(0) != 0)).select(
        "idx", "bus", "ts", "ln", *cells, "ecc1", "has2"
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
