"""perftest results (`ib_write_bw`, `ib_send_bw`, `ib_read_bw`, `ib_*_lat`): FORMATS.md §7.

One comms record `perftest` per result row:
- bandwidth tests: size_bytes (`#bytes`), count (`#iterations`), algbw_gbps = `BW average` converted to GB/s
  (10^9 bytes/s; perftest's `MB/sec` is 2^20 bytes/s, `Gb/sec` is 10^9 bits/s), value = the same average in
  Gb/s (line-rate units, comparable with ibstat `Rate`), detail = peak, average and unit as printed, MsgRate;
- latency tests: time_us = `t_avg`, detail = t_min, t_max, t_typical, t_stdev and the percentiles.
Each row carries `test` (the binary from a preceding command line, else the banner title), `device`
(`Device : mlx5_0`) and the banner's link type, GID index and connection type in detail; `ts` comes from a
preceding `date` line (RFC 2822 or `date` default form). The node is the file's (perftest prints no host).
"""

from __future__ import annotations

import re

import polars as pl

from parsers._common import json_detail as _json_detail
from parsers._common import split_envelopes
from parsers._sniff import head_text, may_match, required_literals
from parsers.base import FileContext, ParseResult, account, numbered
from parsers.nccl_tests import collector_time

NAME = "perftest"
DESCRIPTION = (
    "perftest RDMA benchmarks (ib_write_bw, ib_send_bw, ib_read_bw, ib_*_lat): banner and result rows"
)
TABLES = ("comms",)
FILENAME_HINTS = ("ib_*_bw*", "ib_*_lat*", "perftest*", "*ib_write*", "*ib_send*", "*ib_read*")
DETECTS = "a perftest banner ('RDMA_Write BW Test', ' Dual-port       : OFF') or its '#bytes #iterations' result header"
PRIORITY = 20

RULE_RE = r"^\s*-{20,}\s*$"
TITLE_RE = r"^\s+(?P<title>[\w* ]+ (?:BW|Lat|Latency|bidirectional BW) Test)\s*$"
PAIR_RE = (
    r"^ (?P<k1>[\w*][\w*./ -]*?)\s*: (?P<v1>\S.*?)(?:\t+\s*(?P<k2>[\w*][\w*./ -]*?)\s*: (?P<v2>\S.*?))?\s*$"
)
ADDR_RE = r"^\s*(?:local|remote) address:\s*LID\s+\S+|^\s*GID:\s*[\d:]+\s*$"
BW_HDR_RE = r"^\s*#bytes\s+#iterations\s+BW peak\[(?P<unit>[^\]]+)\]\s+BW average\[[^\]]+\]\s+MsgRate\[Mpps\]"
LAT_HDR_RE = r"^\s*#bytes\s+#iterations\s+t_min\[usec\]"
ROW_RE = r"^\s*\d+\s+\d+\s+[-\d.]+(?:\s+[-\d.]+)+\s*$"
BANNER_RE = r"^\*+\s*$|^\* Waiting for client to connect\.\.\. \*\s*$|^\s*Version:\s*\S+\s*$"
WARN_RE = (
    r"^\s*(?:-W-|WARNING:|Warning:|Conflicting CPU frequency|Max msg size in RC is|Requested mtu is higher)"
)
CMD_RE = r"(?:^|[\s/])(?P<test>ib_(?:write|read|send|atomic)_(?:bw|lat)|raw_ethernet_\w+)\b"
DATE_RFC_RE = r"^\s*(?:[A-Z][a-z]{2}, )?\d{1,2} [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d [+-]\d{4}\s*$"
DATE_DEFAULT_RE = r"^\s*[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d (?:UTC|GMT) \d{4}\s*$"

_SNIFF_BANNER = re.compile(r"(?m)^\s+[\w* ]+ (?:BW|Lat|Latency) Test\s*$")
_SNIFF_PAIR = re.compile(r"(?m)^ (?:Dual-port|Number of qps|Connection type|TX depth|Link type)\s*: ")
_SNIFF_HDR = re.compile(r"(?m)^\s*#bytes\s+#iterations\s+(?:BW peak|t_min)")
# literals each needs (parsers._sniff): `(?m)^\s+` spans blank lines, so over a head of thousands of blank
# lines these regexes are quadratic; they run only when they can match
_SNIFF_BANNER_LITS = ("BW Test", "Lat Test", "Latency Test")  # `(?:BW|Lat|Latency) Test`
_SNIFF_PAIR_LITS = required_literals(_SNIFF_PAIR)
_SNIFF_HDR_LITS = required_literals(_SNIFF_HDR)


def sniff(head: bytes, name: str) -> float:
    """Score the perftest banner and result header."""
    text = head_text(head)
    banner, pairs, hdr = (
        may_match(_SNIFF_BANNER_LITS, text) and bool(_SNIFF_BANNER.search(text)),
        len(_SNIFF_PAIR.findall(text)) if may_match(_SNIFF_PAIR_LITS, text) else 0,
        may_match(_SNIFF_HDR_LITS, text) and bool(_SNIFF_HDR.search(text)),
    )
    if (banner and pairs >= 2) or hdr:
        return 0.95
    if banner or pairs >= 3:
        return 0.7
    return 0.0


def json_detail(**fields: pl.Expr) -> pl.Expr:
    """JSON object of the non-null fields (null when all are null)."""
    js = _json_detail(**fields).str.replace_all(r'"[^"]+":null,?', "").str.replace(r",\}$", "}")
    return pl.when(js != "{}").then(js)


def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """Parse perftest banners and result rows into comms `perftest` records."""
    frame = numbered(lines, ctx)
    no_time, line_ts = collector_time(pl.col("text"))
    frame = frame.with_columns(_ts_prefix=line_ts, _rest=no_time)
    env = split_envelopes(pl.col("_rest"))
    f = frame.with_columns(b=env["rest"].str.strip_chars_end(), host=env["host"])
    b = pl.col("b")
    f = f.with_columns(
        k_rule=b.str.contains(RULE_RE),
        k_title=b.str.contains(TITLE_RE),
        k_pair=b.str.contains(PAIR_RE),
        k_addr=b.str.contains(ADDR_RE),
        k_bwhdr=b.str.contains(BW_HDR_RE),
        k_lathdr=b.str.contains(LAT_HDR_RE),
        k_row=b.str.contains(ROW_RE),
        k_banner=b.str.contains(BANNER_RE),
        k_warn=b.str.contains(WARN_RE),
        k_cmd=b.str.contains(CMD_RE),
        k_date=b.str.contains(DATE_RFC_RE) | b.str.contains(DATE_DEFAULT_RE),
    )
    pair = b.str.extract_groups(PAIR_RE)

    def pair_value(key: str) -> pl.Expr:
        k1 = pair.struct.field("k1").str.strip_chars()
        k2 = pair.struct.field("k2").str.strip_chars()
        return pl.when(k1 == key).then(pair.struct.field("v1")).when(k2 == key).then(pair.struct.field("v2"))

    rfc = (
        b.str.strip_chars()
        .str.replace(r"^[A-Z][a-z]{2}, ", "")
        .str.to_datetime("%d %b %Y %H:%M:%S %z", strict=False, time_unit="us")
        .dt.convert_time_zone("UTC")
    )
    dflt = (
        b.str.strip_chars()
        .str.replace(r" (?:UTC|GMT) (\d{4})$", " $1")
        .str.replace_all(r"\s+", " ")
        .str.to_datetime("%a %b %d %H:%M:%S %Y", strict=False, time_unit="us")
        .dt.replace_time_zone("UTC")
    )
    # the banner (title, pairs) precedes its rows; a new title resets the banner fields
    reset = pl.when(pl.col("k_title")).then(pl.lit(""))
    f = f.with_columns(
        test=pl.when(pl.col("k_cmd")).then(b.str.extract(CMD_RE, 1)).forward_fill(),
        title=pl.when(pl.col("k_title")).then(b.str.extract(TITLE_RE, 1)).forward_fill(),
        device=pl.coalesce(pl.when(pl.col("k_pair")).then(pair_value("Device")), reset).forward_fill(),
        link_type=pl.coalesce(pl.when(pl.col("k_pair")).then(pair_value("Link type")), reset).forward_fill(),
        gid_index=pl.coalesce(pl.when(pl.col("k_pair")).then(pair_value("GID index")), reset).forward_fill(),
        conn=pl.coalesce(pl.when(pl.col("k_pair")).then(pair_value("Connection type")), reset).forward_fill(),
        unit=pl.when(pl.col("k_bwhdr"))
        .then(b.str.extract(BW_HDR_RE, 1))
        .when(pl.col("k_lathdr"))
        .then(pl.lit("usec"))
        .forward_fill(),
        ts=pl.coalesce(
            pl.col("_ts_prefix"), pl.when(pl.col("k_date")).then(pl.coalesce(rfc, dflt)).forward_fill()
        ),
    ).with_columns(
        [
            pl.when(pl.col(c) != "").then(pl.col(c)).alias(c)
            for c in ("device", "link_type", "gid_index", "conn")
        ]
    )

    rows = f.filter(pl.col("k_row") & pl.col("unit").is_not_null()).with_columns(
        tok=b.str.extract_all(r"\S+").cast(pl.List(pl.Float64), strict=False)
    )
    is_lat = pl.col("unit") == "usec"
    t = pl.col("tok")
    rows = rows.filter(pl.when(is_lat).then(t.list.len() >= 7).otherwise(t.list.len() >= 5))
    factor = (
        pl.when(pl.col("unit") == "MB/sec").then(1048576 / 1e9).when(pl.col("unit") == "Gb/sec").then(1 / 8)
    )
    comms = rows.select(
        record=pl.lit("perftest"),
        ts="ts",
        node=pl.coalesce(pl.col("host"), pl.lit(ctx.node)),
        test=pl.coalesce("test", "title"),
        size_bytes=t.list.get(0).cast(pl.Int64),
        count=t.list.get(1).cast(pl.Int64),
        time_us=pl.when(is_lat).then(t.list.get(5, null_on_oob=True)),
        algbw_gbps=pl.when(~is_lat).then(t.list.get(3) * factor),
        device="device",
        counter=pl.when(~is_lat).then(pl.lit("bw_average_gbit_s")),
        value=pl.when(~is_lat).then(t.list.get(3) * factor * 8),
        detail=json_detail(
            title=pl.col("title"),
            unit=pl.col("unit"),
            bw_peak=pl.when(~is_lat).then(t.list.get(2)),
            bw_average=pl.when(~is_lat).then(t.list.get(3)),
            msg_rate_mpps=pl.when(~is_lat).then(t.list.get(4)),
            t_min=pl.when(is_lat).then(t.list.get(2)),
            t_max=pl.when(is_lat).then(t.list.get(3)),
            t_typical=pl.when(is_lat).then(t.list.get(4)),
            t_stdev=pl.when(is_lat).then(t.list.get(6, null_on_oob=True)),
            p99=pl.when(is_lat).then(t.list.get(7, null_on_oob=True)),
            p99_9=pl.when(is_lat).then(t.list.get(8, null_on_oob=True)),
            link_type=pl.col("link_type"),
            gid_index=pl.col("gid_index"),
            connection=pl.col("conn"),
        ),
        file=pl.lit(ctx.path),
        line="line",
    )
    ok_rows = rows.select("line", ok_row=pl.lit(True))
    f = f.join(ok_rows, on="line", how="left").with_columns(pl.col("ok_row").fill_null(False))
    understood = (
        pl.col("k_rule")
        | pl.col("k_title")
        | pl.col("k_pair")
        | pl.col("k_addr")
        | pl.col("k_bwhdr")
        | pl.col("k_lathdr")
        | pl.col("ok_row")
        | pl.col("k_banner")
        | pl.col("k_warn")
        | pl.col("k_cmd")
        | pl.col("k_date")
    )
    parsed, unrecognized, examples = account(f.select("line", "text", understood.alias("ok")), pl.col("ok"))
    # cut capture: a result header (or a cut row) with no complete row after it
    last = f.filter(pl.col("text").str.strip_chars().str.len_bytes() > 0).tail(1)
    partial = bool(last.height) and bool(
        (
            last.get_column("k_bwhdr")
            | last.get_column("k_lathdr")
            | (last.get_column("b").str.contains(r"^\s*\d+\s") & ~last.get_column("ok_row"))
        ).item()
    )
    return ParseResult(
        tables={"comms": comms},
        parsed=parsed,
        unrecognized=unrecognized,
        unrecognized_examples=examples,
        partial=partial,
    )
