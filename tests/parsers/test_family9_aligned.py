"""`nccl.ALIGNED` (per-line results of frames holding the same lines put side by side, not joined on line
numbers) changes nothing: every parse of the NCCL/PyTorch grammar, the mixed training-log path and the family
rows agree with the joins (`ALIGNED = False`, the code before), on the fixtures, the real logs and generated
input (with NCCL records, torchrun blocks, `Last error:` quotes, wraps)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import _mixed, nccl
from parsers import torch_distributed as td
from parsers.base import FileContext, lines_from_bytes
from tests.conftest import assert_same_result

FIX = Path(__file__).parent.parent / "fixtures"
REAL = Path("/work/shared/real-logs")
FILES = sorted(
    p
    for d in (FIX / "torch-distributed", FIX / "nccl", FIX / "step-log", REAL)
    if d.exists()
    for p in d.rglob("*")
    if p.is_file() and p.stat().st_size < 5_000_000
)


def _run(lines: pl.Series, ctx: FileContext) -> tuple[list, nccl.FamilyRows, tuple]:
    parses = [nccl.parse(lines, ctx), td.parse(lines, ctx), _mixed._both(lines, ctx)]
    return parses, nccl.family_rows(lines, ctx), _mixed._family(lines, ctx)


def _same(lines: pl.Series) -> None:
    ctx = FileContext(path="x/train.log", node="n", first_line=3)
    got = _run(lines, ctx)
    nccl.ALIGNED = False
    try:
        want = _run(lines, ctx)
    finally:
        nccl.ALIGNED = True
    for a, b in zip(got[0], want[0], strict=True):
        assert_same_result(a, b)
    for x, y in ((got[1], want[1]), (got[2][0], want[2][0])):
        assert x.understood.to_list() == y.understood.to_list()
        assert x.understood.name == y.understood.name
        assert (x.notes, x.hosts) == (y.notes, y.hosts)
        assert list(x.tables) == list(y.tables)
        for name in x.tables:
            assert x.tables[name].equals(y.tables[name], null_equal=True)
    assert got[2][1] == want[2][1]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_aligned_same_on_files(path: Path) -> None:
    _same(lines_from_bytes(path.read_bytes()))


PIECES = [
    "gpu-a:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P",
    "3: gpu-a:1:2 [0] NCCL WARN NET/IB : Got async event : port error " + "x" * 60,
    "continued text of a wrapped warning",
    "[rank0]:[E1206 12:00:00.123 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for 600001 milliseconds before timing out.",
    "Traceback (most recent call last):",
    '  File "/x/y.py", line 3, in f',
    "    foo()",
    "RuntimeError: NCCL error in: x.cpp:1, unhandled system error",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2024-01-01_00:00:00",
    "  exitcode  : -6 (pid: 123)",
    "Last error:",
    "socket closed",
    "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for workers. Result:",
    "  restart_count=0",
    "step 10 loss 2.0",
    "> quoted",
    "",
]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=30))
def test_aligned_same_on_generated(lines: list[str]) -> None:
    _same(pl.Series("t", lines, dtype=pl.String))
