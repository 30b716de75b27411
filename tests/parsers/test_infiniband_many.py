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
