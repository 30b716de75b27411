"""Round-10 shortcuts of the NCCL/PyTorch grammar read as the steps they replace: each module flag below off
runs the former code (kept in place), on gives the new path; both must give the same tables, accounting,
notes, node and understood lines, on fixtures, the real logs, generated NCCL logs and random mixes.

- `nccl.ENUM_KEYS`: `_fast_lane` finds each line's head by an Enum cast of its key (was a join on the key).
"""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import _mixed, nccl, step_log
from parsers import torch_distributed as td
from parsers.base import HARNESS_LINE, FileContext, ParseResult, lines_from_bytes
from tests.conftest import assert_same_result
from tests.parsers.test_nccl_fast import COLL, ENVELOPES, HEADS, LEVELS, MESSAGES, OTHER, nccl_lines

FIX = Path(__file__).parent.parent / "fixtures"
REAL = Path("/work/shared/real-logs")
FLAGS = [(nccl, "ENUM_KEYS")]
FILES = sorted(
    p
    for d in ("nccl", "torch-distributed", "nccl-tests", "step-log")
    for p in (FIX / d).glob("*")
    if p.is_file() and not p.name.endswith((".jsonl", ".golden", ".json")) and "golden" not in p.name
)
REAL_FILES = sorted(p for d in ("nccl", "steps") for p in (REAL / d).glob("*") if p.is_file())


def _ctx(first_line: int) -> FileContext:
    return FileContext(path="x.log", node="node-x", first_line=first_line, year_hint=2025)


def _read(lines: pl.Series, first_line: int) -> list[object]:
    """What each reading gives: nccl.parse, torch_distributed.parse, the mixed training-log reading (both
    grammars) and the family rows' understood lines."""
    ctx = _ctx(first_line)
    fam = nccl.family_rows(lines, ctx)
    return [
        nccl.parse(lines, ctx),
        td.parse(lines, ctx),
        _mixed.parse(step_log, lines, ctx),
        (fam.understood.to_list(), fam.notes, fam.hosts, dict(fam.tables)),
    ]


def _same(a: list[object], b: list[object]) -> None:
    for x, y in zip(a[:3], b[:3], strict=True):
        assert isinstance(x, ParseResult) and isinstance(y, ParseResult)
        assert_same_result(x, y)
    (ua, na, ha, ta), (ub, nb, hb, tb) = a[3], b[3]  # type: ignore[misc]
    assert (ua, na, ha) == (ub, nb, hb)
    assert list(ta) == list(tb)
    for name in ta:
        assert ta[name].schema == tb[name].schema
        assert ta[name].equals(tb[name], null_equal=True), name


def both_ways(lines: pl.Series, first_line: int = 1) -> None:
    """Every flag on (the new paths) reads `lines` as every flag off (the former steps), as each one does."""
    old = {(m, f): getattr(m, f) for m, f in FLAGS}
    try:
        for m, f in FLAGS:
            setattr(m, f, False)
        ref = _read(lines, first_line)
        for m, f in FLAGS:
            setattr(m, f, True)
        _same(_read(lines, first_line), ref)
        if len(FLAGS) > 1:
            for m, f in FLAGS:
                for m2, f2 in FLAGS:
                    setattr(m2, f2, (m2, f2) == (m, f))
                _same(_read(lines, first_line), ref)
    finally:
        for (m, f), v in old.items():
            setattr(m, f, v)


def _lines(path: Path) -> pl.Series:
    lines = lines_from_bytes(path.read_bytes())
    return pl.select(pl.when(lines.str.contains(HARNESS_LINE)).then(pl.lit("")).otherwise(lines)).to_series()


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fam10_flags_on_fixtures(path: Path) -> None:
    both_ways(_lines(path), first_line=7)


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fam10_flags_on_real_logs(path: Path) -> None:
    both_ways(_lines(path), first_line=3)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fam10_flags_on_generated_nccl_logs(tmp_path: Path, seed: int) -> None:
    from bench import big_nccl

    out = tmp_path / "big.log"
    big_nccl.write(out, 0.4, seed)
    both_ways(lines_from_bytes(out.read_bytes()))


@settings(max_examples=40, deadline=None)
@given(st.lists(nccl_lines(), min_size=1, max_size=40), st.integers(1, 3))
def test_fam10_flags_on_random_mixes(lines: list[str], first_line: int) -> None:
    both_ways(pl.Series("line", lines, dtype=pl.String), first_line)


def test_fam10_flags_on_a_big_random_mix() -> None:
    """Over `nccl._SMALL` lines (the regex literal passes), with unknown and repeated heads."""
    rnd = random.Random(10)
    lines = []
    for _ in range(nccl._SMALL + 500):
        r = rnd.random()
        if r < 0.1:
            lines.append(rnd.choice(OTHER))
            continue
        coll = rnd.choice(COLL).format(o="1f", c="8", m=rnd.choice(["0x55", "0x56"]), r="1")
        msg = rnd.choice(MESSAGES) if rnd.random() < 0.5 else coll
        line = f"{rnd.choice(ENVELOPES)}{rnd.choice(HEADS)} NCCL {rnd.choice(LEVELS)} {msg}"
        if rnd.random() < 0.02:
            i = rnd.randrange(len(line) + 1)
            line = line[:i] + rnd.choice(["é", "\t", " ", " NCCL ", "]", ":", "x"]) + line[i:]
        lines.append(line)
    both_ways(pl.Series("line", lines, dtype=pl.String))
