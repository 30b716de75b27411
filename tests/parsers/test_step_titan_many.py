"""`step_log._titan_many` (batches of small torchtitan logs whose every line is a step line of the
`_TITAN_LINE` shape, read off one regex capture) gives what `parse` gives file by file, and what the general
batch reading `_parse_batch` gives: same tables, accounting, `partial` and `node`; batches it must hand back
(a line of another kind, a bad date, an infinite number, an empty file) go the general way, still equal."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import polars as pl
import pytest

from parsers import step_log as S  # noqa: N812
from parsers.base import FileContext
from tests.parsers.test_step_many import _assert_same


def _num(rnd: random.Random, lo: float, hi: float) -> str:
    v = rnd.uniform(lo, hi)
    return rnd.choice([f"{v:.2f}", f"{v:.4f}", f"{v:.0f}", f"{v:.1f}", "80.00", "0.0", "12"])


def _step_line(rnd: random.Random, rank: int | None, t: datetime, step: int) -> str:
    sp = lambda: " " * rnd.choice([1, 2, 2, 3])  # noqa: E731
    env = "" if rank is None else f"[rank{rank}]:"
    tps = rnd.uniform(100, 2_000_000)
    grad = f"grad_norm:{sp()}{_num(rnd, 0.1, 3)}{sp()}" if rnd.random() < 0.8 else ""
    return (
        f"{env}[titan] {t:%Y-%m-%d %H:%M:%S},{t.microsecond // 1000:03d} - root - INFO - "
        f"step:{sp()}{step:2}{sp()}"
        f"loss:{sp()}{_num(rnd, 0.5, 12)}{sp()}{grad}memory:{sp()}{_num(rnd, 1, 80)}GiB({_num(rnd, 1, 99)}%)"
        f"{sp()}{rnd.choice(['tps', 'wps'])}:{sp()}{rnd.choice([f'{tps:,.0f}', f'{tps:.0f}', f'{tps:,.2f}'])}"
        f"{sp()}tflops:{sp()}{_num(rnd, 1, 999)}{sp()}mfu:{sp()}{_num(rnd, 1, 99)}%"
    )


def _file(rnd: random.Random, n: int) -> list[str]:
    """A rank's log: `n` step lines of one or a few ranks (or none: bare lines), steps that repeat or go
    back, clocks that stand still or go back."""
    ranks = rnd.choice([[rnd.randrange(8000)], [None], [1, 2], [None, 3]])
    t = datetime(2025, 3, 3, 8, 0, 0, 123456) + timedelta(seconds=rnd.uniform(0, 1e6))
    step = rnd.randint(0, 500)
    out = []
    for _ in range(n):
        step += rnd.choice([1, 1, 1, 5, 0, -1])
        t += timedelta(seconds=rnd.choice([rnd.uniform(0, 30), 0.0, -1.0]))
        out.append(_step_line(rnd, rnd.choice(ranks), t, step))
    return out


def _items(files: list[list[str]], seed: int) -> list[tuple[pl.Series, FileContext]]:
    rnd = random.Random(seed)
    return [
        (
            pl.Series("line", lines, dtype=pl.String),
            FileContext(
                path=f"r{i:02d}/train_rank{i}.log",
                node=rnd.choice([f"r{i:02d}", "n"]),
                first_line=rnd.choice([1, 1, 17]),
                year_hint=2026,
            ),
        )
        for i, lines in enumerate(files)
    ]


def _check(items: list[tuple[pl.Series, FileContext]], lane: bool) -> None:
    assert (S._titan_many(items) is not None) == lane
    want = [S.parse(lines, ctx) for lines, ctx in items]
    for got in (S.parse_many(items), S._parse_batch(items)):
        for (_, ctx), g, w in zip(items, got, want, strict=True):
            _assert_same(g, w, ctx.path)


@pytest.mark.parametrize("seed", range(12))
def test_titan_batches_equal_parse(seed: int) -> None:
    rnd = random.Random(seed)
    files = [_file(rnd, rnd.choice([1, 2, 3, 30, 160])) for _ in range(rnd.choice([2, 5, 32]))]
    _check(_items(files, seed), lane=True)


@pytest.mark.parametrize(
    "odd",
    [
        "[rank3]:[titan] 2025-03-03 08:00:00,123 - root - INFO - Training starts at step 1.",  # chatter
        "",  # a blank line
        "[rank3]:[titan] 2025-02-30 08:00:00,123 - root - INFO - step: 3  loss:  2.0  memory: 1GiB(2%)  "
        "tps: 10  tflops: 1.0  mfu: 1.0%",  # a date that does not parse
        "[rank3]:[titan] 2025-03-03 08:00:00,123 - root - INFO - step: 3  loss:  1e400  memory: 1GiB(2%)  "
        "tps: 10  tflops: 1.0  mfu: 1.0%",
        "[rank3]:[titan] 2025-03-03 08:00:00,123 - root - INFO - step: 3  loss:  2.0  memory: 1GiB(2%)  "
        "tps: 10  tflops: 1.0  mfu: 1" + "0" * 400 + ".0%",  # a number that reads infinite
        "[rank99999999999]:[titan] 2025-03-03 08:00:00,123 - root - INFO - step: 3  loss:  2.0  "
        "memory: 1GiB(2%)  tps: 10  tflops: 1.0  mfu: 1.0%",  # a rank out of range
        "[rank3]:[titan] 2025-03-03 08:00:00,123 - root - INFO - step: 3  loss:  2.0  memory: 1GiB(2%)  tps",
        "-----Begin global rank 3 STDOUT-----",
        "[rank2]:\x1b[32mcoloured\x1b[0m",
    ],
)
def test_titan_batches_handed_back(odd: str) -> None:
    rnd = random.Random(len(odd))
    files = [_file(rnd, 20) for _ in range(4)]
    files[2].insert(rnd.randrange(len(files[2]) + 1), odd)
    _check(_items(files, 3), lane=False)


def test_titan_batch_with_an_empty_file_or_a_cut_line() -> None:
    rnd = random.Random(5)
    files = [_file(rnd, 20) for _ in range(3)]
    _check(_items([*files, []], 1), lane=False)
    files[1][-1] = files[1][-1][:60]  # (a last line cut short: a line of another kind)
    _check(_items(files, 2), lane=False)
