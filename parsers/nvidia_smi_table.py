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
