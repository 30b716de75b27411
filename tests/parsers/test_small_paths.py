"""The plain-Python small-file paths of infiniband, nccl-tests and perftest equal the vectorised paths.

Each case is parsed twice: as is (a small file takes `_parse_small` when it can) and with `SMALL_LINES` set to
-1 (always the vectorised path); every table (schema and values), the counts, examples, notes, `partial` and
`node` must be equal. Inputs: the fixtures (raw and with the harness lines blanked), lines shuffled and cut
from them, and hand-made lines on the edges of the small paths (odd numbers, JSON-unsafe strings, ...).
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from types import ModuleType

import polars as pl
import pytest

from parsers import infiniband, nccl_tests, perftest
from parsers.base import HARNESS_LINE, FileContext, ParseResult, lines_from_bytes
from tests.conftest import assert_same_result

FIX = Path(__file__).parent.parent / "fixtures"

IB_EXTRA = [
    # lines the small path leaves to the vectorised one (or that test its edges)
    "PortRcvData:.....................1e6",
    "SymbolErrorCounter:..............-3",
    "PortXmitWait:....................99999999999999999999",
    '\t\tState: a"b',
    "\t\tState: Foo:bar",
    "\t\tState: Foo\tBar",
    "\t\t\tactive_speed:\t\t2.5 Gbps (1)",
    "mlx5_0 port 1 ==> ib0 (Up)",
    "hgx-01: \tState: Active",
    "ibwarn: [123] foo",
    "Operational Info",
    # plain lines
    "/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error:0",
    "/sys/class/infiniband/mlx5_0/ports/1/state:4: ACTIVE",
    "/sys/class/infiniband/mlx5_2/ports/2/state 2: INIT",
    "/sys/class/infiniband/mlx5_0/ports/1/rate:400 Gb/sec (4X NDR)",
    "mlx5_3/ports/1/hw_counters/out_of_sequence: 7",
    "/sys/class/infiniband/mlx5_0/node_guid:946d:bf7c:b45b:d4d3",
    "Sat Jun 14 10:10:00 UTC 2025",
    "Sat, 14 Jun 2025 10:00:00 +0000",
    "1718359200",
    "date: 2025-06-14 10:30:00",
    "Sat Jun 14 25:99:00 UTC 2025",
    "=== mlx5_3 port 2 ===",
    "$ perfquery -C mlx5_1 -P 1",
    "$ perfquery -x",
    "-----",
    "# Port extended counters: Lid 12 port 1 (CapMask: 0x5A00)",
    "# Port counters: Lid 7 port 2",
    "PortXmitData:....................0x1234",
    "LinkDownedCounter:...............",
    "PortXmitWait:....................1234567890123",
    "\tState: 4: ACTIVE",
    "\t\tState: PORT_ACTIVE (4)",
    "\t\tPhysical state: 2: Polling",
    "\t\tRate: 200 Gb/sec (4X HDR)",
    "\t\tBase lid: 0x1f",
    "\t\tPort GUID: 0x0002:c903:0000:1234",
    "hca_id:\tmlx5_1",
    "\tport:\t1",
    "\t\t\tactive_width:\t\t4X (2)",
    "\t\t\tactive_speed:\t\t25.0 Gbps (32)",
    "CA 'mlx5_9'",
    "\tPort 2:",
    "\t\tState: Down",
    "\t\tState: Initializing",
    "\t\tState: Armed",
    "\t\tLink layer: Ethernet",
    "garbage",
    "",
]
NT_EXTRA = [
    # lines the small path leaves to the vectorised one (or that test its edges)
    '#  Rank  3 Group  0 Pid 4 on nodeB device  3 [zz] weird "gpu"',
    "#  Rank  0 Group  0 Pid 1 on nodeA device  0 [0x18] NVIDIA\tH100",
    "  1024  256  half  none  -1  5.  .5  1e3  2.0  inf  nan  0  0",
    "2025-06-14T10:00:00Z # Out of bounds values : 0 OK",
    "nodeA: Test NCCL failure common.cu:1 'unhandled'",
    "# Avg bus bandwidth    : nan",
    "  1048576  262144  float  sum  -1  1_000  x  y  0  1  2  3  0",
    # plain lines
    "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1",  # noqa: E501
    "# nccl-tests version 2.13.9 nccl-headers=22105 nccl-library=22105",
    "# nccl-tests version 2.0.0 nccl-headers=2708 nccl-library=2708",
    "NCCL version 2.18.5+cuda12.0",
    "# Collective test starting: all_gather_perf",
    "$ mpirun -np 16 ./build/all_reduce_perf -b 8 -e 8G -f 2 -g 1",
    "#  Rank  0 Group  0 Pid 308663 on hgx-h100-0001 device  0 [0x18] NVIDIA H100 80GB HBM3",
    "#  Rank  0 Group  0 Pid 2 on nodeA.x device  1 [0002:00:01] NVIDIA A100",
    "#  Rank  2 Pid 3 on nodeB device 2 [0x00] ",
    "#  size  count  type  redop  time  algbw  busbw  error  time  algbw  busbw  error",
    "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong",
    "  8388608  2097152  float  sum  -1  325.1  25.80  48.38  N/A  324.8  25.83  48.43  N/A",
    "  8388608  2097152  float  sum  -1  325.1  25.80  48.38  2  324.8  25.83  48.43  0",
    "  1024  256  float  sum  10.5  0.10  0.18  1e-06  10.3  0.10  0.18  0e+00",
    "  1024  256  float  sum  -1  10.5  0.10",
    "# Out of bounds values : 3 FAILED",
    "# Out of bounds values : 0 OK",
    "# Out of bounds values : 2",
    "# nccl-tests version 2.19.1 nccl-headers=21813 nccl-library=21813",
    "# Avg bus bandwidth    : 147.44 ",
    "hgx-01:1234:1250 [0] NCCL INFO Bootstrap : Using eth0",
    "  12345  678",
    "#",
    "[rank0]: # Avg bus bandwidth    : 1.5",
    "0: [default1]: #  Rank  1 Group  0 Pid 2 on nodeB device  1 [0x19] X",
    "[1,3]<stdout>:  1024  256  float  sum  -1  10.5  0.10  0.18  0  10.3  0.10  0.18  0",
    "",
]

PT_EXTRA = [
    # lines the small path leaves to the vectorised one (or that test its edges)
    " Link type       : Ether\tnet",
    " 8  1000  1.2.3  1.5  2.5",
    " 65536 5000 0.00001 5 6",
    "0: 65536 5000 1 2 3",
    # plain lines
    "---------------------------------------------------------------------------------------",
    "                    RDMA_Write BW Test",
    "                    RDMA_Read Latency Test",
    " Dual-port       : OFF\t\tDevice         : mlx5_0",
    " Connection type : RC\t\tUsing SRQ      : OFF",
    " Link type       : Ethernet",
    " GID index       : 3",
    " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]",
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]",
    " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]",
    " 65536      5000             23011.44            23002.37              0.368038",
    " 2       1000          1.62      4.37      1.66      1.68      0.06     1.79    4.37",
    " 2       1000          1.62           4.37         1.66                1.68",
    "Sat, 14 Jun 2025 10:20:00 +0000",
    "Sat Jun 14 10:20:00 UTC 2025",
    "$ ib_write_bw -d mlx5_0 -a",
    " local address: LID 0x0b QPN 0x0123 PSN 0x4567",
    "garbage",
    "",
]

def _fixture_lines(folder: str) -> list[tuple[str, list[str]]]:
    out = []
    for p in sorted((FIX / folder).iterdir()):
        if p.suffix in (".jsonl", ".json") or not p.is_file():
            continue
        lines = lines_from_bytes(p.read_bytes()).to_list()
        out.append((p.name, lines))
        blanked = pl.Series(lines, dtype=pl.String).str.contains(HARNESS_LINE).to_list()
        out.append((p.name + ":harness", ["" if h else t for t, h in zip(lines, blanked, strict=True)]))
        # without the lines that send a file the vectorised way (times, non-ASCII): more of it the small way
        plain = [t for t in lines if t.isascii() and not re.search(r"\d:\d\d:\d\d", t)]
        out.append((p.name + ":plain", plain))
    return out


def _cases(folder: str, extra: list[str], n: int, seed: int) -> list[tuple[str, list[str]]]:
    fixtures = _fixture_lines(folder)
    rng = random.Random(seed)
    cases = list(fixtures)
    if folder == "nccl-tests":  # the status of an earlier `Out of bounds` line carries to the summary
        starts = (
            "# nThread",
            "#  Rank  0 Group  0 Pid 308663",
            "#  size  count  type  redop  root",
            "  8388608",
            "# Out of bounds values : 0",
            "# Out of bounds values : 2",
            "# Avg bus bandwidth    : 1",
        )
        cases.append(("oob", [next(t for t in NT_EXTRA if t.startswith(p)) for p in starts]))
    for k in range(n):
        # half the cases without the first half of `extra` (the lines that send a file the vectorised way)
        pool = extra if k % 2 else extra[len(extra) // 2 :]
        parts: list[str] = []
        for _ in range(rng.randint(1, 5)):
            if rng.random() < 0.5:
                lines = rng.choice(fixtures)[1]
                a = rng.randrange(len(lines))
                parts += lines[a : a + rng.randint(1, 40)]
            else:
                parts += [rng.choice(pool) for _ in range(rng.randint(1, 4))]
        cases.append((f"mix{k}", parts))
    return cases


def _same(a: ParseResult, b: ParseResult) -> None:
    assert_same_result(a, b)


@pytest.mark.parametrize(
    ("module", "folder", "extra"),
    [
        (infiniband, "infiniband", IB_EXTRA),
        (nccl_tests, "nccl-tests", NT_EXTRA),
        (perftest, "perftest", PT_EXTRA),
    ],
)
def test_small_path_matches_vectorised(
    module: ModuleType, folder: str, extra: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = 0
    for name, lines in _cases(folder, extra, 120, 7):
        series = pl.Series("line", lines, dtype=pl.String)
        ctx = FileContext(path=f"{folder}/{name}", node="node-x", first_line=3)
        small = module._parse_small(lines, ctx)
        taken += small is not None
        fast = module.parse(series, ctx)
        monkeypatch.setattr(module, "SMALL_LINES", -1)
        slow = module.parse(series, ctx)
        monkeypatch.undo()
        _same(fast, slow)
    assert taken > 20  # the small path is exercised
