"""`parsers.nccl._py_warn_events` (a chunk's few WARN messages read in Python) gives what the polars
reading gives: the whole parse both ways (`nccl.PY_WARNS`) on the NCCL fixtures and real logs, on seeded
random files mixing their lines with WARN records of every kind (IB completions with and without peers,
status names, `::ffff:` GIDs, huge numbers, async events, ibv and CUDA failures, proxy, timeouts, torch
`Last error:` quotes), and on non-ASCII messages (which fall back to polars).
"""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest

from parsers import nccl
from parsers.base import FileContext, lines_from_bytes
from tests.conftest import assert_same_result, fixture_lines

CTX = FileContext(path="x/nccl.log", node="n1", year_hint=2025)
REAL = Path("/work/shared/real-logs/nccl")

_WARNS = [
    "NET/IB : Got completion from peer 10.1.32.3<54891> with error 5, opcode 0, len 0, vendor err 249",
    "NET/IB: Got completion from peer 192.168.3.5<53908> with status=12 opcode=129 len=1048576 "
    "vendor err 129 (Recv) localGid ::ffff:192.168.6.3 remoteGids::ffff:192.168.3.5 hca mlx5_2",
    "NET/IB : Got completion with error IBV_WC_RETRY_EXC_ERR(12), opcode=0, len=0, vendor_err=129 "
    "req_type=ibv_Send localGid fe80::1 remoteGid ::ffff:10.0.0.1",
    "NET/IB : Got completion from peer 10.2.0.5<33092> with error 99999999999999999999, opcode 0, len",
    "NET/IB : Got completion from peer 10.2.0.5<99999999999999999999> with status=5 "
    "opcode=77777777777777777777777",
    "NET/IB : mlx5_0:1 Got async event : local access violation work queue error",
    "NET/IB : Got async event : port error   ",
    "Call to ibv_modify_qp failed with error Network is unreachable",
    "Call to ibv_create_qp failed",
    "Cuda failure 'out of memory'",
    "Cuda failure 2 'out of memory'",
    "Failed to CUDA calloc 8 bytes",
    "socketProgressOpt: Call to recv from 10.4.0.13<41532> failed : Connection reset by peer",
    "socketProgress: Connection closed by remote peer gpu-b32<55173>",
    "[Proxy Service 6] Failed to execute operation Connect from rank 20, retcode 3",
    "proxy thread stuck, by localRank 3",
    "unhandled system error (run with NCCL_DEBUG=INFO for details)",
    "Error while creating shared memory segment /dev/shm/nccl-xyz (size 9637888)",
    "Watchdog TimeOut after 600 s",
    "Timed out waiting for peer",
    'weird "quoted" \\ text\twith tab',
    "",
    "nvmlDeviceGetHandleByPciBusId() failed: Not Found",
]
_HEADS = [
    "gpu-a27:936215:936215 [0]",
    "gpu-a27:936215:936300 [0] 12.345 transport/net_ib.cc:1234 (ncclIbTest)",
    "gpu-b33:877641:877641 [1] misc/socket.cc:50",
    "host.example.com:12:12 [7]",
]
_ENVS = ["", " 3: ", "[1,12]<stdout>: ", "12: "]


def _both(lines: list[str]) -> None:
    s = pl.Series("line", lines, dtype=pl.String)
    nccl.PY_WARNS = False
    try:
        slow = nccl.parse(s, CTX)
    finally:
        nccl.PY_WARNS = True
    fast = nccl.parse(s, CTX)
    assert_same_result(fast, slow)


def _pool() -> list[str]:
    out = []
    for _name, lines in fixture_lines("nccl", harness=False):
        out.extend(lines)
    for p in sorted(REAL.rglob("*")) if REAL.is_dir() else []:
        if p.is_file() and p.stat().st_size < 5_000_000:
            out.extend(lines_from_bytes(p.read_bytes()).to_list())
    return out


@pytest.fixture(scope="module")
def pool() -> list[str]:
    return _pool()


@pytest.mark.parametrize("seed", range(30))
def test_py_warn_events_match_the_polars_reading(seed: int, pool: list[str]) -> None:
    rng = random.Random(seed)
    lines = []
    start = rng.randrange(max(1, len(pool) - 400))
    for line in pool[start : start + rng.choice([20, 100, 400])]:
        lines.append(line)
        if rng.random() < 0.2:
            env = rng.choice(_ENVS)
            lines.append(f"{env}{rng.choice(_HEADS)} NCCL WARN {rng.choice(_WARNS)}")
        if rng.random() < 0.02:
            lines.append("[rank0]:[E1102 10:00:00.000000 123 ProcessGroupNCCL.cpp:1] Last error:")
            lines.append(rng.choice(_WARNS))
    _both(lines)


def test_py_warn_events_on_the_fixtures_and_real_logs() -> None:
    for _name, lines in fixture_lines("nccl"):
        _both(lines)
    if REAL.is_dir():
        for p in sorted(REAL.rglob("*")):
            if p.is_file() and p.stat().st_size < 5_000_000:
                _both(lines_from_bytes(p.read_bytes()).to_list())


def test_non_ascii_warns_fall_back() -> None:
    _both([f"{_HEADS[0]} NCCL WARN Cuda failure 'mémoire'", f"{_HEADS[1]} NCCL WARN {_WARNS[1]}"])
