# ruff: noqa: E501  (generated log lines are kept whole)
"""`parsers._nccl_merge.merge_chunks`: an NCCL log (or a training log with NCCL lines) parsed in pieces, the
pieces' tables concatenated and merged, gives the tables of the whole-file parse.

Each file is parsed whole and in pieces cut at line starts (`_mixed.parse` on each piece with its
`first_line`, tables conformed as the ingest does); the merged tables are compared with the whole parse's,
sorted. Inputs: a generated log built to exercise the state the grammar keeps across a file (COLL aggregates
of one communicator in many pieces, sub-communicators' Init lines far from the world communicator's, a
comm pointer reused under another commId, WARNs of a process whose largest communicators give it two ranks
(the launcher's rank then), START/COMPLETE/topology lines in different pieces, strict and loose COLL lines,
launcher prefixes or none), cut at every k lines and at random points (hypothesis); and every NCCL fixture
cut into pieces of 1, 2, 3 and 5 lines. Where a record spans lines (hard-wrapped WARNs, `Last error:`
quotes, ncclras reports, torchrun blocks), a cut inside it changes the parse itself, which no merge can
undo: the fixtures' events are compared on the NCCL WARN rows both parses give (their rank and bus id).
The node of a bare `NCCL version` line that opens a piece (the host of the NCCL record before it, in the
previous piece) is not made whole: those inventory rows are compared without their node.
"""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.schema import conform
from parsers import _mixed, nccl, step_log
from parsers._nccl_merge import merge_chunks, shift_detail_lines
from parsers.base import FileContext
from tests.conftest import harness_blanked

FIX = Path(__file__).parent.parent / "fixtures" / "nccl"
FIXTURES = sorted(p for p in FIX.glob("*") if p.is_file() and not p.name.endswith((".jsonl", ".golden", ".json")))
TABLES = ("events", "comms", "inventory")
PATH = "n1/nccl-debug.log"


def _tables(result: object) -> dict[str, pl.DataFrame]:
    return {t: conform(df, t) for t, df in result.tables.items() if t in TABLES}  # type: ignore[attr-defined]


def _parse(parser: object, lines: pl.Series, first: int = 1) -> dict[str, pl.DataFrame]:
    return _tables(_mixed.parse(parser, lines, FileContext(path=PATH, node="n1", first_line=first)))  # type: ignore[arg-type]


def pieces(parser: object, lines: pl.Series, cuts: list[int]) -> dict[str, pl.DataFrame]:
    """The tables of `lines` parsed in pieces cut before the (0-based) line indexes `cuts`, concatenated in
    piece order."""
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(lines)}), len(lines)]
    got: dict[str, list[pl.DataFrame]] = {}
    for a, b in zip(bounds, bounds[1:], strict=False):
        for t, df in _parse(parser, lines.slice(a, b - a), a + 1).items():
            got.setdefault(t, []).append(df)
    return {t: pl.concat(dfs, how="vertical") for t, dfs in got.items()}


def _sorted(df: pl.DataFrame | None) -> pl.DataFrame | None:
    return None if df is None or df.height == 0 else df.sort(df.columns, nulls_last=True)


def _bare_version_lines(lines: pl.Series) -> set[int]:
    """Numbers of the lines holding `NCCL version` without an NCCL `host:pid:tid` head."""
    s = lines.fill_null("")
    hit = s.str.contains("NCCL version", literal=True) & ~s.str.contains(r"\S+:\d+:\d+ \[\d+\] NCCL ")
    return {i + 1 for i in hit.arg_true().to_list()}


def _inventory(df: pl.DataFrame | None, bare: set[int]) -> pl.DataFrame | None:
    if df is None:
        return None
    return _sorted(df.with_columns(node=pl.when(pl.col("line").is_in(list(bare))).then(None).otherwise("node")))


def _warn_ranks(df: pl.DataFrame | None) -> dict[int, tuple]:
    """line -> (rank, gpu_bus_id) of the NCCL WARN events (those with a pid and cudaDev)."""
    if df is None:
        return {}
    d = pl.col("detail").str.json_decode(pl.Struct({"pid": pl.Int64, "cuda_dev": pl.Int32}))
    w = df.filter((pl.col("source") == "nccl") & d.struct.field("pid").is_not_null())
    return {line: (rank, bus) for line, rank, bus in w.select("line", "rank", "gpu_bus_id").iter_rows()}


def check(parser: object, lines: pl.Series, cuts: list[int], *, exact_events: bool = True) -> None:
    whole = _parse(parser, lines)
    merged = merge_chunks(pieces(parser, lines, cuts))
    a, b = _sorted(whole.get("comms")), _sorted(merged.get("comms"))
    assert (a is None and b is None) or (a is not None and b is not None and a.equals(b)), (cuts, a, b)
    bare = _bare_version_lines(lines)
    a, b = _inventory(whole.get("inventory"), bare), _inventory(merged.get("inventory"), bare)
    assert (a is None and b is None) or (a is not None and b is not None and a.equals(b)), (cuts, a, b)
    if exact_events:
        a, b = _sorted(whole.get("events")), _sorted(merged.get("events"))
        assert (a is None and b is None) or (a is not None and b is not None and a.equals(b)), (cuts, a, b)
    else:
        wa, wb = _warn_ranks(whole.get("events")), _warn_ranks(merged.get("events"))
        both = wa.keys() & wb.keys()
        assert {k: wa[k] for k in both} == {k: wb[k] for k in both}, cuts


# ----------------------------------------------------------------------------- a generated log


def generated_log(seed: int, *, prefix: bool = True, nodes: int = 2, gpus: int = 4, colls: int = 12) -> list[str]:
    """An NCCL debug log of one job (`nodes` x `gpus` ranks, one process each): the world communicator, a
    tensor-parallel one (size 2) and a pipeline p2p one (size 2) per rank, Init START/COMPLETE and topology
    lines scattered, COLL lines (strict and loose), WARNs; a process (rank 3) whose two largest communicators
    are two of size 4 giving it two ranks; a comm pointer reused under another commId."""
    rng = random.Random(seed)
    world = nodes * gpus
    procs = []
    for r in range(world):
        node, dev = f"gpu-n{r // gpus:02d}", r % gpus
        pid = 1000 + 37 * r
        procs.append({"r": r, "node": node, "dev": dev, "pid": pid, "tid": pid + 5, "bus": f"{0x18 + 0x10 * dev:x}000"})

    def head(p: dict, tid: int | None = None) -> str:
        pre = f"{p['r']:2d}: " if prefix else ""
        return f"{pre}{p['node']}:{p['pid']}:{tid or p['tid']} [{p['dev']}] "

    comm_ptr = {}
    comms: list[tuple[dict, str, int, int, str]] = []  # proc, comm ptr, rank, nranks, commId
    for p in procs:
        r = p["r"]
        cw = f"0x55d1{r:04x}aa{rng.randrange(16**4):04x}"
        ct = f"0x55d1{r:04x}bb{rng.randrange(16**4):04x}"
        cp = f"0x55d1{r:04x}cc{rng.randrange(16**4):04x}"
        comms.append((p, cw, r, world, "0xworld1"))
        comms.append((p, ct, r % 2, 2, f"0xtp{r // 2}"))
        comms.append((p, cp, r // gpus, 2 if world // gpus >= 2 else 1, f"0xpp{r % gpus}"))
        comm_ptr[r] = (cw, ct, cp)
    # rank 3 (and its peers) in two size-`world` communicators with other ranks: no single rank for its WARNs
    p3 = procs[3]
    comms.append((p3, f"0x55d1ffff{seed % 997:04x}", world - 1, world, "0xworld2"))
    out: list[str] = []
    events: list[tuple[float, str]] = []

    def at(t: float, s: str) -> None:
        events.append((t, s))

    for p in procs:
        at(rng.random() * 0.05, f"{head(p)}NCCL INFO Bootstrap : Using eth0:10.0.{p['r'] // gpus}.{10 + p['dev']}<0>")
        if p["r"] == 0:
            at(0.0, f"{' 0: ' if prefix else ''}NCCL version 2.21.5+cuda12.4")
        else:
            at(rng.random() * 0.05, f"{head(p)}NCCL INFO NCCL version 2.21.5+cuda12.4")
        at(rng.random() * 0.05, f"{head(p)}NCCL INFO cudaDriverVersion 12040")
    for p, c, rank, n, cid in comms:
        t0 = rng.random() * 0.6
        init = f"ncclCommInitRank comm {c} rank {rank} nranks {n} cudaDev {p['dev']} nvmlDev {p['dev']} busId {p['bus']} commId {cid}"
        at(t0, f"{head(p)}NCCL INFO {init} - Init START")
        at(t0 + rng.random() * 0.2, f"{head(p)}NCCL INFO comm {c} rank {rank} nRanks {n} nNodes {max(1, n // 4)} localRanks {min(n, 4)} localRank {rank % 4} MNNVL 0")
        if rng.random() < 0.9:  # (a few never complete: START or topology decides)
            at(t0 + 0.2 + rng.random() * 0.2, f"{head(p)}NCCL INFO {init} - Init COMPLETE")
    # a comm pointer freed and reused under another commId later on (the first commId printed wins)
    p0 = procs[0]
    reused = comm_ptr[0][1]
    at(0.95, f"{head(p0)}NCCL INFO ncclCommInitRank comm {reused} rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId {p0['bus']} commId 0xlater - Init COMPLETE")
    for p in procs:
        cw, ct, cp = comm_ptr[p["r"]]
        opc = {cw: 0, ct: 0, cp: 0}
        for _ in range(colls):
            t = 0.45 + rng.random() * 0.5
            op, c, n = rng.choice([("AllReduce", cw, world), ("AllGather", ct, 2), ("Send", cp, 2), ("Recv", cp, 2)])
            k = opc[c]
            opc[c] += 1
            count = rng.choice([1024, 4096, 33554432])
            root = rng.randrange(2) if op in ("Send", "Recv") else 0
            body = f"{op}: opCount {k:x} sendbuff 0x7f3c{k:08x} recvbuff 0x7f1f{k:08x} count {count} datatype 7 op 0 root {root} comm {c} [nranks={n}]"
            loose = rng.random() < 0.15
            at(t, f"{head(p)}NCCL INFO {body}" + ("" if loose else f" stream 0x55d0f000{p['dev']}000"))
    for _ in range(6 + seed % 5):
        p = rng.choice(procs + [p3, p3])
        t = 0.5 + rng.random() * 0.5
        kind = rng.random()
        if kind < 0.4:
            msg = f"transport/net_ib.cc:2244 NCCL WARN NET/IB: Got completion from peer 10.0.1.{rng.randrange(9)}<5428{rng.randrange(9)}> with status=12 opcode=129 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.0.{p['dev']} remoteGids::ffff:10.0.1.3 hca mlx5_{p['dev']}"
        elif kind < 0.7:
            msg = "misc/ibvwrap.cc:190 NCCL WARN Call to ibv_modify_qp failed with error Network is unreachable"
        else:
            msg = "NCCL WARN NET/IB : Got async event : port error"
        at(t, head(p, p["tid"] + 1) + msg)
    at(0.5 + rng.random() * 0.5, head(p3, p3["tid"] + 1) + "NCCL WARN NET/IB : Got async event : port error")
    events.sort(key=lambda e: e[0])
    out = [s for _t, s in events]
    return out


def _series(lines: list[str]) -> pl.Series:
    return pl.Series("line", lines, dtype=pl.String)


@pytest.mark.parametrize("seed", [0, 3])  # two random layouts of the job's lines
@pytest.mark.parametrize("prefix", [True, False])
def test_generated_log_whole_in_pieces_of_k_lines(seed: int, prefix: bool) -> None:
    lines = _series(generated_log(seed, prefix=prefix))
    whole = _parse(nccl, lines)
    # the log does what it is built to do: ranks to re-resolve, COLL aggregates to combine
    assert whole["comms"].filter(pl.col("record") == "coll").height >= 8
    assert whole["events"].height >= 6
    for k in (1, 2, 3, 7, 19, 64, 200):
        check(nccl, lines, list(range(k, len(lines), k)))


def test_pieces_really_differ_before_the_merge() -> None:
    lines = _series(generated_log(1))
    whole = _parse(nccl, lines)
    cat = pieces(nccl, lines, list(range(25, len(lines), 25)))
    assert cat["comms"].height > whole["comms"].height
    merged = merge_chunks(cat)
    assert merged["comms"].height == whole["comms"].height
    # the WARNs of rank 3's process: two largest communicators give it two ranks, the launcher's is kept
    ev = merged["events"].filter(pl.col("message").str.contains("gpu-n00:1111:", literal=True))
    assert ev.height and set(ev.get_column("rank").to_list()) == {3}
    assert ev.get_column("gpu_bus_id").null_count() == ev.height


def test_training_log_with_nccl_lines_through_the_step_log_parser() -> None:
    rng = random.Random(7)
    nccl_lines = generated_log(5)
    mixed = []
    step = 0
    for s in nccl_lines:
        mixed.append(s)
        if rng.random() < 0.3:
            step += 1
            mixed.append(f" 0: [2025-01-01 00:00:{step % 60:02d}] iteration {step:8d}/ 1000 | consumed samples: {step * 64} | elapsed time per iteration (ms): 812.3 | learning rate: 1.0E-04 | global batch size: 64 | lm loss: 2.5E+00 |")
    lines = _series(mixed)
    for k in (3, 11, 50):
        check(step_log, lines, list(range(k, len(lines), k)))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 50), prefix=st.booleans(), cuts=st.lists(st.integers(1, 400), max_size=12))
def test_generated_log_random_cuts(seed: int, prefix: bool, cuts: list[int]) -> None:
    lines = _series(generated_log(seed, prefix=prefix, colls=8))
    check(nccl, lines, cuts)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixtures_in_small_pieces(path: Path) -> None:
    lines = harness_blanked(path.read_bytes())
    for k in (1, 2, 3, 5):
        check(nccl, lines, list(range(k, len(lines), k)), exact_events=False)


def test_one_piece_is_left_as_it_is() -> None:
    lines = _series(generated_log(2))
    whole = _parse(nccl, lines)
    merged = merge_chunks(dict(whole))
    for t in TABLES:
        assert _sorted(merged[t]).equals(_sorted(whole[t])), t


def test_tables_without_nccl_rows_pass_through() -> None:
    assert merge_chunks({}) == {}
    ev = conform(pl.DataFrame({"node": ["a"], "source": ["torch"], "kind": ["x"], "severity": ["low"], "message": ["m"], "file": ["f"], "line": [1]}), "events")
    got = merge_chunks({"events": ev})
    assert got["events"].equals(ev)


@pytest.mark.parametrize("at", [0, 37, 120])
def test_shift_detail_lines_numbers_a_range_in_the_file(at: int) -> None:
    """A byte range parsed from line 1 and moved by the ingest (`line` + shift, `shift_detail_lines`) gives
    the rows of the range parsed at its place; then the merge gives the whole parse."""
    lines = _series(generated_log(3))
    piece = lines.slice(at)
    right = _parse(nccl, piece, at + 1)["comms"]
    local = _parse(nccl, piece, 1)["comms"].with_columns(pl.col("line") + at)
    assert _sorted(shift_detail_lines(local, at)).equals(_sorted(right))
    assert shift_detail_lines(local, 0) is local
    if at:
        head = _parse(nccl, lines.slice(0, at), 1)
        tables = {t: pl.concat([head[t], df]) for t, df in _parse(nccl, piece, 1).items() if t in head}
        tables = {t: df.with_columns(pl.when(pl.int_range(pl.len()) >= head[t].height).then(pl.col("line") + at).otherwise("line")) for t, df in tables.items()}
        tables["comms"] = pl.concat([head["comms"], shift_detail_lines(tables["comms"].slice(head["comms"].height), at)])
        merged = merge_chunks(tables)
        assert _sorted(merged["comms"]).equals(_sorted(_parse(nccl, lines)["comms"]))


@pytest.mark.parametrize("rows", [1, 7, 20])
@pytest.mark.parametrize("seed", [0, 3])
def test_rank_rows_merged_in_buckets_as_in_one_merge(monkeypatch: pytest.MonkeyPatch, rows: int, seed: int) -> None:
    """Many rank rows (a log whose communicators are made again and again) are merged in buckets of about
    `MERGE_ROWS` rows, each holding every row of its (file, node, pid, comm): the same rows, in the same order,
    as one merge gives; and the whole parse's after all."""
    from parsers import _nccl_merge

    lines = _series(generated_log(seed, prefix=bool(seed % 2)))
    cat = pieces(nccl, lines, list(range(5, len(lines), 5)))
    ranks = cat["comms"].filter(pl.col("record") == "rank").height
    assert ranks > 3 * rows  # (several buckets)
    once = merge_chunks(cat)
    monkeypatch.setattr(_nccl_merge, "MERGE_ROWS", rows)
    bucketed = merge_chunks(cat)
    for t in TABLES:
        assert bucketed[t].equals(once[t]), t
    check(nccl, lines, list(range(5, len(lines), 5)))
