"""InfiniBand tools (FORMATS.md §4): ibstat, ibstatus, ibv_devinfo, sysfs dumps, perfquery, mlxlink, ibdev2netdev.

What comes out:
- `inventory` (component `nic`, `device` e.g. `mlx5_0`, `port` for per-port attributes): fw_ver, hca_type,
  board_id, node_guid, port_guid, state, phys_state, rate, link_layer, ... Values are normalised across the tools:
  state `Active|Down|Initializing|Armed` (ibstatus `4: ACTIVE`, ibv_devinfo `PORT_ACTIVE (4)` and sysfs map to
  these), phys_state `LinkUp|Polling|Disabled|...`, rate in Gb/s as a number (`200 Gb/sec (4X HDR)` -> `200`,
  the `4X HDR` part as `link_width_speed`), GUIDs as `0x` + 16 hex digits.
- `events` (source `ib`): `ib_port_down` for a port whose state is Down, `ib_port_not_active` for
  Initializing/Armed; severity `medium` (an unused or Ethernet port is often down on purpose: analysis compares
  with the fleet); `ib_tool_error` for `ibpanic:` (the tool aborted: the file is marked partial).
- `comms` record `ib_counter`: one row per port counter reading (sysfs `counters/*`, `hw_counters/*`,
  `perfquery` classic and `-x`, mlxlink error counters and BER). Counter names use the sysfs spelling
  (`SymbolErrorCounter` -> `symbol_error`, `-x` `PortXmitData` -> `port_xmit_data`; the 32-bit classic data and
  packet counters get a `_32` suffix; the tool's own name stays in
  `detail.name`); unmapped names are kept as printed. `ts` comes from the last preceding `date`-style line of the
  same host (RFC 2822, `date` default, ISO 8601, epoch), and `detail.reading` numbers the repeated readings of a
  counter in the file (0, 1, ...), so two dumps in one file stay apart for deltas.
- sysfs dumps in the `grep -H .`/`grep .` (`path:value`), `echo $f $(cat $f)` (`path value`) and `head`
  (`==> path <==` then the value) forms; `ibdev2netdev` lines give `netdev`/`netdev_state` (Down -> an event).
- A pdsh-style `host: ` prefix names the node of its line; otherwise the node is the file's.
perfquery does not print the device name: it is taken from `-C <ca>` on a preceding command line or a
`mlx5_N` marker line, else it is `lid:<lid>`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import polars as pl

from forensics.schema import columns
from parsers._common import _ANY_ENVELOPE, format_str, repeated, split_envelopes
from parsers._common import json_detail as _json_detail
from parsers._small import MAX_BYTES, FallbackError, json_object, small_texts
from parsers._small import UNSAFE as _UNSAFE
from parsers._small import parse_many as small_parse_many
from parsers._sniff import cheap_requirements, head_text, holds, may_match, required_literals
from parsers.base import MAX_EXAMPLES, FileContext, ParseResult, account, numbered
from parsers.nccl_tests import COLLECTOR_TIME_RE, collector_time

NAME = "infiniband"
DESCRIPTION = "InfiniBand tools: ibstat, ibstatus, ibv_devinfo, /sys/class/infiniband dumps, perfquery, mlxlink, ibdev2netdev"
TABLES = ("inventory", "events", "comms")
FILENAME_HINTS = (
    "ibstat*", "ibstatus*", "ibv_devinfo*", "perfquery*", "*infiniband*", "mlxlink*", "*ib_counters*", "ibdev2netdev*",
)  # fmt: skip
DETECTS = (
    "ibstat 'CA '...'' blocks, ibstatus 'Infiniband device' blocks, 'hca_id:', /sys/class/infiniband paths, "
    "perfquery dotted counters, mlxlink 'Operational Info', ibdev2netdev 'mlx5_0 port 1 ==> ib0 (Up)'"
)
PRIORITY = 20

# ----------------------------------------------------------------------------- grammar

PDSH_RE = r"^(?P<host>[A-Za-z0-9][\w.-]*): (?P<rest>(?:\s|CA '|Infiniband device|/sys/|#|hca_id|ibpanic|ibwarn|\w+:\.\.).*)$"
CA_RE = r"^CA '(?P<dev>[^']+)'\s*$"
IBSTATUS_RE = r"^Infiniband device '(?P<dev>[^']+)' port (?P<port>\d+) status:\s*$"
HCA_ID_RE = r"^hca_id:\s*(?P<dev>\S+)\s*$"
PORT_RE = r"^\s+Port (?P<port>\d+):\s*$"
DEVINFO_PORT_RE = r"^\s+port:\s*(?P<port>\d+)\s*$"
KV_RE = r"^\s+(?P<key>[A-Za-z][\w ]*?|GID\[\s*\d+\])\s*:\s*(?P<val>.*?)\s*$"
SYSFS_RE = (
    r"^(?:/sys/class/infiniband/)?(?P<dev>[\w.-]+)/(?:ports/(?P<port>\d+)/)?"
    r"(?:(?P<grp>[\w.-]+(?:/[\w.-]+)*)/)?(?P<key>[\w.-]+)(?::\s?|\s+)(?P<val>.*?)\s*$"
)
SYSFS_PATH_RE = r"^(?:/sys/class/infiniband/)?(?P<dev>[\w.-]+)/(?:ports/(?P<port>\d+)/)?(?:(?P<grp>[\w./-]+)/)?(?P<key>[\w.-]+)$"
HEAD_RE = r"^==> (/sys/class/infiniband/\S+|[\w.-]+/ports/\d+/\S+) <==\s*$"
CAT_RE = r"^(?:\S*[#$%>]\s*)?(?:\+\s*)?(?:sudo\s+)?cat\s+(/sys/class/infiniband/[^\s*?\[]+)\s*$"
IBDEV2NETDEV_RE = r"^(?P<dev>[\w.-]+) port (?P<port>\d+) ==> (?P<netdev>\S+) \((?P<state>\w+)\)\s*$"
PQ_HDR_RE = r"^#\s*Port (?P<what>[\w ]*?counters):\s*Lid\s+(?P<lid>\d+)\s+port\s+(?P<port>\d+)"
PQ_CTR_RE = r"^(?P<name>[A-Za-z]\w*):\.+\s*(?P<val>\S+)\s*$"
IBPANIC_RE = r"^(?P<tool>ibpanic|ibwarn|iberror):\s*(?:\[(?P<pid>\d+)\]\s*)?(?P<msg>.*)$"
MLX_KV_RE = r"^(?P<key>[A-Z][\w ./()\[\]%-]*?)\s+:\s+(?P<val>.*?)\s*$"
MLX_SECTION_RE = r"^(?:Operational Info|Supported Info|Troubleshooting Info|Physical Counters and BER Info|Module Info|Test Mode Info|Eye Opening Info|FEC Capability Info|Link Down Info|Port Info|Info)\s*$"
RULE_RE = r"^\s*(?:-{3,}|={3,}|\*{3,})\s*$"
MARKER_RE = r"^[=#\-\s]*(?:device\s*[:=]?\s*)?(?P<dev>mlx\d?_\w+|hfi\d_\d+|irdma\d+|bnxt_re\d+|efa_\d+|qedr\d+)(?:\s+port\s+(?P<port>\d+))?[=#\-\s:]*$"
CMD_RE = (
    r"^(?:\S*[#$%>]\s*)?(?:\+\s*)?(?:sudo\s+)?(?:\S*/)?(?:ibstat|ibstatus|ibv_devinfo|perfquery|mlxlink|ibdiagnet|"
    r"cat|grep|for|echo|date|ls|find|head|tail|while|do|done)\b"
)
PQ_CA_RE = r"(?:-C|--Ca)\s*(?P<dev>[\w.-]+)"
MLX_DEV_RE = r"\bmlxlink\b.*?(?:-d|--dev(?:ice)?)\s*(?P<dev>\S+)"
TS_PATTERNS: tuple[tuple[str, str, str], ...] = (
    # (regex, strptime format or special, ts_quality)
    (r"^(?:[A-Z][a-z]{2}, )?\d{1,2} [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d [+-]\d{4}$", "rfc2822", "exact"),
    (r"^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d (?:UTC|GMT) \d{4}$", "date_utc", "exact"),
    (
        r"^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d (?:[A-Z]{2,5} )?\d{4}$",
        "date_local",
        "local_assumed_utc",
    ),
    (r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)$", "iso_offset", "exact"),
    (r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?$", "iso_local", "local_assumed_utc"),
    (r"^\d{10}(?:\.\d+)?$", "epoch", "exact"),
)
TS_STRIP_RE = (
    r"^[#=\-\s\[]*(?:(?:date|time|timestamp|collected(?: at)?|reading(?: at)?)\s*[:=]?\s*)?|[\]=\-\s#]*$"
)

# key maps: printed key -> canonical attribute (lower-cased keys)
IBSTAT_KEYS = {
    "ca type": "hca_type", "number of ports": "num_ports", "firmware version": "fw_ver",
    "hardware version": "hw_ver", "node guid": "node_guid", "system image guid": "sys_image_guid",
    "state": "state", "physical state": "phys_state", "rate": "rate", "base lid": "base_lid", "lmc": "lmc",
    "sm lid": "sm_lid", "capability mask": "cap_mask", "port guid": "port_guid", "link layer": "link_layer",
}  # fmt: skip
IBSTATUS_KEYS = {
    "default gid": "default_gid", "base lid": "base_lid", "sm lid": "sm_lid", "state": "state",
    "phys state": "phys_state", "rate": "rate", "link_layer": "link_layer",
}  # fmt: skip
DEVINFO_KEYS = {
    "transport": "transport", "fw_ver": "fw_ver", "node_guid": "node_guid", "sys_image_guid": "sys_image_guid",
    "vendor_id": "vendor_id", "vendor_part_id": "vendor_part_id", "hw_ver": "hw_ver", "board_id": "board_id",
    "phys_port_cnt": "num_ports", "state": "state", "phys_state": "phys_state", "max_mtu": "max_mtu",
    "active_mtu": "active_mtu", "sm_lid": "sm_lid", "port_lid": "base_lid", "link_layer": "link_layer",
    "active_width": "active_width", "active_speed": "active_speed",
}  # fmt: skip
SYSFS_KEYS = {
    "fw_ver": "fw_ver", "board_id": "board_id", "hca_type": "hca_type", "node_guid": "node_guid",
    "sys_image_guid": "sys_image_guid", "hw_rev": "hw_ver", "node_desc": "node_desc", "node_type": "node_type",
    "state": "state", "phys_state": "phys_state", "rate": "rate", "link_layer": "link_layer", "lid": "base_lid",
    "sm_lid": "sm_lid", "cap_mask": "cap_mask",
}  # fmt: skip
MLXLINK_KEYS = {
    "state": "state", "physical state": "phys_state", "speed": "speed", "width": "width", "fec": "fec",
    "recommendation": "mlxlink_recommendation", "status opcode": "mlxlink_status_opcode",
    "vendor name": "cable_vendor", "vendor part number": "cable_part_number", "vendor serial number": "cable_serial",
}  # fmt: skip
MLXLINK_COUNTERS = {
    "effective physical errors": "effective_physical_errors", "effective physical ber": "effective_physical_ber",
    "raw physical ber": "raw_physical_ber", "symbol errors": "symbol_errors", "symbol ber": "symbol_ber",
    "link down counter": "link_downed", "link error recovery counter": "link_error_recovery",
    "time since last clear [min]": "time_since_last_clear_min",
}  # fmt: skip
# perfquery names -> sysfs names (same units: the data counters are 4-byte words in both)
PERFQUERY_COUNTERS = {
    "SymbolErrorCounter": "symbol_error", "LinkErrorRecoveryCounter": "link_error_recovery",
    "LinkDownedCounter": "link_downed", "PortRcvErrors": "port_rcv_errors",
    "PortRcvRemotePhysicalErrors": "port_rcv_remote_physical_errors",
    "PortRcvSwitchRelayErrors": "port_rcv_switch_relay_errors", "PortXmitDiscards": "port_xmit_discards",
    "PortXmitConstraintErrors": "port_xmit_constraint_errors", "PortRcvConstraintErrors": "port_rcv_constraint_errors",
    "LocalLinkIntegrityErrors": "local_link_integrity_errors",
    "ExcessiveBufferOverrunErrors": "excessive_buffer_overrun_errors", "VL15Dropped": "VL15_dropped",
    "PortXmitData": "port_xmit_data", "PortRcvData": "port_rcv_data", "PortXmitPkts": "port_xmit_packets",
    "PortRcvPkts": "port_rcv_packets", "PortXmitWait": "port_xmit_wait",
    "PortUnicastXmitPkts": "unicast_xmit_packets", "PortUnicastRcvPkts": "unicast_rcv_packets",
    "PortMulticastXmitPkts": "multicast_xmit_packets", "PortMulticastRcvPkts": "multicast_rcv_packets",
}  # fmt: skip
PQ_NOT_COUNTERS = ("PortSelect", "CounterSelect", "CounterSelect2")
# NOTE: the classic (non -x) data/packet counters are 32 bits and saturate; they get a `_32` suffix so they are
# never mixed with the 64-bit sysfs / `perfquery -x` series of the same name when deltas are taken.
PQ_32BIT = ("PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts")

STATE_WORDS = {"down": "Down", "init": "Initializing", "initializing": "Initializing", "initialize": "Initializing",
               "armed": "Armed", "active": "Active", "activedefer": "ActiveDefer"}  # fmt: skip
STATE_CODES = {"1": "Down", "2": "Initializing", "3": "Armed", "4": "Active", "5": "ActiveDefer"}
PHYS_WORDS = {"sleep": "Sleep", "polling": "Polling", "disabled": "Disabled",
              "portconfigurationtraining": "PortConfigurationTraining", "linkup": "LinkUp",
              "linkerrorrecovery": "LinkErrorRecovery", "phytest": "PhyTest"}  # fmt: skip
PHYS_CODES = {"1": "Sleep", "2": "Polling", "3": "Disabled", "4": "PortConfigurationTraining", "5": "LinkUp",
              "6": "LinkErrorRecovery", "7": "PhyTest"}  # fmt: skip

_SNIFF = (
    (re.compile(r"(?m)^(?:[\w.-]+: )?CA '[^']+'\s*$"), re.compile(r"(?m)^\s+CA type:"), 1.0),
    (re.compile(r"(?m)^(?:[\w.-]+: )?Infiniband device '[^']+' port \d+ status:"), None, 1.0),
    (re.compile(r"(?m)^(?:[\w.-]+: )?hca_id:\s*\S+"), re.compile(r"(?m)^\s+(?:transport|fw_ver):"), 0.95),
    (re.compile(r"(?m)^(?:[\w.-]+: )?/sys/class/infiniband/[\w.-]+/"), None, 0.95),
    (re.compile(r"(?m)^(?:[\w.-]+: )?[\w.-]+/ports/\d+/(?:hw_)?counters/\w+[: ]"), None, 0.9),
    (re.compile(r"(?m)^(?:[\w.-]+: )?#\s*Port (?:extended )?counters:\s*Lid"), None, 1.0),
    (re.compile(r"(?m)^(?:SymbolErrorCounter|PortXmitData|PortRcvErrors|LinkDownedCounter):\.+"), None, 0.9),
    (re.compile(r"(?m)^ibpanic:"), None, 0.8),
    (re.compile(r"(?m)^(?:[\w.-]+: )?[\w.-]+ port \d+ ==> \S+ \((?:Up|Down)\)\s*$"), None, 0.9),
    (re.compile(r"(?m)^==> /sys/class/infiniband/\S+ <==\s*$"), None, 0.95),
    (re.compile(r"(?m)^Operational Info\s*$"), re.compile(r"(?m)^Physical state\s+:"), 0.8),
)


_SNIFF_LITS = tuple(
    (required_literals(a), required_literals(b) if b is not None else None) for a, b, _ in _SNIFF
)
"""Literals each signature's regexes need (parsers._sniff): a regex runs only when one is in the head."""
_SNIFF_REQS = tuple(
    (cheap_requirements(a), cheap_requirements(b) if b is not None else None) for a, b, _ in _SNIFF
)
"""The same gates as several requirements each, cheapest first (`parsers._sniff.cheap_requirements`)."""


def sniff(head: bytes, name: str) -> float:
    """Score the strongest InfiniBand tool signature found in the head."""
    text = head_text(head)
    best = 0.0
    for (first, second, score), (reqs1, reqs2) in zip(_SNIFF, _SNIFF_REQS):
        if score <= best or not holds(reqs1, text) or (reqs2 is not None and not holds(reqs2, text)):
            continue
        if first.search(text) and (second is None or second.search(text)):
            best = max(best, score)
    return best


# ----------------------------------------------------------------------------- helpers


def json_detail(**fields: pl.Expr) -> pl.Expr:
    """JSON object of the non-null fields (null when all are null)."""
    js = _json_detail(**fields).str.replace_all(r'"[^"]+":null,?', "").str.replace(r",\}$", "}")
    return pl.when(js != "{}").then(js)


def _plain_json_detail(fields: dict[str, pl.Expr], strings: tuple[str, ...]) -> pl.Expr:
    """`json_detail(**fields)` for values JSON prints as they are (integers; strings with no quote, backslash
    or control character): the non-null members joined, no struct encoding and null-stripping regexes."""
    parts = [
        pl.when(e.is_not_null()).then(
            pl.concat_str([pl.lit(f'"{k}":"'), e, pl.lit('"')])
            if k in strings
            else pl.concat_str([pl.lit(f'"{k}":'), e.cast(pl.String)])
        )
        for k, e in fields.items()
    ]
    js = pl.concat_str([pl.lit("{"), pl.concat_str(parts, separator=",", ignore_nulls=True), pl.lit("}")])
    return pl.when(js != "{}").then(js)


def _map(expr: pl.Expr, mapping: dict[str, str]) -> pl.Expr:
    return expr.replace_strict(mapping, default=None, return_dtype=pl.String)


def _normalise(attr: pl.Expr, val: pl.Expr) -> pl.Expr:
    """Normalise a value by its canonical attribute (state, phys_state, rate, GUIDs)."""
    code = val.str.extract(r"^(\d+):", 1).fill_null(val.str.extract(r"\((\d+)\)\s*$", 1))
    word = (
        val.str.replace(r"^\d+:\s*", "")
        .str.replace(r"\s*\(\d+\)\s*$", "")
        .str.replace(r"(?i)^PORT_", "")
        .str.replace_all(r"[_\s]", "")
        .str.to_lowercase()
    )
    state = pl.coalesce(_map(code, STATE_CODES), _map(word, STATE_WORDS), val)
    phys = pl.coalesce(_map(code, PHYS_CODES), _map(word, PHYS_WORDS), val)
    rate = pl.coalesce(val.str.extract(r"^(\d+(?:\.\d+)?)(?:\s*Gb/sec)?(?:\s|\(|$)", 1), val)
    guid_hex = val.str.replace_all(":", "").str.replace(r"(?i)^0x", "").str.to_lowercase()
    guid = (
        pl.when(guid_hex.str.contains(r"^[0-9a-f]{1,16}$"))
        .then(pl.lit("0x") + guid_hex.str.zfill(16))
        .otherwise(val)
    )
    return (
        pl.when(attr == "state")
        .then(state)
        .when(attr == "phys_state")
        .then(phys)
        .when(attr == "rate")
        .then(rate)
        .when(attr.is_in(["node_guid", "sys_image_guid", "port_guid"]))
        .then(guid)
        .when(attr.is_in(["base_lid", "sm_lid"]) & val.str.contains(r"(?i)^0x[0-9a-f]+$"))
        .then(val.str.slice(2).str.to_integer(base=16, strict=False).cast(pl.String))
        .otherwise(val)
    )


def _timestamps(text: pl.Expr) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """Return (is a timestamp line, ts, ts_quality) for `date`-style lines."""
    t = text.str.replace_all(TS_STRIP_RE, "")
    hit = pl.lit(False)
    ts = pl.lit(None, dtype=pl.Datetime("us", "UTC"))
    quality = pl.lit(None, dtype=pl.String)
    for pattern, kind, q in reversed(TS_PATTERNS):
        m = t.str.contains(pattern)
        if kind == "rfc2822":
            v = (
                t.str.replace(r"^[A-Z][a-z]{2}, ", "")
                .str.to_datetime("%d %b %Y %H:%M:%S %z", strict=False, time_unit="us")
                .dt.convert_time_zone("UTC")
            )
        elif kind in ("date_utc", "date_local"):
            v = (
                t.str.replace(r" [A-Z]{2,5} (\d{4})$", " $1")
                .str.replace_all(r"\s+", " ")
                .str.to_datetime("%a %b %d %H:%M:%S %Y", strict=False, time_unit="us")
                .dt.replace_time_zone("UTC")
            )
        elif kind == "iso_offset":
            v = (
                t.str.replace(",", ".")
                .str.replace("T", " ")
                .str.replace(r"Z$", "+00:00")
                .str.replace(r"([+-]\d\d)(\d\d)$", "$1:$2")
                .str.to_datetime("%Y-%m-%d %H:%M:%S%.f%:z", strict=False, time_unit="us")
                .dt.convert_time_zone("UTC")
            )
        elif kind == "iso_local":
            v = (
                t.str.replace(",", ".")
                .str.replace("T", " ")
                .str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us")
                .dt.replace_time_zone("UTC")
            )
        else:  # epoch seconds
            v = (
                (t.cast(pl.Float64, strict=False) * 1_000_000)
                .cast(pl.Int64, strict=False)
                .cast(pl.Datetime("us"))
                .dt.replace_time_zone("UTC")
            )
        hit = hit | m
        ts = pl.when(m).then(v).otherwise(ts)
        quality = pl.when(m).then(pl.lit(q)).otherwise(quality)
    return hit, ts, quality


# ----------------------------------------------------------------------------- parse

_EMPTY: dict[tuple, object] = {}


def _section(name: str, present: bool, fn, *frames: pl.DataFrame):  # noqa: ANN001, ANN202
    """`fn(*frames)`, or, when the section's lines are absent, its result on empty frames of the same
    schemas (computed once per process, then cloned): identical columns and types, no work per file."""
    if present:
        return fn(*frames)
    key = (name, *(tuple(fr.schema.items()) for fr in frames))
    if key not in _EMPTY:
        _EMPTY[key] = fn(*(fr.clear() for fr in frames))
    out = _EMPTY[key]
    return tuple(df.clone() for df in out) if isinstance(out, tuple) else out.clone()


# Necessary conditions (Python `\d` is Unicode Nd like the regex crate's): a timestamp candidate line
# (`cand` below) has hh:mm:ss or ten digits in a row; a collector time prefix (nccl_tests.COLLECTOR_TIME_RE)
# starts with an ISO date and time.
_CAND_RE = r"\d\d:\d\d:\d\d|^\D{0,20}\d{10}(?:\.\d+)?\D{0,5}$"
_TIME_NEED = re.compile(r"\d\d:\d\d:\d\d|\d{10}")
_COLLECTOR_TIME_NEED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")


@lru_cache(maxsize=256)
def _literals(pattern: str) -> tuple[str, ...] | None:
    return required_literals(pattern)


class _Gate:
    """Literal pre-checks that skip regexes no line can match (`parsers._sniff.required_literals`).

    polars keeps only the last 32 compiled regexes (per thread), and this parser alone uses more, so each
    regex is compiled again on every file (0.1-3 ms each: Unicode classes). When none of the literals a
    regex needs occurs in the text of the file, its result is known (no match) and the regex is neither
    compiled nor run: an exact shortcut. Only small texts are checked (on a large file the compiles are
    negligible and the substring scans would not be).
    """

    LIMIT = 1 << 18

    def __init__(self, lines: pl.Series) -> None:
        self.text: str | None = None
        self.lines = lines
        self.text_of(lines)

    def may_scan(self, *patterns: str) -> bool:
        """Whether any of `patterns` may match a line of the file, checked on large files too (one literal
        scan over the lines: worth it before a costly step)."""
        if self.text is not None:
            return any(self.may(p) for p in patterns)
        lits: list[str] = []
        for p in patterns:
            got = _literals(p)
            if got is None:
                return True
            lits.extend(got)
        return bool(self.lines.cast(pl.String).str.contains_any(lits).any())

    def text_of(self, col: pl.Series) -> None:
        """Gate on the lines of `col` (None: everything may match)."""
        s = col.cast(pl.String).fill_null("")
        self.text = s.str.join("\n").item() if len(s) and int(s.str.len_bytes().sum()) <= self.LIMIT else None

    def search(self, need: re.Pattern[str]) -> bool:
        """False only when `need` (a condition every match of some regex satisfies) occurs nowhere."""
        return self.text is None or need.search(self.text) is not None

    def may(self, pattern: str) -> bool:
        return self.text is None or may_match(_literals(pattern), self.text)

    def contains(self, pattern: str, col: str = "b") -> pl.Expr:
        """`col.str.contains(pattern)`, or what it gives when no line can match (False; null stays null)."""
        e = pl.col(col)
        return e.str.contains(pattern) if self.may(pattern) else pl.when(e.is_not_null()).then(False)

    def extract(self, pattern: str, group: int, col: str = "b") -> pl.Expr:
        """`col.str.extract(pattern, group)`, or null when no line can match."""
        return pl.col(col).str.extract(pattern, group) if self.may(pattern) else pl.lit(None, dtype=pl.String)


def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """Parse InfiniBand tool output into NIC inventory, port-state events and counter readings."""
    texts = small_texts(lines, SMALL_LINES)
    small = _parse_small(texts, ctx) if texts is not None else None
    return small if small is not None else _parse_frames(lines, ctx)


def parse_many(items: Sequence[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
    """`[parse(lines, ctx) for lines, ctx in items]`: the small files the plain-Python path reads are read
    together (each table built once for all of them, then cut per file); the others are parsed one by one."""
    return small_parse_many(items, SMALL_LINES, _small_many, _parse_frames)


def _parse_frames(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """`parse` with polars expressions over the column of lines (any input)."""
    frame = numbered(lines, ctx)
    gate = _Gate(lines)
    headcat = gate.may_scan(HEAD_RE, CAT_RE)
    # plain perfquery counter lines (most lines of a perfquery loop) skip the line-by-line grammar: the rest
    # is parsed as before, then those lines take the state in force from the rows around them (`_lane_rows`)
    lane = state = None
    if frame.height >= LANE_MIN_LINES and not headcat:
        # and so do the perfquery command and header lines of the commonest shapes (`_split_lanes`): their
        # rows are made as the grammar makes them and join the others before the state is carried on
        frame, lane, state = _split_lanes(frame)
    b = pl.col("b")
    c = gate.contains

    def per_line(frame: pl.DataFrame) -> pl.DataFrame:
        """What each line says by itself (prefixes, host, flags): a function of its text where no line folds
        into the one before it (no `==> path <==` / `cat path` line)."""
        if gate.search(_COLLECTOR_TIME_NEED) and (
            gate.text is not None or frame.select(pl.col("text").str.contains(COLLECTOR_TIME_RE).any()).item()
        ):  # (a line with a prefix: one `contains` pass on a large file, cheaper than collector_time's)
            no_time, line_ts = collector_time(pl.col("text"))
            frame = frame.with_columns(_ts_prefix=line_ts, _rest=no_time)
        else:  # no collector time prefix anywhere: what collector_time gives
            frame = frame.with_columns(
                _ts_prefix=pl.lit(None, dtype=pl.Datetime("us", "UTC")), _rest=pl.col("text")
            )
        env = split_envelopes(pl.col("_rest"))
        f = frame.with_columns(body=env["rest"].str.strip_chars_end(), env_host=env["host"])
        pd = pl.col("body").str.extract_groups(PDSH_RE)
        f = f.with_columns(
            host=pl.coalesce(pd.struct.field("host"), pl.col("env_host")),
            b=pl.coalesce(pd.struct.field("rest"), pl.col("body")),
        )
        # `head /sys/class/infiniband/*/ports/*/counters/*` prints `==> path <==` then the value on the next
        # line: fold the value into the header line (which then reads like `path value`) and mark the value
        # line parsed.
        # (also `$ cat /sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error` followed by its value)
        if headcat:
            hdr = pl.coalesce(pl.col("b").str.extract(HEAD_RE, 1), pl.col("b").str.extract(CAT_RE, 1))
            nxt = pl.col("b").shift(-1)
            folded = (
                hdr.is_not_null()
                & nxt.is_not_null()
                & ~nxt.str.contains(HEAD_RE)
                & nxt.str.contains(r"^\s*[^\s/$#][^$#]*$")
            )
            f = f.with_columns(
                k_headval=folded.shift(1).fill_null(False),
                evmsg=pl.when(folded)
                .then(
                    format_str(
                        "{} {}", pl.col("text").str.strip_chars(), pl.col("text").shift(-1).str.strip_chars()
                    )
                )
                .otherwise(pl.col("text").str.strip_chars()),
                b=pl.when(folded).then(format_str("{} {}", hdr, nxt.str.strip_chars())).otherwise(pl.col("b")),
            )
            gate.text_of(f.get_column("b"))  # folded lines join a path and a value: gate on the new text
        else:  # no `==> path <==` / `cat path` line: nothing folds
            f = f.with_columns(k_headval=pl.lit(False), evmsg=pl.col("text").str.strip_chars())
        b = pl.col("b")
        f = f.with_columns(host=pl.coalesce(pl.col("host").str.split(".").list.first(), pl.lit(ctx.node)))
        c = gate.contains
        f = _by_distinct(
            f,
            "b",
            # timestamps: the costly parse runs only on the few short lines that look like a time (`k_cand`)
            k_cand=(b.str.len_bytes() < 80) & b.str.contains(_CAND_RE),
            k_ca=c(CA_RE),
            k_ibstatus=c(IBSTATUS_RE),
            k_hca=c(HCA_ID_RE),
            k_port=c(PORT_RE),
            k_dvport=c(DEVINFO_PORT_RE),
            k_kv=c(KV_RE),
            k_sysfs=c(SYSFS_RE) & (b.str.starts_with("/sys/class/infiniband/") | c(r"^[\w.-]+/ports/\d+/")),
            k_pqhdr=c(PQ_HDR_RE),
            k_i2n=c(IBDEV2NETDEV_RE),
            k_pqctr=c(PQ_CTR_RE),
            k_panic=c(IBPANIC_RE),
            k_mlxsec=c(MLX_SECTION_RE),
            k_mlxkv=c(MLX_KV_RE),
            k_rule=c(RULE_RE),
            k_marker=c(MARKER_RE),
            k_cmd=c(CMD_RE),
        )
        return f

    # (repeated captures print the same lines: where they repeat, made once per distinct text, joined back)
    distinct = None
    if not headcat and frame.height >= DISTINCT_MIN_ROWS:
        distinct = frame.select(pl.col("text").unique())
        distinct = distinct if 2 * distinct.height <= frame.height else None
    if distinct is not None:
        f = frame.join(per_line(distinct), on="text", how="left", nulls_equal=True, maintain_order="left")
    else:
        f = per_line(frame)
    cand_rows = f.filter(pl.col("k_cand")) if gate.search(_TIME_NEED) else f.clear()
    if cand_rows.height:
        is_ts, ts_v, ts_q = _timestamps(b)
        times = cand_rows.select("line", k_ts=is_ts, ts_line=ts_v, ts_quality_line=ts_q)
        f = f.join(times, on="line", how="left").with_columns(pl.col("k_ts").fill_null(False))
    else:  # no line looks like a time: what the join would give
        f = f.with_columns(
            k_ts=pl.lit(False),
            ts_line=pl.lit(None, dtype=pl.Datetime("us", "UTC")),
            ts_quality_line=pl.lit(None, dtype=pl.String),
        )
    # block context: the tool (fmt), device and port in force on each line, per host
    fmt_here = (
        pl.when(pl.col("k_ca"))
        .then(pl.lit("ibstat"))
        .when(pl.col("k_ibstatus"))
        .then(pl.lit("ibstatus"))
        .when(pl.col("k_hca"))
        .then(pl.lit("ibv_devinfo"))
        .when(pl.col("k_pqhdr"))
        .then(pl.lit("perfquery"))
        .when(pl.col("k_mlxsec") | (pl.col("k_cmd") & c(r"\bmlxlink\b")))
        .then(pl.lit("mlxlink"))
        .when(pl.col("k_sysfs"))
        .then(pl.lit("sysfs"))
        .when(pl.col("k_cmd") & c(r"\bperfquery\b"))
        .then(pl.lit("perfquery"))
    )
    dev_here = (
        pl.when(pl.col("k_ca"))
        .then(gate.extract(CA_RE, 1))
        .when(pl.col("k_ibstatus"))
        .then(gate.extract(IBSTATUS_RE, 1))
        .when(pl.col("k_hca"))
        .then(gate.extract(HCA_ID_RE, 1))
        .when(pl.col("k_marker"))
        .then(gate.extract(MARKER_RE, 1))
        .when(pl.col("k_cmd") & c(r"\bperfquery\b"))
        .then(pl.coalesce(gate.extract(PQ_CA_RE, 1), pl.lit("")))
        .when(pl.col("k_cmd") & c(r"\bmlxlink\b"))
        .then(pl.coalesce(gate.extract(MLX_DEV_RE, 1), pl.lit("")))
    )
    port_here = (
        pl.when(pl.col("k_ibstatus"))
        .then(gate.extract(IBSTATUS_RE, 2))
        .when(pl.col("k_port"))
        .then(gate.extract(PORT_RE, 1))
        .when(pl.col("k_dvport"))
        .then(gate.extract(DEVINFO_PORT_RE, 1))
        .when(pl.col("k_marker"))
        .then(pl.coalesce(gate.extract(MARKER_RE, 2), pl.lit("")))
        .when(pl.col("k_ca") | pl.col("k_hca") | pl.col("k_cmd"))
        .then(pl.lit(""))
    )
    block_start = pl.col("k_ca") | pl.col("k_ibstatus") | pl.col("k_hca") | pl.col("k_pqhdr")
    # Every branch above needs one of these flags: the extractions run on those lines only (null elsewhere).
    context_line = (
        pl.col("k_ca") | pl.col("k_ibstatus") | pl.col("k_hca") | pl.col("k_pqhdr") | pl.col("k_mlxsec")
        | pl.col("k_cmd") | pl.col("k_sysfs") | pl.col("k_marker") | pl.col("k_port") | pl.col("k_dvport")
    )  # fmt: skip
    if f.height > 20_000:  # (on a small file the extra steps cost more than they save)
        here = (
            f.with_row_index("_r")
            .filter(context_line)
            .select("_r", _fmt=fmt_here, _dev=dev_here, _port=port_here)
        )
        idx = here.get_column("_r")
        f = f.with_columns(
            **{
                c: repeated(None, f.height, pl.String).scatter(idx, here.get_column(c))
                for c in ("_fmt", "_dev", "_port")
            }
        )
    else:
        f = f.with_columns(_fmt=fmt_here, _dev=dev_here, _port=port_here)
    others = f
    if state is not None:
        f = pl.concat([f, _state_rows(state, f.schema, ctx.node)]).sort("line")  # (unique line numbers)
    f = (
        f.with_columns(
            fmt=pl.col("_fmt").forward_fill().over("host"),
            dev=pl.col("_dev").forward_fill().over("host"),
            port=pl.col("_port").forward_fill().over("host"),
            block=block_start.cum_sum(),
            ts=pl.coalesce(pl.col("_ts_prefix"), pl.col("ts_line").forward_fill().over("host")),
            ts_quality=pl.when(pl.col("_ts_prefix").is_not_null())
            .then(pl.lit("exact"))
            .otherwise(pl.col("ts_quality_line").forward_fill().over("host")),
        )
        .with_columns(
            dev=pl.when(pl.col("dev") != "").then(pl.col("dev")),
            port=pl.when(pl.col("port") != "").then(pl.col("port")).cast(pl.Int32, strict=False),
        )
        .drop("_fmt", "_dev", "_port")
    )
    fmt = pl.col("fmt")
    in_block = fmt.is_in(["ibstat", "ibstatus", "ibv_devinfo"]) & pl.col("dev").is_not_null()

    # Sections whose lines do not occur are not computed: their (empty) results are taken from a run on an
    # empty frame of the same schema, made once per process (same columns and types as computing them).
    pq_hdr = others.filter(pl.col("k_pqhdr"))  # (the header lines `_split_lanes` set apart: `_state_headers`)
    lane_pq = _state_headers(state) if state is not None else None
    if pq_hdr.height or (lane_pq is not None and lane_pq.height):
        pq = pq_hdr.with_columns(g=b.str.extract_groups(PQ_HDR_RE)).select(
            "line",
            # (a lid or port its column cannot hold: -1 here, null once forward-filled, so that the counters
            # under that header are read with it null, not with the previous header's)
            pq_lid=pl.col("g").struct.field("lid").cast(pl.Int64, strict=False).fill_null(-1),
            pq_port=pl.col("g").struct.field("port").cast(pl.Int32, strict=False).fill_null(-1),
            pq_what=pl.col("g").struct.field("what"),
        )
        if lane_pq is not None and lane_pq.height:
            pq = pl.concat([pq, lane_pq]) if pq.height else lane_pq
        lid, port = pl.col("pq_lid").forward_fill().over("host"), pl.col("pq_port").forward_fill().over("host")
        f = f.join(pq, on="line", how="left").with_columns(
            pq_lid=pl.when(lid >= 0).then(lid),
            pq_port=pl.when(port >= 0).then(port),
            pq_what=pl.col("pq_what").forward_fill().over("host"),
        )
    else:  # no perfquery header: the join would add only nulls
        f = f.with_columns(
            pq_lid=pl.lit(None, dtype=pl.Int64),
            pq_port=pl.lit(None, dtype=pl.Int32),
            pq_what=pl.lit(None, dtype=pl.String),
        )
    kv_line = pl.col("k_kv") & in_block & ~pl.col("k_port") & ~pl.col("k_dvport")
    mlx_line = (fmt == "mlxlink") & pl.col("k_mlxkv")
    # (after a perfquery header: its `what` is never null there, its port is where too large)
    pq_line = pl.col("k_pqctr") & (pl.col("fmt") == "perfquery") & pl.col("pq_what").is_not_null()
    if lane is not None:  # (the time in force from the lines before: a collector prefix is the line's own)
        f = f.with_columns(_tsf=pl.col("ts_line").forward_fill().over("host"))
    present = f.select(
        kv=kv_line.any(),
        sy=pl.col("k_sysfs").any(),
        mlx=mlx_line.any(),
        i2n=pl.col("k_i2n").any(),
        pan=pl.col("k_panic").any(),
        pqc=pq_line.any(),
    ).row(0, named=True)

    def kv_part(f: pl.DataFrame) -> pl.DataFrame:
        """key/value lines of ibstat / ibstatus / ibv_devinfo blocks"""
        # (key, val and attribute are functions of the line and its format: made once per distinct pair,
        # repeated captures print the same lines, then joined back in the lines' order)
        kv = f.filter(kv_line)
        key = pl.col("key").str.strip_chars().str.to_lowercase()
        got = (
            kv.select("b", "fmt")
            .unique()
            .with_columns(g=b.str.extract_groups(KV_RE))
            .unnest("g")
            .with_columns(
                attribute=pl.when(fmt == "ibstat")
                .then(_map(key, IBSTAT_KEYS))
                .when(fmt == "ibstatus")
                .then(_map(key, IBSTATUS_KEYS))
                .otherwise(_map(key, DEVINFO_KEYS))
            )
        )
        kv = kv.join(got, on=["b", "fmt"], how="left", nulls_equal=True, maintain_order="left")
        return kv.with_columns(source=fmt)

    def sy_part(f: pl.DataFrame) -> pl.DataFrame:
        """sysfs lines (device and port attributes; counters go to comms)"""
        # NOTE: split `path<sep>value` first and match the short path only (the full-line regex is 10x slower)
        path = b.str.extract(r"^([^\s:]+)", 1)
        return (
            f.filter(pl.col("k_sysfs"))
            .with_columns(
                g=path.str.extract_groups(SYSFS_PATH_RE).struct.with_fields(
                    val=b.str.slice(path.str.len_chars()).str.strip_prefix(":").str.strip_chars()
                )
            )
            .drop("port", "dev")
            .unnest("g")
            .with_columns(port=pl.col("port").cast(pl.Int32, strict=False))
        )

    def mlx_part(f: pl.DataFrame) -> pl.DataFrame:
        """mlxlink key/value lines (attributes and counters)"""
        return (
            f.filter(mlx_line)
            .with_columns(g=b.str.extract_groups(MLX_KV_RE))
            .unnest("g")
            .with_columns(lkey=pl.col("key").str.strip_chars().str.to_lowercase())
        )

    def i2n_part(f: pl.DataFrame) -> pl.DataFrame:
        """ibdev2netdev: `mlx5_0 port 1 ==> ib0 (Up)` -> netdev name and its link state"""
        i2n = (
            f.filter(pl.col("k_i2n"))
            .with_columns(g=b.str.extract_groups(IBDEV2NETDEV_RE))
            .drop("dev", "port")
            .unnest("g")
            .with_columns(port=pl.col("port").cast(pl.Int32, strict=False))
        )
        return pl.concat(
            [
                i2n.with_columns(attribute=pl.lit("netdev"), val=pl.col("netdev")),
                i2n.with_columns(attribute=pl.lit("netdev_state"), val=pl.col("state")),
            ]
        ).with_columns(source=pl.lit("ibdev2netdev"))

    def pan_part(f: pl.DataFrame) -> pl.DataFrame:
        return f.filter(pl.col("k_panic")).with_columns(g=b.str.extract_groups(IBPANIC_RE)).unnest("g")

    def pqc_part(f: pl.DataFrame) -> pl.DataFrame:
        # These lines match PQ_CTR_RE (`name:....value`), so its groups are found by cutting: the name (no
        # `:` in it) ends at the first `:`; the value is what follows the dots, trimmed, or the last dot when
        # only dots follow (the regex then gives one dot back to `\S+`). Same values, no regex pass.
        name_rest = b.str.splitn(":", 2)
        val = name_rest.struct.field("field_1").str.strip_chars_start(".").str.strip_chars()
        return f.filter(pq_line).with_columns(
            g=pl.struct(name=name_rest.struct.field("field_0"), val=pl.when(val == "").then(pl.lit(".")).otherwise(val))
        ).unnest("g")

    kv = _section("kv", present["kv"], kv_part, f)
    sy = _section("sy", present["sy"], sy_part, f)
    mlx = _section("mlx", present["mlx"], mlx_part, f)
    i2n_attr = _section("i2n", present["i2n"], i2n_part, f)
    pan = _section("pan", present["pan"], pan_part, f)
    pqc = _section("pqc", present["pqc"], pqc_part, f)
    if lane is not None:
        lane, lane_ok = _lane_rows(f, lane, ctx.node)
        lane_pq = lane.filter(lane_ok).select(_PQC_COLS)
        if lane_pq.height:
            pqc = pl.concat([pqc.select(_PQC_COLS), lane_pq]) if pqc.height else lane_pq

    def attr_tables(
        kv: pl.DataFrame, sy: pl.DataFrame, mlx: pl.DataFrame, i2n_attr: pl.DataFrame
    ) -> tuple[pl.DataFrame, pl.DataFrame]:
        """inventory and port-state events from the attribute lines"""
        sy_attr = sy.filter(pl.col("grp").is_null()).with_columns(
            attribute=_map(pl.col("key"), SYSFS_KEYS), source=pl.lit("sysfs")
        )
        mlx_attr = mlx.with_columns(attribute=_map(pl.col("lkey"), MLXLINK_KEYS), source=pl.lit("mlxlink"))
        cols = [
            "line",
            "text",
            "evmsg",
            "host",
            "dev",
            "port",
            "block",
            "attribute",
            "val",
            "source",
            "ts",
            "ts_quality",
        ]
        attrs = pl.concat(
            [
                kv.select(cols),
                sy_attr.select(cols),
                mlx_attr.with_columns(port=pl.col("port").fill_null(1)).select(cols),
                i2n_attr.select(cols),
            ]
        ).filter(pl.col("attribute").is_not_null() & pl.col("dev").is_not_null())
        # (a function of the attribute and its value: made once per distinct pair, joined back in order)
        values = (
            attrs.select("attribute", "val")
            .unique()
            .with_columns(value=_normalise(pl.col("attribute"), pl.col("val").str.strip_chars()))
        )
        attrs = attrs.join(
            values, on=["attribute", "val"], how="left", nulls_equal=True, maintain_order="left"
        )
        rate_detail = attrs.filter(
            (pl.col("attribute") == "rate") & pl.col("val").str.contains(r"\(.+\)")
        ).with_columns(attribute=pl.lit("link_width_speed"), value=pl.col("val").str.extract(r"\((.+)\)", 1))
        # ibv_devinfo -v prints no rate: derive it (Gb/s) from active_width x active_speed, like ibstat's `Rate`
        width = attrs.filter(pl.col("attribute") == "active_width").select(
            "host", "dev", "port", "block", lanes=pl.col("val").str.extract(r"^(\d+)X", 1).cast(pl.Float64)
        )
        speed = (
            attrs.filter(pl.col("attribute") == "active_speed")
            .with_columns(
                gbps=pl.col("val").str.extract(r"^([\d.]+)\s*Gbps", 1).cast(pl.Float64, strict=False)
            )
            .join(width, on=["host", "dev", "port", "block"], how="inner", nulls_equal=True)
            .filter(pl.col("lanes").is_not_null() & pl.col("gbps").is_not_null())
        )
        total = pl.col("lanes") * pl.col("gbps")
        derived_rate = speed.with_columns(
            attribute=pl.lit("rate"),
            value=pl.when(total == total.round(0))
            .then(total.round(0).cast(pl.Int64, strict=False).cast(pl.String))
            .otherwise(total.round(3).cast(pl.String)),
        ).select(attrs.columns)
        attrs = pl.concat([attrs, rate_detail, derived_rate]).sort("line", maintain_order=True)
        inventory = attrs.filter(pl.col("value").str.len_chars() > 0).select(
            node="host",
            component=pl.lit("nic"),
            device="dev",
            port="port",
            attribute="attribute",
            value="value",
            source="source",
            file=pl.lit(ctx.path),
            line="line",
        )

        # ---- events: ports not Active
        ports = attrs.filter(pl.col("port").is_not_null())
        pkey = ["host", "dev", "port", "block", "source"]
        extra = ports.filter(pl.col("attribute").is_in(["phys_state", "rate", "link_layer"])).pivot(
            on="attribute", index=pkey, values="value", aggregate_function="first"
        )
        for name in ("phys_state", "rate", "link_layer"):
            if name not in extra.columns:
                extra = extra.with_columns(pl.lit(None, dtype=pl.String).alias(name))
        i2n_down = ports.filter(
            (pl.col("attribute") == "netdev_state") & (pl.col("value").str.to_lowercase() == "down")
        )
        states = pl.concat(
            [
                ports.filter((pl.col("attribute") == "state") & (pl.col("value") != "Active")),
                i2n_down.with_columns(value=pl.lit("Down")),
            ]
        ).join(extra, on=pkey, how="left", nulls_equal=True)
        ev_state = states.select(
            ts="ts",
            ts_quality=pl.col("ts_quality").fill_null("none"),
            node="host",
            source=pl.lit("ib"),
            kind=pl.when(pl.col("value") == "Down")
            .then(pl.lit("ib_port_down"))
            .otherwise(pl.lit("ib_port_not_active")),
            code=pl.col("value"),
            severity=pl.lit("medium"),
            message=pl.col("evmsg"),
            detail=json_detail(
                device=pl.col("dev"),
                port=pl.col("port"),
                state=pl.col("value"),
                phys_state=pl.col("phys_state"),
                rate=pl.col("rate"),
                link_layer=pl.col("link_layer"),
                tool=pl.col("source"),
            ),
            file=pl.lit(ctx.path),
            line="line",
        )
        return inventory, ev_state

    def event_table(ev_state: pl.DataFrame, pan: pl.DataFrame) -> pl.DataFrame:
        """port-state events and tool aborts"""
        ev_panic = pan.select(
            ts="ts",
            ts_quality=pl.col("ts_quality").fill_null("none"),
            node="host",
            source=pl.lit("ib"),
            kind=pl.when(pl.col("tool") == "ibwarn")
            .then(pl.lit("ib_tool_warning"))
            .otherwise(pl.lit("ib_tool_error")),
            severity=pl.when(pl.col("tool") == "ibwarn").then(pl.lit("low")).otherwise(pl.lit("medium")),
            message=pl.col("evmsg"),
            detail=json_detail(
                tool=pl.col("tool"),
                pid=pl.col("pid").cast(pl.Int64, strict=False),
                device=pl.col("msg").str.extract(r"IB device '([^']+)'", 1),
                reason=pl.col("msg"),
            ),
            file=pl.lit(ctx.path),
            line="line",
        )
        return pl.concat([ev_state, ev_panic], how="diagonal_relaxed").sort("line")

    def comms_table(sy: pl.DataFrame, pqc: pl.DataFrame, mlx: pl.DataFrame) -> pl.DataFrame:
        """counters: sysfs counters/hw_counters, perfquery, mlxlink"""
        sy_ctr = sy.filter(pl.col("grp").is_in(["counters", "hw_counters"])).select(
            "line",
            "host",
            "ts",
            dev="dev",
            port="port",
            counter="key",
            name=pl.lit(None, dtype=pl.String),
            group="grp",
            raw="val",
            lid=pl.lit(None, dtype=pl.Int64),
            tool=pl.lit("sysfs"),
        )
        pq_ctr = pqc.filter(~pl.col("name").is_in(PQ_NOT_COUNTERS)).select(
            "line",
            "host",
            "ts",
            dev=pl.coalesce(pl.col("dev"), format_str("lid:{}", pl.col("pq_lid")))
            if pqc.get_column("dev").has_nulls()
            else pl.col("dev"),
            port=pl.col("pq_port"),
            counter=pl.coalesce(_map(pl.col("name"), PERFQUERY_COUNTERS), pl.col("name"))
            + pl.when(~pl.col("pq_what").str.contains("extended", literal=True) & pl.col("name").is_in(PQ_32BIT))
            .then(pl.lit("_32"))
            .otherwise(pl.lit("")),
            name=pl.col("name"),
            group=pl.col("pq_what"),
            raw=pl.col("val"),
            lid=pl.col("pq_lid"),
            tool=pl.lit("perfquery"),
        )
        mlx_ctr = mlx.filter(pl.col("lkey").is_in(list(MLXLINK_COUNTERS))).select(
            "line",
            "host",
            "ts",
            dev="dev",
            port=pl.col("port").fill_null(1),
            counter=_map(pl.col("lkey"), MLXLINK_COUNTERS),
            name=pl.col("key").str.strip_chars(),
            group=pl.lit(None, dtype=pl.String),
            raw="val",
            lid=pl.lit(None, dtype=pl.Int64),
            tool=pl.lit("mlxlink"),
        )
        ctr = pl.concat([sy_ctr, pq_ctr, mlx_ctr])  # (`value` as below: an earlier reading of it was unused)
        hexval = pl.col("raw").str.contains(r"(?i)^0x[0-9a-f]+$")
        ctr = ctr.with_columns(
            value=pl.when(hexval)
            .then(pl.col("raw").str.slice(2).str.to_integer(base=16, strict=False).cast(pl.Float64))
            .otherwise(pl.col("raw").cast(pl.Float64, strict=False))
        ).filter(pl.col("value").is_not_null() & pl.col("dev").is_not_null())
        ctr = ctr.sort("line").with_columns(
            reading=pl.int_range(pl.len()).over("host", "dev", "port", "counter")
        )
        detail = {
            "reading": pl.col("reading"),
            "name": pl.col("name"),
            "group": pl.col("group"),
            "lid": pl.col("lid"),
            "tool": pl.col("tool"),
            "raw": pl.col("_raw"),
        }
        ctr = ctr.with_columns(_raw=pl.when(pl.col("raw").str.contains(r"[Ee]|0x")).then(pl.col("raw")))
        # The detail of a row with name, group, lid and tool and no raw (a perfquery reading) by one concat;
        # the other rows (null here) get `_plain_json_detail`'s (the same text where both apply).
        s = pl.String
        plain = pl.concat_str(
            [
                pl.lit('{"reading":'), pl.col("reading").cast(s), pl.lit(',"name":"'), pl.col("name"),
                pl.lit('","group":"'), pl.col("group"), pl.lit('","lid":'), pl.col("lid").cast(s),
                pl.lit(',"tool":"'), pl.col("tool"), pl.lit('"}'),
            ]
        )  # fmt: skip
        out = ctr.select(
            record=pl.lit("ib_counter"),
            ts="ts",
            node="host",
            device="dev",
            port="port",
            counter="counter",
            value="value",
            detail=pl.when(pl.col("_raw").is_null()).then(plain),
            file=pl.lit(ctx.path),
            line="line",
        )
        idx = out.select(pl.arg_where(pl.col("detail").is_null())).to_series()
        if len(idx):
            other = ctr[idx].select(_plain_json_detail(detail, ("name", "group", "tool", "raw"))).to_series()
            out = out.with_columns(out.get_column("detail").scatter(idx, other))
        # strings JSON would escape (quotes, backslashes, control characters): the general encoding
        needs_escape = pl.any_horizontal(
            pl.col(c).str.contains(r'[\x00-\x1f"\\]') for c in ("name", "group", "tool", "_raw")
        ).fill_null(False)
        idx = ctr.select(pl.arg_where(needs_escape)).to_series()
        if len(idx):
            slow = ctr[idx].select(detail=json_detail(**detail)).to_series()
            out = out.with_columns(out.get_column("detail").scatter(idx, slow))
        return out

    any_attr = present["kv"] or present["sy"] or present["mlx"] or present["i2n"]
    inventory, ev_state = _section("attrs", any_attr, attr_tables, kv, sy, mlx, i2n_attr)
    events = _section("events", ev_state.height > 0 or pan.height > 0, event_table, ev_state, pan)
    comms = _section("comms", sy.height > 0 or pqc.height > 0 or mlx.height > 0, comms_table, sy, pqc, mlx)

    # ---- accounting
    understood = (
        pl.col("k_ca")
        | pl.col("k_ibstatus")
        | pl.col("k_hca")
        | ((pl.col("k_port") | pl.col("k_dvport")) & pl.col("dev").is_not_null())
        | (pl.col("k_kv") & in_block)
        | pl.col("k_sysfs")
        | pl.col("k_pqhdr")
        | pl.col("k_i2n")
        | pl.col("k_headval")
        | pq_line
        | pl.col("k_panic")
        | pl.col("k_mlxsec")
        | ((fmt == "mlxlink") & pl.col("k_mlxkv"))
        | pl.col("k_rule")
        | pl.col("k_marker")
        | pl.col("k_cmd")
        | pl.col("k_ts")
        | (pl.col("body").str.strip_chars().str.len_bytes() == 0)
    )
    acc = f.select("line", "text", ok=understood)
    parsed, unrecognized, examples = account(acc, pl.col("ok"))
    hosts = f.filter(pl.col("host") != ctx.node).get_column("host").unique()
    # the tool aborted (ibpanic), or the capture ends on a line the grammar does not understand (cut line)
    flagged = acc.filter(pl.col("text").str.strip_chars().str.len_bytes() > 0)
    cut_last = flagged.height > 0 and not bool(flagged.get_column("ok").fill_null(False)[-1])
    if lane is not None:  # the lane's lines: understood where read as counters (never blank)
        n_ok = int(lane_ok.sum())
        parsed += n_ok
        unrecognized += lane.height - n_ok
        if n_ok < lane.height:
            bad = lane.filter(~lane_ok).head(MAX_EXAMPLES).select("line", "text").iter_rows()
            examples = sorted([*examples, *((int(n), str(t)[:500]) for n, t in bad)])[:MAX_EXAMPLES]
        if flagged.height == 0 or lane.get_column("line")[-1] > flagged.get_column("line")[-1]:
            cut_last = not bool(lane_ok[-1])
        hosts = hosts.clear()  # (the lane's lines are the file's node's: no other single node)
    partial = cut_last or (
        pan.height > 0 and bool(pan.get_column("tool").is_in(["ibpanic", "iberror"]).any())
    )
    return ParseResult(
        tables={"inventory": inventory, "events": events, "comms": comms},
        parsed=parsed,
        unrecognized=unrecognized,
        unrecognized_examples=examples,
        partial=partial,
        node=hosts[0] if len(hosts) == 1 and f.get_column("host").n_unique() == 1 else None,
    )


# ----------------------------------------------------------------------------- perfquery counter lane

LANE_MIN_LINES = 6000
"""From this many lines on, `_parse_frames` reads plain perfquery counter lines apart (`_split_lanes`): on a
perfquery loop the two cost the same at ~5000 lines (21.0 vs 21.9 ms at 3000, 29.5 vs 27.3 at 6000, 41 vs 27
at 20000)."""
LANE_RE = r"^(?P<name>[A-Za-z][A-Za-z0-9_]*):\.+(?P<val>[0-9]+|0x[0-9a-fA-F]+)$"
_LANE_NOT = (
    "hca_id", "ibpanic", "ibwarn", "iberror", "ibstat", "ibstatus", "ibv_devinfo", "perfquery", "mlxlink",
    "ibdiagnet", "cat", "grep", "for", "echo", "date", "ls", "find", "head", "tail", "while", "do", "done",
)  # fmt: skip
_PQC_COLS = ("line", "host", "ts", "dev", "pq_lid", "pq_port", "pq_what", "name", "val")
_LANE_STATE = ("fmt", "dev", "pq_lid", "pq_port", "pq_what", "_tsf")




CMD_LANE_RE = r"^\$ perfquery (?:-x )?-C (mlx[0-9]*_[0-9]+) -P [0-9]+$"
HDR_LANE_RE = r"^# Port (?:extended )?counters: Lid [0-9]{1,9} port [0-9]{1,9} \(CapMask: 0x[0-9A-Fa-f]+\)$"
_ANY_LANE_RE = f"(?:{LANE_RE})|(?:{CMD_LANE_RE})|(?:{HDR_LANE_RE})"


DISTINCT_MIN_ROWS = 5000


def _by_distinct(f: pl.DataFrame, col: str, **exprs: pl.Expr) -> pl.DataFrame:
    """`f.with_columns(**exprs)` for expressions of column `col` alone (a pure function of its value, row by
    row): on a large frame whose values repeat (half as many distinct values as rows or fewer: repeated
    captures print the same lines), made once per distinct value and joined back in the rows' order."""
    if f.height >= DISTINCT_MIN_ROWS:
        u = f.select(pl.col(col).unique())
        if 2 * u.height <= f.height:
            got = u.with_columns(**exprs)
            return f.join(got, on=col, how="left", nulls_equal=True, maintain_order="left")
    return f.with_columns(**exprs)


def _split_lanes(frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame | None, pl.DataFrame | None]:
    r"""(the other lines, the counter lane: line, text, name, val, the state lines: line, text, hdr, dev) of a
    frame of lines (None: no such line), found by one pass of the three shapes' regexes together (a counter
    line opens with a letter, a command with `$`, a header with `#`). The lane (`LANE_RE`):
    Exact: on a line `LANE_RE` matches whole (printable ASCII: a name of word characters, `:`, dots, a
    decimal or `0x` hex reading) the vectorised grammar can only find a perfquery counter (`PQ_CTR_RE`, same
    name and value as `pqc_part` cuts them): no blank, `-`, `[`, `(`, `/`, `'`, `#`, `$`, `%`, `>`, `+` or
    second `:`, so no collector time, envelope, pdsh prefix, `==> path <==` or `cat path` line (the lane is
    not taken where one occurs: the line after one may fold into it), CA / ibstatus / sysfs / perfquery
    header / ibdev2netdev / mlxlink / rule / key-value / `Port N:` line, and no marker (nothing in MARKER_RE
    reads a `.`). Left out: the names that open a command (`CMD_RE`, which then matches), `hca_id:`
    (HCA_ID_RE) and the ibpanic/ibwarn/iberror openings; lines of 30 bytes or less (a timestamp candidate,
    `^\D{0,20}\d{10}...`, is one of those: 20 non-digits and a ten-digit reading at most). Such a line
    names no tool, device, port, block or time, so the state in force on it is that of the line before it
    of the same host (its host is the file's node: no prefix), and it is understood where that state is a
    perfquery block with a header (`pq_line`).

    The state lines (`CMD_LANE_RE`, `HDR_LANE_RE`):
    Exact: a line `CMD_LANE_RE` matches (`$ perfquery [-x ]-C mlx5_0 -P 1`) is read by the grammar as a
    command (CMD_RE: `$ ` then `perfquery`, `\bperfquery\b`) naming the tool perfquery, the device `-C`
    gives (PQ_CA_RE's first match: the device group; no `mlxlink` word: the device is `mlx<digits>_<digits>`)
    and port "" (no port); a line `HDR_LANE_RE` matches (`# Port [extended ]counters: Lid N port N (CapMask:
    0x5A00)`) as a perfquery header (PQ_HDR_RE; a block start, tool perfquery, no device or port named). No
    other flag: no envelope, pdsh or collector prefix (`$` / `#` first), no `^\s`, `:.`, `/`, ` port ` (the
    command's `-P`), `==>`, ` :`, rule or marker (`$` cannot open one, `# ` is followed by `Port`), and no
    timestamp candidate (no `dd:dd:dd`; more than 20 non-digits before the first digit, or a digit after the
    first digit run).
    """
    t = pl.col("text")
    mask = frame.select(t.str.contains(_ANY_LANE_RE).fill_null(False)).to_series()
    if not mask.any():
        return frame, None, None
    hit = frame.filter(mask)
    kind = hit.select(cmd=t.str.starts_with("$"), hdr=t.str.starts_with("#"), n=t.str.len_bytes())
    is_state = kind.select(pl.col("cmd") | pl.col("hdr")).to_series()
    state = hit.filter(is_state)
    if state.height:
        # (the device: what follows `-C `, up to the blank before `-P`; the capture group of CMD_LANE_RE)
        tail = t.str.strip_prefix("$ perfquery -x -C ").str.strip_prefix("$ perfquery -C ")
        state = state.with_columns(hdr=kind.get_column("hdr").filter(is_state)).with_columns(
            dev=pl.when(~pl.col("hdr")).then(tail.str.split_exact(" ", 1).struct.field("field_0"))
        )
    else:
        state = None
    in_lane = kind.select(~pl.col("cmd") & ~pl.col("hdr") & (pl.col("n") > 30)).to_series()
    lane = hit.filter(in_lane)
    if lane.height:
        # (the name ends at the first `:`, the value follows the dots: LANE_RE's groups, cut without a regex)
        cut = t.str.split_exact(":", 1)
        lane = lane.with_columns(
            name=cut.struct.field("field_0"), val=cut.struct.field("field_1").str.strip_chars_start(".")
        )
        named = lane.select(pl.col("name").is_in(_LANE_NOT)).to_series()
        if named.any():  # (a command, hca_id or ibpanic line: back to the others)
            in_lane = in_lane.scatter(in_lane.arg_true().filter(named), False)
            lane = lane.filter(~named)
    taken = is_state | in_lane
    if not taken.all():
        mask = mask.scatter(mask.arg_true().filter(~taken), False)
    return frame.filter(~mask), lane if lane.height else None, state


def _state_headers(state: pl.DataFrame) -> pl.DataFrame:
    """(line, pq_lid, pq_port, pq_what) of the header lines among `_split_lanes`' state lines, as PQ_HDR_RE's
    groups give them: on a line HDR_LANE_RE matches the lid and port are the first and third blank-separated
    fields after `Lid ` (at most nine digits: the casts hold them), `what` is `extended counters` or
    `counters` (the regex's lazy group stops at the first `counters`)."""
    t = pl.col("text")
    cut = t.str.strip_prefix("# Port extended counters: Lid ").str.strip_prefix("# Port counters: Lid ")
    cut = cut.str.split_exact(" ", 3)
    return state.filter(pl.col("hdr")).select(
        "line",
        pq_lid=cut.struct.field("field_0").cast(pl.Int64),
        pq_port=cut.struct.field("field_2").cast(pl.Int32),
        pq_what=pl.when(t.str.starts_with("# Port extended ")).then(pl.lit("extended counters")).otherwise(
            pl.lit("counters")
        ),
    )


def _state_rows(state: pl.DataFrame, schema: pl.Schema, node: str) -> pl.DataFrame:
    """The rows of `_parse_frames`' frame (columns `schema`) for the lines `_split_lanes` set apart, as the
    grammar makes them (host `node`; every flag not named here False)."""
    t, hdr = pl.col("text"), pl.col("hdr")
    known = {
        "line": pl.col("line"), "text": t, "_rest": t, "body": t, "host": pl.lit(node), "b": t, "evmsg": t,
        "k_pqhdr": hdr, "k_cmd": ~hdr, "_fmt": pl.lit("perfquery"), "_dev": pl.col("dev"),
        "_port": pl.when(~hdr).then(pl.lit("")),
    }  # fmt: skip
    nulls = ("_ts_prefix", "env_host", "ts_line", "ts_quality_line")
    exprs = []
    for k, dtype in schema.items():
        if k in known:
            e = known[k]
        elif k in nulls:
            e = pl.lit(None)
        elif k.startswith("k_") and dtype == pl.Boolean:
            e = pl.lit(False)
        else:
            raise KeyError(k)  # (a column this function does not know: tests catch it)
        exprs.append(e.cast(dtype).alias(k))
    return state.select(exprs)


def _lane_rows(f: pl.DataFrame, lane: pl.DataFrame, node: str) -> tuple[pl.DataFrame, pl.Series]:
    """The lane's lines with the state in force on each (`_LANE_STATE`: that of the last line of `f`, the
    other lines parsed, of host `node` before it; null where there is none) and host `node`, and whether each
    is understood (a perfquery counter line)."""
    other = f.height > 0 and f.select((pl.col("host") != node).any()).item()
    g = f.filter(pl.col("host") == node) if other else f
    pos = g.get_column("line").search_sorted(lane.get_column("line"), side="left").cast(pl.Int64) - 1
    idx = pl.select(pl.when(pos >= 0).then(pos)).to_series()
    st = lane.with_columns(
        *(g.get_column(c).gather(idx).alias(c) for c in _LANE_STATE), host=pl.lit(node, dtype=pl.String)
    ).rename({"_tsf": "ts"})
    ok = (pl.col("fmt") == "perfquery") & pl.col("pq_what").is_not_null()
    ok = st.select(ok.fill_null(False)).to_series()
    return st, ok


# ----------------------------------------------------------------------------- small files: plain Python

# A file of a few hundred lines costs ~60 eager polars operations and a dozen regex compiles (polars keeps
# only ~32 compiled regexes per thread, and the other formats' files evict this parser's) on the vectorised
# path: ~10 ms, whatever its size. `_parse_small` reads such a file line by line with Python's `re` (compiled
# once) and gives the same ParseResult, for the plain forms (ibstat, ibstatus, ibv_devinfo, perfquery with its
# command lines and device markers). Anything else (a collector time prefix, a launcher or pdsh prefix, date
# lines, sysfs / head / mlxlink / ibdev2netdev / ibpanic lines, non-ASCII or control characters, values that
# would need polars' own number or JSON handling) returns None and goes the vectorised way. ASCII only: there
# Python's and the regex crate's `\s`, `\d`, `\w`, `\b` and case folding agree, and so do `str.strip` and
# `strip_chars` (no \x1c-\x1f, \v, \f).

SMALL_LINES = 2500
"""At most this many lines (and 256 KiB) take the plain-Python path (about where the two cost the same)."""

_P = {
    k: re.compile(v)
    for k, v in {
        "ca": CA_RE, "ibstatus": IBSTATUS_RE, "hca": HCA_ID_RE, "port": PORT_RE, "dvport": DEVINFO_PORT_RE,
        "kv": KV_RE, "sysfs": SYSFS_RE, "pqhdr": PQ_HDR_RE, "i2n": IBDEV2NETDEV_RE, "pqctr": PQ_CTR_RE,
        "panic": IBPANIC_RE, "mlxsec": MLX_SECTION_RE, "mlxkv": MLX_KV_RE, "rule": RULE_RE,
        "marker": MARKER_RE, "cmd": CMD_RE, "pdsh": PDSH_RE, "head": HEAD_RE, "cat": CAT_RE,
        "pq_ca": PQ_CA_RE, "mlx_dev": MLX_DEV_RE,
    }.items()
}  # fmt: skip
_ANY_ENV_PY = re.compile(_ANY_ENVELOPE, re.MULTILINE)  # a match anywhere implies a line opening with one
_CAND = re.compile(r"\d\d:\d\d:\d\d|^\D{0,20}\d{10}(?:\.\d+)?\D{0,5}$")
_SYSFS_PORTS = re.compile(r"^[\w.-]+/ports/\d+/")
_W_MLXLINK = re.compile(r"\bmlxlink\b")
_W_PERFQUERY = re.compile(r"\bperfquery\b")
_HEX = re.compile(r"(?i)^0x[0-9a-f]+$")
_N_CODE1 = re.compile(r"^(\d+):")
_N_CODE2 = re.compile(r"\((\d+)\)\s*$")
_N_W1 = re.compile(r"^\d+:\s*")
_N_W2 = re.compile(r"\s*\(\d+\)\s*$")
_N_W3 = re.compile(r"(?i)^PORT_")
_N_W4 = re.compile(r"[_\s]")
_N_RATE = re.compile(r"^(\d+(?:\.\d+)?)(?:\s*Gb/sec)?(?:\s|\(|$)")
_N_0X = re.compile(r"(?i)^0x")
_N_GUID = re.compile(r"^[0-9a-f]{1,16}$")
_RATE_PAREN = re.compile(r"\(.+\)")
_RATE_INNER = re.compile(r"\((.+)\)")
_LANES = re.compile(r"^(\d+)X")
_GBPS = re.compile(r"^([\d.]+)\s*Gbps")
_PLAIN_DEC = re.compile(r"^\d+(?:\.\d+)?$")
_RAW_MARK = re.compile(r"[Ee]|0x")
_SY_HEAD = re.compile(r"^([^\s:]+)")
_SY_PATH = re.compile(SYSFS_PATH_RE)
_IB_DEVICE = re.compile(r"IB device '([^']+)'")
_ENV_LITS = required_literals(_ANY_ENVELOPE)
_MARKER_LITS = required_literals(MARKER_RE)
_GUID_ATTRS = frozenset(("node_guid", "sys_image_guid", "port_guid"))
_INT32 = 2**31
_INT64 = 2**63

INVENTORY_SCHEMA = columns(
    "inventory",
    "node", "component", "device", "port", "attribute", "value", "source", "file", "line",
)
EVENTS_SCHEMA = columns(
    "events",
    "ts", "ts_quality", "node", "source", "kind", "code", "severity", "message", "detail", "file",
    "line",
)
COMMS_SCHEMA = columns(
    "comms",
    "record", "ts", "node", "device", "port", "counter", "value", "detail", "file", "line",
)



def _normalise_py(attr: str, val: str) -> str | None:
    """`_normalise` for one (ASCII) value."""
    if attr in ("state", "phys_state"):
        m = _N_CODE1.search(val) or _N_CODE2.search(val)
        code = m.group(1) if m else None
        word = _N_W1.sub("", val, count=1)
        word = _N_W2.sub("", word, count=1)
        word = _N_W3.sub("", word, count=1)
        word = _N_W4.sub("", word).lower()
        codes, words = (STATE_CODES, STATE_WORDS) if attr == "state" else (PHYS_CODES, PHYS_WORDS)
        return codes.get(code) or words.get(word) or val  # type: ignore[arg-type]
    if attr == "rate":
        m = _N_RATE.search(val)
        return m.group(1) if m else val
    if attr in _GUID_ATTRS:
        g = _N_0X.sub("", val.replace(":", ""), count=1).lower()
        return "0x" + g.zfill(16) if _N_GUID.search(g) else val
    if attr in ("base_lid", "sm_lid") and _HEX.search(val):
        n = int(val[2:], 16)
        return str(n) if n < _INT64 else None
    return val


def _detail_ok(*vals: str | None) -> bool:
    """Strings written as polars' encoder + null stripping would write them (no `"`, `\\`, `:`, tab)."""
    return not any(v is not None and ('"' in v or "\\" in v or ":" in v or "\t" in v) for v in vals)


def _parse_small(texts: list[str], ctx: FileContext) -> ParseResult | None:
    """`parse` in plain Python for a small file of the plain forms, or None (see above)."""
    return _small_many([(texts, ctx)])[0]


_LINES: dict[str, tuple] = {}
"""`_classify` of each distinct line seen by this process (a pure function of the line: ibstat and perfquery
dumps repeat the same lines for every device, node and reading)."""
_TIMES: dict[str, tuple] = {}
"""`_timestamps` of each distinct timestamp-candidate line (trailing blanks stripped) seen by this process."""
_ATTRS: dict[str, dict[str, tuple | None]] = {f: {} for f in ("ibstat", "ibstatus", "ibv_devinfo")}
"""Per format, `_attr_of` of each distinct key/value line read in a block of it by this process."""
_PQ_NAMES: dict[tuple[str, str], tuple[str, str] | None] = {}
"""`_pq_name` of each (counter name, header group) seen by this process."""
_MISS = object()
_CACHE_MAX = 50_000
_BLANK_LINE = (
    False, None, False, None, None, None, None, None, False, None, False, None, False, True, None, 0,
)  # fmt: skip
_FALLBACK_LINE = (True, *_BLANK_LINE[1:])
_NOTHING_LINE = (False, *_BLANK_LINE[1:13], False, *_BLANK_LINE[14:])
"""A line no pattern of the small path reads (and that does not send the file to the vectorised path)."""
_PUNCTUATION = frozenset(("Pd", "Ps", "Pe", "Pi", "Pf", "Po"))


def _classify(text: str) -> tuple:
    """`_read_line` of a printable ASCII line (tab allowed). Other characters: where Python's `re` and polars'
    engine may disagree (`\\w`, `\\s`, `\\d`, case folding, stripping), so the line is left to the vectorised
    path; except punctuation (Unicode P* but connectors: `—`, `§`, ...), which both read as neither word,
    digit nor space, on a line no pattern reads (a comment: unrecognized in both; only its text is quoted)."""
    got = _read_fast(text)  # (a line it reads is printable ASCII: no need to look for other characters)
    if got is not None:
        return got
    if _UNSAFE.search(text) is None:
        return _read_line_full(text)
    if all(unicodedata.category(ch) in _PUNCTUATION for ch in _UNSAFE.findall(text)):
        got = _read_line(text)
        if got == _NOTHING_LINE:
            return got
    return _FALLBACK_LINE


_FAST_KV = re.compile(r"\t+([A-Za-z][A-Za-z ]*[A-Za-z]): (0x[0-9a-f]+|[0-9]+)")
_FAST_CTR = re.compile(r"([A-Za-z][A-Za-z0-9_]*):\.+([0-9]+)")


def _read_line(text: str) -> tuple:
    """`_read_line_full(text)`, made by `_read_fast` where it can."""
    return _read_fast(text) or _read_line_full(text)


def _read_fast(text: str) -> tuple | None:
    """`_read_line_full(text)` or None, for the two commonest lines that differ from file to file (an ibstat
    key with a number or GUID, a perfquery counter with its reading) made without most of its tests.

    Exact: on a line `_FAST_KV` matches whole (tabs, a key of letters and blanks, `: `, a decimal or
    lower-case hex number) `_read_line_full` can only find a key/value line: it holds no `-` (collector
    time), opens with a tab (no envelope, pdsh, command, ibpanic, CA / hca_id / ibstatus, perfquery header
    or counter line), holds no `/`, `:.`, ` :`, `\t:`, rule or `'`, and no marker can match it (its value
    is read by nothing after `: ` in MARKER_RE). Left to `_read_line_full` (None): `port` keys (`port: N`),
    lines with ` port ` or `Info`, timestamp candidates. Likewise on a line `_FAST_CTR` matches whole (a name
    of word characters, `:`, dots, digits): no `-`, space, `[`, `(`, `/`, `'` or `#` (so no envelope, head,
    sysfs, pdsh, ibstat or perfquery header line), and no marker can match it (nothing in MARKER_RE reads a
    `.`): a counter line. Left to `_read_line_full` (None, as for other lines): names the line openings of
    hca_id / ibpanic / ibwarn / iberror, names with `Info`, commands (`CMD_RE`), timestamp candidates.
    """
    m = _FAST_KV.fullmatch(text)
    if m is not None:
        key = m.group(1)
        if (
            key != "port"
            and " port " not in text
            and "Info" not in text
            and not (len(text) < 80 and _CAND.search(text))
        ):
            return (False, None, False, None, None, None, None, (key, m.group(2)), *_FAST_KV_TAIL)
        return None
    m = _FAST_CTR.fullmatch(text)
    if m is not None:
        name = m.group(1)
        if (
            name not in _FAST_CTR_NOT
            and "Info" not in name
            and not (len(text) < 80 and _CAND.search(text))
            and not _P["cmd"].search(text)
        ):
            return (*_FAST_CTR_HEAD, (name, m.group(2)), *_FAST_CTR_TAIL)
    return None


_FAST_CTR_NOT = frozenset(("hca_id", "ibpanic", "ibwarn", "iberror"))
_FAST_KV_TAIL = (False, None, False, None, False, False, None, 1)
_FAST_CTR_HEAD = (False, None, False, None, None, None, None, None, False)
_FAST_CTR_TAIL = (False, None, False, False, None, 2)


def _read_line_full(text: str) -> tuple:  # noqa: C901, PLR0912
    """What the small path needs to know of a line apart from the state it is read in.

    (fallback, timestamp candidate, block start, tool / device / port named here (None: not named),
    perfquery header (lid, port, what), key/value (key, val), a `Port N:` / `port: N` line, perfquery
    counter (name, value), mlxlink key/value line, sysfs (dev, port, group, key, value), understood whatever
    the state, blank, ibpanic / iberror / ibwarn (tool, pid, message), lane: 1 a plain key/value line, 2 a
    plain counter line (neither changes any state), 0 other).
    fallback: the line needs the vectorised path (what `_small.attempt` and the per-line checks decline:
    printable ASCII only, no collector time or launcher prefix, no `==> path <==` / `cat path` / ibdev2netdev
    / pdsh line, numbers the strict casts would reject, sysfs paths the value split cannot read).
    `_small.attempt`'s tests of the joined text hold for it when they hold for one of its lines (none of
    their patterns can match across a line end), so they are made per line here and cached with the rest.
    """
    # (each regex only where a literal it needs is there: a line of another kind fails the cheap test)
    if (
        ("-" in text and _COLLECTOR_TIME_NEED.search(text))
        or (may_match(_ENV_LITS, text) and _ANY_ENV_PY.search(text))
    ):
        return _FALLBACK_LINE
    b = text.rstrip()
    if not b:
        return _BLANK_LINE
    pats = _P
    if (
        (b.startswith("==> ") and pats["head"].search(b))
        or ("/sys/class/infiniband/" in b and pats["cat"].search(b))
        or (" port " in b and pats["i2n"].search(b))
        or (": " in b and pats["pdsh"].search(b))
    ):
        return _FALLBACK_LINE
    cand = b if len(b) < 80 and _CAND.search(b) else None
    k_sysfs = bool(
        "/" in b
        and pats["sysfs"].search(b)
        and (b.startswith("/sys/class/infiniband/") or _SYSFS_PORTS.search(b))
    )
    c0 = b[0]
    ws = c0 == " " or c0 == "\t"
    k_ca = pats["ca"].search(b) if b.startswith("CA '") else None
    k_ibs = pats["ibstatus"].search(b) if b.startswith("Infiniband device '") else None
    k_hca = pats["hca"].search(b) if b.startswith("hca_id:") else None
    k_port = pats["port"].search(b) if ws else None
    k_dvport = pats["dvport"].search(b) if ws else None
    k_kv = pats["kv"].search(b) if ws else None
    k_pqhdr = pats["pqhdr"].search(b) if c0 == "#" else None
    k_pqctr = pats["pqctr"].search(b) if ":." in b else None
    k_mlxsec = pats["mlxsec"].search(b) if "Info" in b else None
    k_mlxkv = pats["mlxkv"].search(b) if " :" in b or "\t:" in b else None
    k_rule = pats["rule"].search(b) if "---" in b or "===" in b or "***" in b else None
    k_marker = pats["marker"].search(b) if may_match(_MARKER_LITS, b) else None
    k_cmd = pats["cmd"].search(b)
    f_here = d_here = p_here = None
    if k_ca:
        f_here = "ibstat"
    elif k_ibs:
        f_here = "ibstatus"
    elif k_hca:
        f_here = "ibv_devinfo"
    elif k_pqhdr:
        f_here = "perfquery"
    elif k_mlxsec or (k_cmd and _W_MLXLINK.search(b)):
        f_here = "mlxlink"
    elif k_sysfs:
        f_here = "sysfs"
    elif k_cmd and _W_PERFQUERY.search(b):
        f_here = "perfquery"
    if k_ca:
        d_here = k_ca.group(1)
    elif k_ibs:
        d_here = k_ibs.group(1)
    elif k_hca:
        d_here = k_hca.group(1)
    elif k_marker:
        d_here = k_marker.group(1)
    elif k_cmd and _W_PERFQUERY.search(b):
        m = pats["pq_ca"].search(b)
        d_here = m.group(1) if m else ""
    elif k_cmd and _W_MLXLINK.search(b):
        m = pats["mlx_dev"].search(b)
        d_here = m.group(1) if m else ""
    if k_ibs:
        p_here = k_ibs.group(2)
    elif k_port:
        p_here = k_port.group(1)
    elif k_dvport:
        p_here = k_dvport.group(1)
    elif k_marker:
        p_here = k_marker.group(2) or ""
    elif k_ca or k_hca or k_cmd:
        p_here = ""
    pqhdr = None
    if k_pqhdr:
        lid_s, port_s = k_pqhdr.group("lid"), k_pqhdr.group("port")
        if len(lid_s) > 18 or len(port_s) > 9:  # (the strict casts of the vectorised path)
            return _FALLBACK_LINE
        pqhdr = (int(lid_s), int(port_s), k_pqhdr.group("what"))
    pqctr = None
    if k_pqctr:
        name, rest = b.split(":", 1)
        pqctr = (name, rest.lstrip(".").strip() or ".")
    panic = None
    if b.startswith(("ibpanic:", "ibwarn:", "iberror:")) and (k_panic := pats["panic"].search(b)):
        pid_s = k_panic.group("pid")
        if pid_s is not None and len(pid_s) > 18:  # (the strict cast of the vectorised path)
            return _FALLBACK_LINE
        panic = (k_panic.group("tool"), None if pid_s is None else int(pid_s), k_panic.group("msg"))
    sysfs = None
    if k_sysfs:
        # `path<sep>value`: the path is the leading run without blanks or `:` (see `sy_part`)
        path_s = _SY_HEAD.search(b).group(1)
        g = _SY_PATH.search(path_s)
        if g is None:
            return _FALLBACK_LINE
        val = b[len(path_s) :]
        val = (val[1:] if val.startswith(":") else val).strip()
        sysfs = (g.group("dev"), g.group("port"), g.group("grp"), g.group("key"), val)
    blk = bool(k_ca or k_ibs or k_hca or k_pqhdr)
    # a key/value or counter line that changes no state and holds nothing else: the walk's short lane
    plain = not (cand or blk or k_port or k_dvport or k_mlxkv or sysfs or panic or pqhdr) and (
        f_here is None and d_here is None and p_here is None
    )
    lane = 1 if plain and k_kv and not pqctr else 2 if plain and pqctr and not k_kv else 0
    return (
        False,
        cand,
        blk,
        f_here,
        d_here,
        p_here,
        pqhdr,
        (k_kv.group("key"), k_kv.group("val")) if k_kv else None,
        bool(k_port or k_dvport),
        pqctr,
        bool(k_mlxkv),
        sysfs,
        bool(
            k_ca or k_ibs or k_hca or k_pqhdr or k_mlxsec or k_rule or k_marker or k_cmd or k_sysfs or panic
        ),
        False,
        panic,
        lane,
    )


def _read_times(classes: list[list[tuple]]) -> None:
    """Put the timestamp candidates of these files not yet in `_TIMES` there: they are read by the vectorised
    expression (`_timestamps`, one select over those lines only), so the times are polars' own."""
    new = list(dict.fromkeys(c[1] for cls in classes for c in cls if c[1] is not None and c[1] not in _TIMES))
    if not new:
        return
    if len(_TIMES) > _CACHE_MAX:
        _TIMES.clear()
    is_ts, ts_v, ts_q = _timestamps(pl.col("b"))
    got = pl.DataFrame({"b": new}, schema={"b": pl.String}).select(k=is_ts.fill_null(False), ts=ts_v, q=ts_q)
    for b, k, tv, tq in zip(new, *(got.get_column(c).to_list() for c in ("k", "ts", "q"))):
        _TIMES[b] = (k, tv, tq)


def _small_many(files: list[tuple[list[str], FileContext]]) -> list[ParseResult | None]:
    """`parse` in plain Python for small files of the plain forms (None for a file it declines, see above),
    each table built once for all the files and cut per file."""
    lines = _LINES
    if len(lines) > _CACHE_MAX:
        lines.clear()
    for cache in (*_ATTRS.values(), _PQ_NAMES):
        if len(cache) > _CACHE_MAX:
            cache.clear()
    classes: list[list[tuple] | None] = []
    for texts, _ctx in files:
        if sum(map(len, texts)) + len(texts) - 1 > MAX_BYTES:
            classes.append(None)
            continue
        get = lines.get
        cls = [get(t) or _classify_new(t) for t in texts]
        # (a line needing the vectorised path is `_FALLBACK_LINE`, the one class whose first field is True)
        classes.append(None if _FALLBACK_LINE in cls else cls)
    _read_times([c for c in classes if c is not None])
    inv = _Cols(9)
    ev = _Cols(11)
    co = _Cols(10)
    got: list[tuple | None] = []
    plain = _plain_dumps(files, classes) if PQ_LANE else {}
    for (texts, ctx), cls in zip(files, classes):
        if cls is None:
            got.append(None)
            continue
        if id(cls) in plain:
            got.append(plain[id(cls)])
            continue
        marks = (inv.n, ev.n, co.n)
        try:
            acc = _small_file(texts, cls, ctx, inv, ev, co)
        except FallbackError:
            got.append(None)
            continue
        got.append((marks, (inv.n, ev.n, co.n), acc))
    if all(g is None for g in got):
        return [None] * len(files)
    frames = (inv.frame(INVENTORY_SCHEMA), ev.frame(EVENTS_SCHEMA), co.frame(COMMS_SCHEMA))
    out: list[ParseResult | None] = []
    for g in got:
        if g is None:
            out.append(None)
            continue
        start, end, (parsed, unrecognized, examples, partial) = g[:3]
        inventory, events, comms = (fr.slice(s, e - s) for fr, s, e in zip(frames, start, end))
        if len(g) > 3:  # (a plain perfquery dump: its counter rows are a slice of `_plain_dumps`' frame)
            comms = g[3]
        out.append(
            ParseResult(
                tables={"inventory": inventory, "events": events, "comms": comms},
                parsed=parsed,
                unrecognized=unrecognized,
                unrecognized_examples=examples,
                partial=partial,
                node=None,
            )
        )
    return out


PQ_LANE = True
"""Whether `_small_many` reads plain perfquery dumps by `_plain_dumps` (tests compare it with the walk)."""
_PLAIN_DIGITS = 18
"""The most digits of a reading `_plain_dumps` converts (a float of an integer below 10^18, as `float()`
gives it); a longer one, or one not of decimal digits, leaves its file to the walk."""


_PQ_HEADER_ONLY = (
    False, None, True, "perfquery", None, None, None, None, False, None, False, None, True, False, None, 0,
)  # fmt: skip
"""`_read_line_full`'s class of a perfquery header line that does nothing else, but its header (field 6)."""


def _pq_header_only(c: tuple) -> bool:
    """Whether a line's class (`_read_line_full`) is a perfquery header line and nothing else: it sets the
    format, the header (lid, port, what) and a block, names no device or port, has no time, and is
    understood (`_PQ_HEADER_ONLY` but its header)."""
    return c[6] is not None and c[:6] == _PQ_HEADER_ONLY[:6] and c[7:] == _PQ_HEADER_ONLY[7:]


def _plain_dumps(
    files: list[tuple[list[str], FileContext]], classes: list[list[tuple] | None]
) -> dict[int, tuple]:
    """`_small_file`'s results of the batch's plain perfquery dumps, by the id of their classes: files whose
    lines are blanks, header lines that do nothing else (`_pq_header_only`) and counter lines of the short
    lane (lane 2) whose reading, where it is a counter's, is decimal digits (`_PLAIN_DIGITS` at most), a
    header before the first counter line.

    There the walk's state is the header in force only (no device, time, block attribute or event), every
    non-blank line is understood, the last one too, and each counter line makes a `comms` row unless its name
    is not a counter (`_pq_name` gives None): device `lid:<lid>`, the header's port, the counter, its reading
    as a float, the reading's number among the file's readings of that (device, port, counter), and the
    detail. Those rows are made here for all such files at once, in polars, from each file's counter lines
    and headers (a few list comprehensions over a file's classes, ~0.1 us a line, against the walk's ~3 us).
    A file whose header group needs escaping (`_pq_name` raises) is left to the walk, which gives it None.
    Each value is `(start, end, (parsed, 0, [], False), comms)` with empty marks for the other tables."""
    f_of: list[int] = []  # per taken file: its number in the batch
    parsed: list[int] = []
    c_pos: list[list[int]] = []
    c_cls: list[list[tuple]] = []
    h_pos: list[list[int]] = []
    h_val: list[tuple[int, int, str]] = []
    for k, cls in enumerate(classes):
        if not cls:
            continue
        lanes = [c[15] for c in cls]
        other = [i for i, lane in enumerate(lanes) if lane != 2]
        heads = [i for i in other if cls[i][13] is not True]  # (blank lines: `_BLANK_LINE`, skipped)
        if not heads or not all(_pq_header_only(cls[i]) for i in heads):
            continue
        ctr = [i for i, lane in enumerate(lanes) if lane == 2]
        if ctr and ctr[0] < heads[0]:
            continue  # (a counter line before any header: not understood)
        f_of.append(k)
        parsed.append(len(ctr) + len(heads))
        c_pos.append(ctr)
        c_cls.append([cls[i][9] for i in ctr])
        h_pos.append(heads)
        h_val.extend(cls[i][6] for i in heads)
    if not f_of:
        return {}
    n_c = [len(p) for p in c_pos]
    firsts = [files[k][1].first_line for k in f_of]
    # every counter line's header: the last header above it in its file (files numbered in order, so a
    # position `t * span + i` sorts as (file, line))
    span = max(len(classes[k] or ()) for k in f_of) + 1  # type: ignore[arg-type]
    hp = pl.Series([t * span + i for t, ps in enumerate(h_pos) for i in ps], dtype=pl.Int64)
    frame = pl.DataFrame(
        {
            "_t": [t for t, n in enumerate(n_c) for _ in range(n)],
            "_i": [i for ps in c_pos for i in ps],
            "name": [c[0] for cs in c_cls for c in cs],
            "raw": [c[1] for cs in c_cls for c in cs],
        },
        schema={"_t": pl.Int64, "_i": pl.Int64, "name": pl.String, "raw": pl.String},
    )
    h_lid = pl.Series([h[0] for h in h_val], dtype=pl.Int64)
    h_port = pl.Series([h[1] for h in h_val], dtype=pl.Int64)
    h_what = pl.Series([h[2] for h in h_val], dtype=pl.String)
    frame = frame.with_columns(
        _h=pl.lit(hp).search_sorted(pl.col("_t") * span + pl.col("_i"), side="right").cast(pl.Int64) - 1
    ).with_columns(
        _lid=pl.lit(h_lid).gather(pl.col("_h")),
        _port=pl.lit(h_port).gather(pl.col("_h")),
        what=pl.lit(h_what).gather(pl.col("_h")),
    )
    # the counter and the detail's middle of each distinct (name, group): `_pq_name`, kept in `_PQ_NAMES`
    pairs = frame.select("name", "what").unique(maintain_order=True)
    got: list[tuple[str, str] | None | object] = []
    for key in pairs.iter_rows():
        named = _PQ_NAMES.get(key, _MISS)
        if named is _MISS:
            try:
                named = _pq_name(*key)
            except FallbackError:
                named = _MISS
        got.append(named)
    pairs = pairs.with_columns(
        counter=pl.Series([g[0] if isinstance(g, tuple) else None for g in got], dtype=pl.String),
        mid=pl.Series([g[1] if isinstance(g, tuple) else None for g in got], dtype=pl.String),
        _raises=pl.Series([g is _MISS for g in got], dtype=pl.Boolean),
    )
    frame = frame.join(pairs, on=["name", "what"], how="left", maintain_order="left")
    # files left to the walk: a group that needs escaping, or a counter's reading not of plain digits
    odd = pl.col("_raises") | (
        pl.col("counter").is_not_null() & ~pl.col("raw").str.contains(f"^[0-9]{{1,{_PLAIN_DIGITS}}}$")
    )
    walked = set(frame.filter(odd).get_column("_t").unique().to_list())
    nodes = pl.Series([files[k][1].node for k in f_of], dtype=pl.String)
    paths = pl.Series([files[k][1].path for k in f_of], dtype=pl.String)
    frame = frame.filter(pl.col("counter").is_not_null() & ~pl.col("_t").is_in(sorted(walked)))
    reading = _reading_numbers(frame, ["_t", "_lid", "_port", "counter"])
    comms = frame.select(
        "_t",
        record=pl.lit("ib_counter"),
        ts=pl.lit(None),
        node=pl.lit(nodes).gather(pl.col("_t")),
        device=pl.concat_str(pl.lit("lid:"), pl.col("_lid").cast(pl.String)),
        port=pl.col("_port"),
        counter=pl.col("counter"),
        value=pl.col("raw").cast(pl.Float64),
        detail=pl.concat_str(
            pl.lit('{"reading":'),
            pl.lit(reading).cast(pl.String),
            pl.col("mid"),
            pl.col("_lid").cast(pl.String),
            pl.lit(',"tool":"perfquery"}'),
        ),
        file=pl.lit(paths).gather(pl.col("_t")),
        line=pl.lit(pl.Series(firsts, dtype=pl.Int64)).gather(pl.col("_t")) + pl.col("_i"),
    )
    t_of = comms.get_column("_t")
    comms = comms.drop("_t").cast(COMMS_SCHEMA)  # type: ignore[arg-type]
    taken = pl.Series(range(len(f_of)), dtype=pl.Int64)
    at = t_of.search_sorted(taken, side="left").to_list()
    ends = t_of.search_sorted(taken, side="right").to_list()
    out: dict[int, tuple] = {}
    for t, k in enumerate(f_of):
        if t in walked:
            continue
        rows = comms.slice(at[t], ends[t] - at[t])
        out[id(classes[k])] = ((0, 0, 0), (0, 0, 0), (parsed[t], 0, [], False), rows)
    return out


def _reading_numbers(frame: pl.DataFrame, keys: list[str]) -> pl.Series:
    """Each row's number among the rows of `frame` above it with the same `keys` (0 for the first), as
    `pl.int_range(pl.len()).over(keys)` gives it: all 0 where no two rows share their keys (a dump reads each
    counter of a port once); else by one `group_by` (a window over thousands of one-row groups costs ~8 ms
    for 6k rows, these ~1-2)."""
    n = frame.height
    if n == 0 or frame.select(pl.struct(keys).n_unique()).item() == n:
        return repeated(0, n, pl.Int64)
    rows = frame.select(keys).with_row_index("_r").group_by(keys).agg(pl.col("_r"))
    spread = rows.select("_r", _n=pl.int_ranges(pl.col("_r").list.len(), dtype=pl.Int64)).explode("_r", "_n")
    return spread.sort("_r").get_column("_n")


def _classify_new(text: str) -> tuple:
    c = _LINES[text] = _classify(text)
    return c


class _Cols:
    """Column lists of one table for a batch of files."""

    def __init__(self, width: int) -> None:
        self.cols: list[list] = [[] for _ in range(width)]
        self.n = 0

    def add(self, *cols: list) -> None:
        for mine, theirs in zip(self.cols, cols):
            mine.extend(theirs)
        self.n = len(self.cols[-1])

    def frame(self, schema: dict) -> pl.DataFrame:
        if not self.n:  # (one empty frame per table kept: ~70 us a frame; files take slices of it)
            got = _EMPTY.get(id(schema))
            if got is None:
                got = _EMPTY[id(schema)] = pl.DataFrame(dict(zip(schema, self.cols)), schema=schema)
            return got
        return pl.DataFrame([pl.Series(k, col, dtype=t) for (k, t), col in zip(schema.items(), self.cols)])


_EMPTY: dict[int, pl.DataFrame] = {}
"""`_Cols.frame` of no rows, by the id of its schema (a module constant)."""


def _port_int(p: str | None) -> int | None:
    if not p:
        return None
    v = int(p)
    return v if v < _INT32 else None


def _attr_of(cache: dict, fmt: str, text: str, kv: tuple[str, str]) -> tuple[str, str | None] | None:
    """(attribute, normalised value) of a key/value line read in a `fmt` block (None: not an attribute),
    kept in `cache` (that format's, keyed by the line: a pure function of the two)."""
    keys = IBSTAT_KEYS if fmt == "ibstat" else IBSTATUS_KEYS if fmt == "ibstatus" else DEVINFO_KEYS
    attribute = keys.get(kv[0].strip().lower())
    got = cache[text] = None if attribute is None else (attribute, _normalise_py(attribute, kv[1].strip()))
    return got


def _pq_name(name: str, what: str) -> tuple[str, str] | None:
    """(counter, the detail's `,"name":...,"lid":` part) of a perfquery reading named `name` under a `what`
    header (None: not a counter), kept in `_PQ_NAMES`. Raises FallbackError where the group needs escaping."""
    if name in PQ_NOT_COUNTERS:
        got = None
    else:
        if '"' in what or "\\" in what:
            raise FallbackError
        counter = PERFQUERY_COUNTERS.get(name, name)
        if "extended" not in what and name in PQ_32BIT:
            counter += "_32"
        got = (counter, f',"name":"{name}","group":"{what}","lid":')
    _PQ_NAMES[(name, what)] = got
    return got



def _counter_value(raw: str) -> tuple[float, str]:
    """A counter reading of the small path as the vectorised path reads it, and its detail's `raw` part (a
    hex reading with a mark); FallbackError where polars' float parsing could read it otherwise (exponents,
    signs, words) or a hex value is past Int64."""
    if raw.isdigit():  # (`^\d+$` on ASCII text; `_RAW_MARK` cannot match it)
        return float(raw), ""
    if _HEX.search(raw):
        n = int(raw[2:], 16)
        if n >= _INT64:
            raise FallbackError
        return float(n), (f',"raw":"{raw}"' if _RAW_MARK.search(raw) else "")
    raise FallbackError


def _small_file(  # noqa: C901, PLR0912, PLR0913, PLR0915
    texts: list[str], cls: list[tuple], ctx: FileContext, inv: _Cols, ev_out: _Cols, co: _Cols
) -> tuple[int, int, list[tuple[int, str]], bool]:
    """Read one file's classified lines in order (the state: tool, device, port, block, perfquery header, time
    in force), add its rows to `inv`, `ev_out` and `co`, and return its (parsed, unrecognized, examples,
    partial). Raises FallbackError (having added nothing) where only the vectorised path can promise the
    result."""
    times = _TIMES
    first = ctx.first_line
    cur_ts = cur_q = None  # time and its quality in force (forward-filled apart, like the vectorised path)
    fmt = dev = port = None  # forward-filled context (raw strings as the extractions give them)
    pq_lid = pq_port = pq_what = None
    block = 0
    # accounting as `_small.account_texts` does it (a line is blank where `_read_line` says so: `rstrip` and
    # `strip` leave nothing on the same lines), made in the walk
    parsed = unrecognized = 0
    examples: list[tuple[int, str]] = []
    last_ok = True  # whether the last non-blank line is understood (True: there is none)
    # attribute rows [i, dev, port, block, attribute, val, source, value, ts, ts_quality] of the key/value
    # lines, in line order (the attribute and value of a line in a format kept in `_ATTRS`)
    attrs: list[list] = []
    pq_rows: list[tuple] = []  # (i, dev, pq_lid, pq_port, pq_what, name, val, ts)
    sy_rows: list[tuple] = []  # (i, dev, port, group, key, val, block, ts, ts_quality)
    pan_rows: list[tuple] = []  # (i, tool, pid, message, ts, ts_quality)
    dev_v = port_i = acache = None  # (the device, the port as an attribute row holds it, `_ATTRS[fmt]`)
    in_block = pq_ok = False  # (whether key/value lines are read, counter lines)
    miss = _MISS
    for i, c in enumerate(cls):
        lane = c[15]
        if lane == 1:  # a plain key/value line
            if in_block:
                text = texts[i]
                a = acache.get(text, miss)
                if a is miss:
                    a = _attr_of(acache, fmt, text, c[7])
                if a is not None:
                    attrs.append([i, dev_v, port_i, block, a[0], c[7][1], fmt, a[1], cur_ts, cur_q])
                parsed += 1
                last_ok = True
            elif c[12]:
                parsed += 1
                last_ok = True
            else:
                unrecognized += 1
                last_ok = False
                if len(examples) < MAX_EXAMPLES:
                    examples.append((first + i, texts[i][:500]))
            continue
        if lane == 2:  # a plain counter line
            if pq_ok:
                pq_rows.append((i, dev_v, pq_lid, pq_port, pq_what, *c[9], cur_ts))
                parsed += 1
                last_ok = True
            elif c[12]:
                parsed += 1
                last_ok = True
            else:
                unrecognized += 1
                last_ok = False
                if len(examples) < MAX_EXAMPLES:
                    examples.append((first + i, texts[i][:500]))
            continue
        (
            _, cand, blk, f_here, d_here, p_here, pqhdr, kv, portline, pqctr, mlxkv, sysfs, ok, blank, panic,
            _,
        ) = c  # fmt: skip
        if blank:
            continue
        k_ts = False
        if cand is not None:
            k_ts, tv, tq = times[cand]
            cur_ts = tv if tv is not None else cur_ts
            cur_q = tq if tq is not None else cur_q
        if blk:
            block += 1
        if f_here is not None:
            fmt = f_here
        if d_here is not None:
            dev = d_here
        if p_here is not None:
            port = p_here
            port_i = _port_int(port)
        if pqhdr is not None:
            pq_lid, pq_port, pq_what = pqhdr
        dev_v = dev or None
        in_block = (fmt == "ibstat" or fmt == "ibstatus" or fmt == "ibv_devinfo") and dev_v is not None
        if in_block:
            acache = _ATTRS[fmt]
        pq_ok = fmt == "perfquery" and pq_port is not None
        if mlxkv and fmt == "mlxlink":
            raise FallbackError  # mlxlink key/value lines: the vectorised path
        pq_line = pqctr is not None and pq_ok
        if kv is not None and in_block and not portline:
            text = texts[i]
            a = acache.get(text, miss)
            if a is miss:
                a = _attr_of(acache, fmt, text, kv)
            if a is not None:
                attrs.append([i, dev_v, port_i, block, a[0], kv[1], fmt, a[1], cur_ts, cur_q])
        if pq_line:
            pq_rows.append((i, dev_v, pq_lid, pq_port, pq_what, pqctr[0], pqctr[1], cur_ts))
        if panic is not None:
            pan_rows.append((i, *panic, cur_ts, cur_q))
        if sysfs is not None:
            sy_rows.append((i, *sysfs[:5], block, cur_ts, cur_q))
        if ok or (portline and dev_v is not None) or (kv is not None and in_block) or pq_line or k_ts:
            parsed += 1
            last_ok = True
        else:
            unrecognized += 1
            last_ok = False
            if len(examples) < MAX_EXAMPLES:
                examples.append((first + i, texts[i][:500]))

    # ---- attributes (ibstat / ibstatus / ibv_devinfo key/value lines; sysfs files)
    if sy_rows:
        for i, d_, p_, grp, key, val, blk, tv, tq in sy_rows:
            attribute = SYSFS_KEYS.get(key)
            if grp is not None or attribute is None:
                continue
            value = _normalise_py(attribute, val.strip())
            attrs.append([i, d_, _port_int(p_), blk, attribute, val, "sysfs", value, tv, tq])
        attrs.sort(key=lambda a: a[0])
    extra_rows: list[list] = []
    widths = [a for a in attrs if a[4] == "active_width"]
    for a in attrs:
        if a[4] == "rate" and _RATE_PAREN.search(a[5]):
            extra_rows.append([*a[:4], "link_width_speed", a[5], a[6], _RATE_INNER.search(a[5]).group(1)])
        if a[4] == "active_speed":
            m = _GBPS.search(a[5])
            if m and not _PLAIN_DEC.search(m.group(1)):
                raise FallbackError  # (polars' float parsing of odd numbers)
            for w in widths:
                if (w[1], w[2], w[3]) != (a[1], a[2], a[3]):
                    continue
                lm = _LANES.search(w[5])
                if m is None or lm is None:
                    continue
                total = float(lm.group(1)) * float(m.group(1))
                if not total.is_integer():
                    raise FallbackError  # (polars' rounding and float printing)
                extra_rows.append([*a[:4], "rate", a[5], a[6], str(int(total))])
    if extra_rows:
        attrs = sorted(attrs + extra_rows, key=lambda a: a[0])
    # ---- events: ports not Active
    extra: dict[tuple, dict[str, str]] = {}
    for a in attrs:
        if a[2] is not None and a[4] in ("phys_state", "rate", "link_layer"):
            extra.setdefault((a[1], a[2], a[3], a[6]), {}).setdefault(a[4], a[7])
    ev: list[tuple] = []
    for a in attrs:
        if a[2] is None or a[4] != "state" or a[7] is None or a[7] == "Active":
            continue
        x = extra.get((a[1], a[2], a[3], a[6]), {})
        fields = (
            ("device", a[1]), ("port", a[2]), ("state", a[7]), ("phys_state", x.get("phys_state")),
            ("rate", x.get("rate")), ("link_layer", x.get("link_layer")), ("tool", a[6]),
        )  # fmt: skip
        if not _detail_ok(*(v for k_, v in fields if k_ != "port")):
            raise FallbackError
        detail = ",".join(
            f'"{k_}":{v}' if k_ == "port" else f'"{k_}":"{v}"' for k_, v in fields if v is not None
        )
        kind = "ib_port_down" if a[7] == "Down" else "ib_port_not_active"
        ev.append((a[0], kind, a[7], texts[a[0]].strip(), "{" + detail + "}", a[8], a[9], "medium"))
    # tool aborts and warnings (ibpanic, iberror, ibwarn)
    for i, tool, pid, msg, tv, tq in pan_rows:
        m = _IB_DEVICE.search(msg)
        device = m.group(1) if m else None
        detail = json_object(("tool", tool), ("pid", pid), ("device", device), ("reason", msg))
        warn = tool == "ibwarn"
        kind = "ib_tool_warning" if warn else "ib_tool_error"
        ev.append((i, kind, None, texts[i].strip(), detail, tv, tq, "low" if warn else "medium"))
    ev.sort(key=lambda e: e[0])
    # ---- counters (perfquery, sysfs)
    readings: dict[tuple, int] = {}
    c_dev: list[str] = []
    c_port: list[int] = []
    c_counter: list[str] = []
    c_value: list[float] = []
    c_detail: list[str] = []
    c_line: list[int] = []
    c_ts: list = []
    ctr: list[tuple] = []  # (i, device, port, counter, name, group, raw, lid, tool, ts) in line order

    def reading(i: int, device: str, port: int | None, counter: str, value: float, tv: object) -> int:
        """Add a counter row but for its detail; the reading's number among those of its (device, port,
        counter)."""
        key = (device, port, counter)
        r = readings.get(key, 0)
        readings[key] = r + 1
        c_dev.append(device)
        c_ts.append(tv)
        c_port.append(port)
        c_counter.append(counter)
        c_value.append(value)
        c_line.append(first + i)
        return r

    if not sy_rows:  # perfquery readings only (the loop below, in one pass)
        names = _PQ_NAMES
        for i, d_, lid, p_, what, name, raw, tv in pq_rows:
            named = names.get((name, what), miss)
            if named is miss:
                named = _pq_name(name, what)
            if named is None:
                continue
            counter, mid = named
            value, raw_part = _counter_value(raw)
            r = reading(i, d_ if d_ is not None else f"lid:{lid}", p_, counter, value, tv)
            c_detail.append(f'{{"reading":{r}{mid}{lid},"tool":"perfquery"{raw_part}}}')
        pq_rows = []
    for i, d_, lid, p_, what, name, raw, tv in pq_rows:
        if name in PQ_NOT_COUNTERS:
            continue
        if '"' in what or "\\" in what:
            raise FallbackError
        device = d_ if d_ is not None else f"lid:{lid}"
        counter = PERFQUERY_COUNTERS.get(name, name)
        if "extended" not in what and name in PQ_32BIT:
            counter += "_32"
        ctr.append((i, device, p_, counter, name, what, raw, lid, "perfquery", tv))
    if sy_rows:
        for i, d_, p_, grp, key, val, _blk, tv, _tq in sy_rows:
            if grp in ("counters", "hw_counters") and d_ is not None:
                ctr.append((i, d_, _port_int(p_), key, None, grp, val, None, "sysfs", tv))
        ctr.sort(key=lambda c: c[0])
    for i, device, p_, counter, name, what, raw, lid, tool, tv in ctr:
        value, raw_part = _counter_value(raw)
        r = reading(i, device, p_, counter, value, tv)
        if tool == "perfquery":
            head = f'{{"reading":{r},"name":"{name}","group":"{what}","lid":{lid}'
            c_detail.append(f'{head},"tool":"perfquery"{raw_part}}}')
        else:
            c_detail.append(f'{{"reading":{r},"group":"{what}","tool":"sysfs"{raw_part}}}')
    # ---- accounting
    partial = not last_ok or any(p[1] != "ibwarn" for p in pan_rows)
    # ---- the rows (nothing was added before: a FallbackError above leaves the tables as they were)
    node, path = ctx.node, ctx.path
    inv_rows = [a for a in attrs if a[7]]
    n = len(inv_rows)
    inv.add(
        [node] * n,
        ["nic"] * n,
        [a[1] for a in inv_rows],
        [a[2] for a in inv_rows],
        [a[4] for a in inv_rows],
        [a[7] for a in inv_rows],
        [a[6] for a in inv_rows],
        [path] * n,
        [first + a[0] for a in inv_rows],
    )
    n = len(ev)
    ev_out.add(
        [e[5] for e in ev],
        [e[6] or "none" for e in ev],
        [node] * n,
        ["ib"] * n,
        [e[1] for e in ev],
        [e[2] for e in ev],
        [e[7] for e in ev],
        [e[3] for e in ev],
        [e[4] for e in ev],
        [path] * n,
        [first + e[0] for e in ev],
    )
    n = len(c_line)
    co.add(
        ["ib_counter"] * n, c_ts, [node] * n, c_dev, c_port, c_counter, c_value, c_detail, [path] * n, c_line
    )
    return parsed, unrecognized, examples, partial
