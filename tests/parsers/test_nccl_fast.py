"""The NCCL parser's fast lane and shortcuts change nothing: every result equals the full path's.

`nccl.FAST_LANE = False` sends every line through the full path (`prepare`, line-start grammars, per-line COLL
fields); the fast lane reads plain NCCL records from their distinct line starts and aggregates strict COLL
lines per head. Both must give the same tables, line accounting, notes and node on fixtures, generated logs
and random mixes of awkward lines. `_torch_may_hold` (skip `torch_events`) must only skip when torch_events
has nothing to give.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import _nccl_small, nccl
from parsers import torch_distributed as td
from parsers.base import HARNESS_LINE, FileContext, ParseResult, check_accounting, lines_from_bytes
from tests.conftest import assert_same_result

FIX = Path(__file__).parent.parent / "fixtures"
FILES = sorted(
    p
    for d in ("nccl", "torch-distributed", "nccl-tests", "step-log")
    for p in (FIX / d).glob("*")
    if p.is_file() and not p.name.endswith((".jsonl", ".golden", ".json")) and "golden" not in p.name
)


def both(lines: pl.Series, first_line: int = 1, parse=nccl.parse) -> tuple[ParseResult, ParseResult]:
    ctx = FileContext(path="x.log", node="node-x", first_line=first_line, year_hint=2025)
    old = nccl.FAST_LANE
    try:
        nccl.FAST_LANE = True
        fast = parse(lines, ctx)
        nccl.FAST_LANE = False
        full = parse(lines, ctx)
    finally:
        nccl.FAST_LANE = old
    return fast, full


def same_understood(lines: pl.Series, first_line: int = 1) -> None:
    """`family_rows` (also read by parsers._mixed) marks the same lines as understood either way."""
    ctx = FileContext(path="x.log", node="node-x", first_line=first_line, year_hint=2025)
    old = nccl.FAST_LANE
    try:
        nccl.FAST_LANE = True
        fast = nccl.family_rows(lines, ctx)
        nccl.FAST_LANE = False
        full = nccl.family_rows(lines, ctx)
    finally:
        nccl.FAST_LANE = old
    assert fast.understood.to_list() == full.understood.to_list()
    assert (fast.notes, fast.hosts) == (full.notes, full.hosts)


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fast_lane_same_as_full_path_on_fixtures(path: Path) -> None:
    lines = lines_from_bytes(path.read_bytes())
    lines = pl.select(pl.when(lines.str.contains(HARNESS_LINE)).then(pl.lit("")).otherwise(lines)).to_series()
    for parse in (nccl.parse, td.parse):
        fast, full = both(lines, first_line=7, parse=parse)
        assert_same_result(fast, full)
        assert check_accounting(fast, lines)
    same_understood(lines, first_line=7)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5])
def test_fast_lane_same_as_full_path_on_generated_log(tmp_path: Path, seed: int) -> None:
    from bench import big_nccl

    out = tmp_path / "big.log"
    big_nccl.write(out, 0.8, seed)
    lines = lines_from_bytes(out.read_bytes())
    fast, full = both(lines)
    assert_same_result(fast, full)
    assert any(n.endswith("rows") for n in fast.notes) == (seed % 2 == 0)  # COLL aggregates on even seeds


def test_generator_is_deterministic_and_sized(tmp_path: Path) -> None:
    from bench import big_nccl

    a, b = tmp_path / "a.log", tmp_path / "b.log"
    big_nccl.write(a, 0.3, 3)
    big_nccl.write(b, 0.3, 3)
    assert a.read_bytes() == b.read_bytes()
    assert 0.25e6 < a.stat().st_size <= 0.3e6
    assert a.read_bytes().endswith(b"\n")


# ----------------------------------------------------------------------------- random mixes of awkward lines

HEADS = [
    "gpu-a01:2101:2101 [0]",
    "gpu-a01.cluster.local:2101:2188 [1]",
    "10.1.2.3:77:78 [3]",
    "collective:1:2 [0]",
    "Communicators...:1:2 [0]",
    "2024-05-06T07:08:09:10 [0]",
    "h:1:2 [0] 12.345 transport/net_ib.cc:1295 (ncclIbTest)",
    "h:1:2 [0] misc/socket.cc:49",
    "hé:1:2 [0]",
    "h\u0661:1:2 [0]",
]
ENVELOPES = [
    "",
    "",
    " 3: ",
    "12: ",
    "\t7: ",
    "[1,5]<stdout>:",
    "[1,5]<stderr>: ",
    "[1,5]<stdout>:\t",
    "[default0]:",
    "[rank3]:",
    "node7: ",
    "2024-05-06T07:08:09.123Z ",
    "> ",
    "99999999999: ",
    "3: [default1]:",
]
LEVELS = ["INFO", "INFO", "INFO", "WARN", "TRACE", "ERROR", "ABORT", "INFOx", "info"]
COLL = [
    "AllReduce: opCount {o} sendbuff 0x7f00 recvbuff 0x7f10 count {c} datatype 7 op 0 root 0 comm {m} [nranks=2] stream 0x55",
    "Send: opCount {o} sendbuff 0x7f00 recvbuff (nil) count {c} datatype 9 op 0 root {r} comm {m} [nranks=4] stream 0x55",
    "Recv: opCount {o} sendbuff (nil) recvbuff 0x7f10 count {c} datatype 9 op 0 root {r} comm {m} [nranks=4]",
    "AllGather: opCount {o} sendbuff 0x7f00 recvbuff 0x7f10 count {c} datatype 7 op 0 root 0 comm {m} [nranks=2] stream 0x55 task 3",
    "Broadcast: opCount {o} sendbuff comm recvbuff 0x1 count {c} datatype 7 op 0 root 0 comm {m} [nranks=2] stream 0x55",
    "Reduce: opCount {o} sendbuff 0x1 recvbuff 0x2 count 12x datatype 77777777777777777777 op 0 root 0 comm {m} [nranks=x2]",
    "Channel: opCount {o} sendbuff 0x1 recvbuff 0x2 count {c} datatype 7 op 0 root 0 comm {m} [nranks=2] stream 0x55",
    "AllReduce: opCount {o} sendbuff 0x1 recvbuff 0x2 count {c} datatype 7 op 0 root 0 comm {m} [nranks=2] - Init COMPLETE",
    "AllReduce: opCount zz sendbuff 0x1 recvbuff 0x2 count {c} datatype 7 op 0 root 0 comm {m} [nranks=2] stream 0x5",
    # the fast lane cuts at the first `: opCount ` and ` count `: odd ops, middles and tails (with non-ASCII
    # text where byte offsets and character slices part), some sharing a good line's head and tail
    *(
        head + tail.replace("{t2}", " count {c} datatype 7 op 0 root 0 comm {m} [nranks=2]")
        for head, tail in (
            ("AllReduce: opCount zz sendbuff 0x7f00 recvbuff 0x7f10", "{t2} stream 0x55"),
            ("AllRéduce: opCount {o} sendbuff 0x7f00 recvbuff 0x7f10", "{t2} stream 0x55"),
            ("AllReduce: opCount {o} sendbuff 0x7fé0 recvbuff 0x7f10", "{t2} stream 0x55"),
            ("AllReduce: opCount {o} sendbuff 0x7f00 recvbuff 0x7f10", "{t2} stream 0xé5"),
            ("AllReduce: opCount count sendbuff 0x1 recvbuff 0x2", "{t2} stream 0x55"),
            ("Send: opCount {o} sendbuff 0x1 recvbuff 0x2", "{t2}:"),
            ("Recv: opCount {o} sendbuff 0x1 recvbuff 0x2", "{t2}: opCount 1"),
            ("x AllReduce: opCount {o} sendbuff 0x7f00 recvbuff 0x7f10", "{t2}"),
            (": opCount {o} sendbuff 0x7f00 recvbuff 0x7f10", "{t2} stream 0x55"),
            ("AllReduce : opCount {o} sendbuff 0x7f00 recvbuff 0x7f10", "{t2}"),
            ("AllReduce: opCount {o} sendbuff 0x7f00 recvbuff 0x7f10 ", "{t2}"),
            ("é: opCount {o} sendbuff 0x7f00 recvbuff 0x7f10", "{t2} stream 0x55"),
        )
    ),
]
MESSAGES = [
    "NCCL version 2.21.5+cuda12.4",
    "cudaDriverVersion 12040",
    "NCCL_IB_HCA set by environment to mlx5_0",
    "Bootstrap : Using bond0:10.0.0.5<0>",
    "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB bond0:10.0.0.5<0>",
    "NET/Socket : Using [0]eth0:10.0.0.9<0>",
    "Using network IB",
    "NET/OFI Selected Provider is tcp (found 1 nics)",
    "comm 0x5501 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 2a000 commId 0xabc - Init START",
    "ncclCommInitRank comm 0x5501 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 2a000 commId 0xabc - Init COMPLETE",
    "comm 0x5501 rank 1 nRanks 4 nNodes 2 localRanks 2 localRank 1 MNNVL 0",
    "Channel 00/02 :    0   1   2   3",
    "Channel 01/0 : 1[1] -> 3[1] [send] via NET/IB/1/GDRDMA",
    "Trees [0] 2/-1/-1->1->0 [1] -1/-1/-1->1->0",
    "Connected all rings",
    "NET/IB: Got completion from peer 10.0.0.6<4242> with status=12 opcode=129 len=0 vendor err 129 (Recv) "
    "localGid ::ffff:10.0.0.5 remoteGids::ffff:10.0.0.6 hca mlx5_0",
    "Call to ibv_modify_qp failed with error Network is unreachable",
    "transport/net.cc:1362 -> 6",
    "Rendezvous complete for workers. Result:",
    "Last error:",
    "see [link](http://example.com/x) here",
    "",
]
OTHER = [
    "",
    "   ",
    "NCCL version 2.18.5+cuda12.2",
    "Last error:",
    "NET/IB : Got completion from peer 10.0.0.6<4242> with error 12, opcode 0, len 0, vendor err 129",
    "continued text of a wrapped warning line that goes on",
    "x" * 90,
    "[rank3]:[E0506 07:08:09.123456 42 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for 600023 "
    "milliseconds before timing out.",
    "Traceback (most recent call last):",
    '  File "train.py", line 3, in <module>',
    "    main()",
    "RuntimeError: NCCL error in: ../x.cpp:1, unhandled system error, NCCL version 2.21.5",
    "INFO: Function: ofi_init Line: 1076: NET/OFI Selected provider is efa",
    "WARN: Function: ofi_init Line: 1076: NET/OFI failed",
    "Communicators... (0.00s)",
    "#0-0 (fa93daea854b060b) DEAD",
    "  Rank 3 -- GPU 1 managed by process 42 on node 10.0.0.7",
    "Rendezvous complete for workers. Result:",
    "  restart_count=0",
    "  master_addr=10.0.0.1",
    "Not all ranks joining collective 7 at entry 3",
    "collective: allreduce",
    "some unrelated output",
]


@st.composite
def nccl_lines(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.sampled_from(OTHER))
    env = draw(st.sampled_from(ENVELOPES))
    head = draw(st.sampled_from(HEADS))
    level = draw(st.sampled_from(LEVELS))
    if kind <= 4:
        tmpl = draw(st.sampled_from(COLL))
        msg = tmpl.format(
            o=draw(st.sampled_from(["0", "1a", "ff", "7fffffffffffffffff"])),
            c=draw(st.sampled_from(["1", "1048576", "99999999999999999999"])),
            m=draw(st.sampled_from(["0x5501", "0x5502", "0xabc"])),
            r=draw(st.sampled_from(["0", "1", "-1"])),
        )
    else:
        msg = draw(st.sampled_from(MESSAGES))
    sep = draw(st.sampled_from([" ", " ", "  ", ""]))
    line = f"{env}{head} NCCL {level}{sep}{msg}"
    if draw(st.integers(0, 30)) == 0:
        i = draw(st.integers(0, len(line)))
        line = line[:i] + draw(st.sampled_from(["é", "\t", " ", " NCCL ", "]", ":"])) + line[i:]
    return line


@settings(max_examples=50, deadline=None)
@given(st.lists(nccl_lines(), min_size=1, max_size=40), st.integers(1, 3))
def test_fast_lane_same_as_full_path_on_random_mixes(lines: list[str], first_line: int) -> None:
    series = pl.Series("line", lines, dtype=pl.String)
    fast, full = both(series, first_line=first_line)
    assert_same_result(fast, full)
    assert check_accounting(fast, series)
    same_understood(series, first_line=first_line)


def test_fast_lane_same_as_full_path_on_a_big_random_mix() -> None:
    """Over `nccl._SMALL` lines the lane's literal pass is a regex (links, whole-file check literals)."""
    rnd = random.Random(11)
    lines = []
    for _ in range(nccl._SMALL + 300):
        if rnd.random() < 0.1:
            lines.append(rnd.choice(OTHER))
            continue
        coll = rnd.choice(COLL).format(o="1f", c="8", m="0x55", r="1")
        msg = rnd.choice(MESSAGES) if rnd.random() < 0.5 else coll
        lines.append(f"{rnd.choice(ENVELOPES[:8])}{rnd.choice(HEADS)} NCCL {rnd.choice(LEVELS)} {msg}")
    series = pl.Series("line", lines, dtype=pl.String)
    fast, full = both(series)
    assert_same_result(fast, full)
    assert check_accounting(fast, series)


def test_fast_lane_takes_plain_records_only() -> None:
    lines = pl.Series(
        [
            " 3: gpu-a01:2101:2101 [0] NCCL INFO Bootstrap : Using bond0:10.0.0.5<0>",
            "[1,5]<stdout>:gpu-a01:2101:2188 [1] NCCL INFO Channel 00/0 : 1[1] -> 3[1] [send] via NET/IB/1/GDRDMA",
            "gpu-a01:2101:2101 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 "
            "root 0 comm 0x55 [nranks=2] stream 0x3",
            "[rank3]:gpu-a01:2101:2101 [0] NCCL INFO x",  # c10 envelope: full path
            "2024-05-06T07:08:09:10 [0] NCCL INFO x",  # a collector timestamp would be stripped: full path
            "collective:1:2 [0] NCCL INFO x",  # torchfrtrace key: full path
            "h:1:2 [0] NCCL INFO see [a](http://b) c",  # markdown link: full path
        ]
    )
    lane = nccl._fast_lane(
        nccl.numbered(lines, FileContext(path="x", node="n")), FileContext(path="x", node="n")
    )
    assert lane.mask.to_list() == [True, True, True, False, False, False, False]
    assert lane.coll.height == 1 and lane.rest.height == 2


# ----------------------------------------------------------------------------- torch_events shortcut


def test_torch_shortcut_only_skips_when_torch_events_gives_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    real = nccl._torch_may_hold
    skipped = []

    def checked(frame: pl.DataFrame, blocks: bool) -> bool:
        got = real(frame, blocks)
        if not got and frame.height:
            ev, ok = td.torch_events(frame, FileContext(path="x", node="n", year_hint=2025))
            assert ev.height == 0
            assert not ok.fill_null(False).any()
            skipped.append(frame.height)
        return got

    monkeypatch.setattr(nccl, "_torch_may_hold", checked)
    rnd = random.Random(5)
    pool = OTHER + [f"h:1:2 [0] NCCL INFO {m}" for m in MESSAGES]
    for path in FILES:
        lines = lines_from_bytes(path.read_bytes())
        nccl.parse(lines, FileContext(path="x", node="n", year_hint=2025))
    for _ in range(60):
        lines = pl.Series([rnd.choice(pool) for _ in range(rnd.randint(1, 12))], dtype=pl.String)
        nccl.parse(lines, FileContext(path="x", node="n", year_hint=2025))
    assert skipped  # the shortcut was exercised


def test_strict_coll_head_and_tail_make_the_whole_pattern() -> None:
    head = nccl._COLL_HEAD.replace("[A-Za-z]+", "(?P<op>[A-Za-z]+)", 1).removesuffix("$")
    assert nccl._COLL_FAST == head + " " + nccl._COLL_TAIL.removeprefix("^")
    # the lane checks the op (letters) and the middle after `: opCount ` apart
    assert nccl._COLL_HEAD == "^[A-Za-z]+: opCount " + nccl._COLL_MID.removeprefix("^")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(nccl_lines(), st.sampled_from(OTHER), st.text(max_size=30)), min_size=1, max_size=8)
)
def test_envelope_shortcut_is_what_envelope_struct_gives(lines: list[str]) -> None:
    """`_prepare_frame` skips `envelope_struct` when no line holds a literal `_ANY_ENVELOPE` needs: it must
    then strip nothing and name nothing."""
    from parsers._common import _ANY_ENVELOPE, envelope_struct

    col = pl.Series("t", lines, dtype=pl.String)
    if nccl._may(col, _ANY_ENVELOPE):
        return
    got = pl.select(e=envelope_struct(pl.lit(col))).unnest("e")
    assert got.get_column("rest").to_list() == lines
    assert all(got.get_column(c).null_count() == len(lines) for c in ("rank", "rank_source", "host", "pid"))


# ----------------------------------------------------------------------------- the small-chunk Python path


def small_and_vectorised(lines: pl.Series, first_line: int = 1) -> tuple[ParseResult | None, ParseResult]:
    """(`parsers._nccl_small.parse`, `nccl.parse` without it) of the same lines."""
    ctx = FileContext(path="x.log", node="node-x", first_line=first_line, year_hint=2025)
    old = nccl.SMALL_PATH
    try:
        nccl.SMALL_PATH = False
        vec = nccl.parse(lines, ctx)
    finally:
        nccl.SMALL_PATH = old
    return _nccl_small.parse(lines, ctx), vec


def info_records(path: Path) -> list[str]:
    """The plain INFO/TRACE records (and blank lines) of a file: what the small path reads."""
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n").split("\n"):
        at = line.find(" NCCL ")
        m = re.match(nccl._FAST_HEAD, line[: at + nccl._FAST_KEY_CHARS]) if at >= 0 else None
        if (m and m.group("level") in ("INFO", "TRACE")) or not line.strip():
            out.append(line)
    return out


def test_small_path_same_as_vectorised_on_fixture_records() -> None:
    taken = 0
    for path in FILES:
        lines = pl.Series("line", info_records(path), dtype=pl.String)
        if len(lines) == 0:
            continue
        small, vec = small_and_vectorised(lines, first_line=3)
        if small is not None:
            taken += 1
            assert_same_result(small, vec)
    assert taken >= 15


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5])
def test_small_path_same_as_vectorised_on_generated_slices(tmp_path: Path, seed: int) -> None:
    from bench import big_nccl

    out = tmp_path / "big.log"
    big_nccl.write(out, 0.3, seed)
    lines = lines_from_bytes(out.read_bytes())
    rng = random.Random(seed)
    taken = 0
    for _ in range(4):
        k = rng.choice([40, 300, 2000])
        part = lines.slice(rng.randrange(len(lines) - k), k)
        small, vec = small_and_vectorised(part, first_line=rng.choice([1, 1001]))
        if small is not None:
            taken += 1
            assert_same_result(small, vec)
    assert taken or seed % 2 == 0  # (COLL lines, on even seeds, take the vectorised path)


def test_small_path_leaves_other_chunks_alone() -> None:
    ctx = FileContext(path="x.log", node="node-x")
    info = "h1:1:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>"
    for extra in (
        "h1:1:2 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with error 12",
        "some other line",
        "h1:1:2 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x2 count 4 datatype 7 op 0 root 0 "
        "comm 0x5 [nranks=2]",
        "hé:1:2 [0] NCCL INFO Using network IB",
    ):
        assert _nccl_small.parse(pl.Series("line", [info, extra]), ctx) is None
    assert _nccl_small.parse(pl.Series("line", [info, "", "  "]), ctx) is not None


def test_wrap_joined_onto_an_aggregated_coll_line_reads_the_chunk_without_the_lane(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`_drop_fast` refuses to take back a strict COLL line (the lane aggregated it); the chunk is then read
    as the full path reads it. (No wrap can be joined onto one: forced here.)"""
    coll = (
        "h:1:2 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 root 0 "
        "comm 0x55 [nranks=2] stream 0x3"
    )
    warn = "h:1:2 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer gpu<4188>"
    tail = "and the rest of the warning that was wrapped here"
    lines = pl.Series("line", [coll, warn, tail, coll], dtype=pl.String)
    ctx = FileContext(path="x", node="n")
    lane = nccl._fast_lane(nccl.numbered(lines, ctx), ctx)
    assert lane.coll.height == 1
    with pytest.raises(nccl._CollJoinedError):
        nccl._drop_fast(lane, pl.Series("line", [1], dtype=pl.Int64), pl.Series("line", [1, 2, 3, 4]))
    real = nccl._drop_fast
    refused = []

    def refuse(fast: nccl.FastLane, joined: pl.Series, numbers: pl.Series) -> nccl.FastLane:
        real(fast, joined, numbers)  # the WARN line alone: taken back
        refused.append(joined.to_list())
        raise nccl._CollJoinedError

    monkeypatch.setattr(nccl, "_drop_fast", refuse)
    fast, full = both(lines)
    assert refused == [[2]]
    assert_same_result(fast, full)
