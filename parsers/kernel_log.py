"""Kernel logs: dmesg (raw, -T, --time-format iso), journalctl -k and syslog kern.log/messages.

Foundation version: recognises the timestamp styles and extracts NVIDIA XID events. The kernel-log
issue extends it to every event family (SXid, AER, NIC links, OOM, hung tasks, ...).
"""

from __future__ import annotations

import re

import polars as pl

from parsers._common import json_detail, normalize_bus_id
from parsers.base import FileContext, ParseResult, account, numbered

NAME = "kernel-log"
DESCRIPTION = "Kernel ring buffer and syslog: dmesg (raw, -T, iso), journalctl -k, kern.log/messages"
TABLES = ("events",)
FILENAME_HINTS = ("dmesg*", "kern.log*", "messages*", "syslog*", "journal*", "*kmsg*")
DETECTS = "lines opening with a dmesg '[seconds]' or '[ctime]' stamp, an ISO time, or 'Mon DD HH:MM:SS host kernel:'"
PRIORITY = 10

# One entry per timestamp style: (name, regex with named groups `ts`/`up` and `host`, `msg`).
STYLES: tuple[tuple[str, str], ...] = (
    ("dmesg_raw", r"^(?:<\d+>)?\[\s*(?P<up>\d+\.\d+)\]\s?(?P<msg>.*)$"),
    ("dmesg_ctime", r"^\[(?P<ts>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\]\s?(?P<msg>.*)$"),
    (
        "dmesg_iso",
        r"^(?:\w+\s*:\s*\w+\s*: )?(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[,.]\d+[+-]\d\d:?\d\d)\s(?P<msg>.*)$",
    ),
    (
        "journal_iso",
        r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:?\d\d|Z))\s+(?P<host>\S+)\s+(?P<msg>.*)$",
    ),
    ("syslog", r"^(?P<ts>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d)\s+(?P<host>\S+)\s+(?P<msg>.*)$"),
)

XID_RE = (
    r"NVRM: Xid \(PCI:(?P<bus>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\): (?P<code>\d+),"
    r"(?: pid=(?P<pid>'?<unknown>'?|\d+),)?(?: name=(?P<pname>[^,]*),)? ?(?P<text>.*)$"
)

_SNIFF = [re.compile(p, re.M) for _, p in STYLES]


def sniff(head: bytes, name: str) -> float:
    """Score by the share of head lines that carry a kernel-log timestamp; NVRM lines add certainty."""
    text = head.decode("utf-8", "replace")
    lines = [ln for ln in text.splitlines()[:200] if ln.strip() and not ln.startswith("#")]
    if not lines:
        return 0.0
    hits = sum(1 for ln in lines if any(r.match(ln) for r in _SNIFF))
    share = hits / len(lines)
    if share < 0.5:
        return 0.0
    kernelish = "kernel:" in text or "NVRM" in text or re.search(r"^\[\s*\d+\.\d+\]", text, re.M)
    return 0.9 if kernelish else 0.5


def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """Parse the timestamp style of each line and extract XID events."""
    frame = numbered(lines, ctx)
    text = pl.col("text")
    matched = None
    ts = pl.lit(None, dtype=pl.Datetime("us", "UTC"))
    quality = pl.lit(None, dtype=pl.String)
    uptime = pl.lit(None, dtype=pl.Float64)
    host = pl.lit(None, dtype=pl.String)
    msg = pl.lit(None, dtype=pl.String)
    year = ctx.year_hint or (ctx.collected_at.year if ctx.collected_at else None)
    for style, pattern in reversed(STYLES):
        g = text.str.extract_groups(pattern)
        hit = g.struct.field("msg").is_not_null()
        matched = hit if matched is None else (matched | hit)
        msg = pl.when(hit).then(g.struct.field("msg")).otherwise(msg)
        if style == "dmesg_raw":
            uptime = pl.when(hit).then(g.struct.field("up").cast(pl.Float64)).otherwise(uptime)
            quality = pl.when(hit).then(pl.lit("unanchored")).otherwise(quality)
            continue
        raw = g.struct.field("ts")
        if style == "dmesg_ctime":
            t = raw.str.strptime(pl.Datetime("us"), "%a %b %e %H:%M:%S %Y", strict=False).dt.replace_time_zone(
                "UTC"
            )
            q = "local_assumed_utc"
        elif style in ("dmesg_iso", "journal_iso"):
            norm = raw.str.replace(",", ".").str.replace(r"([+-]\d\d)(\d\d)$", "$1:$2").str.replace("Z$", "+00:00")
            t = norm.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%:z", strict=False, time_unit="us").dt.convert_time_zone(
                "UTC"
            )
            q = "exact"
        else:  # syslog: no year
            if year is None:
                t = pl.lit(None, dtype=pl.Datetime("us", "UTC"))
                q = "none"
            else:
                t = (
                    (pl.lit(f"{year} ") + raw.str.replace(r"\s+", " "))
                    .str.strptime(pl.Datetime("us"), "%Y %b %d %H:%M:%S", strict=False)
                    .dt.replace_time_zone("UTC")
                )
                q = "year_inferred"
            host = pl.when(hit).then(g.struct.field("host")).otherwise(host)
        if style == "journal_iso":
            host = pl.when(hit).then(g.struct.field("host")).otherwise(host)
        ts = pl.when(hit).then(t).otherwise(ts)
        quality = pl.when(hit).then(pl.lit(q)).otherwise(quality)

    parsed_frame = frame.with_columns(
        ts=ts, ts_quality=quality, uptime_s=uptime, host=host, msg=msg.fill_null(text), ok=matched
    )
    parsed, unrecognized, examples = account(parsed_frame.select("line", "text", "ok"), pl.col("ok"))

    xid = (
        parsed_frame.filter(pl.col("msg").str.contains("NVRM: Xid", literal=True))
        .with_columns(x=pl.col("msg").str.extract_groups(XID_RE))
        .filter(pl.col("x").struct.field("code").is_not_null())
    )
    host_col = pl.col("host").str.split(".").list.first()
    events = xid.select(
        "ts",
        pl.col("ts_quality").fill_null("none"),
        "uptime_s",
        node=pl.coalesce(host_col if ctx.node == "unknown" else pl.lit(ctx.node), pl.lit(ctx.node)),
        gpu_bus_id=normalize_bus_id(pl.col("x").struct.field("bus")),
        source=pl.lit("kernel"),
        kind=pl.lit("xid"),
        code=pl.col("x").struct.field("code"),
        severity=pl.lit("unknown"),
        message=pl.col("text"),
        detail=json_detail(
            pid=pl.col("x").struct.field("pid").str.strip_chars("'"),
            process=pl.col("x").struct.field("pname"),
            text=pl.col("x").struct.field("text"),
        ),
        file=pl.lit(ctx.path),
        line=pl.col("line"),
    )
    hosts = parsed_frame.get_column("host").drop_nulls().str.split(".").list.first().unique()
    return ParseResult(
        tables={"events": events},
        parsed=parsed,
        unrecognized=unrecognized,
        unrecognized_examples=examples,
        node=hosts[0] if len(hosts) == 1 else None,
    )
