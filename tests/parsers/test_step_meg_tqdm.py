"""step_log's tqdm split lane (`_tqdm_match` on `_LANE_MIN` segments or more) against `TQDM_RE`'s groups on
mutated bars: with a rate, without one (`?`), and past the total (a negative remaining time, `<-`)."""

from __future__ import annotations

import random

import polars as pl
import pytest

from parsers import _step_grammars as g
from parsers import step_log as S  # noqa: N812
from tests.conftest import mutated

_BARS = (
    "202%|████████████████████| 405230/200000 [160:34:55<-4786:16, 1.35s/it]",
    "Epoch 1:  45%|████▌     | 450/1000 [01:02<01:10,  7.80it/s, loss=1.23]",
    "45%|███| 450/1000 [01:02<?, ?it/s]",
    "120%|██████████| 1200/1000 [20:00<-3:20, 1.00s/it, loss=<-1]",
)
_ALPHABET = " |[]<>-,:0123456789/%?.sit\u0663\u00e9\r"


def _segments(seed: int, n: int = 6000) -> list[str]:
    rnd = random.Random(seed)
    return [mutated(rnd, rnd.choice(_BARS), _ALPHABET, edits=2, span=2) for _ in range(n)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_tqdm_lane_as_the_regex(seed: int) -> None:
    segs = _segments(seed)
    assert len(segs) >= S._LANE_MIN
    seg = pl.DataFrame(
        {"line": range(len(segs)), "seg": [0] * len(segs), "text": segs},
        schema={"line": pl.Int64, "seg": pl.Int64, "text": pl.String},
    )
    got = S._tqdm_match(seg)
    want = S._match(seg, g.TQDM_RE, pl.col("text").str.contains("%|", literal=True))
    want = want.with_columns(m=pl.struct(*(pl.col("m").struct.field(f) for f in S._TQDM_FIELDS.to_schema())))
    assert got.schema == want.schema
    assert got.equals(want, null_equal=True)
    # (the lane takes the bars past their total; a digit in the description sends a bar to the regex)
    assert pl.Series(_BARS).str.contains(S._TQDM_CANON).to_list() == [True, False, True, True]
