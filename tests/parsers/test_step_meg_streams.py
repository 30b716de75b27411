"""step_log's Megatron lane on logs where several srun ranks print iteration lines and timer blocks (several
unit streams, their lines interleaved): the same rows as the general reading, each row with its own
stream's timers (the units are numbered over all streams, in line order of their iteration lines)."""

from __future__ import annotations

import random

import polars as pl
import pytest

from parsers import step_log as S  # noqa: N812
from tests.parsers.test_step_megatron_lane import _TIMERS, _ctx, _log, _same


def _two_streams(seed: int, drop_block: float = 0.0) -> list[str]:
    """`_log` with every line of rank 15 also printed by rank 14 right after it (other timer values), some
    of rank 14's timer entries left out (`drop_block`: the share of its units printed without entries)."""
    rnd = random.Random(seed)
    out: list[str] = []
    bare = False
    for x in _log(seed, k=len(_TIMERS)):
        out.append(x)
        if not x.startswith("15:"):
            continue
        if "] iteration " in x:
            bare = rnd.random() < drop_block
        elif bare and "..: (" in x:
            continue
        y = "14:" + x[3:]
        if "..: (" in y:  # (another value: a row that took rank 15's timers would differ)
            y = y[: y.rindex(")")] + "1)"
        out.append(y)
    return out


@pytest.mark.parametrize(("seed", "drop"), [(1, 0.0), (2, 0.3)])
def test_lane_two_unit_streams(seed: int, drop: float) -> None:
    lines = _two_streams(seed, drop)
    _same(lines, taken=None)
    if drop == 0.0:
        assert S._megatron_lane(pl.Series("literal", lines, dtype=pl.String), _ctx()) is not None
