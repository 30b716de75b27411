"""`nccl._envelopes` on many lines (each distinct envelope run, `nccl._ENV_KEY`, split in Python and mapped
back to its lines) gives what `envelope_struct` (one polars pass per envelope and round) gives."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import _common, nccl
from parsers._common import envelope_struct

PIECES = [
    "3: ", " 12: ", "\t7: ", "99999999999: ", "2147483647: ", "2147483648: ", "0:", "3:", "  ", " 4:",
    "[1,5]<stdout>:", "[1,5]<stderr>: ", "[1,5]<stdout>:\t", "[1,99999999999]<stdout>: ", "stdout: ",
    "stderr F ", "stdout P ", "stdout F", "stderr:",
    "(RayWorker pid=123) ", "(w pid=99999999999999999999, ip=10.0.0.1) ", "(w pid=1, ip=1.2) ", "(w pid=1)",
    "[default0]:", "[default3]: ", "[default3]:  ", "[rank3]:", "[rank12]: ", "[gpu-a01:3]", "[gpu-a01.x:3] ",
    "[3host:1]", "[rank: 4] ", "[rank: x] ", "[rank:4] ", "[rank5]", "[default]:",
    "node7: ", "10.0.0.7: ", "10.0.0.7:", "gpu-a01.cluster: ", "RuntimeError: ", "a1: ", "1.2.3: ",
    "1.2.3.4.5: ",
    "gpu-a01:2101:2101 [0] NCCL INFO x", "NCCL WARN y", "", " ", "x", ": ", "[", "]", "(", ")", "\t", "1",
    "12", "a", ":", "stdout", "[rank", "[default1", "pid=3) ",
]

_line = st.lists(st.sampled_from(PIECES), max_size=7).map("".join)


def _want(col: pl.Series) -> list[object]:
    return pl.select(_env=envelope_struct(pl.lit(col))).to_series().to_list()


def _check(lines: list[str], ascii: bool) -> None:
    col = pl.Series("t", lines, dtype=pl.String)
    with _common.ascii_scope(ascii):
        got = nccl._envelopes(col)
        want = pl.select(_env=envelope_struct(pl.lit(col))).to_series()
    assert got.dtype == want.dtype
    assert got.name == want.name
    assert got.to_list() == want.to_list()


@settings(max_examples=300, deadline=None)
@given(st.lists(_line, min_size=1, max_size=40), st.integers(nccl._PY_ENVELOPE_ROWS + 1, 700), st.booleans())
def test_keyed_envelopes_equal_envelope_struct(lines: list[str], n: int, ascii: bool) -> None:
    # many lines (past the per-line Python path), few distinct ones
    _check([lines[i % len(lines)] for i in range(n)], ascii)


@settings(max_examples=50, deadline=None)
@given(st.lists(_line, min_size=nccl._PY_ENVELOPE_ROWS + 1, max_size=400, unique=True))
def test_keyed_envelopes_distinct_lines(lines: list[str]) -> None:
    _check(lines, True)


def test_keyed_path_taken_and_fallbacks() -> None:
    many = ["3: [rank1]: x", "[default0]:[rank5]:y", "node7: 4: z", "", "(w pid=1) a"] * 100
    col = pl.Series("t", many, dtype=pl.String)
    assert nccl._keyed_envelopes(col) is not None
    # non-ASCII in a key, a null line, too many distinct keys: the polars passes
    for lines in (
        ["3: x"] * 300 + ["node\u00e97: y"],
        ["3: x"] * 300 + [None],
        [f"{i}: x" for i in range(nccl._PY_ENVELOPE_KEYS + 1)],
    ):
        col = pl.Series("t", lines, dtype=pl.String)
        assert nccl._keyed_envelopes(col) is None
        if None not in lines:
            assert nccl._envelopes(col).to_list() == _want(col)
    # non-ASCII after the envelopes is fine
    lines = ["3: caf\u00e9"] * 300 + ["[rank2]: \u00fc"]
    col = pl.Series("t", lines, dtype=pl.String)
    assert nccl._keyed_envelopes(col) is not None
    assert nccl._envelopes(col).to_list() == _want(col)


def test_stacks_past_three_rounds() -> None:
    # the key runs on past what three rounds strip; the split of the key stops where the rounds do
    lines = ["[rank1]:[rank2]:[rank3]:[rank4]: x", "3: 4: 5: 6: y"]
    lines += ["[default0]:3: [rank1]:node7: [rank: 2] z1"]
    lines *= 120
    _check(lines, True)
    _check(lines, False)
