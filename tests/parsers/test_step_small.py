"""The plain-Python small-file path of step_log (`_parse_small`) equals the vectorised path.

Each case is parsed twice: as is (a small file takes `_parse_small` when it can) and with `_SMALL_MAX` set to
-1 (always the vectorised path); every table (schema and values), the counts, examples, notes, `partial` and
`node` must be equal. Inputs: per-rank files as the simulator writes them (DeepSpeed wall-clock breakdown,
torchtitan metrics lines), variants on the edges of the small path (cut, shuffled, repeated and decreasing
steps, equal or invalid timestamps, other ranks, foreign lines, non-ASCII), and the step-log fixtures.
"""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import polars as pl
import pytest

from parsers import step_log
from parsers.base import FileContext, ParseResult, lines_from_bytes

FIX = Path(__file__).parent.parent / "fixtures" / "step-log"


def _ts(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d}"


def deepspeed_lines(rng: random.Random, n: int, rank: int = 0) -> list[str]:
    t = dt.datetime(2025, 8, 15, 18, 31, 44, 334000)
    out = []
    for _ in range(n):
        t += dt.timedelta(milliseconds=rng.randrange(0, 40_000))
        fwd, inner, ar, opt = (rng.uniform(0, 5000) for _ in range(4))
        out.append(
            f"[{_ts(t)}] [INFO] [logging.py:96:log_dist] [Rank {rank}] time (ms) | fwd: {fwd:.2f} | "
            f"bwd: {inner + ar:.2f} | bwd_inner: {inner:.2f} | bwd_allreduce: {ar:.2f} | step: {opt:.2f}"
        )
    return out


def titan_lines(rng: random.Random, n: int, rank: int = 0, start: dt.datetime | None = None) -> list[str]:
    t = start or dt.datetime(2025, 3, 27, 3, 0, 22, 914000)
    out, step = [], 0
    for _ in range(n):
        t += dt.timedelta(milliseconds=rng.choice([0, 1, 999, 21_359, rng.randrange(0, 10**7)]))
        step += rng.choice([5, 5, 5, 1, 0, -5, 1000])
        tfl = rng.uniform(0, 1000)
        tps = rng.choice([0, 7, 4911, 7720, 1_234_567, rng.randrange(0, 10**9)])
        out.append(
            f"[rank{rank}]:[titan] {_ts(t)} - root - INFO - step: {max(step, 0)}  "
            f"loss: {rng.uniform(0, 12):7.4f}  "
            f"grad_norm: {abs(rng.gauss(0.8, 0.15)):.4f}  memory: 61.42GiB(77.64%)  tps: {tps:,}  "
            f"tflops: {tfl:.2f}  mfu: {tfl / 989 * 100:.2f}%"
        )
    return out


def _same(a: ParseResult, b: ParseResult) -> None:
    meta = ("parsed", "unrecognized", "unrecognized_examples", "notes", "partial", "node")
    assert [getattr(a, k) for k in meta] == [getattr(b, k) for k in meta]
    assert sorted(a.tables) == sorted(b.tables)
    for k, x in a.tables.items():
        y = b.tables[k]
        assert x.schema == y.schema, k
        assert x.equals(y, null_equal=True), k


def _both(lines: list[str], first_line: int = 1, year_hint: int | None = 2025) -> bool:
    """Assert both paths give the same result; True when the small path took the input."""
    s = pl.Series("text", lines, dtype=pl.String)
    ctx = FileContext(path="rank.log", node="n1", year_hint=year_hint, first_line=first_line)
    small = step_log._parse_small(s, ctx) if len(lines) <= step_log._SMALL_MAX else None
    fast = step_log.parse(s, ctx)
    saved = step_log._SMALL_MAX
    step_log._SMALL_MAX = -1
    try:
        slow = step_log.parse(s, ctx)
    finally:
        step_log._SMALL_MAX = saved
    _same(fast, slow)
    return small is not None


@pytest.mark.parametrize("seed", range(6))
def test_simulator_shapes_take_the_small_path(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([1, 2, 3, 50, 186])
    assert _both(deepspeed_lines(rng, n, rank=rng.choice([0, 8, 1016])))
    assert _both(titan_lines(rng, n, rank=rng.choice([0, 3])))
    assert _both(titan_lines(rng, n), first_line=rng.choice([2, 1000]), year_hint=None)


def _variants(t: list[str]) -> list[list[str]]:
    u = list(t)
    u[1], u[2] = u[2], u[1]
    return [
        t[:-1] + [t[-1][:-3]],  # cut last line
        t + [""],
        t + ["   "],
        [t[0], *t],
        t[::-1],
        u,
        t[:3] + [t[3].replace("[rank0]", "[rank3]").replace("[Rank 0]", "[Rank 3]")] + t[4:],
        t[:3] + ["é" + t[3]] + t[4:],
        t[:3] + [t[3] + "\r" + t[3]] + t[4:],
        t[:3] + ["pdsh@x: node1: " + t[3]] + t[4:],
        ["[rank0]:" + x for x in t],
        t[:4] + ["some other line"] + t[4:],
        t[:4] + ["[rank0]:[titan] step: 7  loss: 1.0"] + t[4:],
        [x.replace(" - root - ", " - torchtitan - ") for x in t],
        [x.replace("2025-03-27", "1970-01-01").replace("2025-08-15", "1970-01-01") for x in t],
        [x.replace("2025-03-27", "2025-02-30").replace("2025-08-15", "2025-02-30") for x in t],
        [x.replace("2025-03-27", "2024-02-29").replace("2025-08-15", "2024-02-29") for x in t],
        [x.replace(" | step: ", " | optimizer: ") for x in t],
        [x.replace("  mfu: ", "  mfu:  ") for x in t],
    ]


@pytest.mark.parametrize("kind", ["deepspeed", "titan"])
def test_variants_equal(kind: str) -> None:
    rng = random.Random(11)
    for seed in range(3):
        t = deepspeed_lines(rng, 12 + seed) if kind == "deepspeed" else titan_lines(rng, 12 + seed)
        for v in _variants(t):
            _both(v)


def test_crossing_midnight_and_year() -> None:
    rng = random.Random(3)
    t = titan_lines(rng, 40, start=dt.datetime(2024, 12, 31, 23, 59, 58, 1000))
    assert _both(t)


@pytest.mark.parametrize("path", sorted(FIX.glob("*.log")), ids=lambda p: p.name)
def test_fixtures_equal(path: Path) -> None:
    lines = lines_from_bytes(path.read_bytes())
    if len(lines) <= step_log._SMALL_MAX:
        _both(lines.to_list())
