"""`step_log.parse_each` (what `_mixed` reads of the files that hold both grammars, in its second round) gives
`parse(lines, ctx, entries)` of each file under its `ascii_scope`: the files a lane takes by the lane, the
others by one general reading (`_parse_batch`) when they are two or more of one year, else file by file."""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest

from parsers import step_log
from parsers.base import FileContext, ParseResult, lines_from_bytes
from tests.conftest import assert_same_result
from tests.parsers.test_step_megatron_lane import _TIMERS
from tests.parsers.test_step_megatron_lane import _log as megatron_log
from tests.parsers.test_step_titan_lane import _log as titan_log

FIXTURES = Path(__file__).parent.parent / "fixtures"
STEP_FIXTURES = sorted((FIXTURES / "step-log").glob("*.log"))
MEGATRON_2023 = FIXTURES / "step-log" / "megatron_lm_2023_gpt345m_dp4_tp2pp2.log"

Item = tuple[pl.Series, FileContext, step_log.MegEntries | None, bool]


def _ctx(i: int, year: int | None = 2025) -> FileContext:
    return FileContext(path=f"node{i:03d}/train.log", node=f"node{i:03d}", year_hint=year)


def _item(lines: pl.Series, ctx: FileContext, entries: bool = False) -> Item:
    """An item as `_mixed` makes it: `ascii` what it vouches for (`is_ascii` of the lines), entries or not."""
    ascii = step_log.is_ascii(lines)
    with step_log.ascii_scope(ascii):
        found = step_log.meg_entry_lines(lines) if entries else None
    return lines, ctx, found, ascii


def _one_by_one(items: list[Item]) -> list[ParseResult]:
    out = []
    for lines, ctx, entries, ascii in items:
        with step_log.ascii_scope(ascii):
            out.append(step_log.parse(lines, ctx, entries))
    return out


def _check(items: list[Item]) -> list[ParseResult]:
    got = step_log.parse_each(items)
    assert len(got) == len(items)
    for (_, ctx, _, _), g, w in zip(items, got, _one_by_one(items), strict=True):
        assert_same_result(g, w)
    return got


class _Calls:
    """Counts the calls of the general reading of whole files, batched and alone (wrapping the real
    functions)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.batches: list[int] = []
        self.alone = 0
        batch, alone = step_log._parse_batch, step_log._parse

        def counted_batch(items: list[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
            self.batches.append(len(items))
            return batch(items)

        def counted_alone(*args: object, **kwargs: object) -> ParseResult:
            if len(args) < 3 and kwargs.get("numbers") is None:  # (not a lane's reading of its other lines)
                self.alone += 1
            return alone(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(step_log, "_parse_batch", counted_batch)
        monkeypatch.setattr(step_log, "_parse", counted_alone)


def _real_megatron(times: int) -> pl.Series:
    """The real Megatron log of 2023 (NCCL warnings, validation rules, 108 runs' chatter) repeated: past the
    lanes' size, handed back by the Megatron lane (too much chatter for its share rule)."""
    lines = [x for x in MEGATRON_2023.read_text().splitlines() if not x.startswith("#SOURCE")]
    return pl.Series("literal", lines * times, dtype=pl.String)


def test_every_fixture_with_and_without_entries() -> None:
    rnd = random.Random(11)
    items = [
        _item(lines_from_bytes(p.read_bytes()), _ctx(i), rnd.random() < 0.5)
        for i, p in enumerate(STEP_FIXTURES)
    ]
    assert any(a for *_, a in items) and not all(a for *_, a in items)  # (ASCII and not: Unicode classes)
    _check(items)
    order = list(range(len(items)))
    rnd.shuffle(order)
    for k in range(0, len(order), 7):
        _check([items[i] for i in order[k : k + 7]])


def test_lanes_take_their_files_and_the_others_share_one_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    # (every file past the lanes' own size tries them here: the torchtitan log too)
    monkeypatch.setattr(step_log, "BATCH_LANE_LINES", step_log._LANE_MIN)
    big_meg = pl.Series("literal", megatron_log(1, k=len(_TIMERS)), dtype=pl.String)
    big_titan = pl.Series("literal", titan_log(2), dtype=pl.String)
    chatter = _real_megatron(60)
    items = [
        _item(chatter, _ctx(0), entries=True),
        _item(big_meg, _ctx(1), entries=True),
        _item(chatter, _ctx(2)),
        _item(big_titan, _ctx(3)),
        _item(lines_from_bytes(MEGATRON_2023.read_bytes()), _ctx(4)),
    ]
    with step_log.ascii_scope(True):
        assert step_log._megatron_lane(chatter, _ctx(0)) is None
        assert step_log._megatron_lane(big_meg, _ctx(1)) is not None
        assert step_log._titan_lane(big_titan, _ctx(3)) is not None
    want = _one_by_one(items)
    calls = _Calls(monkeypatch)
    got = step_log.parse_each(items)
    # the lanes took files 1 and 3; files 0, 2 and 4 were read together, none alone
    assert calls.batches == [3] and calls.alone == 0
    for g, w in zip(got, want, strict=True):
        assert_same_result(g, w)
    assert sum(r.tables["steps"].height for r in got) > 1000


def test_files_of_other_years_or_one_file_are_read_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = lines_from_bytes(MEGATRON_2023.read_bytes())
    calls = _Calls(monkeypatch)
    _check([_item(lines, _ctx(0, 2024)), _item(lines, _ctx(1, 2025))])
    assert calls.batches == [] and calls.alone == 4  # (twice each: `_check`'s `parse` too)
    calls.alone = 0
    _check([_item(lines, _ctx(0))])
    assert calls.batches == [] and calls.alone == 2


def test_a_batch_that_fails_is_read_file_by_file(monkeypatch: pytest.MonkeyPatch) -> None:
    items = [_item(lines_from_bytes(p.read_bytes()), _ctx(i)) for i, p in enumerate(STEP_FIXTURES[:6])]
    want = _one_by_one(items)

    def broken(items: object) -> list[ParseResult]:
        raise ValueError("a bug of the batched reading")

    monkeypatch.setattr(step_log, "_parse_batch", broken)
    for g, w in zip(step_log.parse_each(items), want, strict=True):
        assert_same_result(g, w)


def test_an_empty_list() -> None:
    assert step_log.parse_each([]) == []


def test_parse_many_gives_each_log_to_its_lane(monkeypatch: pytest.MonkeyPatch) -> None:
    # two Megatron logs the lane takes (a batch's general reading costs them twice the lane), two fixtures
    # no lane takes: those two read together
    megs = [pl.Series("literal", megatron_log(s, k=len(_TIMERS)), dtype=pl.String) for s in (1, 2)]
    small = [lines_from_bytes(p.read_bytes()) for p in STEP_FIXTURES[:2]]
    items = [(megs[0], _ctx(0)), (small[0], _ctx(1)), (megs[1], _ctx(2)), (small[1], _ctx(3))]
    want = [step_log.parse(lines, ctx) for lines, ctx in items]
    calls = _Calls(monkeypatch)
    got = step_log.parse_many(items)
    assert calls.batches == [2] and calls.alone == 0
    for g, w in zip(got, want, strict=True):
        assert_same_result(g, w)


def test_small_files_of_a_batch_skip_the_lanes(monkeypatch: pytest.MonkeyPatch) -> None:
    # a Megatron log the lane would take, of fewer than `BATCH_LANE_LINES` lines, read with the others by the
    # general reading (cheaper there); alone, by the lane
    meg = pl.Series("literal", megatron_log(3, n_iter=600, k=len(_TIMERS)), dtype=pl.String)
    assert step_log._LANE_MIN <= len(meg) < step_log.BATCH_LANE_LINES
    with step_log.ascii_scope(True):
        assert step_log._megatron_lane(meg, _ctx(0)) is not None
    small = lines_from_bytes(STEP_FIXTURES[0].read_bytes())
    items = [_item(meg, _ctx(0)), _item(small, _ctx(1))]
    want = _one_by_one(items)
    lanes: list[int] = []
    real = step_log._lanes
    monkeypatch.setattr(step_log, "_lanes", lambda lines, *a: lanes.append(len(lines)) or real(lines, *a))
    calls = _Calls(monkeypatch)
    for g, w in zip(step_log.parse_each(items), want, strict=True):
        assert_same_result(g, w)
    assert lanes == [] and calls.batches == [2]
    got = step_log.parse_each(items[:1])
    assert lanes == [len(meg)] and calls.batches == [2] and calls.alone == 0
    assert_same_result(got[0], want[0])
