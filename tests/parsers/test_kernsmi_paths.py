"""Round 8 (kernsmi) fast paths of the nvidia-smi dmon / --query-gpu CSV parsers equal the code they replace.

The replaced code is kept here verbatim (`_old_*`) as the reference; inputs are random frames (hypothesis)
and the edges of each shortcut.
"""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import _nvsmi_fields as fields


def _old_gpu_keys(df: pl.DataFrame, key: pl.Expr) -> list[pl.Expr]:
    nodes = df.get_column("node").unique()
    if nodes.null_count() or nodes.str.contains("|", literal=True).any():
        # `a|b` + `c` reads as `a` + `b|c`: keep the string
        return [pl.concat_str([pl.col("node"), key], separator="|")]
    n = df.height
    nulls = {c: df.get_column(c).null_count() for c in ("ident", "gpu_bus_id")}
    if nulls["ident"] == 0:
        return [pl.col("node"), pl.col("ident")]
    if nulls["ident"] == n and nulls["gpu_bus_id"] == 0:
        return [pl.col("node"), pl.col("gpu_bus_id")]
    if nulls["ident"] == n and nulls["gpu_bus_id"] == n:
        return [pl.col("node"), pl.col("gpu_index")]  # a null index is the '?' group (no index reads '?')
    return [pl.col("node"), key]


_KEY = pl.coalesce(pl.col("ident"), pl.col("gpu_bus_id"), pl.col("gpu_index").cast(pl.String), pl.lit("?"))


def _prev(df: pl.DataFrame, keys: list[pl.Expr], by: str | None) -> list:
    d = df.with_columns(_i=pl.int_range(pl.len(), dtype=pl.Int64))
    return d.select(pl.col("_i").shift(1).over([*keys, pl.col(by)] if by else keys)).to_series().to_list()


_nodes = st.sampled_from(["n1", "n2", "a|b", "", None])
_ids = st.sampled_from(["x", "y", "", None])
_idx = st.sampled_from([0, 1, 2, None])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(_nodes, _ids, _ids, _idx, st.integers(0, 1)), max_size=30),
    st.booleans(),
    st.integers(0, 3),
)
def test_gpu_keys_group_as_before(rows: list, one_node: bool, fill: int) -> None:
    """The previous sample of each row's GPU (the window `_transitions` computes) is the same with the keys
    of `_gpu_keys` as with the old keys (which always held the node)."""
    if one_node:
        rows = [("n1", *r[1:]) for r in rows]
    if fill & 1:
        rows = [(r[0], r[1] if r[1] is not None else "z", *r[2:]) for r in rows]
    if fill & 2:
        rows = [(r[0], None, *r[2:]) for r in rows]
    df = pl.DataFrame(
        rows,
        schema={
            "node": pl.String, "ident": pl.String, "gpu_bus_id": pl.String,
            "gpu_index": pl.Int32, "_f": pl.Int64,
        },
        orient="row",
    )
    for by in (None, "_f"):
        assert _prev(df, fields._gpu_keys(df, _KEY), by) == _prev(df, _old_gpu_keys(df, _KEY), by)
