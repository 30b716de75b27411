"""step_log lanes of the big-chunk throughput round (issue 10) against their plain forms: `_own_time` (dates
read by offsets) against `_own_time_re`, `_present` given `_titan_pre` against the full scan, `_phase_values`
(by position per distinct timer-name list) against `_phase_values_join`."""

from __future__ import annotations

import random

import polars as pl
import pytest

from parsers import _step_grammars as g
from parsers import step_log as S  # noqa: N812

_PREFIXES = ("", "[titan] ", "INFO ", "[rank0]: ", "x" * 39, "x" * 41, "é ", "- ", "a1 ")
_TAILS = (" - root - INFO - step: 1", "", "Z rest", "+01:00 x", " x", "x", "\u0663 x", ".5", ",7 x")


def _line(rnd: random.Random) -> str:
    date = f"{rnd.choice(['2025', '2024', '1999'])}-{rnd.choice(['01', '02', '12', '13'])}-"
    date += rnd.choice(["01", "28", "29", "30", "31"])
    time = f"{rnd.randint(0, 24):02d}:{rnd.randint(0, 59):02d}:{rnd.choice(['00', '59', '60', '07'])}"
    k = rnd.choice([0, 1, 2, 3, 3, 3, 6, 7, 9, 10])
    frac = "" if k == 0 else rnd.choice(".,") + "".join(rnd.choice("0123456789") for _ in range(k))
    if rnd.random() < 0.05:
        frac = rnd.choice([".", ",", ".x", ",\u0663", "\u0663"])
    return rnd.choice(_PREFIXES) + date + rnd.choice("  T") + time + frac + rnd.choice(_TAILS)


def _uniform(rnd: random.Random, sep: str, k: int) -> str:
    frac = "".join(rnd.choice("0123456789") for _ in range(k))
    date = f"2025-03-0{rnd.randint(1, 9)}"
    return f"[titan] {date}{sep}0{rnd.randint(0, 9)}:1{rnd.randint(0, 9)}:2{rnd.randint(0, 9)},{frac} - x"


@pytest.mark.parametrize("seed", range(6))
def test_own_time_lane_equals_regexes(seed: int) -> None:
    rnd = random.Random(seed)
    n = S._LANE_MIN + rnd.randint(0, 3000)
    if seed % 2:  # one separator, offset and fraction length (plain slices), one odd line or none
        sep, k = rnd.choice(" T"), rnd.choice([1, 3, 6])
        rows = [_uniform(rnd, sep, k) for _ in range(n)]
        if seed % 3:
            rows[rnd.randrange(n)] = _line(rnd)
    else:
        rows = [_line(rnd) for _ in range(n)]
    coll = [None if rnd.random() < 0.97 else "2025-01-01T00:00:00Z" for _ in range(n)]
    seg = pl.DataFrame({"text": rows, "coll_ts": coll}, schema={"text": pl.String, "coll_ts": pl.String})
    for args in [(2026, False, False), (2026, True, True), (None, False, True)]:
        got, want = S._own_time(seg, *args), S._own_time_re(seg, *args)
        assert got.schema == want.schema
        assert got.equals(want, null_equal=True), args


_TITAN_TAIL = "step:  7  loss:  2.0  memory: 63.04GiB(79.98%)  tps: 16,596  tflops: 799.60  mfu: 80.85%"
_HEADS = (
    "[titan] 2025-03-05 19:33:34,104 - root - INFO - ",
    "",
    "x completed ",
    "completed ",
    "(min, max) time across rank",
    "across rank",
    " iteration 3 ",
    "tok/",
    "Step ",
)


@pytest.mark.parametrize("seed", range(4))
def test_present_with_titan_heads(seed: int) -> None:
    """`_present` given `_titan_pre` finds the gates the full scan finds, gates running into `step:` too."""
    rnd = random.Random(seed)
    n = S._LANE_MIN + rnd.randint(0, 500)
    rows = [_HEADS[0] + _TITAN_TAIL] * n
    for _ in range(rnd.randint(0, 3)):
        rows[rnd.randrange(n)] = rnd.choice(_HEADS) + _TITAN_TAIL
    if seed < 2:  # (`completed step:` only across the cut: the lines without a `step:` hold no gate)
        rows[rnd.randrange(n)] = rnd.choice(_HEADS[2:4]) + _TITAN_TAIL
    if seed % 2:
        rows[rnd.randrange(n)] = rnd.choice(_HEADS) + "step: x"
    seg = pl.DataFrame({"text": rows})
    pre = S._titan_pre(seg)
    assert pre is not None
    assert S._present(seg, titan=pre) == S._present(seg)


def _timer_rows(rnd: random.Random, n: int, lists: int) -> pl.DataFrame:
    names = [name for phase in g.PHASES.values() for name in phase][::3]
    names += ["optimizer", "data-iterator", None]
    shapes = [[rnd.choice(names) for _ in range(rnd.randint(0, 8))] for _ in range(lists)]
    rows = []
    for _ in range(n):
        if rnd.random() < 0.03:
            rows.append(None)
            continue
        timers = []
        for name in rnd.choice(shapes):
            if rnd.random() < 0.02:
                timers.append(None)
                continue
            max_ms = None if rnd.random() < 0.1 else rnd.random() * 100
            ms = None if rnd.random() < 0.5 else rnd.random() * 100
            timers.append(
                {"name": name, "ms": ms, "min_ms": None, "max_ms": max_ms, "min_rank": None, "max_rank": None}
            )
        rows.append(timers)
    return pl.DataFrame({"timers": pl.Series(rows, dtype=pl.List(S._TIMER))})


@pytest.mark.parametrize("seed", range(6))
def test_phase_values_by_position_equals_join(seed: int) -> None:
    rnd = random.Random(seed)
    lists = [1, 3, 20, S._SIG_MAX + 40, 2, 1][seed]
    rows = _timer_rows(rnd, rnd.choice([0, 1, 50, 3000]) if seed % 3 else 2000, lists)
    got, want = S._phase_values(rows), S._phase_values_join(rows)
    assert list(got) == list(want)
    for col in want:
        assert got[col].name == want[col].name and got[col].dtype == want[col].dtype
        assert got[col].equals(want[col], null_equal=True), col
