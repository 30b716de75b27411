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
from collections.abc import Sequence

import polars as pl

from forensics.schema import columns
from parsers._common import _ANY_ENVELOPE, split_envelopes
from parsers._common import json_detail as _json_detail
from parsers._small import FallbackError, account_texts, attempt, json_object, small_texts
from parsers._small import parse_many as small_parse_many
from parsers._sniff import cheap_requirements, head_text, holds, probed, required_literals
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
# the same gates as several requirements each, tested cheapest first (`parsers._sniff.cheap_requirements`)
_SNIFF_BANNER_REQS = (
    *cheap_requirements(_SNIFF_BANNER),
    tuple(map(probed, _SNIFF_BANNER_LITS)),
)
_SNIFF_PAIR_REQS = cheap_requirements(_SNIFF_PAIR)
_PROBES = {" Test": "Test", "Link type": "type", "Number of qps": "qps"}
"""Probes (`parsers._sniff.probed`: a piece of a string searched before it) for strings with blanks: a needle
with blanks is slow over the blanks of aligned tool output; these pieces have none and nvidia-smi -q text
lacks them ('Number', the default piece of 'Number of qps', it holds). Per head of the 100-node bundle,
perftest's sniff 19.5 -> 15.3 ms for its 1,100 heads (nvidia-smi -q 58 -> 34 us, NCCL logs 22 -> 26)."""
_SNIFF_BANNER_REQS, _SNIFF_PAIR_REQS = (
    tuple(tuple((g, g2, x, _PROBES.get(x, p)) for g, g2, x, p in req) for req in reqs)
    for reqs in (_SNIFF_BANNER_REQS, _SNIFF_PAIR_REQS)
)
_SNIFF_HDR_REQS = cheap_requirements(_SNIFF_HDR)


def sniff(head: bytes, name: str) -> float:
    """Score the perftest banner and result header."""
    text = head_text(head)
    if holds(_SNIFF_HDR_REQS, text) and _SNIFF_HDR.search(text):
        return 0.95  # (a result header scores this whatever the banner and pairs)
    banner = holds(_SNIFF_BANNER_REQS, text) and bool(_SNIFF_BANNER.search(text))
    pairs = len(_SNIFF_PAIR.findall(text)) if holds(_SNIFF_PAIR_REQS, text) else 0
    if banner and pairs >= 2:
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
    texts = small_texts(lines, SMALL_LINES)
    small = _parse_small(texts, ctx) if texts is not None else None
    return small if small is not None else _parse_frames(lines, ctx)


def _parse_frames(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """`parse` with polars expressions over the column of lines (any input)."""
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

    rfc, dflt = _date_times(b)
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
        size_bytes=t.list.get(0).cast(pl.Int64, strict=False),  # (a number Int64 cannot hold: null)
        count=t.list.get(1).cast(pl.Int64, strict=False),
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


# ----------------------------------------------------------------------------- small files: plain Python

# A perftest capture is a few dozen lines; the vectorised path costs ~30 eager polars operations and the
# compiles of ~20 regexes (polars keeps ~32 per thread; other formats' files evict these): ~4-8 ms per file.
# `_parse_small` reads it line by line with Python's `re` (compiled once); `date` lines are read by the
# vectorised expressions on those lines only. Anything it does not promise to reproduce exactly returns None
# and goes the vectorised way: a collector time prefix, a launcher prefix, non-ASCII or control characters,
# numbers polars would read or print differently (exponents, NaN/inf words), strings JSON would escape.

SMALL_LINES = 1500
"""At most this many lines (and 256 KiB) take the plain-Python path (about where the two cost the same)."""

_RX = {
    k: re.compile(v)
    for k, v in {
        "rule": RULE_RE, "title": TITLE_RE, "pair": PAIR_RE, "addr": ADDR_RE, "bwhdr": BW_HDR_RE,
        "lathdr": LAT_HDR_RE, "row": ROW_RE, "banner": BANNER_RE, "warn": WARN_RE, "cmd": CMD_RE,
        "rfc": DATE_RFC_RE, "dflt": DATE_DEFAULT_RE, "cut": r"^\s*\d+\s",
    }.items()
}  # fmt: skip
_COLLECTOR_NEED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
_ANY_ENV_TEXT = re.compile(_ANY_ENVELOPE, re.MULTILINE)  # a match anywhere: some line may open with one
_FLOAT_TOK = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)$")
_I63 = 2**63

COMMS_SCHEMA = columns(
    "comms",
    "record", "ts", "node", "test", "size_bytes", "count", "time_us", "algbw_gbps", "device", "counter",
    "value", "detail", "file", "line",
)



def _i64(v: float) -> int | None:
    """`cast(pl.Int64, strict=False)` of a row's number: None where Int64 cannot hold it."""
    return int(v) if -_I63 <= v < _I63 else None


def _num(tok: str) -> float:
    """`cast(pl.Float64, strict=False)` of a row token (plain decimals only; anything else: fall back)."""
    if not _FLOAT_TOK.search(tok):
        raise FallbackError
    return float(tok)




def _date_times(b: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """UTC times of `date` lines: the RFC 2822 form (`date -R`) and the default form (`date`)."""
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
    return rfc, dflt


def _parse_small(texts: list[str], ctx: FileContext) -> ParseResult | None:
    """`parse` in plain Python for a small capture, or None (see above)."""
    return _parse_small_many([(texts, ctx)])[0]


def parse_many(items: Sequence[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
    """`[parse(lines, ctx) for lines, ctx in items]`: the small files the plain-Python path reads are read
    together (`date` lines in one select, the table built once for all of them, then cut per file); the
    others are parsed one by one."""
    return small_parse_many(items, SMALL_LINES, _parse_small_many, _parse_frames)


def _prepare(texts: list[str]) -> tuple[list[str], list[bool]]:
    """A file's lines without trailing blanks, and which are `date` lines."""
    rx = _RX
    bodies = [t.rstrip() for t in texts]
    return bodies, [bool(b) and bool(rx["rfc"].search(b) or rx["dflt"].search(b)) for b in bodies]


def _parse_small_many(files: list[tuple[list[str], FileContext]]) -> list[ParseResult | None]:
    """`_parse_small` of each file: the `date` lines of all the files it reads in one select, the table built
    once for all of them and cut per file."""
    prepared = [
        attempt(texts, lambda _, texts=texts: _prepare(texts), _COLLECTOR_NEED.search, _ANY_ENV_TEXT.search)
        for texts, _ in files
    ]  # (attempt hands back what its reader returns)
    # `date` lines: read by the vectorised expressions (on those lines only), so the times are polars' own
    dates = [b for p in prepared if p is not None for b, d in zip(*p) if d]
    times = iter([])
    if dates:
        rfc, dflt = _date_times(pl.col("b"))
        got = pl.DataFrame({"b": dates}, schema={"b": pl.String}).select(ts=pl.coalesce(rfc, dflt))
        times = iter(got.get_column("ts").to_list())
    read: list[tuple | None] = []
    for (texts, ctx), p in zip(files, prepared):
        if p is None:
            read.append(None)
            continue
        bodies, is_date = p
        date_ts = {i: next(times) for i, d in enumerate(is_date) if d}
        try:
            read.append(_small_rows(texts, ctx, bodies, is_date, date_ts))
        except FallbackError:
            read.append(None)
    cols: dict[str, list] = {c: [] for c in COMMS_SCHEMA}
    for r in read:
        if r is not None:
            for c, vals in r[0].items():
                cols[c].extend(vals)
    comms = pl.DataFrame(cols, schema=COMMS_SCHEMA)
    out: list[ParseResult | None] = []
    offset = 0
    for r in read:
        if r is None:
            out.append(None)
            continue
        part, parsed, unrecognized, examples, partial = r
        n = len(part["line"])
        out.append(
            ParseResult(
                tables={"comms": comms.slice(offset, n)},
                parsed=parsed,
                unrecognized=unrecognized,
                unrecognized_examples=examples,
                partial=partial,
            )
        )
        offset += n
    return out


def _small_rows(  # noqa: C901, PLR0912, PLR0915
    texts: list[str], ctx: FileContext, bodies: list[str], is_date: list[bool], date_ts: dict[int, object]
) -> tuple[dict[str, list], int, int, list[tuple[int, str]], bool]:
    """One file read line by line: (its comms columns as lists, parsed, unrecognized, examples, partial)."""
    rx = _RX
    first = ctx.first_line
    test = title = unit = ts = None
    banner: dict[str, str | None] = dict.fromkeys(("Device", "Link type", "GID index", "Connection type"))
    oks: list[bool] = [True] * len(texts)
    flags: list[bool] = [False] * len(texts)  # result header lines (for a cut capture)
    rows: list[tuple] = []
    for i, b in enumerate(bodies):
        if not b:
            continue
        k_rule = rx["rule"].search(b)
        m_title = rx["title"].search(b)
        m_pair = rx["pair"].search(b) if ": " in b else None
        k_addr = rx["addr"].search(b)
        m_bwhdr = rx["bwhdr"].search(b) if "#bytes" in b else None
        k_lathdr = rx["lathdr"].search(b) if "#bytes" in b else None
        k_row = rx["row"].search(b)
        k_banner = rx["banner"].search(b)
        k_warn = rx["warn"].search(b)
        m_cmd = rx["cmd"].search(b)
        if m_cmd:
            test = m_cmd.group("test")
        if m_title:
            title = m_title.group("title")
            for k in banner:
                banner[k] = ""
        if m_pair:
            k1, v1, k2, v2 = m_pair.group("k1", "v1", "k2", "v2")
            k1, k2 = k1.strip(), (k2.strip() if k2 is not None else None)
            for k in banner:
                v = v1 if k1 == k else v2 if k2 == k else None
                if v is not None:
                    banner[k] = v
        if m_bwhdr:
            unit = m_bwhdr.group("unit")
        elif k_lathdr:
            unit = "usec"
        if is_date[i] and date_ts[i] is not None:
            ts = date_ts[i]
        flags[i] = bool(m_bwhdr or k_lathdr)
        ok_row = False
        if k_row and unit is not None:
            tok = [_num(t) for t in b.split()]
            lat = unit == "usec"
            if len(tok) >= (7 if lat else 5):
                ok_row = True
                rows.append((i, tok, lat, unit, test if test is not None else title, title, ts,
                             *(banner[k] or None for k in banner)))  # fmt: skip
        oks[i] = bool(
            k_rule or m_title or m_pair or k_addr or m_bwhdr or k_lathdr or ok_row or k_banner or k_warn
            or m_cmd or is_date[i]
        )  # fmt: skip
    cols: dict[str, list] = {c: [] for c in COMMS_SCHEMA}
    for i, tok, lat, unit_, test_, title_, ts_, device, link_type, gid_index, conn in rows:
        factor = 1048576 / 1e9 if unit_ == "MB/sec" else 1 / 8 if unit_ == "Gb/sec" else None
        avg = tok[3] * factor if not lat and factor is not None else None

        def get(j: int, tok: list[float] = tok) -> float | None:
            return tok[j] if j < len(tok) else None

        cols["record"].append("perftest")
        cols["ts"].append(ts_)
        cols["node"].append(ctx.node)
        cols["test"].append(test_)
        cols["size_bytes"].append(_i64(tok[0]))
        cols["count"].append(_i64(tok[1]))
        cols["time_us"].append(get(5) if lat else None)
        cols["algbw_gbps"].append(avg)
        cols["device"].append(device)
        cols["counter"].append(None if lat else "bw_average_gbit_s")
        cols["value"].append(avg * 8 if avg is not None else None)
        cols["detail"].append(
            json_object(
                ("title", title_), ("unit", unit_), ("bw_peak", None if lat else tok[2]),
                ("bw_average", None if lat else tok[3]), ("msg_rate_mpps", None if lat else tok[4]),
                ("t_min", tok[2] if lat else None), ("t_max", tok[3] if lat else None),
                ("t_typical", tok[4] if lat else None), ("t_stdev", get(6) if lat else None),
                ("p99", get(7) if lat else None), ("p99_9", get(8) if lat else None),
                ("link_type", link_type), ("gid_index", gid_index), ("connection", conn),
            )  # fmt: skip
        )
        cols["file"].append(ctx.path)
        cols["line"].append(first + i)
    parsed, unrecognized, examples, last = account_texts(texts, oks, first)
    row_lines = {r[0] for r in rows}
    partial = last is not None and (
        flags[last] or (bool(rx["cut"].search(bodies[last])) and last not in row_lines)
    )
    return cols, parsed, unrecognized, examples, partial
