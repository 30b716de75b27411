"""`nccl._nccl_rows` returns early when nothing it reads is there (no NCCL record, no ncclras report, no bare
version or aws-ofi-nccl line), and skips `split_nccl_lines` when no ` NCCL ` line has a level word after it:
the same result as its whole body (forced by making `_headless` say yes and `_LEVEL_AFTER` hold in every
` NCCL ` line), on the fixtures, the real logs, mixed training logs and generated lines."""

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


def _parses(lines: pl.Series, ctx: FileContext) -> list:
    return [nccl.parse(lines, ctx), td.parse(lines, ctx), _mixed._both(lines, ctx)]


def _same(lines: pl.Series) -> None:
    ctx = FileContext(path="x/train.log", node="n", first_line=7)
    got = _parses(lines, ctx)
    saved = nccl._headless, nccl._LEVEL_AFTER
    try:
        # the whole body of `_nccl_rows`, always, and `split_nccl_lines` on every ` NCCL ` line
        nccl._headless, nccl._LEVEL_AFTER = (lambda slow: True), [" NCCL "]
        want = _parses(lines, ctx)
    finally:
        nccl._headless, nccl._LEVEL_AFTER = saved
    for a, b in zip(got, want, strict=True):
        assert_same_result(a, b)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_early_return_same_on_files(path: Path) -> None:
    _same(lines_from_bytes(path.read_bytes()))


PIECES = [
    "gpu-a:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P",
    "3: gpu-a:1:2 [0] NCCL WARN NET/IB : Got async event : port error",
    "NCCL version 2.18.1+cuda12.1",
    "  NCCL version 2.18.1+cuda12.1",
    "INFO: Function: ofi_init Line: 1: NET/OFI Selected Provider is efa",
    "WARN: Function: ofi_init Line: 1: NET/OFI boom",
    "[rank0]:[E1206 12:00:00.123 ProcessGroupNCCL.cpp:607] Timeout at NCCL work: 5",
    "x NCCL work then gpu-a:1:2 [0] NCCL INFO late level",
    "gpu-a:1:2 [0] NCCL INFOx",
    "gpu-a:1:2 [0] NCCL ERROR boom",
    "host NCCL ABORT",
    "Traceback (most recent call last):",
    "RuntimeError: NCCL error in: x.cpp:1, unhandled system error",
    "step 10 loss 2.0",
    "iteration 5 | loss 1.0",
    "",
    "Communicators...",
    "Job summary",
]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=25))
def test_early_return_same_on_generated(lines: list[str]) -> None:
    _same(pl.Series("t", lines, dtype=pl.String))


def test_early_return_taken() -> None:
    calls = []
    saved = nccl._nccl_rows

    def spy(slow, fast, ctx, ras=True):  # noqa: ANN001, ANN202
        out = saved(slow, fast, ctx, ras)
        calls.append(({k: len(v) for k, v in out[0].items()}, out[1], out[2], len(out[3])))
        return out

    lines = pl.Series("t", ["step 1 loss 2.0", "Traceback (most recent call last):", "ValueError: x"] * 3)
    nccl._nccl_rows = spy
    try:
        nccl.family_rows(lines, FileContext(path="x/train.log", node="n"))
    finally:
        nccl._nccl_rows = saved
    assert calls == [({"events": 0, "comms": 0, "inventory": 0}, [], [], 0)]
    frame = nccl.prepare(lines, FileContext(path="x", node="n")).with_columns(cont=pl.lit(False))
    assert not nccl._headless(frame)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=" NCLIFOWARTEBxa:[]0", max_size=30), min_size=1, max_size=8))
def test_split_keeps_no_line_without_level_literal(bodies: list[str]) -> None:
    df = pl.DataFrame({"line": list(range(len(bodies))), "body": bodies})
    df = df.filter(pl.col("body").str.contains(" NCCL ", literal=True))
    if df.height and not df.select(pl.col("body").str.contains_any(nccl._LEVEL_AFTER).any()).item():
        assert nccl.split_nccl_lines(df).height == 0
