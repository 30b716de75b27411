"""The kernel-log parser's fast paths give what the general paths give (issue 10).

Each shortcut of `parsers.kernel_log` / `parsers._kernel_events` (positional splits of the common prefix
shapes, ISO and syslog times by arithmetic, boot segments on the monotonic lines only, the literal
prefilter as one regex, skipped grammars) is compared here with the slower path it replaces, on tricky
lines and on the realistic generated logs of `bench/big_kernel.py`.
"""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from parsers import _kernel_events as kev
from parsers import kernel_log
from parsers.base import FileContext, ParseResult, check_accounting, lines_from_bytes
from tests.conftest import assert_same_result, load_script

ROOT = Path(__file__).parent.parent.parent
CTX = FileContext(
    path="x/kern.log", node="n1", year_hint=2025, collected_at=datetime(2025, 11, 30, tzinfo=UTC)
)

# Lines near the edges of the strict shapes: a tag colon followed by no space, non-ASCII names, tabs,
# several colons, odd times and dates, caller ids after a dmesg -T stamp, RFC 5424 with and without SD.
TRICKY = """Nov 29 00:05:31 gpu-07 k:ernel: [ 1478.475357] NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
Nov 29 00:05:31 gpu-07 kernel:[ 1478.475357] mlx5_core 0000:1a:00.0 mlx5_0: Port: 1 Link DOWN
Nov 29 00:05:31 gpu-07 kernel:\t[ 1478.475357] x
Nov  3 00:05:31 gpü-07 kernel: [ 1478.475357] NVRM: GPU at PCI:0000:18:00: GPU-1234
Nov 03 00:05:31.123456 gpu-07 kérnel: a: b: c
Nov 03 00:05:31.12 gpu-07 kernel: a b c: d
Nov 03 00:05:31 gpu-07 kernel: a b c: d
Nov 03 24:05:31 gpu-07 kernel: hour 24
Nov 03 23:59:60 gpu-07 kernel: leap
Feb 29 23:59:59 gpu-07 kernel: feb 29
Feb 30 23:59:59 gpu-07 kernel: feb 30
Nov 03 00:05:31 gpu-07 kernel:
Nov 03 00:05:31 gpu-07 kernel:\x20
Nov 03 00:05:31 gpu-07 kernel:  two spaces
Nov 03 00:05:31 gpu-07 kernel:\u00a0nbsp
Nov 03 00:05:31 gpu-07 tag[12]: x: y
Nov 03 00:05:31 gpu-07 tag[12]:x: y
Nov 03 00:05:31 gpu-07 tag[1a]: x: y
Nov 03 00:05:31 a b c d: e
Nov 03 00:05:31 gpu-07 kernel: [12345.678901]
Nov 03 00:05:31 gpu-07 kernel: [12345.678901]  x
Nov 03 00:05:31 gpu-07 kernel: [  12345.678901]\tx
Nov 03 00:05:31 gpu-07 kernel: [\u300012345.678901] x
2025-01-17T17:10:43+0000 host k:ernel: x: y
2025-01-17T17:10:43+00:00 host kernel: x: y
2025-01-17T17:10:43.123456+00:00 hôst kernel: x: y
2025-01-17T17:10:43Z host kernel:x
2025-01-17T17:10:43Z host a b kernel: x
2025-01-17 17:10:43Z host kernel: x
[Sun Feb 23 16:24:18 2025] [T123] x
[Sun Feb 23 16:24:18 2025][T123] x
[Sun Feb 23 16:24:18 2025] [UFW BLOCK] x
[Sun Feb 23 16:24:18 2025]  x
[Sun Feb 23 16:24:18 2025]\tx
[Sun Feb 23 16:24:18 2025]
[Sun Feb 23 16:24:18 2025] [
[Sun Feb 23 16:24:18 2025] [ T1] x
[Sun Feb 30 16:24:18 2025] x
<4>1 2025-01-17T17:10:43.123456+00:00 host.example kernel - - - msg
<4>1 2025-01-17T17:10:43.123456+00:00 host.example kernel - - -
<4>1 2025-01-17T17:10:43.123456+00:00 host.example kernel - - -  two
<4>1 2025-01-17T17:10:43.123456+00:00 host.example kernel - - -x
<4>1 2025-01-17T17:10:43.123456+00:00 host.example kernel - - [a b] msg
"""


def _slow_parse(monkeypatch: pytest.MonkeyPatch, lines: pl.Series, ctx: FileContext) -> ParseResult:
    """The parse with the shortcuts replaced by the general paths they stand for."""
    with monkeypatch.context() as mp:
        mp.setattr(kernel_log, "STRICT", {})
        mp.setattr(kernel_log, "COMPILED_STAMPS", False)
        mp.setattr(kernel_log, "_iso_fast_then_full", kernel_log._iso_rowwise)
        mp.setattr(
            kernel_log,
            "_ymd_hms_utc",
            lambda out, rows: out.select(_t=pl.when(rows).then(_full_ts())).to_series(),
        )
        mp.setattr(
            kernel_log,
            "_boot_segments_by_host",
            lambda out: out.select(kernel_log._boot_segments().over("host")).to_series(),
        )
        mp.setattr(
            kev, "_ALL_LITERALS_RX", "|".join(re.escape(x) for x in kev.ALL_LITERALS + kev.INVENTORY_LITERALS)
        )
        mp.setattr(kernel_log, "_syslog_times_by_run", lambda out, ctx: None)
        mp.setattr(kev, "_without_bracket_noise", lambda cand: cand)
        return kernel_log.parse(lines, ctx)


def _full_ts() -> pl.Expr:
    return (
        pl.format(
            "{}-{}-{} {}",
            pl.col("_year"),
            kernel_log._pad(pl.col("_month")),
            kernel_log._pad(pl.col("day")),
            pl.col("hms"),
        )
        .str.strptime(pl.Datetime("us"), "%Y-%m-%d %H:%M:%S", strict=False)
        .dt.replace_time_zone("UTC")
    )


@pytest.mark.parametrize("repeat", [1, 60])  # 60: past the row counts where the column-wide shortcuts start
def test_tricky_lines_fast_equals_general(monkeypatch: pytest.MonkeyPatch, repeat: int) -> None:
    lines = lines_from_bytes((TRICKY * repeat).encode())
    fast = kernel_log.parse(lines, CTX)
    assert check_accounting(fast, lines)
    assert_same_result(fast, _slow_parse(monkeypatch, lines, CTX))


def _big_kernel():
    return load_script("bench/big_kernel.py")


@pytest.mark.parametrize(
    "style", ["syslog", "journal_iso", "journal_precise", "dmesg_raw", "dmesg_ctime", "dmesg_iso", "rfc5424"]
)
def test_generated_logs_fast_equals_general(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, style: str
) -> None:
    path = tmp_path / f"{style}.log"
    _big_kernel().write(path, 1.0, seed=3, style=style)
    lines = lines_from_bytes(path.read_bytes())
    fast = kernel_log.parse(lines, CTX)
    assert fast.unrecognized == 0
    assert fast.tables["inventory"].height > 0
    assert_same_result(fast, _slow_parse(monkeypatch, lines, CTX))


def test_big_kernel_is_deterministic_and_sized(tmp_path: Path) -> None:
    mod = _big_kernel()
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    mod.write(a, 0.3, seed=5)
    mod.write(b, 0.3, seed=5)
    assert a.read_bytes() == b.read_bytes()
    assert 300_000 <= a.stat().st_size < 330_000
    assert kernel_log.sniff(a.read_bytes()[:16384], "kern.log") > 0.5


def test_iso_arithmetic_equals_to_datetime() -> None:
    rng = random.Random(3)
    vals = []
    for _ in range(20_000):
        y = rng.choice([1970, 2000, 2024, 2025, 2100, 1900, 9999, 1])
        date = f"{y:04d}-{rng.randint(0, 13):02d}-{rng.randint(0, 32):02d}"
        time = f"{rng.randint(0, 24):02d}:{rng.randint(0, 60):02d}:{rng.randint(0, 60):02d}"
        frac = rng.choice(
            ["", f",{rng.randint(0, 999999):06d}", f".{rng.randint(0, 999999):06d}", ".123", ",123456789"]
        )
        off = rng.choice(
            [
                "Z",
                "+00:00",
                "-00:00",
                "+0000",
                f"+{rng.randint(0, 24):02d}:{rng.randint(0, 60):02d}",
                f"-{rng.randint(0, 24):02d}{rng.randint(0, 60):02d}",
            ]
        )
        vals.append(f"{date}T{time}{frac}{off}")
    raw = pl.Series("ts", vals + [None])
    assert kernel_log._iso_fast_then_full(raw).equals(kernel_log._iso_rowwise(raw), check_names=False)
    shaped = raw.filter(raw.str.contains(kernel_log._ISO_SHAPE))
    assert shaped.len() > 5_000
    assert kernel_log._iso_arith(shaped).equals(kernel_log._iso_rowwise(shaped), check_names=False)


def test_literal_regex_equals_contains_any() -> None:
    msgs = pl.Series(
        list(TRICKY.splitlines())
        + [
            "  [ 6] BadTLP",
            "Link",
            "Lin k",
            "hard LOCKUP",
            "rm_init_adapter failed",
            "available PCIe bandwidth (x",
            "x.y",
            "(a|b)",
            "",
        ]
    )
    lits = list(kev.ALL_LITERALS + kev.INVENTORY_LITERALS)
    assert msgs.str.contains(kev._ALL_LITERALS_RX).equals(msgs.str.contains_any(lits))


def test_non_ascii_space_in_stamp_prefix() -> None:
    """A no-break / ideographic space before the message (pasted logs) does not shift the split: positions
    from `find` are bytes, `slice` counts characters (was: 'ello world', year 25, no uptime)."""
    text = (
        "[\u3000 12.345678] hello world\n"
        "kern  :warn  \u00a0: 2025-01-21T04:26:49,793988+00:00 NVRM: Xid (PCI:0000:38:00): 13, pid=1, name=x, Graphics Exception\n"
        "kern  :info  : 2025-01-01T00:00:00,000000+00:00 [\u3000T12] hi\n"
        "6,12,34,\u00e9;kmsg\n"
    )
    lines = lines_from_bytes(text.encode())
    ctx = FileContext(path="x", node="n")
    st, _ = kernel_log.stamp(kernel_log.numbered(lines, ctx), ctx)
    rows = st.select("style", "uptime_s", "ts", "msg").rows()
    assert rows[0] == ("dmesg_raw", 12.345678, None, "hello world")
    assert rows[1][0] == "dmesg_iso" and rows[1][2] == datetime(2025, 1, 21, 4, 26, 49, 793988, tzinfo=UTC)
    assert rows[1][3].startswith("NVRM: Xid")
    assert rows[2][3] == "hi"
    assert rows[3] == ("kmsg", 34e-6, None, "kmsg")
    ev = kernel_log.parse(lines, ctx).tables["events"]
    assert ev.get_column("ts").to_list() == [datetime(2025, 1, 21, 4, 26, 49, 793988, tzinfo=UTC)]


# ----------------------------------------------------------------------------- small files in Python

XID_AND_INVENTORY = """[    1.000000] rtc_cmos 00:02: setting system clock to 2025-03-03T10:00:00 UTC (1740996000)
[    2.000000] NVRM: GPU at PCI:0000:18:00: GPU-11111111-2222-3333-4444-555555555555
[    2.000001] NVRM: GPU Board Serial Number: 1650000000001
[    2.000002] NVRM: GPU at PCI:0000:2a:00: GPU-11111111-2222-3333-4444-666666666666
[    2.000007] x
[    2.000008] NVRM: GPU Board Serial Number: 1650000000006
[    2.000009] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.183.01  Release Build
[    2.000011] Linux version 6.5.0-1020-nvidia (x)
[    2.000012] ixgbe 0000:05:00.0: 16.000 Gb/s available PCIe bandwidth (5.0 GT/s PCIe x4 link)
[    2.000014] mlx5_core 0000:1a:00.0: firmware version: 28.39.1002
[    2.000016] acpi PNP0A08:00: _OSC: platform does not support [SHPCHotplug PME AER LTR DPC]
[    2.000018] acpi PNP0A08:00: _OSC: OS now controls [PCIeHotplug PME PCIeCapability LTR]
[    3.0] NVRM: Xid (PCI:0000:18:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)
[    3.1] NVRM: Xid (PCI:0000:af:00): 154, pid='<unknown>', name=<unknown>, GPU recovery action changed from 0x0 (None) to
      NVRM: 0x1 (GPU Reset Required)
[    3.4] NVRM: Xid (PCI:0000:af:00): 0079, pid=12, name=x y, GPU has fallen off the bus.
[    3.5] NVRM: Xid (PCI:0000:af:00) GPU-1 (inst 2): 99999999999999999999, pid=12, name=x, Ch 0000abcd
[    3.7] NVRM: Xid (PCI:0000:af:00): 145, pid='<unknown>', name=<unknown>, NVLINK_ERR Fatal Contained: NVLINK (0x3) link 5 GPU3 physAddr 0xdeadbeef
[    3.8] mlx5_core 0000:1a:00.0 mlx5_0: Port: 1 Link DOWN
[    3.9] python3[1234]: segfault at 0 ip 00007f sp 00007ffe error 4 in libnccl.so.2[7f00+100]
[    4.0] Out of memory: Killed process 1234 (python3) total-vm:1kB
"""


def _polars_parse(monkeypatch: pytest.MonkeyPatch, lines: pl.Series, ctx: FileContext) -> ParseResult:
    """The parse with the Python paths of short files turned off (every step a polars pass)."""
    with monkeypatch.context() as mp:
        mp.setattr(kev, "SMALL_ROWS", -1)
        mp.setattr(kev, "LITERAL_ROWS", -1)
        return kernel_log.parse(lines, ctx)


def _small_inputs() -> list[tuple[str, bytes]]:
    ascii_tricky = "\n".join(ln for ln in TRICKY.splitlines() if ln.isascii())
    raw = XID_AND_INVENTORY.splitlines()
    stamped = (f"Mar  3 10:00:{i:02d} node1 kernel: {ln}" for i, ln in enumerate(raw))
    syslog = "\n".join(stamped)
    out = [
        ("tricky", TRICKY.encode()),
        ("tricky_ascii", ascii_tricky.encode()),
        ("xid_inv", XID_AND_INVENTORY.encode()),
        ("xid_inv_syslog", syslog.encode()),
    ]
    fixtures = sorted((ROOT / "tests" / "fixtures" / "kernel-log").glob("*.log"))
    out += [(p.name, p.read_bytes()) for p in fixtures]
    return out


@pytest.mark.parametrize("name,data", _small_inputs(), ids=lambda v: v if isinstance(v, str) else "")
def test_small_file_python_paths_equal_polars(
    monkeypatch: pytest.MonkeyPatch, name: str, data: bytes
) -> None:
    """Short ASCII files are parsed with Python's `re` and list work instead of dozens of polars passes;
    the results are those of the polars passes."""
    lines = lines_from_bytes(data)
    for ctx in (CTX, FileContext(path="x", node="n1")):
        assert_same_result(kernel_log.parse(lines, ctx), _polars_parse(monkeypatch, lines, ctx))


@pytest.mark.parametrize(
    "style", ["syslog", "journal_iso", "journal_precise", "dmesg_raw", "dmesg_ctime", "dmesg_iso", "rfc5424"]
)
def test_small_generated_logs_python_paths_equal_polars(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, style: str
) -> None:
    mod = _big_kernel()
    for seed in (1, 2, 3):
        path = tmp_path / f"{style}{seed}.log"
        mod.write(path, 0.03, seed=seed, style=style)
        lines = lines_from_bytes(path.read_bytes())
        assert_same_result(kernel_log.parse(lines, CTX), _polars_parse(monkeypatch, lines, CTX))


def test_pcie_link_inventory_on_a_16mb_chunk(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The vectorised inventory of a 16 MB short-iso chunk: polars' `pl.format` panicked there ('assertion
    failed: i < self.len()') building the PCIe link value, and the whole file was lost."""
    path = tmp_path / "journal_iso.log"
    _big_kernel().write(path, 16, seed=7, style="journal_iso")
    lines = lines_from_bytes(path.read_bytes())
    monkeypatch.setattr(kev, "_py_inventory", lambda cand, m, ctx: None)
    inv = kernel_log.parse(lines, CTX).tables["inventory"]
    links = inv.filter(pl.col("attribute") == "pcie_link").get_column("value").unique().to_list()
    assert links == ["32.0 GT/s x16 (504.112 Gb/s)"]


def test_syslog_lane_edges_equal_general(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines at the edges of the syslog lane (`kernel_log._syslog_lane`) among many ordinary ones, so that
    the vectorised paths run: the same result as the general regex path."""
    ordinary = [
        "Nov 29 10:20:23 gpu-882-04 kernel: [41105.973371] [UFW BLOCK] IN=eth0 OUT= SRC=10.31.196.109",
        "Nov 29 10:20:23 gpu-488-01 systemd[1]: Created slice user-1000.slice - User Slice of UID 1003.",
        "Nov 29 10:20:24 gpu-102-02 rsyslogd[5987]: imjournal: journal files changed, reloading...  [v8]",
        "Nov 29 10:20:24 gpu-102-02 kernel: [  123.000001] NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=x, y",
        "Nov 29 10:20:25 gpu-102-02 kernel: [  124.5] pcieport 0000:00:01.0:    [ 0] RxErr         (First)",
    ]
    edges = TRICKY.splitlines() + [
        "Nov 29 10:20:25 gpu-1 tag[12]:",
        "Nov 29 10:20:25 gpu-1 tag: ",
        "Nov 29 10:20:25 gpu-1 tag:x: y",
        "Nov 29 10:20:25  gpu-1 tag: two spaces",
        "Nov 29 10:20:25 gpu-1 tag[x]: y",
        "Nov 29 10:20:25 gpu-1 tag]: y",
        "Nov 29 10:20:25.5 gpu-1 tag: frac",
        "Nov 29 10:20:25. gpu-1 tag: frac",
        "Nov 29 10:20:25.5x gpu-1 tag: frac",
        "Nov 29 10:20:25.٣ gpu-1 tag: frac",
        "Nov 29 10:20:25 gpu\u00e9-1 tag: name",
        "Nov 29 10:20:25 gpu-1 tág: name",
        "Nov 29 10:20:25 gpu-1 kernel: [123.5] [124.5] twice",
        "Nov 29 10:20:25 gpu-1 kernel: [ 123.5]  two spaces",
        "Nov 29 10:20:25 gpu-1 kernel: [\u3000123.5] ideographic",
        "Nov 29 10:20:25 gpu-1 kernel: [123.5]x",
        "Nov 29 10:20:25 gpu-1 kernel: [123.5]",
        "Nov 29 10:20:25 gpu-1 kernel: [1e5] not a time",
        "Dec 31 23:59:59 gpu-1 kernel: before the wrap",
        "Jan  1 00:00:00 gpu-1 kernel: after the wrap",
        "Jan 01 00:00:00 gpu-1 kernel: zero padded",
        "Feb 30 00:00:00 gpu-1 kernel: no such day",
        "Nov 29 24:00:00 gpu-1 kernel: hour 24",
        "<13>Nov 29 10:20:25 gpu-1 tag: priority",
        "",
        "   continuation",
    ]
    _edges_among_ordinary_equal_general(monkeypatch, ordinary, edges, seed=5)


def test_journal_iso_lane_edges_equal_general(monkeypatch: pytest.MonkeyPatch) -> None:
    """`kernel_log._journal_iso_lane` edges among ordinary short-iso lines: as the general path."""
    ordinary = [
        "2025-11-29T00:00:02+0000 gpu-431-00 kernel: [UFW BLOCK] IN=eth0 OUT= SRC=10.31.196.109",
        "2025-11-29T00:00:02+0000 gpu-431-00 systemd[1]: Started session-12.scope - Session 12 of User x.",
        "2025-11-29T00:00:03+0000 gpu-431-00 kernel: NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=x, y",
    ]
    edges = [
        "2025-11-29T00:00:03Z gpu-1 kernel: zulu",
        "2025-11-29T00:00:03.123456+00:00 gpu-1 kernel: fraction and colon offset",
        "2025-11-29T00:00:03,123456+00:00 gpu-1 kernel: comma fraction",
        "2025-11-29T00:00:03-0800 gpu-1 tag[12]: negative offset",
        "2025-11-29T00:00:03+0000 gpu-1 tag[x]: odd pid",
        "2025-11-29T00:00:03+0000 gpu-1 k:ernel: x: y",
        "2025-11-29T00:00:03+0000 gpu-1 kernel:x",
        "2025-11-29T00:00:03+0000 gpu-1 kernel:",
        "2025-11-29T00:00:03+0000 gpu-1 kernel: ",
        "2025-11-29T00:00:03+0000 gpu-1 a b kernel: four words",
        "2025-11-29T00:00:03+0000  gpu-1 kernel: two spaces",
        "2025-11-29T00:00:03+0000 gpu\u00e9-1 kernel: name",
        "2025-11-29T24:00:03+0000 gpu-1 kernel: hour 24",
        "2025-02-30T00:00:03+0000 gpu-1 kernel: no such day",
        "2025-11-29T00:00:03+0000 gpu-1 kernel: [  12.5] embedded",
        "2025-11-29 00:00:03+0000 gpu-1 kernel: space for T",
        "<6>2025-11-29T00:00:03+0000 gpu-1 kernel: priority",
        "",
    ]
    _edges_among_ordinary_equal_general(monkeypatch, ordinary, edges, seed=6)


def _edges_among_ordinary_equal_general(
    monkeypatch: pytest.MonkeyPatch, ordinary: list[str], edges: list[str], seed: int
) -> None:
    """`edges` scattered among 3,000 `ordinary` lines (so the vectorised paths run): the same result as the
    general path, with exact line accounting."""
    rng = random.Random(seed)
    text = [rng.choice(ordinary) for _ in range(3000)]
    for e in edges:
        text.insert(rng.randrange(len(text)), e)
    lines = lines_from_bytes("\n".join(text).encode())
    fast = kernel_log.parse(lines, CTX)
    assert check_accounting(fast, lines)
    assert_same_result(fast, _slow_parse(monkeypatch, lines, CTX))
