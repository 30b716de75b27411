"""`nccl._envelopes` (a few printable-ASCII lines split in Python) gives what `envelope_struct` gives."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import nccl
from parsers._common import envelope_struct

PIECES = [
    "3: ", " 12: ", "\t7: ", "99999999999: ", "2147483647: ", "2147483648: ", "0:", "3:",
    "[1,5]<stdout>:", "[1,5]<stderr>: ", "[1,5]<stdout>:\t", "[1,99999999999]<stdout>: ",
    "stdout: ", "stderr F ", "stdout P ",
    "(RayWorker pid=123) ", "(w pid=99999999999999999999, ip=10.0.0.1) ", "(w pid=1, ip=1.2) ",
    "[default0]:", "[default3]: ", "[rank3]:", "[rank12]: ", "[gpu-a01:3]", "[gpu-a01.x:3] ", "[3host:1]",
    "[rank: 4] ", "[rank: x] ",
    "node7: ", "10.0.0.7: ", "gpu-a01.cluster: ", "RuntimeError: ", "a1: ", "1.2.3: ",
    "gpu-a01:2101:2101 [0] NCCL INFO x", "NCCL WARN y", "", " ", "  ", "x", ": ", "[", "]", "(", ")",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(st.sampled_from(PIECES), max_size=5).map("".join), min_size=1, max_size=12))
def test_python_envelopes_equal_envelope_struct(lines: list[str]) -> None:
    col = pl.Series("t", lines, dtype=pl.String)
    got = nccl._envelopes(col)
    want = pl.select(_env=envelope_struct(pl.lit(col))).to_series()
    assert got.dtype == want.dtype
    assert got.to_list() == want.to_list()


def test_unsafe_or_many_lines_take_envelope_struct() -> None:
    for lines in (["3: é"], ["3: x"] * (nccl._PY_ENVELOPE_ROWS + 1), ["3: \x1c"]):
        col = pl.Series("t", lines, dtype=pl.String)
        want = pl.select(_env=envelope_struct(pl.lit(col))).to_series()
        assert nccl._envelopes(col).to_list() == want.to_list()
