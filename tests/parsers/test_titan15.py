"""titan15's changes to step_log's torchtitan lane give what the code they replace gives (kept verbatim in
`_titan15_ref`).

`_titan_steps`: where a file's step lines have one rank text (or none), their date-times converted without polars'
cache of converted strings (a memo: the same values) and the step times' windows (`over` the rank) left out (one
window, the whole column). `_titan_lane`: the candidates not gathered when every line is one.

Whole results are compared (tables, accounting, hand-backs): torchtitan logs of one rank, of none (bare lines), of
several and of both, step lines alone and with chatter, benchmark-shaped logs (`bench/big_steps`), with odd,
mutated, CRLF and non-ASCII lines, cut at random lines, and the fixtures; batches (`_titan_many`) of such files.
"""

from __future__ import annotations

import itertools
import random

import polars as pl
import pytest

from bench import big_steps
from parsers import step_log as S  # noqa: N812
from parsers.base import FileContext
from tests.conftest import assert_same_result, fixture_lines, mutated
from tests.parsers import _titan15_ref as R  # noqa: N812
from tests.parsers.test_step_titan_lane import _log
from tests.parsers.test_step_titan_many import _file, _items

_STEP = " - root - INFO - step: "


def _both(lines: list[str], first_line: int = 1) -> bool:
    """`_titan_lane` as it is against the reference (both hand back, or the same result); whether it took."""
    ser = pl.Series("line", lines, dtype=pl.String)
    ctx = FileContext(path="n/train.log", node="gpu-node-003", first_line=first_line, year_hint=2026)
    with S.ascii_scope(S.is_ascii(ser)):
        got, want = S._titan_lane(ser, ctx), R._titan_lane(ser, ctx)
    assert (got is None) == (want is None)
    if got is not None:
        assert_same_result(got, want)
    return got is not None


def _one_rank(lines: list[str], rank: str = "[rank3]:") -> list[str]:
    """The lines of one rank's envelope (a rank's own file: one window)."""
    return [line for line in lines if line.startswith(rank)]


def _bare(lines: list[str]) -> list[str]:
    """The lines without their `[rankN]:` envelopes (no rank: one window of nulls)."""
    return [line.split(":", 1)[1] if line.startswith("[rank") and "]:" in line else line for line in lines]


def _odd(lines: list[str], rnd: random.Random, k: int) -> list[str]:
    """`lines` with `k` of them made odd: CRLF, a non-ASCII digit or letter, mutated near the step line's
    separators and numbers, cut short, doubled spaces."""
    out = [*lines]
    for i in rnd.sample(range(len(out)), min(k, len(out))):
        s = out[i]
        out[i] = rnd.choice(
            [
                s + "\r",
                s.replace("1", "\u0661", 1),
                s.replace("e", "é", 1),
                mutated(rnd, s, "0123456789 ,.:-%[]()GiBé", 2, 3),
                s[: rnd.randrange(len(s) + 1)],
                s.replace("  ", "   ", 1),
                s.replace(" tps:", " wps:"),
                s.replace(":", ": ", 1),
            ]
        )
    return out


@pytest.mark.parametrize("seed", range(4))
def test_lane_same_as_reference(seed: int) -> None:
    """Logs of 8 ranks with chatter (the windows), one rank's lines, bare lines, both; cut at random lines."""
    rnd = random.Random(seed)
    lines = _log(seed)
    assert _both(lines, first_line=1 + seed)
    one = _one_rank(lines) * 8  # (past `_LANE_MIN`)
    assert _both(one)
    assert _both([line.replace("[rank3]:", "[rank003]:") if i % 7 == 0 else line for i, line in enumerate(one)])
    assert _both(_bare(lines))
    mixed = [*lines]
    for i in rnd.sample(range(len(mixed)), 50):
        mixed[i] = _bare([mixed[i]])[0]
    assert _both(mixed)
    assert _both((_one_rank(lines, "[rank0]:") + _bare(_one_rank(lines, "[rank1]:"))) * 4)  # (a rank and none)
    for _ in range(3):
        a = rnd.randrange(len(lines) // 2)
        _both(lines[a : a + rnd.randint(S._LANE_MIN, len(lines))], first_line=a + 1)


@pytest.mark.parametrize("seed", range(3))
def test_steps_alone_same_as_reference(seed: int) -> None:
    """Step lines alone (every line a candidate: no gather), of one rank, of none, of several."""
    lines = [line for line in _log(seed) if _STEP in line]
    assert _both(lines)
    assert _both(_one_rank(lines) * 10)
    assert _both(_bare(lines))
    assert _both(lines[:-1] + [lines[-1][:40]])  # (a cut last line: a line of another kind)


@pytest.mark.parametrize("seed", range(4))
def test_odd_lines_same_as_reference(seed: int) -> None:
    """Odd, mutated, CRLF and non-ASCII lines among the step lines (other lines, hand-backs)."""
    rnd = random.Random(seed)
    lines = _log(seed)
    for k in (1, 5, 40):
        _both(_odd(lines, rnd, k))
        _both(_odd(_one_rank(lines) * 8, rnd, k))
        _both(_odd([line for line in lines if _STEP in line], rnd, k))


@pytest.mark.parametrize("seed", range(2))
def test_big_steps_same_as_reference(seed: int) -> None:
    """The benchmark's torchtitan log (every rank, chatter, warnings): as it is, one rank of it, cut."""
    rnd = random.Random(seed)
    lines = list(itertools.islice(big_steps._torchtitan(big_steps._Job(seed, 1, 8)), 6000))
    assert _both(lines) or not any(_STEP in line for line in lines)
    assert _both(_one_rank(lines, "[rank2]:")) or len(_one_rank(lines, "[rank2]:")) < S._LANE_MIN
    steps = [line for line in lines if _STEP in line]
    if len(steps) >= S._LANE_MIN:
        assert _both(steps)
    a = rnd.randrange(len(lines) // 2)
    _both(lines[a:], first_line=a + 1)
    _both(_odd(lines, rnd, 30))


def test_fixtures_same_as_reference() -> None:
    for _name, lines in fixture_lines("step-log"):
        if len(lines) >= S._LANE_MIN:
            _both(lines)
        if sum(_STEP in line for line in lines) >= 1:
            _both((lines * (S._LANE_MIN // max(1, len(lines)) + 1))[: 4 * S._LANE_MIN])


@pytest.mark.parametrize("seed", range(4))
def test_many_same_as_reference(seed: int) -> None:
    """Batches of small torchtitan logs (`_titan_many`), as they are and with an odd line."""
    rnd = random.Random(seed)
    files = [_file(rnd, rnd.choice([1, 2, 30, 160])) for _ in range(rnd.choice([2, 5, 12]))]
    for fs in (files, [files[0], _odd(files[-1], rnd, 1)]):
        items = _items(fs, seed)
        got, want = S._titan_many(items), R._titan_many(items)
        assert (got is None) == (want is None)
        for g, w in zip(got or [], want or [], strict=True):
            assert_same_result(g, w)


@pytest.mark.parametrize("seed", range(6))
def test_many_of_one_rank_files_same_as_reference(seed: int) -> None:
    """Batches whose every file has one rank text, or none (a rank's own log, as a job writes them): their
    date-times converted without the cache and each file's rows one window (the row above in the file), not a
    window per (file, rank); with a file of two ranks among them, and with an odd line."""
    rnd = random.Random(seed)
    files = []
    for _ in range(rnd.choice([2, 5, 12])):
        lines = _file(rnd, rnd.choice([1, 2, 30, 160]))
        files.append(_bare(lines) if rnd.random() < 0.3 else _one_rank(lines, lines[0].split("]:")[0] + "]:"))
    for fs in (files, [*files, _file(random.Random(seed), 40)], [files[0], _odd(files[-1], rnd, 1)]):
        items = _items([f or _file(rnd, 3) for f in fs], seed)
        got, want = S._titan_many(items), R._titan_many(items)
        assert (got is None) == (want is None)
        for g, w in zip(got or [], want or [], strict=True):
            assert_same_result(g, w)


def test_one_value_a_file() -> None:
    """Each file's rows hold one value or only nulls; a null and a value differ, and so do two files' values
    only within a file."""
    def one(values: list[str | None], files: list[int]) -> bool:
        return S._one_value_a_file(pl.Series(values, dtype=pl.String), pl.Series(files, dtype=pl.Int32))

    assert one(["0", "0", "1", "1"], [0, 0, 1, 1])
    assert one([None, None, "3"], [0, 0, 1])
    assert one(["5"], [0])
    assert not one(["0", "1", "1"], [0, 0, 1])
    assert not one([None, "1"], [0, 0])
    assert not one(["1", None], [0, 0])
    assert not one(["2", "2", "2", "3"], [0, 1, 1, 1])
