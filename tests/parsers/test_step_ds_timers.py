"""Logs of DeepSpeed `wall_clock_breakdown` timer lines and nothing else (a rank's `[Rank N] time (ms) | fwd:
... | step: ...` under a per-rank redirect): the general reading understands every line and makes no row (a
timer line with no step line above it in its stream is an orphan), and says so in a note. `step_log`'s
timer-only lane (`_timer_only`, `_timer_only_result`, `_timer_only_many`) gives that result without the
general reading: the same tables, accounting, notes, `partial` and `node`, file by file and in batches; a log
with any other line (a step line, a launcher prefix, a blank, a pair named like another grammar's literal)
goes the general way."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import step_log as S  # noqa: N812
from parsers.base import FileContext
from tests.parsers.test_step_many import _assert_same

FIXTURES = Path(__file__).parent.parent / "fixtures" / "step-log"
FIXTURE = FIXTURES / "synthetic_deepspeed_wall_clock_breakdown_torchrun_prefix.log"
HEAD = "[2025-05-01 04:29:05,312] [INFO] [logging.py:96:log_dist] [Rank 0]"
NAMES = [
    ["fwd", "bwd", "bwd_inner", "bwd_allreduce", "step"],
    ["fwd_microstep", "bwd_microstep", "bwd_inner_microstep", "bwd_allreduce_microstep", "step_microstep"],
    ["forward", "backward", "backward_inner", "backward_allreduce", "optimizer_step"],
    ["fwd"],
]


def _line(rnd: random.Random, rank: int, t: datetime, names: list[str]) -> str:
    pairs = " | ".join(f"{n}: {rnd.uniform(0, 20000):.2f}" for n in names)
    stamp = f"{t:%Y-%m-%d %H:%M:%S},{t.microsecond // 1000:03d}"
    return f"[{stamp}] [INFO] [logging.py:96:log_dist] [Rank {rank}] time (ms) | {pairs}"


def _file(rnd: random.Random, n: int) -> list[str]:
    ranks = rnd.choice([[rnd.randrange(8000)], [0, 1, 2, 3]])
    names = rnd.choice(NAMES)
    t = datetime(2025, 5, 1, 4, 29, 5, 312000) + timedelta(seconds=rnd.uniform(0, 1e5))
    out = []
    for _ in range(n):
        t += timedelta(seconds=rnd.uniform(0, 12))
        out.append(_line(rnd, rnd.choice(ranks), t, names))
    return out


def _items(files: list[list[str]]) -> list[tuple[pl.Series, FileContext]]:
    return [
        (
            pl.Series("line", lines, dtype=pl.String),
            FileContext(
                path=f"node-{i:03d}/train_rank{8 * i}.log", node=f"node-{i:03d}", first_line=1, year_hint=2025
            ),
        )
        for i, lines in enumerate(files)
    ]


@pytest.fixture
def lanes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(S, "_LANE_MIN", 0)


@pytest.mark.parametrize("seed", range(8))
def test_a_timer_only_log_reads_as_the_general_reading_reads_it(seed: int, lanes_on: None) -> None:
    rnd = random.Random(seed)
    lines, ctx = _items([_file(rnd, rnd.choice([1, 3, 40, 700]))])[0]
    assert S._timer_only(lines)
    got, want = S.parse(lines, ctx), S._parse(lines, ctx)
    _assert_same(got, want, ctx.path)
    # every line understood, no row, and the note that says why
    assert (want.parsed, want.unrecognized, want.tables["steps"].height) == (len(lines), 0, 0)
    assert want.notes == [S.ORPHAN_TIMERS_NOTE]


@pytest.mark.parametrize(
    "odd",
    [
        f"{HEAD} step=10, skipped=0, lr=[0.0001], mom=[(0.9, 0.95)]",
        f"[default0]:{HEAD} time (ms) | fwd: 1.00 | step: 2.00",
        "",
        f"{HEAD} time (ms) | fwd: 1.00 | loss: 2.00",
        f"{HEAD} time (ms) | fwd: 1.00 | train_time: 2.00",
        f"{HEAD} time (ms) | fwd: 1.00 | iteration: 2.00",
        f"{HEAD} time (ms) | fwd: 1.00 | step: -2.00",
        f"{HEAD} time (ms) | Fwd: 1.00",
        f"{HEAD} time (ms) |",
        "NCCL INFO Channel 00/24 :    0   1   2   3",
    ],
)
@pytest.mark.parametrize("where", [0, 5, -1])
def test_a_log_with_another_line_goes_the_general_way(odd: str, where: int, lanes_on: None) -> None:
    rnd = random.Random(where)
    text = _file(rnd, 12)
    text.insert(where if where >= 0 else len(text), odd)
    lines, ctx = _items([text])[0]
    assert not S._timer_only(lines)
    _assert_same(S.parse(lines, ctx), S._parse(lines, ctx), ctx.path)


def test_the_fixture_of_a_rank_0_log_with_step_lines_keeps_its_rows_and_has_no_note(lanes_on: None) -> None:
    text = [x for x in FIXTURE.read_text().splitlines() if not x.startswith("#SOURCE")]
    lines, ctx = _items([text])[0]
    assert not S._timer_only(lines)
    got = S.parse(lines, ctx)
    assert got.tables["steps"].height > 0 and got.notes == []


@pytest.mark.parametrize("seed", range(6))
def test_batches_with_timer_only_logs_equal_parse_file_by_file(seed: int) -> None:
    """`parse_many` (the lane for the timer-only files, the general batch for the others) == `parse` of each
    file (which, below `_LANE_MIN` lines, is the general reading: the lane must agree with it there too)."""
    rnd = random.Random(seed)
    others = [x for x in FIXTURE.read_text().splitlines() if not x.startswith("#SOURCE")]
    files = [_file(rnd, rnd.choice([1, 2, 30, 200])) for _ in range(rnd.choice([2, 5, 12]))]
    for _ in range(rnd.choice([0, 1, 2])):  # (files of other lines, or one odd line, in the batch)
        k = rnd.randrange(len(files))
        files[k] = others if rnd.random() < 0.5 else files[k] + ["[2025-05-01 04:29:05,312] [INFO] hello"]
    rnd.shuffle(files)
    items = _items(files)
    want = [S.parse(lines, ctx) for lines, ctx in items]
    got = S.parse_many(items)
    for (_, ctx), g, w in zip(items, got, want, strict=True):
        _assert_same(g, w, ctx.path)
    # and the general batch reading of the same files gives them too (notes included)
    for (_, ctx), g, w in zip(items, S._parse_batch(items), want, strict=True):
        _assert_same(g, w, ctx.path)


def _polars_timer_only_lines(text: pl.Series) -> pl.Series:
    """`_timer_only_lines` as the regex and the gates' search give it (the path the scanner stands in for)."""
    ok = text.str.contains(S._rx(S._DS_TIMER_LINE)).fill_null(False)
    return ok & ~text.str.contains_any(S._DS_OTHER_GATES).fill_null(True)


_PIECES = [
    "fwd", "bwd_inner", "step", "loss", "train_time", "iteration", "performance", "fwd_dt", "iter", "x",
    "1.00", "17", "0.5", "1.", ".5", "-2", "1e3", "123456789012345678901234567890", "",
    " | ", ": ", "|", ":", " ", "  ", "\r", "é", "{", "=", "%|", "Step ", "across ranks", "0",
    ".", "-", "_", ",", "(", ")", "[", "]", "A", "z", "\t",
]


@st.composite
def _timer_lines(draw: st.DrawFn) -> str:
    """A line about `_DS_TIMER_LINE`'s shape: timers of usual and gate-like names and odd numbers, or such a
    line with a piece cut out, doubled or put in somewhere (a prefix, a timestamp digit, a name's case)."""
    n = draw(st.integers(1, 4))
    # (mostly names and numbers of the grammar; else near misses, or anything)
    good = st.sampled_from(_PIECES[:10])
    name = st.one_of(good, good, good, good, st.text("az_.-A0", min_size=1, max_size=4), st.text("az_.-A0: |é\r", max_size=5))
    good = st.sampled_from(["1.00", "17", "0.5", "5172.40", "99999999999999999999.1"])
    value = st.one_of(good, good, good, good, st.text("019.", min_size=1, max_size=5), st.text("019.-e |:", max_size=5))
    names = draw(st.lists(name, min_size=n, max_size=n))
    values = draw(st.lists(value, min_size=n, max_size=n))
    rank = draw(st.sampled_from(["0", "6264", "1234567890123"]))
    line = f"{HEAD[:-8]}[Rank {rank}] time (ms) | " + " | ".join(f"{a}: {b}" for a, b in zip(names, values, strict=True))
    for _ in range(draw(st.integers(0, 2))):
        # (mostly among the timers: where the shapes differ)
        at = draw(st.integers(len(line) - 40, len(line)) | st.integers(0, len(line)))
        cut, piece = draw(st.integers(0, 3)), draw(st.sampled_from(_PIECES))
        line = line[: max(0, at)] + piece + line[max(0, at) + cut :]
    return line


@given(lines=st.lists(_timer_lines(), min_size=1, max_size=30))
@settings(max_examples=400, deadline=None)
def test_the_compiled_timer_lines_are_those_of_the_regex_and_gates(lines: list[str]) -> None:
    """The scanner (`parsers._fastscan.ds_timers`, `_timer_only_scanned`) takes exactly the lines the regex and
    the gates' search take: on timer lines with gate-like names, odd numbers, pieces cut out or put in."""
    text = pl.Series("line", lines, dtype=pl.String)
    got = S._timer_only_scanned(text)
    assert got is not None
    assert got.to_list() == _polars_timer_only_lines(text).to_list()


def test_the_timer_scanner_leaves_to_the_regex_what_it_does_not_number() -> None:
    """A null line, more shapes than it numbers (257 distinct name lists), a shape over 1024 bytes, or a gate
    with a digit in it: None, and `_timer_only_lines` gives what the regex path gives."""
    rnd = random.Random(1)
    base = _file(rnd, 5)
    many = [_line(rnd, 0, datetime(2025, 5, 1), [f"t{'_' * (i % 9)}{chr(97 + i % 26)}{chr(97 + i // 26)}"]) for i in range(257)]
    long = _line(rnd, 0, datetime(2025, 5, 1), ["x" * 1100])
    for lines in ([*base, None], many, [*base, long]):
        text = pl.Series("line", lines, dtype=pl.String)
        assert S._timer_only_scanned(text) is None
        assert S._timer_only_lines(text).to_list() == _polars_timer_only_lines(text).to_list()
    assert S._timer_only_scanned(pl.Series("line", many[:256], dtype=pl.String)) is not None
    gates = S._DS_OTHER_GATES
    try:
        S._DS_OTHER_GATES = [*gates, "fwd: 1"]
        assert S._timer_only_scanned(pl.Series("line", base, dtype=pl.String)) is None
    finally:
        S._DS_OTHER_GATES = gates
