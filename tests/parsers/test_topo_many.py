"""`nvidia_smi_topo.parse_many` equals per-file `parse` (every table, dtype and accounting field).

Batches are built from the fixtures, variants of them (CRLF kept in the lines, pdsh-style prefixes, a cut
last line, an empty file, a file of unknown lines, null lines, other nodes and paths) and seeded random
mixes of fixture lines and edge lines (non-zero NVLink error counters, inactive links, failure lines).
The classification of each distinct line is cached for the process: the random mixes are also read with
the cache emptied.
"""

from __future__ import annotations

import random

import polars as pl
import pytest

from parsers import nvidia_smi_topo as topo
from parsers.base import FileContext
from tests.conftest import assert_same_result, fixture_lines, variants

EDGE = [
    "GPU 3: NVIDIA H100 80GB HBM3 (UUID: GPU-a235c418-d0a7-4292-ba31-5a23a727a186)",
    "\t Link 0: Replay Errors: 7",
    "\t Link 1: Recovery Errors: 2",
    "\t Link 2: CRC Errors: 0",
    "\t Link 3: 26.562 GB/s",
    "\t Link 4: <inactive>",
    "\t Link 5: Data Tx: 123456 KiB",
    "    Link 6: CRC Errors: 99999999999999999999",
    "Unable to determine the device handle for GPU0000:1B:00.0: Unknown Error",
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
    "\x1b[1mGPU 1: NVIDIA A100 (UUID: GPU-1)\x1b[0m",
    "$ nvidia-smi nvlink -e",
    "NIC Legend:",
    "  NIC0: mlx5_0",
    "garbage",
    "",
    "   ",
]








def check(files: list[tuple[str, str, list[str | None]]], first_line: int = 1) -> None:
    """parse_many over (path, node, lines) files == parse of each."""
    items = [
        (
            pl.Series("line", lines, dtype=pl.String),
            FileContext(path=path, node=node, first_line=first_line, year_hint=2025),
        )
        for path, node, lines in files
    ]
    many = topo.parse_many(items)
    assert len(many) == len(items)
    for (lines, ctx), got in zip(items, many, strict=True):
        assert_same_result(topo.parse(lines, ctx), got)


def test_each_fixture_alone_and_all_together() -> None:
    files = [(f"topo/{name}", "node-a", lines) for name, lines in fixture_lines("nvidia-smi-topo")]
    for f in files:
        check([f])
    check(files)
    check(files, first_line=5)
    check([])


def test_variants_batched_with_other_files() -> None:
    fixtures = fixture_lines("nvidia-smi-topo")
    for k, (name, lines) in enumerate(fixtures):
        shapes = {**variants(lines), "tabs": [t.replace("    ", "\t") for t in lines]}
        batch = [(f"{name}/{v}", f"n{k}-{j}", ls) for j, (v, ls) in enumerate(shapes.items())]
        other = fixtures[(k + 3) % len(fixtures)]
        batch.insert(3, (f"other/{other[0]}", "node-b", other[1]))
        check(batch)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_batches(seed: int) -> None:
    rng = random.Random(seed)
    fixtures = fixture_lines("nvidia-smi-topo")
    for b in range(8):
        files = []
        for k in range(rng.randint(1, 12)):
            parts: list[str] = []
            for _ in range(rng.randint(1, 6)):
                if rng.random() < 0.6:
                    lines = rng.choice(fixtures)[1]
                    a = rng.randrange(len(lines))
                    parts += lines[a : a + rng.randint(1, 60)]
                else:
                    parts += [rng.choice(EDGE) for _ in range(rng.randint(1, 5))]
            files.append((f"mix/{seed}/{b}/{k}", rng.choice(["node-a", "node-b", "unknown"]), parts))
        if b % 2:
            topo._LINES.clear()
        check(files)
