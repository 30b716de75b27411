"""`_mixed._family` works out what is read with the candidate lines on a few lines (`_sparse_reach` over
`_windows`, `_candidate_reach`): the same lines as the dense closure `_reach` over every line (below, as
`_family` worked it out before), on random inputs."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import _mixed

# per line: (start, carry); carry None = a null line (its length unknown)
CARRY = st.sampled_from([True, True, True, False, None])
LINE = st.tuples(st.booleans(), CARRY)
START_RARE = st.tuples(st.sampled_from([False] * 6 + [True]), CARRY)


def _reach(start: pl.Expr, carry: pl.Expr, limit: int | None = None) -> tuple[pl.Expr, pl.Expr]:
    """The closure over every line, as `_family` worked it out before `_sparse_reach`: booleans (a `start`
    line or a line after one in `x[j] = start[j] or (x[j-1] and carry[j-1])`, at most `limit` lines after
    its start; the lines where that limit cut the closure short)."""
    i = pl.int_range(pl.len(), dtype=pl.Int64)
    last = pl.when(start).then(i).forward_fill()
    run = pl.when(~carry.shift(1, fill_value=False)).then(i).forward_fill()
    inside = (last >= run).fill_null(False)
    if limit is None:
        return inside, pl.lit(False)
    return inside & (i - last <= limit), inside & (i - last == limit) & carry


def _dense(start: list[bool], carry: list[bool | None], limit: int | None) -> tuple[list[int], list[int]]:
    inside, cut = _reach(pl.col("start"), pl.col("carry"), limit)
    f = pl.DataFrame({"start": start, "carry": carry}, schema={"start": pl.Boolean, "carry": pl.Boolean})
    f = f.select(k=inside, cut=cut)
    return f.get_column("k").arg_true().to_list(), f.get_column("cut").arg_true().to_list()


def _sparse(
    pos: pl.Series, start: list[bool], carry: list[bool | None], limit: int | None
) -> tuple[list[int], list[int]]:
    s = pl.Series(start, dtype=pl.Boolean).gather(pos)
    c = pl.Series(carry, dtype=pl.Boolean).gather(pos)
    got, cut = _mixed._sparse_reach(pos, s, c, limit)
    return got.to_list(), cut.to_list()


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.lists(LINE, min_size=1, max_size=120), st.lists(START_RARE, min_size=1, max_size=200)),
       st.integers(0, 20))
def test_sparse_reach_over_windows_equals_the_dense_closure(lines: list, limit: int) -> None:
    """A closure with a limit (wrap heads, torchrun blocks): worked out over the windows after the starts."""
    start = [s for s, _ in lines]
    carry = [c for _, c in lines]
    starts = pl.Series([i for i, s in enumerate(start) if s], dtype=pl.Int64)
    pos = _mixed._windows(starts, len(lines), limit)
    assert pos.to_list() == sorted(set(pos.to_list()))
    assert _sparse(pos, start, carry, limit) == _dense(start, carry, limit)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), min_size=1, max_size=150))
def test_sparse_reach_around_candidates_equals_the_dense_closure(lines: list) -> None:
    """A closure without a limit whose starting and carrying lines are all candidates (tracebacks): worked out
    over the candidates."""
    start = [s for s, _, _ in lines]
    carry = [c for _, c, _ in lines]
    cand = [s or c or x for s, c, x in lines]
    at = pl.Series([i for i, x in enumerate(cand) if x], dtype=pl.Int64)
    got = _mixed._candidate_reach(at, pl.Series(start).gather(at), pl.Series(carry).gather(at))
    assert sorted(set(got.to_list()) - {len(lines)}) == _dense(start, carry, None)[0]


@given(st.lists(st.booleans(), min_size=1, max_size=100))
def test_a_quote_closure_is_its_heads_and_the_line_after(le: list[bool]) -> None:
    """`_reach(le, le)` (`Last error:` quotes), which `_family` takes as the heads and the line after each."""
    at = [i for i, x in enumerate(le) if x]
    want = sorted({j for i in at for j in (i, i + 1) if j < len(le)})
    assert _dense(le, le, None)[0] == want
