"""The small NCCL path's round-7 shortcuts read like its general steps: `records`' loop for files whose lines
are all plain records against the general loop, and `_classify` against its former self (kept verbatim),
on fixture and simulated records and on mutated variants of them."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from parsers import _nccl_small as small
from parsers import nccl
from tests.conftest import assert_same_result

FIX = Path(__file__).parent.parent / "fixtures"


def old_classify(msg: str, rx: small._Rx) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """What `nccl._nccl_rows` reads in a record's message: (kind, values) for each row kind it gives ('conn':
    a ring/tree/channel line; the others the fields `_rows` keeps), in `_rows`' order."""
    out: list[tuple[str, tuple[Any, ...]]] = []
    if msg[:4] in rx.conn_prefixes and rx.conn.search(msg):
        out.append(("conn", ()))
    if msg.startswith("NCCL version"):
        m = rx.version.search(msg)
        if m:
            out.append(("ver", (m.group("ver"), m.group("cuda"))))
    elif msg.startswith("cudaDriverVersion"):
        m = rx.cuda_driver.search(msg)
        if m:
            out.append(("drv", (small._int(m.group(1), small._I64),)))
    if msg.startswith("NCCL_"):
        m = rx.env.search(msg)
        if m:
            out.append(("env", (m.group("var"), m.group("val"))))
    if msg.startswith("Bootstrap"):
        m = rx.bootstrap.search(msg)
        if m:
            out.append(("bs", (m.group("ifname"), m.group("ip"))))
    elif msg.startswith("NET/IB"):
        m = rx.net_ib.search(msg)
        if m:
            out.append(("ib", (msg, m)))
    elif msg.startswith("NET/Socket"):
        if rx.net_socket.search(msg):
            out.append(("sock", (msg,)))
    elif msg.startswith("Using network"):
        m = rx.using_net.search(msg)
        if m:
            out.append(("using", (m.group(1),)))
    if "NET/OFI Selected" in msg:
        m = rx.ofi.search(msg)
        if m:
            out.append(("ofi", (m.group("prov"), small._int(m.group("nics"), small._I64))))
    if " - Init " in msg:
        m = rx.init.search(msg)
        if m:
            out.append(("init", (m,)))
    if " nNodes " in msg:
        m = rx.topo.search(msg)
        if m:
            out.append(("topo", (m,)))
    return tuple(out)


_int, _bus_id, _I32 = small._int, small._bus_id, small._I32  # (the reference's names)


def old_rank_rows(init: list[Any], topo: list[Any], ver: list[Any], path: str) -> list[tuple[Any, ...]]:
    """The comms 'rank' rows (`nccl._nccl_rows`' rank map), as tuples in `_RANK_SCHEMA` order."""
    if not init and not topo:
        return []
    rows: list[dict[str, Any]] = []
    for h, line, m in init:
        g = m.groupdict()
        rows.append(
            {
                "node": h["node"], "pid": h["pid"], "line": line, "comm": g["comm"],
                "comm_id": g["commid"] or g["comm"], "rank": _int(g["rank"], _I32),
                "nranks": _int(g["nranks"], _I32), "cuda_dev": _int(g["dev"], _I32),
                "gpu_bus_id": _bus_id(g["bus"]), "phase": g["phase"], "nvml_dev": _int(g["nvml"], _I32),
                "prio": 0 if g["phase"] == "COMPLETE" else 1, "nnodes": None, "local_rank": None,
            }
        )
    for h, line, m in topo:
        g = m.groupdict()
        rows.append(
            {
                "node": h["node"], "pid": h["pid"], "line": line, "comm": g["comm"], "comm_id": g["comm"],
                "rank": _int(g["rank"], _I32), "nranks": _int(g["nranks"], _I32), "cuda_dev": h["dev"],
                "gpu_bus_id": None, "phase": "topology", "nvml_dev": None, "prio": 2,
                "nnodes": _int(g["nnodes"], _I32), "local_rank": _int(g["lrank"], _I32),
            }
        )
    # commId (when some line printed it) wins for every row of the same process-local comm pointer
    cid: dict[tuple[Any, ...], str] = {}
    for r in rows:
        k = (r["node"], r["pid"], r["comm"])
        if r["comm_id"] != r["comm"] and k not in cid:
            cid[k] = r["comm_id"]
    for r in rows:
        k = (r["node"], r["pid"], r["comm"])
        if k in cid and r["pid"] is not None:  # (a join: a null pid matches nothing)
            r["comm_id"] = cid[k]
    rows.sort(key=lambda r: (r["prio"], r["line"]))
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["node"], r["pid"], r["comm"], r["rank"]), []).append(r)

    def first(rs: list[dict[str, Any]], f: str) -> Any:
        for r in rs:
            if r[f] is not None:
                return r[f]
        return None

    vers = {v for _h, _line, v, _c in ver}
    one_ver = next(iter(vers)) if len(vers) == 1 else None
    pver: dict[tuple[Any, Any], str] = {}
    for h, _line, v, _c in ver:
        if h["pid"] is not None:
            pver.setdefault((h["node"], h["pid"]), v)
    out = []
    for (node, pid, comm, rk), rs in groups.items():
        r0 = rs[0]
        phases = sorted({r["phase"] for r in rs})
        nvml, nnodes, lrank = first(rs, "nvml_dev"), first(rs, "nnodes"), first(rs, "local_rank")
        # `_json(comm=, phase=, phases=, nvml_dev=, nnodes=, local_rank=)`: the comm pointer (`0x` and hex
        # digits) and the phases (START, COMPLETE, topology) are plain strings, the others ints or None
        detail = f'{{"comm":"{comm}","phase":"{r0["phase"]}","phases":["' + '","'.join(phases) + '"]'
        for name, v in (("nvml_dev", nvml), ("nnodes", nnodes), ("local_rank", lrank)):
            if v is not None:
                detail += f',"{name}":{v}'
        out.append(
            (
                "rank", node, r0["comm_id"], rk, first(rs, "nranks"), first(rs, "cuda_dev"),
                first(rs, "gpu_bus_id"), pid, pver.get((node, pid)) if pid is not None else None,
                detail + "}",
                path, r0["line"],
            )
        )
    return [o[:8] + (o[8] if o[8] is not None else one_ver,) + o[9:] for o in out]


def _record_lines() -> list[list[str]]:
    out = []
    for d in ("nccl", "torch-distributed"):
        for p in sorted((FIX / d).glob("*")):
            if not p.is_file() or p.name.endswith((".jsonl", ".json")) or "golden" in p.name:
                continue
            lines = []
            for line in p.read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n").split("\n"):
                at = line.find(" NCCL ")
                m = re.match(nccl._FAST_HEAD, line[: at + nccl._FAST_KEY_CHARS]) if at >= 0 else None
                if m and m.group("level") in ("INFO", "TRACE"):
                    lines.append(line)
            if lines:
                out.append(lines)
    return out


SOURCES = _record_lines()
ODD = [
    "",
    "   ",
    "\t",
    "[rank3]: gpu1:12:13 [3] NCCL INFO Bootstrap : Using eth0:10.0.0.3<0>",
    "[default0]:gpu1:12:13 [0] NCCL INFO cudaDriverVersion 12020",
    "0: gpu1:12:13 [0] NCCL INFO Using network IB",
    "  12: NCCL version 2.18.5+cuda12.2",
    "NCCL version 2.18.5+cuda12.2",
    "gpu1:12:13 [0] NCCL TRACE x",
    "gpu1:12:13 [0] NCCL WARN Call to connect returned Connection refused",
    "gpu1:12:13 [0] NCCL INFOx",
    "gpu1:12:13 [0] NCCL INFO",
    "plain text",
    "Nothing",
    "9 NCCL INFO x",
]


def _variants(seed: int) -> list[list[str]]:
    rnd = random.Random(seed)
    out = []
    for _ in range(200):
        base = list(rnd.choice(SOURCES))
        k = rnd.choice([0, 0, 1, 2, 5])
        for _i in range(k):
            base.insert(rnd.randrange(len(base) + 1), rnd.choice(ODD))
        if rnd.random() < 0.3:
            other = rnd.choice(SOURCES)
            base += other[: rnd.randrange(len(other) + 1)]
        out.append(base[: rnd.choice([1, 2, 10, 400, 4000])])
    return out


def _norm(x: Any) -> Any:
    """`x` with its regex matches as (string, span, groups) (matches compare by identity)."""
    if isinstance(x, re.Match):
        return ("match", x.string, x.span(), x.groups())
    if isinstance(x, (list, tuple)):
        return type(x)(_norm(v) for v in x)
    if isinstance(x, dict):
        return {k: _norm(v) for k, v in x.items()}
    return x


def _general(lines: list[str], first: int) -> Any:
    old = small._SPECIAL_START
    try:
        small._SPECIAL_START = re.compile("")  # (matches everywhere: the general loop reads every file)
        return small.records(pl.Series("line", lines, dtype=pl.String), first, {})
    finally:
        small._SPECIAL_START = old


@pytest.mark.parametrize("seed", range(3))
def test_records_plain_loop_reads_like_the_general_loop(seed: int) -> None:
    heads: dict[str, Any] = {}  # (shared, as in a batch)
    plain = 0
    for lines in [*SOURCES, *_variants(seed)]:
        first = 1 + len(lines) % 7
        got = small.records(pl.Series("line", lines, dtype=pl.String), first, heads)
        assert _norm(got) == _norm(_general(lines, first))
        plain += got is not None and not any(ln[:1] in small._SPECIAL_FIRST for ln in lines)
    assert plain >= 20


def test_classify_reads_like_before() -> None:
    rx = small._patterns()
    msgs = set()
    for lines in SOURCES:
        for t in lines:
            at = t.find(" NCCL ")
            msgs.add(t[at + 11 :])
    msgs |= {"Channel 00 : 0[18000] -> 1[2a000] via P2P/IPC - Init START", "Trees [0] x nNodes 2", "Conn"}
    rnd = random.Random(5)
    for m in list(msgs):
        for _ in range(3):
            i = rnd.randrange(len(m) + 1)
            msgs.add(m[:i] + rnd.choice([" - Init ", " nNodes ", "NET/OFI Selected", "Chan", "x"]) + m[i:])
            msgs.add(rnd.choice(["Chan", "Ring", "Tree", "Conn", "NCCL_", "NET/IB", "Boot"]) + m[i:])
    assert len(msgs) > 500
    for m in msgs:
        assert _norm(small._classify(m, rx)) == _norm(old_classify(m, rx)), m


INIT_LINES = [
    "ncclCommInitRank comm 0x55b1f7d09a10 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x9f2c "
    "- Init START",
    "ncclCommInitRank comm 0x55b1f7d09a10 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x9f2c "
    "- Init COMPLETE",
    "ncclCommInitRank comm 0x55b1f7d09a10 rank 2 nranks 4 cudaDev 0 busId 18000 - Init COMPLETE",
    "ncclCommInitRank comm 0x77 rank 0 nranks 8 cudaDev 1 nvmlDev 3 busId 2a000 commId 0x1 - Init START",
    "ncclCommInitRank comm 0x77 rank 0 nranks 8 cudaDev 1 busId 2a000 - Init START",
    "comm 0x55b1f7d09a10 rank 2 nRanks 4 nNodes 1 localRanks 4 localRank 2 MNNVL 0",
    "comm 0x77 rank 0 nRanks 8 nNodes 2 localRanks 4 localRank 0 MNNVL 0",
    "comm 0x99 rank 5 nRanks 8 nNodes 2 localRanks 4 localRank 1 MNNVL 0",
]


VERSIONS = ["2.18.5", "2.19.3"]


def test_rank_rows_read_like_before() -> None:
    rx = small._patterns()
    readings = [small._classify(m, rx) for m in INIT_LINES]
    assert all(readings)
    rnd = random.Random(7)
    heads = [
        {"node": "a", "pid": 1, "dev": 0},
        {"node": "a", "pid": 2, "dev": 1},
        {"node": "b", "pid": None, "dev": None},
    ]
    for _ in range(400):
        init: list[Any] = []
        topo: list[Any] = []
        for line in range(rnd.randrange(12)):
            h = rnd.choice(heads)
            for kind, value in rnd.choice(readings):
                (init if kind == "init" else topo).append((h, line, *value))
        ver = [(rnd.choice(heads), 100 + i, rnd.choice(VERSIONS), "12.2") for i in range(rnd.randrange(3))]
        rnd.shuffle(init)
        assert small._rank_rows(init, topo, ver, "p") == old_rank_rows(init, topo, ver, "p")


def test_rank_rows_on_fixture_records() -> None:
    calls = []
    orig = small._rank_rows

    def spy(*a: Any) -> Any:
        calls.append(a)
        return orig(*a)

    small._rank_rows = spy
    try:
        for lines in [*SOURCES, *_variants(11)]:
            small.parse(pl.Series("line", lines, dtype=pl.String), nccl.FileContext(path="p", node="n"))
    finally:
        small._rank_rows = orig
    assert sum(1 for a in calls if a[0] or a[1]) >= 10
    for a in calls:
        assert orig(*a) == old_rank_rows(*a)


HOSTS = ["r06n09", "gpu-01", "a", "collective", "Communicators...", "10.0.0.1", "h.x", "x_y", "A1", "n-1."]
ENDS = ["INFO ", "INFO", "WARN ", "TRACE ", "INFO X", "INFOX", "INFO \n", "INFO  ", "INFO é"]


def test_plain_head_reading_is_the_fast_lane_reading() -> None:
    rnd = random.Random(1)
    plain = 0
    for _ in range(30000):
        pid = rnd.choice(["1", "123", "99999999999999999999", "0", "٣"])
        dev = rnd.choice(["0", "7", "3000000000"])
        mid = rnd.choice(["", " 1.5", " a.c:12"])
        key = f"{rnd.choice(HOSTS)}:{pid}:{rnd.choice(['2', '0'])} [{dev}]{mid} NCCL {rnd.choice(ENDS)}"
        plain += bool(small._PLAIN_HEAD.fullmatch(key))
        assert small._head(key) == small._head_read(key), key
    assert plain > 1000


@pytest.mark.parametrize("seed", range(2))
def test_column_frames_are_the_row_frames(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    items = [
        (pl.Series("line", lines, dtype=pl.String), nccl.FileContext(path=f"n{k}/w.log", node=f"n{k}"))
        for k, lines in enumerate([*SOURCES, *_variants(seed)])
    ]
    batches = [items[i : i + 16] for i in range(0, len(items), 16)]
    got = [small.parse_many(b) for b in batches]
    monkeypatch.setattr(small, "COLUMN_FRAMES", False)
    want = [small.parse_many(b) for b in batches]
    done = 0
    for gs, ws in zip(got, want, strict=True):
        for g, w in zip(gs, ws, strict=True):
            assert (g is None) == (w is None)
            if g is not None:
                done += 1
                assert_same_result(g, w)
                for name, df in g.tables.items():
                    assert df.schema == w.tables[name].schema
    assert done > 50


def test_a_cuda_driver_version_no_integer_holds_makes_no_fact_and_fails_nothing() -> None:
    """`cudaDriverVersion` with a corrupt number past Int64: no cuda_driver_version row (its value would be
    null, which the inventory refuses: the whole file failed), the same in the small and vectorised paths."""
    from forensics.schema import conform
    from parsers import nccl
    from parsers.base import FileContext, lines_from_bytes

    path = Path(__file__).parent.parent / "fixtures" / "nccl" / "nccl_2.13.4_info_debug_subsys_all_alloc.log"
    text = path.read_text()
    bad = text.replace("cudaDriverVersion 11070", "cudaDriverVersion " + str(2**70), 1)
    ctx = FileContext(path="x", node="n1")
    good = nccl.parse(lines_from_bytes(text.encode()), ctx)
    alone = nccl.parse(lines_from_bytes(bad.encode()), ctx)
    batch = nccl.parse_many([(lines_from_bytes(bad.encode()), ctx), (lines_from_bytes(text.encode()), ctx)])
    for got in (alone, batch[0]):
        assert (got.parsed, got.unrecognized) == (good.parsed, good.unrecognized)
        inv = conform(got.tables["inventory"], "inventory")  # (raised SchemaError: a null value)
        assert inv.height == conform(good.tables["inventory"], "inventory").height  # (held on other lines)
