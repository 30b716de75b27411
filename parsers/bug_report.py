"""`nvidia-bug-report.log(.gz)`: split into its sections and hand each to the parser that claims it.

The report is a sequence of sections, each opened by a line of underscores, a blank line and a title
(`*** /proc/driver/nvidia/version` + `*** ls: ...` lines for files; `/usr/bin/nvidia-smi --query`,
`dmesg:`, `journalctl -b -0:` ... for commands). Each section body is detected with
`parsers.registry.detect` (content first, the title's base name as the name bonus) and parsed with a
FileContext whose `first_line` is the body's offset, so every row keeps the bug report's own line
numbers. Results are merged: one report yields inventory (node + GPUs), a telemetry snapshot and
kernel/DCGM events. Handled here directly: the prologue (`uname:` -> node hostname and kernel
version, `nvidia-bug-report.sh Version`), `/proc/driver/nvidia/version` (`NVRM version:` -> driver
version, `GCC version:`). Topology/NVLink rows, which carry no bus id, get it from the report's own
`nvidia-smi -q` section (same GPU index).

Accounting: separators, titles and the prologue are parsed; lines of sections no parser claims
(lspci dumps, X logs, dmidecode, ...) are counted unrecognized, with one note per such section.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import polars as pl

from parsers._sniff import has, head_text
from parsers.base import EXAMPLE_CHARS, FileContext, ParseResult

NAME = "bug-report"
DESCRIPTION = "nvidia-bug-report.log: sections split and routed to the other parsers, results merged"
TABLES = ("inventory", "gpu_samples", "events")
FILENAME_HINTS = ("nvidia-bug-report*",)
DETECTS = "'Start of NVIDIA bug report log file' or 'nvidia-bug-report.sh Version' in the head"
PRIORITY = 30

SEPARATOR = re.compile(r"^_{20,}\s*$")
RECORD_START = b"_" * 20
"""A section's separator line (`SEPARATOR`): a large report is read in chunks that end before one
(`forensics.bundle.ChunkReader`), so that a section is cut in two only when it is longer than 1 MB."""
INVENTORY_KEY = ("node", "component", "gpu_bus_id", "gpu_index", "device", "attribute", "value", "source")
"""The report's inventory rows are unique on these columns: a fact its sections' parsers state again (two
kernel log sections, or one read in several chunks) is kept once, with its first line; the ingest keeps them
so across the chunks of a large report."""
MAX_NOTES = 40


def sniff(head: bytes, name: str) -> float:
    """1.0 on the bug report prologue."""
    text = head_text(head)  # (the decoding every sniffer shares)
    # both prologue literals hold "report": one search of it (no blank: a needle with blanks is slow over the
    # aligned text of tool output) rules both out on other files' heads
    if has(text, "report") and (
        "Start of NVIDIA bug report log file" in text or "nvidia-bug-report.sh Version" in text
    ):
        return 1.0
    return 0.0


CARRY_TAIL = 0
"""`carry` hands the next chunk a section's header only (no data lines after it)."""


def carry(lines: pl.Series) -> list[str]:
    """The header of the section in force at the end of `lines` (its separator and title lines; [] before
    any): a report longer than a chunk whose cut falls inside a section (one longer than
    `forensics.bundle.RECORD_PROBE`, such as a journal) has the next chunk parsed after it, so that the rest
    of the section is read by the parser its title and first lines chose, as reading the report whole does.
    The header is then parsed, and counted, again in that chunk; the ingest takes it off. A chunk that ends
    with the section (its cut before a separator, `RECORD_START`) hands the next one an empty section."""
    texts = [t if t is not None else "" for t in lines.cast(pl.String).to_list()]
    seps = [i for i, t in enumerate(texts) if SEPARATOR.match(t)]
    if not seps:
        return []
    start = seps[-1]
    idx = [i for i in range(start + 1, len(texts)) if texts[i].strip()]
    if not idx:  # (the chunk ends on the separator: the title is the next chunk's)
        return texts[start:]
    return texts[start : _body_start(texts, idx[0], len(texts))]


def _body_start(texts: list[str], title: int, end: int) -> int:
    """Where a section's body starts: after its title line `title` and the `*** ls: ...` lines of a file
    section under it (before `end`)."""
    body = title + 1
    while body < end and texts[body].startswith("*** "):
        body += 1
    return body


def _report_date(text: str) -> datetime | None:
    for fmt in ("%a %b %d %H:%M:%S %Z %Y", "%a %b %d %I:%M:%S %p %Z %Y", "%a %d %b %Y %I:%M:%S %p %Z", "%a %b %d %H:%M:%S %Y"):
        try:
            return datetime.strptime(" ".join(text.split()), fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """Split into sections, route each to its parser, merge; see the module docstring."""
    from forensics.schema import conform  # lazy: keeps parsers importable alone
    from parsers import registry  # lazy: the registry imports this module

    texts: list[str] = [t if t is not None else "" for t in lines.cast(pl.String).to_list()]
    blank = (lines.cast(pl.String).fill_null("").str.strip_chars().str.len_bytes() == 0).to_list()
    first = ctx.first_line
    seps = [i for i, t in enumerate(texts) if SEPARATOR.match(t)]
    bounds = list(zip([0, *[s + 1 for s in seps]], [*seps, len(texts)], strict=True))
    parsed = len(seps)
    unrecognized = 0
    examples: list[tuple[int, str]] = []
    notes: list[str] = []
    partial = False
    tables: dict[str, list[pl.DataFrame]] = {}
    node_inv: list[dict[str, Any]] = []
    host: str | None = None
    collected = ctx.collected_at

    def node_attr(attr: str, value: str, i: int) -> None:
        if value.strip():
            node_inv.append({"node": ctx.node, "component": "node", "attribute": attr, "value": value.strip(),
                             "source": "nvidia-bug-report", "file": ctx.path, "line": first + i})

    for start, end in bounds:
        idx = [i for i in range(start, end) if not blank[i]]
        if not idx:
            continue
        title_i = idx[0]
        title = texts[title_i].strip()
        body_start = _body_start(texts, title_i, end)  # (file sections: '*** /path' then '*** ls: ...' lines)
        header_lines = sum(1 for i in range(start, body_start) if not blank[i])
        if title.startswith("Start of NVIDIA bug report log file"):
            for i in range(start, end):
                t = texts[i].strip()
                if t.startswith("nvidia-bug-report.sh Version:"):
                    node_attr("nvidia_bug_report_version", t.split(":", 1)[1], i)
                elif t.startswith("uname:"):
                    parts = t.split(":", 1)[1].split()
                    if len(parts) >= 3:
                        host = parts[1].split(".")[0]
                        node_attr("hostname", parts[1], i)
                        node_attr("kernel_version", parts[2], i)
                elif t.startswith("Date:") and collected is None:
                    collected = _report_date(t.split(":", 1)[1])
            parsed += sum(1 for i in range(start, end) if not blank[i])
            continue
        name = title.removeprefix("*** ").strip().rstrip(":")
        if name.endswith("/proc/driver/nvidia/version"):
            for i in range(body_start, end):
                t = texts[i]
                if blank[i]:
                    continue
                m = re.search(r"NVRM version:.*?Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", t)
                if m:
                    node_attr("driver_version", m.group(1), i)
                elif t.startswith("GCC version:"):
                    node_attr("gcc_version", t.split(":", 1)[1], i)
                parsed += 1
            parsed += header_lines
            continue
        body = lines.slice(body_start, max(0, end - body_start))
        head = "\n".join(texts[body_start : min(end, body_start + 400)]).encode("utf-8", "replace")[:65536]
        base = (name.split("/")[-1].split() or [""])[0]
        det = registry.detect(head, base)
        parsed += header_lines
        if det.parser is None or det.parser.NAME == NAME:
            n = sum(1 for i in range(body_start, end) if not blank[i])
            unrecognized += n
            if n and len(notes) < MAX_NOTES:
                notes.append(f"section '{name[:80]}' (lines {first + body_start}-{first + end - 1}): no parser, {n} line(s) unrecognized")
            for i in range(body_start, end):
                if not blank[i] and len(examples) < 20:
                    examples.append((first + i, texts[i][:EXAMPLE_CHARS]))
                    break
            continue
        sub_ctx = FileContext(path=ctx.path, node=ctx.node, first_line=first + body_start,
                              year_hint=ctx.year_hint or (collected.year if collected else None), collected_at=collected)
        try:
            res = det.parser.parse(body, sub_ctx)
        except Exception as exc:  # noqa: BLE001 - one bad section must not lose the whole report
            n = sum(1 for i in range(body_start, end) if not blank[i])
            unrecognized += n
            notes.append(f"section '{name[:80]}': {det.parser.NAME} failed: {type(exc).__name__}: {exc}")
            continue
        parsed += res.parsed
        unrecognized += res.unrecognized
        partial = partial or res.partial
        if len(examples) < 20:
            examples.extend(res.unrecognized_examples[: 20 - len(examples)])
        notes.extend(f"section '{name[:60]}' ({det.parser.NAME}): {n}" for n in res.notes[:3])
        for table, df in res.tables.items():
            tables.setdefault(table, []).append(conform(df, table))
    if node_inv:
        tables.setdefault("inventory", []).append(conform(pl.DataFrame(node_inv), "inventory"))
    merged = {t: pl.concat(dfs, how="vertical") for t, dfs in tables.items()}
    merged = _fill_bus_ids(merged)
    if "inventory" in merged:
        inv = merged["inventory"]
        merged["inventory"] = inv.unique(subset=INVENTORY_KEY, keep="first", maintain_order=True)
    return ParseResult(
        tables=merged,
        parsed=parsed,
        unrecognized=unrecognized,
        unrecognized_examples=examples[:20],
        notes=notes,
        partial=partial,
        node=host,
    )


def _fill_bus_ids(tables: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """Give topology/NVLink rows (no bus id printed) the bus id of the same GPU index from `-q`/XML."""
    inv = tables.get("inventory")
    if inv is None or inv.height == 0:
        return tables
    known = (
        inv.filter((pl.col("component") == "gpu") & pl.col("gpu_bus_id").is_not_null() & pl.col("gpu_index").is_not_null())
        .filter(pl.col("source").is_in(["nvidia-smi-q", "nvidia-smi-xml", "nvidia-smi-table"]))
        .group_by("gpu_index")
        .agg(bus=pl.col("gpu_bus_id").first())
    )
    if known.height == 0:
        return tables
    out = dict(tables)
    for t in ("inventory", "events"):
        df = out.get(t)
        if df is None or df.height == 0:
            continue
        fill = pl.col("gpu_bus_id").is_null() & pl.col("gpu_index").is_not_null()
        if t == "inventory":
            fill = fill & (pl.col("source") == "nvidia-smi-topo")
        else:
            fill = fill & pl.col("kind").is_in(["nvlink_inactive", "nvlink_errors"])
        df = df.join(known, on="gpu_index", how="left", maintain_order="left")
        out[t] = df.with_columns(gpu_bus_id=pl.when(fill).then(pl.col("bus")).otherwise(pl.col("gpu_bus_id"))).drop("bus")
    return out
