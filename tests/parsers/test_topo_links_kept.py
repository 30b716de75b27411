"""nvidia_smi_topo: the nvlink Link lines `_read` does not keep (no speed, not `<inactive>`, no counter above
0) change nothing: the result equals the one where every Link line is kept.

On the fixtures, mixes of their lines, and generated nvlink -s/-e listings (speeds, `<inactive>`, counters at
0 and above, Link lines before any GPU line, tabs, odd counters).
"""

from __future__ import annotations

import random

import polars as pl
import pytest

from parsers import nvidia_smi_topo as topo
from parsers.base import FileContext
from tests.conftest import assert_same_result, fixture_lines

LINKS = [
    "\t Link {k}: 25 GB/s",
    "\t Link {k}: 26.562 GB/s",
    "\t Link {k}: <inactive>",
    "\t Link {k}: Replay Errors: 0",
    "\t Link {k}: Recovery Errors: 0",
    "\t Link {k}: CRC Errors: 0",
    "\t Link {k}: Replay Errors: 3",
    "\t Link {k}: Recovery Errors: 1",
    "\t Link {k}: CRC Errors: 12",
    "    Link {k}: Data Tx: 0 KiB",
    "\t Link {k}: Tx Counter: 0",
    "\t Link {k}: Rx Count: 7",
    "\t Link {k}: Errors: 0x0",
    "\t Link {k}:",
    "Link {k}: Replay Errors: 1",
]


def _listing(rng: random.Random) -> list[str]:
    out: list[str] = []
    if rng.random() < 0.3:
        out += [rng.choice(LINKS).format(k=0) for _ in range(rng.randint(1, 3))]  # (before any GPU line)
    for g in range(rng.randint(1, 4)):
        out.append(f"GPU {g}: NVIDIA H100 80GB HBM3 (UUID: GPU-{g:08d}-d0a7-4292-ba31-5a23a727a186)")
        for k in range(rng.randint(0, 8)):
            out += [rng.choice(LINKS).format(k=k) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.2:
            out.append("")
    return out


def _both(lines: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    s = pl.Series("line", lines, dtype=pl.String)
    ctx = FileContext(path="n1/nvlink.txt", node="n1", first_line=4)
    topo._LINES.clear()
    got = topo.parse(s, ctx)
    real = topo._classify
    with monkeypatch.context() as mp:
        mp.setattr(topo, "_classify", lambda raw: (*real(raw)[:5], True))
        topo._LINES.clear()
        every = topo.parse(s, ctx)
    topo._LINES.clear()
    assert_same_result(every, got)


def test_fixtures(monkeypatch: pytest.MonkeyPatch) -> None:
    for _name, lines in fixture_lines("nvidia-smi-topo"):
        _both(lines, monkeypatch)


@pytest.mark.parametrize("seed", range(6))
def test_generated_listings(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    rng = random.Random(seed)
    fixtures = [lines for _n, lines in fixture_lines("nvidia-smi-topo")]
    for _ in range(10):
        lines = _listing(rng)
        if rng.random() < 0.3:
            f = rng.choice(fixtures)
            a = rng.randrange(len(f))
            lines = f[a : a + rng.randint(1, 40)] + lines
        _both(lines, monkeypatch)
