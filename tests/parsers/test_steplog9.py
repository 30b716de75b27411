# ruff: noqa: N806, E501  (the references verbatim)
"""steplog9's changes to step_log give what the code they replace gives (the references kept verbatim, `_ref_*`).

`_encode_by_null_pattern`: one pattern of set fields over every row is encoded as the column (was a scatter into
a null column), compared on random frames of one or more patterns, nulls, nested lists, non-finite floats.
"""

from __future__ import annotations

import math
import random

import polars as pl
import pytest

from parsers import step_log as S  # noqa: N812

_nulls = S._nulls


# ----------------------------------------------------------------------------- references (verbatim)


def _ref_encode_by_null_pattern(rows: pl.DataFrame, enc: dict[str, pl.Expr]) -> pl.DataFrame:
    names = list(enc)
    narrow = rows.select(**enc)
    code = narrow.select(
        pl.sum_horizontal(*(pl.col(n).is_not_null().cast(pl.Int64) * (1 << i) for i, n in enumerate(names)))
    ).to_series()
    out = _nulls("_enc", rows.height, pl.String)
    for c in code.unique().to_list():
        if not c:
            continue
        idx = (code == c).arg_true()
        set_fields = [n for i, n in enumerate(names) if c >> i & 1]
        part = narrow.select(set_fields)[idx] if idx.len() < rows.height else narrow.select(set_fields)
        out = out.scatter(idx, part.select(pl.struct(*set_fields).struct.json_encode()).to_series())
    return pl.DataFrame({"_enc": out})


# ----------------------------------------------------------------------------- tests


def _val(rnd: random.Random, kind: str, p_null: float) -> object:
    if rnd.random() < p_null:
        return None
    if kind == "f":
        return rnd.choice([rnd.uniform(-1e6, 1e6), rnd.random(), 0.0, 1e21, math.inf, math.nan, 3.0])
    if kind == "i":
        return rnd.randint(-(10**12), 10**12)
    if kind == "s":
        return rnd.choice(["a", 'q"u', "null", "x\\y", "é", ""])
    return [{"name": rnd.choice(["fwd", "bwd", None]), "ms": _val(rnd, "f", 0.3)} for _ in range(rnd.randint(0, 3))]


@pytest.mark.parametrize("seed", range(30))
def test_encode_by_null_pattern(seed: int) -> None:
    rnd = random.Random(seed)
    n = rnd.choice([0, 1, 5, 200, S._LANE_MIN + 3])
    kinds = [rnd.choice("fisl") for _ in range(rnd.randint(1, 5))]
    # per field: never null, always null, or sometimes (one pattern or several)
    p = [rnd.choice([0.0, 0.0, 1.0, 0.2]) for _ in kinds]
    data = {f"c{j}": [_val(rnd, k, p[j]) for _ in range(n)] for j, k in enumerate(kinds)}
    schema = {
        f"c{j}": {"f": pl.Float64, "i": pl.Int64, "s": pl.String, "l": pl.List(pl.Struct({"name": pl.String, "ms": pl.Float64}))}[k]
        for j, k in enumerate(kinds)
    }
    rows = pl.DataFrame(data, schema=schema)
    enc = {c: pl.col(c) for c in rows.columns}
    if rnd.random() < 0.3:  # (an expression field, as `_step_detail` gives for the timers)
        enc[rows.columns[0]] = pl.when(pl.col(rows.columns[0]).is_not_null()).then(pl.col(rows.columns[0]))
    got = S._encode_by_null_pattern(rows, enc)
    ref = _ref_encode_by_null_pattern(rows, enc)
    assert got.schema == ref.schema
    assert got.equals(ref, null_equal=True)
