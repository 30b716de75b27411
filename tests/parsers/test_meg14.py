"""meg14: the Megatron lane frames its units by one pass over the lane-shaped lines of their one stream where the
usual shape holds (`step_log._one_stream_units`: each iteration line's next line in the stream its header, the
stream's other lines right before an iteration line or the end; the units' entries then picked by a mask over the
entries) instead of the windows over every line's stream rank, and `_lane_entries` keeps its entries as they are
where every line holding the literal is one; against the code it replaced, verbatim in
tests/parsers/_meg14_ref.py: whole `_mixed.parse` results on the benchmark's Megatron logs cut at random lines
and edited (lines of the stream, of other ranks, of other streams' blocks put in and between units, headers moved
away or dropped, a second stream, CRLF, non-ASCII, mutated lines), and on the fixtures' step logs grown past the
big-chunk size."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import polars as pl
import pytest

from bench import big_steps
from parsers import _mixed as M  # noqa: N812
from parsers import step_log as S  # noqa: N812
from parsers.base import FileContext, ParseResult
from tests.conftest import assert_same_result, mutated
from tests.parsers import _meg14_ref as R  # noqa: N812
from tests.parsers.test_steplog_s8 import _files, _grown

_MIN = 48
"""The lane's fewest units in these tests (`_MEG_MIN`, `_MEG_UNITS`, and `_LANE_MIN` at most, patched on both
sides: small chunks take the lane)."""


def _ctx(first: int = 1) -> FileContext:
    return FileContext(path="n1/train.log", node="n1", first_line=first, year_hint=2026, collected_at=None)


def _same(lines: list[str | None], first: int = 1, small: bool = True) -> tuple[ParseResult, list[bool]]:
    """`_mixed.parse` of `lines` by the new code and by the old one agree; also whether the new one's framing
    fast path took each lane call (None: it did not)."""
    s = pl.Series("literal", lines, dtype=pl.String)
    fast: list[bool] = []
    one = S._one_stream_units

    def spy(*a: object) -> object:
        got = one(*a)  # type: ignore[arg-type]
        fast.append(got is not None)
        return got

    with pytest.MonkeyPatch.context() as m:
        if small:
            m.setattr(S, "_MEG_MIN", _MIN)
            m.setattr(S, "_MEG_UNITS", _MIN)
            m.setattr(R, "_MEG_MIN", _MIN)
            m.setattr(S, "_LANE_MIN", min(S._LANE_MIN, _MIN))
        with m.context() as old:
            old.setattr(S, "_megatron_lane", R._megatron_lane)
            old.setattr(S, "_lane_entries", R._lane_entries)
            want = M.parse(S, s, _ctx(first))
        m.setattr(S, "_one_stream_units", spy)
        got = M.parse(S, s, _ctx(first))
    assert_same_result(got, want)
    return got, fast


def _log(seed: int, n: int, skip: int = 0) -> list[str]:
    """`n` lines of the benchmark's Megatron log (a 32-rank job: the units in stream 31), from line `skip`."""
    gen = big_steps._megatron(big_steps._Job(seed * 4, 4, 8))
    return list(itertools.islice(gen, skip, skip + n))


def _is_unit_line(x: str) -> bool:
    return x.startswith("31:") and ("] iteration " in x or "time across ranks" in x or ".: (" in x)


def test_plain_takes_fast_path() -> None:
    rnd = random.Random(0)
    for skip in (0, 150, 311, 1000):
        got, fast = _same(_log(1, 2400 + rnd.randrange(300), skip), first=rnd.choice([1, 1001]))
        assert fast == [True]
        assert got.tables["steps"].height > _MIN


def test_benchmark_cut_big() -> None:
    """A piece past the real `_MEG_MIN` (no patch), cut at random lines."""
    rnd = random.Random(3)
    lines = _log(2, S._MEG_MIN * 18 + 3000, rnd.randrange(5000))
    _, fast = _same(lines, small=False)
    assert fast == [True]


_OTHERS = [
    "31: /usr/lib/python3/site-packages/torch/utils/checkpoint.py:464: UserWarning: use_reentrant",
    "31:   warnings.warn(",
    "31:  validation loss at iteration 300 | lm loss value: 2.174538E+00 | lm loss PPL: 8.796138E+00 | ",
    "31: iteration 5 loss: 1.0",
    "31: step=3 loss=2.0",
    "31:     forward-compute ....: (1.0, 2.0)",
    "31: (min, max) time across ranks (ms):",
    "31:     other-timer ....: (1.0)",
    "31:  [2025-03-02 17:33:57] iteration       7/  500000 | lm loss: 2.0 |",
    " 3:   warnings.warn(",
    " 0: (min, max) time across ranks (ms):",
    " 0:     save-checkpoint ................................: (21234.50, 21301.70)",
    " 8: [Rank 8] (after 32000 iterations) memory (MB) | allocated: 41242.5000 | max allocated: 61242.2500",
    "",
    "   ",
    "31: [2025-03-02 17:33:57] iteration 1/ 10 | lm loss: 2.0 |",
    "16:  [2025-03-02 17:33:57] iteration       7/  500000 | lm loss: 2.0 |",
    "31:     forward-compute ....: (1.0, 2.0)\r",
    "31:     forward-compute ....: (1,0, 2.0)",
    "31:     forward-cömpute ....: (1.0, 2.0)",
    "31: 31: (min, max) time across ranks (ms):",
    "[rank31]:31: x",
    "31: [rank 31] hello: (1.0, 2.0)",
    "x" * 20,
]


def _edited(rnd: random.Random, lines: list[str], k: int) -> list[str]:
    """`lines` with `k` random edits: a line of `_OTHERS` put in (often right before or after a unit line),
    a unit line moved, dropped, doubled or mutated, or a run of other ranks' lines put in."""
    out = list(lines)
    for _ in range(k):
        at = rnd.randrange(len(out) + 1)
        how = rnd.random()
        if how < 0.45:
            out.insert(at, rnd.choice(_OTHERS))
        elif how < 0.55:
            out[at:at] = [f"{r:>2}: chatter {r}" for r in rnd.choices(range(31), k=rnd.randint(1, 16))]
        elif how < 0.65 and at < len(out):
            del out[at]
        elif how < 0.75 and at < len(out):
            out.insert(rnd.randrange(len(out)), out[at])
        elif how < 0.85 and at < len(out):
            out[at] = mutated(rnd, out[at], " .:,()0123456789-31[]|\u00e9\r", 2, 3)
        elif at < len(out):
            out[at] = out[at] + rnd.choice(["\r", " \u00e9", " ", "\x1b[0m"])
    return out


@pytest.mark.parametrize("seed", range(14))
def test_edited(seed: int) -> None:
    rnd = random.Random(seed)
    lines = _log(seed % 3, 1400 + rnd.randrange(400), rnd.randrange(400))
    _same(_edited(rnd, lines, rnd.choice([1, 2, 4, 12])), first=rnd.choice([1, 1001]))


@pytest.mark.parametrize("seed", range(6))
def test_others_around_units(seed: int) -> None:
    """Lines of the stream (and of others) right before an iteration line, right after a unit, inside one,
    between an iteration line and its header: each place the fast path takes or leaves to the general code."""
    rnd = random.Random(100 + seed)
    lines = _log(seed, 1300, rnd.randrange(300))
    its = [i for i, x in enumerate(lines) if x.startswith("31:") and "] iteration " in x]
    out = list(lines)
    for i in sorted(rnd.sample(its, 3), reverse=True):
        place = rnd.choice([i, i + 1, i + 2, i + 7, i - 1])
        out[place:place] = rnd.sample(_OTHERS[:5] + _OTHERS[9:15], rnd.randint(1, 3))
    _same(out)


def test_fast_path_places() -> None:
    """The stream's other lines right before iteration lines (taken) and inside a unit (not taken); a header
    more than `ATTACH_GAP` lines below its iteration line, a second stream (not taken)."""
    lines = _log(5, 1500, 200)
    its = [i for i, x in enumerate(lines) if x.startswith("31:") and "] iteration " in x]
    before = list(lines)
    for i in reversed(its[5:40:7]):
        before[i:i] = [_OTHERS[0], _OTHERS[1]]
    assert _same(before)[1] == [True]
    entry = list(lines)  # (a block entry right after a unit: the lane leaves the whole to the general code)
    entry.insert(its[12], "31:     other-timer ....: (1.0)")
    assert _same(entry)[1] == [True]
    inside = list(lines)
    inside.insert(its[20] + 5, _OTHERS[0])
    assert _same(inside)[1] == [False]
    inside[its[20] + 5] = _OTHERS[1]  # (a line the triage leaves out: in no stream, the unit goes on)
    assert _same(inside)[1] == [True]
    far = list(lines)
    far[its[30] + 1 : its[30] + 1] = [f" 3: chatter {j}" for j in range(S.ATTACH_GAP + 1)]
    assert _same(far)[1] == [False]
    two = list(lines)
    two.insert(its[10], "16:  [2025-03-02 17:33:57] iteration       7/  500000 | lm loss: 2.0 |")
    _same(two)
    near = list(lines)  # (an other line of the stream within `ATTACH_GAP` of an iteration line: checked)
    for i in reversed(its[3:9]):
        near[i + 1 : i + 1] = [" 3: x"] * 2
    assert _same(near)[1] == [True]


def test_no_units_and_odd() -> None:
    lines = _log(6, 900, 0)
    _same([x for x in lines if not _is_unit_line(x) or "] iteration " in x])
    _same([x.replace("31:", " 0:", 1) for x in lines])
    _same([x + "\r" for x in lines])
    _same([None if i % 97 == 0 else x for i, x in enumerate(lines)])


def _step_files() -> list[Path]:
    files = _files()
    meg = [p for p in files if "time across ranks" in p.read_text(errors="replace")]
    return meg[:6]


@pytest.mark.parametrize("path", _step_files(), ids=lambda p: p.name)
def test_files_grown(path: Path) -> None:
    lines = path.read_text(errors="replace").splitlines()
    _same(lines)
    _same(_grown(lines, 2000))
