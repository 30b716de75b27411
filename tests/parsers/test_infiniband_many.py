"""`infiniband.parse_many` equals per-file `parse` (every table, dtype and accounting field).

Batches are built from the fixtures, variants of them (CRLF kept in the lines, pdsh-style prefixes, a cut
last line, an empty file, a file of unknown lines, other nodes and paths) and seeded random mixes of fixture
lines and edge lines. The batched small path caches the reading of each distinct line for the process, so
the random mixes are also read with the caches emptied and compared with the vectorised path.
"""

from __future__ import annotations

import random

import polars as pl
import pytest

from parsers import infiniband
from parsers.base import FileContext, ParseResult
from tests.conftest import assert_same_result, fixture_lines, variants

EDGE = [
    # lines that send a file the vectorised way (or test the edges of the small path)
    "PortRcvData:.....................1e6",
    "PortXmitWait:....................99999999999999999999",
    '\t\tState: a"b',
    "mlx5_0 port 1 ==> ib0 (Up)",
    "hgx-01: \tState: Active",
    "==> /sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error <==",
    "2025-06-14T10:00:00Z CA 'mlx5_0'",
    "[rank0]: CA 'mlx5_0'",
    "Operational Info",
    "ibpanic: [99999999999999999999] x",
    'ibwarn: [12] a "quoted" reason',
    "\t\tState: Act\u00efve",
    "\t\tState: Down \u2014 see \u00a74",
    "CA '\u00abmlx5_0\u00bb'",
    "Sat Jun 14 10:10:00 UTC 2025 \u2014",
    "# note \u2014 see \u00a74 \u2192 x",
    # lines the small path reads
    "ibwarn: [123] mad_rpc: _do_madrpc failed; dport (Lid 12)",
    "ibpanic: [1400444] main: stat of IB device 'mlx5_8' failed: No such file or directory",
    "iberror: no port",
    "/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error:0",
    "/sys/class/infiniband/mlx5_0/ports/1/state:4: ACTIVE",
    "mlx5_3/ports/1/hw_counters/out_of_sequence: 7",
    "Sat Jun 14 10:10:00 UTC 2025",
    "1718359200",
    "date: 2025-06-14 10:30:00",
    "=== mlx5_3 port 2 ===",
    "$ perfquery -C mlx5_1 -P 1",
    "# Port extended counters: Lid 12 port 1 (CapMask: 0x5A00)",
    "# Port counters: Lid 7 port 2",
    "PortXmitData:....................0x1234",
    "SymbolErrorCounter:..............3",
    "CA 'mlx5_9'",
    "\tPort 2:",
    "\t\tState: Down",
    "\t\tState: Armed",
    "\t\tRate: 200 Gb/sec (4X HDR)",
    "hca_id:\tmlx5_1",
    "\tport:\t1",
    "\t\t\tactive_width:\t\t4X (2)",
    "\t\t\tactive_speed:\t\t25.0 Gbps (32)",
    "garbage",
    "# note \u2014 see FORMATS.md \u00a74 \u00abquoted\u00bb",
    "",
    "   ",
]








def items_of(files: list[tuple[str, str, list[str | None]]]) -> list[tuple[pl.Series, FileContext]]:
    return [
        (pl.Series("line", lines, dtype=pl.String), FileContext(path=path, node=node, year_hint=2025))
        for path, node, lines in files
    ]


def check(files: list[tuple[str, str, list[str | None]]]) -> list[ParseResult]:
    """parse_many over (path, node, lines) files == parse of each; returns the batch's results."""
    items = items_of(files)
    many = infiniband.parse_many(items)
    assert len(many) == len(items)
    for (lines, ctx), got in zip(items, many, strict=True):
        assert_same_result(infiniband.parse(lines, ctx), got)
    return many


def test_each_fixture_alone_and_all_together() -> None:
    files = [(f"ib/{name}", "node-a", lines) for name, lines in fixture_lines("infiniband")]
    for f in files:
        check([f])
    check(files)
    check([])


def test_variants_batched_with_other_files() -> None:
    fixtures = [f for f in fixture_lines("infiniband") if f[0].endswith(":harness")]
    for k, (name, lines) in enumerate(fixtures):
        batch = [(f"{name}/{v}", f"n{k}-{j}", ls) for j, (v, ls) in enumerate(variants(lines).items())]
        other = fixtures[(k + 3) % len(fixtures)]
        batch.insert(3, (f"other/{other[0]}", "node-b", other[1]))
        check(batch)


def test_plain_files_take_the_batched_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """ibstat, ibstatus, ibv_devinfo, perfquery and sysfs dumps of the plain forms are read together."""
    plain = [
        (name, lines)
        for name, lines in fixture_lines("infiniband")
        if name.split(":")[0].startswith(("ibstat", "ibstatus", "ibv_", "perfquery", "sysfs_class"))
    ]  # (as is, with their `#SOURCE:` lines, and blanked)
    assert len(plain) >= 14
    calls: list[str] = []
    real = infiniband._parse_frames
    monkeypatch.setattr(
        infiniband, "_parse_frames", lambda lines, ctx: calls.append(ctx.path) or real(lines, ctx)
    )
    files = [(name, "node-a", lines) for name, lines in plain]
    many = infiniband.parse_many(items_of(files))
    assert calls == []
    monkeypatch.undo()
    for (lines, ctx), got in zip(items_of(files), many, strict=True):
        assert_same_result(infiniband.parse(lines, ctx), got)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_batches(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    fixtures = fixture_lines("infiniband")
    for b in range(6):
        files = []
        for k in range(rng.randint(1, 12)):
            parts: list[str] = []
            for _ in range(rng.randint(1, 5)):
                if rng.random() < 0.6:
                    lines = rng.choice(fixtures)[1]
                    a = rng.randrange(len(lines))
                    parts += lines[a : a + rng.randint(1, 60)]
                else:
                    parts += [
                        rng.choice(EDGE[15:] if rng.random() < 0.7 else EDGE)
                        for _ in range(rng.randint(1, 4))
                    ]
            files.append((f"mix/{seed}/{b}/{k}", rng.choice(["node-a", "node-b", "unknown"]), parts))
        infiniband._LINES.clear()
        infiniband._TIMES.clear()
        many = check(files)
        # the same with empty caches against the vectorised path
        monkeypatch.setattr(infiniband, "SMALL_LINES", -1)
        for (lines, ctx), got in zip(items_of(files), many, strict=True):
            assert_same_result(infiniband.parse(lines, ctx), got)
        monkeypatch.undo()


def test_punctuation_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """A comment line with non-ASCII punctuation keeps a file on the small path; such a character on a line
    the grammar reads sends the file to the vectorised path. Both as the vectorised path reads them."""
    ibstat = dict(fixture_lines("infiniband"))["ibstat_h100_8x400g_some_down.txt:harness"]
    ctx = FileContext(path="p", node="n")
    kept = ["# collected \u2014 see FORMATS.md \u00a74 \u00abibstat\u00bb", *ibstat, "\u2014\u2014\u2014"]
    declined = [*ibstat[:20], "\t\tState: Down \u2014 see \u00a74", *ibstat[20:]]
    assert infiniband._parse_small(kept, ctx) is not None
    assert infiniband._parse_small(declined, ctx) is None
    many = infiniband.parse_many(items_of([("a", "n", kept), ("b", "n", declined)]))
    monkeypatch.setattr(infiniband, "SMALL_LINES", -1)
    for (lines, c), got in zip(items_of([("a", "n", kept), ("b", "n", declined)]), many, strict=True):
        assert_same_result(infiniband.parse(lines, c), got)


# ----------------------------------------------------------------------------- plain perfquery dumps


_PQ_NAMES_SEEN = [
    "PortSelect", "CounterSelect", "CounterSelect2", "SymbolErrorCounter", "LinkDownedCounter",
    "PortRcvErrors", "PortXmitDiscards", "PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts",
    "PortXmitWait", "PortUnicastXmitPkts", "VL15Dropped", "QP1Dropped", "SomeVendorCounter",
]  # fmt: skip


def _pq_value(rnd: random.Random, odd: bool) -> str:
    """A reading: decimal mostly (18 digits at most: `_PLAIN_DIGITS`); where `odd`, now and then one the
    lane leaves to the walk (19 digits and more, hex)."""
    plain = ["0", "0", "3", str(rnd.randrange(10**13)), str(rnd.randrange(10**18)), "9" * 18, "00042"]
    if odd and rnd.random() < 0.1:
        return rnd.choice(["9" * 19, "1" + "0" * 24, "0x1234"])
    return rnd.choice(plain)


def _pq_dump(rnd: random.Random) -> list[str]:
    """A perfquery dump of a few ports (classic or extended headers, a port read twice, blank lines), and
    now and then a line of another kind: a header group that needs escaping, a counter line before any
    header, a `$ perfquery` command, a date, an ibwarn."""
    lines: list[str] = [""] if rnd.random() < 0.2 else []
    odd = rnd.random() < 0.3
    if rnd.random() < 0.1:  # (a header and no counter line, or blank lines only)
        bare = [["# Port extended counters: Lid 9 port 1"], ["", "# Port counters: Lid 9 port 1", ""], [""]]
        return rnd.choice(bare)
    lids = [11, 12, 75, 7, 123456789012]
    ports = [(rnd.choice(lids), rnd.choice([1, 1, 2])) for _ in range(rnd.randint(1, 4))]
    if rnd.random() < 0.25:
        ports.append(ports[0])  # (the same port read again: readings numbered 1)
    for lid, port in ports:
        what = rnd.choice(["extended counters", "counters", "extended  counters"])
        lines.append(f"# Port {what}: Lid {lid} port {port}" + rnd.choice([" (CapMask: 0x5A00)", ""]))
        for name in rnd.sample(_PQ_NAMES_SEEN, rnd.randint(1, len(_PQ_NAMES_SEEN))):
            value = _pq_value(rnd, odd)
            lines.append(f"{name}:{'.' * max(1, 33 - len(name))}{value}")
        if rnd.random() < 0.3:
            lines.append("")
    if rnd.random() < 0.15:
        other = [
            "PortXmitWait:....................5", "$ perfquery -x -C mlx5_0 -P 1",
            "Sat Jun 14 10:10:00 UTC 2025", "ibwarn: [123] mad_rpc: _do_madrpc failed; dport (Lid 12)",
            "garbage", "   ",
        ]  # fmt: skip
        lines.insert(rnd.randrange(len(lines) + 1), rnd.choice(other))
    return lines


@pytest.mark.parametrize("seed", range(6))
def test_plain_perfquery_dumps_read_as_the_walk_reads_them(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`_plain_dumps` (the counter rows of a batch's plain perfquery dumps made in one polars query) gives
    what the walk (`_small_file`) gives, file by file, and what the vectorised path gives: readings of many
    digits (past `_PLAIN_DIGITS`), hex readings, names that are not counters, a port read twice, blank lines,
    a first line past 1, and files it must leave to the walk."""
    rnd = random.Random(seed)
    n = rnd.choice([2, 9, 32])
    files = [(f"n{k:03d}/perfquery.{k}.txt", f"n{k:03d}", _pq_dump(rnd)) for k in range(n)]
    items = [
        (lines, FileContext(path=ctx.path, node=ctx.node, year_hint=2025, first_line=rnd.choice([1, 1, 40])))
        for lines, ctx in items_of(files)
    ]
    taken = []
    real = infiniband._plain_dumps
    monkeypatch.setattr(
        infiniband, "_plain_dumps", lambda fs, cls: taken.append(got := real(fs, cls)) or got
    )
    lane = infiniband.parse_many(items)
    monkeypatch.setattr(infiniband, "PQ_LANE", False)
    walk = infiniband.parse_many(items)
    for got, want in zip(lane, walk, strict=True):
        assert_same_result(got, want)
    monkeypatch.setattr(infiniband, "SMALL_LINES", -1)
    for (lines, ctx), got in zip(items, lane, strict=True):
        assert_same_result(infiniband.parse(lines, ctx), got)
    assert sum(len(t) for t in taken) > 0  # (the lane read some files)


def test_plain_perfquery_dump_rows() -> None:
    """One dump: a row per counter line under a header but the selects, device `lid:<lid>`, readings
    numbered per (device, port, counter), the 32-bit names of the classic header suffixed."""
    lines = [
        "# Port counters: Lid 75 port 1 (CapMask: 0x5A00)",
        "PortSelect:......................1",
        "CounterSelect:...................0x0000",
        "PortXmitData:....................4294967295",
        "SymbolErrorCounter:..............3",
        "",
        "# Port extended counters: Lid 75 port 1 (CapMask: 0x5A00)",
        "PortXmitData:....................56832719360",
        "# Port counters: Lid 75 port 1",
        "SymbolErrorCounter:..............4",
    ]
    taken: list[dict] = []
    real = infiniband._plain_dumps
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(infiniband, "_plain_dumps", lambda fs, cls: taken.append(got := real(fs, cls)) or got)
        got = infiniband.parse_many(items_of([("n1/pq.txt", "n1", lines), ("n2/pq.txt", "n2", lines[:4])]))[0]
    assert [len(t) for t in taken] == [2]
    comms = got.tables["comms"]
    assert comms.select("device", "port", "counter", "value", "line").rows() == [
        ("lid:75", 1, "port_xmit_data_32", 4294967295.0, 4),
        ("lid:75", 1, "symbol_error", 3.0, 5),
        ("lid:75", 1, "port_xmit_data", 56832719360.0, 8),
        ("lid:75", 1, "symbol_error", 4.0, 10),
    ]
    assert [d.split(",")[0] for d in comms.get_column("detail")] == [
        '{"reading":0', '{"reading":0', '{"reading":0', '{"reading":1'
    ]
    assert (got.parsed, got.unrecognized, got.partial) == (9, 0, False)


def test_plain_perfquery_dumps_without_counter_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dump of headers only, one of blank lines only and a counter line before a header, in a batch with
    a dump of readings: the same as the walk and the vectorised path give them."""
    files = [
        ("a/pq.txt", "a", ["# Port extended counters: Lid 9 port 1", ""]),
        ("b/pq.txt", "b", ["", ""]),
        ("c/pq.txt", "c", ["SymbolErrorCounter:..............3", "# Port counters: Lid 7 port 1"]),
        ("d/pq.txt", "d", ["# Port counters: Lid 7 port 1", "SymbolErrorCounter:..............3"]),
        ("e/pq.txt", "e", ["# Port counters: Lid 7 port 2"]),
    ]
    lane = infiniband.parse_many(items_of(files))
    monkeypatch.setattr(infiniband, "PQ_LANE", False)
    for got, want in zip(lane, infiniband.parse_many(items_of(files)), strict=True):
        assert_same_result(got, want)
    monkeypatch.setattr(infiniband, "SMALL_LINES", -1)
    for (lines, ctx), got in zip(items_of(files), lane, strict=True):
        assert_same_result(infiniband.parse(lines, ctx), got)
    assert [r.tables["comms"].height for r in lane] == [0, 0, 0, 1, 0]
