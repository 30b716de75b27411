"""`nvidia_smi_csv.parse_many` of long loops gives each file what `parse` gives it alone.

A batch of `_MANY` rows or more drops, before reading the inventory, the rows that repeat an earlier row of
their file in every cell the inventory reads (`plan.first` over each file), as `parse` does for a long file:
checked on batches of generated loops whose inventory cells change (a GPU renamed part way, a bus id and an
index swapped, cells the field list does not end with), with the same node in two files, a header repeated in
a file, a second field list, and files cut at random lines, against each file parsed alone."""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest

from bench import big_nvsmi
from parsers import nvidia_smi_csv
from parsers.base import FileContext, lines_from_bytes
from tests.parsers.test_nvsmi11 import _same


def _loop(tmp_path: Path, seed: int) -> list[str]:
    path = tmp_path / f"loop-{seed}.csv"
    big_nvsmi.write(path, 0.6, seed, "csv")
    return lines_from_bytes(path.read_bytes()).to_list()


def _varied(lines: list[str], rnd: random.Random) -> list[str]:
    """A loop with its inventory cells changed part way (name, bus id/index), a header repeated, and a second
    field list (name and serial first) for a stretch."""
    head, rows = lines[0], lines[1:]
    out = [head]
    cut = rnd.randint(100, len(rows) - 100)
    for i, row in enumerate(rows):
        if i >= cut:
            row = row.replace("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3 (replaced)", 1)
        if rnd.random() < 0.01:
            row = row.replace("00000000:18:00.0, 0,", "00000000:2A:00.0, 0,", 1)
        out.append(row)
        if i == cut // 2:
            out.append(head)
    extra = ["name, serial, utilization.gpu [%]"] + [
        f"NVIDIA H100 80GB HBM3, 165{rnd.randint(0, 3):010d}, {rnd.randint(0, 100)} %" for _ in range(40)
    ]
    at = rnd.randint(1, len(out) - 1)
    return out[:at] + extra + [head] + out[at:]


@pytest.mark.parametrize("seed", [1, 2])
def test_parse_many_of_long_loops_same_as_each_alone(tmp_path: Path, seed: int) -> None:
    rnd = random.Random(seed)
    items = []
    for k in range(8):
        lines = _varied(_loop(tmp_path, seed * 10 + k), rnd)
        lines = lines[: rnd.randint(len(lines) // 2, len(lines))]
        first = rnd.choice([1, 1, 501])
        ctx = FileContext(path=f"n{k}/nvidia-smi-query.csv", node=f"n{k % 4}", first_line=first)
        items.append((pl.Series("line", lines, dtype=pl.String), ctx))
    assert sum(len(s) for s, _ in items) >= nvidia_smi_csv._MANY  # (the batch's long path)
    many = nvidia_smi_csv.parse_many(items)
    for (lines, ctx), got in zip(items, many, strict=True):
        _same(nvidia_smi_csv.parse(lines, ctx), got)
    inv = pl.concat([r.tables["inventory"] for r in many])
    assert inv.filter(pl.col("value") == "NVIDIA H100 80GB HBM3 (replaced)").height > 0
    assert inv.filter(pl.col("attribute") == "serial").height > 0
