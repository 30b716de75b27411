"""step_log's test for one-line timers (`_timer_line_hits`: lines cut at their first `time (ms)`, on
`_LANE_MIN` lines or more) against `TIMER_LINE_RE` on mutated DeepSpeed and Megatron timer lines."""

from __future__ import annotations

import random

import polars as pl
import pytest

from parsers import _step_grammars as g
from parsers import step_log as S  # noqa: N812
from tests.conftest import mutated

_LINES = (
    "[default7]:[2025-03-02 12:09:04,335] [INFO] [logging.py:96:log_dist] [Rank 7] time (ms) | fwd: 446.11 | "
    "bwd: 906.03 | step: 118.60",
    "rank=3 time (ms) | a: 1",
    "time (ms)|x",
    " rank=12  time (ms) \u2003| a: 1 | time (ms) | b",
)
_ALPHABET = " ]|[rank=0123456789\n\r\u2003\t" + "time (ms)"


@pytest.mark.parametrize("seed", [1, 2])
def test_timer_line_hits_as_the_regex(seed: int) -> None:
    rnd = random.Random(seed)
    lines = []
    for _ in range(3 * S._LANE_MIN):
        lines.append(mutated(rnd, rnd.choice(_LINES), _ALPHABET, edits=3, span=3))
    lines += ["time (ms) | a: 1\n", "x]\ntime (ms)|", "a] time (ms) time (ms) |", "rank=1 time (ms)\n | a: 1"]
    text = pl.Series(lines).filter(pl.Series(lines).str.contains("time (ms)", literal=True))
    assert text.len() >= S._LANE_MIN
    hits, after = S._timer_line_hits(text)
    assert hits.equals(text.str.contains(g.TIMER_LINE_RE))
    assert after.equals(text.str.splitn("time (ms)", 2).struct.field("field_1"))
