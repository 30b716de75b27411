"""`parse_many` of nccl-tests and perftest equals per-file `parse` (every table, dtype and accounting field).

Batches are built from each format's fixtures (as is and with the harness annotations blanked), variants of
them (CRLF kept in the lines, pdsh-style prefixes, a cut last line, an empty file, a file of unknown lines,
null lines, other nodes and paths) and seeded random mixes of fixture lines and edge lines, some of which
send a file to the vectorised path (collector time prefixes, JSON, odd numbers).
"""

from __future__ import annotations

import random
from types import ModuleType

import polars as pl
import pytest

from parsers import nccl_tests, perftest
from parsers.base import FileContext
from tests.conftest import assert_same_result, fixture_lines, variants

EDGE = {
    "nccl-tests": [
        "  1024  256  half  none  -1  5.  .5  1e3  2.0  inf  nan  0  0",
        "2025-06-14T10:00:00Z # Out of bounds values : 0 OK",
        "nodeA: Test NCCL failure common.cu:1 'unhandled'",
        "# Avg bus bandwidth    : nan",
        '{"nccl-tests-json": 1}',
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1",  # noqa: E501
        "#  Rank  0 Group  0 Pid 308663 on hgx-h100-0001 device  0 [0x18] NVIDIA H100 80GB HBM3",
        "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong",
        "  8388608  2097152  float  sum  -1  325.1  25.80  48.38  2  324.8  25.83  48.43  0",
        "# Out of bounds values : 3 FAILED",
        "# Avg bus bandwidth    : 147.44 ",
        "hgx-01:1234:1250 [0] NCCL INFO Bootstrap : Using eth0",
        "garbage",
        "",
    ],
    "perftest": [
        " 65536 5000 0.00001 5 6",
        "0: 65536 5000 1 2 3",
        "2025-06-14T10:00:00Z  65536 5000 1 2 3",
        "                    RDMA_Write BW Test",
        " Dual-port       : OFF\t\tDevice         : mlx5_0",
        " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]",
        " 65536      5000             23011.44            23002.37              0.368038",
        "Sat, 14 Jun 2025 10:20:00 +0000",
        "Sat Jun 14 10:20:00 UTC 2025",
        "$ ib_write_bw -d mlx5_0 -a",
        "garbage",
        "",
    ],
}
MODULES = {"nccl-tests": nccl_tests, "perftest": perftest}








def check(module: ModuleType, files: list[tuple[str, str, list[str | None]]]) -> None:
    """parse_many over (path, node, lines) files == parse of each."""
    items = [
        (pl.Series("line", lines, dtype=pl.String), FileContext(path=path, node=node, year_hint=2025))
        for path, node, lines in files
    ]
    many = module.parse_many(items)
    assert len(many) == len(items)
    for (lines, ctx), got in zip(items, many, strict=True):
        assert_same_result(module.parse(lines, ctx), got)


@pytest.mark.parametrize("fmt", list(MODULES))
def test_each_fixture_alone_and_all_together(fmt: str) -> None:
    files = [(f"{fmt}/{name}", "node-a", lines) for name, lines in fixture_lines(fmt)]
    for f in files:
        check(MODULES[fmt], [f])
    check(MODULES[fmt], files)
    check(MODULES[fmt], [])


@pytest.mark.parametrize("fmt", list(MODULES))
def test_variants_batched_with_other_files(fmt: str) -> None:
    fixtures = [f for f in fixture_lines(fmt) if f[0].endswith(":harness")]
    for k, (name, lines) in enumerate(fixtures):
        batch = [(f"{name}/{v}", f"n{k}-{j}", ls) for j, (v, ls) in enumerate(variants(lines).items())]
        other = fixtures[(k + 1) % len(fixtures)]
        batch.insert(3, (f"other/{other[0]}", "node-b", other[1]))
        check(MODULES[fmt], batch)


@pytest.mark.parametrize("fmt", list(MODULES))
@pytest.mark.parametrize("seed", [1, 2])
def test_random_batches(fmt: str, seed: int) -> None:
    rng = random.Random(seed)
    fixtures = fixture_lines(fmt)
    edge = EDGE[fmt]
    for b in range(5):
        files = []
        for k in range(rng.randint(1, 10)):
            parts: list[str] = []
            for _ in range(rng.randint(1, 5)):
                if rng.random() < 0.6:
                    lines = rng.choice(fixtures)[1]
                    a = rng.randrange(len(lines))
                    parts += lines[a : a + rng.randint(1, 40)]
                else:
                    parts += [rng.choice(edge) for _ in range(rng.randint(1, 4))]
            files.append((f"mix/{seed}/{b}/{k}", rng.choice(["node-a", "node-b"]), parts))
        check(MODULES[fmt], files)


@pytest.mark.parametrize("fmt", list(MODULES))
def test_small_files_take_the_batched_path(fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the files the small path declines alone are parsed on their own (`_parse_frames`)."""
    module = MODULES[fmt]
    fixtures = fixture_lines(fmt)
    declined = {
        f"{fmt}/{name}"
        for name, lines in fixtures
        if module._parse_small(lines, FileContext(path="x", node="n")) is None
    }
    assert len(declined) < len(fixtures)
    calls: list[str] = []
    real = module._parse_frames
    monkeypatch.setattr(
        module, "_parse_frames", lambda lines, ctx: calls.append(ctx.path) or real(lines, ctx)
    )
    items = [
        (pl.Series("line", lines, dtype=pl.String), FileContext(path=f"{fmt}/{name}", node="n"))
        for name, lines in fixtures
    ]
    module.parse_many(items)
    assert set(calls) == declined
