"""`nccl.join_wrapped` on a big frame reads its not-understood lines and the lines before them only
(`_join_sparse`): the same frame as the code before (kept verbatim below as `_join_wrapped_ref`), on generated
frames (hypothesis: wraps, runs, blanks, nulls, own-start lines, known/unknown/null `known`), and the same parses
with `WRAP_SPARSE` off on the fixtures and real logs."""
# ruff: noqa: E501  (the reference is kept as it was)

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import _common, _mixed, nccl
from parsers import torch_distributed as td
from parsers.base import FileContext, lines_from_bytes
from parsers.nccl import _OWN_START, _WRAPPABLE, _wrap_width, arx
from tests.conftest import assert_same_result

FIX = Path(__file__).parent.parent / "fixtures"
REAL = Path("/work/shared/real-logs")
FILES = sorted(
    p
    for d in (FIX / "torch-distributed", FIX / "nccl", FIX / "step-log", REAL)
    if d.exists()
    for p in d.rglob("*")
    if p.is_file() and p.stat().st_size < 5_000_000
)


def _join_wrapped_ref(frame: pl.DataFrame, wrap_width: Callable[[], int | None] | None = None) -> pl.DataFrame:
    """Mark hard-wrapped continuation lines (`cont`) and append them to the body of the line they continue.

    A line is a continuation when no grammar knows it, it is not blank, it does not open like a record of
    its own (`[`, `(`, a date, a step line, a traceback), the previous line is at least 80 characters
    long, and the run it extends starts at a warning/error record (NCCL WARN, c10 E/F/W line): those are
    the records events come from, and INFO/COLL lines are never re-joined. Pieces are joined without a separator when
    the previous line has the file's wrap width (the most common length ≥ 80, seen ≥ 3 times), else with
    one space (soft wrap at a word). `wrap_width`, when given, says the wrap width (of the whole file when
    `frame` holds some of its lines only); it is asked only when some line is joined.
    """
    blank = pl.col("body").fill_null("").str.strip_chars().str.len_bytes() == 0
    plen = pl.col("body").fill_null("").str.len_chars().shift(1)
    own_start = pl.col("body").fill_null("").str.contains(arx(_OWN_START))
    cand = ~pl.col("known") & (plen >= 80) & ~blank & ~own_start
    # only warning/error records are re-joined (NCCL WARN, c10 E/F/W, the 1.x "[E ...]" form)
    head = pl.col("known") & pl.col("body").fill_null("").str.contains(arx(_WRAPPABLE))
    f = frame.with_columns(_cand=cand.fill_null(False))
    if not f.get_column("_cand").any():
        return f.drop("_cand").with_columns(cont=pl.lit(False))
    # a run is a non-candidate line (its head) and the candidates after it: the head's `_WRAPPABLE` test
    # carried down the run (a forward fill, not a window over ~every line); the candidates before the first
    # head (run 0) continue nothing
    cand_c = pl.col("_cand")
    f = f.with_columns(
        _run=(~cand_c).cast(pl.Int32).cum_sum(),
        cont=cand_c & pl.when(~cand_c).then(head.fill_null(False)).forward_fill().fill_null(False),
    )
    if not f.get_column("cont").any():
        return f.drop("_cand", "_run")
    ascii = bool(_common._ascii)
    width = wrap_width() if wrap_width is not None else _wrap_width(frame.get_column("text"), ascii)
    sep = (
        pl.when(plen == width).then(pl.lit("")).otherwise(pl.lit(" "))
        if width is not None
        else pl.lit(" ")
    )
    f = f.with_columns(_piece=pl.when(pl.col("cont")).then(sep + pl.col("body")))
    tails = f.filter(pl.col("cont")).group_by("_run").agg(_tail=pl.col("_piece").str.join(""))
    f = f.join(tails, on="_run", how="left", maintain_order="left")
    # (a run with a tail has a head: its first line, the one non-candidate of the run)
    first = ~pl.col("_cand")
    f = f.with_columns(
        body=pl.when(first & pl.col("_tail").is_not_null()).then(pl.col("body") + pl.col("_tail")).otherwise(pl.col("body")),
    )
    return f.drop("_cand", "_run", "_piece", "_tail")



BODIES = [
    "gpu-a:1:2 [0] NCCL WARN NET/IB : Got async event : port error " + "x" * 40,
    "[E1206 12:00:00.123 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout x" + "y" * 20,
    "W1206 12:00:00.123 init.cpp:3] short",
    "continued text of a wrapped warning that is long enough to be followed by one more piece of it, yes",
    "tail",
    "  File \"/x.py\", line 3, in f",
    "[not a continuation]",
    "2024-01-01 12:00:00 x",
    "iteration 5",
    "",
    "   ",
    None,
    "x" * 80,
    "y" * 81,
    "caf\u00e9 " * 12,
]


@st.composite
def frames(draw: st.DrawFn) -> pl.DataFrame:
    n = draw(st.integers(1, 40))
    bodies = draw(st.lists(st.sampled_from(BODIES), min_size=n, max_size=n))
    known = draw(st.lists(st.sampled_from([True, False, False, None]), min_size=n, max_size=n))
    return pl.DataFrame(
        {"line": list(range(1, n + 1)), "text": [b or "" for b in bodies], "body": bodies, "known": known},
        schema={"line": pl.Int64, "text": pl.String, "body": pl.String, "known": pl.Boolean},
    )


@settings(max_examples=400, deadline=None)
@given(frames(), st.sampled_from([None, 80, 81, 100]), st.booleans())
def test_sparse_join_equals_reference(frame: pl.DataFrame, width: int | None, given_width: bool) -> None:
    ww: Callable[[], int | None] | None = (lambda: width) if given_width else None
    ascii = all(t.isascii() for t in frame.get_column("text").to_list())
    saved = nccl._SMALL
    nccl._SMALL = 0  # (every frame is big enough for the sparse path)
    try:
        with _common.ascii_scope(ascii):
            got = nccl.join_wrapped(frame, ww)
            want = _join_wrapped_ref(frame, ww)
    finally:
        nccl._SMALL = saved
    assert got.schema == want.schema
    assert got.equals(want, null_equal=True), (got, want)


def _parses(lines: pl.Series) -> list:
    ctx = FileContext(path="x/train.log", node="n", first_line=5)
    return [nccl.parse(lines, ctx), td.parse(lines, ctx), _mixed._both(lines, ctx)]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_sparse_join_same_parses_on_files(path: Path) -> None:
    lines = lines_from_bytes(path.read_bytes())
    saved = nccl._SMALL
    nccl._SMALL = 0
    try:
        got = _parses(lines)
        nccl.WRAP_SPARSE = False
        want = _parses(lines)
    finally:
        nccl.WRAP_SPARSE, nccl._SMALL = True, saved
    for a, b in zip(got, want, strict=True):
        assert_same_result(a, b)
