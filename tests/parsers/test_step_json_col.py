"""`step_log._json_col` (one encoding per pattern of set fields) gives `_json_obj`'s text (one per field)."""

from __future__ import annotations

import random

import polars as pl

from parsers import step_log


def _frame(rnd: random.Random, n: int) -> pl.DataFrame:
    def maybe(v: object) -> object:
        return None if rnd.random() < 0.3 else v

    return pl.DataFrame(
        {
            "a": [maybe(rnd.choice([1.5, -0.0, 1e300, float("nan"), float("inf"), 3.0])) for _ in range(n)],
            "b": [maybe(rnd.choice(["x", 'q"uote', "ünï", ""])) for _ in range(n)],
            "c": [maybe([rnd.randint(0, 9) for _ in range(rnd.randint(0, 3))]) for _ in range(n)],
            "d": [maybe({"value": maybe(2.5), "unit": maybe("ms"), "rank": maybe(3)}) for _ in range(n)],
            "e": [maybe(rnd.randint(-5, 5)) for _ in range(n)],
        },
        schema={
            "a": pl.Float64,
            "b": pl.String,
            "c": pl.List(pl.Int32),
            "d": pl.Struct({"value": pl.Float64, "unit": pl.String, "rank": pl.Int32}),
            "e": pl.Int64,
        },
    )


def test_json_col_is_json_obj() -> None:
    rnd = random.Random(3)
    for n in (0, 1, 2, 7, 50, 300):
        df = _frame(rnd, n)
        fields = {
            "e": pl.col("e"),
            "a": pl.col("a"),
            "d": pl.col("d"),
            "b": pl.col("b"),
            "c": pl.col("c"),
            "r": pl.when(pl.col("e") > 0).then(pl.lit("slowest")).otherwise(pl.lit("fastest")),
            "s": pl.col("d").struct.field("rank"),
        }
        ref = df.select(step_log._json_obj(**fields)).to_series()
        got = df.select(step_log._json_col(df, **fields)).to_series()
        assert got.dtype == pl.String and ref.cast(pl.String).equals(got, null_equal=True), n
