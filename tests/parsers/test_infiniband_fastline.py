"""The shortcuts of `infiniband._read_line` (an ibstat key with a number or GUID, a perfquery counter line)
give exactly `_read_line_full`'s reading, on every line of the fixtures and real logs and on generated lines
built to hit the edges of each shortcut (names that are commands, `hca_id` / `ibpanic` lines, markers,
`Info`, ` port `, `port` keys, timestamp candidates, envelopes); and `parse_many` with the line caches emptied
equals `parse` on files made of such lines."""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl

from parsers import infiniband
from parsers.base import FileContext
from tests.conftest import assert_same_result

ROOTS = [Path(__file__).resolve().parents[1] / "fixtures", Path("/work/shared/real-logs")]

NAMES = [
    "PortXmitData", "PortRcvData", "VL15Dropped", "QP1Dropped", "done", "do", "ls", "cat", "date", "for",
    "perfquery", "mlxlink", "ibstat", "ibstatus", "hca_id", "ibpanic", "ibwarn", "iberror", "mlx5_0",
    "mlx5_0x", "hfi1_0", "efa_3", "qedr2", "irdma1", "bnxt_re0", "PortInfo", "Info", "stdout", "stderr",
    "std", "A", "x_1", "port", "device", "sudo", "head", "Xstd", "rank0", "default1", "a1", "host01",
]  # fmt: skip
KEYS = [
    "Node GUID", "System image GUID", "Port GUID", "Base lid", "SM lid", "Rate", "State", "port", "Port",
    "Base port lid", "x port y", "Info", "Port Info", "device", "mlx", "CA type", "hca id", "LMC", "a b",
    "stdout", "ib port ", "date", "cat", "ibpanic", "Number of ports", "P", "ab",
]  # fmt: skip
VALUES = [
    "0", "1", "11", "400", "1234567890", "12345678901", "0x946dafe3c67fb4f9", "0x0", "0xabc", "0x1234567890",
    "123456789012345678901234", "99999999999999999999", "10", "1718359200", "0000000000",
]  # fmt: skip


def generated(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        v = rng.choice(VALUES)
        if rng.random() < 0.5:
            digits = v[2:] if v.startswith("0x") else v
            out.append(f"{rng.choice(NAMES)}:{'.' * rng.randint(1, 30)}{digits}")
        else:
            out.append(f"{chr(9) * rng.randint(1, 3)}{rng.choice(KEYS)}: {v}")
    # near misses: the shortcuts' patterns must not match, or must agree
    out += [
        "PortXmitData:....................1 ", "PortXmitData:1", "PortXmitData:. 1", "Port-Xmit:...1",
        "\t\tBase lid: 11 ", "\t\tBase lid:11", "\t\tBase lid:  11", " \tBase lid: 11", "\t\tBase lid: 0xABC",
        "\t\tBase lid: 1x2", "\tport: 1", "\t\tport: 0x1", "\tmlx5_0 port 1: 2", "\tState: 1234567890",
        "a:.........1234567890", "ab:.1234567890", "VL15:.1234567890",
    ]  # fmt: skip
    return out


def real_lines() -> list[str]:
    seen: dict[str, None] = {}
    for root in ROOTS:
        if not root.exists():
            continue
        for path in sorted(root.rglob("*")):
            if path.is_file() and path.stat().st_size < 4 << 20:
                for line in path.read_bytes().decode("utf-8", "replace").splitlines():
                    seen.setdefault(line[:300])
    return list(seen)


def test_shortcuts_equal_full_reading() -> None:
    lines = generated(random.Random(7), 20000) + real_lines()
    fast = 0
    for text in lines:
        got = infiniband._read_line(text)
        assert got == infiniband._read_line_full(text), repr(text)
        if infiniband._UNSAFE.search(text) is None:  # (`_classify` tries the shortcuts first)
            assert infiniband._classify(text) == got, repr(text)
        fast += bool(infiniband._FAST_KV.fullmatch(text) or infiniband._FAST_CTR.fullmatch(text))
    assert fast > 5000  # (the shortcuts are taken)


def test_parse_many_on_generated_files() -> None:
    rng = random.Random(11)
    heads = [
        "CA 'mlx5_0'", "\tPort 1:", "# Port extended counters: Lid 12 port 1 (CapMask: 0x5A00)",
        "# Port counters: Lid 7 port 2", "hca_id:\tmlx5_1", "\tport:\t1", "$ perfquery -C mlx5_1 -P 1",
    ]  # fmt: skip
    pool = generated(rng, 3000)
    files = []
    for k in range(40):
        n = rng.randint(1, 60)
        lines = [rng.choice(heads) if rng.random() < 0.15 else rng.choice(pool) for _ in range(n)]
        files.append((pl.Series("line", lines, dtype=pl.String), FileContext(path=f"f{k}", node=f"n{k % 3}")))
    for cache in (infiniband._LINES, infiniband._TIMES, infiniband._PQ_NAMES, *infiniband._ATTRS.values()):
        cache.clear()
    many = infiniband.parse_many(files)
    for (lines, ctx), got in zip(files, many, strict=True):
        assert_same_result(infiniband._parse_frames(lines, ctx), got)
