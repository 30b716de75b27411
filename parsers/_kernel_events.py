"""Event and inventory grammar of kernel logs: what `parsers.kernel_log` finds in the message part of a line.

Everything here works on the frame `kernel_log.stamp` returns (one row per line: line, text, ts,
ts_quality, uptime_s, host, msg, boot_seg, crash_record, ...). Single-line events are data: one
`Rule` per line shape (a cheap literal prefilter, then a regex with named groups). Multi-line records
are grouped with polars window expressions: a PCIe AER report (header, `PCIe Bus Error`, `device [..]
error status/mask`, one line per status bit, TLP header) becomes ONE `pcie_aer` event; so do APEI
`{N}[Hardware Error]:` blocks and `mce: [Hardware Error]:` dumps. The ≥570 three-line "fallen off the
bus" message and the XID 154 recovery action split over lines are joined by line number.

Multi-line AER/APEI/MCE records and the row shaping live in `parsers._kernel_blocks`.

Short files (issue 10: a bundle holds thousands of 2-50 KB kernel logs): a polars pass costs ~0.1-0.3 ms
whatever its row count, so frames of up to `SMALL_ROWS` ASCII messages are matched with Python's `re`
(ASCII mode: the same matches and groups as polars' engine on such text, see `_py_msgs`) and their rule,
Xid and inventory rows built in Python; non-ASCII or longer frames take the polars passes. The tests of
`tests/parsers/test_kernel_fast.py` hold both paths equal.

Kinds: xid, sxid, gpu_fallen_off_bus, gpu_crash_dump, gpu_init_failure, pcie_aer, pcie_link_degraded,
nic_link, nic_module, ib_carrier, thermal, mce, edac, oom, hung_task, segfault, soft_lockup, kernel_panic.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import accumulate

import polars as pl

from forensics.catalog import entries
from forensics.schema import columns
from parsers._kernel_blocks import (
    _BUS_CACHE,
    AER_LINE_RE,
    AER_LITERALS,
    APEI_RE,
    BDF,
    MCE_RE,
    XID_BUS,
    _aer_blocks,
    _apei_agg,
    _apei_events,
    _events,
    _mce_blocks,
    _node,
    _nonempty,
    normalized_bus,
)
from parsers.base import FileContext


@dataclass(frozen=True)
class Rule:
    """One single-line event shape.

    The regex runs on the message (the line without its time/host prefix). Named groups `bus` (PCI
    address) and `code` are special; every other group goes to the event's `detail` JSON.
    """

    kind: str
    literals: tuple[str, ...]
    pattern: str
    severity: str
    code: str | None = None
    """Constant code when the pattern has no `code` group."""
    severity_by_code: dict[str, str] = field(default_factory=dict)
    lower_code: bool = True
    code_map: dict[str, str] = field(default_factory=dict)
    """Renames of (lower-cased, '_'-joined) codes."""


RULES: tuple[Rule, ...] = (
    # ---------------------------------------------------------------- NVIDIA driver (non-Xid)
    Rule(
        "gpu_fallen_off_bus",
        ("fallen off the bus",),
        rf"NVRM: GPU (?:at )?(?:PCI:)?(?P<bus>{XID_BUS}):? (?:GPU )?has fallen off the bus",
        "critical",
        code="fallen_off_bus",
    ),
    Rule(
        "gpu_init_failure",
        ("RmInitAdapter failed", "probe routine failed", "rm_init_adapter failed", "failed to allocate"),
        rf"NVRM: (?:GPU (?P<bus>{XID_BUS}): )?(?P<code>RmInitAdapter|The NVIDIA probe routine) failed"
        r"(?:! \((?P<status>[^)]*)\)| for (?P<devices>\d+) device\(s\))?",
        "high",
        code_map={"rminitadapter": "rm_init_adapter_failed", "the_nvidia_probe_routine": "probe_failed"},
    ),
    # ---------------------------------------------------------------- NIC / InfiniBand
    Rule(
        "nic_link",
        ("Port:", "Link"),
        rf"^(?P<driver>[\w.-]+) (?P<bus>{BDF}) (?P<device>mlx\d_\d+|[\w.-]+): Port: (?P<port>\d+) Link (?P<code>[A-Z_]+)",
        "info",
        severity_by_code={"down": "high", "init": "low", "armed": "low", "active": "info", "act_defer": "low"},
    ),
    Rule(
        "nic_link",
        ("Link up", "Link down", "NIC Link is", "Link Up", "Link Down"),
        rf"^(?P<driver>[\w.-]+) (?P<bus>{BDF}) (?P<device>[\w.@-]+): (?:NIC )?Link (?:is )?(?P<code>[Uu]p|[Dd]own|UP|DOWN)\b(?P<speed>.*)",
        "info",
        severity_by_code={"down": "high", "up": "info"},
    ),
    Rule(
        "nic_module",
        ("Port module event",),
        rf"^(?P<driver>[\w.-]+) (?P<bus>{BDF}):? .*?Port module event(?:\[(?P<event>\w+)\])?: "
        r"module (?P<module>\d+), Cable (?P<code>\w+)(?:, (?P<reason>.*))?",
        "high",
        severity_by_code={"plugged": "info", "unplugged": "high", "error": "high"},
    ),
    Rule(
        "nic_module",
        ("insufficient power on the PCIe slot",),
        rf"^(?P<driver>[\w.-]+) (?P<bus>{BDF}): .*?Detected insufficient power on the PCIe slot(?: \((?P<watts>\d+)W\))?",
        "low",
        code="insufficient_power",
    ),
    Rule(
        "nic_module",
        ("High temperature", "high temperature"),
        rf"^(?P<driver>mlx\w*|[\w.-]+) (?P<bus>{BDF}): .*?[Hh]igh temperature(?P<sensors>.*)",
        "high",
        code="high_temperature",
    ),
    Rule(
        "ib_carrier",
        ("carrier",),
        rf"^(?:(?P<driver>[\w.-]+) (?P<bus>{BDF}) )?(?:IPoIB: )?(?P<device>ib[\w.]*): .*?carrier (?P<code>lost|on|off|up|down|ok)",
        "info",
        severity_by_code={"lost": "high", "off": "high", "down": "high"},
    ),
    # ---------------------------------------------------------------- PCIe link
    Rule(
        "pcie_link_degraded",
        ("available PCIe bandwidth, limited by",),
        rf"^(?P<driver>[\w.-]+) (?P<bus>{BDF}): (?P<available_gbps>[\d.]+) Gb/s available PCIe bandwidth, "
        rf"limited by (?P<speed>[\d.]+ GT/s) PCIe x(?P<width>\d+) link at (?P<limited_at>{BDF}) "
        r"\(capable of (?P<capable_gbps>[\d.]+) Gb/s with (?P<capable_speed>[\d.]+ GT/s) PCIe x(?P<capable_width>\d+) link\)",
        "medium",
        code="bandwidth_limited",
    ),
    Rule(
        "pcie_link_degraded",
        ("pciehp",),
        rf"^(?P<driver>[\w.-]+) (?P<bus>{BDF}): pciehp: Slot\((?P<slot>[^)]*)\): (?P<code>Link Down|Card not present)",
        "high",
        severity_by_code={"link_down": "high", "card_not_present": "high"},
    ),
    # ---------------------------------------------------------------- thermal / power
    Rule(
        "thermal",
        ("temperature above threshold",),
        r"CPU(?P<cpu>\d+): (?P<scope>Core|Package) temperature above threshold, cpu clock throttled"
        r"(?: \(total events = (?P<total_events>\d+)\))?",
        "medium",
        code="cpu_throttled",
    ),
    Rule(
        "thermal",
        ("temperature/speed normal",),
        r"CPU(?P<cpu>\d+): (?P<scope>Core|Package) temperature/speed normal",
        "info",
        code="cpu_normal",
    ),
    Rule(
        "thermal",
        ("power limit notification",),
        r"CPU(?P<cpu>\d+): (?P<scope>Core|Package) power limit notification(?: \(total events = (?P<total_events>\d+)\))?",
        "low",
        code="power_limit",
    ),
    Rule(
        "thermal",
        ("critical temperature", "Critical temperature"),
        r"(?P<zone>thermal_zone\d+|[\w-]+): (?:[Cc]ritical temperature reached)(?P<reason>.*)",
        "critical",
        code="critical_temperature",
    ),
    # ---------------------------------------------------------------- memory / host
    Rule(
        "edac",
        ("EDAC",),
        r"EDAC (?P<controller>(?:\w+ )?MC\d+): (?P<count>\d+) (?P<code>CE|UE) (?P<text>.*)",
        "low",
        severity_by_code={"ce": "low", "ue": "critical"},
    ),
    Rule(
        "oom",
        ("out of memory", "Out of memory"),
        r"(?P<scope>Memory cgroup out of memory|Out of memory(?: \(oom_kill_allocating_task\))?): "
        r"Kill(?:ed)? process (?P<pid>\d+) \((?P<process>[^)]*)\)(?P<text>.*)",
        "high",
        code="killed",
    ),
    Rule(
        "hung_task",
        ("blocked for more than",),
        r"INFO: task (?P<process>.+?):(?P<pid>\d+) blocked for more than (?P<seconds>\d+) seconds",
        "medium",
        code="blocked",
    ),
    Rule(
        "segfault",
        ("segfault at",),
        r"(?P<process>\S+?)\[(?P<pid>\d+)\]: segfault at (?P<address>[0-9a-fA-Fx]+) ip (?P<ip>[0-9a-fA-Fx]+) "
        r"sp (?P<sp>[0-9a-fA-Fx]+) error (?P<error>[0-9a-fA-F]+)(?:.*? in (?P<object>[^\[\s]+)\[(?P<base>[0-9a-fA-F]+))?",
        "medium",
        code="segfault",
    ),
    Rule(
        "segfault",
        ("traps:",),
        r"traps: (?P<process>\S+?)\[(?P<pid>\d+)\] (?P<trap>[\w ]+?) ip:(?P<ip>[0-9a-fA-F]+) sp:(?P<sp>[0-9a-fA-F]+) "
        r"error:(?P<error>[0-9a-fA-F]+)(?:.*? in (?P<object>[^\[\s]+)\[(?P<base>[0-9a-fA-F]+))?",
        "medium",
        code="trap",
    ),
    Rule(
        "soft_lockup",
        ("soft lockup",),
        r"BUG: soft lockup - CPU#(?P<cpu>\d+) stuck for (?P<seconds>\d+)s! \[(?P<process>.+?):(?P<pid>\d+)\]",
        "high",
        code="soft_lockup",
    ),
    Rule(
        "soft_lockup",
        ("hard LOCKUP",),
        r"Watchdog detected hard LOCKUP on cpu (?P<cpu>\d+)",
        "critical",
        code="hard_lockup",
    ),
    Rule(
        "soft_lockup",
        ("detected stall", "detected stalls"),
        r"(?P<flavor>rcu_\w+|rcu) (?:self-)?detected stalls? on CPUs?(?P<text>.*)",
        "high",
        code="rcu_stall",
    ),
    Rule(
        "kernel_panic",
        ("Kernel panic",),
        r"Kernel panic - not syncing: ?(?P<reason>.*)",
        "critical",
        code="panic",
    ),
    Rule(
        "kernel_panic",
        ("BUG: unable to handle", "kernel BUG at", "general protection fault,"),
        r"^(?:BUG: unable to handle (?:kernel )?(?P<reason>NULL pointer dereference|paging request|page fault)(?: at (?P<address>\S+))?|"
        r"kernel BUG at (?P<where>\S+?)!?$|general protection fault, (?P<gpf>.*))",
        "high",
        code="oops",
    ),
)

INVENTORY_KEY = ("node", "component", "gpu_bus_id", "device", "attribute", "value")
"""The columns a kernel log's inventory rows are unique on (a driver or firmware version stated at every boot
is one fact)."""
SEGFAULT_GPU_LIBS = r"libnccl|libcuda|libnvidia|libcudart|libcublas|libcudnn|python|libtorch|pt_main_thread"

XID_RE = (
    rf"NVRM: Xid \((?:PCI:)?(?P<bus>{XID_BUS})\)(?P<instance>[^:]*): (?P<code>\d+),"
    r"(?:\s*pid=(?P<pid>'?<unknown>'?|\d+),)?(?:\s*name=(?P<process>[^,]*),)?\s*"
)
"""The head of an Xid line; the free text after it is the rest of the message (not captured: speed)."""
XID_EXTRAS: tuple[tuple[str, str], ...] = (
    ("channel", r"(?:\bCh |[Cc]hannel (?:ID )?(?:0x)?)([0-9a-fA-F]{4,8})\b"),
    ("caused_by_xid", r"previous Xid\s*\(?(\d+)"),
    ("gpc", r"\(GPC (\d+), TPC \d+"),
    ("tpc", r"\(GPC \d+, TPC (\d+)"),
    ("sm", r"TPC \d+, SM (\d+)\)"),
    ("link", r"\b[Ll]ink (\d+)"),
    ("rm_gpu", r"\bGPU(\d+)\b"),
    ("phys_addr", r"physAddr (0x[0-9a-fA-F]+)"),
    ("row", r"row \((0x[0-9a-fA-F]+)\)"),
    ("contained", r"(Contained|Uncontained): (\w+)"),
    ("unit", r"^([A-Z][A-Z0-9_]+) (?:Fatal|Nonfatal|Non-fatal)"),
    ("nvlink_severity", r"^[A-Z][A-Z0-9_]+ (Fatal|Nonfatal|Non-fatal)"),
    ("error_string", r"errorString ([^,]+)"),
    ("gsp_function", r"Expected function (\d+ \([A-Z_]+\))"),
)
RECOVERY_RE = r"recovery action changed from (?P<from>0x[0-9a-fA-F]+) \((?P<from_name>[^)]*)\) to (?P<to>0x[0-9a-fA-F]+) \((?P<to_name>[^)]*)\)"

SXID_RE = (
    rf"nvidia-nvswitch(?P<switch>\d+): SXid \((?:PCI:)?(?P<bus>{XID_BUS})\): (?P<code>\d+), "
    r"(?:(?P<fatality>Non-fatal|Nonfatal|Fatal),\s*)?(?:Link (?P<link>\d+)\s*)?(?P<text>.*)$"
)
SXID_CONT_RE = r"^(?:Severity \d+ Engine instance|Data \{)"

RTC_RE = r"setting system clock to \S+ UTC \((?P<epoch>\d+)\)"

INVENTORY_LITERALS = (
    "setting system clock to",
    "NVRM: GPU at",
    "Serial Number",
    "loading NVIDIA UNIX",
    "Linux version",
    "firmware version:",
    "available PCIe bandwidth (",
    "_OSC: ",
)
ALL_LITERALS = tuple(
    sorted(
        {lit for rule in RULES for lit in rule.literals}
        | set(AER_LITERALS)
        | {"NVRM", "SXid", "[Hardware Error]", "Hardware Error", "Machine check", "Machine Check"}
    )
)
"""Every literal some event grammar needs; lines with none of them cannot be events."""

# ----------------------------------------------------------------------------- helpers


def _catalog_severity(kind: str) -> dict[str, str]:
    return {str(e.code): e.severity for e in entries(kind)}


FILE_SHIFT = 40
"""`kernel_log.parse_many` reads several files as one frame, file k's line numbers moved up by
k << FILE_SHIFT: the rules that take one row per file (the RTC boot time) take one per `line >> FILE_SHIFT`."""
SMALL_ROWS = 1000
"""Frames up to this many rows are matched with Python's `re` (see `_py_msgs`): a polars pass costs
~0.1-0.3 ms whatever the row count (plan, Aho-Corasick build, regex cache evicted by other formats),
which a small per-node file pays dozens of times."""

_PY_RX: dict[str, re.Pattern[str]] = {}
_PY_DTYPE: dict[str, pl.Struct] = {}


def _py_rx(pattern: str) -> re.Pattern[str]:
    rx = _PY_RX.get(pattern)
    if rx is None:
        rx = _PY_RX[pattern] = re.compile(pattern, re.ASCII)
    return rx


def _py_msgs(df: pl.DataFrame) -> list[str | None] | None:
    """The messages of a small frame, when Python's `re` reads all of them as polars' engine does; else None.

    On ASCII text without a newline, `re.ASCII` classes (`\\s \\d \\w \\b`) are the Unicode ones polars
    uses restricted to ASCII (`\\s` is White_Space: not the separators \\x1c-\\x1f Python's Unicode `\\s`
    adds) and `$` is the end of the text; both engines match leftmost-first, so matches and groups agree.
    """
    if df.height > SMALL_ROWS:
        return None
    msgs = df.get_column("msg").to_list()
    for s in msgs:
        if s is not None and (not s.isascii() or "\n" in s):
            return None
    return msgs


def _py_hit(
    df: pl.DataFrame, msgs: list[str | None], literals: tuple[str, ...], pattern: str
) -> pl.DataFrame:
    """`_hit` by Python's `re` on the messages `_py_msgs` gave."""
    rx = _py_rx(pattern)
    idx: list[int] = []
    groups: list[dict[str, str | None]] = []
    for i, s in enumerate(msgs):
        if s is None or (literals and not any(lit in s for lit in literals)):
            continue
        mt = rx.search(s)
        if mt is not None:
            idx.append(i)
            groups.append(mt.groupdict())
    dtype = _PY_DTYPE.get(pattern)
    if dtype is None:
        dtype = _PY_DTYPE[pattern] = pl.Struct(dict.fromkeys(rx.groupindex, pl.String))
    hit = df if len(idx) == df.height else df[idx] if idx else df.clear()
    return hit.hstack([pl.Series("g", groups, dtype=dtype)])


def _py_may_match(df: pl.DataFrame, grammars: tuple[tuple[tuple[str, ...], str], ...]) -> bool:
    """Whether a message holds one of a grammar's literals and matches its regex (True where Python's `re`
    cannot tell: long or non-ASCII frames). A block grammar with no such line yields nothing."""
    msgs = _py_msgs(df)
    if msgs is None:
        return True
    for literals, pattern in grammars:
        rx = _py_rx(pattern)
        if any(s is not None and any(lit in s for lit in literals) and rx.search(s) for s in msgs):
            return True
    return False


def _hit(df: pl.DataFrame, literals: tuple[str, ...], pattern: str) -> pl.DataFrame:
    """Rows whose message passes the literal prefilter and matches `pattern`, with its groups in `g`."""
    msgs = _py_msgs(df)
    if msgs is not None:
        return _py_hit(df, msgs, literals, pattern)
    lf = df.lazy()
    if literals:
        lf = lf.filter(pl.col("msg").str.contains_any(list(literals)))
    return lf.filter(pl.col("msg").str.contains(pattern)).with_columns(g=pl.col("msg").str.extract_groups(pattern)).collect()


def _ihit(df: pl.DataFrame, has, literals: tuple[str, ...], pattern: str) -> pl.DataFrame:
    """`_hit`, or no rows (without running anything) when no candidate holds one of `literals`."""
    return _hit(df, literals, pattern) if has(*literals) else df.head(0)


def _groups(pattern: str) -> list[str]:
    return list(re.compile(pattern).groupindex)


# ----------------------------------------------------------------------------- extraction


_MIN_LITERALS = tuple(
    sorted(
        {
            x
            for x in ALL_LITERALS + INVENTORY_LITERALS
            if not any(y != x and y in x for y in ALL_LITERALS + INVENTORY_LITERALS)
        }
    )
)
"""The literals of `ALL_LITERALS` and `INVENTORY_LITERALS` holding no other one: a line holds one of those
iff it holds one of these."""
_ALL_LITERALS_RX = "|".join(re.escape(lit) for lit in _MIN_LITERALS)
"""Lines holding one of the literals: an alternation of the shortest ones (a literal holding another adds
nothing). The regex engine's literal search is ~2x faster than `str.contains_any` here."""


_HAS_LITERALS = tuple(
    sorted(
        set(ALL_LITERALS)
        | set(INVENTORY_LITERALS)
        | set(AER_LITERALS)
        | {"NVRM: Xid", "SXid", "The NVIDIA GPU", "GPU crash dump has been created", "[Hardware Error]", "Hardware Error", "Machine check", "Machine Check"}
    )
)
"""Every literal `extract` asks about (`has`)."""


LITERAL_ROWS = 250
"""Up to this many lines, the candidate lines are found by substring search in Python (`_literal_rows`)."""


def _literal_rows(msgs: list[str | None]) -> list[int]:
    """Indices of the messages holding one of `_MIN_LITERALS` (the rows `str.contains(_ALL_LITERALS_RX)` keeps).

    The messages are joined (no literal holds a newline) and each literal present searched in the whole text:
    the few literals a file holds are located, the others cost one substring test each.
    """
    lens = [(0 if s is None else len(s)) + 1 for s in msgs]
    joined = "\n".join("" if s is None else s for s in msgs)
    hits: set[int] = set()
    starts: list[int] | None = None
    for lit in _MIN_LITERALS:
        pos = joined.find(lit)
        if pos < 0:
            continue
        if starts is None:
            starts = list(accumulate(lens, initial=0))
        while pos >= 0:
            hits.add(bisect_right(starts, pos) - 1)
            pos = joined.find(lit, pos + 1)
    return sorted(i for i in hits if msgs[i] is not None)


_BRACKET = "  ["
"""The AER literal of status-bit lines ('pcieport 0000:00:01.0:    [ 0] RxErr'), also in common ordinary lines
(rsyslog's 'imjournal: journal files changed, reloading...  [v8.2112.0 try https://www.rsyslog.com/e/0 ]')."""
_OTHER_LITERALS = [lit for lit in _HAS_LITERALS if lit != _BRACKET]


def _without_bracket_noise(cand: pl.DataFrame) -> pl.DataFrame:
    """The candidates less those whose only literal is `_BRACKET` and which are no AER line (`AER_LINE_RE`).

    No grammar can use such a line: every grammar but the AER blocks keeps only lines holding one of its
    own literals (all in `_HAS_LITERALS`), and the AER blocks only lines matching `AER_LINE_RE`; the
    literals `has` finds are the same but `_BRACKET`, which only gates the AER blocks. Dropping them keeps
    the candidates few (the small paths) where an ordinary message repeats the literal.
    """
    if cand.height <= LITERAL_ROWS:
        return cand
    msg = pl.col("msg")
    noise = cand.select(
        msg.str.contains(_BRACKET, literal=True)
        & ~msg.str.contains_any(_OTHER_LITERALS)
        & ~msg.str.contains(AER_LINE_RE)
    ).to_series()
    return cand.filter(~noise) if noise.any() else cand


FOUND_CHARS = 16_000
"""`extract` looks for `_HAS_LITERALS` in the candidates' joined text by Python's substring search up to this
length, by one polars Aho-Corasick pass (~0.4 ms) beyond."""


def _found_by_polars(cand: pl.DataFrame) -> set[str]:
    """The `_HAS_LITERALS` the candidates' messages hold (overlapping: one inside another counts too)."""
    lits = list(_HAS_LITERALS)
    got = cand.select(pl.col("msg").str.extract_many(lits, overlapping=True).explode().unique()).to_series()
    return set(got.to_list()) - {None}


def extract(
    stamped: pl.DataFrame, ctx: FileContext, literal_rows: pl.Series | None = None
) -> dict[str, pl.DataFrame]:
    """Return the `events` and `inventory` tables of one kernel-log file. `literal_rows`: which messages hold
    one of the literals (`_ALL_LITERALS_RX`), when the caller found them (`kernel_log.stamp`)."""
    cols = ["line", "text", "ts", "ts_quality", "uptime_s", "host", "msg", "style", "seq", "boot_seg", "crash_record"]
    m = pl.DataFrame([stamped.get_column(c) for c in cols])
    # NOTE: one literal pass keeps the candidate lines; every grammar below runs on those only, and lines
    # claimed by an event family are dropped from the candidates before the next family looks.
    if m.height <= LITERAL_ROWS:
        rows = _literal_rows(m.get_column("msg").to_list())
        cand = m if len(rows) == m.height else m[rows] if rows else m.clear()
    else:
        has_literal = pl.col("msg").str.contains(_ALL_LITERALS_RX) if literal_rows is None else literal_rows
        cand = m.filter(has_literal)
        cand = _without_bracket_noise(cand)
    # /dev/kmsg may repeat a record (same seq, time and text): keep the first
    if cand.height and cand.get_column("seq").null_count() < cand.height:
        # (per file: `kernel_log.parse_many` may read several, line numbers apart by FILE_SHIFT)
        cand = (
            cand.with_columns(_f=pl.col("line") // (1 << FILE_SHIFT))
            .unique(subset=["seq", "uptime_s", "msg", "_f"], keep="first", maintain_order=True)
            .drop("_f")
        )
    # The literals the candidates hold, found in one Aho-Corasick pass (overlapping: a literal inside another
    # counts too): a grammar whose literals are in none of them cannot match (its rows would be empty), so
    # it is not run.
    found: set[str] = set()
    joined: str | None = None
    if cand.height and cand.height <= SMALL_ROWS:
        # a few lines: a substring search of their joined text per literal (no literal holds a newline)
        joined = "\n".join(cand.get_column("msg").to_list())
        if len(joined) <= FOUND_CHARS:
            found = {lit for lit in _HAS_LITERALS if lit in joined}
        else:  # (a literal's search costs ~0.4 ns a character: over a group of files one polars pass is less)
            found = _found_by_polars(cand)
    elif cand.height:
        found = _found_by_polars(cand)

    cand0 = cand

    def has(*literals: str) -> bool:
        for lit in literals:
            if lit in found:
                return True
            if lit in _HAS_LITERALS or not cand0.height:
                continue
            # (a literal not listed in _HAS_LITERALS: looked up directly)
            if joined is not None:
                if lit in joined:
                    return True
            elif cand0.get_column("msg").str.contains(lit, literal=True).any():
                return True
        return False

    inventory = _py_inventory(cand if has(*INVENTORY_LITERALS) else cand.head(0), m, ctx)
    if inventory is None:
        inv_cand = cand.head(0)
        if has(*INVENTORY_LITERALS):
            inv_cand = cand.filter(pl.col("msg").str.contains_any(list(INVENTORY_LITERALS)))
    out: list[pl.DataFrame] = []

    def claim(df: pl.DataFrame, lines: pl.DataFrame | None = None) -> None:
        nonlocal cand
        used = df.get_column("line").to_frame() if lines is None else lines
        out.append(df)
        if used.height and cand.height <= SMALL_ROWS:
            gone = set(used.get_column("line").to_list())
            keep = [i for i, line in enumerate(cand.get_column("line").to_list()) if line not in gone]
            cand = cand if len(keep) == cand.height else cand[keep] if keep else cand.clear()
        elif used.height:
            cand = cand.join(used, on="line", how="anti", maintain_order="left")

    if has("NVRM: Xid"):
        claim(_xids(cand, m, ctx))
    if has("SXid"):
        sx, sx_lines = _sxids(cand, ctx)
        claim(sx, sx_lines)
    if has("The NVIDIA GPU"):
        claim(_fallen_off_multiline(cand, m, ctx))
    if has("GPU crash dump has been created"):
        claim(_crash_dumps(cand, m, ctx))
    for rule in RULES:
        if not has(*rule.literals):
            continue
        got = _rule_events(cand, rule, ctx)
        if got.height:
            claim(got)
    has_apei = has("[Hardware Error]")
    if (has_apei or has(*AER_LITERALS)) and _py_may_match(cand, ((AER_LITERALS, AER_LINE_RE), (("[Hardware Error]",), APEI_RE))):
        apei_agg, apei_lines = _apei_agg(cand)
        aer, aer_lines, merged = _aer_blocks(cand, ctx, apei_agg)
        claim(aer, aer_lines)
        if has_apei:
            claim(_apei_events(apei_agg.filter(~pl.col("line").is_in(merged.to_list())), ctx), apei_lines)
    mce_lits = ("Hardware Error", "Machine check", "Machine Check")
    if has(*mce_lits) and _py_may_match(cand, ((mce_lits, MCE_RE),)):
        out.append(_mce_blocks(cand, ctx))
    events = pl.concat([e for e in out if e.height], how="vertical_relaxed") if any(e.height for e in out) else None
    if events is None:
        events = _empty_events(m)
    if not events.get_column("line").is_sorted():
        events = events.sort("line")
    if inventory is None:
        inventory = _inventory(inv_cand, m, ctx, has)
    return {"events": events, "inventory": inventory}


_WS = " \t\n\v\f\r"
"""The ASCII White_Space characters (what polars' `strip_chars()` trims from ASCII text; not \\x1c-\\x1f)."""


def _py_json(fields: dict) -> str:
    """`_json` of one row: polars' `struct.json_encode` text (same escapes as `json.dumps`), nulls stripped.
    Rows of string and null values only are kept (the nodes of a fleet print the same details)."""
    if all(v is None or type(v) is str for v in fields.values()):
        key = tuple(fields.items())
        got = _PY_JSON_SEEN.get(key)
        if got is None:
            if len(_PY_JSON_SEEN) > 50_000:
                _PY_JSON_SEEN.clear()
            got = _PY_JSON_SEEN[key] = _py_json_enc(fields)
        return got
    return _py_json_enc(fields)


_PY_JSON_SEEN: dict[tuple[tuple[str, str | None], ...], str] = {}


def _py_json_enc(fields: dict) -> str:
    """`_py_json` worked out."""
    enc = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
    return _PY_COMMA_END.sub("}", _PY_NULL_MEMBER.sub("", enc), count=1)


_PY_NULL_MEMBER = re.compile(r'"[^"]+":null,?')
_PY_COMMA_END = re.compile(r",\}$")


def _py_rule_events(m: pl.DataFrame, msgs: list[str | None], rule: Rule, ctx: FileContext) -> pl.DataFrame | None:
    """`_rule_events` of a few ASCII candidates in Python (see `_py_msgs`); None where a value is not plain."""
    rx = _py_rx(rule.pattern)
    idx: list[int] = []
    groups: list[dict[str, str | None]] = []
    lits = rule.literals
    if len(lits) == 1:  # (one literal: no generator per message)
        lit = lits[0]
        cands = [i for i, s in enumerate(msgs) if s is not None and lit in s]
    else:  # (each literal's messages, in message order)
        hit: set[int] = set()
        for x in lits:
            hit.update([i for i, s in enumerate(msgs) if s is not None and x in s])
        cands = sorted(hit)
    for i in cands:
        mt = rx.search(msgs[i])  # type: ignore[arg-type]
        if mt is not None:
            idx.append(i)
            groups.append(mt.groupdict())
    if not idx:
        return m.clear()
    names = list(rx.groupindex)
    sub = m[idx] if len(idx) < m.height else m
    codes: list[str | None] = []
    sevs: list[str] = []
    buses: list[str | None] = []
    details: list[dict[str, object]] = []
    for g in groups:
        if "code" in names:
            code = g["code"]
            if code is None:
                return None
            if rule.lower_code:
                code = code.lower().replace(" ", "_")
            code = rule.code_map.get(code, code)
        else:
            code = rule.code
        sev = rule.severity
        if rule.severity_by_code:
            if code is None:
                return None
            sev = rule.severity_by_code.get(code.lower(), rule.severity)
        if rule.kind == "segfault":
            if g["process"] is None:
                return None
            if _py_rx(SEGFAULT_GPU_LIBS).search((g["object"] or "") + " " + g["process"]):
                sev = "high"
        detail: dict[str, object] = {}
        for n in names:
            if n not in ("bus", "code"):
                v = g[n]
                v = None if v is None else v.strip(_WS)
                detail[n] = v if v else None
        codes.append(code)
        sevs.append(sev)
        buses.append(g.get("bus"))
        details.append(detail)
    return _py_events(sub, ctx, rule.kind, codes, sevs, buses, details)


def _rule_events(m: pl.DataFrame, rule: Rule, ctx: FileContext) -> pl.DataFrame:
    msgs = _py_msgs(m)
    if msgs is not None:
        got = _py_rule_events(m, msgs, rule, ctx)
        if got is not None:
            return got
    hit = _hit(m, rule.literals, rule.pattern)
    names = _groups(rule.pattern)
    if hit.height == 0:
        return hit.head(0)
    g = pl.col("g")
    if "code" in names:
        code = g.struct.field("code")
        code = code.str.to_lowercase().str.replace_all(" ", "_") if rule.lower_code else code
        if rule.code_map:
            code = code.replace(rule.code_map)
    else:
        code = pl.lit(rule.code, dtype=pl.String)
    severity = pl.lit(rule.severity)
    if rule.severity_by_code:
        severity = code.str.to_lowercase().replace_strict(rule.severity_by_code, default=rule.severity, return_dtype=pl.String)
    if rule.kind == "segfault":
        culprit = pl.coalesce(g.struct.field("object"), pl.lit("")) + " " + g.struct.field("process")
        severity = pl.when(culprit.str.contains(SEGFAULT_GPU_LIBS)).then(pl.lit("high")).otherwise(severity)
    bus = g.struct.field("bus") if "bus" in names else pl.lit(None, dtype=pl.String)
    detail = {n: _nonempty(g.struct.field(n)) for n in names if n not in ("bus", "code")}
    return _events(hit, ctx, rule.kind, code, severity, bus, detail)


def _py_ascii(v: str | None) -> bool:
    return v is None or (v.isascii() and "\n" not in v)


def _py_events(sub: pl.DataFrame, ctx: FileContext, kind: str, codes: list, sevs: list, buses: list, details: list) -> pl.DataFrame:
    """`_events` rows of `sub` (rows of the stamped frame) from per-row Python values (`details`: the detail
    fields without the clock ones, which are added here)."""
    n = sub.height
    ts = sub.get_column("ts")
    ts_null = ts.is_null().to_list() if ts.null_count() else [False] * n
    ups = sub.get_column("uptime_s").to_list()
    segs = sub.get_column("boot_seg").to_list()
    crash = sub.get_column("crash_record").to_list()
    enc = []
    for k, detail in enumerate(details):
        mono = ups[k] is not None and ts_null[k]
        detail["boot_seg"] = segs[k] if mono else None
        detail["crash_record"] = True if mono and crash[k] else None
        enc.append(_py_json(detail))
    q = sub.get_column("ts_quality").to_list()
    return pl.DataFrame(
        [
            sub.get_column("ts"),
            pl.Series("ts_quality", ["none" if v is None else v for v in q], dtype=pl.String),
            sub.get_column("uptime_s"),
            pl.Series("node", [ctx.node if h is None else h for h in sub.get_column("host").to_list()], dtype=pl.String),
            normalized_bus(pl.Series("gpu_bus_id", buses, dtype=pl.String)),
            pl.Series("source", ["kernel"] * n, dtype=pl.String),
            pl.Series("kind", [kind] * n, dtype=pl.String),
            pl.Series("code", codes, dtype=pl.String),
            pl.Series("severity", sevs, dtype=pl.String),
            sub.get_column("text").alias("message"),
            pl.Series("detail", enc, dtype=pl.String),
            pl.Series("file", [ctx.path] * n, dtype=pl.String),
            sub.get_column("line"),
        ]
    )


_I64 = 2**63


def _py_xids(cand: pl.DataFrame, m: pl.DataFrame, ctx: FileContext) -> pl.DataFrame | None:
    """`_xids` of a few ASCII candidates in Python (see `_py_msgs`); None where it does not apply."""
    msgs = _py_msgs(cand)
    if msgs is None:
        return None
    rx = _py_rx(XID_RE)
    idx: list[int] = []
    groups: list[re.Match[str]] = []
    for i, s in enumerate(msgs):
        if s is not None and "NVRM: Xid" in s:
            mt = rx.search(s)
            if mt is not None:
                idx.append(i)
                groups.append(mt)
    if not idx:
        return _empty_events(m)
    sub = cand[idx] if len(idx) < cand.height else cand
    lines = sub.get_column("line")
    # next line's message (the XID 154 recovery action may continue there)
    m_lines = m.get_column("line")
    pos = m_lines.search_sorted(lines + 1).to_list()
    m_line_list = m_lines.gather([min(p, m.height - 1) for p in pos]).to_list() if m.height else []
    want = (lines + 1).to_list()
    m_msg = m.get_column("msg")
    nxt_pos = [p for p, w, ml in zip(pos, want, m_line_list) if p < m.height and ml == w]
    nxt_msg = dict(zip(nxt_pos, m_msg.gather(nxt_pos).to_list())) if nxt_pos else {}
    strip_head = _py_rx("^.*?" + XID_RE)
    recovery = _py_rx(RECOVERY_RE)
    nvrm = _py_rx(r"^NVRM:\s*")
    sev_cat = _catalog_severity("xid")
    extras = [(name, _py_rx(x)) for name, x in XID_EXTRAS]
    codes: list[str | None] = []
    sevs: list[str] = []
    buses: list[str | None] = []
    details: list[dict] = []
    decoded: dict[str, tuple[dict, str | None]] = {}
    for k, (i, g) in enumerate(zip(idx, groups)):
        s = msgs[i]
        text = strip_head.sub("", s, count=1)
        src = text
        if "recovery action" in text and not recovery.search(text):
            p = pos[k]
            nm = nxt_msg.get(p) if p < m.height and m_line_list[k] == want[k] else None
            if not _py_ascii(nm):
                return None
            src = text + " " + nvrm.sub("", nm or "", count=1)
        if src not in decoded:
            row: dict = {}
            for name, erx in extras:
                em = erx.search(src)
                row[name] = em.group(1) if em is not None else None
            rm = recovery.search(src)
            row["recovery_action"] = rm["to_name"] if rm else None
            row["recovery_action_code"] = rm["to"] if rm else None
            row["recovery_action_from"] = rm["from_name"] if rm else None
            decoded[src] = (row, row["recovery_action"])
        row, to = decoded[src]
        code = int(g["code"])
        code_s = str(code) if -_I64 <= code < _I64 else None
        sev = sev_cat.get(code_s, "medium")
        if to is not None:
            tl = to.lower()
            if "reboot" in tl:
                sev = "critical"
            elif "reset" in tl or "drain" in tl:
                sev = "high"
        pid = g["pid"]
        inst = g["instance"]
        inst = None if inst is None else inst.strip(_WS)
        detail = {"pid": None if pid is None else pid.strip("'"), "process": g["process"], "text": text, "instance": inst or None}
        detail.update(row)
        codes.append(code_s)
        sevs.append(sev)
        buses.append(g["bus"])
        details.append(detail)
    return _py_events(sub, ctx, "xid", codes, sevs, buses, details)


_EMPTY_EVENTS: dict[tuple, pl.DataFrame] = {}


def _empty_events(m: pl.DataFrame) -> pl.DataFrame:
    """An `events` frame without rows (its schema depends only on the stamped frame's)."""
    key = tuple((c, m.schema[c]) for c in ("ts", "uptime_s", "text", "line"))
    got = _EMPTY_EVENTS.get(key)
    if got is None:
        empty = m.head(0)
        got = _EMPTY_EVENTS[key] = _events(empty, FileContext(path="", node=""), "xid", pl.lit(None), pl.lit("info"), pl.lit(None), {})
    return got.clone()


def _xids(cand: pl.DataFrame, m: pl.DataFrame, ctx: FileContext) -> pl.DataFrame:
    py = _py_xids(cand, m, ctx)
    if py is not None:
        return py
    hit = _distinct_xids(cand) if DISTINCT_XIDS else None
    if hit is None:
        hit = _xid_hits(cand)
    if hit.height == 0:
        return _events(hit, ctx, "xid", pl.lit(None), pl.lit("info"), pl.lit(None), {})
    # next line's message, for the XID 154 recovery action printed on a continuation line
    nxt = m.filter(pl.col("line").is_in((hit.get_column("line") + 1).to_list())).select(
        line=pl.col("line") - 1, next_msg=pl.col("msg")
    )
    hit = hit.join(nxt, on="line", how="left")
    g = pl.col("g")
    text = pl.col("xtext")
    code = g.struct.field("code").cast(pl.Int64, strict=False).cast(pl.String)
    sev = _catalog_severity("xid")
    # the recovery action of XID 154 may continue on the next line
    split_154 = text.str.contains("recovery action", literal=True) & ~text.str.contains(RECOVERY_RE)
    hit = hit.with_columns(
        _src=pl.when(split_154).then(text + " " + pl.col("next_msg").fill_null("").str.replace(r"^NVRM:\s*", "")).otherwise(text)
    )
    # NOTE: Xid storms repeat the same text thousands of times: decode each distinct text once.
    uniq = hit.select("_src").unique()
    rec = pl.col("_src").str.extract_groups(RECOVERY_RE)
    uniq = uniq.with_columns(
        *[pl.col("_src").str.extract(rx, 1).alias(f"_x_{name}") for name, rx in XID_EXTRAS],
        _to=rec.struct.field("to_name"),
        _to_code=rec.struct.field("to"),
        _from=rec.struct.field("from_name"),
    )
    hit = hit.join(uniq, on="_src", how="left", nulls_equal=True)
    detail: dict[str, pl.Expr] = {
        "pid": g.struct.field("pid").str.strip_chars("'"),
        "process": g.struct.field("process"),
        "text": text,
    }
    inst = g.struct.field("instance").str.strip_chars()
    detail["instance"] = pl.when(inst != "").then(inst)
    for name, _rx in XID_EXTRAS:
        detail[name] = pl.col(f"_x_{name}")
    detail["recovery_action"] = pl.col("_to")
    detail["recovery_action_code"] = pl.col("_to_code")
    detail["recovery_action_from"] = pl.col("_from")
    severity = code.replace_strict(sev, default="medium", return_dtype=pl.String)
    # XID 154 announcing a reboot or reset is as serious as what it announces
    to = pl.col("_to").str.to_lowercase()
    severity = (
        pl.when(to.str.contains("reboot")).then(pl.lit("critical")).when(to.str.contains("reset|drain")).then(pl.lit("high")).otherwise(severity)
    )
    # (the detail follows from the message and `_src`, the text its extras are read from)
    return _events(hit, ctx, "xid", code, severity, g.struct.field("bus"), detail, key=("msg", "_src"))


DISTINCT_XIDS = True
"""`_xids` reads each distinct message of an Xid storm once (`_distinct_xids`)."""


def _distinct_xids(cand: pl.DataFrame) -> pl.DataFrame | None:
    """`_xid_hits(cand)`, each distinct message matched and cut once and joined back to its rows (a storm repeats a few hundred messages
    thousands of times); None where the messages are not that repetitive (at most one distinct in two)."""
    if cand.height <= SMALL_ROWS:
        return None
    msgs = cand.get_column("msg").drop_nulls().unique()
    if 2 * len(msgs) > cand.height:
        return None
    return cand.join(_xid_hits(msgs.to_frame()), on="msg", how="inner", maintain_order="left")


def _xid_hits(df: pl.DataFrame) -> pl.DataFrame:
    """The rows of `df` whose message is an Xid line (`_hit`), with `xtext`: the message after its Xid head."""
    return _hit(df, ("NVRM: Xid",), XID_RE).with_columns(xtext=pl.col("msg").str.replace("^.*?" + XID_RE, ""))


def _py_sxids(m: pl.DataFrame, ctx: FileContext) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """`_sxids` of a few ASCII candidates in Python (see `_py_msgs`); None where it does not apply.

    The same steps row by row: a primary line names Fatal/Non-fatal or is no continuation, continuations
    go to the nearest earlier primary line of their switch and code within 4 lines, severity from the
    catalog bounded by the line's own Fatal/Non-fatal word."""
    msgs = _py_msgs(m)
    if msgs is None:
        return None
    rx = _py_rx(SXID_RE)
    idx: list[int] = []
    groups: list[dict[str, str | None]] = []
    for i, s in enumerate(msgs):
        if s is not None and "SXid" in s:
            mt = rx.search(s)
            if mt is not None:
                idx.append(i)
                groups.append(mt.groupdict())
    hit = m[idx] if idx and len(idx) < m.height else m if idx else m.clear()
    lines = hit.select("line")
    if not idx:
        return _empty_events(m), lines
    cont_rx = _py_rx(SXID_CONT_RE)
    hit_lines = hit.get_column("line").to_list()
    primary = [
        g["fatality"] is not None or (not cont_rx.search(g["text"] or "") and len(g["text"] or "") >= 12)
        for g in groups
    ]
    continuation: dict[int, list[tuple[int, str]]] = {}
    if any(primary) and not all(primary):
        # (rows in line order, as the frame is; per switch and code the last primary line so far)
        owner: dict[tuple[str | None, str | None], int] = {}
        for line, g, is_p in sorted(zip(hit_lines, groups, primary), key=lambda r: r[0]):
            key = (g["switch"], g["code"])
            if is_p:
                owner[key] = line
            elif key in owner and line - owner[key] <= 4:
                continuation.setdefault(owner[key], []).append((line, g["text"]))
    sev_cat = _catalog_severity("sxid")
    codes: list[str | None] = []
    sevs: list[str] = []
    buses: list[str | None] = []
    details: list[dict] = []
    keep: list[int] = []
    for k, (line, g, is_p) in enumerate(zip(hit_lines, groups, primary)):
        if not is_p:
            continue
        keep.append(k)
        code = int(g["code"])
        code_s = str(code) if -_I64 <= code < _I64 else None
        catalog = sev_cat.get(code_s) if code_s is not None else None
        fatal = None if g["fatality"] is None else g["fatality"].lower()
        if fatal in ("non-fatal", "nonfatal"):
            sev = catalog if catalog in ("low", "info") else "medium"
        elif fatal == "fatal":
            sev = catalog if catalog in ("critical", "high") else "high"
        else:
            sev = catalog if catalog is not None else "medium"
        cont = continuation.get(line)
        details.append(
            {
                "switch": g["switch"],
                "fatality": g["fatality"],
                "link": g["link"],
                "text": g["text"],
                "continuation": None if cont is None else " | ".join(t for _l, t in sorted(cont)),
            }
        )
        codes.append(code_s)
        sevs.append(sev)
        buses.append(g["bus"])
    sub = hit if len(keep) == hit.height else hit[keep]
    return _py_events(sub, ctx, "sxid", codes, sevs, buses, details), lines


def _sxids(m: pl.DataFrame, ctx: FileContext) -> tuple[pl.DataFrame, pl.DataFrame]:
    py = _py_sxids(m, ctx) if PY_SXIDS else None
    if py is not None:
        return py
    hit = _hit(m, ("SXid",), SXID_RE)
    lines = hit.select("line")
    g = pl.col("g")
    # a record's first line names Fatal/Non-fatal; 'Severity ..' and 'Data {..}' lines (or a stub of one,
    # cut by a paste) continue it and add engine instance and data words
    text = g.struct.field("text")
    is_primary = g.struct.field("fatality").is_not_null() | (
        ~text.str.contains(SXID_CONT_RE) & (text.str.len_chars() >= 12)
    )
    primary = hit.filter(is_primary)
    cont = hit.filter(~is_primary).select(
        "line",
        sw=g.struct.field("switch"),
        cd=g.struct.field("code"),
        ctext=g.struct.field("text"),
    )
    sev = _catalog_severity("sxid")
    code = g.struct.field("code").cast(pl.Int64, strict=False).cast(pl.String)
    fatal = g.struct.field("fatality").str.to_lowercase()
    catalog = code.replace_strict(sev, default=None, return_dtype=pl.String)
    # the line's own Fatal / Non-fatal word bounds the catalog's severity for this occurrence
    severity = (
        pl.when(fatal.is_in(["non-fatal", "nonfatal"]))
        .then(pl.when(catalog.is_in(["low", "info"])).then(catalog).otherwise(pl.lit("medium")))
        .when(fatal == "fatal")
        .then(pl.when(catalog.is_in(["critical", "high"])).then(catalog).otherwise(pl.lit("high")))
        .otherwise(pl.coalesce(catalog, pl.lit("medium")))
    )
    if cont.height and primary.height:
        # each Severity/Data line belongs to the nearest earlier primary line of the same switch and code
        both = pl.concat(
            [
                primary.select("line", sw=g.struct.field("switch"), cd=g.struct.field("code"), ctext=pl.lit(None, dtype=pl.String)),
                cont,
            ]
        ).sort("line")
        owner = pl.when(pl.col("ctext").is_null()).then(pl.col("line")).forward_fill().over("sw", "cd")
        extra = (
            both.with_columns(owner=owner)
            .filter(pl.col("ctext").is_not_null() & pl.col("owner").is_not_null() & (pl.col("line") - pl.col("owner") <= 4))
            .group_by("owner")
            .agg(pl.col("ctext").sort_by("line").str.join(" | ").alias("continuation"))
            .rename({"owner": "line"})
        )
        primary = primary.join(extra, on="line", how="left")
    else:
        primary = primary.with_columns(continuation=pl.lit(None, dtype=pl.String))
    detail = {
        "switch": g.struct.field("switch"),
        "fatality": g.struct.field("fatality"),
        "link": g.struct.field("link"),
        "text": g.struct.field("text"),
        "continuation": pl.col("continuation"),
    }
    return _events(primary, ctx, "sxid", code, severity, g.struct.field("bus"), detail), lines


PY_SXIDS = True
"""Read a few SXid candidates in Python (`_py_sxids`; tests compare both readings)."""


def _fallen_off_multiline(cand: pl.DataFrame, m: pl.DataFrame, ctx: FileContext) -> pl.DataFrame:
    """≥570: 'NVRM: The NVIDIA GPU <bdf>' / '(PCI ID: ..) installed in this system has' / 'fallen off the bus ...'."""
    first = cand.filter(pl.col("msg").str.contains("The NVIDIA GPU", literal=True))
    if first.height == 0:
        return _events(first, ctx, "gpu_fallen_off_bus", pl.lit(None), pl.lit("critical"), pl.lit(None), {})
    nxt1 = m.select(line=pl.col("line") - 1, m1=pl.col("msg"))
    nxt2 = m.select(line=pl.col("line") - 2, m2=pl.col("msg"))
    first = first.join(nxt1, on="line", how="left").join(nxt2, on="line", how="left")
    joined = (
        pl.col("msg")
        + " "
        + pl.col("m1").fill_null("").str.replace(r"^NVRM:\s*", "")
        + " "
        + pl.col("m2").fill_null("").str.replace(r"^NVRM:\s*", "")
    )
    rx = rf"NVRM: The NVIDIA GPU (?P<bus>{XID_BUS})\s*(?:\(PCI ID: (?P<pci_id>[0-9a-fA-F:]+)\))?.*?fallen off the bus"
    hit = first.with_columns(j=joined).filter(pl.col("j").str.contains(rx)).with_columns(g=pl.col("j").str.extract_groups(rx))
    g = pl.col("g")
    return _events(
        hit,
        ctx,
        "gpu_fallen_off_bus",
        pl.lit("fallen_off_bus"),
        pl.lit("critical"),
        g.struct.field("bus"),
        {"pci_id": g.struct.field("pci_id"), "text": pl.col("j")},
    )


def _crash_dumps(cand: pl.DataFrame, m: pl.DataFrame, ctx: FileContext) -> pl.DataFrame:
    """'NVRM: A GPU crash dump has been created': the GPU is the one named by the nearest NVRM line before it."""
    hit = cand.filter(pl.col("msg").str.contains("GPU crash dump has been created", literal=True))
    if hit.height == 0:
        return _events(hit, ctx, "gpu_crash_dump", pl.lit(None), pl.lit("high"), pl.lit(None), {})
    rx = rf"(?:PCI:|GPU (?:at )?|NVIDIA GPU )(?P<b>{XID_BUS})"
    named = (
        m.filter(pl.col("msg").str.starts_with("NVRM:") & pl.col("msg").str.contains(rx))
        .select("line", prev_bus=pl.col("msg").str.extract(rx, 1))
        .sort("line")
    )
    hit = hit.sort("line").join_asof(named, on="line", strategy="backward", tolerance=200)
    return _events(
        hit,
        ctx,
        "gpu_crash_dump",
        pl.lit("crash_dump"),
        pl.lit("high"),
        pl.col("prev_bus"),
        {"bus_from": pl.when(pl.col("prev_bus").is_not_null()).then(pl.lit("preceding NVRM line"))},
    )


# ----------------------------------------------------------------------------- inventory

IDENTITY_RE = rf"NVRM: GPU at (?:PCI:)?(?P<bus>{XID_BUS}): (?P<uuid>GPU-[0-9a-fA-F-]+)"
SERIAL_RE = r"NVRM: GPU Board Serial Number: (?P<serial>\S+)"
DRIVER_RE = r"NVRM: loading NVIDIA UNIX .*?(?P<ver>\d{3}\.\d+(?:\.\d+)?)\s"
KERNEL_RE = r"^Linux version (?P<kver>\S+)"
NIC_FW_RE = rf"^(?P<driver>mlx\d_core|[\w.-]+) (?P<bus>{BDF}): firmware version: (?P<fw>\S+)"
PCIE_BW_RE = (
    rf"^(?P<driver>[\w.-]+) (?P<bus>{BDF}): (?P<gbps>[\d.]+) Gb/s available PCIe bandwidth "
    r"\((?P<speed>[\d.]+ GT/s) PCIe x(?P<width>\d+) link\)"
)


OSC_RE = r"_OSC: (?P<who>platform does not support|OS now controls) \[(?P<caps>[^\]]*)\]"


def _inv(
    df: pl.DataFrame | pl.LazyFrame,
    ctx: FileContext,
    component: str | pl.Expr,
    attribute: str,
    value: pl.Expr,
    bus: pl.Expr | None,
    device: pl.Expr | None,
    device_bus: pl.Expr | None = None,
) -> pl.DataFrame | pl.LazyFrame:
    """Inventory rows with raw bus ids: `_inventory` normalises gpu_bus_id and device (a bus id when
    given, from `device_bus`) once for all parts."""
    return df.select(
        node=_node(ctx),
        component=component if isinstance(component, pl.Expr) else pl.lit(component),
        gpu_bus_id=bus.cast(pl.String) if bus is not None else pl.lit(None, dtype=pl.String),
        device=device_bus.cast(pl.String) if device_bus is not None else device if device is not None else pl.lit(None, dtype=pl.String),
        attribute=pl.lit(attribute),
        value=value.cast(pl.String),
        source=pl.lit("kernel"),
        file=pl.lit(ctx.path),
        line=pl.col("line"),
    )


_INV_SCHEMA = columns(
    "inventory",
    "node", "component", "gpu_bus_id", "device", "attribute", "value", "source", "file", "line",
)


def _k8b_boot(m: pl.DataFrame | pl.LazyFrame, ctx: FileContext) -> pl.DataFrame | pl.LazyFrame:
    """Inventory rows of each node's boot time from lines carrying both a wall clock and the printk
    monotonic time (K8b): the median of wall clock - uptime over the last boot's lines."""
    # (the columns read first: the text and message of a long file's lines are not copied)
    both = m.select("line", "ts", "ts_quality", "uptime_s", "host", "boot_seg").filter(
        pl.col("ts").is_not_null() & pl.col("uptime_s").is_not_null() & (pl.col("boot_seg") == 0)
    )
    boot = both.with_columns(
        node=_node(ctx),
        boot=pl.col("ts") - pl.duration(microseconds=(pl.col("uptime_s") * 1e6).cast(pl.Int64, strict=False)),
    ).group_by("node").agg(pl.col("line").first(), pl.col("boot").median(), q=pl.col("ts_quality").first())
    return boot.select(
        "node",
        component=pl.lit("node"),
        gpu_bus_id=pl.lit(None, dtype=pl.String),
        device=pl.lit(None, dtype=pl.String),
        attribute=pl.lit("boot_time"),
        value=pl.col("boot").dt.to_string("%Y-%m-%dT%H:%M:%S%.6f+00:00"),
        source=pl.lit("kernel"),
        file=pl.lit(ctx.path),
        line="line",
    )


_EPOCH = datetime(1970, 1, 1)


def _py_inventory(cand: pl.DataFrame, m: pl.DataFrame, ctx: FileContext) -> pl.DataFrame | None:
    """`_inventory` of a few candidate lines by Python's `re` (`_py_msgs`); None where that does not apply
    (long or non-ASCII candidates). The K8b boot time (a median per node) stays a polars query."""
    msgs = _py_msgs(cand)
    if msgs is None:
        return None
    lines = cand.get_column("line").to_list()
    node = [ctx.node if h is None else h for h in cand.get_column("host").to_list()]
    path = ctx.path
    rows: list[tuple] = []

    def matches(literal: str, pattern: str) -> list[tuple[int, re.Match[str]]]:
        rx = _py_rx(pattern)
        return [(i, mt) for i, s in enumerate(msgs) if s is not None and literal in s and (mt := rx.search(s))]

    ident = matches("NVRM: GPU at", IDENTITY_RE)
    for i, mt in ident:
        rows.append((node[i], "gpu", mt["bus"], None, "uuid", mt["uuid"], "kernel", path, lines[i]))
    for i, mt in matches("Serial Number", SERIAL_RE):
        # the serial line follows the GPU's identity line (the nearest one at most 5 lines before)
        ibus = None
        for j, it in ident:
            if lines[j] <= lines[i]:
                ibus = it["bus"] if lines[i] - lines[j] <= 5 else None
        rows.append((node[i], "gpu", ibus, None, "serial", mt["serial"], "kernel", path, lines[i]))
    for i, mt in matches("loading NVIDIA UNIX", DRIVER_RE):
        rows.append((node[i], "node", None, None, "driver_version", mt["ver"], "kernel", path, lines[i]))
    for i, mt in matches("Linux version", KERNEL_RE):
        rows.append((node[i], "node", None, None, "kernel_version", mt["kver"], "kernel", path, lines[i]))
    for i, mt in matches("firmware version:", NIC_FW_RE):
        rows.append((node[i], "nic", None, mt["bus"], "firmware_version", mt["fw"], "kernel", path, lines[i]))
    for i, mt in matches("available PCIe bandwidth (", PCIE_BW_RE):
        comp = "nic" if mt["driver"].startswith("mlx") else "pci"
        link = f"{mt['speed']} x{mt['width']} ({mt['gbps']} Gb/s)"
        rows.append((node[i], comp, None, mt["bus"], "pcie_link", link, "kernel", path, lines[i]))
    aer = _py_rx(r"\bAER\b")
    for i, mt in matches("_OSC: ", OSC_RE):
        if aer.search(mt["caps"]):
            owner = "firmware" if mt["who"].startswith("platform does not support") else "os"
            rows.append((node[i], "node", None, None, "aer_control", owner, "kernel", path, lines[i]))
    if m.get_column("ts").null_count() < m.height and m.get_column("uptime_s").null_count() < m.height:
        rows.extend(_k8b_boot(m, ctx).iter_rows())
    rtc = matches("setting system clock to", RTC_RE)
    if rtc:
        ups = cand.get_column("uptime_s").to_list()
        segs = cand.get_column("boot_seg").to_list()
        done: set[int] = set()  # (the first per file)
        for i, mt in rtc:
            if ups[i] is None or segs[i] != 0 or lines[i] >> FILE_SHIFT in done:
                continue
            up_us = ups[i] * 1e6
            if len(mt["epoch"]) > 12 or not abs(up_us) < 2**62:
                return None
            try:
                boot = _EPOCH + timedelta(microseconds=int(mt["epoch"]) * 1_000_000 - int(up_us))
            except OverflowError:
                return None
            if not 1000 <= boot.year <= 9999:
                return None
            value = boot.strftime("%Y-%m-%dT%H:%M:%S.") + f"{boot.microsecond:06d}+00:00"
            rows.append((node[i], "node", None, None, "boot_time", value, "kernel", path, lines[i]))
            done.add(lines[i] >> FILE_SHIFT)
    if not rows:
        return pl.DataFrame(schema=_INV_SCHEMA)
    # bus ids normalised (each distinct one once per process), rows without a value dropped, first of each
    # (node, component, bus, device, attribute, value) kept, in line order (stable)
    raw = list({v for r in rows for v in (r[2], r[3]) if v is not None})
    if raw:
        normalized_bus(pl.Series(raw, dtype=pl.String))  # (fills _BUS_CACHE)
    seen: set[tuple] = set()
    out: list[tuple] = []
    for r in rows:
        bus, dev = (None if v is None else _BUS_CACHE[v] for v in (r[2], r[3]))
        r = (r[0], r[1], bus, dev, *r[4:])
        key = r[:6]
        if r[5] is None or key in seen:
            continue
        seen.add(key)
        out.append(r)
    out.sort(key=lambda r: r[8])
    if not COLUMN_FRAMES or not out:
        return pl.DataFrame(out, schema=_INV_SCHEMA, orient="row")
    # (column by column: half the time of the row-wise build)
    cols = zip(_INV_SCHEMA.items(), zip(*out), strict=True)
    return pl.DataFrame([pl.Series(name, values, dtype=dtype) for (name, dtype), values in cols])


COLUMN_FRAMES = True
"""`_py_inventory` builds its frame column by column (tests compare with the row-wise build)."""


def _inventory(cand: pl.DataFrame, m: pl.DataFrame, ctx: FileContext, has=lambda *literals: True) -> pl.DataFrame:
    """GPU UUID/serial, driver and kernel version, NIC firmware and PCIe link, boot time (K8b pairs).

    Every kind of row is a lazy query (skipped when its literal is in no candidate line) and all are
    collected at once: one `collect` per file instead of two or three per kind.
    """
    g = pl.col("g")
    lcand = cand.lazy()

    def hit(literals: tuple[str, ...], pattern: str) -> pl.LazyFrame | None:
        if not has(*literals):
            return None
        return (
            lcand.filter(pl.col("msg").str.contains_any(list(literals)) & pl.col("msg").str.contains(pattern))
            .with_columns(g=pl.col("msg").str.extract_groups(pattern))
        )

    parts: list[pl.LazyFrame] = []
    ident = _ihit(cand, has, ("NVRM: GPU at",), IDENTITY_RE)
    if ident.height:
        parts.append(_inv(ident.lazy(), ctx, "gpu", "uuid", g.struct.field("uuid"), g.struct.field("bus"), None))
    serial = hit(("Serial Number",), SERIAL_RE)
    if serial is not None:
        # the serial line follows the GPU's identity line
        idb = ident.select("line", ibus=g.struct.field("bus")).sort("line") if ident.height else pl.DataFrame(schema={"line": pl.Int64, "ibus": pl.String})
        serial = serial.sort("line").join_asof(idb.lazy(), on="line", strategy="backward", tolerance=5)
        parts.append(_inv(serial, ctx, "gpu", "serial", g.struct.field("serial"), pl.col("ibus"), None))
    drv = hit(("loading NVIDIA UNIX",), DRIVER_RE)
    if drv is not None:
        parts.append(_inv(drv, ctx, "node", "driver_version", g.struct.field("ver"), None, None))
    kern = hit(("Linux version",), KERNEL_RE)
    if kern is not None:
        parts.append(_inv(kern, ctx, "node", "kernel_version", g.struct.field("kver"), None, None))
    fw = hit(("firmware version:",), NIC_FW_RE)
    if fw is not None:
        parts.append(_inv(fw, ctx, "nic", "firmware_version", g.struct.field("fw"), None, None, device_bus=g.struct.field("bus")))
    bw = hit(("available PCIe bandwidth (",), PCIE_BW_RE)
    if bw is not None:
        # (concat_str, not pl.format: polars 2.1's format panics here on some chunks, 'assertion failed:
        # i < self.len()', e.g. a 16 MB `bench/big_kernel.py` short-iso log; the regex captures all three)
        link = pl.concat_str(
            [g.struct.field("speed"), pl.lit(" x"), g.struct.field("width"), pl.lit(" ("), g.struct.field("gbps"), pl.lit(" Gb/s)")]
        )
        comp = pl.when(g.struct.field("driver").str.starts_with("mlx")).then(pl.lit("nic")).otherwise(pl.lit("pci"))
        parts.append(_inv(bw, ctx, comp, "pcie_link", link, None, None, device_bus=g.struct.field("bus")))
    # who handles PCIe AER: '_OSC: platform does not support [.. AER ..]' = firmware first (no native AER lines)
    osc = hit(("_OSC: ",), OSC_RE)
    if osc is not None:
        osc = osc.filter(pl.col("g").struct.field("caps").str.contains(r"\bAER\b"))
        owner = pl.when(g.struct.field("who").str.starts_with("platform does not support")).then(pl.lit("firmware")).otherwise(pl.lit("os"))
        parts.append(_inv(osc, ctx, "node", "aer_control", owner, None, None))
    # boot time from lines carrying both a wall clock and the printk monotonic time (K8b)
    if m.get_column("ts").null_count() < m.height and m.get_column("uptime_s").null_count() < m.height:
        parts.append(_k8b_boot(m.lazy(), ctx))
    # boot time from the RTC line every x86 kernel prints early: 'rtc_cmos 00:02: setting system clock to
    # 2025-03-02T14:29:44 UTC (1740925784)' at printk time t: boot = epoch - t (whole seconds: the RTC has no finer)
    rtc = hit(("setting system clock to",), RTC_RE)
    if rtc is not None:
        rtc = rtc.filter(pl.col("uptime_s").is_not_null() & (pl.col("boot_seg") == 0))
        epoch = pl.from_epoch(g.struct.field("epoch").cast(pl.Int64, strict=False), time_unit="s")
        boot = epoch.dt.replace_time_zone("UTC") - pl.duration(
            microseconds=(pl.col("uptime_s") * 1e6).cast(pl.Int64, strict=False)
        )
        value = boot.dt.to_string("%Y-%m-%dT%H:%M:%S%.6f+00:00")
        first = pl.int_range(pl.len()).over(pl.col("line") // (1 << FILE_SHIFT)) == 0  # (the first per file)
        parts.append(_inv(rtc, ctx, "node", "boot_time", value, None, None).filter(first))
    inv = pl.concat(parts, how="vertical_relaxed").collect() if parts else None
    if inv is None or inv.height == 0:
        return pl.DataFrame(schema=_INV_SCHEMA)
    # (every device here is a NIC/PCI bus id: the device column is normalised like gpu_bus_id)
    inv = inv.replace_column(2, normalized_bus(inv.get_column("gpu_bus_id"))).replace_column(3, normalized_bus(inv.get_column("device")))
    inv = inv.filter(pl.col("value").is_not_null())
    # maintain_order: rows sharing a line (a node's boot time at its first line, which also names the driver)
    # otherwise come out in an order that changes from run to run
    inv = inv.unique(subset=list(INVENTORY_KEY), keep="first", maintain_order=True)
    return inv.sort("line", maintain_order=True)
