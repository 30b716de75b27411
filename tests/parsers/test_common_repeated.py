"""`parsers._common.repeated`: the parsers' constant columns, made without a query, are `pl.repeat`'s."""

from __future__ import annotations

import polars as pl
import pytest

from forensics.schema import UTC_US
from parsers._common import repeated


@pytest.mark.parametrize(
    ("value", "dtype"),
    [
        (None, pl.Float64), (None, pl.String), (None, UTC_US), (None, pl.Int32),
        (False, pl.Boolean), (True, pl.Boolean), (0, pl.Int8), (0, pl.UInt32), ("|", pl.String),
        ("nvidia-smi-q", pl.Categorical),
    ],
)  # fmt: skip
@pytest.mark.parametrize("n", [0, 1, 7, 70_000])
def test_repeated_is_pl_repeat(value: object, dtype: pl.DataType, n: int) -> None:
    want = pl.repeat(value, n, dtype=dtype, eager=True)
    got = repeated(value, n, dtype)
    assert got.name == want.name and got.dtype == want.dtype and got.equals(want)
    if n:
        # a column of its own: written in place without touching another
        other = repeated(value, n, dtype)
        got.scatter([n - 1], None)
        assert other.equals(want) and got[n - 1] is None
