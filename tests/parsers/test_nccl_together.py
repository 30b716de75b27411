"""`nccl.family_many` reads a batch's NCCL and PyTorch logs by one run of the grammar (`nccl._read_together`)
and gives exactly what `nccl.parse_family` gives each file alone, or reads them alone.

Each case below holds a trap where one run over all the files would see across them: the same fact in two
files of one host, one NCCL version in each of two files, a bare version line opening a file after another
host's records, a root-cause block state left open at a file's end, each file's ring/tree count and hosts,
and the cases that must send the files to be read alone (one process in two files, COLL lines, an ncclras
report, a torchfrtrace report). Every case is compared against the files parsed alone, and the tests count
which runs were kept, so a guard that sends every batch to be read alone fails too.
"""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest

from parsers import nccl
from parsers import torch_distributed as td
from parsers.base import FileContext, lines_from_bytes
from tests.conftest import check_many, harness_blanked

FIX = Path(__file__).parent.parent / "fixtures"
FIXTURES = sorted(
    p
    for d in ("nccl", "torch-distributed")
    for p in (FIX / d).glob("*")
    if p.is_file() and not p.name.endswith((".jsonl", ".golden", ".json")) and "golden" not in p.name
)


def _ctx(i: int, node: str | None = None, first_line: int = 1) -> FileContext:
    return FileContext(path=f"n{i}/rank.log", node=node or f"node{i}", first_line=first_line, year_hint=2025)


def _items(*texts: str) -> list[tuple[pl.Series, FileContext]]:
    return [(lines_from_bytes(t.encode()), _ctx(i)) for i, t in enumerate(texts)]


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each `_read_together` run was kept (True) or its files sent to be read alone (False)."""
    got: list[bool] = []
    real = nccl._read_together

    def counted(items: list[tuple[pl.Series, FileContext]]) -> list | None:
        out = real(items)
        got.append(out is not None)
        return out

    monkeypatch.setattr(nccl, "_read_together", counted)
    return got


_FAMILY = SimpleNamespace(parse_many=nccl.family_many, parse=nccl.parse_family)
"""The family grammar's batch reading and its reading of one file, as `check_many` compares a parser's."""


def check(items: list[tuple[pl.Series, FileContext]]) -> list:
    """`family_many(items)` equals `parse_family` of each item; its results."""
    return check_many(_FAMILY, items)


def _rank(host: str, pid: int, rank: int, dev: int = 0, ver: str = "2.21.5") -> str:
    """An NCCL rank's INFO lines: its version (prefixed), an Init line, rings and a bootstrap line."""
    h = f"{host}:{pid}:{pid + 7} [{dev}] NCCL INFO"
    return "\n".join(
        [
            f"{h} NCCL version {ver}+cuda12.4",
            f"{h} Bootstrap : Using eth0:10.0.0.{rank + 1}<0>",
            f"{h} cudaDriverVersion 12040",
            f"{h} Channel 00/02 :    0   1",
            f"{h} Channel 01/02 :    0   1",
            f"{h} comm 0x55d0c0a0 rank {rank} nranks 2 cudaDev {dev} nvmlDev {dev} busId {18 + dev}000 "
            f"commId 0x6e3c1a2b3c4d5e6f - Init COMPLETE",
        ]
    )


def _warn(host: str, pid: int, dev: int = 0) -> str:
    return f"{host}:{pid}:{pid + 9} [{dev}] transport/net_ib.cc:1294 NCCL WARN NET/IB : Got completion from peer 10.0.0.9<42> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.0.1 remoteGids::ffff:10.0.0.9 hca mlx5_0"


_BLOCK_TAIL = """\
Root Cause (first observed failure):
[0]:
  time      : 2025-03-12_04:10:14
  host      : gpu-a.example.org
  rank      : 3 (local_rank: 3)
  exitcode  : -6 (pid: 88213)
"""
"""A ChildFailedError block cut after its root cause: no `====` closes it."""

_BLOCK_ENTRY = """\
[1]:
  time      : 2025-03-12_04:10:15
  host      : gpu-b.example.org
  rank      : 9 (local_rank: 1)
  exitcode  : 1 (pid: 4242)
"""
"""A failure entry opening a file: no `Root Cause` line before it in its file."""


def test_a_hang_bundles_rank_logs_are_read_in_one_run(tmp_path: Path, runs: list[bool]) -> None:
    """A simulated hang: every node's log holds NCCL records, the watchdog timeouts, the C++ abort and
    torchrun's failure block; read in one run, each file with its own node, hosts and ring count."""
    from forensics.simulate import FaultSpec
    from forensics.simulate.job import simulate

    simulate(tmp_path, nodes=4, gpus_per_node=8, hours=0.5, faults=[FaultSpec("ecc_dbe", node=1, start=0.2)], seed=3)
    logs = sorted(p for p in tmp_path.rglob("*") if p.is_file() and b"Watchdog caught" in p.read_bytes())
    assert len(logs) >= 3
    items = [(lines_from_bytes(p.read_bytes()), _ctx(i, p.name.split("_")[0])) for i, p in enumerate(logs)]
    got = check(items)
    assert runs == [True]
    assert {r.node for r in got} == {p.name.split("_")[0] for p in logs}
    assert all(any("ring/tree/channel" in n for n in r.notes) for r in got)
    ev = [r.tables["events"] for r in got]
    assert all((e.get_column("file") == ctx.path).all() for e, (_l, ctx) in zip(ev, items, strict=True))


def test_each_file_keeps_its_facts_version_count_and_hosts(runs: list[bool]) -> None:
    # two ranks of one host in two files (their facts are the same), a file of two hosts, another version
    a = _rank("gpu-a", 100, 0)
    b = _rank("gpu-a", 200, 1)
    c = _rank("gpu-b", 300, 2, ver="2.18.3") + "\n" + _rank("gpu-c", 301, 3, ver="2.18.3")
    got = check(_items(a, b, c))
    assert runs == [True]
    assert [r.node for r in got] == ["gpu-a", "gpu-a", None]
    assert [r.notes for r in got] == [["2 ring/tree/channel lines"]] * 2 + [["4 ring/tree/channel lines"]]
    inv = [r.tables["inventory"] for r in got]
    assert inv[0].height == inv[1].height > 0


def test_a_files_single_version_and_a_bare_version_line_stay_its_own(runs: list[bool]) -> None:
    """≤ 2.21 prints the version bare, without a head: its host is the record before it in the same file,
    and a process without a version line of its own takes its file's single version."""

    def bare(host: str, pid: int, ver: str) -> str:
        init = _rank(host, pid, 0).splitlines()[1:]
        return "\n".join([f"NCCL version {ver}+cuda12.2", *init])

    a, b = bare("gpu-a", 100, "2.18.3"), bare("gpu-b", 200, "2.19.4")
    got = check(_items(a, b))
    assert runs == [True]
    ranks = [r.tables["comms"].filter(pl.col("record") == "rank") for r in got]
    assert [x.get_column("nccl_version").to_list() for x in ranks] == [["2.18.3"], ["2.19.4"]]
    versions = got[1].tables["inventory"].filter(pl.col("attribute") == "nccl_version")
    assert versions.get_column("node").to_list() == ["node1"]  # (no record before it in its own file)


def test_a_failure_blocks_root_cause_state_ends_with_its_file(runs: list[bool]) -> None:
    a = _rank("gpu-a", 100, 0) + "\n" + _BLOCK_TAIL
    b = _BLOCK_ENTRY + _rank("gpu-b", 200, 1)
    got = check(_items(a, b))
    assert runs == [True]
    events = got[1].tables["events"]
    assert events.height
    # the entry of the second file is no root cause, as when it is read alone
    assert '"root_cause":true' not in "".join(events.get_column("detail").to_list())


def test_warnings_join_their_own_files_ranks(runs: list[bool]) -> None:
    a = _rank("gpu-a", 100, 0, dev=2) + "\n" + _warn("gpu-a", 100, dev=2)
    b = _rank("gpu-b", 100, 1, dev=2) + "\n" + _warn("gpu-b", 100, dev=2)  # (the same pid on another host)
    got = check(_items(a, b))
    assert runs == [True]
    ev = [r.tables["events"].filter(pl.col("kind") == "nccl_ib_error") for r in got]
    assert [e.get_column("rank").to_list() for e in ev] == [[0], [1]]


@pytest.mark.parametrize(
    "case",
    ["one process in two files", "a warning of another file's process", "coll", "ras", "frtrace"],
)
def test_what_cannot_be_kept_apart_is_read_alone(case: str, runs: list[bool]) -> None:
    a = _rank("gpu-a", 100, 0)
    b = _rank("gpu-b", 200, 1)
    if case == "one process in two files":  # (a log and its rotated copy)
        b = a
    elif case == "a warning of another file's process":
        b = b + "\n" + _warn("gpu-a", 100)
    elif case == "coll":
        b = b + "\ngpu-b:200:207 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x7f0 recvbuff 0x7f0 count 1 datatype 7 op 0 root 0 comm 0x55d0c0a0 [nranks=2] stream 0x5"
    elif case == "ras":
        b = (FIX / "nccl" / "nccl_ras_2.26.2_mismatch_allgather_counts.txt").read_text()
    else:
        b = (FIX / "torch-distributed" / "pytorch_flight_recorder_dump_v2.5_and_torchfrtrace_report.txt").read_text()
        b = "\n".join(x for x in b.splitlines() if not x.lstrip().startswith(("{", "}", '"')))
    check(_items(a, b))
    # (COLL lines keep a file out of the batch before any run: the other file is alone, no run at all)
    assert runs == ([] if case == "coll" else [False])


def test_fixtures_in_random_batches(runs: list[bool]) -> None:
    """Every NCCL and PyTorch fixture, in seeded random batches of 2-6 with repeats, chunks not starting at
    line 1, launcher prefixes and files cut short; some runs are kept."""
    rng = random.Random(7)
    texts = [harness_blanked(p.read_bytes()) for p in FIXTURES]
    for _ in range(12):
        items = []
        for i in range(rng.randint(2, 6)):
            lines = rng.choice(texts)
            if rng.random() < 0.3:
                lines = lines.slice(0, rng.randint(1, max(1, len(lines))))
            if rng.random() < 0.3:
                lines = pl.select(pl.lit(f"{i}: ") + lines).to_series()
            items.append((lines, _ctx(i, first_line=rng.choice([1, 1, 40]))))
        check(items)
    assert any(runs) and not all(runs)


def test_torch_distributed_parse_many_is_parse() -> None:
    items = [(harness_blanked(p.read_bytes()), _ctx(i)) for i, p in enumerate(FIXTURES)]
    items += [(lines_from_bytes(_BLOCK_ENTRY.encode()), _ctx(99))]
    check_many(td, items)


def test_off_switch_reads_file_by_file(monkeypatch: pytest.MonkeyPatch, runs: list[bool]) -> None:
    monkeypatch.setattr(nccl, "TOGETHER", False)
    check(_items(_rank("gpu-a", 100, 0), _rank("gpu-b", 200, 1)))
    assert runs == []


def test_the_small_path_skips_the_files_it_would_refuse() -> None:
    """`_nccl_small._others` (one query over a batch) names files with a line neither blank nor an NCCL record:
    `records` refuses each of them, and it names no file of plain INFO records."""
    from parsers import _nccl_small

    items = [(harness_blanked(p.read_bytes()), _ctx(i)) for i, p in enumerate(FIXTURES)]
    items += _items(_rank("gpu-a", 100, 0), "\n \t\n" + _rank("gpu-b", 200, 1) + "\n\n", _BLOCK_ENTRY)
    others = _nccl_small._others(items)
    assert len(items) - 1 in others and not {len(items) - 3, len(items) - 2} & others
    assert len(others) >= len(FIXTURES) // 2
    for i in others:
        assert _nccl_small.records(items[i][0], 1, {}) is None, i
