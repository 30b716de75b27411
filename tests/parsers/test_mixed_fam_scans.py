"""The candidate scans of `_mixed._family` joined into one regex pass: the same booleans (nulls too) as the
separate tests it replaces."""

from __future__ import annotations

import random

import polars as pl

from parsers import _mixed

PIECES = [
    *_mixed.FAMILY_LITERALS,
    "", " ", "  ", "\t", "x", "é", "=", "==", "-", "^", "^^ ", "]:", "]: ", ") FAILED", ") OK ", ") ok", "\\",
    "[rank3]:", "[rank3]: ", "12: ", "> ", "2024-01-02 03:04:05 ", "2024-01-02T03:04:05.123Z: ",
    "stdout: ", "[default0]:", "[host-1:4]", "socket.cpp:752]", "x.py:7]", ".py:", "[INFO] 2024-", "[INFO] ",
    "[ERROR] 2023-",
    "NCCL", "(", "[", "\n",
]


def _lines(seed: int, n: int) -> pl.Series:
    rnd = random.Random(seed)
    values = [
        None if rnd.random() < 0.01 else "".join(rnd.choice(PIECES) for _ in range(rnd.randint(0, 4)))
        for _ in range(n)
    ]
    return pl.Series("line", values, dtype=pl.String)


def test_edges_are_the_ends_or_the_prefixes() -> None:
    lines = _lines(3, 5000)
    want = lines.str.contains(_mixed.FAMILY_ENDS) | lines.str.contains(_mixed.ONLY_PREFIXES)
    got = lines.str.contains(_mixed._EDGES)
    assert got.to_list() == want.to_list()
    assert got.sum() > 100 and (~got).sum() > 100
