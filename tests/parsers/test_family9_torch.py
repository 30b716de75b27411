"""`torch_distributed.torch_events` against its code before the family9 round (kept verbatim below): same
events and same understood lines, on the fixtures, the real logs and generated frames (with and without
NCCL-prefixed lines, whose presence decides whether the per-line result is joined back)."""
# ruff: noqa: E501  (the reference is kept as it was)

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import nccl
from parsers import torch_distributed as td
from parsers.base import FileContext, lines_from_bytes
from parsers.torch_distributed import (
    TORCH_LITERALS,
    _block_events,
    _frtrace_events,
    _line_events,
    arx,
    block_lines,
    torch_understood,
)

FIX = Path(__file__).parent.parent / "fixtures"
REAL = Path("/work/shared/real-logs")
FILES = sorted(
    p
    for d in (FIX / "torch-distributed", FIX / "nccl", FIX / "step-log", REAL)
    if d.exists()
    for p in d.rglob("*")
    if p.is_file() and p.stat().st_size < 5_000_000
)


def _torch_events_ref(frame: pl.DataFrame, ctx: FileContext) -> tuple[pl.DataFrame, pl.Series]:
    """Extract PyTorch-distributed events from a prepared frame (see `parsers.nccl.prepare`).

    Args:
        frame: columns line, text, body, env_rank, env_rank_source, env_host, pre_ts, cont (continuation
            lines are already joined into `body` of the line they continue).
        ctx: the file context.

    Returns:
        (events frame with the events table's columns, boolean Series: line understood by this grammar).
    """
    body = pl.col("body")
    # the source line Python prints under a `File "…", line N` frame is part of the traceback
    after_file = body.shift(1).fill_null("").str.contains(arx(r'^\s+File "')) & body.str.contains(
        arx(r"^\s{4,}\S")
    )
    # NCCL-prefixed lines (`_nccl`, set by parsers.nccl) are none of this grammar's: skip them early
    other = frame.filter(~pl.col("_nccl")) if "_nccl" in frame.columns else frame
    ok = other.select(
        "line", _ok=(torch_understood(body) | block_lines(other) | after_file).fill_null(False) | pl.col("cont")
    )
    understood = (
        frame.select("line").join(ok, on="line", how="left", maintain_order="left").get_column("_ok").fill_null(False)
    )
    year = ctx.year_hint or (ctx.collected_at.year if ctx.collected_at else None)
    cand = other.filter(
        # comments / annotations quoting log text are no events (one filter: the rows are gathered once)
        ~pl.col("cont")
        & ~body.str.starts_with("#")
        & body.str.contains_any(list(TORCH_LITERALS) + ["exitcode", "Sending process"])
    )
    parts = _line_events(cand, ctx, year) if cand.height else []  # (no candidate line: no rule can fire)

    events = [*parts, *_block_events(frame, ctx), *_frtrace_events(frame, ctx)]
    out = pl.concat(events, how="diagonal_relaxed") if events else pl.DataFrame()
    return out, understood



def _frame(lines: pl.Series, nccl_flags: bool) -> pl.DataFrame:
    ctx = FileContext(path="x/train.log", node="n")
    frame = nccl.prepare(lines, ctx).with_columns(cont=pl.lit(False))
    if nccl_flags:
        frame = frame.with_columns(_nccl=pl.col("body").str.contains(" NCCL ", literal=True).fill_null(False))
    return frame


def _same(frame: pl.DataFrame) -> None:
    ctx = FileContext(path="x/train.log", node="n")
    got_ev, got_ok = td.torch_events(frame, ctx)
    want_ev, want_ok = _torch_events_ref(frame, ctx)
    assert got_ok.name == want_ok.name and got_ok.dtype == want_ok.dtype
    assert got_ok.to_list() == want_ok.to_list()
    assert got_ev.schema == want_ev.schema
    assert got_ev.to_dicts() == want_ev.to_dicts()


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_torch_events_same_on_files(path: Path) -> None:
    lines = lines_from_bytes(path.read_bytes())
    for flags in (False, True):
        _same(_frame(lines, flags))


PIECES = [
    "[rank3]:[E1206 12:00:00.123 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600001 "
    "milliseconds before timing out.",
    "gpu-a:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P",
    "gpu-a:1:2 [0] NCCL WARN NET/IB : Got async event : port error",
    "Traceback (most recent call last):",
    '  File "/x/y.py", line 3, in f',
    "    foo()",
    "RuntimeError: NCCL error in: x.cpp:1, unhandled system error",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
    "exitcode  : -6 (pid: 123)",
    "",
    "step 10 loss 2.0",
    "3: [default0]: torch.distributed.DistBackendError: boom",
]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=30), st.booleans())
def test_torch_events_same_on_generated(lines: list[str], flags: bool) -> None:
    _same(_frame(pl.Series("t", lines, dtype=pl.String), flags))
