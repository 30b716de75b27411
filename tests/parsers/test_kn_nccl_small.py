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
