# ruff: noqa: E501, PERF401
"""ib10: `infiniband._parse_frames` with its perfquery counter lane (`_split_lanes`, `_lane_rows`) gives
exactly what it gave before the lane (`_ib10_ref._parse_frames`, the old function verbatim): tables, dtypes,
row order, counts, examples, partial flag, node. Checked on loops built from the fixtures and real logs
(repeated captures with `date` lines, varying readings, devices, ports and lids, odd counter names, pdsh /
envelope prefixes, CRLF, blank lines, records cut anywhere, ranges starting mid-record) with the lane taken
on any file size."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parsers import infiniband
from parsers.base import FileContext
from tests.conftest import assert_same_result

sys.path.insert(0, str(Path(__file__).parent))
import _ib10_ref  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "infiniband"
REAL = Path("/work/shared/real-logs")

NAMES = [
    "PortXmitData", "PortRcvData", "VL15Dropped", "QP1Dropped", "done", "do", "ls", "cat", "date", "for",
    "perfquery", "mlxlink", "ibstat", "ibstatus", "hca_id", "ibpanic", "ibwarn", "iberror", "mlx5_0", "device",
    "hfi1_0", "efa_3", "PortInfo", "Info", "stdout", "A", "x_1", "port", "sudo", "head", "rank0", "a1",
    "PortSelect", "CounterSelect", "CounterSelect2", "SymbolErrorCounter", "LinkDownedCounter", "PortXmitPkts",
]  # fmt: skip
VALUES = [
    "0", "1", "11", "400", "1234567890", "12345678901", "0x946dafe3c67fb4f9", "0x0", "0xABC", "0x1234567890",
    "123456789012345678901234", "99999999999999999999", "1718359200", "0000000000", "4294967295", "1e5", "-1",
]  # fmt: skip
ODD = [
    "PortXmitData:....................1 ", "PortXmitData:1", "PortXmitData:. 1", "Port-Xmit:...1", "a:.1234567890",
    "ab:.........1234567890", "VL15:.1234567890", "PortRcvData:....................12\r", "", "   ",
    "n7: PortXmitData:....................5", "[1,0]<stdout>:PortXmitData:.....................5",
    "2025-06-14T10:00:00Z PortXmitData:....................7", "junk line", "Sat Jun 14 10:20:00 UTC 2025",
    "1718359200", "mlx5_3", "=== mlx5_2 port 1 ===", "$ perfquery -C mlx5_7 -P 2",
    "# Port counters: Lid 99999999999999999999 port 1", "# Port extended counters: Lid 12 port 4294967299",
    "ibpanic: [123] IB device 'mlx5_0' not found", "ibwarn: something", "hca_id:..1234",
    "CounterSelect:...................0x0000", "PortSelect:......................1",
    "$ perfquery -x -C mlx5_1 -P 1 ", "$ perfquery -C mlx5_0 -P 99999999999", "$ perfquery -C mlxlink_0 -P 1",
    "$ perfquery -C mlx1234567890_1 -P 1", "$ perfquery -C mlx_1 -P 1234567890", "$ perfquery -C mlx5_0 -P 1",
    "$ perfquery -x -C mlx5_3 -P 2", "# Port counters: Lid 1234567890 port 1 (CapMask: 0x5A00)",
    "# Port extended counters: Lid 1 port 1 (CapMask: 0x5A00)", "#  Port counters: Lid 1 port 1 (CapMask: 0x1)",
    "# Port counters: Lid 999999999 port 999999999 (CapMask: 0xfF)", "# Port counters: Lid 0 port 0 (CapMask: 0x)",
]  # fmt: skip
DATES = ["Sat Nov 28 00:00:{:02d} UTC 2026", "Sat, 28 Nov 2026 00:00:{:02d} +0000", "2026-11-28T00:00:{:02d}"]


def _sources() -> list[list[str]]:
    out = []
    for p in sorted(FIXTURES.glob("*.txt")):
        out.append(p.read_text(errors="replace").splitlines())
    if REAL.exists():
        for p in sorted(REAL.rglob("*")):
            if (
                p.is_file()
                and p.stat().st_size < 200_000
                and any(k in p.name.lower() for k in ("ib", "perfquery", "infiniband", "mlx"))
            ):
                out.append(p.read_text(errors="replace").splitlines())
    return [[ln for ln in s if not ln.startswith("#SOURCE:")] for s in out]


SOURCES = _sources()


KV_VALUES = [
    "Active", "Down", "4: ACTIVE", "1: DOWN", "PORT_ACTIVE (4)", "PORT_DOWN (1)", "Polling", "LinkUp", "5: LinkUp",
    "2: Polling", "Init", "Armed", "400", "200 Gb/sec (4X HDR)", "100", "0x0", "0xfb345a724415164f",
    "fb34:5a72:4415:164f", "0x1A", "0xFFFFFFFFFFFFFFFFFF", "", " x ", "InfiniBand", "Ethernet", "25.0 Gbps", "4X",
    "1X", "2.5 Gbps (1)", "12", "MT4129", "28.39.1002",
]  # fmt: skip


def _vary(line: str, rng: random.Random) -> str:
    if line.startswith("\t") and ": " in line and rng.random() < 0.3:  # another attribute value
        return f"{line.split(': ', 1)[0]}: {rng.choice(KV_VALUES)}"
    if ":." in line and rng.random() < 0.6:  # another reading
        name = line.split(":", 1)[0]
        return f"{name}:{'.' * rng.randint(1, 30)}{rng.choice(VALUES) if rng.random() < 0.3 else rng.randint(0, 10**12)}"
    if line.startswith("$ perfquery") and rng.random() < 0.3:
        return f"$ perfquery {'-x ' if rng.random() < 0.5 else ''}-C mlx5_{rng.randint(0, 9)} -P {rng.randint(1, 2)}"
    if line.startswith("# Port") and rng.random() < 0.3:
        what = rng.choice(["counters", "extended counters"])
        return f"# Port {what}: Lid {rng.randint(0, 99)} port {rng.randint(1, 2)} (CapMask: 0x5A00)"
    return line


PQ_NAMES = [
    "PortSelect", "CounterSelect", "SymbolErrorCounter", "LinkDownedCounter", "PortRcvErrors", "PortXmitData",
    "PortRcvData", "PortXmitPkts", "PortRcvPkts", "PortUnicastXmitPkts", "PortMulticastRcvPkts", "VL15Dropped",
]  # fmt: skip


def perfquery_capture(rng: random.Random) -> list[str]:
    """`$ perfquery [-x] -C mlx5_N -P N` captures as a collection loop prints them (the lanes' shapes)."""
    out = []
    for _ in range(rng.randint(1, 4)):
        x = rng.random() < 0.5
        dev, port, lid = f"mlx5_{rng.randint(0, 9)}", rng.randint(1, 2), rng.randint(0, 99)
        out.append(f"$ perfquery {'-x ' if x else ''}-C {dev} -P {port}")
        what = "extended counters" if x else "counters"
        out.append(f"# Port {what}: Lid {lid} port {port} (CapMask: 0x{rng.randint(0, 65535):X})")
        for name in PQ_NAMES:
            v = f"0x{rng.randint(0, 4096):04x}" if name == "CounterSelect" else str(rng.randint(0, 10**12))
            out.append(f"{name}:{'.' * max(1, 33 - len(name))}{v}")
    return out


def generated_loop(rng: random.Random) -> list[str]:
    out: list[str] = []
    for _ in range(rng.randint(1, 6)):
        if rng.random() < 0.7:
            out.append(rng.choice(DATES).format(rng.randint(0, 59)))
        src = perfquery_capture(rng) if rng.random() < 0.5 else rng.choice(SOURCES)
        for ln in src:
            ln = _vary(ln, rng)
            r = rng.random()
            if r < 0.03:
                out.append(rng.choice(ODD))
            elif r < 0.05:
                out.append(f"{rng.choice(NAMES)}:{'.' * rng.randint(1, 30)}{rng.choice(VALUES)}")
            if rng.random() < 0.01:
                ln = f"node{rng.randint(1, 3)}: {ln}"
            out.append(ln)
    if rng.random() < 0.2:
        out = [ln + "\r" for ln in out]
    if rng.random() < 0.5:  # a range starting / ending anywhere
        a = rng.randint(0, len(out) // 3)
        b = rng.randint(max(a + 1, 2 * len(out) // 3), len(out))
        out = out[a:b]
    if out and rng.random() < 0.3:
        out[-1] = out[-1][: rng.randint(0, len(out[-1]))]
    return out


def _check(lines: list[str], ctx: FileContext, monkeypatch: pytest.MonkeyPatch) -> None:
    """Old and new on `lines`, the new both as on a small file and as on a large one (no literal gate: the
    collector time prefix found by a `contains` pass; the line flags made per distinct line)."""
    s = pl.Series("l", lines, dtype=pl.String)
    want = _ib10_ref._parse_frames(s, ctx)
    monkeypatch.setattr(infiniband, "LANE_MIN_LINES", 0)
    assert_same_result(want, infiniband._parse_frames(s, ctx))
    monkeypatch.setattr(infiniband._Gate, "LIMIT", -1)
    monkeypatch.setattr(infiniband, "DISTINCT_MIN_ROWS", 0)  # (flags made per distinct line where they repeat)
    assert_same_result(want, infiniband._parse_frames(s, ctx))


@pytest.mark.parametrize("i", range(len(SOURCES)))
def test_ib10_sources(i: int, monkeypatch: pytest.MonkeyPatch) -> None:
    _check(SOURCES[i], FileContext(path="n1/ib.txt", node="n1"), monkeypatch)


@pytest.mark.parametrize("seed", range(12))
def test_ib10_loops(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    ctx = FileContext(
        path="n1/ib.txt",
        node=rng.choice(["n1", "node2", "gpu-node-003.example"]),
        first_line=rng.randint(1, 10**6),
    )
    _check(generated_loop(rng), ctx, monkeypatch)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(0, 2**32 - 1))
def test_ib10_hypothesis(seed: int) -> None:
    rng = random.Random(seed)
    ctx = FileContext(path="n1/ib.txt", node="n1", first_line=rng.randint(1, 1000))
    with pytest.MonkeyPatch.context() as mp:
        _check(generated_loop(rng), ctx, mp)


def test_ib10_counter_lines_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Edges of the lane: counter lines alone (no header), after a header of another host, first / last."""
    rng = random.Random(7)
    lines = [f"{rng.choice(NAMES)}:{'.' * rng.randint(1, 30)}{rng.choice(VALUES)}" for _ in range(200)]
    for node in ("n1", "node1"):
        _check(lines, FileContext(path="n1/ib.txt", node=node), monkeypatch)
        _check(["node1: $ perfquery -C mlx5_0 -P 1", "node1: # Port counters: Lid 1 port 1", *lines],
               FileContext(path="n1/ib.txt", node=node), monkeypatch)  # fmt: skip
        _check(["$ perfquery -C mlx5_0 -P 1", "# Port counters: Lid 1 port 1", *lines, "junk"],
               FileContext(path="n1/ib.txt", node=node), monkeypatch)  # fmt: skip


def test_ib10_whole_loop() -> None:
    """The 20 MB loop head (when present) as one file: the lane taken at its real size."""
    p = Path("/tmp/s10/ib20.txt")
    if not p.exists():
        pytest.skip("no loop file")
    lines = pl.Series("l", p.read_text().splitlines(), dtype=pl.String)[:120_000]
    ctx = FileContext(path="n1/ib.txt", node="n1", first_line=5)
    assert_same_result(_ib10_ref._parse_frames(lines, ctx), infiniband._parse_frames(lines, ctx))


@pytest.mark.parametrize("seed", range(8))
def test_ib10_repeated_captures(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A capture printed again and again (the lines repeat: the per-distinct-line flags, key/value reading and
    value normalisation are joined back), with a few lines varied between the copies."""
    rng = random.Random(1000 + seed)
    loop = generated_loop(rng)
    lines = []
    for _ in range(rng.randint(2, 5)):
        lines += [_vary(ln, rng) if rng.random() < 0.05 else ln for ln in loop]
    _check(lines, FileContext(path="n1/ib.txt", node="n1", first_line=3), monkeypatch)
