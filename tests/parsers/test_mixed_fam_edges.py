"""`_mixed._family` (the candidate lines and what is read with them) equals `nccl.family_rows` over every
line on random step logs built around the edges of what is read with the candidates: wrapped records as
long as `WRAP_REACH` or longer, torchrun blocks near `BLOCK_REACH` lines, `Last error:` quotes and
tracebacks on the last line, NCCL lines inside tracebacks."""

from __future__ import annotations

import random

import polars as pl
import pytest

from parsers import _mixed
from parsers.base import FileContext
from tests.conftest import assert_family_as_whole

WATCHDOG = (
    "[rank3]:[E1129 10:30:12.984683378 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=8, OpType=ALLREDUCE, NumelIn=3150848, NumelOut=3150848, "
    "Timeout(ms)=600000) ran for 600000 milliseconds before timing out."
)
IB_WARN = (
    "node-001:5776:5902 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion from peer "
    "10.2.0.5<33092> with error 12, opcode 0, len 0, vendor err 129 (Recv)"
)


def step(i: int) -> str:
    return (
        f" [2026-11-29 10:{i // 60 % 60:02d}:{i % 60:02d}] iteration {i:>8}/  100000 | consumed samples: "
        f"{i * 512:>10} | elapsed time per iteration (ms): 1500.0 | learning rate: 1.000000E-04 | global "
        "batch size:   512 | lm loss: 2.345678E+00 | loss scale: 1.0 | grad norm: 0.812 |"
    )

LONG = "x" * 30 + " the rest of a hard-wrapped NCCL warning message, which goes on and on past eighty chars"


def _wrapped(rng: random.Random) -> list[str]:
    n = rng.choice([1, 2, _mixed.WRAP_REACH - 1, _mixed.WRAP_REACH, _mixed.WRAP_REACH + 1, 20])
    tail = [LONG[: rng.choice([79, 80, 81, 90])] for _ in range(n)]
    return [rng.choice([IB_WARN, WATCHDOG]), *tail]


def _block(rng: random.Random) -> list[str]:
    n = rng.choice([1, 5, _mixed.BLOCK_REACH - 1, _mixed.BLOCK_REACH, _mixed.BLOCK_REACH + 2])
    head = (
        "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for workers. Result:"
    )
    return [head, *(f"  key_{chr(97 + i % 26)}{chr(97 + i // 26)}=value{i}" for i in range(n))]


def _quote(rng: random.Random) -> list[str]:
    return [
        "[rank0]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/X.hpp:3",
        "[rank0]: Last error:",
        *(["[rank0]: NET/IB : Got completion from peer 10.0.0.12 with status=12"] * (rng.random() < 0.7)),
    ]


def _traceback(rng: random.Random) -> list[str]:
    out = ["[rank1]: Traceback (most recent call last):"]
    for i in range(rng.randint(1, 3)):
        out.append(f'[rank1]:   File "/opt/train.py", line {10 + i}, in main')
        out += ["node-001:5776:5902 [0] NCCL INFO comm 0x1 rank 0 nranks 2"] * rng.randint(0, 2)
        if rng.random() < 0.8:
            out.append("[rank1]:     loss.backward()")
    return out


PIECES = (_wrapped, _block, _quote, _traceback)


@pytest.mark.parametrize("seed", range(24))
def test_family_pass_equals_the_whole_chunk_at_the_edges(seed: int) -> None:
    rng = random.Random(seed)
    body: list[str] = []
    for i in range(rng.randint(1, 5)):
        body += [step(100 * i + j) for j in range(rng.randint(0, 80))]
        body += rng.choice(PIECES)(rng)
    if rng.random() < 0.5:
        body += [step(900 + j) for j in range(rng.randint(1, 40))]
    lines = pl.Series("line", body, dtype=pl.String)
    ctx = FileContext(path="train.log", node="node-001", first_line=1 + seed, year_hint=2025)
    assert_family_as_whole(lines, ctx)


CHANNEL = "node-001:5776:5902 [{g}] NCCL INFO Channel {c:02d}/0 : {g} -> {h} via P2P/IPC/read"


@pytest.mark.parametrize("seed", range(16))
def test_family_pass_on_mostly_family_lines_in_runs(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Family lines over `SUBSET_SHARE` of the chunk, in runs between runs of step lines (with a blank line
    for each run of others, under `SUBSET_ROWS`): the grammar reads the candidates, not every line (unless a
    piece read across lines asks for the whole), with the result of the whole."""
    rng = random.Random(100 + seed)
    body: list[str] = []
    pieces = 0
    for i in range(rng.randint(3, 8)):
        body += [CHANNEL.format(g=k % 8, c=k // 8, h=(k + 1) % 8) for k in range(rng.randint(40, 70))]
        if seed % 2 and rng.random() < 0.6:
            body += rng.choice(PIECES)(rng)
            pieces += 1
        body += [step(100 * i + j) for j in range(rng.randint(10, 25))]
    lines = pl.Series("line", body, dtype=pl.String)
    ctx = FileContext(path="train.log", node="node-001", first_line=1 + seed, year_hint=2025)
    share = sum(" NCCL " in x for x in body) / len(body)
    assert share > _mixed.SUBSET_SHARE
    read_whole: list[int] = []
    whole = _mixed._whole
    monkeypatch.setattr(_mixed, "_whole", lambda *a: read_whole.append(1) or whole(*a))
    _mixed._family(lines, ctx)
    monkeypatch.undo()
    if not pieces:
        assert not read_whole
    assert_family_as_whole(lines, ctx)
