"""The schema module's quick layout checks give what the Schema-object comparisons they replace give."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.errors import SchemaError
from forensics.schema import TABLES, frame_dtypes, matches, same_dtypes, validate

_DTYPES = [
    pl.String, pl.Int64, pl.Int32, pl.Float64, pl.Boolean, pl.Null, pl.UInt32, pl.Datetime("us", "UTC"),
    pl.Datetime("us"), pl.Datetime("ns", "UTC"), pl.Date, pl.List(pl.Int64), pl.List(pl.String), pl.Categorical,
    pl.Struct({"a": pl.Int64}), pl.Duration("us"),
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(TABLES)), st.data())
def test_matches_and_validate_agree_with_schema_comparisons(table: str, data: st.DataObject) -> None:
    schema = TABLES[table]
    cols = dict(schema)
    for name in data.draw(st.lists(st.sampled_from(list(cols)), max_size=3, unique=True)):
        cols[name] = data.draw(st.sampled_from(_DTYPES))  # (often the same dtype again)
    names = list(cols)
    if data.draw(st.booleans()):
        names = data.draw(st.permutations(names))
    names = names[: len(names) - data.draw(st.integers(0, 2))]
    df = pl.DataFrame(schema={n: cols[n] for n in names})
    have = frame_dtypes(df)
    assert have == dict(df.schema)
    assert matches(table, have) == (list(df.schema.items()) == list(schema.items()))
    assert same_dtypes(df.dtypes, list(schema.values())) == (df.dtypes == list(schema.values()))
    try:
        got = validate(df, table)
    except SchemaError:
        ok = False
    else:
        ok = True
        assert got.columns == list(schema)
    # validate accepts exactly the frames of the table's columns and dtypes, in any order (none is required to
    # hold a value in an empty frame)
    assert ok == (set(df.schema) == set(schema) and all(df.schema[c] == schema[c] for c in schema))
